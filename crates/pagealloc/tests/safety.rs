//! Safe by default: every bad argument of issue 10 is a typed error (or simply works) in
//! the default configuration, in debug and release builds alike. Each test names the
//! case it guards.

mod common;
use common::*;
use pagealloc::*;
use std::sync::{Arc, Barrier};

/// A default allocator (no config changes) on a manual platform.
fn default_alloc(pages: u64, cpus: usize) -> Allocator {
    manual(&Layout::single(pages, cpus), Config::default()).0
}

/// After a refused free, nothing changed: the allocator validates, conserves frames and
/// the refused frame is not on any free list.
fn assert_intact(a: &Allocator, allocated: u64) {
    let t = a.validate().expect("valid after a refused free");
    assert_eq!(t.allocated, allocated);
    assert_eq!(t.buddy + t.pcp + t.allocated, a.managed_pages());
}

#[test]
fn double_free_is_refused_in_every_build() {
    let a = default_alloc(1 << 14, 2);
    for order in [0u8, 1, 3, 9, 10] {
        let f = a.alloc_on(0, order, Gfp::USER, None).unwrap();
        a.free_on(0, f).unwrap();
        assert_eq!(a.free_on(0, f), Err(FreeError::NotAllocated(f.pfn)));
        assert_eq!(a.free_on(1, f), Err(FreeError::NotAllocated(f.pfn)));
        assert_intact(&a, 0);
    }
    // The order-0 double free used to leave a self-looped pageset list: allocation then
    // never ran out. Now allocation runs out after exactly the managed pages.
    let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    a.free_on(0, f).unwrap();
    assert!(a.free_on(0, f).is_err());
    let mut n = 0u64;
    while a.alloc_on(0, 0, Gfp::USER | Gfp::HIGH, None).is_ok() {
        n += 1;
        assert!(n <= a.managed_pages(), "handed out more pages than managed");
    }
    let t = a.validate().unwrap();
    assert_eq!(t.allocated, n);
}

#[test]
fn bad_frees_are_typed_errors() {
    let mut l = Layout::single(1 << 12, 1);
    l.nodes[0].zones[0].holes.push((2048, 2560));
    let (a, _) = manual(&l, Config::default());
    let big = a.alloc_on(0, 3, Gfp::KERNEL, None).unwrap();
    // never allocated
    let free_pfn = (0..4096)
        .map(Pfn)
        .find(|p| a.free_block_of(*p).is_some())
        .unwrap();
    assert_eq!(
        a.free_on(0, Frame::new(free_pfn, 0)),
        Err(FreeError::NotAllocated(free_pfn))
    );
    // wrong order
    assert_eq!(
        a.free_on(0, Frame::new(big.pfn, 2)),
        Err(FreeError::OrderMismatch {
            pfn: big.pfn,
            allocated: 3,
            given: 2
        })
    );
    // interior frame of a larger block
    let inner = Pfn(big.pfn.0 + 1);
    assert_eq!(
        a.free_on(0, Frame::new(inner, 0)),
        Err(FreeError::NotAllocated(inner))
    );
    // outside the range, in a hole, invalid order
    assert_eq!(
        a.free_on(0, Frame::new(Pfn(1 << 20), 0)),
        Err(FreeError::ForeignFrame(Pfn(1 << 20)))
    );
    assert_eq!(
        a.free_on(0, Frame::new(Pfn(u64::MAX), 0)),
        Err(FreeError::ForeignFrame(Pfn(u64::MAX)))
    );
    assert_eq!(
        a.free_on(0, Frame::new(Pfn(2100), 0)),
        Err(FreeError::ForeignFrame(Pfn(2100)))
    );
    assert_eq!(
        a.free_on(0, Frame::new(big.pfn, 11)),
        Err(FreeError::InvalidOrder(11))
    );
    assert_eq!(a.free_on(7, big), Err(FreeError::InvalidCpu(7)));
    assert_intact(&a, 8);
    // the owner's free still works after all of that
    a.free_on(0, big).unwrap();
    assert_intact(&a, 0);
}

#[test]
fn racing_double_frees_exactly_one_wins() {
    let a = Arc::new(default_alloc(1 << 14, 4));
    const TRIALS: usize = 2000;
    let mut wins = [0usize; 3];
    for t in 0..TRIALS {
        let order = (t % 4) as u8;
        let f = a.alloc_on(0, order, Gfp::USER, None).unwrap();
        let b = Arc::new(Barrier::new(2));
        let (a2, b2) = (a.clone(), b.clone());
        let h = std::thread::spawn(move || {
            b2.wait();
            a2.free_on(1, f).is_ok()
        });
        b.wait();
        let mine = a.free_on(2, f).is_ok();
        let theirs = h.join().unwrap();
        wins[mine as usize + theirs as usize] += 1;
    }
    assert_eq!(wins, [0, TRIALS, 0], "[none, exactly one, both] won");
    assert_intact(&a, 0);
}

#[test]
fn unchecked_free_is_an_explicit_unsafe_opt_in() {
    let a = default_alloc(1 << 14, 2);
    let frames: Vec<_> = (0..100)
        .map(|i| a.alloc_on(0, (i % 4) as u8, Gfp::USER, None).unwrap())
        .collect();
    for f in &frames {
        // SAFETY: each frame was allocated above with this order and is freed once, by
        // this thread only.
        unsafe { a.free_on_unchecked(1, *f).unwrap() };
    }
    assert_intact(&a, 0);
    assert_eq!(a.counters().pgfree, a.counters().pgalloc);
    // the cheap checks stay: a frame outside the allocator or misaligned is refused
    // SAFETY: refused before anything is touched (outside every zone).
    let r = unsafe { a.free_on_unchecked(0, Frame::new(Pfn(1 << 40), 0)) };
    assert_eq!(r, Err(FreeError::ForeignFrame(Pfn(1 << 40))));
    // SAFETY: refused before anything is touched (misaligned for order 3).
    let r = unsafe { a.free_on_unchecked(0, Frame::new(Pfn(1), 3)) };
    assert_eq!(r, Err(FreeError::InvalidOrder(3)));
}

#[test]
fn checked_config_key_cannot_turn_checks_off() {
    assert!("linux-6.12,checked=on".parse::<Config>().is_ok());
    let e = "linux-6.12,checked=off".parse::<Config>().unwrap_err();
    assert!(e.to_string().contains("free_on_unchecked"), "{e}");
}
