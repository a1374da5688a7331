//! Zonelists: for each node, the order in which allocations try zones — the local node
//! first, then the others by distance (ties by node id); within a node, the highest zone
//! first (Normal before DMA32 before DMA), as `build_zonelists` orders them.

use crate::topology::Layout;
use alloc::vec::Vec;

/// Zone indices in fallback order for every node. `zones[i] = (node, kind)` in index order.
pub(crate) fn build(
    layout: &Layout,
    zones: &[(usize, crate::topology::ZoneKind)],
) -> Vec<Vec<usize>> {
    let nn = layout.nodes.len();
    (0..nn)
        .map(|n| {
            let mut order: Vec<usize> = (0..nn).collect();
            order.sort_by_key(|&m| (m != n, layout.distance(n, m), m));
            let mut zl = Vec::new();
            for m in order {
                let mut zs: Vec<usize> = (0..zones.len()).filter(|&z| zones[z].0 == m).collect();
                zs.sort_by_key(|&z| core::cmp::Reverse(zones[z].1));
                zl.extend(zs);
            }
            zl
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::ZoneKind;

    #[test]
    fn local_first_then_by_distance() {
        let mut l = Layout::numa(3, 1024, 1);
        l.nodes[0].distance = alloc::vec![10, 30, 20];
        let zones = [
            (0, ZoneKind::Dma32),
            (0, ZoneKind::Normal),
            (1, ZoneKind::Normal),
            (2, ZoneKind::Normal),
        ];
        let zl = build(&l, &zones);
        assert_eq!(zl[0], [1, 0, 3, 2]);
        assert_eq!(zl[1][0], 2);
    }
}
