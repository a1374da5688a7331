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
