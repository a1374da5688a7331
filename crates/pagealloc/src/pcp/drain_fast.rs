//! The drains of the switches that change no policy, beside `free_pcppages_bulk`'s
//! kernel form (`drain.rs`), which enters them list by list: a spliced drain
//! ([`Config::splice_drain`](crate::Config::splice_drain): order-0 frames leave in one
//! cut and join the free lists run by run), THP runs
//! ([`Config::thp_splice`](crate::Config::thp_splice)), and the drains of the order-0
//! rings of [`Config::own_bitmap`](crate::Config::own_bitmap). Each leaves the lists, the
//! metadata and the counters as the kernel's loop would.

use super::drain::drained_mt;
use super::ring::RingRec;
use super::{Pcp, Ring};
use crate::allocator::Allocator;
use crate::buddy::Buddy;
use crate::frame::{MigrateType, PAGEBLOCK_ORDER};
use crate::memmap::{List, State, FLAG_MERGE_SKIPPED, NIL};
use crate::zone::{Seam, Zone};

/// [`Config::own_bitmap`](crate::Config::own_bitmap)'s drain: frames whose metadata line is
/// prefetched ahead of the one written (a few hundred ns of misses in flight at the
/// write rate of an L1 hit).
const OWN_PREFETCH: u32 = 48;

/// [`Config::own_bitmap`](crate::Config::own_bitmap)'s drain: frames written before their
/// runs are spliced, 16 KiB of metadata lines, so that the splice's passes hit the L1.
const OWN_CHUNK: u32 = 256;

/// How the order-0 frames leave in a drain's zone-lock hold: spliced onto the free lists
/// (merge skipping allowed, no isolated pageblock), or one by one through
/// [`Allocator::drain_one`], `isolated` telling whether the zone has an isolated
/// pageblock.
#[derive(Clone, Copy, Debug)]
pub(super) enum Order0Drain {
    Spliced,
    OneByOne { isolated: bool },
}

impl Allocator {
    /// The THP list `pi` of [`Allocator::free_pcppages_bulk`] with
    /// [`Config::thp_splice`](crate::Config::thp_splice) (merge skipping allowed, no
    /// isolated pageblock; zone lock held): the blocks the kernel's loop would take off the
    /// tail (until `n` pages are out or the list is empty) are walked once from the tail,
    /// each made a merge-skipped order-9 `Buddy` head of its type (the type `drain_one`
    /// finds), and each run of one type joins the head of its free list in one splice
    /// ([`Buddy::splice_skipped_thp`]); the list is then cut before the first of them. Run
    /// by run from the tail, every free list ends as `drain_one`'s block-by-block head
    /// inserts leave it. A block of a type that may not merge-skip (`drain_one`'s test) is
    /// freed through `__free_one_page` in its turn. Returns the pages still to drain.
    /// Inlined: a pageset passed to a call would have to be written back and reloaded
    /// around every buddy free of the kernel's loop beside it.
    #[inline(always)]
    pub(super) fn drain_thp_splice<S: Seam>(
        &self,
        b: &mut Buddy<'_, S>,
        pcp: &mut Pcp,
        pi: usize,
        n: i32,
    ) -> i32 {
        let m = b.m;
        let k = PAGEBLOCK_ORDER;
        let list = &mut pcp.lists[pi];
        let cnt = (n as u32).div_ceil(1 << k).min(list.len());
        let cached = self.cfg.pcp_migratetype_cache;
        if !S::SINK {
            return self.drain_thp_runs(b, pcp, pi, n, cnt);
        }
        // The run being built: its first (the block nearest the list head so far) and last
        // block, length and type.
        let (mut first, mut last, mut len, mut run_mt) = (NIL, NIL, 0u32, MigrateType::Movable);
        let mut cur = list.tail().unwrap_or(NIL);
        for j in 0..cnt {
            let e = &m[cur as usize];
            let pfn = b.z.pfn_of(cur);
            // The tail's index is the list's; each next one was read from the previous block.
            b.rec().frame_dep(pfn, true, u8::from(j > 0));
            let prev = e.prev();
            let mt = drained_mt(b, cached, pfn, e);
            if len > 0 && (mt != run_mt || !mt.is_mergeable()) {
                b.splice_skipped_thp(first, last, len, run_mt);
                len = 0;
            }
            if mt.is_mergeable() {
                e.set_order(k);
                e.set_mt(mt as u8);
                e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
                if len == 0 {
                    (last, run_mt) = (cur, mt);
                }
                first = cur;
                len += 1;
            } else {
                e.set_state_flags(State::Tail, 0);
                b.free_one(pfn, k, mt, false);
            }
            cur = prev;
        }
        if len > 0 {
            b.splice_skipped_thp(first, last, len, run_mt);
        }
        list.truncate_back(m, cur, cnt, &mut b.rec());
        let pages = (cnt as i32) << k;
        pcp.st.count -= pages;
        b.rec().moved((cnt as u64) << k);
        n - pages
    }

    /// [`Allocator::drain_thp_splice`] with no sink to report to (`S` is `Quiet`): the same
    /// blocks leave in the same runs, with the same metadata, lists and counts. Each run is
    /// marked by [`mark_thp_run`], out of line, and the reports' counts (each block's
    /// metadata and, uncached, its pageblock) are added once for all `cnt` blocks. Inside
    /// the drain's inlined loop the run's state, the zone's fields and the tally lived in
    /// memory: 69 instructions per block, against 23 here (docs/performance.md, "The
    /// 2-thread order-9 puts: the drain's loop").
    #[inline(always)]
    fn drain_thp_runs<S: Seam>(
        &self,
        b: &mut Buddy<'_, S>,
        pcp: &mut Pcp,
        pi: usize,
        n: i32,
        cnt: u32,
    ) -> i32 {
        debug_assert!(!S::SINK);
        let (m, k) = (b.m, PAGEBLOCK_ORDER);
        let cached = self.cfg.pcp_migratetype_cache;
        let list = &mut pcp.lists[pi];
        let mut cur = list.tail().unwrap_or(NIL);
        let mut left = cnt;
        while left > 0 {
            let pfn = b.z.pfn_of(cur);
            let e = &m[cur as usize];
            let mt = if cached {
                e.mt_type()
            } else {
                b.z.pageblock_mt(pfn)
            };
            if mt.is_mergeable() {
                let (len, first, next) = mark_thp_run(b.z, m, cached, cur, left, mt);
                b.splice_skipped_thp(first, cur, len, mt);
                (left, cur) = (left - len, next);
            } else {
                let prev = e.prev();
                e.set_state_flags(State::Tail, 0);
                b.free_one(pfn, k, mt, false);
                (left, cur) = (left - 1, prev);
            }
        }
        // `drain_thp_splice`'s `frame_dep` of each block and its `drained_mt`: cached, a
        // second read of the block's metadata; uncached, its `pb_mt`.
        let c = cnt as u64;
        b.rec()
            .counted(if cached { 2 * c } else { c }, if cached { 0 } else { c });
        list.truncate_back(m, cur, cnt, &mut b.rec());
        let pages = (cnt as i32) << k;
        pcp.st.count -= pages;
        b.rec().moved((cnt as u64) << k);
        n - pages
    }

    /// The order-0 ring `pi` in a drain of linked lists with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap), zone lock held: up to `n` frames
    /// leave its tail, spliced ([`Allocator::drain_ring_own`]) or, with an isolated
    /// pageblock or merging required, one by one. Returns the pages still to drain.
    pub(super) fn drain_ring0<S: Seam>(
        &self,
        cpu: usize,
        b: &mut Buddy<'_, S>,
        pcp: &mut Pcp,
        pi: usize,
        mut n: i32,
        how: Order0Drain,
    ) -> i32 {
        let isolated = match how {
            Order0Drain::Spliced => {
                let cnt = pcp.rings[pi].len().min(n as u32);
                self.drain_ring_own(cpu, b, &mut pcp.rings[pi], pi, cnt);
                pcp.st.count -= cnt as i32;
                return n - cnt as i32;
            }
            Order0Drain::OneByOne { isolated } => isolated,
        };
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

    /// The order-0 part of a drain with [`Config::splice_drain`](crate::Config::splice_drain),
    /// zone lock held: `cnt` frames leave `list` in one cut and join the order-0 free
    /// lists, merge-skipped, one splice per run of one migratetype. `end` is the far end
    /// of the cut, found by `drain_prewalk` (`drain.rs`) before the lock.
    /// - From the tail (the kernel's order): the last `cnt` frames, from `end`. Runs are
    ///   moved from the tail end first and each goes to its list's head, so every list
    ///   ends up as the page-by-page loop (pop the tail, push the head) would leave it,
    ///   clusters included.
    /// - From the head (`newest`, [`Config::drain_newest`](crate::Config::drain_newest)):
    ///   the first `cnt` frames, up to `end`. The chain keeps its order, so the frame freed
    ///   last ends at the head of its free list, the first a refill takes (page by page,
    ///   popping the head and pushing each frame on its free list's head, would reverse
    ///   the batch).
    pub(super) fn drain_splice<S: Seam>(
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

/// One run of [`Allocator::drain_thp_runs`], zone lock held: from block `cur` of a THP
/// list towards its head, at most `max` blocks whose type (as `drain_one` finds it: the
/// cached one with `cached`, else the pageblock's) is `mt`, a mergeable type (`cur`'s
/// own, found by the caller). Each becomes a merge-skipped order-9 `Buddy` head of type
/// `mt` in one write of its line. Returns how many, the last of them (nearest the head)
/// and the block after it. Out of line, so that its few live values stay in registers.
#[inline(never)]
fn mark_thp_run(
    zone: &Zone,
    m: &[crate::memmap::PageMeta],
    cached: bool,
    mut cur: u32,
    max: u32,
    mt: MigrateType,
) -> (u32, u32, u32) {
    debug_assert!(max > 0 && mt.is_mergeable());
    let pageblocks = zone.pageblocks();
    let mut len = 0;
    loop {
        let e = &m[cur as usize];
        let prev = e.prev();
        e.set_order(PAGEBLOCK_ORDER);
        e.set_mt(mt as u8);
        e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
        len += 1;
        if len == max {
            return (len, cur, prev);
        }
        let next_mt = if cached {
            m[prev as usize].mt_type()
        } else {
            pageblocks.mt(zone.pfn_of(prev))
        };
        if next_mt != mt {
            return (len, cur, prev);
        }
        cur = prev;
    }
}
