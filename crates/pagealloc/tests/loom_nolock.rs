//! Model checks of the nolock pair (`alloc_pages_nolock` / `free_pages_nolock`) with loom
//! (`RUSTFLAGS="--cfg loom"`): a thread that plays an interrupt handler frees and
//! allocates through the nolock pair on CPU 0 while CPU 0's own thread allocates and
//! frees (refills and drains: the pageset lock and the zone lock held together). In
//! every interleaving the nolock calls take trylocks only; a free that finds both locks
//! taken is deferred on the zone's lock-free list and completed by the next holder of
//! the zone lock. At the end of each interleaving frames are conserved: `validate()`
//! passes (deferred pages counted), then every frame is free again after the deferred
//! frees are completed, and no frame was handed out twice. Each model also checks that
//! some interleaving deferred a free (the path is reached, not only compiled).
//!
//! The preemption bound is 3 at most (see `model`).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p pcp-pagealloc --test loom_nolock --release`
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use pagealloc::{Allocator, Config, Frame, Gfp, Layout, ManualPlatform};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

fn build() -> Arc<Allocator> {
    let c: Config = "linux-6.12,fixed_batch=2,fixed_high=4,thp=off,min_free_kbytes=8"
        .parse()
        .expect("config");
    let p = std::sync::Arc::new(ManualPlatform::new());
    Arc::new(Allocator::with_platform(&Layout::single(64, 2), c, p).expect("build"))
}

/// Every frame back once the deferred frees are completed.
fn check_conserved(a: &Allocator) {
    let t = a.validate().expect("validate");
    assert_eq!(t.allocated, t.deferred, "frames still allocated");
    a.complete_deferred(0);
    let t = a.validate().expect("validate after completion");
    assert_eq!((t.allocated, t.deferred), (0, 0));
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "frames lost");
    let c = a.counters();
    assert_eq!(c.pgalloc, c.pgfree);
    assert_eq!(c.nolock_deferred, c.nolock_deferred_done);
}

fn model(name: &str, deferred: &'static AtomicU64, f: impl Fn() + Sync + Send + 'static) {
    static EXPLORED: AtomicUsize = AtomicUsize::new(0);
    let mut b = loom::model::Builder::new();
    // At most 3 preemptions, whatever LOOM_MAX_PREEMPTIONS says: these models run more
    // operations than tests/loom.rs's (a refill, a drain and the nolock pair), and 3
    // already explores each of them interrupted at every step.
    b.preemption_bound = Some(b.preemption_bound.map_or(3, |p| p.min(3)));
    b.max_branches = 200_000;
    let before = EXPLORED.load(Ordering::Relaxed);
    let t = std::time::Instant::now();
    b.check(move || {
        EXPLORED.fetch_add(1, Ordering::Relaxed);
        f()
    });
    let n = EXPLORED.load(Ordering::Relaxed) - before;
    let d = deferred.load(Ordering::Relaxed);
    println!(
        "loom {name}: {n} interleavings in {:.1?}, {d} with a deferred free",
        t.elapsed()
    );
    assert!(
        d > 0,
        "no interleaving deferred a free: the path was not reached"
    );
}

/// CPU 0's thread allocates three pages (a refill) and frees them (a free past `high`
/// drains a batch) while the "interrupt" frees two pages allocated before, through the
/// nolock path, on the same CPU.
#[test]
fn nolock_free_vs_refill_and_drain() {
    static DEFERRED: AtomicU64 = AtomicU64::new(0);
    model("nolock_free_vs_refill_and_drain", &DEFERRED, || {
        let a = build();
        let held: Vec<Frame> = (0..2)
            .map(|o| a.alloc_on(1, o, Gfp::KERNEL, None).expect("alloc"))
            .collect();
        let a2 = a.clone();
        let irq = thread::spawn(move || {
            for f in held {
                a2.free_pages_nolock(0, f).expect("nolock free");
            }
        });
        let f: Vec<Frame> = (0..3)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).expect("alloc"))
            .collect();
        for x in &f {
            a.free_on(0, *x).expect("free");
        }
        irq.join().unwrap();
        DEFERRED.fetch_add(a.counters().nolock_deferred.min(1), Ordering::Relaxed);
        check_conserved(&a);
    });
}

/// The "interrupt" allocates through the nolock path and frees a block allocated before,
/// while CPU 0's thread refills and frees: a nolock allocation either gets a block no
/// one else holds or fails without waiting; a deferred free is completed by the zone
/// lock's next holder (here the other thread or the final check).
#[test]
fn nolock_alloc_free_vs_alloc_free() {
    static DEFERRED: AtomicU64 = AtomicU64::new(0);
    model("nolock_alloc_free_vs_alloc_free", &DEFERRED, || {
        let a = build();
        let h = a.alloc_on(1, 1, Gfp::KERNEL, None).expect("alloc");
        let a2 = a.clone();
        let irq = thread::spawn(move || {
            a2.free_pages_nolock(0, h).expect("nolock free");
            a2.alloc_pages_nolock(0, 0, None).ok()
        });
        let f: Vec<Frame> = (0..2)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).expect("alloc"))
            .collect();
        for x in &f {
            a.free_on(0, *x).expect("free");
        }
        if let Some(g) = irq.join().unwrap() {
            assert!(!f.contains(&g), "one frame handed out twice");
            a.free_pages_nolock(0, g).expect("nolock free");
        }
        DEFERRED.fetch_add(a.counters().nolock_deferred.min(1), Ordering::Relaxed);
        check_conserved(&a);
    });
}

/// Two "interrupts" (on CPUs 0 and 1) free order-4 blocks (no pageset caches them: the
/// zone lock or the deferred list) while a third thread frees one to the zone under its
/// lock: the lock-free pushes and the holder's take of the whole list race.
#[test]
fn deferred_pushes_vs_completion() {
    static DEFERRED: AtomicU64 = AtomicU64::new(0);
    model("deferred_pushes_vs_completion", &DEFERRED, || {
        let a = build();
        let big = a.alloc_on(0, 4, Gfp::KERNEL, None).expect("alloc");
        let x = a.alloc_on(0, 4, Gfp::KERNEL, None).expect("alloc");
        let y = a.alloc_on(1, 4, Gfp::KERNEL, None).expect("alloc");
        let a1 = a.clone();
        let t1 = thread::spawn(move || a1.free_pages_nolock(0, x).expect("free"));
        let a2 = a.clone();
        let t2 = thread::spawn(move || a2.free_pages_nolock(1, y).expect("free"));
        a.free_on(0, big).expect("free"); // straight to the zone, under its lock
        t1.join().unwrap();
        t2.join().unwrap();
        DEFERRED.fetch_add(a.counters().nolock_deferred.min(1), Ordering::Relaxed);
        check_conserved(&a);
    });
}
