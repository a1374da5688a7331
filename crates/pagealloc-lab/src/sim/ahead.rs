//! Host prefetch hints: ask the host CPU to bring memory the simulator is about to use
//! into its caches, so that the miss overlaps other work.
//!
//! The simulator's own state is spread over per-frame tables far larger than the
//! host's caches: the hierarchy's record of each frame an operation touches is a host
//! miss (`sim/trace.rs` hints it when the allocator reports the frame, long before the
//! replay reads it). A hint changes no result and no state the program sees: only
//! when the host's loads are served.

/// Hints the host line holding address `at`. Any address is allowed (a hint never
/// faults).
#[inline(always)]
pub(crate) fn line(at: usize) {
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is in the
    // target's baseline features). A prefetch is a hint: it reads nothing the program
    // sees and never faults, whatever the address (one of memory since freed included),
    // so no invariant of any memory is involved and no lock is needed.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(at as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Asks the host kernel to back `table` with transparent huge pages where it can
/// (`MADV_HUGEPAGE` on the 2 MiB-aligned part). The simulator's per-frame tables are
/// gigabytes read at random, one record per simulated access: with 4 KiB pages nearly
/// every record is also a host TLB miss and a page walk (on this lab's hosts THP is
/// `madvise`, so without the hint they stay 4 KiB). A hint: a kernel without THP, or
/// one that refuses, leaves the table as it was; no result depends on it. The table's
/// memory still comes lazily (a huge page where it is first touched, zero-filled).
pub(crate) fn huge<T>(table: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = table.as_ptr() as usize;
        let end = start + std::mem::size_of_val(table);
        let (lo, hi) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if hi > lo {
            // SAFETY: 1. `[lo, hi)` lies inside `table`'s allocation, which the caller
            // owns for as long as it holds the slice; 2. MADV_HUGEPAGE changes only the
            // kernel's choice of page size for the range, never its contents or
            // mapping (zeroed memory stays zero), so no invariant of the table is
            // involved and no lock is needed. Its result is ignored: a refusal keeps
            // 4 KiB pages.
            let _ = unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = table;
}
