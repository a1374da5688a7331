//! Microbenchmarks with LLFree's definitions (llfree-rs `bench`), so figures can be put
//! beside its published ones.
//!
//! # Design
//! With `frames` = memory / 4 KiB, each of `threads` pinned threads handles
//! `n = frames / threads / 2 / 2^order` blocks of `order` (half the memory in use at the
//! peak), allocating as CPU = its thread index:
//! - [`BenchKind::Bulk`]: allocate all `n`, then free all in reverse order (LIFO); the
//!   allocation loop and the free loop are timed separately: `get_ns`, `put_ns`.
//! - [`BenchKind::Repeat`]: prefill `n` blocks, then `n × 2^order` times allocate a block
//!   and free it at once: `pair_ns` per allocate+free pair; the prefilled blocks are
//!   freed once every thread's timed loop has ended. As in LLFree's `repeat`, the
//!   timed loop has as many pairs at every order (`frames / threads / 2`), so an order-9
//!   row times 131 072 pairs per thread at 2 GiB and 2 threads, not 256.
//! - [`BenchKind::Rand`]: allocate `n` (timed: `get_ns`), shuffle all threads' blocks
//!   together with a seeded RNG, deal them out evenly, each thread frees its share
//!   (timed: `put_ns`) — most frees are of another CPU's blocks.
//!
//! Bulk and rand repeat their round `2^order` times in the same threads, as LLFree's
//! `bulk` and `rand` do, and time every round: `get_ns` and `put_ns` are per operation
//! over all rounds (`rounds` in the row), so an order-9 row times as many operations as
//! an order-0 one and a thread's later rounds run on warm caches and a tuned pageset, as
//! LLFree's do. Rand's round `r` shuffles with the seed mixed with `r` (round 0 with the
//! seed itself).
//!
//! A thread's time is its loop's duration over its operations; a run's figure is the
//! mean over threads, and the reported figure the median over `iterations` runs. Each
//! run has a source of its own, built before it (untimed), as LLFree's bench builds its
//! allocator anew for each iteration, and checked empty (its `validate`) after it; with
//! [`BenchParams::reuse`] (`--reuse`) one source serves all the runs of a row, so that
//! later runs start from the pagesets, tuned `high` and free lists the one before left
//! (for pagealloc an aged state: a `rand` run leaves the order-0 frames shuffled on the
//! pagesets and free lists). Blocks are not touched, as in LLFree.
//!
//! The loops are generic over the source. pagealloc's run through
//! [`PageallocSource`] itself, so each operation is its `alloc_on` / `free_on` (checked)
//! inlined into the loop with the order and the CPU as run-time values, as LLFree's
//! loop calls its `get` / `put`; every other source runs through `dyn PageSource`.
//! LLFree's own loop calls through two indirections per operation (its `DynAlloc`
//! vtable and the request closure), so this harness does no more work per operation
//! than LLFree's (docs/performance.md, "The repeat bench").

use std::fmt;
use std::str::FromStr;
use std::sync::{Barrier, Mutex};
use std::time::Instant;

use crate::peers::{self, Block, PageSource, PageallocSource, Peer, SourceError, SourceSpec};
use crate::workload::{MigrateKind, Rng, SplitMix64};
use crate::Row;

/// One of LLFree's microbenchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BenchKind {
    /// Allocate all, then free all (LIFO).
    Bulk,
    /// Prefill, then allocate and free one block repeatedly.
    Repeat,
    /// Allocate, shuffle across threads, free.
    Rand,
}

impl BenchKind {
    /// All, in LLFree's order.
    pub const ALL: [BenchKind; 3] = [BenchKind::Bulk, BenchKind::Repeat, BenchKind::Rand];

    /// The name on the command line and in rows.
    pub fn name(self) -> &'static str {
        match self {
            BenchKind::Bulk => "bulk",
            BenchKind::Repeat => "repeat",
            BenchKind::Rand => "rand",
        }
    }
}

impl fmt::Display for BenchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A benchmark name that is not one of [`BenchKind::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown benchmark `{0}`; valid: {names}", names = BenchKind::ALL.map(BenchKind::name).join(", "))]
pub struct UnknownBench(pub String);

impl FromStr for BenchKind {
    type Err = UnknownBench;
    fn from_str(s: &str) -> Result<Self, UnknownBench> {
        BenchKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownBench(s.to_owned()))
    }
}

/// Parameters of one benchmark row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchParams {
    /// Which benchmark.
    pub kind: BenchKind,
    /// Canonical source name.
    pub alloc: &'static str,
    /// pagealloc config (ignored by peers).
    pub config: pagealloc::Config,
    /// Threads.
    pub threads: u32,
    /// Block order.
    pub order: u8,
    /// Memory in bytes (the frame range of frame-range sources; the work size of all).
    pub memory_bytes: u64,
    /// Repetitions; the median is reported.
    pub iterations: u32,
    /// Seed of the shuffle in `rand`.
    pub seed: u64,
    /// Run every iteration on one source, built once for the row (later iterations
    /// start from the pagesets, tuned `high` and free lists the previous one left);
    /// `false`: a fresh source per iteration, as LLFree's bench builds its allocator
    /// anew for each.
    pub reuse: bool,
}

/// Blocks per thread: `frames / threads / 2 / 2^order`.
pub fn blocks_per_thread(memory_bytes: u64, threads: u32, order: u8) -> u64 {
    memory_bytes / 4096 / u64::from(threads.max(1)) / 2 / (1u64 << order)
}

/// Runs one benchmark row; the row carries `get_ns`/`put_ns` (bulk, rand) or `pair_ns`
/// (repeat), medians over the iterations.
///
/// # Errors
/// Build errors, an unsupported order (the pool and order > 0), running out of memory,
/// or a source that is not empty after a run.
pub fn run(p: &BenchParams) -> Result<Row, SourceError> {
    let threads = p.threads.max(1);
    let n = blocks_per_thread(p.memory_bytes, threads, p.order);
    if n == 0 {
        return Err(SourceError::Unsupported {
            source: p.alloc,
            why: format!(
                "{} MiB is too small for {threads} threads of order-{} blocks",
                p.memory_bytes >> 20,
                p.order
            ),
        });
    }
    let spec = SourceSpec {
        name: p.alloc,
        config: p.config.clone(),
        cpus: threads as usize,
        frames: p.memory_bytes / 4096,
        memory: false,
    };
    if Peer::parse(p.alloc)? == Peer::Pagealloc {
        run_on(p, threads, n, || {
            PageallocSource::new(spec.config.clone(), spec.frames, spec.cpus, spec.memory)
                .map(Box::new)
        })
    } else {
        run_on(p, threads, n, || peers::build(&spec))
    }
}

/// [`run`] on the sources `build` makes: one per iteration, or one for all with
/// [`BenchParams::reuse`].
fn run_on<S, B, F>(p: &BenchParams, threads: u32, n: u64, build: F) -> Result<Row, SourceError>
where
    S: PageSource + ?Sized,
    B: std::ops::Deref<Target = S>,
    F: Fn() -> Result<B, SourceError>,
{
    let mut get = Vec::new();
    let mut put = Vec::new();
    let mut pair = Vec::new();
    let mut counters: Option<pagealloc::Counters> = None;
    let mut config = None;
    let mut kept: Option<B> = None;
    for it in 0..p.iterations.max(1) {
        let source = match kept.take() {
            Some(s) => s,
            None => build()?,
        };
        let before = source.counters();
        let (g, q, r) = once(p, &*source, threads, n, p.seed.wrapping_add(u64::from(it)))?;
        get.extend(g);
        put.extend(q);
        pair.extend(r);
        source.validate()?;
        if let Some(c) = before.zip(source.counters()).map(|(b, a)| a.since(&b)) {
            counters.get_or_insert_with(Default::default).merge(&c);
        }
        config = source.config();
        if p.reuse {
            kept = Some(source);
        }
    }
    Ok(Row {
        bench: Some(p.kind.name().to_owned()),
        alloc: p.alloc.to_owned(),
        config,
        cpus: Some(threads),
        order: Some(p.order),
        machine: Some("host".to_owned()),
        get_ns: median(&mut get),
        put_ns: median(&mut put),
        pair_ns: median(&mut pair),
        seed: Some(p.seed),
        extra: [
            ("blocks_per_thread".to_owned(), n as f64),
            ("iterations".to_owned(), f64::from(p.iterations.max(1))),
        ]
        .into_iter()
        .chain(
            (p.kind == BenchKind::Repeat)
                .then(|| ("pairs_per_thread".to_owned(), (n << p.order) as f64)),
        )
        .chain(
            (p.kind != BenchKind::Repeat).then(|| ("rounds".to_owned(), (1u64 << p.order) as f64)),
        )
        .chain(
            counters
                .map(|c| counter_extras(&c, p.order))
                .into_iter()
                .flatten(),
        )
        .collect(),
        ..Row::default()
    })
}

/// The names of the counter columns [`run`] adds to a row of a source with counters
/// (pagealloc): what the runs did under the zone lock, per block operation.
pub const COUNTER_COLUMNS: &[&str] = &[
    "zone_lock_per_kop",
    "contended_pct",
    "lock_wait_ns_op",
    "meta_per_page",
    "drained_pct",
];

/// The allocator's counters over all the iterations of a row (timed loops and untimed
/// ones alike: repeat's prefill and its frees, every round's allocations and frees) as
/// [`COUNTER_COLUMNS`]: zone-lock acquisitions per 1000 block operations (an allocation
/// or a free of one block), the share of them that waited, the wait per operation, the
/// per-frame metadata lines accessed under the lock per page moved under it
/// (`zone_lock_meta / zone_lock_pages`: what merge skipping and clusters reduce), and
/// the share of freed pages that pageset drains returned to the zone. Nothing when no
/// block was allocated.
fn counter_extras(c: &pagealloc::Counters, order: u8) -> Vec<(String, f64)> {
    let blocks = c.pgalloc >> order;
    if blocks == 0 {
        return Vec::new();
    }
    let ops = 2.0 * blocks as f64;
    let ratio = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    let vals = [
        c.zone_lock as f64 * 1000.0 / ops,
        100.0 * ratio(c.zone_lock_contended, c.zone_lock),
        c.zone_lock_wait_ns as f64 / ops,
        ratio(c.zone_lock_meta, c.zone_lock_pages),
        100.0 * ratio(c.pcp_drain_pages, c.pgfree),
    ];
    COUNTER_COLUMNS
        .iter()
        .zip(vals)
        .map(|(k, v)| ((*k).to_owned(), (v * 1000.0).round() / 1000.0))
        .collect()
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// Per-thread ns/op of one run.
#[derive(Default)]
struct ThreadTimes {
    get: Option<f64>,
    put: Option<f64>,
    pair: Option<f64>,
}

type Times = (Option<f64>, Option<f64>, Option<f64>);

/// One run: the mean over threads of each timed loop's ns per op.
fn once<S: PageSource + ?Sized>(
    p: &BenchParams,
    src: &S,
    threads: u32,
    n: u64,
    seed: u64,
) -> Result<Times, SourceError> {
    let run = RunShared {
        n,
        seed,
        barrier: Barrier::new(threads as usize),
        pile: Mutex::new(Vec::new()),
        shares: Mutex::new(Vec::new()),
        failed: std::sync::atomic::AtomicBool::new(false),
    };
    let results: Vec<Result<ThreadTimes, SourceError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads as usize)
            .map(|t| {
                let run = &run;
                s.spawn(move || {
                    crate::exec::pin_current_thread(t, threads as usize);
                    let r = thread(p, src, t, run);
                    if r.is_err() {
                        run.failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("bench thread"))
            .collect()
    });
    let mut get = Vec::new();
    let mut put = Vec::new();
    let mut pair = Vec::new();
    for r in results {
        let t = r?;
        get.extend(t.get);
        put.extend(t.put);
        pair.extend(t.pair);
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    Ok((mean(&get), mean(&put), mean(&pair)))
}

/// Allocates `n` blocks as CPU `t`, or frees what it got and fails.
fn alloc_n<S: PageSource + ?Sized>(
    src: &S,
    t: usize,
    order: u8,
    n: u64,
) -> Result<Vec<Block>, SourceError> {
    let mut v = Vec::with_capacity(n as usize);
    for _ in 0..n {
        match src.allocate(t, order, MigrateKind::Movable) {
            Ok(b) => v.push(b),
            Err(e) => {
                for b in v {
                    src.free(t, b)?;
                }
                return Err(e);
            }
        }
    }
    Ok(v)
}

/// The timed loop of [`BenchKind::Repeat`]: `pairs` times allocate a block of `order` as
/// CPU `t` and free it at once. Out of line, so that a profile shows the loop alone
/// (`callgrind_annotate --inclusive=yes`: its cost over `pairs` is the cost of a pair).
/// `Ok(Err(e))`: an allocation failed (the loop stops); `Err(e)`: a free was refused.
#[inline(never)]
fn repeat_pairs<S: PageSource + ?Sized>(
    src: &S,
    t: usize,
    order: u8,
    pairs: u64,
) -> Result<Result<(), SourceError>, SourceError> {
    for _ in 0..pairs {
        match src.allocate(t, order, MigrateKind::Movable) {
            Ok(b) => src.free(t, b)?,
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(()))
}

/// What the threads of one run share: the blocks each allocates a round (`n`), the seed
/// of `rand`'s shuffle, the barrier between the timed loops, `rand`'s pile of every
/// thread's blocks and the shares dealt from it, and whether a thread has failed.
struct RunShared {
    n: u64,
    seed: u64,
    barrier: Barrier,
    pile: Mutex<Vec<Block>>,
    shares: Mutex<Vec<Vec<Block>>>,
    failed: std::sync::atomic::AtomicBool,
}

/// Thread `t`'s part of one run of `p.kind` on `src`.
fn thread<S: PageSource + ?Sized>(
    p: &BenchParams,
    src: &S,
    t: usize,
    run: &RunShared,
) -> Result<ThreadTimes, SourceError> {
    let (n, seed) = (run.n, run.seed);
    let RunShared {
        barrier,
        pile,
        shares,
        failed,
        ..
    } = run;
    let order = p.order;
    // Bulk and rand repeat their round 2^order times, as LLFree's loops do: as many
    // operations are timed at every order.
    let rounds = 1u64 << order;
    let mut out = ThreadTimes::default();
    // Every thread passes every barrier, even after a failure, so none is left waiting.
    let mut err: Option<SourceError> = None;
    match p.kind {
        BenchKind::Bulk => {
            // As LLFree's `bulk`: 2^order rounds in the same threads, each allocating `n`
            // blocks and freeing them newest first; ns per operation over all rounds.
            let (mut get_ns, mut put_ns) = (0u128, 0u128);
            for _ in 0..rounds {
                barrier.wait();
                let t0 = Instant::now();
                let got = err.is_none().then(|| alloc_n(src, t, order, n));
                get_ns += t0.elapsed().as_nanos();
                barrier.wait();
                match got {
                    Some(Ok(mut v)) => {
                        let t0 = Instant::now();
                        while let Some(b) = v.pop() {
                            if let Err(e) = src.free(t, b) {
                                err = Some(e);
                                break;
                            }
                        }
                        put_ns += t0.elapsed().as_nanos();
                    }
                    Some(Err(e)) => err = Some(e),
                    None => {}
                }
            }
            out.get = Some(get_ns as f64 / (n * rounds) as f64);
            out.put = Some(put_ns as f64 / (n * rounds) as f64);
        }
        BenchKind::Repeat => {
            let held = alloc_n(src, t, order, n);
            barrier.wait();
            let go = held.is_ok() && !failed.load(std::sync::atomic::Ordering::Relaxed);
            barrier.wait();
            let mut refused = None;
            if go {
                let pairs = n << order;
                let t0 = Instant::now();
                let r = repeat_pairs(src, t, order, pairs);
                out.pair = Some(t0.elapsed().as_nanos() as f64 / pairs as f64);
                match r {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => err = Some(e),
                    Err(e) => refused = Some(e),
                }
            }
            // No thread frees its prefilled blocks before every timed loop has ended:
            // those frees drain to the zone, writing lines every allocation's watermark
            // test reads; inside another thread's loop of 256 order-9 pairs they doubled
            // its time per pair (docs/performance.md, "The repeat bench"). LLFree's
            // repeat frees nothing after its loop.
            barrier.wait();
            if let Some(e) = refused {
                return Err(e);
            }
            match held {
                Ok(v) => {
                    for b in v {
                        src.free(t, b)?;
                    }
                }
                Err(e) => err = Some(e),
            }
        }
        BenchKind::Rand => {
            // As LLFree's `rand`: 2^order rounds in the same threads, each allocating `n`
            // blocks, shuffling all threads' blocks together and freeing an even share;
            // ns per operation over all rounds.
            let (mut get_ns, mut put_ns, mut puts) = (0u128, 0u128, 0u64);
            for r in 0..rounds {
                barrier.wait();
                let t0 = Instant::now();
                let got = err.is_none().then(|| alloc_n(src, t, order, n));
                get_ns += t0.elapsed().as_nanos();
                match got {
                    Some(Ok(v)) => pile.lock().expect("pile").extend(v),
                    Some(Err(e)) => err = Some(e),
                    None => {}
                }
                if barrier.wait().is_leader() {
                    let mut all = std::mem::take(&mut *pile.lock().expect("pile"));
                    // Round 0 shuffles with the run's seed.
                    let mut rng = SplitMix64::new(seed ^ r.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    for i in (1..all.len()).rev() {
                        all.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    let k = p.threads.max(1) as usize;
                    let per = all.len().div_ceil(k).max(1);
                    let mut s: Vec<Vec<Block>> = all.chunks(per).map(<[Block]>::to_vec).collect();
                    s.resize(k, Vec::new());
                    *shares.lock().expect("shares") = s;
                }
                barrier.wait();
                let mine = std::mem::take(&mut shares.lock().expect("shares")[t]);
                let t0 = Instant::now();
                puts += mine.len() as u64;
                for b in mine {
                    if let Err(e) = src.free(t, b) {
                        err = Some(e);
                        break;
                    }
                }
                put_ns += t0.elapsed().as_nanos();
            }
            out.get = Some(get_ns as f64 / (n * rounds) as f64);
            if puts > 0 {
                out.put = Some(put_ns as f64 / puts as f64);
            }
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
