//! The C ABI called from Rust: error codes for bad input, bulk-free partial failure
//! with its index, snprintf-style text, and concurrent use from several threads.

use pagealloc_ffi::*;
use std::ffi::{c_void, CStr};
use std::ptr;

fn create(config: &CStr) -> *mut pagealloc_t {
    let mut err = 1;
    // SAFETY: a valid NUL-terminated string and a writable int.
    let pa = unsafe { pagealloc_create(16 << 20, config.as_ptr(), &mut err) };
    assert!(!pa.is_null(), "create failed: {err}");
    assert_eq!(err, PAGEALLOC_OK);
    pa
}

#[test]
fn bad_input_gives_codes() {
    let mut err = 0;
    // SAFETY: NULL config is allowed; `err` is writable.
    let tiny = unsafe { pagealloc_create(4096, ptr::null(), &mut err) };
    assert!(tiny.is_null());
    assert_eq!(err, PAGEALLOC_EINVAL);
    // SAFETY: valid string, writable int.
    let bad = unsafe { pagealloc_create(16 << 20, c"patch7,no_such_key=1".as_ptr(), &mut err) };
    assert!(bad.is_null());
    assert_eq!(err, PAGEALLOC_EINVAL);
    // Issue 10: batches whose `batch << SCALE` overflowed used to hang the first drain;
    // a batch above a quarter of the zone livelocked. All refused at creation now.
    for cfg in [
        c"linux-6.12,fixed_batch=67108864",
        c"linux-6.12,fixed_batch=2147483648",
        c"linux-6.12,fixed_batch=65535",
        c"linux-6.12,checked=off",
    ] {
        err = 0;
        // SAFETY: valid string, writable int.
        let bad = unsafe { pagealloc_create(16 << 20, cfg.as_ptr(), &mut err) };
        assert!(bad.is_null(), "{cfg:?}");
        assert_eq!(err, PAGEALLOC_EINVAL, "{cfg:?}");
    }

    let pa = create(c"patch7");
    let mut p: *mut c_void = ptr::null_mut();
    // SAFETY: `pa` is live; the pointers are valid or deliberately NULL.
    unsafe {
        assert_eq!(pagealloc_alloc(ptr::null(), 0, 0, &mut p), PAGEALLOC_ENULL);
        assert_eq!(pagealloc_alloc(pa, 0, 0, ptr::null_mut()), PAGEALLOC_ENULL);
        assert_eq!(pagealloc_alloc(pa, 11, 0, &mut p), PAGEALLOC_EORDER);
        assert!(p.is_null());
        assert_eq!(pagealloc_alloc(pa, 0, 3, &mut p), PAGEALLOC_EINVAL);
        assert_eq!(
            pagealloc_alloc(pa, 2, PAGEALLOC_RECLAIMABLE, &mut p),
            PAGEALLOC_OK
        );
        assert!(!p.is_null());
        assert_eq!(p as usize % PAGEALLOC_PAGE_SIZE, 0);
        let inside = p.cast::<u8>().add(100).cast::<c_void>();
        assert_eq!(pagealloc_free(pa, inside, 0), PAGEALLOC_EINVAL);
        let next = p.cast::<u8>().add(4096).cast::<c_void>();
        assert_eq!(pagealloc_free(pa, next, 0), PAGEALLOC_EDOUBLEFREE);
        assert_eq!(pagealloc_free(pa, p, 3), PAGEALLOC_EORDERMISMATCH);
        assert_eq!(pagealloc_free(pa, p, 11), PAGEALLOC_EORDER);
        assert_eq!(pagealloc_free(pa, p, 2), PAGEALLOC_OK);
        assert_eq!(pagealloc_free(pa, p, 2), PAGEALLOC_EDOUBLEFREE);
        assert_eq!(pagealloc_validate(pa), PAGEALLOC_OK);
        pagealloc_destroy(pa);
        pagealloc_destroy(ptr::null_mut());
    }
    for code in [0, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, 7, -99] {
        // SAFETY: strerror returns a static NUL-terminated string for any code.
        let s = unsafe { CStr::from_ptr(pagealloc_strerror(code)) };
        assert!(!s.to_bytes().is_empty());
    }
}

#[test]
fn bulk_free_stops_at_the_first_bad_entry() {
    let pa = create(c"linux-6.12");
    let mut v = vec![ptr::null_mut::<c_void>(); 10];
    // SAFETY: `pa` is live; `v` has 10 writable slots, and the arrays passed below
    // have the lengths given.
    unsafe {
        assert_eq!(
            pagealloc_alloc_bulk(pa, 0, PAGEALLOC_MOVABLE, 10, v.as_mut_ptr()),
            10
        );
        assert_eq!(
            pagealloc_alloc_bulk(pa, 0, PAGEALLOC_MOVABLE, 0, ptr::null_mut()),
            0
        );
        // Entry 4 is freed twice: the first five go, index 5 (the repeat) is refused,
        // the rest stay allocated.
        let mut list: Vec<*mut c_void> = v[..5].to_vec();
        list.push(v[4]);
        list.extend_from_slice(&v[5..]);
        let mut bad = usize::MAX;
        assert_eq!(
            pagealloc_free_bulk(pa, list.as_ptr(), list.len(), 0, &mut bad),
            PAGEALLOC_EDOUBLEFREE
        );
        assert_eq!(bad, 5);
        let mut c = pagealloc_counters_t::default();
        assert_eq!(pagealloc_counters(pa, &mut c), PAGEALLOC_OK);
        assert_eq!(c.pgalloc - c.pgfree, 5);
        // A NULL entry is refused with its index, after the valid prefix is freed.
        let rest = [v[5], v[6], ptr::null_mut(), v[7]];
        assert_eq!(
            pagealloc_free_bulk(pa, rest.as_ptr(), rest.len(), 0, &mut bad),
            PAGEALLOC_ENULL
        );
        assert_eq!(bad, 2);
        assert_eq!(
            pagealloc_free_bulk(pa, v[7..].as_ptr(), 3, 0, ptr::null_mut()),
            PAGEALLOC_OK
        );
        assert_eq!(pagealloc_drain(pa), PAGEALLOC_OK);
        assert_eq!(pagealloc_counters(pa, &mut c), PAGEALLOC_OK);
        assert_eq!(c.pgalloc, c.pgfree);
        assert_eq!((c.free_pages, c.pcp_pages), (c.managed_pages, 0));
        pagealloc_destroy(pa);
    }
}

#[test]
fn text_reports_have_snprintf_semantics() {
    let pa = create(c"base");
    // SAFETY: `pa` is live; buffers have the lengths given.
    unsafe {
        let need = pagealloc_zoneinfo(pa, ptr::null_mut(), 0);
        assert!(need > 100);
        let mut buf = vec![0u8; need as usize + 1];
        assert_eq!(
            pagealloc_zoneinfo(pa, buf.as_mut_ptr().cast(), buf.len()),
            need
        );
        let s = CStr::from_bytes_until_nul(&buf).unwrap().to_str().unwrap();
        assert_eq!(s.len(), need as usize);
        assert!(s.contains("Normal"), "{s}");
        let mut small = [0x55u8; 8];
        assert_eq!(
            pagealloc_vmstat(pa, small.as_mut_ptr().cast(), 8),
            pagealloc_vmstat(pa, ptr::null_mut(), 0)
        );
        assert_eq!(small[7], 0);
        pagealloc_destroy(pa);
    }
}

#[test]
fn threads_share_one_allocator() {
    struct Shared(*mut pagealloc_t);
    // SAFETY: the C ABI is documented thread-safe for every function but destroy,
    // which runs after the threads are joined.
    unsafe impl Sync for Shared {}
    let pa = Shared(create(c"linux-6.12"));
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let pa = &pa;
            s.spawn(move || {
                let mut mine = Vec::new();
                for i in 0..2000u32 {
                    let mut p = ptr::null_mut();
                    // SAFETY: `pa` is live until after the scope; `p` is writable.
                    let rc =
                        unsafe { pagealloc_alloc(pa.0, (i + t) % 3, PAGEALLOC_MOVABLE, &mut p) };
                    if rc == PAGEALLOC_OK {
                        // SAFETY: the block of ≥ 1 page at `p` is this thread's now.
                        unsafe { p.cast::<u32>().write(t) };
                        mine.push((p, (i + t) % 3));
                    } else {
                        assert_eq!(rc, PAGEALLOC_ENOMEM);
                    }
                    // 16 MiB cannot hold every thread's blocks at once, so a run of
                    // ENOMEMs can leave this thread holding nothing: free only what it has.
                    if i % 3 == 2 && !mine.is_empty() {
                        let (p, o) = mine.swap_remove(0);
                        // SAFETY: as above; the block is still ours.
                        assert_eq!(unsafe { p.cast::<u32>().read() }, t);
                        // SAFETY: `pa` is live.
                        assert_eq!(unsafe { pagealloc_free(pa.0, p, o) }, PAGEALLOC_OK);
                    }
                }
                for (p, o) in mine {
                    // SAFETY: `pa` is live.
                    assert_eq!(unsafe { pagealloc_free(pa.0, p, o) }, PAGEALLOC_OK);
                }
            });
        }
    });
    // SAFETY: all threads joined; `pa` is live and destroyed once.
    unsafe {
        assert_eq!(pagealloc_validate(pa.0), PAGEALLOC_OK);
        pagealloc_destroy(pa.0);
    }
}

#[test]
fn impossible_counts_are_refused_before_use() {
    // Issue 10: n = SIZE_MAX used to reach a capacity overflow panic (EINTERNAL and a
    // panic message on stderr). Now it is refused up front: EINVAL, nothing touched.
    let pa = create(c"linux-6.12");
    let mut one = [ptr::null_mut::<c_void>(); 1];
    let mut bad = 7usize;
    // SAFETY: `pa` is live; the arrays are valid for the one entry the calls may read
    // (none: the counts are refused before the arrays are read).
    unsafe {
        assert_eq!(
            pagealloc_alloc_bulk(pa, 0, PAGEALLOC_MOVABLE, 1, one.as_mut_ptr()),
            1
        );
        for n in [usize::MAX, usize::MAX / 2, isize::MAX as usize] {
            assert_eq!(
                pagealloc_free_bulk(pa, one.as_ptr(), n, 0, &mut bad),
                PAGEALLOC_EINVAL
            );
            assert_eq!(
                pagealloc_alloc_bulk(pa, 0, PAGEALLOC_MOVABLE, n, one.as_mut_ptr()),
                PAGEALLOC_EINVAL as isize
            );
        }
        assert_eq!(bad, 7, "failed_index untouched");
        assert_eq!(
            pagealloc_free_bulk(pa, one.as_ptr(), 1, 0, &mut bad),
            PAGEALLOC_OK
        );
        let mut c = pagealloc_counters_t::default();
        assert_eq!(pagealloc_counters(pa, &mut c), PAGEALLOC_OK);
        assert_eq!(c.pgalloc, c.pgfree);
        pagealloc_destroy(pa);
    }
}
