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
