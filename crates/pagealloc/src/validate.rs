//! `validate()`: a cold, exhaustive check of the allocator's invariants.
//!
//! For each zone, with every pageset of the zone and then the zone locked (so the
//! snapshot is consistent even while other threads run):
//! 1. every free-list entry is a `Buddy` head of the list's order and type, aligned, inside
//!    the zone; `nr_free[o]` equals the lists' lengths, and each list's bit in the zone's
//!    occupancy word (which the watermark test reads) is set exactly when the list is not
//!    empty; Σ non-isolated pages equals NR_FREE_PAGES and the HIGHATOMIC lists equal
//!    `nr_free_highatomic`;
//! 2. every pcp entry is a `Pcp` head of the list's order; `count` equals the lists' pages;
//!    `high_min, high_max >= 0`, `batch >= 1`, and `high_min <= high <= high_max`,
//!    `count <= high_max`, the upper bounds up to what refills add beyond `high` (`Pcp::within_bounds`
//!    has the exact rule, with the tiny-zone case `high_min > high_max`), unless the
//!    sizes were rewritten since (a CPU going on- or
//!    offline, a new high fraction: `pageset_update` leaves `high` and `count` alone, so
//!    they may lie outside the new bounds until the next refill or tick settles them);
//! 3. walking the span frame by frame, blocks do not overlap (no frame both free and
//!    allocated), holes are `Reserved` and inside no block, and
//!    `buddy + pcp + allocated == managed`;
//! 4. no two free buddies of one order below the pageblock order are left unmerged,
//!    unless one is marked merge-skipped (merges across pageblocks depend on pageblock
//!    types that may change after the free, as in the kernel, so they are not checked);
//! 5. with poisoning, free frames still hold the poison, and no block was found damaged
//!    when it was handed out again (the check at allocation);
//! 6. with clustered refill, the order-0 lists' clusters match their slots (`cluster.rs`)
//!    and no refill cut is waiting for its fix-up;
//! 7. with `Config::own_bitmap`, the order-0 rings' frames read as allocated order-0
//!    heads (their frees wrote nothing) with their ownership bits clear, the span walk
//!    counts such a frame as cached when it is on a ring (and as allocated when it is on
//!    none: a free between taking the bit and marking the frame `Freeing`), and every set
//!    bit belongs to an allocated order-0 head.

use crate::allocator::Allocator;
use crate::frame::{MigrateType, NR_MIGRATETYPES, NR_ORDERS, PAGEBLOCK_ORDER};
use crate::memmap::{State, FLAG_MERGE_SKIPPED};
use crate::pcp::{order_of, Pcp};
use crate::sync::atomic::Ordering::{Acquire, Relaxed};
use crate::sync::SpinGuard;
use crate::zone::{Zone, ZoneInner};
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
    /// Pages allocated (blocks being freed included).
    pub allocated: u64,
    /// Of `allocated`, the pages of nolock frees deferred on the zones' lists
    /// ([`Allocator::free_pages_nolock`]), freed by the zone lock's next holder: no longer
    /// any caller's, and not lost.
    pub deferred: u64,
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
            tot.deferred += t.deferred;
            tot.managed += t.managed;
        }
        Ok(tot)
    }

    fn validate_zone(&self, zi: usize) -> Result<PageTotals, ValidateError> {
        let z = &self.zones[zi];
        let err = |what: String| ValidateError { zone: zi, what };
        let pcps: Vec<_> = (0..self.cpus.len())
            .map(|c| self.slot(c, zi).pcp.lock())
            .collect();
        let g = z.lock_inspect();
        let buddy = self.check_free_lists(z, &g).map_err(err)?;
        let pcp = self.check_pagesets(z, &pcps).map_err(err)?;
        self.pcp_buddy_check(zi, &pcps).map_err(err)?;
        let rings = self.ring_frames(z, &pcps);
        // Before the span walk: entries pushed since stay `Freeing` (counted allocated),
        // and none leaves the list while the zone lock is held.
        let deferred = self.deferred_pages_locked(z).map_err(err)?;
        let allocated = self.check_span(z, buddy, pcp, &rings).map_err(err)?;
        Ok(PageTotals {
            buddy,
            pcp,
            allocated,
            deferred,
            managed: z.managed,
        })
    }

    /// Check 1 of the module docs, the free lists of a locked zone: entries, lengths,
    /// `nr_free`, NR_FREE_PAGES, the HIGHATOMIC total and the clusters. Pages on the lists
    /// (all types).
    fn check_free_lists(&self, z: &Zone, g: &ZoneInner) -> Result<u64, String> {
        let m = &self.meta[..];
        let (mut buddy, mut nonisolated, mut highatomic) = (0u64, 0u64, 0u64);
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
                        return Err(format!("free list o{o}/{mt} holds pfn {pfn:#x} with {e:?}"));
                    }
                    if pfn & ((1 << o) - 1) != 0 || pfn + (1 << o) > z.end_pfn {
                        return Err(format!("free block {pfn:#x}/o{o} misaligned or outside"));
                    }
                }
                if n != l.len() {
                    return Err(format!(
                        "free list o{o}/{mt} length {} but {n} entries",
                        l.len()
                    ));
                }
                let ty = MigrateType::from_u8(mt as u8).expect("a migratetype index");
                if z.nonempty_bit(o as u8, ty) != (n != 0) {
                    return Err(format!(
                        "free list o{o}/{mt} has {n} entries but its occupancy bit is {}",
                        z.nonempty_bit(o as u8, ty)
                    ));
                }
                blocks += n as u64;
                let pages = (n as u64) << o;
                buddy += pages;
                if mt != MigrateType::Isolate as usize {
                    nonisolated += pages;
                }
                if mt == MigrateType::HighAtomic as usize {
                    highatomic += pages;
                }
            }
            if g.free.nr_free[o] != blocks {
                return Err(format!(
                    "nr_free[{o}] = {} but {blocks} blocks listed",
                    g.free.nr_free[o]
                ));
            }
        }
        // 1b. clusters of the order-0 lists (clustered refill)
        if self.cfg.clustered_refill {
            g.free
                .clusters
                .check(&g.free.lists[0], m)
                .map_err(|w| format!("clusters: {w}"))?;
        }
        if z.cluster_inflight.load(Acquire) != 0 {
            return Err("a cluster cut was not fixed up".into());
        }
        if nonisolated != z.free_pages() {
            return Err(format!(
                "NR_FREE_PAGES {} but {nonisolated} on the lists",
                z.free_pages()
            ));
        }
        if highatomic != z.nr_free_highatomic.get() {
            return Err(format!(
                "nr_free_highatomic {} but {highatomic} on the lists",
                z.nr_free_highatomic.get()
            ));
        }
        Ok(buddy)
    }

    /// Check 2, every CPU's pageset of the zone: list entries, `count`, and the sizes
    /// (`high_min <= high <= high_max`, `count <= high_max`, unless the sizes were just
    /// rewritten: `Pcp::resized`). Pages cached in all of them.
    fn check_pagesets(&self, z: &Zone, pcps: &[SpinGuard<'_, Pcp>]) -> Result<u64, String> {
        let m = &self.meta[..];
        let mut total = 0u64;
        for (cpu, p) in pcps.iter().enumerate() {
            let mut pages = 0i64;
            for (pi, (l, ring)) in p.lists.iter().zip(&p.rings).enumerate() {
                let o = order_of(pi);
                for i in l.iter(m).chain(ring.iter()) {
                    let e = &m[i as usize];
                    let pfn = z.pfn_of(i);
                    // `Config::own_bitmap`: an order-0 ring's frames keep the metadata of
                    // an allocation, their ownership bits clear.
                    let unwritten = o == 0 && z.own_bitmap();
                    let ok = if unwritten {
                        e.state() == State::Allocated && e.order() == 0 && !z.owned(pfn)
                    } else {
                        e.state() == State::Pcp && e.order() == o
                    };
                    if !ok {
                        return Err(format!(
                            "cpu {cpu} pcp list {pi} holds pfn {pfn:#x} with {e:?}{}",
                            if unwritten && z.owned(pfn) {
                                " and its ownership bit set"
                            } else {
                                ""
                            }
                        ));
                    }
                    pages += 1 << o;
                }
            }
            let st = &p.st;
            if pages != st.count as i64 {
                return Err(format!(
                    "cpu {cpu} pcp count {} but {pages} on its lists",
                    st.count
                ));
            }
            if st.high_min < 0 || st.high_max < 0 || st.batch < 1 {
                return Err(format!(
                    "cpu {cpu} pcp sizes high_min {} high_max {} batch {}",
                    st.high_min, st.high_max, st.batch
                ));
            }
            let claims = self.cfg.pcp_buddy && crate::pcp_buddy::within_bounds(p);
            if !p.resized && !p.within_bounds() && !claims {
                return Err(format!(
                    "cpu {cpu} pcp out of bounds: high {} outside high_min {} .. high_max {}, or high or count {} above high_max by more than refills add ({})",
                    st.high, st.high_min, st.high_max, st.count, crate::pcp::refill_overshoot(st.batch)
                ));
            }
            total += pages as u64;
        }
        Ok(total)
    }

    /// With `Config::own_bitmap`, the frames on the zone's order-0 rings as a bitmap of
    /// the span (bit `pfn - start_pfn`); empty without it. Ring membership, not the
    /// ownership bit alone, says a frame is cached: a free that finds its pageset busy
    /// claims the frame outside any lock — takes the bit, then marks it `Freeing` —, and
    /// in between the frame reads as allocated with its bit clear while it is on no
    /// ring. The caller holds every pageset lock of the zone, so the rings stand still.
    fn ring_frames(&self, z: &Zone, pcps: &[SpinGuard<'_, Pcp>]) -> Vec<u64> {
        if !z.own_bitmap() {
            return Vec::new();
        }
        let mut bits = alloc::vec![0u64; (z.end_pfn - z.start_pfn).div_ceil(64) as usize];
        for p in pcps {
            for (pi, ring) in p.rings.iter().enumerate() {
                if order_of(pi) != 0 {
                    continue;
                }
                for i in ring.iter() {
                    let k = z.pfn_of(i) - z.start_pfn;
                    bits[(k / 64) as usize] |= 1 << (k % 64);
                }
            }
        }
        bits
    }

    /// Checks 3 to 5, the span frame by frame: blocks do not overlap, holes lie in no
    /// block, free buddies are merged, free frames hold the poison, and the walk agrees
    /// with the lists' totals (`rings`: [`Allocator::ring_frames`]). Pages allocated.
    fn check_span(&self, z: &Zone, buddy: u64, pcp: u64, rings: &[u64]) -> Result<u64, String> {
        let on_ring = |pfn: u64| {
            let k = pfn - z.start_pfn;
            rings
                .get((k / 64) as usize)
                .is_some_and(|w| w & (1 << (k % 64)) != 0)
        };
        let m = &self.meta[..];
        let mut pfn = z.start_pfn;
        let (mut walk_buddy, mut walk_pcp, mut allocated) = (0u64, 0u64, 0u64);
        while pfn < z.end_pfn {
            let e = &m[z.meta_index(pfn) as usize];
            let s = e.state();
            if s == State::Tail {
                return Err(format!("pfn {pfn:#x} belongs to no block"));
            }
            if s == State::Reserved {
                pfn += 1;
                continue;
            }
            let o = e.order();
            let end = pfn + (1u64 << o);
            if end > z.end_pfn || pfn & ((1 << o) - 1) != 0 {
                return Err(format!(
                    "block {pfn:#x}/o{o} misaligned or outside the zone"
                ));
            }
            for q in pfn + 1..end {
                let s2 = m[z.meta_index(q) as usize].state();
                if s2 != State::Tail {
                    return Err(format!(
                        "pfn {q:#x} ({s2:?}) lies inside block {pfn:#x}/o{o} ({s:?})"
                    ));
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
                                return Err(format!(
                                    "free buddies {pfn:#x} and {b:#x} (o{o}) unmerged"
                                ));
                            }
                        }
                    }
                    #[cfg(feature = "std")]
                    self.check_poison(pfn, o)?;
                }
                State::Pcp => {
                    walk_pcp += 1 << o;
                    #[cfg(feature = "std")]
                    self.check_poison(pfn, o)?;
                }
                // `Config::own_bitmap`: its bit clear, an order-0 `Allocated` frame on a
                // ring is cached (check 2 and the totals below find it there, once); on
                // none, its free has taken the bit and not yet marked it `Freeing`: still
                // allocated (below).
                State::Allocated if z.on_ring_unwritten(pfn, e) && on_ring(pfn) => {
                    walk_pcp += 1;
                    #[cfg(feature = "std")]
                    self.check_poison(pfn, 0)?;
                }
                State::Allocated | State::Freeing => allocated += 1 << o,
                _ => unreachable!(),
            }
            pfn = end;
        }
        if z.own_bitmap() {
            for (w, word) in z.own.iter().enumerate() {
                let mut bits = word.load(Relaxed);
                while bits != 0 {
                    let pfn = z.start_pfn + 64 * w as u64 + bits.trailing_zeros() as u64;
                    bits &= bits - 1;
                    let e = &m[z.meta_index(pfn) as usize];
                    if !matches!(e.state(), State::Allocated | State::Freeing) || e.order() != 0 {
                        return Err(format!(
                            "pfn {pfn:#x} has its order-0 ownership bit set but is {e:?}"
                        ));
                    }
                }
            }
        }
        if walk_buddy != buddy || walk_pcp != pcp {
            return Err(format!(
                "span walk found {walk_buddy} buddy / {walk_pcp} pcp pages, lists hold {buddy} / {pcp}"
            ));
        }
        if buddy + pcp + allocated != z.managed {
            return Err(format!(
                "frames not conserved: buddy {buddy} + pcp {pcp} + allocated {allocated} != managed {}",
                z.managed
            ));
        }
        Ok(allocated)
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

#[cfg(test)]
mod tests {
    use crate::{Allocator, Config, Gfp, Layout};
    use alloc::vec::Vec;

    /// 1 GiB, THP off, with CPU 0's pageset filled by a burst of frees.
    fn filled() -> Allocator {
        let cfg: Config = "linux-6.12,thp=off".parse().expect("config");
        let a = Allocator::new(&Layout::single(262_144, 2), cfg).expect("build");
        let mut frames = Vec::new();
        a.alloc_bulk_on(0, 0, Gfp::USER, None, 8000, &mut frames)
            .expect("alloc");
        a.free_bulk_on(0, &frames).expect("free");
        a.validate().expect("valid after the burst");
        a
    }

    /// The zone's occupancy word against its lists: after every step of a random mix of
    /// allocations and frees of every order and type (splits, merges, steals, refills and
    /// drains), `validate` finds each list's bit in step, and the watermark test's scan
    /// gives, for every order and flag set, the verdict of looking at the lists one by one.
    #[test]
    fn occupancy_word_follows_the_lists() {
        use crate::frame::{MigrateType, MAX_ORDER, NR_MIGRATETYPES};
        use crate::zone::{ALLOC_HIGHATOMIC, ALLOC_MIN_RESERVE, ALLOC_OOM};
        let a = Allocator::new(&Layout::single(8192, 2), Config::default()).expect("build");
        let types = [
            MigrateType::Unmovable,
            MigrateType::Movable,
            MigrateType::Reclaimable,
        ];
        let mut held = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut allocs, mut refused) = (0, 0);
        for step in 0..3000 {
            let r = next();
            if held.is_empty() || r % 3 != 0 {
                let order = [0, 0, 0, 1, 2, 3, 4, 9, 9, 10][(r >> 8) as usize % 10];
                let gfp = Gfp::from_migratetype(types[(r >> 16) as usize % 3]);
                match a.alloc_on((r >> 24) as usize % 2, order, gfp, None) {
                    Ok(f) => {
                        held.push(f);
                        allocs += 1;
                    }
                    Err(_) => refused += 1,
                }
            } else {
                let f = held.swap_remove((r >> 8) as usize % held.len());
                a.free_on((r >> 24) as usize % 2, f).expect("free");
            }
            if step % 7 != 0 {
                continue;
            }
            a.validate().expect("occupancy bits in step with the lists");
            let z = &a.zones[0];
            let g = z.lock_inspect();
            for aflags in [0, ALLOC_HIGHATOMIC, ALLOC_OOM, ALLOC_MIN_RESERVE] {
                let ha = aflags & (ALLOC_HIGHATOMIC | ALLOC_OOM) != 0;
                for order in 1..=MAX_ORDER {
                    let lists = (order..=MAX_ORDER).any(|o| {
                        (0..NR_MIGRATETYPES).any(|t| {
                            (t < 3 || (ha && t == MigrateType::HighAtomic as usize))
                                && !g.free.lists[o as usize][t].is_empty()
                        })
                    });
                    assert_eq!(
                        z.usable_free_block(order, aflags),
                        lists,
                        "step {step}, order {order}, aflags {aflags:#x}"
                    );
                }
            }
        }
        // The mix reached both verdicts: high orders were refused once the zone was
        // fragmented, and most requests were served.
        assert!(
            allocs > 1000 && refused > 0,
            "{allocs} served, {refused} refused"
        );
    }

    #[test]
    fn an_occupancy_bit_out_of_step_is_caught() {
        let a = filled();
        let z = &a.zones[0];
        let mt = crate::frame::MigrateType::Movable;
        let empty = z.lock_inspect().free.lists[1][mt as usize].is_empty();
        z.set_nonempty(1, mt, empty);
        let e = a.validate().unwrap_err();
        assert!(e.what.contains("occupancy bit"), "{e}");
    }

    #[test]
    fn high_above_high_max_is_caught() {
        let a = filled();
        {
            let mut p = a.slot(0, 0).pcp.lock();
            p.st.high = p.st.high_max + crate::pcp::refill_overshoot(p.st.batch) + 1;
        }
        let e = a.validate().unwrap_err();
        assert!(e.what.contains("cpu 0 pcp out of bounds"), "{e}");
    }

    #[test]
    fn high_below_high_min_is_caught() {
        let a = filled();
        a.slot(1, 0).pcp.lock().st.high = -1;
        let e = a.validate().unwrap_err();
        assert!(e.what.contains("cpu 1 pcp out of bounds"), "{e}");
    }

    #[test]
    fn count_above_high_max_is_caught() {
        let a = filled();
        {
            // Shrink the bounds behind the allocator's back (not `set_pcp_sizes`, which
            // marks the pageset resized): the cached pages now exceed them.
            let mut p = a.slot(0, 0).pcp.lock();
            assert!(p.st.count > 64 + crate::pcp::refill_overshoot(p.st.batch));
            p.st.high_min = 32;
            p.st.high_max = 64;
            p.st.high = 64;
        }
        let e = a.validate().unwrap_err();
        assert!(e.what.contains("count"), "{e}");
    }

    #[test]
    fn broken_sizes_are_caught() {
        let a = filled();
        a.slot(0, 0).pcp.lock().st.batch = 0;
        let e = a.validate().unwrap_err();
        assert!(e.what.contains("cpu 0 pcp sizes"), "{e}");
    }

    #[test]
    fn a_resize_below_count_is_accepted_until_it_settles() {
        let a = filled();
        let before = a.pcp_info(0, 0).expect("pageset");
        // high = managed / 1024 / CPUs: far below what CPU 0 caches, as in the kernel
        // after `percpu_pagelist_high_fraction` is raised.
        a.set_high_fraction(1024).expect("fraction");
        let p = a.pcp_info(0, 0).expect("pageset");
        assert!(p.high_max < before.count && p.count == before.count);
        assert!(a.slot(0, 0).pcp.lock().resized);
        a.validate()
            .expect("a stale count is allowed right after the resize");
        // The tick drains the excess and settles the pageset.
        while a.tick(0) {}
        assert!(!a.slot(0, 0).pcp.lock().resized);
        assert!(a.pcp_info(0, 0).expect("pageset").count <= p.high_max);
        a.validate().expect("settled");
    }
}
