//! A zone: the buddy free lists behind a spin lock, plus the read-mostly and lockless
//! fields the allocation fast path reads (watermarks, flags, NR_FREE_PAGES, pageblock
//! types), and the zone-lock accounting.
//!
//! # Locking rules
//! `lock` protects [`ZoneInner`] (the free lists) and the metadata of frames on them.
//! Fields outside it are atomics: written under the zone lock (NR_FREE_PAGES, highatomic
//! counts, pageblock types, free-list occupancy bits) or by the sizing code (watermarks),
//! and read without it by the watermark test, which tolerates stale values as the kernel's
//! does. `cpu_stats[c]` is written only under the zone lock.

mod rec;

pub(crate) use rec::{seam, Quiet, Rec, Reported, Seam};

use crate::cluster::{Clusters, Cut};
use crate::frame::{MigrateType, NR_MIGRATETYPES, NR_ORDERS, PAGEBLOCK_ORDER};
use crate::memmap::{List, PageMeta, State};
use crate::platform::Platform;
use crate::stats::Stats;
use crate::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use crate::sync::{SpinGuard, SpinLock};
use crate::topology::ZoneKind;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::ops::{Deref, DerefMut};

/// Bits per order in [`Zone`]'s free-list occupancy word: one per migratetype.
const OCC_STRIDE: u32 = NR_MIGRATETYPES as u32;
/// Every order's copy of one type mask: `types * OCC_REPEAT` sets the `types` bits of
/// every order in the occupancy word.
const OCC_REPEAT: u64 = {
    let mut r = 0u64;
    let mut o = 0;
    while o < NR_ORDERS {
        r |= 1 << (o as u32 * OCC_STRIDE);
        o += 1;
    }
    r
};
const _: () = assert!(NR_ORDERS * NR_MIGRATETYPES <= 64);

/// Index of the min watermark in `wmark`.
pub(crate) const WMARK_MIN: usize = 0;
/// Low watermark.
pub(crate) const WMARK_LOW: usize = 1;
/// High watermark.
pub(crate) const WMARK_HIGH: usize = 2;
/// Promo watermark.
pub(crate) const WMARK_PROMO: usize = 3;

/// `alloc_flags` (a subset): the low two bits select the watermark.
pub(crate) const ALLOC_WMARK_MASK: u32 = 0x3;
/// Skip the watermark test.
pub(crate) const ALLOC_NO_WATERMARKS: u32 = 0x4;
/// Allowed to wake kswapd.
pub(crate) const ALLOC_KSWAPD: u32 = 0x8;
/// `__GFP_HIGH`: halve the mark.
pub(crate) const ALLOC_MIN_RESERVE: u32 = 0x10;
/// Cannot sleep: a further quarter off.
pub(crate) const ALLOC_NON_BLOCK: u32 = 0x20;
/// High-order atomic: may use and build the HIGHATOMIC reserve.
pub(crate) const ALLOC_HIGHATOMIC: u32 = 0x40;
/// Last attempt before failing.
pub(crate) const ALLOC_OOM: u32 = 0x80;
/// `ALLOC_NOFRAGMENT` (`Config::nofragment`): a fallback may only take a whole pageblock;
/// the zonelist walk moves on to the next zone rather than fragment one.
pub(crate) const ALLOC_NOFRAGMENT: u32 = 0x100;

/// Zone flag: watermark boosted by a fallback; the next rmqueue wakes kswapd.
pub(crate) const ZONE_BOOSTED_WATERMARK: u32 = 1 << 0;
/// Zone flag: kswapd is (modelled as) reclaiming.
pub(crate) const ZONE_RECLAIM_ACTIVE: u32 = 1 << 1;
/// Zone flag: free pages fell below the high watermark.
pub(crate) const ZONE_BELOW_HIGH: u32 = 1 << 2;

/// A counter written under the zone lock and read anywhere.
#[derive(Default)]
pub(crate) struct ZoneCounter(AtomicU64);

impl ZoneCounter {
    #[inline]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    #[inline]
    pub(crate) fn add_signed(&self, d: i64) {
        let v = self.0.load(Relaxed) as i64 + d;
        debug_assert!(v >= 0, "zone counter underflow");
        self.0.store(v.max(0) as u64, Relaxed);
    }
}

impl fmt::Debug for ZoneCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// Free lists of one zone, per order and migratetype. Protected by the zone lock.
#[derive(Debug)]
pub(crate) struct FreeArea {
    pub(crate) lists: [[List; NR_MIGRATETYPES]; NR_ORDERS],
    /// Free blocks per order, all types (`free_area[o].nr_free`).
    pub(crate) nr_free: [u64; NR_ORDERS],
    /// Clusters of the order-0 lists (clustered refill only).
    pub(crate) clusters: Clusters,
    /// Merge-skipped frees since the last deferred merge: an upper bound on the frames
    /// marked merge-skipped, so that [`Buddy::merge_skipped`](crate::buddy::Buddy::merge_skipped) returns at once when zero.
    pub(crate) nr_skipped: u64,
    /// Pageblock-order blocks put on the free lists merge-skipped since the last merge
    /// of them (`Config::thp_merge_skip`): an upper bound, 0 when none is marked.
    pub(crate) nr_skipped_thp: u64,
}

impl FreeArea {
    pub(crate) fn new() -> Self {
        FreeArea {
            lists: [[List::new(); NR_MIGRATETYPES]; NR_ORDERS],
            nr_free: [0; NR_ORDERS],
            clusters: Clusters::default(),
            nr_skipped: 0,
            nr_skipped_thp: 0,
        }
    }
}

/// The part of a zone protected by its lock.
#[derive(Debug)]
pub(crate) struct ZoneInner {
    pub(crate) free: FreeArea,
    /// Accesses reported under the lock since it was taken (see `access.rs`).
    pub(crate) tally: crate::access::Tally,
}

/// A zero-sized field that starts the next field of a `repr(C)` struct on a fresh pair
/// of cache lines (128 bytes: the adjacent-line prefetcher fetches lines in pairs, as
/// [`PcpSlot`](crate::pcp::PcpSlot)'s alignment assumes).
#[repr(align(128))]
struct LineBreak;

/// A zone's pageblock types ([`Zone::pageblocks`]).
#[derive(Clone, Copy)]
pub(crate) struct Pageblocks<'a> {
    /// PFN of the first pageblock.
    start: u64,
    types: &'a [AtomicU8],
}

impl Pageblocks<'_> {
    /// `get_pfnblock_migratetype` of a frame of the zone.
    #[inline]
    pub(crate) fn mt(&self, pfn: u64) -> MigrateType {
        let i = ((pfn - self.start) >> PAGEBLOCK_ORDER) as usize;
        MigrateType::from_u8(self.types[i].load(Relaxed)).unwrap_or(MigrateType::Movable)
    }
}

/// One zone. See the module docs for which lock protects what.
///
/// # Layout
/// `repr(C)`, in three groups on separate cache-line pairs, so that what one CPU writes
/// while it holds the lock never shares a line with what another CPU reads on every hit:
/// 1. read-mostly: the span, `meta_base`, the pageblock table's address, watermarks and
///    flags, read by every PCP hit (`free_unref_page`'s pageblock lookup and metadata
///    index, `zone_watermark_fast`);
/// 2. the counters written on each zone-lock trip and read by the watermark test
///    (NR_FREE_PAGES, the highatomic counts, the occupancy word);
/// 3. the lock word with the free lists and the lock's access tally, written on every
///    page a drain or refill moves.
///
/// Before, with the compiler's field order and the zone's 8-byte alignment, the lock
/// word and the tally (written per page under the lock) shared a line with `meta_base`
/// and `nr_isolate_pageblock`, and the occupancy word and NR_FREE_PAGES with `pb_start`
/// and the span, depending on where the allocation landed: while one CPU drained, every
/// free hit of the other CPU missed on that line (docs/performance.md, "The 2-thread
/// put").
///
/// Aligned to 2 KiB, so that its size is a power of two (2048 bytes; 1280 at 128-byte
/// alignment): a zone's address is then the array's base plus its index shifted, where
/// a 1280-byte stride took a `lea` and a shift on every PCP hit (`examples/hotpath`,
/// callgrind: 256 → 254 instructions per checked order-0 pair, 266 → 264 at order 9).
#[repr(C, align(2048))]
pub(crate) struct Zone {
    // ---- read-mostly ----
    pub(crate) idx: usize,
    pub(crate) node: usize,
    pub(crate) kind: ZoneKind,
    pub(crate) start_pfn: u64,
    pub(crate) end_pfn: u64,
    /// Metadata index of `start_pfn`.
    pub(crate) meta_base: u32,
    /// All ones when the zone's metadata is spaced ([`Zone::meta_index`]: one unused entry
    /// after each group of 512 frames), 0 when not (a caller-supplied store sized to the
    /// span, `Allocator::with_metadata`).
    meta_gap: u32,
    pub(crate) managed: u64,
    /// `start_pfn` rounded down to a pageblock.
    pb_start: u64,
    /// Pageblock migratetypes (`pageblock_flags`); written under the zone lock.
    pageblock: Box<[AtomicU8]>,
    /// [`Config::own_bitmap`](crate::Config::own_bitmap): bit `pfn - start_pfn` is set
    /// while that frame heads an allocated order-0 block (empty with the switch off).
    /// Set by every order-0 allocation, taken (cleared) by the free that wins the block;
    /// atomic, as frees of neighbouring frames on other CPUs write the same word.
    pub(crate) own: Box<[AtomicU64]>,
    /// min, low, high, promo (without boost).
    wmark: [AtomicU64; 4],
    boost: AtomicU64,
    /// `lowmem_reserve` against the requests' highest zone ([`lowmem_reserves`]).
    lowmem_reserve: AtomicU64,
    flags: AtomicU32,
    /// Number of pageblocks of type ISOLATE (`nr_isolate_pageblock`).
    pub(crate) nr_isolate_pageblock: AtomicU32,
    /// (high_min, high_max, batch) last given to all pcps (`pageset_high_min`, ...):
    /// read through [`Zone::pageset_sizes`] and [`Zone::pageset_batch`].
    pageset: [AtomicU32; 3],
    /// Merge-skipping disable depth (Appendix A): raised by callers that need contiguity.
    pub(crate) merge_disable: AtomicU32,
    /// [`Config::lock_stat`](crate::Config::lock_stat): time every hold.
    lock_stat: bool,
    /// Per-CPU counters of events under this zone's lock.
    pub(crate) cpu_stats: Box<[Stats]>,
    /// Where accesses are reported (`Allocator::set_access_sink`), if anywhere.
    pub(crate) trace: crate::access::Tracer,

    // ---- written under the zone lock, once or a few times per trip ----
    _trip_lines: LineBreak,
    /// NR_FREE_PAGES: free pages on the buddy lists, ISOLATE excluded, pcp excluded.
    pub(crate) nr_free_pages: ZoneCounter,
    pub(crate) nr_free_highatomic: ZoneCounter,
    pub(crate) nr_reserved_highatomic: ZoneCounter,
    /// Free-list occupancy: bit `o * OCC_STRIDE + mt` set while
    /// `free_area[o].free_list[mt]` is not empty, all orders in one word so that the
    /// watermark test's scan of orders `order..=MAX_ORDER` for a usable type is one load,
    /// a shift and a mask (see [`Zone::watermark_ok`]).
    nonempty: AtomicU64,
    /// Refill cuts of order-0 clusters not yet fixed up (clustered refill, the RFC's
    /// `in_progress`): raised under the zone lock, lowered by the refilling CPU after
    /// its fix-up; see `cluster.rs`.
    pub(crate) cluster_inflight: AtomicU32,
    /// `zone->trylock_free_pages`: the head (a metadata index, `NIL` when empty) of the
    /// frees a nolock free could not complete, linked through the frames' `next`; pushed
    /// without a lock, taken whole under the zone lock (`allocator/nolock.rs`).
    pub(crate) deferred: AtomicU32,

    // ---- written under the zone lock on every page moved ----
    _lock_lines: LineBreak,
    /// `zone->lock`: taken through [`Zone::lock`] (a CPU's trip, counted) or
    /// [`Zone::lock_inspect`] (building and inspection, not a trip). Last, so that the
    /// zone's size (a multiple of its 128-byte alignment) pads it from the next zone.
    lock: SpinLock<ZoneInner>,
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zone")
            .field("idx", &self.idx)
            .field("node", &self.node)
            .field("kind", &self.kind)
            .field("span", &(self.start_pfn..self.end_pfn))
            .field("managed", &self.managed)
            .field("free", &self.nr_free_pages)
            .finish_non_exhaustive()
    }
}

/// Where a zone lies (`free_area_init_core`'s part of `struct zone`): its index in the
/// allocator, its node and kind, its span `[start_pfn, end_pfn)` and the pages it manages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZoneSpan {
    pub(crate) idx: usize,
    pub(crate) node: usize,
    pub(crate) kind: ZoneKind,
    pub(crate) start_pfn: u64,
    pub(crate) end_pfn: u64,
    pub(crate) managed: u64,
}

impl Zone {
    /// The zone at `span`, its frames' metadata from index `meta_base` (spaced with
    /// `meta_spaced`, [`Zone::meta_entries`]), with per-CPU statistics for `ncpus` CPUs and
    /// lock statistics when `lock_stat`.
    pub(crate) fn new(
        span: ZoneSpan,
        meta_base: u32,
        meta_spaced: bool,
        ncpus: usize,
        lock_stat: bool,
    ) -> Result<Zone, crate::BuildError> {
        let ZoneSpan {
            idx,
            node,
            kind,
            start_pfn,
            end_pfn,
            managed,
        } = span;
        let pb_start = start_pfn & !((1u64 << PAGEBLOCK_ORDER) - 1);
        let nblocks = (end_pfn - pb_start).div_ceil(1 << PAGEBLOCK_ORDER) as usize;
        // Fallible: a layout of many zones and CPUs asks for more than the machine has,
        // which is an error for the caller, not an abort.
        let pageblock = crate::build_error::try_boxed("pageblock types", nblocks, |_| {
            AtomicU8::new(MigrateType::Movable as u8)
        })?;
        let cpu_stats =
            crate::build_error::try_boxed("per-CPU zone statistics", ncpus, |_| Stats::default())?;
        Ok(Zone {
            idx,
            node,
            kind,
            start_pfn,
            end_pfn,
            meta_base,
            meta_gap: if meta_spaced { u32::MAX } else { 0 },
            managed,
            pb_start,
            pageblock,
            own: Box::default(),
            wmark: Default::default(),
            boost: AtomicU64::new(0),
            lowmem_reserve: AtomicU64::new(0),
            flags: AtomicU32::new(0),
            nr_isolate_pageblock: AtomicU32::new(0),
            pageset: Default::default(),
            merge_disable: AtomicU32::new(0),
            lock_stat,
            cpu_stats,
            trace: Default::default(),
            _trip_lines: LineBreak,
            nr_free_pages: ZoneCounter::default(),
            nr_free_highatomic: ZoneCounter::default(),
            nr_reserved_highatomic: ZoneCounter::default(),
            nonempty: AtomicU64::new(0),
            cluster_inflight: AtomicU32::new(0),
            deferred: AtomicU32::new(crate::memmap::NIL),
            _lock_lines: LineBreak,
            lock: SpinLock::new(ZoneInner {
                free: FreeArea::new(),
                tally: Default::default(),
            }),
        })
    }

    /// Turn on the order-0 ownership bitmap ([`Zone::own`]), every bit clear.
    pub(crate) fn enable_own_bitmap(&mut self) -> Result<(), crate::BuildError> {
        let words = (self.end_pfn - self.start_pfn).div_ceil(64) as usize;
        self.own =
            crate::build_error::try_boxed("order-0 ownership bits", words, |_| AtomicU64::new(0))?;
        Ok(())
    }
    /// Whether the zone keeps order-0 ownership in [`Zone::own`].
    #[inline(always)]
    pub(crate) fn own_bitmap(&self) -> bool {
        !self.own.is_empty()
    }
    /// The word and bit of `pfn` (inside the zone) in [`Zone::own`].
    #[inline(always)]
    fn own_bit(&self, pfn: u64) -> (&AtomicU64, u64) {
        let k = pfn - self.start_pfn;
        (&self.own[(k / 64) as usize], 1u64 << (k % 64))
    }
    /// An order-0 block at `pfn` was handed out: set its bit.
    #[inline(always)]
    pub(crate) fn own_set(&self, pfn: u64) {
        let (w, bit) = self.own_bit(pfn);
        w.fetch_or(bit, Relaxed);
    }
    /// A free of the order-0 block at `pfn`: clear its bit and say whether it was set.
    /// Of two frees racing on one block, exactly one finds it set.
    #[inline(always)]
    pub(crate) fn own_take(&self, pfn: u64) -> bool {
        let (w, bit) = self.own_bit(pfn);
        w.fetch_and(!bit, Relaxed) & bit != 0
    }
    /// Whether the bit of `pfn` is set (an allocated order-0 block).
    #[inline]
    pub(crate) fn owned(&self, pfn: u64) -> bool {
        let (w, bit) = self.own_bit(pfn);
        w.load(Relaxed) & bit != 0
    }
    /// With [`Config::own_bitmap`](crate::Config::own_bitmap): the frame at `pfn`, whose
    /// metadata `e` says `Allocated`, is in fact cached on an order-0 ring (its free took
    /// the bit and wrote nothing).
    #[inline]
    pub(crate) fn on_ring_unwritten(&self, pfn: u64, e: &crate::memmap::PageMeta) -> bool {
        self.own_bitmap() && e.order() == 0 && !self.owned(pfn)
    }

    #[inline]
    pub(crate) fn contains(&self, pfn: u64) -> bool {
        pfn >= self.start_pfn && pfn < self.end_pfn
    }
    /// The metadata index of frame `pfn` of the zone. With a spaced store
    /// ([`Zone::meta_gap`]) each group of 512 frames is followed by one unused entry, so that
    /// the entry of frame offset `o` is `o + o / 512`: within a group the entries stay in
    /// order, 4 frames a line, and the group's first entry moves by 16 bytes from one
    /// group to the next. Without it the heads of consecutive order-9 blocks are 8 KiB
    /// apart, all in one set of a 64-set L1 and in few L2 sets (docs/performance.md, "The
    /// 2-thread order-9 puts").
    #[inline]
    pub(crate) fn meta_index(&self, pfn: u64) -> u32 {
        let o = (pfn - self.start_pfn) as u32;
        self.meta_base + o + ((o >> 9) & self.meta_gap)
    }
    /// Whether any pageblock of the zone is isolated (`has_isolate_pageblock`): a drain
    /// then looks every frame's pageblock up instead of trusting a cached type or
    /// skipping merges.
    #[inline]
    pub(crate) fn has_isolated_pageblocks(&self) -> bool {
        self.nr_isolate_pageblock
            .load(crate::sync::atomic::Ordering::Relaxed)
            > 0
    }

    /// The frame of metadata index `idx` of the zone: [`Zone::meta_index`] backwards
    /// (`i - i / 513` with the spacing: every 513 entries hold 512 frames and a gap).
    #[inline]
    pub(crate) fn pfn_of(&self, idx: u32) -> u64 {
        let i = idx - self.meta_base;
        self.start_pfn + u64::from(i - ((i / 513) & self.meta_gap))
    }
    /// Metadata entries the zone's frames take: its span, plus one gap per 512 frames when
    /// spaced (`spaced`, see [`Zone::meta_index`]).
    pub(crate) fn meta_entries(pages: u64, spaced: bool) -> u64 {
        pages + if spaced { pages >> 9 } else { 0 }
    }
    #[inline]
    fn pb_index(&self, pfn: u64) -> usize {
        ((pfn - self.pb_start) >> PAGEBLOCK_ORDER) as usize
    }
    /// `get_pfnblock_migratetype`.
    #[inline]
    pub(crate) fn pageblock_mt(&self, pfn: u64) -> MigrateType {
        self.pageblocks().mt(pfn)
    }
    /// Make the frames of a refill's `cut` of an order-0 cluster (`cluster.rs`) `Pcp` heads
    /// of order 0 (the fix-up), caching the pageblock type when the pcp migratetype cache
    /// is on. The caller owns the frames: it holds the pcp lock they are going to, and
    /// they are on no zone list.
    pub(crate) fn fix_up<S: Seam>(
        &self,
        m: &[PageMeta],
        cut: &Cut,
        mt_cache: bool,
        rec: &Rec<'_, S>,
    ) {
        let mut i = cut.first;
        // Each frame after the first was read from the previous one's link (reported one
        // report back, or two with the pageblock lookup between).
        let mut back = 0;
        for _ in 0..cut.len {
            let e = &m[i as usize];
            e.set_state(State::Pcp);
            rec.frame_dep(self.pfn_of(i), true, back);
            back = 1;
            if mt_cache {
                back = 2;
                rec.pageblock(self.pfn_of(i), false);
                e.set_mt(self.pageblock_mt(self.pfn_of(i)) as u8);
            }
            i = e.next();
        }
    }
    /// The pageblock-type table, for a loop that looks up many frames: its address, length
    /// and first PFN read once. (A zone holds atomics, so the compiler reloads its fields
    /// after every store the loop makes.)
    #[inline]
    pub(crate) fn pageblocks(&self) -> Pageblocks<'_> {
        Pageblocks {
            start: self.pb_start,
            types: &self.pageblock,
        }
    }
    /// `set_pageblock_migratetype`; keeps `nr_isolate_pageblock`. Zone lock held.
    pub(crate) fn set_pageblock_mt(&self, pfn: u64, mt: MigrateType) {
        let old = self.pageblock[self.pb_index(pfn)].swap(mt as u8, Relaxed);
        if old == MigrateType::Isolate as u8 && mt != MigrateType::Isolate {
            self.nr_isolate_pageblock.fetch_sub(1, Relaxed);
        } else if old != MigrateType::Isolate as u8 && mt == MigrateType::Isolate {
            self.nr_isolate_pageblock.fetch_add(1, Relaxed);
        }
    }

    /// Record whether `free_area[order].free_list[mt]` is empty. Zone lock held: every
    /// writer of the word holds it, so a plain load and store cannot lose a bit.
    #[inline]
    pub(crate) fn set_nonempty(&self, order: u8, mt: MigrateType, on: bool) {
        let bit = 1u64 << (order as u32 * OCC_STRIDE + mt as u32);
        let v = self.nonempty.load(Relaxed);
        let n = if on { v | bit } else { v & !bit };
        if n != v {
            self.nonempty.store(n, Relaxed);
        }
    }

    /// Whether the occupancy word says `free_area[order].free_list[mt]` is not empty
    /// (`validate` checks it against the lists).
    pub(crate) fn nonempty_bit(&self, order: u8, mt: MigrateType) -> bool {
        self.nonempty.load(Relaxed) >> (order as u32 * OCC_STRIDE + mt as u32) & 1 != 0
    }

    // ---- flags ----
    #[inline]
    pub(crate) fn has_flag(&self, f: u32) -> bool {
        self.flags.load(Relaxed) & f != 0
    }
    #[inline]
    pub(crate) fn set_flag(&self, f: u32) {
        if !self.has_flag(f) {
            self.flags.fetch_or(f, Relaxed);
        }
    }
    #[inline]
    pub(crate) fn clear_flag(&self, f: u32) {
        if self.has_flag(f) {
            self.flags.fetch_and(!f, Relaxed);
        }
    }
    #[inline]
    pub(crate) fn tune_flags(&self) -> crate::tune::ZoneFlags {
        let f = self.flags.load(Relaxed);
        crate::tune::ZoneFlags {
            below_high: f & ZONE_BELOW_HIGH != 0,
            reclaim_active: f & ZONE_RECLAIM_ACTIVE != 0,
        }
    }

    // ---- watermarks ----
    pub(crate) fn wmark_raw(&self, i: usize) -> u64 {
        self.wmark[i].load(Relaxed)
    }
    /// Effective mark: raw + boost (`wmark_pages`).
    #[inline]
    pub(crate) fn wmark(&self, i: usize) -> u64 {
        self.wmark[i].load(Relaxed) + self.boost.load(Relaxed)
    }
    /// The mark an allocation's watermark test compares with: [`Zone::wmark`] plus the
    /// zone's `lowmem_reserve` (`zone_watermark_fast` adds
    /// `z->lowmem_reserve[highest_zoneidx]`), 0 for the top zone of its node.
    #[inline]
    pub(crate) fn alloc_mark(&self, i: usize) -> u64 {
        self.wmark(i) + self.lowmem_reserve.load(Relaxed)
    }
    /// The zone's `lowmem_reserve` ([`lowmem_reserves`]).
    pub(crate) fn lowmem_reserve(&self) -> u64 {
        self.lowmem_reserve.load(Relaxed)
    }
    pub(crate) fn set_lowmem_reserve(&self, r: u64) {
        self.lowmem_reserve.store(r, Relaxed);
    }
    pub(crate) fn set_wmarks(&self, w: [u64; 4]) {
        for (a, v) in self.wmark.iter().zip(w) {
            a.store(v, Relaxed);
        }
        self.boost.store(0, Relaxed);
    }
    pub(crate) fn boost(&self) -> u64 {
        self.boost.load(Relaxed)
    }
    pub(crate) fn set_boost(&self, b: u64) {
        self.boost.store(b, Relaxed);
    }
    #[inline]
    pub(crate) fn free_pages(&self) -> u64 {
        self.nr_free_pages.get()
    }

    /// `__zone_watermark_unusable_free`.
    #[inline]
    fn unusable(&self, order: u8, aflags: u32, free_accounting: bool) -> u64 {
        let mut u = (1u64 << order) - 1;
        if aflags & (ALLOC_NON_BLOCK | ALLOC_MIN_RESERVE | ALLOC_HIGHATOMIC | ALLOC_OOM) == 0 {
            u += if free_accounting {
                self.nr_free_highatomic.get()
            } else {
                self.nr_reserved_highatomic.get()
            };
        }
        u
    }

    /// `__zone_watermark_ok` (docs/mechanisms.md §6.2); an allocation's `mark` includes the
    /// zone's `lowmem_reserve` ([`Zone::alloc_mark`]).
    pub(crate) fn watermark_ok(&self, order: u8, mark: u64, aflags: u32, fa: bool) -> bool {
        self.watermark_test(order, mark, aflags, fa)
    }

    /// The body of [`Zone::watermark_ok`], inlined into [`Zone::watermark_fast`] for
    /// orders above 0. The scan of the free areas of orders `order..=MAX_ORDER` for a
    /// non-empty list of a usable type (`free_area_empty` per order and type in the
    /// kernel) reads the occupancy word once: bit `o * OCC_STRIDE + t` of it is list
    /// (o, t)'s, so shifting it right by `order * OCC_STRIDE` leaves exactly the orders
    /// from `order` up, and `types * OCC_REPEAT` picks the usable types of each. The same
    /// verdict as testing the lists one by one.
    #[inline(always)]
    fn watermark_test(&self, order: u8, mark: u64, aflags: u32, fa: bool) -> bool {
        let free = self.free_pages() as i64 - self.unusable(order, aflags, fa) as i64;
        let mut m = mark as i64;
        if aflags & ALLOC_MIN_RESERVE != 0 {
            m -= m / 2;
            if aflags & ALLOC_NON_BLOCK != 0 {
                m -= m / 4;
            }
        }
        if aflags & ALLOC_OOM != 0 {
            m -= m / 2;
        }
        if free <= m {
            return false;
        }
        order == 0 || self.usable_free_block(order, aflags)
    }

    /// The end of `__zone_watermark_ok`: whether a free area of order `order..=MAX_ORDER`
    /// holds a block of a type the request may use (the three PCP types, and HIGHATOMIC
    /// with `ALLOC_HIGHATOMIC` or `ALLOC_OOM`).
    #[inline(always)]
    pub(crate) fn usable_free_block(&self, order: u8, aflags: u32) -> bool {
        let mut types: u64 = 0b111;
        if aflags & (ALLOC_HIGHATOMIC | ALLOC_OOM) != 0 {
            types |= 1 << MigrateType::HighAtomic as u8;
        }
        (self.nonempty.load(Relaxed) >> (order as u32 * OCC_STRIDE)) & (types * OCC_REPEAT) != 0
    }

    /// `zone_watermark_fast`: a cheap order-0 test first, then the full one (inline for
    /// orders above 0, where the kernel's short-cut does not apply).
    #[inline]
    pub(crate) fn watermark_fast(&self, order: u8, mark: u64, aflags: u32, fa: bool) -> bool {
        if order == 0 {
            let free = self.free_pages();
            let reserved = self.unusable(0, aflags, fa);
            if free - free.min(reserved) > mark {
                return true;
            }
            return self.watermark_ok(0, mark, aflags, fa);
        }
        self.watermark_test(order, mark, aflags, fa)
    }

    /// `(high_min, high_max, batch)` last given to the zone's pagesets
    /// (`zone->pageset_high_min`, `pageset_high_max`, `pageset_batch`).
    pub(crate) fn pageset_sizes(&self) -> [u32; 3] {
        [
            self.pageset[0].load(Relaxed),
            self.pageset[1].load(Relaxed),
            self.pageset[2].load(Relaxed),
        ]
    }

    /// Record the sizes just given to the pagesets (see [`Zone::pageset_sizes`]).
    pub(crate) fn set_pageset_sizes(&self, sizes: [u32; 3]) {
        for (a, v) in self.pageset.iter().zip(sizes) {
            a.store(v, Relaxed);
        }
    }

    /// `zone->pageset_batch`: the batch last given to the zone's pagesets.
    #[inline]
    pub(crate) fn pageset_batch(&self) -> u32 {
        self.pageset[2].load(Relaxed)
    }

    /// Take the zone lock for building or inspecting the zone (`validate`, `zone_info`,
    /// `free_block_of`): not a CPU's trip, so nothing is counted in the zone-lock
    /// counters and nothing is reported to the access sink. The simulator and the lab's
    /// per-operation trip detection read those while they inspect zones mid-run; a trip
    /// made by the allocator's own paths always goes through [`Zone::lock`].
    pub(crate) fn lock_inspect(&self) -> SpinGuard<'_, ZoneInner> {
        self.lock.lock()
    }

    /// Take the zone lock only if it is free (`spin_trylock`, the nolock paths of
    /// `allocator/nolock.rs`): `None` without waiting. A taken lock counts as
    /// [`Zone::lock`]'s uncontended trip; the trip marker is not reported (no sink
    /// follows a nolock path).
    #[inline]
    pub(crate) fn try_lock<'a>(
        &'a self,
        cpu: usize,
        clock: &'a dyn Platform,
    ) -> Option<ZoneGuard<'a>> {
        let g = self.lock.try_lock()?;
        let st = &self.cpu_stats[cpu];
        st.zone_lock.add(1);
        Some(ZoneGuard {
            g: Some(g),
            zone: self,
            st,
            clock,
            t_acq: if self.lock_stat { clock.now_ns() } else { 0 },
        })
    }

    /// Take the zone lock, counting contention, wait and (with `lock_stat`) hold time for
    /// `cpu`. Without `lock_stat` an uncontended acquisition reads no clock. The trip
    /// marker is reported as `S` ([`Seam`]) says: [`Reported`] tests for a sink,
    /// [`Quiet`] (the caller has tested that none is installed) compiles it away.
    #[inline]
    pub(crate) fn lock<'a, S: Seam>(
        &'a self,
        cpu: usize,
        clock: &'a dyn Platform,
    ) -> ZoneGuard<'a> {
        let st = &self.cpu_stats[cpu];
        let (g, t_acq) = match self.lock.try_lock() {
            Some(g) => (g, if self.lock_stat { clock.now_ns() } else { 0 }),
            None => {
                let t0 = clock.now_ns();
                let g = self.lock.lock();
                let t = clock.now_ns();
                st.zone_lock_contended.add(1);
                st.zone_lock_wait_ns.add(t.saturating_sub(t0));
                (g, t)
            }
        };
        st.zone_lock.add(1);
        if let Some(s) = self.trace.sink().filter(|_| S::SINK) {
            s.access(crate::access::Access {
                line: crate::access::Line::Zone {
                    zone: self.idx as u16,
                    line: crate::access::ZoneLine::Lock,
                },
                write: true,
                locked: true,
                dep: 0,
            });
        }
        ZoneGuard {
            g: Some(g),
            zone: self,
            st,
            clock,
            t_acq,
        }
    }
}

/// The zone lock, held. Records the hold time (with `lock_stat`) into the holder CPU's
/// counters just before unlocking.
pub(crate) struct ZoneGuard<'a> {
    g: Option<SpinGuard<'a, ZoneInner>>,
    pub(crate) zone: &'a Zone,
    /// The holder CPU's counters in this zone (written under this lock).
    pub(crate) st: &'a Stats,
    clock: &'a dyn Platform,
    t_acq: u64,
}

impl Deref for ZoneGuard<'_> {
    type Target = ZoneInner;
    fn deref(&self) -> &ZoneInner {
        self.g.as_ref().expect("guard alive")
    }
}

impl DerefMut for ZoneGuard<'_> {
    fn deref_mut(&mut self) -> &mut ZoneInner {
        self.g.as_mut().expect("guard alive")
    }
}

impl Drop for ZoneGuard<'_> {
    fn drop(&mut self) {
        let t = &self.tally;
        self.st.zone_lock_meta.add(t.meta.take());
        self.st.zone_lock_lines.add(t.lines.take());
        self.st.zone_lock_pages.add(t.pages.take());
        if self.zone.lock_stat {
            let hold = self.clock.now_ns().saturating_sub(self.t_acq);
            self.st.zone_lock_hold_ns.add(hold);
            self.st.zone_lock_max_hold_ns.max(hold);
        }
        drop(self.g.take());
    }
}

impl fmt::Debug for ZoneGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZoneGuard(zone {})", self.zone.idx)
    }
}

/// `calculate_min_free_kbytes` (docs/mechanisms.md §6.1): `isqrt(lowmem_kb * 16)` clamped to
/// 128..=262144, raised to khugepaged's recommendation with THP.
///
/// ```
/// use pagealloc::{min_free_kbytes, zone_wmarks};
///
/// // docs/mechanisms.md §2.4: one 4 GiB zone, THP off.
/// let managed = 1 << 20;
/// let kb = min_free_kbytes(managed, 1, false);
/// assert_eq!(kb, 8192);
/// assert_eq!(zone_wmarks(kb / 4, managed, managed, false, 10), [2048, 3096, 4144, 5192]);
/// // With THP, khugepaged asks for 11 pageblocks per zone (22 MiB).
/// assert_eq!(min_free_kbytes(managed, 1, true), 11 * 512 * 4);
/// ```
pub fn min_free_kbytes(lowmem_pages: u64, nr_zones: u64, thp: bool) -> u64 {
    let lowmem_kb = lowmem_pages * 4;
    let mut k = isqrt(lowmem_kb * 16).clamp(128, 262_144);
    if thp {
        // set_recommended_min_free_kbytes: pageblock * zones * (2 + MIGRATE_PCPTYPES^2),
        // capped at 5 % of lowmem.
        let pages = ((1u64 << PAGEBLOCK_ORDER) * nr_zones * 11).min(lowmem_pages * 5 / 100);
        k = k.max(pages * 4);
    }
    k
}

/// Integer square root (`u64::isqrt`: exact, and in `core`, so no_std builds).
pub(crate) fn isqrt(x: u64) -> u64 {
    x.isqrt()
}

/// `__setup_per_zone_wmarks` for one zone: `[min, low, high, promo]`.
pub fn zone_wmarks(
    pages_min: u64,
    managed: u64,
    lowmem: u64,
    movable: bool,
    scale_factor: u32,
) -> [u64; 4] {
    let min = if movable {
        (managed / 1024).clamp(32, 128)
    } else {
        (pages_min as u128 * managed as u128 / lowmem.max(1) as u128) as u64
    };
    let gap = (min / 4).max(managed * scale_factor as u64 / 10000);
    [min, min + gap, min + 2 * gap, min + 3 * gap]
}

/// `setup_per_zone_lowmem_reserve` (docs/mechanisms.md §6.2) for the requests this
/// allocator takes, none of which is limited to a low zone (no `GFP_DMA`/`GFP_DMA32`):
/// each zone keeps back from them the managed pages of its node's zones above it up to
/// Normal, divided by `sysctl_lowmem_reserve_ratio` (256 below Normal; Normal and
/// Movable: 0, nothing above). So a request that falls from Normal to DMA32 or DMA
/// finds them only while they are well above their watermarks: on this machine's 23.6 GiB
/// (`/proc/zoneinfo`'s `protection`), DMA keeps 24 090 pages (more than its 3 840)
/// and DMA32 21 071. Movable requests, whose highest zone is ZONE_MOVABLE, would add a
/// Movable zone's pages (`/ 32` for Normal): not modelled.
pub(crate) fn lowmem_reserves(zones: &[Zone]) -> Vec<u64> {
    zones
        .iter()
        .map(|z| {
            let ratio = match z.kind {
                ZoneKind::Dma | ZoneKind::Dma32 => 256,
                ZoneKind::Normal | ZoneKind::Movable => return 0,
            };
            let above: u64 = zones
                .iter()
                .filter(|u| u.node == z.node && u.kind > z.kind && u.kind <= ZoneKind::Normal)
                .map(|u| u.managed)
                .sum();
            if z.managed == 0 {
                0
            } else {
                above / ratio
            }
        })
        .collect()
}

pub(crate) fn collect_wmarks(zones: &[Zone], cfg: &crate::config::Config) -> Vec<[u64; 4]> {
    let lowmem: u64 = zones
        .iter()
        .filter(|z| z.kind != ZoneKind::Movable)
        .map(|z| z.managed)
        .sum();
    let nr_low_zones = zones.iter().filter(|z| z.kind != ZoneKind::Movable).count() as u64;
    let kb = cfg
        .min_free_kbytes
        .unwrap_or_else(|| min_free_kbytes(lowmem, nr_low_zones, cfg.thp));
    let pages_min = kb / 4;
    zones
        .iter()
        .map(|z| {
            zone_wmarks(
                pages_min,
                z.managed,
                lowmem,
                z.kind == ZoneKind::Movable,
                cfg.watermark_scale_factor,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_watermarks() {
        // docs/mechanisms.md §2.4: 4 GiB zone, THP off: min_free_kbytes 8192, MIN 2048, LOW 3096, HIGH 4144
        let m = 1_048_576;
        assert_eq!(min_free_kbytes(m, 1, false), 8192);
        let w = zone_wmarks(8192 / 4, m, m, false, 10);
        assert_eq!(w[..3], [2048, 3096, 4144]);
        // clamps
        assert_eq!(min_free_kbytes(10, 1, false), 128);
        assert_eq!(min_free_kbytes(1 << 40, 1, false), 262_144);
        // THP recommendation: 5632 pages per zone = 22528 KiB
        assert_eq!(min_free_kbytes(m, 1, true), 22_528);
        assert_eq!(isqrt(99), 9);
        assert_eq!(isqrt(100), 10);
    }

    /// The layout the struct's doc promises: what a lock holder writes per page (the
    /// lock word, the free lists, the tally) and per trip (NR_FREE_PAGES, the occupancy
    /// word) never shares a 128-byte line pair with what the PCP hits read (the span,
    /// `meta_base`, the pageblock table, the watermarks, the flags).
    #[test]
    fn lock_lines_are_apart_from_what_the_hits_read() {
        use core::mem::{align_of, offset_of, size_of};
        const PAIR: usize = 128;
        assert_eq!(align_of::<Zone>() % PAIR, 0);
        assert!(size_of::<Zone>().is_power_of_two());
        assert_eq!(size_of::<Zone>() % PAIR, 0);
        let read = [
            offset_of!(Zone, start_pfn),
            offset_of!(Zone, end_pfn),
            offset_of!(Zone, meta_base),
            offset_of!(Zone, pb_start),
            offset_of!(Zone, pageblock),
            offset_of!(Zone, wmark) + size_of::<[AtomicU64; 4]>() - 1,
            offset_of!(Zone, boost),
            offset_of!(Zone, flags),
            offset_of!(Zone, nr_isolate_pageblock),
            offset_of!(Zone, lock_stat),
            offset_of!(Zone, cpu_stats),
            offset_of!(Zone, trace),
        ];
        let trip = [
            offset_of!(Zone, nr_free_pages),
            offset_of!(Zone, nonempty),
            offset_of!(Zone, cluster_inflight) + size_of::<AtomicU32>() - 1,
        ];
        let last_read = read.iter().max().unwrap() / PAIR;
        let first_trip = trip.iter().min().unwrap() / PAIR;
        let last_trip = trip.iter().max().unwrap() / PAIR;
        let lock = offset_of!(Zone, lock);
        assert!(
            last_read < first_trip,
            "a read-mostly field shares the trip counters' lines"
        );
        assert!(
            last_trip < lock / PAIR,
            "the trip counters share the lock's lines"
        );
        assert_eq!(lock % PAIR, 0);
    }

    /// The spaced metadata ([`Zone::meta_index`]): every frame of a zone has its own
    /// index inside the zone's range, `pfn_of` undoes `meta_index`, and the heads of 64
    /// consecutive order-9 blocks fall into at least 16 sets of a 64-set, 64-byte-line
    /// cache (all into one unspaced).
    #[test]
    fn spaced_metadata_maps_every_frame_once_and_spreads_the_huge_heads() {
        // An unaligned start, a span that is not a whole number of 512-frame groups.
        let (start, pages, base) = (0x1_0000 + 3, 64 * 512 + 100, 77u32);
        for spaced in [false, true] {
            let span = ZoneSpan {
                idx: 0,
                node: 0,
                kind: ZoneKind::Normal,
                start_pfn: start,
                end_pfn: start + pages,
                managed: pages,
            };
            let z = Zone::new(span, base, spaced, 1, false).expect("a small zone");
            let entries = Zone::meta_entries(pages, spaced);
            assert_eq!(entries, pages + if spaced { pages / 512 } else { 0 });
            let mut seen = alloc::vec![false; entries as usize];
            for pfn in start..start + pages {
                let i = z.meta_index(pfn);
                assert!(
                    i >= base && u64::from(i - base) < entries,
                    "{pfn:#x} -> {i}"
                );
                assert!(!core::mem::replace(&mut seen[(i - base) as usize], true));
                assert_eq!(z.pfn_of(i), pfn);
            }
            let sets: alloc::collections::BTreeSet<u64> = (0..64u64)
                .map(|g| {
                    let i = u64::from(z.meta_index(start + 512 * g));
                    (i * 16 / 64) % 64
                })
                .collect();
            if spaced {
                assert!(sets.len() >= 16, "{sets:?}");
            } else {
                assert_eq!(sets.len(), 1);
            }
        }
    }
}
