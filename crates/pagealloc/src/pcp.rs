//! Per-CPU pagesets: the lists, the hot path (`rmqueue_pcplist`, `free_unref_page`) and
//! the paths that move pages between a pageset and its zone (`rmqueue_bulk`,
//! `free_pcppages_bulk`, `drain_pages_zone`, `decay_pcp_high`).
//!
//! # Budget of the hot path
//! An order-0 allocate+free pair on a PCP hit with the checked free, measured by
//! `examples/hotpath` on a 2-core AMD EPYC (Zen 3) VM (docs/performance.md, "The PCP
//! hit", has the commands and the history):
//!
//! | | instructions per pair (callgrind) | `free_on_unchecked` |
//! |---|---:|---:|
//! | the walk and `commit_free` as they were (seam, no sink) | 423 | 415 |
//! | `alloc_hit`, `Hot`, `on_free`'s short form (seam, no sink) | 301 | 268 |
//! | the seam compiled out (no `access` feature) | 286 | 254 |
//! | `free_hit`: free inlined, its check under the pageset lock | 256 | 250 |
//! | array pagesets' hits out of line, no second order test (`array_pcp` off) | 254 | 248 |
//! | metadata and list links read without bounds tests their callers proved (`meta_in`, the pop), spaced metadata | 248 | 247 |
//! | a second inlined copy of the hit for rings, picked by one test per call (`Allocator::ring_hits`) | **257** | **254** |
//!
//! The last row is a trade: the rings' hits (`own_bitmap`'s order-0 rings, which `fast`
//! has, and `array_pcp`) ran out of line with lookups of their own and the order a
//! variable, 405 instructions per checked pair for `fast` (394 with `array_pcp`); inlined,
//! 289 (285). `HOTPATH_CONFIG=fast hotpath N` measures them.
//!
//! The hits have no report sites of the `access` seam (a sink turns them off,
//! `Hot::no_hits`): the same count with the feature compiled in (270 when each hit
//! tested for a sink, at 254 without).
//!
//! An order-9 (THP) checked pair (`hotpath N order9`) costs 268 instructions (258 before
//! the last row, 279 under `fast`, whose copy tests the rings first): its
//! allocation runs `__zone_watermark_ok` in full, whose free-area scan is one load of the
//! zone's occupancy word ([`Zone::watermark_fast`]; 303 when it read a byte per order).
//!
//! Time: 18.2–19.0 ns per checked pair on a quiet host (the 256-instruction build); the
//! last row's build times the same as the one before it, side by side (27.0 against
//! 27.3 ns, 7 interleaved runs on a busy host). Absolute figures move 2–3× with the
//! load; the ratio much less. `alloc_on`, `free_on` and everything they call on a hit
//! are inlined into the caller.
//!
//! What a hit does, and nothing else — three atomic read-modify-writes per pair (the two
//! pagesets' `try_lock`s and the free's compare-and-swap), the rest plain loads and
//! stores:
//! - allocation ([`Allocator::alloc_hit`]): the first zone of the CPU's zonelist, its
//!   watermark test (`zone_watermark_fast`, as the kernel's walk does), one `try_lock`,
//!   the list's emptiness test, `free_count >>= 1`, the pop, four field updates (the
//!   state change to `Allocated` a plain store: only the pageset's lock holder moves a
//!   frame off its list), unlock;
//! - free (`Allocator::free_hit` → `free_unref_page_commit`): the zone of the PFN, the
//!   pageblock's migratetype (`get_pfnblock_migratetype`, which picks the list), one
//!   `try_lock`, then under it the ownership check — the compare-and-swap
//!   `Allocated -> Freeing` and the order — right behind the lock's own
//!   read-modify-write, which has already drained the store buffer; the push, the
//!   counters, the short form of [`tune::on_free`] (no `nr_pcp_high` while
//!   `count < high` and no zone flag is set), unlock.
//!
//! With `Config::own_bitmap` (in `fast`) the order-0 hits run the ring-aware copy: the pop
//! takes an index off the ring and sets the frame's ownership bit (an atomic `or`); the
//! free clears the bit (an atomic `and` that tells a double free) and pushes the index,
//! neither reading nor writing the frame's metadata line — four atomic
//! read-modify-writes per pair, 289 instructions.
//!
//! Each has one unlikely branch to its cold path: an allocation that is not a hit
//! (busy or empty list, failed watermark test, order or zone the lists do not serve)
//! returns `None` having changed nothing and the full zonelist walk runs instead, repeating
//! the tests, so the kernel's behaviour is unchanged; a free that is not a hit (busy
//! pageset, isolated pageblock, an order the lists do not serve, poisoning, a frame or CPU
//! out of range) changes nothing and takes the full path, which repeats the checks and
//! reports errors; a free that must drain or counts a free_high goes to `after_free`. The
//! switches the hit needs are copied into the pageset's [`Hot`] at build time; it reads
//! no [`Config`](crate::Config). Refill and drain, the only places that take the zone
//! lock, run the rest of [`crate::tune`].
//!
//! What stays, and why: the watermark test reads the zone's live free-page counter (a
//! cached per-pageset verdict could not be exact, and the kernel tests on every
//! allocation); the free's pageblock lookup decides the list (the pageblock's type may
//! have changed since the allocation); the compare-and-swap is what makes two racing
//! frees of one block fail for all but one, whichever CPUs they run on.
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
//! A.13). With [`Config::array_pcp`](crate::Config::array_pcp) the lists are the
//! [`Ring`]s (docs/mechanisms.md A.5) and the linked `lists` stay empty; without it, the
//! rings stay empty.

use crate::access::{Rec, PCP_HEADER};
use crate::allocator::Allocator;
use crate::buddy::{Buddy, RmqueueMode};
use crate::frame::{Gfp, MigrateType, NR_PCPTYPES, PAGEBLOCK_ORDER, THP_ORDER};
use crate::memmap::{List, PageMeta, State, FLAG_MERGE_SKIPPED, NIL};
use crate::stats::Stats;
use crate::sync::{SpinGuard, SpinLock};
use crate::tune::{self, PcpState};
use crate::zone::{Zone, ALLOC_KSWAPD, WMARK_HIGH, WMARK_LOW, ZONE_BELOW_HIGH};
use alloc::vec::Vec;

/// Lists per pageset: 3 types × orders 0..=3, plus the THP lists (`NR_PCP_LISTS`).
pub const NR_PCP_LISTS: usize = 14;

/// [`Config::own_bitmap`](crate::Config::own_bitmap)'s drain: frames whose metadata line is
/// prefetched ahead of the one written (a few hundred ns of misses in flight at the
/// write rate of an L1 hit).
const OWN_PREFETCH: u32 = 48;
/// [`Config::own_bitmap`](crate::Config::own_bitmap)'s drain: frames written before their
/// runs are spliced, 16 KiB of metadata lines, so that the splice's passes hit the L1.
const OWN_CHUNK: u32 = 256;

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
    /// With [`Config::array_pcp`](crate::Config::array_pcp) the lists are these rings and
    /// `lists` stays empty; with [`Config::own_bitmap`](crate::Config::own_bitmap) the
    /// order-0 lists are; otherwise these stay empty (and unallocated).
    pub(crate) rings: [Ring; NR_PCP_LISTS],
    /// `Config::pcp_buddy`: the pageblocks this pageset owns (`pcp_buddy.rs`).
    pub(crate) owned: crate::pcp_buddy::Owned,
}

/// One list of an array pageset ([`Config::array_pcp`](crate::Config::array_pcp)): the
/// metadata indices of its blocks, head first, in a ring buffer of a power-of-two size
/// that doubles when full (under the pageset's lock; it never shrinks, so it ends at the
/// largest count the list has held).
#[derive(Debug, Default)]
pub(crate) struct Ring {
    buf: Vec<u32>,
    head: u32,
    len: u32,
}

impl Ring {
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline(always)]
    pub(crate) fn len(&self) -> u32 {
        self.len
    }
    #[inline(always)]
    fn mask(&self) -> u32 {
        (self.buf.len() as u32).wrapping_sub(1)
    }
    /// Position in the buffer of entry `k` (0: the head); the buffer line it lies in is
    /// `slot / 16`.
    #[inline(always)]
    pub(crate) fn slot_of(&self, k: u32) -> u32 {
        self.head.wrapping_add(k) & self.mask()
    }
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let cap = (self.buf.len() * 2).max(64);
        let mut buf = Vec::with_capacity(cap);
        buf.extend(self.iter());
        buf.resize(cap, 0);
        (self.buf, self.head) = (buf, 0);
    }
    /// A free: `list_add(&page->pcp_list, ...)`.
    #[inline(always)]
    pub(crate) fn push_head(&mut self, i: u32) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        self.head = self.head.wrapping_sub(1) & self.mask();
        self.buf[self.head as usize] = i;
        self.len += 1;
    }
    /// A refill: `list_add_tail`.
    #[inline]
    pub(crate) fn push_tail(&mut self, i: u32) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        let s = self.slot_of(self.len);
        self.buf[s as usize] = i;
        self.len += 1;
    }
    /// An allocation: the head.
    #[inline(always)]
    pub(crate) fn pop_head(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let i = self.buf[self.head as usize];
        self.head = self.head.wrapping_add(1) & self.mask();
        self.len -= 1;
        Some(i)
    }
    /// A drain: the tail.
    #[inline]
    pub(crate) fn pop_tail(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        Some(self.buf[self.slot_of(self.len) as usize])
    }
    /// Drop the last `n` entries (a drain that has read them).
    #[inline]
    pub(crate) fn truncate_tail(&mut self, n: u32) {
        debug_assert!(n <= self.len);
        self.len -= n;
    }
    /// The `k`-th entry from the tail (0: the tail).
    #[inline]
    pub(crate) fn nth_from_tail(&self, k: u32) -> u32 {
        debug_assert!(k < self.len);
        self.buf[self.slot_of(self.len - 1 - k) as usize]
    }
    /// Entries head to tail.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len).map(|k| self.buf[self.slot_of(k) as usize])
    }
    /// Move the last `n` entries in front of the `m` entries before them (a refill's
    /// clusters, cut first but joined after the blocks taken one by one).
    pub(crate) fn rotate_back(&mut self, m: u32, n: u32) {
        // Three reversals: [A B] -> [B^r A^r]^r = [B A].
        let start = self.len - m - n;
        self.reverse(start, start + m);
        self.reverse(start + m, self.len);
        self.reverse(start, self.len);
    }
    /// Reverse the entries `from..to` (0: the head).
    fn reverse(&mut self, from: u32, to: u32) {
        let (mut a, mut b) = (from, to);
        while a + 1 < b {
            b -= 1;
            let (sa, sb) = (self.slot_of(a) as usize, self.slot_of(b) as usize);
            self.buf.swap(sa, sb);
            a += 1;
        }
    }
}

impl Pcp {
    /// What `validate` checks of every pageset not [`resized`](Pcp::resized) since:
    /// `high_min <= high <= high_max` and `count <= high_max`, each up to what refills may
    /// add beyond `high` ([`refill_overshoot`]): a refill may leave `count` above
    /// `high_max`, and `decay_pcp_high` then sets `high` to `count - (batch << SCALE)`,
    /// above `high_max` too, as the kernel does. A zone so small that its low-watermark
    /// share exceeds its high-fraction share has `high_min > high_max`; the kernel's
    /// `clamp` then yields `high_max` and a cut under pressure stops at `high_min`, so the
    /// bounds are the smaller and the larger of the two.
    pub(crate) fn within_bounds(&self) -> bool {
        let st = &self.st;
        let (lo, hi) = (st.high_min.min(st.high_max), st.high_min.max(st.high_max));
        let top = hi as i64 + refill_overshoot(st.batch) as i64;
        lo <= st.high && st.high as i64 <= top && st.count as i64 <= top
    }

    /// Clear `resized` once the pageset is inside its bounds again (a refill or a tick).
    #[inline]
    pub(crate) fn settle_resize(&mut self) {
        if self.resized && self.within_bounds() {
            self.resized = false;
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
    /// Bit `k`: the hit serves blocks of order `k` on linked lists (`pcp_allowed_order`);
    /// without the orders whose lists are rings (served by the ring-aware copy of the hit,
    /// `Allocator::ring_hits`), and 0 while an access sink is installed ([`Hot::no_hits`]).
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
    /// `orders` of an array pageset ([`Config::array_pcp`](crate::Config::array_pcp):
    /// the lists are [`Pcp::rings`]); 0 with linked lists, and 0 while an access sink is
    /// installed.
    pub(crate) ring_orders: u16,
    /// Bit `k`: blocks of order `k` are cached (`pcp_allowed_order`), on either kind of
    /// list: what the full paths test.
    pub(crate) cached: u16,
    /// The lists are [`Pcp::rings`].
    pub(crate) rings: bool,
    /// The order-0 lists are [`Pcp::rings`] (all lists are with `rings`; with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap) only these).
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
        let (orders, ring_orders) = if cfg.array_pcp {
            (0, orders)
        } else if cfg.own_bitmap {
            // `Config::own_bitmap`: the order-0 lists are rings, the others linked.
            (orders & !1, orders & 1)
        } else {
            (orders, 0)
        };
        Hot {
            orders: crate::pcp_buddy::hit_orders(cfg, orders),
            ring_orders,
            cached: orders | ring_orders,
            rings: cfg.array_pcp,
            rings0: cfg.array_pcp || cfg.own_bitmap,
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

    /// With an access sink installed: no order takes the hit, so every allocation takes
    /// the zonelist walk and every free the full path, whose report sites are compiled
    /// in — and the hits, which have none, cost nothing for the seam when no sink is
    /// installed (docs/performance.md, "The access seam"). Both paths do the same work
    /// to the lists; the hit only skips tests the full path repeats.
    #[cfg(feature = "access")]
    pub(crate) fn no_hits(&mut self) {
        self.orders = 0;
        self.ring_orders = 0;
    }

    /// `pcp_allowed_order` for the hit of linked lists (`RING` false) or of rings.
    #[inline(always)]
    pub(crate) fn hit_allows<const RING: bool>(&self, order: u8) -> bool {
        let bits = if RING { self.ring_orders } else { self.orders };
        order < 16 && bits & (1 << order) != 0
    }

    /// Every list is one of [`Pcp::rings`].
    #[inline(always)]
    pub(crate) fn ring(&self) -> bool {
        self.rings
    }

    /// The lists of blocks of `order` are [`Pcp::rings`].
    #[inline(always)]
    pub(crate) fn ring_at(&self, order: u8) -> bool {
        self.rings || (order == 0 && self.rings0)
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

/// The most pages refills can leave on a pageset beyond its `high`: `nr_pcp_alloc`
/// caps an order-0 refill at `max(high - count - batch, batch)`, so one refill may end
/// `batch` above `high`; a higher-order refill takes `max(batch >> order, 2)` blocks (one
/// block when `batch` is 1) whatever `count` is. A list is refilled only when empty, so
/// each of the 14 lists adds at most one such refill; frees past `high` drain.
pub(crate) fn refill_overshoot(batch: i32) -> i32 {
    let batch = batch.max(1);
    let blocks = |order: u8| -> i32 {
        let n = if batch > 1 {
            (batch >> order).max(2)
        } else {
            1
        };
        n << order
    };
    let low: i32 = (0..=3u8)
        .map(|o| if o == 0 { batch } else { blocks(o) })
        .sum();
    3 * low + 2 * blocks(THP_ORDER)
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

impl Allocator {
    #[inline]
    pub(crate) fn slot(&self, cpu: usize, zone: usize) -> &PcpSlot {
        &self.pcps[cpu * self.zones.len() + zone]
    }

    /// [`Allocator::slot`] for a PCP hit, whose `cpu` and `zone` were checked against
    /// `self.cpus` and `self.zones` (a CPU index from the caller, a zone from the CPU's
    /// zonelist or the frame's PFN): without testing the index again.
    #[inline(always)]
    pub(crate) fn slot_hit(&self, cpu: usize, zone: usize) -> &PcpSlot {
        debug_assert!(cpu < self.cpus.len() && zone < self.zones.len());
        // SAFETY: the build made `pcps` `cpus.len() * zones.len()` slots, one per CPU and
        // zone, and neither length changes afterwards (no lock guards them); with `cpu` and
        // `zone` below them (the callers' contract, checked above in debug builds) the
        // index is below `pcps.len()`.
        unsafe { self.pcps.get_unchecked(cpu * self.zones.len() + zone) }
    }

    /// `pcp_allowed_order`.
    #[inline]
    pub(crate) fn pcp_allowed(&self, order: u8) -> bool {
        self.cfg.pcp && (order <= 3 || (order == THP_ORDER && self.cfg.thp))
    }

    /// The PCP hit of an allocation: `get_page_from_freelist` when the first zone of the
    /// CPU's zonelist passes its watermark test and the list holds a block, then
    /// `rmqueue_pcplist`'s pop. Returns `None`, having changed nothing, whenever any other
    /// step would run (a busy or empty list, a failed watermark test, an order or zone the
    /// lists do not serve); the caller then takes the full walk, which repeats the tests.
    #[inline(always)]
    pub(crate) fn alloc_hit<const RINGS: bool>(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
    ) -> Option<u64> {
        let zi = self.cpus.get(cpu)?.home_zone;
        let zone = self.zones.get(zi)?;
        let slot = self.slot_hit(cpu, zi);
        let h = &slot.hot;
        if RINGS && h.hit_allows::<true>(order) {
            return self.alloc_hit_rest::<true>(cpu, zone, slot, order, gfp);
        }
        // With a sink installed no order is allowed here ([`Hot::no_hits`]): a reported
        // run takes the walk, which reports what it reads.
        if !h.hit_allows::<false>(order) {
            return None;
        }
        self.alloc_hit_rest::<false>(cpu, zone, slot, order, gfp)
    }

    /// The rest of [`Allocator::alloc_hit`] once the order is known to be cached, on
    /// linked lists (`RING` false) or rings.
    #[inline(always)]
    fn alloc_hit_rest<const RING: bool>(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        order: u8,
        gfp: Gfp,
    ) -> Option<u64> {
        let h = &slot.hot;
        let mt = gfp.migratetype();
        if h.movable_zone && mt != MigrateType::Movable {
            return None;
        }
        let mut aflags = WMARK_LOW as u32;
        if gfp.contains(Gfp::KSWAPD) {
            aflags |= ALLOC_KSWAPD;
        }
        // `try_zone`: the high mark while BELOW_HIGH is clear, else the low mark. A failed
        // test leaves the flag and kswapd to the full walk.
        let mark = if h.below_high && !zone.has_flag(ZONE_BELOW_HIGH) {
            WMARK_HIGH
        } else {
            WMARK_LOW
        };
        if !zone.watermark_fast(order, zone.wmark(mark), aflags, h.free_accounting) {
            return None;
        }
        let mut pcp = slot.pcp.try_lock()?;
        let pi = pindex(order, mt, h.thp_lists);
        if if RING {
            pcp.rings[pi].is_empty()
        } else {
            pcp.lists[pi].is_empty()
        } {
            return None;
        }
        tune::on_alloc(&mut pcp.st, &self.tune);
        pcp.active = true;
        self.pop_hit::<RING, false>(cpu, zone, slot, &mut pcp, pi, order, mt)
    }

    /// The pop of `__rmqueue_pcplist` from a list known not to be empty (`None` only if
    /// that was wrong), reported when `TRACED` (a sink is installed: the caller tested).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn pop_hit<const RING: bool, const TRACED: bool>(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        pcp: &mut Pcp,
        pi: usize,
        order: u8,
        mt: MigrateType,
    ) -> Option<u64> {
        let m = &self.meta[..];
        // `Config::own_bitmap`: an order-0 block leaves its ring with its metadata as
        // its last allocation or the refill left it (`Allocated`, order 0); its bit is
        // the ownership.
        let own = RING && order == 0 && zone.own_bitmap();
        let i = match (RING, TRACED) {
            (false, false) => pcp.lists[pi].pop_head_nonempty(m),
            (false, true) => pop_traced(cpu, zone, pcp, pi, m)?,
            (true, false) => pcp.rings[pi].pop_head()?,
            (true, true) => ring_pop_traced(cpu, zone, pcp, pi, !own)?,
        };
        pcp.st.count -= 1 << order;
        if self.tune.count_min {
            pcp.st.count_min = pcp.st.count_min.min(pcp.st.count);
        }
        if own {
            zone.own_set(zone.pfn_of(i));
        } else {
            // `i` came off one of `zone`'s lists.
            let e = self.meta_in(zone, i);
            e.set_state(State::Allocated);
            e.set_mt(mt as u8);
        }
        slot.stats.pgalloc.add(1 << order);
        Some(zone.pfn_of(i))
    }

    /// `rmqueue_pcplist` (docs/mechanisms.md §4.2): `None` if the pcp is busy or the zone is empty.
    #[inline]
    pub(crate) fn rmqueue_pcplist(
        &self,
        cpu: usize,
        zone: &Zone,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        let slot = self.slot(cpu, zone.idx);
        let Some(mut pcp) = slot.pcp.try_lock() else {
            self.cpus[cpu].stats.pcp_lock_busy.add_shared(1);
            return None;
        };
        tune::on_alloc(&mut pcp.st, &self.tune);
        self.take_from_list(cpu, zone, slot, &mut pcp, order, mt, aflags)
    }

    /// `__rmqueue_pcplist`: pop the head of the list, refilling it first if empty.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn take_from_list(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        pcp: &mut Pcp,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        pcp.active = true;
        let pi = pindex(order, mt, slot.hot.thp_lists);
        let ring = slot.hot.ring_at(order);
        let empty = |p: &Pcp| {
            if ring {
                p.rings[pi].is_empty()
            } else {
                p.lists[pi].is_empty()
            }
        };
        if empty(pcp) {
            self.refill(cpu, zone, slot, pcp, order, mt, aflags, pi);
            if empty(pcp) {
                return None;
            }
        }
        match (ring, zone.trace.on()) {
            (false, false) => self.pop_hit::<false, false>(cpu, zone, slot, pcp, pi, order, mt),
            (false, true) => self.pop_hit::<false, true>(cpu, zone, slot, pcp, pi, order, mt),
            (true, false) => self.pop_hit::<true, false>(cpu, zone, slot, pcp, pi, order, mt),
            (true, true) => self.pop_hit::<true, true>(cpu, zone, slot, pcp, pi, order, mt),
        }
    }

    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn refill(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        pcp: &mut Pcp,
        order: u8,
        mt: MigrateType,
        aflags: u32,
        pi: usize,
    ) {
        let zf = zone.tune_flags();
        let mut n = self.nr_pcp_alloc(&mut pcp.st, zone, zf, order);
        if order == THP_ORDER && self.cfg.thp_refill_high && n > 1 {
            // Half the room below `high`: the pageset stays within `high`. Auto-tuning
            // raises `high` once per refill; raise it as the kernel-sized refills this one
            // replaces would have, so `high` (and the drains it sets) grows as before.
            let n0 = n;
            n = n.max(((pcp.st.high - pcp.st.count) / 2) >> order);
            for _ in 1..n / n0 {
                self.nr_pcp_alloc(&mut pcp.st, zone, zf, order);
            }
        }
        if self.cfg.pcp_buddy && order < PAGEBLOCK_ORDER {
            let w = crate::pcp_buddy::Want {
                cpu,
                zone,
                slot,
                order,
                mt,
                pi,
                n,
            };
            n -= self.pcp_buddy_refill(w, pcp);
        }
        let got = if n > 0 || !self.cfg.pcp_buddy {
            self.rmqueue_bulk(cpu, zone, order, n, pcp, pi, mt, aflags)
        } else {
            0
        };
        pcp.settle_resize();
        if got > 0 {
            let pages = (got as u64) << order;
            slot.stats.pcp_refill.add(1);
            slot.stats.pcp_refill_pages.add(pages);
            slot.stats.alloc_zone.add(pages);
        }
    }

    /// `rmqueue_bulk` (docs/mechanisms.md §4.4): `n` blocks under one zone-lock hold, appended to the
    /// tail of list `pi`. Returns blocks taken.
    ///
    /// With clustered refill (order 0), whole clusters are first cut off the order-0
    /// list in O(1) each and made `Pcp` after the zone lock is dropped (`cluster.rs`);
    /// the rest is taken block by block as usual. `refill_meta_touched` counts frames
    /// whose metadata is read or written under the lock: one per block taken, about one
    /// per cluster cut.
    ///
    /// The access seam is tested once, here: the hold runs a copy of the refill whose
    /// report sites are compiled in (a sink is installed) or compiled away.
    #[allow(clippy::too_many_arguments)]
    fn rmqueue_bulk(
        &self,
        cpu: usize,
        zone: &Zone,
        order: u8,
        n: i32,
        pcp: &mut Pcp,
        pi: usize,
        mt: MigrateType,
        aflags: u32,
    ) -> i32 {
        if zone.trace.on() {
            self.rmqueue_bulk_t::<true>(cpu, zone, order, n, pcp, pi, mt, aflags)
        } else {
            self.rmqueue_bulk_t::<false>(cpu, zone, order, n, pcp, pi, mt, aflags)
        }
    }

    /// [`Allocator::rmqueue_bulk`], reported when `SINK` (as [`Rec`]'s).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn rmqueue_bulk_t<const SINK: bool>(
        &self,
        cpu: usize,
        zone: &Zone,
        order: u8,
        n: i32,
        pcp: &mut Pcp,
        pi: usize,
        mt: MigrateType,
        aflags: u32,
    ) -> i32 {
        let m = &self.meta[..];
        let mut g = zone.lock_t::<SINK>(cpu, &*self.platform);
        let st = g.st;
        let mut b = g.buddy::<SINK>(m, &self.cfg);
        let mut got = 0;
        let mut touched = 0u64;
        if order == 0 && self.cfg.clustered_refill {
            if let Some((frames, clusters)) = b.cut_clusters(mt, n as u32) {
                got += frames as i32;
                touched += clusters as u64;
                st.cluster_cut.add(clusters as u64);
            }
        }
        let ring = self.cfg.array_pcp || (self.cfg.own_bitmap && order == 0);
        let own = ring && order == 0 && zone.own_bitmap();
        let before = pcp.lists[pi].tail();
        let taken_from = pcp.rings[pi].len();
        if order == THP_ORDER && self.cfg.thp_splice {
            // The blocks on the order-9 list, cut off in one step (`thp_splice`).
            let cache = self.cfg.pcp_migratetype_cache;
            if let Some((first, last, cnt)) = b.cut_for_pcp(order, mt, n as u32, cache) {
                if ring {
                    let mut i = first;
                    for _ in 0..cnt {
                        let next = m[i as usize].next();
                        ring_push_tail_t(cpu, &mut pcp.rings[pi], pi, i, &b.rec());
                        i = next;
                    }
                } else {
                    let tail = pcp.lists[pi].tail();
                    pcp.lists[pi].splice_after_t(m, tail, first, last, cnt, &mut b.rec());
                }
                got += cnt as i32;
                touched += cnt as u64;
            }
        }
        // `Config::rmqueue_mode` (6.15): the fallback mode that found the last block is
        // where the next `__rmqueue` of this refill starts; without it, every block starts
        // at the own type's lists.
        let mut mode = RmqueueMode::Normal;
        let keep_mode = self.cfg.rmqueue_mode;
        while got < n {
            if !keep_mode {
                mode = RmqueueMode::Normal;
            }
            // With `refill_runs`, the blocks still needed as one run of the smallest block;
            // with `refill_pairs`, both halves of a block of the next order at once.
            let run = if self.cfg.refill_runs {
                b.take_run(order, mt, (n - got) as u64)
            } else {
                None
            };
            // A run's blocks get the type `expand` would have written on each.
            let typed = run.is_some() || self.cfg.pcp_migratetype_cache;
            let (pfn, blocks) = match run {
                Some(r) => r,
                None => match (self.cfg.refill_pairs && n - got >= 2)
                    .then(|| b.take_pair(order, mt))
                    .flatten()
                {
                    Some(pfn) => (pfn, 2),
                    None => match b.take_mode(order, mt, aflags, &mut mode) {
                        Some(pfn) => (pfn, 1),
                        None => break,
                    },
                },
            };
            for k in 0..blocks {
                let i = zone.meta_index(pfn + (k << order));
                let e = &m[i as usize];
                e.set_order(order);
                if own {
                    // `Config::own_bitmap`: an order-0 frame on a ring reads as the
                    // allocation it will become (its bit, clear, says it is not one yet).
                    e.set_state(State::Allocated);
                    e.set_mt(mt as u8);
                } else {
                    e.set_state(State::Pcp);
                }
                if typed {
                    // ≤ 6.9 `__rmqueue_smallest`: `set_pcppage_migratetype(page,
                    // migratetype)` with the type of the free list it came from (no
                    // pageblock lookup).
                    e.set_mt(mt as u8);
                }
                if ring {
                    ring_push_tail_t(cpu, &mut pcp.rings[pi], pi, i, &b.rec());
                } else {
                    pcp.lists[pi].push_tail_t(m, i, &mut b.rec());
                }
            }
            got += blocks as i32;
            touched += blocks;
        }
        st.refill_meta_touched.add(touched);
        {
            let r = b.rec();
            r.pcp(cpu, pi as u8, true);
            r.pcp(cpu, PCP_HEADER, true);
            r.moved((got as u64) << order);
        }
        let cut = b.inner.free.clusters.pending.take();
        drop(g);
        if let Some(c) = cut {
            // The fix-up, outside the zone lock; the frames are ours (pcp lock held,
            // on no zone list), and zone-lock holders that read order-0 Buddy states
            // wait for `cluster_inflight` to drop.
            let r = Rec::<SINK>::unlocked(zone);
            if !c.fixed {
                crate::cluster::fix_up(zone, m, &c, self.cfg.pcp_migratetype_cache, &r);
                zone.cluster_inflight
                    .fetch_sub(1, crate::sync::atomic::Ordering::Release);
            }
            // Cut before the blocks taken one by one: keep that order on the list.
            if ring {
                let taken = pcp.rings[pi].len() - taken_from;
                let mut i = c.first;
                for k in 0..c.len {
                    // each next frame is read from the one before (cached: just fixed up)
                    r.frame_dep(zone.pfn_of(i), false, u8::from(k > 0));
                    ring_push_tail_t(cpu, &mut pcp.rings[pi], pi, i, &r);
                    let e = &m[i as usize];
                    let next = e.next();
                    if own {
                        // as for the blocks taken one by one above (line cached: fixed up)
                        e.set_state(State::Allocated);
                        e.set_mt(mt as u8);
                    }
                    i = next;
                }
                pcp.rings[pi].rotate_back(taken, c.len);
            } else {
                pcp.lists[pi].splice_after_t(m, before, c.first, c.last, c.len, &mut { r });
            }
        }
        pcp.st.count += got << order;
        got
    }

    /// `free_unref_page` (docs/mechanisms.md §3.1) for a block whose ownership the caller proved.
    #[inline(always)]
    pub(crate) fn free_unref_page(&self, cpu: usize, zone: &Zone, pfn: u64, order: u8) {
        if self.cfg.pcp_buddy && self.pcp_buddy_free(cpu, zone, pfn, order) {
            return;
        }
        let slot = self.slot(cpu, zone.idx);
        let Some((mt, pb_mt)) = pcp_free_types(slot, zone, pfn, order) else {
            return self.free_to_zone(cpu, zone, pfn, order);
        };
        match slot.pcp.try_lock() {
            Some(mut pcp) => {
                let i = zone.meta_index(pfn);
                self.commit_free_any(cpu, zone, slot, &mut pcp, i, order, mt, pb_mt)
            }
            None => self.free_to_zone(cpu, zone, pfn, order),
        }
    }

    /// [`Allocator::commit_free`] on the pageset's kind of lists, reported when a sink is
    /// installed.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn commit_free_any(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        pcp: &mut Pcp,
        i: u32,
        order: u8,
        mt: MigrateType,
        pb_mt: MigrateType,
    ) {
        if order == 0 && zone.own_bitmap() {
            // `Config::own_bitmap`: an order-0 frame on a ring reads as an allocation; the
            // full path's claim left it `Freeing` (pageset lock held).
            self.meta[i as usize].set_state(State::Allocated);
        }
        match (slot.hot.ring_at(order), zone.trace.on()) {
            (false, false) => {
                self.commit_free::<false, false>(cpu, zone, slot, pcp, i, order, mt, pb_mt)
            }
            (false, true) => {
                self.commit_free::<false, true>(cpu, zone, slot, pcp, i, order, mt, pb_mt)
            }
            (true, false) => {
                self.commit_free::<true, false>(cpu, zone, slot, pcp, i, order, mt, pb_mt)
            }
            (true, true) => {
                self.commit_free::<true, true>(cpu, zone, slot, pcp, i, order, mt, pb_mt)
            }
        }
    }

    /// `free_unref_page_commit` (docs/mechanisms.md §3.2), in the kernel's order of
    /// operations, for the block whose head has metadata index `i` (a frame of `zone`), on linked lists
    /// (`RING` false) or rings; the push reported when `TRACED` (a sink is installed:
    /// the caller tested).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn commit_free<const RING: bool, const TRACED: bool>(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        pcp: &mut Pcp,
        i: u32,
        order: u8,
        mt: MigrateType,
        pb_mt: MigrateType,
    ) {
        let m = &self.meta[..];
        // `Config::own_bitmap`: the free of an order-0 block to a ring took its bit and
        // writes nothing of its metadata (the drain will).
        let own = RING && order == 0 && zone.own_bitmap();
        if own {
            slot.stats.free_unwritten.add(1);
        } else {
            let e = self.meta_in(zone, i);
            e.set_state(State::Pcp);
            if slot.hot.mt_cache {
                e.set_mt(pb_mt as u8);
            }
        }
        pcp.active = true;
        slot.stats.pgfree.add(1 << order);
        let pi = pindex(order, mt, slot.hot.thp_lists);
        match (RING, TRACED) {
            (false, false) => pcp.lists[pi].push_head(m, i),
            (false, true) => push_traced(cpu, zone, pcp, pi, m, i),
            (true, false) => pcp.rings[pi].push_head(i),
            (true, true) => ring_push_traced(cpu, zone, pcp, pi, i, !own),
        }
        pcp.st.count += 1 << order;
        let zf = zone.tune_flags();
        let d = tune::on_free_or(&mut pcp.st, order, zf, &self.tune, |st| {
            self.on_free_full(st, zone, zf, order)
        });
        if d.free_high || d.drain > 0 {
            self.after_free(cpu, zone, slot, pcp, d, pi);
        }
    }

    /// The cold end of `free_unref_page_commit`: count a free_high, drain.
    #[cold]
    #[inline(never)]
    fn after_free(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        pcp: &mut Pcp,
        d: tune::FreeDecision,
        pi: usize,
    ) {
        if d.free_high {
            slot.stats.free_high.add(1);
        }
        if d.drain <= 0 {
            return;
        }
        let mut n = d.drain;
        if self.cfg.thp_drain_high && order_of(pi) == THP_ORDER {
            // Down to half of `high`, from this THP list only: one zone trip for many
            // blocks (`Config::thp_drain_high`).
            let len = if slot.hot.ring_at(THP_ORDER) {
                pcp.rings[pi].len()
            } else {
                pcp.lists[pi].len()
            };
            let down = (pcp.st.count - pcp.st.high / 2).min((len as i32) << THP_ORDER);
            n = n.max(down);
        }
        // `Config::drain_newest`: in a long run of frees (`free_count` at its ceiling,
        // `batch << SCALE`, which only frees raise and every allocation halves), the
        // order-0 frames leave from the list heads, the ones freed last.
        let newest = self.cfg.drain_newest
            && !d.free_high
            && pcp.st.free_count >= tune::shl_sat(pcp.st.batch, self.tune.scale);
        self.drain_pcp(cpu, zone, slot, n, pcp, pi, newest);
        if zone.has_flag(ZONE_BELOW_HIGH)
            && zone.watermark_ok(
                0,
                zone.wmark(crate::zone::WMARK_HIGH),
                0,
                self.cfg.highatomic_free_accounting,
            )
        {
            zone.clear_flag(ZONE_BELOW_HIGH);
        }
        self.reclaim_progress(zone);
    }

    /// `free_pcppages_bulk` (docs/mechanisms.md §3.6): `n` pages from the list tails, round robin from
    /// list `start`, under one zone-lock hold.
    pub(crate) fn free_pcppages_bulk(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        n: i32,
        pcp: &mut Pcp,
        start: usize,
    ) {
        self.drain_pcp(cpu, zone, slot, n, pcp, start, false);
    }

    /// [`Allocator::free_pcppages_bulk`]; with `newest` (`Config::drain_newest`, linked
    /// pagesets only) the order-0 frames leave from the heads of their lists, the most
    /// recently freed first, instead of the tails. Higher orders leave from the tails.
    ///
    /// The access seam is tested once, here: the drain runs a copy whose report sites
    /// are compiled in (a sink is installed) or compiled away.
    #[allow(clippy::too_many_arguments)]
    fn drain_pcp(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        n: i32,
        pcp: &mut Pcp,
        start: usize,
        newest: bool,
    ) {
        if self.cfg.pcp_buddy {
            return self.pcp_buddy_drain(cpu, zone, slot, n, pcp, start);
        }
        if zone.trace.on() {
            self.drain_pcp_t::<true>(cpu, zone, slot, n, pcp, start, newest)
        } else {
            self.drain_pcp_t::<false>(cpu, zone, slot, n, pcp, start, newest)
        }
    }

    /// [`Allocator::drain_pcp`], reported when `SINK` (as [`Rec`]'s).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn drain_pcp_t<const SINK: bool>(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        n: i32,
        pcp: &mut Pcp,
        start: usize,
        newest: bool,
    ) {
        let mut n = n.min(pcp.st.count);
        if n <= 0 {
            return;
        }
        if slot.hot.ring() {
            return self.drain_rings::<SINK>(cpu, zone, slot, n, pcp, start);
        }
        let m = &self.meta[..];
        let moved_before = pcp.st.count;
        let splice = self.cfg.splice_drain && self.cfg.merge_skip;
        let firsts = if splice {
            drain_prewalk::<SINK>(cpu, zone, pcp, n, start, newest, m)
        } else {
            [NIL; NR_PCP_LISTS]
        };
        let mut g = zone.lock_t::<SINK>(cpu, &*self.platform);
        let isolated = zone.has_isolated_pageblocks();
        let mut b = g.buddy::<SINK>(m, &self.cfg);
        if self.cfg.clustered_refill {
            // A drain's order-0 frees open fresh clusters: a drain of one batch of one
            // migratetype becomes one cluster.
            b.inner.free.clusters.start_fresh();
        }
        // Checked under the lock: with an isolated pageblock or merging required, every
        // frame goes through `free_order0` as usual.
        let splice = splice && !isolated && b.can_skip_merge();
        // Not with an isolated pageblock, nor when drained huge pages are merge-skipped.
        let pairs =
            self.cfg.drain_pairs && !isolated && !self.cfg.thp_merge_skip && !self.cfg.thp_splice;
        // Huge pages merge-skipped in runs (`thp_splice`): as `drain_one` would free
        // each of them, with the same checks.
        let thp_splice =
            self.cfg.thp_splice && self.cfg.merge_skip && !isolated && b.can_skip_merge();
        let mut pi = (start + NR_PCP_LISTS - 1) % NR_PCP_LISTS;
        while n > 0 && pcp.st.count > 0 {
            // With `Config::own_bitmap` the order-0 lists are rings, the others linked.
            pi = next_nonempty(pi, |p| pcp.lists[p].is_empty() && pcp.rings[p].is_empty());
            let k = order_of(pi);
            b.rec().pcp(cpu, pi as u8, true);
            if k == 0 && !pcp.rings[pi].is_empty() {
                n = self.drain_ring0(cpu, &mut b, pcp, pi, n, splice, isolated);
                continue;
            }
            if splice && k == 0 {
                let cnt = pcp.lists[pi].len().min(n as u32);
                debug_assert!(firsts[pi] != NIL);
                self.drain_splice(&mut b, &mut pcp.lists[pi], firsts[pi], cnt, newest);
                if newest {
                    slot.stats.drain_newest.add(cnt as u64);
                }
                n -= cnt as i32;
                pcp.st.count -= cnt as i32;
                continue;
            }
            if thp_splice && k == PAGEBLOCK_ORDER {
                n = self.drain_thp_splice(&mut b, pcp, pi, n);
                continue;
            }
            if newest && k == 0 {
                while let Some(i) = pcp.lists[pi].pop_head_t(m, &mut b.rec()) {
                    n -= 1;
                    pcp.st.count -= 1;
                    b.rec().moved(1);
                    slot.stats.drain_newest.add(1);
                    self.drain_one(&mut b, zone.pfn_of(i), &m[i as usize], 0, isolated);
                    if n <= 0 {
                        break;
                    }
                }
                continue;
            }
            if pairs && k > 0 {
                n = self.drain_list_pairs(&mut b, pcp, pi, k, n);
                continue;
            }
            let prefetch = self.cfg.drain_prefetch && k > 0;
            while let Some(i) = pcp.lists[pi].pop_tail_t(m, &mut b.rec()) {
                n -= 1 << k;
                pcp.st.count -= 1 << k;
                b.rec().moved(1 << k);
                if prefetch {
                    prefetch_next_buddy(zone, &pcp.lists[pi], k, m);
                }
                self.drain_one(&mut b, zone.pfn_of(i), &m[i as usize], k, isolated);
                if n <= 0 {
                    break;
                }
            }
        }
        b.rec().pcp(cpu, PCP_HEADER, true);
        drop(g);
        slot.stats.pcp_drain.add(1);
        slot.stats
            .pcp_drain_pages
            .add((moved_before - pcp.st.count) as u64);
    }

    /// One frame of a drain, zone lock held: its migratetype (the one cached in the page
    /// with `pcp_migratetype_cache` and no isolated pageblock, else the pageblock's), its
    /// state handed back to the buddy, and the buddy free (`free_order0` skips the merge
    /// with `merge_skip`). Shared by the linked and the array pagesets' drains.
    #[inline(always)]
    fn drain_one<const SINK: bool>(
        &self,
        b: &mut Buddy<'_, SINK>,
        pfn: u64,
        e: &PageMeta,
        k: u8,
        isolated: bool,
    ) {
        // `Config::own_bitmap`: an order-0 frame's cached type was not written by its
        // free; the pageblock's is looked up.
        let cached = self.cfg.pcp_migratetype_cache && !(k == 0 && b.z.own_bitmap());
        let mt = if cached && !isolated {
            MigrateType::from_u8(e.mt()).unwrap_or(MigrateType::Movable)
        } else {
            b.pb_mt(pfn)
        };
        e.set_state_flags(State::Tail, 0);
        if k == 0 {
            b.free_order0(pfn, mt);
        } else if k == PAGEBLOCK_ORDER
            && (self.cfg.thp_merge_skip || self.cfg.thp_splice)
            && self.cfg.merge_skip
            && !isolated
            && mt.is_mergeable()
            && b.can_skip_merge()
        {
            b.free_skip_merge_thp(pfn, mt);
        } else {
            b.free_one(pfn, k, mt, false);
        }
    }

    /// The inner loop of [`Allocator::free_pcppages_bulk`] over the order-`k` list `pi`
    /// (`k > 0`) with [`Config::drain_pairs`](crate::Config::drain_pairs) and no isolated
    /// pageblock, zone lock held: blocks leave the tail until `n` pages are out or the
    /// list is empty, as in the kernel's loop, and two buddies leaving one after the other
    /// are freed as one block ([`Allocator::drain_pair_type`]). Returns the pages still to
    /// drain. Inlined: a pageset passed to a call would have to be written back and
    /// reloaded around every buddy free of the kernel's loop beside it.
    #[inline(always)]
    fn drain_list_pairs<const SINK: bool>(
        &self,
        b: &mut Buddy<'_, SINK>,
        pcp: &mut Pcp,
        pi: usize,
        k: u8,
        mut n: i32,
    ) -> i32 {
        let m = b.m;
        // The first block of a pair that leaves together, and its type.
        let mut first: Option<(u64, MigrateType)> = None;
        let prefetch = self.cfg.drain_prefetch;
        while let Some(i) = pcp.lists[pi].pop_tail_t(m, &mut b.rec()) {
            n -= 1 << k;
            pcp.st.count -= 1 << k;
            b.rec().moved(1 << k);
            let pfn = b.z.pfn_of(i);
            if let Some((p, mt)) = first.take() {
                // `i` is the buddy `drain_pair_type` found at the tail. Pairs come in runs
                // (a CPU freeing its own blocks newest first): no prefetch here.
                m[i as usize].set_state_flags(State::Tail, 0);
                b.free_one(p & pfn, k + 1, mt, false);
            } else if let Some(mt) = (n > 0)
                .then(|| self.drain_pair_type(b, &pcp.lists[pi], i, k))
                .flatten()
            {
                // The next block is `i`'s buddy: nothing to fetch for it.
                m[i as usize].set_state_flags(State::Tail, 0);
                first = Some((pfn, mt));
            } else {
                if prefetch {
                    prefetch_next_buddy(b.z, &pcp.lists[pi], k, m);
                }
                self.drain_one(b, pfn, &m[i as usize], k, false);
            }
            if n <= 0 {
                break;
            }
        }
        debug_assert!(first.is_none(), "a pair's second block always follows");
        n
    }

    /// The THP list `pi` of [`Allocator::free_pcppages_bulk`] with
    /// [`Config::thp_splice`](crate::Config::thp_splice) (merge skipping allowed, no
    /// isolated pageblock; zone lock held): the blocks the kernel's loop would take off the
    /// tail (until `n` pages are out or the list is empty) are walked once from the tail,
    /// each made a merge-skipped order-9 `Buddy` head of its type (the type `drain_one`
    /// finds), and each run of one type joins the head of its free list in one splice
    /// ([`Buddy::splice_skipped_thp`]); the list is then cut before the first of them. Run
    /// by run from the tail, every free list ends as `drain_one`'s block-by-block head
    /// inserts leave it. A block of a type that may not merge-skip (`drain_one`'s test) is
    /// freed through `__free_one_page` in its turn. Returns the pages still to drain.
    /// Inlined, as [`Allocator::drain_list_pairs`].
    #[inline(always)]
    fn drain_thp_splice<const SINK: bool>(
        &self,
        b: &mut Buddy<'_, SINK>,
        pcp: &mut Pcp,
        pi: usize,
        n: i32,
    ) -> i32 {
        let m = b.m;
        let k = PAGEBLOCK_ORDER;
        let list = &mut pcp.lists[pi];
        let cnt = (n as u32).div_ceil(1 << k).min(list.len());
        let cached = self.cfg.pcp_migratetype_cache;
        if !SINK {
            return self.drain_thp_runs(b, pcp, pi, n, cnt);
        }
        // The run being built: its first (the block nearest the list head so far) and last
        // block, length and type.
        let (mut first, mut last, mut len, mut run_mt) = (NIL, NIL, 0u32, MigrateType::Movable);
        let mut cur = list.tail().unwrap_or(NIL);
        for j in 0..cnt {
            let e = &m[cur as usize];
            let pfn = b.z.pfn_of(cur);
            // The tail's index is the list's; each next one was read from the previous block.
            b.rec().frame_dep(pfn, true, u8::from(j > 0));
            let prev = e.prev();
            let mt = if cached {
                MigrateType::from_u8(e.mt()).unwrap_or(MigrateType::Movable)
            } else {
                b.pb_mt(pfn)
            };
            if len > 0 && (mt != run_mt || !mt.is_mergeable()) {
                b.splice_skipped_thp(first, last, len, run_mt);
                len = 0;
            }
            if mt.is_mergeable() {
                e.set_order(k);
                e.set_mt(mt as u8);
                e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
                if len == 0 {
                    (last, run_mt) = (cur, mt);
                }
                first = cur;
                len += 1;
            } else {
                e.set_state_flags(State::Tail, 0);
                b.free_one(pfn, k, mt, false);
            }
            cur = prev;
        }
        if len > 0 {
            b.splice_skipped_thp(first, last, len, run_mt);
        }
        list.truncate_back_t(m, cur, cnt, &mut b.rec());
        let pages = (cnt as i32) << k;
        pcp.st.count -= pages;
        b.rec().moved((cnt as u64) << k);
        n - pages
    }

    /// [`Allocator::drain_thp_splice`] with no sink to report to (`SINK` false): the same
    /// blocks leave in the same runs, with the same metadata, lists and counts. Each run is
    /// marked by [`mark_thp_run`], out of line, and the reports' counts (each block's
    /// metadata and, uncached, its pageblock) are added once for all `cnt` blocks. Inside
    /// the drain's inlined loop the run's state, the zone's fields and the tally lived in
    /// memory: 69 instructions per block, against 23 here (docs/performance.md, "The
    /// 2-thread order-9 puts: the drain's loop").
    #[inline(always)]
    fn drain_thp_runs<const SINK: bool>(
        &self,
        b: &mut Buddy<'_, SINK>,
        pcp: &mut Pcp,
        pi: usize,
        n: i32,
        cnt: u32,
    ) -> i32 {
        debug_assert!(!SINK);
        let (m, k) = (b.m, PAGEBLOCK_ORDER);
        let cached = self.cfg.pcp_migratetype_cache;
        let list = &mut pcp.lists[pi];
        let mut cur = list.tail().unwrap_or(NIL);
        let mut left = cnt;
        while left > 0 {
            let pfn = b.z.pfn_of(cur);
            let e = &m[cur as usize];
            let mt = if cached {
                MigrateType::from_u8(e.mt()).unwrap_or(MigrateType::Movable)
            } else {
                b.z.pageblock_mt(pfn)
            };
            if mt.is_mergeable() {
                let (len, first, next) = mark_thp_run(b.z, m, cached, cur, left, mt);
                b.splice_skipped_thp(first, cur, len, mt);
                (left, cur) = (left - len, next);
            } else {
                let prev = e.prev();
                e.set_state_flags(State::Tail, 0);
                b.free_one(pfn, k, mt, false);
                (left, cur) = (left - 1, prev);
            }
        }
        // `drain_thp_splice`'s `frame_dep` of each block and, uncached, its `pb_mt`.
        b.rec()
            .counted(cnt as u64, if cached { 0 } else { cnt as u64 });
        list.truncate_back_t(m, cur, cnt, &mut b.rec());
        let pages = (cnt as i32) << k;
        pcp.st.count -= pages;
        b.rec().moved((cnt as u64) << k);
        n - pages
    }

    /// [`Config::drain_pairs`](crate::Config::drain_pairs), zone lock held: block `i` of
    /// order `k` has just left `list`'s tail, and the drain will take another `k` block,
    /// the list's new tail. When that block is `i`'s buddy of the same type (as
    /// `drain_one` finds it; at pageblock order the first block's pageblock must have that
    /// type too, as the kernel's merge test reads it), returns the type: the drain then
    /// frees both as one `k + 1` block, and `__free_one_page` goes on from order `k + 1`
    /// exactly as the kernel's second free does after merging with the first, which the
    /// kernel had put on the `k` free list and takes back off (nothing looks at that list
    /// in between). Same lists, metadata, `NR_FREE_PAGES` and `nr_free`; only the first
    /// block's list insertion and removal, its buddy lookups and their reports are left
    /// out. `None` when the next block is not such a buddy.
    #[inline]
    fn drain_pair_type<const SINK: bool>(
        &self,
        b: &Buddy<'_, SINK>,
        list: &List,
        i: u32,
        k: u8,
    ) -> Option<MigrateType> {
        let m = b.m;
        let j = list.tail()?;
        let (p, q) = (b.z.pfn_of(i), b.z.pfn_of(j));
        if p ^ q != 1u64 << k {
            return None;
        }
        // Each block's type as `drain_one` finds it (no isolated pageblock: the caller
        // checked).
        let cached = self.cfg.pcp_migratetype_cache;
        let type_of = |pfn: u64, e: &PageMeta| {
            if cached {
                MigrateType::from_u8(e.mt()).unwrap_or(MigrateType::Movable)
            } else {
                b.pb_mt(pfn)
            }
        };
        let mt = type_of(p, &m[i as usize]);
        if type_of(q, &m[j as usize]) != mt {
            return None;
        }
        // The kernel's second free reads the first block's pageblock type at pageblock
        // order and merges only when the two may merge; the same type always may.
        if k >= PAGEBLOCK_ORDER && cached && b.pb_mt(p) != mt {
            return None;
        }
        Some(mt)
    }

    /// `free_pcppages_bulk` on array pagesets: the kernel's loop (list tails, round robin
    /// from `start`, each list emptied until `n` pages are out; order-0 frames merge-
    /// skipped with `merge_skip`), the frames taken from the rings' tails. Before the
    /// zone lock, [`ring_prewalk`] loads the metadata of every frame that will leave: their
    /// indices are in the rings, so the loads are independent and their misses overlap,
    /// where a walk of linked lists waits for each frame before it can find the next.
    fn drain_rings<const SINK: bool>(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        mut n: i32,
        pcp: &mut Pcp,
        start: usize,
    ) {
        let m = &self.meta[..];
        let moved_before = pcp.st.count;
        let link = self.cfg.splice_drain && self.cfg.merge_skip;
        // `Config::own_bitmap`: the order-0 frames are written in one prefetched pass under
        // the zone lock (`drain_ring_own`), not walked before it.
        let own = zone.own_bitmap();
        ring_prewalk::<SINK>(cpu, zone, pcp, n, start, link, own, m);
        let mut g = zone.lock_t::<SINK>(cpu, &*self.platform);
        let isolated = zone.has_isolated_pageblocks();
        let mut b = g.buddy::<SINK>(m, &self.cfg);
        if self.cfg.clustered_refill {
            b.inner.free.clusters.start_fresh();
        }
        let splice =
            self.cfg.splice_drain && self.cfg.merge_skip && !isolated && b.can_skip_merge();
        let mut pi = (start + NR_PCP_LISTS - 1) % NR_PCP_LISTS;
        while n > 0 && pcp.st.count > 0 {
            pi = next_nonempty(pi, |p| pcp.rings[p].is_empty());
            let k = order_of(pi);
            b.rec().pcp(cpu, pi as u8, true);
            if splice && own && k == 0 {
                let cnt = pcp.rings[pi].len().min(n as u32);
                self.drain_ring_own(cpu, &mut b, &mut pcp.rings[pi], pi, cnt);
                n -= cnt as i32;
                pcp.st.count -= cnt as i32;
                continue;
            }
            if splice && k == 0 {
                let cnt = pcp.rings[pi].len().min(n as u32);
                self.drain_ring_splice(cpu, &mut b, &mut pcp.rings[pi], pi, cnt);
                n -= cnt as i32;
                pcp.st.count -= cnt as i32;
                continue;
            }
            while let Some(i) = ring_pop_tail_t(cpu, &mut pcp.rings[pi], pi, &b.rec()) {
                n -= 1 << k;
                pcp.st.count -= 1 << k;
                b.rec().moved(1 << k);
                let pfn = zone.pfn_of(i);
                b.rec().frame(pfn, true);
                self.drain_one(&mut b, pfn, &m[i as usize], k, isolated);
                if n <= 0 {
                    break;
                }
            }
        }
        b.rec().pcp(cpu, PCP_HEADER, true);
        drop(g);
        slot.stats.pcp_drain.add(1);
        slot.stats
            .pcp_drain_pages
            .add((moved_before - pcp.st.count) as u64);
    }

    /// The order-0 ring `pi` in a drain of linked lists with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap), zone lock held: up to `n` frames
    /// leave its tail, spliced ([`Allocator::drain_ring_own`]) or, with an isolated
    /// pageblock or merging required, one by one. Returns the pages still to drain.
    #[allow(clippy::too_many_arguments)]
    fn drain_ring0<const SINK: bool>(
        &self,
        cpu: usize,
        b: &mut Buddy<'_, SINK>,
        pcp: &mut Pcp,
        pi: usize,
        mut n: i32,
        splice: bool,
        isolated: bool,
    ) -> i32 {
        if splice {
            let cnt = pcp.rings[pi].len().min(n as u32);
            self.drain_ring_own(cpu, b, &mut pcp.rings[pi], pi, cnt);
            pcp.st.count -= cnt as i32;
            return n - cnt as i32;
        }
        let m = b.m;
        while let Some(i) = ring_pop_tail_t(cpu, &mut pcp.rings[pi], pi, &b.rec()) {
            n -= 1;
            pcp.st.count -= 1;
            b.rec().moved(1);
            let pfn = b.z.pfn_of(i);
            b.rec().frame(pfn, true);
            self.drain_one(b, pfn, &m[i as usize], 0, isolated);
            if n <= 0 {
                break;
            }
        }
        n
    }

    /// The order-0 part of an array pageset's drain with
    /// [`Config::own_bitmap`](crate::Config::own_bitmap) and a spliced drain, zone lock
    /// held: the last `cnt` frames of `ring` leave it from the tail, as
    /// [`Allocator::drain_ring_splice`] takes them, but their metadata was not written by
    /// their frees (it reads `Allocated`, order 0) nor walked before the lock. Each frame is
    /// written once here — linked into the chain, made a merge-skipped order-0 `Buddy`
    /// head — with the line of the frame [`OWN_PREFETCH`] places further on prefetched,
    /// so that the misses of a drain overlap instead of each stalling a free. The chain
    /// joins the free lists in runs ([`Allocator::splice_runs`]) every [`OWN_CHUNK`]
    /// frames, while its lines are still in the L1 cache.
    fn drain_ring_own<const SINK: bool>(
        &self,
        cpu: usize,
        b: &mut Buddy<'_, SINK>,
        ring: &mut Ring,
        pi: usize,
        cnt: u32,
    ) {
        let m = b.m;
        b.rec().moved(cnt as u64);
        let mut left = cnt;
        while left > 0 {
            let c = left.min(OWN_CHUNK);
            let last = ring.nth_from_tail(0);
            let mut before = NIL;
            for j in 0..c {
                if j + OWN_PREFETCH < ring.len() {
                    crate::sync::prefetch(&m[ring.nth_from_tail(j + OWN_PREFETCH) as usize]);
                }
                let i = ring.nth_from_tail(j);
                if SINK {
                    let s = ring.slot_of(ring.len() - 1 - j);
                    b.rec().pcp_array(cpu, pi as u8, s, false);
                    // its index was read from the ring line reported just before
                    b.rec().frame_dep(b.z.pfn_of(i), true, 1);
                }
                let e = &m[i as usize];
                // Linked as the page-by-page loop's head inserts would chain them.
                e.set_next(before);
                if before != NIL {
                    m[before as usize].set_prev(i);
                }
                e.set_order(0);
                e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
                before = i;
            }
            if !SINK {
                // What the reports above count: the ring's line and the frame's, each frame.
                b.rec().counted(c as u64, c as u64);
            }
            ring.truncate_tail(c);
            self.splice_runs(b, before, last, c);
            left -= c;
        }
    }

    /// The order-0 part of an array pageset's drain with
    /// [`Config::splice_drain`](crate::Config::splice_drain), zone lock held: the last
    /// `cnt` frames of `ring`, linked into a chain by [`ring_prewalk`] before the lock,
    /// leave it from the tail and become merge-skipped order-0 `Buddy` heads, then join
    /// the order-0 free lists in runs as in [`Allocator::drain_splice`].
    fn drain_ring_splice<const SINK: bool>(
        &self,
        cpu: usize,
        b: &mut Buddy<'_, SINK>,
        ring: &mut Ring,
        pi: usize,
        cnt: u32,
    ) {
        let m = b.m;
        let last = ring.nth_from_tail(0);
        b.rec().moved(cnt as u64);
        let mut first = last;
        for _ in 0..cnt {
            let Some(i) = ring_pop_tail_t(cpu, ring, pi, &b.rec()) else {
                break;
            };
            let e = &m[i as usize];
            e.set_order(0);
            e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
            // its index was read from the ring line reported just before
            b.rec().frame_dep(b.z.pfn_of(i), true, 1);
            first = i;
        }
        self.splice_runs(b, first, last, cnt);
    }

    /// The order-0 part of a drain with [`Config::splice_drain`](crate::Config::splice_drain),
    /// zone lock held: `cnt` frames leave `list` in one cut and join the order-0 free
    /// lists, merge-skipped, one splice per run of one migratetype. `end` is the far end
    /// of the cut, found by [`drain_prewalk`] before the lock.
    /// - From the tail (the kernel's order): the last `cnt` frames, from `end`. Runs are
    ///   moved from the tail end first and each goes to its list's head, so every list
    ///   ends up as the page-by-page loop (pop the tail, push the head) would leave it,
    ///   clusters included.
    /// - From the head (`newest`, [`Config::drain_newest`](crate::Config::drain_newest)):
    ///   the first `cnt` frames, up to `end`. The chain keeps its order, so the frame freed
    ///   last ends at the head of its free list, the first a refill takes (page by page,
    ///   popping the head and pushing each frame on its free list's head, would reverse
    ///   the batch).
    fn drain_splice<const SINK: bool>(
        &self,
        b: &mut Buddy<'_, SINK>,
        list: &mut List,
        end: u32,
        cnt: u32,
        newest: bool,
    ) {
        let m = b.m;
        let (first, last) = if newest {
            (list.cut_front_t(m, end, cnt, &mut b.rec()), end)
        } else {
            let last = list.tail().unwrap_or(NIL);
            list.cut_back_t(m, end, cnt, &mut b.rec());
            (end, last)
        };
        b.rec().moved(cnt as u64);
        // Pass 1, the chase from the list's end: each frame becomes a merge-skipped order-0
        // `Buddy` head (its type is written in pass 2, before the zone lock is dropped;
        // nobody reads these frames meanwhile: they are on no list, and only this zone-lock
        // holder could look at them).
        let mut i = if newest { first } else { last };
        for k in 0..cnt {
            let e = &m[i as usize];
            e.set_order(0);
            e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
            // the end's index is the list's; each next one was read from the previous frame
            b.rec().frame_dep(b.z.pfn_of(i), true, u8::from(k > 0));
            i = if newest { e.next() } else { e.prev() };
        }
        self.splice_runs(b, first, last, cnt);
    }

    /// Pass 2 of a spliced drain, over the chain `first..=last` of `cnt` frames already
    /// merge-skipped order-0 `Buddy` heads, linked both ways, its lines cached: the
    /// free-list type of each frame, one pageblock lookup per pageblock met; a run ends
    /// where the type changes, and each run joins its free list in one splice.
    fn splice_runs<const SINK: bool>(
        &self,
        b: &mut Buddy<'_, SINK>,
        first: u32,
        last: u32,
        cnt: u32,
    ) {
        let m = b.m;
        let mut pb = (u64::MAX, MigrateType::Movable);
        // `Config::own_bitmap`: no cached type (the frees did not write it).
        let cached = self.cfg.pcp_migratetype_cache && !b.z.own_bitmap();
        let mut mt_of = |b: &Buddy<'_, SINK>, i: u32| {
            if cached {
                // no isolated pageblock (checked by the caller): the cached type is valid
                return MigrateType::from_u8(m[i as usize].mt()).unwrap_or(MigrateType::Movable);
            }
            let pfn = b.z.pfn_of(i);
            let block = pfn >> PAGEBLOCK_ORDER;
            if pb.0 != block {
                pb = (block, b.pb_mt(pfn));
            }
            pb.1
        };
        let (mut cur, mut run_last, mut len) = (last, last, 0u32);
        let mut run_mt = mt_of(b, last);
        loop {
            let e = &m[cur as usize];
            e.set_mt(run_mt as u8);
            len += 1;
            if cur == first {
                b.splice_skipped(cur, run_last, len, run_mt);
                break;
            }
            let p = e.prev();
            let p_mt = mt_of(b, p);
            if p_mt != run_mt {
                b.splice_skipped(cur, run_last, len, run_mt);
                (run_last, len, run_mt) = (p, 0, p_mt);
            }
            cur = p;
        }
        b.st.drain_spliced.add(cnt as u64);
    }

    /// `drain_pages_zone` (docs/mechanisms.md §5.4): empty one CPU's pageset of a zone, in chunks of
    /// `batch << SCALE` (6.10+) or in one hold (≤ 6.9).
    pub(crate) fn drain_pages_zone(&self, cpu: usize, zone: &Zone) {
        let slot = self.slot(cpu, zone.idx);
        loop {
            let mut pcp = slot.pcp.lock();
            let c = pcp.st.count;
            if c <= 0 {
                break;
            }
            let n = if self.cfg.chunked_drain {
                c.min(tune::shl_sat(pcp.st.batch.max(1), self.tune.scale))
            } else {
                c
            };
            slot.stats.drain_cpu.add(1);
            self.free_pcppages_bulk(cpu, zone, slot, n, &mut pcp, 0);
            // A chunk that freed nothing would repeat forever: stop (never expected).
            if !self.cfg.chunked_drain || pcp.st.count >= c {
                break;
            }
        }
        self.reclaim_progress(zone);
    }

    /// The per-CPU part of `refresh_cpu_vm_stats` (docs/mechanisms.md §5.2, §5.3): decay `high`, return
    /// the excess, and drain remote-node pcps idle for 3 ticks. True if work remains.
    pub(crate) fn tick_zone(&self, cpu: usize, zone: &Zone) -> bool {
        let slot = self.slot(cpu, zone.idx);
        let mut pcp = slot.pcp.lock();
        let d = match &self.cfg.policy {
            None => tune::decay(&mut pcp.st, &self.tune),
            Some(p) => crate::policy::decay(
                &*p.0,
                &mut pcp.st,
                &self.policy_zone(zone, zone.tune_flags()),
                &self.tune,
            ),
        };
        let mut todo = d.todo;
        if d.excess > 0 && self.cfg.decay_batched {
            // 6.18.7 (fc4b909c368f): the excess goes back `batch` pages per
            // `free_pcppages_bulk` (one zone-lock trip each), the pcp lock dropped between
            // chunks; the amount is fixed before the first, as the kernel's `to_drain`.
            let batch = pcp.st.batch.max(1);
            let mut left = d.excess;
            loop {
                let n = left.min(batch);
                slot.stats.decay_drain.add(1);
                self.free_pcppages_bulk(cpu, zone, slot, n, &mut pcp, 0);
                left -= n;
                if left <= 0 {
                    break;
                }
                drop(pcp);
                pcp = slot.pcp.lock();
            }
        } else if d.excess > 0 {
            slot.stats.decay_drain.add(1);
            self.free_pcppages_bulk(cpu, zone, slot, d.excess, &mut pcp, 0);
        }
        if pcp.active {
            pcp.expire = 3;
            pcp.active = false;
        }
        if pcp.expire != 0 && pcp.st.count != 0 {
            if zone.node == self.cpus[cpu].node {
                pcp.expire = 0;
            } else {
                pcp.expire -= 1;
                todo = true;
                if pcp.expire == 0 {
                    let n = pcp.st.count.min(pcp.st.batch);
                    slot.stats.expire_drain.add(1);
                    self.free_pcppages_bulk(cpu, zone, slot, n, &mut pcp, 0);
                }
            }
        }
        pcp.settle_resize();
        drop(pcp);
        self.reclaim_progress(zone);
        todo
    }

    /// Write sizes into a pageset (`zone_set_pageset_high_and_batch`'s store): `high`,
    /// `count` and the factors are not touched; FREE_HIGH_BATCH from the cache slice.
    pub(crate) fn set_pcp_sizes(
        &self,
        cpu: usize,
        zone: usize,
        high_min: i32,
        high_max: i32,
        batch: i32,
        init: bool,
    ) {
        let mut pcp: SpinGuard<'_, Pcp> = self.slot(cpu, zone).pcp.lock();
        pcp.st.high_min = high_min;
        pcp.st.high_max = high_max;
        pcp.st.batch = batch;
        if init {
            // `high` starts at 0 and is clamped to high_min on first use; start there.
            pcp.st.high = high_min;
        }
        // As `pageset_update`, `high` and `count` are left alone: they may now lie outside
        // the new bounds until the next clamp or drain.
        pcp.resized |= !pcp.within_bounds();
        let big = self.cfg.free_high_bounded
            && tune::free_high_batch(self.cpus[cpu].llc_slice_bytes, batch);
        if big {
            pcp.st.flags |= tune::PCPF_FREE_HIGH_BATCH;
        } else {
            pcp.st.flags &= !tune::PCPF_FREE_HIGH_BATCH;
        }
    }
}

/// The first half of `free_unref_page`: whether a block of `order` at `pfn` goes to the
/// pageset, and on which list. `None` when the lists do not serve the order
/// (`pcp_allowed_order`) or the pageblock is isolated (`is_migrate_isolate`): the block
/// goes straight to the zone. Otherwise `(list type, pageblock type)`: a HIGHATOMIC
/// pageblock's block is cached on the MOVABLE list, as the kernel does.
#[inline(always)]
pub(crate) fn pcp_free_types(
    slot: &PcpSlot,
    zone: &Zone,
    pfn: u64,
    order: u8,
) -> Option<(MigrateType, MigrateType)> {
    if !slot.hot.allows(order) {
        return None;
    }
    pcp_free_types_allowed(zone, pfn)
}

/// [`pcp_free_types`] for an order the lists are known to serve.
#[inline(always)]
pub(crate) fn pcp_free_types_allowed(zone: &Zone, pfn: u64) -> Option<(MigrateType, MigrateType)> {
    let pb_mt = zone.pageblock_mt(pfn);
    if (pb_mt as usize) < NR_PCPTYPES {
        Some((pb_mt, pb_mt))
    } else if pb_mt == MigrateType::Isolate {
        None
    } else {
        Some((MigrateType::Movable, pb_mt))
    }
}

/// Before a spliced drain takes the zone lock: the plan of `free_pcppages_bulk`'s loop
/// (lists round robin from `start`, each emptied until `n` pages are out), and for each
/// order-0 list the first of the frames that will leave it, found by walking back from
/// the tail. The walk reads each leaving frame's metadata once, under the pcp lock only
/// (the frames are the pageset's), so the locked part finds them in cache. Reported as
/// unlocked reads. `NIL` for lists the drain does not reach or that are not order 0.
/// With `newest` (`Config::drain_newest`) the order-0 frames leave from the head: the
/// walk goes forward from the head and returns the last of them.
fn drain_prewalk<const SINK: bool>(
    cpu: usize,
    zone: &Zone,
    pcp: &Pcp,
    n: i32,
    start: usize,
    newest: bool,
    m: &[crate::memmap::PageMeta],
) -> [u32; NR_PCP_LISTS] {
    let mut firsts = [NIL; NR_PCP_LISTS];
    let r = Rec::<SINK>::unlocked(zone);
    let mut left = n;
    for step in 0..NR_PCP_LISTS {
        if left <= 0 {
            break;
        }
        let pi = (start + step) % NR_PCP_LISTS;
        let l = &pcp.lists[pi];
        let k = order_of(pi);
        let ring = pcp.rings[pi].len();
        if ring > 0 {
            // An order-0 ring (`Config::own_bitmap`): drained without a walk.
            let blocks = (left as u32).div_ceil(1 << k).min(ring);
            left -= (blocks << k) as i32;
            continue;
        }
        let Some(mut i) = (if newest { l.head() } else { l.tail() }) else {
            continue;
        };
        if k != 0 {
            let blocks = (left as u32).div_ceil(1 << k).min(l.len());
            left -= (blocks << k) as i32;
            continue;
        }
        let cnt = l.len().min(left as u32);
        r.pcp(cpu, pi as u8, false);
        // the tail was read from the list head, each next frame from the one before
        r.frame_dep(zone.pfn_of(i), false, 1);
        for _ in 1..cnt {
            let e = &m[i as usize];
            i = if newest { e.next() } else { e.prev() };
            r.frame_dep(zone.pfn_of(i), false, 1);
        }
        firsts[pi] = i;
        left -= cnt as i32;
    }
    firsts
}

/// One run of [`Allocator::drain_thp_runs`], zone lock held: from block `cur` of a THP
/// list towards its head, at most `max` blocks whose type (as `drain_one` finds it: the
/// cached one with `cached`, else the pageblock's) is `mt`, a mergeable type (`cur`'s
/// own, found by the caller). Each becomes a merge-skipped order-9 `Buddy` head of type
/// `mt` in one write of its line. Returns how many, the last of them (nearest the head)
/// and the block after it. Out of line, so that its few live values stay in registers.
#[inline(never)]
fn mark_thp_run(
    zone: &Zone,
    m: &[crate::memmap::PageMeta],
    cached: bool,
    mut cur: u32,
    max: u32,
    mt: MigrateType,
) -> (u32, u32, u32) {
    debug_assert!(max > 0 && mt.is_mergeable());
    let pageblocks = zone.pageblocks();
    let mut len = 0;
    loop {
        let e = &m[cur as usize];
        let prev = e.prev();
        e.set_order(PAGEBLOCK_ORDER);
        e.set_mt(mt as u8);
        e.set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
        len += 1;
        if len == max {
            return (len, cur, prev);
        }
        let next_mt = if cached {
            MigrateType::from_u8(m[prev as usize].mt()).unwrap_or(MigrateType::Movable)
        } else {
            pageblocks.mt(zone.pfn_of(prev))
        };
        if next_mt != mt {
            return (len, cur, prev);
        }
        cur = prev;
    }
}

/// [`Config::drain_prefetch`](crate::Config::drain_prefetch), zone lock held: the order-`k`
/// (`k ≥ 1`) `list` has just lost its tail to the drain; a prefetch of the metadata line of
/// the buddy of the block that leaves next (its address computed from the new tail's
/// index), which `__free_one_page` will read and, when the buddy is free, write. Its miss
/// then overlaps the merge of the block in hand. A hint: nothing is read, decided or
/// reported.
#[inline(always)]
fn prefetch_next_buddy(zone: &Zone, list: &List, k: u8, m: &[crate::memmap::PageMeta]) {
    if let Some(next) = list.tail() {
        let b = zone.pfn_of(next) ^ (1u64 << k);
        if zone.contains(b) {
            crate::sync::prefetch(&m[zone.meta_index(b) as usize]);
        }
    }
}

/// Before an array pageset's drain takes the zone lock: the plan of its loop (as
/// [`drain_prewalk`]'s), and a load of the metadata of every block that will leave, its
/// index read from the ring; with `link`, the order-0 frames are linked into the chain
/// [`Allocator::drain_ring_splice`] hands over. Reported as unlocked accesses: each ring
/// line once, each frame as found from it.
#[allow(clippy::too_many_arguments)]
fn ring_prewalk<const SINK: bool>(
    cpu: usize,
    zone: &Zone,
    pcp: &Pcp,
    n: i32,
    start: usize,
    link: bool,
    own: bool,
    m: &[crate::memmap::PageMeta],
) {
    let r = Rec::<SINK>::unlocked(zone);
    let traced = SINK && zone.trace.on();
    let mut left = n;
    for step in 0..NR_PCP_LISTS {
        if left <= 0 {
            break;
        }
        let pi = (start + step) % NR_PCP_LISTS;
        let ring = &pcp.rings[pi];
        if ring.is_empty() {
            continue;
        }
        let k = order_of(pi);
        let blocks = (left as u32).div_ceil(1 << k).min(ring.len());
        left -= (blocks << k) as i32;
        if own && k == 0 {
            // `Config::own_bitmap`: written by the drain itself (`drain_ring_own`).
            continue;
        }
        let mut since = 0u8;
        let mut before = NIL;
        for j in 0..blocks {
            let i = ring.nth_from_tail(j);
            if j + 16 < blocks {
                crate::sync::prefetch(&m[ring.nth_from_tail(j + 16) as usize]);
            }
            let e = &m[i as usize];
            if link && k == 0 {
                // The chain a spliced drain hands to the free lists, each frame linked to
                // the one leaving before it, as the page-by-page loop's head inserts would
                // chain them (the links of a frame on a ring are unused; the frames are
                // the pageset's, under its lock).
                e.set_next(before);
                if before != NIL {
                    m[before as usize].set_prev(i);
                }
            } else {
                core::hint::black_box(e.state());
            }
            if traced {
                let s = ring.slot_of(ring.len() - 1 - j);
                if j == 0 || s % 16 == 15 {
                    r.pcp_array(cpu, pi as u8, s, false);
                    since = 0;
                }
                since += 1;
                r.frame_dep(zone.pfn_of(i), link && k == 0, since);
            }
            before = i;
        }
    }
}

/// [`Ring::push_tail`] of a refill, reported: the buffer line written and the frame.
#[inline]
fn ring_push_tail_t<const SINK: bool>(
    cpu: usize,
    ring: &mut Ring,
    pi: usize,
    i: u32,
    r: &Rec<'_, SINK>,
) {
    ring.push_tail(i);
    r.pcp_array(cpu, pi as u8, ring.slot_of(ring.len() - 1), true);
    r.frame(r.z.pfn_of(i), true);
}

/// [`Ring::pop_tail`] of a drain, reported: the buffer line read.
#[inline]
fn ring_pop_tail_t<const SINK: bool>(
    cpu: usize,
    ring: &mut Ring,
    pi: usize,
    r: &Rec<'_, SINK>,
) -> Option<u32> {
    let s = ring.slot_of(ring.len().checked_sub(1)?);
    r.pcp_array(cpu, pi as u8, s, false);
    ring.pop_tail()
}

/// The pop of an array pageset's hit with a sink installed: the pageset's count line,
/// the list's head and length, the buffer line read and the frame whose state the
/// caller writes.
#[cold]
#[inline(never)]
fn ring_pop_traced(cpu: usize, zone: &Zone, pcp: &mut Pcp, pi: usize, frame: bool) -> Option<u32> {
    let r = Rec::<true>::unlocked(zone);
    r.pcp(cpu, PCP_HEADER, true);
    r.pcp(cpu, pi as u8, true);
    let ring = &mut pcp.rings[pi];
    if ring.is_empty() {
        return None;
    }
    r.pcp_array(cpu, pi as u8, ring.slot_of(0), false);
    let i = ring.pop_head()?;
    if frame {
        r.frame_dep(zone.pfn_of(i), true, 1);
    }
    Some(i)
}

/// The push of an array pageset's free with a sink installed: the pageblock lookup the
/// caller made, the pageset's count line, the list's head and length, the buffer line
/// written and the frame whose state the caller wrote.
#[cold]
#[inline(never)]
fn ring_push_traced(cpu: usize, zone: &Zone, pcp: &mut Pcp, pi: usize, i: u32, frame: bool) {
    let r = Rec::<true>::unlocked(zone);
    r.pageblock(zone.pfn_of(i), false);
    r.pcp(cpu, PCP_HEADER, true);
    r.pcp(cpu, pi as u8, true);
    if frame {
        r.frame(zone.pfn_of(i), true);
    }
    let ring = &mut pcp.rings[pi];
    ring.push_head(i);
    r.pcp_array(cpu, pi as u8, ring.slot_of(0), true);
}

/// The pop of `take_from_list` with a sink installed: reports the pageset's count line,
/// the list head, the popped frame and its successor (`rmqueue_pcplist` without the zone
/// lock).
#[cold]
#[inline(never)]
fn pop_traced(
    cpu: usize,
    zone: &Zone,
    pcp: &mut Pcp,
    pi: usize,
    m: &[crate::memmap::PageMeta],
) -> Option<u32> {
    let mut r = Rec::<true>::unlocked(zone);
    r.pcp(cpu, PCP_HEADER, true);
    r.pcp(cpu, pi as u8, true);
    pcp.lists[pi].pop_head_t(m, &mut r)
}

/// The push of `free_unref_page_commit` with a sink installed: reports the pageblock
/// lookup the caller made, the pageset's count line, the list head, the frame and the
/// old head.
#[cold]
#[inline(never)]
fn push_traced(
    cpu: usize,
    zone: &Zone,
    pcp: &mut Pcp,
    pi: usize,
    m: &[crate::memmap::PageMeta],
    i: u32,
) {
    let mut r = Rec::<true>::unlocked(zone);
    r.pageblock(zone.pfn_of(i), false);
    r.pcp(cpu, PCP_HEADER, true);
    r.pcp(cpu, pi as u8, true);
    pcp.lists[pi].push_head_t(m, i, &mut r);
}

impl<const SINK: bool> Buddy<'_, SINK> {
    /// `can_skip_merge` (Appendix A): order-0 frees skip merging unless a caller that
    /// needs contiguity raised the zone's merge-disable depth.
    #[inline]
    pub(crate) fn can_skip_merge(&self) -> bool {
        self.z
            .merge_disable
            .load(crate::sync::atomic::Ordering::Relaxed)
            == 0
    }

    /// An order-0 free under the zone lock: merge-skipped when merge skipping is on, the
    /// zone's disable depth is zero and the pageblock is not isolated (isolation wants
    /// merged blocks), else merged as usual.
    #[inline]
    pub(crate) fn free_order0(&mut self, pfn: u64, mt: MigrateType) {
        if self.cfg.merge_skip && mt != MigrateType::Isolate && self.can_skip_merge() {
            self.free_skip_merge(pfn, mt);
        } else {
            self.free_one(pfn, 0, mt, false);
        }
    }

    /// Put the chain `first..=last` of `len` order-0 frames, already marked `Buddy`,
    /// merge-skipped and of type `mt` by the caller, on the head of the order-0 `mt`
    /// list in one splice, with the accounting of `len` calls of [`Buddy::free_skip_merge`]
    /// (clusters: the frames join as `len` head inserts from `last` back to `first`).
    pub(crate) fn splice_skipped(&mut self, first: u32, last: u32, len: u32, mt: MigrateType) {
        let inner = &mut *self.inner;
        let mut r = Rec::<SINK>::locked(self.z, &inner.tally);
        r.zone(crate::access::ZoneLine::FreeArea(0), true);
        inner.free.lists[0][mt as usize].splice_after_t(self.m, None, first, last, len, &mut r);
        if self.cfg.clustered_refill {
            let cap = self.cluster_cap();
            self.inner
                .free
                .clusters
                .on_insert_head_run(self.m, last, len, mt as u8, cap);
        }
        self.inner.free.nr_free[0] += len as u64;
        self.z.set_nonempty(0, mt, true);
        self.account(len as i64, mt);
        self.inner.free.nr_skipped += len as u64;
        self.st.merge_skipped.add(len as u64);
    }

    /// [`Buddy::free_skip_merge_thp`] for a chain: put the chain `first..=last` of `len`
    /// pageblock-order blocks, already merge-skipped `Buddy` heads of type `mt` (set by the
    /// caller), on the head of the order-9 `mt` list in one splice, with the accounting of
    /// `len` such calls (`Config::thp_splice`).
    pub(crate) fn splice_skipped_thp(&mut self, first: u32, last: u32, len: u32, mt: MigrateType) {
        let k = PAGEBLOCK_ORDER;
        let inner = &mut *self.inner;
        let mut r = Rec::<SINK>::locked(self.z, &inner.tally);
        r.zone(crate::access::ZoneLine::FreeArea(k), true);
        inner.free.lists[k as usize][mt as usize]
            .splice_after_t(self.m, None, first, last, len, &mut r);
        inner.free.nr_free[k as usize] += len as u64;
        self.z.set_nonempty(k, mt, true);
        self.account((len as i64) << k, mt);
        self.inner.free.nr_skipped_thp += len as u64;
        self.st.merge_skipped.add(len as u64);
    }

    /// The order-`order` blocks a refill takes from the `mt` list while it holds any, at
    /// most `max` (`Config::thp_splice`): what `max` steps of [`Buddy::smallest`] take
    /// from the head of a list that holds them, cut off in one `list_cut_position`. Each
    /// block is made a `Pcp` head (with the list's type when `mt_cache`) in one write;
    /// the free area and the counters are updated once. Returns the chain (first, last,
    /// length), its outer links left for the caller to set; `None` when the list is empty.
    pub(crate) fn cut_for_pcp(
        &mut self,
        order: u8,
        mt: MigrateType,
        max: u32,
        mt_cache: bool,
    ) -> Option<(u32, u32, u32)> {
        let m = self.m;
        self.rec()
            .zone(crate::access::ZoneLine::FreeArea(order), true);
        let l = &self.inner.free.lists[order as usize][mt as usize];
        let first = l.head()?;
        let cnt = l.len().min(max);
        let mut i = first;
        let mut last = first;
        for j in 0..cnt {
            let e = &m[i as usize];
            // the head's index is the list's; each next one was read from the previous block
            self.rec()
                .frame_dep(self.z.pfn_of(i), true, u8::from(j > 0));
            if mt_cache {
                e.set_mt(mt as u8);
            }
            e.set_state_flags(State::Pcp, 0);
            last = i;
            i = e.next();
        }
        let inner = &mut *self.inner;
        let mut r = Rec::<SINK>::locked(self.z, &inner.tally);
        inner.free.lists[order as usize][mt as usize].cut_front_t(m, last, cnt, &mut r);
        inner.free.nr_free[order as usize] -= cnt as u64;
        let empty = self.inner.free.lists[order as usize][mt as usize].is_empty();
        self.z.set_nonempty(order, mt, !empty);
        self.account(-((cnt as i64) << order), mt);
        Some((first, last, cnt))
    }

    /// Put a pageblock-order block on the free list head, marked merge-skipped, without
    /// looking at its buddy (`Config::thp_merge_skip`).
    pub(crate) fn free_skip_merge_thp(&mut self, pfn: u64, mt: MigrateType) {
        self.add_to_list(pfn, PAGEBLOCK_ORDER, mt, false);
        self.m[self.z.meta_index(pfn) as usize].set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
        self.account(1 << PAGEBLOCK_ORDER, mt);
        self.inner.free.nr_skipped_thp += 1;
        self.st.merge_skipped.add(1);
    }

    /// Put an order-0 frame on the free list head, marked merge-skipped, without looking
    /// at its buddy.
    pub(crate) fn free_skip_merge(&mut self, pfn: u64, mt: MigrateType) {
        self.add_to_list(pfn, 0, mt, false);
        self.m[self.z.meta_index(pfn) as usize].set_state_flags(State::Buddy, FLAG_MERGE_SKIPPED);
        self.account(1, mt);
        self.inner.free.nr_skipped += 1;
        self.st.merge_skipped.add(1);
    }
}
