//! Frames, orders, migratetypes and request flags: the vocabulary of the allocator.

use core::fmt;

/// Size of one base page (frame) in bytes.
pub const PAGE_SIZE: usize = 4096;
/// log2 of [`PAGE_SIZE`].
pub const PAGE_SHIFT: u32 = 12;
/// Largest order handed out (`MAX_PAGE_ORDER`): blocks of 2^10 pages = 4 MiB.
pub const MAX_ORDER: u8 = 10;
/// Number of orders, 0..=[`MAX_ORDER`] (`NR_PAGE_ORDERS`).
pub const NR_ORDERS: usize = MAX_ORDER as usize + 1;
/// Orders above this are "costly" (`PAGE_ALLOC_COSTLY_ORDER`); orders 1..=3 trigger free_high.
pub const COSTLY_ORDER: u8 = 3;
/// Order of a pageblock, the unit of migratetype bookkeeping (min(HPAGE_PMD_ORDER, MAX_ORDER)).
pub const PAGEBLOCK_ORDER: u8 = 9;
/// Pages per pageblock.
pub const PAGEBLOCK_PAGES: u64 = 1 << PAGEBLOCK_ORDER;
/// The THP order (2 MiB with 4 KiB pages), cached on the pcp when THP is on.
pub const THP_ORDER: u8 = 9;

/// A page frame number: physical address >> [`PAGE_SHIFT`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pfn(pub u64);

impl fmt::Debug for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pfn:{:#x}", self.0)
    }
}

impl fmt::Display for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A block of 2^order contiguous frames handed out by the allocator.
///
/// The handle is plain data (copyable, like a `struct page *`): the allocator checks on
/// free that it is a block it handed out and has not been freed since.
///
/// ```
/// use pagealloc::{Frame, Pfn, PAGE_SIZE};
///
/// let f = Frame::new(Pfn(512), 9); // a 2 MiB block
/// assert_eq!(f.pages(), 512);
/// assert_eq!(f.pfn.0 * PAGE_SIZE as u64, 2 << 20); // its physical address, RAM at 0
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    /// First frame of the block (aligned to 2^order).
    pub pfn: Pfn,
    /// log2 of the number of frames in the block.
    pub order: u8,
}

impl Frame {
    /// A handle for the block of 2^`order` frames starting at `pfn`.
    pub const fn new(pfn: Pfn, order: u8) -> Self {
        Frame { pfn, order }
    }
    /// Number of base pages in the block.
    pub const fn pages(&self) -> u64 {
        1 << self.order
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Frame({}/o{})", self.pfn, self.order)
    }
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/o{}", self.pfn, self.order)
    }
}

/// Mobility class of a pageblock or a request (`enum migratetype`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(u8)]
pub enum MigrateType {
    /// Kernel allocations that cannot move.
    Unmovable = 0,
    /// User pages and the page cache: can be migrated.
    Movable = 1,
    /// Slab caches that can be shrunk.
    Reclaimable = 2,
    /// Reserve for high-order atomic allocations; never on pcp lists.
    HighAtomic = 3,
    /// Pageblocks being isolated (offlining, contiguous allocation): frees bypass the pcp.
    Isolate = 4,
}

/// Number of migratetypes.
pub const NR_MIGRATETYPES: usize = 5;
/// Types that have pcp lists (`MIGRATE_PCPTYPES`).
pub const NR_PCPTYPES: usize = 3;

impl MigrateType {
    /// All types, by value.
    pub const ALL: [MigrateType; NR_MIGRATETYPES] = [
        MigrateType::Unmovable,
        MigrateType::Movable,
        MigrateType::Reclaimable,
        MigrateType::HighAtomic,
        MigrateType::Isolate,
    ];
    /// From the numeric value; `None` past the last type.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(MigrateType::Unmovable),
            1 => Some(MigrateType::Movable),
            2 => Some(MigrateType::Reclaimable),
            3 => Some(MigrateType::HighAtomic),
            4 => Some(MigrateType::Isolate),
            _ => None,
        }
    }
    /// `migratetype_is_mergeable`: the three pcp types may merge with each other.
    pub const fn is_mergeable(self) -> bool {
        (self as u8) < NR_PCPTYPES as u8
    }
    /// Short name as in `/proc/pagetypeinfo`.
    pub const fn name(self) -> &'static str {
        match self {
            MigrateType::Unmovable => "Unmovable",
            MigrateType::Movable => "Movable",
            MigrateType::Reclaimable => "Reclaimable",
            MigrateType::HighAtomic => "HighAtomic",
            MigrateType::Isolate => "Isolate",
        }
    }
}

impl fmt::Display for MigrateType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Request flags, a small subset of the kernel's GFP flags that change allocator behaviour.
///
/// Combine with `|`. The migratetype of a request comes from [`Gfp::MOVABLE`] /
/// [`Gfp::RECLAIMABLE`] (neither: unmovable), as `gfp_migratetype()` does.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gfp(pub u32);

impl Gfp {
    /// `__GFP_MOVABLE`: the pages can be migrated.
    pub const MOVABLE: Gfp = Gfp(1 << 0);
    /// `__GFP_RECLAIMABLE`: the pages belong to a shrinkable cache.
    pub const RECLAIMABLE: Gfp = Gfp(1 << 1);
    /// `__GFP_HIGH`: may dip into the min-watermark reserve (`ALLOC_MIN_RESERVE`).
    pub const HIGH: Gfp = Gfp(1 << 2);
    /// Cannot sleep (`!__GFP_DIRECT_RECLAIM`): `ALLOC_NON_BLOCK`; high-order requests also
    /// use and build the high-atomic reserve (`ALLOC_HIGHATOMIC`).
    pub const ATOMIC: Gfp = Gfp(1 << 3);
    /// `__GFP_THISNODE`: no fallback to other nodes.
    pub const THISNODE: Gfp = Gfp(1 << 4);
    /// `__GFP_KSWAPD_RECLAIM`: may wake the (modelled) kswapd; set in the usual masks.
    pub const KSWAPD: Gfp = Gfp(1 << 5);
    /// `__GFP_NORETRY`-like: skip the drain-and-retry slow path.
    pub const NORETRY: Gfp = Gfp(1 << 6);

    /// `GFP_KERNEL`: unmovable, may reclaim.
    pub const KERNEL: Gfp = Gfp(Self::KSWAPD.0);
    /// `GFP_HIGHUSER_MOVABLE`: user pages.
    pub const USER: Gfp = Gfp(Self::KSWAPD.0 | Self::MOVABLE.0);
    /// `GFP_ATOMIC`: high priority, no sleeping.
    pub const ATOMIC_KERNEL: Gfp = Gfp(Self::KSWAPD.0 | Self::HIGH.0 | Self::ATOMIC.0);

    /// True if every flag of `other` is set.
    pub const fn contains(self, other: Gfp) -> bool {
        self.0 & other.0 == other.0
    }
    /// The migratetype of the request (`gfp_migratetype`).
    ///
    /// ```
    /// use pagealloc::{Gfp, MigrateType};
    ///
    /// assert_eq!(Gfp::USER.migratetype(), MigrateType::Movable);
    /// assert_eq!(Gfp::KERNEL.migratetype(), MigrateType::Unmovable);
    /// assert_eq!((Gfp::KERNEL | Gfp::RECLAIMABLE).migratetype(), MigrateType::Reclaimable);
    /// assert!(Gfp::ATOMIC_KERNEL.contains(Gfp::HIGH));
    /// ```
    pub const fn migratetype(self) -> MigrateType {
        if self.0 & Self::MOVABLE.0 != 0 {
            MigrateType::Movable
        } else if self.0 & Self::RECLAIMABLE.0 != 0 {
            MigrateType::Reclaimable
        } else {
            MigrateType::Unmovable
        }
    }
    /// Flags for a request of the given type (with KSWAPD, like the usual GFP masks).
    pub const fn from_migratetype(mt: MigrateType) -> Gfp {
        match mt {
            MigrateType::Movable => Self::USER,
            MigrateType::Reclaimable => Gfp(Self::KSWAPD.0 | Self::RECLAIMABLE.0),
            _ => Self::KERNEL,
        }
    }
}

impl core::ops::BitOr for Gfp {
    type Output = Gfp;
    fn bitor(self, rhs: Gfp) -> Gfp {
        Gfp(self.0 | rhs.0)
    }
}

impl From<MigrateType> for Gfp {
    fn from(mt: MigrateType) -> Gfp {
        Gfp::from_migratetype(mt)
    }
}

impl fmt::Debug for Gfp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 7] = [
            "MOVABLE",
            "RECLAIMABLE",
            "HIGH",
            "ATOMIC",
            "THISNODE",
            "KSWAPD",
            "NORETRY",
        ];
        let mut first = true;
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("0")?;
        }
        Ok(())
    }
}

/// Why an allocation failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AllocError {
    /// No zone in the zonelist could satisfy the request within its watermarks.
    OutOfMemory,
    /// The order is above [`MAX_ORDER`].
    InvalidOrder(u8),
    /// The preferred node does not exist.
    InvalidNode(usize),
    /// The CPU does not exist.
    InvalidCpu(usize),
}

/// Why a free was refused. The allocator state is unchanged when one is returned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FreeError {
    /// The frame is not the head of an allocated block: a double free, or a frame inside
    /// a block (not its first page), or a frame that was never handed out.
    NotAllocated(Pfn),
    /// The frame is outside every zone of this allocator, or in a hole.
    ForeignFrame(Pfn),
    /// The block was allocated with another order.
    OrderMismatch {
        /// Frame being freed.
        pfn: Pfn,
        /// Order it was allocated with.
        allocated: u8,
        /// Order given to free.
        given: u8,
    },
    /// The order is above [`MAX_ORDER`] or the frame is not aligned to it.
    InvalidOrder(u8),
    /// The CPU named by the caller does not exist.
    InvalidCpu(usize),
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::OutOfMemory => f.write_str("out of memory"),
            AllocError::InvalidOrder(o) => write!(f, "invalid order {o} (0..={MAX_ORDER})"),
            AllocError::InvalidNode(n) => write!(f, "invalid node {n}"),
            AllocError::InvalidCpu(c) => write!(f, "invalid cpu {c}"),
        }
    }
}

impl fmt::Display for FreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FreeError::NotAllocated(p) => {
                write!(f, "frame {p} is not an allocated block (double free?)")
            }
            FreeError::ForeignFrame(p) => write!(f, "frame {p} does not belong to this allocator"),
            FreeError::OrderMismatch {
                pfn,
                allocated,
                given,
            } => write!(
                f,
                "frame {pfn} was allocated with order {allocated}, freed with order {given}"
            ),
            FreeError::InvalidOrder(o) => write!(f, "invalid order {o} (0..={MAX_ORDER})"),
            FreeError::InvalidCpu(c) => write!(f, "invalid cpu {c}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for AllocError {}
#[cfg(feature = "std")]
impl std::error::Error for FreeError {}
