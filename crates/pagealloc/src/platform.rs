//! Environment seams: which CPU am I on, and what time is it.
//!
//! The same allocator code runs on real threads (`OsPlatform`, with `std`: `sched_getcpu` and the
//! monotonic clock), under the simulator and in no_std users ([`ManualPlatform`], or an
//! implementation of [`Platform`] of their own).

use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use core::fmt;

/// CPU identity and time, as the allocator needs them.
///
/// `current_cpu` is called by the allocation and free entry points that do not name a
/// CPU; `now_ns` on zone-lock trips (hold/wait accounting) and by the zonelist cache.
pub trait Platform: Send + Sync + fmt::Debug {
    /// The CPU the caller runs on, `< Layout::cpus.len()`.
    fn current_cpu(&self) -> usize;
    /// A monotonic clock in nanoseconds.
    fn now_ns(&self) -> u64;
    /// Whether [`Allocator::with_platform`](crate::Allocator::with_platform) faults in
    /// the frame metadata it takes from the global allocator while building, writing one
    /// byte per 4 KiB of it (the kernel initialises its whole memmap at boot,
    /// `memmap_init`, so no allocation pays for it later).
    ///
    /// The metadata is zeroed memory that an OS backs only where it is written: left
    /// lazy, the first allocation that reaches each untouched 4 KiB of metadata takes a
    /// page fault, and the process's resident size grows only with the frames it uses.
    /// `OsPlatform` (with `std`) says yes (real threads: no fault jitter on first
    /// allocations); the default, which [`ManualPlatform`] and the simulator's platform
    /// keep, is no (a simulated 512 GiB machine would otherwise make 2 GiB resident
    /// before its first allocation). Metadata a caller supplies
    /// ([`Allocator::with_metadata`](crate::Allocator::with_metadata)) is the caller's to
    /// place and is never touched for this.
    fn prefault_metadata(&self) -> bool {
        false
    }
}

/// The host: `sched_getcpu()` and `CLOCK_MONOTONIC`.
#[cfg(feature = "std")]
#[derive(Debug, Default, Clone, Copy)]
pub struct OsPlatform;

#[cfg(feature = "std")]
impl Platform for OsPlatform {
    #[inline]
    fn current_cpu(&self) -> usize {
        crate::os::current_cpu()
    }
    #[inline]
    fn now_ns(&self) -> u64 {
        crate::os::monotonic_ns()
    }
    fn prefault_metadata(&self) -> bool {
        true
    }
}

/// A platform whose CPU and clock are set by the caller: for no_std, tests and the
/// simulator (virtual time).
///
/// ```
/// use pagealloc::{ManualPlatform, Platform};
///
/// let p = ManualPlatform::new();
/// assert_eq!((p.current_cpu(), p.now_ns()), (0, 0));
/// p.set_cpu(3);
/// p.set_now(1_000);
/// p.advance(500);
/// assert_eq!((p.current_cpu(), p.now_ns()), (3, 1_500));
/// ```
#[derive(Debug, Default)]
pub struct ManualPlatform {
    cpu: AtomicUsize,
    now: AtomicU64,
}

impl ManualPlatform {
    /// CPU 0 at time 0.
    pub fn new() -> Self {
        Self::default()
    }
    /// Set the CPU `current_cpu` reports.
    pub fn set_cpu(&self, cpu: usize) {
        self.cpu.store(cpu, Relaxed);
    }
    /// Set the clock.
    pub fn set_now(&self, ns: u64) {
        self.now.store(ns, Relaxed);
    }
    /// Advance the clock.
    pub fn advance(&self, ns: u64) {
        self.now.fetch_add(ns, Relaxed);
    }
}

impl Platform for ManualPlatform {
    fn current_cpu(&self) -> usize {
        self.cpu.load(Relaxed)
    }
    fn now_ns(&self) -> u64 {
        self.now.load(Relaxed)
    }
}
