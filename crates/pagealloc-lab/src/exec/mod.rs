//! The thread executor: a workload's scripts on real threads, one per CPU, against any
//! [`PageSource`].
//!
//! # Design
//! Thread `i` plays CPU `i`: it is pinned to the `i`-th CPU this process may use (when
//! there are enough; otherwise the run is unpinned, with a warning), owns CPU `i`'s slot
//! table and RNG (a [`CpuDriver`], the executor contract of [`crate::workload`] written
//! once), and allocates as CPU `i` (`alloc_on(i, …)` for pagealloc): the thread is the
//! driver's [`Backend`]. `Send`/`Recv` go through real bounded MPMC queues (crossbeam
//! `ArrayQueue`, FIFO, capacity [`Workload::inbox_capacity`]); a blocked `Send` or
//! `Recv` sleeps on the inbox's wait queue (a condition variable: off the CPU, as a
//! task blocked in a socket call is) until the other side wakes it: a receiver when a
//! block arrives, a sender when the receiver has freed enough of what it held for the
//! inbox to be down to [`Workload::inbox_resume`] (queued, or received and not yet
//! freed: an skb counts against its socket until freed).
//! A blocked barrier spins then yields; barriers check their ids, and a script that
//! finishes while others wait at a barrier fails the run.
//!
//! Measurements, per thread, merged at the end into a row by [`Row::from_measurement`]
//! (the simulator's constructor too):
//! - [`OpCounts`] for the whole run and the measured window; the score is the
//!   workload's [`Workload::score`] over the window (from the measured barrier, or the
//!   start, to the last `Done`).
//! - The thread's CPU time in its window (`CLOCK_THREAD_CPUTIME_ID`): the zone lock %
//!   is the counters' `zone_lock_wait_ns` ÷ the threads' CPU time.
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
//! The files: this one holds the options and [`run`]; `thread.rs` one CPU's thread (its
//! [`Backend`](crate::workload::Backend) and loop); `outcome.rs` the result and the
//! errors; `sync.rs` the barrier, wait queues and pinning; `live.rs` the live-block
//! map; `clock.rs` the clocks.
//!
//! # What it cannot see
//! Cache misses (the simulator models them). Zone-lock trips faster than
//! [`TRIP_MIN_NS`]. With the latency option on, each allocation, free and touch pays two
//! clock reads (about 20 ns) and each slow op a read of the CPU's counters (about
//! 90 ns): compare throughput only between runs with the same option (`--no-latency`
//! turns it off).

pub(crate) mod clock;
mod live;
mod outcome;
mod sync;
mod thread;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use crate::peers::PageSource;
use crate::row::CpuWindow;
use crate::workload::{OpCounts, TraceHash, Workload, NR_ORDERS};
use crate::Row;

use self::live::LiveMap;
use self::sync::{Abort, IdBarrier, WaitQueue};
use self::thread::{drive, AbortOnPanic, Inbox, Shared, ThreadOut};
pub use outcome::{BadBlock, ExecError, ExecResult, Latencies, PcpSample};
pub use thread::TRIP_MIN_NS;

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
            .map(|_| {
                (cap > 0).then(|| Inbox {
                    queue: ArrayQueue::new(cap),
                    held: AtomicUsize::new(0),
                    data: WaitQueue::default(),
                    space: WaitQueue::default(),
                })
            })
            .collect(),
        resume: workload.inbox_resume(),
        capacity: cap,
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
                        cpu0_high_min: p.high_min,
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
            if !q.queue.is_empty() {
                return Err(ExecError::Script(format!(
                    "{} blocks left in CPU {i}'s inbox",
                    q.queue.len()
                )));
            }
        }
    }
    let live = shared.live.live_frames();
    if live != 0 {
        return Err(BadBlock::Leaked(live).into());
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
    let windows: Vec<CpuWindow> = threads.iter().map(|t| t.window.clone()).collect();
    let measured = OpCounts::sum(windows.iter().map(|w| &w.counts));
    let failed = total.failed_allocs();
    if failed > 0 && workload.score_kind() == crate::workload::ScoreKind::Rate {
        warnings.push(format!(
            "{}: {failed} allocations failed (out of memory); the throughput counts only \
             what was allocated (more memory: --memory)",
            workload.name()
        ));
    }
    let began = threads.iter().map(|t| t.began_ns).min().unwrap_or(0);
    let ended = windows.iter().map(|w| w.end_ns).max().unwrap_or(0);
    let wall_s = ended.saturating_sub(began) as f64 / 1e9;
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
    let mut r = ExecResult {
        workload: workload.name(),
        alloc: source.name(),
        config: source.config(),
        cpus: n,
        seed: opts.seed,
        pinned,
        score: 0.0,
        score_unit: workload.score_unit(),
        elapsed_s: 0.0,
        wall_s,
        cpu_time_ns: threads.iter().map(|t| t.cpu_ns).sum(),
        trace_hash: TraceHash::combine(threads.iter().map(|t| t.trace_hash)),
        windows,
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
        row: Row::default(),
    };
    r.row = r.measure(workload);
    r.score = r.row.score.unwrap_or(0.0);
    r.elapsed_s = r.row.extra["elapsed_s"];
    Ok(r)
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
