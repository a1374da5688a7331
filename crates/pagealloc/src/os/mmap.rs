//! Anonymous private memory regions whose 4 KiB frames have real addresses.
//!
//! A [`MmapRegion`] is the backing store a page-frame allocator hands out:
//! frame `i` lives at `as_ptr() + i * 4096`. The region can ask for huge
//! pages either through transparent huge pages ([`HugePages::Madvise`]) or
//! hugetlbfs ([`HugePages::HugeTlb`]), and can fill frames with a poison
//! byte and later check it, to catch use-after-free of freed frames.

use core::mem::size_of;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicUsize, Ordering};
use std::io;

/// Size of one frame (a base page).
const FRAME_SIZE: usize = 4096;
/// Size of a PMD-level huge page on x86-64 and arm64 with 4 KiB pages.
const HUGE_PAGE_SIZE: usize = 2 << 20;

/// Which huge-page mechanism backs a [`MmapRegion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HugePages {
    /// Base pages only.
    #[default]
    None,
    /// Transparent huge pages: the start is aligned to 2 MiB and the range
    /// is marked `MADV_HUGEPAGE` (ignored if the kernel lacks THP).
    Madvise,
    /// hugetlbfs pages (`MAP_HUGETLB`); the length is rounded up to 2 MiB.
    /// Fails unless the host has huge pages reserved.
    HugeTlb,
}

/// An anonymous, private, read-write mapping, unmapped on drop.
///
/// `poison` and `check_poison` access memory with relaxed atomic word
/// operations, so calling them concurrently from safe code never races.
/// Code writing through [`MmapRegion::frame_ptr`] must itself make sure it
/// does not race with them or with other writers of the same frames.
#[derive(Debug)]
pub struct MmapRegion {
    /// Start of the mapping (page aligned; dangling when `len == 0`).
    ptr: NonNull<u8>,
    /// Length in bytes, a multiple of the frame size.
    len: usize,
}

// SAFETY: the region exclusively owns its mapping, which is plain memory not
// tied to the thread that created it; moving the owner to another thread and
// unmapping it there is fine.
unsafe impl Send for MmapRegion {}
// SAFETY: every `&self` method either returns a raw pointer (dereferencing it
// is the caller's `unsafe` responsibility) or accesses the memory only with
// atomic operations, so sharing `&MmapRegion` between threads cannot cause a
// data race from safe code.
unsafe impl Sync for MmapRegion {}

impl MmapRegion {
    /// Maps `len` bytes, rounded up to a whole number of 4 KiB frames (to
    /// 2 MiB for [`HugePages::HugeTlb`]). The memory is zero-filled.
    /// `len == 0` gives an empty region that maps nothing.
    ///
    /// Errors are those of `mmap(2)` / `madvise(2)`; `InvalidInput` if the
    /// rounded length overflows; `Unsupported` for `HugeTlb` off Linux.
    pub fn new(len: usize, huge: HugePages) -> io::Result<Self> {
        let len = round_up(len, FRAME_SIZE)?;
        if len == 0 {
            return Ok(Self {
                ptr: NonNull::dangling(),
                len: 0,
            });
        }
        match huge {
            HugePages::None => Ok(Self {
                ptr: map(len, 0)?,
                len,
            }),
            HugePages::HugeTlb => {
                #[cfg(target_os = "linux")]
                {
                    let len = round_up(len, HUGE_PAGE_SIZE)?;
                    Ok(Self {
                        ptr: map(len, libc::MAP_HUGETLB)?,
                        len,
                    })
                }
                #[cfg(not(target_os = "linux"))]
                {
                    Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "MAP_HUGETLB is Linux-only",
                    ))
                }
            }
            HugePages::Madvise => Self::new_thp(len),
        }
    }

    /// A 2 MiB-aligned mapping of `len` bytes marked `MADV_HUGEPAGE`.
    fn new_thp(len: usize) -> io::Result<Self> {
        // Over-map so that a 2 MiB-aligned start with `len` bytes after it
        // fits, then give back the head and the tail.
        let map_len = len
            .checked_add(HUGE_PAGE_SIZE - FRAME_SIZE)
            .ok_or_else(too_long)?;
        let base = map(map_len, 0)?;
        let addr = base.as_ptr() as usize;
        let head = round_up(addr, HUGE_PAGE_SIZE).map_or(0, |aligned| aligned - addr);
        let tail = map_len - head - len;
        let start = base.as_ptr().wrapping_add(head);
        unmap(base.as_ptr(), head);
        unmap(start.wrapping_add(len), tail);
        let region = Self {
            // `start` lies inside a successful mapping, so it is not null.
            ptr: NonNull::new(start).ok_or_else(null_mapping)?,
            len,
        };

        #[cfg(target_os = "linux")]
        {
            // SAFETY: [ptr, ptr + len) is exactly the mapping owned by
            // `region`; MADV_HUGEPAGE only changes the huge-page policy of
            // the range and never its contents or validity.
            let rc = unsafe { libc::madvise(region.ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
            if rc != 0 {
                let err = io::Error::last_os_error();
                // EINVAL: kernel built without transparent huge pages.
                if err.raw_os_error() != Some(libc::EINVAL) {
                    return Err(err); // `region` unmaps on drop
                }
            }
        }
        Ok(region)
    }

    /// Start of the region (4 KiB aligned; 2 MiB aligned for
    /// [`HugePages::Madvise`] and [`HugePages::HugeTlb`]). Dangling if the
    /// region is empty. Valid for reads and writes of [`len`](Self::len)
    /// bytes until the region is dropped.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the region in bytes (a multiple of 4096).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region maps nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of 4 KiB frames in the region.
    fn frames(&self) -> u64 {
        (self.len / FRAME_SIZE) as u64
    }

    /// Address of 4 KiB frame `index`, or `None` past the end of the region.
    /// The pointer is valid for 4096 bytes until the region is dropped.
    pub fn frame_ptr(&self, index: u64) -> Option<*mut u8> {
        (index < self.frames()).then(|| self.ptr.as_ptr().wrapping_add(index as usize * FRAME_SIZE))
    }

    /// Fills frames `index .. index + pages` with `byte`.
    ///
    /// # Panics
    ///
    /// If the range does not lie within the region.
    pub fn poison(&self, index: u64, pages: u64, byte: u8) {
        let word = usize::from_ne_bytes([byte; size_of::<usize>()]);
        for w in self.words(index, pages) {
            w.store(word, Ordering::Relaxed);
        }
    }

    /// Whether every byte of frames `index .. index + pages` equals `byte`.
    ///
    /// # Panics
    ///
    /// If the range does not lie within the region.
    pub fn check_poison(&self, index: u64, pages: u64, byte: u8) -> bool {
        let word = usize::from_ne_bytes([byte; size_of::<usize>()]);
        self.words(index, pages)
            .iter()
            .all(|w| w.load(Ordering::Relaxed) == word)
    }

    /// Frames `index .. index + pages` as atomic words; panics if out of range.
    fn words(&self, index: u64, pages: u64) -> &[AtomicUsize] {
        let frames = self.frames();
        match index.checked_add(pages) {
            Some(end) if end <= frames => {}
            _ => panic!("frames {index}..{index}+{pages} out of range of a {frames}-frame region"),
        }
        if pages == 0 {
            return &[];
        }
        // Both fit in usize: index + pages <= frames = len / FRAME_SIZE.
        let start = index as usize * FRAME_SIZE;
        let words = pages as usize * (FRAME_SIZE / size_of::<usize>());
        // SAFETY: the check above puts [start, start + pages * FRAME_SIZE)
        // inside the mapping, which is readable and writable and stays
        // mapped while `&self` is borrowed (it is unmapped only in `drop`).
        // The mapping is page aligned, so `start` is aligned for
        // `AtomicUsize`, which has the size and alignment of `usize` and
        // accepts every bit pattern. No `&`/`&mut` to this memory exists
        // other than such atomic slices, which allow shared mutation.
        unsafe {
            core::slice::from_raw_parts(self.ptr.as_ptr().add(start).cast::<AtomicUsize>(), words)
        }
    }
}

impl Drop for MmapRegion {
    fn drop(&mut self) {
        unmap(self.ptr.as_ptr(), self.len);
    }
}

/// `mmap` an anonymous private read-write region of `len` (non-zero) bytes.
fn map(len: usize, extra_flags: libc::c_int) -> io::Result<NonNull<u8>> {
    // SAFETY: a new anonymous private mapping with a null address hint (no
    // MAP_FIXED) cannot overlap or alias any existing allocation; the kernel
    // chooses a free range.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra_flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(null_mapping)
}

/// `munmap` `[ptr, ptr + len)`, which must be a page-aligned part of a
/// mapping this module made and nothing else still uses; no-op if `len == 0`.
fn unmap(ptr: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: callers pass a page-aligned range inside a mapping created by
    // `map` that no live reference or region still points into: the trimmed
    // head/tail of an over-mapping, or a dropped region's whole mapping
    // (`words` slices borrow the region, so none outlive it).
    let rc = unsafe { libc::munmap(ptr.cast(), len) };
    debug_assert_eq!(rc, 0, "munmap: {}", io::Error::last_os_error());
}

/// `n` rounded up to a multiple of `align` (a power of two).
fn round_up(n: usize, align: usize) -> io::Result<usize> {
    n.checked_add(align - 1)
        .map(|n| n & !(align - 1))
        .ok_or_else(too_long)
}

fn null_mapping() -> io::Error {
    io::Error::other("mmap returned a null address")
}

fn too_long() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "mapping length overflows")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// Write a distinct value at the start and end of every frame, read them back,
    /// then poison and check.
    fn exercise(r: &MmapRegion) {
        let frames = (r.len() / FRAME_SIZE) as u64;
        assert_eq!(r.frame_ptr(frames), None);
        for i in 0..frames {
            let p = r.frame_ptr(i).unwrap();
            assert_eq!(p as usize, r.as_ptr() as usize + i as usize * FRAME_SIZE);
            // SAFETY: `p` is frame `i` of the live region, valid for 4096 bytes;
            // no other thread touches it.
            unsafe {
                assert_eq!(*p, 0, "fresh anonymous memory is zeroed");
                p.cast::<u64>().write(i ^ 0xdead_beef);
                p.add(FRAME_SIZE - 1).write(i as u8);
            }
        }
        for i in 0..frames {
            let p = r.frame_ptr(i).unwrap();
            // SAFETY: as above.
            unsafe {
                assert_eq!(p.cast::<u64>().read(), i ^ 0xdead_beef);
                assert_eq!(p.add(FRAME_SIZE - 1).read(), i as u8);
            }
        }

        r.poison(10, 5, 0xAA);
        assert!(r.check_poison(10, 5, 0xAA));
        assert!(r.check_poison(12, 1, 0xAA));
        assert!(!r.check_poison(10, 5, 0x55));
        assert!(!r.check_poison(9, 2, 0xAA));
        assert!(!r.check_poison(14, 2, 0xAA));
        assert!(r.check_poison(0, 0, 0xAA));
        // A stray write into a poisoned frame is detected.
        let p = r.frame_ptr(13).unwrap();
        // SAFETY: frame 13 of the live region; no concurrent access.
        unsafe { p.add(1234).write(0) };
        assert!(!r.check_poison(10, 5, 0xAA));
        assert!(r.check_poison(10, 3, 0xAA));
        r.poison(0, frames, 0x6B);
        assert!(r.check_poison(0, frames, 0x6B));
    }

    #[test]
    fn plain_one_mib() {
        let r = MmapRegion::new(MIB, HugePages::None).unwrap();
        assert_eq!(r.len(), MIB);
        assert!(!r.is_empty());
        assert_eq!(r.as_ptr() as usize % FRAME_SIZE, 0);
        exercise(&r);
    }

    #[test]
    fn madvise_one_mib_is_2mib_aligned() {
        let r = MmapRegion::new(MIB, HugePages::Madvise).unwrap();
        assert_eq!(r.len(), MIB);
        assert_eq!(r.as_ptr() as usize % HUGE_PAGE_SIZE, 0);
        exercise(&r);
        let r = MmapRegion::new(3 * MIB + 5, HugePages::Madvise).unwrap();
        assert_eq!(r.len(), 3 * MIB + FRAME_SIZE);
        assert_eq!(r.as_ptr() as usize % HUGE_PAGE_SIZE, 0);
        exercise(&r);
    }

    #[test]
    fn hugetlb_works_or_fails_cleanly() {
        match MmapRegion::new(MIB, HugePages::HugeTlb) {
            Ok(r) => {
                assert_eq!(r.len(), HUGE_PAGE_SIZE);
                assert_eq!(r.as_ptr() as usize % HUGE_PAGE_SIZE, 0);
                exercise(&r);
            }
            Err(e) => std::eprintln!("HugeTlb unavailable here: {e}"),
        }
    }

    #[test]
    fn lengths_round_up() {
        assert_eq!(
            MmapRegion::new(1, HugePages::None).unwrap().len(),
            FRAME_SIZE
        );
        assert_eq!(
            MmapRegion::new(FRAME_SIZE + 1, HugePages::None)
                .unwrap()
                .len(),
            2 * FRAME_SIZE
        );
        for huge in [HugePages::None, HugePages::Madvise, HugePages::HugeTlb] {
            let r = MmapRegion::new(0, huge).unwrap();
            assert!(r.is_empty());
            assert_eq!(r.frame_ptr(0), None);
            assert!(r.check_poison(0, 0, 1));
        }
        assert_eq!(
            MmapRegion::new(usize::MAX, HugePages::None)
                .unwrap_err()
                .kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(HugePages::default(), HugePages::None);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn poison_out_of_range_panics() {
        let r = MmapRegion::new(4 * FRAME_SIZE, HugePages::None).unwrap();
        r.poison(3, 2, 0xAA);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn check_poison_overflow_panics() {
        let r = MmapRegion::new(4 * FRAME_SIZE, HugePages::None).unwrap();
        r.check_poison(u64::MAX, 2, 0xAA);
    }

    #[test]
    fn shared_across_threads() {
        let r = MmapRegion::new(MIB, HugePages::None).unwrap();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let r = &r;
                s.spawn(move || {
                    for _ in 0..10 {
                        r.poison(t * 64, 64, t as u8 + 1);
                        assert!(r.check_poison(t * 64, 64, t as u8 + 1));
                        // Overlapping reads of another thread's range are fine too.
                        let _ = r.check_poison(((t + 1) % 4) * 64, 64, 0);
                    }
                });
            }
        });
        let r = std::thread::spawn(move || {
            assert!(r.check_poison(192, 64, 4));
            r
        })
        .join()
        .unwrap();
        drop(r);
    }
}
