//! pagealloc's layout from the firmware's tables: nodes from the SRAT, zones cut at
//! 16 MiB and 4 GiB, holes where the memory map has no RAM.

use crate::acpi;
use alloc::vec::Vec;
use pagealloc::{CpuLayout, Layout, NodeLayout, ZoneKind, ZoneLayout, PAGE_SIZE};

const PFN_16M: u64 = 0x1000;
const PFN_4G: u64 = 0x10_0000;

/// pagealloc's layout of the machine: the usable RAM of the memory map above 1 MiB,
/// minus `reserved` (PFN ranges), one node per SRAT proximity domain (one node without
/// an SRAT), zones DMA / DMA32 / Normal cut at 16 MiB and 4 GiB, holes where the map has
/// none. `cpu_nodes`: each CPU's node.
pub(crate) fn build_layout(
    fw: &acpi::Firmware,
    reserved: (u64, u64),
    cpu_nodes: &[usize],
) -> Layout {
    // Usable frames, sorted, minus the reservation.
    let mut free: Vec<(u64, u64)> = Vec::new();
    for e in fw.e820.iter().filter(|e| e.kind == 1) {
        let s = e.addr.div_ceil(PAGE_SIZE as u64).max(0x100);
        let t = (e.addr + e.size) / PAGE_SIZE as u64;
        if s < t {
            free.push((s, t));
        }
    }
    free.sort_unstable();
    let mut cut = Vec::new();
    for (s, t) in free {
        let (r0, r1) = reserved;
        if t <= r0 || s >= r1 {
            cut.push((s, t));
        } else {
            if s < r0 {
                cut.push((s, r0));
            }
            if r1 < t {
                cut.push((r1, t));
            }
        }
    }
    let doms = domains(fw);
    let nodes = doms.len().max(1);
    let mut layout = Layout {
        nodes: Vec::new(),
        cpus: cpu_nodes
            .iter()
            .map(|&node| CpuLayout {
                node,
                llc_slice_bytes: 2 << 20,
                online: true,
            })
            .collect(),
    };
    for n in 0..nodes {
        // This node's ranges: the SRAT's ranges of its domain, or everything.
        let ranges: Vec<(u64, u64)> = if doms.is_empty() {
            alloc::vec![(0, u64::MAX)]
        } else {
            fw.mem_node
                .iter()
                .filter(|m| m.2 == doms[n])
                .map(|m| (m.0 / PAGE_SIZE as u64, (m.0 + m.1) / PAGE_SIZE as u64))
                .collect()
        };
        let mut zones = Vec::new();
        for (kind, lo, hi) in [
            (ZoneKind::Dma, 0, PFN_16M),
            (ZoneKind::Dma32, PFN_16M, PFN_4G),
            (ZoneKind::Normal, PFN_4G, u64::MAX),
        ] {
            let mut pieces: Vec<(u64, u64)> = Vec::new();
            for &(s, t) in &cut {
                for &(rs, rt) in &ranges {
                    let (a, b) = (s.max(rs).max(lo), t.min(rt).min(hi));
                    if a < b {
                        pieces.push((a, b));
                    }
                }
            }
            pieces.sort_unstable();
            let (Some(first), Some(last)) = (pieces.first(), pieces.last()) else {
                continue;
            };
            let mut z = ZoneLayout::new(kind, first.0, last.1 - first.0);
            for w in pieces.windows(2) {
                if w[0].1 < w[1].0 {
                    z.holes.push((w[0].1, w[1].0));
                }
            }
            zones.push(z);
        }
        layout.nodes.push(NodeLayout {
            zones,
            distance: Vec::new(),
        });
    }
    layout
}

/// The SRAT's proximity domains with memory, sorted (node `i` = the `i`-th).
pub(crate) fn domains(fw: &acpi::Firmware) -> Vec<u32> {
    let mut d: Vec<u32> = fw
        .mem_node
        .iter()
        .filter(|m| m.1 > 0)
        .map(|m| m.2)
        .collect();
    d.sort_unstable();
    d.dedup();
    if d.len() < 2 {
        d.clear();
    }
    d
}
