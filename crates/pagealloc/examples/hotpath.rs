//! Hot-path cost of an order-0 allocate+free pair on a PCP hit (a benchmark, not a test).
//!
//! `cargo run --release -p pcp-pagealloc --example hotpath` prints ns per pair, median of 9
//! runs of 2M pairs, side by side for: named CPU with the checked free (`alloc_on`/
//! `free_on`, the default) and with the unchecked one (`unsafe free_on_unchecked`), and
//! the current-CPU entry points (`alloc_pages`/`free_pages`, which ask `sched_getcpu`),
//! and the interrupt-context pair (`alloc_pages_nolock`/`free_pages_nolock`, CPU 0).
//!
//! `hotpath PAIRS` runs `alloc_on`/`free_on` for exactly PAIRS pairs and nothing else;
//! `hotpath PAIRS unchecked` the same with `free_on_unchecked`, `hotpath PAIRS order9`
//! with checked order-9 (THP) pairs: run it under `valgrind --tool=callgrind` with two values of PAIRS and divide the
//! difference of the totals by the difference of PAIRS for instructions per pair.
//!
//! `hotpath PAIRS fullK` (K = 0…3) runs the same checked order-0 pairs on CPU 0 of a
//! four-node layout whose first K nodes (in CPU 0's zonelist order) are filled below
//! their low watermark, so every allocation's zonelist walk checks K full zones before
//! the one it takes from (a pcp hit there). The difference of `full3` and `full1` per
//! pair, divided by 2, is the instructions of one extra zone checked and found full
//! (the simulator's `zone_check_ns`, docs/sim-cost-model.md §3).
//!
//! `hotpath BLOCKS churnK` (K = 0 or 9) measures the zone side instead of the hit:
//! rounds of 128 MiB of order-K blocks allocated on CPU 0 and freed in a shuffled order,
//! BLOCKS blocks in all, so nearly every block goes through a refill and a drain (the
//! switches of docs/performance.md, "Which switches earn their place"). The first round
//! meets a fresh allocator (order-10 blocks, as LLFree's benchmarks do): `hotpath 0
//! churnK` against one round gives that round's instructions per block, two rounds
//! against six the aged state's. `hotpath BLOCKS bulkK` frees each round's blocks
//! newest first instead (LLFree's `bulk`: buddies leave the pageset together).
//!
//! Every mode measures `Config::default()` unless `HOTPATH_CONFIG` names another
//! (`HOTPATH_CONFIG=fast hotpath 100000`, `HOTPATH_CONFIG=fast,own_bitmap=off …`).

use pagealloc::{Allocator, Config, Gfp, Layout};
use std::hint::black_box;
use std::time::Instant;

/// The config to measure: `HOTPATH_CONFIG` (a preset with overrides, as the lab's
/// `--config` takes it), else `Config::default()`.
fn config() -> Config {
    match std::env::var("HOTPATH_CONFIG") {
        Ok(c) => c
            .parse()
            .unwrap_or_else(|e| panic!("HOTPATH_CONFIG={c}: {e}")),
        Err(_) => Config::default(),
    }
}

fn alloc() -> Allocator {
    // 1 GiB, one CPU: batch 63
    Allocator::new(&Layout::single(1 << 18, 1), config()).expect("allocator")
}

fn pairs_on(a: &Allocator, n: u64) {
    for _ in 0..n {
        let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
        a.free_on(0, black_box(f)).unwrap();
    }
}

fn pairs_order9(a: &Allocator, n: u64) {
    for _ in 0..n {
        let f = a.alloc_on(0, 9, Gfp::USER, None).unwrap();
        a.free_on(0, black_box(f)).unwrap();
    }
}

fn pairs_unchecked(a: &Allocator, n: u64) {
    for _ in 0..n {
        let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
        // SAFETY: `f` was just allocated with order 0 by this thread and is freed once;
        // no other thread uses the allocator (no lock is involved: the contract is about
        // ownership of the block, which this loop holds alone).
        unsafe { a.free_on_unchecked(0, black_box(f)).unwrap() };
    }
}

fn pairs_nolock(a: &Allocator, n: u64) {
    for _ in 0..n {
        let f = a.alloc_pages_nolock(0, 0, None).unwrap();
        a.free_pages_nolock(0, black_box(f)).unwrap();
    }
}

fn pairs_current(a: &Allocator, n: u64) {
    for _ in 0..n {
        let f = a.alloc_pages(0, Gfp::USER).unwrap();
        a.free_pages(black_box(f)).unwrap();
    }
}

/// Four nodes of 64 MiB, one CPU each; the first `k` zones of CPU 0's zonelist are
/// filled (each by its own node's CPU, until an allocation falls back), so they fail
/// the watermark test. Returns the allocator and the pages kept to hold them full.
fn with_full_zones(k: usize) -> (Allocator, Vec<pagealloc::Frame>) {
    let a = Allocator::new(&Layout::numa(4, 16_384, 1), config()).expect("allocator");
    let order: Vec<usize> = a.zonelist(0).to_vec();
    let mut held = Vec::new();
    for &zi in order.iter().take(k) {
        let node = zi; // one zone per node in this layout
        let cpu = node;
        loop {
            let f = a.alloc_on(cpu, 0, Gfp::USER, None).expect("fill");
            if a.zone_of_pfn(f.pfn) != Some(zi) {
                a.free_on(cpu, f).expect("free");
                break;
            }
            held.push(f);
        }
    }
    (a, held)
}

/// `n` order-`k` blocks in rounds of 128 MiB: each round allocates its blocks, shuffles
/// them (a fixed LCG; or, not `shuffle`, reverses them) and frees them.
fn churn(a: &Allocator, k: u8, n: u64, shuffle: bool) {
    let per_round = (1u64 << 15) >> k;
    let mut held = Vec::with_capacity(per_round as usize);
    let mut s = 1u64;
    for _ in 0..n.div_ceil(per_round) {
        for _ in 0..per_round {
            held.push(a.alloc_on(0, k, Gfp::USER, None).unwrap());
        }
        if !shuffle {
            held.reverse();
        }
        for i in (1..held.len()).rev().filter(|_| shuffle) {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            held.swap(i, (s >> 33) as usize % (i + 1));
        }
        for f in held.drain(..) {
            a.free_on(0, black_box(f)).unwrap();
        }
    }
}

type Case = (&'static str, fn(&Allocator, u64));

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if let Some(n) = std::env::args().nth(1) {
        let n: u64 = n.parse().expect("PAIRS is a number");
        let mode = std::env::args().nth(2);
        if let Some(k) = mode.as_deref().and_then(|m| m.strip_prefix("full")) {
            let k: usize = k.parse().expect("fullK: K is a number");
            let (a, held) = with_full_zones(k);
            let start = a.counters();
            pairs_on(&a, n);
            let d = a.counters().since(&start);
            assert_eq!(d.pgalloc, n);
            assert!(d.pcp_refill <= 1, "stayed on the PCP hit path");
            assert_eq!(
                d.zonelist_scanned,
                n * k as u64,
                "each walk passed {k} full zones"
            );
            drop(held);
            return;
        }
        let churned = mode.as_deref().and_then(|m| {
            m.strip_prefix("churn")
                .map(|k| (k, true))
                .or(m.strip_prefix("bulk").map(|k| (k, false)))
        });
        if let Some((k, shuffle)) = churned {
            let k: u8 = k.parse().expect("churnK, bulkK: K is an order");
            let a = alloc();
            churn(&a, k, n, shuffle);
            return;
        }
        let a = alloc();
        let pages = match mode.as_deref() {
            Some("unchecked") => {
                pairs_unchecked(&a, n);
                n
            }
            Some("order9") => {
                pairs_order9(&a, n);
                n << 9
            }
            _ => {
                pairs_on(&a, n);
                n
            }
        };
        let c = a.counters();
        assert_eq!(c.pgalloc, pages);
        assert!(c.pcp_refill <= 1, "stayed on the PCP hit path");
        return;
    }
    const N: u64 = 2_000_000;
    let cases: [Case; 4] = [
        ("alloc_on/free_on_unchecked (unsafe)", pairs_unchecked),
        ("alloc_on/free_on (checked)", pairs_on),
        ("alloc_pages_nolock/free_pages_nolock", pairs_nolock),
        (
            "alloc_pages/free_pages (sched_getcpu, checked)",
            pairs_current,
        ),
    ];
    let allocs: Vec<Allocator> = cases.iter().map(|_| alloc()).collect();
    let mut samples = vec![Vec::new(); cases.len()];
    // interleave the cases so machine noise hits them alike
    for _ in 0..9 {
        for (i, (_, f)) in cases.iter().enumerate() {
            let t = Instant::now();
            f(&allocs[i], N);
            samples[i].push(t.elapsed().as_nanos() as f64 / N as f64);
        }
    }
    println!("order-0 allocate+free pair on a PCP hit, median of 9 x {N} pairs");
    for (i, (name, _)) in cases.iter().enumerate() {
        let s = &samples[i];
        let min = s.iter().cloned().fold(f64::MAX, f64::min);
        println!(
            "  {name:<50} {:6.1} ns/pair (min {min:.1})",
            median(s.clone())
        );
    }
    for a in &allocs {
        a.validate().expect("valid after the run");
    }
    println!(
        "per-frame metadata: {} bytes",
        std::mem::size_of::<pagealloc::PageMeta>()
    );
}
