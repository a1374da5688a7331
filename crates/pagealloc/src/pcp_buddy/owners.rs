//! The pcp buddy allocator's leaf items: the owner tags of the pageblocks ([`Owners`]),
//! a pageset's owned pageblocks ([`Owned`]) and the config's two questions about it
//! ([`hit_orders`], [`check_config`]) — what the allocator's state and the pagesets hold,
//! apart from the paths in `pcp_buddy/mod.rs` that use them.

use crate::frame::PAGEBLOCK_ORDER;
use crate::sync::atomic::{AtomicU16, Ordering::Relaxed};
use crate::zone::Zone;
use alloc::boxed::Box;
use alloc::vec::Vec;

/// The tag of a pageblock no CPU owns.
const NO_OWNER: u16 = u16::MAX;

/// The owner tags of every zone's pageblocks (`u16::MAX`: none); empty without
/// `Config::pcp_buddy`.
#[derive(Debug, Default)]
pub(crate) struct Owners(Box<[Box<[AtomicU16]>]>);

impl Owners {
    /// Tags for `zones`, all unowned; no memory unless `on`.
    pub(crate) fn new(zones: &[Zone], on: bool) -> Owners {
        if !on {
            return Owners::default();
        }
        Owners(
            zones
                .iter()
                .map(|z| {
                    let n = pb_index(z, z.end_pfn - 1) + 1;
                    (0..n).map(|_| AtomicU16::new(NO_OWNER)).collect()
                })
                .collect(),
        )
    }

    /// The CPU owning the pageblock of `pfn` in `z`, if any.
    #[inline]
    pub(crate) fn of(&self, z: &Zone, pfn: u64) -> Option<usize> {
        let t = self.0.get(z.idx)?.get(pb_index(z, pfn))?.load(Relaxed);
        (t != NO_OWNER).then_some(t as usize)
    }

    /// The owner of pageblock `pb` of `z`.
    pub(super) fn get(&self, z: &Zone, pb: u32) -> Option<usize> {
        let t = self.0[z.idx][pb as usize].load(Relaxed);
        (t != NO_OWNER).then_some(t as usize)
    }

    pub(super) fn set(&self, z: &Zone, pb: u32, cpu: Option<usize>) {
        let t = cpu.map_or(NO_OWNER, |c| c as u16);
        self.0[z.idx][pb as usize].store(t, Relaxed);
    }

    /// Every tag of zone `zi`, by pageblock index.
    pub(crate) fn zone_tags(&self, zi: usize) -> impl Iterator<Item = (u32, Option<usize>)> + '_ {
        self.0.get(zi).into_iter().flat_map(|t| {
            t.iter().enumerate().map(|(i, a)| {
                let v = a.load(Relaxed);
                (i as u32, (v != NO_OWNER).then_some(v as usize))
            })
        })
    }
}

/// One pageblock a pageset owns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnedBlock {
    /// Pageblock index in the zone.
    pub(crate) pb: u32,
    /// A drain returned pages of it to the zone since phase 0 last looked.
    pub(super) in_zone: bool,
}

/// The pageblocks a pageset owns (`Pcp::owned`), at most [`MAX_OWNED`].
pub(crate) type Owned = Vec<OwnedBlock>;

/// Index of the pageblock of `pfn` within zone `z`.
#[inline]
pub(super) fn pb_index(z: &Zone, pfn: u64) -> usize {
    ((pfn >> PAGEBLOCK_ORDER) - (z.start_pfn >> PAGEBLOCK_ORDER)) as usize
}

/// First PFN of pageblock `pb` of `z` (may lie below the zone's start).
pub(super) fn pb_start(z: &Zone, pb: u32) -> u64 {
    ((z.start_pfn >> PAGEBLOCK_ORDER) + pb as u64) << PAGEBLOCK_ORDER
}

/// The hit orders of a pageset: none with `pcp_buddy`, whose frees must route to the
/// owner (the full path's [`Allocator::pcp_buddy_free`]); the hits stay as they are
/// for every other config.
pub(crate) fn hit_orders(cfg: &crate::Config, orders: u16) -> u16 {
    if cfg.pcp_buddy {
        0
    } else {
        orders
    }
}

/// `pcp_buddy` works on linked pagesets with merging drains: refused beside the
/// mechanisms that change what a pageset list or a drain is.
pub(crate) fn check_config(cfg: &crate::Config) -> Result<(), &'static str> {
    if cfg.pcp_buddy && (cfg.own_bitmap || cfg.clustered_refill) {
        return Err("cannot be combined with own_bitmap or clustered_refill");
    }
    Ok(())
}
