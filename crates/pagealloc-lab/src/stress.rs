//! `pagealloc stress`: a soak test of the allocator on real threads.
//!
//! # Design
//! Worker threads allocate and free random orders (mostly the cached ones, some up to
//! order 10) and migratetypes on their CPU's pagesets of a memory-backed allocator,
//! hand some of their blocks to other threads to free (remote frees), and try refused
//! frees that are always detectable even under concurrency (a frame inside a block the
//! thread owns, a foreign frame). Each block carries a tag written into its first bytes
//! when handed out and checked when freed, so a block handed to two owners at once is
//! caught, and with `--poison` (or `poison=on` in the config) a write after free too (the
//! allocator poisons freed frames and checks the poison at allocation and in
//! `validate()`). Otherwise the configuration runs exactly as given.
//!
//! The main thread is the controller: it drives memory pressure back and forth across the
//! watermarks (workers fill until the zone's free pages fall below the low mark, then
//! release until they are above the high mark), runs decay ticks, calls `validate()`
//! periodically, and with `--churn` retires workers after a random number of operations
//! and replaces them: the retiring thread frees part of its blocks and leaves the rest to
//! the others, then its CPU is drained or taken offline and brought back online, and the
//! high fraction is switched between auto-tuning and a fixed value.
//!
//! At the end every block is freed and the pagesets drained: every frame must be free
//! again ("frames lost" counts the ones that are not), `pgalloc == pgfree`, and
//! `validate()` must pass. Any violation — an unexpected error, a tag mismatch, a failed
//! validation, a lost frame — makes [`run`] return [`StressError::Failed`] (non-zero exit).
//!
//! With `--irq` one more thread plays an interrupt handler on CPU 0: it allocates and
//! frees only through the nolock pair (`alloc_pages_nolock` / `free_pages_nolock`),
//! tagged blocks of orders 0-10 of its own and blocks the workers handed over, while CPU
//! 0's worker runs on the same pagesets; frees it cannot complete are deferred and
//! completed by later holders of the zone lock. The report adds the pair's counters.
//!
//! What it cannot see: interleavings the OS scheduler does not produce (`tests/loom.rs`
//! explores those on a small model); allocation latency (see the benchmarks).

use crate::units::MemSize;
use crate::workload::{cpu_seed, Rng, SplitMix64};
use pagealloc::os::mmap::HugePages;
use pagealloc::{
    AllocError, Allocator, Config, Frame, FreeError, Gfp, Layout, MigrateType, Pfn, MAX_ORDER,
};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Arguments of `pagealloc stress`.
#[derive(clap::Args, Clone, Debug)]
pub struct StressArgs {
    /// Worker threads running at once (1..=1024).
    #[arg(long, default_value_t = 4, value_parser = crate::limits::threads)]
    pub threads: usize,
    /// Stop after this many operations in all (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub ops: u64,
    /// Stop after this many seconds (0: no limit; with --ops 0 the default is 10).
    #[arg(long, default_value_t = 0.0, value_parser = crate::limits::seconds)]
    pub seconds: f64,
    /// Retire workers after a random number of operations and replace them (their CPUs
    /// drained, or taken offline and back online), and switch the high fraction.
    #[arg(long)]
    pub churn: bool,
    /// Allocator configuration: a preset and `,key=value` overrides.
    #[arg(long, default_value = "linux-6.12")]
    pub config: String,
    /// Memory managed by the allocator, with a unit (64MiB, 1GiB).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = crate::limits::memory)]
    pub memory: MemSize,
    /// CPUs (pagesets) of the allocator; default: one per thread. Workers run on CPU
    /// `worker % cpus`, so fewer CPUs than threads makes them share pagesets.
    #[arg(long, value_parser = crate::limits::threads)]
    pub cpus: Option<usize>,
    /// Milliseconds between two validations while running.
    #[arg(long, default_value_t = 250)]
    pub validate_ms: u64,
    /// Root seed of the workers' random streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Poison freed frames and check the poison at allocation and in `validate()` (the
    /// same as `,poison=on` in --config). Without it the configuration runs as given.
    #[arg(long)]
    pub poison: bool,
    /// One more thread plays an interrupt handler on CPU 0: it allocates and frees only
    /// through the nolock pair (trylocks only; frees deferred when both locks are taken).
    #[arg(long)]
    pub irq: bool,
    /// Print a progress line every this many seconds on stderr (0: none).
    #[arg(long, default_value_t = 5)]
    pub progress_s: u64,
    /// Print the report as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

impl Default for StressArgs {
    fn default() -> Self {
        StressArgs {
            threads: 4,
            ops: 0,
            seconds: 0.0,
            churn: false,
            config: "linux-6.12".into(),
            memory: MemSize::mib(64),
            cpus: None,
            validate_ms: 250,
            seed: 1,
            poison: false,
            irq: false,
            progress_s: 5,
            json: false,
        }
    }
}

/// Why a stress run could not run, or what it found.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    /// Bad arguments.
    #[error("stress: {0}")]
    Args(String),
    /// The allocator could not be built.
    #[error("stress: cannot build the allocator: {0}")]
    Build(pagealloc::BuildError),
    /// The run found violations; the report says which.
    #[error("{0}\nstress FAILED: {n} violation(s)", n = .0.violations())]
    Failed(Box<StressReport>),
}

/// What a stress run did and found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StressReport {
    /// Configuration string.
    pub config: String,
    /// Worker threads at once.
    pub threads: usize,
    /// Allocator CPUs.
    pub cpus: usize,
    /// Pages managed.
    pub managed_pages: u64,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Operations done (allocations, frees, refused frees).
    pub ops: u64,
    /// Blocks allocated.
    pub allocs: u64,
    /// Blocks freed by their allocating thread.
    pub local_frees: u64,
    /// Blocks freed by another thread.
    pub remote_frees: u64,
    /// Allocations refused with OutOfMemory (expected under pressure).
    pub oom: u64,
    /// Invalid frees refused as they must be (a frame inside an owned block, a foreign
    /// frame).
    pub refused_as_expected: u64,
    /// Workers retired and replaced (`--churn`).
    pub replaced_threads: u64,
    /// CPUs drained after their worker left.
    pub cpu_drains: u64,
    /// CPUs taken offline and back online after their worker left.
    pub cpu_hotplugs: u64,
    /// High-fraction switches.
    pub high_fraction_switches: u64,
    /// Decay ticks (`tick_all`).
    pub ticks: u64,
    /// `validate()` calls that passed.
    pub validations: u64,
    /// Times the zone's free pages fell below the low watermark.
    pub below_low: u64,
    /// Times they rose back above the high watermark.
    pub above_high: u64,
    /// Pagesets drained by the controller to lift the zone back above high.
    pub pressure_drains: u64,
    /// Most pages allocated at once (sampled).
    pub peak_allocated: u64,
    /// The zone's min, low and high watermarks, pages.
    pub wmarks: [u64; 3],
    /// `--irq`: the interrupt thread's nolock allocations that succeeded, that failed
    /// (every lock taken or below the low mark), and its nolock frees.
    pub irq_allocs: u64,
    /// See `irq_allocs`.
    pub irq_alloc_fails: u64,
    /// See `irq_allocs`.
    pub irq_frees: u64,
    /// The allocator's nolock counters at the end: failed trylocks, deferred frees, and
    /// deferred frees completed (equal to deferred once all is drained).
    pub nolock_trylock_fail: u64,
    /// See `nolock_trylock_fail`.
    pub nolock_deferred: u64,
    /// See `nolock_trylock_fail`.
    pub nolock_deferred_done: u64,
    /// Frames not free after everything was freed and drained (must be 0).
    pub frames_lost: u64,
    /// Violations by kind (must be empty).
    pub errors: BTreeMap<String, u64>,
}

impl StressReport {
    /// Total violations.
    pub fn violations(&self) -> u64 {
        self.errors.values().sum::<u64>() + self.frames_lost
    }
    /// True when nothing was violated.
    pub fn ok(&self) -> bool {
        self.violations() == 0
    }
}

impl fmt::Display for StressReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "stress: {} threads on {} CPUs, {} pages ({} MiB), config {}",
            self.threads,
            self.cpus,
            self.managed_pages,
            self.managed_pages >> 8,
            self.config
        )?;
        writeln!(
            f,
            "  ops done           {} in {:.1} s ({:.0} ops/s)",
            self.ops,
            self.seconds,
            self.ops as f64 / self.seconds.max(1e-9)
        )?;
        writeln!(
            f,
            "  blocks             {} allocated, {} freed locally, {} freed remotely",
            self.allocs, self.local_frees, self.remote_frees
        )?;
        writeln!(
            f,
            "  expected refusals  {} OutOfMemory, {} invalid frees refused",
            self.oom, self.refused_as_expected
        )?;
        writeln!(
            f,
            "  pressure           {} falls below low, {} rises above high (min/low/high {}/{}/{}), {} pageset drains to rise, peak {} pages allocated",
            self.below_low,
            self.above_high,
            self.wmarks[0],
            self.wmarks[1],
            self.wmarks[2],
            self.pressure_drains,
            self.peak_allocated
        )?;
        writeln!(
            f,
            "  churn              {} threads replaced, {} CPU drains, {} CPU offline/online, {} high_fraction switches",
            self.replaced_threads, self.cpu_drains, self.cpu_hotplugs, self.high_fraction_switches
        )?;
        writeln!(
            f,
            "  checks             {} ticks, {} validations passed",
            self.ticks, self.validations
        )?;
        if self.irq_allocs + self.irq_alloc_fails + self.irq_frees > 0 {
            writeln!(
                f,
                "  irq (nolock pair)  {} allocs, {} allocs failed without waiting, {} frees; {} failed trylocks, {} frees deferred, {} completed",
                self.irq_allocs,
                self.irq_alloc_fails,
                self.irq_frees,
                self.nolock_trylock_fail,
                self.nolock_deferred,
                self.nolock_deferred_done
            )?;
        }
        writeln!(f, "  frames lost        {}", self.frames_lost)?;
        if self.errors.is_empty() {
            write!(f, "  errors             none")
        } else {
            write!(f, "  errors            ")?;
            for (k, v) in &self.errors {
                write!(f, " {k}={v}")?;
            }
            Ok(())
        }
    }
}

/// A block a worker owns, with the tag written into its first bytes.
#[derive(Clone, Copy, Debug)]
struct Owned {
    frame: Frame,
    tag: u64,
}

/// State shared by the workers and the controller.
#[derive(Debug)]
struct Shared {
    a: Allocator,
    stop: AtomicBool,
    /// Pressure phase: true while filling memory, false while releasing it.
    fill: AtomicBool,
    ops: AtomicU64,
    /// `--ops` (`u64::MAX`: no limit): workers stop themselves at it, so a run ends on
    /// its budget however fast the build is (the controller only polls every 2 ms).
    op_limit: u64,
    allocs: AtomicU64,
    local_frees: AtomicU64,
    remote_frees: AtomicU64,
    oom: AtomicU64,
    refused: AtomicU64,
    /// Pages currently owned by workers or waiting in `remote`.
    allocated: AtomicU64,
    /// Blocks handed over for another thread to free.
    remote: Mutex<Vec<Owned>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Shared {
    fn error(&self, kind: &str) {
        *self
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(kind.to_string())
            .or_default() += 1;
    }

    fn write_tag(&self, f: Frame, tag: u64) {
        if let Some(p) = self.a.frame_ptr(f) {
            // SAFETY: (1) the allocator just handed `f` to this thread, so no other owner
            // may touch its memory until it is freed; (2) `frame_ptr` points into the
            // allocator's live mapping, which outlives every worker (the `Shared` is
            // dropped only after all workers joined); (3) frames are page aligned, so an
            // 8-byte write at the start is aligned and in bounds.
            unsafe { p.as_ptr().cast::<u64>().write_volatile(tag) };
        }
    }

    fn read_tag(&self, f: Frame) -> Option<u64> {
        let p = self.a.frame_ptr(f)?;
        // SAFETY: as in `write_tag`: the caller owns the block (not freed yet), the
        // mapping is live, and the read is aligned and in bounds.
        Some(unsafe { p.as_ptr().cast::<u64>().read_volatile() })
    }

    /// Free an owned block on `cpu`, checking its tag first.
    fn free(&self, cpu: usize, o: Owned, remote: bool) {
        self.free_with(cpu, o, remote, false)
    }

    /// [`Shared::free`], through `free_pages_nolock` when `nolock`.
    fn free_with(&self, cpu: usize, o: Owned, remote: bool, nolock: bool) {
        if self.read_tag(o.frame) != Some(o.tag) {
            self.error("tag_mismatch (block shared by two owners or written after free)");
        }
        let r = if nolock {
            self.a.free_pages_nolock(cpu, o.frame)
        } else {
            self.a.free_on(cpu, o.frame)
        };
        match r {
            Ok(()) => {
                self.allocated.fetch_sub(o.frame.pages(), Relaxed);
                if remote {
                    self.remote_frees.fetch_add(1, Relaxed);
                } else {
                    self.local_frees.fetch_add(1, Relaxed);
                }
            }
            Err(e) => self.error(&format!("free_refused_owned_block:{}", free_kind(e))),
        }
    }
}

fn free_kind(e: FreeError) -> &'static str {
    match e {
        FreeError::NotAllocated(_) => "not_allocated",
        FreeError::ForeignFrame(_) => "foreign",
        FreeError::OrderMismatch { .. } => "order_mismatch",
        FreeError::InvalidOrder(_) => "invalid_order",
        FreeError::InvalidCpu(_) => "invalid_cpu",
    }
}

fn random_order(r: &mut SplitMix64) -> u8 {
    match r.below(100) {
        0..=69 => 0,
        70..=89 => 1 + r.below(3) as u8,
        90..=98 => 4 + r.below(6) as u8,
        _ => MAX_ORDER,
    }
}

fn random_gfp(r: &mut SplitMix64) -> Gfp {
    let mt = match r.below(10) {
        0..=5 => MigrateType::Movable,
        6..=8 => MigrateType::Unmovable,
        _ => MigrateType::Reclaimable,
    };
    let g = Gfp::from_migratetype(mt);
    if r.per_mille(20) {
        g | Gfp::ATOMIC_KERNEL
    } else {
        g
    }
}

/// One worker: `budget` operations (unbounded without churn) on CPU `cpu`.
fn worker(sh: &Shared, id: u64, cpu: usize, seed: u64, budget: u64) {
    let mut r = SplitMix64::new(seed);
    let mut mine: Vec<Owned> = Vec::new();
    let mut seq = 0u64;
    let mut done = 0u64;
    let foreign = Frame::new(Pfn(1 << 40), 0);
    while done < budget && !sh.stop.load(Relaxed) {
        if sh.ops.fetch_add(1, Relaxed) >= sh.op_limit {
            break;
        }
        done += 1;
        let fill = sh.fill.load(Relaxed);
        let p_alloc = if fill { 70 } else { 25 };
        // A thread with nothing of its own, while memory is released, frees what others
        // handed over: every block can sit in the hand-over queue, and a thread that only
        // allocated then would keep the run below the low mark for good.
        let roll = if mine.is_empty() && !fill {
            97
        } else {
            r.below(100)
        };
        if roll < p_alloc || (mine.is_empty() && roll < 97) {
            let order = random_order(&mut r);
            let gfp = random_gfp(&mut r);
            match sh.a.alloc_on(cpu, order, gfp, None) {
                Ok(f) => {
                    if f.order != order {
                        sh.error("alloc_wrong_order");
                    }
                    seq += 1;
                    let tag = (id << 40) ^ seq ^ f.pfn.0.rotate_left(20);
                    sh.write_tag(f, tag);
                    sh.allocated.fetch_add(f.pages(), Relaxed);
                    sh.allocs.fetch_add(1, Relaxed);
                    mine.push(Owned { frame: f, tag });
                }
                Err(AllocError::OutOfMemory) => {
                    // Expected under pressure (high orders fail first, by fragmentation);
                    // the controller turns to releasing once the zone is below low.
                    sh.oom.fetch_add(1, Relaxed);
                }
                Err(e) => sh.error(&format!("alloc_error:{e}")),
            }
        } else if roll < 97 {
            let i = r.below(mine.len() as u64) as usize;
            let o = mine.swap_remove(i);
            if r.percent(20) {
                // Hand it to another thread to free.
                let mut q = sh.remote.lock().unwrap_or_else(|e| e.into_inner());
                if q.len() < 4096 {
                    q.push(o);
                    continue;
                }
                drop(q);
            }
            sh.free(cpu, o, false);
        } else if roll < 99 {
            // Free blocks others handed over.
            let batch: Vec<Owned> = {
                let mut q = sh.remote.lock().unwrap_or_else(|e| e.into_inner());
                let n = q.len().min(8);
                let at = q.len() - n;
                q.split_off(at)
            };
            for o in batch {
                sh.free(cpu, o, true);
            }
        } else {
            // Frees that must be refused, whatever the other threads do: a frame inside
            // a block this thread owns, and a frame of no zone.
            let bad = match mine.iter().find(|o| o.frame.order > 0) {
                Some(o) if r.percent(50) => Frame::new(Pfn(o.frame.pfn.0 + 1), 0),
                _ => foreign,
            };
            match sh.a.free_on(cpu, bad) {
                Err(FreeError::NotAllocated(_)) | Err(FreeError::ForeignFrame(_)) => {
                    sh.refused.fetch_add(1, Relaxed);
                }
                Ok(()) => sh.error("invalid_free_accepted"),
                Err(e) => sh.error(&format!("invalid_free_wrong_error:{}", free_kind(e))),
            }
        }
    }
    // Leaving: free half of what is left, hand the rest to the others (frames outlive
    // their thread); when the run stops, free everything.
    let stopping = sh.stop.load(Relaxed);
    for (k, o) in mine.into_iter().enumerate() {
        if !stopping && k % 2 == 1 {
            let mut q = sh.remote.lock().unwrap_or_else(|e| e.into_inner());
            if q.len() < 1 << 16 {
                q.push(o);
                continue;
            }
        }
        sh.free(cpu, o, false);
    }
}

/// The `--irq` thread: on CPU 0, nolock allocations (tagged, orders mostly cached, some
/// up to 10) and nolock frees of its own blocks and of blocks the workers handed over,
/// taken from the queue only when its lock is free (an interrupt does not wait).
/// Returns (allocations, failed allocations, frees).
fn irq_thread(sh: &Shared, seed: u64) -> (u64, u64, u64) {
    const CPU: usize = 0;
    let mut r = SplitMix64::new(seed);
    let mut mine: Vec<Owned> = Vec::new();
    let (mut allocs, mut fails, mut frees) = (0u64, 0u64, 0u64);
    let mut seq = 0u64;
    while !sh.stop.load(Relaxed) {
        if r.percent(50) && mine.len() < 64 {
            let order = random_order(&mut r);
            match sh.a.alloc_pages_nolock(CPU, order, None) {
                Ok(f) => {
                    seq += 1;
                    let tag = (u64::MAX << 48) ^ seq ^ f.pfn.0.rotate_left(20);
                    sh.write_tag(f, tag);
                    sh.allocated.fetch_add(f.pages(), Relaxed);
                    sh.allocs.fetch_add(1, Relaxed);
                    mine.push(Owned { frame: f, tag });
                    allocs += 1;
                }
                Err(AllocError::OutOfMemory) => fails += 1,
                Err(e) => sh.error(&format!("nolock_alloc_error:{e}")),
            }
        } else if !mine.is_empty() && r.percent(70) {
            let o = mine.swap_remove(r.below(mine.len() as u64) as usize);
            sh.free_with(CPU, o, false, true);
            frees += 1;
        } else if let Ok(mut q) = sh.remote.try_lock() {
            let o = q.pop();
            drop(q);
            if let Some(o) = o {
                sh.free_with(CPU, o, true, true);
                frees += 1;
            }
        }
        if r.per_mille(5) {
            std::thread::yield_now();
        }
    }
    for o in mine {
        sh.free_with(CPU, o, false, true);
        frees += 1;
    }
    (allocs, fails, frees)
}

struct Slot {
    handle: JoinHandle<()>,
    cpu: usize,
}

/// Run a stress test. Returns the report, or [`StressError::Failed`] with it when any
/// violation was found.
pub fn run(args: &StressArgs) -> Result<StressReport, StressError> {
    use crate::limits::{check_memory, check_seconds, check_threads};
    fn arg(flag: &'static str) -> impl Fn(String) -> StressError {
        move |e| StressError::Args(format!("{flag} {e}"))
    }
    check_threads(args.threads as u64).map_err(arg("--threads"))?;
    check_seconds(args.seconds).map_err(arg("--seconds"))?;
    check_memory(args.memory).map_err(arg("--memory"))?;
    let cpus = args.cpus.unwrap_or(args.threads);
    check_threads(cpus as u64).map_err(arg("--cpus"))?;
    let seconds = if args.ops == 0 && args.seconds == 0.0 {
        10.0
    } else {
        args.seconds
    };
    let mut cfg: Config = args
        .config
        .parse()
        .map_err(|e| StressError::Args(format!("--config {}: {e}", args.config)))?;
    cfg.poison |= args.poison;
    let layout = Layout::single(args.memory.pages(), cpus);
    let a = Allocator::with_memory(&layout, cfg.clone(), HugePages::None)
        .map_err(StressError::Build)?;
    let managed = a.managed_pages();
    let w = a.zone_info(0).expect("zone_info: index in range").wmark;
    let sh = Arc::new(Shared {
        a,
        stop: AtomicBool::new(false),
        fill: AtomicBool::new(true),
        ops: AtomicU64::new(0),
        op_limit: if args.ops == 0 { u64::MAX } else { args.ops },
        allocs: AtomicU64::new(0),
        local_frees: AtomicU64::new(0),
        remote_frees: AtomicU64::new(0),
        oom: AtomicU64::new(0),
        refused: AtomicU64::new(0),
        allocated: AtomicU64::new(0),
        remote: Mutex::new(Vec::new()),
        errors: Mutex::new(BTreeMap::new()),
    });
    let mut rep = StressReport {
        config: cfg.to_string(),
        threads: args.threads,
        cpus,
        managed_pages: managed,
        wmarks: [w[0], w[1], w[2]],
        ..StressReport::default()
    };
    let mut ctl = SplitMix64::new(cpu_seed(args.seed, u32::MAX));
    let mut next_id = 0u64;
    let spawn = |id: u64, cpu: usize, budget: u64| -> Slot {
        let sh = sh.clone();
        let seed = cpu_seed(args.seed, id as u32);
        let handle = std::thread::Builder::new()
            .name(format!("stress-{id}"))
            .spawn(move || worker(&sh, id, cpu, seed, budget))
            .expect("spawn a stress worker");
        Slot { handle, cpu }
    };
    let budget = |r: &mut SplitMix64| {
        if args.churn {
            2_000 + r.below(30_000)
        } else {
            u64::MAX
        }
    };
    let mut slots: Vec<Option<Slot>> = (0..args.threads)
        .map(|i| {
            next_id += 1;
            Some(spawn(next_id, i % cpus, budget(&mut ctl)))
        })
        .collect();

    let irq = args.irq.then(|| {
        let sh = sh.clone();
        let seed = cpu_seed(args.seed, u32::MAX - 1);
        std::thread::Builder::new()
            .name("stress-irq".into())
            .spawn(move || irq_thread(&sh, seed))
            .expect("spawn the irq thread")
    });
    let t0 = Instant::now();
    let mut last_validate = Instant::now();
    let mut last_progress = Instant::now();
    let mut last_fraction = Instant::now();
    let mut below = false;
    let zi = 0;
    loop {
        std::thread::sleep(Duration::from_millis(2));
        let ops = sh.ops.load(Relaxed);
        let el = t0.elapsed().as_secs_f64();
        if (args.ops > 0 && ops >= args.ops) || (seconds > 0.0 && el >= seconds) {
            break;
        }
        // Pressure: fill until below the low mark, release until above the high mark.
        let z = sh.a.zone_info(zi).expect("zone_info: index in range");
        if !below && z.free < z.wmark[1] {
            below = true;
            rep.below_low += 1;
            sh.fill.store(false, Relaxed);
        } else if below && sh.allocated.load(Relaxed) < managed / 8 {
            if z.free > z.wmark[2] {
                below = false;
                rep.above_high += 1;
                sh.fill.store(true, Relaxed);
            } else {
                // The workers have released, but their frees sit in the pagesets (a
                // preset with a large fixed `high` keeps thousands there): reclaim them
                // as the kernel does under pressure, `drain_all_pages()`.
                sh.a.drain_all_pages();
                rep.pressure_drains += 1;
            }
        }
        rep.peak_allocated = rep.peak_allocated.max(sh.allocated.load(Relaxed));
        // Decay.
        sh.a.tick_all();
        rep.ticks += 1;
        if last_validate.elapsed() >= Duration::from_millis(args.validate_ms) {
            match sh.a.validate() {
                Ok(_) => rep.validations += 1,
                Err(e) => {
                    sh.error("validate");
                    eprintln!("stress: validate failed: {e}");
                }
            }
            last_validate = Instant::now();
        }
        if args.churn {
            if last_fraction.elapsed() >= Duration::from_millis(700) {
                let f = if sh.a.high_fraction() == 0 { 16 } else { 0 };
                if sh.a.set_high_fraction(f).is_err() {
                    sh.error("set_high_fraction");
                }
                rep.high_fraction_switches += 1;
                last_fraction = Instant::now();
            }
            for s in slots.iter_mut() {
                if !s.as_ref().is_some_and(|s| s.handle.is_finished()) {
                    continue;
                }
                let Slot { handle, cpu } = s.take().expect("slot");
                if handle.join().is_err() {
                    sh.error("worker_panicked");
                }
                // The CPU's pagesets hold the departed thread's frees.
                if rep.replaced_threads % 2 == 0 {
                    sh.a.drain_cpu(cpu);
                    rep.cpu_drains += 1;
                } else {
                    if sh.a.cpu_offline(cpu).is_err() || sh.a.cpu_online(cpu).is_err() {
                        sh.error("cpu_hotplug");
                    }
                    rep.cpu_hotplugs += 1;
                }
                next_id += 1;
                rep.replaced_threads += 1;
                *s = Some(spawn(next_id, cpu, budget(&mut ctl)));
            }
        }
        if args.progress_s > 0 && last_progress.elapsed() >= Duration::from_secs(args.progress_s) {
            eprintln!(
                "stress: {el:.0} s, {ops} ops, {} pages allocated, {} violations so far",
                sh.allocated.load(Relaxed),
                sh.errors
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .values()
                    .sum::<u64>()
            );
            last_progress = Instant::now();
        }
    }
    sh.stop.store(true, Relaxed);
    for s in slots.into_iter().flatten() {
        if s.handle.join().is_err() {
            sh.error("worker_panicked");
        }
    }
    if let Some(h) = irq {
        match h.join() {
            Ok((a, f, n)) => (rep.irq_allocs, rep.irq_alloc_fails, rep.irq_frees) = (a, f, n),
            Err(_) => sh.error("irq_thread_panicked"),
        }
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    // Whatever was handed over and not freed yet.
    let left: Vec<Owned> =
        std::mem::take(&mut *sh.remote.lock().unwrap_or_else(|e| e.into_inner()));
    for (k, o) in left.into_iter().enumerate() {
        sh.free(k % cpus, o, true);
    }
    sh.a.drain_all_pages();
    match sh.a.validate() {
        Ok(t) => {
            rep.validations += 1;
            if t.allocated != 0 || t.pcp != 0 {
                sh.error("pages_still_allocated_or_cached_at_end");
            }
        }
        Err(e) => {
            sh.error("validate");
            eprintln!("stress: final validate failed: {e}");
        }
    }
    rep.frames_lost = managed.saturating_sub(sh.a.nr_free_pages());
    let c = sh.a.counters();
    if c.pgalloc != c.pgfree {
        sh.error("pgalloc_ne_pgfree");
    }
    (
        rep.nolock_trylock_fail,
        rep.nolock_deferred,
        rep.nolock_deferred_done,
    ) = (
        c.nolock_trylock_fail,
        c.nolock_deferred,
        c.nolock_deferred_done,
    );
    if c.nolock_deferred != c.nolock_deferred_done {
        sh.error("deferred_frees_not_completed");
    }
    // A worker that found the budget spent counted one operation it did not do.
    rep.ops = sh.ops.load(Relaxed).min(sh.op_limit);
    rep.allocs = sh.allocs.load(Relaxed);
    rep.local_frees = sh.local_frees.load(Relaxed);
    rep.remote_frees = sh.remote_frees.load(Relaxed);
    rep.oom = sh.oom.load(Relaxed);
    rep.refused_as_expected = sh.refused.load(Relaxed);
    rep.errors = sh.errors.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if rep.ok() {
        Ok(rep)
    } else {
        Err(StressError::Failed(Box::new(rep)))
    }
}
