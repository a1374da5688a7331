//! The thread executor: a workload's scripts on real threads, one per CPU, against any
//! [`PageSource`].
//!
//! # Design
//! Thread `i` plays CPU `i`: it is pinned to the `i`-th CPU this process may use (when
//! there are enough; otherwise the run is unpinned, with a warning), owns CPU `i`'s slot
//! table and RNG ([`cpu_seed`]), and allocates as CPU `i` (`alloc_on(i, …)` for
//! pagealloc). It drives its script exactly by the executor contract of
//! [`crate::workload`]: `Send`/`Recv` go through real bounded MPMC queues (crossbeam
//! `ArrayQueue`, FIFO, capacity [`Workload::inbox_capacity`]), blocked ops spin then
//! yield, barriers check their ids, and a script that finishes while others wait at a
//! barrier fails the run.
//!
//! Measurements, per thread, merged at the end:
//! - [`OpCounts`] for the whole run and the measured window; the score is the
//!   workload's [`Workload::score`] over the window (from the measured barrier, or the
//!   start, to the last `Done`).
//! - With [`ExecOptions::latency`]: every allocation and free is timed (HdrHistogram,
//!   ns; TSC-based clock, see `clock.rs`). For sources with counters, after an op that
//!   took at least [`TRIP_MIN_NS`] the CPU's counters are read: if this CPU took a zone
//!   lock since the last read (`zone_lock` moved: a refill, a drain, a direct zone
//!   allocation or free), the op was one *zone-lock trip* and its duration goes to the
//!   alloc- or free-trip histogram. Ops during which the decay ticker also worked on
//!   this CPU are left out.
//! - A sampler thread records, every [`ExecOptions::sample_ms`], the pages in all
//!   per-CPU lists and CPU 0's `high` and `count` (for the plots over time).
//! - The source's counters before and after (and at the measured barrier).
//!
//! Checks: every block a source returns is in range, aligned and not live already
//! (`live.rs`); every free is of a live block; at the end every slot and inbox is empty,
//! no frame is live, and [`PageSource::validate`] passes. Any failure fails the run.
//!
//! # What it cannot see
//! Cache misses (the simulator models them). Zone-lock trips faster than
//! [`TRIP_MIN_NS`]. With the latency option on, each allocation, free and touch pays two
//! clock reads (about 20 ns) and each slow op a read of the CPU's counters (about
//! 90 ns): compare throughput only between runs with the same option (`--no-latency`
//! turns it off).

mod clock;
mod live;
mod sync;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use hdrhistogram::Histogram;

use crate::peers::{Block, Counters, PageSource, SourceError};
use crate::workload::{
    cpu_seed, CpuScript, Op, OpCounts, OpResult, SplitMix64, Workload, WorkloadError, NR_ORDERS,
};
use crate::Row;

use self::live::LiveMap;
use self::sync::{Abort, IdBarrier, Waiter};

/// Options of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOptions {
    /// CPUs (threads).
    pub cpus: u32,
    /// Root seed; CPU `i` gets `cpu_seed(seed, i)`.
    pub seed: u64,
    /// Time every allocation and free, and find zone-lock trips (see the module docs).
    pub latency: bool,
    /// Period of the per-CPU-list sampler, ms (0: no sampler).
    pub sample_ms: u64,
    /// Pin thread `i` to the `i`-th allowed CPU when there are enough.
    pub pin: bool,
    /// Keep sampling this long after the last script is done (to watch `high` decay).
    pub linger_ms: u64,
}

impl ExecOptions {
    /// `cpus` threads, seed 1, latency on, sampling every 10 ms, pinned, no linger.
    pub fn new(cpus: u32) -> Self {
        ExecOptions {
            cpus,
            seed: 1,
            latency: true,
            sample_ms: 10,
            pin: true,
            linger_ms: 0,
        }
    }
}

/// Why a run failed.
#[derive(Debug)]
pub enum ExecError {
    /// The workload cannot run with these CPUs.
    Workload(WorkloadError),
    /// A source error: unsupported request, refused free, failed validation.
    Source(SourceError),
    /// A block returned by the source failed the executor's check.
    BadBlock(String),
    /// A script broke the executor contract.
    Script(String),
    /// A blocked op waited longer than two minutes.
    Stuck(String),
    /// Another thread failed first.
    Aborted,
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Workload(e) => write!(f, "{e}"),
            ExecError::Source(e) => write!(f, "{e}"),
            ExecError::BadBlock(m) => write!(f, "bad block: {m}"),
            ExecError::Script(m) => write!(f, "script broke the executor contract: {m}"),
            ExecError::Stuck(m) => write!(f, "stuck for {:?}: {m}", sync::STUCK_AFTER),
            ExecError::Aborted => f.write_str("aborted"),
        }
    }
}

impl std::error::Error for ExecError {}

impl From<SourceError> for ExecError {
    fn from(e: SourceError) -> Self {
        ExecError::Source(e)
    }
}

/// One sample of the per-CPU lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcpSample {
    /// Time since the start of the run, ms.
    pub t_ms: u64,
    /// Pages in all per-CPU lists.
    pub total_pages: u64,
    /// CPU 0's `high` (zone 0).
    pub cpu0_high: i32,
    /// CPU 0's `count` (zone 0).
    pub cpu0_count: i32,
}

/// Latency histograms of a run, in ns.
#[derive(Clone, Debug)]
pub struct Latencies {
    /// Every successful allocation.
    pub alloc: Histogram<u64>,
    /// Every free.
    pub free: Histogram<u64>,
    /// Allocations that took a zone lock (refill or direct): one zone-lock trip each.
    pub alloc_trip: Histogram<u64>,
    /// Frees that took a zone lock (drain or direct).
    pub free_trip: Histogram<u64>,
}

impl Latencies {
    fn new() -> Self {
        let h = || Histogram::new(3).expect("3 significant figures are valid");
        Latencies {
            alloc: h(),
            free: h(),
            alloc_trip: h(),
            free_trip: h(),
        }
    }

    fn merge(&mut self, o: &Latencies) {
        let add = |a: &mut Histogram<u64>, b: &Histogram<u64>| {
            a.add(b).expect("auto-resizing histograms add");
        };
        add(&mut self.alloc, &o.alloc);
        add(&mut self.free, &o.free);
        add(&mut self.alloc_trip, &o.alloc_trip);
        add(&mut self.free_trip, &o.free_trip);
    }
}

/// (avg, p99) of a histogram in µs; `None` if empty.
pub fn avg_p99_us(h: &Histogram<u64>) -> Option<(f64, f64)> {
    (!h.is_empty()).then(|| (h.mean() / 1e3, h.value_at_quantile(0.99) as f64 / 1e3))
}

/// What a run measured.
#[derive(Debug)]
pub struct ExecResult {
    /// Workload name.
    pub workload: &'static str,
    /// Source name.
    pub alloc: &'static str,
    /// pagealloc's config string.
    pub config: Option<String>,
    /// CPUs.
    pub cpus: u32,
    /// Root seed.
    pub seed: u64,
    /// Whether the threads were pinned.
    pub pinned: bool,
    /// The workload's score over the measured window.
    pub score: f64,
    /// Its unit.
    pub score_unit: &'static str,
    /// Score of each group when the workload has several (`thp`, `base`).
    pub group_scores: Vec<(String, f64)>,
    /// Seconds of the measured window.
    pub elapsed_s: f64,
    /// Seconds from the start barrier to the last `Done`.
    pub wall_s: f64,
    /// Counts of the whole run, per CPU.
    pub per_cpu: Vec<OpCounts>,
    /// Counts of the whole run.
    pub total: OpCounts,
    /// Counts of the measured window.
    pub measured: OpCounts,
    /// Counters' change over the measured window (sources with counters).
    pub counters: Option<Counters>,
    /// Latencies (with [`ExecOptions::latency`]).
    pub latency: Option<Latencies>,
    /// Seconds spent in allocations and frees, all CPUs (with latency on).
    pub alloc_free_s: f64,
    /// Seconds spent in touches, all CPUs (with latency on).
    pub touch_s: f64,
    /// Mean ns of a successful allocation by order, measured window (latency on).
    pub alloc_avg_ns_by_order: [Option<f64>; NR_ORDERS],
    /// Samples of the per-CPU lists (sources with them).
    pub pcp_samples: Vec<PcpSample>,
    /// Largest total of per-CPU pages seen (samples and the end).
    pub pcp_peak_pages: Option<u64>,
    /// Per-CPU pages at the end, before validation.
    pub pcp_final_pages: Option<u64>,
    /// Warnings to show the user (unpinned run…).
    pub warnings: Vec<String>,
}

impl ExecResult {
    /// The result row (raw values; `compare` normalises).
    pub fn row(&self) -> Row {
        let mut r = Row {
            workload: Some(self.workload.to_owned()),
            alloc: self.alloc.to_owned(),
            config: self.config.clone(),
            cpus: Some(self.cpus),
            machine: Some("host".to_owned()),
            score: Some(self.score),
            score_unit: Some(self.score_unit.to_owned()),
            seed: Some(self.seed),
            wall_s: Some(self.wall_s),
            ..Row::default()
        };
        if let Some(c) = &self.counters {
            let cpu_ns = self.elapsed_s * 1e9 * f64::from(self.cpus);
            r.zone_lock_pct = Some(if cpu_ns > 0.0 {
                100.0 * c.zone_lock_wait_ns as f64 / cpu_ns
            } else {
                0.0
            });
            r.free_high = Some(c.free_high as f64);
            r.alloc_zone = Some(c.alloc_zone as f64);
            r.extra.insert("pcp_refill".into(), c.pcp_refill as f64);
            r.extra.insert("pcp_drain".into(), c.pcp_drain as f64);
            r.extra.insert("zone_lock".into(), c.zone_lock as f64);
            r.extra
                .insert("zone_lock_contended".into(), c.zone_lock_contended as f64);
        }
        r.pcp_peak_pages = self.pcp_peak_pages.map(|v| v as f64);
        r.pcp_final_pages = self.pcp_final_pages.map(|v| v as f64);
        if let Some(l) = &self.latency {
            if let Some((avg, p99)) = avg_p99_us(&l.alloc_trip) {
                r.alloc_lat_avg_us = Some(avg);
                r.alloc_lat_p99_us = Some(p99);
            }
            if let Some((avg, p99)) = avg_p99_us(&l.free_trip) {
                r.free_lat_avg_us = Some(avg);
                r.free_lat_p99_us = Some(p99);
            }
            if let Some((avg, p99)) = avg_p99_us(&l.alloc) {
                r.extra.insert("alloc_op_avg_us".into(), avg);
                r.extra.insert("alloc_op_p99_us".into(), p99);
            }
            if let Some((avg, p99)) = avg_p99_us(&l.free) {
                r.extra.insert("free_op_avg_us".into(), avg);
                r.extra.insert("free_op_p99_us".into(), p99);
            }
            r.extra.insert("alloc_free_s".into(), self.alloc_free_s);
            r.extra.insert("touch_s".into(), self.touch_s);
            for (o, v) in self.alloc_avg_ns_by_order.iter().enumerate() {
                if let Some(ns) = v {
                    r.extra.insert(format!("alloc_avg_us_order{o}"), ns / 1e3);
                }
            }
        }
        for (g, s) in &self.group_scores {
            r.extra.insert(format!("score_{g}"), *s);
        }
        r.extra.insert("elapsed_s".into(), self.elapsed_s);
        r.extra.insert(
            "alloc_failures".into(),
            self.measured.failed_allocs() as f64,
        );
        r
    }
}

/// Frames to give a frame-range source for `workload` on `cpus` CPUs: 512 MiB, or
/// `cpus` × 64 MiB, or what the workload's own size parameters ask for
/// (`fill_pages` at 90 %, `total_pages` at 90 of 96, `region_pages` + a quarter).
pub fn suggested_frames(workload: &dyn Workload, cpus: u32) -> u64 {
    let mut frames = (1u64 << 17).max(u64::from(cpus) << 14);
    for (k, v) in workload.params() {
        let Ok(n) = v.replace('_', "").parse::<u64>() else {
            continue;
        };
        let need = match k {
            "fill_pages" => n * 10 / 9,
            "total_pages" => n * 96 / 90,
            "region_pages" => n + n / 4,
            _ => 0,
        };
        frames = frames.max(need);
    }
    // Whole 2 MiB pageblocks, so THP-backed memory lines up.
    frames.next_multiple_of(512)
}

/// Per-thread output.
struct ThreadOut {
    counts: OpCounts,
    measured: OpCounts,
    /// When the thread began its script, ns since the run's epoch.
    began_ns: u64,
    /// Window start and end, ns since the run's epoch.
    start_ns: u64,
    end_ns: u64,
    latency: Option<Latencies>,
    alloc_free_ns: u64,
    touch_ns: u64,
    alloc_ns_by_order: [(u64, u64); NR_ORDERS],
}

/// Shared state of one run.
struct Shared<'a> {
    source: &'a dyn PageSource,
    inboxes: Vec<Option<ArrayQueue<Block>>>,
    barrier: IdBarrier,
    abort: Abort,
    live: LiveMap,
    measured_after: Option<u32>,
    epoch: Instant,
    opts: &'a ExecOptions,
}

/// Runs `workload` on `source` with `opts`.
///
/// # Errors
/// See [`ExecError`]: the run fails on any broken check.
pub fn run(
    workload: &dyn Workload,
    source: &dyn PageSource,
    opts: &ExecOptions,
) -> Result<ExecResult, ExecError> {
    let n = opts.cpus.max(1);
    let scripts = workload.scripts(n).map_err(ExecError::Workload)?;
    let mut warnings = Vec::new();
    let allowed = sync::allowed_cpus();
    let pinned = opts.pin && allowed.len() >= n as usize;
    if opts.pin && !pinned {
        warnings.push(format!(
            "{n} CPUs asked, this process may use {}: threads run unpinned",
            allowed.len()
        ));
    }
    let cap = workload.inbox_capacity();
    let shared = Shared {
        source,
        inboxes: (0..n)
            .map(|_| (cap > 0).then(|| ArrayQueue::new(cap)))
            .collect(),
        barrier: IdBarrier::new(n),
        abort: Abort::default(),
        live: LiveMap::new(source.handle_space()),
        measured_after: workload.measured_after(),
        epoch: Instant::now(),
        opts,
    };
    if opts.latency {
        clock::calibrate();
    }
    let before = source.counters();
    let start = std::sync::Barrier::new(n as usize + 1);
    let stop_sampler = AtomicBool::new(false);
    let samples: Mutex<Vec<PcpSample>> = Mutex::new(Vec::new());
    let peak = AtomicU64::new(0);

    let outs: Vec<Result<ThreadOut, ExecError>> = std::thread::scope(|s| {
        let handles: Vec<_> = scripts
            .into_iter()
            .enumerate()
            .map(|(i, script)| {
                let shared = &shared;
                let start = &start;
                let host_cpu = allowed.get(i).copied();
                std::thread::Builder::new()
                    .name(format!("cpu{i}"))
                    .spawn_scoped(s, move || {
                        if let (true, Some(c)) = (pinned, host_cpu) {
                            // A failed pin leaves the thread unpinned; the run still counts.
                            let _ = sync::pin_to(c);
                        }
                        start.wait();
                        // A panicking thread stops the others (they may wait for it).
                        let _guard = AbortOnPanic(&shared.abort);
                        let r = drive(i, script, shared);
                        if r.is_err() {
                            shared.abort.set();
                        }
                        r
                    })
                    .expect("spawn an executor thread")
            })
            .collect();
        let sampler = (opts.sample_ms > 0 && source.pcp_pages().is_some()).then(|| {
            let (stop, samples, peak, epoch) = (&stop_sampler, &samples, &peak, shared.epoch);
            s.spawn(move || {
                let period = Duration::from_millis(opts.sample_ms);
                while !stop.load(Ordering::Relaxed) {
                    let total = source.pcp_pages().unwrap_or(0);
                    let p = source.pcp_info(0).unwrap_or_default();
                    peak.fetch_max(total, Ordering::Relaxed);
                    samples.lock().expect("sampler lock").push(PcpSample {
                        t_ms: epoch.elapsed().as_millis() as u64,
                        total_pages: total,
                        cpu0_high: p.high,
                        cpu0_count: p.count,
                    });
                    std::thread::sleep(period);
                }
            })
        });
        start.wait();
        // Join every worker before acting on a panic: the sampler must be stopped
        // first, or the scope would wait for it forever.
        let mut panicked = None;
        let mut outs = Vec::with_capacity(handles.len());
        for h in handles {
            match h.join() {
                Ok(r) => outs.push(r),
                Err(p) => {
                    shared.abort.set();
                    outs.push(Err(ExecError::Aborted));
                    panicked.get_or_insert(p);
                }
            }
        }
        if sampler.is_some() && opts.linger_ms > 0 && panicked.is_none() {
            std::thread::sleep(Duration::from_millis(opts.linger_ms));
        }
        stop_sampler.store(true, Ordering::Relaxed);
        if let Some(h) = sampler {
            h.join().expect("sampler thread");
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
        outs
    });

    // The first real error wins over the `Aborted` of the threads it stopped.
    let mut threads = Vec::with_capacity(outs.len());
    let mut first_err = None;
    for o in outs {
        match o {
            Ok(t) => threads.push(t),
            Err(ExecError::Aborted) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if threads.len() != n as usize {
        return Err(ExecError::Aborted);
    }

    // End-of-run checks.
    for (i, q) in shared.inboxes.iter().enumerate() {
        if let Some(q) = q {
            if !q.is_empty() {
                return Err(ExecError::Script(format!(
                    "{} blocks left in CPU {i}'s inbox",
                    q.len()
                )));
            }
        }
    }
    let live = shared.live.live_frames();
    if live != 0 {
        return Err(ExecError::BadBlock(format!(
            "{live} frames still live at the end"
        )));
    }
    let pcp_final = source.pcp_pages();
    let after = source.counters();
    source.validate()?;

    let per_cpu: Vec<OpCounts> = threads.iter().map(|t| t.counts.clone()).collect();
    let total = OpCounts::sum(&per_cpu);
    if total.allocs != total.frees {
        return Err(ExecError::Script(format!(
            "allocations by order {:?} != frees {:?}",
            total.allocs, total.frees
        )));
    }
    let measured = OpCounts::sum(threads.iter().map(|t| &t.measured));
    let failed = total.failed_allocs();
    if failed > 0 && workload.score_kind() == crate::workload::ScoreKind::Rate {
        warnings.push(format!(
            "{}: {failed} allocations failed (out of memory); the throughput counts only \
             what was allocated (more memory: --memory-mib)",
            workload.name()
        ));
    }
    let window = |idx: &mut dyn Iterator<Item = usize>| {
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for i in idx {
            lo = lo.min(threads[i].start_ns);
            hi = hi.max(threads[i].end_ns);
        }
        (hi.saturating_sub(lo) as f64 / 1e9).max(1e-9)
    };
    let elapsed_s = window(&mut (0..threads.len()));
    let began = threads.iter().map(|t| t.began_ns).min().unwrap_or(0);
    let ended = threads.iter().map(|t| t.end_ns).max().unwrap_or(0);
    let wall_s = ended.saturating_sub(began) as f64 / 1e9;
    let score = workload.score(&measured, elapsed_s);
    let groups = workload.groups(n);
    let group_scores = if groups.len() > 1 {
        groups
            .iter()
            .filter(|g| !g.cpus.is_empty())
            .map(|g| {
                let c = OpCounts::sum(g.cpus.iter().map(|&i| &threads[i as usize].measured));
                let e = window(&mut g.cpus.iter().map(|&i| i as usize));
                (g.name.to_owned(), workload.score(&c, e))
            })
            .collect()
    } else {
        Vec::new()
    };
    let snapshot = shared
        .barrier
        .snapshot
        .lock()
        .expect("snapshot lock")
        .take();
    let counters = match (after, snapshot.or(before)) {
        (Some(a), Some(b)) => Some(a.since(&b)),
        _ => None,
    };
    let latency = opts.latency.then(|| {
        let mut l = Latencies::new();
        for t in &threads {
            if let Some(tl) = &t.latency {
                l.merge(tl);
            }
        }
        l
    });
    let mut by_order = [None; NR_ORDERS];
    if opts.latency {
        for (o, slot) in by_order.iter_mut().enumerate() {
            let (sum, cnt) = threads.iter().fold((0u64, 0u64), |(s, c), t| {
                (s + t.alloc_ns_by_order[o].0, c + t.alloc_ns_by_order[o].1)
            });
            if cnt > 0 {
                *slot = Some(sum as f64 / cnt as f64);
            }
        }
    }
    let pcp_peak = source
        .pcp_pages()
        .map(|_| peak.load(Ordering::Relaxed).max(pcp_final.unwrap_or(0)));
    Ok(ExecResult {
        workload: workload.name(),
        alloc: source.name(),
        config: source.config(),
        cpus: n,
        seed: opts.seed,
        pinned,
        score,
        score_unit: workload.score_unit(),
        group_scores,
        elapsed_s,
        wall_s,
        per_cpu,
        total,
        measured,
        counters,
        latency,
        alloc_free_s: threads.iter().map(|t| t.alloc_free_ns).sum::<u64>() as f64 / 1e9,
        touch_s: threads.iter().map(|t| t.touch_ns).sum::<u64>() as f64 / 1e9,
        alloc_avg_ns_by_order: by_order,
        pcp_samples: samples.into_inner().expect("sampler lock"),
        pcp_peak_pages: pcp_peak,
        pcp_final_pages: pcp_final,
        warnings,
    })
}

/// Sets the abort flag when dropped during a panic.
struct AbortOnPanic<'a>(&'a Abort);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.set();
        }
    }
}

/// Operations shorter than this are not checked for a zone-lock trip: reading a CPU's
/// counters costs about 90 ns, as much as the fast path, and a refill or drain moves a
/// batch (at least a few hundred ns; microseconds at the default batch of 63). What a
/// trip cheaper than this would be — a direct zone allocation of a ready block — goes
/// untimed, and is counted with the next timed trip's counter delta.
pub const TRIP_MIN_NS: u64 = 250;

/// Whether this CPU took a zone lock since the last check (`Some(true)`), did not
/// (`Some(false)`), or the decay ticker worked on it meanwhile so the op cannot be told
/// apart (`None`). Updates `last` to now.
fn zone_trip(src: &dyn PageSource, cpu: usize, last: &mut Option<Counters>) -> Option<bool> {
    let now = src.cpu_counters(cpu)?;
    let prev = last.replace(now)?;
    let ticker = now.decay_drain != prev.decay_drain
        || now.expire_drain != prev.expire_drain
        || now.drain_cpu != prev.drain_cpu;
    (!ticker).then_some(now.zone_lock != prev.zone_lock)
}

/// One CPU's loop.
fn drive(
    cpu: usize,
    mut script: Box<dyn CpuScript>,
    sh: &Shared<'_>,
) -> Result<ThreadOut, ExecError> {
    let src = sh.source;
    let mut rng = SplitMix64::new(cpu_seed(sh.opts.seed, cpu as u32));
    let mut slots: Vec<Option<Block>> = vec![None; script.slot_count() as usize];
    let mut out = ThreadOut {
        counts: OpCounts::default(),
        measured: OpCounts::default(),
        began_ns: 0,
        start_ns: 0,
        end_ns: 0,
        latency: sh.opts.latency.then(Latencies::new),
        alloc_free_ns: 0,
        touch_ns: 0,
        alloc_ns_by_order: [(0, 0); NR_ORDERS],
    };
    let mut measuring = sh.measured_after.is_none();
    let trips = sh.opts.latency && src.cpu_counters(cpu).is_some();
    let mut last_counters = if trips { src.cpu_counters(cpu) } else { None };
    let mut last = OpResult::OK;
    let nslots = slots.len();
    let slot_err = |slot: u32, what: &str| {
        ExecError::Script(format!("CPU {cpu}: {what} slot {slot} (table of {nslots})"))
    };
    out.began_ns = sh.epoch.elapsed().as_nanos() as u64;
    if measuring {
        out.start_ns = out.began_ns;
    }
    loop {
        let op = script.next(last, &mut rng);
        let mut ok = true;
        let mut order = None;
        match op {
            Op::Alloc {
                slot,
                order: o,
                kind,
            } => {
                match slots.get(slot as usize) {
                    Some(None) => {}
                    Some(Some(_)) => return Err(slot_err(slot, "alloc into full")),
                    None => return Err(slot_err(slot, "alloc into missing")),
                }
                let t0 = sh.opts.latency.then(clock::now);
                let r = src.allocate(cpu, o, kind);
                let dt = t0.map(clock::since_ns);
                match r {
                    Ok(b) => {
                        if b.order != o {
                            return Err(ExecError::BadBlock(format!("asked order {o}, got {b:?}")));
                        }
                        sh.live.claim(b).map_err(ExecError::BadBlock)?;
                        slots[slot as usize] = Some(b);
                    }
                    Err(SourceError::OutOfMemory) => ok = false,
                    Err(e) => return Err(e.into()),
                }
                if let Some(dt) = dt {
                    out.alloc_free_ns += dt;
                    let l = out.latency.as_mut().expect("latency on");
                    if ok {
                        record(&mut l.alloc, dt);
                        if measuring {
                            let e = &mut out.alloc_ns_by_order[usize::from(o)];
                            e.0 += dt;
                            e.1 += 1;
                        }
                    }
                    if trips && dt >= TRIP_MIN_NS {
                        if let Some(trip) = zone_trip(src, cpu, &mut last_counters) {
                            if trip {
                                record(&mut l.alloc_trip, dt);
                            }
                        }
                    }
                }
            }
            Op::Free { slot } => {
                let b = slots
                    .get_mut(slot as usize)
                    .ok_or_else(|| slot_err(slot, "free of missing"))?
                    .take()
                    .ok_or_else(|| slot_err(slot, "free of empty"))?;
                sh.live.release(b).map_err(ExecError::BadBlock)?;
                let t0 = sh.opts.latency.then(clock::now);
                src.free(cpu, b)?;
                if let Some(t0) = t0 {
                    let dt = clock::since_ns(t0);
                    out.alloc_free_ns += dt;
                    let l = out.latency.as_mut().expect("latency on");
                    record(&mut l.free, dt);
                    if trips && dt >= TRIP_MIN_NS {
                        if let Some(trip) = zone_trip(src, cpu, &mut last_counters) {
                            if trip {
                                record(&mut l.free_trip, dt);
                            }
                        }
                    }
                }
                order = Some(b.order);
            }
            Op::Touch { slot } => {
                let b = slots
                    .get(slot as usize)
                    .copied()
                    .flatten()
                    .ok_or_else(|| slot_err(slot, "touch of empty"))?;
                let t0 = sh.opts.latency.then(clock::now);
                src.touch(b);
                if let Some(t0) = t0 {
                    out.touch_ns += clock::since_ns(t0);
                }
                order = Some(b.order);
            }
            Op::Compute { ns } => {
                let t0 = Instant::now();
                let d = Duration::from_nanos(ns);
                while t0.elapsed() < d {
                    std::hint::spin_loop();
                }
            }
            Op::Send { slot, to_cpu } => {
                let b = slots
                    .get_mut(slot as usize)
                    .ok_or_else(|| slot_err(slot, "send of missing"))?
                    .take()
                    .ok_or_else(|| slot_err(slot, "send of empty"))?;
                let q = sh
                    .inboxes
                    .get(to_cpu as usize)
                    .ok_or_else(|| ExecError::Script(format!("CPU {cpu}: send to CPU {to_cpu}")))?
                    .as_ref()
                    .ok_or_else(|| {
                        ExecError::Script(format!("CPU {cpu}: send with inbox capacity 0"))
                    })?;
                let mut item = b;
                let mut w = Waiter::new();
                while let Err(back) = q.push(item) {
                    item = back;
                    w.wait(&sh.abort, &|| {
                        format!("CPU {cpu} sending to full inbox of CPU {to_cpu}")
                    })?;
                }
                order = Some(b.order);
            }
            Op::Recv { slot } => {
                match slots.get(slot as usize) {
                    Some(None) => {}
                    Some(Some(_)) => return Err(slot_err(slot, "recv into full")),
                    None => return Err(slot_err(slot, "recv into missing")),
                }
                let q = sh.inboxes[cpu].as_ref().ok_or_else(|| {
                    ExecError::Script(format!("CPU {cpu}: recv with inbox capacity 0"))
                })?;
                let mut w = Waiter::new();
                let b = loop {
                    if let Some(b) = q.pop() {
                        break b;
                    }
                    w.wait(&sh.abort, &|| {
                        format!("CPU {cpu} waiting on its empty inbox")
                    })?;
                };
                slots[slot as usize] = Some(b);
                order = Some(b.order);
            }
            Op::Barrier { id } => {
                let snap = sh.measured_after == Some(id);
                sh.barrier.wait(cpu, id, &sh.abort, || {
                    if snap {
                        *sh.barrier.snapshot.lock().expect("snapshot lock") = src.counters();
                    }
                })?;
            }
            Op::Exit => {}
            Op::Done => {
                if let Some(s) = slots.iter().position(Option::is_some) {
                    return Err(ExecError::Script(format!(
                        "CPU {cpu}: done with a block in slot {s}"
                    )));
                }
                out.end_ns = sh.epoch.elapsed().as_nanos() as u64;
                sh.barrier.mark_done();
                return Ok(out);
            }
        }
        out.counts.record(&op, ok, order);
        if measuring {
            out.measured.record(&op, ok, order);
        }
        if let (Some(m), Op::Barrier { id }) = (sh.measured_after, op) {
            if m == id && !measuring {
                measuring = true;
                out.start_ns = sh.epoch.elapsed().as_nanos() as u64;
            }
        }
        last = OpResult { ok };
    }
}

fn record(h: &mut Histogram<u64>, ns: u64) {
    // Auto-resizing histograms accept any value.
    let _ = h.record(ns.max(1));
}

/// Convenience: a source built for `workload` with the suggested frames, then run.
///
/// # Errors
/// Build or run errors.
pub fn run_named(
    workload: &dyn Workload,
    alloc: &str,
    config: &pagealloc::Config,
    opts: &ExecOptions,
    frames: Option<u64>,
) -> Result<ExecResult, ExecError> {
    let name = crate::peers::canonical(alloc)?;
    let spec = crate::peers::SourceSpec {
        name,
        config: config.clone(),
        cpus: opts.cpus as usize,
        frames: frames.unwrap_or_else(|| suggested_frames(workload, opts.cpus)),
        memory: true,
    };
    let source: Arc<dyn PageSource> = Arc::from(crate::peers::build(&spec)?);
    run(workload, &*source, opts)
}

/// Pins the calling thread to the `index`-th CPU this process may use, if the process
/// may use at least `of` CPUs (else leaves it unpinned). Returns whether it pinned.
pub fn pin_current_thread(index: usize, of: usize) -> bool {
    let allowed = sync::allowed_cpus();
    allowed.len() >= of && allowed.get(index).is_some_and(|&c| sync::pin_to(c).is_ok())
}

/// How many CPUs this process may run on.
pub fn host_cpus() -> usize {
    sync::allowed_cpus().len()
}
