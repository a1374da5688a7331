//! high_order_stress: how often, and how fast, order-9 requests succeed in fragmented
//! memory (the cost of merge skipping).
//!
//! # Design
//! 1. All CPUs together fill `fill_pages` with long-lived movable order-0 pages, touched;
//!    interleaving the CPUs' requests is the "mix of tasks". Barrier 0.
//! 2. Each CPU frees each of its pages with probability `release_percent`, scattering
//!    holes. Barrier 1: the measured window starts.
//! 3. The first `attempt_cpus` CPUs request an `attempt_order` block every `interval_ns`,
//!    `attempts` times, keeping the successes (as mmtests' stress-highalloc does, so a
//!    success is not simply handed back to the next attempt). The others wait. Barrier 2.
//! 4. Everything is freed.
//!
//! The spec's two runs are `interval_ns` = 100 ms and 1 ms. Score: the success rate in
//! %; the executors report the time per success from their latency records.

use super::entry::{scaled, Entry};
use super::params::define_params;
use super::program::{script, Fill, Once, Phase};
use super::{
    check_cpus, check_nonzero, check_order, invalid, share_slots, CpuScript, MigrateKind, Op,
    OpCounts, Params, ScoreKind, Workload, WorkloadError,
};

/// The registry entry of high_order_stress: no seed machine, the desktop default.
pub(super) const ENTRY: Entry = Entry::new(NAME, |n, s, o| scaled(n, s, o, HighOrderStress::new));

define_params! {
    /// Parameters of high_order_stress.
    pub struct HighOrderStressParams {
        /// Order-0 pages filled, all CPUs together: about 90 % of the memory the
        /// executor gives the allocator (full scale: 3.5 GiB of desktop-8's 4 GiB).
        fill_pages: u64 = 131_072, full 917_504;
        /// Share of the filled pages released before the attempts, in %.
        release_percent: u32 = 50, full 50;
        /// Unmovable pages among the fill, per mille (0: all movable, as in the spec).
        unmovable_per_mille: u32 = 0, full 0;
        /// Order of the attempts.
        attempt_order: u8 = 9, full 9;
        /// Attempts per attempting CPU.
        attempts: u32 = 100, full 500;
        /// Compute between attempts, ns (spec: 100 ms and 1 ms).
        interval_ns: u64 = 1_000_000, full 1_000_000;
        /// CPUs making attempts (the first ones).
        attempt_cpus: u32 = 1, full 1;
    }
}

/// high_order_stress: fragment memory, then try high-order allocations.
#[derive(Clone, Debug)]
pub struct HighOrderStress {
    params: HighOrderStressParams,
}

const NAME: &str = "high_order_stress";

impl HighOrderStress {
    /// high_order_stress with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts, an order above 10, or a
    /// percentage or per-mille value out of range.
    pub fn new(params: HighOrderStressParams) -> Result<Self, WorkloadError> {
        let p = &params;
        check_nonzero(NAME, "attempts", u64::from(p.attempts))?;
        check_nonzero(NAME, "attempt_cpus", u64::from(p.attempt_cpus))?;
        check_order(NAME, "attempt_order", p.attempt_order)?;
        if p.release_percent > 100 {
            return Err(invalid(
                NAME,
                "release_percent",
                p.release_percent,
                "at most 100",
            ));
        }
        if p.unmovable_per_mille > 1000 {
            return Err(invalid(
                NAME,
                "unmovable_per_mille",
                p.unmovable_per_mille,
                "at most 1000",
            ));
        }
        Ok(HighOrderStress { params })
    }
}

impl Workload for HighOrderStress {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let p = &self.params;
        check_cpus(NAME, p.attempt_cpus, cpus)?;
        let mut scripts = Vec::with_capacity(cpus as usize);
        for cpu in 0..cpus {
            let fill = share_slots(NAME, "fill_pages", p.fill_pages, cpus, cpu, "CPU")?;
            let attempts = if cpu < p.attempt_cpus { p.attempts } else { 0 };
            let slots = fill
                .checked_add(attempts)
                .ok_or_else(|| invalid(NAME, "attempts", p.attempts, "too many slots"))?;
            let mut phases = vec![
                Phase::Fill(
                    Fill::new(0..fill, 0, MigrateKind::Movable)
                        .touching()
                        .unmovable_per_mille(p.unmovable_per_mille),
                ),
                Phase::Op(Op::Barrier { id: 0 }),
                Phase::FreeRandom {
                    slots: 0..fill,
                    percent: p.release_percent,
                },
                Phase::Op(Op::Barrier { id: 1 }),
            ];
            for a in 0..attempts {
                let slot = fill + a;
                phases.push(Phase::Fill(Fill::new(
                    slot..slot + 1,
                    p.attempt_order,
                    MigrateKind::Movable,
                )));
                if p.interval_ns > 0 {
                    phases.push(Phase::Op(Op::Compute { ns: p.interval_ns }));
                }
            }
            phases.push(Phase::Op(Op::Barrier { id: 2 }));
            phases.push(Phase::Free(0..slots));
            scripts.push(script(Once::new(slots, phases)));
        }
        Ok(scripts)
    }

    fn score_kind(&self) -> ScoreKind {
        ScoreKind::Absolute
    }

    fn score_unit(&self) -> &'static str {
        "% success"
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        let order = usize::from(self.params.attempt_order);
        let ok = counts.allocs[order];
        let tried = ok + counts.alloc_failures[order];
        if tried == 0 {
            return 0.0;
        }
        100.0 * ok as f64 / tried as f64
    }

    fn measured_after(&self) -> Option<u32> {
        Some(1)
    }
}
