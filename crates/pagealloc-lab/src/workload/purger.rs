//! purger: jemalloc's background purge, the pattern behind Weiner's pcp buddy RFC.
//!
//! # Design
//! Workers (every CPU but the last `purgers`) fault pages in, use them and hand them
//! back to their user-space allocator, whose caches a few purger threads periodically
//! return to the kernel (`madvise(MADV_DONTNEED)` of dirty extents): the pages were
//! allocated on the workers' CPUs and are freed on the purgers'. The RFC's cover letter
//! (docs/mechanisms.md A.15): "Both sides use their own PCPs - one side depletes them,
//! the other one overfills them. Both sides routinely hit the zone->locked slowpath."
//!
//! Per round a worker faults in `batch_pages` order-0 pages (touching each: the fault
//! zeroes it), computes `work_ns` per page on average (uniform in ½–1½ × `work_ns`,
//! drawn per round: the workers drift apart), and sends the batch to its purger (worker
//! `w` to purger `w % purgers`); a purger receives the pages one by one and frees each. A
//! worker's sends block while its purger's inbox holds `inbox_batches` batches: the
//! purge keeps up or the workers wait for it. Score: pages allocated per second.

use super::entry::{scaled, Entry};
use super::params::define_params;
use super::program::{script, Fill, Phase, Program};
use super::{
    check_cpus, check_nonzero, invalid, CpuScript, MigrateKind, Op, Params, Rng, Slot, Workload,
    WorkloadError,
};
use std::collections::VecDeque;

/// The registry entry of purger (a jemalloc-style purger: one thread frees what the others allocated; the pcp buddy RFC's motivation): no seed measurement, the default machine.
pub(super) const ENTRY: Entry = Entry::new(NAME, |n, s, o| scaled(n, s, o, Purger::new));

define_params! {
    /// Parameters of purger.
    pub struct PurgerParams {
        /// Purger threads, on the last CPUs (jemalloc's default is one background
        /// thread per four arenas; "a handful" in the RFC).
        purgers: u32 = 1, full 4;
        /// Pages a worker faults in and hands back per round (one dirty extent).
        batch_pages: u64 = 256, full 512;
        /// Rounds per worker.
        rounds: u64 = 40, full 64;
        /// A worker's compute per page between the fault and the hand-back, ns.
        work_ns: u64 = 200, full 200;
        /// Batches a purger's inbox holds before the workers' sends block.
        inbox_batches: u64 = 8, full 8;
    }
}

/// purger: pages allocated on the workers' CPUs, freed on the purgers'.
#[derive(Clone, Debug)]
pub struct Purger {
    params: PurgerParams,
    batch: Slot,
}

const NAME: &str = "purger";

impl Purger {
    /// purger with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts or a batch of 2^32 pages or more.
    pub fn new(params: PurgerParams) -> Result<Self, WorkloadError> {
        let p = &params;
        check_nonzero(NAME, "purgers", u64::from(p.purgers))?;
        check_nonzero(NAME, "batch_pages", p.batch_pages)?;
        check_nonzero(NAME, "rounds", p.rounds)?;
        check_nonzero(NAME, "inbox_batches", p.inbox_batches)?;
        let batch = Slot::try_from(p.batch_pages)
            .map_err(|_| invalid(NAME, "batch_pages", p.batch_pages, "2^32 pages or more"))?;
        if p.batch_pages.saturating_mul(p.inbox_batches) > 1 << 30 {
            return Err(invalid(
                NAME,
                "inbox_batches",
                p.inbox_batches,
                "inbox of 2^30 pages or more",
            ));
        }
        Ok(Purger { params, batch })
    }
}

/// One CPU's program: a worker's rounds or a purger's receive-and-free steps.
#[derive(Debug)]
struct Role {
    batch: Slot,
    /// Worker: rounds left; purger: pages left.
    left: u64,
    /// Worker: (purger CPU, compute per page); purger: `None`.
    worker: Option<(u32, u64)>,
}

impl Program for Role {
    fn slot_count(&self) -> Slot {
        if self.worker.is_some() {
            self.batch
        } else {
            1
        }
    }

    fn refill(&mut self, rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        let slots = 0..self.batch;
        match self.worker {
            Some((to_cpu, ns)) => {
                out.push_back(Phase::Fill(
                    Fill::new(slots.clone(), 0, MigrateKind::Movable).touching(),
                ));
                let mean = ns.saturating_mul(u64::from(self.batch));
                out.push_back(Phase::Op(Op::Compute {
                    ns: mean / 2 + rng.below(mean.saturating_add(1)),
                }));
                out.push_back(Phase::Send { slots, to_cpu });
            }
            None => {
                // One page at a time: a page received stays in the inbox's account
                // until it is freed, so a purger holding a batch would keep its
                // senders waiting.
                out.push_back(Phase::Recv(0..1));
                out.push_back(Phase::Free(0..1));
            }
        }
        true
    }
}

impl Workload for Purger {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let p = &self.params;
        check_cpus(NAME, p.purgers + 1, cpus)?;
        let workers = cpus - p.purgers;
        Ok((0..cpus)
            .map(|cpu| {
                let role = if cpu < workers {
                    Role {
                        batch: self.batch,
                        left: p.rounds,
                        worker: Some((workers + cpu % p.purgers, p.work_ns)),
                    }
                } else {
                    // The workers whose purger this is: w with w % purgers == this one.
                    let k = cpu - workers;
                    let mine = (workers - k).div_ceil(p.purgers);
                    Role {
                        batch: self.batch,
                        left: p.rounds * u64::from(mine) * p.batch_pages,
                        worker: None,
                    }
                };
                script(role)
            })
            .collect())
    }

    fn inbox_capacity(&self) -> usize {
        (self.params.batch_pages * self.params.inbox_batches) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::dry_run;

    #[test]
    fn every_page_a_worker_allocates_a_purger_frees() {
        let w = Purger::new(PurgerParams {
            purgers: 2,
            batch_pages: 8,
            rounds: 3,
            ..PurgerParams::default()
        })
        .unwrap();
        let s = dry_run(&w, 7, 1);
        // 5 workers × 3 rounds × 8 pages, each sent once and freed by a purger.
        assert_eq!(s.total.allocated_pages(), 5 * 3 * 8);
        assert_eq!(s.total.sends, 5 * 3 * 8);
        assert_eq!(s.total.freed_pages(), 5 * 3 * 8);
    }
}
