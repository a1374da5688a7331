//! Defects an adversarial probe found (issue "hardening, round 3"), one test each: what
//! a user can reach through the public API with legal but unusual arguments.
mod common;

use common::{cfg, manual};
use pagealloc::{
    AllocError, Allocator, BuildError, Config, Frame, Gfp, Layout, MigrateType, Pfn, ZoneKind,
    ZoneLayout, MAX_ORDER,
};

/// `high == batch` (here `fixed_high=1,fixed_batch=1`): a pageset at its limit must
/// drain. `nr_pcp_free` kept `batch` pages and freed `high - batch` = 0 of them, so a
/// refill of larger orders stayed cached above `high` forever and `validate()` refused
/// the pageset.
#[test]
fn a_pageset_with_high_equal_to_batch_drains() {
    for preset in ["linux-6.12", "base", "fast"] {
        for (high, batch) in [(1, 1), (8, 8), (63, 63)] {
            let c = cfg(&format!("{preset},fixed_high={high},fixed_batch={batch}"));
            let (a, _) = manual(&Layout::single(16384, 1), c);
            let mut held = Vec::new();
            for order in [3u8, 0, 2, 1, 0, 3] {
                for _ in 0..8 {
                    held.push(a.alloc_on(0, order, Gfp::KERNEL, None).expect("alloc"));
                }
            }
            for f in held {
                a.free_on(0, f).expect("free");
                a.validate()
                    .unwrap_or_else(|e| panic!("{preset} high {high} batch {batch}: {e}"));
            }
            let p = a.pcp_info(0, 0).expect("pageset");
            assert!(
                p.count <= high + 8,
                "{preset} high {high} batch {batch}: {} pages left cached",
                p.count
            );
        }
    }
}

/// A layout whose node 1 has CPUs and no memory (a memoryless node).
fn memoryless_node_1() -> Layout {
    let mut l = Layout::numa(2, 16384, 1);
    l.nodes[1].zones.clear();
    l
}

/// `__GFP_THISNODE` on a node with no memory fails: the walk stops at the first zone of
/// another node, the first zonelist entry included (it returned node 0's frame), and the
/// PCP hit (the CPU's home zone is node 0's) is not taken for it.
#[test]
fn thisnode_on_a_memoryless_node_fails() {
    for preset in ["linux-6.12", "fast", "base"] {
        let (a, _) = manual(&memoryless_node_1(), cfg(preset));
        assert_eq!(a.node_zones(1), &[] as &[usize]);
        // Without THISNODE CPU 1 falls back to node 0 (and warms its pageset there).
        let f = a.alloc_on(1, 0, Gfp::KERNEL, None).expect("fallback");
        assert_eq!(a.zone_of_pfn(f.pfn), Some(0));
        for order in [0u8, 3, 9] {
            for node in [None, Some(1)] {
                let r = a.alloc_on(1, order, Gfp::KERNEL | Gfp::THISNODE, node);
                assert!(
                    r.is_err(),
                    "{preset}: THISNODE order {order} node {node:?} on memoryless node 1 gave {r:?}"
                );
            }
        }
        // THISNODE on a node with memory is served there, from CPU 1 too.
        let g = a
            .alloc_on(1, 0, Gfp::KERNEL | Gfp::THISNODE, Some(0))
            .expect("node 0");
        assert_eq!(a.zone_of_pfn(g.pfn), Some(0));
        let h = a
            .alloc_on(0, 0, Gfp::KERNEL | Gfp::THISNODE, None)
            .expect("home");
        assert_eq!(a.zone_of_pfn(h.pfn), Some(0));
        for x in [f, g, h] {
            a.free_on(1, x).expect("free");
        }
        a.validate().expect("valid");
    }
}

/// Every public getter and per-CPU/zone/node/pfn operation, given an index past the end:
/// `None`, 0, empty, or an error, never a panic (`cpu_zone_lock_count` indexed the
/// zone's per-CPU stats unchecked).
#[test]
fn every_getter_takes_out_of_range_arguments() {
    let (a, _) = manual(&Layout::numa(2, 8192, 2), cfg("linux-6.12"));
    let f = a.alloc_on(0, 0, Gfp::KERNEL, None).expect("alloc");
    for cpu in [a.nr_cpus(), a.nr_cpus() + 1, usize::MAX] {
        assert_eq!(a.cpu_zone_lock_count(cpu), 0);
        assert_eq!(a.cpu_zonelist_scanned(cpu), 0);
        assert_eq!(a.cpu_counters(cpu), None);
        assert_eq!(a.cpu_zone_counters(cpu, 0), None);
        assert_eq!(a.cpu_node(cpu), None);
        assert!(a.pcp_info(cpu, 0).is_none());
        assert!(!a.tick(cpu));
        a.drain_cpu(cpu);
        assert_eq!(a.cpu_offline(cpu), Err(AllocError::InvalidCpu(cpu)));
        assert_eq!(a.cpu_online(cpu), Err(AllocError::InvalidCpu(cpu)));
        assert_eq!(
            a.alloc_on(cpu, 0, Gfp::KERNEL, None),
            Err(AllocError::InvalidCpu(cpu))
        );
        assert!(a
            .alloc_bulk_on(cpu, 0, Gfp::KERNEL, None, 4, &mut Vec::new())
            .is_err());
        assert!(a.free_on(cpu, f).is_err());
        assert!(a.free_bulk_on(cpu, &[f]).is_err());
    }
    for zone in [a.nr_zones(), usize::MAX] {
        assert!(a.zone_info(zone).is_none());
        assert!(a.pcp_info(0, zone).is_none());
        assert_eq!(a.cpu_zone_counters(0, zone), None);
    }
    for node in [a.nr_nodes(), usize::MAX] {
        assert_eq!(a.node_zones(node), &[] as &[usize]);
        assert_eq!(a.zonelist(node), &[] as &[usize]);
        assert_eq!(a.zonelist_full(node), Vec::<usize>::new());
        assert_eq!(
            a.alloc_on(0, 0, Gfp::KERNEL, Some(node)),
            Err(AllocError::InvalidNode(node))
        );
    }
    for pfn in [16384, 1 << 40, u64::MAX] {
        let p = Pfn(pfn);
        assert_eq!(a.zone_of_pfn(p), None);
        assert_eq!(a.pageblock_type(p), None);
        assert_eq!(a.set_pageblock_type(p, MigrateType::Isolate), None);
        assert_eq!(a.free_block_of(p), None);
        assert!(a.frame_ptr(Frame::new(p, 0)).is_none());
        for order in [0, MAX_ORDER, MAX_ORDER + 1, u8::MAX] {
            assert!(a.free_on(0, Frame::new(p, order)).is_err());
        }
    }
    for order in [MAX_ORDER + 1, u8::MAX] {
        assert_eq!(
            a.alloc_on(0, order, Gfp::KERNEL, None),
            Err(AllocError::InvalidOrder(order))
        );
        assert!(a.free_on(0, Frame::new(f.pfn, order)).is_err());
    }
    assert!(a.pfn_of_ptr(core::ptr::null()).is_none());
    assert!(a.set_high_fraction(1).is_err());
    a.free_on(0, f).expect("free");
    a.validate().expect("valid");
}

/// The allocator's own structures come from fallible allocations: a layout whose
/// per-CPU zone statistics alone (1024 zones × 8192 CPUs) exceed a 1 GiB address-space
/// limit is refused with `BuildError::OutOfMemory`; the process does not abort. Runs
/// the build in a child of this test binary under `ulimit -v`.
#[test]
fn huge_layouts_are_out_of_memory_not_an_abort() {
    const CHILD: &str = "PAGEALLOC_OOM_CHILD";
    if std::env::var_os(CHILD).is_some() {
        // 64 nodes of 16 zones, 128 CPUs each: 1024 zones × 8192 CPUs, about 3 GiB of
        // per-CPU zone statistics before any pageset.
        let mut l = Layout::numa(64, 16 * 4096, 128);
        for (n, node) in l.nodes.iter_mut().enumerate() {
            let base = n as u64 * 16 * 4096;
            node.zones = (0..16)
                .map(|z| ZoneLayout::new(ZoneKind::Normal, base + z * 4096, 4096))
                .collect();
        }
        let r = Allocator::with_platform(
            &l,
            Config::default(),
            std::sync::Arc::new(pagealloc::ManualPlatform::new()),
        );
        match r {
            Err(BuildError::OutOfMemory { what, bytes }) => {
                println!("REFUSED {what} {bytes}")
            }
            Err(e) => println!("OTHER {e}"),
            Ok(_) => println!("BUILT"),
        }
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" \"$@\"")
        .arg(exe)
        .args([
            "--exact",
            "huge_layouts_are_out_of_memory_not_an_abort",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("spawn");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("REFUSED "),
        "status {:?}\nstdout {stdout}\nstderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
