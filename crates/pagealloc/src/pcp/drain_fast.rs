//! The drains beside `free_pcppages_bulk`'s kernel form (`drain.rs`), planned once per
//! drain ([`Beyond`]) and entered list by list through one seam,
//! [`Allocator::drain_beyond`]: a spliced drain
//! ([`Config::splice_drain`](crate::Config::splice_drain): order-0 frames, walked before
//! the lock, leave in one cut and join the free lists run by run), the THP runs of
//! [`Config::thp_merge_skip`](crate::Config::thp_merge_skip) (huge pages spliced onto the
//! order-9 lists unmerged), the drains of the order-0 rings of
//! [`Config::own_bitmap`](crate::Config::own_bitmap), and the head pops of
//! [`Config::drain_newest`](crate::Config::drain_newest). The forms of the speed switches
//! leave the lists, the metadata and the counters as the kernel's loop (with merge
//! skipping) would. This module uses `drain.rs`'s type lookup and block free; `drain.rs`
//! reaches it only through [`Allocator`] methods.

use super::drain::drained_mt;
use super::ring::RingRec;
use super::{order_of, Pageset, Pcp, PcpSlot, Ring, NR_PCP_LISTS};
use crate::allocator::Allocator;
use crate::buddy::Buddy;
use crate::frame::{MigrateType, PAGEBLOCK_ORDER, THP_ORDER};
use crate::memmap::{List, State, FLAG_MERGE_SKIPPED, NIL};
use crate::tune;
use crate::zone::{Pageblocks, Rec, Seam, Zone};

/// [`Config::own_bitmap`](crate::Config::own_bitmap)'s drain: frames whose metadata line is
/// prefetched ahead of the one written (a few hundred ns of misses in flight at the
/// write rate of an L1 hit).
const OWN_PREFETCH: u32 = 48;

/// [`Config::own_bitmap`](crate::Config::own_bitmap)'s drain: frames written before their
/// runs are spliced, 16 KiB of metadata lines, so that the splice's passes hit the L1.
const OWN_CHUNK: u32 = 256;

/// What a drain does beside the kernel's loop, decided once per drain
/// ([`Allocator::drain_beyond_plan`] before the zone lock,
/// [`Allocator::drain_beyond_locked`] under it) and applied list by list
/// ([`Allocator::drain_beyond`]).
pub(super) struct Beyond {
    /// [`Config::splice_drain`](crate::Config::splice_drain): order-0 lists leave in one cut.
    splice: bool,
    /// The far end of each order-0 list's cut, found before the lock (`splice`).
    firsts: [u32; NR_PCP_LISTS],
    /// [`Config::thp_merge_skip`](crate::Config::thp_merge_skip): THP lists leave in runs.
    thp: bool,
    /// [`Config::drain_newest`](crate::Config::drain_newest): order-0 frames leave from the
    /// list heads.
    newest: bool,
    /// The zone has an isolated pageblock.
    isolated: bool,
}

impl Allocator {
    /// The drain a free sets off (`d`, from `free_unref_page_commit`'s tuning, with
    /// `d.drain > 0`) from list `pi`, beside the kernel's `nr_pcp_free` pages: returns the
    /// pages to drain and whether the order-0 frames leave from the list heads.
    /// - [`Config::thp_drain_high`](crate::Config::thp_drain_high): a THP list drains
    ///   down to half of `high`, from that list only: one zone trip for many blocks.
    /// - [`Config::drain_newest`](crate::Config::drain_newest): in a long run of frees
    ///   (`free_count` at its ceiling, `batch << SCALE`, which only frees raise and every
    ///   allocation halves), the order-0 frames leave from the list heads, the ones freed
    ///   last.
    #[inline(always)]
    pub(super) fn free_drain_beyond(
        &self,
        pcp: &Pcp,
        slot: &PcpSlot,
        d: tune::FreeDecision,
        pi: usize,
    ) -> (i32, bool) {
        let mut n = d.drain;
        if self.cfg.thp_drain_high && order_of(pi) == THP_ORDER {
            let len = pcp.list_len(pi, slot.hot.ring_at(THP_ORDER));
            let down = (pcp.st.count - pcp.st.high / 2).min((len as i32) << THP_ORDER);
            n = n.max(down);
        }
        let newest = self.cfg.drain_newest
            && !d.free_high
            && pcp.st.free_count >= tune::shl_sat(pcp.st.batch, self.tune.scale);
        (n, newest)
    }

    /// Before a drain of `n` pages from list `start` takes the zone lock: its
    /// [`Beyond`], with `newest` from the caller (a drain set off by a free in a long run
    /// of frees) and, for a spliced drain, the pre-walk ([`Allocator::drain_prewalk`]).
    #[inline(always)]
    pub(super) fn drain_beyond_plan<S: Seam>(
        &self,
        cpu: usize,
        zone: &Zone,
        pcp: &Pcp,
        n: i32,
        start: usize,
        newest: bool,
    ) -> Beyond {
        let splice = self.cfg.splice_drain && self.cfg.merge_skip;
        let firsts = if splice {
            self.drain_prewalk::<S>(cpu, zone, pcp, n, start, newest)
        } else {
            [NIL; NR_PCP_LISTS]
        };
        Beyond {
            splice,
            firsts,
            thp: self.cfg.thp_merge_skip && self.cfg.merge_skip,
            newest,
            isolated: false,
        }
    }

    /// Under the drain's zone lock, before its first list: a zone with an isolated
    /// pageblock (`isolated`) or merging required frees every block as usual (no
    /// splices, no THP runs); with `clustered_refill` the drain's order-0 frees open
    /// fresh clusters, so that a drain of one batch of one migratetype becomes one
    /// cluster.
    #[inline(always)]
    pub(super) fn drain_beyond_locked<S: Seam>(
        &self,
        p: &mut Beyond,
        b: &mut Buddy<'_, S>,
        isolated: bool,
    ) {
        if self.cfg.clustered_refill {
            b.inner.free.clusters.start_fresh();
        }
        let skip = !isolated && b.can_skip_merge();
        p.splice &= skip;
        p.thp &= skip;
        p.isolated = isolated;
    }

    /// List `pi` of a drain in a form beside the kernel's, zone lock held, `n` pages still
    /// to drain: an order-0 ring of [`Config::own_bitmap`](crate::Config::own_bitmap), an
    /// order-0 list spliced, a THP list in runs, or an order-0 list from its head. Returns
    /// the pages still to drain after it, or `None`: the list takes the kernel's form.
    #[inline(always)]
    pub(super) fn drain_beyond<S: Seam>(
        &self,
        p: &Beyond,
        ps: Pageset<'_>,
        b: &mut Buddy<'_, S>,
        pcp: &mut Pcp,
        pi: usize,
        n: i32,
    ) -> Option<i32> {
        let Pageset { cpu, slot, .. } = ps;
        let k = order_of(pi);
        if k == 0 && !pcp.rings[pi].is_empty() {
            return Some(if p.splice {
                self.drain_ring_spliced(cpu, b, pcp, pi, n)
            } else {
                self.drain_ring0(cpu, b, pcp, pi, n, p.isolated)
            });
        }
        if p.splice && k == 0 {
            let cnt = pcp.lists[pi].len().min(n as u32);
            debug_assert!(p.firsts[pi] != NIL);
            self.drain_splice(b, &mut pcp.lists[pi], p.firsts[pi], cnt, p.newest);
            if p.newest {
                slot.stats.drain_newest.add(cnt as u64);
            }
            pcp.st.count -= cnt as i32;
            return Some(n - cnt as i32);
        }
        if p.thp && k == PAGEBLOCK_ORDER {
            return Some(self.drain_thp_splice(b, pcp, pi, n));
        }
        if p.newest && k == 0 {
            return Some(self.drain_newest(b, pcp, slot, pi, n, p.isolated));
        }
        None
    }

    /// The order-0 list `pi` of a drain with [`Config::drain_newest`](crate::Config::drain_newest),
    /// zone lock held: up to `n` frames leave from its head, the most recently freed
    /// first, each through [`Allocator::drain_one`]. Returns the pages still to drain.
    fn drain_newest<S: Seam>(
        &self,
        b: &mut Buddy<'_, S>,
        pcp: &mut Pcp,
        slot: &PcpSlot,
        pi: usize,
        mut n: i32,
        isolated: bool,
    ) -> i32 {
        let m = b.m;
        while let Some(i) = pcp.lists[pi].pop_head(m, &mut b.rec()) {
            n -= 1;
            pcp.st.count -= 1;
            b.rec().moved(1);
            slot.stats.drain_newest.add(1);
            self.drain_one(b, b.z.pfn_of(i), &m[i as usize], 0, isolated);
            if n <= 0 {
                break;
            }
        }
        n
    }

    /// The THP list `pi` of [`Allocator::free_pcppages_bulk`] with
    /// [`Config::thp_merge_skip`](crate::Config::thp_merge_skip) (merge skipping allowed,
    /// no isolated pageblock; zone lock held): the blocks the kernel's loop would take off
    /// the tail (until `n` pages are out or the list is empty) are walked once from the
    /// tail. Each run of blocks of one mergeable type (the type `drain_one` finds) is made
    /// merge-skipped order-9 `Buddy` heads of that type and joins the
    /// head of its free list in one splice ([`splice_thp_run`]); a block of a
    /// type that may not merge-skip is freed through `__free_one_page` in its turn. Run by
    /// run from the tail, every free list ends as block-by-block head inserts would leave
    /// it. The list is then cut before the first of them. Returns the pages still to
    /// drain.
    ///
    /// Reported (`S::SINK`), each block's metadata line and its type lookup are reported
    /// in the order of that block-by-block loop; quiet, their counts are added once for
    /// the drain. Inlined: a pageset passed to a call would have to be written back and
    /// reloaded around every buddy free of the kernel's loop beside it.
    #[inline(always)]
    fn drain_thp_splice<S: Seam>(
        &self,
        b: &mut Buddy<'_, S>,
        pcp: &mut Pcp,
        pi: usize,
        n: i32,
    ) -> i32 {
        let (m, k) = (b.m, PAGEBLOCK_ORDER);
        let cached = self.cfg.pcp_migratetype_cache;
        let list = &mut pcp.lists[pi];
        let cnt = (n as u32).div_ceil(1 << k).min(list.len());
        debug_assert!(cnt > 0);
        let mut cur = list.tail().unwrap_or(NIL);
        // The tail's index is the list's; each next one is read from the block before.
        let mut mt = thp_block_mt(b, b.z.pageblocks(), cached, cur, 0);
        let mut left = cnt;
        while left > 0 {
            if mt.is_mergeable() {
                let (len, next, next_mt) = splice_thp_run(b, cached, cur, left, mt);
                (left, cur, mt) = (left - len, next, next_mt);
            } else {
                let e = &m[cur as usize];
                let prev = e.prev();
                e.set_state_flags(State::Tail, 0);
                b.free_one(b.z.pfn_of(cur), k, mt, false);
                (left, cur) = (left - 1, prev);
                if left > 0 {
                    mt = thp_block_mt(b, b.z.pageblocks(), cached, cur, 1);
                }
            }
        }
        if !S::SINK {
            // What `thp_block_mt` reports of each block: its metadata and, cached, a
            // second read of it; uncached, its pageblock's type.
            let c = cnt as u64;
            b.rec()
                .counted(if cached { 2 * c } else { c }, if cached { 0 } else { c });
        }
        list.truncate_back(m, cur, cnt, &mut b.rec());
        let pages = (cnt as i32) << k;
        pcp.st.count -= pages;
        b.rec().moved((cnt as u64) << k);
        n - pages
    }

    /// The order-0 ring `pi` of a drain with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap), zone lock held, spliced (merge
    /// skipping allowed, no isolated pageblock): up to `n` frames leave its tail through
    /// [`Allocator::drain_ring_own`]. Returns the pages still to drain.
    fn drain_ring_spliced<S: Seam>(
        &self,
        cpu: usize,
        b: &mut Buddy<'_, S>,
        pcp: &mut Pcp,
        pi: usize,
        n: i32,
    ) -> i32 {
        let cnt = pcp.rings[pi].len().min(n as u32);
        self.drain_ring_own(cpu, b, &mut pcp.rings[pi], pi, cnt);
        pcp.st.count -= cnt as i32;
        n - cnt as i32
    }

    /// The order-0 ring `pi` of a drain with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap), zone lock held, with an isolated
    /// pageblock (`isolated`) or merging required: up to `n` frames leave its tail one by
    /// one through [`Allocator::drain_one`], as the kernel's loop takes them off a list.
    /// Returns the pages still to drain.
    fn drain_ring0<S: Seam>(
        &self,
        cpu: usize,
        b: &mut Buddy<'_, S>,
        pcp: &mut Pcp,
        pi: usize,
        mut n: i32,
        isolated: bool,
    ) -> i32 {
        let m = b.m;
        while let Some(i) = pcp.rings[pi].pop_tail(&mut RingRec {
            r: &b.rec(),
            cpu,
            pi,
        }) {
            n -= 1;
            pcp.st.count -= 1;
            b.rec().moved(1);
            let pfn = b.z.pfn_of(i);
            b.rec().frame(pfn, true);
            self.drain_one(b, pfn, &m[i as usize], 0, isolated);
            if n <= 0 {
                break;
            }
        }
        n
    }

    /// The order-0 ring `pi` of a spliced drain with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap), zone lock held: the last `cnt`
    /// frames of `ring` leave it from the tail; their metadata was not written by their
    /// frees (it reads `Allocated`, order 0) nor walked before the lock. Each frame is
    /// written once here — linked into the chain, made a merge-skipped order-0 `Buddy`
    /// head — with the line of the frame [`OWN_PREFETCH`] places further on prefetched,
    /// so that the misses of a drain overlap instead of each stalling a free. The chain
    /// joins the free lists in runs ([`Allocator::splice_runs`]) every [`OWN_CHUNK`]
    /// frames, while its lines are still in the L1 cache.
    fn drain_ring_own<S: Seam>(
        &self,
        cpu: usize,
        b: &mut Buddy<'_, S>,
        ring: &mut Ring,
        pi: usize,
        cnt: u32,
    ) {
        let m = b.m;
        b.rec().moved(cnt as u64);
        let mut left = cnt;
        while left > 0 {
            let c = left.min(OWN_CHUNK);
            let last = ring.nth_from_tail(0);
            let mut before = NIL;
            for j in 0..c {
                if j + OWN_PREFETCH < ring.len() {
                    crate::sync::prefetch(&m[ring.nth_from_tail(j + OWN_PREFETCH) as usize]);
                }
                let i = ring.nth_from_tail(j);
                if S::SINK {
                    let s = ring.slot_of(ring.len() - 1 - j);
                    b.rec().pcp_array(cpu, pi as u8, s, false);
                    // its index was read from the ring line reported just before
                    b.rec().frame_dep(b.z.pfn_of(i), true, 1);
                }
                let e = &m[i as usize];
                // Linked as the page-by-page loop's head inserts would chain them.
                e.set_next(before);
                if before != NIL {
                    m[before as usize].set_prev(i);
                }
                e.set_order(0);
                e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
                before = i;
            }
            if !S::SINK {
                // What the reports above count: the ring's line and the frame's, each frame.
                b.rec().counted(c as u64, c as u64);
            }
            ring.truncate_tail(c);
            self.splice_runs(b, before, last, c);
            left -= c;
        }
    }

    /// Before a spliced drain takes the zone lock: the plan of `free_pcppages_bulk`'s loop
    /// (lists round robin from `start`, each emptied until `n` pages are out), and for each
    /// order-0 list the first of the frames that will leave it, found by walking back from
    /// the tail. The walk reads each leaving frame's metadata once, under the pcp lock only
    /// (the frames are the pageset's), so the locked part finds them in cache. Reported as
    /// unlocked reads. `NIL` for lists the drain does not reach or that are not order 0.
    /// With `newest` (`Config::drain_newest`) the order-0 frames leave from the head: the
    /// walk goes forward from the head and returns the last of them.
    fn drain_prewalk<S: Seam>(
        &self,
        cpu: usize,
        zone: &Zone,
        pcp: &Pcp,
        n: i32,
        start: usize,
        newest: bool,
    ) -> [u32; NR_PCP_LISTS] {
        let m = &self.meta[..];
        let mut firsts = [NIL; NR_PCP_LISTS];
        let r = Rec::<S>::unlocked(zone);
        let mut left = n;
        for step in 0..NR_PCP_LISTS {
            if left <= 0 {
                break;
            }
            let pi = (start + step) % NR_PCP_LISTS;
            let l = &pcp.lists[pi];
            let k = order_of(pi);
            let ring = pcp.rings[pi].len();
            if ring > 0 {
                // An order-0 ring (`Config::own_bitmap`): drained without a walk.
                let blocks = (left as u32).div_ceil(1 << k).min(ring);
                left -= (blocks << k) as i32;
                continue;
            }
            let Some(mut i) = (if newest { l.head() } else { l.tail() }) else {
                continue;
            };
            if k != 0 {
                let blocks = (left as u32).div_ceil(1 << k).min(l.len());
                left -= (blocks << k) as i32;
                continue;
            }
            let cnt = l.len().min(left as u32);
            r.pcp(cpu, pi as u8, false);
            // the tail was read from the list head, each next frame from the one before
            r.frame_dep(zone.pfn_of(i), false, 1);
            for _ in 1..cnt {
                let e = &m[i as usize];
                i = if newest { e.next() } else { e.prev() };
                r.frame_dep(zone.pfn_of(i), false, 1);
            }
            firsts[pi] = i;
            left -= cnt as i32;
        }
        firsts
    }

    /// The order-0 part of a drain with [`Config::splice_drain`](crate::Config::splice_drain),
    /// zone lock held: `cnt` frames leave `list` in one cut and join the order-0 free
    /// lists, merge-skipped, one splice per run of one migratetype. `end` is the far end
    /// of the cut, found by [`Allocator::drain_prewalk`] before the lock.
    /// - From the tail (the kernel's order): the last `cnt` frames, from `end`. Runs are
    ///   moved from the tail end first and each goes to its list's head, so every list
    ///   ends up as the page-by-page loop (pop the tail, push the head) would leave it,
    ///   clusters included.
    /// - From the head (`newest`, [`Config::drain_newest`](crate::Config::drain_newest)):
    ///   the first `cnt` frames, up to `end`. The chain keeps its order, so the frame freed
    ///   last ends at the head of its free list, the first a refill takes (page by page,
    ///   popping the head and pushing each frame on its free list's head, would reverse
    ///   the batch).
    fn drain_splice<S: Seam>(
        &self,
        b: &mut Buddy<'_, S>,
        list: &mut List,
        end: u32,
        cnt: u32,
        newest: bool,
    ) {
        let m = b.m;
        let (first, last) = if newest {
            (list.cut_front(m, end, cnt, &mut b.rec()), end)
        } else {
            let last = list.tail().unwrap_or(NIL);
            list.cut_back(m, end, cnt, &mut b.rec());
            (end, last)
        };
        b.rec().moved(cnt as u64);
        // Pass 1, the chase from the list's end: each frame becomes a merge-skipped order-0
        // `Buddy` head (its type is written in pass 2, before the zone lock is dropped;
        // nobody reads these frames meanwhile: they are on no list, and only this zone-lock
        // holder could look at them).
        let mut i = if newest { first } else { last };
        for k in 0..cnt {
            let e = &m[i as usize];
            e.set_order(0);
            e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
            // the end's index is the list's; each next one was read from the previous frame
            b.rec().frame_dep(b.z.pfn_of(i), true, u8::from(k > 0));
            i = if newest { e.next() } else { e.prev() };
        }
        self.splice_runs(b, first, last, cnt);
    }

    /// Pass 2 of a spliced drain, over the chain `first..=last` of `cnt` frames already
    /// merge-skipped order-0 `Buddy` heads, linked both ways, its lines cached: the
    /// free-list type of each frame, one pageblock lookup per pageblock met; a run ends
    /// where the type changes, and each run joins its free list in one splice.
    fn splice_runs<S: Seam>(&self, b: &mut Buddy<'_, S>, first: u32, last: u32, cnt: u32) {
        let m = b.m;
        let mut pb = (u64::MAX, MigrateType::Movable);
        // `Config::own_bitmap`: no cached type (the frees did not write it).
        let cached = self.cfg.pcp_migratetype_cache && !b.z.own_bitmap();
        let mut mt_of = |b: &Buddy<'_, S>, i: u32| {
            if cached {
                // no isolated pageblock (checked by the caller): the cached type is valid
                return m[i as usize].mt_type();
            }
            let pfn = b.z.pfn_of(i);
            let block = pfn >> PAGEBLOCK_ORDER;
            if pb.0 != block {
                pb = (block, b.pb_mt(pfn));
            }
            pb.1
        };
        let (mut cur, mut run_last, mut len) = (last, last, 0u32);
        let mut run_mt = mt_of(b, last);
        loop {
            let e = &m[cur as usize];
            e.set_mt(run_mt as u8);
            len += 1;
            if cur == first {
                b.splice_skipped(cur, run_last, len, run_mt);
                break;
            }
            let p = e.prev();
            let p_mt = mt_of(b, p);
            if p_mt != run_mt {
                b.splice_skipped(cur, run_last, len, run_mt);
                (run_last, len, run_mt) = (p, 0, p_mt);
            }
            cur = p;
        }
        b.st.drain_spliced.add(cnt as u64);
    }
}

/// One run of [`Allocator::drain_thp_splice`], zone lock held: from block `cur` of a THP
/// list towards its head, at most `max` blocks whose type (as `drain_one` finds it: the
/// cached one with `cached`, else the pageblock's) is `mt`, a mergeable type (`cur`'s
/// own, found by the caller). Each becomes a merge-skipped order-9 `Buddy` head of type
/// `mt` in one write of its line, and the run joins the head of its free list in one
/// splice. Returns how many, the block after the last of them and that block's type
/// (looked up only if the run did not end at `max`). Out of line, so that the loop's few
/// live values stay in registers: inlined into the drain's loop, the run's state, the
/// zone's fields and the tally lived in memory (69 instructions per block against 23;
/// docs/performance.md, "The 2-thread order-9 puts: the drain's loop").
#[inline(never)]
fn splice_thp_run<S: Seam>(
    b: &mut Buddy<'_, S>,
    cached: bool,
    last: u32,
    max: u32,
    mt: MigrateType,
) -> (u32, u32, MigrateType) {
    debug_assert!(max > 0 && mt.is_mergeable());
    let (m, pageblocks) = (b.m, b.z.pageblocks());
    let (mut cur, mut len) = (last, 0);
    let next_mt = loop {
        let e = &m[cur as usize];
        let prev = e.prev();
        e.set_order(PAGEBLOCK_ORDER);
        e.set_mt(mt as u8);
        e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
        len += 1;
        if len == max {
            break mt;
        }
        let next_mt = thp_block_mt(b, pageblocks, cached, prev, 1);
        if next_mt != mt {
            break next_mt;
        }
        cur = prev;
    };
    // `cur` is the last of the run; the block after it is its list neighbour.
    let next = m[cur as usize].prev();
    b.splice_skipped_thp(cur, last, len, mt);
    (len, next, next_mt)
}

/// The type a THP drain frees block `i` with, no pageblock isolated (as `drain_one` finds
/// it: the cached one with `cached`, else the pageblock's from `pageblocks`, the zone's
/// table). Reported (`S::SINK`): the block's line, written by the drain (its index read
/// from the line reported `dep` reports earlier), then the lookup's read; quiet, nothing
/// (the caller counts them).
#[inline(always)]
fn thp_block_mt<S: Seam>(
    b: &Buddy<'_, S>,
    pageblocks: Pageblocks<'_>,
    cached: bool,
    i: u32,
    dep: u8,
) -> MigrateType {
    let (pfn, e) = (b.z.pfn_of(i), &b.m[i as usize]);
    if S::SINK {
        b.rec().frame_dep(pfn, true, dep);
        drained_mt(b, cached, pfn, e)
    } else if cached {
        e.mt_type()
    } else {
        pageblocks.mt(pfn)
    }
}
