//! The live kernel as a reference: recompute, with our formulas, the watermarks, batch,
//! high_min and high_max that this machine's kernel shows in `/proc/zoneinfo`, from the
//! inputs the kernel used (managed pages, `vm.min_free_kbytes`,
//! `vm.watermark_scale_factor`, CPUs per node), and compare them one by one.
//! On a machine without `/proc/zoneinfo` (not Linux) there is nothing to compare.

use pagealloc::os::zoneinfo::KernelZoneinfo;
use pagealloc::tune::{high_bounds, zone_batchsize, Sizing};
use pagealloc::zone_wmarks;

fn read_u64(p: &str) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Says that the comparison was skipped, and why: written to the process's stderr
/// directly (not through `eprintln!`, which the test harness captures), so that a pass
/// that compared nothing reads as "skipped" in the test output.
fn skipped(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "kernel_reference: SKIPPED, this host is not comparable: {why}"
    );
}

#[test]
fn our_sizing_matches_the_live_kernel() {
    let zones = match KernelZoneinfo::read() {
        Ok(z) => z.zones,
        Err(e) => {
            skipped(&format!("{e}"));
            return;
        }
    };
    let (Some(mfk), Some(wsf)) = (
        read_u64("/proc/sys/vm/min_free_kbytes"),
        read_u64("/proc/sys/vm/watermark_scale_factor"),
    ) else {
        skipped("no vm.min_free_kbytes or vm.watermark_scale_factor");
        return;
    };
    if read_u64("/proc/sys/vm/percpu_pagelist_high_fraction") != Some(0) {
        skipped("vm.percpu_pagelist_high_fraction is set (high is not auto-tuned)");
        return;
    }
    let host = pagealloc::os::sysfs::HostTopology::read().unwrap();
    let online = host.cpus.iter().filter(|c| c.online).count() as u32;
    let populated: Vec<_> = zones.iter().filter(|z| z.populated()).collect();
    // lowmem: every zone but Movable (no highmem on 64-bit)
    let lowmem: u64 = populated
        .iter()
        .filter(|z| z.name != "Movable")
        .map(|z| z.managed)
        .sum();
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| !s.contains("[never]"));
    let nr_low = zones
        .iter()
        .filter(|z| z.managed > 0 && z.name != "Movable")
        .count() as u64;
    // min_free_kbytes is recomputed by the kernel only on some events (boot, hotplug,
    // khugepaged start), so it is reported, not asserted.
    println!(
        "min_free_kbytes: kernel {mfk}, ours {} (THP {})",
        pagealloc::min_free_kbytes(lowmem, nr_low, thp),
        if thp { "on" } else { "off" }
    );
    let mut compared = 0;
    for z in populated {
        let node_cpus = host
            .nodes
            .iter()
            .find(|n| n.id == z.node)
            .map_or(online, |n| {
                n.cpus
                    .iter()
                    .filter(|&&c| host.cpus.iter().any(|h| h.id == c && h.online))
                    .count() as u32
            });
        let w = zone_wmarks(mfk / 4, z.managed, lowmem, z.name == "Movable", wsf as u32);
        assert_eq!(
            (w[0], w[1]),
            (z.min - z.boost, z.low - z.boost),
            "{}: min/low",
            z.name
        );
        let batch = zone_batchsize(z.managed);
        let (hmin, hmax) = high_bounds(&Sizing {
            low_wmark: w[1],
            managed: z.managed,
            batch,
            node_cpus,
            online_cpus: online,
            high_fraction: 0,
            auto_tune: true,
        });
        for p in &z.pagesets {
            assert_eq!(
                (
                    i64::from(batch),
                    Some(i64::from(hmin)),
                    Some(i64::from(hmax))
                ),
                (p.batch, p.high_min, p.high_max),
                "zone {} of node {}",
                z.name,
                z.node
            );
            compared += 1;
        }
        println!(
            "node {} {:>7}: managed {:>8} min {:>6} low {:>6} batch {:>2} high_min {:>6} high_max {:>6} (kernel agrees)",
            z.node, z.name, z.managed, w[0], w[1], batch, hmin, hmax
        );
    }
    assert!(compared > 0, "found pagesets to compare");
}
