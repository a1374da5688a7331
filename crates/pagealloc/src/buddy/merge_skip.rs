//! Merge skipping's buddy side (docs/mechanisms.md, Appendix A): an order-0 free that
//! goes on its free list's head without looking at its buddy, the splices that put a
//! drained chain (order-0 frames or, with
//! [`Config::thp_merge_skip`](crate::Config::thp_merge_skip), pageblock-order blocks) on
//! a free list in one step, and a refill's cut of a THP list.

use super::Buddy;
use crate::frame::{MigrateType, PAGEBLOCK_ORDER};
use crate::memmap::{State, FLAG_MERGE_SKIPPED};
use crate::zone::{Rec, Seam};

impl<S: Seam> Buddy<'_, S> {
    /// `can_skip_merge` (Appendix A): order-0 frees skip merging unless a caller that
    /// needs contiguity raised the zone's merge-disable depth.
    #[inline]
    pub(crate) fn can_skip_merge(&self) -> bool {
        self.z
            .merge_disable
            .load(crate::sync::atomic::Ordering::Relaxed)
            == 0
    }

    /// An order-0 free under the zone lock: merge-skipped when merge skipping is on, the
    /// zone's disable depth is zero and the pageblock is not isolated (isolation wants
    /// merged blocks), else merged as usual.
    #[inline]
    pub(crate) fn free_order0(&mut self, pfn: u64, mt: MigrateType) {
        if self.cfg.merge_skip && mt != MigrateType::Isolate && self.can_skip_merge() {
            self.free_skip_merge(pfn, mt);
        } else {
            self.free_one(pfn, 0, mt, false);
        }
    }

    /// Put the chain `first..=last` of `len` order-0 frames, already marked `Buddy`,
    /// merge-skipped and of type `mt` by the caller, on the head of the order-0 `mt`
    /// list in one splice, with the accounting of `len` calls of [`Buddy::free_skip_merge`]
    /// (clusters: the frames join as `len` head inserts from `last` back to `first`).
    pub(crate) fn splice_skipped(&mut self, first: u32, last: u32, len: u32, mt: MigrateType) {
        let inner = &mut *self.inner;
        let mut r = Rec::<S>::locked(self.z, &inner.tally);
        r.zone(crate::access::ZoneLine::FreeArea(0), true);
        inner.free.lists[0][mt as usize].splice_after(self.m, None, first, last, len, &mut r);
        if self.cfg.clustered_refill {
            let cap = self.cluster_cap();
            self.inner
                .free
                .clusters
                .on_insert_head_run(self.m, last, len, mt as u8, cap);
        }
        self.inner.free.nr_free[0] += len as u64;
        self.z.set_nonempty(0, mt, true);
        self.account(len as i64, mt);
        self.inner.free.nr_skipped += len as u64;
        self.st.merge_skipped.add(len as u64);
    }

    /// Put the chain `first..=last` of `len` pageblock-order blocks, already merge-skipped
    /// `Buddy` heads of type `mt` (set by the caller), on the head of the order-9 `mt`
    /// list in one splice, with the accounting of `len` head inserts that skip the merge
    /// (`Config::thp_merge_skip`).
    pub(crate) fn splice_skipped_thp(&mut self, first: u32, last: u32, len: u32, mt: MigrateType) {
        let k = PAGEBLOCK_ORDER;
        let inner = &mut *self.inner;
        let mut r = Rec::<S>::locked(self.z, &inner.tally);
        r.zone(crate::access::ZoneLine::FreeArea(k), true);
        inner.free.lists[k as usize][mt as usize]
            .splice_after(self.m, None, first, last, len, &mut r);
        inner.free.nr_free[k as usize] += len as u64;
        self.z.set_nonempty(k, mt, true);
        self.account((len as i64) << k, mt);
        self.inner.free.nr_skipped_thp += len as u64;
        self.st.merge_skipped.add(len as u64);
    }

    /// The order-`order` blocks a refill takes from the `mt` list while it holds any, at
    /// most `max` (`Config::thp_merge_skip`): what `max` steps of [`Buddy::smallest`] take
    /// from the head of a list that holds them, cut off in one `list_cut_position`. Each
    /// block is made a `Pcp` head (with the list's type when `mt_cache`) in one write;
    /// the free area and the counters are updated once. Returns the chain (first, last,
    /// length), its outer links left for the caller to set; `None` when the list is empty.
    pub(crate) fn cut_for_pcp(
        &mut self,
        order: u8,
        mt: MigrateType,
        max: u32,
        mt_cache: bool,
    ) -> Option<(u32, u32, u32)> {
        let m = self.m;
        self.rec()
            .zone(crate::access::ZoneLine::FreeArea(order), true);
        let l = &self.inner.free.lists[order as usize][mt as usize];
        let first = l.head()?;
        let cnt = l.len().min(max);
        let mut i = first;
        let mut last = first;
        for j in 0..cnt {
            let e = &m[i as usize];
            // the head's index is the list's; each next one was read from the previous block
            self.rec()
                .frame_dep(self.z.pfn_of(i), true, u8::from(j > 0));
            if mt_cache {
                e.set_mt(mt as u8);
            }
            e.set_state_flags(State::Pcp, 0);
            last = i;
            i = e.next();
        }
        let inner = &mut *self.inner;
        let mut r = Rec::<S>::locked(self.z, &inner.tally);
        inner.free.lists[order as usize][mt as usize].cut_front(m, last, cnt, &mut r);
        inner.free.nr_free[order as usize] -= cnt as u64;
        let empty = self.inner.free.lists[order as usize][mt as usize].is_empty();
        self.z.set_nonempty(order, mt, !empty);
        self.account(-((cnt as i64) << order), mt);
        Some((first, last, cnt))
    }

    /// Put an order-0 frame on the free list head, marked merge-skipped, without looking
    /// at its buddy.
    pub(crate) fn free_skip_merge(&mut self, pfn: u64, mt: MigrateType) {
        self.add_to_list(pfn, 0, mt, false);
        self.m[self.z.meta_index(pfn) as usize].set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
        self.account(1, mt);
        self.inner.free.nr_skipped += 1;
        self.st.merge_skipped.add(1);
    }
}
