//! The suite's sizes in each [`Mode`], and the context each of its runs goes through.

use indicatif::ProgressBar;
use pagealloc::Preset;

use crate::exec::{self, ExecOptions, ExecResult};
use crate::report::section::{Mode, Section};
use crate::report::ReportError;
use crate::workload::by_name;
use crate::workload::overrides as kv;

/// The suite's sizes in one mode.
pub(super) struct Plan {
    pub(super) pf1: Vec<(String, String)>,
    pub(super) kbuild: Vec<(String, String)>,
    pub(super) netperf: Vec<(String, String)>,
    pub(super) lmbench: Vec<(String, String)>,
    pub(super) sweep: Vec<(String, String)>,
    pub(super) batches: Vec<u32>,
    pub(super) peers: Vec<&'static str>,
    pub(super) cpus: Vec<u32>,
    pub(super) presets: Vec<&'static str>,
    pub(super) others: Vec<(&'static str, Vec<(String, String)>)>,
    pub(super) linger_ms: u64,
    pub(super) bench_memory: u64,
    pub(super) bench_iterations: u32,
}

impl Plan {
    pub(super) fn new(mode: Mode) -> Plan {
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
    pub(super) fn steps(&self) -> u64 {
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
pub(super) fn with_load(
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

pub(super) struct Ctx {
    pub(super) pb: ProgressBar,
    pub(super) warnings: Vec<String>,
    /// Executor runs made (for the summary).
    pub(super) runs: u32,
}

impl Ctx {
    pub(super) fn run(
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
