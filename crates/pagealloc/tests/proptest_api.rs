//! Whole sequences over the public API (hardening, round 3): several allocators side by
//! side — some over caller-supplied metadata (`with_metadata`, each its own buffer), some
//! with a node without memory — driven by one random sequence of allocations (random
//! orders, flags and nodes, bulk), frees (good, double, interior, wrong order), CPU
//! hotplug, drains, ticks, pageblock isolation, high-fraction changes and every public
//! getter with out-of-range arguments. After every step each allocator passes
//! `validate()` and its allocated pages are exactly the blocks the test holds; nothing
//! panics.
//!
//! `PROPTEST_CASES` sets the cases (default 96: about 10 s in a debug build).

use pagealloc::*;
use proptest::prelude::*;
use std::sync::Arc;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(96)
}

const CONFIGS: &[&str] = &[
    "linux-6.12",
    "base",
    "patch7",
    "fast",
    "linux-6.12,fixed_high=1,fixed_batch=1",
    "base,fixed_high=8,fixed_batch=8",
    "fast,zonelist_cache=on",
];

/// One allocator's shape: nodes, pages per node, CPUs per node, whether node 1 has no
/// memory, whether the metadata is the caller's, and the config.
#[derive(Clone, Debug)]
struct Shape {
    nodes: usize,
    pages: u64,
    cpus: usize,
    memoryless: bool,
    supplied: bool,
    config: &'static str,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        1usize..=3,
        prop_oneof![Just(2048u64), Just(4096), Just(6000)],
        1usize..=2,
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(CONFIGS),
    )
        .prop_map(|(nodes, pages, cpus, memoryless, supplied, config)| Shape {
            nodes,
            pages,
            cpus,
            memoryless: memoryless && nodes > 1,
            supplied,
            config,
        })
}

fn build(s: &Shape) -> Allocator {
    let mut l = Layout::numa(s.nodes, s.pages, s.cpus);
    if s.memoryless {
        l.nodes[1].zones.clear();
    }
    let cfg: Config = s.config.parse().expect("config");
    let p = Arc::new(ManualPlatform::new());
    if s.supplied {
        // Each allocator its own buffer, handed over for good.
        let n = l.spanned_pages() as usize;
        let meta: &'static mut [PageMeta] = Vec::from_iter((0..n).map(|_| PageMeta::new())).leak();
        Allocator::with_metadata(&l, cfg, p, meta).expect("build")
    } else {
        Allocator::with_platform(&l, cfg, p).expect("build")
    }
}

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        a: usize,
        cpu: usize,
        order: u8,
        gfp: u32,
        node: Option<usize>,
    },
    Bulk {
        a: usize,
        cpu: usize,
        order: u8,
        n: usize,
    },
    Free {
        a: usize,
        cpu: usize,
        k: usize,
    },
    FreeBulk {
        a: usize,
        cpu: usize,
        k: usize,
    },
    BadFree {
        a: usize,
        cpu: usize,
        pfn: u64,
        order: u8,
    },
    WrongOrder {
        a: usize,
        k: usize,
        delta: u8,
    },
    Offline {
        a: usize,
        cpu: usize,
    },
    Online {
        a: usize,
        cpu: usize,
    },
    Drain {
        a: usize,
        cpu: usize,
    },
    DrainAll {
        a: usize,
    },
    Tick {
        a: usize,
        cpu: usize,
    },
    Isolate {
        a: usize,
        pfn: u64,
        isolate: bool,
    },
    Fraction {
        a: usize,
        f: u32,
    },
    Getters {
        a: usize,
        i: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let a = 0usize..3;
    let cpu = prop_oneof![4 => 0usize..6, 1 => Just(usize::MAX)];
    prop_oneof![
        8 => (a.clone(), cpu.clone(), prop_oneof![6 => 0u8..=3, 2 => 4u8..=10, 1 => Just(11u8), 1 => Just(u8::MAX)],
              0u32..128, prop::option::of(0usize..4))
            .prop_map(|(a, cpu, order, gfp, node)| Op::Alloc { a, cpu, order, gfp, node }),
        2 => (a.clone(), cpu.clone(), 0u8..=3, 0usize..24).prop_map(|(a, cpu, order, n)| Op::Bulk { a, cpu, order, n }),
        6 => (a.clone(), cpu.clone(), any::<usize>()).prop_map(|(a, cpu, k)| Op::Free { a, cpu, k }),
        1 => (a.clone(), cpu.clone(), any::<usize>()).prop_map(|(a, cpu, k)| Op::FreeBulk { a, cpu, k }),
        2 => (a.clone(), cpu.clone(), prop_oneof![0u64..20_000, Just(u64::MAX)], 0u8..=12)
            .prop_map(|(a, cpu, pfn, order)| Op::BadFree { a, cpu, pfn, order }),
        1 => (a.clone(), any::<usize>(), 1u8..4).prop_map(|(a, k, delta)| Op::WrongOrder { a, k, delta }),
        1 => (a.clone(), cpu.clone()).prop_map(|(a, cpu)| Op::Offline { a, cpu }),
        1 => (a.clone(), cpu.clone()).prop_map(|(a, cpu)| Op::Online { a, cpu }),
        1 => (a.clone(), cpu.clone()).prop_map(|(a, cpu)| Op::Drain { a, cpu }),
        1 => a.clone().prop_map(|a| Op::DrainAll { a }),
        1 => (a.clone(), cpu.clone()).prop_map(|(a, cpu)| Op::Tick { a, cpu }),
        1 => (a.clone(), 0u64..20_000, any::<bool>()).prop_map(|(a, pfn, isolate)| Op::Isolate { a, pfn, isolate }),
        1 => (a.clone(), prop_oneof![Just(0u32), 0u32..16, Just(u32::MAX)]).prop_map(|(a, f)| Op::Fraction { a, f }),
        2 => (a, prop_oneof![0usize..8, Just(usize::MAX)]).prop_map(|(a, i)| Op::Getters { a, i }),
    ]
}

/// Every getter and inspection with index `i` (in range or far out of it): no panic.
fn getters(x: &Allocator, i: usize) {
    let _ = (
        x.cpu_counters(i),
        x.cpu_zone_counters(i, i),
        x.cpu_zone_counters(0, i),
    );
    let _ = (
        x.cpu_zone_lock_count(i),
        x.cpu_zonelist_scanned(i),
        x.cpu_node(i),
    );
    let _ = (x.pcp_info(i, 0), x.pcp_info(0, i), x.zone_info(i));
    let _ = (x.node_zones(i), x.zonelist(i), x.zonelist_full(i));
    let pfn = Pfn(i as u64);
    let _ = (
        x.zone_of_pfn(pfn),
        x.pageblock_type(pfn),
        x.free_block_of(pfn),
    );
    let _ = (
        x.nr_free_pages(),
        x.nr_pcp_pages(),
        x.managed_pages(),
        x.counters(),
    );
    let _ = (
        x.high_fraction(),
        x.zoneinfo().to_string().len(),
        x.vmstat().to_string().len(),
    );
}

/// Whether `pfn` lies in a block the test holds on allocator `held`.
fn inside(held: &[Frame], pfn: u64) -> bool {
    held.iter()
        .any(|f| pfn >= f.pfn.0 && pfn < f.pfn.0 + f.pages())
}

fn check(x: &Allocator, held: &[Frame], step: usize, op: &Op) -> Result<(), TestCaseError> {
    let t = x
        .validate()
        .map_err(|e| TestCaseError::fail(format!("step {step} {op:?}: {e}")))?;
    let mine: u64 = held.iter().map(|f| f.pages()).sum();
    prop_assert_eq!(t.allocated, mine, "step {} {:?}: allocated pages", step, op);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
    #[test]
    fn sequences_over_several_allocators_stay_valid(
        shapes in prop::collection::vec(shape(), 3),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let allocs: Vec<Allocator> = shapes.iter().map(build).collect();
        let mut held: Vec<Vec<Frame>> = vec![Vec::new(); allocs.len()];
        for (step, op) in ops.iter().enumerate() {
            let ai = match op {
                Op::Alloc { a, .. } | Op::Bulk { a, .. } | Op::Free { a, .. } | Op::FreeBulk { a, .. }
                | Op::BadFree { a, .. } | Op::WrongOrder { a, .. } | Op::Offline { a, .. }
                | Op::Online { a, .. } | Op::Drain { a, .. } | Op::DrainAll { a } | Op::Tick { a, .. }
                | Op::Isolate { a, .. } | Op::Fraction { a, .. } | Op::Getters { a, .. } => *a,
            };
            let x = &allocs[ai];
            let h = &mut held[ai];
            match *op {
                Op::Alloc { cpu, order, gfp, node, .. } => {
                    if let Ok(f) = x.alloc_on(cpu, order, Gfp(gfp), node) {
                        prop_assert!(order <= MAX_ORDER && cpu < x.nr_cpus());
                        prop_assert!(!inside(h, f.pfn.0), "step {}: {:?} handed out twice", step, f);
                        if Gfp(gfp).contains(Gfp::THISNODE) {
                            let want = node.unwrap_or_else(|| x.cpu_node(cpu).unwrap());
                            let z = x.zone_of_pfn(f.pfn).unwrap();
                            prop_assert!(x.node_zones(want).contains(&z), "THISNODE {:?} off node {}", f, want);
                        }
                        h.push(f);
                    }
                }
                Op::Bulk { cpu, order, n, .. } => {
                    let mut out = Vec::new();
                    let _ = x.alloc_bulk_on(cpu, order, Gfp::KERNEL, None, n, &mut out);
                    for f in out {
                        prop_assert!(!inside(h, f.pfn.0), "step {}: {:?} handed out twice", step, f);
                        h.push(f);
                    }
                }
                Op::Free { cpu, k, .. } => {
                    if !h.is_empty() {
                        let f = h[k % h.len()];
                        let r = x.free_on(cpu, f);
                        prop_assert_eq!(r.is_ok(), cpu < x.nr_cpus(), "step {} free {:?} on {}: {:?}", step, f, cpu, r);
                        if r.is_ok() {
                            h.retain(|g| *g != f);
                        }
                    }
                }
                Op::FreeBulk { cpu, k, .. } => {
                    if !h.is_empty() && cpu < x.nr_cpus() {
                        let n = 1 + k % h.len().min(8);
                        let fs: Vec<Frame> = h.drain(..n).collect();
                        x.free_bulk_on(cpu, &fs).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                    }
                }
                Op::BadFree { cpu, pfn, order, .. } => {
                    // A frame the test does not hold as that exact block: always refused.
                    if !h.iter().any(|f| f.pfn.0 == pfn && f.order == order) && !inside(h, pfn) {
                        prop_assert!(x.free_on(cpu, Frame::new(Pfn(pfn), order)).is_err(), "step {}: free of unheld {:#x}/o{}", step, pfn, order);
                    } else if inside(h, pfn) && !h.iter().any(|f| f.pfn.0 == pfn && f.order == order) {
                        prop_assert!(x.free_on(cpu, Frame::new(Pfn(pfn), order)).is_err(), "step {}: interior or wrong-order free {:#x}/o{}", step, pfn, order);
                    }
                }
                Op::WrongOrder { k, delta, .. } => {
                    if !h.is_empty() {
                        let f = h[k % h.len()];
                        let bad = Frame::new(f.pfn, f.order.wrapping_add(delta));
                        prop_assert!(x.free_on(0, bad).is_err(), "step {}: {:?} freed as {:?}", step, f, bad);
                    }
                }
                Op::Offline { cpu, .. } => { let _ = x.cpu_offline(cpu); }
                Op::Online { cpu, .. } => { let _ = x.cpu_online(cpu); }
                Op::Drain { cpu, .. } => x.drain_cpu(cpu),
                Op::DrainAll { .. } => x.drain_all_pages(),
                Op::Tick { cpu, .. } => { let _ = x.tick(cpu); }
                Op::Isolate { pfn, isolate, .. } => {
                    let mt = if isolate { MigrateType::Isolate } else { MigrateType::Movable };
                    let _ = x.set_pageblock_type(Pfn(pfn), mt);
                }
                Op::Fraction { f, .. } => { let _ = x.set_high_fraction(f); }
                Op::Getters { i, .. } => getters(x, i),
            }
            check(x, h, step, op)?;
        }
        // Everything back, on every allocator.
        for (x, h) in allocs.iter().zip(held.iter_mut()) {
            for f in h.drain(..) {
                x.free_on(0, f).map_err(|e| TestCaseError::fail(format!("final free {f:?}: {e}")))?;
            }
            let t = x.validate().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(t.allocated, 0);
        }
    }
}
