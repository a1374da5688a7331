//! `Allocator::seed_pageset`: a pageset started from a recorded state decides from that
//! state, seen through the allocator's own counters.

use pagealloc::{Allocator, Config, Gfp, Layout, MigrateType, PagesetSeed, SeedError, SeedList};

fn one_gib() -> Allocator {
    // 1 GiB, 2 CPUs: batch 63.
    Allocator::new(
        &Layout::single(262_144, 2),
        "linux-6.18".parse::<Config>().unwrap(),
    )
    .unwrap()
}

/// A seeded `high` is the limit a free drains at (`count >= high` after the free): with
/// `count = high - 2`, the second order-0 free drains (a batch: `free_count` is small),
/// the first does not.
#[test]
fn a_free_drains_at_the_seeded_high() {
    let a = one_gib();
    let p0 = a.pcp_info(0, 0).unwrap();
    let high = p0.high_min + 1000;
    let lists = [
        SeedList {
            order: 0,
            mt: MigrateType::Movable,
            blocks: (high - 2) as u32 - 20,
        },
        SeedList {
            order: 2,
            mt: MigrateType::Unmovable,
            blocks: 5,
        },
    ];
    let seed = PagesetSeed {
        high,
        lists: &lists,
        ..Default::default()
    };
    // Two frames taken before the seed (from CPU 1's lists, so CPU 0's are untouched).
    let f1 = a.alloc_on(1, 0, Gfp::USER, None).unwrap();
    let f2 = a.alloc_on(1, 0, Gfp::USER, None).unwrap();
    let p = a.seed_pageset(0, 0, &seed).unwrap();
    assert_eq!((p.count, p.high), (high - 2, high));
    assert_eq!((p.alloc_factor, p.free_count), (0, 0));
    a.validate().unwrap();
    a.reset_counters();
    a.free_on(0, f1).unwrap();
    assert_eq!(
        a.cpu_counters(0).unwrap().pcp_drain,
        0,
        "count below high: no drain yet"
    );
    a.free_on(0, f2).unwrap();
    let c = a.cpu_counters(0).unwrap();
    assert_eq!(c.pcp_drain, 1, "count reached high: the free drains");
    assert_eq!(c.pcp_drain_pages, p.batch as u64);
    a.validate().unwrap();
}

/// Without the seed, the same pages reached by allocating and freeing leave `high` where
/// the tuning put it; the seed's refill size follows the seeded `alloc_factor`, and an
/// empty list refills once, from the zone.
#[test]
fn the_seeded_alloc_factor_sizes_the_next_refill() {
    let a = one_gib();
    let p = a
        .seed_pageset(
            0,
            0,
            &PagesetSeed {
                high: 5000,
                lists: &[],
                alloc_factor: 3,
                free_count: 0,
            },
        )
        .unwrap();
    assert_eq!((p.count, p.high, p.alloc_factor), (0, 5000, 3));
    a.reset_counters();
    let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let c = a.cpu_counters(0).unwrap();
    assert_eq!(c.pcp_refill, 1);
    assert_eq!(c.pcp_refill_pages, 63 << 3, "batch << alloc_factor");
    a.free_on(0, f).unwrap();
    a.validate().unwrap();
}

/// A seed replaces what the pageset held (returned as `drain_pages_zone` returns it, one
/// drain), counts no refill, and a bad pageset or list is refused before anything
/// changes.
#[test]
fn seeds_replace_and_refuse() {
    let a = one_gib();
    let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap(); // CPU 0 caches a batch
    a.free_on(0, f).unwrap();
    a.reset_counters();
    let lists = [SeedList {
        order: 1,
        mt: MigrateType::Reclaimable,
        blocks: 10,
    }];
    let p = a
        .seed_pageset(
            0,
            0,
            &PagesetSeed {
                high: 1,
                lists: &lists,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(p.count, 20, "the old pages went back, the seed's came");
    assert_eq!(p.high, p.high_min, "high below high_min is clamped");
    let c = a.cpu_counters(0).unwrap();
    assert_eq!((c.pcp_refill, c.pcp_drain, c.pcp_drain_pages), (0, 1, 63));
    assert_eq!(a.nr_free_pages() + 20, a.managed_pages());
    let before = a.pcp_info(0, 0).unwrap();
    let bad = [SeedList {
        order: 5,
        mt: MigrateType::Movable,
        blocks: 1,
    }];
    let seed = PagesetSeed {
        high: 100,
        lists: &bad,
        ..Default::default()
    };
    assert_eq!(
        a.seed_pageset(0, 0, &seed),
        Err(SeedError::NotAPcpList {
            order: 5,
            mt: MigrateType::Movable
        })
    );
    assert!(matches!(
        a.seed_pageset(2, 0, &PagesetSeed::default()),
        Err(SeedError::NoSuchPageset { cpu: 2, zone: 0 })
    ));
    assert!(a.seed_pageset(0, 1, &PagesetSeed::default()).is_err());
    assert_eq!(a.pcp_info(0, 0).unwrap(), before);
    // A seed the zone cannot supply fills what it can; the books stay straight.
    let huge = [SeedList {
        order: 0,
        mt: MigrateType::Movable,
        blocks: 400_000,
    }];
    let p = a
        .seed_pageset(
            1,
            0,
            &PagesetSeed {
                high: 1000,
                lists: &huge,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(p.count > 200_000 && p.count < 262_144, "{p:?}");
    a.validate().unwrap();
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

/// DMA32 (zone 0) and Normal (zone 1), 8192 pages each, one CPU.
fn dma32_normal(cfg: &str) -> Allocator {
    use pagealloc::{CpuLayout, NodeLayout, ZoneKind, ZoneLayout};
    let layout = Layout {
        nodes: vec![NodeLayout {
            zones: vec![
                ZoneLayout::new(ZoneKind::Dma32, 0x1000, 0x2000),
                ZoneLayout::new(ZoneKind::Normal, 0x10_0000, 0x2000),
            ],
            distance: vec![],
        }],
        cpus: vec![CpuLayout {
            node: 0,
            llc_slice_bytes: 2 << 20,
            online: true,
        }],
    };
    let c = Config {
        min_free_kbytes: Some(0),
        watermark_scale_factor: 1,
        thp: false,
        fixed_batch: Some(15),
        ..cfg.parse::<Config>().unwrap()
    };
    Allocator::new(&layout, c).unwrap()
}

/// Free blocks of each type at each order in zone `z`, walked frame by frame.
fn shape(a: &Allocator, start: u64, end: u64) -> [[u64; 11]; 5] {
    let mut s = [[0u64; 11]; 5];
    let mut pfn = start;
    while pfn < end {
        match a.free_block_of(pagealloc::Pfn(pfn)) {
            Some((h, o, mt)) if h.0 == pfn => {
                s[mt as usize][o as usize] += 1;
                pfn += 1 << o;
            }
            _ => pfn += 1,
        }
    }
    s
}

/// A Normal zone seeded as the kernel's fragmented one (movable pages free in small
/// blocks, no unmovable page, no free pageblock) has exactly that shape; with
/// `ALLOC_NOFRAGMENT` (`linux-6.18`) an unmovable page then comes from DMA32, without
/// it from Normal by stealing from a small movable block; on the unshaped zone
/// `linux-6.18` claims one of Normal's free pageblocks.
#[test]
fn seeded_free_lists_send_an_unmovable_refill_to_dma32() {
    use pagealloc::{Frame, FreeListSeed, Pfn};
    let mut free = [[0u64; 11]; 3];
    free[MigrateType::Movable as usize][..4].copy_from_slice(&[300, 200, 100, 50]);
    free[MigrateType::Reclaimable as usize][0] = 40;
    let held = [(Frame::new(Pfn(0x10_0400), 3), MigrateType::Unmovable)];
    for (cfg, shaped, zone) in [
        ("linux-6.18", true, 0),
        ("linux-6.18,nofragment=off", true, 1),
        ("linux-6.18", false, 1),
    ] {
        let a = dma32_normal(cfg);
        if shaped {
            let s = a
                .seed_free_lists(1, &FreeListSeed { free, held: &held })
                .unwrap();
            let pages = 300 + 400 + 400 + 400 + 40;
            assert_eq!((s.free, s.held), (pages, 8));
            assert_eq!(s.free + s.held + s.held_back, 0x2000);
            let got = shape(&a, 0x10_0000, 0x10_2000);
            assert_eq!(got[MigrateType::Movable as usize][..4], [300, 200, 100, 50]);
            assert_eq!(got[MigrateType::Reclaimable as usize][0], 40);
            assert_eq!(got.iter().flatten().sum::<u64>(), 690, "{got:?}");
            assert_eq!(a.zone_info(1).unwrap().free, pages);
            a.validate().unwrap();
        }
        a.reset_counters();
        let u = a.alloc_on(0, 0, Gfp::KERNEL, None).unwrap();
        let c = a.counters();
        assert_eq!(a.zone_of_pfn(u.pfn), Some(zone), "{cfg} shaped {shaped}");
        assert_eq!(c.pcp_refill, 1, "{cfg}");
        assert_eq!(
            c.fallback, 1,
            "{cfg}: no unmovable block anywhere, one fallback"
        );
        a.free_on(0, u).unwrap();
        if shaped {
            a.free_on(0, held[0].0).unwrap();
        }
        a.validate().unwrap();
    }
}

/// A held block that is not free, or more free blocks than the zone can place, is
/// refused before anything changed.
#[test]
fn free_list_seeds_refuse_before_changing() {
    use pagealloc::{Frame, FreeListSeed, Pfn};
    let a = dma32_normal("linux-6.18");
    let f = a.alloc_on(0, 2, Gfp::USER, None).unwrap();
    let before = (a.zone_info(0).unwrap(), a.zone_info(1).unwrap());
    let held = [(f, MigrateType::Movable)];
    assert_eq!(
        a.seed_free_lists(
            a.zone_of_pfn(f.pfn).unwrap(),
            &FreeListSeed {
                free: [[0; 11]; 3],
                held: &held
            }
        ),
        Err(SeedError::HeldNotFree {
            pfn: f.pfn,
            order: 2
        })
    );
    let odd = [(Frame::new(Pfn(0x10_0001), 1), MigrateType::Movable)];
    assert!(matches!(
        a.seed_free_lists(
            1,
            &FreeListSeed {
                free: [[0; 11]; 3],
                held: &odd
            }
        ),
        Err(SeedError::HeldNotFree { .. })
    ));
    let iso = [(Frame::new(Pfn(0x10_0000), 0), MigrateType::Isolate)];
    assert!(matches!(
        a.seed_free_lists(
            1,
            &FreeListSeed {
                free: [[0; 11]; 3],
                held: &iso
            }
        ),
        Err(SeedError::NotAPcpList { .. })
    ));
    let mut free = [[0u64; 11]; 3];
    free[0][0] = 5000; // each order-0 block keeps its buddy held: 10 000 pages > 8192
    assert!(matches!(
        a.seed_free_lists(1, &FreeListSeed { free, held: &[] }),
        Err(SeedError::FreeListsDoNotFit { zone: 1, .. })
    ));
    assert!(matches!(
        a.seed_free_lists(2, &FreeListSeed::default()),
        Err(SeedError::NoSuchPageset { .. })
    ));
    assert_eq!(before, (a.zone_info(0).unwrap(), a.zone_info(1).unwrap()));
    a.free_on(0, f).unwrap();
    a.validate().unwrap();
}
