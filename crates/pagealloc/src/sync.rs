//! The spin lock used for per-CPU pagesets and zones, and the one place where `cfg(loom)`
//! swaps primitives.
//!
//! # Design
//! The kernel protects a pageset with a spinlock taken by `trylock` on the fast paths (a
//! failed trylock means an interrupt or a remote drain holds it, and the caller falls back
//! to the zone) and a zone with a spinlock taken with interrupts off. User space has no
//! interrupts to disable, so a plain test-and-test-and-set lock with bounded spinning and
//! then yielding is the right shape: hold times are short (one refill or drain), and a
//! preempted holder must not make waiters burn a whole time slice.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic;
#[cfg(loom)]
pub(crate) use loom::sync::atomic;

use core::fmt;
use core::ops::{Deref, DerefMut};

#[cfg(not(loom))]
use core::cell::UnsafeCell;
#[cfg(not(loom))]
use core::sync::atomic::{AtomicBool, Ordering};

/// A mutual-exclusion spin lock with `try_lock`.
///
/// # Safety contract
/// `data` is only reached through a [`SpinGuard`], and a guard exists only while `locked`
/// is true and was set by the thread that created the guard (acquire on lock, release on
/// unlock), so at most one `&mut T` exists at a time.
pub struct SpinLock<T> {
    #[cfg(not(loom))]
    locked: AtomicBool,
    #[cfg(not(loom))]
    data: UnsafeCell<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

// SAFETY: the lock hands out `&mut T` to one thread at a time (see the type's contract),
// so sharing the lock between threads is sound when `T` may be sent between them.
#[cfg(not(loom))]
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: moving the lock moves the `T` it owns; requires `T: Send`.
#[cfg(not(loom))]
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A new unlocked lock around `value`.
    pub fn new(value: T) -> Self {
        SpinLock {
            #[cfg(not(loom))]
            locked: AtomicBool::new(false),
            #[cfg(not(loom))]
            data: UnsafeCell::new(value),
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
        }
    }

    /// Take the lock if it is free, without waiting.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        #[cfg(not(loom))]
        {
            if self
                .locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                Some(SpinGuard { lock: self })
            } else {
                None
            }
        }
        #[cfg(loom)]
        {
            self.inner.try_lock().ok().map(|g| SpinGuard { g })
        }
    }

    /// Take the lock, waiting as long as needed.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        match self.try_lock() {
            Some(g) => g,
            None => self.lock_slow(),
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) -> SpinGuard<'_, T> {
        #[cfg(not(loom))]
        {
            let mut spins = 0u32;
            loop {
                while self.locked.load(Ordering::Relaxed) {
                    spins += 1;
                    backoff(spins);
                }
                if let Some(g) = self.try_lock() {
                    return g;
                }
            }
        }
        #[cfg(loom)]
        {
            SpinGuard {
                g: self.inner.lock().unwrap(),
            }
        }
    }

    /// True if some thread holds the lock right now (a racy hint).
    pub fn is_locked(&self) -> bool {
        #[cfg(not(loom))]
        {
            self.locked.load(Ordering::Relaxed)
        }
        #[cfg(loom)]
        {
            self.inner.try_lock().is_err()
        }
    }

    /// Direct access through exclusive ownership of the lock.
    pub fn get_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        {
            self.data.get_mut()
        }
        #[cfg(loom)]
        {
            self.inner.get_mut().unwrap()
        }
    }
}

/// One round of a wait loop's backoff, `spins` the rounds waited so far: spin for the
/// first 128 rounds, then yield the thread (std; no_std keeps spinning). Under loom every
/// round yields to the model's scheduler, so a waiter never spins through the model.
/// Used by the spinlock's slow path and by waits on a cluster fix-up (`cluster.rs`).
#[inline]
pub(crate) fn backoff(spins: u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(all(not(loom), feature = "std"))]
    {
        if spins < 128 {
            core::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    #[cfg(all(not(loom), not(feature = "std")))]
    {
        let _ = spins;
        core::hint::spin_loop();
    }
}

impl<T> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpinLock")
            .field("locked", &self.is_locked())
            .finish_non_exhaustive()
    }
}

/// Proof that the lock is held; unlocks on drop.
pub struct SpinGuard<'a, T> {
    #[cfg(not(loom))]
    lock: &'a SpinLock<T>,
    #[cfg(loom)]
    g: loom::sync::MutexGuard<'a, T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        #[cfg(not(loom))]
        {
            // SAFETY: a guard exists only while this thread holds `locked` (type contract),
            // so no `&mut T` can exist elsewhere for the guard's lifetime.
            unsafe { &*self.lock.data.get() }
        }
        #[cfg(loom)]
        {
            &self.g
        }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        {
            // SAFETY: as in `deref`; `&mut self` makes this the only borrow of the guard.
            unsafe { &mut *self.lock.data.get() }
        }
        #[cfg(loom)]
        {
            &mut self.g
        }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(not(loom))]
        self.lock.locked.store(false, Ordering::Release);
    }
}

impl<T> fmt::Debug for SpinGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SpinGuard")
    }
}

/// A counter cell written only by the holder of one lock (or one owner) and read by
/// anyone: a relaxed load and store, no read-modify-write, so it costs a plain add on
/// x86 and a concurrent reader sees a torn-free, possibly stale, value.
#[derive(Default)]
pub struct StatCell(atomic::AtomicU64);

impl StatCell {
    /// A zero counter.
    pub fn new() -> Self {
        StatCell(atomic::AtomicU64::new(0))
    }
    /// Add `v`; the caller holds the lock that owns this cell.
    #[inline]
    pub(crate) fn add(&self, v: u64) {
        let o = self.0.load(atomic::Ordering::Relaxed);
        self.0.store(o.wrapping_add(v), atomic::Ordering::Relaxed);
    }
    /// Raise to `v` if larger; the caller holds the lock that owns this cell.
    #[inline]
    pub fn max(&self, v: u64) {
        if v > self.0.load(atomic::Ordering::Relaxed) {
            self.0.store(v, atomic::Ordering::Relaxed);
        }
    }
    /// Add `v` from any thread (an atomic read-modify-write).
    #[inline]
    pub fn add_shared(&self, v: u64) {
        self.0.fetch_add(v, atomic::Ordering::Relaxed);
    }
    /// Current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(atomic::Ordering::Relaxed)
    }
    /// Reset to zero.
    pub fn reset(&self) {
        self.0.store(0, atomic::Ordering::Relaxed);
    }
}

impl fmt::Debug for StatCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// A hint that the cache line holding `*p` will be used soon: x86-64's `prefetcht0`,
/// nothing elsewhere. Reads no value into the program and cannot fault.
#[inline(always)]
pub(crate) fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has, and a prefetch only
    // hints the cache: it reads nothing into the program and cannot fault (`p` is a live
    // reference in any case). It takes no lock because it is not an access: whatever lock
    // guards `*p` still guards every real read and write of it.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (p as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
