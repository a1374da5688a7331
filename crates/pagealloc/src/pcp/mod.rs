//! Per-CPU pagesets: the lists, the hot path (`rmqueue_pcplist`, `free_unref_page`) and
//! the paths that move pages between a pageset and its zone (`rmqueue_bulk`,
//! `free_pcppages_bulk`, `drain_pages_zone`, `decay_pcp_high`).
//!
//! # Files
//! - `hit.rs`: the PCP hits of an allocation and of a free (`rmqueue_pcplist`'s pop and
//!   `free_unref_page_commit`), inlined into `alloc_on` / `free_on`, with their budget;
//! - `refill.rs`: an empty list filled from the zone (`__rmqueue_pcplist`,
//!   `rmqueue_bulk`);
//! - `drain.rs`: blocks handed back to the zone (`free_pcppages_bulk` in the kernel's
//!   form, `drain_pages_zone`, the tick's `decay_pcp_high`), and `drain_fast.rs` beside
//!   it, the drains beside the kernel's, entered through `drain_beyond` (spliced order-0
//!   drains, the THP runs, the order-0 rings' drains, `drain_newest`'s head pops);
//! - `sizing.rs`: the pageset's bounds (`zone_set_pageset_high_and_batch`'s store, what
//!   refills may add beyond `high`); the tuning functions themselves are in
//!   [`crate::tune`];
//! - `ring.rs`: the array form of a list, [`Ring`]; `report.rs`: the hits' pops and
//!   pushes with an access sink installed.
//!
//! Merge skipping's buddy side (`free_skip_merge`, the splices of a drained chain) is in
//! `buddy/merge_skip.rs`.
//!
//! # Locking rules
//! `PcpSlot::pcp` protects the lists, the [`PcpState`] and the metadata of frames on the
//! lists; `PcpSlot::stats` is written only under it. Order: pcp lock, then zone lock. The
//! fast paths `try_lock` (a busy lock means a remote drain or decay holds it: the caller
//! falls back to the zone); drains, decay and sizing updates take it blocking.
//!
//! # Invariants
//! `count == Σ_lists len · 2^order(list)`; every frame on a list has state `Pcp` and the
//! list's order — but with [`Config::own_bitmap`](crate::Config::own_bitmap) the order-0
//! lists are [`Ring`]s (the others linked), and their frames read `Allocated`, order 0,
//! their zone's ownership bits clear (their frees wrote nothing; docs/mechanisms.md
//! A.13); without it the rings stay empty.

mod drain;
mod drain_fast;
mod hit;
mod refill;
mod ring;
mod sizing;

pub(crate) use hit::{pcp_free_types, pcp_free_types_allowed, Hit};
pub(crate) use ring::Ring;
pub(crate) use sizing::refill_overshoot;

use crate::frame::{MigrateType, THP_ORDER};
use crate::memmap::List;
use crate::stats::Stats;
use crate::sync::SpinLock;
use crate::tune::PcpState;
use crate::zone::{Seam, Zone};

/// Lists per pageset: 3 types × orders 0..=3, plus the THP lists (`NR_PCP_LISTS`).
pub const NR_PCP_LISTS: usize = 14;

/// One pageset (`struct per_cpu_pages`), protected by its slot's lock.
#[derive(Debug)]
pub(crate) struct Pcp {
    pub(crate) st: PcpState,
    /// NUMA remote-pcp countdown (docs/mechanisms.md §5.3).
    pub(crate) expire: u8,
    /// Used since the last tick (stands for "folded a counter delta").
    pub(crate) active: bool,
    /// The sizes were rewritten (`set_pcp_sizes`) with `high` or `count` outside the new
    /// bounds, which the kernel allows: `high` is re-clamped at its next use and `count`
    /// drains at the next free or tick. Cleared by the next refill or tick that finds the
    /// pageset inside its bounds again; until then `validate` accepts the stale values.
    pub(crate) resized: bool,
    pub(crate) lists: [List; NR_PCP_LISTS],
    /// With [`Config::own_bitmap`](crate::Config::own_bitmap) the order-0 lists are these
    /// rings; otherwise these stay empty (and unallocated).
    pub(crate) rings: [Ring; NR_PCP_LISTS],
    /// `Config::pcp_buddy`: the pageblocks this pageset owns (`pcp_buddy/owners.rs`).
    pub(crate) owned: crate::pcp_buddy::Owned,
}

impl Pcp {
    /// Whether list `pi` is empty: one of [`Pcp::rings`] when `ring` ([`Hot::ring_at`]
    /// its order), else one of the linked `lists`.
    #[inline(always)]
    pub(crate) fn list_empty(&self, pi: usize, ring: bool) -> bool {
        if ring {
            self.rings[pi].is_empty()
        } else {
            self.lists[pi].is_empty()
        }
    }

    /// The blocks on list `pi`, a ring when `ring` (as [`Pcp::list_empty`]).
    #[inline(always)]
    pub(crate) fn list_len(&self, pi: usize, ring: bool) -> u32 {
        if ring {
            self.rings[pi].len()
        } else {
            self.lists[pi].len()
        }
    }

    pub(crate) fn new() -> Pcp {
        Pcp {
            st: PcpState {
                batch: 1,
                ..Default::default()
            },
            expire: 0,
            active: false,
            resized: false,
            lists: [List::new(); NR_PCP_LISTS],
            rings: core::array::from_fn(|_| Ring::default()),
            owned: Default::default(),
        }
    }
}

/// The switches the hot path needs, copied out of the [`Config`](crate::Config) and the
/// zone when the pageset is built and never written again: they sit beside the lock, so
/// the hit reads one cache line of switches and no config.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hot {
    /// Bit `k`: the inlined hit serves blocks of order `k` on linked lists
    /// (`pcp_allowed_order`); without the orders whose lists are rings (served by the
    /// ring-aware copy of the hit, `Allocator::ring_hits`), and 0 while an access sink is
    /// installed: the hits then run reported, out of line ([`Hot::report`]).
    pub(crate) orders: u16,
    /// `Config::thp_pcp_lists`.
    pub(crate) thp_lists: u8,
    /// `Config::pcp_migratetype_cache`.
    pub(crate) mt_cache: bool,
    /// `Config::below_high`.
    pub(crate) below_high: bool,
    /// `Config::highatomic_free_accounting`.
    pub(crate) free_accounting: bool,
    /// The zone is ZONE_MOVABLE (only movable requests may use it).
    pub(crate) movable_zone: bool,
    /// `Config::poison` (memory-backed allocators): frees write the block first.
    pub(crate) poison: bool,
    /// The orders whose lists are [`Pcp::rings`] (order 0 with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap)), for the inlined hit; 0 with
    /// linked lists, and 0 while an access sink is installed.
    pub(crate) ring_orders: u16,
    /// `[orders, ring_orders]` as built: what the reported hits
    /// ([`Seam`](crate::zone::Seam) `Reported`) serve while a sink is installed.
    reported: [u16; 2],
    /// Bit `k`: blocks of order `k` are cached (`pcp_allowed_order`), on either kind of
    /// list: what the full paths test.
    pub(crate) cached: u16,
    /// The order-0 lists are [`Pcp::rings`]
    /// ([`Config::own_bitmap`](crate::Config::own_bitmap)).
    pub(crate) rings0: bool,
}

impl Hot {
    pub(crate) fn new(cfg: &crate::Config, zone: &Zone) -> Hot {
        let mut orders = 0u16;
        for k in 0..=crate::frame::MAX_ORDER {
            if cfg.pcp && (k <= 3 || (k == THP_ORDER && cfg.thp)) {
                orders |= 1 << k;
            }
        }
        let cached_orders = orders;
        let (orders, ring_orders) = if cfg.own_bitmap {
            // `Config::own_bitmap`: the order-0 lists are rings, the others linked.
            (orders & !1, orders & 1)
        } else {
            (orders, 0)
        };
        let orders = crate::pcp_buddy::hit_orders(cfg, orders);
        Hot {
            orders,
            ring_orders,
            reported: [orders, ring_orders],
            cached: cached_orders,
            rings0: cfg.own_bitmap,
            thp_lists: cfg.thp_pcp_lists as u8,
            mt_cache: cfg.pcp_migratetype_cache,
            below_high: cfg.below_high,
            free_accounting: cfg.highatomic_free_accounting,
            movable_zone: zone.kind == crate::topology::ZoneKind::Movable,
            poison: cfg.poison,
        }
    }

    /// `pcp_allowed_order`.
    #[inline(always)]
    pub(crate) fn allows(&self, order: u8) -> bool {
        order < 16 && self.cached & (1 << order) != 0
    }

    /// With an access sink installed: the inlined hits, whose report sites are compiled
    /// away ([`Quiet`](crate::zone::Quiet)), serve no order; the allocation's and the
    /// free's out-of-line paths run the same hits reported instead (`Allocator::alloc_walk`
    /// and `free_on_slow` first try `alloc_hit`/`free_hit` with `S` = `Reported`, which
    /// read [`Hot::reported`]). So the hits cost nothing for the seam when no sink is
    /// installed (docs/performance.md, "The access seam"), and a reported run still runs
    /// them, reporting what they touch.
    #[cfg(feature = "access")]
    pub(crate) fn report(&mut self) {
        self.orders = 0;
        self.ring_orders = 0;
    }

    /// `pcp_allowed_order` for the hit of linked lists (`RING` false) or of rings, inlined
    /// ([`Quiet`](crate::zone::Quiet)) or reported.
    #[inline(always)]
    pub(crate) fn hit_allows<const RING: bool, S: Seam>(&self, order: u8) -> bool {
        let bits = match (RING, S::SINK) {
            (false, false) => self.orders,
            (true, false) => self.ring_orders,
            (false, true) => self.reported[0],
            (true, true) => self.reported[1],
        };
        order < 16 && bits & (1 << order) != 0
    }

    /// The lists of blocks of `order` are [`Pcp::rings`].
    #[inline(always)]
    pub(crate) fn ring_at(&self, order: u8) -> bool {
        order == 0 && self.rings0
    }
}

/// A pageset with its lock, its hot-path switches and its counters, on its own cache
/// lines.
#[repr(align(128))]
#[derive(Debug)]
pub(crate) struct PcpSlot {
    pub(crate) pcp: SpinLock<Pcp>,
    pub(crate) hot: Hot,
    pub(crate) stats: Stats,
}

impl PcpSlot {
    pub(crate) fn new(hot: Hot) -> Self {
        PcpSlot {
            pcp: SpinLock::new(Pcp::new()),
            hot,
            stats: Stats::default(),
        }
    }
}

/// Where a pageset operation runs, as the kernel's `rmqueue_pcplist` and
/// `free_unref_page_commit` hold it in locals: the CPU, the zone, and that CPU's pageset
/// slot of the zone (`this_cpu_ptr(zone->per_cpu_pageset)`). The slot's lock guard
/// travels beside it, as the kernel passes `pcp` beside `zone`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pageset<'a> {
    /// The CPU the operation runs as, whose pageset it is.
    pub(crate) cpu: usize,
    pub(crate) zone: &'a Zone,
    /// [`Allocator::slot`]`(cpu, zone.idx)`.
    pub(crate) slot: &'a PcpSlot,
}

/// One list of a pageset, as `__rmqueue_pcplist` and `rmqueue_bulk` name it: the order
/// of its blocks, their migratetype and the list's index ([`pindex`] of the two).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PcpList {
    pub(crate) order: u8,
    pub(crate) mt: MigrateType,
    pub(crate) pi: usize,
}

/// `order_to_pindex` (docs/mechanisms.md §1.4); `mt` is a pcp type (0..=2).
#[inline]
pub(crate) fn pindex(order: u8, mt: MigrateType, thp_lists: u8) -> usize {
    if order <= 3 {
        3 * order as usize + mt as usize
    } else {
        12 + (thp_lists == 2 && mt == MigrateType::Movable) as usize
    }
}

/// The list after `pi`, round robin, that `is_empty` says is not empty:
/// `free_pcppages_bulk`'s `do { if (++pindex > NR_PCP_LISTS - 1) pindex = 0; } while
/// (list_empty(list))`, shared by the linked and the array pagesets' drains. At least one
/// list must hold pages.
#[inline(always)]
fn next_nonempty(mut pi: usize, is_empty: impl Fn(usize) -> bool) -> usize {
    loop {
        pi = (pi + 1) % NR_PCP_LISTS;
        if !is_empty(pi) {
            return pi;
        }
    }
}

/// `pindex_to_order`.
#[inline]
pub(crate) fn order_of(pi: usize) -> u8 {
    if pi < 12 {
        (pi / 3) as u8
    } else {
        THP_ORDER
    }
}
