//! The real-thread sections of the report, one function each.

use std::path::Path;

use super::plan::{Ctx, Plan};
use crate::bench::{self, BenchKind, BenchParams};
use crate::exec::PcpSample;
use crate::report::plot::{self, Chart, Series};
use crate::report::section::Section;
use crate::report::{normalise, ReportError, BENCH_COLUMNS};
use crate::Row;

pub(super) fn throughput(
    cx: &mut Ctx,
    plan: &Plan,
    out: &Path,
) -> Result<Vec<Section>, ReportError> {
    let maxc = *plan.cpus.last().expect("at least one CPU");
    let mut rows = Vec::new();
    let mut series = Vec::new();
    for &alloc in &plan.peers {
        let mut pts = Vec::new();
        for &c in &plan.cpus {
            let r = cx.run("page_fault1", &plan.pf1, alloc, "linux-6.12", c, 0)?;
            pts.push((f64::from(c), r.score));
            rows.push(r.row());
        }
        series.push(Series {
            name: match alloc {
                "pagealloc" => "pagealloc linux-6.12".to_owned(),
                "kernel" => "kernel (mmap + page faults)".to_owned(),
                other => other.to_owned(),
            },
            points: pts,
            dashed: false,
        });
    }
    let chart = Chart {
        title: format!(
            "page_fault1: throughput vs CPUs ({} CPU{} usable)",
            maxc,
            if maxc == 1 { "" } else { "s" }
        ),
        x_label: "CPUs (threads)".into(),
        y_label: "pages/s".into(),
        x_ranked: false,
        log_y: true,
        series,
    };
    plot::write(&chart, &out.join("throughput_vs_cpus"))?;
    let base = cx.run("page_fault1", &plan.pf1, "pagealloc", "base", maxc, 0)?;
    let mut cmp = vec![base.row()];
    cmp.extend(rows.iter().filter(|r| r.cpus == Some(maxc)).cloned());
    normalise(&mut cmp);
    let peers_note = "The peers are not all the same kind of thing. `buddy_system_allocator` \
        and `pool` hand out frame numbers from a range, as pagealloc does (pool: a \
        lock-free queue of order-0 frames, the floor of what a page cache can cost); \
        `mimalloc`, `jemalloc` and `system` are user-space heaps asked for page-sized, \
        page-aligned blocks; `kernel` is this machine's kernel, each block an `mmap` whose \
        pages are faulted in (a page fault, zeroing and page-table work per page) and \
        `munmap`ed: it is the reference for the shape of scaling, not a competitor at the \
        same cost, and it has no zone-lock or PCP columns (only pagealloc reports them).";
    Ok(vec![
        Section {
            id: "page_fault1_compare".into(),
            title: format!("page_fault1 on {maxc} CPUs: configs and peers"),
            intro: format!(
                "Every CPU faults in and unmaps a region, touching each page (params: {}). \
                 Normalised to pagealloc `base` = 100 (score, free_high, alloc_zone, PCP \
                 pages). {peers_note}",
                show(&plan.pf1)
            ),
            after: crate::report::latency_markdown(&cmp),
            rows: cmp,
            columns: crate::report::report_columns(),
            ..Section::default()
        },
        Section {
            id: "throughput_vs_cpus".into(),
            title: "page_fault1: throughput vs CPUs".into(),
            intro: "Raw pages per second (log scale: the peers differ by orders of \
                    magnitude); pagealloc is `linux-6.12`. `alloc call avg ns` is the mean \
                    of every allocation call (PCP hits included), not a zone-lock trip."
                .into(),
            rows,
            columns: vec![
                "alloc",
                "config",
                "cpus",
                "score",
                "score_unit",
                "zone_lock_pct",
                "alloc_call_avg_ns",
            ],
            plots: vec!["throughput_vs_cpus.png".into()],
            ..Section::default()
        },
    ])
}

pub(super) fn series(cx: &mut Ctx, plan: &Plan) -> Result<Section, ReportError> {
    let cpus = *plan.cpus.last().expect("CPUs");
    let mut rows = Vec::new();
    for &p in &plan.presets {
        rows.push(
            cx.run("kbuild", &plan.kbuild, "pagealloc", p, cpus, 0)?
                .row(),
        );
    }
    normalise(&mut rows);
    let close = crate::report::published::kbuild_closeness(&rows);
    let after = format!(
        "Beside the published kbuild table ({}). Build time = 100 × makespan ÷ base \
         makespan. The published machine ran 112 CPUs, this one {cpus}: read the \
         directions of each step, not the magnitudes.\n\n{}\n{}.\n\n{}\n\n{}",
        crate::report::published::KBUILD_SOURCE,
        crate::report::published::kbuild_markdown(&rows),
        close.line(),
        kbuild_free_high_note(&rows),
        crate::report::latency_markdown(&rows)
    );
    Ok(Section {
        id: "kbuild_series".into(),
        title: format!("kbuild on {cpus} CPUs: the PCP series patch by patch"),
        intro: format!(
            "Short-lived tasks allocate, compute and free on exit (params: {}). Rows are \
             cumulative patch levels, as in the published kbuild table (below). score = \
             100 ÷ makespan in seconds (unit `100/s`), normalised to base = 100.",
            show(&plan.kbuild)
        ),
        rows,
        columns: crate::report::report_columns(),
        after,
        closeness: Some(format!(
            "kbuild on this host, {cpus} CPUs: {}",
            close.line()
        )),
        ..Section::default()
    })
}

/// Why linux-6.12 can drain more often on free_high than base on a few CPUs: the two
/// trigger on different things (docs/mechanisms.md, free_high).
fn kbuild_free_high_note(rows: &[Row]) -> String {
    let pick = |p: &str| {
        rows.iter()
            .find(|r| r.config.as_deref() == Some(p))
            .and_then(|r| r.free_high)
    };
    let line = match pick("linux-6.12") {
        Some(v) => format!("Here linux-6.12's free_high is {v:.0} % of base's. "),
        None => String::new(),
    };
    format!(
        "{line}free_high counts frees that forced a drain, and the rows trigger it on \
         different things (docs/mechanisms.md §3.3): base drains the whole list \
         at an order 1–3 free once an earlier drain has raised `free_factor`; from patch1 \
         on two consecutive order 1–3 frees are needed; from patch10 on (V3 9/9, \
         `free_count`) the flood of order-0 frees at a task's exit arms the trigger by \
         itself, where `free_factor` needed that flood to cause a drain first. A task exit \
         frees thousands of order-0 pages and then its order 1–3 slab pages, so from \
         patch10 on an exit with two or more slab pages drains, and can do so once per \
         further slab page, since each drain moves at most `batch << scale` pages and \
         leaves the rest, where base's one drain empties the list. The published table \
         shows the same rise (4.8 at patch9, 29.0 at patch10); with {} CPUs, where each \
         pageset sees many exits, it can pass base's count. alloc_zone and the zone lock \
         stay low because each such drain is bounded.",
        rows.first().and_then(|r| r.cpus).unwrap_or(0)
    )
}

pub(super) fn streams(cx: &mut Ctx, plan: &Plan) -> Result<Vec<Section>, ReportError> {
    let cpus = (*plan.cpus.last().expect("CPUs")).max(2);
    let mut out = Vec::new();
    for (name, ov) in [("netperf", &plan.netperf), ("lmbench", &plan.lmbench)] {
        let mut rows = Vec::new();
        for cfg in ["base", "linux-6.12"] {
            rows.push(cx.run(name, ov, "pagealloc", cfg, cpus, 0)?.row());
        }
        rows.push(cx.run(name, ov, "kernel", "linux-6.12", cpus, 0)?.row());
        normalise(&mut rows);
        let what = if name == "netperf" {
            "a 10 KB message as one order-2 block"
        } else {
            "a 64 KiB chunk as two order-3 blocks"
        };
        let score = rows.get(1).and_then(|r| r.score).unwrap_or(f64::NAN);
        // The allocator's share of the CPU time: a score difference between configs
        // larger than it cannot be the allocator's.
        let share: Vec<String> = rows
            .iter()
            .filter(|r| r.alloc == "pagealloc")
            .filter_map(|r| {
                let e = |k: &str| r.extra.get(k).copied();
                Some(format!(
                    "{} {:.1} %",
                    r.config.as_deref()?,
                    100.0 * e("alloc_free_s")? / e("cpu_time_s")?.max(1e-9)
                ))
            })
            .collect();
        out.push(Section {
            id: name.into(),
            title: format!("{name} on {cpus} CPUs"),
            intro: format!(
                "Senders allocate ({what}), receivers on another CPU copy it out and free \
                 it (params: {}). No published column: the series' {name} results are \
                 kept out of the project's reference as a held-out check \
                 (crates/pagealloc-lab/docs/published.md §3).",
                show(ov)
            ),
            after: format!(
                "**Reading this table.** linux-6.12 scores {score:.1} % of base here, while \
                 pagealloc's allocations and frees took about {} of the CPU time (time \
                 in allocator calls ÷ CPU time): a difference between the configs larger \
                 than that is not the allocator's work but the machine's (scheduling of the \
                 pairs under the load, see above); repeat the section to see it move. idle % \
                 is the part of each CPU's window spent off the CPU: a receiver waiting \
                 for a message or a sender for buffer space, *and* a thread that was \
                 runnable while other processes held this machine's CPUs (see the load \
                 average above). With {cpus} CPUs each sender–receiver pair hands every \
                 block from one pageset to the other: the receiver's frees of order {} \
                 blocks fill its list until free_high (6.12: after a batch of frees) or \
                 high drains it, and the sender refills from the zone. The kernel row \
                 (real `mmap` and page faults) is the same workload's cost on this \
                 machine's kernel.\n\n{}",
                share.join(", "),
                if name == "netperf" { 2 } else { 3 },
                crate::report::latency_markdown(&rows)
            ),
            rows,
            columns: crate::report::report_columns(),
            ..Section::default()
        });
    }
    Ok(out)
}

pub(super) fn batch_sweep(cx: &mut Ctx, plan: &Plan, out: &Path) -> Result<Section, ReportError> {
    let cpus = *plan.cpus.last().expect("CPUs");
    let mut rows = Vec::new();
    let mut lat: [Vec<(f64, f64)>; 4] = Default::default();
    for &b in &plan.batches {
        let cfg = format!(
            "linux-6.12,fixed_batch={b},fixed_high={},batch_scale_max=0",
            2 * b
        );
        let r = cx.run("batch_sweep", &plan.sweep, "pagealloc", &cfg, cpus, 0)?;
        let mut row = r.row();
        row.extra.insert("batch".into(), f64::from(b));
        let e = |k: &str| row.extra.get(k).copied();
        for (i, v) in [
            e("alloc_lat_p50_us"),
            e("alloc_lat_p99_us"),
            e("free_lat_p50_us"),
            e("free_lat_p99_us"),
        ]
        .into_iter()
        .enumerate()
        {
            if let Some(v) = v {
                lat[i].push((f64::from(b), v));
            }
        }
        rows.push(row);
    }
    let names = [
        "alloc trip p50",
        "alloc trip p99",
        "free trip p50",
        "free trip p99",
    ];
    let chart = Chart {
        title: format!("batch sweep: one zone-lock trip vs batch ({cpus} CPUs, high = 2 × batch)"),
        x_label: "batch (pages)".into(),
        y_label: "µs".into(),
        x_ranked: true,
        log_y: true,
        series: names
            .iter()
            .zip(lat)
            .map(|(n, p)| Series {
                name: (*n).to_owned(),
                dashed: n.ends_with("p99"),
                points: p,
            })
            .collect(),
    };
    plot::write(&chart, &out.join("latency_vs_batch"))?;
    let against = "spr-2s-224";
    let close = crate::report::published::sweep_line(&rows, Some(against));
    Ok(Section {
        id: "batch_sweep".into(),
        title: "Batch sweep".into(),
        intro: format!(
            "page_fault1 with every CPU's high fixed at 2 × batch and batch scaling off \
             (`batch_scale_max=0`); one zone-lock trip is a refill (alloc) or a drain \
             (free). Params: {}. The plot shows p50 and p99 (dashed) of the trips: the \
             averages are in the tables below, with the tail that lifts them.",
            show(&plan.sweep)
        ),
        after: format!(
            "Beside the published sweep on Sapphire Rapids ({}). This host is another \
             machine and times trips with its own clock, not with function_graph (whose \
             own cost is inside every published figure): read how each latency grows with \
             the batch.\n\n{}\n{close}.\n\n{}",
            crate::report::published::SWEEP_SOURCE,
            crate::report::published::sweep_markdown(&rows, Some(against)),
            crate::report::latency_markdown(&rows)
        ),
        closeness: Some(format!("batch sweep on this host vs {against}: {close}")),
        rows,
        columns: vec!["batch", "score", "score_unit", "zone_lock_pct"],
        plots: vec!["latency_vs_batch.png".into()],
        ..Section::default()
    })
}

pub(super) fn timeline(cx: &mut Ctx, plan: &Plan, out: &Path) -> Result<Section, ReportError> {
    let cpus = *plan.cpus.last().expect("CPUs");
    let mut rows = Vec::new();
    let mut series = Vec::new();
    let mut samples = serde_json::Map::new();
    let mut build_end_s = Vec::new();
    let mut lasts = Vec::new();
    for cfg in ["base", "linux-6.12"] {
        let c = format!("{cfg},tick_interval_ms=100");
        let r = cx.run(
            "kbuild",
            &plan.kbuild,
            "pagealloc",
            &c,
            cpus,
            plan.linger_ms,
        )?;
        let pts = |f: fn(&PcpSample) -> f64| -> Vec<(f64, f64)> {
            r.pcp_samples
                .iter()
                .map(|s| (s.t_ms as f64 / 1e3, f(s)))
                .collect()
        };
        let dashed = cfg == "base";
        series.push(Series {
            name: format!("{cfg}: CPU 0 high"),
            points: pts(|s| f64::from(s.cpu0_high)),
            dashed,
        });
        series.push(Series {
            name: format!("{cfg}: CPU 0 count"),
            points: pts(|s| f64::from(s.cpu0_count)),
            dashed,
        });
        series.push(Series {
            name: format!("{cfg}: all CPUs' count"),
            points: pts(|s| s.total_pages as f64),
            dashed,
        });
        if cfg == "linux-6.12" {
            series.push(Series {
                name: "linux-6.12: CPU 0 high_min".into(),
                points: pts(|s| f64::from(s.cpu0_high_min)),
                dashed: true,
            });
        }
        samples.insert(
            cfg.into(),
            serde_json::json!(r
                .pcp_samples
                .iter()
                .map(|s| serde_json::json!({
                    "t_s": s.t_ms as f64 / 1e3,
                    "cpu0_high": s.cpu0_high,
                    "cpu0_count": s.cpu0_count,
                    "cpu0_high_min": s.cpu0_high_min,
                    "all_cpus_count": s.total_pages,
                }))
                .collect::<Vec<_>>()),
        );
        let mut row = r.row();
        if let Some(last) = r.pcp_samples.last() {
            row.extra
                .insert("cpu0_high_last".into(), f64::from(last.cpu0_high));
            row.extra
                .insert("cpu0_count_last".into(), f64::from(last.cpu0_count));
            row.extra
                .insert("all_cpus_count_last".into(), last.total_pages as f64);
        }
        build_end_s.push((cfg, r.wall_s));
        if let Some(last) = r.pcp_samples.last() {
            lasts.push((cfg, last.cpu0_high, last.cpu0_high_min));
        }
        rows.push(row);
    }
    // base's fixed high and 6.12's high_min come from the same low-watermark share and
    // can be equal: then one line hides the other, and the caption says so.
    let hidden = match lasts.as_slice() {
        [("base", high, _), ("linux-6.12", _, min)] if high == min => format!(
            " base's fixed `high` ({high} pages) equals linux-6.12's `high_min` here, so \
             its line lies under the `high_min` line."
        ),
        _ => String::new(),
    };
    let chart = Chart {
        title: "Per-CPU lists during and after kbuild: linux-6.12 (solid) vs base (dashed)".into(),
        x_label: "seconds since the start".into(),
        y_label: "pages".into(),
        x_ranked: false,
        log_y: false,
        series,
    };
    plot::write(&chart, &out.join("pcp_over_time"))?;
    normalise(&mut rows);
    let ends: Vec<String> = build_end_s
        .iter()
        .map(|(c, s)| format!("{c} {s:.2} s"))
        .collect();
    Ok(Section {
        id: "pcp_over_time".into(),
        title: "PCP high and cached pages over time".into(),
        intro: format!(
            "kbuild (params: {}), then {} ms idle, sampled every 10 ms (the build ends at \
             {}). The decay tick runs every 100 ms instead of every second, so that the \
             idle time holds many ticks. What the plot shows: CPU 0's `high` and `count` \
             and the pages on all CPUs' lists, base dashed. base (6.6) has no auto-tuning \
             and no decay: its `high` is fixed and whatever its lists hold at the end stays \
             there. linux-6.12's `high` grows during the build and, once the CPU is idle, \
             each tick lowers it by 1/8 towards `high_min` (`decay_pcp_high`), draining \
             `count` down to it: a few ticks take it to `high_min`, where it stays flat \
             for the rest of the idle time.{hidden} The table's final PCP is the pages on all \
             CPUs' lists after the idle time, as % of base; `cpu0 … last` is CPU 0's last \
             sample, the plot's last point. The samples are in \
             [`pcp_over_time_samples.json`](pcp_over_time_samples.json).",
            show(&plan.kbuild),
            plan.linger_ms,
            ends.join(", "),
        ),
        rows,
        columns: {
            let mut c = crate::report::report_columns();
            c.extend(["cpu0_high_last", "cpu0_count_last", "all_cpus_count_last"]);
            c
        },
        plots: vec!["pcp_over_time.png".into()],
        data: vec![(
            "pcp_over_time_samples".into(),
            serde_json::Value::Object(samples),
        )],
        ..Section::default()
    })
}

pub(super) fn others(cx: &mut Ctx, plan: &Plan) -> Result<Section, ReportError> {
    let cpus = *plan.cpus.last().expect("CPUs");
    let mut rows = Vec::new();
    for (name, ov) in &plan.others {
        let mut pair = Vec::new();
        for cfg in ["base", "linux-6.12"] {
            pair.push(cx.run(name, ov, "pagealloc", cfg, cpus, 0)?.row());
        }
        normalise(&mut pair);
        rows.extend(pair);
    }
    Ok(Section {
        id: "other_workloads".into(),
        title: "Other workloads: base vs linux-6.12".into(),
        intro: "Each pair normalised to its own base row. No published column: these \
                workloads' published results are not in the project's reference \
                (crates/pagealloc-lab/docs/published.md §3)."
            .into(),
        after: crate::report::latency_markdown(&rows),
        rows,
        columns: crate::report::report_columns(),
        ..Section::default()
    })
}

pub(super) fn microbench(cx: &mut Ctx, plan: &Plan) -> Result<Section, ReportError> {
    let mut rows: Vec<Row> = Vec::new();
    let threads: Vec<u32> = plan.cpus.iter().copied().take(2).collect();
    for kind in BenchKind::ALL {
        for alloc in ["pagealloc", "buddy_system_allocator", "pool"] {
            for &t in &threads {
                for order in [0u8, 9] {
                    if alloc == "pool" && order != 0 {
                        continue;
                    }
                    cx.pb
                        .set_message(format!("bench {kind} {alloc} × {t} order {order}"));
                    let row = bench::run(&BenchParams {
                        kind,
                        alloc,
                        config: pagealloc::Config::default(),
                        threads: t,
                        order,
                        memory_bytes: plan.bench_memory,
                        iterations: plan.bench_iterations,
                        seed: 1,
                        reuse: false,
                    })
                    .map_err(|error| ReportError::Bench {
                        label: format!("{kind} {alloc}"),
                        error,
                    })?;
                    rows.push(row);
                    cx.pb.inc(1);
                }
            }
        }
    }
    // Side-by-side ratios: each row's ns over buddy_system_allocator's in the same
    // benchmark, threads and order (measured minutes apart at most, under the same load).
    let key = |r: &Row| (r.bench.clone(), r.cpus, r.order);
    let buddy: Vec<(_, f64)> = rows
        .iter()
        .filter(|r| r.alloc == "buddy_system_allocator")
        .filter_map(|r| r.get_ns.or(r.pair_ns).map(|v| (key(r), v)))
        .collect();
    for r in &mut rows {
        let own = r.get_ns.or(r.pair_ns);
        if let (Some(v), Some((_, b))) = (own, buddy.iter().find(|(k, _)| *k == key(r))) {
            r.extra.insert("vs_buddy_pct".into(), 100.0 * v / b);
        }
    }
    let mut columns = BENCH_COLUMNS.to_vec();
    columns.push("vs_buddy_pct");
    Ok(Section {
        id: "llfree_bench".into(),
        title: "Microbenchmarks defined by LLFree's evaluation (bulk, repeat, rand) on this host"
            .into(),
        intro: format!(
            "ns per operation (repeat: per allocate+free pair), median of {} runs, {} MiB, \
             each thread handling frames/threads/2/2^order blocks. These are LLFree's \
             benchmark definitions run against pagealloc and two peers on this host; \
             LLFree itself is not run and its published figures are not in the project \
             (crates/pagealloc-lab/docs/published.md §3). `vs buddy %` is the row's time \
             as % of buddy_system_allocator's in the same benchmark, threads and order: \
             a ratio of runs made minutes apart under the same load, steadier than the ns. \
             `pool` has no order-9 rows: it hands out single order-0 frames only.",
            plan.bench_iterations,
            plan.bench_memory >> 20
        ),
        rows,
        columns,
        ..Section::default()
    })
}

fn show(ov: &[(String, String)]) -> String {
    if ov.is_empty() {
        return "defaults".into();
    }
    ov.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
