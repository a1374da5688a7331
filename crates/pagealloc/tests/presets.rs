//! Each step of the Linux PCP series shows its effect through the allocator's counters
//! and pageset state (issue: "for each preset step, a test that shows its effect").

mod common;
use common::*;
use pagealloc::*;

const GIB: u64 = 1 << 18; // pages

/// One CPU, one 1 GiB zone (batch 63).
fn one_cpu(c: Config) -> Allocator {
    manual(&Layout::single(GIB, 1), c).0
}

fn alloc_n(a: &Allocator, order: u8, n: usize) -> Vec<Frame> {
    (0..n)
        .map(|_| a.alloc_on(0, order, Gfp::USER, None).unwrap())
        .collect()
}

/// page-table-like exit: many order-0 frees then one order-1 free (the PGD).
fn exit_sequence(c: Config) -> (u64, i32, i32) {
    let a = one_cpu(c);
    let pgd = a.alloc_on(0, 1, Gfp::KERNEL, None).unwrap();
    // enough frees to pass `high` at least once (the exit of a big process)
    let n = a.pcp_info(0, 0).unwrap().high as usize + 3000;
    let pages = alloc_n(&a, 0, n);
    for f in pages {
        a.free_on(0, f).unwrap();
    }
    let before = a.pcp_info(0, 0).unwrap().count;
    a.free_on(0, pgd).unwrap();
    let after = a.pcp_info(0, 0).unwrap().count;
    a.validate().unwrap();
    (a.counters().free_high, before, after)
}

#[test]
fn patch1_process_exit_does_not_drain() {
    let (fh, before, after) = exit_sequence(cfg("base"));
    assert_eq!(fh, 1, "base: the single order-1 free triggers free_high");
    assert_eq!(after, 0, "base drains the whole pcp ({before} pages)");
    let (fh, before, after) = exit_sequence(cfg("patch1"));
    assert_eq!(fh, 0, "patch1: two consecutive order 1-3 frees are needed");
    assert_eq!(after, before + 2, "the pcp keeps its pages");
}

/// Free order-1 blocks until a free triggers free_high; the pcp count and high just
/// before and after that free.
fn first_free_high(a: &Allocator, frames: &[Frame]) -> Option<(PcpInfo, PcpInfo)> {
    for f in frames {
        let before = a.pcp_info(0, 0).unwrap();
        let fh = a.counters().free_high;
        a.free_on(0, *f).unwrap();
        if a.counters().free_high > fh {
            return Some((before, a.pcp_info(0, 0).unwrap()));
        }
    }
    None
}

#[test]
fn patch3_free_high_drains_at_most_batch_shl_scale_and_lowers_high() {
    let mk = |p: &str| {
        let mut c = cfg(p);
        c.fixed_high = Some(8000);
        c
    };
    // base: the free_high drain empties the pcp
    let a = one_cpu(mk("base"));
    let v = alloc_n(&a, 1, 6000);
    let (b, after) = first_free_high(&a, &v).expect("free_high happens");
    assert!(b.count + 2 > 2016, "enough cached to tell: {}", b.count);
    assert_eq!(after.count, 0, "base drains everything");
    // patch3: at most batch << 5 = 2016 pages
    let a = one_cpu(mk("patch3"));
    let v = alloc_n(&a, 1, 6000);
    let (b, after) = first_free_high(&a, &v).expect("free_high happens");
    assert_eq!(b.batch, 63);
    assert!(b.count + 2 > 2016);
    assert_eq!(b.count + 2 - after.count, 2016, "one bounded drain");
    // with auto-tuning the same drain lowers high by batch << SCALE
    let a = one_cpu(cfg("patch10"));
    // grow high first by refilling a lot
    let warm = alloc_n(&a, 0, 20000);
    for f in warm {
        a.free_on(0, f).unwrap();
    }
    let v = alloc_n(&a, 1, 3000);
    let (b, after) = first_free_high(&a, &v).expect("free_high happens");
    assert!(b.high > b.high_min + 2016, "high grown: {b:?}");
    assert_eq!(
        after.high,
        b.high - 2016,
        "free_high lowers high by batch << 5"
    );
    a.validate().unwrap();
}

/// Page counts of successive refills while allocating order-0 pages without freeing.
fn refill_sizes(c: Config, n: usize) -> (Vec<u64>, Allocator) {
    let a = one_cpu(c);
    let mut sizes = Vec::new();
    let mut last = a.counters();
    let mut keep = Vec::new();
    for _ in 0..n {
        keep.push(a.alloc_on(0, 0, Gfp::USER, None).unwrap());
        let c = a.counters();
        if c.pcp_refill > last.pcp_refill {
            sizes.push(c.pcp_refill_pages - last.pcp_refill_pages);
        }
        last = c;
    }
    for f in keep {
        a.free_on(0, f).unwrap();
    }
    (sizes, a)
}

#[test]
fn patch5_refills_grow_up_to_the_scale_cap() {
    let mut c = cfg("patch3");
    c.high_fraction = 8; // a large fixed high, so only the refill rule limits
    let (s, _) = refill_sizes(c, 6000);
    assert!(s.iter().all(|&n| n == 63), "patch3: constant batch {s:?}");
    let mut c = cfg("patch5");
    c.high_fraction = 8;
    let (s, a) = refill_sizes(c.clone(), 8000);
    assert_eq!(s[..7], [63, 126, 252, 504, 1008, 2016, 2016], "{s:?}");
    a.validate().unwrap();
    c.batch_scale_max = 2;
    let (s, _) = refill_sizes(c, 3000);
    assert_eq!(s[..5], [63, 126, 252, 252, 252]);
}

#[test]
fn patch7_high_grows_with_refills_and_decays_when_idle() {
    let a = one_cpu(cfg("patch7"));
    let p0 = a.pcp_info(0, 0).unwrap();
    assert!(p0.high_min < p0.high_max);
    assert_eq!(p0.high, p0.high_min);
    let v = alloc_n(&a, 0, 30000);
    let grown = a.pcp_info(0, 0).unwrap().high;
    assert!(
        grown > p0.high_min * 4,
        "a CPU that keeps refilling grows high: {grown}"
    );
    assert!(grown <= p0.high_max);
    for f in v {
        a.free_on(0, f).unwrap();
    }
    assert!(
        a.pcp_info(0, 0).unwrap().count > p0.high_min,
        "pages cached above high_min"
    );
    let mut ticks = 0;
    while a.pcp_info(0, 0).unwrap().high > p0.high_min {
        a.tick(0);
        ticks += 1;
        assert!(ticks < 60);
    }
    let p = a.pcp_info(0, 0).unwrap();
    assert_eq!(p.high, p.high_min, "decayed to high_min in {ticks} ticks");
    assert!(p.count <= p.high);
    assert!(a.counters().decay_drain > 0);
    // base: fixed high, ticks change nothing
    let b = one_cpu(cfg("base"));
    let v = alloc_n(&b, 0, 30000);
    let p = b.pcp_info(0, 0).unwrap();
    assert_eq!(
        (p.high, p.high_min),
        (p.high_max, p.high_max),
        "base: fixed high"
    );
    for f in v {
        b.free_on(0, f).unwrap();
    }
    b.tick(0);
    assert_eq!(b.counters().decay_drain, 0);
}

/// Allocate until the zone is below its high watermark but above low, then free pages
/// one by one and report how `high` moved.
fn below_high_frees(c: Config) -> (PcpInfo, PcpInfo, bool) {
    let a = one_cpu(c);
    let z = a.zone_info(0).unwrap();
    let (low, high) = (z.wmark[1], z.wmark[2]);
    let mut v = Vec::new();
    // grow high first while healthy
    v.extend(alloc_n(&a, 0, 20000));
    while a.nr_free_pages() > (low + high) / 2 {
        v.push(a.alloc_on(0, 0, Gfp::USER, None).unwrap());
    }
    let below_flag = a.zone_info(0).unwrap().below_high;
    let before = a.pcp_info(0, 0).unwrap();
    for f in v.drain(..300) {
        a.free_on(0, f).unwrap();
    }
    let after = a.pcp_info(0, 0).unwrap();
    for f in v {
        a.free_on(0, f).unwrap();
    }
    a.validate().unwrap();
    (before, after, below_flag)
}

#[test]
fn patch9_high_cut_only_below_the_high_watermark() {
    let (b, a9, flag) = below_high_frees(cfg("patch9"));
    assert!(flag, "BELOW_HIGH set on the allocation path");
    assert!(
        a9.high < b.high,
        "patch9 cuts high below the high watermark: {b:?} -> {a9:?}"
    );
    let (b7, a7, flag7) = below_high_frees(cfg("patch7"));
    assert!(!flag7, "patch7 has no BELOW_HIGH");
    assert!(a7.high >= b7.high, "patch7 does not cut: {b7:?} -> {a7:?}");
    // above the high watermark patch9 does not cut either: frees only raise high
    let a = one_cpu(cfg("patch9"));
    let v = alloc_n(&a, 0, 5000);
    assert!(!a.zone_info(0).unwrap().below_high);
    let h0 = a.pcp_info(0, 0).unwrap().high;
    for f in v {
        a.free_on(0, f).unwrap();
    }
    assert!(a.pcp_info(0, 0).unwrap().high >= h0);
}

#[test]
fn patch10_free_count_detects_consecutive_high_order_frees_sooner() {
    // A fresh pcp freeing order-1 blocks it did not allocate (a network receiver): with
    // free_count, free_high fires once ~batch pages were freed; with free_factor it must
    // first drain normally at count >= high.
    let run = |p: &str| {
        let a = one_cpu(cfg(p));
        // allocate on the zone directly (pcp bypassed by a THISNODE-free path is not
        // available, so allocate and hand over: allocate then drain the pcp)
        let v = alloc_n(&a, 1, 2000);
        a.drain_cpu(0);
        let mut n = 0;
        for f in &v {
            n += 1;
            let fh = a.counters().free_high;
            a.free_on(0, *f).unwrap();
            if a.counters().free_high > fh {
                break;
            }
        }
        for f in v.iter().skip(n) {
            a.free_on(0, *f).unwrap();
        }
        a.validate().unwrap();
        n
    };
    let n10 = run("patch10");
    let n9 = run("patch9");
    assert!(
        n10 <= 40,
        "patch10 detects after about batch pages: {n10} frees"
    );
    assert!(
        n9 > 2 * n10,
        "patch9 needs a normal drain first: {n9} frees"
    );
}

/// `fast` (not a kernel step): the same traffic as `linux-6.12` skips merging on the
/// drains and cuts clusters on the refills, touching fewer frames' metadata under the
/// zone lock, and a high-order request after the traffic still succeeds (merged on
/// demand).
#[test]
fn fast_skips_merging_and_cuts_clusters_and_still_serves_high_orders() {
    let run = |c: Config| {
        let a = one_cpu(c);
        for _ in 0..4 {
            let pages = alloc_n(&a, 0, 20_000);
            for f in pages {
                a.free_on(0, f).unwrap();
            }
        }
        // Everything free again: an order-9 block must be found.
        let big = a.alloc_on(0, 9, Gfp::USER, None).unwrap();
        a.free_on(0, big).unwrap();
        a.drain_cpu(0);
        a.validate().unwrap();
        a.counters()
    };
    // A small fixed `high`: every round drains and refills through the zone.
    let linux = run(cfg("linux-6.12,fixed_high=256"));
    let fast = run(cfg("fast,fixed_high=256"));
    assert_eq!((linux.merge_skipped, linux.cluster_cut), (0, 0));
    assert!(fast.merge_skipped > 0, "{fast:?}");
    assert!(fast.cluster_cut > 0, "{fast:?}");
    assert_eq!(fast.pgalloc, linux.pgalloc);
    assert!(
        fast.refill_meta_touched * 5 < linux.refill_meta_touched * 3,
        "refills touch fewer frames (< 60 %): {} vs {}",
        fast.refill_meta_touched,
        linux.refill_meta_touched
    );
}
