//! The simulator: the seeds' machines and workloads at full scale, in virtual time,
//! deterministic, with a documented and calibrated cost model.
//!
//! # Design
//! - [`machine`]: the machines of the seed measurements as data, with their
//!   [`CostModel`]s and the core [`pagealloc::Layout`] each one becomes; [`host`]: this
//!   machine, read from sysfs and `/proc`; `lookup`: a machine by name, either kind.
//! - `engine`: the discrete-event loop. One virtual CPU per CPU runs its
//!   [`crate::workload::CpuScript`] under the executor contract of [`crate::workload`];
//!   every allocation and free runs the *real* allocator as that CPU, and its cost is the
//!   fast path's instructions plus every line of allocator state the call reported
//!   through the access sink, charged through the cache hierarchy. Zone locks are
//!   resources in virtual time: a hold is its lines' time plus fitted per-trip and
//!   per-line residuals; the wait for them is the zone-lock %.
//! - `trace`: the access sink the engine installs, and the mapping of each reported line
//!   to a cache line of the kernel's layout (`struct page`, pageblock bits, zone,
//!   pageset).
//! - `overlap`: memory-level parallelism: how long a run of accesses takes on one core
//!   when independent misses overlap (fill buffers, the L2 miss queue) and chases do not.
//! - [`hierarchy`]: the machine's cache hierarchy (private L1/L2 per core, an LLC per
//!   socket, local and remote DRAM) with latencies from published hardware figures;
//!   every allocator line and page touch is charged through it.
//! - `ahead`: host prefetch hints for the simulator's own tables (no effect on results).
//! - [`calibrate`]: the published calibration data, the fit of the free parameters,
//!   and the side-by-side tables.
//!
//! Entry points: [`run`] (one workload, one config, one machine → a [`Row`]),
//! [`compare`] (several configs; [`crate::row::normalise`] makes them relative to the
//! first), [`calibrate::refit`]. The command line on top of them (`sim`,
//! `compare --sim`, `calibrate`) is [`crate::cli`]'s; this module prints nothing.
//! `docs/sim-cost-model.md` documents every parameter and what the simulator cannot see.
//!
//! # Determinism
//! A run is a function of (workload and parameters, machine, memory scale, headroom and
//! page-cache models, cost model, config, root seed): the same inputs give the same
//! [`Row::trace_hash`]. A failing run reports the seed and the command that replays it
//! ([`SimError`]).

mod ahead;
pub mod calibrate;
mod engine;
pub mod hierarchy;
pub mod host;
mod lookup;
pub mod machine;
mod overlap;
pub mod start;
mod trace;

use std::fmt;
use std::time::Instant;

use pagealloc::Config;

pub use engine::EngineError;
pub use machine::{CacheSpec, CostModel, Machine, MachineError, MACHINES};

use crate::row::{CpuWindow, Measurement};
use crate::workload::{self, Scale, Workload};
use crate::Row;

/// Options of one simulation, besides the workload.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// The machine.
    pub machine: Machine,
    /// The allocator config.
    pub config: Config,
    /// Root seed; CPU `i` uses `cpu_seed(seed, i)`.
    pub seed: u64,
    /// CPUs the workload runs on (CPUs `0..n` of the machine); `None`: the machine's
    /// default for the workload ([`Machine::default_workload_cpus`]).
    pub cpus: Option<u32>,
    /// Memory divided by this factor (1: the machine's full memory). See
    /// [`machine`] for what scaling keeps.
    pub mem_scale: u64,
    /// Cost model; `None`: the machine's.
    pub cost: Option<CostModel>,
    /// Interval of the per-CPU-list samples (peak/final PCP pages) and of the page
    /// cache model's regrowth, virtual ns.
    pub sample_ns: u64,
    /// Page-cache model: memory not used by the workload is page cache, kept by a
    /// modelled kswapd between the low and high watermarks. `None`: off (see
    /// [`default_page_cache`]).
    pub page_cache: Option<bool>,
    /// Free memory at the start of the run (the headroom model).
    pub headroom: Headroom,
    /// Runs [`compare`] does at a time, each on a thread of its own; 0: the host's
    /// available parallelism. Results do not depend on it.
    pub jobs: usize,
    /// The start state (`predict`: the recorded kernel's pagesets and free lists);
    /// empty: every pageset starts empty at its initial `high`, the zones as the
    /// headroom model leaves them.
    pub start: start::StartState,
}

/// How much memory is free when the workload starts: each zone's free pages above its
/// high watermark; the rest of memory is held by the rest of the system for the whole
/// run (memory kswapd does not give back while the workload runs: the pages of other
/// processes, tmpfs, page cache that stays hot). See docs/sim-cost-model.md §3.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Headroom {
    /// The workload's calibrated value ([`default_headroom_mib`]).
    #[default]
    WorkloadDefault,
    /// All memory free.
    AllFree,
    /// This many MiB above the high watermark in every zone (before `mem_scale`: the
    /// simulated zone gets `MiB / mem_scale`).
    Mib(u64),
}

impl Headroom {
    /// The headroom for `workload` in MiB, or `None` for all memory free.
    pub fn mib(self, workload: &str) -> Option<u64> {
        match self {
            Headroom::WorkloadDefault => default_headroom_mib(workload),
            Headroom::AllFree => None,
            Headroom::Mib(m) => Some(m),
        }
    }

    /// One phrase for run headers and reports: what is free at the start.
    pub fn describe(self, workload: &str) -> String {
        match self.mib(workload) {
            Some(h) => format!("free memory at the start {h} MiB above the high watermark"),
            None => "all memory free at the start".to_owned(),
        }
    }
}

/// A headroom that is not a size, `all` or `default`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad headroom {0:?}: expected a size with a unit (6000MiB), `all` or `default`")]
pub struct HeadroomError(pub String);

impl std::str::FromStr for Headroom {
    type Err = HeadroomError;

    fn from_str(s: &str) -> Result<Self, HeadroomError> {
        match s {
            "default" => Ok(Headroom::WorkloadDefault),
            "all" => Ok(Headroom::AllFree),
            _ => s
                .parse::<crate::units::MemSize>()
                .map(|m| Headroom::Mib(m.bytes() >> 20))
                .map_err(|_| HeadroomError(s.to_owned())),
        }
    }
}

impl fmt::Display for Headroom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Headroom::WorkloadDefault => f.write_str("default"),
            Headroom::AllFree => f.write_str("all"),
            Headroom::Mib(m) => write!(f, "{m}MiB"),
        }
    }
}

/// The headroom a workload runs with unless told otherwise, MiB above the high
/// watermark, as its registry entry says ([`crate::workload::Entry::headroom_mib`]):
/// kbuild's fitted [`calibrate::KBUILD_HEADROOM_MIB`] (the published patch9 row differs
/// from patch7, which BELOW_HIGH can only do if the zone went below its high watermark
/// during the build); every other workload: all memory free.
pub fn default_headroom_mib(workload: &str) -> Option<u64> {
    crate::workload::entry(workload).and_then(|e| e.headroom_mib)
}

impl SimOptions {
    /// Defaults for `machine` and `config`: seed 1, full memory, the machine's costs,
    /// samples every 10 ms of virtual time.
    pub fn new(machine: Machine, config: Config) -> Self {
        SimOptions {
            machine,
            config,
            seed: 1,
            cpus: None,
            mem_scale: 1,
            cost: None,
            sample_ns: 10_000_000,
            page_cache: None,
            headroom: Headroom::WorkloadDefault,
            jobs: 0,
            start: start::StartState::default(),
        }
    }

    /// The runs [`compare`] does at a time: [`SimOptions::jobs`], or the host's
    /// available parallelism when it is 0.
    pub fn jobs(&self) -> usize {
        match self.jobs {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

/// A failed simulation, with what is needed to replay it.
#[derive(Debug, thiserror::Error)]
#[error("{error} (seed {seed}; replay with: {replay})")]
pub struct SimError {
    /// What went wrong.
    #[source]
    pub error: EngineError,
    /// `pagealloc sim …` that replays the run.
    pub replay: String,
    /// The root seed.
    pub seed: u64,
}

/// The command line that replays a run.
pub fn replay_command(workload: &dyn Workload, opts: &SimOptions) -> String {
    let params: Vec<String> = workload
        .params()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut cmd = format!(
        "pagealloc sim {} --machine {} --config {} --seed {}",
        workload.name(),
        opts.machine.name,
        opts.config,
        opts.seed
    );
    for p in params {
        cmd += &format!(" -p {p}");
    }
    if let Some(c) = opts.cpus {
        cmd += &format!(" --cpus {c}");
    }
    if let Some(p) = opts.page_cache {
        cmd += &format!(" --page-cache {}", if p { "on" } else { "off" });
    }
    if opts.mem_scale != 1 {
        cmd += &format!(" --mem-scale {}", opts.mem_scale);
    }
    if opts.headroom != Headroom::WorkloadDefault {
        cmd += &format!(" --headroom {}", opts.headroom);
    }
    if let Some(c) = &opts.cost {
        let items: Vec<String> = c.list().iter().map(|(k, v)| format!("{k}={v}")).collect();
        cmd += &format!(" --cost {}", items.join(","));
    }
    if !opts.start.is_empty() {
        cmd += &start::replay_note(&opts.start);
    }
    cmd
}

/// Whether the published latencies of `workload` were timed with ftrace's
/// function_graph tracer: the batch sweep's were (commit 52166607ecc9, "mm: restrict
/// the pcp batch scale factor to avoid too long latency": the code under the zone lock
/// was extracted from `rmqueue_bulk` and `free_pcppages_bulk` into two functions whose
/// run time function_graph reported). Its rows' trip latencies then contain the
/// tracer's in-window cost (`CostModel::fgraph_ns`) once per trip, and its CPUs pay it
/// (the published throughput is taken as measured with the tracer on: one table per
/// run); no other workload does.
pub fn fgraph_timed(workload: &str) -> bool {
    workload == "batch_sweep"
}

/// Simulates `workload` with `opts` and returns its row: raw score, zone-lock %, raw
/// free_high and alloc_zone counts, cache miss %, PCP peak/final pages, zone-lock trip
/// latencies, the trace hash, and in `extra` the makespan, the op counts, simulated
/// page operations per second of wall time, and the memory scale.
///
/// # Errors
/// The workload does not fit the CPUs, the config does not fit the machine, or a script
/// broke the executor contract; the error carries the seed and the replay command.
pub fn run(workload: &dyn Workload, opts: &SimOptions) -> Result<Row, SimError> {
    let spec = engine::EngineSpec {
        machine: opts.machine.clone(),
        cost: opts.cost.unwrap_or(opts.machine.cost),
        config: opts.config.clone(),
        seed: opts.seed,
        workload_cpus: opts
            .cpus
            .unwrap_or_else(|| opts.machine.default_workload_cpus(workload.name()))
            .min(opts.machine.cpus),
        mem_scale: opts.mem_scale,
        sample_ns: opts.sample_ns,
        page_cache: opts
            .page_cache
            .unwrap_or_else(|| default_page_cache(workload.name())),
        // Free lists started as a kernel's hold the rest of memory themselves.
        headroom_pages: opts
            .headroom
            .mib(workload.name())
            .filter(|_| opts.start.free_lists.is_empty())
            .map(|m| m.saturating_mul(256) / opts.mem_scale.max(1)),
        fgraph_timed: fgraph_timed(workload.name()),
        start: opts.start.clone(),
    };
    let t0 = Instant::now();
    let c0 = crate::exec::clock::thread_cpu_ns();
    let out = engine::simulate(workload, &spec).map_err(|error| SimError {
        error,
        replay: replay_command(workload, opts),
        seed: opts.seed,
    })?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = crate::exec::clock::thread_cpu_ns().saturating_sub(c0) as f64 * 1e-9;
    let mut row = row_of(workload, opts, &spec, &out, wall);
    row.extra.insert("run_cpu_s".into(), cpu);
    row.extra.insert(
        "page_ops_per_cpu_s".into(),
        out.page_ops as f64 / cpu.max(1e-9),
    );
    Ok(row)
}

/// Whether the page-cache model is on by default for a workload (see
/// [`SimOptions::page_cache`]): never. Its kswapd gives page cache back instantly and
/// for free, so pcps that outgrow free memory push page cache out at no cost, and with
/// memory kept between the watermarks BELOW_HIGH is set all the time, which makes
/// patch9 cost what patch7 gained: the opposite of the published kbuild table
/// (docs/sim-cost-model.md §3 has the figures). kbuild runs with the headroom model
/// instead ([`Headroom`]). The model stays as an option for memory-pressure studies.
pub fn default_page_cache(_workload: &str) -> bool {
    false
}

fn row_of(
    workload: &dyn Workload,
    opts: &SimOptions,
    spec: &engine::EngineSpec,
    out: &engine::EngineOutput,
    wall: f64,
) -> Row {
    // The page-cache model's own allocations are not the workload's.
    let mut c = out.counters;
    c.alloc_zone -= out.cache_alloc_pages;
    c.pgalloc -= out.cache_alloc_pages;
    c.pgfree -= out.cache_free_pages;
    let windows = (0..out.measured_per_cpu.len())
        .map(|i| CpuWindow {
            counts: out.measured_per_cpu[i].clone(),
            start_ns: out.measure_start[i],
            end_ns: out.end[i],
        })
        .collect();
    let mut r = Row::from_measurement(&Measurement {
        workload,
        alloc: "pagealloc".into(),
        config: Some(opts.config.to_string()),
        machine: opts.machine.name.to_owned(),
        seed: opts.seed,
        wall_s: wall,
        windows,
        counters: Some(c),
        zone_lock_wait_ns: Some(out.lock_wait_ns),
        cpu_time_ns: out.busy_ns,
        trips: Some((&out.alloc_trips, &out.free_trips)),
        touches: Some((out.data_lines, out.data_llc_misses)),
        pcp_pages: Some((out.pcp_peak, out.pcp_final)),
        trace_hash: Some(out.trace_hash),
    });
    let headroom = opts
        .headroom
        .mib(workload.name())
        .filter(|_| opts.start.free_lists.is_empty())
        .map_or(-1.0, |m| m as f64);
    for (k, v) in [
        // Availability of order-9 blocks (THP): free pageblock-sized blocks, averaged
        // over the pcp samples and at the end.
        ("free_o9_avg", out.huge.0 / out.huge.1.max(1) as f64),
        ("free_o9_end", out.huge.2 as f64),
        ("makespan_s", out.makespan_ns as f64 * 1e-9),
        ("alloc_time_s", out.sys_ns as f64 * 1e-9),
        ("ops", out.ops as f64),
        ("page_ops", out.page_ops as f64),
        ("page_ops_per_wall_s", out.page_ops as f64 / wall.max(1e-9)),
        ("mem_scale", opts.mem_scale as f64),
        ("page_cache", f64::from(u8::from(spec.page_cache))),
        ("page_cache_reclaims", out.reclaims as f64),
        ("page_cache_final_pages", out.cache_final_pages as f64),
        ("headroom_mib", headroom),
        ("held_pages", out.held_pages as f64),
        ("ticks", out.ticks as f64),
        ("tick_pcps", out.tick_pcps as f64 / out.ticks.max(1) as f64),
        (
            "tick_high_before",
            out.tick_high_before as f64 / out.tick_pcps.max(1) as f64,
        ),
        (
            "tick_high_after",
            out.tick_high_after as f64 / out.tick_pcps.max(1) as f64,
        ),
        ("tick_burst_s", out.tick_burst_ns as f64 * 1e-9),
        ("tick_burst_max_s", out.tick_burst_max_ns as f64 * 1e-9),
        ("alloc_lines", out.meta_levels.iter().sum::<u64>() as f64),
        (
            "alloc_lines_dram",
            (out.meta_levels[hierarchy::Level::LocalDram as usize]
                + out.meta_levels[hierarchy::Level::RemoteDram as usize]) as f64,
        ),
        ("alloc_lines_prefetched", out.meta_prefetched as f64),
        ("zone_lock_meta", c.zone_lock_meta as f64),
        ("zone_lock_lines", c.zone_lock_lines as f64),
        ("zone_lock_pages", c.zone_lock_pages as f64),
        ("merge_skipped", c.merge_skipped as f64),
        ("merge_deferred", c.merge_deferred as f64),
        ("merge_ondemand", c.merge_ondemand as f64),
        ("highorder_rescued", c.highorder_rescued as f64),
        ("alloc_slowpath", c.alloc_slowpath as f64),
        ("cluster_cut", c.cluster_cut as f64),
        ("zonelist_scanned", c.zonelist_scanned as f64),
        ("zonelist_skipped", c.zonelist_skipped as f64),
        (
            "lines_per_page_moved",
            c.zone_lock_meta as f64 / c.zone_lock_pages.max(1) as f64,
        ),
    ] {
        r.extra.insert(k.into(), v);
    }
    // Blocks allocated and freed by order in the measured window, and the pages the
    // refill and drain trips moved (`predict` divides them by its operations).
    let measured = crate::workload::OpCounts::sum(out.measured_per_cpu.iter());
    for (o, (&a, &f)) in measured.allocs.iter().zip(&measured.frees).enumerate() {
        if a > 0 || f > 0 {
            r.extra.insert(format!("alloc_blocks_o{o}"), a as f64);
            r.extra.insert(format!("free_blocks_o{o}"), f as f64);
        }
    }
    r.extra
        .insert("pcp_refill_pages".into(), c.pcp_refill_pages as f64);
    r.extra
        .insert("pcp_drain_pages".into(), c.pcp_drain_pages as f64);
    if !opts.start.is_empty() {
        r.extra
            .insert("pcp_start_pages".into(), out.pcp_start as f64);
    }
    for (cpu, &n) in out.sleeps.iter().enumerate().filter(|(_, &n)| n > 0) {
        r.extra.insert(format!("sleeps_cpu{cpu}"), n as f64);
    }
    for (cpu, &ns) in out.busy_per_cpu.iter().enumerate().filter(|(_, &n)| n > 0) {
        r.extra.insert(format!("busy_s_cpu{cpu}"), ns as f64 * 1e-9);
    }
    for (cpu, c) in out.measured_per_cpu.iter().enumerate() {
        if c.compute_ns > 0 {
            r.extra
                .insert(format!("compute_s_cpu{cpu}"), c.compute_ns as f64 * 1e-9);
        }
    }
    for (i, &(wait, trips)) in out.wait_by_tick.iter().enumerate() {
        r.extra.insert(format!("tick{i}_wait_s"), wait * 1e-9);
        r.extra.insert(format!("tick{i}_trips"), trips as f64);
    }
    for (name, k) in ["refill", "drain", "bg"].iter().zip(&out.lock_kinds) {
        for (what, v) in [
            ("trips", k.trips as f64),
            ("contended", k.contended as f64),
            ("wait_s", k.wait_ns * 1e-9),
            ("hold_s", k.hold_ns * 1e-9),
            ("wait_behind_s", k.wait_behind_ns * 1e-9),
            ("lines", k.lines as f64),
            ("lines_missed", k.lines_missed as f64),
        ] {
            r.extra.insert(format!("{name}_{what}"), v);
        }
    }
    r
}

/// Runs `workload` under each config, [`SimOptions::jobs`] at a time on threads of
/// their own (each run is independent and deterministic, so the rows do not depend on
/// the number of jobs), and returns the raw rows in `configs` order. `progress` is
/// called as each run finishes.
///
/// # Errors
/// The first failing run's error.
pub fn compare(
    workload: &dyn Workload,
    base: &SimOptions,
    configs: &[Config],
    progress: &(dyn Fn(&Row) + Sync),
) -> Result<Vec<Row>, SimError> {
    let threads = base.jobs().min(configs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<Row, SimError>>>> = configs
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= configs.len() {
                    break;
                }
                let mut o = base.clone();
                o.config = configs[i].clone();
                let r = run(workload, &o);
                if let Ok(row) = &r {
                    progress(row);
                }
                *results[i].lock().expect("no panics while holding") = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("not poisoned")
                .expect("every run ran")
        })
        .collect()
}

/// The workload `name` at the simulator's (full) scale with `overrides`.
///
/// # Errors
/// Unknown workload or parameter, or a bad value.
pub fn full_scale_workload(
    name: &str,
    overrides: &[(String, String)],
) -> Result<Box<dyn Workload>, workload::WorkloadError> {
    workload::build(name, Scale::Full, overrides)
}

/// Free blocks of order ≥ 9 in `a`'s buddy lists, counted in pageblocks (an order-10
/// block is two): how many THP allocations the zones could serve without compaction.
pub(crate) fn free_pageblocks(a: &pagealloc::Allocator) -> u64 {
    (0..a.nr_zones())
        .filter_map(|z| a.zone_info(z))
        .map(|i| {
            (9..i.nr_free.len())
                .map(|o| i.nr_free[o] << (o - 9))
                .sum::<u64>()
        })
        .sum()
}
