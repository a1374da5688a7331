//! Allocation: the public entry points, the zonelist walk (`get_page_from_freelist`),
//! `rmqueue`, the slow path, compaction and bulk allocation.

use super::Allocator;
use crate::access::{emit_zone_check, emit_zonelist};
use crate::buddy::Buddy;
use crate::frame::{AllocError, Frame, Gfp, MigrateType, Pfn, MAX_ORDER};
use crate::pcp::Pageset;
#[cfg(feature = "std")] // the poison check
use crate::sync::atomic::Ordering::Relaxed;
use crate::topology::ZoneKind;
use crate::tune;
use crate::zone::*;
#[cfg(feature = "access")]
use alloc::sync::Arc;
use alloc::vec::Vec;

/// What one zone of the zonelist walk gave.
enum ZoneTry {
    /// A block.
    Got(u64),
    /// Failed the watermark test or ran out: "full" for the zonelist cache.
    Full,
    /// Not eligible for this request (a Movable zone for a non-movable request).
    Skip,
}

impl Allocator {
    /// The CPU the caller runs on, as the platform says, folded onto this allocator's
    /// CPUs: a layout with fewer CPUs than the host (say one pageset for a whole process)
    /// shares its pagesets among the host CPUs instead of refusing them.
    #[inline]
    pub fn current_cpu(&self) -> usize {
        let c = self.platform.current_cpu();
        let n = self.cpus.len();
        if c < n {
            c
        } else {
            c % n
        }
    }

    /// Allocate 2^`order` frames on the current CPU's node (see [`Allocator::current_cpu`]).
    #[inline]
    pub fn alloc_pages(&self, order: u8, gfp: Gfp) -> Result<Frame, AllocError> {
        self.alloc_on(self.current_cpu(), order, gfp, None)
    }

    /// Allocate 2^`order` frames preferring `node` (`None`: the current CPU's node).
    #[inline]
    pub fn alloc_pages_node(
        &self,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        self.alloc_on(self.current_cpu(), order, gfp, node)
    }

    /// Allocate as CPU `cpu` (its pageset, its node unless `node` is given).
    ///
    /// ```
    /// use pagealloc::{AllocError, Allocator, Config, Gfp, Layout, MAX_ORDER};
    ///
    /// // Two nodes of 64 MiB, one CPU each.
    /// let a = Allocator::new(&Layout::numa(2, 16384, 1), Config::default())?;
    /// let local = a.alloc_on(0, 0, Gfp::KERNEL, None)?;
    /// assert_eq!(a.zone_of_pfn(local.pfn), Some(0)); // CPU 0's node
    /// let remote = a.alloc_on(0, 2, Gfp::KERNEL, Some(1))?; // four pages from node 1
    /// assert_eq!(a.zone_of_pfn(remote.pfn), Some(1));
    /// assert_eq!(a.alloc_on(0, MAX_ORDER + 1, Gfp::KERNEL, None), Err(AllocError::InvalidOrder(11)));
    /// assert_eq!(a.alloc_on(7, 0, Gfp::KERNEL, None), Err(AllocError::InvalidCpu(7)));
    /// a.free_on(0, local)?;
    /// a.free_on(0, remote)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn alloc_on(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        // Two copies of the hit, each inlined: one that serves linked lists only, and
        // one that also serves rings (`Config::own_bitmap`'s order-0 lists), picked
        // by one test per call (`Allocator::ring_hits`): the ring-aware copy alone
        // would cost the linked lists' pair more than the test (`pcp/hit.rs`, top).
        if self.ring_hits {
            return self.alloc_on_lists::<true>(cpu, order, gfp, node);
        }
        self.alloc_on_lists::<false>(cpu, order, gfp, node)
    }

    /// [`Allocator::alloc_on`] with the hit for the pageset's list forms: linked lists
    /// only (`RINGS` false), or rings and linked lists.
    #[inline(always)]
    fn alloc_on_lists<const RINGS: bool>(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        // THISNODE takes the walk, which checks each zone's node (the CPU's home zone is
        // another node's when its own node has no memory); a constant `gfp` folds the
        // test away.
        if node.is_none() && !gfp.contains(Gfp::THISNODE) {
            if let Some(pfn) = self.alloc_hit::<RINGS, Quiet>(cpu, order, gfp) {
                let f = Frame::new(Pfn(pfn), order);
                self.check_poison_on_alloc(cpu, f);
                return Ok(f);
            }
        }
        self.alloc_walk_checked(cpu, order, gfp, node)
    }

    /// [`Allocator::alloc_on`] for a caller that installed an access sink
    /// ([`Allocator::set_access_sink`]: the simulator, at every allocation): straight to
    /// the reported hit and the walk, without the inlined quiet hit, which serves no order
    /// while a sink is installed (the same allocation and the same reports as
    /// `alloc_on`). Without a sink, the same allocation by the walk.
    #[cfg(feature = "access")]
    #[inline]
    pub fn alloc_on_reported(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        self.alloc_walk_checked(cpu, order, gfp, node)
    }

    /// Past the PCP hit: the walk, and the poison check of what it hands out.
    #[inline(always)]
    fn alloc_walk_checked(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        let r = self.alloc_walk(cpu, order, gfp, node);
        if let Ok(f) = r {
            self.check_poison_on_alloc(cpu, f);
        }
        r
    }

    /// With [`Config::poison`] on a memory-backed allocator, check that a block being
    /// handed out still holds the poison written when it was freed (`debug_pagealloc`'s
    /// `check_poison_mem`): a write after free is caught even when the block is allocated
    /// again before the next `validate()`. Damage is counted (`poison_damaged`), the
    /// first damaged block is remembered for `validate()` to report, and the block is
    /// handed out anyway, as the kernel does after reporting.
    #[inline(always)]
    fn check_poison_on_alloc(&self, cpu: usize, f: Frame) {
        #[cfg(feature = "std")]
        if self.poison_hits {
            self.check_poison_cold(cpu, f);
        }
        #[cfg(not(feature = "std"))]
        let _ = (cpu, f);
    }

    #[cfg(feature = "std")]
    #[cold]
    #[inline(never)]
    fn check_poison_cold(&self, cpu: usize, f: Frame) {
        let Some(r) = &self.region else { return };
        let idx = f.pfn.0 - self.region_base_pfn;
        if !r.check_poison(idx, f.pages(), crate::config::POISON_BYTE) {
            self.cpus[cpu].stats.poison_damaged.add_shared(1);
            let _ = self
                .poison_first_damaged
                .compare_exchange(u64::MAX, f.pfn.0, Relaxed, Relaxed);
        }
    }

    /// [`Allocator::alloc_on`] past the inlined PCP hit: with an access sink installed the
    /// hit reported (the inlined copy serves no order then, [`crate::pcp`]'s `Hot::report`),
    /// else the zonelist walk, then the slow path.
    #[inline(never)]
    fn alloc_walk(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        #[cfg(feature = "access")]
        if node.is_none() && !gfp.contains(Gfp::THISNODE) {
            // The copy that serves rings and linked lists: with linked lists only, its
            // ring test finds no ring order.
            if let Some(pfn) = self.alloc_hit::<true, Reported>(cpu, order, gfp) {
                return Ok(Frame::new(Pfn(pfn), order));
            }
        }
        if order > MAX_ORDER {
            return Err(AllocError::InvalidOrder(order));
        }
        let Some(c) = self.cpus.get(cpu) else {
            return Err(AllocError::InvalidCpu(cpu));
        };
        let node = node.unwrap_or(c.node);
        if node >= self.zonelists.len() {
            return Err(AllocError::InvalidNode(node));
        }
        let mt = gfp.migratetype();
        let mut aflags = WMARK_LOW as u32;
        if gfp.contains(Gfp::KSWAPD) {
            aflags |= ALLOC_KSWAPD;
        }
        aflags |= self.nofragment_flag(node, mt);
        if let Some(pfn) = self.get_page_from_freelist(cpu, node, order, mt, gfp, aflags) {
            return Ok(Frame::new(Pfn(pfn), order));
        }
        self.alloc_slowpath(cpu, node, order, mt, gfp)
    }

    /// `alloc_flags_nofragment` (`Config::nofragment`, docs/mechanisms.md §11.6):
    /// `ALLOC_NOFRAGMENT` when the preferred zone (the first of `node`'s zonelist that `mt`
    /// may use) is a Normal zone and DMA32 can take over: on one node always (the kernel
    /// assumes DMA32 is populated there), on several when the preferred zone's node has a
    /// DMA32 zone with managed pages.
    fn nofragment_flag(&self, node: usize, mt: MigrateType) -> u32 {
        if !self.cfg.nofragment {
            return 0;
        }
        let Some(p) = self.zonelists[node]
            .iter()
            .map(|&zi| &self.zones[zi])
            .find(|z| z.kind != ZoneKind::Movable || mt == MigrateType::Movable)
        else {
            return 0;
        };
        if p.kind != ZoneKind::Normal {
            return 0;
        }
        if self.zonelists.len() > 1
            && !self
                .zones
                .iter()
                .any(|z| z.node == p.node && z.kind == ZoneKind::Dma32 && z.managed > 0)
        {
            return 0;
        }
        ALLOC_NOFRAGMENT
    }

    /// `get_page_from_freelist` (docs/mechanisms.md §6.4): walk the zonelist; BELOW_HIGH detection,
    /// the watermark test, then `rmqueue`.
    ///
    /// With the zonelist full-zone cache (docs/mechanisms.md §8, 2.6.24 form): once the first zone
    /// failed, the cache is set up (and wiped if older than a second) and zones found
    /// full recently are skipped; every zone that fails is marked full; a walk that found
    /// nothing with the cache walks once more without it. Without the cache the only
    /// cost is one never-taken branch per zone. GFP_THISNODE walks have no cache, as in
    /// the kernel.
    ///
    /// With `ALLOC_NOFRAGMENT` in `aflags` (`Allocator::nofragment_flag`): a walk that
    /// reaches a zone of another node than the first zone's, or that found nothing, starts
    /// again without it (`no_fallback`: fragmenting a local zone is better than going
    /// remote or failing).
    #[inline]
    fn get_page_from_freelist(
        &self,
        cpu: usize,
        node: usize,
        order: u8,
        mt: MigrateType,
        gfp: Gfp,
        mut aflags: u32,
    ) -> Option<u64> {
        let zl = &self.zonelists[node];
        let mut retried = false;
        'retry: loop {
            let mut zlc_active = false;
            let mut did_setup = false;
            let mut second_pass = retried;
            loop {
                for (k, &zi) in zl.iter().enumerate() {
                    let z = &self.zones[zi];
                    if zlc_active && !self.zlc[node].worth_trying(k) {
                        self.cpus[cpu].stats.zonelist_skipped.add_shared(1);
                        // `zlc_zone_worth_trying` read the entry's `z_to_n` and full bit.
                        if let Some(s) = z.trace.sink() {
                            emit_zonelist(s, node, k, false);
                        }
                        continue;
                    }
                    // `__GFP_THISNODE`: no zone of another node, the first entry included
                    // (a memoryless node's zonelist starts on another node).
                    if gfp.contains(Gfp::THISNODE) && z.node != node {
                        break;
                    }
                    if aflags & ALLOC_NOFRAGMENT != 0 && k > 0 && z.node != self.zones[zl[0]].node {
                        aflags &= !ALLOC_NOFRAGMENT;
                        retried = true;
                        continue 'retry;
                    }
                    if k > 0 || second_pass {
                        self.cpus[cpu].stats.zonelist_scanned.add_shared(1);
                    }
                    let full = match self.try_zone(cpu, z, order, mt, aflags) {
                        ZoneTry::Got(pfn) => {
                            // Reported after the zone's own accesses (the walk read these
                            // lines first): checking the sink here rather than before
                            // `try_zone` keeps the hot path's registers free.
                            if let Some(s) = z.trace.sink() {
                                emit_zone_check(s, node, k, zi);
                            }
                            return Some(pfn);
                        }
                        ZoneTry::Full => true,
                        ZoneTry::Skip => false,
                    };
                    if let Some(s) = z.trace.sink() {
                        emit_zone_check(s, node, k, zi);
                    }
                    // From here on this walk failed at least once: the cold part.
                    let zlc =
                        self.cfg.zonelist_cache && zl.len() > 1 && !gfp.contains(Gfp::THISNODE);
                    if zlc && full {
                        self.zlc[node].mark_full(k);
                        if let Some(s) = z.trace.sink() {
                            emit_zonelist(s, node, k, true);
                        }
                    }
                    if !did_setup {
                        did_setup = true;
                        if zlc {
                            // zlc_setup only after the first zone failed; a wipe writes
                            // the bits it clears.
                            let sink = z.trace.sink();
                            self.zlc[node].setup(self.platform.now_ns(), |i| {
                                if let Some(s) = sink {
                                    emit_zonelist(s, node, i, true);
                                }
                            });
                            zlc_active = true;
                        }
                    }
                }
                if !zlc_active {
                    break;
                }
                // The second pass ignores the cache (zones may have freed pages since).
                zlc_active = false;
                second_pass = true;
            }
            if aflags & ALLOC_NOFRAGMENT == 0 {
                return None;
            }
            aflags &= !ALLOC_NOFRAGMENT;
            retried = true;
        }
    }

    /// One zone of the zonelist walk: BELOW_HIGH detection, the watermark test, `rmqueue`.
    #[inline(always)]
    fn try_zone(&self, cpu: usize, z: &Zone, order: u8, mt: MigrateType, aflags: u32) -> ZoneTry {
        let fa = self.cfg.highatomic_free_accounting;
        if z.kind == ZoneKind::Movable && mt != MigrateType::Movable {
            return ZoneTry::Skip;
        }
        let mut checked = false;
        if self.cfg.below_high && !z.has_flag(ZONE_BELOW_HIGH) {
            if z.watermark_fast(order, z.alloc_mark(WMARK_HIGH), aflags, fa) {
                checked = true;
            } else {
                z.set_flag(ZONE_BELOW_HIGH);
                self.cpus[cpu].stats.below_high_set.add_shared(1);
            }
        }
        if !checked && aflags & ALLOC_NO_WATERMARKS == 0 {
            let mark = z.alloc_mark((aflags & ALLOC_WMARK_MASK) as usize);
            if !z.watermark_fast(order, mark, aflags, fa) {
                self.wake_kswapd(z);
                self.cpus[cpu].stats.watermark_fail.add_shared(1);
                return ZoneTry::Full;
            }
        }
        if let Some(pfn) = self.rmqueue(cpu, z, order, mt, aflags) {
            if aflags & ALLOC_HIGHATOMIC != 0 && order > 0 {
                self.with_buddy(cpu, z, |b| b.reserve_highatomic(pfn, order));
            }
            return ZoneTry::Got(pfn);
        }
        ZoneTry::Full
    }

    /// Positions of `node`'s zonelist (indices into [`Allocator::zonelist`]) that its
    /// full-zone cache currently marks full (`Config::zonelist_cache`).
    pub fn zonelist_full(&self, node: usize) -> Vec<usize> {
        self.zlc
            .get(node)
            .map_or_else(Vec::new, |c| c.full_positions())
    }

    /// Report every memory access the allocator makes to `sink` from now on (see
    /// [`crate::access`]); the simulator charges them through its cache model. Only with
    /// the `access` feature: without it the seam is compiled out. With it and no sink
    /// installed, the PCP hits run as without it, and every other path tests for a sink
    /// once per operation or zone-lock trip. With a sink, the PCP hits run out of line,
    /// reported (the same code, `S` = `Reported`: the same work, the same decisions).
    #[cfg(feature = "access")]
    pub fn set_access_sink(&mut self, sink: Arc<dyn crate::access::AccessSink>) {
        for z in self.zones.iter_mut() {
            z.trace = crate::access::Tracer::new(sink.clone());
        }
        for s in self.pcps.iter_mut() {
            s.hot.report();
        }
    }

    /// The zones of `node`'s zonelist in fallback order.
    pub fn zonelist(&self, node: usize) -> &[usize] {
        self.zonelists.get(node).map_or(&[], |z| &z[..])
    }

    /// `rmqueue` (docs/mechanisms.md §4.1).
    #[inline]
    fn rmqueue(
        &self,
        cpu: usize,
        z: &Zone,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        if self.pcp_allowed(order) {
            if let Some(p) = self.rmqueue_pcplist(cpu, z, order, mt, aflags) {
                return Some(p);
            }
        }
        let p = self.rmqueue_buddy(cpu, z, order, mt, aflags);
        if z.has_flag(ZONE_BOOSTED_WATERMARK) && aflags & ALLOC_KSWAPD != 0 {
            z.clear_flag(ZONE_BOOSTED_WATERMARK);
            z.set_flag(ZONE_RECLAIM_ACTIVE);
        }
        p
    }

    /// Run `f` on the buddy state of zone `z` with the zone lock held, counting the trip
    /// against `cpu`: the one way the allocator reaches a zone's free lists outside the
    /// pageset refill/drain paths (which keep the pcp lock too, see `pcp/`).
    #[inline]
    pub(crate) fn with_buddy<R>(
        &self,
        cpu: usize,
        z: &Zone,
        f: impl FnOnce(&mut Buddy<'_>) -> R,
    ) -> R {
        let mut g = z.lock::<Reported>(cpu, &*self.platform);
        f(&mut g.buddy::<Reported>(&self.meta, &self.cfg))
    }

    /// `rmqueue_buddy` (docs/mechanisms.md §4.5).
    #[cold]
    fn rmqueue_buddy(
        &self,
        cpu: usize,
        z: &Zone,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        self.with_buddy(cpu, z, |b| self.take_direct_locked(b, order, mt, aflags))
    }

    /// The locked part of `rmqueue_buddy`: one block off the free lists of the zone whose
    /// lock `b` holds, handed out (also the nolock allocation's zone path).
    pub(super) fn take_direct_locked(
        &self,
        b: &mut Buddy<'_>,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        let z = b.z;
        let pfn = b.take_direct(order, mt, aflags)?;
        self.mark_allocated(z, pfn, order, mt);
        b.rec().moved(1 << order);
        b.st.pgalloc.add(1 << order);
        b.st.alloc_zone.add(1 << order);
        b.st.alloc_direct.add(1);
        Some(pfn)
    }

    /// The model of kswapd: woken for a zone whose free pages fell below the low mark;
    /// RECLAIM_ACTIVE stays set until free pages reach the high mark again.
    #[inline]
    fn wake_kswapd(&self, z: &Zone) {
        if z.free_pages() < z.wmark(WMARK_LOW) {
            z.set_flag(ZONE_RECLAIM_ACTIVE);
        }
    }

    /// kswapd's end of balancing: free pages back at the high mark clears RECLAIM_ACTIVE
    /// and resets the boost.
    #[inline]
    pub(crate) fn reclaim_progress(&self, z: &Zone) {
        if z.has_flag(ZONE_RECLAIM_ACTIVE) && z.free_pages() >= z.wmark_raw(WMARK_HIGH) {
            z.clear_flag(ZONE_RECLAIM_ACTIVE);
            z.set_boost(0);
        }
    }

    /// `__alloc_pages_slowpath`, reduced to what exists without reclaimable memory:
    /// wake kswapd, retry at the min mark with the caller's reserves, then give back
    /// the high-atomic reserve and drain every pageset (as direct reclaim's retry does),
    /// then merge merge-skipped frames for a high-order request, then fail.
    #[cold]
    #[inline(never)]
    fn alloc_slowpath(
        &self,
        cpu: usize,
        node: usize,
        order: u8,
        mt: MigrateType,
        gfp: Gfp,
    ) -> Result<Frame, AllocError> {
        self.cpus[cpu].stats.alloc_slowpath.add_shared(1);
        let mut aflags = WMARK_MIN as u32;
        if gfp.contains(Gfp::KSWAPD) {
            aflags |= ALLOC_KSWAPD;
            for &zi in self.zonelists[node].iter() {
                self.wake_kswapd(&self.zones[zi]);
            }
        }
        if gfp.contains(Gfp::HIGH) {
            aflags |= ALLOC_MIN_RESERVE;
        }
        if gfp.contains(Gfp::ATOMIC) {
            aflags |= ALLOC_NON_BLOCK;
            if order > 0 {
                aflags |= ALLOC_HIGHATOMIC;
            }
        }
        let try_ = || self.get_page_from_freelist(cpu, node, order, mt, gfp, aflags);
        if let Some(p) = try_() {
            return Ok(Frame::new(Pfn(p), order));
        }
        if !gfp.contains(Gfp::ATOMIC) {
            // `__alloc_pages_direct_compact` comes before direct reclaim: merge skipped
            // frames until a block of this order exists, before draining every pageset.
            if let Some(p) = self.merge_on_demand(cpu, node, order, &try_) {
                return Ok(Frame::new(Pfn(p), order));
            }
            // Direct reclaim's retry: unreserve high-atomic, drain all pcps.
            for &zi in self.zonelists[node].iter() {
                self.unreserve_highatomic(cpu, &self.zones[zi], mt, false);
            }
            self.drain_all_pages();
            // Reclaim made progress: `zlc_clear_zones_full`.
            if self.cfg.zonelist_cache {
                let sink = self.zonelists[node]
                    .first()
                    .and_then(|&zi| self.zones[zi].trace.sink());
                self.zlc[node].clear(|i| {
                    if let Some(s) = sink {
                        emit_zonelist(s, node, i, true);
                    }
                });
            }
            if let Some(p) = try_() {
                return Ok(Frame::new(Pfn(p), order));
            }
            // The drained frames came back unmerged: once more.
            if let Some(p) = self.merge_on_demand(cpu, node, order, &try_) {
                return Ok(Frame::new(Pfn(p), order));
            }
            if !gfp.contains(Gfp::NORETRY) {
                for &zi in self.zonelists[node].iter() {
                    self.unreserve_highatomic(cpu, &self.zones[zi], mt, true);
                }
                if let Some(p) = try_() {
                    return Ok(Frame::new(Pfn(p), order));
                }
            }
        }
        self.cpus[cpu].stats.alloc_fail.add_shared(1);
        Err(AllocError::OutOfMemory)
    }

    fn unreserve_highatomic(&self, cpu: usize, z: &Zone, mt: MigrateType, force: bool) {
        if z.nr_reserved_highatomic.get() == 0 {
            return;
        }
        let mt = if mt.is_mergeable() {
            mt
        } else {
            MigrateType::Movable
        };
        self.with_buddy(cpu, z, |b| b.unreserve_highatomic(mt, force));
    }

    /// With merge skipping, an order > 0 request that failed: merge on demand
    /// ([`Allocator::compact_zones`]) and retry (`highorder_rescued` on success).
    fn merge_on_demand(
        &self,
        cpu: usize,
        node: usize,
        order: u8,
        try_: &impl Fn() -> Option<u64>,
    ) -> Option<u64> {
        if order == 0 || !self.cfg.merge_skip || !self.compact_zones(cpu, node, order) {
            return None;
        }
        let p = try_()?;
        self.cpus[cpu].stats.highorder_rescued.add_shared(1);
        Some(p)
    }

    /// The slow path's merge on demand (the on-demand merge of Aaron Lu's RFC, done where
    /// `try_to_compact_pages` would run): along the node's zonelist, merge the skipped
    /// frames of one pageblock after another ([`Buddy::merge_skipped_for`]) until a block
    /// of `order` exists, and stop at the first zone that yields one. True when a retry
    /// may succeed: frames were merged or such a block exists.
    fn compact_zones(&self, cpu: usize, node: usize, order: u8) -> bool {
        let mut progress = false;
        for &zi in self.zonelists[node].iter() {
            let (k, found) = self.with_buddy(cpu, &self.zones[zi], |b| {
                let (k, blocks, found) = b.merge_skipped_for(order);
                b.st.merge_deferred.add(k);
                b.st.merge_ondemand.add(blocks);
                (k, found)
            });
            progress |= k > 0 || found;
            if found {
                break;
            }
        }
        progress
    }

    fn compact_zone(&self, cpu: usize, zi: usize) -> u64 {
        let z = &self.zones[zi];
        self.with_buddy(cpu, z, |b| {
            let n = b.merge_skipped();
            b.st.merge_deferred.add(n);
            n
        })
    }

    /// Merge all merge-skipped order-0 frames in every zone (a `compact()` entry point
    /// for merge skipping). Returns frames merged.
    pub fn compact(&self) -> u64 {
        let cpu = self.current_cpu();
        (0..self.zones.len())
            .map(|z| self.compact_zone(cpu, z))
            .sum()
    }

    /// Allocate up to `n` blocks into `out` (`alloc_pages_bulk`): for the cached orders the
    /// pageset is locked once for the whole run. Returns how many were added; fewer than
    /// `n` only when memory ran out. See [`Allocator::free_bulk_on`] for the way back.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 1), Config::default())?;
    /// let mut frames = Vec::new();
    /// assert_eq!(a.alloc_bulk_on(0, 0, Gfp::USER, None, 100, &mut frames)?, 100);
    /// let c = a.counters();
    /// assert_eq!(c.pgalloc, 100);
    /// // Refills took whole batches from the zone: far fewer trips than pages.
    /// assert!(c.pcp_refill < 100 && c.pcp_refill_pages >= 100);
    /// a.free_bulk_on(0, &frames)?;
    /// assert_eq!(a.counters().pgfree, 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alloc_bulk_on(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
        n: usize,
        out: &mut Vec<Frame>,
    ) -> Result<usize, AllocError> {
        if n == 0 {
            return Ok(0);
        }
        let first = self.alloc_on(cpu, order, gfp, node)?;
        out.push(first);
        let mut done = 1;
        if self.pcp_allowed(order) {
            let zi = self
                .zone_of(first.pfn.0)
                .expect("allocated frame in a zone");
            let z = &self.zones[zi];
            let slot = self.slot(cpu, zi);
            let mt = gfp.migratetype();
            let fa = self.cfg.highatomic_free_accounting;
            // `alloc_pages_bulk` refills with the walk's flags, NOFRAGMENT included when
            // it refills the preferred zone.
            let node = node.unwrap_or(self.cpus[cpu].node);
            let mut aflags = ALLOC_KSWAPD;
            if self.zonelists.get(node).and_then(|zl| zl.first()) == Some(&zi) {
                aflags |= self.nofragment_flag(node, mt);
            }
            if let Some(mut pcp) = slot.pcp.try_lock() {
                while done < n && z.watermark_fast(order, z.alloc_mark(WMARK_LOW), 0, fa) {
                    tune::on_alloc(&mut pcp.st, &self.tune);
                    let Some(pfn) = self.take_from_list(
                        Pageset { cpu, zone: z, slot },
                        &mut pcp,
                        order,
                        mt,
                        aflags,
                    ) else {
                        break;
                    };
                    let f = Frame::new(Pfn(pfn), order);
                    self.check_poison_on_alloc(cpu, f);
                    out.push(f);
                    done += 1;
                }
            }
        }
        while done < n {
            match self.alloc_on(cpu, order, gfp, node) {
                Ok(f) => {
                    out.push(f);
                    done += 1;
                }
                Err(AllocError::OutOfMemory) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}
