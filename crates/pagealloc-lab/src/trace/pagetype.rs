//! `/proc/pagetypeinfo`'s free lists, as a trace records them at its start and end, and
//! the same view of pagealloc's zones: which zones could serve a request without
//! fragmenting (`ALLOC_NOFRAGMENT`, docs/mechanisms.md §11.6) when the trace began.
//!
//! Only the "Free pages count per migrate type at order" table is read: one row per
//! node, zone and type, one column per order (counts of free blocks, not pages).

use pagealloc::{Allocator, MigrateType};
use std::collections::BTreeMap;

/// Pageblock order (9 on the x86-64 kernels traced here, as in pagealloc).
const PAGEBLOCK_ORDER: usize = pagealloc::PAGEBLOCK_ORDER as usize;

/// Free blocks per order of one zone, by migratetype name (`Unmovable`, `Movable`, …).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneFree {
    /// Type name → free blocks at each order (index = order).
    pub by_type: BTreeMap<String, Vec<u64>>,
}

impl ZoneFree {
    /// Free pages of type `ty` (0 if the zone has no such row).
    pub fn pages(&self, ty: &str) -> u64 {
        self.by_type.get(ty).map_or(0, |v| {
            v.iter()
                .enumerate()
                .map(|(o, &n)| n.saturating_mul(1u64 << o.min(63)))
                .fold(0, u64::saturating_add)
        })
    }
    /// Free blocks of a pageblock's order or more, of any type: what a fallback under
    /// `ALLOC_NOFRAGMENT` may claim.
    pub fn whole_pageblocks(&self) -> u64 {
        self.by_type
            .values()
            .flat_map(|v| v.iter().skip(PAGEBLOCK_ORDER))
            .fold(0, |a, &n| a.saturating_add(n))
    }
    /// One line: free pages of each modelled type and the whole free pageblocks.
    fn summary(&self) -> String {
        format!(
            "unmovable {} movable {} reclaimable {} pages free, {} free blocks of order >= {PAGEBLOCK_ORDER}",
            self.pages("Unmovable"),
            self.pages("Movable"),
            self.pages("Reclaimable"),
            self.whole_pageblocks()
        )
    }
}

/// The free-list table of `/proc/pagetypeinfo`, by (node, zone name).
///
/// ```
/// use pagealloc_lab::trace::pagetype::parse;
///
/// let text = "Page block order: 9\n\
///     Free pages count per migrate type at order       0      1      2\n\
///     Node    0, zone   Normal, type    Unmovable      4      0      1\n\
///     Node    0, zone   Normal, type      Movable      2      3 >100000\n\
///     \n\
///     Number of blocks type     Unmovable      Movable\n\
///     Node 0, zone   Normal          100          900\n";
/// let z = &parse(text)?[&(0, "Normal".to_string())];
/// assert_eq!((z.pages("Unmovable"), z.pages("Movable")), (8, 400_008));
/// assert_eq!(z.whole_pageblocks(), 0);
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
/// A row of that table that does not read as `Node N, zone Z, type T` and counts.
pub fn parse(text: &str) -> Result<BTreeMap<(usize, String), ZoneFree>, String> {
    let mut out: BTreeMap<(usize, String), ZoneFree> = BTreeMap::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("Free pages count per migrate type") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        if line.trim().is_empty() {
            break;
        }
        let bad = || format!("pagetypeinfo: unreadable row {line:?}");
        let rest = line.strip_prefix("Node").ok_or_else(bad)?;
        let (node, rest) = rest.split_once(',').ok_or_else(bad)?;
        let node: usize = node.trim().parse().map_err(|_| bad())?;
        let rest = rest.trim().strip_prefix("zone").ok_or_else(bad)?;
        let (zone, rest) = rest.split_once(',').ok_or_else(bad)?;
        let rest = rest.trim().strip_prefix("type").ok_or_else(bad)?;
        let mut f = rest.split_whitespace();
        let ty = f.next().ok_or_else(bad)?.to_string();
        // The kernel stops counting a list at 100000 blocks and prints `>100000`
        // (`pagetypeinfo_showfree_print`): read as that lower bound.
        let counts = f
            .map(|n| n.trim_start_matches('>').parse::<u64>().map_err(|_| bad()))
            .collect::<Result<Vec<u64>, String>>()?;
        out.entry((node, zone.trim().to_string()))
            .or_default()
            .by_type
            .insert(ty, counts);
    }
    Ok(out)
}

/// The same table for pagealloc's zone `z` ([`Allocator::free_lists`]).
pub fn of_allocator(a: &Allocator, z: usize) -> ZoneFree {
    let mut zf = ZoneFree::default();
    let Some(t) = a.free_lists(z) else {
        return zf;
    };
    for mt in MigrateType::ALL {
        let name = match mt {
            MigrateType::Unmovable => "Unmovable",
            MigrateType::Movable => "Movable",
            MigrateType::Reclaimable => "Reclaimable",
            MigrateType::HighAtomic => "HighAtomic",
            MigrateType::Isolate => "Isolate",
        };
        zf.by_type.insert(name.to_string(), t[mt as usize].to_vec());
    }
    zf
}

/// Notes comparing the kernel's free lists at the trace's start with pagealloc's, one
/// per zone both have: what `ALLOC_NOFRAGMENT` sees in each.
pub fn compare(kernel: &ZoneFree, pagealloc: &ZoneFree, node: usize, zone: &str) -> String {
    format!(
        "free lists at the start, node {node} zone {zone}: kernel {}; pagealloc {}",
        kernel.summary(),
        pagealloc.summary()
    )
}
