//! Counters, declared once and expanded into the per-CPU cells, the summed snapshot and
//! the `/proc/vmstat`-style printer.
//!
//! # Design
//! Each counter cell is owned by one lock: the pageset's (`pcp` path events), the zone's
//! (events under the zone lock, kept per CPU inside the zone), or nobody (rare lock-free
//! events, updated with an atomic add). A cell is written with a plain load and store
//! under its lock (`StatCell::add`), so counting costs an add, and a read sums every
//! cell without taking locks ([`Counters`]). Fields marked `max` are maxima, merged with
//! `max` instead of `+`.

use crate::sync::StatCell;
use core::fmt;

macro_rules! counters {
    ($( $(#[doc = $doc:expr])* $name:ident : $kind:ident ),* $(,)?) => {
        /// Live counter cells of one owner (a pageset, a zone's per-CPU slot, a CPU).
        #[derive(Default, Debug)]
        pub struct Stats {
            $( $(#[doc = $doc])* pub $name: StatCell, )*
        }

        /// A summed snapshot of counters (all CPUs, all zones, or one of them).
        #[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Counters {
            $( $(#[doc = $doc])* pub $name: u64, )*
        }

        impl Stats {
            /// Merge this owner's cells into a snapshot.
            pub fn accumulate(&self, into: &mut Counters) {
                $( counters!(@merge $kind, into.$name, self.$name.get()); )*
            }
            /// Zero every cell (not atomic with respect to concurrent updates).
            pub fn reset(&self) {
                $( self.$name.reset(); )*
            }
        }

        impl Counters {
            /// Names and values, in declaration order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$( (stringify!($name), self.$name), )*].into_iter()
            }
            /// Merge another snapshot into this one.
            pub fn merge(&mut self, o: &Counters) {
                $( counters!(@merge $kind, self.$name, o.$name); )*
            }
            /// `self - earlier` for sums, `self` for maxima: the events of an interval.
            pub fn since(&self, earlier: &Counters) -> Counters {
                Counters {
                    $( $name: counters!(@since $kind, self.$name, earlier.$name), )*
                }
            }
            /// The value of a counter by name.
            pub fn get(&self, name: &str) -> Option<u64> {
                self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
            }
        }
    };
    (@merge sum, $a:expr, $b:expr) => { $a += $b };
    (@merge max, $a:expr, $b:expr) => { $a = $a.max($b) };
    (@since sum, $a:expr, $b:expr) => { $a.wrapping_sub($b) };
    (@since max, $a:expr, $b:expr) => { $a };
}

counters! {
    /// Pages allocated (`pgalloc_*`): +2^order per successful allocation.
    pgalloc: sum,
    /// Pages freed (`pgfree`): +2^order per free, pcp or zone path.
    pgfree: sum,
    /// Pages taken from the zone's buddy lists for allocation: refills + direct.
    alloc_zone: sum,
    /// Allocations served directly by the zone (orders not cached, or pcp unavailable).
    alloc_direct: sum,
    /// Frees that went straight to the zone.
    free_direct: sum,
    /// Refills of a pcp list from the zone (`rmqueue_bulk` calls).
    pcp_refill: sum,
    /// Pages moved zone -> pcp by refills.
    pcp_refill_pages: sum,
    /// Drains of a pcp to the zone (`free_pcppages_bulk` calls), any cause.
    pcp_drain: sum,
    /// Pages moved pcp -> zone by drains.
    pcp_drain_pages: sum,
    /// Frees that triggered a free_high drain.
    free_high: sum,
    /// Drains done by the decay tick.
    decay_drain: sum,
    /// Drains of remote-node pcps that expired (3 idle ticks).
    expire_drain: sum,
    /// `drain_pages_zone` calls (drain of one CPU, drain of all, CPU offline).
    drain_cpu: sum,
    /// Allocation fast paths that found the pcp lock taken and went to the zone.
    pcp_lock_busy: sum,
    /// Zone-lock acquisitions.
    zone_lock: sum,
    /// Zone-lock acquisitions that had to wait.
    zone_lock_contended: sum,
    /// Nanoseconds spent waiting for zone locks.
    zone_lock_wait_ns: sum,
    /// Nanoseconds zone locks were held (0 with `Config::lock_stat` off).
    zone_lock_hold_ns: sum,
    /// Longest single zone-lock hold, ns (0 with `Config::lock_stat` off).
    zone_lock_max_hold_ns: max,
    /// Fallback allocations from another migratetype's free list.
    fallback: sum,
    /// Pageblocks claimed (retagged) by a fallback.
    pageblock_claim: sum,
    /// Pageblocks reserved as HIGHATOMIC.
    highatomic_reserve: sum,
    /// Pageblocks given back from the HIGHATOMIC reserve.
    highatomic_unreserve: sum,
    /// Zones the allocation path skipped for failing the watermark test.
    watermark_fail: sum,
    /// Allocations that entered the slow path.
    alloc_slowpath: sum,
    /// Allocations that failed with OutOfMemory.
    alloc_fail: sum,
    /// Times the zone's BELOW_HIGH flag was set.
    below_high_set: sum,
    /// Zones examined by zonelist walks past the first zone.
    zonelist_scanned: sum,
    /// Zones skipped by the zonelist full-zone cache.
    zonelist_skipped: sum,
    /// Order-0 frees that skipped buddy merging.
    merge_skipped: sum,
    /// Deferred merges of merge-skipped frames done later.
    merge_deferred: sum,
    /// Pageblocks whose merge-skipped frames the slow path merged on demand, stopping once
    /// a block of the request's order existed (the full `compact()` is not counted here).
    merge_ondemand: sum,
    /// High-order allocations that failed, then succeeded after deferred merging.
    highorder_rescued: sum,
    /// Per-frame metadata writes under the zone lock by refills (clustered refill).
    refill_meta_touched: sum,
    /// Refill cuts of whole clusters (clustered refill).
    cluster_cut: sum,
    /// Pages drains moved onto the order-0 free lists in spliced runs (splice_drain).
    drain_spliced: sum,
    /// Order-0 pages drains took from the heads of the pageset lists, the ones freed last,
    /// in a long run of frees (`Config::drain_newest`).
    drain_newest: sum,
    /// Order-0 frees to a pageset that wrote no frame metadata: the ownership bit taken,
    /// the index pushed on the ring (`Config::own_bitmap`).
    free_unwritten: sum,
    /// Blocks found written after their free when handed out again (`Config::poison`,
    /// `debug_pagealloc`'s poison check at allocation).
    poison_damaged: sum,
    /// Per-frame metadata (`struct page`) accesses under the zone lock: the frames moved,
    /// their list neighbours, buddies looked up while merging (see `access.rs`).
    zone_lock_meta: sum,
    /// All allocator lines accessed under the zone lock: metadata, pageblock-type entries,
    /// free-area heads, counters, watermarks.
    zone_lock_lines: sum,
    /// Pages moved under the zone lock: refills, drains, direct allocations and frees
    /// (`zone_lock_meta / zone_lock_pages` = metadata lines per page moved).
    zone_lock_pages: sum,
    /// Allocations that succeeded through `Allocator::alloc_pages_nolock` (trylocks only).
    nolock_alloc: sum,
    /// `alloc_pages_nolock` calls that returned no block: every lock they tried was
    /// taken, or no zone had a block above its low watermark.
    nolock_alloc_fail: sum,
    /// Frees through `Allocator::free_pages_nolock` (done at once or deferred).
    nolock_free: sum,
    /// Pageset or zone trylocks of the nolock pair that found the lock taken.
    nolock_trylock_fail: sum,
    /// Nolock frees that found both the pageset and the zone lock taken and were left on
    /// the zone's deferred list (`trylock_free_pages`).
    nolock_deferred: sum,
    /// Deferred frees completed (freed to the buddy lists) by a later holder of the zone
    /// lock.
    nolock_deferred_done: sum,
    /// `pcp_buddy`: pageblocks claimed whole by refills (phase 1).
    pcp_buddy_claim: sum,
    /// `pcp_buddy`: pages of owned pageblocks taken back from the zone (phase 0).
    pcp_buddy_recovered: sum,
    /// `pcp_buddy`: pages taken as sub-pageblock chunks without fallback (phase 2).
    pcp_buddy_chunk: sum,
    /// `pcp_buddy`: refills served, in part or whole, by splitting owned blocks already on
    /// the pageset, without the zone lock.
    pcp_buddy_local: sum,
    /// `pcp_buddy`: frees of another CPU's pageblock sent to that CPU's pageset.
    pcp_buddy_remote_free: sum,
    /// `pcp_buddy`: buddy merges made under the pageset lock by drains.
    pcp_buddy_merge: sum,
    /// `pcp_buddy`: owned pageblocks given back to the zone (whole again, or CPU offline).
    pcp_buddy_release: sum,
}

impl fmt::Display for Counters {
    /// `/proc/vmstat` style: `name value` per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, v) in self.iter() {
            writeln!(f, "{n} {v}")?;
        }
        Ok(())
    }
}

/// One pageset's state, as `/proc/zoneinfo` prints it (plus the tuning internals).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PcpInfo {
    /// CPU.
    pub cpu: usize,
    /// Zone index.
    pub zone: usize,
    /// Pages on the lists.
    pub count: i32,
    /// Current high (as stored; the next alloc/free re-clamps it).
    pub high: i32,
    /// Batch.
    pub batch: i32,
    /// Lower bound of high.
    pub high_min: i32,
    /// Upper bound of high.
    pub high_max: i32,
    /// PCPF_* flags.
    pub flags: u8,
    /// Refill scale exponent.
    pub alloc_factor: u8,
    /// v6.6 drain scale exponent.
    pub free_factor: u8,
    /// Recently freed pages.
    pub free_count: i32,
}

/// One zone's state for reports.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ZoneInfo {
    /// Zone index.
    pub zone: usize,
    /// Node of the zone.
    pub node: usize,
    /// Zone name (DMA, DMA32, Normal, Movable).
    pub name: &'static str,
    /// Free pages in the buddy lists (NR_FREE_PAGES).
    pub free: u64,
    /// min / low / high / promo watermarks, without boost.
    pub wmark: [u64; 4],
    /// Current watermark boost.
    pub boost: u64,
    /// Pages spanned, including holes.
    pub spanned: u64,
    /// Pages managed.
    pub managed: u64,
    /// Free blocks per order.
    pub nr_free: [u64; crate::frame::NR_ORDERS],
    /// ZONE_BELOW_HIGH.
    pub below_high: bool,
    /// ZONE_RECLAIM_ACTIVE.
    pub reclaim_active: bool,
    /// Pages reserved as HIGHATOMIC.
    pub reserved_highatomic: u64,
    /// Pages kept back from requests that fell to this zone from a higher one of its
    /// node (`lowmem_reserve`, `/proc/zoneinfo`'s `protection` against Normal).
    pub lowmem_reserve: u64,
}
