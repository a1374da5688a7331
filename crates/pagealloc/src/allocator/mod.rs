//! The allocator: construction, the public API, the zonelist walk
//! (`get_page_from_freelist`), the slow path, drains, CPU hotplug and sizing updates.
//!
//! # Design
//! One [`Allocator`] owns the per-frame metadata, the zones, and one pageset per (CPU,
//! zone). Every entry point exists in two forms: one that asks the [`Platform`] which CPU
//! it runs on ([`Allocator::alloc_pages`], [`Allocator::free_pages`]) and one that names
//! the CPU ([`Allocator::alloc_on`], [`Allocator::free_on`]), which the simulator and
//! pinned benchmark threads use. Naming a CPU another thread is using is safe (every
//! pageset is locked) but its counters then mix two threads' work.
//!
//! # Files
//! The struct and its shared types live here; the `impl Allocator` blocks are split by
//! concept: `build` (construction), `alloc` (allocation, the zonelist walk, the slow
//! path), `free`, `hotplug` (CPU hotplug, drains, the tick, pageset sizing),
//! `inspect` (getters, counters, zone and pageblock queries) and `seed` (a pageset
//! started from a given state).

mod alloc;
mod build;
mod cpu;
pub(crate) use crate::build_error::try_boxed;
pub use crate::build_error::BuildError;
pub(crate) use cpu::CpuInfo;
mod free;
mod hotplug;
mod inspect;
mod nolock;
mod seed;
pub use seed::{FreeListSeed, FreeListsSeeded, PagesetSeed, SeedError, SeedList};

use crate::config::Config;
use crate::frame::FreeError;
use crate::memmap::PageMeta;
use crate::pcp::PcpSlot;
use crate::platform::Platform;
use crate::sync::atomic::{AtomicU32, AtomicU64};
use crate::sync::SpinLock;
use crate::tune::Tune;
use crate::zone::*;
use ::alloc::boxed::Box;
use ::alloc::sync::Arc;
use core::fmt;

/// Per-frame metadata storage: owned, or a caller-supplied buffer (no_std) that the
/// caller gave up for good (`Allocator::with_metadata` takes it as `&'static mut`, so no
/// other allocator or code holds it).
pub(crate) enum MetaStore {
    Owned(Box<[PageMeta]>),
    Borrowed(&'static [PageMeta]),
}

impl core::ops::Deref for MetaStore {
    type Target = [PageMeta];
    #[inline]
    fn deref(&self) -> &[PageMeta] {
        match self {
            MetaStore::Owned(b) => b,
            MetaStore::Borrowed(s) => s,
        }
    }
}

/// A frame in a bulk free that was refused; the frames before it were freed, the ones
/// from it on were not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkFreeError {
    /// Index of the refused frame.
    pub index: usize,
    /// Why.
    pub error: FreeError,
}

impl fmt::Display for BulkFreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bulk free refused frame {}: {}", self.index, self.error)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for BulkFreeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// A Linux-style page-frame allocator. See the crate docs.
///
/// The main path: build it over a [`Layout`](crate::Layout), allocate and free as a
/// named CPU (or as the calling thread's CPU with [`Allocator::alloc_pages`]), read the
/// counters.
///
/// ```
/// use pagealloc::{Allocator, Config, Gfp, Layout};
///
/// // 64 MiB (16 384 frames) on one node with 2 CPUs, Linux 6.12 behaviour.
/// let a = Allocator::new(&Layout::single(16384, 2), Config::default())?;
/// let page = a.alloc_on(0, 0, Gfp::USER, None)?; // CPU 0, one movable page
/// let huge = a.alloc_on(1, 9, Gfp::USER, None)?; // CPU 1, a 2 MiB block
/// assert_eq!(huge.pages(), 512);
/// a.free_on(0, page)?;
/// a.free_on(1, huge)?;
///
/// let c = a.counters();
/// assert_eq!((c.pgalloc, c.pgfree), (513, 513));
/// // Nothing is lost: free in the buddy lists + cached in pagesets = managed.
/// assert_eq!(a.nr_free_pages() + a.nr_pcp_pages(), a.managed_pages());
/// a.validate()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Allocator {
    /// The order-0 pageset lists are rings (`Config::own_bitmap`):
    /// `alloc_on` and `free_on` run the copy of their hit that serves rings as well as
    /// linked lists (`RINGS` true); without rings, the copy that serves linked lists
    /// only. Both copies are inlined into the caller; this is the one test that picks.
    pub(crate) ring_hits: bool,
    /// `Config::poison`, copied beside `ring_hits` for every allocation's hit (which reads
    /// no `Config`): a handed-out block's poison is checked.
    #[cfg_attr(not(feature = "std"), allow(dead_code))] // poisoning needs the std mapping
    pub(crate) poison_hits: bool,
    pub(crate) cfg: Config,
    pub(crate) tune: Tune,
    pub(crate) meta: MetaStore,
    pub(crate) zones: Box<[Zone]>,
    /// Zone indices sorted by start PFN, for frame lookups.
    by_pfn: Box<[(u64, u64, usize)]>,
    pub(crate) zonelists: Box<[Box<[usize]>]>,
    /// The full-zone cache of each zonelist (used with `Config::zonelist_cache`).
    pub(crate) zlc: Box<[crate::zonelist::ZonelistCache]>,
    node_zones: Box<[Box<[usize]>]>,
    pub(crate) cpus: Box<[CpuInfo]>,
    pub(crate) pcps: Box<[PcpSlot]>,
    /// `Config::pcp_buddy`: the owner of each pageblock (`pcp_buddy/owners.rs`).
    pub(crate) pb_owners: crate::pcp_buddy::Owners,
    pub(crate) platform: Arc<dyn Platform>,
    /// `pcp_batch_high_lock`: serializes sizing updates.
    setup_lock: SpinLock<()>,
    /// Serializes `drain_all_pages`.
    drain_lock: SpinLock<()>,
    high_fraction: AtomicU32,
    /// PFN of the first block found written after free when handed out again
    /// (`Config::poison`); `u64::MAX`: none.
    pub(crate) poison_first_damaged: AtomicU64,
    #[cfg(feature = "std")]
    pub(crate) region: Option<crate::os::mmap::MmapRegion>,
    /// PFN of the first frame of the region (frame address = base + (pfn - this) * 4096).
    #[cfg_attr(not(feature = "std"), allow(dead_code))] // read by the mmap-backed paths
    pub(crate) region_base_pfn: u64,
    #[cfg(feature = "std")]
    pub(crate) ticker: std::sync::Mutex<Option<TickerHandle>>,
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
        self.cfg.pcp && (order <= 3 || (order == crate::frame::THP_ORDER && self.cfg.thp))
    }
}

impl fmt::Debug for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Allocator")
            .field("config", &::alloc::format!("{}", self.cfg))
            .field("zones", &self.zones)
            .field("cpus", &self.cpus.len())
            .finish_non_exhaustive()
    }
}

/// A running background ticker (`ticker.rs`), kept here so that the allocator's state
/// needs nothing of the ticker; stopped by [`Allocator::stop_ticker`] or when the
/// allocator is dropped.
#[cfg(feature = "std")]
#[derive(Debug)]
pub(crate) struct TickerHandle {
    pub(crate) stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(crate) thread: Option<std::thread::JoinHandle<()>>,
}

#[cfg(feature = "std")]
impl Drop for TickerHandle {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                t.thread().unpark();
                let _ = t.join();
            }
        }
    }
}
