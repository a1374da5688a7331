//! `pagealloc predict`: the same workload as a real program on the live kernel (its
//! allocator events recorded with [`crate::trace::record`]) and in the simulator on
//! `--machine host`, side by side, a verdict per line.
//!
//! # Design
//! 1. [`program`]: the real programs, run by the recorder as `pagealloc
//!    predict-program`; each task reports its measured window on `CLOCK_MONOTONIC`,
//!    the clock the recorder's tracefs instance stamps events with, its CPU time, and
//!    its pid; the kernel's events count when a task of the program did them inside
//!    its own window.
//! 2. [`kernel`]: the kernel's figures from those events: blocks allocated and freed by
//!    order (and migratetype), refill and drain trips ([`crate::trace::replay::kernel_trips`]),
//!    zone-lock wait (`lock:contention_begin/end` on the zone lock, found as the lock
//!    whose contention ends right before a refill or drain on the same CPU), and the
//!    pagesets' pages sampled from `/proc/zoneinfo` every 10 ms. The time lines (rate,
//!    CPU time per operation, idle share) come from the run of least CPU time among
//!    runs of the same program without the recorder ([`kernel::run_untraced`], at
//!    least [`TIMING_RUNS`]; other processes only add to it): the tracer
//!    costs the traced tasks CPU time per event (0.1-0.5 µs per page event here, 5 × a
//!    two-CPU AF_UNIX message), which is the tracer's, not the workload's. Each task
//!    reports its CPU time and the time it waited runnable (`schedstat`), taken out of
//!    the windows as time other processes held the CPU.
//! 3. The simulator runs the lab workload of the same name and size on `host` with the
//!    preset that models the running kernel ([`crate::trace::replay::preset_for`]) and
//!    the programs' work outside the allocator measured on this machine ([`work`]); a
//!    stream on one CPU runs both ends on it, taking turns. It starts from the state
//!    the kernel was in when the recording began ([`crate::sim::start`]): the program's
//!    CPUs' pagesets (`count` and `high` of the start `/proc/zoneinfo`, each list the
//!    blocks the recorded events take from it before its refills) and every zone's
//!    free lists (the start `/proc/pagetypeinfo`, the rest of memory held, as `trace
//!    replay` starts). It runs once from each kernel run's start; its figures are the
//!    medians, as the kernel's are.
//!
//! Both sides divide by the same operation count (pages faulted, pages freed or
//! messages), fixed by the size: the work is the same by construction, what differs is
//! what each side did for it and how long it took.
//!
//! # Verdicts
//! Events per operation and pages per trip: within ±5 %; times (rate, CPU time per
//! operation) and pages on the pagesets: ±15 %; idle and zone-lock wait, shares of CPU
//! time: within 5 percentage points.
//!
//! # What it cannot see
//! Frees the kernel does outside the program's tasks (RCU callbacks, `ksoftirqd`,
//! the vmstat worker's decay drains) are not the program's and are not counted; the
//! simulator's decay drains are left out to match. The machine is shared: other
//! processes' pages pass through the same pagesets, and their CPU time through the same
//! CPUs (the load is printed).

pub mod background;
pub mod foreign;
pub mod kernel;
pub mod line;
pub mod program;
pub mod saved;
pub mod sleeps;
pub mod work;

use serde::{Deserialize, Serialize};

use crate::sim::start::StartState;
use crate::sim::SimOptions;
use crate::trace::TraceError;
use crate::workload::{self, Scale};
use program::Size;

/// The workloads `predict` knows: name, lab workload it is simulated with, what an
/// operation is.
pub const WORKLOADS: &[(&str, &str, &str)] = &[
    ("page_fault1", "page_fault1", "page faulted"),
    ("parallel_free", "parallel_free", "page freed"),
    ("unix_stream", "lmbench", "64 KiB message"),
    ("tcp_stream", "netperf", "message"),
    ("thp_mix", "thp_mix", "base page faulted"),
];

/// The default size of each program: a second or two on a laptop.
pub fn default_size(name: &str) -> Option<Size> {
    Some(match name {
        "page_fault1" => Size {
            pages: 4096,
            count: 16,
            extra: 0,
        },
        "parallel_free" => Size {
            pages: 65_536,
            count: 1,
            extra: 0,
        },
        "thp_mix" => Size {
            pages: 4096,
            count: 16,
            extra: 16_384,
        },
        "unix_stream" => Size {
            pages: 0,
            count: 4096,
            extra: 65_536,
        },
        "tcp_stream" => Size {
            pages: 0,
            count: 16_384,
            extra: 16_384,
        },
        _ => return None,
    })
}

/// The lab workload and its overrides that do what program `name` does at `s` on
/// `cpus` CPUs.
pub fn sim_workload(
    name: &str,
    cpus: u32,
    s: Size,
) -> Option<(&'static str, Vec<(String, String)>)> {
    let kv = |v: &[(&str, u64)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(k, x)| ((*k).to_owned(), x.to_string()))
            .collect()
    };
    Some(match name {
        "page_fault1" => (
            "page_fault1",
            kv(&[
                ("pages_per_loop", s.pages),
                ("loops", s.count),
                ("order", 0),
                ("pte_tables", 1),
                ("fault_work_ns", work::FAULT_WORK_NS.into()),
                ("unmap_work_ns", work::UNMAP_WORK_NS.into()),
                ("gather_pages", 1),
                ("shared_lines", work::UNMAP_SHARED_LINES.into()),
                ("line_transfer_ns", work::LINE_TRANSFER_NS.into()),
                ("fault_shared_lines", work::FAULT_SHARED_LINES.into()),
            ]),
        ),
        "parallel_free" => (
            "parallel_free",
            kv(&[
                ("region_pages", s.pages),
                ("tasks", u64::from(cpus)),
                ("order", 0),
                ("unmap_work_ns", work::UNMAP_WORK_NS.into()),
                ("gather_pages", 1),
                ("shared_lines", work::UNMAP_SHARED_LINES.into()),
                ("line_transfer_ns", work::LINE_TRANSFER_NS.into()),
            ]),
        ),
        "thp_mix" => (
            "thp_mix",
            kv(&[
                ("thp_cpus", u64::from(program::thp_cpus(cpus))),
                ("pages_per_loop", s.pages),
                ("loops", s.count),
                ("break_pages_per_cpu", s.extra),
                ("pte_tables", 1),
                ("fault_work_ns", work::FAULT_WORK_NS.into()),
                ("thp_fault_work_ns", work::THP_FAULT_WORK_NS.into()),
                ("unmap_work_ns", work::UNMAP_WORK_NS.into()),
                ("gather_pages", 1),
            ]),
        ),
        "unix_stream" => (
            "lmbench",
            kv(&[
                ("pairs", 1),
                ("chunks", s.count),
                ("chunk_bytes", s.extra),
                // A 64 KiB write is two skbs (`UNIX_SKB_FRAGS_SZ`), the reader woken
                // for each.
                ("skb_frag_bytes", 32_768),
                ("send_protocol_ns", work::UNIX_PROTOCOL_NS.into()),
                ("recv_protocol_ns", work::UNIX_PROTOCOL_NS.into()),
                ("turn_messages", work::UNIX_TURN_MESSAGES.into()),
                (
                    "cross_copy_in_ns_per_kib",
                    work::UNIX_CROSS_COPY_IN_NS_PER_KIB.into(),
                ),
                (
                    "cross_copy_out_ns_per_kib",
                    work::CROSS_COPY_OUT_NS_PER_KIB.into(),
                ),
                ("cross_send_ns", work::UNIX_CROSS_SEND_NS.into()),
                ("cross_recv_ns", work::UNIX_CROSS_RECV_NS.into()),
            ]),
        ),
        "tcp_stream" => (
            "netperf",
            kv(&[
                ("pairs", 1),
                ("messages", s.count),
                ("message_bytes", s.extra),
                ("frag_bytes", 32_768),
                // The reader hands the consumed fragments back to the writer's CPU
                // (`skb_attempt_defer_free`), whose softirq frees them; it frees one
                // itself when that list is full (`work`).
                ("sender_free_pct", work::TCP_SENDER_FREE_PCT.into()),
                ("slab_every_writes", work::TCP_SLAB_EVERY_WRITES.into()),
                ("rcvbuf_bytes", work::TCP_BUFFER_BYTES.into()),
                ("send_protocol_ns", work::TCP_SEND_PROTOCOL_NS.into()),
                ("recv_protocol_ns", work::TCP_RECV_PROTOCOL_NS.into()),
                ("recv_on_sender_pct", work::TCP_RECV_ON_SENDER_PCT.into()),
                ("recv_arrival_pct", work::TCP_RECV_ARRIVAL_PCT.into()),
                (
                    "cross_copy_in_ns_per_kib",
                    work::CROSS_COPY_IN_NS_PER_KIB.into(),
                ),
                (
                    "cross_copy_out_ns_per_kib",
                    work::TCP_CROSS_COPY_OUT_NS_PER_KIB.into(),
                ),
            ]),
        ),
        _ => return None,
    })
}

/// One compared line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Line {
    /// The workload (predict's name).
    pub workload: String,
    /// CPUs.
    pub cpus: u32,
    /// What is compared.
    pub metric: String,
    /// The live kernel's value.
    pub kernel: Option<f64>,
    /// The simulator's value (`None`: it cannot run this case).
    pub sim: Option<f64>,
    /// `ok` or `differs`.
    pub verdict: &'static str,
}

/// How a metric is judged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// Relative, as a fraction (0.05 = ±5 %).
    Rel(f64),
    /// Absolute, in the metric's unit (percentage points).
    Abs(f64),
    /// Sleeps per operation: within 0.02 or ±25 %, whichever is wider.
    Sleeps,
}

impl Tolerance {
    /// Whether `s` is within the tolerance of `k`.
    pub fn agrees(self, k: f64, s: f64) -> bool {
        match self {
            Tolerance::Rel(r) => (s - k).abs() <= r * k.abs() || (k == 0.0 && s == 0.0),
            Tolerance::Abs(a) => (s - k).abs() <= a,
            Tolerance::Sleeps => (s - k).abs() <= (0.25 * k.abs()).max(0.02),
        }
    }
}

/// Runs without the recorder that give the kernel's time lines, at least.
pub const TIMING_RUNS: u32 = 3;

/// Events per operation, pages per trip.
pub const EVENTS: Tolerance = Tolerance::Rel(0.05);
/// Rates, CPU time, pages on the pagesets.
pub const TIMES: Tolerance = Tolerance::Rel(0.15);
/// Shares of CPU time, percentage points.
pub const SHARES: Tolerance = Tolerance::Abs(5.0);
/// Sleeps per operation of a stream's end: within 0.02 of the kernel's, or ±25 % of
/// it, whichever is wider.
pub const SLEEPS: Tolerance = Tolerance::Sleeps;

/// The figures of one side, per operation where it says so.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Blocks allocated per operation, by order.
    pub alloc_per_op: [f64; 11],
    /// Blocks freed per operation, by order.
    pub free_per_op: [f64; 11],
    /// Refill trips per operation.
    pub refills_per_op: f64,
    /// Pages per refill trip (mean).
    pub pages_per_refill: f64,
    /// Drain trips per operation.
    pub drains_per_op: f64,
    /// Pages per drain trip (mean).
    pub pages_per_drain: f64,
    /// Operations per second.
    pub rate: f64,
    /// CPU time per operation, µs.
    pub cpu_us_per_op: f64,
    /// Idle share of the tasks' windows, %.
    pub idle_pct: f64,
    /// Zone-lock wait ÷ CPU time, %.
    pub zone_lock_pct: f64,
    /// Largest rise of the pages on the pagesets above the start, pages.
    pub pcp_peak: f64,
    /// Pages on the pagesets at the end minus at the start.
    pub pcp_end: f64,
    /// Streams: the writer's and the reader's sleeps per operation (the kernel's
    /// voluntary context switches in the task's window, the simulator's parks in a send
    /// or a receive that a wakeup ended).
    pub sleeps_per_op: [f64; 2],
}

fn lines_of(name: &str, cpus: u32, k: &Figures, s: Option<&Figures>) -> Vec<Line> {
    let mut v = Vec::new();
    let mut push = |metric: String, kv: f64, sv: Option<f64>, t: Tolerance| {
        let verdict = match sv {
            Some(x) if t.agrees(kv, x) => "ok",
            _ => "differs",
        };
        v.push(Line {
            workload: name.to_owned(),
            cpus,
            metric,
            kernel: Some(kv),
            sim: sv,
            verdict,
        });
    };
    // Orders either side allocates at least once per ten thousand operations.
    for o in 0..k.alloc_per_op.len() {
        let ka = k.alloc_per_op[o];
        let sa = s.map_or(0.0, |s| s.alloc_per_op[o]);
        if ka >= 1e-4 || sa >= 1e-4 {
            push(
                format!("blocks allocated/op, order {o}"),
                ka,
                s.map(|s| s.alloc_per_op[o]),
                EVENTS,
            );
        }
        let kf = k.free_per_op[o];
        let sf = s.map_or(0.0, |s| s.free_per_op[o]);
        if kf >= 1e-4 || sf >= 1e-4 {
            push(
                format!("blocks freed/op, order {o}"),
                kf,
                s.map(|s| s.free_per_op[o]),
                EVENTS,
            );
        }
    }
    push(
        "refill trips/op".into(),
        k.refills_per_op,
        s.map(|s| s.refills_per_op),
        EVENTS,
    );
    push(
        "pages/refill trip".into(),
        k.pages_per_refill,
        s.map(|s| s.pages_per_refill),
        EVENTS,
    );
    push(
        "drain trips/op".into(),
        k.drains_per_op,
        s.map(|s| s.drains_per_op),
        EVENTS,
    );
    push(
        "pages/drain trip".into(),
        k.pages_per_drain,
        s.map(|s| s.pages_per_drain),
        EVENTS,
    );
    push("rate, op/s".into(), k.rate, s.map(|s| s.rate), TIMES);
    push(
        "CPU µs/op".into(),
        k.cpu_us_per_op,
        s.map(|s| s.cpu_us_per_op),
        TIMES,
    );
    push("idle %".into(), k.idle_pct, s.map(|s| s.idle_pct), SHARES);
    push(
        "zone-lock wait %".into(),
        k.zone_lock_pct,
        s.map(|s| s.zone_lock_pct),
        SHARES,
    );
    push(
        "pageset pages, peak rise".into(),
        k.pcp_peak,
        s.map(|s| s.pcp_peak),
        TIMES,
    );
    push(
        "pageset pages, end − start".into(),
        k.pcp_end,
        s.map(|s| s.pcp_end),
        TIMES,
    );
    // A stream's ends on two CPUs: how often each slept (on one CPU the simulator
    // hands over between the ends without a scheduler).
    if is_stream(name) && cpus > 1 {
        for (i, side) in ["writer", "reader"].iter().enumerate() {
            push(
                format!("{side} sleeps/op"),
                k.sleeps_per_op[i],
                s.map(|s| s.sleeps_per_op[i]),
                SLEEPS,
            );
        }
    }
    v
}

/// What `predict` compared for one workload at one CPU count.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Prediction {
    /// The lines.
    pub lines: Vec<Line>,
    /// The kernel's figures.
    pub kernel: Figures,
    /// The simulator's (`None`: it cannot run this case).
    pub sim: Option<Figures>,
    /// The simulator's trace hash.
    pub trace_hash: Option<String>,
    /// Things the reader should know (kernel-only figures, load).
    pub notes: Vec<String>,
    /// Each kernel run's figures, start state and simulation (`--save`).
    #[serde(skip)]
    pub runs: Vec<saved::SavedRun>,
    /// The simulator's config.
    pub config: String,
    /// The recorded kernel's release.
    pub kernel_release: String,
    /// The time a line took between the program's CPUs, measured before the timing
    /// runs and given to the simulator (ns; `None`: not measured).
    pub line_ns: Option<f64>,
}

/// Options of one prediction.
#[derive(Clone, Debug)]
pub struct PredictOptions {
    /// Program (see [`WORKLOADS`]).
    pub workload: String,
    /// CPUs.
    pub cpus: u32,
    /// Size.
    pub size: Size,
    /// The simulator's config (default: the preset that models the running kernel).
    pub config: Option<String>,
    /// The binary that runs the programs (`pagealloc predict-program`).
    pub exe: std::path::PathBuf,
    /// Kernel runs; each kernel figure is their median (the simulator is deterministic).
    pub runs: u32,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Trips per operation (their mean over `runs`) and pages per trip (all pages over all
/// trips) of the (trips/op, pages/trip) that `f` reads from each run.
fn pooled(runs: &[Figures], f: impl Fn(&Figures) -> (f64, f64)) -> (f64, f64) {
    if runs.is_empty() {
        return (0.0, 0.0);
    }
    let (trips, pages) = runs
        .iter()
        .map(&f)
        .fold((0.0, 0.0), |(t, p), (rt, rp)| (t + rt, p + rt * rp));
    let per_trip = if trips > 0.0 { pages / trips } else { 0.0 };
    (trips / runs.len() as f64, per_trip)
}

impl Figures {
    /// Each figure's median over `runs`, but the trips: those pooled over the runs
    /// (every run is the same size), trips per operation their mean and pages per trip
    /// the pages of all trips over all trips. Trips are few and come in bursts (other
    /// processes empty the program's pageset), and two separate medians would pair
    /// the trips of one run with the trip size of another.
    pub fn median_of(runs: &[Figures]) -> Figures {
        let m = |f: &dyn Fn(&Figures) -> f64| median(runs.iter().map(f).collect());
        let mut out = Figures::default();
        for o in 0..out.alloc_per_op.len() {
            out.alloc_per_op[o] = m(&|r| r.alloc_per_op[o]);
            out.free_per_op[o] = m(&|r| r.free_per_op[o]);
        }
        (out.refills_per_op, out.pages_per_refill) =
            pooled(runs, |r| (r.refills_per_op, r.pages_per_refill));
        (out.drains_per_op, out.pages_per_drain) =
            pooled(runs, |r| (r.drains_per_op, r.pages_per_drain));
        out.rate = m(&|r| r.rate);
        out.cpu_us_per_op = m(&|r| r.cpu_us_per_op);
        out.idle_pct = m(&|r| r.idle_pct);
        out.zone_lock_pct = m(&|r| r.zone_lock_pct);
        out.pcp_peak = m(&|r| r.pcp_peak);
        out.pcp_end = m(&|r| r.pcp_end);
        for i in 0..2 {
            out.sleeps_per_op[i] = m(&|r| r.sleeps_per_op[i]);
        }
        out
    }
}

/// Simulates `opts` on `host` from `start`, the pagesets and free lists of one kernel
/// run ([`crate::sim::start`]; empty: the simulator's own start). The pageset lines
/// count from the start state (or the measured window), as the kernel's do.
///
/// # Errors
/// One line: the machine or the config could not be built, or the simulation failed.
pub fn simulate(
    opts: &PredictOptions,
    config: &str,
    start: &StartState,
) -> Result<(Figures, String), String> {
    simulate_with(opts, config, start, None)
}

/// [`simulate`], with the time one line takes between the program's CPUs as measured
/// beside the kernel's runs ([`line::line_transfer_ns`]) in place of
/// [`work::LINE_TRANSFER_NS`] where the workload takes one (parallel_free, page_fault1).
///
/// # Errors
/// As [`simulate`].
pub fn simulate_with(
    opts: &PredictOptions,
    config: &str,
    start: &StartState,
    line_ns: Option<f64>,
) -> Result<(Figures, String), String> {
    let row = simulate_row(opts, config, start, line_ns)?;
    Ok(figures_of(opts, start, &row))
}

/// [`simulate_with`]'s simulation, its row whole (the simulator's counters beyond the
/// compared figures: each CPU's `busy_s_cpu{N}`, `compute_s_cpu{N}`, `sleeps_cpu{N}`).
///
/// # Errors
/// As [`simulate`].
pub fn simulate_row(
    opts: &PredictOptions,
    config: &str,
    start: &StartState,
    line_ns: Option<f64>,
) -> Result<crate::row::Row, String> {
    let (wl, mut ov) = sim_workload(&opts.workload, opts.cpus, opts.size)
        .ok_or_else(|| format!("no workload {}", opts.workload))?;
    if start.table_free_lag > 0 && matches!(wl, "page_fault1" | "thp_mix") {
        // RCU's grace period after each unmap, as the kernel run showed it.
        ov.push(("table_free_lag".into(), start.table_free_lag.to_string()));
    }
    // The pages the CPUs' LRU add batches held past an unmap, as the kernel run
    // showed them; those freed after its window are out of the simulator's lines.
    ov.extend(foreign::lru_overrides(wl, opts.cpus, start).0);
    if let Some(ns) = line_ns {
        for (k, v) in &mut ov {
            if k == "line_transfer_ns" {
                *v = format!("{}", ns.round() as u64);
            }
        }
    }
    let w = workload::build(wl, Scale::Full, &ov).map_err(|e| e.to_string())?;
    // The host's zones as the run began (their managed memory grows after a boot).
    let m = crate::sim::host::host_managed(&start.zone_managed).map_err(|e| e.to_string())?;
    let cfg = crate::policies::config(config).map_err(|e| format!("config `{config}`: {e}"))?;
    let mut cost = m.cost;
    if is_stream(&opts.workload) {
        // Wakeups across this guest's vCPUs, measured here (`work`): TCP's writer
        // wakes its reader from its softirq, on a shorter path.
        let (wake, wakeup) = match opts.workload.as_str() {
            "tcp_stream" => (work::TCP_WAKE_NS, work::TCP_WAKEUP_NS),
            _ => (work::WAKE_NS, work::WAKEUP_NS),
        };
        cost.wake_ns = wake.into();
        cost.switch_ns = work::SWITCH_NS.into();
        cost.wakeup_ns = wakeup.into();
    }
    let mut o = SimOptions::new(m, cfg);
    o.cost = Some(cost);
    o.cpus = Some(opts.cpus);
    o.start = start.clone();
    crate::sim::run(w.as_ref(), &o).map_err(|e| format!("{}", e.error))
}

/// Each of the program's CPUs' simulated CPU time per operation, µs (a stream's writer
/// on CPU 0, its reader on CPU 1): what the kernel's per-task times are set beside.
pub(crate) fn cpu_us_by_cpu(opts: &PredictOptions, row: &crate::row::Row) -> Vec<f64> {
    let ops = ops_of(&opts.workload, opts.cpus, opts.size) as f64;
    (0..opts.cpus)
        .map(|c| {
            let busy = row.extra.get(&format!("busy_s_cpu{c}")).copied();
            busy.unwrap_or(0.0) * 1e6 / ops
        })
        .collect()
}

/// The note of a two-CPU stream's simulated CPU per operation by end, one run after
/// the other (none for other programs).
pub(crate) fn by_cpu_note(opts: &PredictOptions, by_cpu: &[Vec<f64>]) -> Option<String> {
    (is_stream(&opts.workload) && opts.cpus == 2).then(|| {
        format!(
            "simulator: CPU µs/op writer / reader per run: {}",
            by_cpu
                .iter()
                .map(|v| v
                    .iter()
                    .map(|c| format!("{c:.3}"))
                    .collect::<Vec<_>>()
                    .join(" / "))
                .collect::<Vec<_>>()
                .join("; ")
        )
    })
}

/// The compared figures of a simulated `row` and its trace hash.
pub(crate) fn figures_of(
    opts: &PredictOptions,
    start: &StartState,
    row: &crate::row::Row,
) -> (Figures, String) {
    let x = |k: &str| row.extra.get(k).copied().unwrap_or(0.0);
    let ops = ops_of(&opts.workload, opts.cpus, opts.size) as f64;
    let mut f = Figures::default();
    for o in 0..11 {
        f.alloc_per_op[o] = x(&format!("alloc_blocks_o{o}")) / ops;
        f.free_per_op[o] = x(&format!("free_blocks_o{o}")) / ops;
    }
    let refills = x("pcp_refill");
    let drains = (x("pcp_drain") - x("decay_drain")).max(0.0);
    f.refills_per_op = refills / ops;
    f.pages_per_refill = x("pcp_refill_pages") / refills.max(1.0);
    f.drains_per_op = drains / ops;
    f.pages_per_drain = x("pcp_drain_pages") / x("pcp_drain").max(1.0);
    f.rate = ops / x("elapsed_s").max(1e-12);
    f.cpu_us_per_op = x("cpu_time_s") * 1e6 / ops;
    f.idle_pct = x("idle_pct");
    f.zone_lock_pct = row.zone_lock_pct.unwrap_or(0.0);
    let at_start = x("pcp_start_pages");
    f.pcp_peak = row.pcp_peak_pages.unwrap_or(0.0) - at_start;
    f.pcp_end = row.pcp_final_pages.unwrap_or(0.0) - at_start;
    // A stream's writer runs on CPU 0, its reader on CPU 1 (`workload::stream`).
    for (i, s) in f.sleeps_per_op.iter_mut().enumerate() {
        *s = x(&format!("sleeps_cpu{i}")) / ops;
    }
    // The last loops' page tables and the pages the LRU batch held after the last
    // unmap, freed as the scripts end, the kernel's after its window: out of the frees
    // and the pageset's end (and its peak when that was the end).
    // (The faulting programs' lab workloads have the programs' names.)
    let tail = foreign::lru_overrides(&opts.workload, opts.cpus, start).1;
    let late =
        foreign::after_window(&opts.workload, opts.cpus, opts.size, start.table_free_lag) + tail;
    if late > 0 {
        let late = late as f64;
        f.free_per_op[0] = (f.free_per_op[0] - late / ops).max(0.0);
        if f.pcp_peak == f.pcp_end {
            // The start is a sample too.
            f.pcp_peak = (f.pcp_peak - late).max(0.0);
        }
        f.pcp_end -= late;
        f.pcp_peak = f.pcp_peak.max(f.pcp_end);
    }
    (f, row.trace_hash.clone().unwrap_or_default())
}

/// Whether program `name` is a stream between two tasks.
pub(crate) fn is_stream(name: &str) -> bool {
    matches!(name, "unix_stream" | "tcp_stream")
}

/// The operations program `name` does on `cpus` CPUs at `s` (the same in the
/// simulator by construction).
pub fn ops_of(name: &str, cpus: u32, s: Size) -> u64 {
    match name {
        "page_fault1" | "thp_mix" => s.pages * s.count * u64::from(cpus),
        "parallel_free" => s.pages * u64::from(cpus),
        _ => s.count,
    }
}

/// Whether the simulator can run program `name` on `cpus` CPUs: every program at
/// every count (a stream on one CPU runs both ends on it, taking turns).
pub fn simulable(name: &str, cpus: u32) -> bool {
    WORKLOADS.iter().any(|w| w.0 == name) && cpus >= 1
}

/// Runs one prediction: the program under the recorder, then the simulation.
/// `progress` gets a line per phase.
///
/// # Errors
/// [`TraceError::Unsupported`] without root or tracefs (exit status 2), otherwise as
/// the recorder, the program or the simulator fails.
pub fn predict(
    opts: &PredictOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Prediction, TraceError> {
    let release = crate::twin::host::kernel_release();
    let config = match &opts.config {
        Some(c) => c.clone(),
        None => crate::trace::replay::preset_for(&release)
            .0
            .unwrap_or_else(|| crate::trace::DEFAULT_CONFIG.to_owned()),
    };
    let mut runs = Vec::new();
    let mut k = kernel::measure(opts, progress)?;
    runs.push(k.figures.clone());
    // Each kernel run's start state: the simulator runs once from each.
    let mut starts = vec![k.start.clone()];
    let mut recordings = vec![k.recording.take()];
    for i in 1..opts.runs.max(1) {
        progress(&format!("kernel run {} of {}", i + 1, opts.runs));
        let m = kernel::measure(opts, progress)?;
        runs.push(m.figures);
        starts.push(m.start);
        recordings.push(m.recording);
    }
    let mut notes = k.notes.clone();
    if runs.len() > 1 {
        k.figures = Figures::median_of(&runs);
        notes.push(format!(
            "kernel: medians of {} runs (the notes are the first run's); rate per run: {}",
            runs.len(),
            runs.iter()
                .map(|r| format!("{:.0}", r.rate))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // The times come from runs without the recorder: each traced page event costs the
    // tracer CPU time the program's own work does not (docs/predict.md).
    let traced_cpu = k.figures.cpu_us_per_op;
    let mut timed = opts.runs.max(TIMING_RUNS);
    if opts.workload == "thp_mix" {
        timed *= work::THP_TIMING_BATCH_FACTOR;
    }
    let mut times = Vec::new();
    let mut per_task: Vec<Vec<f64>> = Vec::new();
    let mut sleeps: Vec<[f64; 2]> = Vec::new();
    let mut lines = Vec::new();
    for i in 0..timed {
        progress(&format!("timing run {} of {timed} (no recorder)", i + 1));
        // Where the host runs the two vCPUs now (docs/predict.md, parallel_free).
        lines.extend(line::line_transfer_ns(opts.cpus));
        let prog = kernel::run_untraced(opts)?;
        let ops = ops_of(&opts.workload, opts.cpus, opts.size).max(1) as f64;
        per_task.push(
            prog.tasks
                .iter()
                .map(|t| t.cpu_ns as f64 * 1e-3 / ops)
                .collect(),
        );
        times.push(kernel::times_of(opts, &prog));
        // The stream programs report the writer first, then the reader.
        let mut sl = [0.0; 2];
        for (s, t) in sl.iter_mut().zip(&prog.tasks) {
            *s = t.sleeps as f64 / ops;
        }
        sleeps.push(sl);
    }
    // The least perturbed run: other processes on the shared CPUs only ever add CPU
    // time (their cache traffic, the hypervisor), never take it away.
    let mut best = (0..times.len())
        .min_by(|&a, &b| times[a].1.total_cmp(&times[b].1))
        .unwrap_or(0);
    if kernel::timed_in_batches(&opts.workload) {
        // Each run is a batch's least (`kernel::run_untraced`): the median batch.
        let mut order: Vec<usize> = (0..times.len()).collect();
        order.sort_by(|&a, &b| times[a].1.total_cmp(&times[b].1));
        best = order[(order.len().saturating_sub(1)) / 2];
    }
    (k.figures.rate, k.figures.cpu_us_per_op, k.figures.idle_pct) = times[best];
    let med_cpu = median(times.iter().map(|t| t.1).collect());
    if is_stream(&opts.workload) {
        // The sleeps of the same run as the times: the CPU a write costs follows how
        // often its ends sleep (the tracer, slowing one end, changes both).
        k.figures.sleeps_per_op = sleeps[best];
        notes.push(format!(
            "kernel sleeps/op (writer, reader) in each run without the recorder (voluntary switches), CPU µs/op: {}",
            sleeps
                .iter()
                .zip(&times)
                .map(|(s, t)| format!("{:.3}, {:.3}: {:.2}", s[0], s[1], t.1))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    notes.push(format!(
        "kernel times: {} (median {med_cpu:.3} µs/op); per task {}; under the recorder {traced_cpu:.3} µs/op",
        kernel::timing_how(opts, timed),
        per_task[best]
            .iter()
            .map(|c| format!("{c:.3}"))
            .collect::<Vec<_>>()
            .join(" / ")
    ));
    let line_ns = (!lines.is_empty()).then(|| median(lines.clone()));
    if let Some(m) = line_ns {
        notes.push(format!(
            "kernel: a line moves between CPUs 0 and 1 in {m:.0} ns (before each timing run: {}; ~40 while the host runs the vCPUs on one L3, ~160 apart)",
            lines
                .iter()
                .map(|t| format!("{t:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut saved = Vec::new();
    let (sim, hash) = if simulable(&opts.workload, opts.cpus) {
        progress(&format!(
            "simulating {} on host at {} CPU(s), config {config}",
            opts.workload, opts.cpus
        ));
        let mut sims = Vec::new();
        let mut by_cpu = Vec::new();
        let mut hash = String::new();
        for (i, st) in starts.iter().enumerate() {
            let row = simulate_row(opts, &config, st, line_ns).map_err(TraceError::Failed)?;
            by_cpu.push(cpu_us_by_cpu(opts, &row));
            let (f, h) = figures_of(opts, st, &row);
            if i == 0 {
                hash.clone_from(&h);
            }
            saved.push(saved::SavedRun {
                version: saved::VERSION,
                kernel: runs[i].clone(),
                start: st.clone(),
                sim: Some(f.clone()),
                trace_hash: Some(h),
                recording: recordings[i].take(),
            });
            sims.push(f);
        }
        if sims.len() > 1 {
            notes.push(format!(
                "simulator: medians of {} runs, one from each kernel run's start state; refill trips/op, pages/refill trip, drain trips/op, pages/drain trip per run, kernel → sim: {}",
                sims.len(),
                runs.iter()
                    .zip(&sims)
                    .map(|(k, s)| format!(
                        "{} → {}",
                        trips_of(k),
                        trips_of(s)
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        notes.extend(by_cpu_note(opts, &by_cpu));
        (Some(Figures::median_of(&sims)), Some(hash))
    } else {
        notes.push(format!(
            "the simulator runs one script per CPU: a stream with both ends on {} CPU is not modelled",
            opts.cpus
        ));
        (None, None)
    };
    let mts: Vec<String> = k
        .mt_labels
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(o, l)| format!("order {o}{l}"))
        .collect();
    if !mts.is_empty() {
        notes.push(format!(
            "kernel: the allocations' main migratetype by order: {}",
            mts.join(", ")
        ));
    }
    notes.push(format!("simulator: machine host, config {config}"));
    if !k.start.is_empty() {
        notes.push(format!(
            "simulator: pagesets and free lists started as the kernel's at the (first) recording's start (count/high/blocks of it the events took first; free pages by zone {}): {}",
            k.start
                .free_lists
                .iter()
                .map(|z| format!("{} {}", z.name, z.free))
                .collect::<Vec<_>>()
                .join(", "),
            k.start
                .pagesets
                .iter()
                .filter(|p| p.count > 0 || p.high > 0)
                .map(|p| {
                    format!(
                        "CPU {} zone {}: {}/{}/{}",
                        p.cpu,
                        p.zone,
                        p.count,
                        p.high,
                        p.taken
                            .iter()
                            .map(|l| format!("{}×o{} {:?}", l.blocks, l.order, l.mt))
                            .collect::<Vec<_>>()
                            .join("+")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let lines = lines_of(&opts.workload, opts.cpus, &k.figures, sim.as_ref());
    Ok(Prediction {
        lines,
        kernel: k.figures,
        sim,
        trace_hash: hash,
        notes,
        runs: saved,
        config,
        kernel_release: release,
        line_ns,
    })
}

/// A run's refill and drain figures, for the per-run note.
fn trips_of(f: &Figures) -> String {
    [
        f.refills_per_op,
        f.pages_per_refill,
        f.drains_per_op,
        f.pages_per_drain,
    ]
    .iter()
    .map(|&x| fmt_v(Some(x)))
    .collect::<Vec<_>>()
    .join("/")
}

fn fmt_v(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(0.0) => "0".into(),
        Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) if x.abs() >= 0.01 => format!("{x:.3}"),
        Some(x) => format!("{x:.2e}"),
    }
}

/// The table of one prediction.
pub fn text(opts: &PredictOptions, p: &Prediction) -> String {
    use std::fmt::Write as _;
    let op = WORKLOADS
        .iter()
        .find(|w| w.0 == opts.workload)
        .map_or("op", |w| w.2);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "predict {} at {} CPU(s): op = one {op}; live kernel vs simulator",
        opts.workload, opts.cpus
    );
    let _ = writeln!(
        s,
        "{:<44} {:>12} {:>12}  verdict",
        "metric", "kernel", "sim"
    );
    for l in &p.lines {
        let _ = writeln!(
            s,
            "{:<32} {:>12} {:>12}  {}",
            l.metric,
            fmt_v(l.kernel),
            fmt_v(l.sim),
            l.verdict
        );
    }
    let ok = p.lines.iter().filter(|l| l.verdict == "ok").count();
    let _ = writeln!(s, "{ok} of {} lines agree", p.lines.len());
    for n in &p.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
