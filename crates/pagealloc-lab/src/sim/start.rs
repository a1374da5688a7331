//! A simulation's start state: the pagesets and the zones' free lists as a recorded
//! kernel had them when its run began, in place of empty pagesets at their initial
//! `high` and the headroom model's zones (`pagealloc predict`).
//!
//! Each pageset is started through [`pagealloc::Allocator::seed_pageset`], the core's
//! seed `trace replay` starts its pagesets with: its `high` as the kernel printed it
//! (clamped to `high_min ..= high_max`) and its `count` pages taken from the zone. The
//! kernel's `/proc/zoneinfo` tells no list apart, and whether the pages there were the
//! program's to take varies: `predict page_fault1` at one CPU began on a pageset of
//! 8 619 pages (`high` 30 149) and still refilled 46 times in 65 536 faults, and in
//! another run on 34 005 pages took them all without one refill. So each list gets the
//! blocks the recorded events take from it before it is refilled ([`depths`]; the THP
//! list's too where the config has one), and the rest of the count goes to the order-0
//! lists the events reached and the kernel never refilled, else to a list no event
//! touches: `trace replay`'s own reading of its start ([`crate::trace::lists`]).
//! The zones' free lists are seeded by `trace replay`'s own
//! [`crate::trace::freelists::seed_zone`] from the start `/proc/pagetypeinfo`.

use std::collections::BTreeSet;

use pagealloc::os::zoneinfo::KernelZoneinfo;
use pagealloc::{Allocator, Gfp, PagesetSeed, SeedError, SeedList};
use serde::{Deserialize, Serialize};

use crate::trace::freelists::{self, Shape};

/// A run's start state: pagesets and zones' free lists as a recorded kernel had them.
/// It is saved and loaded as JSON (`predict --save`, `predict --from`:
/// [`crate::predict::saved`]); migratetypes by name, a request's flags as their bits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartState {
    /// The pagesets to start; the others start empty at their initial `high`.
    pub pagesets: Vec<PagesetStart>,
    /// The zones whose free lists start as the kernel's; with any, every zone's memory
    /// not on a pageset or on these lists is held for the whole run (the memory the
    /// rest of the system used), and the headroom model is off.
    pub free_lists: Vec<ZoneFreeStart>,
    /// What the other processes on the program's CPUs did to those CPUs' pagesets while
    /// the program ran ([`Background`]), in the order they did it.
    pub background: Vec<BackgroundOp>,
    /// Each zone's kernel pfns `[start, end)` ([`zone_spans`]): where a block another
    /// process allocated before the run is held when its own pfn is taken.
    #[serde(default)]
    pub zone_spans: Vec<(u64, u64)>,
    /// The program's loops whose unmap ended before RCU freed a loop's page tables
    /// (`predict::foreign::table_free_lag`): the faulting workloads' `table_free_lag`.
    /// Not a state of the allocator: `predict` gives it to the workload.
    #[serde(default)]
    pub table_free_lag: u32,
    /// Per CPU of the program, its prelude's pages the CPU's LRU add batch held past
    /// the prelude's unmap, freed inside the window (`predict::foreign::lru_held`):
    /// thp_mix's `lru_held_thp` and `lru_held_base`. Not a state of the allocator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lru_held: Vec<u32>,
    /// Per CPU of the program, its last loop's pages the CPU's LRU add batch held past
    /// the last unmap, freed after the window (`predict::foreign::lru_tail`):
    /// page_fault1's and thp_mix's `lru_tail`. Not a state of the allocator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lru_tail: Vec<u32>,
    /// Each zone's `managed` pages at the start ([`zone_managed`]; empty: the host's as
    /// it is now): the simulated host's zones have these (`sim::host::host_managed`),
    /// so that a saved run replays the same on a host whose memory has grown since
    /// (`deferred_init=lazy` brings memory online for hours after boot) or on another.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zone_managed: Vec<u64>,
}

impl StartState {
    /// Nothing to start: the simulator's own start state.
    pub fn is_empty(&self) -> bool {
        self.pagesets.is_empty() && self.free_lists.is_empty() && self.background.is_empty()
    }
}

/// What a run's replay command adds when the run began from a start state, which
/// `pagealloc sim` cannot load: a shell comment (the command still runs, without it)
/// that says so and how to replay it with its start state.
pub(crate) fn replay_note(start: &StartState) -> String {
    format!(
        " # started from `pagealloc predict`'s recorded kernel state ({} pagesets, {} zones' free lists, {} other processes' ops), which this command does not carry: `pagealloc predict WORKLOAD --cpus N --save DIR` keeps each run's, `pagealloc predict --from DIR [--config C] [--run K]` replays the simulator from them",
        start.pagesets.len(),
        start.free_lists.len(),
        start.background.len()
    )
}

/// One allocation or free another process made on a program's CPU while the program
/// ran there (`predict`'s recording).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackgroundOp {
    /// The CPU.
    pub cpu: usize,
    /// The program's allocations and frees on that CPU, inside its window, before this
    /// one.
    pub after: u64,
    /// The block's order.
    pub order: u8,
    /// The request (its migratetype: the list it takes from); for a free, the
    /// allocation's.
    #[serde(with = "gfp_bits")]
    pub gfp: Gfp,
    /// An allocation (true) or a free (false): of a block an earlier op allocated, or,
    /// with `before`, of one allocated before the program ran.
    pub alloc: bool,
    /// A free of a block allocated before the program ran: its kernel pfn. The block is
    /// held from the start (at that pfn where it is free after the pagesets are
    /// seeded, [`freelists::place_held`]) and freed when due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    /// Not a block: the vmstat worker's decay of this CPU's pagesets
    /// ([`Allocator::tick`]: `high` lowered by an eighth, the pages above it drained),
    /// where the recording shows its drain (`order`, `gfp`, `alloc`, `before` unused).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tick: bool,
}

/// The other processes' allocations and frees replayed beside the program, each on its
/// CPU once the program has made as many allocations and frees there as it had in the
/// kernel when that process made it. The kernel's pagesets are shared by every process on the
/// CPU: `predict page_fault1 --cpus 2` on this machine, with other builds running,
/// saw other processes take 19 576 movable pages off CPU 1's pageset while the program
/// ran there and free 1 586 (CPU 0: 3 004 and 151), and the program refilled the list
/// they emptied. An allocation goes through the allocator (refilling as the kernel
/// refilled for that process); a free gives back a block such an allocation of that
/// order and migratetype took, or a block allocated before the program ran, held from
/// the start where the kernel had it (`predict page_fault1 --cpus 2` at load 8: 62 991
/// allocations, 444 frees of those and 247 656 frees of blocks allocated before: the
/// frees filled CPU 1's pageset to its `high` and the program's own frees then drained
/// it). Their refills, drains and pages are not the program's: [`Background::counters`]
/// and [`Background::pcp_pages`] take them out of the run's figures.
#[derive(Debug, Default)]
pub struct Background {
    /// Per CPU, its ops in order and the next one due.
    ops: Vec<(Vec<BackgroundOp>, usize)>,
    /// Blocks the allocations took, by (order, migratetype), for the frees.
    held: std::collections::HashMap<(u8, u8), Vec<pagealloc::Frame>>,
    /// Blocks allocated before the run, by kernel (pfn, order) ([`apply`]).
    before: HeldPool,
    /// The allocator's counters the ops moved.
    counters: pagealloc::Counters,
    /// Pages the ops put on the pagesets (net; negative: took off).
    pcp: i64,
}

impl Background {
    /// The schedule of `start`'s background ops, `before` the blocks [`apply`] held for
    /// the frees of blocks allocated before; `None` without any.
    pub(crate) fn of(start: &StartState, before: HeldPool) -> Option<Background> {
        if start.background.is_empty() {
            return None;
        }
        let n = start
            .background
            .iter()
            .map(|o| o.cpu + 1)
            .max()
            .unwrap_or(0);
        let mut ops = vec![(Vec::new(), 0); n];
        for o in &start.background {
            ops[o.cpu].0.push(*o);
        }
        Some(Background {
            ops,
            before,
            ..Default::default()
        })
    }

    /// Runs `cpu`'s ops due once the program has made `done` allocations and frees there.
    pub(crate) fn run_to(&mut self, a: &Allocator, cpu: usize, done: u64) {
        let Some((ops, next)) = self.ops.get_mut(cpu) else {
            return;
        };
        if ops.get(*next).is_none_or(|o| o.after > done) {
            return;
        }
        let (before, pcp) = (a.counters(), a.nr_pcp_pages());
        while let Some(o) = ops.get(*next).filter(|o| o.after <= done) {
            *next += 1;
            let key = (o.order, o.gfp.migratetype() as u8);
            if o.tick {
                a.tick(cpu);
            } else if o.alloc {
                if let Ok(f) = a.alloc_on(cpu, o.order, o.gfp, None) {
                    self.held.entry(key).or_default().push(f);
                }
            } else if let Some(pfn) = o.before {
                if let Some(f) = self.before.get_mut(&(pfn, o.order)).and_then(Vec::pop) {
                    let _ = a.free_on(cpu, f);
                }
            } else if let Some(f) = self.held.get_mut(&key).and_then(Vec::pop) {
                let _ = a.free_on(cpu, f);
            }
        }
        self.counters.merge(&a.counters().since(&before));
        self.pcp += a.nr_pcp_pages() as i64 - pcp as i64;
    }

    /// The allocator's counters the ops moved.
    pub fn counters(&self) -> &pagealloc::Counters {
        &self.counters
    }

    /// `pcp`, the pagesets' pages, less what the ops put there.
    pub fn pcp_pages(&self, pcp: u64) -> u64 {
        (pcp as i64 - self.pcp).max(0) as u64
    }
}

/// One zone's free lists at the start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneFreeStart {
    /// The allocator's zone index.
    pub zone: usize,
    /// The zone's name (for messages).
    pub name: String,
    /// The kernel's free blocks per migratetype and order
    /// ([`crate::trace::freelists::shape_of`]); `None`: whole blocks.
    pub shape: Option<Shape>,
    /// The zone's free pages (`/proc/zoneinfo`'s `pages free`).
    pub free: u64,
}

/// One pageset's start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagesetStart {
    /// The CPU.
    pub cpu: usize,
    /// The allocator's zone index.
    pub zone: usize,
    /// Pages on its lists.
    pub count: u32,
    /// Its `high`.
    pub high: i32,
    /// The blocks the run takes from its lists before they are refilled (the recorded
    /// events' list depths, [`depths`]); the rest of `count` goes on a list no event
    /// touches ([`crate::trace::lists::seed_lists`]).
    #[serde(with = "seed_lists")]
    pub taken: Vec<SeedList>,
    /// Every (order, migratetype) list the recorded events touched on this pageset.
    pub used: BTreeSet<(u8, u8)>,
    /// Every (order, migratetype) list the kernel refilled in the recording; the
    /// order-0 lists in `used` and not here share the rest of `count`
    /// ([`crate::trace::lists::seed_lists`]). `None` (a start state saved without it):
    /// the rest is parked where no event reaches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refilled: Option<BTreeSet<(u8, u8)>>,
    /// Its order-0 refill scale (`alloc_factor`), read off the recording as `trace
    /// replay` reads it ([`crate::trace::start::alloc_factor_of`]); 0: unknown.
    pub alloc_factor: u8,
    /// Its pages freed recently (`free_count`), read off the recording as `trace
    /// replay` reads it ([`crate::trace::start::free_counts`]); 0: unknown.
    pub free_count: i32,
}

/// A request's flags as their bits (`Gfp`'s own value).
mod gfp_bits {
    use pagealloc::Gfp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(g: &Gfp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(g.0)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Gfp, D::Error> {
        u32::deserialize(d).map(Gfp)
    }
}

/// Seed lists as `{order, mt, blocks}` objects, the migratetype by its name
/// (`"Movable"`), so that a saved start state reads and edits by hand.
mod seed_lists {
    use pagealloc::{MigrateType, SeedList};
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct List {
        order: u8,
        mt: String,
        blocks: u32,
    }

    pub(super) fn serialize<S: Serializer>(v: &[SeedList], s: S) -> Result<S::Ok, S::Error> {
        v.iter()
            .map(|l| List {
                order: l.order,
                mt: format!("{:?}", l.mt),
                blocks: l.blocks,
            })
            .collect::<Vec<_>>()
            .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SeedList>, D::Error> {
        Vec::<List>::deserialize(d)?
            .into_iter()
            .map(|l| {
                let mt = MigrateType::ALL
                    .into_iter()
                    .find(|m| format!("{m:?}") == l.mt)
                    .ok_or_else(|| D::Error::custom(format!("unknown migratetype {:?}", l.mt)))?;
                Ok(SeedList {
                    order: l.order,
                    mt,
                    blocks: l.blocks,
                })
            })
            .collect()
    }
}

/// The pagesets of CPUs `0..cpus` in every populated zone of `zi`. Zone indices are the
/// allocator's as a layout built from the same zoneinfo numbers them
/// ([`crate::twin::layout::build`], which `--machine host` is built with): node by node,
/// each node's populated zones in the order printed.
pub fn from_zoneinfo(zi: &KernelZoneinfo, cpus: u32) -> Vec<PagesetStart> {
    pagesets(zi, cpus)
        .map(|(zone, p)| PagesetStart {
            cpu: p.cpu,
            zone,
            count: p.count.clamp(0, i64::from(u32::MAX)) as u32,
            high: p.high.clamp(0, i64::from(i32::MAX)) as i32,
            taken: Vec::new(),
            used: BTreeSet::new(),
            refilled: None,
            alloc_factor: 0,
            free_count: 0,
        })
        .collect()
}

/// The pagesets of CPUs `0..cpus` in every populated zone of `zi`, each with its zone
/// index as [`from_zoneinfo`] numbers them.
fn pagesets(
    zi: &KernelZoneinfo,
    cpus: u32,
) -> impl Iterator<Item = (usize, &pagealloc::os::zoneinfo::KernelPageset)> {
    zi.nodes()
        .into_iter()
        .flat_map(move |n| zi.populated().filter(move |z| z.node == n))
        .enumerate()
        .flat_map(move |(zone, z)| {
            z.pagesets
                .iter()
                .filter(move |p| (p.cpu as u64) < u64::from(cpus))
                .map(move |p| (zone, p))
        })
}

/// The `batch` and `high_min` of the pagesets of CPUs `0..cpus` in `zi`, per (CPU,
/// zone), zones numbered as in [`from_zoneinfo`] (`high_min` 0 where the kernel prints
/// none).
pub fn batches(
    zi: &KernelZoneinfo,
    cpus: u32,
) -> std::collections::HashMap<(u32, usize), (i32, i32)> {
    let c = |v: i64| v.clamp(0, i64::from(i32::MAX)) as i32;
    pagesets(zi, cpus)
        .map(|(zone, p)| {
            (
                (p.cpu as u32, zone),
                (c(p.batch).max(1), c(p.high_min.unwrap_or(0))),
            )
        })
        .collect()
}

/// Each populated zone's pfn span `[start, end)`, numbered as in [`from_zoneinfo`].
pub fn zone_spans(zi: &KernelZoneinfo) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for n in zi.nodes() {
        for z in zi.populated().filter(|z| z.node == n) {
            let s = z.start_pfn.unwrap_or(0);
            out.push((s, s + z.spanned));
        }
    }
    out
}

/// Each populated zone's `managed` pages, numbered as in [`from_zoneinfo`].
pub fn zone_managed(zi: &KernelZoneinfo) -> Vec<u64> {
    zi.nodes()
        .into_iter()
        .flat_map(|n| zi.populated().filter(move |z| z.node == n))
        .map(|z| z.managed)
        .collect()
}

pub use crate::trace::lists::{depths, ListEvent, PagesetLists};

/// Each populated zone's free lists in `zi` as the kernel's start
/// `/proc/pagetypeinfo` (`pagetypeinfo`, empty: none) shows them, zones numbered as in
/// [`from_zoneinfo`]. A table it cannot read starts the zones in whole blocks.
pub fn free_lists_of(zi: &KernelZoneinfo, pagetypeinfo: &str) -> Vec<ZoneFreeStart> {
    let kfree = crate::trace::pagetype::parse(pagetypeinfo).unwrap_or_default();
    let mut out = Vec::new();
    for n in zi.nodes() {
        for z in zi.populated().filter(|z| z.node == n) {
            out.push(ZoneFreeStart {
                zone: out.len(),
                name: z.name.clone(),
                shape: kfree
                    .get(&(n, z.name.clone()))
                    .map(|k| freelists::shape_of(k, z.free).0),
                free: z.free,
            });
        }
    }
    out
}

/// The lists `p` starts with: `trace replay`'s ([`crate::trace::lists::seed_lists`]):
/// its `taken` blocks, the rest of `count` parked on a list no event of the run touches.
fn lists_of(p: &PagesetStart) -> Vec<SeedList> {
    crate::trace::lists::seed_lists(
        u64::from(p.count),
        &PagesetLists {
            taken: p.taken.clone(),
            used: p.used.clone(),
            refilled: p.refilled.clone(),
        },
    )
}

/// Blocks held from the start for the background's frees of blocks allocated before
/// the run, by kernel (pfn, order) ([`freelists::Held::pool`]).
pub(crate) type HeldPool = std::collections::HashMap<(u64, u8), Vec<pagealloc::Frame>>;

/// Applies `start` to `a`: the pagesets through [`Allocator::seed_pageset`], then the
/// blocks the background frees that were allocated before the run held as `trace
/// replay` holds them ([`freelists::place_held`]), then the zones' free lists through
/// `trace replay`'s [`freelists::seed_zone`]. Returns the pages the pagesets hold after
/// and the held blocks (with no zone's free lists started, none are held).
///
/// # Errors
/// One line naming the pageset or zone the allocator refused.
pub(crate) fn apply(a: &Allocator, start: &StartState) -> Result<(u64, HeldPool), String> {
    for p in &start.pagesets {
        let seed = |p: &PagesetStart| {
            a.seed_pageset(
                p.cpu,
                p.zone,
                &PagesetSeed {
                    high: p.high,
                    lists: &lists_of(p),
                    alloc_factor: p.alloc_factor,
                    free_count: p.free_count,
                },
            )
        };
        let r = match seed(p) {
            // A config without THP lists: those blocks are parked as the rest are.
            Err(SeedError::NotAPcpList { .. }) => seed(&PagesetStart {
                taken: p.taken.iter().filter(|l| l.order <= 3).copied().collect(),
                ..p.clone()
            }),
            r => r,
        };
        r.map_err(|e| format!("the start state of CPU {}'s pageset: {e}", p.cpu))?;
    }
    let pre: Vec<(u64, u8, i8)> = start
        .background
        .iter()
        .filter_map(|o| {
            o.before
                .map(|pfn| (pfn, o.order, o.gfp.migratetype() as i8))
        })
        .collect();
    let held = if start.free_lists.is_empty() || pre.is_empty() {
        freelists::Held::default()
    } else {
        freelists::place_held(a, &pre, &start.zone_spans, a.nr_zones().saturating_sub(1))
    };
    for z in &start.free_lists {
        let hz = held.by_zone.get(&z.zone).map_or(&[][..], Vec::as_slice);
        freelists::seed_zone(a, z.zone, &z.name, z.shape, z.free, hz)
            .map_err(|e| format!("the start state's free lists: {e}"))?;
    }
    if !start.free_lists.is_empty() {
        // Filling and freeing the zones left flags the kernel's zones, above their
        // watermarks, do not have.
        for z in 0..a.nr_zones() {
            a.settle_zone_flags(z);
        }
    }
    Ok((a.nr_pcp_pages(), held.pool))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagealloc::{Config, Gfp, Layout, MigrateType};

    /// DMA unpopulated, DMA32 and Normal populated, two CPUs each.
    const ZI: &str = "\
Node 0, zone      DMA
  pages free     0
        managed  0
Node 0, zone    DMA32
  pages free     500
        managed  1000
  pagesets
    cpu: 0
              count:    7
              high:     40
              batch:    1
    cpu: 1
              count:    9
              high:     50
              batch:    1
  start_pfn:           4096
Node 0, zone   Normal
  pages free     900
        managed  2000
  pagesets
    cpu: 0
              count:    300
              high:     4000
              batch:    63
    cpu: 1
              count:    1
              high:     2
              batch:    63
  start_pfn:           1048576
";

    #[test]
    fn zones_numbered_as_the_layout_and_cpus_cut() {
        let zi = KernelZoneinfo::parse(ZI).unwrap();
        let p = |cpu, zone, count, high| PagesetStart {
            cpu,
            zone,
            count,
            high,
            taken: Vec::new(),
            used: BTreeSet::new(),
            refilled: None,
            alloc_factor: 0,
            free_count: 0,
        };
        assert_eq!(from_zoneinfo(&zi, 1), [p(0, 0, 7, 40), p(0, 1, 300, 4000)]);
        assert_eq!(from_zoneinfo(&zi, 2).len(), 4);
        let f = free_lists_of(&zi, "");
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[1].zone, f[1].name.as_str(), f[1].free),
            (1, "Normal", 900)
        );
        assert_eq!(f[1].shape, None); // no pagetypeinfo: whole blocks
    }

    /// A pageset started near its `high` drains on the first free where an empty one
    /// does not, and the started pages sit on no list an allocation takes from: the
    /// first allocation still refills.
    #[test]
    fn started_pageset_drains_where_an_empty_one_does_not() {
        let run = |start: &StartState| {
            let a = Allocator::new(&Layout::single(262_144, 2), Config::default()).unwrap();
            let at_start = apply(&a, start).unwrap().0;
            let before = a.counters();
            let f = a.alloc_on(0, 0, Gfp::MOVABLE, None).unwrap();
            a.free_on(0, f).unwrap();
            let c = a.counters();
            a.validate().unwrap();
            (
                at_start,
                c.pcp_refill - before.pcp_refill,
                c.pcp_drain - before.pcp_drain,
                a.pcp_list_len(0, 0, 0, MigrateType::Reclaimable).unwrap(),
            )
        };
        let a = Allocator::new(&Layout::single(262_144, 2), Config::default()).unwrap();
        let high_min = a.pcp_info(0, 0).unwrap().high_min;
        let start = StartState {
            pagesets: vec![PagesetStart {
                cpu: 0,
                zone: 0,
                count: high_min as u32,
                high: high_min,
                taken: Vec::new(),
                // The run's events reach order-0 Unmovable and Movable.
                used: [(0, 0), (0, 1)].into_iter().collect(),
                refilled: None,
                alloc_factor: 0,
                free_count: 0,
            }],
            free_lists: Vec::new(),
            background: Vec::new(),
            zone_spans: Vec::new(),
            table_free_lag: 0,
            lru_held: Vec::new(),
            lru_tail: Vec::new(),
            zone_managed: Vec::new(),
        };
        let (pages, refills, drains, parked) = run(&start);
        assert_eq!(pages, high_min as u64);
        assert_eq!(refills, 1);
        assert!(drains >= 1, "a pageset started at high drains on a free");
        assert!(
            parked > 0,
            "the started pages sit on the list no event reached"
        );
        assert_eq!(run(&StartState::default()), (0, 1, 0, 0));
    }

    /// A list's depth is the deepest its running sum went; the blocks go first, the rest
    /// of the count goes to the order-0 list reached and never refilled (without the
    /// refills known, to order 0 of a type no event reached), and a count too small for
    /// the depths keeps them.
    #[test]
    fn depths_fill_lists_first_and_park_the_rest() {
        let ev = |delta, order, mt| ListEvent {
            cpu: 0,
            zone: 1,
            order,
            mt,
            delta,
            refill: false,
        };
        // Movable order 0: -1 -1 +1 -1 -1 (min -3), then a refill; a THP taken.
        let mut v: Vec<ListEvent> = [-1, -1, 1, -1, -1, 1, 1, 1]
            .iter()
            .enumerate()
            .map(|(i, &d)| ListEvent {
                refill: i >= 5,
                ..ev(d, 0, 1)
            })
            .collect();
        v.push(ev(-1, 9, 1));
        v.push(ev(1, 0, 0)); // a free only: no depth, but the list is reached
        let d = depths(v);
        let three = SeedList {
            order: 0,
            mt: MigrateType::Movable,
            blocks: 3,
        };
        let thp = SeedList {
            order: 9,
            mt: MigrateType::Movable,
            blocks: 1,
        };
        let lists = &d[&(0, 1)];
        assert_eq!(lists.taken, [three, thp]);
        let mut p = PagesetStart {
            cpu: 0,
            zone: 1,
            count: 600,
            high: 1000,
            taken: lists.taken.clone(),
            used: lists.used.clone(),
            refilled: lists.refilled.clone(),
            alloc_factor: 0,
            free_count: 0,
        };
        // Unmovable order 0 is reached and never refilled: the rest goes there.
        let rest = |mt| SeedList {
            order: 0,
            mt,
            blocks: 85,
        };
        assert_eq!(lists_of(&p), [rest(MigrateType::Unmovable), three, thp]);
        // Without the refills: on Reclaimable, which no event reached.
        p.refilled = None;
        assert_eq!(lists_of(&p), [three, thp, rest(MigrateType::Reclaimable)]);
        // A count below the depths keeps them (they time the refills).
        p.count = 2;
        assert_eq!(lists_of(&p), [three, thp]);
    }

    /// Another process's allocations on the program's CPU empty the list the program
    /// takes from, when the program has made as many allocations as in the kernel; the
    /// program then refills where it would not have, and the background's own refill and
    /// pages are kept apart.
    #[test]
    fn background_ops_empty_the_programs_list() {
        let mv = Gfp::MOVABLE;
        let seeded = SeedList {
            order: 0,
            mt: MigrateType::Movable,
            blocks: 100,
        };
        let start = |background: Vec<BackgroundOp>| StartState {
            pagesets: vec![PagesetStart {
                cpu: 0,
                zone: 0,
                count: 100,
                high: 1000,
                taken: vec![seeded],
                used: [(0, 1)].into_iter().collect(),
                refilled: None,
                alloc_factor: 0,
                free_count: 0,
            }],
            free_lists: Vec::new(),
            background,
            zone_spans: Vec::new(),
            table_free_lag: 0,
            lru_held: Vec::new(),
            lru_tail: Vec::new(),
            zone_managed: Vec::new(),
        };
        let op = |after, alloc| BackgroundOp {
            cpu: 0,
            after,
            order: 0,
            gfp: mv,
            alloc,
            before: None,
            tick: false,
        };
        // After the program's 10th allocation, another process takes 85 pages and
        // then frees one of them.
        let mut ops: Vec<BackgroundOp> = (0..85).map(|_| op(10, true)).collect();
        ops.push(op(10, false));
        // The program: 20 allocations.
        let program = |st: &StartState| {
            let a = Allocator::new(&Layout::single(262_144, 1), Config::default()).unwrap();
            apply(&a, st).unwrap();
            let mut bg = Background::of(st, HeldPool::default());
            let before = a.counters();
            for i in 0..20u64 {
                if let Some(bg) = bg.as_mut() {
                    bg.run_to(&a, 0, i);
                }
                a.alloc_on(0, 0, mv, None).unwrap();
            }
            let all = a.counters().since(&before);
            let pcp = a.nr_pcp_pages();
            a.validate().unwrap();
            (all, bg, pcp)
        };
        let (alone, none, _) = program(&start(Vec::new()));
        assert!(none.is_none());
        assert_eq!(alone.pcp_refill, 0, "100 seeded pages serve 20 allocations");
        let (all, bg, pcp) = program(&start(ops));
        let bg = bg.unwrap();
        // 10 + 84 off the list: the program's 17th allocation refills.
        assert_eq!(bg.counters().pcp_refill, 0);
        assert_eq!(all.since(bg.counters()).pcp_refill, 1);
        // The pagesets less the other process's 84 pages taken.
        assert_eq!(bg.pcp_pages(pcp), pcp + 84);
    }

    /// A list the kernel never refilled held at least what its events took: the rest
    /// of the count is shared by such lists, so a simulated program that takes a few
    /// more unmovable pages before giving any back (page tables freed a loop later than
    /// RCU freed them) does not refill where the kernel did not. A list the kernel
    /// refilled held exactly its depth and still refills at the same allocation; a
    /// start state saved without `refilled` parks the rest and refills.
    #[test]
    fn a_list_the_kernel_never_refilled_is_not_refilled() {
        use crate::trace::format::{Event, EventKind};
        let page = |kind, pfn, mt: i8, aux| Event {
            mt,
            aux,
            ..Event::synthetic(0, kind, pfn)
        };
        // The kernel: 30 unmovable pages taken, 20 given back, 10 more taken (depth
        // 30, never refilled); 50 movable pages taken, then a refill, then 10 more.
        let mut ev: Vec<Event> = (0..30).map(|p| page(EventKind::Alloc, p, 0, 0)).collect();
        ev.extend((0..20).map(|p| page(EventKind::Free, p, -1, 0)));
        ev.extend((100..110).map(|p| page(EventKind::Alloc, p, 0, 0)));
        ev.extend((200..250).map(|p| page(EventKind::Alloc, p, 1, 0)));
        ev.extend((300..363).map(|p| page(EventKind::ZoneLocked, p, 1, 1)));
        ev.extend((300..310).map(|p| page(EventKind::Alloc, p, 1, 0)));
        let reading = crate::trace::lists::list_events(&ev, |_| 0, |o| o <= 3, &Default::default());
        let lists = depths(reading.events).remove(&(0, 0)).unwrap();
        assert_eq!(lists.refilled, Some([(0u8, 1u8)].into_iter().collect()));
        let start = |refilled: Option<BTreeSet<(u8, u8)>>| StartState {
            pagesets: vec![PagesetStart {
                cpu: 0,
                zone: 0,
                count: 500,
                high: 4000,
                taken: lists.taken.clone(),
                used: lists.used.clone(),
                refilled,
                alloc_factor: 0,
                free_count: 0,
            }],
            ..StartState::default()
        };
        // Refills of `n` allocations of `gfp` from the start state.
        let refills = |st: &StartState, gfp: Gfp, n: usize| {
            let a = Allocator::new(&Layout::single(262_144, 1), Config::default()).unwrap();
            apply(&a, st).unwrap();
            let before = a.counters();
            for _ in 0..n {
                a.alloc_on(0, 0, gfp, None).unwrap();
            }
            a.validate().unwrap();
            a.counters().since(&before).pcp_refill
        };
        let read = start(lists.refilled.clone());
        assert_eq!(
            refills(&read, Gfp::KERNEL, 35),
            0,
            "{:?}",
            lists_of(&read.pagesets[0])
        );
        assert_eq!(refills(&read, Gfp::MOVABLE, 50), 0);
        assert_eq!(refills(&read, Gfp::MOVABLE, 51), 1);
        let unknown = start(None);
        assert_eq!(refills(&unknown, Gfp::KERNEL, 35), 1);
    }

    /// A run from a start state says in its replay command that the command does not
    /// carry it.
    #[test]
    fn the_replay_command_names_the_start_state() {
        use crate::sim::{replay_command, SimOptions};
        let w = crate::workload::build("page_fault1", crate::workload::Scale::Full, &[]).unwrap();
        let m = crate::sim::Machine::by_name("host").unwrap();
        let mut o = SimOptions::new(m, Config::default());
        let plain = replay_command(w.as_ref(), &o);
        assert!(!plain.contains('#'), "{plain}");
        o.start.background.push(BackgroundOp {
            cpu: 0,
            after: 0,
            order: 0,
            gfp: Gfp::MOVABLE,
            alloc: true,
            before: None,
            tick: false,
        });
        let cmd = replay_command(w.as_ref(), &o);
        assert!(cmd.starts_with(&plain), "{cmd}");
        assert!(cmd.contains("# started from `pagealloc predict`"), "{cmd}");
        assert!(cmd.contains("1 other processes' ops"), "{cmd}");
    }

    /// Other processes' frees of blocks allocated before the run: held from the start
    /// (the zone's free pages stay the kernel's), freed onto the CPU's pageset when due
    /// and kept out of the program's pageset pages; a decay tick lowers `high` and
    /// drains what is above it, the background's drain, not the program's.
    #[test]
    fn frees_of_blocks_allocated_before_and_decay_ticks_run_beside_the_program() {
        let a = Allocator::new(&Layout::single(262_144, 1), Config::default()).unwrap();
        let op = |after, before: Option<u64>, tick| BackgroundOp {
            cpu: 0,
            after,
            order: 0,
            gfp: Gfp::MOVABLE,
            alloc: false,
            before,
            tick,
        };
        // 3 000 pages freed after the program's first op, then the vmstat worker.
        let mut background: Vec<BackgroundOp> = (0..3000u64)
            .map(|i| op(1, Some(100_000 + i), false))
            .collect();
        background.push(op(2, None, true));
        // A pageset at a `high` above its `high_min`, full.
        let start = StartState {
            pagesets: vec![PagesetStart {
                cpu: 0,
                zone: 0,
                count: 20_000,
                high: 20_000,
                taken: Vec::new(),
                used: [(0, 1)].into_iter().collect(),
                refilled: None,
                alloc_factor: 0,
                free_count: 0,
            }],
            free_lists: vec![ZoneFreeStart {
                zone: 0,
                name: "Normal".into(),
                shape: None,
                free: 65_536,
            }],
            background,
            zone_spans: vec![(0, 262_144)],
            table_free_lag: 0,
            lru_held: Vec::new(),
            lru_tail: Vec::new(),
            zone_managed: Vec::new(),
        };
        let (pages, held) = apply(&a, &start).unwrap();
        assert_eq!(pages, 20_000);
        assert_eq!(held.values().map(Vec::len).sum::<usize>(), 3000);
        assert_eq!(a.nr_free_pages(), 65_536, "held blocks are not free");
        let mut bg = Background::of(&start, held).unwrap();
        bg.run_to(&a, 0, 1);
        let on_pcp = a.nr_pcp_pages();
        assert!(on_pcp > 15_000 && on_pcp <= 23_000, "{on_pcp}");
        assert_eq!(bg.counters().pgfree, 3000, "every held block freed");
        assert_eq!(bg.pcp_pages(on_pcp), 20_000, "not the program's pages");
        let high = a.pcp_info(0, 0).unwrap().high;
        let drains = a.counters().decay_drain;
        bg.run_to(&a, 0, 2);
        let after = a.pcp_info(0, 0).unwrap();
        // high − high/8, or count − batch << 5 where that is more; the rest drained.
        assert!(
            after.high < high && after.high >= high - high / 8,
            "{high} -> {}",
            after.high
        );
        assert!(a.counters().decay_drain > drains);
        assert!(after.count <= after.high.max(after.high_min));
        assert_eq!(bg.counters().decay_drain, a.counters().decay_drain);
        a.validate().unwrap();
    }

    /// Free lists started as a kernel's hold the rest of the zone: the allocator's free
    /// pages are the kernel's.
    #[test]
    fn free_lists_hold_the_rest() {
        let a = Allocator::new(&Layout::single(262_144, 1), Config::default()).unwrap();
        let start = StartState {
            pagesets: Vec::new(),
            free_lists: vec![ZoneFreeStart {
                zone: 0,
                name: "Normal".into(),
                shape: None,
                free: 65_536,
            }],
            background: Vec::new(),
            zone_spans: Vec::new(),
            table_free_lag: 0,
            lru_held: Vec::new(),
            lru_tail: Vec::new(),
            zone_managed: Vec::new(),
        };
        apply(&a, &start).unwrap();
        assert_eq!(a.nr_free_pages(), 65_536);
        a.validate().unwrap();
    }
}
