//! Model checks of the per-CPU lock protocol with loom (`RUSTFLAGS="--cfg loom"`).
//!
//! Each model builds a tiny allocator (64 frames — 1024 for decay —, 2 CPUs, pagesets with a fixed batch of
//! 2 and high of 4 so that refills and drains happen within a few operations), runs two
//! threads that race on one CPU's pageset, and checks at the end of every interleaving
//! that frames are conserved: `validate()` passes, every frame is free again, and no
//! frame was handed out twice. Each model prints the interleavings it explored.
//! Without `LOOM_MAX_PREEMPTIONS` the bound is 3 (under a second in all).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p pcp-pagealloc --test loom --release`
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use pagealloc::{Allocator, Config, Frame, Gfp, Layout, ManualPlatform};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Interleavings explored by all models of this binary.
static EXPLORED: AtomicUsize = AtomicUsize::new(0);

fn config() -> Config {
    "linux-6.12,fixed_batch=2,fixed_high=4,thp=off,min_free_kbytes=8"
        .parse()
        .expect("config")
}

fn build() -> Arc<Allocator> {
    build_with(config())
}

fn build_with(c: Config) -> Arc<Allocator> {
    let p = std::sync::Arc::new(ManualPlatform::new());
    Arc::new(Allocator::with_platform(&Layout::single(64, 2), c, p).expect("build"))
}

/// Every frame back: nothing allocated, nothing lost, counters balanced.
fn check_conserved(a: &Allocator) {
    let t = a.validate().expect("validate");
    assert_eq!(t.allocated, 0, "frames still allocated");
    a.drain_all_pages();
    let t = a.validate().expect("validate after drain");
    assert_eq!(t.pcp, 0);
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "frames lost");
    let c = a.counters();
    assert_eq!(c.pgalloc, c.pgfree);
}

fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    // Building the allocator touches every frame's metadata: many branches, all on one
    // thread before the race starts.
    b.max_branches = 200_000;
    let before = EXPLORED.load(Ordering::Relaxed);
    let t = std::time::Instant::now();
    b.check(move || {
        EXPLORED.fetch_add(1, Ordering::Relaxed);
        f()
    });
    println!(
        "loom {name}: {} interleavings in {:.1?}",
        EXPLORED.load(Ordering::Relaxed) - before,
        t.elapsed()
    );
}

/// CPU 0 allocates and frees (refill, then a free past `high` drains a batch) while
/// another thread drains CPU 0's pagesets remotely (`drain_cpu`).
fn alloc_free_vs_remote_drain_on(a: Arc<Allocator>) {
    let a2 = a.clone();
    let t = thread::spawn(move || a2.drain_cpu(0));
    let f: Vec<Frame> = (0..3)
        .map(|_| a.alloc_on(0, 0, Gfp::USER, None).expect("alloc"))
        .collect();
    for x in &f {
        a.free_on(0, *x).expect("free");
    }
    t.join().unwrap();
    check_conserved(&a);
}

/// Two threads free the same block of `order` at once: exactly one succeeds (the free's
/// compare-and-swap), the other gets `NotAllocated`.
fn concurrent_double_free_on(a: Arc<Allocator>, order: u8) {
    let f = a.alloc_on(0, order, Gfp::KERNEL, None).expect("alloc");
    let a2 = a.clone();
    let t = thread::spawn(move || a2.free_on(1, f).is_ok());
    let mine = a.free_on(0, f).is_ok();
    let theirs = t.join().unwrap();
    assert!(
        mine ^ theirs,
        "mine={mine} theirs={theirs}: exactly one free must win"
    );
    check_conserved(&a);
}

/// [`alloc_free_vs_remote_drain_on`] with linked pagesets.
#[test]
fn alloc_free_vs_remote_drain() {
    model("alloc_free_vs_remote_drain", || {
        alloc_free_vs_remote_drain_on(build())
    });
}

/// [`config`] with the order-0 ownership bitmap (`own_bitmap`: order-0 frees take a bit,
/// push on a ring and write no frame metadata; the drain writes it) and the spliced,
/// merge-skipping drain.
fn own_config() -> Config {
    let mut c = config();
    (c.own_bitmap, c.merge_skip, c.splice_drain) = (true, true, true);
    c
}

/// [`alloc_free_vs_remote_drain_on`] with `own_bitmap`: the frees' bit and ring push, the
/// pops' bit, and the remote drain's writes of the unwritten frames race.
#[test]
fn own_bitmap_alloc_free_vs_remote_drain() {
    model("own_bitmap_alloc_free_vs_remote_drain", || {
        alloc_free_vs_remote_drain_on(build_with(own_config()))
    });
}

/// [`concurrent_double_free_on`] with `own_bitmap`: at order 0 the bit decides (one
/// `fetch_and` wins), at order 1 the metadata's compare-and-swap.
#[test]
fn own_bitmap_concurrent_double_free() {
    model("own_bitmap_concurrent_double_free", || {
        concurrent_double_free_on(build_with(own_config()), 0)
    });
    model("own_bitmap_concurrent_double_free_order1", || {
        concurrent_double_free_on(build_with(own_config()), 1)
    });
}

/// `validate()` while order-0 frees of `own_bitmap` take the slow path (poisoning sends
/// every free there, as a busy pageset does): the free claims the block outside any lock
/// — takes its bit, then marks it `Freeing` — and a check in between must not read the
/// frame as cached on a ring (it is on none).
#[test]
fn own_bitmap_validate_vs_free() {
    model("own_bitmap_validate_vs_free", || {
        let mut c = own_config();
        c.poison = true;
        let a = build_with(c);
        let f: Vec<Frame> = (0..2)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).expect("alloc"))
            .collect();
        let a2 = a.clone();
        let t = thread::spawn(move || {
            a2.validate().expect("validate during frees");
        });
        for x in &f {
            a.free_on(0, *x).expect("free");
        }
        t.join().unwrap();
        check_conserved(&a);
    });
}

#[test]
fn decay_vs_free() {
    model("decay_vs_free", || {
        let mut c = config();
        c.fixed_high = None; // auto-tuned high, so decay has something to cut
        let p = std::sync::Arc::new(ManualPlatform::new());
        let a = Arc::new(Allocator::with_platform(&Layout::single(1024, 2), c, p).expect("build"));
        let f: Vec<Frame> = (0..24)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).expect("alloc"))
            .collect();
        for x in &f[..21] {
            a.free_on(0, *x).expect("free");
        }
        let p = a.pcp_info(0, 0).unwrap();
        assert!(p.high > p.high_min + 24 && p.count > 24, "setup: {p:?}");
        let a2 = a.clone();
        let t = thread::spawn(move || {
            // high 38 decays by 1/8 a tick (34, 30, 27, 24): the last ticks return
            // an excess to the zone while the frees below push count up.
            for _ in 0..4 {
                a2.tick(0);
            }
        });
        for x in &f[21..] {
            a.free_on(0, *x).expect("free");
        }
        t.join().unwrap();
        let p = a.pcp_info(0, 0).unwrap();
        assert!(p.high < 30, "decay ran: {p:?}");
        assert!(p.count <= p.high, "decay left an excess: {p:?}");
        check_conserved(&a);
    });
}

/// CPU 1 goes offline (resize, then drain) while frames are freed on it: afterwards
/// nothing may stay cached on the offline CPU, and everything is conserved.
#[test]
fn offline_drain_vs_free() {
    model("offline_drain_vs_free", || {
        let a = build();
        let f: Vec<Frame> = (0..3)
            .map(|_| a.alloc_on(1, 0, Gfp::USER, None).expect("alloc"))
            .collect();
        let a2 = a.clone();
        let t = thread::spawn(move || a2.cpu_offline(1).expect("offline"));
        for x in &f {
            a.free_on(1, *x).expect("free");
        }
        t.join().unwrap();
        assert_eq!(
            a.pcp_info(1, 0).unwrap().count,
            0,
            "pages cached on an offline CPU"
        );
        a.cpu_online(1).expect("online");
        check_conserved(&a);
    });
}

/// Frames allocated on CPU 0 are freed on CPU 1 by one thread while another allocates
/// on CPU 1 (contention on one pageset: the loser of the trylock goes to the zone).
#[test]
fn remote_free_vs_alloc_same_pcp() {
    model("remote_free_vs_alloc_same_pcp", || {
        let a = build();
        let f: Vec<Frame> = (0..2)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).expect("alloc"))
            .collect();
        let a2 = a.clone();
        let t = thread::spawn(move || {
            for x in f {
                a2.free_on(1, x).expect("free");
            }
        });
        let g: Vec<Frame> = (0..2)
            .map(|_| a.alloc_on(1, 0, Gfp::USER, None).expect("alloc"))
            .collect();
        t.join().unwrap();
        assert_ne!(g[0], g[1], "one frame handed out twice");
        for x in g {
            a.free_on(1, x).expect("free");
        }
        check_conserved(&a);
    });
}

/// [`concurrent_double_free_on`] with linked pagesets, order 1.
#[test]
fn concurrent_double_free() {
    model("concurrent_double_free", || {
        concurrent_double_free_on(build(), 1)
    });
}
