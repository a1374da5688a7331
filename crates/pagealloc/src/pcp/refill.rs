//! Refill: an empty list filled from the zone under one zone-lock hold
//! (`__rmqueue_pcplist`'s miss, `rmqueue_bulk`), and `rmqueue_pcplist`, the full path's
//! pageset allocation that runs it.

use super::ring::RingRec;
use super::{pindex, Pageset, Pcp, PcpList};
use crate::access::PCP_HEADER;
use crate::allocator::Allocator;
use crate::buddy::RmqueueMode;
use crate::frame::{MigrateType, PAGEBLOCK_ORDER, THP_ORDER};
use crate::memmap::State;
use crate::tune;
use crate::zone::{seam, Quiet, Rec, Reported, Seam, Zone};

impl Allocator {
    /// `rmqueue_pcplist` (docs/mechanisms.md §4.2): `None` if the pcp is busy or the zone is empty.
    #[inline]
    pub(crate) fn rmqueue_pcplist(
        &self,
        cpu: usize,
        zone: &Zone,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        let slot = self.slot(cpu, zone.idx);
        let Some(mut pcp) = slot.pcp.try_lock() else {
            self.cpus[cpu].stats.pcp_lock_busy.add_shared(1);
            return None;
        };
        tune::on_alloc(&mut pcp.st, &self.tune);
        self.take_from_list(Pageset { cpu, zone, slot }, &mut pcp, order, mt, aflags)
    }

    /// `__rmqueue_pcplist`: pop the head of the list, refilling it first if empty.
    #[inline]
    pub(crate) fn take_from_list(
        &self,
        ps: Pageset<'_>,
        pcp: &mut Pcp,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        let Pageset { zone, slot, .. } = ps;
        pcp.active = true;
        let pi = pindex(order, mt, slot.hot.thp_lists);
        let ring = slot.hot.ring_at(order);
        if pcp.list_empty(pi, ring) {
            self.refill(ps, pcp, PcpList { order, mt, pi }, aflags);
            if pcp.list_empty(pi, ring) {
                return None;
            }
        }
        match (ring, zone.trace.on()) {
            (false, false) => self.pop_hit::<false, Quiet>(ps, pcp, PcpList { order, mt, pi }),
            (false, true) => self.pop_hit::<false, Reported>(ps, pcp, PcpList { order, mt, pi }),
            (true, false) => self.pop_hit::<true, Quiet>(ps, pcp, PcpList { order, mt, pi }),
            (true, true) => self.pop_hit::<true, Reported>(ps, pcp, PcpList { order, mt, pi }),
        }
    }

    #[cold]
    #[inline(never)]
    fn refill(&self, ps: Pageset<'_>, pcp: &mut Pcp, l: PcpList, aflags: u32) {
        let (Pageset { zone, slot, .. }, PcpList { order, .. }) = (ps, l);
        let zf = zone.tune_flags();
        let mut n = self.nr_pcp_alloc(&mut pcp.st, zone, zf, order);
        if order == THP_ORDER && self.cfg.thp_refill_high && n > 1 {
            // Half the room below `high`: the pageset stays within `high`. Auto-tuning
            // raises `high` once per refill; raise it as the kernel-sized refills this one
            // replaces would have, so `high` (and the drains it sets) grows as before.
            let n0 = n;
            n = n.max(((pcp.st.high - pcp.st.count) / 2) >> order);
            for _ in 1..n / n0 {
                self.nr_pcp_alloc(&mut pcp.st, zone, zf, order);
            }
        }
        if self.cfg.pcp_buddy && order < PAGEBLOCK_ORDER {
            let (Pageset { cpu, zone, slot }, PcpList { order, mt, pi }) = (ps, l);
            let w = crate::pcp_buddy::Want {
                cpu,
                zone,
                slot,
                order,
                mt,
                pi,
                n,
            };
            n -= seam!(zone, S => self.pcp_buddy_refill::<S>(&w, pcp));
        }
        let got = if n > 0 || !self.cfg.pcp_buddy {
            seam!(ps.zone, S => self.rmqueue_bulk::<S>(ps, pcp, l, n, aflags))
        } else {
            0
        };
        pcp.settle_resize();
        if got > 0 {
            let pages = (got as u64) << order;
            slot.stats.pcp_refill.add(1);
            slot.stats.pcp_refill_pages.add(pages);
            slot.stats.alloc_zone.add(pages);
        }
    }

    /// `rmqueue_bulk` (docs/mechanisms.md §4.4): `n` blocks under one zone-lock hold, appended to the
    /// tail of list `pi`. Returns blocks taken.
    ///
    /// With clustered refill (order 0), whole clusters are first cut off the order-0
    /// list in O(1) each and made `Pcp` after the zone lock is dropped (`cluster.rs`);
    /// the rest is taken block by block as usual. `refill_meta_touched` counts frames
    /// whose metadata is read or written under the lock: one per block taken, about one
    /// per cluster cut.
    ///
    /// Reported as `S` ([`Seam`]): the caller tests the access seam once per hold
    /// (`seam!`), and the hold runs a copy whose report sites are compiled in (a sink is
    /// installed) or compiled away.
    #[inline(always)]
    pub(crate) fn rmqueue_bulk<S: Seam>(
        &self,
        ps: Pageset<'_>,
        pcp: &mut Pcp,
        l: PcpList,
        n: i32,
        aflags: u32,
    ) -> i32 {
        let (Pageset { cpu, zone, .. }, PcpList { order, mt, pi }) = (ps, l);
        let m = &self.meta[..];
        let mut g = zone.lock::<S>(cpu, &*self.platform);
        let st = g.st;
        let mut b = g.buddy::<S>(m, &self.cfg);
        let mut got = 0;
        let mut touched = 0u64;
        if order == 0 && self.cfg.clustered_refill {
            if let Some((frames, clusters)) = b.cut_clusters(mt, n as u32) {
                got += frames as i32;
                touched += clusters as u64;
                st.cluster_cut.add(clusters as u64);
            }
        }
        let ring = self.cfg.own_bitmap && order == 0;
        let own = ring && order == 0 && zone.own_bitmap();
        let before = pcp.lists[pi].tail();
        let taken_from = pcp.rings[pi].len();
        if order == THP_ORDER && self.cfg.thp_merge_skip {
            // The blocks on the order-9 list, cut off in one step (`thp_merge_skip`).
            let cache = self.cfg.pcp_migratetype_cache;
            if let Some((first, last, cnt)) = b.cut_for_pcp(order, mt, n as u32, cache) {
                if ring {
                    let mut i = first;
                    for _ in 0..cnt {
                        let next = m[i as usize].next();
                        let r = b.rec();
                        pcp.rings[pi].push_tail(i, &mut RingRec { r: &r, cpu, pi });
                        r.frame(r.z.pfn_of(i), true);
                        i = next;
                    }
                } else {
                    let tail = pcp.lists[pi].tail();
                    pcp.lists[pi].splice_after(m, tail, first, last, cnt, &mut b.rec());
                }
                got += cnt as i32;
                touched += cnt as u64;
            }
        }
        // `Config::rmqueue_mode` (6.15): the fallback mode that found the last block is
        // where the next `__rmqueue` of this refill starts; without it, every block starts
        // at the own type's lists.
        let mut mode = RmqueueMode::Normal;
        let keep_mode = self.cfg.rmqueue_mode;
        while got < n {
            if !keep_mode {
                mode = RmqueueMode::Normal;
            }
            // With `refill_runs`, the blocks still needed as one run of the smallest block.
            let run = if self.cfg.refill_runs {
                b.take_run(order, mt, (n - got) as u64)
            } else {
                None
            };
            // A run's blocks get the type `expand` would have written on each.
            let typed = run.is_some() || self.cfg.pcp_migratetype_cache;
            let (pfn, blocks) = match run {
                Some(r) => r,
                None => match b.take_mode(order, mt, aflags, &mut mode) {
                    Some(pfn) => (pfn, 1),
                    None => break,
                },
            };
            for k in 0..blocks {
                let i = zone.meta_index(pfn + (k << order));
                let e = &m[i as usize];
                e.set_order(order);
                if own {
                    // `Config::own_bitmap`: an order-0 frame on a ring reads as the
                    // allocation it will become (its bit, clear, says it is not one yet).
                    e.set_state(State::Allocated);
                    e.set_mt(mt as u8);
                } else {
                    e.set_state(State::Pcp);
                }
                if typed {
                    // ≤ 6.9 `__rmqueue_smallest`: `set_pcppage_migratetype(page,
                    // migratetype)` with the type of the free list it came from (no
                    // pageblock lookup): a store to `page->index`, under the zone lock.
                    e.set_mt(mt as u8);
                    if self.cfg.pcp_migratetype_cache {
                        b.rec().frame(pfn + (k << order), true);
                    }
                }
                if ring {
                    let r = b.rec();
                    pcp.rings[pi].push_tail(i, &mut RingRec { r: &r, cpu, pi });
                    r.frame(r.z.pfn_of(i), true);
                } else {
                    pcp.lists[pi].push_tail(m, i, &mut b.rec());
                }
            }
            got += blocks as i32;
            touched += blocks;
        }
        st.refill_meta_touched.add(touched);
        {
            let r = b.rec();
            r.pcp(cpu, pi as u8, true);
            r.pcp(cpu, PCP_HEADER, true);
            r.moved((got as u64) << order);
        }
        let cut = b.inner.free.clusters.pending.take();
        drop(g);
        if let Some(c) = cut {
            // The fix-up, outside the zone lock; the frames are ours (pcp lock held,
            // on no zone list), and zone-lock holders that read order-0 Buddy states
            // wait for `cluster_inflight` to drop.
            let r = Rec::<S>::unlocked(zone);
            if !c.fixed {
                zone.fix_up(m, &c, self.cfg.pcp_migratetype_cache, &r);
                zone.cluster_inflight
                    .fetch_sub(1, crate::sync::atomic::Ordering::Release);
            }
            // Cut before the blocks taken one by one: keep that order on the list.
            if ring {
                let taken = pcp.rings[pi].len() - taken_from;
                let mut i = c.first;
                for k in 0..c.len {
                    // each next frame is read from the one before (cached: just fixed up)
                    r.frame_dep(zone.pfn_of(i), false, u8::from(k > 0));
                    pcp.rings[pi].push_tail(i, &mut RingRec { r: &r, cpu, pi });
                    r.frame(r.z.pfn_of(i), true);
                    let e = &m[i as usize];
                    let next = e.next();
                    if own {
                        // as for the blocks taken one by one above (line cached: fixed up)
                        e.set_state(State::Allocated);
                        e.set_mt(mt as u8);
                    }
                    i = next;
                }
                pcp.rings[pi].rotate_back(taken, c.len);
            } else {
                pcp.lists[pi].splice_after(m, before, c.first, c.last, c.len, &mut { r });
            }
        }
        pcp.st.count += got << order;
        got
    }
}
