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

use crate::buddy::Buddy;
use crate::config::{Config, ConfigError};
use crate::frame::{AllocError, Frame, FreeError, Gfp, MigrateType, Pfn, MAX_ORDER};
use crate::memmap::{PageMeta, State};
use crate::pcp::PcpSlot;
use crate::platform::Platform;
use crate::stats::{Counters, PcpInfo, Stats, ZoneInfo};
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use crate::sync::SpinLock;
use crate::topology::{Layout, LayoutError, ZoneKind};
use crate::tune::{self, Tune};
use crate::zone::*;
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

/// Per-frame metadata storage: owned, or a caller-supplied buffer (no_std).
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

/// Per-CPU data that is not per zone.
pub(crate) struct CpuInfo {
    pub(crate) node: usize,
    /// The first zone of the node's zonelist (`usize::MAX`: none), where the PCP hit
    /// looks first.
    pub(crate) home_zone: usize,
    pub(crate) llc_slice_bytes: u64,
    pub(crate) online: AtomicBool,
    /// Lock-free events (atomic adds).
    pub(crate) stats: Stats,
}

/// Why an allocator could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The config is out of range.
    Config(ConfigError),
    /// The layout is inconsistent.
    Layout(LayoutError),
    /// A caller-supplied metadata buffer is too small (needed entries).
    Metadata(usize),
    /// Allocating the allocator's own structures failed (`try_reserve`).
    OutOfMemory {
        /// What was being allocated.
        what: &'static str,
        /// Bytes asked for.
        bytes: usize,
    },
    /// Mapping memory failed.
    #[cfg(feature = "std")]
    Mmap(std::io::Error),
}

/// `n` values made by `f(i)` in a boxed slice, or [`BuildError::OutOfMemory`] when the
/// memory for them cannot be had (instead of aborting the process).
fn try_boxed<T>(
    what: &'static str,
    n: usize,
    f: impl FnMut(usize) -> T,
) -> Result<Box<[T]>, BuildError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| BuildError::OutOfMemory {
            what,
            bytes: n.saturating_mul(core::mem::size_of::<T>()),
        })?;
    v.extend((0..n).map(f));
    Ok(v.into_boxed_slice())
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => e.fmt(f),
            BuildError::Layout(e) => e.fmt(f),
            BuildError::Metadata(n) => write!(f, "metadata buffer too small: {n} entries needed"),
            BuildError::OutOfMemory { what, bytes } => {
                write!(f, "cannot allocate {bytes} bytes for the {what}")
            }
            #[cfg(feature = "std")]
            BuildError::Mmap(e) => write!(f, "mmap failed: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for BuildError {}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> Self {
        BuildError::Config(e)
    }
}
impl From<LayoutError> for BuildError {
    fn from(e: LayoutError) -> Self {
        BuildError::Layout(e)
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

/// What one zone of the zonelist walk gave.
enum ZoneTry {
    /// A block.
    Got(u64),
    /// Failed the watermark test or ran out: "full" for the zonelist cache.
    Full,
    /// Not eligible for this request (a Movable zone for a non-movable request).
    Skip,
}

/// A Linux-style page-frame allocator. See the crate docs.
///
/// The main path: build it over a [`Layout`], allocate and free as a named CPU (or as
/// the calling thread's CPU with [`Allocator::alloc_pages`]), read the counters.
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
    pub(crate) ticker: std::sync::Mutex<Option<crate::ticker::TickerHandle>>,
}

impl fmt::Debug for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Allocator")
            .field("config", &alloc::format!("{}", self.cfg))
            .field("zones", &self.zones)
            .field("cpus", &self.cpus.len())
            .finish_non_exhaustive()
    }
}

impl Allocator {
    /// An allocator over `layout` with the host's CPU identity and clock
    /// ([`OsPlatform`](crate::OsPlatform)); frames are numbers only, no memory is mapped
    /// (see [`Allocator::with_memory`] for that).
    ///
    /// ```
    /// use pagealloc::{Allocator, BuildError, Config, Layout};
    ///
    /// let a = Allocator::new(&Layout::numa(2, 8192, 2), "patch7".parse()?)?;
    /// assert_eq!((a.nr_nodes(), a.nr_cpus()), (2, 4));
    /// // A layout with no memory is refused, not built.
    /// let empty = Allocator::new(&Layout::single(0, 1), Config::default());
    /// assert!(matches!(empty, Err(BuildError::Layout(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn new(layout: &Layout, config: Config) -> Result<Allocator, BuildError> {
        Self::with_platform(layout, config, Arc::new(crate::platform::OsPlatform))
    }

    /// An allocator whose CPU identity and clock come from `platform`: a kernel's hooks,
    /// or a [`ManualPlatform`](crate::ManualPlatform) that a test or a simulator steers.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pagealloc::{Allocator, Config, Gfp, Layout, ManualPlatform};
    ///
    /// let clock = Arc::new(ManualPlatform::new());
    /// let a = Allocator::with_platform(&Layout::single(16384, 2), Config::default(), clock.clone())?;
    /// clock.set_cpu(1);
    /// assert_eq!(a.current_cpu(), 1);
    /// let f = a.alloc_pages(0, Gfp::KERNEL)?; // from CPU 1's pageset
    /// assert_eq!(a.cpu_counters(1).unwrap().pgalloc, 1);
    /// a.free_pages(f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_platform(
        layout: &Layout,
        config: Config,
        platform: Arc<dyn Platform>,
    ) -> Result<Allocator, BuildError> {
        layout.validate()?;
        let n = layout.spanned_pages() as usize;
        let meta = try_boxed("frame metadata", n, |_| PageMeta::new())?;
        Self::build(layout, config, platform, MetaStore::Owned(meta))
    }

    /// An allocator using a caller-supplied metadata buffer of at least
    /// `layout.metadata_size()` bytes (`layout.spanned_pages()` entries), e.g. a static
    /// array in a kernel. The buffer's previous contents are overwritten. Works without
    /// the `std` feature; a buffer too small is refused with [`BuildError::Metadata`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pagealloc::{Allocator, BuildError, Config, Gfp, Layout, ManualPlatform, PageMeta};
    ///
    /// // One entry per spanned frame; a kernel would put this in its image or its early
    /// // boot memory instead.
    /// static META: [PageMeta; 4096] = [const { PageMeta::new() }; 4096];
    /// let layout = Layout::single(4096, 1);
    /// assert!(layout.metadata_size() <= core::mem::size_of_val(&META));
    /// let hooks = Arc::new(ManualPlatform::new());
    /// let a = Allocator::with_metadata(&layout, Config::default(), hooks.clone(), &META)?;
    /// let f = a.alloc_pages(3, Gfp::KERNEL)?;
    /// a.free_pages(f)?;
    ///
    /// static SMALL: [PageMeta; 16] = [const { PageMeta::new() }; 16];
    /// let e = Allocator::with_metadata(&layout, Config::default(), hooks, &SMALL).unwrap_err();
    /// assert!(matches!(e, BuildError::Metadata(4096)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_metadata(
        layout: &Layout,
        config: Config,
        platform: Arc<dyn Platform>,
        meta: &'static [PageMeta],
    ) -> Result<Allocator, BuildError> {
        layout.validate()?;
        let n = layout.spanned_pages() as usize;
        if meta.len() < n {
            return Err(BuildError::Metadata(n));
        }
        for e in &meta[..n] {
            e.set_state(State::Tail);
            e.set_order(0);
        }
        Self::build(layout, config, platform, MetaStore::Borrowed(&meta[..n]))
    }

    /// An allocator over a fresh anonymous mapping that backs every frame of `layout`
    /// (frame address = region start + (pfn - lowest pfn) × 4096).
    ///
    /// ```
    /// use pagealloc::os::mmap::HugePages;
    /// use pagealloc::{Allocator, Config, Gfp, Layout, PAGE_SIZE};
    ///
    /// let a = Allocator::with_memory(&Layout::single(4096, 1), Config::default(), HugePages::None)?;
    /// let f = a.alloc_on(0, 1, Gfp::KERNEL, None)?; // two pages
    /// let p = a.frame_ptr(f).expect("memory-backed");
    /// // SAFETY: the block is ours until it is freed and spans 2 * PAGE_SIZE bytes of
    /// // the allocator's mapping.
    /// unsafe { p.as_ptr().write_bytes(0x5a, 2 * PAGE_SIZE) };
    /// assert_eq!(a.pfn_of_ptr(p.as_ptr()), Some(f.pfn));
    /// a.free_on(0, f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn with_memory(
        layout: &Layout,
        config: Config,
        huge: crate::os::mmap::HugePages,
    ) -> Result<Allocator, BuildError> {
        layout.validate()?;
        let lo = layout.zones().map(|(_, z)| z.start_pfn).min().unwrap_or(0);
        let hi = layout.zones().map(|(_, z)| z.end_pfn()).max().unwrap_or(0);
        let region =
            crate::os::mmap::MmapRegion::new(((hi - lo) as usize) * crate::frame::PAGE_SIZE, huge)
                .map_err(BuildError::Mmap)?;
        let mut a = Self::new(layout, config)?;
        if a.cfg.poison {
            region.poison(0, hi - lo, crate::config::POISON_BYTE);
        }
        a.region = Some(region);
        a.region_base_pfn = lo;
        Ok(a)
    }

    fn build(
        layout: &Layout,
        cfg: Config,
        platform: Arc<dyn Platform>,
        meta: MetaStore,
    ) -> Result<Allocator, BuildError> {
        cfg.validate()?;
        if let Some(b) = cfg.fixed_batch {
            // A pageset's high is at least 4 batches (`zone_highsize`): a batch larger
            // than a quarter of a zone would move most of the zone on every refill.
            if layout.zones().any(|(_, z)| 4 * b as u64 > z.managed()) {
                return Err(BuildError::Config(ConfigError::Invalid {
                    key: "fixed_batch",
                    why: "must be at most a quarter of every zone's managed pages",
                }));
            }
        }
        let ncpus = layout.cpus.len();
        let mut zones = Vec::new();
        let mut base = 0u32;
        let mut kinds = Vec::new();
        let mut node_zones: Vec<Vec<usize>> = alloc::vec![Vec::new(); layout.nodes.len()];
        for (node, zl) in layout.zones() {
            let idx = zones.len();
            zones.push(Zone::new(
                idx,
                node,
                zl.kind,
                zl.start_pfn,
                zl.end_pfn(),
                base,
                zl.managed(),
                ncpus,
            ));
            kinds.push((node, zl.kind));
            node_zones[node].push(idx);
            base += zl.pages as u32;
        }
        let mut by_pfn: Vec<_> = zones
            .iter()
            .map(|z| (z.start_pfn, z.end_pfn, z.idx))
            .collect();
        by_pfn.sort_unstable();
        let zonelists: Box<[Box<[usize]>]> = crate::zonelist::build(layout, &kinds)
            .into_iter()
            .map(Vec::into_boxed_slice)
            .collect();
        let zone_node: Vec<usize> = zones.iter().map(|z| z.node).collect();
        let has_memory: Vec<bool> = (0..layout.nodes.len())
            .map(|n| zones.iter().any(|z| z.node == n && z.managed > 0))
            .collect();
        let zlc = zonelists
            .iter()
            .map(|zl| crate::zonelist::ZonelistCache::new(zl, &zone_node, &has_memory))
            .collect();
        let cpus = layout
            .cpus
            .iter()
            .map(|c| CpuInfo {
                node: c.node,
                home_zone: zonelists
                    .get(c.node)
                    .and_then(|zl| zl.first().copied())
                    .unwrap_or(usize::MAX),
                llc_slice_bytes: c.llc_slice_bytes,
                online: AtomicBool::new(c.online),
                stats: Stats::default(),
            })
            .collect();
        let nz = zones.len();
        let pcps = try_boxed("pagesets", ncpus * nz, |i| {
            PcpSlot::new(crate::pcp::Hot::new(&cfg, &zones[i % nz]))
        })?;
        let a = Allocator {
            tune: Tune::from_config(&cfg),
            high_fraction: AtomicU32::new(cfg.high_fraction),
            poison_first_damaged: AtomicU64::new(u64::MAX),
            cfg,
            meta,
            zones: zones.into_boxed_slice(),
            by_pfn: by_pfn.into_boxed_slice(),
            zonelists,
            zlc,
            node_zones: node_zones.into_iter().map(Vec::into_boxed_slice).collect(),
            cpus,
            pcps,
            platform,
            setup_lock: SpinLock::new(()),
            drain_lock: SpinLock::new(()),
            #[cfg(feature = "std")]
            region: None,
            region_base_pfn: 0,
            #[cfg(feature = "std")]
            ticker: std::sync::Mutex::new(None),
        };
        // Holes are never memory; everything else is handed to the buddy lists in the
        // largest aligned blocks (`memblock_free_all`), all pageblocks MOVABLE.
        for ((_, zl), z) in layout.zones().zip(a.zones.iter()) {
            for &(s, e) in &zl.holes {
                for pfn in s..e {
                    a.meta[z.meta_index(pfn) as usize].set_state(State::Reserved);
                }
            }
            let mut holes = zl.holes.clone();
            holes.sort_unstable();
            let mut runs = Vec::new();
            let mut p = zl.start_pfn;
            for (s, e) in holes {
                if s > p {
                    runs.push((p, s));
                }
                p = p.max(e);
            }
            if p < zl.end_pfn() {
                runs.push((p, zl.end_pfn()));
            }
            let mut g = z.lock_inspect();
            let mut b = Buddy::new(z, &mut g, &z.cpu_stats[0], &a.meta, &a.cfg);
            for (s, e) in runs {
                let mut p = s;
                while p < e {
                    let mut o = MAX_ORDER.min(p.trailing_zeros().min(63) as u8);
                    while p + (1u64 << o) > e {
                        o -= 1;
                    }
                    b.free_one(p, o, MigrateType::Movable, false);
                    p += 1u64 << o;
                }
            }
            // Building is nobody's trip: start the access tally at zero.
            b.inner.tally = Default::default();
        }
        a.setup_wmarks();
        a.update_all_pcp_sizes(true);
        Ok(a)
    }

    /// `setup_per_zone_wmarks`.
    fn setup_wmarks(&self) {
        for (z, w) in self
            .zones
            .iter()
            .zip(collect_wmarks(&self.zones, &self.cfg))
        {
            z.set_wmarks(w);
        }
    }

    fn online_cpus(&self) -> u32 {
        self.cpus.iter().filter(|c| c.online.load(Relaxed)).count() as u32
    }

    /// `zone_pcp_update` for every zone (docs/mechanisms.md §2.2): recompute (high_min, high_max, batch)
    /// and write them into every CPU's pageset when they changed. Offline CPUs get the
    /// boot pageset (0, 0, 1): nothing is cached on them.
    fn update_all_pcp_sizes(&self, init: bool) {
        let _g = self.setup_lock.lock();
        let online = self.online_cpus();
        let fraction = self.high_fraction.load(Relaxed);
        for z in self.zones.iter() {
            let (hmin, hmax, batch) = if !self.cfg.pcp {
                (0, 0, 1)
            } else {
                let batch = self
                    .cfg
                    .fixed_batch
                    .map_or_else(|| tune::zone_batchsize(z.managed), |b| b as i32);
                let node_cpus = self
                    .cpus
                    .iter()
                    .filter(|c| c.node == z.node && c.online.load(Relaxed))
                    .count() as u32;
                let (lo, hi) = match self.cfg.fixed_high {
                    Some(h) => (h as i32, h as i32),
                    None => tune::high_bounds(
                        z.wmark(WMARK_LOW),
                        z.managed,
                        batch,
                        node_cpus,
                        0,
                        online,
                        fraction,
                        self.cfg.auto_tune,
                    ),
                };
                (lo, hi, batch)
            };
            let triple = [hmin as u32, hmax as u32, batch as u32];
            let cached = z.pageset_sizes();
            z.set_pageset_sizes(triple);
            for cpu in 0..self.cpus.len() {
                let on = self.cpus[cpu].online.load(Relaxed);
                if !on {
                    self.set_pcp_sizes(cpu, z.idx, 0, 0, 1, init);
                } else if init || cached != triple || {
                    // A CPU back online still has the boot pageset: with fixed sizes the
                    // zone's triple did not change, so compare the CPU's own sizes.
                    let st = self.slot(cpu, z.idx).pcp.lock().st;
                    (st.high_min, st.high_max, st.batch) != (hmin, hmax, batch)
                } {
                    self.set_pcp_sizes(cpu, z.idx, hmin, hmax, batch, init);
                }
            }
        }
    }

    // ------------------------------------------------------------------ allocation

    /// The CPU the caller runs on, as the platform says, folded onto this allocator's
    /// CPUs: a layout with fewer CPUs than the host (say one pageset for a whole process)
    /// shares its pagesets among the host CPUs instead of refusing them.
    #[inline]
    pub fn current_cpu(&self) -> usize {
        let c = self.platform.current_cpu();
        let n = self.cpus.len();
        if c < n {
            c
        } else {
            c % n
        }
    }

    /// Allocate 2^`order` frames on the current CPU's node (see [`Allocator::current_cpu`]).
    #[inline]
    pub fn alloc_pages(&self, order: u8, gfp: Gfp) -> Result<Frame, AllocError> {
        self.alloc_on(self.current_cpu(), order, gfp, None)
    }

    /// Allocate 2^`order` frames preferring `node` (`None`: the current CPU's node).
    #[inline]
    pub fn alloc_pages_node(
        &self,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        self.alloc_on(self.current_cpu(), order, gfp, node)
    }

    /// Allocate as CPU `cpu` (its pageset, its node unless `node` is given).
    ///
    /// ```
    /// use pagealloc::{AllocError, Allocator, Config, Gfp, Layout, MAX_ORDER};
    ///
    /// // Two nodes of 64 MiB, one CPU each.
    /// let a = Allocator::new(&Layout::numa(2, 16384, 1), Config::default())?;
    /// let local = a.alloc_on(0, 0, Gfp::KERNEL, None)?;
    /// assert_eq!(a.zone_of_pfn(local.pfn), Some(0)); // CPU 0's node
    /// let remote = a.alloc_on(0, 2, Gfp::KERNEL, Some(1))?; // four pages from node 1
    /// assert_eq!(a.zone_of_pfn(remote.pfn), Some(1));
    /// assert_eq!(a.alloc_on(0, MAX_ORDER + 1, Gfp::KERNEL, None), Err(AllocError::InvalidOrder(11)));
    /// assert_eq!(a.alloc_on(7, 0, Gfp::KERNEL, None), Err(AllocError::InvalidCpu(7)));
    /// a.free_on(0, local)?;
    /// a.free_on(0, remote)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn alloc_on(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        if node.is_none() {
            if let Some(pfn) = self.alloc_hit(cpu, order, gfp) {
                let f = Frame::new(Pfn(pfn), order);
                self.check_poison_on_alloc(cpu, f);
                return Ok(f);
            }
        }
        let r = self.alloc_walk(cpu, order, gfp, node);
        if let Ok(f) = r {
            self.check_poison_on_alloc(cpu, f);
        }
        r
    }

    /// With [`Config::poison`] on a memory-backed allocator, check that a block being
    /// handed out still holds the poison written when it was freed (`debug_pagealloc`'s
    /// `check_poison_mem`): a write after free is caught even when the block is allocated
    /// again before the next `validate()`. Damage is counted (`poison_damaged`), the
    /// first damaged block is remembered for `validate()` to report, and the block is
    /// handed out anyway, as the kernel does after reporting.
    #[inline(always)]
    fn check_poison_on_alloc(&self, cpu: usize, f: Frame) {
        #[cfg(feature = "std")]
        if self.cfg.poison {
            self.check_poison_cold(cpu, f);
        }
        #[cfg(not(feature = "std"))]
        let _ = (cpu, f);
    }

    #[cfg(feature = "std")]
    #[cold]
    #[inline(never)]
    fn check_poison_cold(&self, cpu: usize, f: Frame) {
        let Some(r) = &self.region else { return };
        let idx = f.pfn.0 - self.region_base_pfn;
        if !r.check_poison(idx, f.pages(), crate::config::POISON_BYTE) {
            self.cpus[cpu].stats.poison_damaged.add_shared(1);
            let _ = self
                .poison_first_damaged
                .compare_exchange(u64::MAX, f.pfn.0, Relaxed, Relaxed);
        }
    }

    /// [`Allocator::alloc_on`] past the PCP hit: the zonelist walk, then the slow path.
    #[inline(never)]
    fn alloc_walk(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        if order > MAX_ORDER {
            return Err(AllocError::InvalidOrder(order));
        }
        let Some(c) = self.cpus.get(cpu) else {
            return Err(AllocError::InvalidCpu(cpu));
        };
        let node = node.unwrap_or(c.node);
        if node >= self.zonelists.len() {
            return Err(AllocError::InvalidNode(node));
        }
        let mt = gfp.migratetype();
        let mut aflags = WMARK_LOW as u32;
        if gfp.contains(Gfp::KSWAPD) {
            aflags |= ALLOC_KSWAPD;
        }
        if let Some(pfn) = self.get_page_from_freelist(cpu, node, order, mt, gfp, aflags) {
            return Ok(Frame::new(Pfn(pfn), order));
        }
        self.alloc_slowpath(cpu, node, order, mt, gfp)
    }

    /// `get_page_from_freelist` (docs/mechanisms.md §6.4): walk the zonelist; BELOW_HIGH detection,
    /// the watermark test, then `rmqueue`.
    ///
    /// With the zonelist full-zone cache (docs/mechanisms.md §8, 2.6.24 form): once the first zone
    /// failed, the cache is set up (and wiped if older than a second) and zones found
    /// full recently are skipped; every zone that fails is marked full; a walk that found
    /// nothing with the cache walks once more without it. Without the cache the only
    /// cost is one never-taken branch per zone. GFP_THISNODE walks have no cache, as in
    /// the kernel.
    #[inline]
    fn get_page_from_freelist(
        &self,
        cpu: usize,
        node: usize,
        order: u8,
        mt: MigrateType,
        gfp: Gfp,
        aflags: u32,
    ) -> Option<u64> {
        let zl = &self.zonelists[node];
        let mut zlc_active = false;
        let mut did_setup = false;
        let mut second_pass = false;
        loop {
            for (k, &zi) in zl.iter().enumerate() {
                let z = &self.zones[zi];
                if zlc_active && !self.zlc[node].worth_trying(k) {
                    self.cpus[cpu].stats.zonelist_skipped.add_shared(1);
                    continue;
                }
                if k > 0 {
                    if gfp.contains(Gfp::THISNODE) && z.node != node {
                        break;
                    }
                    self.cpus[cpu].stats.zonelist_scanned.add_shared(1);
                } else if second_pass {
                    self.cpus[cpu].stats.zonelist_scanned.add_shared(1);
                }
                let full = match self.try_zone(cpu, z, order, mt, aflags) {
                    ZoneTry::Got(pfn) => {
                        // Reported after the zone's own accesses (the walk read these
                        // lines first): checking the sink here rather than before
                        // `try_zone` keeps the hot path's registers free.
                        if let Some(s) = z.trace.sink() {
                            zone_check_traced(s, node, k, zi);
                        }
                        return Some(pfn);
                    }
                    ZoneTry::Full => true,
                    ZoneTry::Skip => false,
                };
                if let Some(s) = z.trace.sink() {
                    zone_check_traced(s, node, k, zi);
                }
                // From here on this walk failed at least once: the cold part.
                let zlc = self.cfg.zonelist_cache && zl.len() > 1 && !gfp.contains(Gfp::THISNODE);
                if zlc && full {
                    self.zlc[node].mark_full(k);
                    if let Some(s) = z.trace.sink() {
                        s.access(crate::access::Access {
                            line: crate::access::Line::Zonelist {
                                node: node as u16,
                                pos: k as u16,
                            },
                            write: true,
                            locked: false,
                        });
                    }
                }
                if !did_setup {
                    did_setup = true;
                    if zlc {
                        // zlc_setup only after the first zone failed.
                        self.zlc[node].setup(self.platform.now_ns());
                        zlc_active = true;
                    }
                }
            }
            if !zlc_active {
                return None;
            }
            // The second pass ignores the cache (zones may have freed pages since).
            zlc_active = false;
            second_pass = true;
        }
    }

    /// One zone of the zonelist walk: BELOW_HIGH detection, the watermark test, `rmqueue`.
    #[inline(always)]
    fn try_zone(&self, cpu: usize, z: &Zone, order: u8, mt: MigrateType, aflags: u32) -> ZoneTry {
        let fa = self.cfg.highatomic_free_accounting;
        if z.kind == ZoneKind::Movable && mt != MigrateType::Movable {
            return ZoneTry::Skip;
        }
        let mut checked = false;
        if self.cfg.below_high && !z.has_flag(ZONE_BELOW_HIGH) {
            if z.watermark_fast(order, z.wmark(WMARK_HIGH), aflags, fa) {
                checked = true;
            } else {
                z.set_flag(ZONE_BELOW_HIGH);
                self.cpus[cpu].stats.below_high_set.add_shared(1);
            }
        }
        if !checked && aflags & ALLOC_NO_WATERMARKS == 0 {
            let mark = z.wmark((aflags & ALLOC_WMARK_MASK) as usize);
            if !z.watermark_fast(order, mark, aflags, fa) {
                self.wake_kswapd(z);
                self.cpus[cpu].stats.watermark_fail.add_shared(1);
                return ZoneTry::Full;
            }
        }
        if let Some(pfn) = self.rmqueue(cpu, z, order, mt, aflags) {
            if aflags & ALLOC_HIGHATOMIC != 0 && order > 0 {
                self.with_buddy(cpu, z, |b| b.reserve_highatomic(pfn, order));
            }
            return ZoneTry::Got(pfn);
        }
        ZoneTry::Full
    }

    /// Positions of `node`'s zonelist (indices into [`Allocator::zonelist`]) that its
    /// full-zone cache currently marks full (`Config::zonelist_cache`).
    pub fn zonelist_full(&self, node: usize) -> Vec<usize> {
        self.zlc
            .get(node)
            .map_or_else(Vec::new, |c| c.full_positions())
    }

    /// Report every memory access the allocator makes to `sink` from now on (see
    /// [`crate::access`]); the simulator charges them through its cache model. Without a
    /// sink the hot paths pay one never-taken branch.
    pub fn set_access_sink(&mut self, sink: Arc<dyn crate::access::AccessSink>) {
        for z in self.zones.iter_mut() {
            z.trace = crate::access::Tracer::new(sink.clone());
        }
    }

    /// The zones of `node`'s zonelist in fallback order.
    pub fn zonelist(&self, node: usize) -> &[usize] {
        self.zonelists.get(node).map_or(&[], |z| &z[..])
    }

    /// `rmqueue` (docs/mechanisms.md §4.1).
    #[inline]
    fn rmqueue(
        &self,
        cpu: usize,
        z: &Zone,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        if self.pcp_allowed(order) {
            if let Some(p) = self.rmqueue_pcplist(cpu, z, order, mt, aflags) {
                return Some(p);
            }
        }
        let p = self.rmqueue_buddy(cpu, z, order, mt, aflags);
        if z.has_flag(ZONE_BOOSTED_WATERMARK) && aflags & ALLOC_KSWAPD != 0 {
            z.clear_flag(ZONE_BOOSTED_WATERMARK);
            z.set_flag(ZONE_RECLAIM_ACTIVE);
        }
        p
    }

    /// Run `f` on the buddy state of zone `z` with the zone lock held, counting the trip
    /// against `cpu`: the one way the allocator reaches a zone's free lists outside the
    /// pageset refill/drain paths (which keep the pcp lock too, see `pcp.rs`).
    #[inline]
    pub(crate) fn with_buddy<R>(
        &self,
        cpu: usize,
        z: &Zone,
        f: impl FnOnce(&mut Buddy<'_>) -> R,
    ) -> R {
        let mut g = z.lock(cpu, &*self.platform);
        f(&mut g.buddy(&self.meta, &self.cfg))
    }

    /// `rmqueue_buddy` (docs/mechanisms.md §4.5).
    #[cold]
    fn rmqueue_buddy(
        &self,
        cpu: usize,
        z: &Zone,
        order: u8,
        mt: MigrateType,
        aflags: u32,
    ) -> Option<u64> {
        self.with_buddy(cpu, z, |b| {
            let pfn = b.take_direct(order, mt, aflags)?;
            let e = &self.meta[z.meta_index(pfn) as usize];
            e.set_order(order);
            e.set_mt(mt as u8);
            e.set_state(State::Allocated);
            b.rec().moved(1 << order);
            b.st.pgalloc.add(1 << order);
            b.st.alloc_zone.add(1 << order);
            b.st.alloc_direct.add(1);
            Some(pfn)
        })
    }

    /// The model of kswapd: woken for a zone whose free pages fell below the low mark;
    /// RECLAIM_ACTIVE stays set until free pages reach the high mark again.
    #[inline]
    fn wake_kswapd(&self, z: &Zone) {
        if z.free_pages() < z.wmark(WMARK_LOW) {
            z.set_flag(ZONE_RECLAIM_ACTIVE);
        }
    }

    /// kswapd's end of balancing: free pages back at the high mark clears RECLAIM_ACTIVE
    /// and resets the boost.
    #[inline]
    pub(crate) fn reclaim_progress(&self, z: &Zone) {
        if z.has_flag(ZONE_RECLAIM_ACTIVE) && z.free_pages() >= z.wmark_raw(WMARK_HIGH) {
            z.clear_flag(ZONE_RECLAIM_ACTIVE);
            z.set_boost(0);
        }
    }

    /// `__alloc_pages_slowpath`, reduced to what exists without reclaimable memory:
    /// wake kswapd, retry at the min mark with the caller's reserves, then give back
    /// the high-atomic reserve and drain every pageset (as direct reclaim's retry does),
    /// then merge merge-skipped frames for a high-order request, then fail.
    #[cold]
    #[inline(never)]
    fn alloc_slowpath(
        &self,
        cpu: usize,
        node: usize,
        order: u8,
        mt: MigrateType,
        gfp: Gfp,
    ) -> Result<Frame, AllocError> {
        self.cpus[cpu].stats.alloc_slowpath.add_shared(1);
        let mut aflags = WMARK_MIN as u32;
        if gfp.contains(Gfp::KSWAPD) {
            aflags |= ALLOC_KSWAPD;
            for &zi in self.zonelists[node].iter() {
                self.wake_kswapd(&self.zones[zi]);
            }
        }
        if gfp.contains(Gfp::HIGH) {
            aflags |= ALLOC_MIN_RESERVE;
        }
        if gfp.contains(Gfp::ATOMIC) {
            aflags |= ALLOC_NON_BLOCK;
            if order > 0 {
                aflags |= ALLOC_HIGHATOMIC;
            }
        }
        let try_ = |a| self.get_page_from_freelist(cpu, node, order, mt, gfp, a);
        if let Some(p) = try_(aflags) {
            return Ok(Frame::new(Pfn(p), order));
        }
        if !gfp.contains(Gfp::ATOMIC) {
            // Direct reclaim's retry: unreserve high-atomic, drain all pcps.
            for &zi in self.zonelists[node].iter() {
                self.unreserve_highatomic(cpu, &self.zones[zi], mt, false);
            }
            self.drain_all_pages();
            // Reclaim made progress: `zlc_clear_zones_full`.
            if self.cfg.zonelist_cache {
                self.zlc[node].clear();
            }
            if let Some(p) = try_(aflags) {
                return Ok(Frame::new(Pfn(p), order));
            }
            if order > 0 && self.cfg.merge_skip && self.compact_zones(cpu, node) > 0 {
                if let Some(p) = try_(aflags) {
                    self.cpus[cpu].stats.highorder_rescued.add_shared(1);
                    return Ok(Frame::new(Pfn(p), order));
                }
            }
            if !gfp.contains(Gfp::NORETRY) {
                for &zi in self.zonelists[node].iter() {
                    self.unreserve_highatomic(cpu, &self.zones[zi], mt, true);
                }
                if let Some(p) = try_(aflags) {
                    return Ok(Frame::new(Pfn(p), order));
                }
            }
        }
        self.cpus[cpu].stats.alloc_fail.add_shared(1);
        Err(AllocError::OutOfMemory)
    }

    fn unreserve_highatomic(&self, cpu: usize, z: &Zone, mt: MigrateType, force: bool) {
        if z.nr_reserved_highatomic.get() == 0 {
            return;
        }
        let mt = if mt.is_mergeable() {
            mt
        } else {
            MigrateType::Movable
        };
        self.with_buddy(cpu, z, |b| b.unreserve_highatomic(mt, force));
    }

    /// Merge every merge-skipped frame of the node's zones (the on-demand merge of
    /// Aaron Lu's RFC, done where compaction would run). Returns frames merged.
    fn compact_zones(&self, cpu: usize, node: usize) -> u64 {
        let mut n = 0;
        for &zi in self.zonelists[node].iter() {
            n += self.compact_zone(cpu, zi);
        }
        n
    }

    fn compact_zone(&self, cpu: usize, zi: usize) -> u64 {
        let z = &self.zones[zi];
        self.with_buddy(cpu, z, |b| {
            let n = b.merge_skipped();
            b.st.merge_deferred.add(n);
            n
        })
    }

    /// Merge all merge-skipped order-0 frames in every zone (a `compact()` entry point
    /// for merge skipping). Returns frames merged.
    pub fn compact(&self) -> u64 {
        let cpu = self.current_cpu();
        (0..self.zones.len())
            .map(|z| self.compact_zone(cpu, z))
            .sum()
    }

    /// Allocate up to `n` blocks into `out` (`alloc_pages_bulk`): for the cached orders the
    /// pageset is locked once for the whole run. Returns how many were added; fewer than
    /// `n` only when memory ran out. See [`Allocator::free_bulk_on`] for the way back.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 1), Config::default())?;
    /// let mut frames = Vec::new();
    /// assert_eq!(a.alloc_bulk_on(0, 0, Gfp::USER, None, 100, &mut frames)?, 100);
    /// let c = a.counters();
    /// assert_eq!(c.pgalloc, 100);
    /// // Refills took whole batches from the zone: far fewer trips than pages.
    /// assert!(c.pcp_refill < 100 && c.pcp_refill_pages >= 100);
    /// a.free_bulk_on(0, &frames)?;
    /// assert_eq!(a.counters().pgfree, 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alloc_bulk_on(
        &self,
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
        n: usize,
        out: &mut Vec<Frame>,
    ) -> Result<usize, AllocError> {
        if n == 0 {
            return Ok(0);
        }
        let first = self.alloc_on(cpu, order, gfp, node)?;
        out.push(first);
        let mut done = 1;
        if self.pcp_allowed(order) {
            let zi = self
                .zone_of(first.pfn.0)
                .expect("allocated frame in a zone");
            let z = &self.zones[zi];
            let slot = self.slot(cpu, zi);
            let mt = gfp.migratetype();
            let fa = self.cfg.highatomic_free_accounting;
            if let Some(mut pcp) = slot.pcp.try_lock() {
                while done < n && z.watermark_fast(order, z.wmark(WMARK_LOW), 0, fa) {
                    tune::on_alloc(&mut pcp.st, &self.tune);
                    let Some(pfn) =
                        self.take_from_list(cpu, z, slot, &mut pcp, order, mt, ALLOC_KSWAPD)
                    else {
                        break;
                    };
                    let f = Frame::new(Pfn(pfn), order);
                    self.check_poison_on_alloc(cpu, f);
                    out.push(f);
                    done += 1;
                }
            }
        }
        while done < n {
            match self.alloc_on(cpu, order, gfp, node) {
                Ok(f) => {
                    out.push(f);
                    done += 1;
                }
                Err(AllocError::OutOfMemory) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    // ------------------------------------------------------------------ free

    /// Free a block on the current CPU.
    #[inline]
    pub fn free_pages(&self, frame: Frame) -> Result<(), FreeError> {
        self.free_on(self.current_cpu(), frame)
    }

    /// Index of the zone containing `pfn`.
    #[inline]
    pub(crate) fn zone_of(&self, pfn: u64) -> Option<usize> {
        if self.by_pfn.len() == 1 {
            let (s, e, i) = self.by_pfn[0];
            return (pfn >= s && pfn < e).then_some(i);
        }
        let k = self.by_pfn.partition_point(|&(s, _, _)| s <= pfn);
        let (s, e, i) = *self.by_pfn.get(k.checked_sub(1)?)?;
        (pfn >= s && pfn < e).then_some(i)
    }

    /// Check that `frame` is an allocated block of this allocator and take ownership of
    /// it: one compare-and-swap `Allocated -> Freeing` on the head's state, then the order
    /// (stable once the block is ours). `trusted` (only from
    /// [`Allocator::free_on_unchecked`]) skips the state transition and the order check.
    #[inline(always)]
    fn claim_for_free(&self, frame: Frame, trusted: bool) -> Result<usize, FreeError> {
        let pfn = frame.pfn.0;
        if frame.order > MAX_ORDER {
            return Err(FreeError::InvalidOrder(frame.order));
        }
        let zi = self
            .zone_of(pfn)
            .ok_or(FreeError::ForeignFrame(frame.pfn))?;
        let z = &self.zones[zi];
        if trusted {
            // The block the caller vouches for must at least lie aligned inside the zone.
            if pfn & ((1u64 << frame.order) - 1) != 0 || pfn + (1u64 << frame.order) > z.end_pfn {
                return Err(FreeError::InvalidOrder(frame.order));
            }
        } else {
            // An allocated head of this order is aligned and inside its zone.
            let e = &self.meta[z.meta_index(pfn) as usize];
            match e.begin_free() {
                Ok(()) => {}
                Err(State::Reserved) => return Err(FreeError::ForeignFrame(frame.pfn)),
                Err(_) => return Err(FreeError::NotAllocated(frame.pfn)),
            }
            let allocated = e.order();
            if allocated != frame.order {
                // Give the block back to its owner untouched: only this thread moves a
                // `Freeing` head.
                e.set_state(State::Allocated);
                return Err(FreeError::OrderMismatch {
                    pfn: frame.pfn,
                    allocated,
                    given: frame.order,
                });
            }
        }
        #[cfg(feature = "std")]
        if self.cfg.poison {
            if let Some(r) = &self.region {
                r.poison(
                    pfn - self.region_base_pfn,
                    frame.pages(),
                    crate::config::POISON_BYTE,
                );
            }
        }
        Ok(zi)
    }

    /// Free a block as CPU `cpu`. A double free, a frame this allocator did not hand out
    /// (never allocated, in a hole, outside every zone, inside a larger block) or a wrong
    /// order is refused with a [`FreeError`] and changes nothing; of two threads freeing
    /// one block at once exactly one succeeds.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Frame, FreeError, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 2), Config::default())?;
    /// let f = a.alloc_on(0, 1, Gfp::USER, None)?; // two pages
    /// let wrong_order = Frame::new(f.pfn, 0);
    /// assert!(matches!(a.free_on(0, wrong_order), Err(FreeError::OrderMismatch { .. })));
    /// a.free_on(1, f)?; // any CPU may free it: it joins CPU 1's pageset
    /// assert!(matches!(a.free_on(1, f), Err(FreeError::NotAllocated(_))));
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn free_on(&self, cpu: usize, frame: Frame) -> Result<(), FreeError> {
        if cpu >= self.cpus.len() {
            return Err(FreeError::InvalidCpu(cpu));
        }
        let zi = self.claim_for_free(frame, false)?;
        self.free_unref_page(cpu, &self.zones[zi], frame.pfn.0, frame.order);
        Ok(())
    }

    /// [`Allocator::free_on`] without the ownership check (the compare-and-swap on the
    /// frame's state and the order check), for callers that track ownership themselves,
    /// as a kernel trusts its own callers. Still refused: a CPU, order or frame outside
    /// this allocator, and a misaligned frame.
    ///
    /// # Safety
    /// `frame` must be a block this allocator handed out with exactly this order and not
    /// freed since, and no other thread may free it concurrently. Otherwise the
    /// allocator's lists are corrupted: the same frames are handed out to several owners
    /// (aliasing the memory behind `Allocator::frame_ptr`), a pageset list can loop on
    /// itself so that allocation never runs out, and `validate()` fails.
    #[inline]
    pub unsafe fn free_on_unchecked(&self, cpu: usize, frame: Frame) -> Result<(), FreeError> {
        if cpu >= self.cpus.len() {
            return Err(FreeError::InvalidCpu(cpu));
        }
        let zi = self.claim_for_free(frame, true)?;
        self.free_unref_page(cpu, &self.zones[zi], frame.pfn.0, frame.order);
        Ok(())
    }

    /// Free to the buddy lists directly (`free_one_page`).
    #[cold]
    pub(crate) fn free_to_zone(&self, cpu: usize, z: &Zone, pfn: u64, order: u8) {
        self.with_buddy(cpu, z, |b| {
            self.meta[z.meta_index(pfn) as usize].set_state(State::Tail);
            b.free_pages(pfn, order);
            b.rec().moved(1 << order);
            b.st.pgfree.add(1 << order);
            b.st.free_direct.add(1);
        });
        self.reclaim_progress(z);
    }

    /// Free many blocks (`free_unref_folios`): the pageset stays locked across consecutive
    /// frames of one zone. Stops at the first refused frame: the frames before it are
    /// freed, the ones from it on are not.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// // Frees are checked in every build: a double free is refused.
    /// let a = Allocator::new(&Layout::single(16384, 1), Config::default())?;
    /// let mut frames = Vec::new();
    /// a.alloc_bulk_on(0, 0, Gfp::USER, None, 3, &mut frames)?;
    /// frames.insert(1, frames[0]); // the same frame twice
    /// let e = a.free_bulk_on(0, &frames).unwrap_err();
    /// assert_eq!(e.index, 1); // the first copy was freed, the rest was not
    /// a.free_bulk_on(0, &frames[2..])?;
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn free_bulk_on(&self, cpu: usize, frames: &[Frame]) -> Result<(), BulkFreeError> {
        if cpu >= self.cpus.len() && !frames.is_empty() {
            return Err(BulkFreeError {
                index: 0,
                error: FreeError::InvalidCpu(cpu),
            });
        }
        let mut held: Option<(usize, crate::sync::SpinGuard<'_, crate::pcp::Pcp>)> = None;
        for (index, f) in frames.iter().enumerate() {
            let zi = self
                .claim_for_free(*f, false)
                .map_err(|error| BulkFreeError { index, error })?;
            let z = &self.zones[zi];
            let slot = self.slot(cpu, zi);
            let pfn = f.pfn.0;
            let Some((mt, pb)) = crate::pcp::pcp_free_types(slot, z, pfn, f.order) else {
                held = None;
                self.free_to_zone(cpu, z, pfn, f.order);
                continue;
            };
            if held.as_ref().is_none_or(|(hz, _)| *hz != zi) {
                drop(held.take());
                held = slot.pcp.try_lock().map(|g| (zi, g));
            }
            match held.as_mut() {
                Some((_, pcp)) => self.commit_free(cpu, z, slot, pcp, pfn, f.order, mt, pb),
                None => self.free_to_zone(cpu, z, pfn, f.order),
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ housekeeping

    /// One decay tick for `cpu` (`vmstat_update` → `refresh_cpu_vm_stats`): decay each of
    /// its pagesets' `high` and return the excess, drain remote-node pagesets idle for
    /// three ticks. Returns true while work remains. The std ticker calls this for every
    /// online CPU once per [`Config::tick_interval_ms`]; no_std and simulated users call it.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// // 1 GiB, THP off (a smaller min_free_kbytes, so a smaller high_min).
    /// let a = Allocator::new(&Layout::single(262_144, 1), "linux-6.12,thp=off".parse()?)?;
    /// let mut frames = Vec::new();
    /// a.alloc_bulk_on(0, 0, Gfp::USER, None, 4000, &mut frames)?;
    /// a.free_bulk_on(0, &frames)?; // a burst of frees: high grew, pages stay cached
    /// let busy = a.pcp_info(0, 0).unwrap();
    /// assert!(busy.high > busy.high_min && busy.count > busy.high_min);
    /// // Idle from now on: each tick takes an eighth off high and returns the excess.
    /// let mut ticks = 0;
    /// while a.tick(0) {
    ///     ticks += 1;
    /// }
    /// let idle = a.pcp_info(0, 0).unwrap();
    /// assert!(ticks > 5);
    /// assert_eq!((idle.high, idle.count), (idle.high_min, idle.high_min));
    /// assert!(a.counters().decay_drain >= 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tick(&self, cpu: usize) -> bool {
        let mut todo = false;
        if cpu >= self.cpus.len() {
            return false;
        }
        for z in self.zones.iter() {
            todo |= self.tick_zone(cpu, z);
        }
        todo
    }

    /// [`Allocator::tick`] for every online CPU.
    pub fn tick_all(&self) -> bool {
        let mut todo = false;
        for c in 0..self.cpus.len() {
            if self.cpus[c].online.load(Relaxed) {
                todo |= self.tick(c);
            }
        }
        todo
    }

    /// `drain_pages(cpu)`: return every page cached on `cpu` to the zones.
    pub fn drain_cpu(&self, cpu: usize) {
        if cpu >= self.cpus.len() {
            return;
        }
        for z in self.zones.iter() {
            self.drain_pages_zone(cpu, z);
        }
    }

    /// `drain_all_pages(NULL)`: drain every CPU's pagesets that hold pages, from the
    /// calling thread (no IPIs, as in 6.x). Serialized.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 2), Config::default())?;
    /// for cpu in 0..2 {
    ///     let f = a.alloc_on(cpu, 0, Gfp::USER, None)?;
    ///     a.free_on(cpu, f)?;
    /// }
    /// assert!(a.nr_pcp_pages() > 0);
    /// a.drain_all_pages();
    /// assert_eq!(a.nr_pcp_pages(), 0);
    /// assert_eq!(a.nr_free_pages(), a.managed_pages());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain_all_pages(&self) {
        let _g = self.drain_lock.lock();
        for cpu in 0..self.cpus.len() {
            for z in self.zones.iter() {
                if self.slot(cpu, z.idx).pcp.lock().st.count != 0 {
                    self.drain_pages_zone(cpu, z);
                }
            }
        }
    }

    /// Take `cpu` offline (`page_alloc_cpu_dead`): drain its pagesets, give it the boot
    /// pageset (nothing cached) and resize the others (fewer CPUs share the node).
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// let f = a.alloc_on(1, 0, Gfp::USER, None)?; // CPU 1 now caches a batch
    /// let shared = a.pcp_info(0, 0).unwrap().high_min;
    /// a.cpu_offline(1)?;
    /// let off = a.pcp_info(1, 0).unwrap();
    /// assert_eq!((off.count, off.high_max, off.batch), (0, 0, 1)); // the boot pageset
    /// assert!(a.pcp_info(0, 0).unwrap().high_min > shared); // one CPU left to share the node
    /// a.free_on(0, f)?;
    /// a.cpu_online(1)?;
    /// assert_eq!(a.pcp_info(1, 0).unwrap().high_min, shared);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cpu_offline(&self, cpu: usize) -> Result<(), AllocError> {
        let c = self.cpus.get(cpu).ok_or(AllocError::InvalidCpu(cpu))?;
        c.online.store(false, Relaxed);
        self.update_all_pcp_sizes(false);
        self.drain_cpu(cpu);
        Ok(())
    }

    /// Bring `cpu` online (`page_alloc_cpu_online`): size its pagesets.
    pub fn cpu_online(&self, cpu: usize) -> Result<(), AllocError> {
        let c = self.cpus.get(cpu).ok_or(AllocError::InvalidCpu(cpu))?;
        c.online.store(true, Relaxed);
        self.update_all_pcp_sizes(false);
        // A CPU coming back starts from high_min.
        for z in self.zones.iter() {
            let mut p = self.slot(cpu, z.idx).pcp.lock();
            p.st.high = p.st.high_min;
        }
        Ok(())
    }

    /// `vm.percpu_pagelist_high_fraction`: 0 (auto-tuning) or ≥ 8 (high =
    /// managed/fraction per CPU, tuning off). Anything else is refused and nothing changes.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// a.set_high_fraction(64)?;
    /// let p = a.pcp_info(0, 0).unwrap();
    /// assert_eq!((p.high_min, p.high_max), (262_144 / 64 / 2, 262_144 / 64 / 2));
    /// assert!(a.set_high_fraction(4).is_err()); // must be 0 or >= 8
    /// assert_eq!(a.high_fraction(), 64);
    /// a.set_high_fraction(0)?; // auto-tuning again
    /// assert!(a.pcp_info(0, 0).unwrap().high_min < a.pcp_info(0, 0).unwrap().high_max);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_high_fraction(&self, fraction: u32) -> Result<(), ConfigError> {
        crate::config::high_fraction_rule(&fraction).map_err(|why| ConfigError::Invalid {
            key: "high_fraction",
            why,
        })?;
        self.high_fraction.store(fraction, Relaxed);
        self.update_all_pcp_sizes(false);
        Ok(())
    }

    /// Current `percpu_pagelist_high_fraction`.
    pub fn high_fraction(&self) -> u32 {
        self.high_fraction.load(Relaxed)
    }

    // ------------------------------------------------------------------ inspection

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    /// The platform seam.
    pub fn platform(&self) -> &Arc<dyn Platform> {
        &self.platform
    }
    /// Number of CPUs (online or not).
    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }
    /// Number of zones.
    pub fn nr_zones(&self) -> usize {
        self.zones.len()
    }
    /// Number of nodes.
    pub fn nr_nodes(&self) -> usize {
        self.zonelists.len()
    }
    /// Zone indices of a node (empty for a node that does not exist, as
    /// [`Allocator::zonelist`]).
    pub fn node_zones(&self, node: usize) -> &[usize] {
        self.node_zones.get(node).map_or(&[], |z| &z[..])
    }
    /// Node of a CPU; `None` for a CPU that does not exist.
    pub fn cpu_node(&self, cpu: usize) -> Option<usize> {
        self.cpus.get(cpu).map(|c| c.node)
    }
    /// Zone index holding `pfn`.
    pub fn zone_of_pfn(&self, pfn: Pfn) -> Option<usize> {
        self.zone_of(pfn.0)
    }
    /// Pages managed by all zones.
    pub fn managed_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.managed).sum()
    }
    /// Free pages in the buddy lists of all zones (NR_FREE_PAGES; pcp pages excluded).
    pub fn nr_free_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.free_pages()).sum()
    }
    /// Pages cached in all pagesets (`free_pcp`).
    pub fn nr_pcp_pages(&self) -> u64 {
        (0..self.cpus.len())
            .flat_map(|c| (0..self.zones.len()).map(move |z| (c, z)))
            .map(|(c, z)| self.slot(c, z).pcp.lock().st.count.max(0) as u64)
            .sum()
    }

    /// All counters, summed over CPUs and zones. [`Counters::since`] gives the events of
    /// an interval; [`Allocator::vmstat`] prints them.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// let start = a.counters();
    /// let f = a.alloc_on(0, 0, Gfp::USER, None)?;
    /// let d = a.counters().since(&start);
    /// // One page handed out; one refill brought a batch from the zone under its lock.
    /// assert_eq!((d.pgalloc, d.pcp_refill, d.alloc_zone), (1, 1, 63));
    /// assert_eq!(d.get("zone_lock"), Some(1));
    /// a.free_on(0, f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for s in self.pcps.iter() {
            s.stats.accumulate(&mut c);
        }
        for z in self.zones.iter() {
            for s in z.cpu_stats.iter() {
                s.accumulate(&mut c);
            }
        }
        for cpu in self.cpus.iter() {
            cpu.stats.accumulate(&mut c);
        }
        c
    }

    /// Counters of one CPU (its pagesets, its zone-lock trips, its lock-free events);
    /// `None` for a CPU that does not exist.
    pub fn cpu_counters(&self, cpu: usize) -> Option<Counters> {
        let info = self.cpus.get(cpu)?;
        let mut c = Counters::default();
        for z in 0..self.zones.len() {
            self.slot(cpu, z).stats.accumulate(&mut c);
            self.zones[z].cpu_stats[cpu].accumulate(&mut c);
        }
        info.stats.accumulate(&mut c);
        Some(c)
    }

    /// Counters of one CPU in one zone only: its pageset there and its zone-lock trips
    /// there. Two cells per counter, cheap enough to read around every operation (the
    /// simulator takes per-operation deltas with it); see [`Allocator::cpu_counters`].
    /// `None` for a CPU or zone that does not exist.
    #[inline]
    pub fn cpu_zone_counters(&self, cpu: usize, zone: usize) -> Option<Counters> {
        let slot = self.checked_slot(cpu, zone)?;
        let mut c = Counters::default();
        slot.stats.accumulate(&mut c);
        self.zones[zone].cpu_stats[cpu].accumulate(&mut c);
        Some(c)
    }

    /// The pageset of (`cpu`, `zone`), if both exist (a bad zone index must not reach
    /// another CPU's pageset).
    #[inline]
    fn checked_slot(&self, cpu: usize, zone: usize) -> Option<&PcpSlot> {
        (cpu < self.cpus.len() && zone < self.zones.len()).then(|| self.slot(cpu, zone))
    }

    /// Zone-lock acquisitions by `cpu` in all zones: the `zone_lock` counter of
    /// [`Allocator::cpu_counters`] alone, one cell per zone, cheap enough to read around
    /// every operation to tell a pcp hit from a zone-lock trip (the simulator does).
    pub fn cpu_zone_lock_count(&self, cpu: usize) -> u64 {
        self.zones
            .iter()
            .map(|z| z.cpu_stats[cpu].zone_lock.get())
            .sum()
    }

    /// Reset every counter (not atomic with concurrent work).
    pub fn reset_counters(&self) {
        for s in self.pcps.iter() {
            s.stats.reset();
        }
        for z in self.zones.iter() {
            z.cpu_stats.iter().for_each(Stats::reset);
        }
        self.cpus.iter().for_each(|c| c.stats.reset());
    }

    /// One pageset's state (`/proc/zoneinfo`'s pageset lines plus the tuning fields).
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?; // 1 GiB
    /// let p = a.pcp_info(0, 0).unwrap();
    /// assert_eq!((p.count, p.batch), (0, 63)); // zone_batchsize of a 1 GiB zone
    /// assert!(p.high_min < p.high_max); // auto-tuning on
    ///
    /// let f = a.alloc_on(0, 0, Gfp::USER, None)?;
    /// let p = a.pcp_info(0, 0).unwrap();
    /// assert_eq!(p.count, 62); // one batch refilled, one page handed out
    /// assert_eq!(p.high, p.high_min + 63); // nr_pcp_alloc raised high by the refill
    /// assert_eq!(p.alloc_factor, 1); // and the next order-0 refill doubles
    /// a.free_on(0, f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pcp_info(&self, cpu: usize, zone: usize) -> Option<PcpInfo> {
        let p = self.checked_slot(cpu, zone)?.pcp.lock();
        Some(PcpInfo {
            cpu,
            zone,
            count: p.st.count,
            high: p.st.high,
            batch: p.st.batch,
            high_min: p.st.high_min,
            high_max: p.st.high_max,
            flags: p.st.flags,
            alloc_factor: p.st.alloc_factor,
            free_factor: p.st.free_factor,
            free_count: p.st.free_count,
        })
    }

    /// One zone's state: free pages, watermarks, free blocks per order, flags.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout, MAX_ORDER};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// let z = a.zone_info(0).unwrap();
    /// assert_eq!((z.name, z.managed, z.free), ("Normal", 262_144, 262_144));
    /// let [min, low, high, promo] = z.wmark;
    /// assert!(min < low && low < high && high < promo);
    /// // A fresh zone is all order-10 blocks.
    /// assert_eq!(z.nr_free[MAX_ORDER as usize], 262_144 >> MAX_ORDER);
    /// assert!(!z.below_high && !z.reclaim_active);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn zone_info(&self, zone: usize) -> Option<ZoneInfo> {
        let z = self.zones.get(zone)?;
        let nr_free = {
            let g = z.lock_inspect();
            g.free.nr_free
        };
        Some(ZoneInfo {
            zone,
            node: z.node,
            name: z.kind.name(),
            free: z.free_pages(),
            wmark: [
                z.wmark_raw(WMARK_MIN),
                z.wmark_raw(WMARK_LOW),
                z.wmark_raw(WMARK_HIGH),
                z.wmark_raw(WMARK_PROMO),
            ],
            boost: z.boost(),
            spanned: z.end_pfn - z.start_pfn,
            managed: z.managed,
            nr_free,
            below_high: z.has_flag(ZONE_BELOW_HIGH),
            reclaim_active: z.has_flag(ZONE_RECLAIM_ACTIVE),
            reserved_highatomic: z.nr_reserved_highatomic.get(),
        })
    }

    /// The pageblock type of the pageblock holding `pfn`.
    pub fn pageblock_type(&self, pfn: Pfn) -> Option<MigrateType> {
        let zi = self.zone_of(pfn.0)?;
        Some(self.zones[zi].pageblock_mt(pfn.0))
    }

    /// Retag the pageblock holding `pfn` (`set_pageblock_migratetype` with
    /// `move_freepages_block`): its free blocks move to the new type's lists. Used for
    /// isolation (type [`MigrateType::Isolate`]) and by tests of pageblock changes.
    pub fn set_pageblock_type(&self, pfn: Pfn, mt: MigrateType) -> Option<u64> {
        let zi = self.zone_of(pfn.0)?;
        let z = &self.zones[zi];
        let cpu = self.current_cpu();
        self.with_buddy(cpu, z, |b| b.move_freepages_block(pfn.0, mt))
    }

    /// Raise (`true`) or lower the merge-skipping disable depth of every zone: callers
    /// that need contiguity (contiguous allocation, offlining) turn skipping off while
    /// they run (Appendix A's "cluster disable depth"). Raising it also merges the frames
    /// skipped so far, so that the caller sees fully merged free lists. Lowering below
    /// zero is ignored.
    pub fn merge_skip_disable(&self, disable: bool) {
        for z in self.zones.iter() {
            if disable {
                z.merge_disable.fetch_add(1, Relaxed);
            } else {
                let _ = z
                    .merge_disable
                    .fetch_update(Relaxed, Relaxed, |d| d.checked_sub(1));
            }
        }
        if disable {
            self.compact();
        }
    }

    /// The free buddy block holding `pfn`: its head, order and the migratetype of the
    /// free list it is on (`None` if the frame is not in a free block of the buddy
    /// lists: allocated, on a pageset, or in a hole). With clustered refill, a frame a
    /// concurrent refill has just cut may still read as free: an inspection aid.
    pub fn free_block_of(&self, pfn: Pfn) -> Option<(Pfn, u8, MigrateType)> {
        let zi = self.zone_of(pfn.0)?;
        let z = &self.zones[zi];
        let _g = z.lock_inspect();
        for o in 0..=MAX_ORDER {
            let head = pfn.0 & !((1u64 << o) - 1);
            if !z.contains(head) {
                break;
            }
            // The first aligned-down frame that heads a block heads the block holding pfn.
            let e = &self.meta[z.meta_index(head) as usize];
            match e.state() {
                State::Tail => continue,
                State::Buddy if pfn.0 < head + (1u64 << e.order()) => {
                    return Some((Pfn(head), e.order(), MigrateType::from_u8(e.mt())?));
                }
                _ => return None,
            }
        }
        None
    }

    /// Address of a block in the memory backing (allocators built with
    /// [`Allocator::with_memory`] only): `None` unless all 2^order frames of the block
    /// lie inside the mapping, so the pointer is valid for `frame.pages() * PAGE_SIZE`
    /// bytes.
    #[cfg(feature = "std")]
    pub fn frame_ptr(&self, frame: Frame) -> Option<core::ptr::NonNull<u8>> {
        let r = self.region.as_ref()?;
        if frame.order > MAX_ORDER {
            return None;
        }
        let idx = frame.pfn.0.checked_sub(self.region_base_pfn)?;
        // The last frame of the block must be inside the mapping too.
        r.frame_ptr(idx.checked_add(frame.pages() - 1)?)?;
        core::ptr::NonNull::new(r.frame_ptr(idx)?)
    }

    /// The frame holding an address of the memory backing.
    #[cfg(feature = "std")]
    pub fn pfn_of_ptr(&self, p: *const u8) -> Option<Pfn> {
        let r = self.region.as_ref()?;
        let off = (p as usize).checked_sub(r.as_ptr() as usize)?;
        (off < r.len()).then(|| Pfn(self.region_base_pfn + (off / crate::frame::PAGE_SIZE) as u64))
    }
}

/// One zone of a zonelist walk, with a sink installed: the zonelist entry (and its
/// full-zone cache bit), and the zone's watermark and free-page lines the watermark test
/// reads (`zone_watermark_fast`).
#[cold]
#[inline(never)]
fn zone_check_traced(s: &dyn crate::access::AccessSink, node: usize, pos: usize, zone: usize) {
    use crate::access::{Access, Line, ZoneLine};
    let locked = false;
    s.access(Access {
        line: Line::Zonelist {
            node: node as u16,
            pos: pos as u16,
        },
        write: false,
        locked,
    });
    for line in [ZoneLine::Watermarks, ZoneLine::Counters] {
        s.access(Access {
            line: Line::Zone {
                zone: zone as u16,
                line,
            },
            write: false,
            locked,
        });
    }
}
