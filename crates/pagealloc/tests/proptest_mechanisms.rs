//! Property tests of the core with each beyond-mainline mechanism on (issue 3): random
//! operation sequences — allocations of every order and type on several CPUs, frees,
//! bulk operations, ticks, drains, `compact()`, the merge-skip disable depth, pageblock
//! retagging (isolation included), clock jumps — with `validate()` after every step and
//! a reference model of the allocated blocks: a block handed out must not overlap any
//! block still held (no double hand-out), and the allocator's allocated-page total must
//! equal the model's.
//!
//! `PROPTEST_CASES` sets the sequences per config (default 24).

mod common;
use common::*;
use pagealloc::frame::PAGEBLOCK_PAGES;
use pagealloc::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Alloc { cpu: usize, order: u8, gfp: u8 },
    Free { pick: usize },
    AllocBulk { cpu: usize, n: usize },
    FreeBulk { cpu: usize, n: usize },
    Tick { cpu: usize },
    DrainCpu { cpu: usize },
    DrainAll,
    Compact,
    MergeSkipDisable(bool),
    Pageblock { pick: u64, mt: u8 },
    Advance { ms: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let order = prop_oneof![8 => 0u8..=0, 3 => 1u8..=3, 1 => 4u8..=10];
    prop_oneof![
        30 => (0..3usize, order, 0u8..4).prop_map(|(cpu, order, gfp)| Op::Alloc { cpu, order, gfp }),
        22 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        4 => (0..3usize, 1..200usize).prop_map(|(cpu, n)| Op::AllocBulk { cpu, n }),
        4 => (0..3usize, 1..200usize).prop_map(|(cpu, n)| Op::FreeBulk { cpu, n }),
        3 => (0..3usize).prop_map(|cpu| Op::Tick { cpu }),
        2 => (0..3usize).prop_map(|cpu| Op::DrainCpu { cpu }),
        1 => Just(Op::DrainAll),
        2 => Just(Op::Compact),
        2 => any::<bool>().prop_map(Op::MergeSkipDisable),
        2 => (any::<u64>(), 0u8..5).prop_map(|(pick, mt)| Op::Pageblock { pick, mt }),
        2 => (0u64..1500).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// The allocated blocks, by head PFN.
#[derive(Default)]
struct Model {
    held: BTreeMap<u64, Frame>,
}

impl Model {
    fn add(&mut self, f: Frame) -> Result<(), String> {
        let (s, e) = (f.pfn.0, f.pfn.0 + f.pages());
        if let Some((_, g)) = self.held.range(..e).next_back() {
            if g.pfn.0 + g.pages() > s {
                return Err(format!("{f:?} handed out while {g:?} is held"));
            }
        }
        self.held.insert(s, f);
        Ok(())
    }
    fn take(&mut self, pick: usize) -> Option<Frame> {
        if self.held.is_empty() {
            return None;
        }
        let k = *self.held.keys().nth(pick % self.held.len())?;
        self.held.remove(&k)
    }
    fn pages(&self) -> u64 {
        self.held.values().map(Frame::pages).sum()
    }
}

fn gfp(k: u8) -> Gfp {
    match k {
        0 => Gfp::USER,
        1 => Gfp::KERNEL,
        2 => Gfp::from_migratetype(MigrateType::Reclaimable) | Gfp::KSWAPD,
        _ => Gfp::ATOMIC_KERNEL,
    }
}

fn run(config: &str, ops: &[Op]) -> Result<(), TestCaseError> {
    let c = cfg(config);
    // Two nodes (the zonelist cache has something to skip), three CPUs.
    let mut layout = Layout::numa(2, 4096, 1);
    layout.cpus.push(layout.cpus[0]);
    let (a, p) = manual(&layout, c);
    let mut m = Model::default();
    let mut depth = 0u32;
    for (step, op) in ops.iter().enumerate() {
        let ctx =
            |what: String| TestCaseError::fail(format!("{config}, step {step} {op:?}: {what}"));
        match *op {
            Op::Alloc { cpu, order, gfp: g } => match a.alloc_on(cpu, order, gfp(g), None) {
                Ok(f) => {
                    prop_assert_eq!(f.order, order);
                    m.add(f).map_err(ctx)?
                }
                Err(AllocError::OutOfMemory) => {}
                Err(e) => return Err(ctx(format!("unexpected error {e:?}"))),
            },
            Op::Free { pick } => {
                if let Some(f) = m.take(pick) {
                    a.free_on(0, f).map_err(|e| ctx(format!("{e:?}")))?;
                }
            }
            Op::AllocBulk { cpu, n } => {
                let mut v = Vec::new();
                a.alloc_bulk_on(cpu, 0, Gfp::USER, None, n, &mut v)
                    .map_err(|e| ctx(format!("{e:?}")))?;
                for f in v {
                    m.add(f).map_err(ctx)?;
                }
            }
            Op::FreeBulk { cpu, n } => {
                let v: Vec<Frame> = (0..n).filter_map(|i| m.take(i * 7)).collect();
                a.free_bulk_on(cpu, &v).map_err(|e| ctx(format!("{e:?}")))?;
            }
            Op::Tick { cpu } => {
                a.tick(cpu);
            }
            Op::DrainCpu { cpu } => a.drain_cpu(cpu),
            Op::DrainAll => a.drain_all_pages(),
            Op::Compact => {
                a.compact();
            }
            Op::MergeSkipDisable(on) => {
                if on {
                    depth += 1;
                    a.merge_skip_disable(true);
                } else if depth > 0 {
                    depth -= 1;
                    a.merge_skip_disable(false);
                }
            }
            Op::Pageblock { pick, mt } => {
                let pb = pick % (a.managed_pages() / PAGEBLOCK_PAGES);
                let mt = MigrateType::from_u8(mt).expect("type");
                a.set_pageblock_type(Pfn(pb * PAGEBLOCK_PAGES), mt);
            }
            Op::Advance { ms } => p.advance(ms * 1_000_000),
        }
        let t = a.validate().map_err(|e| ctx(e.to_string()))?;
        prop_assert_eq!(
            t.allocated,
            m.pages(),
            "{} step {}: allocated pages",
            config,
            step
        );
    }
    // Everything back: all frames free again, nothing lost.
    let all: Vec<Frame> = m.held.values().copied().collect();
    a.free_bulk_on(0, &all)
        .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    a.drain_all_pages();
    let t = a
        .validate()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(t.allocated, 0);
    prop_assert_eq!(t.buddy + t.pcp, t.managed);
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

macro_rules! mechanisms {
    ($($name:ident => $config:expr;)*) => {$(
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(cases()))]
            #[test]
            fn $name(ops in prop::collection::vec(op(), 1..150)) {
                run($config, &ops)?;
            }
        }
    )*};
}

mechanisms! {
    zonelist_cache => "linux-6.12,zonelist_cache=on";
    merge_skip => "linux-6.12,merge_skip=on";
    clustered_refill => "linux-6.12,clustered_refill=on";
    merge_skip_clustered => "linux-6.12,merge_skip=on,clustered_refill=on,fixed_batch=7";
    fast => "fast,fixed_batch=7";
    splice_no_clusters => "linux-6.12,merge_skip=on,splice_drain=on,fixed_batch=7";
    count_min => "linux-6.12,count_min=on";
    pcp_migratetype_cache => "linux-6.12,pcp_migratetype_cache=on";
    all_on_base => "base,zonelist_cache=on,merge_skip=on,clustered_refill=on,count_min=on";
    all_on_6_12 => "linux-6.12,zonelist_cache=on,merge_skip=on,clustered_refill=on,count_min=on,pcp_migratetype_cache=on";
}
