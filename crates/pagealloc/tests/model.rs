//! Property tests: random operation sequences against a plain reference model of the
//! allocated blocks, for every preset; `validate()` after each sequence.
//!
//! The model knows which blocks are allocated (start, order). It checks that every
//! allocation is aligned, inside memory, and overlaps no allocated block (never handed
//! out twice), that frees of allocated blocks succeed and everything else is refused
//! with the right error, and that the allocator's own totals and counters agree.

mod common;
use common::*;
use pagealloc::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        cpu: usize,
        order: u8,
        mt: u8,
        node: Option<usize>,
    },
    Free {
        pick: usize,
        cpu: usize,
    },
    FreeTwice {
        pick: usize,
    },
    FreeWrongOrder {
        pick: usize,
    },
    FreeForeign {
        pfn: u64,
    },
    Drain {
        cpu: usize,
    },
    DrainAll,
    Tick {
        cpu: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, prop_oneof![4 => 0..4u8, 1 => 0..=10u8, 1 => Just(9u8)], 0..3u8,
              prop_oneof![Just(None), (0..2usize).prop_map(Some)])
            .prop_map(|(cpu, order, mt, node)| Op::Alloc { cpu, order, mt, node }),
        5 => (any::<usize>(), 0..3usize).prop_map(|(pick, cpu)| Op::Free { pick, cpu }),
        1 => any::<usize>().prop_map(|pick| Op::FreeTwice { pick }),
        1 => any::<usize>().prop_map(|pick| Op::FreeWrongOrder { pick }),
        1 => (0..40_000u64).prop_map(|pfn| Op::FreeForeign { pfn }),
        1 => (0..3usize).prop_map(|cpu| Op::Drain { cpu }),
        1 => Just(Op::DrainAll),
        1 => (0..3usize).prop_map(|cpu| Op::Tick { cpu }),
    ]
}

fn layout() -> Layout {
    // two nodes, a hole, an unaligned end, three CPUs (two on node 0)
    let mut l = Layout::numa(2, 8192, 1);
    l.nodes[0].zones[0].holes = vec![(1000, 1100)];
    l.nodes[1].zones[0].pages = 8192 - 37;
    l.cpus.push(CpuLayout {
        node: 0,
        llc_slice_bytes: 1 << 19,
        online: true,
    });
    l
}

fn run(cfg: Config, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let (a, clock) = manual(&layout(), cfg);
    let mut live: BTreeMap<u64, u8> = BTreeMap::new(); // start -> order
    let mut freed: Vec<Frame> = Vec::new();
    for op in ops {
        match op {
            Op::Alloc {
                cpu,
                order,
                mt,
                node,
            } => {
                let gfp = Gfp::from_migratetype(MigrateType::from_u8(mt).unwrap());
                if let Ok(f) = a.alloc_on(cpu, order, gfp, node) {
                    prop_assert_eq!(f.order, order);
                    let (s, e) = (f.pfn.0, f.pfn.0 + f.pages());
                    prop_assert_eq!(s % f.pages(), 0, "aligned");
                    prop_assert!(a.zone_of_pfn(f.pfn).is_some());
                    prop_assert!(!(1000..1100).contains(&s), "never a hole");
                    if let Some((&ps, &po)) = live.range(..e).next_back() {
                        prop_assert!(ps + (1u64 << po) <= s, "{f} overlaps {ps:#x}/o{po}");
                    }
                    live.insert(s, order);
                }
            }
            Op::Free { pick, cpu } => {
                if live.is_empty() {
                    continue;
                }
                let (&s, &o) = live.iter().nth(pick % live.len()).unwrap();
                let f = Frame::new(Pfn(s), o);
                prop_assert_eq!(a.free_on(cpu, f), Ok(()));
                live.remove(&s);
                freed.push(f);
            }
            Op::FreeTwice { pick } => {
                if freed.is_empty() {
                    continue;
                }
                let f = freed[pick % freed.len()];
                if live.contains_key(&f.pfn.0) {
                    continue; // handed out again since: not a double free
                }
                let r = a.free_on(0, f);
                let ok = matches!(
                    r,
                    Err(FreeError::NotAllocated(_)) | Err(FreeError::OrderMismatch { .. })
                );
                prop_assert!(ok, "double free of {f} gave {r:?}");
            }
            Op::FreeWrongOrder { pick } => {
                if live.is_empty() {
                    continue;
                }
                let (&s, &o) = live.iter().nth(pick % live.len()).unwrap();
                let wrong = (o + 1) % (MAX_ORDER + 1);
                let r = a.free_on(0, Frame::new(Pfn(s), wrong));
                prop_assert_eq!(
                    r,
                    Err(FreeError::OrderMismatch {
                        pfn: Pfn(s),
                        allocated: o,
                        given: wrong
                    })
                );
            }
            Op::FreeForeign { pfn } => {
                if live.contains_key(&pfn) {
                    continue;
                }
                let r = a.free_on(1, Frame::new(Pfn(pfn), 0));
                prop_assert!(r.is_err(), "free of {pfn:#x} (not allocated) succeeded");
            }
            Op::Drain { cpu } => a.drain_cpu(cpu),
            Op::DrainAll => a.drain_all_pages(),
            Op::Tick { cpu } => {
                clock.advance(1_000_000_000);
                a.tick(cpu);
            }
        }
    }
    let t = a
        .validate()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let model: u64 = live.values().map(|&o| 1u64 << o).sum();
    prop_assert_eq!(t.allocated, model);
    let c = a.counters();
    prop_assert_eq!(c.pgalloc - c.pgfree, model);
    for (&s, &o) in &live {
        prop_assert_eq!(a.free_on(2, Frame::new(Pfn(s), o)), Ok(()));
    }
    a.drain_all_pages();
    let t = a
        .validate()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!((t.allocated, t.pcp), (0, 0));
    prop_assert_eq!(a.nr_free_pages(), a.managed_pages());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_sequences_every_preset(
        preset in 0..Preset::ALL.len(),
        thp in any::<bool>(),
        ops in prop::collection::vec(op(), 1..300),
    ) {
        let mut c = Preset::ALL[preset].config();
        c.thp = thp;
        run(c, ops)?;
    }

    #[test]
    fn random_sequences_small_batches(ops in prop::collection::vec(op(), 1..300), b in 1..8u32, h in 0..40u32) {
        // tiny batches and highs: refills and drains on almost every operation
        let mut c = cfg("linux-6.12");
        c.fixed_batch = Some(b);
        c.fixed_high = Some(h);
        run(c, ops)?;
    }
}
