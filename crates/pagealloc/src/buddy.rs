//! The buddy allocator of one zone: free areas per order and migratetype, split
//! (`expand`), merge (`__free_one_page`), fallback and pageblock stealing, and the
//! high-atomic reserve (docs/mechanisms.md §7, 6.10+ behaviour with the 6.7/6.8 forms as switches).
//!
//! # Locking rules
//! Everything here runs with the zone lock held: a [`Buddy`] is built from the
//! `&mut ZoneInner` of a locked zone and lives no longer than the guard.
//!
//! # Invariants
//! `Σ_o nr_free[o]·2^o over non-isolated lists == NR_FREE_PAGES`; every free block head
//! has state `Buddy`, its order, and `mt` = the list it is on; no two free buddies of the
//! same order are both free unless they are in pageblocks whose types may not merge (or
//! merge skipping left them, marked).

mod cluster;
mod merge_skip;

use crate::access::ZoneLine;
use crate::config::Config;
use crate::frame::{MigrateType, MAX_ORDER, PAGEBLOCK_ORDER};
use crate::memmap::{List, PageMeta, State, FLAG_MERGE_SKIPPED};
use crate::stats::Stats;
use crate::zone::{
    Rec, Reported, Seam, Zone, ZoneGuard, ZoneInner, ALLOC_HIGHATOMIC, ALLOC_KSWAPD,
    ALLOC_NOFRAGMENT, ZONE_BOOSTED_WATERMARK,
};
use core::marker::PhantomData;

const PB_PAGES: u64 = 1 << PAGEBLOCK_ORDER;

impl ZoneGuard<'_> {
    /// The buddy state under this hold, its events counted for the holder CPU; `S` as
    /// [`Buddy`]'s.
    #[inline]
    pub(crate) fn buddy<'b, S: Seam>(
        &'b mut self,
        m: &'b [PageMeta],
        cfg: &'b Config,
    ) -> Buddy<'b, S> {
        let (z, st) = (self.zone, self.st);
        Buddy::new(z, self, st, m, cfg)
    }
}

/// `fallbacks[]` (docs/mechanisms.md §7.3).
const FALLBACKS: [[MigrateType; 2]; 3] = [
    [MigrateType::Reclaimable, MigrateType::Movable],
    [MigrateType::Reclaimable, MigrateType::Unmovable],
    [MigrateType::Unmovable, MigrateType::Movable],
];

/// Where a refill's next `__rmqueue` starts (`enum rmqueue_mode`, 6.15): its own type's
/// lists, or stealing one block at once. The kernel's `RMQUEUE_CMA` is not modelled (no
/// CMA) and its `RMQUEUE_CLAIM` is never stored (a claim refills the own type's lists,
/// so the next call starts there).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RmqueueMode {
    /// `RMQUEUE_NORMAL`: `__rmqueue_smallest` first, then claim, then steal.
    Normal,
    /// `RMQUEUE_STEAL`: `__rmqueue_steal` at once.
    Steal,
}

/// The smallest order a fallback may take a block of: `order`, or a pageblock's order
/// under `ALLOC_NOFRAGMENT` (`__rmqueue_claim`'s `min_order`; docs/mechanisms.md §11.6).
fn nofragment_min_order(order: u8, aflags: u32) -> u8 {
    if aflags & ALLOC_NOFRAGMENT != 0 {
        order.max(PAGEBLOCK_ORDER)
    } else {
        order
    }
}

/// `can_steal_fallback` (6.15+: `should_try_claim_block`, on the candidate block's order).
fn can_steal(order: u8, start: MigrateType) -> bool {
    order >= PAGEBLOCK_ORDER
        || order >= PAGEBLOCK_ORDER / 2
        || matches!(start, MigrateType::Reclaimable | MigrateType::Unmovable)
}

/// The buddy state of a locked zone. `S` as [`Rec`]'s: [`Quiet`](crate::zone::Quiet) when the caller has
/// tested, once for the lock hold, that no access sink is installed, so that the hold's
/// report sites compile away.
pub(crate) struct Buddy<'a, S: Seam = Reported> {
    pub(crate) z: &'a Zone,
    pub(crate) inner: &'a mut ZoneInner,
    pub(crate) m: &'a [PageMeta],
    pub(crate) cfg: &'a Config,
    pub(crate) st: &'a Stats,
    seam: PhantomData<S>,
}

impl<'a, S: Seam> Buddy<'a, S> {
    /// The buddy state of `z`, whose lock the caller holds (`inner` is the locked data),
    /// counting the hold's events into `st`. The one way to build a `Buddy`:
    /// [`ZoneGuard::buddy`](crate::zone::ZoneGuard::buddy) for a CPU's trip, directly only
    /// when the allocator is built.
    #[inline]
    pub(crate) fn new(
        z: &'a Zone,
        inner: &'a mut ZoneInner,
        st: &'a Stats,
        m: &'a [PageMeta],
        cfg: &'a Config,
    ) -> Self {
        Buddy {
            z,
            inner,
            m,
            cfg,
            st,
            seam: PhantomData,
        }
    }
}

impl<S: Seam> Buddy<'_, S> {
    #[inline]
    fn idx(&self, pfn: u64) -> u32 {
        self.z.meta_index(pfn)
    }
    #[inline]
    fn meta(&self, pfn: u64) -> &PageMeta {
        &self.m[self.idx(pfn) as usize]
    }
    /// The access recorder of this lock hold (see `access.rs`).
    #[inline]
    pub(crate) fn rec(&self) -> Rec<'_, S> {
        Rec::locked(self.z, &self.inner.tally)
    }
    /// `get_pfnblock_migratetype`, reported.
    #[inline]
    pub(crate) fn pb_mt(&self, pfn: u64) -> MigrateType {
        self.rec().pageblock(pfn, false);
        self.z.pageblock_mt(pfn)
    }
    /// `set_pageblock_migratetype`, reported.
    #[inline]
    pub(crate) fn set_pb_mt(&self, pfn: u64, mt: MigrateType) {
        self.rec().pageblock(pfn, true);
        self.z.set_pageblock_mt(pfn, mt);
    }

    /// `account_freepages`: NR_FREE_PAGES (not for ISOLATE) and free highatomic.
    #[inline]
    pub(crate) fn account(&mut self, delta: i64, mt: MigrateType) {
        if mt == MigrateType::Isolate {
            return;
        }
        self.rec().zone(ZoneLine::Counters, true);
        self.z.nr_free_pages.add_signed(delta);
        if mt == MigrateType::HighAtomic {
            self.z.nr_free_highatomic.add_signed(delta);
        }
    }

    fn set_nonempty(&self, order: u8, mt: MigrateType) {
        let l = &self.inner.free.lists[order as usize][mt as usize];
        self.z.set_nonempty(order, mt, !l.is_empty());
    }

    /// Put block `pfn` of `order` on the `mt` list (no accounting).
    pub(crate) fn add_to_list(&mut self, pfn: u64, order: u8, mt: MigrateType, tail: bool) {
        let i = self.idx(pfn);
        let e = &self.m[i as usize];
        e.set_order(order);
        e.set_mt(mt as u8);
        e.set_state(State::Buddy);
        let inner = &mut *self.inner;
        let mut r = Rec::<S>::locked(self.z, &inner.tally);
        r.zone(ZoneLine::FreeArea(order), true);
        let l = &mut inner.free.lists[order as usize][mt as usize];
        if tail {
            l.push_tail(self.m, i, &mut r);
        } else {
            l.push_head(self.m, i, &mut r);
        }
        if order == 0 && self.cfg.clustered_refill {
            self.cluster_inserted(i, tail, mt);
        }
        self.inner.free.nr_free[order as usize] += 1;
        self.set_nonempty(order, mt);
    }

    /// Take block `pfn` off its list (no accounting); returns the list's type.
    pub(crate) fn del_from_list(&mut self, pfn: u64, order: u8) -> MigrateType {
        let i = self.idx(pfn);
        let e = &self.m[i as usize];
        let mt = e.mt_type();
        if order == 0 && self.cfg.clustered_refill {
            self.cluster_removing(i);
        }
        let inner = &mut *self.inner;
        let mut r = Rec::<S>::locked(self.z, &inner.tally);
        r.zone(ZoneLine::FreeArea(order), true);
        inner.free.lists[order as usize][mt as usize].remove(self.m, i, &mut r);
        inner.free.nr_free[order as usize] -= 1;
        e.set_state(State::Tail);
        self.set_nonempty(order, mt);
        mt
    }

    /// Move a free block to another type's list, with accounting. A merge-skipped mark
    /// stays: the frame is still unmerged.
    fn move_to_list(&mut self, pfn: u64, order: u8, to: MigrateType, tail: bool) {
        let skipped = self.meta(pfn).flags() & FLAG_MERGE_SKIPPED;
        let from = self.del_from_list(pfn, order);
        self.account(-(1i64 << order), from);
        self.add_to_list(pfn, order, to, tail);
        self.account(1i64 << order, to);
        if skipped != 0 {
            self.meta(pfn).set_state_flags(State::Buddy, skipped);
        }
    }

    /// True if `pfn` heads a free block of `order` on a buddy list of this zone.
    #[inline]
    fn is_buddy(&self, pfn: u64, order: u8) -> bool {
        if !self.z.contains(pfn) {
            return false;
        }
        self.rec().frame(pfn, false);
        let e = self.meta(pfn);
        e.state() == State::Buddy && e.order() == order
    }

    /// `__free_one_page` (docs/mechanisms.md §7.1): merge upward as far as possible and insert, at the
    /// tail when the merge of the next level is likely.
    pub(crate) fn free_one(&mut self, mut pfn: u64, mut order: u8, mt: MigrateType, to_tail: bool) {
        if order == 0 && self.cfg.clustered_refill {
            // Order-0 buddy lookups must not see frames cut by a refill (cluster.rs).
            self.settle();
        }
        self.account(1i64 << order, mt);
        while order < MAX_ORDER {
            let bpfn = pfn ^ (1u64 << order);
            if !self.is_buddy(bpfn, order) {
                break;
            }
            let bmt = if order >= PAGEBLOCK_ORDER {
                let bmt = self.pb_mt(bpfn);
                if bmt != mt && (!mt.is_mergeable() || !bmt.is_mergeable()) {
                    break;
                }
                bmt
            } else {
                mt
            };
            let list_mt = self.del_from_list(bpfn, order);
            // The buddy's pages leave its list type and join ours (same pageblock below
            // pageblock order; the retag below makes them ours above it).
            if list_mt != mt {
                self.account(-(1i64 << order), list_mt);
                self.account(1i64 << order, mt);
            }
            let e = self.meta(bpfn);
            e.set_state_flags(State::Tail, 0);
            if bmt != mt && self.cfg.steal_claim_half {
                // 6.10+: match the buddy's pageblock type so that expand() later puts the
                // sub-blocks on the right lists.
                self.set_pb_mt(bpfn, mt);
            }
            pfn &= bpfn;
            order += 1;
        }
        let tail = to_tail || self.merge_likely(pfn, order);
        self.add_to_list(pfn, order, mt, tail);
    }

    /// `buddy_merge_likely`: the order+1 block containing ours has its own buddy free, so
    /// once our missing buddy comes back two levels of merging follow: keep this block
    /// cold (tail) so it is less likely to be split meanwhile.
    fn merge_likely(&self, pfn: u64, order: u8) -> bool {
        if order >= MAX_ORDER - 1 {
            return false;
        }
        let higher = pfn & !(1u64 << order);
        self.is_buddy(higher ^ (1u64 << (order + 1)), order + 1)
    }

    /// `free_one_page` (6.12): blocks larger than a pageblock are freed pageblock by
    /// pageblock, each with its own pageblock's type.
    pub(crate) fn free_pages(&mut self, pfn: u64, order: u8) {
        if order > PAGEBLOCK_ORDER {
            let mut p = pfn;
            while p < pfn + (1u64 << order) {
                let mt = self.pb_mt(p);
                self.free_one(p, PAGEBLOCK_ORDER, mt, false);
                p += PB_PAGES;
            }
        } else if order == 0 {
            // may skip merging (Appendix A)
            let mt = self.pb_mt(pfn);
            self.free_order0(pfn, mt);
        } else {
            let mt = self.pb_mt(pfn);
            self.free_one(pfn, order, mt, false);
        }
    }

    /// `expand`: split a block of order `high` at `pfn` down to `low`, putting the upper
    /// halves on the head of the `mt` lists; returns pages put back.
    fn expand(&mut self, pfn: u64, low: u8, mut high: u8, mt: MigrateType) -> u64 {
        let mut added = 0;
        while high > low {
            high -= 1;
            let size = 1u64 << high;
            self.add_to_list(pfn + size, high, mt, false);
            added += size;
        }
        added
    }

    /// `__rmqueue_smallest` (docs/mechanisms.md §7.2): [`Buddy::take_run`] of one block,
    /// whose pieces are `expand`'s, listed in its order.
    pub(crate) fn smallest(&mut self, order: u8, mt: MigrateType) -> Option<u64> {
        self.take_run(order, mt, 1).map(|(pfn, _)| pfn)
    }

    /// Up to `want` blocks of `order` for a refill, as one run of consecutive blocks cut
    /// from the front of the smallest block of type `mt` ([`Config::refill_runs`]):
    /// returns its first PFN and its length in blocks, `None` (nothing changed) when no
    /// list of `mt` at or above `order` holds a block.
    ///
    /// What `want` steps of [`Buddy::smallest`] give, in one step. The block it finds is
    /// the head of the lowest non-empty list `cur ≥ order`, so every `mt` list between
    /// `order` and `cur` is empty; each `smallest` step after the first then takes the
    /// lowest-addressed piece `expand` left (the only block on the lowest non-empty
    /// list), so the steps hand out the block's `order`-blocks in address order, and
    /// after `k` of them the free lists hold the rest of the block as its aligned binary
    /// decomposition, one piece per list, each alone on it. This takes the first
    /// `k = min(want, 2^(cur - order))` blocks and lists those pieces directly: the same
    /// blocks in the same order, the same lists, `nr_free`, occupancy bits and free-page
    /// count, without listing and unlisting every piece on the way. The caller writes the
    /// run's metadata as it writes a taken block's (order, state, type), with the type
    /// `mt` that `expand` gave every block of the run.
    pub(crate) fn take_run(&mut self, order: u8, mt: MigrateType, want: u64) -> Option<(u64, u64)> {
        for cur in order..=MAX_ORDER {
            self.rec().zone(ZoneLine::FreeArea(cur), false);
            let Some(i) = self.inner.free.lists[cur as usize][mt as usize].head() else {
                continue;
            };
            let pfn = self.z.pfn_of(i);
            self.del_from_list(pfn, cur);
            let blocks = 1u64 << (cur - order);
            let k = want.clamp(1, blocks);
            // The rest, [k, blocks) in blocks: one piece of 2^b blocks per set bit b of
            // `blocks - k`, the largest at the top, listed largest first (for k = 1 these
            // are `expand`'s halves, in its order).
            let rest = blocks - k;
            let mut end = blocks;
            for b in (0..cur - order).rev() {
                if rest & (1 << b) != 0 {
                    end -= 1 << b;
                    self.add_to_list(pfn + (end << order), order + b, mt, false);
                }
            }
            self.account(-((k << order) as i64), mt);
            self.m[i as usize].set_state_flags(State::Tail, 0);
            return Some((pfn, k));
        }
        None
    }

    /// First fallback type with a free block of order `cur`.
    fn find_fallback(&self, cur: u8, start: MigrateType) -> Option<MigrateType> {
        self.rec().zone(ZoneLine::FreeArea(cur), false);
        FALLBACKS[start as usize]
            .iter()
            .copied()
            .find(|&t| !self.inner.free.lists[cur as usize][t as usize].is_empty())
    }

    /// `__rmqueue`: own type, then fallback with stealing.
    pub(crate) fn take(&mut self, order: u8, mt: MigrateType, aflags: u32) -> Option<u64> {
        self.take_mode(order, mt, aflags, &mut RmqueueMode::Normal)
    }

    /// `__rmqueue` starting in `mode`, which it updates (`enum rmqueue_mode`, 6.15,
    /// `Config::rmqueue_mode`; docs/mechanisms.md §11.2): a block found by claiming puts
    /// the next call back on the own type's lists, a block found by stealing makes the
    /// next call steal at once. [`Buddy::take`] starts every call in `Normal`.
    pub(crate) fn take_mode(
        &mut self,
        order: u8,
        mt: MigrateType,
        aflags: u32,
        mode: &mut RmqueueMode,
    ) -> Option<u64> {
        if *mode == RmqueueMode::Normal {
            if let Some(p) = self.smallest(order, mt) {
                return Some(p);
            }
        }
        if !mt.is_mergeable() {
            return None;
        }
        if !self.cfg.fallback_claim_first {
            return self.fallback(order, mt, aflags);
        }
        if *mode != RmqueueMode::Steal {
            if let Some(p) = self.claim(order, mt, aflags) {
                *mode = RmqueueMode::Normal;
                return Some(p);
            }
        }
        // ALLOC_NOFRAGMENT: no block smaller than a pageblock from another type.
        if aflags & ALLOC_NOFRAGMENT != 0 {
            return None;
        }
        let p = self.steal(order, mt)?;
        *mode = RmqueueMode::Steal;
        Some(p)
    }

    /// `__rmqueue_claim` (6.15, docs/mechanisms.md §11.1): from the largest order down,
    /// while a block of that order may claim its pageblock (`should_try_claim_block`, as
    /// [`can_steal`]), try to claim the pageblock of the first fallback type's head block.
    /// With `ALLOC_NOFRAGMENT` only blocks of a pageblock's order or more are tried.
    fn claim(&mut self, order: u8, start: MigrateType, aflags: u32) -> Option<u64> {
        for cur in (nofragment_min_order(order, aflags)..=MAX_ORDER).rev() {
            if !can_steal(cur, start) {
                break;
            }
            let Some(ft) = self.find_fallback(cur, start) else {
                continue;
            };
            let i = self.inner.free.lists[cur as usize][ft as usize].head()?;
            if let Some(p) = self.try_claim(self.z.pfn_of(i), cur, order, start, aflags) {
                self.st.fallback.add(1);
                return Some(p);
            }
        }
        None
    }

    /// `try_to_claim_block` (6.15): a block of a pageblock's order or more is retagged
    /// and split as `start`; a smaller one claims its pageblock when half of it is free
    /// or alike, else nothing changes but the watermark boost.
    fn try_claim(
        &mut self,
        pfn: u64,
        cur: u8,
        order: u8,
        start: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        // The pageblock scan reads order-0 Buddy states.
        self.settle();
        let bt = self.pb_mt(pfn);
        if bt == MigrateType::HighAtomic {
            return None;
        }
        if cur >= PAGEBLOCK_ORDER {
            self.st.pageblock_claim.add(1);
            let from = self.del_from_list(pfn, cur);
            self.account(-(1i64 << cur), from);
            self.set_pageblock_range(pfn, cur, start);
            let added = self.expand(pfn, order, cur, start);
            self.account(added as i64, start);
            self.meta(pfn).set_state_flags(State::Tail, 0);
            return Some(pfn);
        }
        if self.boost_watermark() && aflags & ALLOC_KSWAPD != 0 {
            self.z.set_flag(ZONE_BOOSTED_WATERMARK);
        }
        let (free, movable) = self.scan_pageblock(pfn)?;
        let alike = if start == MigrateType::Movable {
            movable
        } else if bt == MigrateType::Movable {
            PB_PAGES - free - movable
        } else {
            0
        };
        if free + alike < PB_PAGES / 2 {
            return None;
        }
        self.move_freepages_block(pfn, start);
        self.st.pageblock_claim.add(1);
        self.set_pb_mt(pfn, start);
        self.smallest(order, start)
    }

    /// `__rmqueue_steal` (6.15): the smallest block of any fallback type, split in place
    /// (the remainders stay on that type's lists); no pageblock changes type.
    fn steal(&mut self, order: u8, start: MigrateType) -> Option<u64> {
        for cur in order..=MAX_ORDER {
            let Some(ft) = self.find_fallback(cur, start) else {
                continue;
            };
            let i = self.inner.free.lists[cur as usize][ft as usize].head()?;
            let pfn = self.z.pfn_of(i);
            self.settle();
            let from = self.del_from_list(pfn, cur);
            self.account(-(1i64 << cur), from);
            let added = self.expand(pfn, order, cur, from);
            self.account(added as i64, from);
            self.meta(pfn).set_state_flags(State::Tail, 0);
            self.st.fallback.add(1);
            return Some(pfn);
        }
        None
    }

    /// `__rmqueue_fallback` (docs/mechanisms.md §7.3): the largest fallback block first, so that a
    /// whole pageblock can be claimed; a movable request that cannot claim takes the
    /// smallest block instead.
    /// With `ALLOC_NOFRAGMENT` only blocks of a pageblock's order or more are tried
    /// (they can always claim, so the search for the smallest block never runs).
    fn fallback(&mut self, order: u8, start: MigrateType, aflags: u32) -> Option<u64> {
        let mut cur = MAX_ORDER as i32;
        while cur >= nofragment_min_order(order, aflags) as i32 {
            let c = cur as u8;
            if let Some(ft) = self.find_fallback(c, start) {
                let mut c = c;
                let mut ft = ft;
                let mut steal = can_steal(c, start);
                if !steal && start == MigrateType::Movable && c > order {
                    let (o, t) = (order..=MAX_ORDER)
                        .find_map(|o| self.find_fallback(o, start).map(|t| (o, t)))?;
                    c = o;
                    ft = t;
                    steal = can_steal(o, start);
                }
                let i = self.inner.free.lists[c as usize][ft as usize].head()?;
                self.st.fallback.add(1);
                return self.steal_block(self.z.pfn_of(i), c, order, start, aflags, steal);
            }
            cur -= 1;
        }
        None
    }

    /// `steal_suitable_fallback` (6.10+) or its ≤ 6.9 form (by `steal_claim_half`).
    fn steal_block(
        &mut self,
        pfn: u64,
        cur: u8,
        order: u8,
        start: MigrateType,
        aflags: u32,
        whole_allowed: bool,
    ) -> Option<u64> {
        // The pageblock scans below read order-0 Buddy states.
        self.settle();
        let bt = self.pb_mt(pfn);
        let new69 = self.cfg.steal_claim_half;
        if bt != MigrateType::HighAtomic {
            if cur >= PAGEBLOCK_ORDER {
                self.st.pageblock_claim.add(1);
                if new69 {
                    let from = self.del_from_list(pfn, cur);
                    self.account(-(1i64 << cur), from);
                    self.set_pageblock_range(pfn, cur, start);
                    let added = self.expand(pfn, order, cur, start);
                    self.account(added as i64, start);
                    self.meta(pfn).set_state_flags(State::Tail, 0);
                    return Some(pfn);
                }
                self.set_pageblock_range(pfn, cur, start);
                self.move_to_list(pfn, cur, start, false);
                return self.smallest(order, start);
            }
            if self.boost_watermark() && aflags & ALLOC_KSWAPD != 0 {
                self.z.set_flag(ZONE_BOOSTED_WATERMARK);
            }
            if whole_allowed {
                if let Some((free, movable)) = self.scan_pageblock(pfn) {
                    let alike = if start == MigrateType::Movable {
                        movable
                    } else if bt == MigrateType::Movable {
                        PB_PAGES - free - movable
                    } else {
                        0
                    };
                    let claim = free + alike >= PB_PAGES / 2;
                    if claim || !new69 {
                        // ≤ 6.9 moves the free pages even when it does not claim.
                        self.move_freepages_block(pfn, start);
                        if claim {
                            self.st.pageblock_claim.add(1);
                            self.set_pb_mt(pfn, start);
                        }
                        return self.smallest(order, start);
                    }
                }
            }
        }
        if new69 {
            // Split in place: the remainders stay on the block's own lists.
            let from = self.del_from_list(pfn, cur);
            self.account(-(1i64 << cur), from);
            let keep = if bt.is_mergeable() || bt == MigrateType::HighAtomic {
                bt
            } else {
                from
            };
            let added = self.expand(pfn, order, cur, keep);
            self.account(added as i64, keep);
            self.meta(pfn).set_state_flags(State::Tail, 0);
            Some(pfn)
        } else {
            self.move_to_list(pfn, cur, start, false);
            self.smallest(order, start)
        }
    }

    /// `boost_watermark` (docs/mechanisms.md §6.1).
    fn boost_watermark(&mut self) -> bool {
        let f = self.cfg.watermark_boost_factor as u64;
        if f == 0 || PB_PAGES * 4 > self.z.managed {
            return false;
        }
        let high = self.z.wmark_raw(crate::zone::WMARK_HIGH);
        let max_boost = (high * f / 10000).max(PB_PAGES);
        let b = (self.z.boost() + PB_PAGES).min(max_boost);
        self.rec().zone(ZoneLine::Watermarks, true);
        self.z.set_boost(b);
        true
    }

    /// Free pages and movable in-use pages of the pageblock around `pfn`; `None` if the
    /// pageblock crosses the zone boundary.
    fn scan_pageblock(&self, pfn: u64) -> Option<(u64, u64)> {
        let start = pfn & !(PB_PAGES - 1);
        if start < self.z.start_pfn || start + PB_PAGES > self.z.end_pfn {
            return None;
        }
        let (mut free, mut movable) = (0, 0);
        let mut p = start;
        // After the first, each frame's PFN is computed from the order read in the one
        // before: it waits for that line.
        let mut back = 0;
        while p < start + PB_PAGES {
            self.rec().frame_dep(p, false, back);
            back = 1;
            let e = self.meta(p);
            let step = match e.state() {
                State::Buddy => {
                    free += 1u64 << e.order();
                    1u64 << e.order()
                }
                // `Config::own_bitmap`: an unwritten frame on a ring is no allocation.
                State::Allocated if self.z.on_ring_unwritten(p, e) => 1,
                State::Allocated | State::Freeing => {
                    if e.mt() == MigrateType::Movable as u8 {
                        movable += 1u64 << e.order();
                    }
                    1u64 << e.order()
                }
                State::Pcp => 1u64 << e.order(),
                _ => 1,
            };
            p += step.max(1);
        }
        Some((free, movable))
    }

    /// `move_freepages_block`: every free block of the pageblock around `pfn` moves to the
    /// `to` lists (tail), and the pageblock is retagged. Returns pages moved, or `None`
    /// when the pageblock crosses the zone boundary.
    pub(crate) fn move_freepages_block(&mut self, pfn: u64, to: MigrateType) -> Option<u64> {
        let start = pfn & !(PB_PAGES - 1);
        if start < self.z.start_pfn || start + PB_PAGES > self.z.end_pfn {
            return None;
        }
        self.settle();
        let mut moved = 0;
        let mut p = start;
        while p < start + PB_PAGES {
            let e = self.meta(p);
            if e.state() == State::Buddy {
                let o = e.order();
                self.move_to_list(p, o, to, true);
                moved += 1u64 << o;
                p += 1u64 << o;
            } else if matches!(e.state(), State::Allocated | State::Pcp | State::Freeing) {
                self.rec().frame(p, false);
                p += 1u64 << e.order();
            } else {
                self.rec().frame(p, false);
                p += 1;
            }
        }
        self.set_pb_mt(start, to);
        Some(moved)
    }

    /// Retag every pageblock covered by a block of `order` at `pfn`.
    fn set_pageblock_range(&self, pfn: u64, order: u8, mt: MigrateType) {
        let n = (1u64 << order.max(PAGEBLOCK_ORDER)) / PB_PAGES;
        for k in 0..n {
            self.set_pb_mt(pfn + k * PB_PAGES, mt);
        }
    }

    /// `rmqueue_buddy` under the lock: HIGHATOMIC first for ALLOC_HIGHATOMIC, then the
    /// normal path, then HIGHATOMIC for non-blocking requests (docs/mechanisms.md §4.5).
    pub(crate) fn take_direct(&mut self, order: u8, mt: MigrateType, aflags: u32) -> Option<u64> {
        if aflags & ALLOC_HIGHATOMIC != 0 {
            if let Some(p) = self.smallest(order, MigrateType::HighAtomic) {
                return Some(p);
            }
        }
        if let Some(p) = self.take(order, mt, aflags) {
            return Some(p);
        }
        if aflags & (crate::zone::ALLOC_NON_BLOCK | crate::zone::ALLOC_OOM) != 0 {
            return self.smallest(order, MigrateType::HighAtomic);
        }
        None
    }

    /// `reserve_highatomic_pageblock` (docs/mechanisms.md §7.3): after a successful high-order atomic
    /// allocation, reserve its pageblock, up to about 1 % of the zone.
    pub(crate) fn reserve_highatomic(&mut self, pfn: u64, order: u8) {
        let managed = self.z.managed;
        if managed / 100 < PB_PAGES {
            return;
        }
        let max = (managed / 100).div_ceil(PB_PAGES) * PB_PAGES;
        if self.z.nr_reserved_highatomic.get() >= max {
            return;
        }
        let mt = self.pb_mt(pfn);
        if !mt.is_mergeable() {
            return;
        }
        if order < PAGEBLOCK_ORDER {
            if self
                .move_freepages_block(pfn, MigrateType::HighAtomic)
                .is_none()
            {
                return;
            }
            self.z.nr_reserved_highatomic.add_signed(PB_PAGES as i64);
        } else {
            self.set_pageblock_range(pfn, order, MigrateType::HighAtomic);
            self.z.nr_reserved_highatomic.add_signed(1i64 << order);
        }
        self.st.highatomic_reserve.add(1);
    }

    /// `unreserve_highatomic_pageblock`: give one reserved pageblock back to `mt`
    /// (keeping the last one unless `force`). True if one was released.
    pub(crate) fn unreserve_highatomic(&mut self, mt: MigrateType, force: bool) -> bool {
        let reserved = self.z.nr_reserved_highatomic.get();
        if reserved == 0 || (!force && reserved <= PB_PAGES) {
            return false;
        }
        for order in 0..=MAX_ORDER {
            let Some(i) =
                self.inner.free.lists[order as usize][MigrateType::HighAtomic as usize].head()
            else {
                continue;
            };
            let pfn = self.z.pfn_of(i);
            if self.pb_mt(pfn) != MigrateType::HighAtomic {
                continue;
            }
            let size = PB_PAGES.max(1u64 << order);
            self.z
                .nr_reserved_highatomic
                .add_signed(-(size.min(self.z.nr_reserved_highatomic.get()) as i64));
            if order < PAGEBLOCK_ORDER {
                self.move_freepages_block(pfn, mt);
            } else {
                self.move_to_list(pfn, order, mt, false);
                self.set_pageblock_range(pfn, order, mt);
            }
            self.st.highatomic_unreserve.add(1);
            return true;
        }
        false
    }

    /// The deferred merge of merge skipping (Appendix A): every order-0 frame marked
    /// merge-skipped is taken off its list and freed again with merging, after the
    /// pageblock-order blocks of `Config::thp_merge_skip` ([`Buddy::merge_skipped_thp`]).
    /// Returns frames and blocks merged; returns at once when nothing was merge-skipped
    /// since the last call.
    pub(crate) fn merge_skipped(&mut self) -> u64 {
        let thp = self.merge_skipped_thp();
        if self.inner.free.nr_skipped == 0 {
            return thp;
        }
        self.settle();
        let n = self.remerge_marked(0);
        self.inner.free.nr_skipped = 0;
        n + thp
    }

    /// Merge every merge-skipped pageblock-order block (`Config::thp_merge_skip`).
    /// Returns blocks merged.
    pub(crate) fn merge_skipped_thp(&mut self) -> u64 {
        if self.inner.free.nr_skipped_thp == 0 {
            return 0;
        }
        let n = self.remerge_marked(PAGEBLOCK_ORDER);
        self.inner.free.nr_skipped_thp = 0;
        n
    }

    /// One pass over the free lists of `order`, O(1) per block: the blocks marked
    /// merge-skipped are first unlinked onto a private list (state `Tail`, so none can be
    /// merged as someone's buddy while half done, and unlinking one never disturbs the
    /// walk), then freed one by one with merging; a block whose buddy is still on the
    /// private list merges when that buddy is freed. Returns blocks freed again.
    fn remerge_marked(&mut self, order: u8) -> u64 {
        let m = self.m;
        let mut held = List::new();
        for mt in MigrateType::ALL {
            let mut cur = self.inner.free.lists[order as usize][mt as usize].head();
            // After the head, each block is the previous one's link (a pointer chase,
            // one report back); after a removal the next block was just reported as the
            // unlinked block's neighbour, and a consumer sees that line in flight.
            let mut back = 0;
            while let Some(i) = cur {
                let e = &m[i as usize];
                self.rec().frame_dep(self.z.pfn_of(i), false, back);
                back = 1;
                let next = e.next();
                cur = (next != crate::memmap::NIL).then_some(next);
                if e.flags() & FLAG_MERGE_SKIPPED == 0 {
                    continue;
                }
                let lmt = self.del_from_list(self.z.pfn_of(i), order);
                self.account(-(1i64 << order), lmt);
                e.set_state_flags(State::Tail, 0);
                held.push_tail(m, i, &mut self.rec());
                back = 0;
            }
        }
        let mut n = 0;
        while let Some(i) = held.pop_head(m, &mut self.rec()) {
            let mt = m[i as usize].mt_type();
            self.free_one(self.z.pfn_of(i), order, mt, false);
            n += 1;
        }
        n
    }

    /// A free block of `order` or above on a mergeable type's list, one `__rmqueue` can
    /// take or steal (`compact_finished`'s COMPACT_SUCCESS test, on `nr_free` first).
    fn has_block(&self, order: u8) -> bool {
        (order..=MAX_ORDER).any(|o| {
            self.rec().zone(ZoneLine::FreeArea(o), false);
            self.inner.free.nr_free[o as usize] > 0
                && MigrateType::ALL
                    .iter()
                    .filter(|t| t.is_mergeable())
                    .any(|&t| !self.inner.free.lists[o as usize][t as usize].is_empty())
        })
    }

    /// The slow path's merge on demand (Appendix A, the part of compaction Lu's RFC gives
    /// to skipped frames): walk the order-0 lists and, at the first merge-skipped frame,
    /// merge every merge-skipped frame of its pageblock ([`Buddy::merge_pageblock`]);
    /// stop as soon as a block of `order` or above can be taken (`compact_finished`
    /// returning COMPACT_SUCCESS), else go on to the next merge-skipped frame. Returns
    /// frames merged, pageblocks merged and whether such a block exists (at once when one
    /// already did, merging nothing). `nr_skipped` loses the frames merged, and
    /// becomes 0 only when the walk reached the end of every list.
    pub(crate) fn merge_skipped_for(&mut self, order: u8) -> (u64, u64, bool) {
        if self.inner.free.nr_skipped == 0
            && (order <= PAGEBLOCK_ORDER || self.inner.free.nr_skipped_thp == 0)
        {
            return (0, 0, false);
        }
        // Another CPU's merge may have made one since this request failed.
        if self.has_block(order) {
            return (0, 0, true);
        }
        // Above pageblock order the merge-skipped pageblock-order blocks first: each
        // merges with its buddy if that is free; the order-0 walk below completes
        // pageblocks whose buddy block is free but was not skipped.
        let mut thp = 0;
        if order > PAGEBLOCK_ORDER && self.inner.free.nr_skipped_thp > 0 {
            thp = self.merge_skipped_thp();
            if self.has_block(order) {
                return (thp, thp, true);
            }
        }
        if self.inner.free.nr_skipped == 0 {
            return (thp, thp, false);
        }
        self.settle();
        let m = self.m;
        let (mut n, mut blocks) = (thp, thp);
        for mt in MigrateType::ALL {
            let mut cur = self.inner.free.lists[0][mt as usize].head();
            // After the head each frame is the previous one's link (one report back).
            let mut back = 0;
            while let Some(i) = cur {
                let e = &m[i as usize];
                let pfn = self.z.pfn_of(i);
                self.rec().frame_dep(pfn, false, back);
                back = 1;
                let next = e.next();
                cur = (next != crate::memmap::NIL).then_some(next);
                if e.flags() & FLAG_MERGE_SKIPPED == 0 {
                    continue;
                }
                // The merges below pageblock order unlink only frames of this pageblock
                // from the order-0 lists: move the cursor past them before touching any.
                let start = pfn & !(PB_PAGES - 1);
                while let Some(j) = cur {
                    if self.z.pfn_of(j) & !(PB_PAGES - 1) != start {
                        break;
                    }
                    self.rec().frame_dep(self.z.pfn_of(j), false, 1);
                    let next = m[j as usize].next();
                    cur = (next != crate::memmap::NIL).then_some(next);
                }
                n += self.merge_pageblock(start);
                blocks += 1;
                if self.has_block(order) {
                    // `n` counts the pageblock-order blocks merged above too.
                    self.inner.free.nr_skipped = self.inner.free.nr_skipped.saturating_sub(n - thp);
                    return (n, blocks, true);
                }
                // The cursor's frame was reported before the merge: read it afresh.
                back = 0;
            }
        }
        self.inner.free.nr_skipped = 0;
        (n, blocks, false)
    }

    /// Merge the merge-skipped frames of the pageblock at `start` (`isolate_freepages_block`'s
    /// walk by PFN, every frame's address computed): each marked free order-0 frame is
    /// unlinked onto a private list, then all are freed again with merging, as in
    /// [`Buddy::merge_skipped`]. Returns frames merged.
    fn merge_pageblock(&mut self, start: u64) -> u64 {
        let m = self.m;
        let lo = start.max(self.z.start_pfn);
        let hi = (start + PB_PAGES).min(self.z.end_pfn);
        let mut held = List::new();
        for p in lo..hi {
            self.rec().frame(p, false);
            let i = self.idx(p);
            let e = &m[i as usize];
            if e.state() != State::Buddy || e.order() != 0 || e.flags() & FLAG_MERGE_SKIPPED == 0 {
                continue;
            }
            let lmt = self.del_from_list(p, 0);
            self.account(-1, lmt);
            e.set_state_flags(State::Tail, 0);
            held.push_tail(m, i, &mut self.rec());
        }
        let mut n = 0;
        while let Some(i) = held.pop_head(m, &mut self.rec()) {
            let mt = m[i as usize].mt_type();
            self.free_one(self.z.pfn_of(i), 0, mt, false);
            n += 1;
        }
        n
    }
}
