//! The live kernel as a reference: recompute, with our formulas, the watermarks, batch,
//! high_min and high_max that this machine's kernel shows in `/proc/zoneinfo`, from the
//! inputs the kernel used (managed pages, `vm.min_free_kbytes`,
//! `vm.watermark_scale_factor`, CPUs per node), and compare them one by one.
//! On a machine without `/proc/zoneinfo` (not Linux) there is nothing to compare.

use pagealloc::tune::{high_bounds, zone_batchsize};
use pagealloc::zone_wmarks;

#[derive(Debug, Default)]
struct KZone {
    node: usize,
    name: String,
    min: u64,
    low: u64,
    boost: u64,
    managed: u64,
    pcp: Vec<(i32, i32, i32)>, // batch, high_min, high_max
}

fn parse() -> Option<Vec<KZone>> {
    let text = std::fs::read_to_string("/proc/zoneinfo").ok()?;
    let mut zones: Vec<KZone> = Vec::new();
    let (mut batch, mut hmin) = (0, 0);
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["Node", n, "zone", name] => zones.push(KZone {
                node: n.trim_end_matches(',').parse().ok()?,
                name: name.to_string(),
                ..Default::default()
            }),
            ["min", v] => zones.last_mut()?.min = v.parse().ok()?,
            ["low", v] => zones.last_mut()?.low = v.parse().ok()?,
            ["boost", v] => zones.last_mut()?.boost = v.parse().ok()?,
            ["managed", v] => zones.last_mut()?.managed = v.parse().ok()?,
            ["batch:", v] => batch = v.parse().ok()?,
            ["high_min:", v] => hmin = v.parse().ok()?,
            ["high_max:", v] => zones.last_mut()?.pcp.push((batch, hmin, v.parse().ok()?)),
            _ => {}
        }
    }
    Some(zones)
}

fn read_u64(p: &str) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

#[test]
fn our_sizing_matches_the_live_kernel() {
    let Some(zones) = parse() else {
        eprintln!("no /proc/zoneinfo: nothing to compare");
        return;
    };
    let (Some(mfk), Some(wsf)) = (
        read_u64("/proc/sys/vm/min_free_kbytes"),
        read_u64("/proc/sys/vm/watermark_scale_factor"),
    ) else {
        return;
    };
    if read_u64("/proc/sys/vm/percpu_pagelist_high_fraction") != Some(0) {
        eprintln!("high fraction set on this host: not comparable");
        return;
    }
    let host = pagealloc::os::sysfs::HostTopology::read().unwrap();
    let online = host.cpus.iter().filter(|c| c.online).count() as u32;
    let populated: Vec<&KZone> = zones.iter().filter(|z| z.managed > 0).collect();
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
        let (hmin, hmax) = high_bounds(w[1], z.managed, batch, node_cpus, 0, online, 0, true);
        for &(kb, kmin, kmax) in &z.pcp {
            assert_eq!(
                (batch, hmin, hmax),
                (kb, kmin, kmax),
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
