//! The kernel's pageset lists as its events show them, and the blocks they lost without
//! an event.
//!
//! `__rmqueue_pcplist` refills a list (`rmqueue_bulk`: a run of
//! `mm_page_alloc_zone_locked` with `percpu_refill` on the CPU, each event naming the
//! order and the migratetype of the list it fills, its pfn the zone) only when the list is
//! empty. A list is also emptied by allocations that emit no `mm_page_alloc`:
//! `alloc_pages_bulk` (vmalloc's order-0 pages, such as a forked task's stack; page_pool)
//! takes pages off the pageset through `__rmqueue_pcplist` and traces nothing. So at the
//! first event of each refill run the kernel's list was empty, whatever the trace says it
//! held: the blocks a replay's copy still holds there were allocated without a trace.
//!
//! [`refill_starts`] finds each run's first event and, from the blocks the trace put on
//! the list (refills, frees into the pageset) and took off it (allocations, drains), the
//! kernel pfns still on it: the untraced allocations whose pfns are known, so that a later
//! free of one is a free of a block the replay holds.

use std::collections::{HashMap, HashSet};

use super::format::{Event, EventKind};

/// A pageset list: (CPU, zone, order, migratetype).
pub(crate) type ListKey = (u32, usize, u8, i8);

/// The first event of a refill run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RefillStart {
    /// The list the run fills.
    pub(crate) list: ListKey,
    /// Kernel pfns the events left on it, which the kernel's list no longer held.
    pub(crate) lost: Vec<u64>,
}

/// Per event index: the refill runs' first events ([`RefillStart`]). `zone_of` maps a pfn
/// to its zone, `cached` says which orders the pagesets hold.
pub(crate) fn refill_starts(
    ev: &[Event],
    zone_of: impl Fn(u64) -> usize,
    cached: impl Fn(u8) -> bool,
) -> HashMap<usize, RefillStart> {
    let mut starts = HashMap::new();
    // Kernel pfn → the list it is on; each list's pfns.
    let mut on: HashMap<u64, ListKey> = HashMap::new();
    let mut lists: HashMap<ListKey, HashSet<u64>> = HashMap::new();
    // A pageblock's type, as the last event that took a block of it or drained one from
    // it named it: the list a free of it goes to (`get_pfnblock_migratetype`).
    let mut block_mt: HashMap<u64, i8> = HashMap::new();
    // Per CPU: the list of the refill run open on it.
    let mut open: HashMap<u32, ListKey> = HashMap::new();
    let take =
        |on: &mut HashMap<u64, ListKey>, lists: &mut HashMap<ListKey, HashSet<u64>>, pfn: u64| {
            if let Some(k) = on.remove(&pfn) {
                if let Some(l) = lists.get_mut(&k) {
                    l.remove(&pfn);
                }
            }
        };
    for (i, e) in ev.iter().enumerate() {
        if !e.kind.is_page() || e.kind == EventKind::FreeBatched {
            continue;
        }
        let refill = e.kind == EventKind::ZoneLocked && e.aux != 0;
        if !refill {
            open.remove(&e.cpu);
        }
        match e.kind {
            EventKind::ZoneLocked if refill => {
                let k = (e.cpu, zone_of(e.pfn), e.order, e.mt.max(0));
                if open.get(&e.cpu) != Some(&k) {
                    open.insert(e.cpu, k);
                    let mut lost: Vec<u64> = lists
                        .remove(&k)
                        .map(|s| s.into_iter().collect())
                        .unwrap_or_default();
                    lost.sort_unstable();
                    for p in &lost {
                        on.remove(p);
                    }
                    starts.insert(i, RefillStart { list: k, lost });
                }
                take(&mut on, &mut lists, e.pfn);
                on.insert(e.pfn, k);
                lists.entry(k).or_default().insert(e.pfn);
                if e.mt >= 0 {
                    block_mt.insert(e.pfn >> 9, e.mt);
                }
            }
            EventKind::Alloc | EventKind::ZoneLocked | EventKind::PcpuDrain => {
                take(&mut on, &mut lists, e.pfn);
                if e.mt >= 0 && e.kind != EventKind::Alloc {
                    block_mt.insert(e.pfn >> 9, e.mt);
                } else if e.mt >= 0 {
                    block_mt.entry(e.pfn >> 9).or_insert(e.mt);
                }
            }
            EventKind::Free if cached(e.order) => {
                let mt = block_mt.get(&(e.pfn >> 9)).copied().unwrap_or(1);
                if (0..3).contains(&mt) {
                    let k = (e.cpu, zone_of(e.pfn), e.order, mt);
                    take(&mut on, &mut lists, e.pfn);
                    on.insert(e.pfn, k);
                    lists.entry(k).or_default().insert(e.pfn);
                }
            }
            _ => {}
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(kind: EventKind, cpu: u32, pfn: u64, mt: i8, aux: u64) -> Event {
        Event {
            mt,
            aux,
            ..Event::synthetic(cpu, kind, pfn)
        }
    }

    #[test]
    fn a_refill_of_a_list_the_events_left_pages_on_finds_them_lost() {
        use EventKind::*;
        let ev = [
            // Refill of CPU 0's movable list: 4 pages, two allocated.
            page(ZoneLocked, 0, 100, 1, 1),
            page(ZoneLocked, 0, 101, 1, 1),
            page(ZoneLocked, 0, 102, 1, 1),
            page(ZoneLocked, 0, 103, 1, 1),
            page(Alloc, 0, 100, 1, 0),
            page(Alloc, 0, 101, 1, 0),
            // A free onto the list, one drained, a free on CPU 1 (another pageset).
            page(Free, 0, 200, -1, 0),
            page(PcpuDrain, 0, 102, 1, 0),
            page(Free, 1, 300, -1, 0),
            // An unmovable refill on CPU 0 is another list.
            page(ZoneLocked, 0, 400, 0, 1),
            page(Alloc, 0, 400, 0, 0),
            // The movable list refilled again: 103 and 200 were taken untraced.
            page(ZoneLocked, 0, 500, 1, 1),
            page(ZoneLocked, 0, 501, 1, 1),
            page(Alloc, 0, 500, 1, 0),
            // Right after it, a refill with nothing left over.
            page(Alloc, 0, 501, 1, 0),
            page(ZoneLocked, 0, 600, 1, 1),
        ];
        let s = refill_starts(&ev, |_| 2, |o| o <= 3);
        let mut idx: Vec<usize> = s.keys().copied().collect();
        idx.sort_unstable();
        assert_eq!(idx, vec![0, 9, 11, 15]);
        assert_eq!(s[&0].lost, Vec::<u64>::new());
        assert_eq!(s[&9].list, (0, 2, 0, 0));
        assert_eq!(s[&11].list, (0, 2, 0, 1));
        // pfn 200's pageblock (0) is movable: the refill at 100 named it.
        assert_eq!(s[&11].lost, vec![103, 200]);
        assert!(s[&15].lost.is_empty());
    }
}
