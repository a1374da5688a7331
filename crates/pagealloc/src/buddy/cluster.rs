//! Clustered refill's buddy side (docs/mechanisms.md, "Clustered refill";
//! [`crate::cluster`] has the clusters themselves): the bookkeeping as order-0 frames
//! join and leave the free lists, a refill's cut, and the wait for cuts in flight.

use super::Buddy;
use crate::frame::MigrateType;
use crate::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use crate::zone::Seam;

impl<S: Seam> Buddy<'_, S> {
    /// Batch of the zone's pagesets: the cluster size cap.
    #[inline]
    pub(crate) fn cluster_cap(&self) -> u32 {
        self.z.pageset_batch()
    }

    /// Cluster bookkeeping after `i` joined the order-0 `mt` list.
    #[inline]
    pub(crate) fn cluster_inserted(&mut self, i: u32, tail: bool, mt: MigrateType) {
        let cap = self.cluster_cap();
        self.inner
            .free
            .clusters
            .on_insert(self.m, i, tail, mt as u8, cap);
    }

    /// Cluster bookkeeping before `i` leaves an order-0 list.
    #[inline]
    pub(crate) fn cluster_removing(&mut self, i: u32) {
        self.inner.free.clusters.on_remove(self.m, i);
    }

    /// Cut whole clusters of the order-0 `mt` list, at most `max` frames, for a refill:
    /// accounts them out of the zone and leaves the cut pending (see the module docs).
    /// Returns frames and clusters cut.
    pub(crate) fn cut_clusters(&mut self, mt: MigrateType, max: u32) -> Option<(u32, u32)> {
        debug_assert!(self.inner.free.clusters.pending.is_none());
        let free = &mut self.inner.free;
        let mut r = crate::zone::Rec::<S>::locked(self.z, &self.inner.tally);
        r.zone(crate::access::ZoneLine::FreeArea(0), true);
        let (cut, k) = free
            .clusters
            .cut(self.m, &mut free.lists[0][mt as usize], max, &mut r)?;
        free.nr_free[0] -= cut.len as u64;
        free.clusters.pending = Some(cut);
        self.z.cluster_inflight.fetch_add(1, Relaxed);
        self.account(-(cut.len as i64), mt);
        let empty = self.inner.free.lists[0][mt as usize].is_empty();
        self.z.set_nonempty(0, mt, !empty);
        Some((cut.len, k))
    }

    /// Wait until no cut frames are between their cut and their fix-up, so that every
    /// order-0 `Buddy` state is on a free list (the RFC's `in_progress` wait). Call before
    /// interpreting order-0 `Buddy` states. A cut of this lock holder is fixed up now.
    #[inline]
    pub(crate) fn settle(&mut self) {
        if !self.cfg.clustered_refill {
            return;
        }
        if self.inner.free.clusters.pending.is_none() && self.z.cluster_inflight.load(Acquire) == 0
        {
            return;
        }
        self.settle_slow();
    }

    #[cold]
    #[inline(never)]
    fn settle_slow(&mut self) {
        if let Some(cut) = self.inner.free.clusters.pending.as_mut() {
            if !cut.fixed {
                let r = crate::zone::Rec::<S>::locked(self.z, &self.inner.tally);
                self.z
                    .fix_up(self.m, cut, self.cfg.pcp_migratetype_cache, &r);
                cut.fixed = true;
                self.z.cluster_inflight.fetch_sub(1, Release);
            }
        }
        let mut spins = 0u32;
        while self.z.cluster_inflight.load(Acquire) != 0 {
            spins += 1;
            crate::sync::backoff(spins);
        }
    }
}
