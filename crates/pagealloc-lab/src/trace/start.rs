//! What the trace's events say about a pageset's state before they began: its
//! `free_count` (the pages freed recently, which sizes a drain on a free), read off the
//! kernel's first drain on a free of that pageset.
//!
//! # How
//! A drain on a free frees `clamp(free_count, batch, limit - batch)` pages
//! (`nr_pcp_free`; docs/mechanisms.md §3.5), `free_count` counted after that free. From
//! the start on, each free of a pcp order into the pageset adds `2^order` while
//! `free_count < batch << CONFIG_PCP_BATCH_SCALE_MAX`, and each allocation from it
//! halves it (`on_free`, `on_alloc` in the core's tune.rs). So the value at the first
//! drain is a non-decreasing function of the value at the start; the starts that give
//! the drain's pages exactly are an interval (halvings widen it), and the start is its
//! middle (the smallest start that reaches the drain where none gives it exactly).
//! A drain of exactly `batch` pages says only `free_count <= batch`: the start is then 0
//! (as no drain at all says nothing).
//!
//! A drain on the free of an order-1..=3 block whose previous free was of such a block
//! too is a free_high drain (`free_frozen_page_commit`: `PCPF_PREV_FREE_HIGH_ORDER` and
//! `free_count >= batch + high_min / 2`, tested before this free counts), which frees
//! `min(count, batch << SCALE)` and says only that lower bound: the start is the smallest
//! that reaches it at that block's `mm_page_free`. `free_unref_folios` traces every
//! block's `mm_page_free` first and commits the batch after, each commit after an
//! `mm_page_free_batched` that carries no order: the block's order is its `mm_page_free`'s.

use std::collections::HashMap;

use super::format::{Event, EventKind};

/// Each pageset's first order-0 refill in the trace, pages, per (CPU, zone): a run of
/// `mm_page_alloc_zone_locked` with `percpu_refill` and order 0 on the CPU, by any
/// process. `zone_of` maps a pfn to pagealloc's zone.
pub fn first_refills(ev: &[Event], zone_of: impl Fn(u64) -> usize) -> HashMap<(u32, usize), u64> {
    let mut first_refill: HashMap<(u32, usize), u64> = HashMap::new();
    let mut open: HashMap<u32, Option<(usize, u64)>> = HashMap::new();
    let mut done: std::collections::HashSet<(u32, usize)> = Default::default();
    for e in ev.iter().filter(|e| e.kind.is_page()) {
        let refill0 = e.kind == EventKind::ZoneLocked && e.aux != 0 && e.order == 0;
        let cur = open.entry(e.cpu).or_insert(None);
        match (refill0, *cur) {
            (true, Some((z, n))) if z == zone_of(e.pfn) => *cur = Some((z, n + 1)),
            (true, _) => {
                if let Some((z, n)) = cur.take() {
                    if done.insert((e.cpu, z)) {
                        first_refill.insert((e.cpu, z), n);
                    }
                }
                *cur = Some((zone_of(e.pfn), 1));
            }
            (false, _) => {
                if let Some((z, n)) = cur.take() {
                    if done.insert((e.cpu, z)) {
                        first_refill.insert((e.cpu, z), n);
                    }
                }
            }
        }
    }
    for (c, cur) in open {
        if let Some((z, n)) = cur {
            if done.insert((c, z)) {
                first_refill.insert((c, z), n);
            }
        }
    }
    first_refill
}

/// A pageset's `alloc_factor` at the start from its first order-0 refill's pages
/// ([`first_refills`]): `k` where they were `batch << k` (1..=7), else 0 (no refill, or
/// one the room below `high` capped: `nr_pcp_alloc`, docs/mechanisms.md §3.5).
pub fn alloc_factor_of(first_refill: Option<&u64>, batch: u64) -> u8 {
    first_refill
        .and_then(|&n| (1..=7u8).find(|&k| n == batch << k))
        .unwrap_or(0)
}

/// One pageset's events up to its first drain on an order-0 free.
#[derive(Default)]
struct Walk {
    /// +pages for a free, `None` for an allocation (halves).
    ops: Vec<Option<i32>>,
    /// The first drain on an order-0 free: its pages.
    drain: Option<i32>,
    /// The first drain was a free_high drain on the free of this pfn.
    free_high: Option<u64>,
    /// Index in `ops` of each free, by pfn (the last one).
    free_at: HashMap<u64, usize>,
}

/// `free_count` at the start, per (CPU, zone), where the trace's first drain on a free of
/// that pageset says more than `free_count <= batch`. `zone_of` maps a pfn to pagealloc's
/// zone, `pcp` says whether an order is cached by the pagesets, `batch` is the pageset's
/// batch and `high_min` (in that order), and `scale` `CONFIG_PCP_BATCH_SCALE_MAX`.
pub fn free_counts(
    ev: &[Event],
    zone_of: impl Fn(u64) -> usize,
    pcp: impl Fn(u8) -> bool,
    batch: impl Fn(u32, usize) -> (i32, i32),
    scale: u8,
) -> HashMap<(u32, usize), i32> {
    let mut walks: HashMap<(u32, usize), Walk> = HashMap::new();
    // Per CPU: the previous two page events (kind, order, zone, pfn) and the drain run
    // being read (zone, pages, a free_high drain on the free of this pfn).
    type Prev = (EventKind, u8, usize, u64);
    let mut prev: HashMap<u32, (Prev, Option<Prev>)> = HashMap::new();
    let mut run: HashMap<u32, (usize, i32, Option<u64>)> = HashMap::new();
    // The order of each block freed, by pfn (`mm_page_free_batched` carries none).
    let mut freed_order: HashMap<u64, u8> = HashMap::new();
    let close =
        |walks: &mut HashMap<(u32, usize), Walk>, c: u32, r: Option<(usize, i32, Option<u64>)>| {
            if let Some((z, pages, fh)) = r {
                let w = walks.entry((c, z)).or_default();
                if w.drain.is_none() {
                    w.drain = Some(pages);
                    w.free_high = fh;
                }
            }
        };
    let is_free = |k: EventKind| matches!(k, EventKind::Free | EventKind::FreeBatched);
    for e in ev.iter().filter(|e| e.kind.is_page()) {
        let z = zone_of(e.pfn);
        let pages = 1i32 << e.order.min(20);
        if e.kind != EventKind::PcpuDrain {
            let r = run.remove(&e.cpu);
            close(&mut walks, e.cpu, r);
        }
        let order = match e.kind {
            EventKind::FreeBatched => freed_order.get(&e.pfn).copied().unwrap_or(0),
            _ => e.order,
        };
        match e.kind {
            EventKind::Alloc if pcp(e.order) => {
                let w = walks.entry((e.cpu, z)).or_default();
                if w.drain.is_none() {
                    w.ops.push(None);
                }
            }
            EventKind::Free if pcp(e.order) => {
                freed_order.insert(e.pfn, e.order);
                let w = walks.entry((e.cpu, z)).or_default();
                if w.drain.is_none() {
                    w.free_at.insert(e.pfn, w.ops.len());
                    w.ops.push(Some(pages));
                }
            }
            EventKind::PcpuDrain => {
                if let Some(r) = run.get_mut(&e.cpu) {
                    r.1 += pages;
                } else if let Some(&((k, o, fz, pfn), before)) = prev.get(&e.cpu) {
                    let high_order = |o: u8| (1..=3).contains(&o);
                    let fh = high_order(o)
                        && before.is_some_and(|(k2, o2, _, _)| is_free(k2) && high_order(o2));
                    if is_free(k) && fz == z && (o == 0 || fh) {
                        run.insert(e.cpu, (z, pages, fh.then_some(pfn)));
                    }
                }
            }
            _ => {}
        }
        let before = prev.get(&e.cpu).map(|p| p.0);
        prev.insert(e.cpu, ((e.kind, order, z, e.pfn), before));
    }
    for (c, r) in run.drain().collect::<Vec<_>>() {
        close(&mut walks, c, Some(r));
    }
    let mut out = HashMap::new();
    for ((c, z), w) in walks {
        let Some(d) = w.drain else { continue };
        let (b, high_min) = batch(c, z);
        let cap = b.checked_shl(u32::from(scale)).unwrap_or(i32::MAX);
        let at = |x: i32, ops: &[Option<i32>]| {
            let mut fc = x;
            for op in ops {
                match op {
                    Some(p) if fc < cap => fc += p,
                    Some(_) => {}
                    None => fc >>= 1,
                }
            }
            fc
        };
        if let Some(pfn) = w.free_high {
            // free_count before that block's free counted: at least the threshold.
            let upto = w.free_at.get(&pfn).copied().unwrap_or(w.ops.len());
            let want = b + high_min / 2;
            let (mut lo, mut hi) = (0, cap);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if at(mid, &w.ops[..upto]) >= want {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            out.insert((c, z), lo);
            continue;
        }
        if d <= b {
            continue;
        }
        let at_drain = |x: i32| {
            let mut fc = x;
            for op in &w.ops {
                match op {
                    Some(p) if fc < cap => fc += p,
                    Some(_) => {}
                    None => fc >>= 1,
                }
            }
            fc
        };
        // The smallest start that reaches the drain's pages (the function is monotone).
        let (mut lo, mut hi) = (0, cap);
        if at_drain(hi) < d {
            out.insert((c, z), hi);
            continue;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if at_drain(mid) >= d {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        // Every start in [lo, hi] gives the drain: the middle one, so that a replay whose
        // allocations halve at a slightly different moment still drains the same.
        let (mut a, mut b) = (lo, cap);
        while a < b {
            let mid = a + (b - a + 1) / 2;
            if at_drain(mid) <= d {
                a = mid;
            } else {
                b = mid - 1;
            }
        }
        let hi = if at_drain(lo) == d { a } else { lo };
        out.insert((c, z), lo + (hi - lo) / 2);
    }
    out
}

/// Each pageset's `count` at the start where the trace's first drain on an order-0 free
/// of it pins it, when that differs from the start zoneinfo's: pages the pageset took
/// or gave without an event between the recorder's start snapshot and the trace's
/// start (another task's exit freeing there, say) leave the snapshot's count off by as
/// many, and every later drain on a free with it.
///
/// # How
/// `free_frozen_page_commit` adds the freed block to the pageset, then drains when
/// `count >= high` (`nr_pcp_high`), so a drain on the commit of an order-0 block says the
/// count was exactly `high` after that block counted (it was below `high` before, else the
/// commit before would have drained). The count at that commit is the start's plus the
/// traced changes since (frees and allocations of the pcp orders, refills, drains), so the
/// start is `high` minus those. `free_unref_folios` traces every block's `mm_page_free`
/// first and commits the batch after, each commit after an `mm_page_free_batched`: a
/// batched block counts at its `mm_page_free_batched`, a block freed alone at its
/// `mm_page_free`. Only where `high` is still the snapshot's: a pageset refilled
/// (`nr_pcp_alloc` raises `high`), a CPU whose decay tick ran (`vmstat_update`,
/// `decay_pcp_high` lowers it) or a drain not on a free before that drain leave the
/// snapshot's count; so does a start that would have drained at an earlier commit.
/// `zone_of` maps a pfn to pagealloc's zone, `pcp` says whether an order is cached by the
/// pagesets, `start` is a pageset's count and `high` in the start zoneinfo.
pub fn counts(
    ev: &[Event],
    zone_of: impl Fn(u64) -> usize,
    pcp: impl Fn(u8) -> bool,
    start: impl Fn(u32, usize) -> Option<(i64, i64)>,
) -> HashMap<(u32, usize), i64> {
    // The blocks committed through a batch: each `mm_page_free` whose pfn an
    // `mm_page_free_batched` of the same CPU names before another kind of event (the
    // batch's drains aside).
    let mut batched: std::collections::HashSet<usize> = Default::default();
    let mut run: HashMap<u32, (bool, Vec<(u64, usize)>)> = HashMap::new();
    for (i, e) in ev.iter().enumerate().filter(|(_, e)| e.kind.is_page()) {
        let r = run.entry(e.cpu).or_default();
        match e.kind {
            EventKind::Free => {
                if r.0 {
                    r.1.clear();
                    r.0 = false;
                }
                r.1.push((e.pfn, i));
            }
            EventKind::FreeBatched => {
                r.0 = true;
                if let Some(k) = r.1.iter().position(|&(p, _)| p == e.pfn) {
                    batched.insert(r.1.swap_remove(k).1);
                }
            }
            // A drain inside the batch's commits (`free_frozen_page_commit`).
            EventKind::PcpuDrain => {}
            _ => {
                r.1.clear();
                r.0 = false;
            }
        }
    }
    #[derive(Default)]
    struct Set {
        /// Traced change of the count so far.
        net: i64,
        /// The count change after the latest commit, and the largest after one before it.
        latest: Option<i64>,
        peak: Option<i64>,
        /// Read (or given up).
        done: bool,
    }
    let mut sets: HashMap<(u32, usize), Set> = HashMap::new();
    let mut out = HashMap::new();
    // Per CPU: the previous page event was the commit of an order-0 block (its zone), a
    // drain, or neither; and whether its decay tick has run.
    let mut last: HashMap<u32, Option<usize>> = HashMap::new();
    let mut ticked: std::collections::HashSet<u32> = Default::default();
    // Each pending batched block's order and zone, by (CPU, pfn).
    let mut pending: HashMap<(u32, u64), (u8, usize)> = HashMap::new();
    let mut in_drain: HashMap<u32, bool> = HashMap::new();
    for (i, e) in ev.iter().enumerate() {
        if e.kind == EventKind::Vmstat {
            ticked.insert(e.cpu);
            continue;
        }
        if !e.kind.is_page() {
            continue;
        }
        let was_drain = in_drain.insert(e.cpu, e.kind == EventKind::PcpuDrain) == Some(true);
        let prev = last.insert(e.cpu, None).flatten();
        let pages = 1i64 << e.order.min(20);
        let z = zone_of(e.pfn);
        let commit = |sets: &mut HashMap<(u32, usize), Set>, z: usize, pages: i64| {
            let s = sets.entry((e.cpu, z)).or_default();
            s.net += pages;
            s.peak = s.peak.max(s.latest);
            s.latest = Some(s.net);
        };
        match e.kind {
            EventKind::Free if pcp(e.order) => {
                if batched.contains(&i) {
                    pending.insert((e.cpu, e.pfn), (e.order, z));
                } else {
                    commit(&mut sets, z, pages);
                    if e.order == 0 {
                        last.insert(e.cpu, Some(z));
                    }
                }
            }
            EventKind::FreeBatched => {
                if let Some((o, bz)) = pending.remove(&(e.cpu, e.pfn)) {
                    commit(&mut sets, bz, 1i64 << o);
                    if o == 0 {
                        last.insert(e.cpu, Some(bz));
                    }
                }
            }
            EventKind::Alloc if pcp(e.order) => sets.entry((e.cpu, z)).or_default().net -= pages,
            EventKind::ZoneLocked if e.aux != 0 => {
                let s = sets.entry((e.cpu, z)).or_default();
                s.net += pages;
                s.done = true;
            }
            EventKind::PcpuDrain => {
                let s = sets.entry((e.cpu, z)).or_default();
                if !was_drain && !s.done {
                    s.done = true;
                    if prev == Some(z) && !ticked.contains(&e.cpu) {
                        // The commit before this drain left the count at `high`; every
                        // commit before it below.
                        if let Some((count, high)) = start(e.cpu, z) {
                            let c = high - s.net;
                            if c >= 0 && s.peak.is_none_or(|p| c + p < high) && c != count {
                                out.insert((e.cpu, z), c);
                            }
                        }
                    }
                }
                s.net -= pages;
                s.done = true;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, cpu: u32, order: u8) -> Event {
        Event {
            order,
            mt: 1,
            ..Event::synthetic(cpu, kind, 0)
        }
    }

    /// 100 frees then a 180-page drain: 80 pages were counted before the trace; a drain
    /// of one batch says nothing; an allocation between halves what the start must be.
    #[test]
    fn the_first_drain_on_a_free_gives_the_start() {
        let mut v: Vec<Event> = (0..100).map(|_| ev(EventKind::Free, 0, 0)).collect();
        v.extend((0..180).map(|_| ev(EventKind::PcpuDrain, 0, 0)));
        let f = |v: &[Event]| free_counts(v, |_| 1, |o| o <= 3, |_, _| (63, 200), 5);
        assert_eq!(f(&v)[&(0, 1)], 80, "exactly 80: no halving");
        let mut w: Vec<Event> = vec![ev(EventKind::Alloc, 0, 0)];
        w.extend(v.iter().copied());
        assert_eq!(
            f(&w)[&(0, 1)],
            160,
            "160 and 161 halve to 80: the middle, 160"
        );
        let mut b: Vec<Event> = (0..10).map(|_| ev(EventKind::Free, 0, 0)).collect();
        b.extend((0..63).map(|_| ev(EventKind::PcpuDrain, 0, 0)));
        assert!(f(&b).is_empty(), "a batch: free_count <= batch, start 0");
        // A drain that follows no free (the tick's) is not used.
        let t: Vec<Event> = (0..180).map(|_| ev(EventKind::PcpuDrain, 0, 0)).collect();
        assert!(f(&t).is_empty());
    }

    /// A batch of an order-3 and an order-2 block (`free_unref_folios`: both traced, then
    /// committed after `mm_page_free_batched` events without an order), drained whole on
    /// the second commit: free_high, so `free_count` was at least `batch + high_min / 2`
    /// (63 + 100) before the order-2 block counted, the order-3 one's 8 pages included.
    #[test]
    fn a_free_high_drain_gives_a_lower_bound() {
        let at = |kind, order, pfn| Event {
            pfn,
            ..ev(kind, 0, order)
        };
        let mut v = vec![
            at(EventKind::Free, 3, 0x100),
            at(EventKind::Free, 2, 0x108),
            at(EventKind::FreeBatched, 0, 0x100),
            at(EventKind::FreeBatched, 0, 0x108),
        ];
        v.extend((0..30).map(|_| ev(EventKind::PcpuDrain, 0, 0)));
        let f = |v: &[Event]| free_counts(v, |_| 1, |o| o <= 3, |_, _| (63, 200), 5);
        assert_eq!(f(&v)[&(0, 1)], 155);
        // After an order-0 commit the flag is clear: not free_high, and the drain follows
        // an order-2 free, which says nothing.
        v.insert(3, at(EventKind::FreeBatched, 0, 0x200));
        assert!(f(&v).is_empty());
    }

    /// The first drain on an order-0 free says the count was `high` after that free: 10
    /// frees and one allocation before it from a snapshot of 100 (high 120) say 111; a
    /// batch (`free_unref_folios`: five `mm_page_free`, then the commits, drained on the
    /// third) counts its blocks at their commits; a decay tick before, a refill, or a
    /// start that would have drained earlier say nothing.
    #[test]
    fn the_first_drain_on_a_free_gives_the_start_count() {
        let at = |kind, pfn| Event {
            pfn,
            ..ev(kind, 0, 0)
        };
        let f = |v: &[Event]| counts(v, |_| 1, |o| o <= 3, |_, _| Some((100, 120)));
        let mut v: Vec<Event> = (0..10).map(|i| at(EventKind::Free, i)).collect();
        v.insert(4, at(EventKind::Alloc, 99));
        v.extend((0..63).map(|i| at(EventKind::PcpuDrain, 0x100 + i)));
        assert_eq!(f(&v)[&(0, 1)], 111);
        let mut b: Vec<Event> = (0..5).map(|i| at(EventKind::Free, i)).collect();
        b.extend((0..3).map(|i| at(EventKind::FreeBatched, i)));
        b.extend((0..63).map(|i| at(EventKind::PcpuDrain, 0x100 + i)));
        b.extend((3..5).map(|i| at(EventKind::FreeBatched, i)));
        assert_eq!(f(&b)[&(0, 1)], 117, "three committed, not five");
        let mut t = v.clone();
        t.insert(0, ev(EventKind::Vmstat, 0, 0));
        assert!(f(&t).is_empty(), "high decayed: unknown");
        let mut r = v.clone();
        r.insert(
            0,
            Event {
                aux: 1,
                ..at(EventKind::ZoneLocked, 0x200)
            },
        );
        assert!(f(&r).is_empty(), "high raised by the refill: unknown");
        // 30 frees, 25 allocations, 10 frees: high - 15 at the drain would have been
        // above high after the 30th free.
        let mut e: Vec<Event> = (0..30).map(|i| at(EventKind::Free, i)).collect();
        e.extend((0..25).map(|i| at(EventKind::Alloc, 0x300 + i)));
        e.extend((0..10).map(|i| at(EventKind::Free, 0x400 + i)));
        e.extend((0..63).map(|i| at(EventKind::PcpuDrain, 0x100 + i)));
        assert!(f(&e).is_empty());
        // The snapshot's own count: nothing to say.
        let s: Vec<Event> = (0..20)
            .map(|i| at(EventKind::Free, i))
            .chain((0..63).map(|i| at(EventKind::PcpuDrain, 0x100 + i)))
            .collect();
        assert!(f(&s).is_empty());
    }
}
