//! `frame-alloc` 0.1 (crates.io): the stack its README recommends for a kernel, a
//! `DepotAllocator` (per-CPU magazines of up to 128 order-0 frames, spilling half of one
//! into a shared depot of 512) over a `SummaryBuddyAllocator` (a bitmap per order kept
//! inside the managed memory, with a summary level above it; compare-and-swap loops, no
//! lock), over a prefaulted mapping of the frames.
//!
//! # Design
//! - **Memory.** The summary buddy keeps its bitmaps in the pool it manages, so this
//!   source always maps its frames (prefaulted, [`Memory`]), even where the run asks
//!   for none (`bench`). The frames hosting the bitmaps are never handed out: the
//!   source has a little less free memory than its `frames` (2 GiB: a few hundred KiB).
//!   The span starts on a 4 MiB boundary (the largest block; the crate rounds its
//!   origin down to it), so handles `(address − start) / 4 KiB` are naturally aligned
//!   PFNs as the executor checks them.
//! - **Per-CPU use.** The crate learns the caller's CPU from a static
//!   `CpuId::current_cpu()`; the executor's thread passes its CPU index with every call,
//!   so the source stores it in a thread-local before calling in ([`ThreadCpu`]). There
//!   are [`SLOTS`] magazines; CPU `i` uses magazine `i % SLOTS` (the crate's rule), so
//!   beyond 64 CPUs magazines are shared, under their spin locks.
//! - **Orders.** Orders 0..=10, as pagealloc's (`ORDERS` = 11). Only order 0 goes through
//!   the magazines; larger blocks go to the summary buddy directly.
//! - **Spurious failures.** The summary buddy may fail an allocation under concurrent
//!   load although memory is free (its README says so and asks callers that must not
//!   fail early to retry): the source retries [`RETRIES`] times before it reports out
//!   of memory.
//! - **Checked frees.** The crate's `deallocate_physical` is `unsafe`: the address, size
//!   and count must be those of a live allocation. [`PageSource::free`] is safe, so the
//!   source keeps one byte per frame (the order + 1 of a live block starting there) and
//!   frees a block only after taking that byte from `order + 1` to 0 with one
//!   compare-and-swap: a double free, a foreign, interior or wrong-order handle is
//!   refused as [`SourceError::Broken`] and never reaches the crate. It costs one
//!   atomic store per allocation and one compare-and-swap per free, as pagealloc's own
//!   checked frees cost theirs.

use std::cell::Cell;
use std::num::NonZeroUsize;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use frame_alloc::{
    AllocError, CpuId, DepotAllocator, PageSize, PhysicalAllocator, Provenance, RegionInit,
    SummaryBuddyAllocator,
};

use super::{Block, HandleSpace, Memory, PageSource, SourceError};
use crate::workload::MigrateKind;

const NAME: &str = "frame-alloc";

/// The base frame: 4 KiB.
const BASE: PageSize = PageSize::from_log2(12);
/// Orders 0..=10 (the largest block 4 MiB), as pagealloc's.
const ORDERS: usize = 11;
/// Frames of the largest block: the span's start is aligned to it.
const MAX_BLOCK_FRAMES: u64 = 1 << (ORDERS - 1);
/// Per-CPU magazines (the crate asks for the number of CPUs that may ever be online;
/// beyond it, CPUs share magazines modulo `SLOTS`).
pub(super) const SLOTS: usize = 64;
/// Retries of an allocation the summary buddy failed, before it counts as out of memory.
pub(super) const RETRIES: u32 = 4;

thread_local! {
    /// The CPU index the executor's thread allocates as (set before every call in).
    static CPU: Cell<usize> = const { Cell::new(0) };
}

/// `CpuId` of the crate: the CPU index the calling thread last passed to the source.
#[derive(Debug)]
pub(super) struct ThreadCpu;

impl CpuId for ThreadCpu {
    fn current_cpu() -> usize {
        CPU.with(Cell::get)
    }
}

/// `Provenance` of the crate: the mapping's provenance was exposed when the source was
/// built ([`FrameAllocSource::new`]), and an address inside it is turned back into a
/// pointer by recovering that provenance (the crate's "recover exposed provenance"
/// story, as its own tests do with a host allocation).
#[derive(Debug)]
pub(super) struct ExposedProvenance;

// SAFETY: 1. `create` returns a pointer with the exposed provenance of the whole
// mapping the address lies in (the source only gives the crate addresses inside its
// mapping, whose provenance it exposed before `init`), so it covers every contiguous run
// inside it; 2. `destroy` only reads the address back: under this story no allocation
// begins in `create`, so none ends.
unsafe impl Provenance for ExposedProvenance {
    unsafe fn create(phys: usize) -> NonNull<u8> {
        NonNull::new(std::ptr::with_exposed_provenance_mut(phys))
            .expect("frame-alloc asks only for addresses inside the mapping, never 0")
    }

    unsafe fn destroy<T>(ptr: NonNull<T>) -> usize {
        ptr.as_ptr().addr()
    }
}

type Stack = DepotAllocator<SummaryBuddyAllocator<ORDERS, ExposedProvenance>, ThreadCpu, SLOTS>;

/// frame-alloc's depot over its summary buddy, over frames `0..frames`.
pub struct FrameAllocSource {
    // Declared before `memory`: dropped first (it keeps its bitmaps in that memory).
    alloc: Box<Stack>,
    /// Per frame: 0, or the order + 1 of the live block that starts there.
    live: Box<[AtomicU8]>,
    /// Address of frame 0 (4 MiB aligned).
    start: usize,
    frames: u64,
    /// Frames free after `init` (the rest host the crate's bitmaps).
    free_frames: u64,
    /// Frame 0 is frame `offset` of the mapping.
    offset: u64,
    memory: Memory,
}

impl std::fmt::Debug for FrameAllocSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameAllocSource")
            .field("frames", &self.frames)
            .field("free_frames", &self.free_frames)
            .finish_non_exhaustive()
    }
}

fn broken(what: String) -> SourceError {
    SourceError::Broken { source: NAME, what }
}

impl FrameAllocSource {
    /// frame-alloc over `frames` frames of a prefaulted mapping of its own.
    ///
    /// # Errors
    /// [`SourceError::Build`] if `frames` is 0, the mapping fails, or the crate refuses
    /// the span.
    pub fn new(frames: u64) -> Result<Self, SourceError> {
        let build = |why: String| SourceError::Build { source: NAME, why };
        if frames == 0 {
            return Err(build("no frames".into()));
        }
        let len = usize::try_from(frames)
            .ok()
            .and_then(|f| f.checked_mul(BASE.bytes()))
            .ok_or_else(|| build(format!("{frames} frames do not fit the address space")))?;
        let memory = Memory::new(NAME, frames + MAX_BLOCK_FRAMES - 1)?;
        let map = memory.frame_ptr(0).expose_provenance();
        let align = (MAX_BLOCK_FRAMES as usize) * BASE.bytes();
        let start = map.next_multiple_of(align);
        let offset = ((start - map) / BASE.bytes()) as u64;
        let alloc = Box::new(Stack::new(BASE, SummaryBuddyAllocator::new(BASE)));
        // SAFETY: 1. `[start, start + len)` lies inside the mapping (it has
        // `MAX_BLOCK_FRAMES - 1` frames more than `frames`, `offset` is fewer than that),
        // which `memory` keeps alive as long as `alloc` (declared first, dropped first);
        // 2. no one else uses those bytes: the mapping is this source's alone and no
        // block is handed out yet; 3. single-threaded: `alloc` is published to other
        // threads only after `new` returns, by whatever shares the source (thread spawn,
        // a scope); 4. the provenance `ExposedProvenance` recovers was exposed above.
        unsafe { alloc.try_init_region(start, len) }
            .map_err(|e| build(format!("init of {} MiB: {e}", len >> 20)))?;
        let live = (0..frames).map(|_| AtomicU8::new(0)).collect();
        let mut s = FrameAllocSource {
            alloc,
            live,
            start,
            frames,
            free_frames: 0,
            offset,
            memory,
        };
        s.free_frames = s.count_free()?;
        Ok(s)
    }

    /// Frames the crate can hand out now: every block it gives, largest first, counted
    /// and given back (single-threaded: the source's caller has it to itself).
    fn count_free(&self) -> Result<u64, SourceError> {
        self.alloc.flush();
        let mut got = Vec::new();
        let mut total = 0u64;
        for order in (0..ORDERS as u32).rev() {
            let count = NonZeroUsize::new(1 << order).expect("a power of two");
            while let Ok(addr) = self.alloc.allocate_physical(BASE, count) {
                got.push((addr, count));
                total += 1 << order;
            }
        }
        for (addr, count) in got {
            // SAFETY: 1. `addr` and `count` are those of an allocation made just above
            // with the same page size, and it is freed once; 2. nothing used the block.
            unsafe { self.alloc.deallocate_physical(BASE, count, addr) };
        }
        self.alloc.flush();
        Ok(total)
    }
}

impl PageSource for FrameAllocSource {
    fn name(&self) -> &'static str {
        NAME
    }

    fn allocate(&self, cpu: usize, order: u8, _kind: MigrateKind) -> Result<Block, SourceError> {
        if usize::from(order) >= ORDERS {
            return Err(SourceError::Unsupported {
                source: NAME,
                why: format!("orders 0..={} only (order {order} asked)", ORDERS - 1),
            });
        }
        CPU.with(|c| c.set(cpu));
        let count = NonZeroUsize::new(1 << order).expect("a power of two");
        let mut tries = 0;
        let addr = loop {
            match self.alloc.allocate_physical(BASE, count) {
                Ok(a) => break a,
                Err(AllocError::OutOfMemory) if tries < RETRIES => tries += 1,
                Err(AllocError::OutOfMemory) => return Err(SourceError::OutOfMemory),
                Err(e) => {
                    return Err(SourceError::Unsupported {
                        source: NAME,
                        why: format!("order {order}: {e:?}"),
                    })
                }
            }
        };
        let handle = ((addr - self.start) / BASE.bytes()) as u64;
        let claimed = self
            .live
            .get(handle as usize)
            .map(|b| b.swap(order + 1, Ordering::Relaxed));
        if claimed != Some(0) {
            return Err(broken(format!(
                "handed out frame {handle} (order {order}), which is live or outside 0..{}",
                self.frames
            )));
        }
        Ok(Block { handle, order })
    }

    fn free(&self, cpu: usize, block: Block) -> Result<(), SourceError> {
        let pages = 1u64 << block.order;
        let live = self
            .live
            .get(block.handle as usize)
            .filter(|_| block.handle % pages == 0 && block.handle + pages <= self.frames);
        let ok = live.is_some_and(|b| {
            b.compare_exchange(block.order + 1, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        });
        if !ok {
            return Err(broken(format!(
                "free of {block:?}: not a live block of that order (double, foreign or interior free)"
            )));
        }
        CPU.with(|c| c.set(cpu));
        let addr = self.start + block.handle as usize * BASE.bytes();
        let count = NonZeroUsize::new(1 << block.order).expect("a power of two");
        // SAFETY: 1. the compare-and-swap above took the block's live mark, set only by
        // `allocate` for the address, page size and count the crate returned, from
        // `order + 1` to 0: this is that allocation, and exactly one free of it gets
        // here; 2. the caller gave the block back, so it is not used after this call.
        unsafe { self.alloc.deallocate_physical(BASE, count, addr) };
        Ok(())
    }

    fn touch(&self, block: Block) {
        self.memory.touch(Block {
            handle: block.handle + self.offset,
            ..block
        });
    }

    fn copy(&self, block: Block, buf: &mut [u8], into_block: bool) {
        let b = Block {
            handle: block.handle + self.offset,
            ..block
        };
        self.memory.copy(b, buf, into_block);
    }

    fn has_memory(&self) -> bool {
        true
    }

    fn handle_space(&self) -> HandleSpace {
        HandleSpace::Frames {
            frames: self.frames,
        }
    }

    fn validate(&self) -> Result<(), SourceError> {
        if let Some(i) = self
            .live
            .iter()
            .position(|b| b.load(Ordering::Relaxed) != 0)
        {
            return Err(broken(format!("frame {i} still live after the run")));
        }
        let free = self.count_free()?;
        if free != self.free_frames {
            return Err(broken(format!(
                "{free} frames free after the run, {} after init (blocks leaked or lost)",
                self.free_frames
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_every_order_and_refuses_bad_frees() {
        let s = FrameAllocSource::new(4096).unwrap();
        assert!(s.free_frames > 4096 - 64 && s.free_frames < 4096, "{s:?}");
        let mut blocks = Vec::new();
        for order in 0..=10u8 {
            let b = s.allocate(usize::from(order) % 3, order, MigrateKind::Unmovable);
            let b = b.unwrap();
            assert_eq!(b.handle % (1 << order), 0);
            s.touch(b);
            blocks.push(b);
        }
        assert!(matches!(
            s.allocate(0, 11, MigrateKind::Unmovable),
            Err(SourceError::Unsupported { .. })
        ));
        let b9 = blocks[9];
        assert!(s.validate().is_err(), "live blocks must fail validate");
        // Interior, wrong order, foreign.
        for bad in [
            Block {
                handle: b9.handle + 1,
                order: 0,
            },
            Block {
                handle: b9.handle,
                order: 8,
            },
            Block {
                handle: 1 << 40,
                order: 0,
            },
        ] {
            assert!(
                matches!(s.free(0, bad), Err(SourceError::Broken { .. })),
                "{bad:?}"
            );
        }
        for b in blocks {
            s.free(1, b).unwrap();
        }
        assert!(
            matches!(s.free(0, b9), Err(SourceError::Broken { .. })),
            "double free"
        );
        s.validate().unwrap();
    }
}
