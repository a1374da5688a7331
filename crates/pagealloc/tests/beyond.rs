//! Effect tests of the beyond-mainline mechanisms (issue 3): the pcp migratetype cache,
//! the zonelist full-zone cache, order-0 merge skipping, clustered refill and count_min.
//! Each test runs the same deterministic sequence with the switch on and off and shows
//! the difference through the counters or the free lists, with `validate()` holding.

mod common;
use common::*;
use pagealloc::*;
use std::borrow::Borrow;
use std::sync::Arc;

fn with(base: &str, extra: &str) -> Config {
    let mut c = cfg(base);
    if !extra.is_empty() {
        for kv in extra.split(',') {
            let (k, v) = kv.split_once('=').expect("key=value");
            c.set(k, v).expect("known key");
        }
    }
    c
}

/// Allocate order-`order` blocks on `cpu` until OutOfMemory.
fn alloc_all(a: &Allocator, cpu: usize, order: u8, gfp: Gfp) -> Vec<Frame> {
    let mut v = Vec::new();
    loop {
        match a.alloc_on(cpu, order, gfp, None) {
            Ok(f) => v.push(f),
            Err(AllocError::OutOfMemory) => return v,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
}

/// Free every frame of `frames` on `cpu` (owned or borrowed frames).
fn free_all<I>(a: &Allocator, cpu: usize, frames: I)
where
    I: IntoIterator,
    I::Item: Borrow<Frame>,
{
    for f in frames {
        a.free_on(cpu, *f.borrow()).unwrap();
    }
}

/// The counters of two runs that hand out the same blocks, one with a switch that only
/// saves work under the zone lock (`on`) and one without (`off`): every counter equal but
/// the times (`*_ns`) and the accesses made under the zone lock, which `on` has fewer of.
fn assert_same_counts_fewer_locked_accesses(base: &str, on: &Counters, off: &Counters) {
    for ((name, a), (_, b)) in on.iter().zip(off.iter()) {
        if name.ends_with("_ns") || name == "zone_lock_meta" || name == "zone_lock_lines" {
            continue;
        }
        assert_eq!(a, b, "{base}: {name}");
    }
    assert!(
        on.zone_lock_meta < off.zone_lock_meta,
        "{base}: {on:?} {off:?}"
    );
    assert!(
        on.zone_lock_lines < off.zone_lock_lines,
        "{base}: {on:?} {off:?}"
    );
}

// ---------------------------------------------------------------- 1. migratetype cache

/// A page whose pageblock changes type while it sits on the pcp ends up on the free list
/// of the new type only when the cache is off (6.10+); with the cache (≤ 6.9) the stale
/// type is used. An isolated pageblock is re-read either way. Nothing is lost.
#[test]
fn pcp_migratetype_cache_uses_the_stale_type_only_when_on() {
    for (cache, isolate) in [(false, false), (true, false), (false, true), (true, true)] {
        let c = with(
            "linux-6.12",
            &format!(
                "pcp_migratetype_cache={},thp=off",
                if cache { "on" } else { "off" }
            ),
        );
        let (a, _p) = manual(&Layout::single(8192, 1), c);
        let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
        assert_eq!(a.pageblock_type(f.pfn), Some(MigrateType::Movable));
        a.free_on(0, f).unwrap();
        assert!(a.free_block_of(f.pfn).is_none(), "the page sits on the pcp");
        let new = if isolate {
            MigrateType::Isolate
        } else {
            MigrateType::Unmovable
        };
        a.set_pageblock_type(f.pfn, new).unwrap();
        a.drain_cpu(0);
        let (_, _, list) = a.free_block_of(f.pfn).expect("back in the buddy lists");
        let want = if cache && !isolate {
            MigrateType::Movable // stale: the type cached at free time
        } else {
            new
        };
        assert_eq!(list, want, "cache {cache}, new type {new:?}");
        let t = a.validate().unwrap();
        assert_eq!((t.allocated, t.pcp), (0, 0));
        assert_eq!(t.buddy, t.managed, "nothing lost");
        if isolate {
            // isolated pages are not counted free
            assert!(a.nr_free_pages() < t.managed);
        } else {
            assert_eq!(a.nr_free_pages(), t.managed);
        }
    }
}

// ---------------------------------------------------------------- 2. zonelist cache

struct ZlcRun {
    frames: Vec<Frame>,
    /// (zones scanned, zones skipped) over the allocations while nodes fill, before the
    /// first slow-path entry.
    filling: (u64, u64),
    allocs_filling: u64,
    total: Counters,
}

fn zlc_run(on: bool) -> ZlcRun {
    let c = with(
        "linux-6.12",
        &format!("zonelist_cache={},thp=off", if on { "on" } else { "off" }),
    );
    let (a, p) = manual(&Layout::numa(28, 2048, 2), c);
    p.set_now(5_000_000_000);
    let mut frames = Vec::new();
    let mut filling = None;
    loop {
        // cpu_counters: summing all 56 CPUs x 28 zones per step would dominate the test.
        let before = a.cpu_counters(0).unwrap();
        match a.alloc_on(0, 0, Gfp::USER, None) {
            Ok(f) => frames.push(f),
            Err(AllocError::OutOfMemory) => break,
            Err(e) => panic!("{e:?}"),
        }
        // 1 µs per allocation: the whole run stays within the cache's one-second life.
        p.advance(1_000);
        if filling.is_none() && a.cpu_counters(0).unwrap().alloc_slowpath > before.alloc_slowpath {
            let c = a.cpu_counters(0).unwrap();
            filling = Some(((c.zonelist_scanned, c.zonelist_skipped), frames.len()));
        }
    }
    a.validate().unwrap();
    let (filling, n) = filling.expect("the run reached the slow path");
    ZlcRun {
        frames,
        filling,
        allocs_filling: n as u64,
        total: a.counters(),
    }
}

/// 28 nodes, one CPU allocating until memory runs out: with the cache, zones found full
/// are skipped, so far fewer zones are scanned per allocation once nodes fill, and the
/// allocation results are identical: the same frames in the same order (a deterministic
/// single-CPU sequence; the cached pass and the full second pass make the result
/// independent of the cache whenever no zone regains pages, which holds here).
#[test]
fn zonelist_cache_scans_fewer_zones_with_identical_results() {
    let off = zlc_run(false);
    let on = zlc_run(true);
    assert_eq!(off.frames.len(), on.frames.len());
    assert!(off.frames == on.frames, "same frames in the same order");
    assert_eq!(off.allocs_filling, on.allocs_filling);
    assert_eq!(off.filling.1, 0, "no skipping without the cache");
    assert!(on.filling.1 > 0, "the cache skipped zones");
    let per_alloc = |r: &ZlcRun| r.filling.0 as f64 / r.allocs_filling as f64;
    let (p_off, p_on) = (per_alloc(&off), per_alloc(&on));
    eprintln!(
        "zones scanned per allocation while 28 nodes fill: off {p_off:.2}, on {p_on:.2} \
         ({} allocations); whole run incl. slow path: off {} on {} scanned, {} skipped",
        off.allocs_filling,
        off.total.zonelist_scanned,
        on.total.zonelist_scanned,
        on.total.zonelist_skipped
    );
    // Without the cache the n-th node to fill costs n zones per allocation (~13.5 on
    // average over 28 nodes); with it, about one after the first failure.
    assert!(p_off > 8.0, "{p_off}");
    assert!(p_on < 2.0, "{p_on}");
}

/// The bitmap is wiped once it is more than a second old (allocator clock), and the
/// first zone of a walk is always tried.
#[test]
fn zonelist_cache_forgets_after_one_second() {
    let c = with("linux-6.12", "zonelist_cache=on,thp=off");
    let (a, p) = manual(&Layout::numa(4, 2048, 1), c);
    p.set_now(10_000_000_000);
    // fill node 0 and node 1 (below their low marks), spill into node 2
    let mut held = Vec::new();
    while a.zone_of_pfn(held.last().map_or(Pfn(0), |f: &Frame| f.pfn)) != Some(2) {
        held.push(a.alloc_on(0, 0, Gfp::USER, None).unwrap());
    }
    // next allocation: zone 0 tried, zone 1 skipped
    let c0 = a.counters();
    a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let d = a.counters().since(&c0);
    assert_eq!((d.zonelist_scanned, d.zonelist_skipped), (1, 1));
    assert_eq!(a.zonelist_full(0), [0, 1]);
    // within the second: still skipping
    p.advance(900_000_000);
    let c0 = a.counters();
    a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    assert_eq!(a.counters().since(&c0).zonelist_skipped, 1);
    // more than a second after the last wipe: wiped at setup, zone 1 scanned again
    p.advance(200_000_000);
    let c0 = a.counters();
    a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let d = a.counters().since(&c0);
    assert_eq!((d.zonelist_scanned, d.zonelist_skipped), (2, 0));
    assert_eq!(a.zonelist_full(0), [1]);
    a.validate().unwrap();
    // a node-local (THISNODE) walk never uses the cache
    let c0 = a.counters();
    let _ = a.alloc_on(0, 0, Gfp::USER | Gfp::THISNODE, None);
    assert_eq!(a.counters().since(&c0).zonelist_skipped, 0);
}

// ---------------------------------------------------------------- 3. merge skipping

/// With merge skipping, order-0 frees leave the free lists unmerged (marked), a later
/// high-order allocation fails on the fast path, merges them lazily in the slow path and
/// succeeds (a "rescue"); `compact()` merges everything; the disable depth turns skipping
/// off. Without it, nothing is skipped and the high-order allocation needs no rescue.
#[test]
fn merge_skipping_defers_merges_until_a_high_order_allocation_needs_them() {
    for skip in [false, true] {
        let c = with(
            "linux-6.12",
            &format!("merge_skip={},thp=off", if skip { "on" } else { "off" }),
        );
        let (a, _p) = manual(&Layout::single(8192, 1), c);
        let frames = alloc_all(&a, 0, 0, Gfp::USER);
        free_all(&a, 0, &frames);
        a.drain_cpu(0);
        let t = a.validate().unwrap();
        assert_eq!(t.buddy, t.managed);
        let z = a.zone_info(0).unwrap();
        let c = a.counters();
        if skip {
            assert!(c.merge_skipped > 4000, "{}", c.merge_skipped);
            assert!(z.nr_free[0] > 4000, "left unmerged: {:?}", z.nr_free);
            assert_eq!(z.nr_free[10], 0);
        } else {
            assert_eq!(c.merge_skipped, 0);
            assert_eq!(z.nr_free[10], 8, "fully merged: {:?}", z.nr_free);
        }
        // a pageblock-sized allocation
        let c0 = a.counters();
        let big = a.alloc_on(0, 9, Gfp::USER, None).unwrap();
        let c = a.counters().since(&c0);
        if skip {
            // One pageblock's frames merged on demand, not the 8192 skipped.
            assert_eq!(c.highorder_rescued, 1);
            assert_eq!(c.merge_ondemand, 1);
            assert!((1..=512).contains(&c.merge_deferred), "{c:?}");
            assert_eq!(c.alloc_slowpath, 1);
        } else {
            assert_eq!((c.highorder_rescued, c.merge_deferred), (0, 0));
        }
        a.free_on(0, big).unwrap();
        a.validate().unwrap();
        if skip {
            assert!(a.compact() > 7000, "the rest is still skipped");
        }
        assert_eq!(a.zone_info(0).unwrap().nr_free[10], 8);
    }
}

/// The slow path's merge on demand is bounded: with merge-skipped frames in every
/// pageblock and half the pageblocks pinned by one allocated frame, an order-9 request
/// merges pageblock after pageblock only until one yields a pageblock-sized block, an
/// order-3 request stops at the first pageblock; what is left stays marked and counted
/// (`nr_skipped` is still an upper bound), so later requests and `compact()` find it.
#[test]
fn merge_on_demand_stops_at_the_first_block_of_the_requested_order() {
    let (a, _p) = manual(
        &Layout::single(16384, 1),
        with("linux-6.12", "merge_skip=on,thp=off"),
    );
    let frames = alloc_all(&a, 0, 0, Gfp::USER);
    // One frame of every odd pageblock stays allocated.
    let pinned: Vec<Frame> = frames
        .iter()
        .filter(|f| f.pfn.0 % 512 == 7 && (f.pfn.0 / 512) % 2 == 1)
        .copied()
        .collect();
    assert_eq!(pinned.len(), 16);
    free_all(&a, 0, frames.iter().filter(|f| !pinned.contains(f)));
    a.drain_cpu(0);
    let skipped = a.counters().merge_skipped;
    assert!(skipped > 16000, "{skipped}");

    // Order-3 requests: the few blocks left unmarked serve the first ones, then the
    // first pageblock merged on demand serves the request that needs it.
    let mut small = Vec::new();
    let d3 = loop {
        let c0 = a.counters();
        small.push(a.alloc_on(0, 3, Gfp::USER, None).unwrap());
        let d = a.counters().since(&c0);
        if d.highorder_rescued > 0 {
            break d;
        }
        assert_eq!(d.merge_ondemand, 0);
        assert!(small.len() < 100, "no rescue");
    };
    assert_eq!((d3.highorder_rescued, d3.merge_ondemand), (1, 1), "{d3:?}");
    assert!((1..=512).contains(&d3.merge_deferred), "{d3:?}");
    a.validate().unwrap();

    let c0 = a.counters();
    let big = a.alloc_on(0, 9, Gfp::USER, None).unwrap();
    let d = a.counters().since(&c0);
    assert_eq!(d.highorder_rescued, 1);
    // Pinned pageblocks cannot yield one: at most all 16 of them, then a free one.
    assert!((1..=17).contains(&d.merge_ondemand), "{d:?}");
    assert!(d.merge_deferred <= 512 * d.merge_ondemand, "{d:?}");
    assert!(d.merge_deferred < skipped / 2, "{d:?}");
    a.validate().unwrap();

    // Another order-9 request still finds marked frames to merge.
    let c0 = a.counters();
    let big2 = a.alloc_on(0, 9, Gfp::USER, None).unwrap();
    let d = a.counters().since(&c0);
    assert_eq!(d.highorder_rescued, 1);
    assert!(
        d.merge_ondemand >= 1 && d.merge_deferred < skipped / 2,
        "{d:?}"
    );
    a.validate().unwrap();

    // The full merge takes the rest, then has nothing left.
    free_all(&a, 0, small.iter().chain(&[big, big2]));
    free_all(&a, 0, &pinned);
    a.drain_cpu(0);
    assert!(a.compact() > 8000);
    assert_eq!(a.compact(), 0);
    assert_eq!(a.zone_info(0).unwrap().nr_free[10], 16);
    a.validate().unwrap();
}

#[test]
fn merge_skip_disable_depth_and_compact() {
    let (a, _p) = manual(
        &Layout::single(8192, 1),
        with("linux-6.12", "merge_skip=on,thp=off"),
    );
    let frames = alloc_all(&a, 0, 0, Gfp::USER);
    let (first, rest) = frames.split_at(frames.len() / 2);
    free_all(&a, 0, first);
    a.drain_cpu(0);
    let skipped = a.counters().merge_skipped;
    assert!(skipped >= first.len() as u64);
    // Raising the depth merges what was skipped and stops skipping.
    a.merge_skip_disable(true);
    assert!(a.counters().merge_deferred >= first.len() as u64);
    free_all(&a, 0, rest);
    a.drain_cpu(0);
    assert_eq!(
        a.counters().merge_skipped,
        skipped,
        "no skipping while disabled"
    );
    assert_eq!(a.zone_info(0).unwrap().nr_free[10], 8);
    a.validate().unwrap();
    a.merge_skip_disable(false);
    let again = alloc_all(&a, 0, 0, Gfp::USER);
    free_all(&a, 0, &again);
    a.drain_cpu(0);
    assert!(a.counters().merge_skipped > skipped, "skipping again");
    a.validate().unwrap();
    let n = a.compact();
    assert!(n > 0);
    assert_eq!(a.compact(), 0, "nothing left to merge");
    assert_eq!(a.zone_info(0).unwrap().nr_free[10], 8);
    a.validate().unwrap();
}

/// Merge-skipped frames keep their mark when their pageblock changes type, so the
/// validator still accepts them, and the deferred merge still finds them.
#[test]
fn merge_skipped_frames_survive_pageblock_moves() {
    let (a, _p) = manual(
        &Layout::single(4096, 1),
        with("linux-6.12", "merge_skip=on,thp=off"),
    );
    let frames = alloc_all(&a, 0, 0, Gfp::USER);
    free_all(&a, 0, &frames);
    a.drain_cpu(0);
    for pb in 0..8u64 {
        a.set_pageblock_type(Pfn(pb * 512), MigrateType::Unmovable);
        a.validate().unwrap();
    }
    assert!(a.compact() > 0);
    a.validate().unwrap();
    assert_eq!(a.zone_info(0).unwrap().nr_free[10], 4);
}

// ---------------------------------------------------------------- 4. clustered refill

struct ClusterRun {
    batch: i32,
    refill: Counters,
}

/// Free one batch of one migratetype through a drain, then refill one batch.
fn one_batch(clustered: bool) -> ClusterRun {
    let c = with(
        "linux-6.12",
        &format!(
            "merge_skip=on,refill_scaling=off,thp=off,clustered_refill={}",
            if clustered { "on" } else { "off" }
        ),
    );
    let (a, _p) = manual(&Layout::single(1 << 16, 1), c);
    let batch = a.pcp_info(0, 0).unwrap().batch;
    assert!(batch > 2);
    let frames: Vec<Frame> = (0..batch)
        .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
        .collect();
    a.drain_cpu(0);
    a.compact();
    free_all(&a, 0, &frames);
    assert_eq!(a.pcp_info(0, 0).unwrap().count, batch);
    a.drain_cpu(0); // exactly one batch of one migratetype
    a.validate().unwrap();
    a.reset_counters();
    let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let refill = a.counters();
    a.free_on(0, f).unwrap();
    a.validate().unwrap();
    ClusterRun { batch, refill }
}

/// A bulk free of one batch becomes one cluster, and the next refill cuts it whole:
/// one frame's metadata touched under the zone lock instead of one per page.
#[test]
fn clustered_refill_cuts_a_freed_batch_as_one_cluster() {
    let off = one_batch(false);
    let on = one_batch(true);
    let b = on.batch as u64;
    assert_eq!(on.refill.pcp_refill, 1);
    assert_eq!(on.refill.pcp_refill_pages, b);
    assert_eq!(on.refill.cluster_cut, 1);
    assert_eq!(on.refill.refill_meta_touched, 1);
    assert_eq!(off.refill.pcp_refill_pages, b);
    assert_eq!(off.refill.cluster_cut, 0);
    assert_eq!(off.refill.refill_meta_touched, b);
}

/// Steady state of a page_fault1-like loop: per refill, metadata touched under the zone
/// lock drops from one per page to about one per cluster.
#[test]
fn clustered_refill_touches_one_frame_per_cluster_in_steady_state() {
    let mut per_refill = Vec::new();
    for clustered in [false, true] {
        let c = with(
            "linux-6.12",
            &format!(
                "merge_skip=on,thp=off,clustered_refill={}",
                if clustered { "on" } else { "off" }
            ),
        );
        let (a, _p) = manual(&Layout::single(1 << 15, 2), c);
        let mut last = Counters::default();
        for round in 0..4 {
            a.reset_counters();
            let mut held = Vec::new();
            for _ in 0..8192 {
                held.push(a.alloc_on(0, 0, Gfp::USER, None).unwrap());
            }
            last = a.counters();
            free_all(&a, 0, held);
            a.validate()
                .unwrap_or_else(|e| panic!("round {round} clustered {clustered}: {e}"));
        }
        let touched = last.refill_meta_touched as f64 / last.pcp_refill as f64;
        let pages = last.pcp_refill_pages as f64 / last.pcp_refill as f64;
        eprintln!(
            "clustered {clustered}: {pages:.1} pages and {touched:.1} frames touched per refill, {} clusters cut",
            last.cluster_cut
        );
        if clustered {
            assert!(last.cluster_cut > 0);
            let batch = a.pcp_info(0, 0).unwrap().batch as f64;
            assert!(
                touched <= pages / batch + 2.0,
                "{touched} vs {pages}/{batch}"
            );
        } else {
            assert_eq!(last.cluster_cut, 0);
            assert_eq!(touched, pages);
        }
        per_refill.push(touched);
    }
    assert!(per_refill[1] * 5.0 < per_refill[0], "{per_refill:?}");
}

/// A refill that cuts clusters and then has to fall back and steal scans a pageblock
/// holding its own cut frames (still `Buddy`, on no list): they must be fixed up first,
/// or `move_freepages_block` would unlink them from a list they are not on.
#[test]
fn clustered_refill_own_cut_is_fixed_up_before_a_steal_scans_its_pageblock() {
    let c = with(
        "linux-6.12",
        "merge_skip=on,clustered_refill=on,pcp_migratetype_cache=on,refill_scaling=off,thp=off,fixed_batch=7",
    );
    let (a, _p) = manual(&Layout::single(4096, 1), c);
    // Everything but one pageblock P in order-9 blocks.
    let big: Vec<Frame> = (0..7)
        .map(|_| a.alloc_on(0, 9, Gfp::USER, None).unwrap())
        .collect();
    let p_start = (0..8u64)
        .map(|k| k * 512)
        .find(|&s| a.free_block_of(Pfn(s)).is_some())
        .expect("one pageblock left free");
    let small: Vec<Frame> = (0..20)
        .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
        .collect();
    assert!(small.iter().all(|f| f.pfn.0 / 512 == p_start / 512));
    a.drain_cpu(0);
    // Three frames freed while P is UNMOVABLE: cached as unmovable, they land on the
    // unmovable order-0 list as one cluster although P is movable again by then.
    a.set_pageblock_type(Pfn(p_start), MigrateType::Unmovable);
    free_all(&a, 0, &small[..3]);
    a.set_pageblock_type(Pfn(p_start), MigrateType::Movable);
    a.drain_cpu(0);
    a.validate().unwrap();
    a.reset_counters();
    // An unmovable refill of 7: cuts the cluster of 3, then falls back to P's movable
    // blocks, stealing with a scan of P.
    let f = a.alloc_on(0, 0, Gfp::KERNEL, None).unwrap();
    let c = a.counters();
    assert_eq!(c.cluster_cut, 1);
    assert!(c.fallback >= 1);
    a.validate().unwrap();
    a.free_on(0, f).unwrap();
    free_all(&a, 0, small[3..].iter().chain(&big));
    a.drain_cpu(0);
    let t = a.validate().unwrap();
    assert_eq!(t.buddy, t.managed);
}

/// Real threads: refills cutting clusters and fixing them up outside the zone lock race
/// with pageblock moves, non-skipping order-0 frees (merge skipping disabled for a
/// while), compaction and high-order allocations, all of which must wait for cut
/// frames to be fixed up. Everything stays consistent.
#[test]
fn clustered_refill_fixups_race_safely_with_mergers_and_scanners() {
    let c = with("linux-6.12", "merge_skip=on,clustered_refill=on,thp=off");
    let a = Arc::new(
        Allocator::with_platform(
            &Layout::single(1 << 14, 2),
            c,
            Arc::new(ManualPlatform::new()),
        )
        .unwrap(),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let (a, stop) = (a.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 20 {
                let mut held = Vec::new();
                for _ in 0..2000 {
                    match a.alloc_on(0, 0, Gfp::USER, None) {
                        Ok(f) => held.push(f),
                        Err(_) => break,
                    }
                }
                free_all(&a, 0, held);
                rounds += 1;
            }
            rounds
        })
    };
    for i in 0..300u64 {
        match i % 5 {
            0 => {
                a.set_pageblock_type(Pfn((i * 512) % (1 << 14)), MigrateType::Unmovable);
                a.set_pageblock_type(Pfn((i * 512) % (1 << 14)), MigrateType::Movable);
            }
            1 => {
                a.merge_skip_disable(true);
                let v: Vec<Frame> = (0..200)
                    .filter_map(|_| a.alloc_on(1, 0, Gfp::USER, None).ok())
                    .collect();
                free_all(&a, 1, v);
                a.drain_cpu(1);
                a.merge_skip_disable(false);
            }
            2 => {
                a.compact();
            }
            3 => {
                if let Ok(f) = a.alloc_on(1, 3, Gfp::KERNEL, None) {
                    a.free_on(1, f).unwrap();
                }
            }
            _ => {
                a.validate().unwrap();
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = worker.join().unwrap();
    assert!(rounds >= 20);
    a.drain_all_pages();
    let t = a.validate().unwrap();
    assert_eq!(t.allocated, 0);
    assert_eq!(t.buddy, t.managed);
    assert!(a.counters().cluster_cut > 0);
}

// ---------------------------------------------------------------- 4b. spliced drains

/// One deterministic mixed run (two CPUs, three migratetypes, orders 0–3, frees on the
/// other CPU, pageblocks retagged while their frames sit on the pcp lists so that one
/// pcp list holds runs of several free-list types, explicit drains): the frames handed
/// out, in order, and the counters.
fn mixed_run(extra: &str, splice: bool) -> (Vec<u64>, Counters) {
    let c = with(
        "linux-6.12",
        &format!(
            "merge_skip=on,thp=off,{extra},splice_drain={}",
            if splice { "on" } else { "off" }
        ),
    );
    mixed_run_with(c, &format!("{extra} splice {splice}"))
}

/// [`mixed_run`] with any config.
fn mixed_run_with(c: Config, label: &str) -> (Vec<u64>, Counters) {
    let (a, _p) = manual(&Layout::single(1 << 15, 2), c);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let gfps = [
        Gfp::USER,
        Gfp::KERNEL,
        Gfp(Gfp::KSWAPD.0 | Gfp::RECLAIMABLE.0),
    ];
    let types = [
        MigrateType::Movable,
        MigrateType::Unmovable,
        MigrateType::Reclaimable,
    ];
    let mut handed = Vec::new();
    let mut held: Vec<Frame> = Vec::new();
    for round in 0..6 {
        for _ in 0..3000 {
            let r = next();
            let order = if r % 8 == 0 { (r >> 8) as u8 % 4 } else { 0 };
            if let Ok(f) = a.alloc_on(
                (r >> 4) as usize % 2,
                order,
                gfps[(r >> 12) as usize % 3],
                None,
            ) {
                handed.push(f.pfn.0);
                held.push(f);
            }
        }
        let half = held.len() / 2;
        for f in held.drain(half..) {
            a.free_on(next() as usize % 2, f).unwrap();
        }
        for t in types {
            let f = held[(next() as usize) % held.len()];
            a.set_pageblock_type(f.pfn, t).unwrap();
        }
        for f in held.drain(..) {
            a.free_on(next() as usize % 2, f).unwrap();
        }
        if round % 2 == 1 {
            a.drain_cpu(round % 2);
        }
        a.validate()
            .unwrap_or_else(|e| panic!("{label} round {round}: {e}"));
    }
    (handed, a.counters())
}

/// A spliced drain leaves the free lists, clusters and counters exactly as the
/// page-by-page drain does (the same frames are handed out afterwards, in the same
/// order), and touches fewer frames' metadata under the zone lock.
#[test]
fn splice_drain_matches_the_page_by_page_drain_with_fewer_lines_under_the_lock() {
    for extra in [
        "clustered_refill=off",
        "clustered_refill=on",
        "clustered_refill=on,fixed_batch=7",
        "clustered_refill=on,pcp_migratetype_cache=on",
    ] {
        let (h_off, off) = mixed_run(extra, false);
        let (h_on, on) = mixed_run(extra, true);
        assert_eq!(h_off, h_on, "{extra}: frames handed out differ");
        for (name, a, b) in [
            ("pcp_drain_pages", off.pcp_drain_pages, on.pcp_drain_pages),
            ("merge_skipped", off.merge_skipped, on.merge_skipped),
            ("cluster_cut", off.cluster_cut, on.cluster_cut),
            (
                "refill_meta_touched",
                off.refill_meta_touched,
                on.refill_meta_touched,
            ),
            ("alloc_zone", off.alloc_zone, on.alloc_zone),
            ("zone_lock_pages", off.zone_lock_pages, on.zone_lock_pages),
        ] {
            assert_eq!(a, b, "{extra}: {name}");
        }
        assert_eq!(off.drain_spliced, 0);
        assert!(on.drain_spliced > on.pcp_drain_pages / 2, "{extra}: {on:?}");
        eprintln!(
            "{extra}: metadata lines under the zone lock {} -> {}, {} pages drained",
            off.zone_lock_meta, on.zone_lock_meta, on.pcp_drain_pages
        );
        assert!(on.zone_lock_meta < off.zone_lock_meta, "{extra}");
    }
}

// ---------------------------------------------------------------- 4c. order-0 rings

/// `own_bitmap` (ours): the order-0 lists as rings of frame indices keep the kernel's
/// list order exactly (frees at the head, refills at the tail, allocations from the
/// head, drains from the tail): the same frames are handed out in the same order and
/// every counter but its own (`free_unwritten`) is the same as with linked lists, in the
/// kernel preset and in the merge-skipping, clustered and spliced variants, with THP
/// lists on or off. Not with `pcp_migratetype_cache` (≤ 6.9): a ring's frame keeps no
/// cached type, so a frame whose pageblock was retyped while it sat on the pageset goes
/// to the pageblock's type (docs/mechanisms.md A.13).
#[test]
fn own_bitmap_rings_hand_out_the_same_frames_in_the_same_order_as_linked_lists() {
    for base in [
        "linux-6.12,thp=off",
        "linux-6.12",
        "fast,thp=off",
        "fast",
        "fast,splice_drain=off",
        "fast,clustered_refill=off",
    ] {
        let c = |ring: bool| {
            let mut c: Config = base.parse().unwrap();
            c.own_bitmap = ring;
            // Rings always drain the tail (`drain_newest` is the linked lists').
            c.drain_newest = false;
            c
        };
        let (h_list, mut list) = mixed_run_with(c(false), base);
        let (h_ring, mut ring) = mixed_run_with(c(true), base);
        assert!(h_list.len() > 10_000, "{base}");
        // The lines reported under the zone lock differ by design: a ring's buffer lines
        // instead of the list links' frames (`own_bitmap_drains_read_indices_from_the_ring`).
        eprintln!(
            "{base}: zone-lock metadata lines {} -> {}, all lines {} -> {}",
            list.zone_lock_meta, ring.zone_lock_meta, list.zone_lock_lines, ring.zone_lock_lines
        );
        for c in [&mut list, &mut ring] {
            (c.zone_lock_meta, c.zone_lock_lines, c.free_unwritten) = (0, 0, 0);
        }
        assert_eq!(h_list, h_ring, "{base}: frames handed out differ");
        assert_eq!(
            format!("{list:?}"),
            format!("{ring:?}"),
            "{base}: counters differ"
        );
    }
}

// ---------------------------------------------------------------- 5. count_min

/// count_min (V2 09/10, never merged): a pageset whose pages were all used between two
/// ticks keeps its `high`; without count_min it decays by 1/8 per tick regardless. An
/// idle pageset decays alike either way.
#[test]
fn count_min_decays_only_idle_pages_through_the_allocator() {
    let mut highs = Vec::new();
    for cm in [false, true] {
        let c = with(
            "linux-6.12",
            &format!("thp=off,count_min={}", if cm { "on" } else { "off" }),
        );
        let (a, _p) = manual(&Layout::single(1 << 16, 1), c);
        // Build up `high` with a burst of frees.
        let burst: Vec<Frame> = (0..6000)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
            .collect();
        free_all(&a, 0, burst);
        let start = a.pcp_info(0, 0).unwrap();
        assert!(start.high > start.high_min);
        a.tick(0);
        // Busy: every tick, all cached pages are used and come back.
        for _ in 0..4 {
            let n = a.pcp_info(0, 0).unwrap().count;
            let v: Vec<Frame> = (0..n)
                .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
                .collect();
            free_all(&a, 0, v);
            a.tick(0);
        }
        let busy = a.pcp_info(0, 0).unwrap().high;
        // Idle: ticks only.
        for _ in 0..3 {
            a.tick(0);
        }
        let idle = a.pcp_info(0, 0).unwrap().high;
        a.validate().unwrap();
        highs.push((start.high, busy, idle));
    }
    let (off, on) = (highs[0], highs[1]);
    eprintln!("high (start, after busy ticks, after idle ticks): off {off:?}, on {on:?}");
    assert_eq!(off.0, on.0, "same start");
    assert!(
        on.1 > off.1,
        "busy pageset keeps high with count_min: {on:?} vs {off:?}"
    );
    assert!(on.1 >= on.0 * 9 / 10, "{on:?}");
    assert!(
        on.2 < on.1,
        "idle pageset decays with count_min too: {on:?}"
    );
}

// ---------------------------------------------------------------- 5b. THP refills below high

/// `thp_refill_high` (ours): a THP refill takes up to half the room below `high` instead
/// of the kernel's two blocks, so a run of huge-page allocations makes fewer zone trips;
/// the same blocks are handed out in number, and the pageset stays within `high`.
#[test]
fn thp_refill_high_makes_fewer_zone_trips_and_stays_below_high() {
    let run = |extra: &str| {
        // 2 GiB, one CPU
        let a = Allocator::new(&Layout::single(1 << 19, 1), with("linux-6.12", extra)).unwrap();
        let mut got = Vec::new();
        for _ in 0..64 {
            got.push(a.alloc_on(0, 9, Gfp::USER, None).unwrap());
            let p = a.pcp_info(0, 0).unwrap();
            assert!(p.count <= p.high, "{extra}: {p:?}");
        }
        let c = a.counters();
        while let Some(f) = got.pop() {
            a.free_on(0, f).unwrap();
        }
        a.validate().unwrap();
        c
    };
    let off = run("");
    let on = run("thp_refill_high=on");
    assert!(!Preset::Linux612.config().thp_refill_high && Preset::Fast.config().thp_refill_high);
    assert_eq!(
        (off.pcp_refill, off.pcp_refill_pages),
        (32, 64 * 512),
        "{off:?}"
    );
    assert!(on.pcp_refill * 2 <= off.pcp_refill, "{on:?}");
    assert!(on.zone_lock < off.zone_lock);
    assert_eq!(on.pgalloc, off.pgalloc);
}

/// `thp_drain_high` (ours): a drain set off by a huge-page free returns the THP list down
/// to half of `high` instead of the kernel's `batch << SCALE` pages (4 blocks), so a run
/// of huge-page frees makes far fewer zone trips; every page still goes back, and the
/// pageset stays within `high`.
#[test]
fn thp_drain_high_makes_fewer_zone_trips_and_stays_below_high() {
    let run = |extra: &str| {
        // 2 GiB, one CPU
        let a = Allocator::new(&Layout::single(1 << 19, 1), with("linux-6.12", extra)).unwrap();
        let mut got = Vec::new();
        let mut drained = 0u32;
        for _ in 0..3 {
            for _ in 0..256 {
                got.push(a.alloc_on(0, 9, Gfp::USER, None).unwrap());
            }
            let before = a.counters();
            while let Some(f) = got.pop() {
                let was = a.pcp_info(0, 0).unwrap().count;
                a.free_on(0, f).unwrap();
                let p = a.pcp_info(0, 0).unwrap();
                assert!(p.count <= p.high, "{extra}: {p:?}");
                if p.count < was {
                    drained = drained.max(((was + 512 - p.count) >> 9) as u32);
                }
            }
            let after = a.counters();
            assert_eq!(after.pgfree - before.pgfree, 256 << 9, "{extra}");
        }
        a.validate().unwrap();
        (a.counters(), drained)
    };
    let (off, off_max) = run("");
    let (on, on_max) = run("thp_drain_high=on");
    assert!(!Preset::Linux612.config().thp_drain_high && Preset::Fast.config().thp_drain_high);
    // The kernel's drain: `batch << SCALE` = 2016 pages, 4 blocks.
    assert_eq!(off_max, 4, "{off:?}");
    assert!(on_max >= 16, "{on_max} {on:?}");
    assert!(on.pcp_drain * 4 <= off.pcp_drain, "{on:?} {off:?}");
    assert!(on.zone_lock < off.zone_lock);
    assert_eq!((on.pgalloc, on.pgfree), (off.pgalloc, off.pgfree));
}

/// `thp_merge_skip` (ours, with `merge_skip`): a drained huge page goes back to the
/// order-9 free list unmerged; the blocks freed in a run are then order-9 blocks, not
/// order-10 ones, until an order-10 request merges them on demand, and that request and
/// every later one until memory runs out get the same number of blocks as without it.
#[test]
fn thp_merge_skip_leaves_drained_huge_pages_unmerged_until_order_10_asks() {
    let run = |extra: &str| {
        // 2 GiB, one CPU
        let a = Allocator::new(
            &Layout::single(1 << 19, 1),
            with("linux-6.12,merge_skip=on", extra),
        )
        .unwrap();
        let mut got = Vec::new();
        for _ in 0..256 {
            got.push(a.alloc_on(0, 9, Gfp::USER, None).unwrap());
        }
        while let Some(f) = got.pop() {
            a.free_on(0, f).unwrap();
        }
        a.validate().unwrap();
        let before = (a.counters(), a.zone_info(0).unwrap().nr_free);
        let mut big = Vec::new();
        while let Ok(f) = a.alloc_on(0, 10, Gfp::USER, None) {
            big.push(f);
        }
        let c = a.counters();
        free_all(&a, 0, big.drain(..));
        a.validate().unwrap();
        (before, c, a.counters())
    };
    let ((off_c, off_free), off_after, _) = run("");
    assert!(!Preset::Linux612.config().thp_merge_skip && Preset::Fast.config().thp_merge_skip);
    let ((on_c, on_free), on_after, on_end) = run("thp_merge_skip=on");
    // Off: every drained block merged with its buddy; no huge page was merge-skipped.
    assert_eq!(off_c.merge_skipped, 0, "{off_c:?}");
    assert!(on_c.merge_skipped > 0, "{on_c:?}");
    assert!(
        on_free[9] > off_free[9] && on_free[10] < off_free[10],
        "{on_free:?} {off_free:?}"
    );
    // The order-10 requests merge them on demand and get as many blocks.
    assert!(off_after.pgalloc > off_c.pgalloc, "{off_after:?}");
    assert_eq!(
        on_after.pgalloc - on_c.pgalloc,
        off_after.pgalloc - off_c.pgalloc
    );
    assert!(
        on_after.merge_ondemand > on_c.merge_ondemand,
        "{on_after:?}"
    );
    assert!(on_after.highorder_rescued > 0, "{on_after:?}");
    assert_eq!(off_after.highorder_rescued, 0, "{off_after:?}");
    assert_eq!(on_end.pgfree, on_end.pgalloc);
}

/// `refill_runs` (ours) on refills that find split and unsplit blocks: a refill whose
/// order's list is empty takes its blocks from one larger block, where the kernel puts
/// each upper half on the list and takes it back. The same blocks in the same order and
/// the same counts as the kernel's steps, with fewer metadata and free-area accesses
/// under the zone lock. Orders 9 and 1..=3 (the THP list and the small high-order lists),
/// `thp_refill_high` on and off.
#[test]
fn refill_runs_take_split_blocks_with_fewer_accesses_under_the_lock() {
    let run = |base: &str, extra: &str| {
        // 2 GiB, one CPU
        let a = Allocator::new(&Layout::single(1 << 19, 1), with(base, extra)).unwrap();
        let mut got = Vec::new();
        let mut seq = Vec::new();
        for round in 0..3 {
            for k in 0..300u64 {
                let order = [9, 9, 1, 2, 3, 0][((k + round) % 6) as usize];
                let f = a.alloc_on(0, order, Gfp::USER, None).unwrap();
                seq.push(f.pfn.0);
                got.push(f);
            }
            // Free every other block, so later refills find split and unsplit blocks.
            let mut keep = Vec::new();
            for (k, f) in got.drain(..).enumerate() {
                if k % 2 == 0 {
                    a.free_on(0, f).unwrap();
                } else {
                    keep.push(f);
                }
            }
            got = keep;
        }
        a.validate().unwrap();
        free_all(&a, 0, got);
        a.validate().unwrap();
        (seq, a.counters())
    };
    for base in ["linux-6.12", "linux-6.12,thp_refill_high=on"] {
        let (s_off, off) = run(base, "");
        let (s_on, on) = run(base, "refill_runs=on");
        assert_eq!(s_on, s_off, "{base}: the same blocks in the same order");
        assert_same_counts_fewer_locked_accesses(base, &on, &off);
    }
}

/// `refill_runs` (ours): a refill takes the blocks it needs as one run cut from the front
/// of the smallest block, and lists the rest as the pieces the kernel's one-block steps
/// would leave. The same blocks in the same order, the same counts and the same free
/// lists after every round as the kernel's steps, with fewer
/// metadata and free-area accesses under the zone lock. Orders 0..=3 and 9, on the
/// kernel's pagesets and on `fast`'s (clustered refills, merge skipping, splices), with
/// linked lists and with `own_bitmap`'s order-0 rings.
#[test]
fn refill_runs_hand_out_the_same_blocks_with_fewer_accesses_under_the_lock() {
    assert!(!Preset::Linux612.config().refill_runs && Preset::Fast.config().refill_runs);
    let orders = [0, 0, 0, 9, 1, 0, 2, 3, 0, 0];
    for (base, off, on) in [
        ("linux-6.12", "", "refill_runs=on"),
        ("linux-6.12,thp_refill_high=on", "", "refill_runs=on"),
        ("fast", "refill_runs=off", ""),
        ("fast,own_bitmap=off", "refill_runs=off", ""),
    ] {
        // 2 GiB, one CPU
        let a_off = Allocator::new(&Layout::single(1 << 19, 1), with(base, off)).unwrap();
        let a_on = Allocator::new(&Layout::single(1 << 19, 1), with(base, on)).unwrap();
        // Six rounds of 3000 blocks, shuffled every second round, two in three freed.
        let (s_off, l_off) = churn(&a_off, 7, 6, 3000, &orders, 3);
        let (s_on, l_on) = churn(&a_on, 7, 6, 3000, &orders, 3);
        assert_eq!(s_on, s_off, "{base}: the same blocks in the same order");
        assert_eq!(
            l_on, l_off,
            "{base}: the same free-list counts after every round"
        );
        let (c_on, c_off) = (a_on.counters(), a_off.counters());
        assert!(
            c_on.pcp_refill > 0 && c_on.alloc_zone > 0,
            "{base}: {c_on:?}"
        );
        assert_same_counts_fewer_locked_accesses(base, &c_on, &c_off);
    }
}

/// The mixed churn of the refill-run and spliced-THP tests, on one CPU: `rounds` times
/// allocate `per_round` blocks cycling through `orders` (shifted by the round), shuffle
/// what is held every second round (with an LCG seeded `seed`: buddies seldom leave
/// together), then free all but every `keep`-th block, newest first, and validate; at the
/// end free the rest. Returns the PFNs handed out in order and the free lists after each
/// round and at the end.
fn churn(
    a: &Allocator,
    mut seed: u64,
    rounds: u64,
    per_round: u64,
    orders: &[u8],
    keep: usize,
) -> (Vec<u64>, Vec<[u64; MAX_ORDER as usize + 1]>) {
    let mut got = Vec::new();
    let mut seq = Vec::new();
    let mut lists = Vec::new();
    for round in 0..rounds {
        for k in 0..per_round {
            let order = orders[((k + round) % orders.len() as u64) as usize];
            let f = a.alloc_on(0, order, Gfp::USER, None).unwrap();
            seq.push(f.pfn.0);
            got.push(f);
        }
        if round % 2 == 1 {
            for i in (1..got.len()).rev() {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                got.swap(i, (seed >> 33) as usize % (i + 1));
            }
        }
        let mut kept = Vec::new();
        for (k, f) in got.drain(..).enumerate().rev() {
            if k % keep != 0 {
                a.free_on(0, f).unwrap();
            } else {
                kept.push(f);
            }
        }
        got = kept;
        a.validate().unwrap();
        lists.push(a.zone_info(0).unwrap().nr_free);
    }
    while let Some(f) = got.pop() {
        a.free_on(0, f).unwrap();
    }
    a.validate().unwrap();
    lists.push(a.zone_info(0).unwrap().nr_free);
    (seq, lists)
}

/// `drain_newest` (ours): in a long run of frees, a drain takes the order-0 frames freed
/// last (the head of the list) instead of those freed first (the tail). One CPU allocates
/// 12 000 frames and frees them in a shuffled order; after every free that drained, the
/// frames that reached the buddy lists (`free_block_of`) are compared with the frames
/// still on the pageset, in the order they were freed: off, every drain takes the oldest
/// of them (a prefix), as the kernel does; on, the drains made once `free_count` has
/// reached its ceiling take the newest (a suffix), and `drain_newest` counts exactly their
/// pages. The same pages are drained either way, nothing is lost, `validate()` holds.
/// Linked order-0 lists only: `fast` with `own_bitmap` (its default) has order-0 rings,
/// which drain from the tail, so it is measured here with `own_bitmap=off`.
#[test]
fn drain_newest_returns_the_frames_freed_last_in_a_long_run_of_frees() {
    let run = |base: &str, extra: &str| {
        // 128 MiB, one CPU
        let a = Allocator::new(&Layout::single(1 << 15, 1), with(base, extra)).unwrap();
        let mut got: Vec<Frame> = (0..12_000)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
            .collect();
        let mut seed = 5u64;
        for i in (1..got.len()).rev() {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            got.swap(i, (seed >> 33) as usize % (i + 1));
        }
        // An empty pageset: what the refills left on it would drain first.
        a.drain_cpu(0);
        let before = a.counters();
        // The frames freed and still on the pageset, oldest first.
        let mut resident: Vec<u64> = Vec::new();
        let (mut prefixes, mut suffixes, mut suffix_pages) = (0, 0, 0u64);
        for f in got {
            let drained = a.counters().pcp_drain_pages;
            resident.push(f.pfn.0);
            a.free_on(0, f).unwrap();
            let d = (a.counters().pcp_drain_pages - drained) as usize;
            if d == 0 {
                continue;
            }
            let left: Vec<bool> = resident
                .iter()
                .map(|&p| a.free_block_of(Pfn(p)).is_some())
                .collect();
            assert_eq!(left.iter().filter(|&&l| l).count(), d, "{base} {extra}");
            let n = resident.len();
            if left[..d].iter().all(|&l| l) {
                prefixes += 1;
                resident.drain(..d);
            } else {
                assert!(
                    left[n - d..].iter().all(|&l| l),
                    "{base} {extra}: a drain of {d} took neither the oldest nor the newest"
                );
                suffixes += 1;
                suffix_pages += d as u64;
                resident.truncate(n - d);
            }
        }
        a.validate().unwrap();
        let c = a.counters();
        assert_eq!(
            c.pcp_drain_pages - before.pcp_drain_pages,
            12_000 - resident.len() as u64,
            "{base} {extra}: every page is on the pageset or drained"
        );
        let drained = c.pcp_drain_pages - before.pcp_drain_pages;
        (
            prefixes,
            suffixes,
            suffix_pages,
            c.drain_newest - before.drain_newest,
            drained,
        )
    };
    assert!(!Preset::Linux612.config().drain_newest);
    for base in ["linux-6.12", "fast,own_bitmap=off"] {
        let (pre, suf, _, counted, off_pages) = run(base, "drain_newest=off");
        assert!(pre > 0, "{base}: {pre} drains");
        assert_eq!(
            (suf, counted),
            (0, 0),
            "{base}, off: the kernel drains the tail"
        );
        let (pre, suf, pages, counted, on_pages) = run(base, "drain_newest=on");
        assert_eq!(on_pages, off_pages, "{base}: as many pages drained");
        eprintln!("{base}, on: {pre} drains of the oldest, {suf} of the newest ({pages} pages)");
        assert!(suf > 0, "{base}, on: no drain took the newest frames");
        assert_eq!(
            counted, pages,
            "{base}, on: drain_newest counts the pages taken from the head"
        );
    }
}

// ---------------------------------------------------------------- 5b. lock_stat

/// `lock_stat` (instrumentation, not a kernel mechanism): on, every zone-lock hold is
/// timed; off (as in `fast`), the same trips are counted and the same frames handed out,
/// but no hold is timed, so an uncontended trip reads no clock.
#[test]
fn lock_stat_off_counts_the_same_trips_and_times_no_hold() {
    let run = |extra: &str| {
        let a = Allocator::new(&Layout::single(16384, 1), with("fast", extra)).unwrap();
        let mut got = Vec::new();
        for _ in 0..2000 {
            got.push(a.alloc_on(0, 0, Gfp::KERNEL, None).unwrap());
        }
        for _ in 0..8 {
            got.push(a.alloc_on(0, 9, Gfp::USER, None).unwrap());
        }
        let pfns: Vec<Pfn> = got.iter().map(|f| f.pfn).collect();
        while let Some(f) = got.pop() {
            a.free_on(0, f).unwrap();
        }
        a.validate().unwrap();
        (pfns, a.counters())
    };
    assert!(!Preset::Fast.config().lock_stat);
    assert!(Preset::SERIES.iter().all(|p| p.config().lock_stat));
    let (on_pfns, on) = run("lock_stat=on");
    let (off_pfns, off) = run("");
    assert_eq!(on_pfns, off_pfns, "the switch changes no decision");
    assert!(on.zone_lock > 10, "{on:?}");
    assert_eq!(
        (on.zone_lock, on.pcp_refill, on.pcp_drain),
        (off.zone_lock, off.pcp_refill, off.pcp_drain)
    );
    assert!(
        on.zone_lock_hold_ns > 0 && on.zone_lock_max_hold_ns > 0,
        "{on:?}"
    );
    assert_eq!((off.zone_lock_hold_ns, off.zone_lock_max_hold_ns), (0, 0));
}

// ---------------------------------------------------------------- 6. switches

#[test]
fn mechanisms_are_switches_off_in_linux_presets_and_nameable() {
    for p in Preset::SERIES {
        let c = p.config();
        assert!(!c.zonelist_cache && !c.merge_skip && !c.clustered_refill && !c.count_min);
        let since_6_10 = matches!(p, Preset::Linux612 | Preset::Linux618);
        assert_eq!(c.pcp_migratetype_cache, !since_6_10, "{p}");
    }
    let c: Config = "patch7,zlc=on,merge_skip=on,clustered_refill=on,count_min=on,mt_cache=off"
        .parse()
        .unwrap();
    assert!(c.zonelist_cache && c.merge_skip && c.clustered_refill && c.count_min);
    assert!(!c.pcp_migratetype_cache);
    let back: Config = c.to_string().parse().unwrap();
    assert_eq!(back, c);
    for k in [
        "zonelist_cache",
        "merge_skip",
        "clustered_refill",
        "count_min",
        "pcp_migratetype_cache",
    ] {
        assert!(Config::KEYS.contains(k), "{k}");
    }
}

/// `own_bitmap` (docs/mechanisms.md A.13): order-0 frees write no frame metadata and
/// their frames wait on rings reading as allocations. Through a random mix of orders,
/// local and remote frees, CPU and all-CPU drains, a CPU going off- and online, decay
/// ticks, compaction, merging turned off and on and an isolated pageblock, `validate()`
/// finds every frame once (no frame lost or doubled, every ownership bit on an allocated
/// order-0 head), and in the end every page is free again. The counter `free_unwritten`
/// shows the frees that took the bit; without the switch it stays 0.
#[test]
fn own_bitmap_keeps_every_frame_through_drains_offline_isolation_and_compaction() {
    assert!(Preset::Fast.config().own_bitmap);
    for (base, extra) in [
        ("fast", "own_bitmap=on"),
        ("linux-6.12", "own_bitmap=on"),
        ("patch7", "own_bitmap=on"),
        ("fast", "own_bitmap=off"),
    ] {
        let a = Allocator::new(&Layout::single(1 << 15, 2), with(base, extra)).unwrap();
        let mut held: Vec<Frame> = Vec::new();
        let mut seed = 11u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        let pages = |v: &[Frame]| v.iter().map(|f| f.pages()).sum::<u64>();
        for step in 0..30_000u32 {
            let r = rnd();
            if r % 5 < 3 || held.is_empty() {
                let order = [0u8, 0, 0, 0, 0, 1, 2, 3, 9][(r / 5 % 9) as usize];
                if let Ok(f) = a.alloc_on((r / 45 % 2) as usize, order, Gfp::USER, None) {
                    held.push(f);
                }
            } else {
                let f = held.swap_remove((r / 5) as usize % held.len());
                a.free_on((r / 7 % 2) as usize, f).unwrap();
            }
            match step % 3000 {
                300 => a.drain_cpu(1),
                900 => a.drain_all_pages(),
                1500 => {
                    a.cpu_offline(1).unwrap();
                    a.cpu_online(1).unwrap();
                }
                2100 => {
                    a.tick_all();
                    a.compact();
                }
                2400 => a.merge_skip_disable(true),
                2700 => a.merge_skip_disable(false),
                _ => {}
            }
            if step % 1000 == 999 {
                let t = a.validate().unwrap();
                assert_eq!(t.allocated, pages(&held), "{base},{extra} step {step}");
            }
        }
        // An isolated pageblock: its cached frames drain to the isolate list, frees of
        // its frames go to the zone.
        let pfn = held.iter().find(|f| f.order == 0).unwrap().pfn;
        let was = a.pageblock_type(pfn).unwrap();
        a.set_pageblock_type(pfn, MigrateType::Isolate).unwrap();
        a.drain_all_pages();
        let (inside, outside): (Vec<Frame>, Vec<Frame>) =
            held.drain(..).partition(|f| f.pfn.0 >> 9 == pfn.0 >> 9);
        free_all(&a, 0, &inside);
        let t = a.validate().unwrap();
        assert_eq!(t.allocated, pages(&outside), "{base},{extra}");
        a.set_pageblock_type(pfn, was).unwrap();
        free_all(&a, 1, &outside);
        a.drain_all_pages();
        let t = a.validate().unwrap();
        assert_eq!((t.allocated, t.pcp), (0, 0), "{base},{extra}");
        assert_eq!(t.buddy, a.managed_pages(), "{base},{extra}");
        let c = a.counters();
        eprintln!(
            "{base},{extra}: pgfree {}, free_unwritten {}, pcp_drain {}",
            c.pgfree, c.free_unwritten, c.pcp_drain
        );
        assert_eq!(
            c.free_unwritten > 0,
            extra == "own_bitmap=on",
            "{base},{extra}: {} order-0 frees unwritten",
            c.free_unwritten
        );
        // Every order-0 free took the bit (a free to the zone, with the pageblock
        // isolated or the pageset busy, is not counted).
        assert!(c.free_unwritten <= c.pgfree, "{base},{extra}");
    }
}
