//! The PCP hits: an allocation served from the head of a pageset list and a free
//! pushed onto one, each inlined into its entry point (`alloc_on`, `free_on`) with one
//! unlikely branch to the full path; and the full paths' own pageset free
//! (`free_unref_page`, `free_unref_page_commit`).
//!
//! # Budget of the hot path
//! Instructions per allocate+free pair on a PCP hit (callgrind, `examples/hotpath`; the
//! commands and how the figures came about are in docs/performance.md, "The PCP hit"):
//!
//! | config | checked order-0 pair | `free_on_unchecked` | checked order-9 pair |
//! |---|---:|---:|---:|
//! | `linux-6.12` (every kernel preset) | **257** | **254** | **267** |
//! | `fast` (the ring-aware copy of the hit) | 289 | — | 279 |
//!
//! Two copies of each hit are inlined, picked by one test per call
//! (`Allocator::ring_hits`): one for linked lists, one that also serves rings
//! (`own_bitmap`'s order-0 rings). The default pair pays 9 instructions for
//! that test (248 without it), which do not show in time; the rings' hits out of line
//! cost 405 for `fast`; the ring-aware copy alone, for every config, 262 / 261 unchecked
//! / 272 order 9 (its ring-order test on every hit), `fast` 284.
//!
//! The hits are generic over the `access` seam (`S: Seam`): the inlined copy is
//! [`Quiet`], whose report sites compile away, so the feature costs it nothing (270 when
//! each hit tested for a sink); with a sink installed its order masks are clear
//! ([`Hot::report`](super::Hot::report)) and the out-of-line paths run the [`Reported`]
//! copy instead, before the walk or the full free path. The order-9
//! allocation runs `__zone_watermark_ok` in full, whose free-area scan is one load of the
//! zone's occupancy word ([`Zone::watermark_fast`]; 303 when it read a byte per order).
//!
//! Time: 18.2–19.0 ns per checked pair on a quiet host (a 2-core AMD EPYC (Zen 3) VM).
//! Absolute figures move 2–3× with the load; the ratio much less. `alloc_on`, `free_on`
//! and everything they call on a hit are inlined into the caller.
//!
//! What a hit does, and nothing else — three atomic read-modify-writes per pair (the two
//! pagesets' `try_lock`s and the free's compare-and-swap), the rest plain loads and
//! stores:
//! - allocation ([`Allocator::alloc_hit`]): the first zone of the CPU's zonelist, its
//!   watermark test (`zone_watermark_fast`, as the kernel's walk does), one `try_lock`,
//!   the list's emptiness test, `free_count >>= 1`, the pop, four field updates (the
//!   state change to `Allocated` a plain store: only the pageset's lock holder moves a
//!   frame off its list), unlock;
//! - free (`Allocator::free_hit` → `free_unref_page_commit`): the zone of the PFN, the
//!   pageblock's migratetype (`get_pfnblock_migratetype`, which picks the list), one
//!   `try_lock`, then under it the ownership check — the compare-and-swap
//!   `Allocated -> Freeing` and the order — right behind the lock's own
//!   read-modify-write, which has already drained the store buffer; the push, the
//!   counters, the short form of [`tune::on_free`] (no `nr_pcp_high` while
//!   `count < high` and no zone flag is set), unlock.
//!
//! With `Config::own_bitmap` (in `fast`) the order-0 hits run the ring-aware copy: the pop
//! takes an index off the ring and sets the frame's ownership bit (an atomic `or`); the
//! free clears the bit (an atomic `and` that tells a double free) and pushes the index,
//! neither reading nor writing the frame's metadata line — four atomic
//! read-modify-writes per pair, 289 instructions.
//!
//! Each has one unlikely branch to its cold path: an allocation that is not a hit
//! (busy or empty list, failed watermark test, order or zone the lists do not serve)
//! returns `None` having changed nothing and the full zonelist walk runs instead, repeating
//! the tests, so the kernel's behaviour is unchanged; a free that is not a hit (busy
//! pageset, isolated pageblock, an order the lists do not serve, poisoning, a frame or CPU
//! out of range) changes nothing and takes the full path, which repeats the checks and
//! reports errors; a free that must drain or counts a free_high goes to `after_free`. The
//! switches the hit needs are copied into the pageset's [`Hot`](super::Hot) at build time; it reads
//! no [`Config`](crate::Config). Refill and drain, the only places that take the zone
//! lock, run the rest of [`crate::tune`].
//!
//! What stays, and why: the watermark test reads the zone's live free-page counter (a
//! cached per-pageset verdict could not be exact, and the kernel tests on every
//! allocation); the free's pageblock lookup decides the list (the pageblock's type may
//! have changed since the allocation); the compare-and-swap is what makes two racing
//! frees of one block fail for all but one, whichever CPUs they run on.
//!

use super::ring::RingRec;
use super::{pindex, Pageset, Pcp, PcpList, PcpSlot};
use crate::access::{emit_zone_check, PCP_HEADER};
use crate::allocator::Allocator;
use crate::frame::{Frame, Gfp, MigrateType, NR_PCPTYPES};
use crate::memmap::State;
use crate::tune;
use crate::zone::{
    Quiet, Rec, Reported, Seam, Zone, ALLOC_KSWAPD, WMARK_HIGH, WMARK_LOW, ZONE_BELOW_HIGH,
};

/// What the PCP hit of a free did.
pub(crate) enum Hit {
    /// Freed to the pageset.
    Done,
    /// Nothing changed: take the full path.
    Miss,
    /// The compare-and-swap found the block in this state, not `Allocated`.
    Refused(State),
    /// The block was allocated with this order, not the one given.
    WrongOrder(u8),
}

impl Allocator {
    /// The PCP hit of an allocation: `get_page_from_freelist` when the first zone of the
    /// CPU's zonelist passes its watermark test and the list holds a block, then
    /// `rmqueue_pcplist`'s pop. Returns `None`, having changed nothing, whenever any other
    /// step would run (a busy or empty list, a failed watermark test, an order or zone the
    /// lists do not serve); the caller then takes the full walk, which repeats the tests.
    ///
    /// `S` is the access seam's form: [`Quiet`], the copy inlined into `alloc_on`, which
    /// serves no order while a sink is installed ([`Hot::report`](super::Hot::report));
    /// [`Reported`], the copy the walk tries first (out of line), which serves nothing
    /// unless a sink is installed and then reports what the walk would have reported for
    /// the same allocation: the pop's lines, then the zonelist entry and the zone lines
    /// of the watermark test.
    #[inline(always)]
    pub(crate) fn alloc_hit<const RINGS: bool, S: Seam>(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
    ) -> Option<u64> {
        let zi = self.cpus.get(cpu)?.home_zone;
        let zone = self.zones.get(zi)?;
        if S::SINK && !zone.trace.on() {
            return None;
        }
        let slot = self.slot_hit(cpu, zi);
        let h = &slot.hot;
        if RINGS && h.hit_allows::<true, S>(order) {
            return self.alloc_hit_rest::<true, S>(cpu, zone, slot, order, gfp);
        }
        if !h.hit_allows::<false, S>(order) {
            return None;
        }
        self.alloc_hit_rest::<false, S>(cpu, zone, slot, order, gfp)
    }

    /// The rest of [`Allocator::alloc_hit`] once the order is known to be cached, on
    /// linked lists (`RING` false) or rings.
    #[inline(always)]
    fn alloc_hit_rest<const RING: bool, S: Seam>(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        order: u8,
        gfp: Gfp,
    ) -> Option<u64> {
        let h = &slot.hot;
        let mt = gfp.migratetype();
        if h.movable_zone && mt != MigrateType::Movable {
            return None;
        }
        let mut aflags = WMARK_LOW as u32;
        if gfp.contains(Gfp::KSWAPD) {
            aflags |= ALLOC_KSWAPD;
        }
        // `try_zone`: the high mark while BELOW_HIGH is clear, else the low mark. A failed
        // test leaves the flag and kswapd to the full walk.
        let mark = if h.below_high && !zone.has_flag(ZONE_BELOW_HIGH) {
            WMARK_HIGH
        } else {
            WMARK_LOW
        };
        if !zone.watermark_fast(order, zone.wmark(mark), aflags, h.free_accounting) {
            return None;
        }
        let mut pcp = slot.pcp.try_lock()?;
        let pi = pindex(order, mt, h.thp_lists);
        if pcp.list_empty(pi, RING) {
            return None;
        }
        tune::on_alloc(&mut pcp.st, &self.tune);
        pcp.active = true;
        let pfn = self.pop_hit::<RING, S>(
            Pageset { cpu, zone, slot },
            &mut pcp,
            PcpList { order, mt, pi },
        )?;
        if S::SINK {
            // The walk's report of its first zone, after the zone's own accesses:
            // position 0 of the CPU's node's zonelist (whose first zone is `zone`).
            if let Some(s) = zone.trace.sink() {
                emit_zone_check(s, self.cpus[cpu].node, 0, zone.idx);
            }
        }
        Some(pfn)
    }

    /// The pop of `__rmqueue_pcplist` from a list known not to be empty (`None` only if
    /// that was wrong), reported when `S` is [`Reported`] (a sink is installed: the caller tested).
    #[inline(always)]
    pub(super) fn pop_hit<const RING: bool, S: Seam>(
        &self,
        ps: Pageset<'_>,
        pcp: &mut Pcp,
        l: PcpList,
    ) -> Option<u64> {
        let (Pageset { cpu, zone, slot }, PcpList { order, mt, pi }) = (ps, l);
        let m = &self.meta[..];
        // `Config::own_bitmap`: an order-0 block leaves its ring with its metadata as
        // its last allocation or the refill left it (`Allocated`, order 0); its bit is
        // the ownership.
        let own = RING && order == 0 && zone.own_bitmap();
        // Reported when `S` is [`Reported`] (`rmqueue_pcplist` without the zone lock): the
        // pageset's count line, the list's head and length, then the list's or ring's
        // lines, and the frame whose state is written below; [`Quiet`], every report
        // site compiles away.
        let mut r = Rec::<S>::unlocked(zone);
        r.pcp(cpu, PCP_HEADER, true);
        r.pcp(cpu, pi as u8, true);
        let i = if RING {
            let i = pcp.rings[pi].pop_head(&mut RingRec { r: &r, cpu, pi })?;
            if !own {
                r.frame_dep(zone.pfn_of(i), true, 1);
            }
            i
        } else {
            pcp.lists[pi].pop_head_nonempty(m, &mut r)
        };
        pcp.st.count -= 1 << order;
        if self.tune.count_min {
            pcp.st.count_min = pcp.st.count_min.min(pcp.st.count);
        }
        if own {
            zone.own_set(zone.pfn_of(i));
        } else {
            // `i` came off one of `zone`'s lists.
            let e = self.meta_in(zone, i);
            e.set_state(State::Allocated);
            e.set_mt(mt as u8);
        }
        slot.stats.pgalloc.add(1 << order);
        Some(zone.pfn_of(i))
    }

    /// The PCP hit of a free (`free_unref_page` with the pageset free): the block's
    /// zone, the list its pageblock's type picks, the pageset's `try_lock`, then, with the
    /// lock held, the ownership check (`trusted` skips it) and the commit. Returns
    /// [`Hit::Miss`], having changed nothing, whenever any other step would run (an
    /// order the lists do not serve, an isolated pageblock, a busy pageset, poisoning,
    /// a frame outside every zone or a CPU out of range): the caller then takes the full
    /// path, which repeats the tests and reports errors. A refused ownership check is
    /// [`Hit::Refused`] or [`Hit::WrongOrder`], the pageset unlocked and the frame
    /// untouched.
    ///
    /// The check comes after the lock, not before: the lock's read-modify-write has
    /// already drained the store buffer, so the compare-and-swap right behind it finds
    /// nothing to wait for. Its strength is unchanged: it is the same compare-and-swap
    /// on the frame's state, `Allocated -> Freeing`, and only after it succeeded and the
    /// order matched does the frame become `Pcp`.
    ///
    /// `S` as for [`Allocator::alloc_hit`]: the [`Reported`] copy, which `free_on_slow`
    /// tries first, serves nothing unless a sink is installed, and then reports what the
    /// full path would have reported (`free_unref_page_commit`'s lines).
    #[inline(always)]
    pub(crate) fn free_hit<const RINGS: bool, S: Seam>(
        &self,
        cpu: usize,
        frame: Frame,
        trusted: bool,
    ) -> Hit {
        let (pfn, order) = (frame.pfn.0, frame.order);
        let Some(zi) = self.zone_of(pfn) else {
            return Hit::Miss;
        };
        if cpu >= self.cpus.len() {
            return Hit::Miss;
        }
        let z = &self.zones[zi];
        if S::SINK && !z.trace.on() {
            return Hit::Miss;
        }
        let i = z.meta_index(pfn);
        // Not `slot_hit`: without the bounds test here the lab's bulk order-9 put took 27
        // instead of 22 ns, with 2 instructions fewer (docs/performance.md, "The 2-thread
        // order-9 puts").
        let slot = self.slot(cpu, zi);
        // `allows` bounds the order (no bit above MAX_ORDER); poisoning writes the block,
        // which the full path does before taking the lock.
        if RINGS && slot.hot.hit_allows::<true, S>(order) && !slot.hot.poison {
            return self.free_hit_rest::<true, S>(
                Pageset { cpu, zone: z, slot },
                pfn,
                i,
                order,
                trusted,
            );
        }
        if !slot.hot.hit_allows::<false, S>(order) || slot.hot.poison {
            return Hit::Miss;
        }
        self.free_hit_rest::<false, S>(Pageset { cpu, zone: z, slot }, pfn, i, order, trusted)
    }

    /// The rest of [`Allocator::free_hit`] once the order is known to be cached, on linked
    /// lists (`RING` false) or rings; `i` is `z.meta_index(pfn)`.
    #[inline(always)]
    fn free_hit_rest<const RING: bool, S: Seam>(
        &self,
        ps: Pageset<'_>,
        pfn: u64,
        i: u32,
        order: u8,
        trusted: bool,
    ) -> Hit {
        let Pageset { zone: z, slot, .. } = ps;
        if trusted && (pfn & ((1u64 << order) - 1) != 0 || pfn + (1u64 << order) > z.end_pfn) {
            return Hit::Miss;
        }
        // The order was tested by the caller.
        let Some((mt, pb_mt)) = crate::pcp::pcp_free_types_allowed(z, pfn) else {
            return Hit::Miss;
        };
        let Some(mut pcp) = slot.pcp.try_lock() else {
            return Hit::Miss;
        };
        if RING && order == 0 && z.own_bitmap() {
            // `Config::own_bitmap`: the ownership is the bit; nothing of the frame's
            // metadata is read or written. A clear bit takes the full path, which finds
            // the exact error.
            if !z.own_take(pfn) && !trusted {
                return Hit::Miss;
            }
        } else if !trusted {
            let e = self.meta_in(z, i);
            if let Err(state) = e.begin_free() {
                return Hit::Refused(state);
            }
            let allocated = e.order();
            if allocated != order {
                // Back to its owner untouched, as in `claim_for_free`.
                e.end_free_refused();
                if allocated == 0 && z.own_bitmap() {
                    // `Config::own_bitmap`: the full path tells an allocated order-0
                    // block from one on a ring.
                    return Hit::Miss;
                }
                return Hit::WrongOrder(allocated);
            }
        }
        self.commit_free::<RING, S>(ps, &mut pcp, i, order, mt, pb_mt);
        Hit::Done
    }

    /// `free_unref_page_commit` (docs/mechanisms.md §3.2), in the kernel's order of
    /// operations, for the block whose head has metadata index `i` (a frame of `zone`), on linked lists
    /// (`RING` false) or rings; the push reported when `S` is [`Reported`] (a sink is installed:
    /// the caller tested).
    #[inline(always)]
    pub(crate) fn commit_free<const RING: bool, S: Seam>(
        &self,
        ps: Pageset<'_>,
        pcp: &mut Pcp,
        i: u32,
        order: u8,
        mt: MigrateType,
        pb_mt: MigrateType,
    ) {
        let Pageset { cpu, zone, slot } = ps;
        let m = &self.meta[..];
        // `Config::own_bitmap`: the free of an order-0 block to a ring took its bit and
        // writes nothing of its metadata (the drain will).
        let own = RING && order == 0 && zone.own_bitmap();
        // Reported when `S` is [`Reported`] (`free_unref_page_commit`), else compiled away.
        let mut r = Rec::<S>::unlocked(zone);
        if own {
            slot.stats.free_unwritten.add(1);
        } else {
            let e = self.meta_in(zone, i);
            e.set_state(State::Pcp);
            if slot.hot.mt_cache {
                // ≤ 6.9 `free_unref_page_prepare`: `set_pcppage_migratetype`, a store.
                e.set_mt(pb_mt as u8);
                r.frame(zone.pfn_of(i), true);
            }
        }
        pcp.active = true;
        slot.stats.pgfree.add(1 << order);
        let pi = pindex(order, mt, slot.hot.thp_lists);
        // The pageblock lookup the caller made, the pageset's count line, the list's head
        // and length, then the frame and the list's or ring's lines.
        r.pageblock(zone.pfn_of(i), false);
        r.pcp(cpu, PCP_HEADER, true);
        r.pcp(cpu, pi as u8, true);
        if RING {
            if !own {
                r.frame(zone.pfn_of(i), true);
            }
            pcp.rings[pi].push_head(i, &mut RingRec { r: &r, cpu, pi });
        } else {
            pcp.lists[pi].push_head(m, i, &mut r);
        }
        pcp.st.count += 1 << order;
        let zf = zone.tune_flags();
        let d = tune::on_free_or(&mut pcp.st, order, zf, &self.tune, |st| {
            self.on_free_full(st, zone, zf, order)
        });
        if d.free_high || d.drain > 0 {
            self.after_free(cpu, zone, slot, pcp, d, pi);
        }
    }

    /// `free_unref_page` (docs/mechanisms.md §3.1) for a block whose ownership the caller proved.
    #[inline(always)]
    pub(crate) fn free_unref_page(&self, cpu: usize, zone: &Zone, pfn: u64, order: u8) {
        if self.cfg.pcp_buddy && self.pcp_buddy_free(cpu, zone, pfn, order) {
            return;
        }
        let slot = self.slot(cpu, zone.idx);
        let Some((mt, pb_mt)) = pcp_free_types(slot, zone, pfn, order) else {
            return self.free_to_zone(cpu, zone, pfn, order);
        };
        match slot.pcp.try_lock() {
            Some(mut pcp) => {
                let i = zone.meta_index(pfn);
                self.commit_free_any(Pageset { cpu, zone, slot }, &mut pcp, i, order, mt, pb_mt)
            }
            None => self.free_to_zone(cpu, zone, pfn, order),
        }
    }

    /// [`Allocator::commit_free`] on the pageset's kind of lists, reported when a sink is
    /// installed.
    #[inline]
    pub(crate) fn commit_free_any(
        &self,
        ps: Pageset<'_>,
        pcp: &mut Pcp,
        i: u32,
        order: u8,
        mt: MigrateType,
        pb_mt: MigrateType,
    ) {
        let Pageset { zone, slot, .. } = ps;
        if order == 0 && zone.own_bitmap() {
            // `Config::own_bitmap`: an order-0 frame on a ring reads as an allocation; the
            // full path's claim left it `Freeing` (pageset lock held).
            self.meta[i as usize].set_state(State::Allocated);
        }
        match (slot.hot.ring_at(order), zone.trace.on()) {
            (false, false) => self.commit_free::<false, Quiet>(ps, pcp, i, order, mt, pb_mt),
            (false, true) => self.commit_free::<false, Reported>(ps, pcp, i, order, mt, pb_mt),
            (true, false) => self.commit_free::<true, Quiet>(ps, pcp, i, order, mt, pb_mt),
            (true, true) => self.commit_free::<true, Reported>(ps, pcp, i, order, mt, pb_mt),
        }
    }

    /// The metadata entry `i` of a frame of `zone` (`zone.meta_index(pfn)` of a `pfn` the
    /// zone contains), without a bounds check: the PCP hit's paths index it several times,
    /// and the length, reloaded after each atomic access, was tested again each time.
    #[inline(always)]
    pub(crate) fn meta_in(&self, zone: &Zone, i: u32) -> &crate::memmap::PageMeta {
        debug_assert!(i >= zone.meta_base && zone.contains(zone.pfn_of(i)));
        // SAFETY: the build gave each zone the indices `meta_base .. meta_base +
        // Zone::meta_entries(span)`, one zone after the other from 0, and the store holds
        // them all (sized from the same sum, or `BuildError::Metadata` for a caller's);
        // spans, bases and the store are never changed after the build, so no lock guards
        // them. `i` is the index of a frame of `zone` (the callers' contract, checked above
        // in debug builds), so it lies in that range.
        unsafe { self.meta.get_unchecked(i as usize) }
    }
}

/// The first half of `free_unref_page`: whether a block of `order` at `pfn` goes to the
/// pageset, and on which list. `None` when the lists do not serve the order
/// (`pcp_allowed_order`) or the pageblock is isolated (`is_migrate_isolate`): the block
/// goes straight to the zone. Otherwise `(list type, pageblock type)`: a HIGHATOMIC
/// pageblock's block is cached on the MOVABLE list, as the kernel does.
#[inline(always)]
pub(crate) fn pcp_free_types(
    slot: &PcpSlot,
    zone: &Zone,
    pfn: u64,
    order: u8,
) -> Option<(MigrateType, MigrateType)> {
    if !slot.hot.allows(order) {
        return None;
    }
    pcp_free_types_allowed(zone, pfn)
}

/// [`pcp_free_types`] for an order the lists are known to serve.
#[inline(always)]
pub(crate) fn pcp_free_types_allowed(zone: &Zone, pfn: u64) -> Option<(MigrateType, MigrateType)> {
    let pb_mt = zone.pageblock_mt(pfn);
    if (pb_mt as usize) < NR_PCPTYPES {
        Some((pb_mt, pb_mt))
    } else if pb_mt == MigrateType::Isolate {
        None
    } else {
        Some((MigrateType::Movable, pb_mt))
    }
}
