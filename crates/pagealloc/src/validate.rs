//! `validate()`: a cold, exhaustive check of the allocator's invariants.
//!
//! For each zone, with every pageset of the zone and then the zone locked (so the
//! snapshot is consistent even while other threads run):
//! 1. every free-list entry is a `Buddy` head of the list's order and type, aligned, inside
//!    the zone; `nr_free[o]` equals the lists' lengths; Σ non-isolated pages equals
//!    NR_FREE_PAGES and the HIGHATOMIC lists equal `nr_free_highatomic`;
//! 2. every pcp entry is a `Pcp` head of the list's order; `count` equals the lists' pages;
//! 3. walking the span frame by frame, blocks do not overlap (no frame both free and
//!    allocated), holes are `Reserved` and inside no block, and
//!    `buddy + pcp + allocated == managed`;
//! 4. no two free buddies of one order below the pageblock order are left unmerged,
//!    unless one is marked merge-skipped (merges across pageblocks depend on pageblock
//!    types that may change after the free, as in the kernel, so they are not checked);
//! 5. with poisoning, free frames still hold the poison, and no block was found damaged
//!    when it was handed out again (the check at allocation);
//! 6. with clustered refill, the order-0 lists' clusters match their slots (`cluster.rs`)
//!    and no refill cut is waiting for its fix-up.

use crate::allocator::Allocator;
use crate::frame::{MigrateType, NR_MIGRATETYPES, NR_ORDERS, PAGEBLOCK_ORDER};
use crate::memmap::{State, FLAG_MERGE_SKIPPED};
use crate::pcp::order_of;
use crate::sync::atomic::Ordering::Relaxed;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// A broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidateError {
    /// Zone where it was found.
    pub zone: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for ValidateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "zone {}: {}", self.zone, self.what)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ValidateError {}

/// Page totals found by a validation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageTotals {
    /// Pages free in buddy lists (all types).
    pub buddy: u64,
    /// Pages cached in pagesets.
    pub pcp: u64,
    /// Pages allocated.
    pub allocated: u64,
    /// Pages managed.
    pub managed: u64,
}

impl Allocator {
    /// Check every invariant (see the module docs); the page totals on success.
    pub fn validate(&self) -> Result<PageTotals, ValidateError> {
        let damaged = self.poison_first_damaged.load(Relaxed);
        if damaged != u64::MAX {
            return Err(ValidateError {
                zone: self.zone_of(damaged).unwrap_or(0),
                what: format!(
                    "block {damaged:#x} was written after free (poison damaged when it was handed out again; {} block(s) in all)",
                    self.counters().poison_damaged
                ),
            });
        }
        let mut tot = PageTotals::default();
        for zi in 0..self.zones.len() {
            let t = self.validate_zone(zi)?;
            tot.buddy += t.buddy;
            tot.pcp += t.pcp;
            tot.allocated += t.allocated;
            tot.managed += t.managed;
        }
        Ok(tot)
    }

    fn validate_zone(&self, zi: usize) -> Result<PageTotals, ValidateError> {
        let z = &self.zones[zi];
        let m = &self.meta[..];
        let err = |what: String| ValidateError { zone: zi, what };
        let pcps: Vec<_> = (0..self.cpus.len())
            .map(|c| self.slot(c, zi).pcp.lock())
            .collect();
        let g = z.lock_inspect();
        let mut t = PageTotals {
            managed: z.managed,
            ..Default::default()
        };
        // 1. free lists
        let (mut nonisolated, mut highatomic) = (0u64, 0u64);
        for o in 0..NR_ORDERS {
            let mut blocks = 0;
            for mt in 0..NR_MIGRATETYPES {
                let l = &g.free.lists[o][mt];
                let mut n = 0;
                for i in l.iter(m) {
                    n += 1;
                    let e = &m[i as usize];
                    let pfn = z.pfn_of(i);
                    if e.state() != State::Buddy || e.order() as usize != o || e.mt() as usize != mt
                    {
                        return Err(err(format!(
                            "free list o{o}/{mt} holds pfn {pfn:#x} with {e:?}"
                        )));
                    }
                    if pfn & ((1 << o) - 1) != 0 || pfn + (1 << o) > z.end_pfn {
                        return Err(err(format!(
                            "free block {pfn:#x}/o{o} misaligned or outside"
                        )));
                    }
                }
                if n != l.len() {
                    return Err(err(format!(
                        "free list o{o}/{mt} length {} but {n} entries",
                        l.len()
                    )));
                }
                blocks += n as u64;
                let pages = (n as u64) << o;
                t.buddy += pages;
                if mt != MigrateType::Isolate as usize {
                    nonisolated += pages;
                }
                if mt == MigrateType::HighAtomic as usize {
                    highatomic += pages;
                }
            }
            if g.free.nr_free[o] != blocks {
                return Err(err(format!(
                    "nr_free[{o}] = {} but {blocks} blocks listed",
                    g.free.nr_free[o]
                )));
            }
        }
        // 1b. clusters of the order-0 lists (clustered refill)
        if self.cfg.clustered_refill {
            g.free
                .clusters
                .check(&g.free.lists[0], m)
                .map_err(|w| err(format!("clusters: {w}")))?;
        }
        if z.cluster_inflight
            .load(crate::sync::atomic::Ordering::Acquire)
            != 0
        {
            return Err(err("a cluster cut was not fixed up".into()));
        }
        if nonisolated != z.free_pages() {
            return Err(err(format!(
                "NR_FREE_PAGES {} but {nonisolated} on the lists",
                z.free_pages()
            )));
        }
        if highatomic != z.nr_free_highatomic.get() {
            return Err(err(format!(
                "nr_free_highatomic {} but {highatomic} on the lists",
                z.nr_free_highatomic.get()
            )));
        }
        // 2. pagesets
        for (cpu, p) in pcps.iter().enumerate() {
            let mut pages = 0i64;
            for (pi, l) in p.lists.iter().enumerate() {
                let o = order_of(pi);
                for i in l.iter(m) {
                    let e = &m[i as usize];
                    if e.state() != State::Pcp || e.order() != o {
                        return Err(err(format!(
                            "cpu {cpu} pcp list {pi} holds pfn {:#x} with {e:?}",
                            z.pfn_of(i)
                        )));
                    }
                    pages += 1 << o;
                }
            }
            if pages != p.st.count as i64 {
                return Err(err(format!(
                    "cpu {cpu} pcp count {} but {pages} on its lists",
                    p.st.count
                )));
            }
            t.pcp += pages as u64;
        }
        // 3. the span, frame by frame
        let mut pfn = z.start_pfn;
        let (mut walk_buddy, mut walk_pcp) = (0u64, 0u64);
        while pfn < z.end_pfn {
            let e = &m[z.meta_index(pfn) as usize];
            let s = e.state();
            if s == State::Tail {
                return Err(err(format!("pfn {pfn:#x} belongs to no block")));
            }
            if s == State::Reserved {
                pfn += 1;
                continue;
            }
            let o = e.order();
            let end = pfn + (1u64 << o);
            if end > z.end_pfn || pfn & ((1 << o) - 1) != 0 {
                return Err(err(format!(
                    "block {pfn:#x}/o{o} misaligned or outside the zone"
                )));
            }
            for q in pfn + 1..end {
                let s2 = m[z.meta_index(q) as usize].state();
                if s2 != State::Tail {
                    return Err(err(format!(
                        "pfn {q:#x} ({s2:?}) lies inside block {pfn:#x}/o{o} ({s:?})"
                    )));
                }
            }
            match s {
                State::Buddy => {
                    walk_buddy += 1 << o;
                    // 4. unmerged buddies
                    if o < PAGEBLOCK_ORDER && e.flags() & FLAG_MERGE_SKIPPED == 0 {
                        let b = pfn ^ (1u64 << o);
                        if z.contains(b) {
                            let be = &m[z.meta_index(b) as usize];
                            if be.state() == State::Buddy
                                && be.order() == o
                                && be.flags() & FLAG_MERGE_SKIPPED == 0
                            {
                                return Err(err(format!(
                                    "free buddies {pfn:#x} and {b:#x} (o{o}) unmerged"
                                )));
                            }
                        }
                    }
                    #[cfg(feature = "std")]
                    self.check_poison(pfn, o).map_err(err)?;
                }
                State::Pcp => {
                    walk_pcp += 1 << o;
                    #[cfg(feature = "std")]
                    self.check_poison(pfn, o).map_err(err)?;
                }
                State::Allocated | State::Freeing => t.allocated += 1 << o,
                _ => unreachable!(),
            }
            pfn = end;
        }
        if walk_buddy != t.buddy || walk_pcp != t.pcp {
            return Err(err(format!(
                "span walk found {walk_buddy} buddy / {walk_pcp} pcp pages, lists hold {} / {}",
                t.buddy, t.pcp
            )));
        }
        if t.buddy + t.pcp + t.allocated != z.managed {
            return Err(err(format!(
                "frames not conserved: buddy {} + pcp {} + allocated {} != managed {}",
                t.buddy, t.pcp, t.allocated, z.managed
            )));
        }
        Ok(t)
    }

    #[cfg(feature = "std")]
    fn check_poison(&self, pfn: u64, order: u8) -> Result<(), String> {
        if !self.cfg.poison {
            return Ok(());
        }
        if let Some(r) = &self.region {
            if !r.check_poison(
                pfn - self.region_base_pfn,
                1 << order,
                crate::config::POISON_BYTE,
            ) {
                return Err(format!(
                    "free block {pfn:#x}/o{order} was written after free (poison damaged)"
                ));
            }
        }
        Ok(())
    }
}
