//! # pagealloc-ffi: the C ABI of pagealloc
//!
//! A static (`libpagealloc_ffi.a`) and a shared (`libpagealloc_ffi.so`) library and the
//! header `include/pagealloc.h`, generated from this file by cbindgen and committed.
//!
//! ```c
//! int err;
//! pagealloc_t *pa = pagealloc_create(64 << 20, "linux-6.12", &err);
//! void *page;
//! if (pagealloc_alloc(pa, 0, PAGEALLOC_MOVABLE, &page) == PAGEALLOC_OK) {
//!     memset(page, 0, 4096);
//!     pagealloc_free(pa, page, 0);
//! }
//! pagealloc_destroy(pa);
//! ```
//!
//! # Design
//! An allocator is created over a fresh anonymous mapping of the requested size, one
//! NUMA node, one pageset per configured CPU of the host; the calling thread's CPU
//! (`sched_getcpu`) picks the pageset. Frames are handed out as addresses inside the
//! mapping. Every function is thread-safe except `pagealloc_destroy`, which must be the
//! last call on its allocator. Errors are negative `PAGEALLOC_E*` codes with a message
//! from [`pagealloc_strerror`]; frees are checked (a double free, a foreign pointer or a
//! wrong order is refused with a code and changes nothing). A panic never crosses the
//! boundary: it becomes `PAGEALLOC_EINTERNAL`.

#![warn(missing_docs)]
// C names for the C types.
#![allow(non_camel_case_types)]

use pagealloc::os::mmap::HugePages;
use pagealloc::{
    AllocError, Allocator, Config, Frame, FreeError, Gfp, Layout, MigrateType, PAGE_SIZE,
};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// Success.
pub const PAGEALLOC_OK: c_int = 0;
/// A required pointer argument was NULL.
pub const PAGEALLOC_ENULL: c_int = -1;
/// An argument is invalid: size too small or too large, unknown preset or config key,
/// unknown migratetype, a pointer that is not page aligned.
pub const PAGEALLOC_EINVAL: c_int = -2;
/// Out of memory: no zone could satisfy the request within its watermarks.
pub const PAGEALLOC_ENOMEM: c_int = -3;
/// The order is above `PAGEALLOC_MAX_ORDER`.
pub const PAGEALLOC_EORDER: c_int = -4;
/// Double free: the address is not the start of an allocated block (freed already,
/// never handed out, or inside a block).
pub const PAGEALLOC_EDOUBLEFREE: c_int = -5;
/// The address does not belong to this allocator.
pub const PAGEALLOC_EFOREIGN: c_int = -6;
/// The block was allocated with another order than the one given to free it.
pub const PAGEALLOC_EORDERMISMATCH: c_int = -7;
/// Mapping the memory failed (see errno).
pub const PAGEALLOC_EMMAP: c_int = -8;
/// An invariant check (`pagealloc_validate`) failed: the allocator is corrupt.
pub const PAGEALLOC_ECORRUPT: c_int = -9;
/// An internal error (a caught panic); please report it.
pub const PAGEALLOC_EINTERNAL: c_int = -10;

/// Bytes in one page frame.
pub const PAGEALLOC_PAGE_SIZE: usize = 4096;
/// Largest order: blocks of 2^10 pages (4 MiB).
pub const PAGEALLOC_MAX_ORDER: u32 = 10;

/// Migratetype of a request: kernel-style unmovable memory.
pub const PAGEALLOC_UNMOVABLE: u32 = 0;
/// Migratetype of a request: movable (user) memory.
pub const PAGEALLOC_MOVABLE: u32 = 1;
/// Migratetype of a request: reclaimable (cache) memory.
pub const PAGEALLOC_RECLAIMABLE: u32 = 2;
/// Flag OR-ed into the migratetype: a high-priority atomic request (`GFP_ATOMIC`) that
/// may dip into the reserve below the min watermark.
pub const PAGEALLOC_ATOMIC: u32 = 1 << 8;

// The header needs literals; keep them equal to the core's values.
const _: () = {
    assert!(PAGEALLOC_PAGE_SIZE == PAGE_SIZE);
    assert!(PAGEALLOC_MAX_ORDER == pagealloc::MAX_ORDER as u32);
    assert!(PAGEALLOC_UNMOVABLE == MigrateType::Unmovable as u32);
    assert!(PAGEALLOC_MOVABLE == MigrateType::Movable as u32);
    assert!(PAGEALLOC_RECLAIMABLE == MigrateType::Reclaimable as u32);
};

/// An allocator (opaque).
#[derive(Debug)]
pub struct pagealloc_t {
    a: Allocator,
}

/// Counters, summed over CPUs and zones (a subset of `pagealloc_vmstat`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pagealloc_counters_t {
    /// Pages allocated.
    pub pgalloc: u64,
    /// Pages freed.
    pub pgfree: u64,
    /// Pages allocated from the zones directly or by refills (not from a per-CPU cache).
    pub alloc_zone: u64,
    /// Frees that triggered a free_high drain.
    pub free_high: u64,
    /// Refills of a per-CPU cache from a zone.
    pub pcp_refill: u64,
    /// Pages moved by refills.
    pub pcp_refill_pages: u64,
    /// Drains of a per-CPU cache to a zone.
    pub pcp_drain: u64,
    /// Pages moved by drains.
    pub pcp_drain_pages: u64,
    /// Zone-lock acquisitions.
    pub zone_lock: u64,
    /// Zone-lock acquisitions that had to wait.
    pub zone_lock_contended: u64,
    /// Nanoseconds spent waiting for zone locks.
    pub zone_lock_wait_ns: u64,
    /// Nanoseconds zone locks were held (0 when the config has `lock_stat=off`, as `fast`).
    pub zone_lock_hold_ns: u64,
    /// Allocations that failed with `PAGEALLOC_ENOMEM`.
    pub alloc_fail: u64,
    /// Pages free in the zones' buddy lists.
    pub free_pages: u64,
    /// Pages cached in per-CPU caches.
    pub pcp_pages: u64,
    /// Pages managed.
    pub managed_pages: u64,
}

fn guard<T>(fail: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fail)
}

/// More pointers than any array can hold (`n * sizeof(void *)` past `PTRDIFF_MAX`): no
/// caller can own such an array, so the count is refused before it is used.
fn too_many_pointers(n: usize) -> bool {
    n > isize::MAX as usize / std::mem::size_of::<*mut c_void>()
}

fn alloc_code(e: AllocError) -> c_int {
    match e {
        AllocError::OutOfMemory => PAGEALLOC_ENOMEM,
        AllocError::InvalidOrder(_) => PAGEALLOC_EORDER,
        AllocError::InvalidNode(_) | AllocError::InvalidCpu(_) => PAGEALLOC_EINTERNAL,
    }
}

fn free_code(e: FreeError) -> c_int {
    match e {
        FreeError::NotAllocated(_) => PAGEALLOC_EDOUBLEFREE,
        FreeError::ForeignFrame(_) => PAGEALLOC_EFOREIGN,
        FreeError::OrderMismatch { .. } => PAGEALLOC_EORDERMISMATCH,
        FreeError::InvalidOrder(_) => PAGEALLOC_EORDER,
        FreeError::InvalidCpu(_) => PAGEALLOC_EINTERNAL,
    }
}

fn gfp_of(migratetype: u32) -> Result<Gfp, c_int> {
    let mt = match migratetype & !PAGEALLOC_ATOMIC {
        PAGEALLOC_UNMOVABLE => MigrateType::Unmovable,
        PAGEALLOC_MOVABLE => MigrateType::Movable,
        PAGEALLOC_RECLAIMABLE => MigrateType::Reclaimable,
        _ => return Err(PAGEALLOC_EINVAL),
    };
    let mut g = Gfp::from_migratetype(mt);
    if migratetype & PAGEALLOC_ATOMIC != 0 {
        g = g | Gfp::ATOMIC_KERNEL;
    }
    Ok(g)
}

fn order_of(order: u32) -> Result<u8, c_int> {
    u8::try_from(order)
        .ok()
        .filter(|&o| o <= pagealloc::MAX_ORDER)
        .ok_or(PAGEALLOC_EORDER)
}

impl pagealloc_t {
    fn cpu(&self) -> usize {
        pagealloc::os::current_cpu() % self.a.nr_cpus()
    }
    fn addr(&self, f: Frame) -> *mut c_void {
        self.a
            .frame_ptr(f)
            .map_or(ptr::null_mut(), |p| p.as_ptr().cast())
    }
    fn frame(&self, addr: *const c_void, order: u32) -> Result<Frame, c_int> {
        let order = order_of(order)?;
        if addr as usize % PAGE_SIZE != 0 {
            return Err(PAGEALLOC_EINVAL);
        }
        let pfn = self.a.pfn_of_ptr(addr.cast()).ok_or(PAGEALLOC_EFOREIGN)?;
        Ok(Frame::new(pfn, order))
    }
}

/// Number of CPUs the host is configured with (pagesets are per CPU id).
fn host_cpus() -> usize {
    // SAFETY: sysconf takes an integer name and touches no caller memory.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

fn set_err(err: *mut c_int, code: c_int) {
    if !err.is_null() {
        // SAFETY: the caller passes NULL or a pointer to a writable int (documented).
        unsafe { *err = code };
    }
}

/// Create an allocator over a fresh anonymous mapping of `bytes` bytes (rounded down to
/// whole pages; at least 64 pages) with the configuration `config`: a preset name
/// (`base`, `patch1` … `patch10`, `linux-6.12`) optionally followed by `,key=value`
/// overrides, e.g. `"patch7,batch_scale_max=3"`; NULL means `linux-6.12`. Frees are
/// always checked. Returns NULL on failure with the reason in `*err` (if `err` is not
/// NULL): `PAGEALLOC_EINVAL` for a bad size or config, `PAGEALLOC_EMMAP` if the mapping
/// failed.
///
/// # Safety
/// `config` is NULL or a NUL-terminated string; `err` is NULL or points to an int.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_create(
    bytes: usize,
    config: *const c_char,
    err: *mut c_int,
) -> *mut pagealloc_t {
    guard(ptr::null_mut(), || {
        let cfg = if config.is_null() {
            Config::default()
        } else {
            // SAFETY: the caller passes a NUL-terminated string (documented contract).
            let s = unsafe { CStr::from_ptr(config) };
            match s.to_str().ok().map(str::parse::<Config>) {
                Some(Ok(c)) => c,
                _ => {
                    set_err(err, PAGEALLOC_EINVAL);
                    return ptr::null_mut();
                }
            }
        };
        let pages = (bytes / PAGE_SIZE) as u64;
        if !(64..=(1u64 << 32) - 2).contains(&pages) {
            set_err(err, PAGEALLOC_EINVAL);
            return ptr::null_mut();
        }
        let layout = Layout::single(pages, host_cpus());
        match Allocator::with_memory(&layout, cfg, HugePages::None) {
            Ok(a) => {
                set_err(err, PAGEALLOC_OK);
                Box::into_raw(Box::new(pagealloc_t { a }))
            }
            Err(pagealloc::BuildError::Mmap(_)) => {
                set_err(err, PAGEALLOC_EMMAP);
                ptr::null_mut()
            }
            Err(_) => {
                set_err(err, PAGEALLOC_EINVAL);
                ptr::null_mut()
            }
        }
    })
}

/// Destroy an allocator and unmap its memory; every address it handed out becomes
/// invalid. NULL is ignored.
///
/// # Safety
/// `pa` is NULL or was returned by `pagealloc_create` and not destroyed yet, and no
/// other thread uses it during or after the call.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_destroy(pa: *mut pagealloc_t) {
    if pa.is_null() {
        return;
    }
    guard((), || {
        // SAFETY: `pa` came from Box::into_raw in pagealloc_create and is destroyed once
        // (contract), so rebuilding the box takes back sole ownership.
        drop(unsafe { Box::from_raw(pa) });
    })
}

/// The static message of an error code (never NULL).
#[no_mangle]
pub extern "C" fn pagealloc_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        PAGEALLOC_OK => c"success",
        PAGEALLOC_ENULL => c"a required pointer argument is NULL",
        PAGEALLOC_EINVAL => c"invalid argument",
        PAGEALLOC_ENOMEM => c"out of memory",
        PAGEALLOC_EORDER => c"invalid order (0..=10)",
        PAGEALLOC_EDOUBLEFREE => c"not an allocated block (double free?)",
        PAGEALLOC_EFOREIGN => c"address does not belong to this allocator",
        PAGEALLOC_EORDERMISMATCH => c"block was allocated with another order",
        PAGEALLOC_EMMAP => c"mapping memory failed",
        PAGEALLOC_ECORRUPT => c"allocator invariants broken",
        PAGEALLOC_EINTERNAL => c"internal error",
        _ => c"unknown error code",
    };
    s.as_ptr()
}

/// Allocate a block of 2^`order` contiguous pages of migratetype `migratetype`
/// (`PAGEALLOC_UNMOVABLE`, `PAGEALLOC_MOVABLE` or `PAGEALLOC_RECLAIMABLE`, optionally
/// `| PAGEALLOC_ATOMIC`) on the calling CPU's cache; its address goes to `*addr`.
/// Returns `PAGEALLOC_OK`, `PAGEALLOC_ENOMEM`, `PAGEALLOC_EORDER`, `PAGEALLOC_EINVAL`
/// or `PAGEALLOC_ENULL`; `*addr` is NULL on failure.
///
/// # Safety
/// `pa` is a live allocator; `addr` points to a writable `void *`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc(
    pa: *const pagealloc_t,
    order: u32,
    migratetype: u32,
    addr: *mut *mut c_void,
) -> c_int {
    if pa.is_null() || addr.is_null() {
        return PAGEALLOC_ENULL;
    }
    guard(PAGEALLOC_EINTERNAL, || {
        // SAFETY: `addr` is non-null and writable (contract).
        unsafe { *addr = ptr::null_mut() };
        // SAFETY: `pa` is a live allocator (contract); shared use is thread-safe.
        let pa = unsafe { &*pa };
        let (order, gfp) = match (order_of(order), gfp_of(migratetype)) {
            (Ok(o), Ok(g)) => (o, g),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        match pa.a.alloc_on(pa.cpu(), order, gfp, None) {
            Ok(f) => {
                // SAFETY: as above.
                unsafe { *addr = pa.addr(f) };
                PAGEALLOC_OK
            }
            Err(e) => alloc_code(e),
        }
    })
}

/// Free the block of 2^`order` pages at `addr`. Returns `PAGEALLOC_OK`, or refuses with
/// `PAGEALLOC_EDOUBLEFREE` (not an allocated block: freed already, or never handed out),
/// `PAGEALLOC_EFOREIGN` (not this allocator's memory), `PAGEALLOC_EORDERMISMATCH`,
/// `PAGEALLOC_EORDER`, `PAGEALLOC_EINVAL` (not page aligned) or `PAGEALLOC_ENULL`;
/// a refused free changes nothing.
///
/// # Safety
/// `pa` is a live allocator. `addr` is not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free(
    pa: *const pagealloc_t,
    addr: *mut c_void,
    order: u32,
) -> c_int {
    if pa.is_null() || addr.is_null() {
        return PAGEALLOC_ENULL;
    }
    guard(PAGEALLOC_EINTERNAL, || {
        // SAFETY: `pa` is a live allocator (contract).
        let pa = unsafe { &*pa };
        match pa.frame(addr, order) {
            Ok(f) => match pa.a.free_on(pa.cpu(), f) {
                Ok(()) => PAGEALLOC_OK,
                Err(e) => free_code(e),
            },
            Err(e) => e,
        }
    })
}

/// Allocate up to `n` blocks of 2^`order` pages into `addrs[0..]`, taking the per-CPU
/// cache's lock once for the run. Returns the number allocated (fewer than `n` only
/// when memory ran out; 0 when `n` is 0) or a negative error code (`PAGEALLOC_ENOMEM`
/// when not even one block could be allocated; `PAGEALLOC_EINVAL` when `n` is more
/// pointers than any array can hold).
///
/// # Safety
/// `pa` is a live allocator; `addrs` points to `n` writable `void *` (may be NULL when
/// `n` is 0).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_bulk(
    pa: *const pagealloc_t,
    order: u32,
    migratetype: u32,
    n: usize,
    addrs: *mut *mut c_void,
) -> isize {
    if pa.is_null() || (addrs.is_null() && n > 0) {
        return PAGEALLOC_ENULL as isize;
    }
    if too_many_pointers(n) {
        return PAGEALLOC_EINVAL as isize;
    }
    guard(PAGEALLOC_EINTERNAL as isize, || {
        // SAFETY: `pa` is a live allocator (contract).
        let pa = unsafe { &*pa };
        let (order, gfp) = match (order_of(order), gfp_of(migratetype)) {
            (Ok(o), Ok(g)) => (o, g),
            (Err(e), _) | (_, Err(e)) => return e as isize,
        };
        let mut out = Vec::with_capacity(n.min(1 << 16));
        match pa.a.alloc_bulk_on(pa.cpu(), order, gfp, None, n, &mut out) {
            Ok(k) => {
                for (i, f) in out.iter().take(k).enumerate() {
                    // SAFETY: `addrs` has `n` writable slots and `i < k <= n`.
                    unsafe { *addrs.add(i) = pa.addr(*f) };
                }
                k as isize
            }
            Err(e) => alloc_code(e) as isize,
        }
    })
}

/// Free `n` blocks of 2^`order` pages, in order, stopping at the first refused one.
/// Returns `PAGEALLOC_OK`, or the refusal's code with its index in `*failed_index`
/// (if not NULL): the blocks before it were freed, it and the ones after it were not.
/// `PAGEALLOC_EINVAL` (nothing freed) when `n` is more pointers than any array can hold.
///
/// # Safety
/// `pa` is a live allocator; `addrs` points to `n` pointers (may be NULL when `n` is 0);
/// `failed_index` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_bulk(
    pa: *const pagealloc_t,
    addrs: *const *mut c_void,
    n: usize,
    order: u32,
    failed_index: *mut usize,
) -> c_int {
    if pa.is_null() || (addrs.is_null() && n > 0) {
        return PAGEALLOC_ENULL;
    }
    if too_many_pointers(n) {
        return PAGEALLOC_EINVAL;
    }
    guard(PAGEALLOC_EINTERNAL, || {
        // SAFETY: `pa` is a live allocator (contract).
        let pa = unsafe { &*pa };
        let addrs: &[*mut c_void] = if n == 0 {
            &[]
        } else {
            // SAFETY: `addrs` is non-null and points to `n` pointers (contract).
            unsafe { std::slice::from_raw_parts(addrs, n) }
        };
        let fail = |i: usize, code: c_int| {
            if !failed_index.is_null() {
                // SAFETY: non-null and writable (contract).
                unsafe { *failed_index = i };
            }
            code
        };
        // Translate up to the first bad entry, free the valid prefix in one bulk call,
        // then report the first refusal (a frame of the prefix, or the bad entry).
        let mut frames = Vec::with_capacity(n.min(1 << 16));
        let mut bad = None;
        for (i, &p) in addrs.iter().enumerate() {
            let f = if p.is_null() {
                Err(PAGEALLOC_ENULL)
            } else {
                pa.frame(p, order)
            };
            match f {
                Ok(f) => frames.push(f),
                Err(code) => {
                    bad = Some((i, code));
                    break;
                }
            }
        }
        match (pa.a.free_bulk_on(pa.cpu(), &frames), bad) {
            (Err(e), _) => fail(e.index, free_code(e.error)),
            (Ok(()), Some((i, code))) => fail(i, code),
            (Ok(()), None) => PAGEALLOC_OK,
        }
    })
}

/// Fill `*out` with the current counters. Returns `PAGEALLOC_OK` or `PAGEALLOC_ENULL`.
///
/// # Safety
/// `pa` is a live allocator; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_counters(
    pa: *const pagealloc_t,
    out: *mut pagealloc_counters_t,
) -> c_int {
    if pa.is_null() || out.is_null() {
        return PAGEALLOC_ENULL;
    }
    guard(PAGEALLOC_EINTERNAL, || {
        // SAFETY: `pa` is a live allocator (contract).
        let a = unsafe { &(*pa).a };
        let c = a.counters();
        let v = pagealloc_counters_t {
            pgalloc: c.pgalloc,
            pgfree: c.pgfree,
            alloc_zone: c.alloc_zone,
            free_high: c.free_high,
            pcp_refill: c.pcp_refill,
            pcp_refill_pages: c.pcp_refill_pages,
            pcp_drain: c.pcp_drain,
            pcp_drain_pages: c.pcp_drain_pages,
            zone_lock: c.zone_lock,
            zone_lock_contended: c.zone_lock_contended,
            zone_lock_wait_ns: c.zone_lock_wait_ns,
            zone_lock_hold_ns: c.zone_lock_hold_ns,
            alloc_fail: c.alloc_fail,
            free_pages: a.nr_free_pages(),
            pcp_pages: a.nr_pcp_pages(),
            managed_pages: a.managed_pages(),
        };
        // SAFETY: `out` is non-null and writable (contract).
        unsafe { *out = v };
        PAGEALLOC_OK
    })
}

/// Copy `text` into `buf` like snprintf: at most `len - 1` bytes and a NUL; returns the
/// full length (excluding the NUL), so a caller can size the buffer and call again.
fn snprint(text: &str, buf: *mut c_char, len: usize) -> isize {
    if !buf.is_null() && len > 0 {
        let n = text.len().min(len - 1);
        // SAFETY: `buf` has `len` writable bytes (contract) and `n + 1 <= len`; the
        // source is a live &str of at least `n` bytes and cannot overlap a C buffer.
        unsafe {
            ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    text.len() as isize
}

/// Render the counters as `/proc/vmstat` text into `buf` (snprintf semantics: returns
/// the full length; pass `buf` NULL and `len` 0 to learn it).
///
/// # Safety
/// `pa` is a live allocator; `buf` is NULL or has `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_vmstat(
    pa: *const pagealloc_t,
    buf: *mut c_char,
    len: usize,
) -> isize {
    // SAFETY: forwarded contract: `pa` is NULL or live, `buf` is NULL or has `len` bytes.
    unsafe { render_text(pa, buf, len, |a| a.vmstat().to_string()) }
}

/// The text outputs' shared path: NULL check, panic guard, render, snprintf-style copy.
///
/// # Safety
/// `pa` is NULL or a live allocator; `buf` is NULL or has `len` writable bytes.
unsafe fn render_text(
    pa: *const pagealloc_t,
    buf: *mut c_char,
    len: usize,
    render: impl FnOnce(&Allocator) -> String,
) -> isize {
    if pa.is_null() {
        return PAGEALLOC_ENULL as isize;
    }
    guard(PAGEALLOC_EINTERNAL as isize, || {
        // SAFETY: `pa` is a live allocator (contract).
        let a = unsafe { &(*pa).a };
        snprint(&render(a), buf, len)
    })
}

/// Render the zones and per-CPU caches as `/proc/zoneinfo` text into `buf` (snprintf
/// semantics, as `pagealloc_vmstat`).
///
/// # Safety
/// `pa` is a live allocator; `buf` is NULL or has `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_zoneinfo(
    pa: *const pagealloc_t,
    buf: *mut c_char,
    len: usize,
) -> isize {
    // SAFETY: forwarded contract: `pa` is NULL or live, `buf` is NULL or has `len` bytes.
    unsafe { render_text(pa, buf, len, |a| a.zoneinfo().to_string()) }
}

/// Return every page cached on every CPU to the zones (`drain_all_pages`).
///
/// # Safety
/// `pa` is a live allocator.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_drain(pa: *const pagealloc_t) -> c_int {
    if pa.is_null() {
        return PAGEALLOC_ENULL;
    }
    guard(PAGEALLOC_EINTERNAL, || {
        // SAFETY: `pa` is a live allocator (contract).
        unsafe { &(*pa).a }.drain_all_pages();
        PAGEALLOC_OK
    })
}

/// Check every invariant of the allocator (cold, O(pages)). Returns `PAGEALLOC_OK` or
/// `PAGEALLOC_ECORRUPT`.
///
/// # Safety
/// `pa` is a live allocator.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_validate(pa: *const pagealloc_t) -> c_int {
    if pa.is_null() {
        return PAGEALLOC_ENULL;
    }
    guard(PAGEALLOC_EINTERNAL, || {
        // SAFETY: `pa` is a live allocator (contract).
        match unsafe { &(*pa).a }.validate() {
            Ok(_) => PAGEALLOC_OK,
            Err(_) => PAGEALLOC_ECORRUPT,
        }
    })
}
