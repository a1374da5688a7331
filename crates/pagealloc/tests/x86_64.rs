//! The `x86_64` crate adapter (`--features x86_64`): frames are unique, aligned and
//! inside the described RAM, frees go back through the allocator's own paths (its
//! counters say so), bad frees are refused, and `Mapper::map_to` can build page tables
//! with it.
#![cfg(feature = "x86_64")]

use std::collections::HashSet;

use pagealloc::x86_64::{AdapterError, FrameAdapter};
use pagealloc::{Allocator, Config, FreeError, Gfp, Layout, Pfn};
use x86_64::structures::paging::{FrameAllocator, FrameDeallocator, PhysFrame, Size2MiB, Size4KiB};
use x86_64::PhysAddr;

/// RAM starts at physical 16 MiB.
const OFFSET: u64 = 4096;

fn allocator(pages: u64) -> Allocator {
    Allocator::new(&Layout::single(pages, 1), Config::default()).unwrap()
}

#[test]
fn every_4k_frame_once_then_none_then_all_back() {
    let a = allocator(4096);
    let mut fa = FrameAdapter::new(&a, OFFSET).unwrap();
    let mut seen = HashSet::new();
    let mut frames: Vec<PhysFrame<Size4KiB>> = Vec::new();
    while let Some(f) = FrameAllocator::<Size4KiB>::allocate_frame(&mut fa) {
        let addr = f.start_address().as_u64();
        assert!(
            (OFFSET << 12..(OFFSET + 4096) << 12).contains(&addr),
            "{addr:#x}"
        );
        assert!(seen.insert(addr), "frame {addr:#x} handed out twice");
        frames.push(f);
    }
    // Everything above the min watermark was handed out, each frame once.
    let z = a.zone_info(0).unwrap();
    assert!(frames.len() as u64 >= 4096 - z.wmark[2], "{}", frames.len());
    assert_eq!(a.counters().pgalloc, frames.len() as u64);
    for f in &frames {
        // SAFETY: handed out by this adapter above and not used.
        unsafe { fa.deallocate_frame(*f) };
    }
    let c = a.counters();
    assert_eq!(c.pgfree, frames.len() as u64);
    assert_eq!(a.nr_free_pages() + a.nr_pcp_pages(), a.managed_pages());
    a.validate().unwrap();
}

#[test]
fn two_mib_frames_are_aligned_order_9_blocks_from_the_pageset() {
    let a = allocator(16384);
    let mut fa = FrameAdapter::new(&a, OFFSET).unwrap();
    let mut frames: Vec<PhysFrame<Size2MiB>> = Vec::new();
    for _ in 0..4 {
        let f: PhysFrame<Size2MiB> = fa.allocate_frame().unwrap();
        assert_eq!(f.start_address().as_u64() % (2 << 20), 0);
        frames.push(f);
    }
    let c = a.counters();
    assert_eq!(c.pgalloc, 4 * 512);
    // Order 9 is a pcp order: the first allocation refilled the pageset's THP list.
    assert!(c.pcp_refill >= 1 && c.alloc_direct == 0, "{c:?}");
    for f in frames {
        fa.free_2m(f).unwrap();
    }
    assert_eq!(a.counters().pgfree, 4 * 512);
    a.validate().unwrap();
}

#[test]
fn bad_frees_are_refused_and_change_nothing() {
    let a = allocator(4096);
    let fa = FrameAdapter::new(&a, OFFSET).unwrap();
    let mut fa_mut = fa;
    let f: PhysFrame<Size4KiB> = fa_mut.allocate_frame().unwrap();
    fa.free_4k(f).unwrap();
    assert!(matches!(fa.free_4k(f), Err(FreeError::NotAllocated(_))));
    // Below the offset: not ours.
    let low = PhysFrame::<Size4KiB>::containing_address(PhysAddr::new(0x1000));
    assert_eq!(fa.free_4k(low), Err(FreeError::ForeignFrame(Pfn(1))));
    // Beyond the RAM.
    let high = PhysFrame::<Size4KiB>::containing_address(PhysAddr::new(1 << 40));
    assert!(matches!(fa.free_4k(high), Err(FreeError::ForeignFrame(_))));
    // A 4 KiB frame freed as 2 MiB.
    let g: PhysFrame<Size4KiB> = fa_mut.allocate_frame().unwrap();
    let as_2m = PhysFrame::<Size2MiB>::containing_address(g.start_address());
    assert!(fa.free_2m(as_2m).is_err());
    fa.free_4k(g).unwrap();
    assert_eq!(a.counters().pgfree, 2);
    a.validate().unwrap();
}

#[test]
#[should_panic(expected = "deallocate_frame")]
fn deallocate_frame_panics_on_a_double_free() {
    let a = allocator(4096);
    let mut fa = FrameAdapter::new(&a, OFFSET).unwrap();
    let f: PhysFrame<Size4KiB> = fa.allocate_frame().unwrap();
    // SAFETY: the frame is unused; the second call is the bug under test, which the
    // allocator refuses (frees are checked) before touching any state.
    unsafe {
        fa.deallocate_frame(f);
        fa.deallocate_frame(f);
    }
}

#[test]
fn construction_checks_alignment_and_the_physical_limit() {
    let a = allocator(4096);
    assert_eq!(
        FrameAdapter::new(&a, 100).unwrap_err(),
        AdapterError::UnalignedOffset(100)
    );
    assert_eq!(
        FrameAdapter::new(&a, 1 << 40).unwrap_err(),
        AdapterError::BeyondPhysicalLimit((1 << 40) + 4096)
    );
    assert!(FrameAdapter::new(&a, (1 << 40) - 4096).is_ok());
}

#[test]
fn gfp_selects_the_migratetype() {
    let a = allocator(16384);
    let mut fa = FrameAdapter::new(&a, 0).unwrap().with_gfp(Gfp::USER);
    let f: PhysFrame<Size4KiB> = fa.allocate_frame().unwrap();
    let pfn = Pfn(f.start_address().as_u64() >> 12);
    // The movable request took a movable pageblock.
    assert_eq!(a.pageblock_type(pfn), Some(pagealloc::MigrateType::Movable));
    fa.free_4k(f).unwrap();
}

/// `Mapper::map_to` over an `OffsetPageTable` whose "physical memory" is a buffer the
/// allocator's frames index: the page tables it needs come from the adapter.
#[test]
fn map_to_takes_page_table_frames_from_the_adapter() {
    use pagealloc::os::mmap::HugePages;
    use x86_64::structures::paging::mapper::MapperFlush;
    use x86_64::structures::paging::{Mapper, OffsetPageTable, Page, PageTable, PageTableFlags};
    use x86_64::VirtAddr;

    // 16 MiB of "physical memory" backed by a real mapping; physical address p lives at
    // host address base + p (PFN offset 0).
    let a = Allocator::with_memory(&Layout::single(4096, 1), Config::default(), HugePages::None)
        .unwrap();
    let base = a
        .frame_ptr(pagealloc::Frame::new(Pfn(0), 0))
        .unwrap()
        .as_ptr() as u64;
    let mut fa = FrameAdapter::new(&a, 0).unwrap();
    let l4: PhysFrame<Size4KiB> = fa.allocate_frame().unwrap();
    let l4_ptr = (base + l4.start_address().as_u64()) as *mut PageTable;
    // SAFETY: the frame is ours, 4 KiB, page aligned inside the mapping; an empty table
    // is all zeros, written before any reference to it exists.
    let mut table = unsafe {
        l4_ptr.write(PageTable::new());
        OffsetPageTable::new(&mut *l4_ptr, VirtAddr::new(base))
    };
    let before = a.counters().pgalloc;
    let page = Page::<Size4KiB>::containing_address(VirtAddr::new(0x4000_0000));
    let target: PhysFrame<Size4KiB> = fa.allocate_frame().unwrap();
    // SAFETY: a fresh mapping in a table nobody runs on; the target frame is unused.
    let flush: MapperFlush<Size4KiB> = unsafe {
        table
            .map_to(
                page,
                target,
                PageTableFlags::PRESENT | PageTableFlags::WRITABLE,
                &mut fa,
            )
            .unwrap()
    };
    flush.ignore(); // not the active page table
                    // The target plus one table each for levels 3, 2 and 1.
    assert_eq!(a.counters().pgalloc - before, 1 + 3);
    assert_eq!(table.translate_page(page).unwrap(), target);
}
