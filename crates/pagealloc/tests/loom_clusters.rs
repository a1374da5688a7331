//! Model checks of the clustered-refill cut / fix-up protocol with loom
//! (`RUSTFLAGS="--cfg loom"`): a refill cuts whole order-0 clusters under the zone lock
//! and makes the frames `Pcp` only after dropping it; zone-lock holders that read
//! order-0 `Buddy` states (pageblock moves, the deferred merge, order-0 merges) must
//! wait for `cluster_inflight` to drop. Each model races one such holder against a
//! refill on another CPU and checks at the end of every interleaving that `validate()`
//! passes and every frame is free again.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p pcp-pagealloc --test loom_clusters --release`
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use pagealloc::{Allocator, Config, Frame, Gfp, Layout, ManualPlatform, MigrateType, Pfn};

/// Interleavings of `refill_cut_vs_pageblock_move` in which the refill cut a cluster.
static CUT_RACES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn build() -> Arc<Allocator> {
    let c: Config =
        "linux-6.12,merge_skip=on,clustered_refill=on,fixed_batch=2,fixed_high=4,thp=off,min_free_kbytes=8"
            .parse()
            .expect("config");
    let p = std::sync::Arc::new(ManualPlatform::new());
    let a = Arc::new(Allocator::with_platform(&Layout::single(1024, 2), c, p).expect("build"));
    // Put clusters on the order-0 list: four frames freed and drained (merge-skipped).
    let f: Vec<Frame> = (0..4)
        .map(|_| a.alloc_on(0, 0, Gfp::USER, None).expect("alloc"))
        .collect();
    for x in &f {
        a.free_on(0, *x).expect("free");
    }
    a.drain_cpu(0);
    a
}

fn check(a: &Allocator) {
    a.drain_all_pages();
    let t = a.validate().expect("validate");
    assert_eq!(t.allocated, 0);
    assert_eq!(t.buddy, t.managed, "every frame free again");
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.max_branches = 200_000;
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let n2 = n.clone();
    b.check(move || {
        n2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    println!(
        "{} interleavings",
        n.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// A refill on CPU 0 (cuts a cluster, fixes it up after the zone lock) races with a
/// pageblock move on CPU 1 that walks every frame of the pageblock.
#[test]
fn refill_cut_vs_pageblock_move() {
    model(|| {
        let a = build();
        let a2 = a.clone();
        let t = thread::spawn(move || {
            a2.set_pageblock_type(Pfn(0), MigrateType::Unmovable);
        });
        let f = a.alloc_on(0, 0, Gfp::USER, None).expect("alloc");
        t.join().unwrap();
        if a.counters().cluster_cut > 0 {
            CUT_RACES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        a.free_on(0, f).expect("free");
        check(&a);
    });
    // When the move runs first the clusters are on the unmovable lists and the movable
    // refill cuts none; the other orders must have raced a cut.
    assert!(CUT_RACES.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// A refill on CPU 0 races with the deferred merge (`compact`).
#[test]
fn refill_cut_vs_deferred_merge() {
    model(|| {
        let a = build();
        let a2 = a.clone();
        let t = thread::spawn(move || {
            a2.compact();
        });
        let f = a.alloc_on(0, 0, Gfp::USER, None).expect("alloc");
        t.join().unwrap();
        a.free_on(0, f).expect("free");
        check(&a);
    });
}
