//! The kernel's spin lock.

use core::sync::atomic::{AtomicBool, Ordering::*};

/// A spin lock for the kernel's own shared data (never taken in the interrupt handler).
pub(crate) struct Spin<T> {
    held: AtomicBool,
    v: core::cell::UnsafeCell<T>,
}

// SAFETY: `with` hands out the `&mut T` only while `held` is owned by the caller.
unsafe impl<T: Send> Sync for Spin<T> {}

impl<T> Spin<T> {
    pub(crate) const fn new(v: T) -> Self {
        Spin {
            held: AtomicBool::new(false),
            v: core::cell::UnsafeCell::new(v),
        }
    }
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        while self
            .held
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        // SAFETY: `held` is ours (acquired above, released below): no other `&mut T`.
        let r = f(unsafe { &mut *self.v.get() });
        self.held.store(false, Release);
        r
    }
}
