//! Construction: `Allocator::new` and friends, the build itself, the watermarks.

use super::{try_boxed, Allocator, BuildError, CpuInfo, MetaStore};
use crate::buddy::Buddy;
use crate::config::{Config, ConfigError};
use crate::frame::{MigrateType, MAX_ORDER};
use crate::memmap::{PageMeta, State};
use crate::pcp::PcpSlot;
use crate::platform::Platform;
use crate::stats::Stats;
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use crate::sync::SpinLock;
use crate::topology::Layout;
use crate::tune::Tune;
use crate::zone::*;
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// `n` fresh metadata entries ([`PageMeta::new`]) from zeroed memory: a fresh entry is
/// all zero bytes, and `alloc_zeroed` of a large block is a fresh mapping that the OS
/// backs only where it is written (`calloc`), so building touches only the entries of
/// the blocks put on the free lists (one head per 4 MiB block, every fourth 4 KiB page
/// of the array) and a run pays only for the frames it uses; writing every entry would
/// fault in 16 bytes per frame of the span (2 GiB for 512 GiB) before the first
/// allocation. The host platform has the array faulted in afterwards
/// ([`Platform::prefault_metadata`], [`prefault`]) so that real threads' first
/// allocations take no faults; the simulator's platform keeps it lazy.
#[cfg(not(loom))]
fn fresh_metadata(n: usize) -> Result<Box<[PageMeta]>, BuildError> {
    let oom = || BuildError::OutOfMemory {
        what: "frame metadata",
        bytes: n.saturating_mul(core::mem::size_of::<PageMeta>()),
    };
    if n == 0 {
        return Ok(Box::new([]));
    }
    let layout = core::alloc::Layout::array::<PageMeta>(n).map_err(|_| oom())?;
    // SAFETY: `layout` has a non-zero size (n > 0 entries of 16 bytes). No lock: the
    // memory is not shared with anyone yet.
    let p = unsafe { alloc::alloc::alloc_zeroed(layout) }.cast::<PageMeta>();
    if p.is_null() {
        return Err(oom());
    }
    // SAFETY: `p` is a fresh, exclusively owned allocation from the global allocator
    // with the layout of `[PageMeta; n]`, which is what the box frees it with; it is
    // aligned for `PageMeta` and all zero bytes, which is a valid `PageMeta` (integer
    // atomics only) equal to `PageMeta::new()` (test `a_fresh_entry_is_all_zero_bytes`).
    // No lock: nobody else holds a pointer to it.
    Ok(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, n)) })
}

/// Loom's atomics are not plain integers: build every entry.
#[cfg(loom)]
fn fresh_metadata(n: usize) -> Result<Box<[PageMeta]>, BuildError> {
    try_boxed("frame metadata", n, |_| PageMeta::new())
}

/// Fault in every 4 KiB of `meta` now ([`Platform::prefault_metadata`]): one volatile
/// write of a zero byte per 4 KiB, and one to the last byte, so that every host page the
/// array spans, whatever its alignment, is written once. Zero is what every byte of a
/// fresh entry already holds, so the entries do not change. 4 KiB is the smallest host
/// page; a host with larger pages has each of them written more than once, which costs
/// one fault per page all the same.
#[cfg(not(loom))]
fn prefault(meta: &mut [PageMeta]) {
    const STRIDE: usize = 4096;
    let bytes = core::mem::size_of_val(meta);
    let p = meta.as_mut_ptr().cast::<u8>();
    for off in (0..bytes).step_by(STRIDE).chain(bytes.checked_sub(1)) {
        // SAFETY: `off < bytes`, so `p + off` is inside the array, which the caller owns
        // exclusively (`&mut`; no lock, nobody else holds a pointer to it yet). Every
        // field of a `PageMeta` is an integer atomic whose fresh value is all zero bytes
        // (test `a_fresh_entry_is_all_zero_bytes`), so writing a zero byte into one
        // leaves it a valid, unchanged value. Volatile so the store is not elided as
        // redundant on memory the compiler may know to be zeroed.
        unsafe { p.add(off).write_volatile(0) };
    }
}

/// Loom's entries are each built by [`fresh_metadata`], so every page is already
/// written (and loom's atomics are not plain integers to write bytes into).
#[cfg(loom)]
fn prefault(_meta: &mut [PageMeta]) {}

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
    /// The metadata it allocates has one unused entry after each 512 frames of a zone
    /// (513 entries, 16 bytes each, per 512 frames; none for a layout of nearly 2^32
    /// frames, whose indices would not fit), which spreads the entries of order-9 block
    /// heads over the cache sets; a caller-supplied store
    /// ([`Allocator::with_metadata`]) holds exactly [`Layout::spanned_pages`] entries.
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
        // Spaced: one unused entry after each 512 frames of a zone (`Zone::meta_index`),
        // unless the indices would then not fit in a `u32` below `NIL`.
        let entries = |spaced| {
            layout
                .zones()
                .map(|(_, z)| Zone::meta_entries(z.pages, spaced))
                .fold(0, u64::saturating_add)
        };
        let spaced = entries(true) < u64::from(crate::memmap::NIL);
        let mut meta = fresh_metadata(entries(spaced) as usize)?;
        if platform.prefault_metadata() {
            prefault(&mut meta);
        }
        Self::build(layout, config, platform, MetaStore::Owned(meta), spaced)
    }

    /// An allocator using a caller-supplied metadata buffer of at least
    /// `layout.metadata_size()` bytes (`layout.spanned_pages()` entries), e.g. a static
    /// array in a kernel. The buffer's previous contents are overwritten. Works without
    /// the `std` feature; a buffer too small is refused with [`BuildError::Metadata`].
    ///
    /// The allocator takes the buffer for good (`&'static mut`): the entries are its
    /// free lists' links and its frames' states, and a second allocator (or anyone else)
    /// writing them would hand one block out twice and send the unchecked reads of the
    /// hot path past the end of the smaller store.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pagealloc::{Allocator, BuildError, Config, Gfp, Layout, ManualPlatform, PageMeta};
    ///
    /// // One entry per spanned frame; a kernel would put this in its image or its early
    /// // boot memory instead (see the crate's no_std example).
    /// let meta: &'static mut [PageMeta] = Vec::from_iter((0..4096).map(|_| PageMeta::new())).leak();
    /// let layout = Layout::single(4096, 1);
    /// assert!(layout.metadata_size() <= core::mem::size_of_val(meta));
    /// let hooks = Arc::new(ManualPlatform::new());
    /// let a = Allocator::with_metadata(&layout, Config::default(), hooks.clone(), meta)?;
    /// let f = a.alloc_pages(3, Gfp::KERNEL)?;
    /// a.free_pages(f)?;
    ///
    /// let small: &'static mut [PageMeta] = Vec::from_iter((0..16).map(|_| PageMeta::new())).leak();
    /// let e = Allocator::with_metadata(&layout, Config::default(), hooks, small).unwrap_err();
    /// assert!(matches!(e, BuildError::Metadata(4096)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// One buffer cannot be handed to two allocators (it is moved into the first):
    ///
    /// ```compile_fail,E0382
    /// use std::sync::Arc;
    /// use pagealloc::{Allocator, Config, Layout, ManualPlatform, PageMeta};
    ///
    /// let meta: &'static mut [PageMeta] = Vec::from_iter((0..4096).map(|_| PageMeta::new())).leak();
    /// let layout = Layout::single(4096, 1);
    /// let hooks = Arc::new(ManualPlatform::new());
    /// let a = Allocator::with_metadata(&layout, Config::default(), hooks.clone(), meta);
    /// let b = Allocator::with_metadata(&layout, Config::default(), hooks, meta);
    /// ```
    ///
    /// and a shared buffer, which others could still read and write, is refused:
    ///
    /// ```compile_fail,E0308
    /// use std::sync::Arc;
    /// use pagealloc::{Allocator, Config, Layout, ManualPlatform, PageMeta};
    ///
    /// static META: [PageMeta; 4096] = [const { PageMeta::new() }; 4096];
    /// let layout = Layout::single(4096, 1);
    /// let a = Allocator::with_metadata(&layout, Config::default(), Arc::new(ManualPlatform::new()), &META);
    /// ```
    pub fn with_metadata(
        layout: &Layout,
        config: Config,
        platform: Arc<dyn Platform>,
        meta: &'static mut [PageMeta],
    ) -> Result<Allocator, BuildError> {
        layout.validate()?;
        let n = layout.spanned_pages() as usize;
        if meta.len() < n {
            return Err(BuildError::Metadata(n));
        }
        let meta = &mut meta[..n];
        for e in meta.iter_mut() {
            e.set_state(State::Tail);
            e.set_order(0);
        }
        // The store holds exactly the `n` entries the build indexes (`Zone::meta_entries`
        // of each zone, unspaced, summed: `spanned_pages`), and nothing else can reach
        // them: the exclusive borrow was moved in and lives on only as this shared one.
        let meta: &'static [PageMeta] = meta;
        Self::build(layout, config, platform, MetaStore::Borrowed(meta), false)
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
        spaced: bool,
    ) -> Result<Allocator, BuildError> {
        cfg.validate()?;
        crate::pcp_buddy::check_config(&cfg).map_err(|why| {
            BuildError::Config(ConfigError::Invalid {
                key: "pcp_buddy",
                why,
            })
        })?;
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
            let span = ZoneSpan {
                idx,
                node,
                kind: zl.kind,
                start_pfn: zl.start_pfn,
                end_pfn: zl.end_pfn(),
                managed: zl.managed(),
            };
            let mut z = Zone::new(span, base, spaced, ncpus, cfg.lock_stat)?;
            if cfg.own_bitmap {
                z.enable_own_bitmap()?;
            }
            zones.push(z);
            kinds.push((node, zl.kind));
            node_zones[node].push(idx);
            base += Zone::meta_entries(zl.pages, spaced) as u32;
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
        let pb_owners = crate::pcp_buddy::Owners::new(&zones, cfg.pcp_buddy);
        let a = Allocator {
            pb_owners,
            ring_hits: cfg.own_bitmap,
            poison_hits: cfg.poison,
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
            let mut b = Buddy::<Reported>::new(z, &mut g, &z.cpu_stats[0], &a.meta, &a.cfg);
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
        for (z, r) in self
            .zones
            .iter()
            .zip(crate::zone::lowmem_reserves(&self.zones))
        {
            z.set_lowmem_reserve(r);
        }
    }
}
