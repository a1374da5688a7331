//! Zonelists: for each node, the order in which allocations try zones — the local node
//! first, then the others by distance (ties by node id); within a node, the highest zone
//! first (Normal before DMA32 before DMA), as `build_zonelists` orders them.
//!
//! And the old zonelist full-zone cache (`zlc`, Linux 2.6.20–4.3, docs/mechanisms.md §8), a
//! [`Config::zonelist_cache`](crate::Config::zonelist_cache) switch, non-mainline since 4.4.
//!
//! # Design
//! One [`ZonelistCache`] per zonelist: a bitmap of zonelist positions found full
//! recently, the node of each position (`z_to_n`), and the time of the last wipe.
//! `get_page_from_freelist` consults it only after the first zone failed (that is when
//! [`ZonelistCache::setup`] runs and may wipe a bitmap older than one second of the
//! allocator's clock), marks every zone that fails the watermark test or `rmqueue`, and,
//! if the cached pass found nothing, walks the zonelist once more ignoring the cache.
//! "Reclaim makes progress" (our slow path's drain of all pagesets) wipes it.
//!
//! # Locking rules
//! None: unlocked hint data shared by all CPUs, as in the kernel. Bits are set with
//! relaxed `fetch_or` and wiped with relaxed stores; a stale bit costs one skipped zone
//! until the next wipe, and the second pass keeps results independent of it.

use crate::sync::atomic::{AtomicU64, Ordering::Relaxed};
use crate::topology::Layout;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

/// Age after which the full-zones bitmap is wiped: one second (`HZ`), in ns.
pub(crate) const ZLC_ZAP_NS: u64 = 1_000_000_000;

/// `struct zonelist_cache` (docs/mechanisms.md §8).
pub(crate) struct ZonelistCache {
    /// Node of the zone at each zonelist position.
    z_to_n: Box<[u16]>,
    /// Nodes allocations may use (`node_states[N_MEMORY]`: nodes with managed memory;
    /// there are no cpusets), one bit per node.
    allowed: Box<[u64]>,
    /// Bit i: the zone at position i was found full recently.
    fullzones: Box<[AtomicU64]>,
    /// Clock (ns) of the last wipe.
    last_full_zap: AtomicU64,
}

impl fmt::Debug for ZonelistCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full: Vec<usize> = (0..self.z_to_n.len())
            .filter(|&i| self.is_full(i))
            .collect();
        f.debug_struct("ZonelistCache")
            .field("full", &full)
            .field("last_full_zap", &self.last_full_zap.load(Relaxed))
            .finish()
    }
}

impl ZonelistCache {
    /// `build_zonelist_cache`: `zone_node[z]` is the node of zone `z`, `has_memory[n]`
    /// whether node `n` has managed memory.
    pub(crate) fn new(zonelist: &[usize], zone_node: &[usize], has_memory: &[bool]) -> Self {
        let words = zonelist.len().div_ceil(64).max(1);
        let mut allowed = alloc::vec![0u64; has_memory.len().div_ceil(64).max(1)];
        for (n, &mem) in has_memory.iter().enumerate() {
            if mem {
                allowed[n / 64] |= 1 << (n % 64);
            }
        }
        ZonelistCache {
            z_to_n: zonelist.iter().map(|&z| zone_node[z] as u16).collect(),
            allowed: allowed.into_boxed_slice(),
            fullzones: (0..words).map(|_| AtomicU64::new(0)).collect(),
            last_full_zap: AtomicU64::new(0),
        }
    }

    /// `zlc_setup`: wipe the bitmap if it is more than a second old; `wiped(i)` is called
    /// for each position whose bit the wipe clears (for the access report).
    #[cold]
    pub(crate) fn setup(&self, now_ns: u64, wiped: impl FnMut(usize)) {
        let last = self.last_full_zap.load(Relaxed);
        if now_ns.saturating_sub(last) > ZLC_ZAP_NS {
            self.clear(wiped);
            self.last_full_zap.store(now_ns, Relaxed);
        }
    }

    /// `zlc_zone_worth_trying`: the zone's node is allowed and it was not found full.
    #[inline]
    pub(crate) fn worth_trying(&self, i: usize) -> bool {
        let n = self.z_to_n[i] as usize;
        self.allowed[n / 64] & (1 << (n % 64)) != 0 && !self.is_full(i)
    }

    #[inline]
    fn is_full(&self, i: usize) -> bool {
        self.fullzones[i / 64].load(Relaxed) & (1 << (i % 64)) != 0
    }

    /// `zlc_mark_zone_full`.
    #[inline]
    pub(crate) fn mark_full(&self, i: usize) {
        let w = &self.fullzones[i / 64];
        let bit = 1u64 << (i % 64);
        if w.load(Relaxed) & bit == 0 {
            w.fetch_or(bit, Relaxed);
        }
    }

    /// `zlc_clear_zones_full`: reclaim made progress. `wiped(i)` is called for each
    /// position whose bit this clears.
    pub(crate) fn clear(&self, mut wiped: impl FnMut(usize)) {
        for (k, w) in self.fullzones.iter().enumerate() {
            let mut bits = w.load(Relaxed);
            if bits != 0 {
                w.store(0, Relaxed);
                while bits != 0 {
                    wiped(k * 64 + bits.trailing_zeros() as usize);
                    bits &= bits - 1;
                }
            }
        }
    }

    /// Positions currently marked full (for tests and reports).
    pub(crate) fn full_positions(&self) -> Vec<usize> {
        (0..self.z_to_n.len())
            .filter(|&i| self.is_full(i))
            .collect()
    }
}

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

    #[test]
    fn zlc_marks_wipes_after_a_second_and_clears() {
        let zl = [2usize, 0, 1];
        let c = ZonelistCache::new(&zl, &[0, 0, 1], &[true, false]);
        // node 1 has no memory: never worth trying
        assert!(!c.worth_trying(0));
        assert!(c.worth_trying(1));
        c.mark_full(1);
        assert!(!c.worth_trying(1));
        assert_eq!(c.full_positions(), [1]);
        let mut wiped = Vec::new();
        c.setup(ZLC_ZAP_NS, |i| wiped.push(i)); // exactly one second old: kept
        assert!(!c.worth_trying(1));
        assert!(wiped.is_empty());
        c.setup(ZLC_ZAP_NS + 1, |i| wiped.push(i)); // older: wiped
        assert!(c.worth_trying(1));
        assert_eq!(wiped, [1], "the wipe reports the bit it cleared");
        c.mark_full(2);
        c.mark_full(0);
        c.setup(2 * ZLC_ZAP_NS, |i| wiped.push(i)); // only just zapped: kept
        assert!(!c.worth_trying(2));
        c.clear(|i| wiped.push(i));
        assert_eq!(wiped, [1, 0, 2]);
        assert!(c.full_positions().is_empty());
    }
}
