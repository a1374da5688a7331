//! Drain: blocks handed back from a pageset to its zone. `free_pcppages_bulk` in the
//! kernel's form (list tails, round robin, one zone-lock hold), what calls it (the free
//! that crosses `high`, `drain_pages_zone`, the tick's `decay_pcp_high` and remote-node
//! expiry), and the block-by-block free shared by every form ([`Allocator::drain_one`],
//! with the kernel's type lookup). The forms beside the kernel's loop (merge-skipped
//! splices, THP runs, the order-0 rings of `own_bitmap`, `drain_newest`'s head pops) are
//! in `drain_fast.rs`: planned once per drain and entered list by list through one seam,
//! `Allocator::drain_beyond`, which leaves a list to the kernel's loop when none applies.

use super::{next_nonempty, order_of, Pageset, Pcp, PcpSlot, NR_PCP_LISTS};
use crate::access::PCP_HEADER;
use crate::allocator::Allocator;
use crate::buddy::Buddy;
use crate::frame::MigrateType;
use crate::memmap::{PageMeta, State};
use crate::tune;
use crate::zone::{seam, Seam, Zone, ZONE_BELOW_HIGH};

impl Allocator {
    /// The cold end of `free_unref_page_commit`: count a free_high, drain (`d.drain` pages
    /// from list `pi` on), and clear `ZONE_BELOW_HIGH` once the zone is above its high
    /// watermark again.
    #[cold]
    #[inline(never)]
    pub(super) fn after_free(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        pcp: &mut Pcp,
        d: tune::FreeDecision,
        pi: usize,
    ) {
        if d.free_high {
            slot.stats.free_high.add(1);
        }
        if d.drain <= 0 {
            return;
        }
        // `nr_pcp_free`'s pages, or more with `thp_drain_high`; with `drain_newest` the
        // order-0 frames from the list heads (`drain_fast.rs`).
        let (n, newest) = self.free_drain_beyond(pcp, slot, d, pi);
        seam!(zone, S => self.drain_pcp::<S>(Pageset { cpu, zone, slot }, pcp, n, pi, newest));
        if zone.has_flag(ZONE_BELOW_HIGH)
            && zone.watermark_ok(
                0,
                zone.wmark(crate::zone::WMARK_HIGH),
                0,
                self.cfg.highatomic_free_accounting,
            )
        {
            zone.clear_flag(ZONE_BELOW_HIGH);
        }
        self.reclaim_progress(zone);
    }

    /// `free_pcppages_bulk` (docs/mechanisms.md §3.6): `n` pages from the list tails, round robin from
    /// list `start`, under one zone-lock hold.
    pub(crate) fn free_pcppages_bulk(&self, ps: Pageset<'_>, pcp: &mut Pcp, n: i32, start: usize) {
        seam!(ps.zone, S => self.drain_pcp::<S>(ps, pcp, n, start, false));
    }

    /// [`Allocator::free_pcppages_bulk`]; with `newest` (`Config::drain_newest`, linked
    /// pagesets only) the order-0 frames leave from the heads of their lists, the most
    /// recently freed first, instead of the tails. Higher orders leave from the tails.
    ///
    /// Reported as `S` ([`Seam`]): the caller tests the access seam once (`seam!`), and
    /// the drain runs the copy whose report sites are compiled in (a sink is installed) or
    /// compiled away.
    fn drain_pcp<S: Seam>(
        &self,
        ps: Pageset<'_>,
        pcp: &mut Pcp,
        n: i32,
        start: usize,
        newest: bool,
    ) {
        let Pageset { cpu, zone, slot } = ps;
        if self.cfg.pcp_buddy {
            return self.pcp_buddy_drain::<S>(cpu, zone, slot, n, pcp, start);
        }
        let mut n = n.min(pcp.st.count);
        if n <= 0 {
            return;
        }
        let m = &self.meta[..];
        let moved_before = pcp.st.count;
        // The forms beside the kernel's loop (`drain_fast.rs`), planned before the lock.
        let mut beyond = self.drain_beyond_plan::<S>(cpu, zone, pcp, n, start, newest);
        let mut g = zone.lock::<S>(cpu, &*self.platform);
        let isolated = zone.has_isolated_pageblocks();
        let mut b = g.buddy::<S>(m, &self.cfg);
        self.drain_beyond_locked(&mut beyond, &mut b, isolated);
        // Lists round robin from `start`, each from its tail until it is empty or `n`
        // pages are out.
        let mut pi = (start + NR_PCP_LISTS - 1) % NR_PCP_LISTS;
        while n > 0 && pcp.st.count > 0 {
            // With `Config::own_bitmap` the order-0 lists are rings, the others linked.
            pi = next_nonempty(pi, |p| pcp.lists[p].is_empty() && pcp.rings[p].is_empty());
            b.rec().pcp(cpu, pi as u8, true);
            if let Some(left) = self.drain_beyond(&beyond, ps, &mut b, pcp, pi, n) {
                n = left;
                continue;
            }
            let k = order_of(pi);
            while let Some(i) = pcp.lists[pi].pop_tail(m, &mut b.rec()) {
                n -= 1 << k;
                pcp.st.count -= 1 << k;
                b.rec().moved(1 << k);
                self.drain_one(&mut b, zone.pfn_of(i), &m[i as usize], k, isolated);
                if n <= 0 {
                    break;
                }
            }
        }
        b.rec().pcp(cpu, PCP_HEADER, true);
        drop(g);
        slot.stats.pcp_drain.add(1);
        slot.stats
            .pcp_drain_pages
            .add((moved_before - pcp.st.count) as u64);
    }

    /// One block of a drain, zone lock held: its migratetype (the one cached in the page
    /// with `pcp_migratetype_cache` and no isolated pageblock, else the pageblock's), its
    /// state handed back to the buddy, and the buddy free (`free_order0` skips the merge
    /// with `merge_skip`). Shared by the linked lists' and the order-0 rings' drains.
    #[inline(always)]
    pub(super) fn drain_one<S: Seam>(
        &self,
        b: &mut Buddy<'_, S>,
        pfn: u64,
        e: &PageMeta,
        k: u8,
        isolated: bool,
    ) {
        // `Config::own_bitmap`: an order-0 frame's cached type was not written by its
        // free; the pageblock's is looked up.
        let cached = self.cfg.pcp_migratetype_cache && !(k == 0 && b.z.own_bitmap());
        let mt = drained_mt(b, cached && !isolated, pfn, e);
        e.set_state_flags(State::Tail, 0);
        if k == 0 {
            b.free_order0(pfn, mt);
        } else {
            b.free_one(pfn, k, mt, false);
        }
    }

    /// `drain_pages_zone` (docs/mechanisms.md §5.4): empty one CPU's pageset of a zone, in chunks of
    /// `batch << SCALE` (6.10+) or in one hold (≤ 6.9).
    pub(crate) fn drain_pages_zone(&self, cpu: usize, zone: &Zone) {
        let slot = self.slot(cpu, zone.idx);
        loop {
            let mut pcp = slot.pcp.lock();
            let c = pcp.st.count;
            if c <= 0 {
                break;
            }
            let n = if self.cfg.chunked_drain {
                c.min(tune::shl_sat(pcp.st.batch.max(1), self.tune.scale))
            } else {
                c
            };
            slot.stats.drain_cpu.add(1);
            self.free_pcppages_bulk(Pageset { cpu, zone, slot }, &mut pcp, n, 0);
            // A chunk that freed nothing would repeat forever: stop (never expected).
            if !self.cfg.chunked_drain || pcp.st.count >= c {
                break;
            }
        }
        self.reclaim_progress(zone);
    }

    /// The per-CPU part of `refresh_cpu_vm_stats` (docs/mechanisms.md §5.2, §5.3): decay `high`, return
    /// the excess, and drain remote-node pcps idle for 3 ticks. True if work remains.
    pub(crate) fn tick_zone(&self, cpu: usize, zone: &Zone) -> bool {
        let slot = self.slot(cpu, zone.idx);
        let mut pcp = slot.pcp.lock();
        let d = match &self.cfg.policy {
            None => tune::decay(&mut pcp.st, &self.tune),
            Some(p) => crate::policy::decay(
                &*p.0,
                &mut pcp.st,
                &self.policy_zone(zone, zone.tune_flags()),
                &self.tune,
            ),
        };
        let mut todo = d.todo;
        if d.excess > 0 && self.cfg.decay_batched {
            // 6.18.7 (fc4b909c368f): the excess goes back `batch` pages per
            // `free_pcppages_bulk` (one zone-lock trip each), the pcp lock dropped between
            // chunks; the amount is fixed before the first, as the kernel's `to_drain`.
            let batch = pcp.st.batch.max(1);
            let mut left = d.excess;
            loop {
                let n = left.min(batch);
                slot.stats.decay_drain.add(1);
                self.free_pcppages_bulk(Pageset { cpu, zone, slot }, &mut pcp, n, 0);
                left -= n;
                if left <= 0 {
                    break;
                }
                drop(pcp);
                pcp = slot.pcp.lock();
            }
        } else if d.excess > 0 {
            slot.stats.decay_drain.add(1);
            self.free_pcppages_bulk(Pageset { cpu, zone, slot }, &mut pcp, d.excess, 0);
        }
        if pcp.active {
            pcp.expire = 3;
            pcp.active = false;
        }
        if pcp.expire != 0 && pcp.st.count != 0 {
            if zone.node == self.cpus[cpu].node {
                pcp.expire = 0;
            } else {
                pcp.expire -= 1;
                todo = true;
                if pcp.expire == 0 {
                    let n = pcp.st.count.min(pcp.st.batch);
                    slot.stats.expire_drain.add(1);
                    self.free_pcppages_bulk(Pageset { cpu, zone, slot }, &mut pcp, n, 0);
                }
            }
        }
        pcp.settle_resize();
        drop(pcp);
        self.reclaim_progress(zone);
        todo
    }
}

/// The migratetype a drain frees block `pfn` (metadata `e`) with, zone lock held: the
/// type cached in its page when `cached` (`get_pcppage_migratetype`), else its
/// pageblock's (`get_pfnblock_migratetype`, reported).
#[inline(always)]
pub(super) fn drained_mt<S: Seam>(
    b: &Buddy<'_, S>,
    cached: bool,
    pfn: u64,
    e: &PageMeta,
) -> MigrateType {
    if cached {
        // `get_pcppage_migratetype`: a load of `page->index`.
        b.rec().frame(pfn, false);
        e.mt_type()
    } else {
        b.pb_mt(pfn)
    }
}
