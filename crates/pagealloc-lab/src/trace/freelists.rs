//! The zones' free lists at the start of a replay, in the shape the kernel's were
//! ([`Allocator::seed_free_lists`]).
//!
//! # Design
//! The trace's start `/proc/pagetypeinfo` counts the free blocks of each zone per
//! migratetype and order; its `/proc/zoneinfo` the zone's free pages (read a moment
//! apart, and the kernel caps a count at 100000: the table is brought to zoneinfo's
//! total by adding or taking movable blocks). pagealloc's zone gets exactly those blocks,
//! each with its buddy in use, and the rest of its free memory is held back: the memory
//! in use when the trace began. The blocks the trace frees without having allocated them
//! are held at their own kernel pfns (pagealloc's zones span the kernel's pfns), or, where
//! that frame is on a seeded pageset or outside pagealloc's managed span, at the nearest
//! free place in the same zone: a free then reaches the zone and pageset the kernel's did.
//! A trace without the table (recorded before the recorder saved it) starts each zone
//! with its free pages in whole blocks, as an unfragmented zone has them.

use std::collections::{BTreeMap, HashMap};

use pagealloc::{
    Allocator, Frame, FreeListSeed, MigrateType, Pfn, SeedError, MAX_ORDER, PAGEBLOCK_ORDER,
};

use super::pagetype::ZoneFree;

/// Orders of a free list table.
const ORDERS: usize = MAX_ORDER as usize + 1;

/// A zone's wanted free blocks: `[type][order]` for Unmovable, Movable, Reclaimable.
pub type Shape = [[u64; ORDERS]; 3];

/// The kernel's table for one zone as a [`Shape`] of exactly `free` pages, and a note
/// when types pagealloc's pcp types do not cover held pages (folded into Movable).
///
/// ```
/// use pagealloc_lab::trace::{freelists::shape_of, pagetype::parse};
///
/// let text = "Free pages count per migrate type at order       0      1      2\n\
///     Node    0, zone   Normal, type    Unmovable      4      0      1\n\
///     Node    0, zone   Normal, type   HighAtomic      0      1      0\n\
///     Node    0, zone   Normal, type      Movable      2      3      0\n";
/// let z = &parse(text)?[&(0, "Normal".to_string())];
/// let (s, note) = shape_of(z, 20);
/// assert_eq!(s[0][..3], [4, 0, 1]);
/// assert_eq!(s[1][..3], [2, 3 + 1 + 1, 0]); // HighAtomic's block, and 2 pages more
/// assert!(note.unwrap().contains("HighAtomic"));
/// let (s, _) = shape_of(z, 12); // 6 pages less: Movable's smallest blocks go first
/// assert_eq!((&s[0][..3], &s[1][..3]), (&[4, 0, 1][..], &[0, 2, 0][..]));
/// # Ok::<(), String>(())
/// ```
pub fn shape_of(k: &ZoneFree, free: u64) -> (Shape, Option<String>) {
    let mut s: Shape = [[0; ORDERS]; 3];
    let mut folded = Vec::new();
    for (name, counts) in &k.by_type {
        let t = match name.as_str() {
            "Unmovable" => 0,
            "Movable" => 1,
            "Reclaimable" => 2,
            // Isolated pages are not counted free (NR_FREE_PAGES).
            "Isolate" => continue,
            _ => {
                if counts.iter().any(|&n| n > 0) {
                    folded.push(name.clone());
                }
                1
            }
        };
        for (o, &n) in counts.iter().enumerate().take(ORDERS) {
            s[t][o] = s[t][o].saturating_add(n);
        }
    }
    let pages = |s: &Shape| -> u64 {
        s.iter()
            .flat_map(|w| w.iter().enumerate().map(|(o, &n)| n.saturating_mul(1 << o)))
            .fold(0, u64::saturating_add)
    };
    let have = pages(&s);
    let mut add = free.saturating_sub(have);
    if have > free {
        // Take the smallest blocks, Movable's first, until enough is gone; what was
        // taken beyond it comes back below.
        let mut gone = 0u64;
        'take: for t in [1, 2, 0] {
            for (o, n) in s[t].iter_mut().enumerate() {
                while *n > 0 {
                    if gone >= have - free {
                        break 'take;
                    }
                    *n -= 1;
                    gone += 1 << o;
                }
            }
        }
        add = gone - (have - free);
    }
    // `add` pages as Movable blocks: order-10 ones, then its binary digits.
    s[1][ORDERS - 1] += add >> MAX_ORDER;
    for (o, n) in s[1].iter_mut().enumerate().take(ORDERS - 1) {
        *n += (add >> o) & 1;
    }
    let note = (!folded.is_empty()).then(|| {
        format!(
            "free blocks of {} counted as Movable (pagealloc seeds the pcp types' lists)",
            folded.join(", ")
        )
    });
    (s, note)
}

/// `free` pages in whole blocks of Movable: order-10 ones, then its binary digits.
pub fn unfragmented(free: u64) -> Shape {
    let mut s: Shape = [[0; ORDERS]; 3];
    s[1][ORDERS - 1] = free >> MAX_ORDER;
    for (o, n) in s[1].iter_mut().enumerate().take(ORDERS - 1) {
        *n = (free >> o) & 1;
    }
    s
}

/// True if `[pfn, pfn + 2^order)` lies wholly in one free block of `a` and overlaps none
/// of `taken` (start → end).
fn is_free(a: &Allocator, taken: &BTreeMap<u64, u64>, pfn: u64, order: u8) -> bool {
    let end = pfn + (1u64 << order);
    let fits = a
        .free_block_of(Pfn(pfn))
        .is_some_and(|(h, o, _)| end <= h.0 + (1u64 << o));
    fits && taken
        .range(..end)
        .next_back()
        .is_none_or(|(_, &e)| e <= pfn)
}

/// Where each block allocated before the trace (kernel `(pfn, order, migratetype)`) is
/// held in pagealloc: per zone, the frames and their pageblocks' types; and the blocks
/// that found no place (its zone has no free block that large left).
#[derive(Debug, Default)]
pub struct Held {
    /// Per zone index: the frames to hold.
    pub by_zone: HashMap<usize, Vec<(Frame, MigrateType)>>,
    /// Kernel `(pfn, order)` → the frames holding it (a pfn freed twice is held twice).
    pub pool: HashMap<(u64, u8), Vec<Frame>>,
    /// Held elsewhere than at their kernel pfn.
    pub moved: u64,
    /// Found no place.
    pub failed: u64,
}

/// Places the blocks allocated before the trace (see [`Held`]); `spans` are the zones'
/// `[start, end)` pfns by index, `fallback` the zone for a pfn in none of them.
pub fn place_held(
    a: &Allocator,
    pre: &[(u64, u8, i8)],
    spans: &[(u64, u64)],
    fallback: usize,
) -> Held {
    const MTS: [MigrateType; 3] = [
        MigrateType::Unmovable,
        MigrateType::Movable,
        MigrateType::Reclaimable,
    ];
    let mut h = Held {
        by_zone: HashMap::new(),
        pool: HashMap::new(),
        moved: 0,
        failed: 0,
    };
    let mut taken: BTreeMap<u64, u64> = BTreeMap::new();
    let mut cursor: HashMap<usize, u64> = HashMap::new();
    // What the searches of a zone (for a pageblock type, or for any) at an order found
    // no place in: `[first, below)` and `[from, end)`. Places only go (`taken` grows,
    // the allocator and its pageblocks do not change here), so a later search skips
    // them and finds what a search of every place would: else a zone's full stretch
    // would be walked again for each block moved past it.
    let mut none: HashMap<(usize, Option<MigrateType>, u8), (u64, u64)> = HashMap::new();
    for &(pfn, order, mt) in pre {
        let zone = a.zone_of_pfn(Pfn(pfn)).unwrap_or(fallback);
        let size = 1u64 << order;
        let typ = MTS[usize::try_from(mt).unwrap_or(1).min(2)];
        let spot = if is_free(a, &taken, pfn, order) {
            Some(pfn)
        } else {
            // The first free aligned place at or after the pfn in its zone, else before,
            // in a pageblock of the block's type (seeding it retypes the pageblock: a
            // seeded pageset's blocks of another type there would change lists when freed)
            // where there is one.
            let (start, end) = spans.get(zone).copied().unwrap_or((0, 0));
            let first = start.div_ceil(size) * size;
            // From where the last moved block of this zone went: the frames the seeded
            // pagesets took are one run, not searched again for each block.
            let from = pfn
                .max(cursor.get(&zone).copied().unwrap_or(0))
                .clamp(first, end)
                & !(size - 1);
            let mut search = |same_type: bool| {
                // The next place to try after `p`: a pageblock of another type is
                // skipped whole.
                let step = |p: u64| {
                    if same_type && a.pageblock_type(Pfn(p)) != Some(typ) {
                        (((p >> PAGEBLOCK_ORDER) + 1) << PAGEBLOCK_ORDER).div_ceil(size) * size
                    } else {
                        p + size
                    }
                };
                let ok = |p: u64| {
                    (!same_type || a.pageblock_type(Pfn(p)) == Some(typ))
                        && is_free(a, &taken, p, order)
                };
                let scan = |mut p: u64, to: u64| {
                    while p < to && p + size <= end {
                        if ok(p) {
                            return Some(p);
                        }
                        p = step(p);
                    }
                    None
                };
                let key = (zone, same_type.then_some(typ), order);
                let (below, after) = none.get(&key).copied().unwrap_or((first, end));
                if let Some(p) = scan(from.max(below), after) {
                    if from <= below {
                        none.insert(key, (p, after));
                    }
                    return Some(p);
                }
                let after = after.min(from);
                let r = scan(below, after);
                none.insert(key, (r.unwrap_or(after).max(below), after));
                r
            };
            let found = search(true).or_else(|| search(false));
            if let Some(p) = found {
                h.moved += 1;
                cursor.insert(zone, p + size);
            }
            found
        };
        let Some(p) = spot else {
            h.failed += 1;
            continue;
        };
        taken.insert(p, p + size);
        let f = Frame::new(Pfn(p), order);
        h.by_zone.entry(zone).or_default().push((f, typ));
        h.pool.entry((pfn, order)).or_default().push(f);
    }
    h
}

/// pagealloc's own free lists of zone `z`, as a [`Shape`].
fn current(a: &Allocator, z: usize) -> Shape {
    let f = super::pagetype::of_allocator(a, z);
    let mut s: Shape = [[0; ORDERS]; 3];
    for (t, name) in ["Unmovable", "Movable", "Reclaimable"].iter().enumerate() {
        if let Some(v) = f.by_type.get(*name) {
            for (o, &n) in v.iter().enumerate().take(ORDERS) {
                s[t][o] = n;
            }
        }
    }
    s
}

/// Seeds zone `z` (named `name`) with free lists: `shape` (the kernel's),
/// less its largest movable blocks where it does not fit (up to a quarter of the pages);
/// where it cannot be placed (a zone whose start is not aligned as the kernel's, such as
/// DMA from pfn 1, lacks the order-10 places), [`unfragmented`] of the zone's free pages;
/// else pagealloc's own free lists as they are; else none (all held back). Returns a
/// note saying which.
pub fn seed_zone(
    a: &Allocator,
    z: usize,
    name: &str,
    shape: Option<Shape>,
    free: u64,
    held: &[(Frame, MigrateType)],
) -> Result<String, String> {
    let seed = |s: Shape| a.seed_free_lists(z, &FreeListSeed { free: s, held });
    let mut why = match shape {
        Some(mut s) => {
            // A zone nearly all free in the kernel leaves pagealloc too few frames to keep
            // beside each block: its largest movable blocks go first until the rest fits.
            let mut fewer = 0u64;
            loop {
                match seed(s) {
                    Ok(r) => {
                        let less = if fewer > 0 {
                            format!(", {fewer} fewer than the kernel's: its largest movable blocks did not fit")
                        } else {
                            String::new()
                        };
                        return Ok(format!(
                            "zone {name}: free lists as the kernel's ({} pages free{less}, {} held back, {} held for frees of blocks allocated before the trace)",
                            r.free, r.held_back, r.held
                        ));
                    }
                    Err(SeedError::FreeListsDoNotFit { short, .. }) if fewer < free / 4 => {
                        let mut cut = 0u64;
                        for o in (0..ORDERS).rev() {
                            while cut < short && s[1][o] > 0 {
                                s[1][o] -= 1;
                                cut += 1 << o;
                            }
                        }
                        if cut == 0 {
                            break format!(
                                "the kernel's free lists do not fit ({short} pages short)"
                            );
                        }
                        fewer += cut;
                    }
                    Err(e) => break format!("the kernel's free lists do not fit ({e})"),
                }
            }
        }
        None => "no /proc/pagetypeinfo in the trace".to_string(),
    };
    match seed(unfragmented(free)) {
        Ok(r) => {
            return Ok(format!(
                "zone {name}: {why}: {} pages free in whole blocks",
                r.free
            ))
        }
        Err(e) => why.push_str(&format!("; nor whole blocks ({e})")),
    }
    let own = current(a, z);
    match seed(own) {
        Ok(r) => Ok(format!(
            "zone {name}: {why}: pagealloc's own {} free pages kept",
            r.free
        )),
        Err(_) => {
            let r = seed([[0; ORDERS]; 3]).map_err(|e| format!("zone {name}: {e}"))?;
            Ok(format!(
                "zone {name}: {why}: no free pages ({} held back)",
                r.held_back
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagealloc::{Config, Layout};

    /// Blocks whose kernel pfn is taken go to the first free place from the last moved
    /// one, of their own pageblock type where there is one: an all-Movable zone has no
    /// Unmovable pageblock, so the typed search fails once and every later Unmovable
    /// block, of its order or larger, goes straight to the untyped one (the result is
    /// the same as searching again); Movable blocks still search by type.
    #[test]
    fn held_blocks_take_the_next_free_places() {
        let layout = Layout::single(1 << 14, 1);
        let a = Allocator::new(&layout, Config::linux_6_6()).unwrap();
        let spans: Vec<(u64, u64)> = layout
            .zones()
            .map(|(_, z)| (z.start_pfn, z.end_pfn()))
            .collect();
        let (u, m) = (MigrateType::Unmovable as i8, MigrateType::Movable as i8);
        let mut pre: Vec<(u64, u8, i8)> = vec![(5, 0, u); 100];
        pre.push((5, 9, u));
        pre.push((3, 0, m));
        pre.push((700, 0, u));
        let h = place_held(&a, &pre, &spans, 0);
        let frames = |pfn: u64, order: u8| -> Vec<u64> {
            h.pool[&(pfn, order)].iter().map(|f| f.pfn.0).collect()
        };
        assert_eq!(frames(5, 0), (5..105).collect::<Vec<_>>());
        // The order-9 block: the first 512-aligned place at or after its pfn.
        assert_eq!(frames(5, 9), vec![512]);
        // A free kernel pfn is its own place whatever the type.
        assert_eq!(frames(3, 0), vec![3]);
        assert_eq!(frames(700, 0), vec![1024]);
        assert_eq!((h.moved, h.failed), (101, 0));
    }
}
