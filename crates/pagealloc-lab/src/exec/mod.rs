//! The thread executor: a workload's scripts on real threads, one per CPU, against any
//! [`PageSource`].
//!
//! # Design
//! Thread `i` plays CPU `i`: it is pinned to the `i`-th CPU this process may use (when
//! there are enough; otherwise the run is unpinned, with a warning), owns CPU `i`'s slot
//! table and RNG (a [`CpuDriver`](crate::workload::CpuDriver), the executor contract of [`crate::workload`] written
//! once), and allocates as CPU `i` (`alloc_on(i, …)` for pagealloc): the thread is the
//! driver's [`Backend`](crate::workload::Backend). `Send`/`Recv` go through real bounded MPMC queues (crossbeam
//! `ArrayQueue`, FIFO, capacity [`Workload::inbox_capacity`]); a blocked `Send` or
//! `Recv` sleeps on the inbox's wait queue (a condition variable: off the CPU, as a
//! task blocked in a socket call is) until the other side wakes it: a receiver when a
//! block arrives, a sender when the receiver has freed enough of what it held for the
//! inbox to be down to [`Workload::inbox_resume`] (queued, or received and not yet
//! freed: an skb counts against its socket until freed).
//! A blocked barrier spins then yields; barriers check their ids, and a script that
//! finishes while others wait at a barrier fails the run.
//!
//! Measurements, per thread, merged at the end into a row by [`Row::from_measurement`](crate::Row::from_measurement)
//! (the simulator's constructor too):
//! - [`OpCounts`](crate::workload::OpCounts) for the whole run and the measured window; the score is the
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
//! The files: this one holds the options; `thread.rs` the run ([`run`]: one thread per
//! CPU, its [`Backend`](crate::workload::Backend) and loop); `outcome.rs` the result and
//! the errors; `sync.rs` the barrier, wait queues and pinning; `live.rs` the live-block
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

use std::sync::Arc;

use crate::peers::PageSource;
use crate::workload::Workload;

pub use outcome::{BadBlock, ExecError, ExecResult, Latencies, PcpSample};
pub use thread::{run, TRIP_MIN_NS};

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
