//! thp_mix: page_fault1 with THP on half the CPUs and order-0 pages on the other half,
//! after breaking all high-order blocks (the cost of merge skipping to THP).
//!
//! # Design
//! Prelude: every CPU allocates order-0 pages until `break_pages_per_cpu` or the first
//! failure, then (barrier 0) frees them all, so that every high-order block has been
//! split and must be merged again; barrier 1 starts the measured window. Then CPUs
//! `0..thp_cpus` run page_fault1 with order-9 blocks and the others with order 0, over
//! the same memory per loop. Score: pages per second, reported per group (`thp`, `base`).

use std::collections::VecDeque;

use super::entry::{scaled, Entry};
use super::page_fault1::{pages_faulted, FaultLoop, PageFault1Params};
use super::params::define_params;
use super::program::{script, Fill, Phase, Program};
use super::{
    check_cpus, check_nonzero, invalid, CpuGroup, CpuScript, MigrateKind, Op, OpCounts, Params,
    Rng, Slot, Workload, WorkloadError,
};

/// The registry entry of thp_mix: the seed measured it on Skylake, 2 sockets.
pub(super) const ENTRY: Entry =
    Entry::new(NAME, |n, s, o| scaled(n, s, o, ThpMix::new)).seed_machine("skx-2s-112");

define_params! {
    /// Parameters of thp_mix.
    pub struct ThpMixParams {
        /// CPUs faulting order-9 blocks; 0 = half of them. Spec: 56 of 112.
        thp_cpus: u32 = 0, full 56;
        /// Memory faulted in per loop, in base pages, both groups; a multiple of 512.
        pages_per_loop: u32 = 8_192, full 32_768;
        /// Loops per CPU.
        loops: u32 = 128, full 4;
        /// Prelude: order-0 pages each CPU takes (or fewer, at the first failure) to
        /// split every high-order block; full scale: skx-2s-112's 64 GiB / 112.
        break_pages_per_cpu: u32 = 16_384, full 149_796;
        /// 1: page-table pages as page_fault1's `pte_tables`; 0: none (the default).
        pte_tables: u8 = 0, full 0;
        /// Work of each order-0 fault outside the allocator, ns: page_fault1's
        /// `fault_work_ns` (0, the default: none).
        fault_work_ns: u32 = 0, full 0;
        /// The same for each THP fault, ns (0: none).
        thp_fault_work_ns: u32 = 0, full 0;
        /// Work of the unmap per block (order 0 or THP), ns: page_fault1's
        /// `unmap_work_ns` (0: none).
        unmap_work_ns: u32 = 0, full 0;
        /// 1: each unmap takes the mmu_gather's pages, as page_fault1's
        /// `gather_pages`; 0: none (the default).
        gather_pages: u8 = 0, full 0;
        /// The order-0 group's page tables freed after the unmap of the loop this many
        /// later (RCU's grace period): page_fault1's `table_free_lag` (0: none).
        table_free_lag: u32 = 0, full 0;
    }
}

/// Order of the THP group's blocks.
const THP_ORDER: u8 = 9;

/// thp_mix: THP and order-0 page_fault1 side by side.
#[derive(Clone, Debug)]
pub struct ThpMix {
    params: ThpMixParams,
}

const NAME: &str = "thp_mix";

impl ThpMix {
    /// thp_mix with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts or a loop size that is not a
    /// multiple of 512 pages.
    pub fn new(params: ThpMixParams) -> Result<Self, WorkloadError> {
        check_nonzero(NAME, "loops", u64::from(params.loops))?;
        check_nonzero(NAME, "pages_per_loop", u64::from(params.pages_per_loop))?;
        if params.pages_per_loop % (1 << THP_ORDER) != 0 {
            return Err(invalid(
                NAME,
                "pages_per_loop",
                params.pages_per_loop,
                "must be a multiple of 512",
            ));
        }
        Ok(ThpMix { params })
    }

    fn thp_cpus(&self, cpus: u32) -> u32 {
        match self.params.thp_cpus {
            0 => cpus / 2,
            n => n,
        }
    }

    fn fault_params(&self, order: u8) -> PageFault1Params {
        PageFault1Params {
            pages_per_loop: self.params.pages_per_loop,
            loops: self.params.loops,
            order,
            pte_tables: self.params.pte_tables,
            fault_work_ns: if order == THP_ORDER {
                self.params.thp_fault_work_ns
            } else {
                self.params.fault_work_ns
            },
            unmap_work_ns: self.params.unmap_work_ns,
            gather_pages: self.params.gather_pages,
            table_free_lag: self.params.table_free_lag,
            shared_lines: 0,
            line_transfer_ns: 0,
            fault_shared_lines: 0,
        }
    }
}

impl Workload for ThpMix {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let thp = self.thp_cpus(cpus);
        check_cpus(NAME, thp, cpus)?;
        Ok((0..cpus)
            .map(|cpu| {
                let order = if cpu < thp { THP_ORDER } else { 0 };
                script(Mixed {
                    prelude: Some(self.params.break_pages_per_cpu),
                    faults: FaultLoop::new(&self.fault_params(order)),
                })
            })
            .collect())
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        pages_faulted(counts, self.params.pte_tables)
    }

    fn groups(&self, cpus: u32) -> Vec<CpuGroup> {
        let thp = self.thp_cpus(cpus).min(cpus);
        vec![
            CpuGroup {
                name: "thp",
                cpus: (0..thp).collect(),
            },
            CpuGroup {
                name: "base",
                cpus: (thp..cpus).collect(),
            },
        ]
    }

    fn measured_after(&self) -> Option<u32> {
        Some(1)
    }
}

/// The prelude, then the page_fault1 loop.
#[derive(Debug)]
struct Mixed {
    /// Pages of the prelude, until it has been emitted.
    prelude: Option<Slot>,
    faults: FaultLoop,
}

impl Program for Mixed {
    fn slot_count(&self) -> Slot {
        self.faults.slot_count().max(self.prelude.unwrap_or(0))
    }

    fn refill(&mut self, rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        let Some(pages) = self.prelude.take() else {
            return self.faults.refill(rng, out);
        };
        out.push_back(Phase::Fill(Fill::new(0..pages, 0, MigrateKind::Movable)));
        out.push_back(Phase::Op(Op::Barrier { id: 0 }));
        out.push_back(Phase::Free(0..pages));
        out.push_back(Phase::Op(Op::Barrier { id: 1 }));
        true
    }
}
