//! The differential harness shared by `tests/differential.rs` (proptest, stable) and the
//! cargo-fuzz target `fuzz/fuzz_targets/differential.rs` (included there by path).
//!
//! # Design
//! Bytes decode into operations ([`Op::decode`]): allocate any order, migratetype, node
//! and flags, bulk variants, free, double free, free of a frame inside a block, free with
//! the wrong order, free of a foreign frame or a hole, drain one CPU or all, decay ticks,
//! clock advances, `high_fraction` changes, CPU offline/online. Each operation runs on the
//! allocator and on a plain reference model — a map of the blocks handed out, keyed by
//! first frame — and the outcomes are compared:
//! - errors for bad input are predicted exactly (order, CPU, node);
//! - a successful allocation must be aligned, of the asked order, inside one zone of an
//!   allowed node, clear of holes, and overlap no block the model holds (no frame handed
//!   out twice);
//! - an order-0 allocation that may reclaim (not ATOMIC) fails only when the model says
//!   the candidate zones are down to their watermark reserves;
//! - every free's outcome is predicted exactly (`Ok`, `NotAllocated`, `ForeignFrame`,
//!   `OrderMismatch`, `InvalidOrder`, `InvalidCpu`), bulk frees including the index;
//! - after every operation `validate()` passes and its allocated pages equal the model's;
//!   an offline CPU caches nothing; a full drain leaves no page on any pageset.
//!
//! At the end every block is freed and all pagesets drained: the zones must be whole
//! again (free pages == managed) and `pgalloc == pgfree`.
//!
//! What it cannot see: concurrency (see `tests/loom.rs` and `pagealloc stress`), and the
//! exact success of high-order requests (fragmentation makes them policy, not contract).

// Included by path into two crates (a test and a fuzz target); each uses part of it.
#![allow(unreachable_pub, dead_code)]

use pagealloc::{
    AllocError, Allocator, BulkFreeError, Config, Frame, FreeError, Gfp, Layout, ManualPlatform,
    Pfn, ZoneKind, ZoneLayout, MAX_ORDER,
};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Configurations the harness runs (the first byte of a fuzz input picks one).
pub const CONFIGS: &[&str] = &[
    "base",
    "patch7",
    "linux-6.12",
    "patch10,merge_skip=on,count_min=on,zonelist_cache=on",
    "linux-6.12,clustered_refill=on,fixed_batch=7,fixed_high=20",
    "linux-6.12,pcp=off",
];

/// Number of layouts [`layout`] knows.
pub const LAYOUTS: usize = 3;

/// Small layouts: one node; two nodes; one node with holes (one not aligned).
pub fn layout(i: usize) -> Layout {
    match i % LAYOUTS {
        0 => Layout::single(2048, 2),
        1 => Layout::numa(2, 1024, 2),
        _ => {
            let mut l = Layout::single(2048, 3);
            l.nodes[0].zones[0].holes = vec![(300, 517), (1536, 1600)];
            l
        }
    }
}

/// One operation. CPU, node and order fields may be out of range on purpose.
#[derive(Clone, Debug)]
pub enum Op {
    /// `alloc_on(cpu, order, gfp, node)`.
    Alloc {
        cpu: usize,
        order: u8,
        gfp: Gfp,
        node: Option<usize>,
    },
    /// `alloc_bulk_on(cpu, order, gfp, None, n)`.
    AllocBulk {
        cpu: usize,
        order: u8,
        gfp: Gfp,
        n: usize,
    },
    /// Free the `idx`-th live block (modulo the live count).
    Free { cpu: usize, idx: usize },
    /// Free up to `n` live blocks in one `free_bulk_on`, optionally with a bad one last.
    FreeBulk { cpu: usize, n: usize, bad: bool },
    /// Free a block that was already freed (or a never-allocated frame).
    DoubleFree { cpu: usize, idx: usize },
    /// Free a frame inside a live block (not its head).
    FreeInterior { cpu: usize, idx: usize },
    /// Free a live block with another order.
    FreeWrongOrder { cpu: usize, idx: usize, order: u8 },
    /// Free a frame outside every zone, or in a hole.
    ForeignFree { cpu: usize, pfn: u64, order: u8 },
    /// `drain_cpu(cpu)`.
    DrainCpu(usize),
    /// `drain_all_pages()`.
    DrainAll,
    /// `tick(cpu)`.
    Tick(usize),
    /// `tick_all()`.
    TickAll,
    /// Advance the manual clock by this many ms.
    Advance(u64),
    /// `set_high_fraction(f)`.
    SetHighFraction(u32),
    /// `cpu_offline(cpu)`.
    Offline(usize),
    /// `cpu_online(cpu)`.
    Online(usize),
}

/// A byte cursor that yields zeros once exhausted.
#[derive(Debug)]
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A cursor over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }
    /// True when no byte is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | (u16::from(self.u8()) << 8)
    }
}

impl Op {
    /// Decode one operation for an allocator of `cpus` CPUs and `nodes` nodes.
    pub fn decode(b: &mut Bytes<'_>, cpus: usize, nodes: usize) -> Op {
        let tag = b.u8();
        // One CPU past the last now and then: InvalidCpu.
        let cpu = |b: &mut Bytes<'_>| (b.u8() as usize) % (cpus + 1);
        // Orders: mostly the cached ones, sometimes up to 10, rarely invalid.
        let order = |b: &mut Bytes<'_>| match b.u8() {
            x @ 0..=159 => x % 4,
            x @ 160..=250 => x % (MAX_ORDER + 1),
            x => MAX_ORDER + 1 + x % 3,
        };
        match tag % 32 {
            0..=11 => {
                let cpu = cpu(b);
                let order = order(b);
                let gfp = Gfp(u32::from(b.u8() & 0x7f));
                let n = b.u8();
                let node = (n & 1 == 1).then_some((n as usize >> 1) % (nodes + 1));
                Op::Alloc {
                    cpu,
                    order,
                    gfp,
                    node,
                }
            }
            12..=13 => Op::AllocBulk {
                cpu: cpu(b),
                order: order(b),
                gfp: Gfp(u32::from(b.u8() & 0x7f)),
                n: (b.u8() % 24) as usize,
            },
            14..=21 => Op::Free {
                cpu: cpu(b),
                idx: b.u16() as usize,
            },
            22 => {
                let cpu = cpu(b);
                let x = b.u8();
                Op::FreeBulk {
                    cpu,
                    n: (x & 31) as usize,
                    bad: x & 0x80 != 0,
                }
            }
            23 => Op::DoubleFree {
                cpu: cpu(b),
                idx: b.u16() as usize,
            },
            24 => Op::FreeInterior {
                cpu: cpu(b),
                idx: b.u16() as usize,
            },
            25 => Op::FreeWrongOrder {
                cpu: cpu(b),
                idx: b.u16() as usize,
                order: b.u8() % 13,
            },
            26 => Op::ForeignFree {
                cpu: cpu(b),
                pfn: u64::from(b.u16()) * 3,
                order: b.u8() % 12,
            },
            27 => match b.u8() % 3 {
                0 => Op::DrainAll,
                _ => Op::DrainCpu(cpu(b)),
            },
            28 => match b.u8() % 4 {
                0 => Op::TickAll,
                _ => Op::Tick(cpu(b)),
            },
            29 => Op::Advance(u64::from(b.u8()) * 20),
            30 => Op::SetHighFraction(match b.u8() % 6 {
                0 => 0,
                1 => u32::from(b.u8() % 8), // 0..=7: refused unless 0
                2 => 8,
                n => 8 + u32::from(b.u8()) * u32::from(n),
            }),
            _ => match b.u8() & 1 {
                0 => Op::Offline(cpu(b)),
                _ => Op::Online(cpu(b)),
            },
        }
    }
}

/// A mismatch between the allocator and the model.
#[derive(Debug)]
pub struct Mismatch(pub String);

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! ensure {
    ($c:expr, $($t:tt)*) => {
        if !$c {
            return Err(Mismatch(format!($($t)*)));
        }
    };
}

#[derive(Clone, Debug)]
struct ZoneSpan {
    node: usize,
    start: u64,
    end: u64,
    holes: Vec<(u64, u64)>,
}

impl ZoneSpan {
    fn in_hole(&self, pfn: u64) -> bool {
        self.holes.iter().any(|&(s, e)| pfn >= s && pfn < e)
    }
    fn overlaps_hole(&self, s: u64, e: u64) -> bool {
        self.holes.iter().any(|&(hs, he)| s < he && hs < e)
    }
    fn managed(&self) -> u64 {
        self.end - self.start - self.holes.iter().map(|(s, e)| e - s).sum::<u64>()
    }
}

/// Counts of what a run exercised (for the report of a fuzz or proptest run).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    /// Operations run.
    pub ops: u64,
    /// Allocations that succeeded (blocks).
    pub allocs: u64,
    /// Allocations that failed with OutOfMemory.
    pub oom: u64,
    /// Frees that succeeded (blocks).
    pub frees: u64,
    /// Frees refused as predicted.
    pub refused: u64,
}

/// The allocator under test and the reference model.
#[derive(Debug)]
pub struct Harness {
    /// The allocator.
    pub a: Allocator,
    clock: Arc<ManualPlatform>,
    zones: Vec<ZoneSpan>,
    nodes: usize,
    /// Live blocks: first frame -> order.
    live: BTreeMap<u64, u8>,
    /// Blocks freed earlier (for double frees), bounded.
    freed: Vec<Frame>,
    online: Vec<bool>,
    fraction: u32,
    /// What ran.
    pub tally: Tally,
    /// Run `validate()` (and the page-count comparison) after every this many
    /// operations (1: after each, the proptest default; the fuzz target uses more, for
    /// speed). Outcomes are compared after every operation regardless.
    pub validate_every: u64,
}

impl Harness {
    /// An allocator of config `config` over layout `layout`.
    pub fn new(config: &str, layout_idx: usize) -> Harness {
        let cfg: Config = config.parse().expect("harness config");
        let l = layout(layout_idx);
        let clock = Arc::new(ManualPlatform::new());
        let a = Allocator::with_platform(&l, cfg.clone(), clock.clone()).expect("build");
        let zones = l
            .zones()
            .map(|(node, z): (usize, &ZoneLayout)| {
                assert_eq!(z.kind, ZoneKind::Normal);
                ZoneSpan {
                    node,
                    start: z.start_pfn,
                    end: z.start_pfn + z.pages,
                    holes: z.holes.clone(),
                }
            })
            .collect();
        Harness {
            online: l.cpus.iter().map(|c| c.online).collect(),
            nodes: l.nodes.len(),
            fraction: cfg.high_fraction,
            a,
            clock,
            zones,
            live: BTreeMap::new(),
            freed: Vec::new(),
            tally: Tally::default(),
            validate_every: 1,
        }
    }

    /// Decode and run operations until the bytes run out, then tear down.
    pub fn run_bytes(&mut self, data: &[u8]) -> Result<(), Mismatch> {
        let mut b = Bytes::new(data);
        let (cpus, nodes) = (self.a.nr_cpus(), self.nodes);
        let mut trail = Vec::new();
        while !b.is_empty() {
            let op = Op::decode(&mut b, cpus, nodes);
            trail.push(op.clone());
            if let Err(Mismatch(m)) = self.step(&op) {
                let n = trail.len();
                let from = n.saturating_sub(12);
                return Err(Mismatch(format!(
                    "op #{n} {op:?}: {m}\nlast ops: {:#?}",
                    &trail[from..]
                )));
            }
        }
        self.teardown()
    }

    fn model_pages(&self) -> u64 {
        self.live.values().map(|&o| 1u64 << o).sum()
    }

    fn zone_of(&self, pfn: u64) -> Option<&ZoneSpan> {
        self.zones.iter().find(|z| pfn >= z.start && pfn < z.end)
    }

    /// The outcome the model predicts for freeing `f` on `cpu`.
    fn predict_free(&self, cpu: usize, f: Frame) -> Result<(), FreeError> {
        if cpu >= self.a.nr_cpus() {
            return Err(FreeError::InvalidCpu(cpu));
        }
        if f.order > MAX_ORDER {
            return Err(FreeError::InvalidOrder(f.order));
        }
        let Some(z) = self.zone_of(f.pfn.0) else {
            return Err(FreeError::ForeignFrame(f.pfn));
        };
        if z.in_hole(f.pfn.0) {
            return Err(FreeError::ForeignFrame(f.pfn));
        }
        match self.live.get(&f.pfn.0) {
            Some(&o) if o == f.order => Ok(()),
            Some(&o) => Err(FreeError::OrderMismatch {
                pfn: f.pfn,
                allocated: o,
                given: f.order,
            }),
            None => Err(FreeError::NotAllocated(f.pfn)),
        }
    }

    fn predict_alloc_input(
        &self,
        cpu: usize,
        order: u8,
        node: Option<usize>,
    ) -> Result<(), AllocError> {
        if order > MAX_ORDER {
            return Err(AllocError::InvalidOrder(order));
        }
        if cpu >= self.a.nr_cpus() {
            return Err(AllocError::InvalidCpu(cpu));
        }
        match node {
            Some(n) if n >= self.nodes => Err(AllocError::InvalidNode(n)),
            _ => Ok(()),
        }
    }

    /// Check a block the allocator handed out and record it.
    fn accept(&mut self, f: Frame, order: u8, gfp: Gfp, node: usize) -> Result<(), Mismatch> {
        ensure!(f.order == order, "{f:?}: asked order {order}");
        let (s, e) = (f.pfn.0, f.pfn.0 + f.pages());
        ensure!(s % f.pages() == 0, "{f:?} not aligned");
        let z = self.zone_of(s);
        ensure!(z.is_some(), "{f:?} outside every zone");
        let z = z.unwrap();
        ensure!(e <= z.end, "{f:?} runs past its zone");
        ensure!(!z.overlaps_hole(s, e), "{f:?} covers a hole");
        if gfp.contains(Gfp::THISNODE) {
            ensure!(
                z.node == node,
                "{f:?} on node {} with THISNODE {node}",
                z.node
            );
        }
        if let Some((&ps, &po)) = self.live.range(..e).next_back() {
            ensure!(
                ps + (1u64 << po) <= s,
                "{f:?} overlaps live block {:?}: handed out twice",
                Frame::new(Pfn(ps), po)
            );
        }
        self.live.insert(s, order);
        self.tally.allocs += 1;
        Ok(())
    }

    /// An order-0 request that may reclaim fails only with the candidate zones at their
    /// reserves: their free pages (by the model) at most the high mark plus boost plus the
    /// high-atomic reserve.
    fn check_oom(&self, order: u8, gfp: Gfp, node: usize) -> Result<(), Mismatch> {
        if order != 0 || gfp.contains(Gfp::ATOMIC) {
            return Ok(());
        }
        for (zi, z) in self.zones.iter().enumerate() {
            if gfp.contains(Gfp::THISNODE) && z.node != node {
                continue;
            }
            let used: u64 = self
                .live
                .range(z.start..z.end)
                .map(|(_, &o)| 1u64 << o)
                .sum();
            let free = z.managed() - used;
            let info = self.a.zone_info(zi).unwrap();
            let reserve = info.wmark[2] + info.boost + info.reserved_highatomic;
            ensure!(
                free <= reserve,
                "order-0 OutOfMemory with {free} pages free in zone {zi} (reserve {reserve})"
            );
        }
        Ok(())
    }

    /// Run one operation on both and compare.
    pub fn step(&mut self, op: &Op) -> Result<(), Mismatch> {
        self.tally.ops += 1;
        match *op {
            Op::Alloc {
                cpu,
                order,
                gfp,
                node,
            } => {
                let want = self.predict_alloc_input(cpu, order, node);
                let got = self.a.alloc_on(cpu, order, gfp, node);
                match (want, got) {
                    (Err(w), g) => ensure!(g == Err(w), "alloc: want {w:?}, got {g:?}"),
                    (Ok(()), Ok(f)) => {
                        let node = node.unwrap_or_else(|| self.a.cpu_node(cpu).unwrap());
                        self.accept(f, order, gfp, node)?;
                    }
                    (Ok(()), Err(AllocError::OutOfMemory)) => {
                        self.tally.oom += 1;
                        let node = node.unwrap_or_else(|| self.a.cpu_node(cpu).unwrap());
                        self.check_oom(order, gfp, node)?;
                    }
                    (Ok(()), Err(e)) => ensure!(false, "alloc: unexpected {e:?}"),
                }
            }
            Op::AllocBulk { cpu, order, gfp, n } => {
                let want = self.predict_alloc_input(cpu, order, None);
                let mut out = Vec::new();
                let got = self.a.alloc_bulk_on(cpu, order, gfp, None, n, &mut out);
                match (want, got) {
                    _ if n == 0 => {
                        ensure!(matches!(got, Ok(0)) && out.is_empty(), "bulk of 0: {got:?}")
                    }
                    (Err(w), g) => ensure!(g == Err(w), "bulk: want {w:?}, got {g:?}"),
                    (Ok(()), Ok(k)) => {
                        ensure!(
                            k == out.len() && k <= n,
                            "bulk: {k} of {n}, {} out",
                            out.len()
                        );
                        let node = self.a.cpu_node(cpu).unwrap();
                        for f in out {
                            self.accept(f, order, gfp, node)?;
                        }
                    }
                    (Ok(()), Err(AllocError::OutOfMemory)) => {
                        ensure!(out.is_empty(), "bulk failed but handed out {out:?}");
                        self.tally.oom += 1;
                        self.check_oom(order, gfp, self.a.cpu_node(cpu).unwrap())?;
                    }
                    (Ok(()), Err(e)) => ensure!(false, "bulk: unexpected {e:?}"),
                }
            }
            Op::Free { cpu, idx } => {
                if let Some(f) = self.nth_live(idx) {
                    self.free_and_compare(cpu, f)?;
                }
            }
            Op::FreeBulk { cpu, n, bad } => {
                let mut frames: Vec<Frame> = (0..n.min(self.live.len()))
                    .filter_map(|i| self.nth_live(i * 7 + n))
                    .collect();
                frames.sort_by_key(|f| f.pfn);
                frames.dedup();
                if bad {
                    frames.push(
                        self.freed
                            .last()
                            .copied()
                            .unwrap_or(Frame::new(Pfn(1 << 40), 0)),
                    );
                }
                // The model: frames in order until the first refusal, each against the
                // state the frees before it left.
                let mut want = Ok(());
                let mut ok = 0;
                for (index, f) in frames.iter().enumerate() {
                    match self.predict_free(cpu, *f) {
                        Ok(()) => {
                            self.forget(*f);
                            ok += 1;
                        }
                        Err(error) => {
                            want = Err(BulkFreeError { index, error });
                            break;
                        }
                    }
                }
                let got = self.a.free_bulk_on(cpu, &frames);
                ensure!(
                    got == want,
                    "free_bulk of {} ({ok} valid): want {want:?}, got {got:?}",
                    frames.len()
                );
            }
            Op::DoubleFree { cpu, idx } => {
                let f = if self.freed.is_empty() {
                    // Never handed out: a frame the model says is free, if any.
                    Frame::new(Pfn(self.zones[0].start + (idx as u64 % 64) * 16), 0)
                } else {
                    self.freed[idx % self.freed.len()]
                };
                self.free_and_compare(cpu, f)?;
            }
            Op::FreeInterior { cpu, idx } => {
                if let Some(f) = self.nth_live(idx) {
                    if f.order > 0 {
                        let off = 1 + idx as u64 % (f.pages() - 1);
                        self.free_and_compare(cpu, Frame::new(Pfn(f.pfn.0 + off), 0))?;
                    }
                }
            }
            Op::FreeWrongOrder { cpu, idx, order } => {
                if let Some(f) = self.nth_live(idx) {
                    self.free_and_compare(cpu, Frame::new(f.pfn, order))?;
                }
            }
            Op::ForeignFree { cpu, pfn, order } => {
                // Past the end of the last zone, or inside a hole when there is one.
                let last = self.zones.iter().map(|z| z.end).max().unwrap_or(0);
                let holes: Vec<(u64, u64)> =
                    self.zones.iter().flat_map(|z| z.holes.clone()).collect();
                let p = if !holes.is_empty() && pfn % 2 == 0 {
                    let (s, e) = holes[(pfn as usize / 2) % holes.len()];
                    s + pfn % (e - s)
                } else {
                    last + pfn
                };
                self.free_and_compare(cpu, Frame::new(Pfn(p), order))?;
            }
            Op::DrainCpu(cpu) => {
                self.a.drain_cpu(cpu);
                if cpu < self.a.nr_cpus() {
                    for z in 0..self.a.nr_zones() {
                        let c = self.a.pcp_info(cpu, z).unwrap().count;
                        ensure!(c == 0, "cpu {cpu} zone {z}: {c} pages after drain_cpu");
                    }
                }
            }
            Op::DrainAll => {
                self.a.drain_all_pages();
                ensure!(
                    self.a.nr_pcp_pages() == 0,
                    "{} pcp pages after drain_all_pages",
                    self.a.nr_pcp_pages()
                );
            }
            Op::Tick(cpu) => {
                self.a.tick(cpu);
            }
            Op::TickAll => {
                self.a.tick_all();
            }
            Op::Advance(ms) => self.clock.advance(ms * 1_000_000),
            Op::SetHighFraction(f) => {
                let r = self.a.set_high_fraction(f);
                let valid = f == 0 || f >= 8;
                ensure!(r.is_ok() == valid, "set_high_fraction({f}): {r:?}");
                if valid {
                    self.fraction = f;
                }
                ensure!(
                    self.a.high_fraction() == self.fraction,
                    "high_fraction {} != {}",
                    self.a.high_fraction(),
                    self.fraction
                );
            }
            Op::Offline(cpu) => {
                let r = self.a.cpu_offline(cpu);
                if cpu >= self.a.nr_cpus() {
                    ensure!(
                        r == Err(AllocError::InvalidCpu(cpu)),
                        "offline({cpu}): {r:?}"
                    );
                } else {
                    ensure!(r.is_ok(), "offline({cpu}): {r:?}");
                    self.online[cpu] = false;
                    for z in 0..self.a.nr_zones() {
                        let p = self.a.pcp_info(cpu, z).unwrap();
                        ensure!(p.count == 0, "offline cpu {cpu} zone {z} caches: {p:?}");
                    }
                }
            }
            Op::Online(cpu) => {
                let r = self.a.cpu_online(cpu);
                if cpu >= self.a.nr_cpus() {
                    ensure!(
                        r == Err(AllocError::InvalidCpu(cpu)),
                        "online({cpu}): {r:?}"
                    );
                } else {
                    ensure!(r.is_ok(), "online({cpu}): {r:?}");
                    self.online[cpu] = true;
                }
            }
        }
        if self.tally.ops % self.validate_every.max(1) == 0 {
            self.check_totals()
        } else {
            Ok(())
        }
    }

    /// An offline CPU caches nothing once frees on it have drained (they go straight
    /// through its boot pageset).
    fn check_offline_caches_nothing(&self) -> Result<(), Mismatch> {
        for (cpu, &on) in self.online.iter().enumerate() {
            if !on {
                for z in 0..self.a.nr_zones() {
                    let p = self.a.pcp_info(cpu, z).unwrap();
                    ensure!(p.count == 0, "offline cpu {cpu} zone {z} caches: {p:?}");
                }
            }
        }
        Ok(())
    }

    fn check_totals(&self) -> Result<(), Mismatch> {
        let t = self
            .a
            .validate()
            .map_err(|e| Mismatch(format!("validate: {e}")))?;
        let want = self.model_pages();
        ensure!(
            t.allocated == want,
            "validate counts {} allocated pages, the model {want}",
            t.allocated
        );
        ensure!(
            t.buddy + t.pcp + t.allocated == t.managed,
            "frames lost: {t:?}"
        );
        self.check_offline_caches_nothing()
    }

    fn nth_live(&self, idx: usize) -> Option<Frame> {
        if self.live.is_empty() {
            return None;
        }
        let (&p, &o) = self.live.iter().nth(idx % self.live.len())?;
        Some(Frame::new(Pfn(p), o))
    }

    fn forget(&mut self, f: Frame) {
        self.live.remove(&f.pfn.0);
        self.tally.frees += 1;
        if self.freed.len() >= 64 {
            self.freed.remove(0);
        }
        self.freed.push(f);
    }

    fn free_and_compare(&mut self, cpu: usize, f: Frame) -> Result<(), Mismatch> {
        let want = self.predict_free(cpu, f);
        let got = self.a.free_on(cpu, f);
        ensure!(
            got == want,
            "free_on({cpu}, {f:?}): want {want:?}, got {got:?}"
        );
        if got.is_ok() {
            self.forget(f);
        } else {
            self.tally.refused += 1;
        }
        Ok(())
    }

    /// Free everything, drain, and check the zones are whole again.
    pub fn teardown(&mut self) -> Result<(), Mismatch> {
        let live: Vec<Frame> = self
            .live
            .iter()
            .map(|(&p, &o)| Frame::new(Pfn(p), o))
            .collect();
        for (i, f) in live.into_iter().enumerate() {
            self.free_and_compare(i % self.a.nr_cpus(), f)?;
        }
        self.a.drain_all_pages();
        let t = self
            .a
            .validate()
            .map_err(|e| Mismatch(format!("validate at the end: {e}")))?;
        ensure!(t.allocated == 0 && t.pcp == 0, "after teardown: {t:?}");
        ensure!(
            self.a.nr_free_pages() == self.a.managed_pages(),
            "frames lost: {} free of {} managed",
            self.a.nr_free_pages(),
            self.a.managed_pages()
        );
        let c = self.a.counters();
        ensure!(
            c.pgalloc == c.pgfree,
            "pgalloc {} != pgfree {}",
            c.pgalloc,
            c.pgfree
        );
        Ok(())
    }
}
