//! bulk: every CPU allocates many order-0 pages, then frees them all, repeatedly.
//!
//! # Design
//! 10 000 pages is about 3 × the per-CPU list's `high`, so each round overflows the list
//! both ways: refills on the way up, drains on the way down. The pages are not touched:
//! this measures the allocator alone (the pcp migratetype cache's task-clock and
//! zone-lock time). Score: pages allocated per second.

use std::collections::VecDeque;

use super::entry::{scaled, Entry};
use super::params::define_params;
use super::program::{script, Fill, Phase, Program};
use super::{check_nonzero, CpuScript, MigrateKind, Params, Rng, Slot, Workload, WorkloadError};

/// The registry entry of bulk (the bulk-API micro-benchmark): the seed measured it on Ice Lake, 2 sockets.
pub(super) const ENTRY: Entry =
    Entry::new(NAME, |n, s, o| scaled(n, s, o, Bulk::new)).seed_machine("icx-2s-128");

define_params! {
    /// Parameters of bulk.
    pub struct BulkParams {
        /// Order-0 pages each CPU holds at the top of a round.
        pages: u32 = 10_000, full 10_000;
        /// Rounds per CPU.
        rounds: u32 = 1_000, full 20;
    }
}

/// bulk: allocate-all, free-all rounds on every CPU.
#[derive(Clone, Debug)]
pub struct Bulk {
    params: BulkParams,
}

const NAME: &str = "bulk";

impl Bulk {
    /// bulk with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts.
    pub fn new(params: BulkParams) -> Result<Self, WorkloadError> {
        check_nonzero(NAME, "pages", u64::from(params.pages))?;
        check_nonzero(NAME, "rounds", u64::from(params.rounds))?;
        Ok(Bulk { params })
    }
}

impl Workload for Bulk {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        Ok((0..cpus)
            .map(|_| {
                script(Rounds {
                    pages: self.params.pages,
                    left: self.params.rounds,
                })
            })
            .collect())
    }
}

#[derive(Debug)]
struct Rounds {
    pages: Slot,
    left: u32,
}

impl Program for Rounds {
    fn slot_count(&self) -> Slot {
        self.pages
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        out.push_back(Phase::Fill(Fill::new(
            0..self.pages,
            0,
            MigrateKind::Movable,
        )));
        out.push_back(Phase::Free(0..self.pages));
        true
    }
}
