//! The live kernel's side of `predict`: the program under the recorder, its events
//! counted when one of its tasks did them inside that task's window.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::program::{ProgramResult, TaskWindow};
use super::{ops_of, Figures, PredictOptions};
use crate::sim::start::{self, StartState};
use crate::trace::format::{Event, EventKind};
use crate::trace::record::{self, RecordOptions};
use crate::trace::replay::kernel_trips;
use crate::trace::TraceError;

/// `CONFIG_PCP_BATCH_SCALE_MAX` of the kernels `predict` models (the Kconfig default,
/// as the `linux-6.18` preset has it): bounds `free_count` in its reading.
const PCP_BATCH_SCALE_MAX: u8 = 5;

/// What the kernel did.
#[derive(Clone, Debug, Default)]
pub struct KernelMeasure {
    /// The figures.
    pub figures: Figures,
    /// Per order, the migratetypes of the kernel's allocations (` (kernel: movable
    /// 99.8 %)`), or empty.
    pub mt_labels: [String; 11],
    /// Kernel-only figures and conditions.
    pub notes: Vec<String>,
    /// The program's CPUs' pagesets when the recording began (its start
    /// `/proc/zoneinfo`): the simulator starts from them.
    pub start: StartState,
    /// The recording itself, as `trace record` writes it, when [`KEEP_RECORDINGS`] is
    /// set (`predict --save` keeps it as `run-K.trace` for `trace replay` and for
    /// comparing the kernel's events with the simulator's run by run).
    pub recording: Option<Arc<Recording>>,
}

/// A recording: its header and events ([`crate::trace::format::write`] writes it).
pub type Recording = (crate::trace::format::Header, Vec<Event>);

/// Set by `predict --save`: [`measure`] keeps each run's recording
/// ([`KernelMeasure::recording`]); off, the events are dropped after the analysis.
pub static KEEP_RECORDINGS: AtomicBool = AtomicBool::new(false);

/// Pagesets' pages on CPUs `0..cpus`, every zone, sampled every 10 ms until `stop`.
fn sampler(cpus: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<i64>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        loop {
            if let Ok(z) = pagealloc::os::zoneinfo::KernelZoneinfo::read() {
                let n: i64 = z
                    .populated()
                    .flat_map(|z| z.pagesets.iter())
                    .filter(|p| (p.cpu as u32) < cpus)
                    .map(|p| p.count)
                    .sum();
                v.push(n);
            }
            if stop.load(Ordering::Acquire) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        v
    })
}

fn mt_name(mt: i8) -> String {
    match mt {
        0 => "unmovable".into(),
        1 => "movable".into(),
        2 => "reclaimable".into(),
        3 => "highatomic".into(),
        m => format!("migratetype {m}"),
    }
}

/// Runs the program under the recorder and returns the kernel's figures.
///
/// # Errors
/// [`TraceError::Unsupported`] without root or tracefs; [`TraceError::Failed`] when the
/// program failed.
pub fn measure(
    opts: &PredictOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<KernelMeasure, TraceError> {
    record::check_host(&record::tracefs_root())?;
    let result = std::env::temp_dir().join(format!(
        "pagealloc-predict-{}-{}.json",
        std::process::id(),
        opts.cpus
    ));
    let _ = std::fs::remove_file(&result);
    let s = opts.size;
    let command: Vec<String> = [
        opts.exe.display().to_string(),
        "predict-program".into(),
        opts.workload.clone(),
        "--cpus".into(),
        opts.cpus.to_string(),
        "--pages".into(),
        s.pages.to_string(),
        "--count".into(),
        s.count.to_string(),
        "--extra".into(),
        s.extra.to_string(),
        "--result".into(),
        result.display().to_string(),
    ]
    .into();
    let stop = Arc::new(AtomicBool::new(false));
    let samples = sampler(opts.cpus, stop.clone());
    let rec = record::record(
        &RecordOptions {
            command,
            buffer_kb: record::DEFAULT_BUFFER_KB,
            all_events: true,
            wakeups: true,
        },
        progress,
    );
    stop.store(true, Ordering::Release);
    let pcp = samples.join().unwrap_or_default();
    let (h, ev) = rec?;
    let text = std::fs::read_to_string(&result);
    let _ = std::fs::remove_file(&result);
    if h.exit_status != Some(0) {
        return Err(TraceError::Failed(format!(
            "the program {} failed (exit status {:?})",
            opts.workload, h.exit_status
        )));
    }
    let prog: ProgramResult = text
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| TraceError::Failed("the program wrote no result".into()))?;
    let mut k = analyse(opts, h.t0_ns, &h.kernel_release, &ev, &prog, &pcp);
    match pagealloc::os::zoneinfo::KernelZoneinfo::parse(&h.start.zoneinfo) {
        Ok(zi) => {
            let mut pagesets = start::from_zoneinfo(&zi, opts.cpus);
            let spans = start::zone_spans(&zi);
            let lists = start::depths(super::background::list_events(&ev, &spans));
            // The refill scale and the recent frees each pageset began with, as `trace
            // replay` reads them: the first order-0 refill (`batch << alloc_factor`)
            // and the first drain on a free.
            let zone_of = |pfn: u64| {
                spans
                    .iter()
                    .position(|&(a, b)| (a..b).contains(&pfn))
                    .unwrap_or(usize::MAX)
            };
            let bh = start::batches(&zi, opts.cpus);
            let first = crate::trace::start::first_refills(&ev, zone_of);
            let free_counts = crate::trace::start::free_counts(
                &ev,
                zone_of,
                |o| o <= 3 || o == 9,
                |c, z| bh.get(&(c, z)).copied().unwrap_or((1, 0)),
                PCP_BATCH_SCALE_MAX,
            );
            for p in &mut pagesets {
                if let Some(l) = lists.get(&(p.cpu, p.zone)) {
                    p.taken.clone_from(&l.taken);
                    p.used.clone_from(&l.used);
                    p.refilled.clone_from(&l.refilled);
                }
                let key = (p.cpu as u32, p.zone);
                let batch = bh.get(&key).map_or(1, |b| b.0.max(1) as u64);
                p.alloc_factor = crate::trace::start::alloc_factor_of(first.get(&key), batch);
                p.free_count = free_counts.get(&key).copied().unwrap_or(0);
            }
            let faulting = timed_in_batches(&opts.workload);
            let owner = super::foreign::frees(&ev, h.t0_ns, &prog);
            let (background, note) =
                super::background::background(&ev, h.t0_ns, &prog, opts.cpus, &owner, faulting);
            k.notes.push(note);
            let lag = table_free_lag(opts, &ev, h.t0_ns, &prog);
            if let Some((lag, cpus)) = &lag {
                k.notes.push(format!(
                    "kernel: RCU had not freed the page tables of the last {lag} loop(s) on CPU(s) {cpus:?} when the window ended (their grace period): the simulator frees each loop's tables after the unmap of the loop {lag} later"
                ));
            }
            // Only thp_mix unmaps its prelude before its window (parallel_free's window
            // is its prelude's unmap).
            // Only thp_mix unmaps its prelude before its window (parallel_free's window
            // is its prelude's unmap).
            let lru_held = if opts.workload == "thp_mix" {
                super::foreign::lru_held(&ev, h.t0_ns, &prog, &owner, opts.cpus)
            } else {
                Vec::new()
            };
            let lru_tail = if matches!(opts.workload.as_str(), "page_fault1" | "thp_mix") {
                super::foreign::lru_tail(&ev, h.t0_ns, &prog, opts.cpus)
            } else {
                Vec::new()
            };
            if lru_held.iter().chain(&lru_tail).any(|&n| n > 0) {
                k.notes.push(format!(
                    "kernel: pages the CPUs' LRU add batches held past an unmap, per CPU: the prelude's, freed in the window {lru_held:?}; the last loop's, freed after it {lru_tail:?} (the simulator holds as many)"
                ));
            }
            k.start = StartState {
                pagesets,
                free_lists: start::free_lists_of(&zi, &h.start.pagetypeinfo),
                background,
                zone_spans: spans,
                zone_managed: start::zone_managed(&zi),
                table_free_lag: lag.map_or(0, |l| l.0),
                lru_held,
                lru_tail,
            }
        }
        Err(e) => k.notes.push(format!(
            "the recording's start zoneinfo: {e}; the simulator's pagesets start empty"
        )),
    }
    if KEEP_RECORDINGS.load(Ordering::Relaxed) {
        k.recording = Some(Arc::new((h, ev)));
    }
    Ok(k)
}

/// The loops whose unmap ends before RCU frees a loop's page tables
/// ([`super::foreign::table_free_lag`]) and the CPUs it was read on, for the programs
/// that fault 4 KiB pages in loops (page_fault1; thp_mix's order-0 CPUs); `None` for
/// the others.
fn table_free_lag(
    opts: &PredictOptions,
    ev: &[Event],
    t0: u64,
    prog: &ProgramResult,
) -> Option<(u32, Vec<u32>)> {
    let first = match opts.workload.as_str() {
        "page_fault1" => 0,
        "thp_mix" => super::program::thp_cpus(opts.cpus),
        _ => return None,
    };
    let cpus: Vec<u32> = (first..opts.cpus).collect();
    if cpus.is_empty() {
        return None;
    }
    // A loop's page tables (one per 2 MiB) and their RCU batch page.
    let per_loop = opts.size.pages.div_ceil(512) + 1;
    let lag = super::foreign::table_free_lag(ev, t0, prog, &cpus, per_loop);
    Some((lag, cpus))
}

/// Runs of the faulting programs (`page_fault1`, `parallel_free`, `thp_mix`) without
/// the recorder that make one timing batch ([`run_untraced`]).
pub const TIMING_BATCH: u32 = 5;

/// The `SCHED_FIFO` priority of the faulting programs' runs without the recorder: their
/// tasks, pinned one per CPU, then hold their CPUs for their whole window (no other
/// process's task is switched in: `run_delay` 0), and the kernel's real-time
/// throttling (`sched_rt_runtime_us`, 0.95 s a second here) still leaves the other
/// processes their share. The lowest real-time priority: kernel threads of higher
/// priority (the migration and watchdog threads) still preempt them. The traced runs
/// keep the normal policy: the recorder's readers must drain the ring buffers while
/// the program runs.
pub const TIMING_RT_PRIORITY: i32 = 1;

/// Set when the system refused [`TIMING_RT_PRIORITY`] (no `CAP_SYS_NICE`, or a
/// `RLIMIT_RTPRIO` of 0): the runs then ran at the normal policy, and the note says so.
static RT_REFUSED: AtomicBool = AtomicBool::new(false);

/// Whether program `name`'s runs without the recorder are batches at real-time
/// priority: the faulting programs. The streams' two ends (`streams3`'s programs) wait
/// for each other: a real-time policy would change when the woken end preempts the
/// other on one CPU, which is what their one-CPU model takes from the kernel.
pub fn timed_in_batches(name: &str) -> bool {
    matches!(name, "page_fault1" | "parallel_free" | "thp_mix")
}

/// Runs the program once without the recorder (`predict-program`, as the recorder
/// would run it), at [`TIMING_RT_PRIORITY`] when `rt`.
fn run_once(opts: &PredictOptions, rt: bool) -> Result<ProgramResult, TraceError> {
    use std::os::unix::process::CommandExt as _;
    let result = std::env::temp_dir().join(format!(
        "pagealloc-predict-time-{}-{}.json",
        std::process::id(),
        opts.cpus
    ));
    let _ = std::fs::remove_file(&result);
    let s = opts.size;
    let mut cmd = std::process::Command::new(&opts.exe);
    cmd.arg("predict-program")
        .arg(&opts.workload)
        .args(["--cpus", &opts.cpus.to_string()])
        .args(["--pages", &s.pages.to_string()])
        .args(["--count", &s.count.to_string()])
        .args(["--extra", &s.extra.to_string()])
        .arg("--result")
        .arg(&result);
    if rt {
        // SAFETY: the closure runs in the forked child before exec and calls only
        // sched_setscheduler, which is async-signal-safe, on the child itself (pid 0)
        // with a parameter owned by the closure's frame; the policy is inherited by
        // the program's forked tasks. No lock is involved.
        unsafe {
            cmd.pre_exec(|| {
                let p = libc::sched_param {
                    sched_priority: TIMING_RT_PRIORITY,
                };
                if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let status = match cmd.status() {
        Err(e) if rt && e.kind() == std::io::ErrorKind::PermissionDenied => {
            RT_REFUSED.store(true, Ordering::Relaxed);
            return run_once(opts, false);
        }
        r => r.map_err(|e| TraceError::Failed(format!("running {}: {e}", opts.exe.display())))?,
    };
    let text = std::fs::read_to_string(&result);
    let _ = std::fs::remove_file(&result);
    if !status.success() {
        return Err(TraceError::Failed(format!(
            "the program {} failed ({status})",
            opts.workload
        )));
    }
    text.ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| TraceError::Failed("the program wrote no result".into()))
}

/// Runs the program without the recorder and returns what it reports: the times of a
/// run the tracer does not slow. The faulting programs ([`timed_in_batches`]) run a
/// batch of [`TIMING_BATCH`] back to back at real-time priority and return the run of
/// least CPU time in it: other processes only add CPU time (their cache and memory
/// traffic, the hypervisor's), and on this shared 2-vCPU guest the CPU a fault costs
/// moves by ±15 % from one second to the next while runs a second apart agree within
/// a few percent (docs/sim-cost-model.md §12); the caller takes the median batch. The
/// streams run once, at the normal policy.
///
/// # Errors
/// [`TraceError::Failed`] when the program could not run or failed.
pub fn run_untraced(opts: &PredictOptions) -> Result<ProgramResult, TraceError> {
    if !timed_in_batches(&opts.workload) {
        return run_once(opts, false);
    }
    let cpu = |p: &ProgramResult| p.tasks.iter().map(|t| t.cpu_ns).sum::<u64>();
    let mut best: Option<ProgramResult> = None;
    for _ in 0..TIMING_BATCH {
        let p = run_once(opts, true)?;
        if best.as_ref().is_none_or(|b| cpu(&p) < cpu(b)) {
            best = Some(p);
        }
    }
    best.ok_or_else(|| TraceError::Failed("no timing run".into()))
}

/// How the kernel's time lines were measured, for the notes (`batches`: the calls of
/// [`run_untraced`]).
pub fn timing_how(opts: &PredictOptions, batches: u32) -> String {
    if !timed_in_batches(&opts.workload) {
        return format!("the run of least CPU time of {batches} without the recorder");
    }
    let policy = if RT_REFUSED.load(Ordering::Relaxed) {
        "at the normal policy (SCHED_FIFO was refused)".to_owned()
    } else {
        format!("at SCHED_FIFO priority {TIMING_RT_PRIORITY}")
    };
    format!(
        "the median of {batches} batches of {TIMING_BATCH} runs without the recorder {policy}, each batch its run of least CPU time"
    )
}

/// The time lines of one run from the program's own clocks: CPU time per operation,
/// and rate and idle share over the windows less the time the tasks waited for a CPU
/// other processes held (`wait_ns`). Tasks sharing a CPU (a stream on one CPU) also
/// wait for each other, which `wait_ns` does not tell apart, and one of them is
/// always runnable: their CPU's window is the longest of theirs less all their
/// waits, never shorter than their CPU time together (idle 0 then). The two ends of a
/// stream on two CPUs are one pipeline: while one end waits for a CPU another process
/// holds, the other has nothing to read or no room to write and sleeps through it (the
/// live two-CPU streams slept 0.2-0.5 times per write, mostly behind a preempted
/// peer at load 13): each CPU's window is also less its peer's waits, never shorter
/// than its CPU time.
pub fn times_of(opts: &PredictOptions, prog: &ProgramResult) -> (f64, f64, f64) {
    let ops = ops_of(&opts.workload, opts.cpus, opts.size).max(1) as f64;
    let mut by_cpu: HashMap<u32, Vec<&TaskWindow>> = HashMap::new();
    for t in &prog.tasks {
        by_cpu.entry(t.cpu).or_default().push(t);
    }
    let pipeline = super::is_stream(&opts.workload);
    let all_waits: u64 = prog.tasks.iter().map(|t| t.wait_ns).sum();
    let (mut busy, mut windows, mut span) = (0u64, 0u64, 0u64);
    for ts in by_cpu.values() {
        let cpu: u64 = ts.iter().map(|t| t.cpu_ns).sum();
        let start = ts.iter().map(|t| t.start_ns).min().unwrap_or(0);
        let end = ts.iter().map(|t| t.end_ns).max().unwrap_or(0);
        let wait: u64 = if pipeline {
            all_waits
        } else {
            ts.iter().map(|t| t.wait_ns).sum()
        };
        let eff = end.saturating_sub(start).saturating_sub(wait).max(cpu);
        busy += cpu;
        windows += eff;
        span = span.max(eff);
    }
    let rate = ops / (span as f64 * 1e-9).max(1e-12);
    let cpu_us = busy as f64 * 1e-3 / ops;
    let idle = (100.0 * (1.0 - busy as f64 / windows.max(1) as f64)).max(0.0);
    (rate, cpu_us, idle)
}

/// The kernel's figures from a recording of the program: `ev` as the recorder returns
/// them (times from `t0_ns` on the monotonic clock), `pcp` the pagesets' pages sampled.
pub fn analyse(
    opts: &PredictOptions,
    t0_ns: u64,
    release: &str,
    ev: &[Event],
    prog: &ProgramResult,
    pcp: &[i64],
) -> KernelMeasure {
    let ops = ops_of(&opts.workload, opts.cpus, opts.size).max(1) as f64;
    let win: HashMap<u32, TaskWindow> = prog.tasks.iter().map(|t| (t.pid, *t)).collect();
    let abs = |e: &Event| e.ts + t0_ns;
    let mine = |e: &Event| {
        win.get(&e.pid)
            .is_some_and(|w| (w.start_ns..=w.end_ns).contains(&abs(e)))
    };
    // A free is the block's owner's, whichever task ran it (`foreign`).
    let owner = super::foreign::frees(ev, t0_ns, prog);
    let ours: Vec<Event> = ev
        .iter()
        .filter(|e| owner.counts(e, mine(e)))
        .copied()
        .collect();
    let mut f = Figures::default();
    let mut by_mt: [HashMap<i8, u64>; 11] = Default::default();
    for e in &ours {
        let o = usize::from(e.order.min(10));
        match e.kind {
            EventKind::Alloc => {
                f.alloc_per_op[o] += 1.0;
                *by_mt[o].entry(e.mt).or_default() += 1;
            }
            // `free_unref_folios` emits `mm_page_free_batched` beside the
            // `mm_page_free` of `free_pages_prepare`: the block is counted once.
            EventKind::Free => f.free_per_op[o] += 1.0,
            _ => {}
        }
    }
    let mut mt_labels: [String; 11] = Default::default();
    for o in 0..11 {
        f.alloc_per_op[o] /= ops;
        f.free_per_op[o] /= ops;
        let total: u64 = by_mt[o].values().sum();
        if let Some((&mt, &n)) = by_mt[o].iter().max_by_key(|(_, &n)| n) {
            mt_labels[o] = format!(
                " ({} {:.0} %)",
                mt_name(mt),
                100.0 * n as f64 / total.max(1) as f64
            );
        }
    }
    let sides = kernel_trips(&ours);
    let (mut rt, mut rp, mut dt, mut dp) = (0u64, 0u64, 0u64, 0u64);
    for s in sides.values() {
        rt += s.refills.len() as u64;
        rp += s.refills.iter().map(|t| t.pages).sum::<u64>();
        dt += s.drains.len() as u64;
        dp += s.drains.iter().map(|t| t.pages).sum::<u64>();
    }
    f.refills_per_op = rt as f64 / ops;
    f.pages_per_refill = rp as f64 / rt.max(1) as f64;
    f.drains_per_op = dt as f64 / ops;
    f.pages_per_drain = dp as f64 / dt.max(1) as f64;
    // The machine is shared: time a task spent preempted (switched out runnable) by
    // another process is taken out of its window; time it slept stays (idle).
    let preempted = preempted_ns(ev, t0_ns, &win);
    let eff = |t: &TaskWindow| {
        t.end_ns
            .saturating_sub(t.start_ns)
            .saturating_sub(preempted.get(&t.pid).copied().unwrap_or(0))
    };
    let span = prog.tasks.iter().map(eff).max().unwrap_or(0);
    f.rate = ops / (span as f64 * 1e-9).max(1e-12);
    let cpu_ns: u64 = prog.tasks.iter().map(|t| t.cpu_ns).sum();
    let win_ns: u64 = prog.tasks.iter().map(eff).sum();
    f.cpu_us_per_op = cpu_ns as f64 * 1e-3 / ops;
    f.idle_pct = (100.0 * (1.0 - cpu_ns as f64 / win_ns.max(1) as f64)).max(0.0);
    let raw_win: u64 = prog
        .tasks
        .iter()
        .map(|t| t.end_ns.saturating_sub(t.start_ns))
        .sum();
    let zone_locks = zone_locks(ev);
    let wait = lock_wait(ev, &zone_locks, &mine);
    f.zone_lock_pct = 100.0 * wait as f64 / cpu_ns.max(1) as f64;
    let (peak, end) = own_pcp_pages(&ours);
    f.pcp_peak = peak as f64;
    f.pcp_end = end as f64;
    let first = pcp.first().copied().unwrap_or(0);
    let pids: HashSet<u32> = win.keys().copied().collect();
    let switches = ev
        .iter()
        .filter(|e| e.kind == EventKind::Switch && pids.contains(&(e.pfn as u32)) && mine(e))
        .count();
    let interrupt_frees = ours
        .iter()
        .filter(|e| e.kind == EventKind::Free && e.in_interrupt())
        .count();
    let frees = ours.iter().filter(|e| e.kind == EventKind::Free).count();
    // Frees in interrupt context of blocks the windows did not allocate: deferred frees
    // of blocks from before (RCU's page-table frees, `tlb_remove_table_rcu`, in the
    // softirq that interrupted a task of the program).
    let (foreign_irq, foreign_pages) = {
        let mut mine_blocks: HashSet<u64> = HashSet::new();
        let (mut n, mut pages) = (0u64, 0u64);
        for e in &ours {
            match e.kind {
                EventKind::Alloc => {
                    mine_blocks.insert(e.pfn);
                }
                EventKind::Free if e.in_interrupt() && !mine_blocks.remove(&e.pfn) => {
                    n += 1;
                    pages += 1u64 << e.order.min(20);
                }
                EventKind::Free => {
                    mine_blocks.remove(&e.pfn);
                }
                _ => {}
            }
        }
        (n, pages)
    };
    let mut notes = vec![
        format!(
            "kernel {}: the program's tasks were switched out {:.4} times per op ({} switches)",
            release,
            switches as f64 / ops,
            switches
        ),
        format!(
            "kernel: {:.1} % of the program's frees in interrupt context ({foreign_irq} of blocks the windows did not allocate, {foreign_pages} pages: deferred frees such as RCU's of page tables); zone lock(s) seen: {}",
            100.0 * interrupt_frees as f64 / frees.max(1) as f64,
            zone_locks.len()
        ),
        format!(
            "kernel: preempted by other processes {:.1} % of the tasks' windows (taken out of rate and idle)",
            100.0 * (raw_win.saturating_sub(win_ns)) as f64 / raw_win.max(1) as f64
        ),
        format!(
            "kernel: all pagesets of the program's CPUs (/proc/zoneinfo, {} samples, every process): peak rise {}, end − start {}; load average at the end {}",
            pcp.len(),
            pcp.iter().copied().max().unwrap_or(0) - first,
            pcp.last().copied().unwrap_or(0) - first,
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    ];
    if !owner.theirs.is_empty() || !owner.ours.is_empty() {
        notes.push(super::foreign::note(ev, &owner));
    }
    // Where the frees happened, by the freeing task's CPU.
    if opts.workload.ends_with("_stream") {
        notes.push(super::sleeps::note(ev, t0_ns, prog));
        let mut by_cpu: HashMap<u32, u64> = HashMap::new();
        for e in ours.iter().filter(|e| e.kind == EventKind::Free) {
            *by_cpu.entry(e.cpu).or_default() += 1;
        }
        let mut v: Vec<_> = by_cpu.into_iter().collect();
        v.sort_unstable();
        notes.push(format!(
            "kernel: frees by CPU (writer on CPU 0): {}",
            v.iter()
                .map(|(c, n)| format!("cpu {c}: {:.1} %", 100.0 * *n as f64 / frees.max(1) as f64))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    KernelMeasure {
        figures: f,
        mt_labels,
        notes,
        start: StartState::default(),
        recording: None,
    }
}

/// The zone locks' addresses: a lock whose contention ended right before a refill or
/// drain event on the same CPU (`rmqueue_bulk` and `free_pcppages_bulk` take the zone
/// lock and then emit their first event).
pub fn zone_locks(ev: &[Event]) -> HashSet<u64> {
    let mut last: HashMap<u32, Option<u64>> = HashMap::new();
    let mut out = HashSet::new();
    for e in ev {
        match e.kind {
            EventKind::LockEnd => {
                last.insert(e.cpu, Some(e.pfn));
            }
            EventKind::ZoneLocked | EventKind::PcpuDrain => {
                if let Some(Some(a)) = last.get(&e.cpu) {
                    out.insert(*a);
                }
                last.insert(e.cpu, None);
            }
            EventKind::LockBegin => {}
            _ => {
                last.insert(e.cpu, None);
            }
        }
    }
    out
}

/// Nanoseconds the program's tasks waited for the locks in `locks`: each
/// `contention_begin` to the next `contention_end` on its CPU.
fn lock_wait(ev: &[Event], locks: &HashSet<u64>, mine: &dyn Fn(&Event) -> bool) -> u64 {
    let mut open: HashMap<u32, u64> = HashMap::new();
    let mut total = 0;
    for e in ev {
        match e.kind {
            EventKind::LockBegin if locks.contains(&e.pfn) && mine(e) => {
                open.insert(e.cpu, e.ts);
            }
            EventKind::LockEnd => {
                if let Some(t) = open.remove(&e.cpu) {
                    total += e.ts.saturating_sub(t);
                }
            }
            _ => {}
        }
    }
    total
}

/// Per task, the nanoseconds it spent switched out while runnable (preempted) inside
/// its window: from a `sched_switch` away from it with `prev_state` 0 to the next one
/// back to it.
fn preempted_ns(ev: &[Event], t0: u64, win: &HashMap<u32, TaskWindow>) -> HashMap<u32, u64> {
    let mut out_since: HashMap<u32, u64> = HashMap::new();
    let mut total: HashMap<u32, u64> = HashMap::new();
    for e in ev.iter().filter(|e| e.kind == EventKind::Switch) {
        let t = e.ts + t0;
        let prev = e.pfn as u32;
        let next = (e.aux & 0xffff_ffff) as u32;
        let state = (e.aux >> 32) & 0xff;
        if let Some(s) = out_since.remove(&next) {
            if let Some(w) = win.get(&next) {
                let (a, b) = (s.max(w.start_ns), t.min(w.end_ns));
                *total.entry(next).or_default() += b.saturating_sub(a);
            }
        }
        if win.contains_key(&prev) && state == 0 {
            out_since.insert(prev, t);
        }
    }
    total
}

/// The pages the program's own events put on the pagesets, as a running sum from its
/// start: + each refill's pages and each free of a cached order (0-3, and THPs), −
/// each allocation of a cached order and each drained block; its peak and its end.
fn own_pcp_pages(ours: &[Event]) -> (i64, i64) {
    let cached = |o: u8| o <= 3 || o == 9;
    let (mut n, mut peak) = (0i64, 0i64);
    // Per CPU: whether the last page event was a direct (not refill) zone allocation.
    let mut direct: HashMap<u32, bool> = HashMap::new();
    for e in ours {
        let pages = 1i64 << e.order.min(20);
        match e.kind {
            EventKind::ZoneLocked => {
                if e.aux != 0 {
                    n += pages;
                }
                direct.insert(e.cpu, e.aux == 0);
                continue;
            }
            EventKind::Alloc
                if cached(e.order) && !direct.get(&e.cpu).copied().unwrap_or(false) =>
            {
                n -= pages;
            }
            EventKind::Free if cached(e.order) => n += pages,
            EventKind::PcpuDrain => n -= pages,
            _ => {}
        }
        if e.kind.is_page() {
            direct.insert(e.cpu, false);
        }
        peak = peak.max(n);
    }
    (peak, n)
}
