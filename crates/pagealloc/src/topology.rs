//! The machine the allocator manages: NUMA nodes, their zones (PFN ranges, with holes)
//! and CPUs (with their node and their share of the last-level cache).
//!
//! A [`Layout`] is plain data. With the `std` feature it can be read from the host
//! (`Layout::from_host`); the simulator describes large machines with the same type.

#[cfg(feature = "std")]
use crate::frame::PAGE_SIZE;
use alloc::vec::Vec;
use core::fmt;

/// Kind of a zone, as in `/proc/zoneinfo`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub enum ZoneKind {
    /// ZONE_DMA (< 16 MiB on x86).
    Dma,
    /// ZONE_DMA32 (< 4 GiB).
    Dma32,
    /// ZONE_NORMAL.
    Normal,
    /// ZONE_MOVABLE: only movable allocations; watermarks from managed/1024.
    Movable,
}

impl ZoneKind {
    /// Name as in `/proc/zoneinfo`.
    pub const fn name(self) -> &'static str {
        match self {
            ZoneKind::Dma => "DMA",
            ZoneKind::Dma32 => "DMA32",
            ZoneKind::Normal => "Normal",
            ZoneKind::Movable => "Movable",
        }
    }
}

/// One zone: frames `[start_pfn, start_pfn + pages)` minus the holes.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ZoneLayout {
    /// Kind.
    pub kind: ZoneKind,
    /// First frame of the span.
    pub start_pfn: u64,
    /// Frames spanned (holes included).
    pub pages: u64,
    /// `[start, end)` PFN ranges inside the span that are not memory.
    pub holes: Vec<(u64, u64)>,
}

impl ZoneLayout {
    /// A zone without holes.
    pub fn new(kind: ZoneKind, start_pfn: u64, pages: u64) -> Self {
        ZoneLayout {
            kind,
            start_pfn,
            pages,
            holes: Vec::new(),
        }
    }
    /// Frames that are memory (spanned minus holes). Exact for a layout that passes
    /// [`Layout::validate`] (holes inside the zone, not overlapping); never panics.
    pub fn managed(&self) -> u64 {
        let end = self.end_pfn();
        let holes = self
            .holes
            .iter()
            .map(|&(s, e)| e.min(end).saturating_sub(s.max(self.start_pfn)))
            .fold(0u64, u64::saturating_add);
        self.pages.saturating_sub(holes)
    }
    /// One past the last frame (saturating: [`Layout::validate`] refuses a zone that
    /// ends past [`MAX_PFN`]).
    pub fn end_pfn(&self) -> u64 {
        self.start_pfn.saturating_add(self.pages)
    }
}

/// One NUMA node.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NodeLayout {
    /// Zones of the node, lowest first (DMA before Normal).
    pub zones: Vec<ZoneLayout>,
    /// SLIT distance to every node (10 = local); empty: 10 to itself, 20 to the others.
    pub distance: Vec<u32>,
}

/// One CPU.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CpuLayout {
    /// Node the CPU belongs to.
    pub node: usize,
    /// This CPU's share of its last-level data cache, in bytes (0: unknown).
    pub llc_slice_bytes: u64,
    /// Online at start.
    pub online: bool,
}

/// The whole machine.
///
/// Built by hand, a layout describes real RAM: a kernel gives the zones its firmware's
/// memory map, with real PFNs and the holes inside them.
///
/// ```
/// use pagealloc::{Allocator, Config, CpuLayout, Gfp, Layout, NodeLayout, ZoneKind, ZoneLayout};
///
/// // DMA32 from 16 MiB to 4 GiB with the PCI hole [3 GiB, 3.5 GiB), then 4 GiB of Normal.
/// let mut dma32 = ZoneLayout::new(ZoneKind::Dma32, 0x1000, 0x10_0000 - 0x1000);
/// dma32.holes.push((0xc_0000, 0xe_0000));
/// let normal = ZoneLayout::new(ZoneKind::Normal, 0x10_0000, 0x10_0000);
/// let cpu = CpuLayout { node: 0, llc_slice_bytes: 2 << 20, online: true };
/// let layout = Layout {
///     nodes: vec![NodeLayout { zones: vec![dma32, normal], distance: vec![] }],
///     cpus: vec![cpu; 4],
/// };
/// layout.validate()?;
/// assert_eq!(layout.managed_pages(), layout.spanned_pages() - 0x2_0000);
///
/// let a = Allocator::new(&layout, Config::default())?;
/// assert_eq!(a.nr_zones(), 2);
/// let f = a.alloc_on(0, 0, Gfp::KERNEL, None)?;
/// assert_eq!(a.zone_of_pfn(f.pfn), Some(1)); // the highest zone first, as in Linux
/// assert!(!(0xc_0000..0xe_0000).contains(&f.pfn.0));
/// a.free_on(0, f)?;
///
/// // Overlapping zones are refused with a reason.
/// let mut bad = layout.clone();
/// bad.nodes[0].zones[1].start_pfn = 0x8_0000;
/// assert!(bad.validate().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Layout {
    /// Nodes, by id.
    pub nodes: Vec<NodeLayout>,
    /// CPUs, by id.
    pub cpus: Vec<CpuLayout>,
}

/// Default LLC slice when none is given: 2 MiB (a common per-core L3 share).
pub const DEFAULT_LLC_SLICE: u64 = 2 << 20;

impl Layout {
    /// One node with one Normal zone of `pages` frames starting at PFN 0, and `cpus` CPUs.
    ///
    /// ```
    /// use pagealloc::{Layout, PageMeta};
    ///
    /// let l = Layout::single(262_144, 4); // 1 GiB, 4 CPUs
    /// assert_eq!((l.managed_pages(), l.cpus.len()), (262_144, 4));
    /// // The per-frame metadata a caller must supply for `Allocator::with_metadata`.
    /// assert_eq!(l.metadata_size(), 262_144 * core::mem::size_of::<PageMeta>());
    /// ```
    pub fn single(pages: u64, cpus: usize) -> Layout {
        Layout::numa(1, pages, cpus)
    }

    /// `nodes` nodes of `pages_per_node` frames each (one Normal zone per node, laid out
    /// back to back) with `cpus_per_node` CPUs each; distance 10 local, 20 remote.
    ///
    /// ```
    /// use pagealloc::Layout;
    ///
    /// // Two nodes of 512 MiB with 2 CPUs each, 1 MiB of last-level cache per CPU.
    /// let l = Layout::numa(2, 131_072, 2).with_llc_slice(1 << 20);
    /// assert_eq!(l.cpus[3].node, 1);
    /// assert_eq!((l.distance(0, 0), l.distance(0, 1)), (10, 20));
    /// let (node, zone) = l.zones().nth(1).unwrap();
    /// assert_eq!((node, zone.start_pfn), (1, 131_072));
    /// l.validate()?;
    /// # Ok::<(), pagealloc::LayoutError>(())
    /// ```
    pub fn numa(nodes: usize, pages_per_node: u64, cpus_per_node: usize) -> Layout {
        let mut l = Layout {
            nodes: Vec::new(),
            cpus: Vec::new(),
        };
        for n in 0..nodes {
            l.nodes.push(NodeLayout {
                // Saturating: a layout too large for the PFN space fails `validate`.
                zones: alloc::vec![ZoneLayout::new(
                    ZoneKind::Normal,
                    (n as u64).saturating_mul(pages_per_node),
                    pages_per_node
                )],
                distance: (0..nodes).map(|m| if m == n { 10 } else { 20 }).collect(),
            });
            for _ in 0..cpus_per_node {
                l.cpus.push(CpuLayout {
                    node: n,
                    llc_slice_bytes: DEFAULT_LLC_SLICE,
                    online: true,
                });
            }
        }
        l
    }

    /// Set every CPU's LLC slice.
    pub fn with_llc_slice(mut self, bytes: u64) -> Layout {
        for c in &mut self.cpus {
            c.llc_slice_bytes = bytes;
        }
        self
    }

    /// The host's CPUs, nodes, distances and cache slices (sysfs), with `bytes` of memory
    /// split over the nodes in proportion to their memory (evenly if unknown).
    #[cfg(feature = "std")]
    pub fn from_host(bytes: u64) -> Result<Layout, crate::os::sysfs::TopologyError> {
        let host = crate::os::sysfs::HostTopology::read()?;
        Ok(Layout::from_host_topology(&host, bytes))
    }

    /// As [`Layout::from_host`], from an already read topology.
    #[cfg(feature = "std")]
    pub fn from_host_topology(host: &crate::os::sysfs::HostTopology, bytes: u64) -> Layout {
        let pages = bytes / PAGE_SIZE as u64;
        let nn = host.nodes.len().max(1);
        let total_mem: u64 = host.nodes.iter().map(|n| n.mem_bytes).sum();
        let mut l = Layout {
            nodes: Vec::new(),
            cpus: Vec::new(),
        };
        let mut start = 0;
        for (i, n) in host.nodes.iter().enumerate() {
            let share = if total_mem > 0 {
                (pages as u128 * n.mem_bytes as u128 / total_mem as u128) as u64
            } else {
                pages / nn as u64
            };
            let share = if i + 1 == host.nodes.len() {
                pages - start
            } else {
                share
            };
            l.nodes.push(NodeLayout {
                zones: alloc::vec![ZoneLayout::new(ZoneKind::Normal, start, share)],
                distance: n.distance.clone(),
            });
            start += share;
        }
        let node_index = |id: usize| host.nodes.iter().position(|n| n.id == id).unwrap_or(0);
        let maxcpu = host.cpus.iter().map(|c| c.id + 1).max().unwrap_or(1);
        for id in 0..maxcpu {
            let c = host.cpus.iter().find(|c| c.id == id);
            l.cpus.push(CpuLayout {
                node: c.map_or(0, |c| node_index(c.node)),
                llc_slice_bytes: host.per_cpu_llc_slice_bytes(id),
                online: c.is_some_and(|c| c.online),
            });
        }
        l
    }

    /// Total frames managed.
    pub fn managed_pages(&self) -> u64 {
        self.zones()
            .map(|(_, z)| z.managed())
            .fold(0, u64::saturating_add)
    }

    /// Total frames spanned (metadata entries needed).
    pub fn spanned_pages(&self) -> u64 {
        self.zones()
            .map(|(_, z)| z.pages)
            .fold(0, u64::saturating_add)
    }

    /// Bytes of per-frame metadata for this layout.
    pub fn metadata_size(&self) -> usize {
        crate::memmap::metadata_size(self.spanned_pages())
    }

    /// Every zone with its node.
    pub fn zones(&self) -> impl Iterator<Item = (usize, &ZoneLayout)> {
        self.nodes
            .iter()
            .enumerate()
            .flat_map(|(n, nl)| nl.zones.iter().map(move |z| (n, z)))
    }

    /// Distance between two nodes (10 to itself, 20 to another when not given, also for
    /// a node that does not exist).
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        self.nodes
            .get(a)
            .and_then(|n| n.distance.get(b))
            .copied()
            .unwrap_or(if a == b { 10 } else { 20 })
    }

    /// Check the description: at least one node, zone and CPU; at most [`MAX_CPUS`] CPUs
    /// and [`MAX_NODES`] nodes; zones non-empty, ending at or below [`MAX_PFN`], not
    /// overlapping; holes non-empty, inside their zone and not overlapping each other;
    /// CPUs on existing nodes; fewer than 2^32-2 frames spanned in all.
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.nodes.is_empty() {
            return Err(LayoutError("no nodes"));
        }
        if self.nodes.len() > MAX_NODES {
            return Err(LayoutError(
                "more than 1024 nodes (the kernel's MAX_NUMNODES)",
            ));
        }
        if self.cpus.is_empty() {
            return Err(LayoutError("no CPUs"));
        }
        if self.cpus.len() > MAX_CPUS {
            return Err(LayoutError(
                "more than 8192 CPUs (the kernel's NR_CPUS with CONFIG_MAXSMP)",
            ));
        }
        if self.cpus.iter().any(|c| c.node >= self.nodes.len()) {
            return Err(LayoutError("a CPU names a node that does not exist"));
        }
        let mut spans: Vec<(u64, u64)> = Vec::new();
        let mut spanned = 0u64;
        for (_, z) in self.zones() {
            if z.pages == 0 {
                return Err(LayoutError("an empty zone"));
            }
            match z.start_pfn.checked_add(z.pages) {
                Some(end) if end <= MAX_PFN => {}
                _ => return Err(LayoutError("a zone ends past the 52-bit PFN space")),
            }
            let mut holes = z.holes.clone();
            holes.sort_unstable();
            for &(s, e) in &holes {
                if s >= e || s < z.start_pfn || e > z.end_pfn() {
                    return Err(LayoutError("a hole outside its zone or empty"));
                }
            }
            if holes.windows(2).any(|w| w[0].1 > w[1].0) {
                return Err(LayoutError("holes overlap (or one is listed twice)"));
            }
            if z.managed() == 0 {
                return Err(LayoutError("a zone that is all holes"));
            }
            spanned = spanned.saturating_add(z.pages);
            spans.push((z.start_pfn, z.end_pfn()));
        }
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[0].1 > w[1].0) {
            return Err(LayoutError("zones overlap"));
        }
        if spanned >= u32::MAX as u64 - 1 {
            return Err(LayoutError("more than 2^32-2 frames"));
        }
        if self.nodes.iter().all(|n| n.zones.is_empty()) {
            return Err(LayoutError("no zones"));
        }
        Ok(())
    }
}

/// Most CPUs a [`Layout`] may have: the kernel's `NR_CPUS` with `CONFIG_MAXSMP` (x86-64).
pub const MAX_CPUS: usize = 8192;
/// Most nodes a [`Layout`] may have: `MAX_NUMNODES` with `NODES_SHIFT` = 10.
pub const MAX_NODES: usize = 1024;
/// One past the highest PFN a zone may reach: 52-bit physical addresses (the x86-64 and
/// arm64 limit) with 4 KiB pages.
pub const MAX_PFN: u64 = 1 << (52 - 12);

/// A [`Layout`] that cannot be built.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LayoutError(pub &'static str);

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid layout: {}", self.0)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for LayoutError {}
