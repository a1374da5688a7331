//! The `linux-6.18` preset's switches (docs/mechanisms.md §11), each shown through the
//! allocator's own counters and state beside `linux-6.12`, with the switch alone on top
//! of `linux-6.12` where it stands alone.

mod common;
use common::*;
use pagealloc::*;

const GIB: u64 = 1 << 18; // pages

#[test]
fn preset_is_6_12_plus_the_five_switches() {
    let c612 = Preset::Linux612.config();
    let c618 = Preset::Linux618.config();
    assert_eq!(Preset::SERIES.last(), Some(&Preset::Linux618));
    assert_eq!("6.18".parse::<Preset>().unwrap(), Preset::Linux618);
    let on = Config {
        preset: Preset::Linux618,
        fallback_claim_first: true,
        rmqueue_mode: true,
        free_high_min_count: true,
        decay_batched: true,
        nofragment: true,
        ..c612.clone()
    };
    assert_eq!(c618, on);
    assert_eq!(c618.to_string(), "linux-6.18");
    // The later switches stay off in every earlier preset and in `fast` (6.12-based).
    for p in Preset::ALL {
        let c = p.config();
        let later = c.fallback_claim_first || c.rmqueue_mode || c.free_high_min_count;
        let later = later || c.decay_batched || c.nofragment;
        assert_eq!(later, p == Preset::Linux618, "{p}");
    }
    assert_eq!(Config::default(), c612);
}

/// Free order-1 blocks on CPU 0's pageset (1 GiB, 8 CPUs: batch 63, high_min 880) until a free
/// sets off free_high; the pageset just before that free.
fn first_free_high(c: Config) -> (usize, PcpInfo) {
    let a = manual(&Layout::single(GIB, 8), c).0;
    let frames: Vec<Frame> = (0..400)
        .map(|_| a.alloc_on(0, 1, Gfp::USER, None).unwrap())
        .collect();
    for (i, f) in frames.iter().enumerate() {
        let before = a.pcp_info(0, 0).unwrap();
        a.free_on(0, *f).unwrap();
        if a.counters().free_high > 0 {
            a.validate().unwrap();
            return (i, before);
        }
    }
    panic!("no free_high in 400 order-1 frees");
}

#[test]
fn free_high_waits_for_half_of_high_min_more() {
    // 6.12: free_count >= batch; 6.16 (c544a952ba61): >= batch + high_min / 2.
    let (n612, st612) = first_free_high(cfg("linux-6.12"));
    let (n618, st618) = first_free_high(cfg("linux-6.18"));
    let (alone, st_alone) = first_free_high(cfg("linux-6.12,free_high_min_count=on"));
    assert_eq!(
        (alone, st_alone),
        (n618, st618),
        "the switch alone is the preset's"
    );
    assert!(st612.free_count >= st612.batch);
    assert!(st612.free_count < st612.batch + st612.high_min / 2);
    let need = st618.batch + st618.high_min / 2;
    assert!(st618.free_count >= need, "{st618:?}");
    // Each order-1 free raises free_count by 2: the free before fell short.
    assert!(st618.free_count - 2 < need);
    assert!(
        n618 > n612 + 10,
        "6.12 drained after {n612} frees, 6.18 after {n618}"
    );
}

/// Fill one CPU's pageset well above `high_min`, then tick it idle: for each tick, the
/// pages the decay returned and the drains (zone-lock trips) it took.
fn decay_ticks(c: Config) -> Vec<(i32, u64, u64, i32)> {
    let a = manual(&Layout::single(GIB, 8), c).0;
    let mut frames = Vec::new();
    a.alloc_bulk_on(0, 0, Gfp::USER, None, 6000, &mut frames)
        .unwrap();
    a.free_bulk_on(0, &frames).unwrap();
    let mut out = Vec::new();
    for _ in 0..40 {
        let (p, k) = (a.pcp_info(0, 0).unwrap(), a.counters());
        a.tick(0);
        let (q, l) = (a.pcp_info(0, 0).unwrap(), a.counters());
        assert_eq!(l.pcp_drain - k.pcp_drain, l.decay_drain - k.decay_drain);
        assert_eq!(l.zone_lock - k.zone_lock, l.decay_drain - k.decay_drain);
        out.push((
            p.count - q.count,
            l.decay_drain - k.decay_drain,
            l.pcp_drain_pages - k.pcp_drain_pages,
            q.batch,
        ));
    }
    a.validate().unwrap();
    out
}

#[test]
fn decay_drains_in_batches() {
    let t612 = decay_ticks(cfg("linux-6.12"));
    let t618 = decay_ticks(cfg("linux-6.18"));
    let alone = decay_ticks(cfg("linux-6.12,decay_batched=on"));
    assert_eq!(alone, t618, "the switch alone is the preset's");
    let mut big = 0;
    for (i, (a, b)) in t612.iter().zip(&t618).enumerate() {
        // The same pages leave on every tick (the amount is fixed before the first
        // chunk) ...
        assert_eq!((a.0, a.2), (b.0, b.2), "tick {i}");
        assert_eq!(a.0 as u64, a.2);
        // ... 6.12 in one zone-lock trip, 6.18 in one per batch.
        assert_eq!(a.1, u64::from(a.0 > 0), "tick {i}");
        let batch = b.3;
        assert_eq!(b.1, (b.0 as u64).div_ceil(batch as u64), "tick {i}");
        if b.0 > batch {
            big += 1;
        }
    }
    assert!(big >= 3, "several ticks return more than a batch: {t618:?}");
    let trips = |t: &[(i32, u64, u64, i32)]| t.iter().map(|x| x.1).sum::<u64>();
    assert!(
        trips(&t618) > 3 * trips(&t612),
        "{} vs {}",
        trips(&t618),
        trips(&t612)
    );
}

/// `c` for a scenario whose counts are exact: no reserve (`min_free_kbytes` 0), the
/// lowest watermark scale, THP off.
fn exact(c: Config) -> Config {
    Config {
        min_free_kbytes: Some(0),
        watermark_scale_factor: 1,
        thp: false,
        ..c
    }
}

/// A 64 MiB zone (32 pageblocks, all movable, batch 3) filled with movable order-0
/// pages, then two pageblocks given back in part:
/// - `P1`: one aligned order-6 block free (64 pages), the rest allocated movable: an
///   unmovable request cannot claim it (64 < 256 free, no unmovable pages);
/// - `P2`: every other order-3 block free (256 pages, none larger): claimable.
///
/// Then one unmovable order-0 allocation (a refill of `batch` pages).
fn fallback_scenario(c: Config) -> (Counters, ZoneInfo, ZoneInfo) {
    let c = exact(c);
    let pb = 512u64;
    let (p1, p2) = (5 * pb, 10 * pb);
    let (a, keep, given) = filled_then_given_back(c, |p| {
        (p1..p1 + 64).contains(&p) || ((p2..p2 + pb).contains(&p) && (p - p2) / 8 % 2 == 0)
    });
    assert_eq!(given, 64 + 256);
    let before = a.zone_info(0).unwrap();
    assert_eq!(before.nr_free[6], 1, "{before:?}");
    assert!(before.nr_free[3] >= 32);
    let (d, after) = one_unmovable_refill(&a, keep);
    (d, before, after)
}

/// A 16384-page zone (`c`) filled with movable order-0 pages, then the pages whose PFN
/// `give_back` picks freed and CPU 0's pageset drained to the buddy: the allocator, the
/// pages still held, how many were given back.
fn filled_then_given_back(
    c: Config,
    give_back: impl Fn(u64) -> bool,
) -> (Allocator, Vec<Frame>, usize) {
    let a = manual(&Layout::single(16384, 1), c).0;
    let mut frames = Vec::new();
    while let Ok(f) = a.alloc_on(0, 0, Gfp::USER, None) {
        frames.push(f);
    }
    let (back, keep): (Vec<Frame>, Vec<Frame>) = frames.iter().partition(|f| give_back(f.pfn.0));
    for f in &back {
        a.free_on(0, *f).unwrap();
    }
    a.drain_cpu(0);
    (a, keep, back.len())
}

/// One unmovable order-0 allocation on CPU 0 (a refill): the counters it moved and the
/// zone after it; then it and `keep` freed and `validate()`.
fn one_unmovable_refill(a: &Allocator, keep: Vec<Frame>) -> (Counters, ZoneInfo) {
    let k = a.counters();
    let u = a.alloc_on(0, 0, Gfp::KERNEL, None).unwrap();
    let after = a.zone_info(0).unwrap();
    let l = a.counters();
    a.free_on(0, u).unwrap();
    for f in keep {
        a.free_on(0, f).unwrap();
    }
    a.validate().unwrap();
    (l.since(&k), after)
}

#[test]
fn fallback_claims_before_it_steals() {
    // 6.12: the largest fallback block (P1's order 6) is split in place, its pageblock
    // unclaimable; P2 is never looked at.
    let (d, before, after) = fallback_scenario(cfg("linux-6.12"));
    assert_eq!(d.pageblock_claim, 0);
    assert!(d.fallback >= 1);
    assert_eq!(after.nr_free[6], 0, "P1's block was broken up");
    assert!(before.nr_free[6] == 1);
    // 6.15 (c2f6ea38fc1b): claiming is tried at every order from the top; P1 fails,
    // P2 (order 3, half free) is claimed and the refill is served from it.
    for c in ["linux-6.18", "linux-6.12,fallback_claim_first=on"] {
        let (d, before, after) = fallback_scenario(cfg(c));
        assert_eq!(d.pageblock_claim, 1, "{c}");
        assert_eq!(d.fallback, 1, "{c}: one fallback, then the own lists");
        assert_eq!(after.nr_free[6], 1, "{c}: P1's block is left whole");
        assert!(after.nr_free[3] < before.nr_free[3], "{c}");
    }
}

/// A zone with nothing to claim: only order-0 movable blocks, in a pageblock that is
/// mostly allocated. An unmovable refill of 15 blocks steals every one; without
/// `rmqueue_mode` each `__rmqueue` first tries to claim again, scanning the pageblock
/// under the zone lock; with it only the first does.
fn steal_scenario(c: Config) -> (Counters, ZoneInfo) {
    let c = Config {
        fixed_batch: Some(15),
        ..exact(c)
    };
    let p1 = 5 * 512u64;
    // 32 free order-0 pages spread over P1 (every 16th page): nothing above order 0.
    let (a, keep, _) =
        filled_then_given_back(c, |p| (p1..p1 + 512).contains(&p) && (p - p1) % 16 == 0);
    one_unmovable_refill(&a, keep)
}

#[test]
fn refill_remembers_the_steal_mode() {
    let (without, z0) = steal_scenario(cfg("linux-6.12,fallback_claim_first=on"));
    // Without `nofragment`: on this one-zone node it makes the first refill attempt find
    // nothing and the walk's retry try again, and `nr_pcp_alloc` runs (and raises
    // `alloc_factor`) once per attempt as in the kernel, so the refill would be larger.
    let (with, z1) = steal_scenario(cfg("linux-6.18,nofragment=off"));
    // The same blocks leave (stealing order 0 from P1 in both) ...
    assert_eq!(z0.nr_free, z1.nr_free);
    assert_eq!(without.pcp_refill_pages, with.pcp_refill_pages);
    assert_eq!(without.fallback, with.fallback);
    assert!(with.fallback >= 2, "{with:?}");
    assert_eq!(with.pageblock_claim + without.pageblock_claim, 0);
    // ... but only the refill's first block tried to claim first (one pageblock scan
    // of 512 frames' metadata under the zone lock), not all 15.
    assert!(
        with.zone_lock_meta * 4 < without.zone_lock_meta,
        "metadata lines under the zone lock: {} with the mode, {} without",
        with.zone_lock_meta,
        without.zone_lock_meta
    );
}

/// DMA32 (zone 0, 8192 pages) and Normal (zone 1, 8192 pages) on one node, one CPU. Normal
/// is filled with movable pages and every other one freed: over 4096 free movable pages,
/// no unmovable one, no free block of a pageblock's order. Then one unmovable page: from
/// which zone, what the fallback counters say, and Normal's free lists after it.
fn nofragment_scenario(c: Config, with_dma32: bool) -> (usize, Counters, ZoneInfo, ZoneInfo) {
    let c = Config {
        fixed_batch: Some(15),
        ..exact(c)
    };
    let normal = ZoneLayout::new(ZoneKind::Normal, 0x10_0000, 0x2000);
    let zones = if with_dma32 {
        vec![ZoneLayout::new(ZoneKind::Dma32, 0x1000, 0x2000), normal]
    } else {
        vec![normal]
    };
    let layout = Layout {
        nodes: vec![NodeLayout {
            zones,
            distance: vec![],
        }],
        cpus: vec![
            CpuLayout {
                node: 0,
                llc_slice_bytes: 2 << 20,
                online: true,
            };
            1
        ],
    };
    let nz = a_zone(with_dma32);
    let a = manual(&layout, c).0;
    let mut held = Vec::new();
    while let Ok(f) = a.alloc_on(0, 0, Gfp::USER, None) {
        let normal = a.zone_of_pfn(f.pfn) == Some(nz);
        held.push(f);
        if !normal {
            break;
        }
    }
    let (back, keep): (Vec<Frame>, Vec<Frame>) = held
        .iter()
        .partition(|f| a.zone_of_pfn(f.pfn) == Some(nz) && f.pfn.0 % 2 == 0);
    for f in &back {
        a.free_on(0, *f).unwrap();
    }
    a.drain_cpu(0);
    let before = a.zone_info(nz).unwrap();
    // The watermarks keep a few pages unallocated, which merge with freed neighbours
    // into small blocks (and the last pageset refill comes back); no pageblock is free.
    assert!(before.free >= 4096, "{before:?}");
    assert_eq!(before.nr_free[9..].iter().sum::<u64>(), 0, "{before:?}");
    let k = a.counters();
    let u = a.alloc_on(0, 0, Gfp::KERNEL, None).unwrap();
    let d = a.counters().since(&k);
    let zone = a.zone_of_pfn(u.pfn).unwrap();
    let after = a.zone_info(nz).unwrap();
    a.free_on(0, u).unwrap();
    for f in keep {
        a.free_on(0, f).unwrap();
    }
    a.validate().unwrap();
    (zone, d, before, after)
}

/// The Normal zone's index in [`nofragment_scenario`]'s layout.
fn a_zone(with_dma32: bool) -> usize {
    usize::from(with_dma32)
}

#[test]
fn nofragment_sends_an_unmovable_refill_to_dma32() {
    // Without ALLOC_NOFRAGMENT the refill falls back inside Normal: it claims a pageblock
    // of free movable order-0 pages (half of it is free) for unmovable.
    for c in ["linux-6.12", "linux-6.18,nofragment=off"] {
        let (zone, d, before, after) = nofragment_scenario(cfg(c), true);
        assert_eq!(zone, 1, "{c}: served by Normal");
        assert_eq!(d.zonelist_scanned, 0, "{c}: DMA32 not looked at");
        assert!(d.fallback >= 1 && d.pageblock_claim >= 1, "{c}: {d:?}");
        assert!(
            after.nr_free[0] < before.nr_free[0],
            "{c}: Normal's pages taken"
        );
    }
    // With it (6bb154504f8b): Normal has no free block of a pageblock's order, so no
    // fallback there; the walk moves on to DMA32, whose whole free order-10 block is
    // claimed (two pageblocks retagged, nothing mixed), and Normal is left as it was.
    for c in ["linux-6.18", "linux-6.12,nofragment=on"] {
        let (zone, d, before, after) = nofragment_scenario(cfg(c), true);
        assert_eq!(zone, 0, "{c}: served by DMA32");
        assert_eq!(d.zonelist_scanned, 1, "{c}: one zone past Normal");
        assert_eq!((d.fallback, d.pageblock_claim), (1, 1), "{c}");
        assert_eq!(after.nr_free, before.nr_free, "{c}: Normal untouched");
    }
    // On a node with Normal alone the flag is set too (the kernel assumes DMA32 on one
    // node): the walk finds nothing, walks again without it and fragments Normal.
    let (zone, d, before, after) = nofragment_scenario(cfg("linux-6.18"), false);
    assert_eq!(zone, 0);
    assert_eq!(d.zonelist_scanned, 1, "the retry's walk");
    assert!(d.fallback >= 1 && after.nr_free[0] < before.nr_free[0]);
    let (_, d, _, _) = nofragment_scenario(cfg("linux-6.18,nofragment=off"), false);
    assert_eq!(d.zonelist_scanned, 0);
}
