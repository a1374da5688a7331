//! Allocation, free, errors and conservation on small layouts.

mod common;
use common::*;
use pagealloc::*;

#[test]
fn alloc_free_every_order_and_validate() {
    let (a, _) = manual(&Layout::single(1 << 16, 2), cfg("linux-6.12"));
    let managed = a.managed_pages();
    let mut got = Vec::new();
    for order in 0..=MAX_ORDER {
        for cpu in 0..2 {
            let f = a.alloc_on(cpu, order, Gfp::USER, None).unwrap();
            assert_eq!(f.order, order);
            assert_eq!(f.pfn.0 % (1 << order), 0, "aligned");
            got.push((cpu, f));
        }
    }
    let t = a.validate().unwrap();
    assert_eq!(t.allocated, got.iter().map(|(_, f)| f.pages()).sum::<u64>());
    for (cpu, f) in got {
        a.free_on(1 - cpu, f).unwrap();
    }
    let t = a.validate().unwrap();
    assert_eq!(t.allocated, 0);
    assert_eq!(t.buddy + t.pcp, managed);
    a.drain_all_pages();
    let t = a.validate().unwrap();
    assert_eq!(t.pcp, 0);
    assert_eq!(a.nr_free_pages(), managed);
    // everything merged back into order-10 blocks
    assert_eq!(a.zone_info(0).unwrap().nr_free[10], managed >> 10);
    let c = a.counters();
    assert_eq!(c.pgalloc, c.pgfree);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let (a, _) = manual(&Layout::single(1 << 14, 2), cfg("linux-6.12"));
    assert_eq!(
        a.alloc_on(0, 11, Gfp::USER, None),
        Err(AllocError::InvalidOrder(11))
    );
    assert_eq!(
        a.alloc_on(9, 0, Gfp::USER, None),
        Err(AllocError::InvalidCpu(9))
    );
    assert_eq!(
        a.alloc_on(0, 0, Gfp::USER, Some(3)),
        Err(AllocError::InvalidNode(3))
    );
    let f = a.alloc_on(0, 2, Gfp::KERNEL, None).unwrap();
    // order mismatch leaves the block allocated
    assert_eq!(
        a.free_on(0, Frame::new(f.pfn, 1)),
        Err(FreeError::OrderMismatch {
            pfn: f.pfn,
            allocated: 2,
            given: 1
        })
    );
    // a frame inside the block
    assert_eq!(
        a.free_on(0, Frame::new(Pfn(f.pfn.0 + 1), 0)),
        Err(FreeError::NotAllocated(Pfn(f.pfn.0 + 1)))
    );
    assert_eq!(
        a.free_on(0, Frame::new(Pfn(1 << 20), 0)),
        Err(FreeError::ForeignFrame(Pfn(1 << 20)))
    );
    assert_eq!(
        a.free_on(0, Frame::new(f.pfn, 12)),
        Err(FreeError::InvalidOrder(12))
    );
    a.validate().unwrap();
    a.free_on(1, f).unwrap();
    assert_eq!(
        a.free_on(1, f),
        Err(FreeError::NotAllocated(f.pfn)),
        "double free"
    );
    // a double free after the pcp drained it to the buddy lists
    a.drain_all_pages();
    assert_eq!(a.free_on(0, f), Err(FreeError::NotAllocated(f.pfn)));
    // never handed out
    let never = Frame::new(Pfn(8000), 0);
    assert!(matches!(
        a.free_on(0, never),
        Err(FreeError::NotAllocated(_))
    ));
    a.validate().unwrap();
    assert_eq!(a.validate().unwrap().allocated, 0);
}

#[test]
fn holes_and_unaligned_zone_ends() {
    let mut l = Layout::single(0, 2);
    l.nodes[0].zones = vec![
        ZoneLayout {
            kind: ZoneKind::Dma32,
            start_pfn: 3,
            pages: 5000,
            holes: vec![(100, 700), (4000, 4001)],
        },
        ZoneLayout {
            kind: ZoneKind::Normal,
            start_pfn: 6000,
            pages: 9001,
            holes: vec![],
        },
    ];
    let (a, _) = manual(&l, cfg("linux-6.12"));
    assert_eq!(a.managed_pages(), 5000 - 601 + 9001);
    a.validate().unwrap();
    assert!(matches!(
        a.free_on(0, Frame::new(Pfn(150), 0)),
        Err(FreeError::ForeignFrame(_))
    ));
    assert!(matches!(
        a.free_on(0, Frame::new(Pfn(5500), 0)),
        Err(FreeError::ForeignFrame(_))
    ));
    // exhaust everything: no hole frame is ever handed out, all distinct
    let mut seen = std::collections::HashSet::new();
    let mut frames = Vec::new();
    while let Ok(f) = a.alloc_on(0, 0, Gfp::USER | Gfp::HIGH, None) {
        assert!(!(100..700).contains(&f.pfn.0) && f.pfn.0 != 4000);
        assert!(seen.insert(f.pfn), "handed out twice: {f}");
        frames.push(f);
    }
    a.validate().unwrap();
    for f in frames {
        a.free_on(1, f).unwrap();
    }
    a.drain_all_pages();
    let t = a.validate().unwrap();
    assert_eq!(t.buddy, a.managed_pages());
}

#[test]
fn exhaustion_fails_cleanly_and_atomic_uses_reserves() {
    let (a, _) = manual(&Layout::single(1 << 15, 1), cfg("linux-6.12"));
    let mut frames = Vec::new();
    loop {
        match a.alloc_on(0, 0, Gfp::USER, None) {
            Ok(f) => frames.push(f),
            Err(e) => {
                assert_eq!(e, AllocError::OutOfMemory);
                break;
            }
        }
    }
    let min = a.zone_info(0).unwrap().wmark[0];
    assert!(a.nr_free_pages() <= min + 1, "stopped at the min watermark");
    assert!(a.nr_free_pages() > 0);
    // an atomic request dips into the reserve
    let f = a
        .alloc_on(0, 0, Gfp::ATOMIC_KERNEL, None)
        .expect("atomic succeeds within the reserve");
    frames.push(f);
    assert!(a.counters().alloc_fail >= 1);
    a.validate().unwrap();
    for f in frames {
        a.free_on(0, f).unwrap();
    }
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    a.validate().unwrap();
}

#[test]
fn numa_fallback_walks_the_zonelist() {
    let (a, _) = manual(&Layout::numa(2, 8192, 1), cfg("linux-6.12"));
    let mut frames = Vec::new();
    // fill node 0 from cpu 0, then keep going: allocations spill to node 1
    for _ in 0..12000 {
        frames.push(a.alloc_on(0, 0, Gfp::USER, None).unwrap());
    }
    let on1 = frames
        .iter()
        .filter(|f| a.zone_of_pfn(f.pfn) == Some(1))
        .count();
    assert!(on1 > 0, "fell back to node 1");
    assert!(a.counters().zonelist_scanned > 0);
    let only0 = a.alloc_on(0, 0, Gfp::USER | Gfp::THISNODE, None);
    assert!(only0.is_err() || a.zone_of_pfn(only0.unwrap().pfn) == Some(0));
    a.validate().unwrap();
    for f in frames {
        a.free_on(1, f).unwrap();
    }
    a.validate().unwrap();
}

#[test]
fn bulk_alloc_and_free() {
    let (a, _) = manual(&Layout::single(1 << 15, 2), cfg("linux-6.12"));
    let mut v = Vec::new();
    assert_eq!(
        a.alloc_bulk_on(0, 0, Gfp::USER, None, 1000, &mut v)
            .unwrap(),
        1000
    );
    let mut w = Vec::new();
    assert_eq!(
        a.alloc_bulk_on(1, 3, Gfp::KERNEL, None, 50, &mut w)
            .unwrap(),
        50
    );
    a.validate().unwrap();
    a.free_bulk_on(1, &v).unwrap();
    // a bad frame in the middle stops the bulk free there
    let mut bad = w.clone();
    bad.insert(10, w[3]);
    let e = a.free_bulk_on(0, &bad).unwrap_err();
    assert_eq!(e.index, 10);
    assert_eq!(e.error, FreeError::NotAllocated(w[3].pfn));
    a.free_bulk_on(0, &w[10..]).unwrap();
    let t = a.validate().unwrap();
    assert_eq!(t.allocated, 0);
}

#[test]
fn vmstat_and_zoneinfo_render() {
    let (a, _) = manual(&Layout::single(1 << 18, 2), cfg("linux-6.12"));
    let f = a.alloc_on(1, 0, Gfp::USER, None).unwrap();
    let zi = a.zoneinfo().to_string();
    assert!(zi.contains("Node 0, zone   Normal"), "{zi}");
    assert!(zi.contains("    cpu: 1\n              count:    "), "{zi}");
    assert!(zi.contains("high_min:") && zi.contains("high_max:"));
    let vm = a.vmstat().to_string();
    assert!(vm.contains("pgalloc 1\n"), "{vm}");
    assert!(vm.lines().any(|l| l.starts_with("zone_lock_max_hold_ns ")));
    a.free_on(1, f).unwrap();
}

#[test]
fn high_fraction_rules() {
    let (a, _) = manual(&Layout::single(1 << 18, 2), cfg("linux-6.12"));
    let before = a.pcp_info(0, 0).unwrap();
    assert!(before.high_min < before.high_max);
    for bad in [1, 5, 7] {
        assert!(a.set_high_fraction(bad).is_err());
        assert_eq!(a.pcp_info(0, 0).unwrap(), before, "nothing changed");
    }
    a.set_high_fraction(8).unwrap();
    let p = a.pcp_info(0, 0).unwrap();
    assert_eq!(p.high_min, p.high_max, "tuning off");
    assert_eq!(p.high_min, (1 << 18) / 8 / 2);
    a.set_high_fraction(0).unwrap();
    assert_eq!(a.pcp_info(0, 0).unwrap().high_max, before.high_max);
}

#[test]
fn cpu_offline_drains_and_resizes() {
    let (a, _) = manual(&Layout::single(1 << 18, 2), cfg("linux-6.12"));
    let v: Vec<_> = (0..500)
        .map(|_| a.alloc_on(1, 0, Gfp::USER, None).unwrap())
        .collect();
    for f in &v {
        a.free_on(1, *f).unwrap();
    }
    assert!(a.pcp_info(1, 0).unwrap().count > 0);
    let hmin_before = a.pcp_info(0, 0).unwrap().high_min;
    a.cpu_offline(1).unwrap();
    let p1 = a.pcp_info(1, 0).unwrap();
    assert_eq!((p1.count, p1.high_min, p1.high_max, p1.batch), (0, 0, 0, 1));
    assert!(
        a.pcp_info(0, 0).unwrap().high_min >= hmin_before,
        "one CPU left on the node"
    );
    // allocating on the offline cpu caches nothing
    let f = a.alloc_on(1, 0, Gfp::USER, None).unwrap();
    a.free_on(1, f).unwrap();
    assert_eq!(a.pcp_info(1, 0).unwrap().count, 0);
    a.cpu_online(1).unwrap();
    assert_eq!(a.pcp_info(1, 0).unwrap().high_min, hmin_before);
    a.validate().unwrap();
}

#[test]
fn poisoned_memory_backed_allocator() {
    let mut c = cfg("linux-6.12");
    c.poison = true;
    let a = Allocator::with_memory(&Layout::single(4096, 1), c, os::mmap::HugePages::None).unwrap();
    let f = a.alloc_on(0, 1, Gfp::USER, None).unwrap();
    let p = a.frame_ptr(f).unwrap();
    assert_eq!(a.pfn_of_ptr(p.as_ptr()), Some(f.pfn));
    // SAFETY: the block is allocated to this test and 8 KiB long.
    unsafe { std::ptr::write_bytes(p.as_ptr(), 7, 8192) };
    a.free_on(0, f).unwrap();
    a.validate().unwrap();
    // a use after free damages the poison and validate() says so
    // SAFETY: the frame is mapped (the region lives as long as `a`); writing it after
    // free is the bug this test provokes on purpose.
    unsafe { *p.as_ptr() = 1 };
    let e = a.validate().unwrap_err();
    assert!(e.what.contains("poison"), "{e}");
}

#[test]
fn background_ticker_decays_high() {
    let mut c = cfg("linux-6.12");
    c.tick_interval_ms = 5;
    let a = std::sync::Arc::new(Allocator::new(&Layout::single(1 << 18, 1), c).unwrap());
    let v: Vec<_> = (0..20000)
        .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
        .collect();
    for f in v {
        a.free_on(0, f).unwrap();
    }
    let p = a.pcp_info(0, 0).unwrap();
    assert!(p.high > p.high_min);
    a.start_ticker();
    let t0 = std::time::Instant::now();
    while a.pcp_info(0, 0).unwrap().high > p.high_min {
        assert!(
            t0.elapsed().as_secs() < 20,
            "the ticker decays high to high_min"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    a.stop_ticker();
    assert!(a.counters().decay_drain > 0);
    a.validate().unwrap();
}

#[test]
fn current_cpu_entry_points_fold_host_cpus_onto_the_layout() {
    let p = std::sync::Arc::new(ManualPlatform::new());
    let a = Allocator::with_platform(&Layout::single(1 << 14, 2), cfg("linux-6.12"), p.clone())
        .unwrap();
    p.set_cpu(5); // a host CPU the layout does not have
    assert_eq!(a.current_cpu(), 1);
    let f = a.alloc_pages(0, Gfp::USER).unwrap();
    assert_eq!(
        a.pcp_info(1, 0).unwrap().count as u64 + 1,
        a.counters().pcp_refill_pages
    );
    a.free_pages(f).unwrap();
    // the explicit-CPU form still refuses an unknown CPU
    assert_eq!(
        a.alloc_on(5, 0, Gfp::USER, None),
        Err(AllocError::InvalidCpu(5))
    );
    a.validate().unwrap();
}

#[test]
fn host_layout_from_sysfs() {
    let l = Layout::from_host(256 << 20).unwrap();
    assert!(!l.cpus.is_empty() && !l.nodes.is_empty());
    assert_eq!(l.managed_pages(), (256 << 20) / 4096);
    let a = Allocator::new(&l, cfg("linux-6.12")).unwrap();
    let f = a.alloc_pages(0, Gfp::USER).unwrap();
    a.free_pages(f).unwrap();
    a.validate().unwrap();
}

#[test]
fn a_cpu_back_online_gets_its_sizes_with_fixed_high_and_batch_one() {
    // Fixed sizes: onlining CPU 1 leaves the zone's (high_min, high_max, batch) as it was,
    // and a batch of 1 equals the boot pageset's; the CPU must still be resized.
    let a = Allocator::new(
        &Layout::single(65_536, 2),
        cfg("linux-6.12,fixed_high=100,fixed_batch=1"),
    )
    .unwrap();
    a.cpu_offline(1).unwrap();
    let off = a.pcp_info(1, 0).unwrap();
    assert_eq!((off.high_min, off.high_max, off.batch), (0, 0, 1));
    a.cpu_online(1).unwrap();
    let on = a.pcp_info(1, 0).unwrap();
    assert_eq!(
        (on.high_min, on.high_max, on.batch, on.high),
        (100, 100, 1, 100)
    );
    // Its pageset caches again: a freed page stays on CPU 1's lists.
    let f = a.alloc_on(1, 0, Gfp::USER, None).unwrap();
    a.free_on(1, f).unwrap();
    assert_eq!(a.pcp_info(1, 0).unwrap().count, 1);
    assert_eq!(a.counters().free_direct, 0);
    a.validate().unwrap();
}
