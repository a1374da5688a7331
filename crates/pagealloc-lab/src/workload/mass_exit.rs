//! mass_exit: many processes tearing down their address spaces at once, the second
//! pattern behind Weiner's pcp buddy RFC.
//!
//! # Design
//! One process per CPU faults in `rss_pages` order-0 pages (touched), then barrier 0
//! starts the measured window and every process exits at once, freeing its pages in
//! address order. The RFC's cover letter (docs/mechanisms.md A.15): "an avalanche of
//! free pages on a CPU busy walking page tables. Every time the PCP overflows, the
//! drain acquires the zone->lock and frees pages one by one". With `exit_shift` k > 0
//! a process exits on CPU `cpu + k` (the scheduler moved it since its faults): its
//! pages are sent there before the barrier, so the exit frees pages that another CPU
//! allocated. Each exit starts up to `exit_jitter_ns` after the barrier. `rounds`
//! repeats fault-in and exit (a fork/exit storm), each exit measured. Score: 100 / time from the first barrier to the last exit.

use super::entry::{scaled, Entry};
use super::params::define_params;
use super::program::{script, Fill, Phase, Program};
use super::{
    check_nonzero, invalid, CpuScript, MigrateKind, Op, OpCounts, Params, Rng, ScoreKind, Slot,
    Workload, WorkloadError,
};
use std::collections::VecDeque;

/// The registry entry of mass_exit (many processes exiting at once; the pcp buddy RFC's motivation): no seed measurement, the default machine.
pub(super) const ENTRY: Entry = Entry::new(NAME, |n, s, o| scaled(n, s, o, MassExit::new));

define_params! {
    /// Parameters of mass_exit.
    pub struct MassExitParams {
        /// Pages each process faults in before it exits.
        rss_pages: u64 = 4_096, full 16_384;
        /// The CPU a process exits on, counted from the one it faulted on (mod cpus);
        /// 0: the same CPU.
        exit_shift: u32 = 0, full 0;
        /// Fault-in and exit cycles.
        rounds: u64 = 2, full 2;
        /// Each process exits after a delay uniform in `0..=exit_jitter_ns` from the
        /// barrier (the exits of a job's processes are near, not simultaneous), ns.
        exit_jitter_ns: u64 = 20_000, full 20_000;
    }
}

/// mass_exit: every CPU's process exits at once.
#[derive(Clone, Debug)]
pub struct MassExit {
    params: MassExitParams,
    rss: Slot,
}

const NAME: &str = "mass_exit";

impl MassExit {
    /// mass_exit with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts or 2^30 pages or more per process.
    pub fn new(params: MassExitParams) -> Result<Self, WorkloadError> {
        let p = &params;
        check_nonzero(NAME, "rss_pages", p.rss_pages)?;
        check_nonzero(NAME, "rounds", p.rounds)?;
        if p.rss_pages >= 1 << 30 {
            return Err(invalid(
                NAME,
                "rss_pages",
                p.rss_pages,
                "2^30 pages or more",
            ));
        }
        let rss = p.rss_pages as Slot;
        Ok(MassExit { params, rss })
    }
}

/// One CPU's rounds: fault in, (hand over), barrier, exit.
#[derive(Debug)]
struct Process {
    rss: Slot,
    /// The CPU this process's pages are sent to, when it is not this one.
    to: Option<u32>,
    round: u64,
    rounds: u64,
    jitter_ns: u64,
}

impl Program for Process {
    fn slot_count(&self) -> Slot {
        self.rss
    }

    fn refill(&mut self, rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.round == self.rounds {
            return false;
        }
        let id = 2 * self.round as u32;
        self.round += 1;
        let slots = 0..self.rss;
        out.push_back(Phase::Fill(
            Fill::new(slots.clone(), 0, MigrateKind::Movable).touching(),
        ));
        if let Some(to_cpu) = self.to {
            out.push_back(Phase::Send {
                slots: slots.clone(),
                to_cpu,
            });
        }
        out.push_back(Phase::Op(Op::Barrier { id }));
        if self.jitter_ns > 0 {
            let ns = rng.below(self.jitter_ns.saturating_add(1));
            out.push_back(Phase::Op(Op::Compute { ns }));
        }
        if self.to.is_some() {
            out.push_back(Phase::Recv(slots.clone()));
        }
        out.push_back(Phase::Free(slots));
        out.push_back(Phase::Op(Op::Exit));
        out.push_back(Phase::Op(Op::Barrier { id: id + 1 }));
        true
    }
}

impl Workload for MassExit {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let shift = self.params.exit_shift % cpus.max(1);
        Ok((0..cpus)
            .map(|cpu| {
                script(Process {
                    rss: self.rss,
                    to: (shift != 0).then_some((cpu + shift) % cpus),
                    round: 0,
                    rounds: self.params.rounds,
                    jitter_ns: self.params.exit_jitter_ns,
                })
            })
            .collect())
    }

    fn score_kind(&self) -> ScoreKind {
        ScoreKind::InverseMakespan
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        counts.freed_pages() as f64
    }

    fn inbox_capacity(&self) -> usize {
        // A whole process's pages wait in the inbox of the CPU it exits on.
        if self.params.exit_shift == 0 {
            0
        } else {
            self.params.rss_pages as usize
        }
    }

    fn measured_after(&self) -> Option<u32> {
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::dry_run;

    #[test]
    fn every_process_frees_what_it_faulted_in() {
        for shift in [0, 1, 3] {
            let w = MassExit::new(MassExitParams {
                rss_pages: 16,
                exit_shift: shift,
                rounds: 2,
                exit_jitter_ns: 100,
            })
            .unwrap();
            let s = dry_run(&w, 4, 1);
            assert_eq!(s.total.allocated_pages(), 4 * 16 * 2);
            assert_eq!(s.total.freed_pages(), 4 * 16 * 2);
            assert_eq!(s.total.sends, if shift == 0 { 0 } else { 4 * 16 * 2 });
            assert_eq!(s.total.exits, 8);
        }
    }
}
