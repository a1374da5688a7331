//! parallel_free: a task holding a very large anonymous region exits.
//!
//! # Design
//! The first `tasks` CPUs (one, in the spec) each fault in a region of `region_pages`,
//! touched; barrier 0 starts the measured window; then each frees its region in address
//! order and exits. The other CPUs only pass the barrier: they are idle, leaving the
//! zone lock to the exiting tasks. Score: 100 / time to free; the freed pages are the work.
//!
//! The unmap's own work: before the allocator sees a page, `zap_pte_range` clears its
//! PTE and drops its rmap, and `release_pages` takes it off the LRU and uncharges it;
//! the pages reach `free_unref_folios` a `folio_batch` (31) at a time
//! ([`super::page_fault1::unmap`]). With two exiting tasks or more (`tasks`), each
//! batch also fetches the lines their memory cgroup's LRU and counters share from the
//! CPU that wrote them last (`shared_lines`, `line_transfer_ns`; off by default).

use super::entry::{scaled, Entry};
use std::collections::VecDeque;

use super::params::define_params;
use super::program::{script, Fill, Once, Phase};
use super::{
    check_cpus, check_nonzero, check_order, invalid, CpuScript, MigrateKind, Op, OpCounts, Params,
    ScoreKind, Slot, Workload, WorkloadError,
};

/// The registry entry of parallel_free: the seed measured it on a 4-socket Skylake of 768 CPUs.
pub(super) const ENTRY: Entry =
    Entry::new(NAME, |n, s, o| scaled(n, s, o, ParallelFree::new)).seed_machine("skx-4s-768");

define_params! {
    /// Parameters of parallel_free.
    pub struct ParallelFreeParams {
        /// Base pages in each exiting task's region (full scale: 16 GiB of skx's 768 GiB
        /// 4-socket box; the spec gives no size), a multiple of 2^order.
        region_pages: u64 = 262_144, full 4_194_304;
        /// Order of the region's blocks (0: plain anonymous memory; 9: THP).
        order: u8 = 0, full 0;
        /// Exiting tasks, one per CPU from CPU 0.
        tasks: u32 = 1, full 1;
        /// The unmap's work per block outside the allocator, ns (page table, rmap,
        /// LRU, memcg; docs/sim-cost-model.md §11 gives the source of the default, §12
        /// this machine's figure).
        unmap_work_ns: u32 = UNMAP_WORK_NS, full UNMAP_WORK_NS;
        /// 1: the unmap takes the live kernel's mmu_gather pages (page_fault1's
        /// `gather_pages`: 19 for 256 MiB) and the page of its page tables' RCU batch,
        /// freed at its end (`pagealloc predict`'s events: 20 order-0 unmovable
        /// allocations per `munmap`); 0: none (the default).
        gather_pages: u8 = 0, full 0;
        /// Cache lines each batch of the unmap's frees (a `folio_batch`, 31) writes that
        /// every other exiting task's batches write too: the lines of the memory
        /// cgroup they share (its `lru_lock` and LRU lists, its page counters and
        /// statistics). With two tasks or more each batch finds them in another CPU's
        /// cache and pays `line_transfer_ns` for each (`pagealloc predict`'s
        /// unmap at 2 CPUs, docs/sim-cost-model.md §12); 0: none (the default).
        shared_lines: u32 = 0, full 0;
        /// The time one line takes to move from another CPU's cache, ns
        /// (`shared_lines`; `predict` measures it between the two CPUs it runs on).
        line_transfer_ns: u32 = 0, full 0;
    }
}

/// The default of `unmap_work_ns`: Lu's 2017 single-thread free of 320 GiB on Skylake
/// (10.8 s, 129 ns a page) less the 56 ns a page's free costs in the simulator.
const UNMAP_WORK_NS: u32 = 73;

/// parallel_free: time the exit of tasks holding large regions.
#[derive(Clone, Debug)]
pub struct ParallelFree {
    params: ParallelFreeParams,
    blocks: Slot,
}

const NAME: &str = "parallel_free";

impl ParallelFree {
    /// parallel_free with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts, an order above 10, or a region
    /// that is not a whole number of blocks or needs 2^32 slots or more.
    pub fn new(params: ParallelFreeParams) -> Result<Self, WorkloadError> {
        let p = &params;
        check_nonzero(NAME, "region_pages", p.region_pages)?;
        check_nonzero(NAME, "tasks", u64::from(p.tasks))?;
        check_order(NAME, "order", p.order)?;
        if p.region_pages % (1 << p.order) != 0 {
            return Err(invalid(
                NAME,
                "region_pages",
                p.region_pages,
                "must be a multiple of 2^order",
            ));
        }
        let blocks = Slot::try_from(p.region_pages >> p.order)
            .map_err(|_| invalid(NAME, "region_pages", p.region_pages, "2^32 blocks or more"))?;
        Ok(ParallelFree { params, blocks })
    }
}

impl ParallelFree {
    /// The time each batch of the unmap spends fetching the lines the other exiting
    /// tasks wrote last (`shared_lines` × `line_transfer_ns`); 0 with one task.
    fn shared_line_ns(&self) -> u64 {
        if self.params.tasks < 2 {
            return 0;
        }
        u64::from(self.params.shared_lines) * u64::from(self.params.line_transfer_ns)
    }
}

impl Workload for ParallelFree {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        check_cpus(NAME, self.params.tasks, cpus)?;
        let barrier = Phase::Op(Op::Barrier { id: 0 });
        Ok((0..cpus)
            .map(|cpu| {
                if cpu >= self.params.tasks {
                    return script(Once::new(0, vec![barrier.clone()]));
                }
                let region = 0..self.blocks;
                let gather = if self.params.gather_pages > 0 {
                    super::page_fault1::gather_pages(self.blocks)
                } else {
                    0
                };
                let mut phases = VecDeque::from([
                    Phase::Fill(
                        Fill::new(region.clone(), self.params.order, MigrateKind::Movable)
                            .touching(),
                    ),
                    barrier.clone(),
                ]);
                super::page_fault1::unmap(
                    region,
                    u64::from(self.params.unmap_work_ns),
                    self.shared_line_ns(),
                    self.blocks..self.blocks + gather,
                    &mut phases,
                );
                let mut slots = self.blocks + gather;
                if self.params.gather_pages > 0 {
                    // `free_pgtables` hands the region's page tables (not modelled
                    // here) to `tlb_remove_table`, which batches them in a page.
                    phases.push_back(Phase::Fill(Fill::new(
                        slots..slots + 1,
                        0,
                        MigrateKind::Unmovable,
                    )));
                    phases.push_back(Phase::Free(slots..slots + 1));
                    slots += 1;
                }
                phases.push_back(Phase::Op(Op::Exit));
                script(Once::new(slots, phases.into()))
            })
            .collect())
    }

    fn score_kind(&self) -> ScoreKind {
        ScoreKind::InverseMakespan
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        counts.freed_pages() as f64
    }

    fn measured_after(&self) -> Option<u32> {
        Some(0)
    }
}
