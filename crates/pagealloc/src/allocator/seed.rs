//! Start a pageset or a zone's free lists from a given state: [`Allocator::seed_pageset`],
//! [`Allocator::seed_free_lists`].
//!
//! # Design
//! A recorded kernel stream (the lab's `trace replay`) or a checkpointed run begins with
//! pagesets that already hold pages and whose `high` the auto-tuning has moved anywhere
//! between `high_min` and `high_max`. Reaching that state by allocating and freeing
//! would move `high`, `alloc_factor` and `free_count` as a side effect, and `high` could
//! only be approached, never set. `seed_pageset` writes the state directly, through the
//! same paths the allocator's own decisions use: the pageset is drained
//! (`drain_pages_zone`), each list is filled from the zone's buddy lists by
//! `rmqueue_bulk` under the pageset lock and the zone lock (the blocks leave the zone's
//! free pages as a refill's do), and `high` and the tuning fields are written under the
//! pageset lock. The pageblocks of each list's blocks take the list's type, as those of a
//! kernel list's pages have (its refills claim fallback blocks; its frees come from such
//! pageblocks). `take_from_pcp_list` takes blocks off one list as `alloc_pages_bulk` does,
//! for a replay whose kernel took pages without tracing them. The old contents' return counts as the drain it is; the fill counts
//! no refill (the zone-lock acquisitions are counted as usual).
//!
//! The same stream began with the zones' free lists in some shape, which decides where a
//! refill is served from (`ALLOC_NOFRAGMENT` skips a zone with no free block of the
//! request's type and no free pageblock) and whether a high-order watermark test fails.
//! `seed_free_lists` gives a zone that shape (free blocks per type and order, as
//! `/proc/pagetypeinfo` counts them) out of its free memory, under the zone lock: the
//! blocks are placed so that none has a free buddy of its order, and the free memory
//! left over is marked allocated, as the memory in use when the state was recorded.
//!
//! # Invariants
//! `count` is the sum of the lists, as everywhere. A seed may leave `high` or `count`
//! outside the bounds the tuning keeps (a kernel pageset can be, after a sizing change);
//! the pageset is then marked resized, as after `set_pcp_sizes`, and the next refill or
//! tick that finds it inside its bounds clears the mark.

use super::Allocator;
use crate::frame::{
    Frame, MigrateType, Pfn, MAX_ORDER, NR_MIGRATETYPES, NR_ORDERS, NR_PCPTYPES, PAGEBLOCK_ORDER,
};
use crate::memmap::State;
use crate::pcp::{Pageset, PcpList};
use crate::stats::PcpInfo;
use crate::tune;
use crate::zone::{Zone, WMARK_HIGH, WMARK_LOW, ZONE_BELOW_HIGH, ZONE_BOOSTED_WATERMARK};
use ::alloc::collections::BTreeMap;
use ::alloc::vec::Vec;
use core::fmt;

/// One list of a [`PagesetSeed`]: `blocks` blocks of `order` on the list of `mt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedList {
    /// Order of the blocks (a pcp order: 0..=3, or the THP order with THP lists).
    pub order: u8,
    /// Migratetype of the list (Unmovable, Movable or Reclaimable).
    pub mt: MigrateType,
    /// Blocks to put on it.
    pub blocks: u32,
}

/// The state [`Allocator::seed_pageset`] starts a pageset from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PagesetSeed<'a> {
    /// `high` (`/proc/zoneinfo`'s pageset `high`), written as given unless it lies
    /// outside `high_min ..= max(high_max, count)`, where it is clamped.
    pub high: i32,
    /// The lists' contents.
    pub lists: &'a [SeedList],
    /// Order-0 refill scale exponent (clamped to `CONFIG_PCP_BATCH_SCALE_MAX`).
    pub alloc_factor: u8,
    /// Pages freed recently (the free_high test's `free_count`).
    pub free_count: i32,
}

/// Why a seed was refused. The pageset is unchanged when one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedError {
    /// The CPU or the zone does not exist.
    NoSuchPageset {
        /// CPU.
        cpu: usize,
        /// Zone index.
        zone: usize,
    },
    /// The pagesets do not cache this order (`pcp_allowed_order`) or the list's type is
    /// not a pcp type.
    NotAPcpList {
        /// Order.
        order: u8,
        /// Migratetype.
        mt: MigrateType,
    },
    /// A held block of [`FreeListSeed`] is misaligned, or not wholly free in the zone
    /// (or overlaps another held block).
    HeldNotFree {
        /// Its first frame.
        pfn: Pfn,
        /// Its order.
        order: u8,
    },
    /// The zone's free memory cannot take the [`FreeListSeed`]'s blocks with a frame
    /// held beside each.
    FreeListsDoNotFit {
        /// Zone index.
        zone: usize,
        /// Pages that found no place.
        short: u64,
    },
}

impl fmt::Display for SeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeedError::NoSuchPageset { cpu, zone } => {
                write!(f, "no pageset for CPU {cpu} in zone {zone}")
            }
            SeedError::NotAPcpList { order, mt } => {
                write!(f, "the pagesets have no list of order {order} for {mt:?}")
            }
            SeedError::HeldNotFree { pfn, order } => {
                write!(f, "held block {pfn}/o{order} is misaligned or not wholly free")
            }
            SeedError::FreeListsDoNotFit { zone, short } => write!(
                f,
                "zone {zone}'s free memory cannot take the free lists asked for ({short} pages short)"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SeedError {}

impl Allocator {
    /// Start the pageset of (`cpu`, `zone`) from `seed`: drain it, fill each list with
    /// blocks taken from the zone's free lists (as `rmqueue_bulk` takes them, falling
    /// back to other types as a refill does), then write `high`, `alloc_factor` and
    /// `free_count`. Lists whose blocks the zone cannot supply are filled as far as it
    /// can (the returned `count` says how far). Returns the pageset's state after.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout, MigrateType, PagesetSeed, SeedList};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?; // 1 GiB
    /// let lists = [SeedList { order: 0, mt: MigrateType::Movable, blocks: 500 }];
    /// let p = a.seed_pageset(1, 0, &PagesetSeed { high: 5000, lists: &lists, ..Default::default() })?;
    /// assert_eq!((p.count, p.high), (500, 5000)); // high_min 3520 <= 5000 <= high_max
    /// assert_eq!(a.nr_free_pages() + 500, a.managed_pages()); // the pages left the zone
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A list's blocks sit in pageblocks of the list's type (a fresh zone's refill of
    /// another type steals from Movable pageblocks; the seed retypes them, as the kernel's
    /// claim of a fallback block would), so that a free of one comes back to its list:
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout, MigrateType, PagesetSeed, SeedList};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 1), Config::default())?;
    /// let lists = [SeedList { order: 0, mt: MigrateType::Unmovable, blocks: 16 }];
    /// a.seed_pageset(0, 0, &PagesetSeed { high: 5000, lists: &lists, ..Default::default() })?;
    /// let mut out = Vec::new();
    /// a.take_from_pcp_list(0, 0, 0, MigrateType::Unmovable, 1, &mut out)?;
    /// assert_eq!(a.pageblock_type(out[0].pfn), Some(MigrateType::Unmovable));
    /// a.free_on(0, out[0])?;
    /// assert_eq!(a.pcp_list_len(0, 0, 0, MigrateType::Unmovable), Some(16)); // back on it
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`SeedError`], before anything changed.
    pub fn seed_pageset(
        &self,
        cpu: usize,
        zone: usize,
        seed: &PagesetSeed<'_>,
    ) -> Result<PcpInfo, SeedError> {
        if cpu >= self.cpus.len() || zone >= self.zones.len() {
            return Err(SeedError::NoSuchPageset { cpu, zone });
        }
        if let Some(l) = seed
            .lists
            .iter()
            .find(|l| !self.pcp_allowed(l.order) || l.mt as usize >= NR_PCPTYPES)
        {
            return Err(SeedError::NotAPcpList {
                order: l.order,
                mt: l.mt,
            });
        }
        let z = &self.zones[zone];
        self.drain_pages_zone(cpu, z);
        let slot = self.slot(cpu, zone);
        // Pageblocks whose type differs from the list their seeded blocks went to.
        let mut retype: BTreeMap<u64, MigrateType> = BTreeMap::new();
        {
            let mut pcp = slot.pcp.lock();
            for l in seed.lists {
                let pi = crate::pcp::pindex(l.order, l.mt, slot.hot.thp_lists);
                let mut left = l.blocks;
                while left > 0 {
                    // One zone-lock hold per chunk, as large as a refill can be.
                    let n = left.min(1 << 16) as i32;
                    let ps = Pageset { cpu, zone: z, slot };
                    let pl = PcpList {
                        order: l.order,
                        mt: l.mt,
                        pi,
                    };
                    let got = self.rmqueue_bulk::<crate::zone::Reported>(
                        ps,
                        &mut pcp,
                        pl,
                        n,
                        WMARK_LOW as u32,
                    );
                    if got <= 0 {
                        break;
                    }
                    left -= got as u32;
                }
                // A list's blocks sit in pageblocks of its type, as a refill that claims a
                // fallback block (or the frees that fed the list) leaves them: a free of
                // one comes back to this list. A fresh zone's refill of another type
                // steals from Movable pageblocks without retyping them.
                let ring = slot.hot.ring_at(l.order);
                let heads: Vec<u32> = if ring {
                    pcp.rings[pi].iter().collect()
                } else {
                    pcp.lists[pi].iter(&self.meta).collect()
                };
                for i in heads {
                    let pfn = z.pfn_of(i);
                    if z.pageblock_mt(pfn) != l.mt {
                        retype.insert(pfn >> PAGEBLOCK_ORDER, l.mt);
                    }
                }
            }
            let st = &mut pcp.st;
            let lo = st.high_min.min(st.high_max);
            let hi = st.high_min.max(st.high_max).max(st.count);
            st.high = seed.high.clamp(lo, hi);
            st.alloc_factor = seed.alloc_factor.min(self.tune.scale);
            st.free_factor = 0;
            st.free_count = seed.free_count.max(0);
            st.count_min = st.count;
            st.flags &= tune::PCPF_FREE_HIGH_BATCH;
            pcp.active = false;
            pcp.resized = !pcp.within_bounds();
        }
        if !retype.is_empty() {
            self.with_buddy(cpu, z, |b| {
                for (&pb, &mt) in &retype {
                    b.move_freepages_block((pb << PAGEBLOCK_ORDER).max(z.start_pfn), mt);
                }
            });
        }
        Ok(self.pcp_info(cpu, zone).expect("checked above"))
    }

    /// Take up to `n` blocks off the pageset list of (`cpu`, `zone`, `order`, `mt`) as
    /// `alloc_pages_bulk` takes them (`__rmqueue_pcplist` under the pageset lock, counted
    /// in `pgalloc`), never refilling it: stops when the list is empty. Unlike
    /// `rmqueue_pcplist`, the bulk path leaves `free_count` alone. The blocks are the
    /// caller's to free. Returns how many were taken, each pushed onto `out`. For a replay
    /// of a kernel stream whose pagesets lost pages to allocations the kernel does not
    /// trace (`alloc_pages_bulk` emits no `mm_page_alloc`).
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout, MigrateType};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// let f = a.alloc_on(0, 0, Gfp::MOVABLE, None)?; // a batch of 63 refilled, one taken
    /// let mut out = Vec::new();
    /// assert_eq!(a.take_from_pcp_list(0, 0, 0, MigrateType::Movable, 100, &mut out)?, 62);
    /// assert_eq!(a.pcp_list_len(0, 0, 0, MigrateType::Movable), Some(0));
    /// assert_eq!(a.pcp_info(0, 0).unwrap().count, 0);
    /// assert_eq!(a.counters().pcp_refill, 1); // the list ran dry: no refill
    /// for g in out {
    ///     a.free_on(0, g)?;
    /// }
    /// a.free_on(0, f)?;
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`SeedError::NoSuchPageset`], [`SeedError::NotAPcpList`], before anything changed.
    pub fn take_from_pcp_list(
        &self,
        cpu: usize,
        zone: usize,
        order: u8,
        mt: MigrateType,
        n: u32,
        out: &mut Vec<Frame>,
    ) -> Result<u32, SeedError> {
        if cpu >= self.cpus.len() || zone >= self.zones.len() {
            return Err(SeedError::NoSuchPageset { cpu, zone });
        }
        if !self.pcp_allowed(order) || mt as usize >= NR_PCPTYPES {
            return Err(SeedError::NotAPcpList { order, mt });
        }
        let z = &self.zones[zone];
        let slot = self.slot(cpu, zone);
        let pi = crate::pcp::pindex(order, mt, slot.hot.thp_lists);
        let ring = slot.hot.ring_at(order);
        let mut pcp = slot.pcp.lock();
        let mut got = 0;
        // `take_from_list` refills only an empty list, which this never hands it.
        while got < n && !pcp.list_empty(pi, ring) {
            let ps = Pageset { cpu, zone: z, slot };
            let Some(pfn) = self.take_from_list(ps, &mut pcp, order, mt, WMARK_LOW as u32) else {
                break;
            };
            out.push(Frame::new(Pfn(pfn), order));
            got += 1;
        }
        Ok(got)
    }

    /// Settle the flags of zone `zone` as the kernel's own paths clear them once its free
    /// pages allow, for a zone whose contents were just set up (by allocating and freeing)
    /// rather than reached by a workload: `ZONE_BELOW_HIGH` cleared when an order-0
    /// request passes the high watermark (`free_frozen_page_commit`'s test after a drain),
    /// `ZONE_RECLAIM_ACTIVE` and the watermark boost when free pages are at the high mark
    /// (kswapd's end of balancing), `ZONE_BOOSTED_WATERMARK` when no boost is left.
    /// Returns false for a zone that does not exist.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(65_536, 1), Config::default())?;
    /// let mut held = Vec::new();
    /// while let Ok(f) = a.alloc_on(0, 4, Gfp::MOVABLE, None) {
    ///     held.push(f); // fills the zone: an allocation fails the high mark
    /// }
    /// for f in held {
    ///     a.free_on(0, f)?;
    /// }
    /// assert!(a.zone_info(0).unwrap().below_high); // set up, but no drain cleared it
    /// assert!(a.settle_zone_flags(0));
    /// assert!(!a.zone_info(0).unwrap().below_high);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_zone_flags(&self, zone: usize) -> bool {
        let Some(z) = self.zones.get(zone) else {
            return false;
        };
        let fa = self.cfg.highatomic_free_accounting;
        if z.has_flag(ZONE_BELOW_HIGH) && z.watermark_ok(0, z.wmark(WMARK_HIGH), 0, fa) {
            z.clear_flag(ZONE_BELOW_HIGH);
        }
        self.reclaim_progress(z);
        if z.boost() == 0 {
            z.clear_flag(ZONE_BOOSTED_WATERMARK);
        }
        true
    }
}

/// The free lists [`Allocator::seed_free_lists`] gives a zone: free blocks per pcp
/// migratetype and order (`/proc/pagetypeinfo`'s "Free pages count per migrate type at
/// order" table), and blocks to leave allocated at given places.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FreeListSeed<'a> {
    /// `free[mt][order]`: free blocks wanted on the list of migratetype `mt`
    /// (Unmovable, Movable, Reclaimable by their index) and `order`.
    pub free: [[u64; NR_ORDERS]; NR_PCPTYPES],
    /// Blocks to leave allocated exactly where they are (each wholly free in the zone
    /// before the seed; pairwise disjoint), with the type of their pageblocks (a pcp
    /// type): a caller frees them later as it frees any block it allocated.
    pub held: &'a [(Frame, MigrateType)],
}

/// What [`Allocator::seed_free_lists`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FreeListsSeeded {
    /// Pages on the zone's free lists after the seed (the seed's blocks).
    pub free: u64,
    /// Pages that were free before and are now allocated to no caller: held back so that
    /// the free lists have the seed's shape (the memory in use before the state began).
    pub held_back: u64,
    /// Pages of [`FreeListSeed::held`].
    pub held: u64,
}

/// A zone's free memory as disjoint aligned chunks (head → order), and the placement
/// of a [`FreeListSeed`] in it: the blocks to list, the blocks to mark allocated, the
/// pageblocks to retype. Built before anything changes.
struct FreePlan {
    place: Vec<(u64, u8, MigrateType)>,
    hold: Vec<(u64, u8, MigrateType)>,
    retype: Vec<(u64, MigrateType)>,
    want: [[u64; NR_ORDERS]; NR_PCPTYPES],
    /// Pageblock → the type a held block gave it (first wins).
    pb_type: BTreeMap<u64, MigrateType>,
}

impl FreePlan {
    /// The type of the pageblock holding `s`: as a held block made it, else `current`.
    fn type_of(&self, s: u64, current: MigrateType) -> MigrateType {
        self.pb_type
            .get(&(s >> PAGEBLOCK_ORDER))
            .copied()
            .unwrap_or(current)
    }
    fn wanted_below(&self, t: usize, k: u8) -> bool {
        self.want[t][..k as usize].iter().any(|&n| n > 0)
    }
    /// Region `[s, s + 2^k)` of pageblock type `t` (k ≤ pageblock order): list the largest
    /// wanted block that fits in its lower half and fill the upper half the same way,
    /// else fill both halves; a region left with nothing wanted is held. Every region
    /// keeps at least one held frame, so no listed block has a listed buddy of its order.
    fn fill_sub(&mut self, s: u64, k: u8, t: usize, mt: MigrateType) {
        if k == 0 || !self.wanted_below(t, k) {
            self.hold.push((s, k, mt));
            return;
        }
        let o = k - 1;
        if self.want[t][o as usize] > 0 {
            self.want[t][o as usize] -= 1;
            self.place.push((s, o, mt));
        } else {
            self.fill_sub(s, o, t, mt);
        }
        self.fill_sub(s + (1 << o), o, t, mt);
    }
    /// A whole free pageblock at `s`: typed as a held block made it, else as the type
    /// with the most pages still wanted below a pageblock; held whole when none is.
    fn fill_pageblock(&mut self, s: u64, current: MigrateType) {
        let pages = |w: &[u64; NR_ORDERS]| -> u64 {
            w[..PAGEBLOCK_ORDER as usize]
                .iter()
                .enumerate()
                .map(|(o, &n)| n << o)
                .sum()
        };
        let t = match self.pb_type.get(&(s >> PAGEBLOCK_ORDER)) {
            Some(&mt) => ((mt as usize) < NR_PCPTYPES).then_some(mt as usize),
            None => (0..NR_PCPTYPES)
                .filter(|&t| pages(&self.want[t]) > 0)
                .max_by_key(|&t| (pages(&self.want[t]), core::cmp::Reverse(t))),
        };
        match t {
            Some(t) if self.wanted_below(t, PAGEBLOCK_ORDER) => {
                let mt = MigrateType::ALL[t];
                if mt != current {
                    self.retype.push((s, mt));
                }
                self.fill_sub(s, PAGEBLOCK_ORDER, t, mt);
            }
            _ => self.hold.push((s, PAGEBLOCK_ORDER, current)),
        }
    }
}

/// Where `[pfn, pfn + 2^order)` lies wholly in a chunk of `chunks`: that chunk.
fn chunk_holding(chunks: &BTreeMap<u64, u8>, pfn: u64, order: u8) -> Option<(u64, u8)> {
    let (&s, &o) = chunks.range(..=pfn).next_back()?;
    (o >= order && pfn + (1u64 << order) <= s + (1u64 << o)).then_some((s, o))
}

impl Allocator {
    /// A block taken off the zone's free lists becomes a caller's: its head's order, type
    /// and state, and an order-0 block's ownership bit where the zone keeps them
    /// (`rmqueue_buddy`'s hand-out, and the blocks a seed holds back).
    #[inline]
    pub(crate) fn mark_allocated(&self, z: &Zone, pfn: u64, order: u8, mt: MigrateType) {
        let e = &self.meta[z.meta_index(pfn) as usize];
        e.set_order(order);
        e.set_mt(mt as u8);
        e.set_state(State::Allocated);
        if order == 0 && z.own_bitmap() {
            z.own_set(pfn);
        }
    }

    /// Zone `zone`'s free blocks per migratetype and order (`free_area[order]
    /// .free_list[mt]` lengths, `/proc/pagetypeinfo`'s table): what
    /// [`Allocator::seed_free_lists`] shapes. `None` for a zone that does not exist.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout, MigrateType};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 1), Config::default())?;
    /// let t = a.free_lists(0).unwrap();
    /// assert_eq!(t[MigrateType::Movable as usize][10], 256); // fresh: whole order-10 blocks
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn free_lists(&self, zone: usize) -> Option<[[u64; NR_ORDERS]; NR_MIGRATETYPES]> {
        let z = self.zones.get(zone)?;
        let g = z.lock_inspect();
        let mut t = [[0u64; NR_ORDERS]; NR_MIGRATETYPES];
        for (o, lists) in g.free.lists.iter().enumerate() {
            for (mt, l) in lists.iter().enumerate() {
                t[mt][o] = u64::from(l.len());
            }
        }
        Some(t)
    }

    /// Give zone `zone`'s free lists the shape of `seed`: every block now free in the
    /// zone's buddy lists (not isolated) is taken off them; `seed.held` is marked
    /// allocated where it is; `seed.free`'s blocks are listed, each inside a pageblock of
    /// its type, none with a listed buddy of its order (so none would have merged); the
    /// rest of the free memory is marked allocated to no caller ([`FreeListsSeeded::held_back`]).
    /// NR_FREE_PAGES becomes the seed's pages. Pagesets and allocated blocks are not
    /// touched: seed the pagesets ([`Allocator::seed_pageset`]) first. The zone lock is
    /// held throughout (one zone-lock trip counted on CPU 0).
    ///
    /// The placement lists a pageblock's largest wanted block in its lower half and
    /// fills the upper half the same way, down to a held frame: the kernel's
    /// `/proc/pagetypeinfo` says how many blocks are free, not where, and a fragmented
    /// zone's free blocks each have a buddy in use.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Frame, FreeListSeed, Layout, MigrateType, Pfn};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 1), Config::default())?; // 1 GiB
    /// let mut free = [[0u64; 11]; 3];
    /// free[MigrateType::Movable as usize][4] = 100; // 100 free blocks of 16 pages
    /// free[MigrateType::Reclaimable as usize][0] = 7;
    /// let held = [(Frame::new(Pfn(4096), 2), MigrateType::Unmovable)];
    /// let s = a.seed_free_lists(0, &FreeListSeed { free, held: &held })?;
    /// assert_eq!(s.free, 1607);
    /// assert_eq!(s.free + s.held + s.held_back, 262_144);
    /// let z = a.zone_info(0).unwrap();
    /// assert_eq!((z.free, z.nr_free[4], z.nr_free[0], z.nr_free[10]), (1607, 100, 7, 0));
    /// a.free_on(0, held[0].0)?; // the held block is the caller's to free
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`SeedError`], before anything changed: no such zone, a held block not wholly
    /// free in it (or misaligned, or overlapping another), or more blocks than its free
    /// memory can take with a frame held beside each.
    pub fn seed_free_lists(
        &self,
        zone: usize,
        seed: &FreeListSeed<'_>,
    ) -> Result<FreeListsSeeded, SeedError> {
        let z = self
            .zones
            .get(zone)
            .ok_or(SeedError::NoSuchPageset { cpu: 0, zone })?;
        self.with_buddy(0, z, |b| {
            b.settle();
            // The free chunks, as listed.
            let mut listed: Vec<(u64, u8)> = Vec::new();
            for o in 0..NR_ORDERS {
                for mt in MigrateType::ALL {
                    if mt == MigrateType::Isolate {
                        continue;
                    }
                    let l = &b.inner.free.lists[o][mt as usize];
                    listed.extend(l.iter(b.m).map(|i| (z.pfn_of(i), o as u8)));
                }
            }
            let mut chunks: BTreeMap<u64, u8> = listed.iter().copied().collect();
            let mut plan = FreePlan {
                place: Vec::new(),
                hold: Vec::new(),
                retype: Vec::new(),
                want: seed.free,
                pb_type: BTreeMap::new(),
            };
            // The held blocks, carved out of their chunks.
            let mut held_pages = 0u64;
            for &(f, mt) in seed.held {
                let (pfn, o) = (f.pfn.0, f.order);
                if mt as usize >= NR_PCPTYPES {
                    // A pageblock is typed Unmovable, Movable or Reclaimable here; the
                    // reserve and isolation have their own paths.
                    return Err(SeedError::NotAPcpList { order: o, mt });
                }
                let not_free = SeedError::HeldNotFree {
                    pfn: f.pfn,
                    order: o,
                };
                if o > MAX_ORDER || pfn & ((1u64 << o) - 1) != 0 {
                    return Err(not_free);
                }
                let (mut s, mut co) = chunk_holding(&chunks, pfn, o).ok_or(not_free)?;
                chunks.remove(&s);
                while co > o {
                    co -= 1;
                    let half = 1u64 << co;
                    if pfn >= s + half {
                        chunks.insert(s, co);
                        s += half;
                    } else {
                        chunks.insert(s + half, co);
                    }
                }
                let first = pfn >> PAGEBLOCK_ORDER;
                let last = (pfn + (1u64 << o) - 1) >> PAGEBLOCK_ORDER;
                for pb in first..=last {
                    let t = *plan.pb_type.entry(pb).or_insert(mt);
                    let p = (pb << PAGEBLOCK_ORDER).max(z.start_pfn);
                    if t != z.pageblock_mt(p) {
                        plan.retype.push((p, t));
                    }
                }
                plan.hold.push((pfn, o, mt));
                held_pages += 1u64 << o;
            }
            let wanted: u64 = seed
                .free
                .iter()
                .flat_map(|w| w.iter().enumerate().map(|(o, &n)| n.saturating_mul(1 << o)))
                .fold(0u64, u64::saturating_add);
            let have: u64 = chunks.values().map(|&o| 1u64 << o).sum();
            if wanted > have {
                return Err(SeedError::FreeListsDoNotFit {
                    zone,
                    short: wanted - have,
                });
            }
            let user_held = plan.hold.len();
            // Largest chunks first: whole pageblocks take the pageblock-order blocks and
            // the sub-pageblock ones; pieces smaller than a pageblock keep its type.
            let mut order: Vec<(u64, u8)> = chunks.iter().map(|(&s, &o)| (s, o)).collect();
            order.sort_by_key(|&(s, o)| (core::cmp::Reverse(o), s));
            // Chunks listed whole: a chunk's buddy of its order is not free unless it is
            // another chunk (two pageblocks of types that did not merge), listed whole too.
            let mut whole: BTreeMap<u64, ()> = BTreeMap::new();
            for (s, co) in order {
                let current = z.pageblock_mt(s);
                let buddy = s ^ (1u64 << co);
                let alone = co < MAX_ORDER
                    && (chunks.get(&buddy) != Some(&co) || !whole.contains_key(&buddy));
                let t = if co == PAGEBLOCK_ORDER {
                    (0..NR_PCPTYPES).find(|&t| plan.want[t][co as usize] > 0)
                } else {
                    let t = plan.type_of(s, current);
                    ((t as usize) < NR_PCPTYPES && plan.want[t as usize][co as usize] > 0)
                        .then_some(t as usize)
                };
                if let (true, Some(t)) = (alone, t) {
                    plan.want[t][co as usize] -= 1;
                    let mt = MigrateType::ALL[t];
                    plan.place.push((s, co, mt));
                    if co == PAGEBLOCK_ORDER && current != mt {
                        plan.retype.push((s, mt));
                    }
                    whole.insert(s, ());
                    continue;
                }
                if co == MAX_ORDER {
                    if let Some(t) = (0..NR_PCPTYPES).find(|&t| plan.want[t][co as usize] > 0) {
                        plan.want[t][co as usize] -= 1;
                        let mt = MigrateType::ALL[t];
                        plan.place.push((s, co, mt));
                        for p in [s, s + (1 << PAGEBLOCK_ORDER)] {
                            if z.pageblock_mt(p) != mt {
                                plan.retype.push((p, mt));
                            }
                        }
                        continue;
                    }
                    let upper = s + (1 << PAGEBLOCK_ORDER);
                    if let Some(t) =
                        (0..NR_PCPTYPES).find(|&t| plan.want[t][PAGEBLOCK_ORDER as usize] > 0)
                    {
                        // Its buddy, the upper pageblock, keeps a held frame.
                        plan.want[t][PAGEBLOCK_ORDER as usize] -= 1;
                        let mt = MigrateType::ALL[t];
                        plan.place.push((s, PAGEBLOCK_ORDER, mt));
                        if current != mt {
                            plan.retype.push((s, mt));
                        }
                    } else {
                        plan.fill_pageblock(s, current);
                    }
                    plan.fill_pageblock(upper, z.pageblock_mt(upper));
                } else if co == PAGEBLOCK_ORDER {
                    plan.fill_pageblock(s, current);
                } else {
                    let t = plan.type_of(s, current);
                    if (t as usize) < NR_PCPTYPES {
                        plan.fill_sub(s, co, t as usize, t);
                    } else {
                        plan.hold.push((s, co, t));
                    }
                }
            }
            let short: u64 = plan
                .want
                .iter()
                .flat_map(|w| w.iter().enumerate().map(|(o, &n)| n << o))
                .sum();
            if short > 0 {
                return Err(SeedError::FreeListsDoNotFit { zone, short });
            }
            // Nothing has changed so far; now the zone takes the plan's shape.
            for &(pfn, o) in &listed {
                let mt = b.del_from_list(pfn, o);
                b.account(-(1i64 << o), mt);
            }
            for &(pfn, mt) in &plan.retype {
                b.set_pb_mt(pfn, mt);
            }
            let mut free = 0u64;
            for &(pfn, o, mt) in &plan.place {
                b.add_to_list(pfn, o, mt, false);
                b.account(1i64 << o, mt);
                free += 1u64 << o;
            }
            let mut held_back = 0u64;
            for (i, &(pfn, o, mt)) in plan.hold.iter().enumerate() {
                self.mark_allocated(z, pfn, o, mt);
                if i >= user_held {
                    held_back += 1u64 << o;
                }
            }
            Ok(FreeListsSeeded {
                free,
                held_back,
                held: held_pages,
            })
        })
    }
}
