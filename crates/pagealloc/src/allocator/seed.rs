//! Start a pageset from a given state: [`Allocator::seed_pageset`].
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
//! pageset lock. The old contents' return counts as the drain it is; the fill counts
//! no refill (the zone-lock acquisitions are counted as usual).
//!
//! # Invariants
//! `count` is the sum of the lists, as everywhere. A seed may leave `high` or `count`
//! outside the bounds the tuning keeps (a kernel pageset can be, after a sizing change);
//! the pageset is then marked resized, as after `set_pcp_sizes`, and the next refill or
//! tick that finds it inside its bounds clears the mark.

use super::Allocator;
use crate::frame::{MigrateType, NR_PCPTYPES};
use crate::pcp::{Pageset, PcpList};
use crate::stats::PcpInfo;
use crate::tune;
use crate::zone::{WMARK_HIGH, WMARK_LOW, ZONE_BELOW_HIGH, ZONE_BOOSTED_WATERMARK};
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
                    let got = self.rmqueue_bulk(ps, &mut pcp, pl, n, WMARK_LOW as u32);
                    if got <= 0 {
                        break;
                    }
                    left -= got as u32;
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
        Ok(self.pcp_info(cpu, zone).expect("checked above"))
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
