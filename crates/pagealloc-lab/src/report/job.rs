//! The `report` main job: a default suite of the seed workloads on real threads across
//! configs and peers, the batch sweep, the PCP timeline and LLFree's microbenchmarks,
//! written as `report.md` (tables), one JSON file per section and PNG/SVG plots.
//!
//! # Design
//! A report is a list of [`Section`]s (title, text, rows, columns, plots); the job fills
//! them and [`write_report`] writes them, so other tools (the simulator) can add theirs.
//! The suite's size is chosen by [`Mode`]: `Full`, `Quick` (fewer configs, smaller
//! workloads) and `Tiny` (seconds: for tests); the README has their measured
//! durations. Every run is a full executor run with all its checks: a failed check
//! fails the report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use pagealloc::Preset;

use super::plot::{self, Chart, Series};
use super::{markdown_table, normalise, ReportError, BENCH_COLUMNS};
use crate::bench::{self, BenchKind, BenchParams};
use crate::exec::{self, ExecOptions, ExecResult, PcpSample};
use crate::workload::by_name;
use crate::Row;

pub use super::section::{Mode, Section};

/// The suite's sizes in one mode.
struct Plan {
    pf1: Vec<(String, String)>,
    kbuild: Vec<(String, String)>,
    netperf: Vec<(String, String)>,
    lmbench: Vec<(String, String)>,
    sweep: Vec<(String, String)>,
    batches: Vec<u32>,
    peers: Vec<&'static str>,
    cpus: Vec<u32>,
    presets: Vec<&'static str>,
    others: Vec<(&'static str, Vec<(String, String)>)>,
    linger_ms: u64,
    bench_memory: u64,
    bench_iterations: u32,
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl Plan {
    fn new(mode: Mode) -> Plan {
        let host = exec::host_cpus().max(1) as u32;
        let mut cpus: Vec<u32> = (1..=host.min(8)).collect();
        if host > 8 {
            cpus.push(host);
        }
        let all_presets: Vec<&'static str> = Preset::SERIES.iter().map(|p| p.name()).collect();
        let peers = crate::peers::names();
        match mode {
            Mode::Full => Plan {
                pf1: kv(&[("loops", "64")]),
                kbuild: kv(&[("tasks", "256")]),
                netperf: kv(&[("messages", "100000")]),
                lmbench: kv(&[("chunks", "50000")]),
                sweep: kv(&[("loops", "32")]),
                batches: vec![63, 127, 255, 511, 1023, 2047, 4095],
                peers,
                cpus,
                presets: all_presets,
                others: vec![
                    ("page_fault1_thp", kv(&[("loops", "32")])),
                    ("bulk", kv(&[("rounds", "200")])),
                    ("high_order_stress", kv(&[("attempts", "50")])),
                    ("thp_mix", kv(&[("loops", "32")])),
                    ("parallel_free", vec![]),
                    ("zonelist_hog", vec![]),
                ],
                linger_ms: 2500,
                bench_memory: 1 << 30,
                bench_iterations: 3,
            },
            Mode::Quick => Plan {
                pf1: kv(&[("loops", "16")]),
                kbuild: kv(&[("tasks", "64")]),
                netperf: kv(&[("messages", "20000")]),
                lmbench: kv(&[("chunks", "5000")]),
                sweep: kv(&[("loops", "8")]),
                batches: vec![63, 255, 1023, 4095],
                peers,
                cpus,
                presets: [
                    Preset::Base,
                    Preset::Patch1,
                    Preset::Patch5,
                    Preset::Patch7,
                    Preset::Linux612,
                ]
                .map(Preset::name)
                .to_vec(),
                others: vec![
                    ("bulk", kv(&[("rounds", "50")])),
                    (
                        "high_order_stress",
                        kv(&[("attempts", "20"), ("interval_ns", "100000")]),
                    ),
                ],
                linger_ms: 1000,
                bench_memory: 256 << 20,
                bench_iterations: 1,
            },
            Mode::Tiny => Plan {
                pf1: kv(&[("pages_per_loop", "512"), ("loops", "2")]),
                kbuild: kv(&[
                    ("tasks", "8"),
                    ("median_pages", "64"),
                    ("min_pages", "16"),
                    ("max_pages", "256"),
                    ("compute_ns_per_page", "10"),
                ]),
                netperf: kv(&[("messages", "200")]),
                lmbench: kv(&[("chunks", "50")]),
                sweep: kv(&[("pages_per_loop", "1024"), ("loops", "2")]),
                batches: vec![63, 255],
                peers: vec!["pagealloc", "buddy_system_allocator", "pool", "kernel"],
                cpus: cpus.into_iter().take(2).collect(),
                presets: [Preset::Base, Preset::Linux612].map(Preset::name).to_vec(),
                others: vec![("bulk", kv(&[("pages", "500"), ("rounds", "2")]))],
                linger_ms: 100,
                bench_memory: 16 << 20,
                bench_iterations: 1,
            },
        }
    }

    /// Executor runs and bench rows the plan makes (for the progress bar).
    fn steps(&self) -> u64 {
        let n = |v: usize| v as u64;
        let throughput = n(self.peers.len() * self.cpus.len()) + 1;
        let kbuild = n(self.presets.len());
        let streams = 2 * 3;
        let sweep = n(self.batches.len());
        let timeline = 2;
        let others = 2 * n(self.others.len());
        // 3 kinds × (pagealloc and buddy at orders 0 and 9, pool at 0) × threads
        let bench = 3 * 5 * n(self.cpus.len().min(2));
        // the simulator's kbuild ablation and batch sweep, and the twin
        let last = 3;
        throughput + kbuild + streams + sweep + timeline + others + bench + last
    }
}

/// What the job did.
#[derive(Debug)]
pub struct Summary {
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Seconds it took.
    pub seconds: f64,
    /// Warnings collected from the runs.
    pub warnings: Vec<String>,
    /// The report's opening summary (Markdown, one screen).
    pub text: String,
}

/// The 1-minute load average (`/proc/loadavg`), if the system has one.
pub fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Runs `f` (real-thread sections) and stamps its sections with the load average
/// before and after.
fn with_load(
    cx: &mut Ctx,
    f: impl FnOnce(&mut Ctx) -> Result<Vec<Section>, ReportError>,
) -> Result<Vec<Section>, ReportError> {
    let before = loadavg();
    let mut v = f(cx)?;
    let after = loadavg();
    for s in &mut v {
        s.load = before.zip(after);
    }
    Ok(v)
}

struct Ctx {
    pb: ProgressBar,
    warnings: Vec<String>,
    /// Executor runs made (for the summary).
    runs: u32,
}

impl Ctx {
    fn run(
        &mut self,
        workload: &str,
        overrides: &[(String, String)],
        alloc: &str,
        config: &str,
        cpus: u32,
        linger_ms: u64,
    ) -> Result<ExecResult, ReportError> {
        let label = match alloc {
            "pagealloc" => format!("{workload} {config} × {cpus}"),
            _ => format!("{workload} {alloc} × {cpus}"),
        };
        self.pb.set_message(label.clone());
        let w = by_name(workload, overrides)?;
        let cfg: pagealloc::Config = config.parse()?;
        let opts = ExecOptions {
            linger_ms,
            ..ExecOptions::new(cpus)
        };
        let r =
            exec::run_named(&*w, alloc, &cfg, &opts, None).map_err(|error| ReportError::Run {
                label: label.clone(),
                error,
            })?;
        for warn in &r.warnings {
            if !self.warnings.contains(warn) {
                self.warnings.push(warn.clone());
            }
        }
        self.pb.inc(1);
        self.runs += 1;
        Ok(r)
    }
}

/// Prints `report: <s> s, step <pos>/<len>: <what>` to stderr every 15 s until `stop`.
fn plain_progress(pb: &ProgressBar, stop: &std::sync::atomic::AtomicBool, t0: Instant) {
    let mut next = 15u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let t = t0.elapsed().as_secs();
        if t >= next {
            next = t + 15;
            eprintln!(
                "report: {t:>4} s, step {}/{}: {}",
                pb.position(),
                pb.length().unwrap_or(0),
                pb.message()
            );
        }
    }
}

/// Runs the suite of `mode` and writes the report into `out`.
///
/// # Errors
/// A failed run (with its check's message) or a file that cannot be written.
pub fn run(out: &Path, mode: Mode) -> Result<Summary, ReportError> {
    let t0 = Instant::now();
    std::fs::create_dir_all(out).map_err(|e| ReportError::io(out, e))?;
    let plan = Plan::new(mode);
    let pb = ProgressBar::new(plan.steps());
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    // Piped output (a CI log) gets no bar: a plain line on stderr every 15 s instead.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lines =
        (!std::io::IsTerminal::is_terminal(&std::io::stderr()) && mode != Mode::Tiny).then(|| {
            let (pb, stop) = (pb.clone(), stop.clone());
            std::thread::spawn(move || plain_progress(&pb, &stop, t0))
        });
    let mut cx = Ctx {
        pb,
        warnings: Vec::new(),
        runs: 0,
    };
    let mut sections = Vec::new();
    sections.extend(with_load(&mut cx, |cx| throughput(cx, &plan, out))?);
    sections.extend(with_load(&mut cx, |cx| Ok(vec![series(cx, &plan)?]))?);
    sections.extend(with_load(&mut cx, |cx| streams(cx, &plan))?);
    sections.extend(with_load(&mut cx, |cx| {
        Ok(vec![batch_sweep(cx, &plan, out)?])
    })?);
    sections.extend(with_load(&mut cx, |cx| {
        Ok(vec![timeline(cx, &plan, out)?])
    })?);
    sections.extend(with_load(&mut cx, |cx| Ok(vec![others(cx, &plan)?]))?);
    sections.extend(with_load(&mut cx, |cx| Ok(vec![microbench(cx, &plan)?]))?);
    sections.extend(super::sim::sections(mode, &cx.pb)?);
    sections.extend(with_load(&mut cx, |cx| {
        let s = crate::twin::render::report_section(mode, out, &cx.pb);
        cx.pb.inc(1);
        Ok(vec![s])
    })?);
    cx.pb.finish_and_clear();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(h) = lines {
        let _ = h.join();
    }
    let seconds = t0.elapsed().as_secs_f64();
    let text = summary_text(&sections, mode, seconds, cx.runs);
    let files = write_report(out, &sections, mode, seconds, &text)?;
    Ok(Summary {
        files,
        seconds,
        warnings: cx.warnings,
        text,
    })
}

fn throughput(cx: &mut Ctx, plan: &Plan, out: &Path) -> Result<Vec<Section>, ReportError> {
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
            after: super::latency_markdown(&cmp),
            rows: cmp,
            columns: super::report_columns(),
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

fn series(cx: &mut Ctx, plan: &Plan) -> Result<Section, ReportError> {
    let cpus = *plan.cpus.last().expect("CPUs");
    let mut rows = Vec::new();
    for &p in &plan.presets {
        rows.push(
            cx.run("kbuild", &plan.kbuild, "pagealloc", p, cpus, 0)?
                .row(),
        );
    }
    normalise(&mut rows);
    let close = super::published::kbuild_closeness(&rows);
    let after = format!(
        "Beside the published kbuild table ({}). Build time = 100 × makespan ÷ base \
         makespan. The published machine ran 112 CPUs, this one {cpus}: read the \
         directions of each step, not the magnitudes.\n\n{}\n{}.\n\n{}\n\n{}",
        super::published::KBUILD_SOURCE,
        super::published::kbuild_markdown(&rows),
        close.line(),
        kbuild_free_high_note(&rows),
        super::latency_markdown(&rows)
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
        columns: super::report_columns(),
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

fn streams(cx: &mut Ctx, plan: &Plan) -> Result<Vec<Section>, ReportError> {
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
                super::latency_markdown(&rows)
            ),
            rows,
            columns: super::report_columns(),
            ..Section::default()
        });
    }
    Ok(out)
}

fn batch_sweep(cx: &mut Ctx, plan: &Plan, out: &Path) -> Result<Section, ReportError> {
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
    let close = super::published::sweep_line(&rows, Some(against));
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
            super::published::SWEEP_SOURCE,
            super::published::sweep_markdown(&rows, Some(against)),
            super::latency_markdown(&rows)
        ),
        closeness: Some(format!("batch sweep on this host vs {against}: {close}")),
        rows,
        columns: vec!["batch", "score", "score_unit", "zone_lock_pct"],
        plots: vec!["latency_vs_batch.png".into()],
        ..Section::default()
    })
}

fn timeline(cx: &mut Ctx, plan: &Plan, out: &Path) -> Result<Section, ReportError> {
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
            let mut c = super::report_columns();
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

fn others(cx: &mut Ctx, plan: &Plan) -> Result<Section, ReportError> {
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
        after: super::latency_markdown(&rows),
        rows,
        columns: super::report_columns(),
        ..Section::default()
    })
}

fn microbench(cx: &mut Ctx, plan: &Plan) -> Result<Section, ReportError> {
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

fn host_line() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or_else(
            || "?".into(),
            |kb| format!("{:.1} GiB", kb as f64 / 1048576.0),
        );
    format!(
        "{model}, {} CPUs usable, {mem} RAM, Linux {kernel}",
        exec::host_cpus()
    )
}

/// The load line of a real-thread section, with a warning when the load was above the
/// CPUs this process may use.
fn load_line(load: (f64, f64)) -> String {
    let cpus = exec::host_cpus().max(1) as f64;
    let mut s = format!(
        "Measured on this host ({}); load average (1 min) {:.2} when the section started, \
         {:.2} when it ended.",
        host_line(),
        load.0,
        load.1
    );
    if load.0.max(load.1) > cpus {
        s += &format!(
            " **Warning: load above the {cpus:.0} usable CPUs**: other processes competed \
             for the CPUs, so absolute times (ns, µs, pages/s) are inflated and differ from \
             run to run, and off-CPU time shows as idle %; compare rows of one table \
             (ratios, measured side by side), not absolute figures across reports."
        );
    }
    s
}

/// What the report opens with: what was run, on what, how long, and how close each
/// reproduced table came.
fn summary_text(sections: &[Section], mode: Mode, seconds: f64, runs: u32) -> String {
    let mut t = String::new();
    let loads: Vec<f64> = sections
        .iter()
        .filter_map(|s| s.load)
        .flat_map(|(a, b)| [a, b])
        .collect();
    let (lo, hi) = loads
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
    let cpus = exec::host_cpus();
    let _ = writeln!(t, "## Summary\n");
    let _ = writeln!(
        t,
        "- **What ran**: the {} suite, {runs} workload runs on real threads (one pinned \
         thread per CPU, every run ending with `validate()` and a check of every block), \
         LLFree's microbenchmarks, the simulator's kbuild ablation and batch sweep, and the \
         live-kernel twin: {} sections below.",
        match mode {
            Mode::Full => "default",
            Mode::Quick => "`--quick`",
            Mode::Tiny => "tiny (tests)",
        },
        sections.len()
    );
    let _ = writeln!(t, "- **On**: {}.", host_line());
    if lo.is_finite() {
        let warn = if hi > cpus as f64 {
            format!(
                " **Above the {cpus} usable CPUs**: absolute times are inflated and vary \
                 between runs; the ratios within a table (measured side by side) are the \
                 figures to read."
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "- **Load** (1-minute average, sampled at each real-thread section's start and \
             end): {lo:.2} … {hi:.2}.{warn}"
        );
    }
    let _ = writeln!(
        t,
        "- **How long**: {seconds:.0} s for the suite (the build before it not included)."
    );
    let _ = writeln!(
        t,
        "- **How close to the published figures** (sources: \
         crates/pagealloc-lab/docs/published.md; differences are ours against published, \
         relative):"
    );
    for s in sections {
        if let Some(c) = &s.closeness {
            let _ = writeln!(t, "  - {c}.");
        }
    }
    let _ = writeln!(
        t,
        "  - netperf, lmbench, the other workloads and the microbenchmarks: no published \
         figures in the project's reference (held out, or not the same machine and \
         allocator), so no comparison."
    );
    let _ = writeln!(
        t,
        "- **Reading the tables**: score, free_high, alloc_zone and PCP pages are % of the \
         table's first row where the section says so; zone lock % = time waiting for zone \
         locks ÷ CPU time, where the wait is wall time (a waiter that yields its CPU, or \
         is preempted, is still waiting), so on a loaded machine it can pass 100 %. A *trip* is one pass under a zone lock (a refill when \
         allocating, a drain when freeing; µs, as published); a *call* is one allocation \
         or free, PCP hits included (ns). Each latency table gives count, avg, p50, p99, \
         p99.9 and max from one histogram, and `tail %`, the share of all the time that \
         the values above the p99 carry. Where the average exceeds the p99, that tail \
         carries most of the time: a few trips hundreds of times longer than the rest, \
         during which the thread was descheduled (preempted inside the trip, or waiting \
         for the lock behind a preempted holder) on a machine with more runnable threads \
         than CPUs. Read p50 and p99 for the allocator, max and p99.9 for the machine.\n"
    );
    t
}

/// Writes `report.md` (opening with `summary`), one `<id>.json` per section (an array
/// of rows) and its further data files, and returns the files written (plots were
/// written by their sections).
///
/// # Errors
/// A file that cannot be written.
pub fn write_report(
    out: &Path,
    sections: &[Section],
    mode: Mode,
    seconds: f64,
    summary: &str,
) -> Result<Vec<PathBuf>, ReportError> {
    let mut files = Vec::new();
    let mut md = String::new();
    let _ = writeln!(md, "# pagealloc lab report\n");
    let _ = writeln!(
        md,
        "Suite: {} ({:.0} s). Host: {}. Real threads, one pinned per CPU; every run ends \
         with `validate()` and a check of every block returned.\n",
        match mode {
            Mode::Full => "default",
            Mode::Quick => "--quick",
            Mode::Tiny => "--tiny",
        },
        seconds,
        host_line()
    );
    md.push_str(summary);
    md.push('\n');
    for s in sections {
        let _ = writeln!(md, "## {}\n", s.title);
        if let Some(load) = s.load {
            let _ = writeln!(md, "{}\n", load_line(load));
        }
        if !s.intro.is_empty() {
            let _ = writeln!(md, "{}\n", s.intro);
        }
        if !s.rows.is_empty() {
            md.push_str(&markdown_table(&s.rows, &s.columns));
            md.push('\n');
        }
        if !s.after.is_empty() {
            let _ = writeln!(md, "{}\n", s.after.trim_end());
        }
        for p in &s.plots {
            let stem = p.trim_end_matches(".png");
            let _ = writeln!(md, "![{}]({p}) ([SVG]({stem}.svg))\n", s.title);
            files.push(out.join(p));
            files.push(out.join(format!("{stem}.svg")));
        }
        let _ = writeln!(md, "Data: [`{}.json`]({}.json)\n", s.id, s.id);
        let json = serde_json::to_string_pretty(&s.rows).expect("rows serialise");
        let path = out.join(format!("{}.json", s.id));
        std::fs::write(&path, json + "\n").map_err(|e| ReportError::io(&path, e))?;
        files.push(path);
        for (stem, value) in &s.data {
            let json = serde_json::to_string_pretty(value).expect("JSON values serialise");
            let path = out.join(format!("{stem}.json"));
            std::fs::write(&path, json + "\n").map_err(|e| ReportError::io(&path, e))?;
            files.push(path);
        }
    }
    let path = out.join("report.md");
    std::fs::write(&path, md).map_err(|e| ReportError::io(&path, e))?;
    files.push(path);
    Ok(files)
}
