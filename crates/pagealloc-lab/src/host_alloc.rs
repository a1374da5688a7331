//! The `pagealloc` binary's global allocator: the system allocator, except that blocks
//! of [`MIN_POOLED`] bytes or more are private anonymous mappings that are kept when
//! freed and handed out again to the next request of the same length.
//!
//! Why: a simulated machine's frame metadata is one zeroed block of 16 bytes per frame
//! (2 GiB for spr-2s-224's 512 GiB), which the core's build touches at every block head
//! (one 4 KiB host page in four). From a fresh mapping each touched page is a host page
//! fault (about 2.8 µs here, 83 % of a kbuild run's faults, about a fifth of its CPU
//! time); `compare` and `calibrate` build one such allocator per preset. A kept mapping
//! is zeroed again only where it holds pages (`/proc/self/pagemap`: present or swapped
//! out), a `memset` per page instead of a fault. Every other page of a private anonymous
//! mapping reads as zero, so `alloc_zeroed` keeps its contract and the simulation its
//! results (nothing in it depends on host addresses). Where the page map cannot be read,
//! a kept mapping is unmapped and a fresh one mapped.
//!
//! At most [`SLOTS`] mappings are kept (the oldest is unmapped first); what they hold
//! stays resident until the process exits or reuses them. Off Linux every request goes
//! to the system allocator.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks at least this long are pooled mappings (smaller ones: the system allocator).
pub const MIN_POOLED: usize = 64 << 20;
/// How many freed mappings are kept.
pub const SLOTS: usize = 8;

/// The global allocator of the `pagealloc` binary (`src/main.rs`); see the module doc.
#[derive(Debug, Default)]
pub struct PoolingAlloc;

impl PoolingAlloc {
    /// Whether a block of `layout` is a pooled mapping. Mappings are page aligned, so
    /// alignments up to 4096 are served; larger ones go to the system allocator.
    #[inline]
    fn pooled(layout: Layout) -> bool {
        cfg!(target_os = "linux") && layout.size() >= MIN_POOLED && layout.align() <= 4096
    }
}

// SAFETY: every block of `layout.size() >= MIN_POOLED` and `align <= 4096` is a whole
// mapping of `pool::len(size)` bytes from `pool::take`, page aligned (so aligned for any
// such `layout`), zeroed where `alloc_zeroed` asked, and given back to `pool::put` only by
// `dealloc`/`realloc` with the same layout, which the caller guarantees; every other block
// is the system allocator's, with the same calls it would get without this wrapper.
// `pooled` depends on the layout only, so a block's alloc and dealloc agree on its owner.
unsafe impl GlobalAlloc for PoolingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::pooled(layout) {
            return pool::take(layout.size(), false);
        }
        // SAFETY: forwarded with the caller's guarantees (non-zero size).
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::pooled(layout) {
            return pool::take(layout.size(), true);
        }
        // SAFETY: forwarded with the caller's guarantees (non-zero size).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if Self::pooled(layout) {
            // SAFETY: the caller guarantees `ptr` came from this allocator with `layout`,
            // so (`pooled`) it is a whole pooled mapping of that size, no longer used.
            unsafe { pool::put(ptr, layout.size()) };
            return;
        }
        // SAFETY: forwarded: `ptr` is the system allocator's block of `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (Self::pooled(layout), Self::pooled(new)) {
            // SAFETY: forwarded: `ptr` is the system allocator's block of `layout`.
            (false, false) => return unsafe { System.realloc(ptr, layout, new_size) },
            // SAFETY: `ptr` is a whole pooled mapping for `layout.size()` bytes (the
            // caller's guarantee and `pooled`), which the caller gives up.
            (true, true) => return unsafe { pool::resize(ptr, layout.size(), new_size) },
            _ => {}
        }
        // SAFETY: `new` has a non-zero size (the caller's guarantee for `new_size`).
        let p = unsafe { self.alloc(new) };
        if !p.is_null() {
            // SAFETY: both blocks are live, distinct, and at least the copied length long;
            // `ptr` is then freed with the layout it was allocated with.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        p
    }
}

#[cfg(target_os = "linux")]
mod pool {
    use super::SLOTS;
    use std::sync::Mutex;

    /// Kept mappings: (address, length in bytes), oldest first; 0 = empty.
    static KEPT: Mutex<[(usize, usize); SLOTS]> = Mutex::new([(0, 0); SLOTS]);

    fn page() -> usize {
        // SAFETY: sysconf reads a constant of the system; no memory is passed.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(p)
            .ok()
            .filter(|&p| p >= 4096)
            .unwrap_or(4096)
    }

    /// A request's mapping length: `size` rounded up to whole host pages.
    fn len(size: usize) -> Option<usize> {
        let p = page();
        size.checked_add(p - 1).map(|s| s / p * p)
    }

    fn kept() -> std::sync::MutexGuard<'static, [(usize, usize); SLOTS]> {
        KEPT.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A mapping for `size` bytes, all zero if `zero`; null if none can be had.
    pub(super) fn take(size: usize, zero: bool) -> *mut u8 {
        let Some(len) = len(size) else {
            return std::ptr::null_mut();
        };
        let found = {
            let mut k = kept();
            k.iter_mut()
                .find(|s| s.0 != 0 && s.1 == len)
                .map(|s| std::mem::take(s).0)
        };
        if let Some(addr) = found {
            // SAFETY: `addr` is a kept mapping of `len` bytes, taken out of the pool under
            // its lock, so no one else holds it.
            if !zero || unsafe { rezero(addr as *mut u8, len) } {
                return addr as *mut u8;
            }
            // SAFETY: as above; it could not be zeroed, so it is given back to the OS.
            unsafe { libc::munmap(addr as *mut libc::c_void, len) };
        }
        // SAFETY: a fresh private anonymous mapping; no existing memory is named.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }

    /// Keeps the mapping `ptr` of a `size`-byte request, unmapping the oldest kept one if
    /// the pool is full.
    ///
    /// # Safety
    /// `ptr` is a whole mapping from [`take`] for `size`, which nobody uses any more.
    pub(super) unsafe fn put(ptr: *mut u8, size: usize) {
        let Some(len) = len(size) else { return };
        let evicted = {
            let mut k = kept();
            if let Some(s) = k.iter_mut().find(|s| s.0 == 0) {
                *s = (ptr as usize, len);
                (0, 0)
            } else {
                let out = k[0];
                k.copy_within(1.., 0);
                k[SLOTS - 1] = (ptr as usize, len);
                out
            }
        };
        if evicted.0 != 0 {
            // SAFETY: the evicted mapping was kept (so nobody uses it) and is out of the pool.
            unsafe { libc::munmap(evicted.0 as *mut libc::c_void, evicted.1) };
        }
    }

    /// Moves the mapping `ptr` of a `size`-byte request to one for `new_size` bytes
    /// (`mremap`, which may move it); null, leaving `ptr` as it was, if it cannot.
    ///
    /// # Safety
    /// `ptr` is a whole mapping from [`take`] for `size`, which the caller gives up.
    pub(super) unsafe fn resize(ptr: *mut u8, size: usize, new_size: usize) -> *mut u8 {
        let (Some(old), Some(new)) = (len(size), len(new_size)) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `[ptr, ptr + old)` is exactly the caller's mapping; on failure it is
        // left as it was.
        let p = unsafe { libc::mremap(ptr.cast(), old, new, libc::MREMAP_MAYMOVE) };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }

    /// Zeroes every page of the mapping `[p, p + len)` that holds memory (present or
    /// swapped out, per `/proc/self/pagemap`); the others read as zero. False if the page
    /// map could not be read (then nothing is promised about the contents).
    ///
    /// # Safety
    /// `[p, p + len)` is a whole private anonymous mapping owned by the caller alone.
    unsafe fn rezero(p: *mut u8, len: usize) -> bool {
        const PRESENT: u64 = 1 << 63;
        const SWAPPED: u64 = 1 << 62;
        let page = page();
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe {
            libc::open(
                c"/proc/self/pagemap".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return false;
        }
        let pages = len / page;
        let first = p as usize / page;
        let mut buf = [0u64; 512];
        let mut ok = true;
        let mut done = 0;
        // A run of pages to zero: [run, i).
        let mut run: Option<usize> = None;
        let flush = |run: &mut Option<usize>, end: usize| {
            if let Some(s) = run.take() {
                // SAFETY: pages `s..end` lie inside the caller's mapping (end <= pages).
                unsafe { std::ptr::write_bytes(p.add(s * page), 0, (end - s) * page) };
            }
        };
        while done < pages {
            let n = (pages - done).min(buf.len());
            let off = ((first + done) * 8) as libc::off_t;
            // SAFETY: `buf` is valid for `n * 8` bytes of writes; `fd` is open.
            let got = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), n * 8, off) };
            if got != (n * 8) as isize {
                ok = false;
                break;
            }
            for (j, &e) in buf[..n].iter().enumerate() {
                let i = done + j;
                if e & (PRESENT | SWAPPED) != 0 {
                    run.get_or_insert(i);
                } else {
                    flush(&mut run, i);
                }
            }
            done += n;
        }
        if ok {
            flush(&mut run, pages);
        }
        // SAFETY: `fd` was opened above and is closed once.
        unsafe { libc::close(fd) };
        ok
    }
}

#[cfg(not(target_os = "linux"))]
mod pool {
    pub(super) fn take(_: usize, _: bool) -> *mut u8 {
        unreachable!("pooled() is false off Linux")
    }
    pub(super) unsafe fn put(_: *mut u8, _: usize) {
        unreachable!("pooled() is false off Linux")
    }
    pub(super) unsafe fn resize(_: *mut u8, _: usize, _: usize) -> *mut u8 {
        unreachable!("pooled() is false off Linux")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept mapping comes back for the next request of its length, zeroed where it was
    /// written; a plain `alloc` of it keeps its bytes.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_freed_mapping_is_reused_and_zeroed() {
        let a = PoolingAlloc;
        let layout = Layout::from_size_align(MIN_POOLED + 12_345, 16).unwrap();
        // SAFETY: non-zero size; every block is freed with its layout below.
        unsafe {
            let p = a.alloc_zeroed(layout);
            assert!(!p.is_null());
            for off in (0..layout.size()).step_by(3 * 4096 + 8) {
                assert_eq!(*p.add(off), 0);
                *p.add(off) = 0xa5;
            }
            *p.add(layout.size() - 1) = 0x5a;
            a.dealloc(p, layout);
            let q = a.alloc_zeroed(layout);
            assert_eq!(q, p, "the kept mapping is reused");
            for off in (0..layout.size()).step_by(4096 / 2) {
                assert_eq!(*q.add(off), 0, "byte {off}");
            }
            assert_eq!(*q.add(layout.size() - 1), 0);
            *q.add(4096) = 7;
            a.dealloc(q, layout);
            let r = a.alloc(layout);
            assert_eq!(r, p);
            assert_eq!(*r.add(4096), 7, "alloc does not zero");
            let big = a.realloc(r, layout, 2 * MIN_POOLED);
            assert_eq!(*big.add(4096), 7, "a grown block keeps its bytes");
            let grown = Layout::from_size_align(2 * MIN_POOLED, 16).unwrap();
            let s = a.realloc(big, grown, 100);
            assert_eq!((*s.add(0), *s.add(99)), (0, 0));
            a.dealloc(s, Layout::from_size_align(100, 16).unwrap());
        }
    }
}
