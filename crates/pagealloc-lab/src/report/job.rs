//! The `report` main job: a default suite of the seed workloads on real threads across
//! configs and peers, the batch sweep, the PCP timeline and LLFree's microbenchmarks,
//! written as `report.md` (tables), one JSON file per section and PNG/SVG plots.
//!
//! # Design
//! A report is a list of [`Section`]s (title, text, rows, columns, plots); the job fills
//! them and [`write_report`] writes them, so other tools (the simulator) can add theirs.
//! The suite's size is chosen by [`Mode`]: `Full` (a few minutes here), `Quick` (under a
//! minute), `Tiny` (seconds: for tests). Every run is a full executor run with all its
//! checks: a failed check fails the report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use pagealloc::Preset;

use super::plot::{self, Chart, Series};
use super::{compare_columns, markdown_table, normalise, ReportError, BENCH_COLUMNS};
use crate::bench::{self, BenchKind, BenchParams};
use crate::exec::{self, ExecOptions, ExecResult, PcpSample};
use crate::workload::by_name;
use crate::Row;

/// Size of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The default suite: a few minutes on a 2-core laptop.
    Full,
    /// `--quick`: under a minute.
    Quick,
    /// Seconds: the smallest parameters that still exercise every part (tests).
    Tiny,
}

/// One part of a report.
#[derive(Clone, Debug, Default)]
pub struct Section {
    /// File-name stem of its JSON (`<id>.json`) and plots.
    pub id: String,
    /// Heading.
    pub title: String,
    /// Markdown text before the table.
    pub intro: String,
    /// Result rows.
    pub rows: Vec<Row>,
    /// Table columns (keys of [`Row`]; empty ones are dropped).
    pub columns: Vec<&'static str>,
    /// Plot file names (PNG; an SVG of the same stem sits beside it).
    pub plots: Vec<String>,
}

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
        throughput + kbuild + streams + sweep + timeline + others + bench
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
}

struct Ctx {
    pb: ProgressBar,
    warnings: Vec<String>,
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
        Ok(r)
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
    let mut cx = Ctx {
        pb,
        warnings: Vec::new(),
    };
    let mut sections = Vec::new();
    sections.extend(throughput(&mut cx, &plan, out)?);
    sections.push(series(&mut cx, &plan)?);
    sections.extend(streams(&mut cx, &plan)?);
    sections.push(batch_sweep(&mut cx, &plan, out)?);
    sections.push(timeline(&mut cx, &plan, out)?);
    sections.push(others(&mut cx, &plan)?);
    sections.push(microbench(&mut cx, &plan)?);
    sections.extend(super::sim::sections(mode, &cx.pb)?);
    sections.push(crate::twin::render::report_section(mode, out, &cx.pb));
    cx.pb.finish_and_clear();
    let seconds = t0.elapsed().as_secs_f64();
    let files = write_report(out, &sections, mode, seconds)?;
    Ok(Summary {
        files,
        seconds,
        warnings: cx.warnings,
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
            name: alloc.to_owned(),
            points: pts,
        });
    }
    let chart = Chart {
        title: "page_fault1: throughput vs CPUs".into(),
        x_label: "CPUs (threads)".into(),
        y_label: "pages/s".into(),
        x_ranked: false,
        log_y: false,
        series,
    };
    plot::write(&chart, &out.join("throughput_vs_cpus"))?;
    let base = cx.run("page_fault1", &plan.pf1, "pagealloc", "base", maxc, 0)?;
    let mut cmp = vec![base.row()];
    cmp.extend(rows.iter().filter(|r| r.cpus == Some(maxc)).cloned());
    normalise(&mut cmp);
    Ok(vec![
        Section {
            id: "page_fault1_compare".into(),
            title: format!("page_fault1 on {maxc} CPUs: configs and peers"),
            intro: format!(
                "Every CPU faults in and unmaps a region, touching each page (params: {}). \
                 Normalised to pagealloc `base` = 100 (score, free_high, alloc_zone, PCP \
                 pages); latencies are of one zone-lock trip. Peers have no zone lock.",
                show(&plan.pf1)
            ),
            rows: cmp,
            columns: compare_columns(),
            plots: vec![],
        },
        Section {
            id: "throughput_vs_cpus".into(),
            title: "page_fault1: throughput vs CPUs".into(),
            intro: "Raw pages per second; pagealloc is `linux-6.12`.".into(),
            rows,
            columns: vec![
                "alloc",
                "config",
                "cpus",
                "score",
                "zone_lock_pct",
                "alloc_op_avg_us",
            ],
            plots: vec!["throughput_vs_cpus.png".into()],
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
    Ok(Section {
        id: "kbuild_series".into(),
        title: format!("kbuild on {cpus} CPUs: the PCP series patch by patch"),
        intro: format!(
            "Short-lived tasks allocate, compute and free on exit (params: {}). Rows are \
             cumulative, as in the spec's calibration table (build time there, score = \
             100/makespan here).",
            show(&plan.kbuild)
        ),
        rows,
        columns: compare_columns(),
        plots: vec![],
    })
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
        out.push(Section {
            id: name.into(),
            title: format!("{name} on {cpus} CPUs"),
            intro: format!(
                "Senders allocate, receivers on another CPU free (params: {}).",
                show(ov)
            ),
            rows,
            columns: compare_columns(),
            plots: vec![],
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
        for (i, v) in [
            row.alloc_lat_avg_us,
            row.alloc_lat_p99_us,
            row.free_lat_avg_us,
            row.free_lat_p99_us,
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
    let names = ["alloc avg", "alloc p99", "free avg", "free p99"];
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
                points: p,
            })
            .collect(),
    };
    plot::write(&chart, &out.join("latency_vs_batch"))?;
    Ok(Section {
        id: "batch_sweep".into(),
        title: "Batch sweep".into(),
        intro: format!(
            "page_fault1 with every CPU's high fixed at 2 × batch and batch scaling off \
             (`batch_scale_max=0`); latency of one zone-lock trip: a refill (alloc) or a \
             drain (free). Params: {}.",
            show(&plan.sweep)
        ),
        rows,
        columns: vec![
            "batch",
            "score",
            "alloc_lat_avg_us",
            "alloc_lat_p99_us",
            "free_lat_avg_us",
            "free_lat_p99_us",
        ],
        plots: vec!["latency_vs_batch.png".into()],
    })
}

fn timeline(cx: &mut Ctx, plan: &Plan, out: &Path) -> Result<Section, ReportError> {
    let cpus = *plan.cpus.last().expect("CPUs");
    let mut rows = Vec::new();
    let mut series = Vec::new();
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
        series.push(Series {
            name: format!("{cfg}: high"),
            points: pts(|s| f64::from(s.cpu0_high)),
        });
        series.push(Series {
            name: format!("{cfg}: cached (count)"),
            points: pts(|s| f64::from(s.cpu0_count)),
        });
        rows.push(r.row());
    }
    let chart = Chart {
        title: "CPU 0's per-CPU list over time: auto-tuning (linux-6.12) vs base".into(),
        x_label: "seconds".into(),
        y_label: "pages".into(),
        x_ranked: false,
        log_y: false,
        series,
    };
    plot::write(&chart, &out.join("pcp_over_time"))?;
    normalise(&mut rows);
    Ok(Section {
        id: "pcp_over_time".into(),
        title: "PCP high and cached pages over time".into(),
        intro: format!(
            "kbuild (params: {}), then {} ms idle, sampled every 10 ms; the decay tick is \
             sped up to 100 ms so the decay after the build shows within the run. \
             Normalised to base = 100.",
            show(&plan.kbuild),
            plan.linger_ms
        ),
        rows,
        columns: compare_columns(),
        plots: vec!["pcp_over_time.png".into()],
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
        intro: "Each pair normalised to its own base row.".into(),
        rows,
        columns: compare_columns(),
        plots: vec![],
    })
}

fn microbench(cx: &mut Ctx, plan: &Plan) -> Result<Section, ReportError> {
    let mut rows = Vec::new();
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
    Ok(Section {
        id: "llfree_bench".into(),
        title: "LLFree's microbenchmarks".into(),
        intro: format!(
            "ns per operation (repeat: per allocate+free pair), median of {} runs, {} MiB, \
             each thread handling frames/threads/2/2^order blocks.",
            plan.bench_iterations,
            plan.bench_memory >> 20
        ),
        rows,
        columns: BENCH_COLUMNS.to_vec(),
        plots: vec![],
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
        "{} CPUs usable, {mem} RAM, Linux {kernel}",
        exec::host_cpus()
    )
}

/// Writes `report.md`, one `<id>.json` per section (an array of rows) and returns the
/// files written (plots were written by their sections).
///
/// # Errors
/// A file that cannot be written.
pub fn write_report(
    out: &Path,
    sections: &[Section],
    mode: Mode,
    seconds: f64,
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
    let _ = writeln!(
        md,
        "Columns: score and free_high, alloc_zone, PCP pages normalised to the first row \
         of a table = 100 where stated; zone lock % = time waiting for zone locks ÷ CPU \
         time; latencies are one zone-lock trip in µs.\n"
    );
    for s in sections {
        let _ = writeln!(md, "## {}\n", s.title);
        if !s.intro.is_empty() {
            let _ = writeln!(md, "{}\n", s.intro);
        }
        if !s.rows.is_empty() {
            md.push_str(&markdown_table(&s.rows, &s.columns));
            md.push('\n');
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
    }
    let path = out.join("report.md");
    std::fs::write(&path, md).map_err(|e| ReportError::io(&path, e))?;
    files.push(path);
    Ok(files)
}
