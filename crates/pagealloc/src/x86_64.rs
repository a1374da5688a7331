//! The `x86_64` crate's frame-allocator traits, implemented over an [`Allocator`]
//! (feature `x86_64`; no_std).
//!
//! Hobby and research kernels written with the `x86_64` crate map memory through
//! `Mapper::map_to`, which takes a `FrameAllocator<Size4KiB>` for the page tables it
//! creates, and give frames back through `FrameDeallocator`. [`FrameAdapter`] plugs this
//! allocator in there: 4 KiB frames are order-0 blocks, 2 MiB frames
//! ([`Size2MiB`]) order-9 blocks — both served by the per-CPU pagesets, which cache
//! orders 0 and 9 — and each call runs on the CPU the [`Platform`](crate::Platform)
//! reports. 1 GiB frames are larger than the largest block (order 10) and have no
//! implementation.
//!
//! # Frame numbers and physical addresses
//! A frame's physical address is `(pfn + pfn_offset) × 4096`. Describe the machine's
//! RAM with its real PFNs in the [`Layout`](crate::Layout) (offset 0, holes as zone
//! holes), or number the frames from 0 and give the PFN of the first one as the
//! offset. The offset must be a multiple of 512 so that the buddy allocator's natural
//! alignment of an order-9 block (its PFN is a multiple of 512) is also the 2 MiB
//! alignment of its physical address.
//!
//! ```
//! use pagealloc::x86_64::FrameAdapter;
//! use pagealloc::{Allocator, Config, Layout};
//! use x86_64::structures::paging::{FrameAllocator, FrameDeallocator, PhysFrame, Size2MiB, Size4KiB};
//!
//! // 64 MiB of RAM starting at 16 MiB (PFN 4096), numbered from 0 in the layout.
//! let a = Allocator::new(&Layout::single(16384, 1), Config::default())?;
//! let mut frames = FrameAdapter::new(&a, 4096)?;
//!
//! let f: PhysFrame<Size4KiB> = frames.allocate_frame().expect("a 4 KiB frame");
//! assert!(f.start_address().as_u64() >= 16 << 20);
//! let huge: PhysFrame<Size2MiB> = frames.allocate_frame().expect("a 2 MiB frame");
//! assert_eq!(huge.start_address().as_u64() % (2 << 20), 0);
//!
//! // SAFETY: both frames came from this adapter and nothing uses them any more.
//! unsafe {
//!     frames.deallocate_frame(f);
//!     frames.deallocate_frame(huge);
//! }
//! assert_eq!(a.counters().pgfree, 1 + 512);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::fmt;

use ::x86_64::structures::paging::{
    FrameAllocator, FrameDeallocator, PageSize, PhysFrame, Size2MiB, Size4KiB,
};
use ::x86_64::PhysAddr;

use crate::allocator::Allocator;
use crate::frame::{FreeError, Gfp, Pfn, PAGE_SHIFT};
use crate::{Frame, PAGEBLOCK_ORDER};

/// Physical addresses the `x86_64` crate accepts: below 2^52.
const PHYS_LIMIT_PFN: u64 = 1 << (52 - PAGE_SHIFT);

/// Why a [`FrameAdapter`] could not be built.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AdapterError {
    /// The PFN offset is not a multiple of 512, so order-9 blocks would not be 2 MiB
    /// aligned.
    UnalignedOffset(u64),
    /// Some frame's physical address would be at or above 2^52, which `PhysAddr`
    /// refuses. Carries the end of the allocator's frames as a physical PFN (offset
    /// added, exclusive, saturating), which must be at most 2^40.
    BeyondPhysicalLimit(u64),
}

impl fmt::Display for AdapterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdapterError::UnalignedOffset(o) => {
                write!(f, "PFN offset {o} is not a multiple of 512 (2 MiB)")
            }
            AdapterError::BeyondPhysicalLimit(end) => {
                write!(
                    f,
                    "frames up to PFN {end} pass the 52-bit physical address limit"
                )
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for AdapterError {}

/// An [`Allocator`] seen through the `x86_64` crate's `FrameAllocator` and
/// `FrameDeallocator` traits, for 4 KiB and 2 MiB frames. See the module docs.
#[derive(Debug, Clone, Copy)]
pub struct FrameAdapter<'a> {
    alloc: &'a Allocator,
    pfn_offset: u64,
    gfp: Gfp,
}

impl<'a> FrameAdapter<'a> {
    /// An adapter over `alloc` whose frame `pfn` is at physical address
    /// `(pfn + pfn_offset) × 4096`. Allocations use [`Gfp::KERNEL`] (unmovable, may
    /// wake the modelled kswapd); see [`FrameAdapter::with_gfp`].
    pub fn new(alloc: &'a Allocator, pfn_offset: u64) -> Result<Self, AdapterError> {
        if pfn_offset % (1 << PAGEBLOCK_ORDER) != 0 {
            return Err(AdapterError::UnalignedOffset(pfn_offset));
        }
        let end = alloc.zones.iter().map(|z| z.end_pfn).max().unwrap_or(0);
        let phys_end = end.saturating_add(pfn_offset);
        if phys_end > PHYS_LIMIT_PFN {
            return Err(AdapterError::BeyondPhysicalLimit(phys_end));
        }
        Ok(FrameAdapter {
            alloc,
            pfn_offset,
            gfp: Gfp::KERNEL,
        })
    }

    /// The same adapter allocating with `gfp` (e.g. [`Gfp::ATOMIC_KERNEL`] where the
    /// caller cannot wait).
    pub fn with_gfp(self, gfp: Gfp) -> Self {
        FrameAdapter { gfp, ..self }
    }

    /// The allocator behind the adapter.
    pub fn allocator(&self) -> &'a Allocator {
        self.alloc
    }

    /// The frame of the allocator behind a physical frame of `order`; below the offset,
    /// a frame no allocator frame maps to.
    fn frame_of<S: PageSize>(&self, f: PhysFrame<S>, order: u8) -> Result<Frame, FreeError> {
        let phys_pfn = f.start_address().as_u64() >> PAGE_SHIFT;
        match phys_pfn.checked_sub(self.pfn_offset) {
            Some(pfn) => Ok(Frame::new(Pfn(pfn), order)),
            None => Err(FreeError::ForeignFrame(Pfn(phys_pfn))),
        }
    }

    fn allocate<S: PageSize>(&self, order: u8) -> Option<PhysFrame<S>> {
        let f = self.alloc.alloc_pages(order, self.gfp).ok()?;
        // In range: `new` checked that every PFN of the allocator, offset added, is
        // below 2^40, so the address is below 2^52; order-9 blocks start at multiples
        // of 512 and the offset is one too, so the address is 2 MiB aligned.
        let addr = PhysAddr::new((f.pfn.0 + self.pfn_offset) << PAGE_SHIFT);
        match PhysFrame::from_start_address(addr) {
            Ok(frame) => Some(frame),
            Err(_) => {
                // Unreachable by the argument above; never hand out a misaligned frame.
                let _ = self.alloc.free_pages(f);
                None
            }
        }
    }

    /// Free a 4 KiB frame, returning why it was refused instead of panicking: a frame
    /// this adapter did not hand out (or freed already) is refused and nothing changes
    /// (frees are checked in every build).
    pub fn free_4k(&self, frame: PhysFrame<Size4KiB>) -> Result<(), FreeError> {
        self.alloc.free_pages(self.frame_of(frame, 0)?)
    }

    /// Free a 2 MiB frame; see [`FrameAdapter::free_4k`].
    pub fn free_2m(&self, frame: PhysFrame<Size2MiB>) -> Result<(), FreeError> {
        self.alloc
            .free_pages(self.frame_of(frame, PAGEBLOCK_ORDER)?)
    }
}

// SAFETY: `allocate_frame` returns only blocks the allocator handed out to this call:
// every order-0 block leaves its zone or pageset exactly once (under the pageset lock or
// the zone lock that owns the free lists it was on) and is not handed out again until it
// is freed, so no two callers receive the same frame.
unsafe impl FrameAllocator<Size4KiB> for FrameAdapter<'_> {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size4KiB>> {
        self.allocate(0)
    }
}

// SAFETY: as for `Size4KiB`, for order-9 blocks; their 2 MiB alignment is checked in
// `allocate` (the offset is a multiple of 512 and order-9 blocks start at multiples of
// 512).
unsafe impl FrameAllocator<Size2MiB> for FrameAdapter<'_> {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size2MiB>> {
        self.allocate(PAGEBLOCK_ORDER)
    }
}

impl FrameDeallocator<Size4KiB> for FrameAdapter<'_> {
    /// # Panics
    /// If the allocator refuses the frame (not handed out by it, or freed already),
    /// as the kernel's `bad_page()` would complain; use [`FrameAdapter::free_4k`] to
    /// handle that instead.
    unsafe fn deallocate_frame(&mut self, frame: PhysFrame<Size4KiB>) {
        if let Err(e) = self.free_4k(frame) {
            panic!("deallocate_frame({frame:?}): {e}");
        }
    }
}

impl FrameDeallocator<Size2MiB> for FrameAdapter<'_> {
    /// # Panics
    /// As for 4 KiB frames; see [`FrameAdapter::free_2m`].
    unsafe fn deallocate_frame(&mut self, frame: PhysFrame<Size2MiB>) {
        if let Err(e) = self.free_2m(frame) {
            panic!("deallocate_frame({frame:?}): {e}");
        }
    }
}
