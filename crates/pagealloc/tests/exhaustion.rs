//! Exhaustion: allocating until memory runs out fails cleanly with OutOfMemory at every
//! order, high-priority atomic requests still succeed within the reserve the watermarks
//! keep (and stop before it is gone), and freeing everything returns the allocator to
//! its initial state (validate(), free pages, free-area shape, counters).

mod common;
use common::*;
use pagealloc::*;

const PAGES: u64 = 1 << 14; // 64 MiB
const CONFIGS: [&str; 3] = ["base", "patch7", "linux-6.12"];

fn zone_shape(a: &Allocator) -> (u64, [u64; 11]) {
    let z = a.zone_info(0).unwrap();
    (z.free, z.nr_free)
}

/// Allocate `order` blocks with `gfp`, alternating CPUs, until the allocator refuses;
/// the refusal must be OutOfMemory.
fn exhaust(a: &Allocator, order: u8, gfp: Gfp, out: &mut Vec<Frame>) -> usize {
    let mut n = 0;
    loop {
        match a.alloc_on(n % 2, order, gfp, None) {
            Ok(f) => {
                assert_eq!(f.order, order);
                out.push(f);
                n += 1;
            }
            Err(e) => {
                assert_eq!(e, AllocError::OutOfMemory, "order {order} {gfp:?}");
                return n;
            }
        }
        assert!(n as u64 <= PAGES >> order, "handed out more than exists");
    }
}

#[test]
fn every_order_exhausts_cleanly_and_frees_back_to_the_initial_state() {
    for config in CONFIGS {
        for order in 0..=MAX_ORDER {
            let (a, _) = manual(&Layout::single(PAGES, 2), cfg(config));
            let initial = zone_shape(&a);
            let managed = a.managed_pages();
            let min = a.zone_info(0).unwrap().wmark[0];
            let mut frames = Vec::new();
            let n = exhaust(&a, order, Gfp::USER, &mut frames);
            assert!(n > 0, "{config} o{order}: nothing allocated");
            // Same-order allocations never fragment below `order`, and the slow path
            // drained every pageset before failing: what is left is the min reserve.
            let left = a.nr_free_pages() + a.nr_pcp_pages();
            assert!(
                left <= min + (1 << order),
                "{config} o{order}: failed with {left} pages left, min mark {min}"
            );
            let t = a.validate().unwrap();
            assert_eq!(t.allocated, (n as u64) << order);
            // A second attempt fails the same way, and a bulk request returns what it
            // got (nothing) as an OutOfMemory, not another error.
            assert_eq!(
                a.alloc_on(0, order, Gfp::USER, None),
                Err(AllocError::OutOfMemory)
            );
            let mut none = Vec::new();
            assert_eq!(
                a.alloc_bulk_on(1, order, Gfp::USER, None, 8, &mut none),
                Err(AllocError::OutOfMemory)
            );
            assert!(none.is_empty());
            assert!(a.counters().alloc_fail >= 2);
            // The modelled kswapd is woken once free pages fall below the low mark.
            let z = a.zone_info(0).unwrap();
            assert!(
                z.reclaim_active || z.free >= z.wmark[1],
                "{config} o{order}: kswapd not woken: {z:?}, {} pcp",
                a.nr_pcp_pages()
            );

            // Free everything, half on the other CPU.
            for (i, f) in frames.into_iter().enumerate() {
                a.free_on(i % 2, f).unwrap();
            }
            a.drain_all_pages();
            let t = a.validate().unwrap();
            assert_eq!(
                (t.allocated, t.pcp, t.buddy),
                (0, 0, managed),
                "{config} o{order}"
            );
            assert_eq!(a.nr_free_pages(), managed);
            assert_eq!(
                zone_shape(&a),
                initial,
                "{config} o{order}: free areas differ"
            );
            assert!(
                !a.zone_info(0).unwrap().reclaim_active,
                "kswapd done above high"
            );
            let c = a.counters();
            assert_eq!(c.pgalloc, c.pgfree, "{config} o{order}");
            assert_eq!(c.pgalloc, (n as u64) << order);
        }
    }
}

#[test]
fn atomic_requests_use_the_reserve_and_stop_short_of_it() {
    for config in CONFIGS {
        for order in [0u8, 1, 2, 3] {
            let (a, _) = manual(&Layout::single(PAGES, 2), cfg(config));
            let initial = zone_shape(&a);
            let min = a.zone_info(0).unwrap().wmark[0];
            let mut frames = Vec::new();
            exhaust(&a, order, Gfp::USER, &mut frames);
            let before = a.nr_free_pages() + a.nr_pcp_pages();
            // GFP_ATOMIC (HIGH + non-blocking) may go down to 3/8 of the min mark.
            let k = exhaust(&a, order, Gfp::ATOMIC_KERNEL, &mut frames);
            assert!(
                k > 0,
                "{config} o{order}: atomic failed with {before} free, min {min}"
            );
            // Pages handed out never take the zone below the atomic mark (pages a
            // refill moved to a pageset may); and atomics stop only once the buddy
            // lists are down to that mark (the other CPU's cached pages are not theirs).
            let mark = (min - min / 2) - (min - min / 2) / 4;
            let (buddy, pcp) = (a.nr_free_pages(), a.nr_pcp_pages());
            assert!(
                buddy + pcp >= mark,
                "{config} o{order}: atomics dug below their reserve: {buddy}+{pcp} left, mark {mark}"
            );
            assert!(
                buddy < mark + (1 << order),
                "{config} o{order}: atomics stopped early: {buddy} free, mark {mark}"
            );
            // Ordinary requests still fail; the allocator is intact.
            assert_eq!(
                a.alloc_on(0, 0, Gfp::KERNEL, None),
                Err(AllocError::OutOfMemory)
            );
            a.validate().unwrap();
            for f in frames {
                a.free_on(1, f).unwrap();
            }
            a.drain_all_pages();
            let t = a.validate().unwrap();
            assert_eq!((t.allocated, t.pcp), (0, 0));
            assert_eq!(a.nr_free_pages(), a.managed_pages());
            // High-order atomics may have reserved a HIGHATOMIC pageblock; its pages
            // are free and merged again, so the order counts are those of the start.
            assert_eq!(zone_shape(&a), initial, "{config} o{order}");
            let c = a.counters();
            assert_eq!(c.pgalloc, c.pgfree);
        }
    }
}

#[test]
fn exhausting_one_node_with_thisnode_leaves_the_other_alone() {
    let (a, _) = manual(&Layout::numa(2, PAGES / 2, 1), cfg("linux-6.12"));
    let node1 = a.node_zones(1)[0];
    let before = a.zone_info(node1).unwrap().free;
    let mut frames = Vec::new();
    loop {
        match a.alloc_on(0, 0, Gfp::USER | Gfp::THISNODE, None) {
            Ok(f) => {
                assert_eq!(a.zone_of_pfn(f.pfn), Some(a.node_zones(0)[0]));
                frames.push(f);
            }
            Err(e) => {
                assert_eq!(e, AllocError::OutOfMemory);
                break;
            }
        }
    }
    assert_eq!(
        a.zone_info(node1).unwrap().free,
        before,
        "THISNODE fell back"
    );
    // Without THISNODE the request falls back to node 1.
    let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    assert_eq!(a.zone_of_pfn(f.pfn), Some(node1));
    frames.push(f);
    for f in frames {
        a.free_on(1, f).unwrap();
    }
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    a.validate().unwrap();
}
