//! zonelist_hog: threads together touch most of a many-node machine's memory, so nodes
//! fill and allocations fall back along the zonelist (the full-zone cache's case).
//!
//! # Design
//! The first `threads` CPUs each fault in their share of `total_pages` (order 0, movable,
//! touched) in one loop, then free it and exit; the other CPUs are idle. Allocations are
//! expected to fail near the end: a failure is retried after `backoff_ns` of compute
//! (another thread may free, or the allocator may reclaim), up to `retries` times in a
//! row, then the thread stops faulting and frees what it has. The executors report
//! system (allocator), user (touch) and elapsed time; the score is 100 / elapsed.
//! The spec's grid: threads ∈ {1, 19, 37, 55} × {12, 38, 64, 90} GiB of 96.
//!
//! The start is the real program's: the main thread creates the threads one after
//! another (`pthread_create`, i.e. `clone`), and each starts when the scheduler wakes
//! its idle CPU. So thread k computes `(k + 1) × create_ns` (the main thread has created
//! threads 0..=k) plus a wake-up jitter drawn uniformly from `0..wake_jitter_ns` with the
//! CPU's seeded RNG before its first fault: the seed picks one of the program's start
//! orders, and a run replays exactly from its seed. Defaults, from published figures
//! (`docs/sim-cost-model.md` §11): `create_ns` 9 µs, Lemire's measured cost of creating
//! and running a thread on a Skylake server under Linux; `wake_jitter_ns` 170 µs, the
//! worst-case C6 exit latency of Ice Lake server (`intel_idle`'s `icx_cstates`, since
//! 5.13), the longest an idle CPU in its deepest state takes to wake. The start is
//! charged as compute, so it appears in user time (under 0.7 ms per thread).

use std::collections::VecDeque;

use super::entry::{scaled, Entry};
use super::params::define_params;
use super::program::{script, Fill, Once, Phase, Program};
use super::{
    check_cpus, check_nonzero, share_slots, CpuScript, MigrateKind, Op, Params, Rng, ScoreKind,
    Slot, Workload, WorkloadError,
};

/// The registry entry of zonelist_hog: the seed measured it on a 28-node SN2.
pub(super) const ENTRY: Entry =
    Entry::new(NAME, |n, s, o| scaled(n, s, o, ZonelistHog::new)).seed_machine("sn2-28n-56");

define_params! {
    /// Parameters of zonelist_hog.
    pub struct ZonelistHogParams {
        /// Threads; 0 = one per CPU. Spec: 1, 19, 37 or 55 on sn2-28n-56.
        threads: u32 = 0, full 55;
        /// Pages touched by all threads together. Full scale: 90 GiB of 96.
        total_pages: u64 = 262_144, full 23_592_960;
        /// Retries of a failed allocation before the thread gives up.
        retries: u32 = 8, full 8;
        /// Compute before each retry, ns.
        backoff_ns: u64 = 10_000, full 10_000;
        /// The main thread's cost of creating one thread (`pthread_create`), ns: thread
        /// k starts `(k + 1)` of these after t = 0.
        create_ns: u64 = 9_000, full 9_000;
        /// Upper bound of the seeded, uniform wake-up jitter of each thread's start, ns
        /// (0: none).
        wake_jitter_ns: u64 = 170_000, full 170_000;
    }
}

/// A thread of the hog: waits for its creation and wake-up, then runs `phases` once.
#[derive(Debug)]
struct Started {
    /// Creation delay: `(k + 1) × create_ns` for thread k.
    delay_ns: u64,
    /// Bound of the wake-up jitter drawn at the first batch.
    wake_jitter_ns: u64,
    slot_count: Slot,
    /// The thread's body; empty once issued.
    phases: Vec<Phase>,
}

impl Program for Started {
    fn slot_count(&self) -> Slot {
        self.slot_count
    }

    fn refill(&mut self, rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.phases.is_empty() {
            return false;
        }
        let jitter = match self.wake_jitter_ns {
            0 => 0,
            n => rng.below(n),
        };
        let ns = self.delay_ns.saturating_add(jitter);
        if ns > 0 {
            out.push_back(Phase::Op(Op::Compute { ns }));
        }
        out.extend(self.phases.drain(..));
        true
    }
}

/// zonelist_hog: fill most of memory from many threads.
#[derive(Clone, Debug)]
pub struct ZonelistHog {
    params: ZonelistHogParams,
}

const NAME: &str = "zonelist_hog";

impl ZonelistHog {
    /// zonelist_hog with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero pages.
    pub fn new(params: ZonelistHogParams) -> Result<Self, WorkloadError> {
        check_nonzero(NAME, "total_pages", params.total_pages)?;
        Ok(ZonelistHog { params })
    }
}

impl Workload for ZonelistHog {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let p = &self.params;
        let threads = match p.threads {
            0 => cpus,
            n => n,
        };
        check_cpus(NAME, threads.max(1), cpus)?;
        (0..cpus)
            .map(|cpu| {
                if cpu >= threads {
                    return Ok(script(Once::idle()));
                }
                let pages =
                    share_slots(NAME, "total_pages", p.total_pages, threads, cpu, "thread")?;
                Ok(script(Started {
                    delay_ns: (u64::from(cpu) + 1).saturating_mul(p.create_ns),
                    wake_jitter_ns: p.wake_jitter_ns,
                    slot_count: pages,
                    phases: vec![
                        Phase::Fill(
                            Fill::new(0..pages, 0, MigrateKind::Movable)
                                .touching()
                                .retry(p.retries, p.backoff_ns),
                        ),
                        Phase::Free(0..pages),
                        Phase::Op(Op::Exit),
                    ],
                }))
            })
            .collect()
    }

    fn score_kind(&self) -> ScoreKind {
        ScoreKind::InverseMakespan
    }
}
