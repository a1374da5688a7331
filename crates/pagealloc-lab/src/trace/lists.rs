//! The pagesets' lists at the start of a stream, read off its events: one reading for
//! `trace replay` and for `predict`'s simulator start (sim::start).
//!
//! # How
//! The kernel's `/proc/zoneinfo` gives each pageset's `count`, not its lists. The events
//! show what each (CPU, zone, order, migratetype) list gained and lost (`list_events`):
//! an allocation of a cached order takes a block off the list of its migratetype, a free
//! puts one back on the list of the type it was allocated as (a block allocated before
//! the stream: its pageblock's type as the events name it, else Movable), each block of a
//! refill (`mm_page_alloc_zone_locked`, `percpu_refill`) adds one to the list it names,
//! each drained block (`mm_page_pcpu_drain`) takes one off, and the blocks the list lost
//! without an event before a refill of it (the untraced allocations, `trace::untraced`)
//! take theirs at that refill. The deepest a list's running sum goes below zero
//! ([`depths`]) is the blocks it held at the start: the kernel refills a list only when it
//! is empty, so those blocks were there.
//!
//! A list the kernel refilled held exactly its depth (it was empty at the first refill);
//! one it never refilled held at least that. The rest of `count` ([`seed_lists`]) is on
//! lists the events do not split: it is shared by the order-0 lists the stream reached and
//! the kernel never refilled, whose blocks served every allocation the kernel made from
//! them (a simulated program that takes a page more or sooner than the kernel's, page
//! tables freed at a loop's unmap rather than mid-loop by RCU, then refills no more than
//! the kernel did). With none, or the refills unknown, it is parked on order 0 of a
//! migratetype the stream neither takes from nor gives to on that pageset (else order 3
//! of one), so that it counts towards `high` (which sizes refills and starts drains) and
//! leaves by drains only: a parked block on a list the kernel refilled would serve an
//! allocation the kernel served from a refill. Every list's depth is kept even where the
//! depths add up to more than `count` (the zoneinfo is read a moment before the events
//! begin): the depths are what time the refills.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use pagealloc::{MigrateType, SeedList};

use super::format::{self, Event, EventKind};
use super::untraced::RefillStart;

/// Blocks the kernel handed out and has not freed, by first pfn. A block the kernel
/// split (`split_page`: one allocation, its pages freed one by one) is freed in
/// pagealloc when its last page is.
pub(crate) struct Live<T> {
    pub(crate) blocks: HashMap<u64, (u8, u64, T)>,
}

/// What a free found.
pub(crate) enum Freed<T> {
    /// The whole block (or its last page): free this.
    Whole(T),
    /// A page of a split block whose other pages are still out.
    Part,
    /// Nothing the trace allocated.
    Unknown,
}

impl<T> Live<T> {
    pub(crate) fn new() -> Self {
        Live {
            blocks: HashMap::new(),
        }
    }
    pub(crate) fn insert(&mut self, pfn: u64, order: u8, v: T) -> Option<T> {
        self.blocks
            .insert(pfn, (order, 1u64 << order.min(20), v))
            .map(|x| x.2)
    }
    pub(crate) fn free(&mut self, pfn: u64, order: u8) -> Freed<T> {
        for o in order..=pagealloc::MAX_ORDER {
            let head = pfn & !((1u64 << o) - 1);
            let Some(b) = self.blocks.get_mut(&head) else {
                continue;
            };
            if b.0 < o || (b.0 == order && head != pfn) {
                continue;
            }
            b.1 = b.1.saturating_sub(1u64 << order.min(20));
            if b.1 == 0 {
                let (_, _, v) = self.blocks.remove(&head).expect("present");
                return Freed::Whole(v);
            }
            return Freed::Part;
        }
        Freed::Unknown
    }
}

/// One change of a pageset list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListEvent {
    /// The CPU.
    pub cpu: usize,
    /// The allocator's zone index (`usize::MAX`: no zone).
    pub zone: usize,
    /// The block's order.
    pub order: u8,
    /// The list's migratetype (0 Unmovable, 1 Movable, 2 Reclaimable, 3 HighAtomic).
    pub mt: u8,
    /// Blocks the list gained (+1) or lost (−1).
    pub delta: i8,
    /// A block of a kernel refill (`percpu_refill`): the list was empty.
    pub refill: bool,
}

/// A stream's list changes, and the blocks it freed without having allocated them.
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// Every list change, in event order.
    pub events: Vec<ListEvent>,
    /// Blocks freed that the stream did not allocate: (kernel pfn, order, migratetype).
    pub before: Vec<(u64, u8, i8)>,
}

/// Reads the list changes of `ev` ([module docs](self)). `zone_of` maps a pfn to its
/// zone, `cached` says which orders the pagesets hold, `untraced` is the refill runs'
/// first events with the blocks their lists lost without an event.
pub(crate) fn list_events(
    ev: &[Event],
    zone_of: impl Fn(u64) -> usize,
    cached: impl Fn(u8) -> bool,
    untraced: &HashMap<usize, RefillStart>,
) -> Reading {
    let block_mt = format::pageblock_types(ev);
    let mut live: Live<i8> = Live::new();
    let mut out = Reading::default();
    for (i, e) in ev.iter().enumerate() {
        let push = |out: &mut Reading, cpu: u32, zone, order, mt: i8, delta| {
            out.events.push(ListEvent {
                cpu: cpu as usize,
                zone,
                order,
                mt: mt.max(0) as u8,
                delta,
                refill: delta > 0 && e.kind == EventKind::ZoneLocked,
            });
        };
        if let Some(st) = untraced.get(&i) {
            let (c, z, order, mt) = st.list;
            for &p in &st.lost {
                live.insert(p, order, mt);
                push(&mut out, c, z, order, mt, -1);
            }
        }
        match e.kind {
            EventKind::Alloc => {
                live.insert(e.pfn, e.order, e.mt);
                if cached(e.order) {
                    push(&mut out, e.cpu, zone_of(e.pfn), e.order, e.mt, -1);
                }
            }
            EventKind::Free => {
                let mt = match live.free(e.pfn, e.order) {
                    Freed::Whole(mt) => mt,
                    Freed::Part => continue,
                    Freed::Unknown => {
                        let mt = block_mt.get(&(e.pfn >> 9)).copied().unwrap_or(1);
                        out.before.push((e.pfn, e.order, mt));
                        mt
                    }
                };
                if cached(e.order) {
                    push(&mut out, e.cpu, zone_of(e.pfn), e.order, mt, 1);
                }
            }
            EventKind::ZoneLocked if e.aux != 0 => {
                push(&mut out, e.cpu, zone_of(e.pfn), e.order, e.mt, 1);
            }
            EventKind::PcpuDrain => push(&mut out, e.cpu, zone_of(e.pfn), e.order, e.mt, -1),
            _ => {}
        }
    }
    out
}

/// One pageset's lists as the events show them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PagesetLists {
    /// The blocks each list lost below where it began (the deepest its running sum went):
    /// the blocks on it at the start. Smallest orders first.
    pub taken: Vec<SeedList>,
    /// Every (order, migratetype) list an event touched.
    pub used: BTreeSet<(u8, u8)>,
    /// Every (order, migratetype) list the kernel refilled in the recording (its depth
    /// is the blocks it held: it was empty at the first); `None`: not known (a start
    /// state saved without it).
    pub refilled: Option<BTreeSet<(u8, u8)>>,
}

/// Per pageset (CPU, zone), its lists ([`PagesetLists`]) from the list changes.
pub fn depths(ev: impl IntoIterator<Item = ListEvent>) -> BTreeMap<(usize, usize), PagesetLists> {
    let mut run: BTreeMap<(usize, usize, u8, u8), (i64, i64)> = BTreeMap::new();
    let mut refilled: BTreeSet<(usize, usize, u8, u8)> = BTreeSet::new();
    for e in ev {
        let r = run.entry((e.cpu, e.zone, e.order, e.mt)).or_insert((0, 0));
        r.0 += i64::from(e.delta);
        r.1 = r.1.min(r.0);
        if e.refill {
            refilled.insert((e.cpu, e.zone, e.order, e.mt));
        }
    }
    let mut out: BTreeMap<(usize, usize), PagesetLists> = BTreeMap::new();
    for ((cpu, zone, order, mt), (_, min)) in run {
        let p = out.entry((cpu, zone)).or_default();
        p.used.insert((order, mt));
        let r = p.refilled.get_or_insert_with(BTreeSet::new);
        if refilled.contains(&(cpu, zone, order, mt)) {
            r.insert((order, mt));
        }
        if min < 0 {
            if let Some(mt) = mt_of(mt) {
                p.taken.push(SeedList {
                    order,
                    mt,
                    blocks: (-min).min(i64::from(u32::MAX)) as u32,
                });
            }
        }
    }
    out
}

fn mt_of(mt: u8) -> Option<MigrateType> {
    match mt {
        0 => Some(MigrateType::Unmovable),
        1 => Some(MigrateType::Movable),
        2 => Some(MigrateType::Reclaimable),
        _ => None,
    }
}

/// The lists a pageset of `count` pages starts with: `lists.taken`, then the rest of
/// `count` shared equally among the order-0 lists the events took from or gave to and
/// the kernel never refilled (where `lists.refilled` is known), else parked on order 0
/// of the first migratetype (Unmovable, Movable, Reclaimable) no event touched there,
/// else on order 3 of one (blocks of 8 pages, rounded up), else on order-0 Reclaimable.
pub fn seed_lists(count: u64, lists: &PagesetLists) -> Vec<SeedList> {
    let mut out = lists.taken.clone();
    out.sort_unstable_by_key(|l| (l.order, l.mt as u8));
    let have: u64 = out.iter().map(|l| u64::from(l.blocks) << l.order).sum();
    let rest = count.saturating_sub(have);
    if rest == 0 {
        return out;
    }
    let unrefilled: Vec<u8> = lists.refilled.as_ref().map_or_else(Vec::new, |r| {
        (0..3u8)
            .filter(|&m| lists.used.contains(&(0, m)) && !r.contains(&(0, m)))
            .collect()
    });
    if !unrefilled.is_empty() {
        let n = unrefilled.len() as u64;
        for (i, &m) in unrefilled.iter().enumerate() {
            let share = rest / n + u64::from((i as u64) < rest % n);
            add(&mut out, 0, m, share);
        }
        out.sort_unstable_by_key(|l| (l.order, l.mt as u8));
        return out;
    }
    let free = |order: u8| (0..3u8).find(|&m| !lists.used.contains(&(order, m)));
    let (order, mt) = free(0)
        .map(|m| (0u8, m))
        .or_else(|| free(3).map(|m| (3u8, m)))
        .unwrap_or((0, 2));
    add(&mut out, order, mt, (rest + (1 << order) - 1) >> order);
    out
}

/// Adds `blocks` blocks to the (`order`, `mt`) list of `out`.
fn add(out: &mut Vec<SeedList>, order: u8, mt: u8, blocks: u64) {
    let mt = mt_of(mt).unwrap_or(MigrateType::Reclaimable);
    let blocks = blocks.min(u64::from(u32::MAX)) as u32;
    match out.iter_mut().find(|l| l.order == order && l.mt == mt) {
        Some(l) => l.blocks = l.blocks.saturating_add(blocks),
        None => out.push(SeedList { order, mt, blocks }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(kind: EventKind, cpu: u32, pfn: u64, order: u8, mt: i8, aux: u64) -> Event {
        Event {
            mt,
            aux,
            order,
            ..Event::synthetic(cpu, kind, pfn)
        }
    }

    /// A list's depth is the deepest its running sum went, counting refills, drains and
    /// the blocks lost without an event; a free goes back to the list its block was
    /// allocated from; a block freed unseen is listed as from before.
    #[test]
    fn depths_count_every_change_and_the_untraced_blocks() {
        use EventKind::*;
        let ev = [
            page(Alloc, 0, 10, 0, 1, 0),      // movable -1
            page(Alloc, 0, 11, 0, 0, 0),      // unmovable -1
            page(Free, 0, 10, 0, -1, 0),      // back on movable
            page(Alloc, 0, 12, 0, 1, 0),      // movable -1
            page(Alloc, 0, 13, 0, 1, 0),      // movable -2
            page(ZoneLocked, 0, 20, 0, 1, 1), // the refill: its list was empty
            page(Free, 0, 4096, 0, -1, 0),    // unseen: pageblock 8 unknown, Movable
            page(PcpuDrain, 0, 30, 3, 2, 0),  // an order-3 reclaimable block drained
            page(Alloc, 0, 40, 5, 1, 0),      // not a cached order
        ];
        let mut untraced = HashMap::new();
        untraced.insert(
            5,
            RefillStart {
                list: (0, 7, 0, 1),
                lost: vec![50, 51],
            },
        );
        let r = list_events(&ev, |_| 7, |o| o <= 3, &untraced);
        assert_eq!(r.before, vec![(4096, 0, 1)]);
        let d = depths(r.events);
        let p = &d[&(0, 7)];
        let l = |order, mt, blocks| SeedList { order, mt, blocks };
        assert_eq!(
            p.taken,
            vec![
                l(0, MigrateType::Unmovable, 1),
                l(0, MigrateType::Movable, 4),
                l(3, MigrateType::Reclaimable, 1),
            ]
        );
        assert!(p.used.contains(&(0, 1)) && !p.used.contains(&(0, 2)));
        assert_eq!(p.refilled, Some([(0u8, 1u8)].into_iter().collect()));
    }

    /// The rest of the count goes to order 0 of a type no event touched, else order 3;
    /// depths beyond the count are kept.
    #[test]
    fn the_rest_is_parked_where_no_event_reaches() {
        let mv = SeedList {
            order: 0,
            mt: MigrateType::Movable,
            blocks: 5,
        };
        let mut p = PagesetLists {
            taken: vec![mv],
            used: [(0, 1), (0, 0)].into_iter().collect(),
            refilled: None,
        };
        let parked = |order, blocks| SeedList {
            order,
            mt: MigrateType::Reclaimable,
            blocks,
        };
        assert_eq!(seed_lists(12, &p), vec![mv, parked(0, 7)]);
        assert_eq!(seed_lists(3, &p), vec![mv]);
        p.used.insert((0, 2));
        let un3 = SeedList {
            order: 3,
            mt: MigrateType::Unmovable,
            blocks: 1,
        };
        assert_eq!(seed_lists(12, &p), vec![mv, un3]);
        // Known refills: the rest is shared by the order-0 lists reached and never
        // refilled, the first the odd page.
        p.refilled = Some([(0, 1)].into_iter().collect());
        let l = |mt, blocks| SeedList {
            order: 0,
            mt,
            blocks,
        };
        assert_eq!(
            seed_lists(12, &p),
            vec![
                l(MigrateType::Unmovable, 4),
                mv,
                l(MigrateType::Reclaimable, 3)
            ]
        );
        p.refilled = Some([(0, 0), (0, 1), (0, 2)].into_iter().collect());
        assert_eq!(seed_lists(12, &p), vec![mv, un3]);
    }
}
