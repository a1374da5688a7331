//! Page tables built and torn down through pagealloc's `x86_64` adapter.

use pagealloc::x86_64::FrameAdapter;
use pagealloc::{Allocator, PAGE_SIZE};
use x86_64::structures::paging::mapper::{CleanUp, Translate};
use x86_64::structures::paging::{
    FrameAllocator, FrameDeallocator, Mapper, OffsetPageTable, Page, PageTable, PageTableFlags,
    PhysFrame, Size4KiB,
};
use x86_64::VirtAddr;

/// Why [`map_page_tables`] did not complete.
pub(crate) enum PtError {
    /// No frame was left for a table or a page.
    NoFrame,
    /// Something that must not happen.
    Broken(&'static str),
}

/// Build a 4-level page table whose frames all come from pagealloc through the `x86_64`
/// adapter: map 4 pages (its page-table frames allocated by `map_to`), check the
/// translations, unmap them, free the data frames, the emptied tables (`clean_up`) and
/// the top level.
pub(crate) fn map_page_tables(a: &Allocator, cpu: usize) -> Result<(), PtError> {
    let mut fa = FrameAdapter::new(a, 0).map_err(|_| PtError::Broken("adapter"))?;
    let top: PhysFrame<Size4KiB> = fa.allocate_frame().ok_or(PtError::NoFrame)?;
    let top_ptr = top.start_address().as_u64() as *mut PageTable;
    // SAFETY: the frame was just allocated for us (no other owner) and is
    // identity-mapped; zeroed it is an empty page table.
    let table = unsafe {
        core::ptr::write_bytes(top_ptr.cast::<u8>(), 0, PAGE_SIZE);
        &mut *top_ptr
    };
    // SAFETY: physical memory is identity-mapped (offset 0) and `table` is a valid,
    // exclusively owned level-4 table; it is never loaded into CR3.
    let mut m = unsafe { OffsetPageTable::new(table, VirtAddr::new(0)) };
    let base = 0x4000_0000_0000u64 + ((cpu as u64) << 30);
    let mut data = [None; 4];
    let mut result = Ok(());
    for (i, d) in data.iter_mut().enumerate() {
        let Some(f) = FrameAllocator::<Size4KiB>::allocate_frame(&mut fa) else {
            result = Err(PtError::NoFrame);
            break;
        };
        *d = Some(f);
        let page = Page::<Size4KiB>::containing_address(VirtAddr::new(base + i as u64 * 4096));
        let flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE;
        // SAFETY: the table is not live (never in CR3), so no mapping can alias memory in
        // use; the frames are ours.
        match unsafe { m.map_to(page, f, flags, &mut fa) } {
            Ok(flush) => flush.ignore(),
            Err(x86_64::structures::paging::mapper::MapToError::FrameAllocationFailed) => {
                result = Err(PtError::NoFrame);
                break;
            }
            Err(_) => {
                result = Err(PtError::Broken("map_to failed"));
                break;
            }
        }
        if m.translate_addr(VirtAddr::new(base + i as u64 * 4096 + 8))
            != Some(f.start_address() + 8)
        {
            result = Err(PtError::Broken("translation mismatch"));
        }
    }
    for (i, d) in data.iter().enumerate() {
        if let Some(f) = d {
            let page = Page::<Size4KiB>::containing_address(VirtAddr::new(base + i as u64 * 4096));
            if let Ok((_, flush)) = m.unmap(page) {
                flush.ignore();
            }
            // SAFETY: the frame is unmapped and no longer used.
            unsafe { fa.deallocate_frame(*f) };
        }
    }
    // SAFETY: every mapping was removed: the tables below the top level are empty and
    // unused; then the top level itself, which nothing references.
    unsafe {
        m.clean_up(&mut fa);
        fa.deallocate_frame(top);
    }
    result
}
