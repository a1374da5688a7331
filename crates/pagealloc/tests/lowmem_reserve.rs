//! `lowmem_reserve` (`setup_per_zone_lowmem_reserve`): a request that falls from Normal
//! to DMA32 or DMA finds them only above their watermark plus the pages of the zones
//! above them divided by 256, as the kernel's `zone_watermark_fast` tests them.

use pagealloc::{Allocator, Config, Gfp, Layout, ZoneKind, ZoneLayout};

/// One node: DMA 16 MiB, DMA32 128 MiB, Normal 256 MiB; 2 CPUs.
fn three_zones() -> Allocator {
    let mut l = Layout::single(1, 2);
    l.nodes[0].zones = vec![
        ZoneLayout::new(ZoneKind::Dma, 0, 4096),
        ZoneLayout::new(ZoneKind::Dma32, 4096, 32_768),
        ZoneLayout::new(ZoneKind::Normal, 36_864, 65_536),
    ];
    Allocator::new(&l, "linux-6.18".parse::<Config>().unwrap()).unwrap()
}

/// The reserves as `/proc/zoneinfo`'s `protection` against Normal: DMA keeps
/// (32 768 + 65 536) / 256 pages, DMA32 65 536 / 256, Normal none.
#[test]
fn reserves_are_the_pages_above_over_256() {
    let a = three_zones();
    let r: Vec<u64> = (0..3)
        .map(|z| a.zone_info(z).unwrap().lowmem_reserve)
        .collect();
    assert_eq!(r, [384, 256, 0]);
}

/// Unmovable order-0 allocations on CPU 0 until one fails: each lower zone keeps its
/// watermark plus its reserve (the allocator's own free counts), where without the
/// reserve the walk took DMA and DMA32 down to their min watermarks.
#[test]
fn a_falling_request_leaves_the_reserve() {
    let a = three_zones();
    let mut held = Vec::new();
    while let Ok(f) = a.alloc_on(0, 0, Gfp::KERNEL, None) {
        held.push(f);
        assert!(held.len() <= 102_400, "more pages than the machine has");
    }
    for (z, reserve) in [(0, 384), (1, 256)] {
        let i = a.zone_info(z).unwrap();
        assert!(
            i.free >= i.wmark[0] + reserve,
            "{}: free {} min {} reserve {reserve}",
            i.name,
            i.free,
            i.wmark[0],
        );
    }
    // Normal gave everything down to its own mark first.
    let n = a.zone_info(2).unwrap();
    assert!(
        n.free <= n.wmark[0] + 1,
        "Normal free {} min {}",
        n.free,
        n.wmark[0]
    );
    for f in held {
        a.free_on(0, f).unwrap();
    }
}
