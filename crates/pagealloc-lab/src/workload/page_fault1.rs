//! page_fault1 (will-it-scale), its THP variant, and the batch sweep.
//!
//! # Design
//! Each CPU loops: fault in `pages_per_loop` pages as order-`order` movable blocks, one
//! at a time, touching each (the fault zeroes it), then unmap: free them all in address
//! (= allocation) order. Linux frees an unmap in mmu_gather batches of ~500 pages; the
//! lab has no batched free op, so the batches are implicit in the order of the frees.
//!
//! `page_fault1_thp` is the same with order 9; `batch_sweep` is page_fault1 under another
//! name, since the sweep (high = 2 × batch, batch ∈ {63 … 4095}) is allocator
//! configuration, not workload. Score: base pages faulted per second, all CPUs.

use std::collections::VecDeque;

use super::entry::{make, scaled, Entry, Scale};
use super::params::define_params;
use super::program::{script, Fill, Phase, Program};
use super::{
    check_nonzero, check_order, invalid, CpuScript, MigrateKind, Op, OpCounts, Params, Rng, Slot,
    Workload, WorkloadError,
};

/// The registry entry of page_fault1: the seed measured it on Skylake, 2 sockets.
pub(super) const ENTRY: Entry = Entry::new("page_fault1", |n, s, o| {
    scaled(n, s, o, |p| PageFault1::new(n, p))
})
.seed_machine("skx-2s-112");

/// The registry entry of page_fault1_thp: order-9 blocks, on the same machine.
pub(super) const THP_ENTRY: Entry = Entry::new("page_fault1_thp", |n, s, o| {
    let params = match s {
        Scale::Laptop => PageFault1Params::thp(),
        Scale::Full => PageFault1Params::thp_full_scale(),
    };
    make(n, params, o, |p| PageFault1::new(n, p))
})
.seed_machine("skx-2s-112");

/// The registry entry of batch_sweep: page_fault1 under the sweep's name, on the
/// machine of the sweep's seed, Sapphire Rapids, 2 sockets.
pub(super) const BATCH_SWEEP_ENTRY: Entry = Entry::new("batch_sweep", |n, s, o| {
    scaled(n, s, o, |p| PageFault1::new(n, p))
})
.seed_machine("spr-2s-224");

define_params! {
    /// Parameters of page_fault1, page_fault1_thp and batch_sweep.
    pub struct PageFault1Params {
        /// Memory faulted in per loop, in base pages (spec: 32 768 = 128 MiB); a multiple
        /// of 2^order.
        pages_per_loop: u32 = 8_192, full 32_768;
        /// Loops per CPU. will-it-scale runs for a fixed time instead; 4 loops of 128 MiB
        /// per CPU get the per-CPU lists past their warm-up in the simulator.
        loops: u32 = 512, full 4;
        /// Order of every block: 0, or 9 for THP.
        order: u8 = 0, full 0;
        /// 1: each 2 MiB of the region takes a page-table page (order 0, unmovable)
        /// just before its first fault, freed after the unmap (`free_pgtables`), as the
        /// live kernel's PTE tables, or by the zap of its block, before the block, as
        /// a THP's deposited table (`unmap_zapping`; `pagealloc predict`:
        /// 1.004 blocks per 4 KiB fault, 1 per THP); 0: none (the published tables'
        /// model, and the default).
        pte_tables: u8 = 0, full 0;
        /// CPU work of each fault outside the allocator and the page's zeroing that the
        /// cost model charges (`fault_ns`, the touch): a `Compute` after each block's
        /// touch, ns. 0 (the default): none, the published tables' model. `pagealloc
        /// predict` sets it from this machine's kernel (docs/sim-cost-model.md §12).
        fault_work_ns: u32 = 0, full 0;
        /// CPU work of the unmap per block (TLB flush, rmap, page-table teardown,
        /// LRU), one `Compute` of blocks × this before the loop's frees, ns; 0 (the
        /// default): none.
        unmap_work_ns: u32 = 0, full 0;
        /// 1: each unmap takes the live kernel's mmu_gather pages (one once 7 blocks
        /// are gathered, one per 509 more, at most 19; order 0, unmovable, freed at its
        /// end) and, where it frees page tables
        /// (`pte_tables` with order 0), the page of their RCU batch, freed with them
        /// (`pagealloc predict`'s events: 9 + 1 per 16 MiB unmap, 1 per 8 THPs);
        /// 0: none (the published tables' model, and the default).
        gather_pages: u8 = 0, full 0;
        /// Cache lines each batch of an unmap's frees (31) shares with the other CPUs'
        /// unmaps in the same memory cgroup (parallel_free's `shared_lines`: the
        /// memcg's `lru_lock`, LRU lists and counters); with two CPUs or more each
        /// batch pays `line_transfer_ns` for each; 0: none (the default).
        shared_lines: u32 = 0, full 0;
        /// The time one line takes to move from another CPU's cache, ns.
        line_transfer_ns: u32 = 0, full 0;
        /// Cache lines each batch of 31 faults (an LRU-add `folio_batch`) finds in
        /// another CPU's cache at two CPUs or more, each paid `line_transfer_ns` (the
        /// memcg's `lru_lock`, LRU lists and counters the other CPU's faults and unmaps
        /// write, and the struct pages the fault's allocation unlinks:
        /// docs/sim-cost-model.md §12); 0: none (the default).
        fault_shared_lines: u32 = 0, full 0;
        /// Loops whose unmap ends before a loop's page tables and their RCU batch page
        /// (`gather_pages` with `pte_tables`, order 0) are freed: RCU frees them a grace
        /// period after the unmap (`tlb_remove_table_rcu`, 22-55 ms on the live kernel),
        /// so they are freed after the unmap of the loop this many later, and the last
        /// loops' stay held when the CPU's loops end (`pagealloc predict` reads it off
        /// each recording); 0 (the default): with their unmap.
        table_free_lag: u32 = 0, full 0;
        /// Pages of the last loop's last faults the CPU's LRU add batch (`folio_batch`,
        /// 31 folios) still holds after the last unmap: the live kernel's unmap does
        /// not drain the batch, so the zap drops the mapping's references but the
        /// batch's keep those pages until it next moves (the process's exit, after the
        /// window). The last unmap leaves them, freed as the script ends (`pagealloc
        /// predict` reads it off each recording); below 31; 0 (the default): none.
        lru_tail: u32 = 0, full 0;
    }
}

impl PageFault1Params {
    /// Laptop defaults with order-9 (THP) blocks, and half the loops: the touches
    /// (8 GiB per CPU) dominate, not the 16 allocations per loop.
    pub fn thp() -> Self {
        PageFault1Params {
            order: 9,
            loops: 256,
            ..Self::default()
        }
    }

    /// Full scale with order-9 (THP) blocks.
    pub fn thp_full_scale() -> Self {
        PageFault1Params {
            order: 9,
            ..Self::full_scale()
        }
    }

    /// Blocks per loop.
    pub(crate) fn blocks(&self) -> Slot {
        self.pages_per_loop >> self.order
    }

    /// Checks the parameters for workload `name`.
    pub(crate) fn validate(&self, name: &'static str) -> Result<(), WorkloadError> {
        check_order(name, "order", self.order)?;
        check_nonzero(name, "loops", u64::from(self.loops))?;
        check_nonzero(name, "pages_per_loop", u64::from(self.pages_per_loop))?;
        if self.pages_per_loop % (1 << self.order) != 0 {
            return Err(invalid(
                name,
                "pages_per_loop",
                self.pages_per_loop,
                "must be a multiple of 2^order",
            ));
        }
        if self.lru_tail >= 31 || self.lru_tail > self.blocks() {
            return Err(invalid(
                name,
                "lru_tail",
                self.lru_tail,
                "must be below the LRU batch's 31 folios and a loop's blocks",
            ));
        }
        Ok(())
    }
}

/// page_fault1: every CPU faults in and unmaps a region, in a loop.
#[derive(Clone, Debug)]
pub struct PageFault1 {
    name: &'static str,
    params: PageFault1Params,
}

impl PageFault1 {
    /// page_fault1 under registry name `name` (`page_fault1`, `page_fault1_thp` or
    /// `batch_sweep`).
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for an order above 10, a zero count, or a region
    /// that is not a whole number of blocks.
    pub fn new(name: &'static str, params: PageFault1Params) -> Result<Self, WorkloadError> {
        params.validate(name)?;
        Ok(PageFault1 { name, params })
    }
}

impl Workload for PageFault1 {
    fn name(&self) -> &'static str {
        self.name
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        // The unmaps of two CPUs or more fetch their memcg's shared lines from each
        // other's caches (`shared_lines`).
        let lines_ns = |lines: u32| {
            if cpus >= 2 {
                u64::from(lines) * u64::from(self.params.line_transfer_ns)
            } else {
                0
            }
        };
        let shared_ns = lines_ns(self.params.shared_lines);
        let fault_ns = lines_ns(self.params.fault_shared_lines);
        Ok((0..cpus)
            .map(|_| {
                let mut l = FaultLoop::new(&self.params);
                l.unmap_batch_ns = shared_ns;
                l.fault_batch_ns = fault_ns;
                script(l)
            })
            .collect())
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        pages_faulted(counts, self.params.pte_tables)
    }
}

/// Pages faulted, the score's unit of page_fault1 and thp_mix: with page tables
/// (`pte_tables` > 0) the touched pages, since every data block is touched and a page
/// table is not; without, every page allocated.
pub(super) fn pages_faulted(counts: &OpCounts, pte_tables: u8) -> f64 {
    if pte_tables > 0 {
        counts.touched_pages as f64
    } else {
        counts.allocated_pages() as f64
    }
}

/// Base pages one page-table page maps (x86-64: 512 PTEs).
const PTE_SPAN_PAGES: u32 = 512;

/// Blocks an unmap's mmu_gather holds before it takes its first page: its own batch of
/// `MMU_GATHER_BUNDLE` (8) entries counts as full one entry early
/// (`__tlb_remove_folio_pages_size` keeps a slot for a two-entry folio).
const GATHER_FIRST: Slot = 7;
/// Blocks per further page: a page's `MAX_GATHER_BATCH` (510 entries on x86-64) less
/// the slot kept.
const GATHER_PER_PAGE: Slot = 509;
/// Pages an unmap takes at most (`MAX_GATHER_BATCH_COUNT`: 10 000 / 510); a full
/// gather is flushed and its pages reused.
const GATHER_MAX: Slot = 19;

/// The pages an unmap of `blocks` blocks takes for its mmu_gather (`tlb_next_batch`,
/// `__get_free_page(GFP_NOWAIT)`: order 0, unmovable), one as the entry that fills
/// the previous batch is added, freed at the unmap's end (`tlb_finish_mmu`). The live
/// kernel's events (docs/predict.md): 9 per 16 MiB of 4 KiB pages, 1 per 8 THPs, 19 per
/// 256 MiB.
pub(crate) fn gather_pages(blocks: Slot) -> Slot {
    if blocks < GATHER_FIRST {
        0
    } else {
        ((blocks - GATHER_FIRST) / GATHER_PER_PAGE + 1).min(GATHER_MAX)
    }
}

/// The page_fault1 loop of one CPU (also thp_mix's, after its prelude).
#[derive(Clone, Debug)]
pub(crate) struct FaultLoop {
    order: u8,
    blocks: Slot,
    loops_left: u32,
    /// Page-table pages per loop (0: none), in slots `blocks..blocks + tables`.
    tables: Slot,
    /// Work per fault and per block unmapped, ns (0: none).
    fault_work_ns: u64,
    unmap_work_ns: u64,
    /// Work per batch of the unmap's frees beside its blocks' (the shared lines), ns.
    unmap_batch_ns: u64,
    /// Work per batch of [`FAULT_BATCH`] faults beside their own (the shared lines), ns.
    fault_batch_ns: u64,
    /// Faults in the current batch of [`FAULT_BATCH`].
    batched: Slot,
    /// The mmu_gather's pages per loop ([`gather_pages`]), in the slots after the
    /// tables, then (`table_batch`) the page-table RCU batch's page.
    gather: Slot,
    table_batch: bool,
    /// With `table_batch`: loops between a loop's unmap and its tables' free
    /// (`table_free_lag`), each loop's tables in the set of slots `loop % (lag + 1)`.
    lag: u32,
    /// The last loop's blocks its unmap leaves to the LRU batch, freed as the loops
    /// end (`lru_tail`).
    lru_tail: Slot,
    /// Loops begun.
    done: u32,
}

impl FaultLoop {
    pub(crate) fn new(p: &PageFault1Params) -> Self {
        FaultLoop {
            order: p.order,
            blocks: p.blocks(),
            loops_left: p.loops,
            tables: if p.pte_tables > 0 {
                p.pages_per_loop.div_ceil(PTE_SPAN_PAGES)
            } else {
                0
            },
            fault_work_ns: u64::from(p.fault_work_ns),
            unmap_work_ns: u64::from(p.unmap_work_ns),
            unmap_batch_ns: 0,
            fault_batch_ns: 0,
            batched: 0,
            gather: if p.gather_pages > 0 {
                gather_pages(p.blocks())
            } else {
                0
            },
            // 4 KiB pages' tables go through `free_pgtables` → `tlb_remove_table`;
            // a THP's deposited table is freed at once (`zap_deposited_table`).
            table_batch: p.gather_pages > 0 && p.pte_tables > 0 && p.order == 0,
            lag: p.table_free_lag,
            lru_tail: p.lru_tail.min(p.blocks()),
            done: 0,
        }
    }

    /// Slots a loop's page tables and their RCU batch page take: the tables, the batch
    /// page (or none).
    fn table_set(&self) -> Slot {
        self.tables + Slot::from(self.table_batch)
    }

    /// The slots of set `k` of the loops' page tables ([`Self::lag`]): its tables and
    /// its RCU batch page. Set 0 holds the tables after the blocks and the batch page
    /// after the gather's pages; the others follow them.
    fn tables_of(&self, k: u32) -> (std::ops::Range<Slot>, Slot) {
        let first = self.blocks + self.tables + self.gather + 1;
        if k == 0 || !self.table_batch {
            return (self.blocks..self.blocks + self.tables, first - 1);
        }
        let base = first + (k - 1) * self.table_set();
        (base..base + self.tables, base + self.tables)
    }

    /// Each block has its own page table, deposited at its fault (a THP's,
    /// `pte_alloc_one` in `do_huge_pmd_anonymous_page`) and freed by the unmap's zap of
    /// the block ([`unmap_zapping`]), not by `free_pgtables` after it.
    fn deposited(&self) -> bool {
        self.tables > 0 && PTE_SPAN_PAGES >> self.order == 1
    }

    /// Sets of page-table slots in use at once: the loop's and the `lag` before it
    /// whose tables RCU has not freed yet.
    fn table_sets(&self) -> u32 {
        if self.table_batch {
            self.lag.saturating_add(1)
        } else {
            1
        }
    }

    /// The unmap of the loop's blocks, with `gather`'s pages; the last loop's leaves
    /// its last `lru_tail` blocks held (the LRU batch's references), its gather pages
    /// as many as for every block (the zap gathers them all).
    fn unmap_loop(&self, gather: std::ops::Range<Slot>, out: &mut VecDeque<Phase>) {
        let keep = if self.loops_left == 0 {
            self.lru_tail
        } else {
            0
        };
        let mut phases = VecDeque::new();
        unmap_zapping(
            0..self.blocks,
            self.deposited()
                .then_some(self.blocks..self.blocks + self.tables),
            self.unmap_work_ns,
            self.unmap_batch_ns,
            gather,
            &mut phases,
        );
        let kept = self.blocks - keep..self.blocks;
        out.extend(phases.into_iter().filter_map(|p| match p {
            Phase::Free(r) if keep > 0 && r.end > kept.start && r.start < kept.end => {
                let r = r.start..kept.start;
                (!r.is_empty()).then_some(Phase::Free(r))
            }
            p => Some(p),
        }));
    }

    /// After the last loop: the blocks its unmap left to the LRU batch.
    fn free_lru_tail(&self, out: &mut VecDeque<Phase>) {
        if self.loops_left == 0 && self.lru_tail > 0 {
            out.push_back(Phase::Free(self.blocks - self.lru_tail..self.blocks));
        }
    }

    /// The faults of `slots`: touched, then their work outside the allocator; with
    /// `fault_batch_ns`, that work after every [`FAULT_BATCH`]-th fault of the CPU
    /// (its `folio_batch` carries over from one region and loop to the next).
    fn faults(&mut self, slots: std::ops::Range<Slot>, out: &mut VecDeque<Phase>) {
        let (order, work) = (self.order, self.fault_work_ns);
        let fill = |r: std::ops::Range<Slot>| {
            Phase::Fill(
                Fill::new(r, order, MigrateKind::Movable)
                    .touching()
                    .working(work),
            )
        };
        if self.fault_batch_ns == 0 {
            out.push_back(fill(slots));
            return;
        }
        let mut at = slots.start;
        while at < slots.end {
            let end = (at + FAULT_BATCH - self.batched).min(slots.end);
            out.push_back(fill(at..end));
            self.batched += end - at;
            if self.batched == FAULT_BATCH {
                out.push_back(Phase::Op(Op::Compute {
                    ns: self.fault_batch_ns,
                }));
                self.batched = 0;
            }
            at = end;
        }
    }
}

/// The page-table pages (tables and their RCU batch page) a CPU's page_fault1 loop
/// frees only as its loops end, which RCU frees in the kernel a grace period after the
/// last unmaps (`table_free_lag`): `lag` loops' of `p`'s, at most all its loops'; 0
/// without `gather_pages` and `pte_tables` at order 0.
pub(crate) fn pending_tables(p: &PageFault1Params, lag: u32) -> u64 {
    let l = FaultLoop::new(&PageFault1Params {
        table_free_lag: lag,
        ..p.clone()
    });
    if !l.table_batch {
        return 0;
    }
    u64::from(l.table_set()) * u64::from(lag.min(p.loops))
}

/// Faults per LRU add: `folio_add_lru` queues each new folio in a per-CPU
/// `folio_batch` (`FOLIO_BATCH_SIZE`, 31) and `folio_batch_move_lru` moves a full batch
/// onto the memcg's LRU under its `lru_lock`.
const FAULT_BATCH: Slot = 31;

/// Blocks per `free_unref_folios` call: a `folio_batch` (`FOLIO_BATCH_SIZE`, 31 folios,
/// whatever their order). The unmap (`zap_pte_range`, then `release_pages`) hands the
/// allocator its frees in these batches.
const UNMAP_BATCH: Slot = 31;

/// The unmap of `slots` (held blocks): with `work_ns` or `batch_ns` > 0, each batch of
/// [`UNMAP_BATCH`] blocks is a `Compute` of `work_ns` per block plus `batch_ns` and
/// then their frees; with both 0, the frees alone, as one phase. With slots in `gather` (at most
/// [`gather_pages`] of `slots`' length) it takes the mmu_gather's pages into them: the
/// k-th (from 0) once the batch holding block `GATHER_FIRST + k × GATHER_PER_PAGE` is
/// handed over, all of them freed after the blocks; and then, as the kernel's
/// `zap_pte_range` only gathers (an anonymous page forces no flush) and frees at
/// `tlb_flush_mmu` (the gather full, `GATHER_MAX` pages) or `tlb_finish_mmu`, the
/// blocks are freed after every page of their gather was taken: no allocation between
/// them halves the pageset's `free_count` (`rmqueue_pcplist`) and shrinks its drains.
pub(crate) fn unmap(
    slots: std::ops::Range<Slot>,
    work_ns: u64,
    batch_ns: u64,
    gather: std::ops::Range<Slot>,
    out: &mut VecDeque<Phase>,
) {
    unmap_zapping(slots, None, work_ns, batch_ns, gather, out);
}

/// [`unmap`], where each block of `slots` has a page of `zapped` (from its start, one
/// per block) that the zap frees at once as it reaches the block, before the block
/// enters the gather: a THP's deposited page table (`zap_huge_pmd` →
/// `zap_deposited_table` → `pte_free`, then `tlb_remove_page_size`, whose entry may
/// take a gather page). So the tables' frees come before their blocks', the gather's
/// pages between them where their entries fall: the live kernel's thp_mix unmap of 8
/// THPs frees 7 tables, takes a gather page, frees the 8th table, then the 8 THPs
/// (`tlb_finish_mmu`), then the gather page. The order-0 frees before the THPs leave
/// the pageset's `free_count` off a multiple of 512, so a THP free that reaches `high`
/// drains one block more (`nr_pcp_free`, `free_pcppages_bulk` frees while its count of
/// pages is above 0): 2 560 pages where the THPs alone drain 2 048.
pub(crate) fn unmap_zapping(
    slots: std::ops::Range<Slot>,
    zapped: Option<std::ops::Range<Slot>>,
    work_ns: u64,
    batch_ns: u64,
    gather: std::ops::Range<Slot>,
    out: &mut VecDeque<Phase>,
) {
    if work_ns == 0 && batch_ns == 0 && gather.is_empty() && zapped.is_none() {
        out.push_back(Phase::Free(slots));
        return;
    }
    // The zapped pages of `slots`' blocks `r` (absolute), freed at their zap.
    let zap = |r: std::ops::Range<Slot>, out: &mut VecDeque<Phase>| {
        if let Some(z) = &zapped {
            if !r.is_empty() {
                let base = z.start - slots.start;
                out.push_back(Phase::Free(base + r.start..base + r.end));
            }
        }
    };
    // Blocks gathered when gather page `k` is taken (its entry's).
    let entry = |k: Slot| slots.start + GATHER_FIRST + (k - gather.start) * GATHER_PER_PAGE;
    let mut next = gather.start;
    let mut at = slots.start;
    // With the gather: frees waiting for its flush, and the blocks one flush frees.
    let mut flush: Vec<std::ops::Range<Slot>> = Vec::new();
    let per_flush = GATHER_FIRST + GATHER_MAX * GATHER_PER_PAGE;
    while at < slots.end {
        let end = (at + UNMAP_BATCH).min(slots.end);
        if work_ns > 0 || batch_ns > 0 {
            out.push_back(Phase::Op(Op::Compute {
                ns: work_ns * u64::from(end - at) + batch_ns,
            }));
        }
        // The gather pages whose entry lies in this batch, taken before its frees,
        // each once its entry's block (and the zapped pages up to it) is gathered.
        let mut zapped_to = at;
        while next < gather.end && entry(next) <= end {
            zap(zapped_to..entry(next), out);
            zapped_to = entry(next);
            out.push_back(Phase::Fill(Fill::new(
                next..next + 1,
                0,
                MigrateKind::Unmovable,
            )));
            next += 1;
        }
        zap(zapped_to..end, out);
        if gather.is_empty() {
            out.push_back(Phase::Free(at..end));
        } else {
            flush.push(at..end);
            let gathered: Slot = flush.iter().map(|r| r.end - r.start).sum();
            if gathered >= per_flush || end == slots.end {
                out.extend(flush.drain(..).map(Phase::Free));
            }
        }
        at = end;
    }
    if next > gather.start {
        out.push_back(Phase::Free(gather.start..next));
    }
}

impl Program for FaultLoop {
    fn slot_count(&self) -> Slot {
        self.blocks + self.gather + self.table_set() * self.table_sets()
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.loops_left == 0 {
            return false;
        }
        self.loops_left -= 1;
        let extra = self.blocks + self.tables;
        let gather = extra..extra + self.gather;
        let set = self.done % self.table_sets();
        self.done += 1;
        let (tables, batch) = self.tables_of(set);
        if self.tables == 0 {
            self.faults(0..self.blocks, out);
            self.unmap_loop(gather, out);
            self.free_lru_tail(out);
            return true;
        }
        // Each 2 MiB: its page table, then its faults.
        let per_table = (PTE_SPAN_PAGES >> self.order).max(1);
        for t in 0..self.tables {
            let first = t * per_table;
            let end = (first + per_table).min(self.blocks);
            out.push_back(Phase::Fill(Fill::new(
                tables.start + t..tables.start + t + 1,
                0,
                MigrateKind::Unmovable,
            )));
            if first < end {
                self.faults(first..end, out);
            }
        }
        self.unmap_loop(gather.clone(), out);
        if self.table_batch {
            // `tlb_remove_table` batches the tables in a page of its own, freed with
            // them once the RCU grace period ends (`tlb_remove_table_rcu`): after the
            // unmap of the loop `lag` later.
            out.push_back(Phase::Fill(Fill::new(
                batch..batch + 1,
                0,
                MigrateKind::Unmovable,
            )));
            if self.done > self.lag {
                let (t, b) = self.tables_of((self.done - 1 - self.lag) % self.table_sets());
                out.push_back(Phase::Free(t));
                out.push_back(Phase::Free(b..b + 1));
            }
            if self.loops_left == 0 {
                // A script gives back every block: the tables RCU would free after the
                // last loops (the kernel's, after its window: `pending_tables`).
                for l in self.done.saturating_sub(self.lag)..self.done {
                    let (t, b) = self.tables_of(l % self.table_sets());
                    out.push_back(Phase::Free(t));
                    out.push_back(Phase::Free(b..b + 1));
                }
            }
        } else if !self.deposited() {
            out.push_back(Phase::Free(self.blocks..self.blocks + self.tables));
        }
        self.free_lru_tail(out);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::SplitMix64;

    /// Every loop's phases of a CPU's page_fault1 with `p`.
    fn loops(p: &PageFault1Params) -> Vec<Vec<Phase>> {
        let mut l = FaultLoop::new(p);
        let mut rng = SplitMix64::new(1);
        let mut all = Vec::new();
        let mut out = VecDeque::new();
        while l.refill(&mut rng, &mut out) {
            all.push(out.drain(..).collect());
        }
        all
    }

    /// Blocks of `0..blocks` freed by a loop's phases, in order.
    fn freed(ph: &[Phase], blocks: Slot) -> Vec<Slot> {
        ph.iter()
            .filter_map(|p| match p {
                Phase::Free(r) => Some(r.clone()),
                _ => None,
            })
            .flat_map(|r| r.filter(|&s| s < blocks))
            .collect()
    }

    /// The last loop's unmap leaves its last `lru_tail` blocks and frees them after
    /// everything else; the other loops, the gather's pages and the page tables are as
    /// without it.
    #[test]
    fn the_last_unmap_leaves_the_lru_batchs_pages() {
        let p = PageFault1Params {
            pages_per_loop: 1024,
            loops: 2,
            pte_tables: 1,
            gather_pages: 1,
            table_free_lag: 1,
            ..PageFault1Params::default()
        };
        let plain = loops(&p);
        let tail = loops(&PageFault1Params {
            lru_tail: 20,
            ..p.clone()
        });
        assert_eq!(plain[0], tail[0]);
        let (a, b) = (freed(&plain[1], 1024), freed(&tail[1], 1024));
        assert_eq!(a, (0..1024).collect::<Vec<_>>());
        let mut expect: Vec<Slot> = (0..1004).collect();
        expect.extend(1004..1024);
        assert_eq!(b, expect);
        assert_eq!(tail[1].last(), Some(&Phase::Free(1004..1024)));
        let fills = |ph: &[Phase]| ph.iter().filter(|x| matches!(x, Phase::Fill(_))).count();
        assert_eq!(fills(&plain[1]), fills(&tail[1]));
        assert!(PageFault1Params { lru_tail: 31, ..p }
            .validate("page_fault1")
            .is_err());
    }
}
