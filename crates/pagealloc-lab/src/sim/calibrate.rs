//! Calibration: the published figures, the fit of the cost model's free parameters, and
//! the tables that put the simulator beside the published numbers.
//!
//! # Design
//! Two published data sets (docs/sim-cost-model.md §4):
//! 1. The **batch sweep** (page_fault1 with high = 2 × batch, no free scaling) gives the
//!    time of one zone-lock trip as a function of the pages it moves, for Sapphire
//!    Rapids and Ice Lake. The simulator charges a trip the latencies of the allocator
//!    lines it touches (through the cache hierarchy); [`fit_trip_residuals`] fits what
//!    is left — a residual per trip and direction and an instruction cost per line —
//!    and [`refit`] prints them with every point's residual.
//! 2. The **kbuild table** (spr-2s-224, one socket, `make -j112`, base → patch10)
//!    constrains what the batch sweep cannot: how much work a task does between faults
//!    (kbuild's `compute_ns_per_page`) and the free memory at the start. [`refit`]
//!    searches a small grid of both on a reduced kbuild (fewer tasks) and reports the
//!    error of every candidate.
//!
//! What is fitted and what is fixed is listed in `docs/sim-cost-model.md`, with the
//! fitted values and the residuals this module prints.

use std::fmt::Write as _;

use pagealloc::{Config, Preset};

use super::{compare, CostModel, Headroom, Machine, SimError, SimOptions};
use crate::workload::{self, Scale};
use crate::Row;

pub use crate::workload::{KBUILD_COMPUTE_NS_PER_PAGE, KBUILD_HEADROOM_MIB};

/// `overrides` with the simulator's calibrated workload parameters put first (so the
/// caller's own values win): the workload's [`workload::Entry::calibrated`], e.g.
/// kbuild's [`KBUILD_COMPUTE_NS_PER_PAGE`].
pub fn calibrated(workload: &str, overrides: &[(String, String)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = workload::entry(workload)
        .map_or(&[][..], |e| e.calibrated)
        .iter()
        .map(|(k, value)| ((*k).to_owned(), value.to_string()))
        .collect();
    v.extend(overrides.iter().cloned());
    v
}

/// One row of the published kbuild table (rows cumulative, base = 100).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KbuildRow {
    /// Config (preset) name.
    pub config: &'static str,
    /// Build time, base = 100.
    pub build_time: f64,
    /// Zone lock contention, % of cycles.
    pub zone_lock_pct: f64,
    /// free_high drains, base = 100.
    pub free_high: f64,
    /// Pages allocated from the zone, base = 100.
    pub alloc_zone: f64,
}

/// kbuild on spr-2s-224, one socket, `make -j112` (docs/sim-cost-model.md §4.3).
pub const PUBLISHED_KBUILD: [KbuildRow; 7] = [
    KbuildRow {
        config: "base",
        build_time: 100.0,
        zone_lock_pct: 43.6,
        free_high: 100.0,
        alloc_zone: 100.0,
    },
    KbuildRow {
        config: "patch1",
        build_time: 96.6,
        zone_lock_pct: 40.3,
        free_high: 49.2,
        alloc_zone: 95.2,
    },
    KbuildRow {
        config: "patch3",
        build_time: 96.4,
        zone_lock_pct: 40.5,
        free_high: 11.3,
        alloc_zone: 95.1,
    },
    KbuildRow {
        config: "patch5",
        build_time: 96.1,
        zone_lock_pct: 37.9,
        free_high: 13.3,
        alloc_zone: 96.8,
    },
    KbuildRow {
        config: "patch7",
        build_time: 86.4,
        zone_lock_pct: 9.8,
        free_high: 6.2,
        alloc_zone: 22.0,
    },
    KbuildRow {
        config: "patch9",
        build_time: 85.9,
        zone_lock_pct: 9.4,
        free_high: 4.8,
        alloc_zone: 16.3,
    },
    KbuildRow {
        config: "patch10",
        build_time: 87.7,
        zone_lock_pct: 12.6,
        free_high: 29.0,
        alloc_zone: 32.3,
    },
];

/// One row of the published batch sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepRow {
    /// `spr-2s-224` or `icx-2s-128`.
    pub machine: &'static str,
    /// Batch (pages per refill/drain).
    pub batch: u32,
    /// will-it-scale page_fault1 throughput, pages/s.
    pub pages_per_s: f64,
    /// One zone-lock trip of a drain: average and p99, µs.
    pub free_avg_us: f64,
    /// p99 of the drain trip, µs.
    pub free_p99_us: f64,
    /// One zone-lock trip of a refill: average, µs.
    pub alloc_avg_us: f64,
    /// p99 of the refill trip, µs.
    pub alloc_p99_us: f64,
}

const fn sw(
    machine: &'static str,
    batch: u32,
    pps: f64,
    fa: f64,
    fp: f64,
    aa: f64,
    ap: f64,
) -> SweepRow {
    SweepRow {
        machine,
        batch,
        pages_per_s: pps,
        free_avg_us: fa,
        free_p99_us: fp,
        alloc_avg_us: aa,
        alloc_p99_us: ap,
    }
}

/// The batch sweep (docs/sim-cost-model.md §4.4): Sapphire Rapids and Ice Lake.
pub const PUBLISHED_SWEEP: [SweepRow; 12] = [
    sw("spr-2s-224", 63, 513_633.0, 2.33, 3.57, 2.67, 6.83),
    sw("spr-2s-224", 127, 517_617.0, 4.35, 6.65, 4.22, 13.03),
    sw("spr-2s-224", 255, 520_823.0, 8.29, 13.32, 7.52, 25.24),
    sw("spr-2s-224", 511, 524_122.0, 15.79, 23.42, 14.02, 49.35),
    sw("spr-2s-224", 1023, 525_981.0, 30.25, 44.19, 25.36, 94.88),
    sw("spr-2s-224", 2047, 526_794.0, 59.39, 84.50, 45.22, 140.81),
    sw("icx-2s-128", 63, 620_210.0, 2.21, 3.68, 2.02, 4.35),
    sw("icx-2s-128", 127, 627_003.0, 4.09, 6.86, 3.51, 8.28),
    sw("icx-2s-128", 255, 630_778.0, 7.70, 13.50, 6.17, 15.97),
    sw("icx-2s-128", 511, 633_652.0, 14.85, 22.62, 11.66, 31.08),
    sw("icx-2s-128", 1023, 637_071.0, 28.55, 42.02, 20.81, 54.36),
    sw("icx-2s-128", 2047, 638_090.0, 56.54, 84.06, 39.28, 91.68),
];

/// A straight line `y = intercept + slope · x` and its residuals.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LineFit {
    /// Value at x = 0.
    pub intercept: f64,
    /// Change per unit of x.
    pub slope: f64,
    /// `(x, y, fitted − y)` per point.
    pub residuals: Vec<(f64, f64, f64)>,
}

/// Least squares through `(x, y)` points (at least two distinct x, every y > 0) that
/// minimises the *relative* error, Σ ((fit − y) / y)²: weights 1/y², so the small
/// batches that real systems use (63) weigh as much as the large ones.
pub fn least_squares(points: &[(f64, f64)]) -> LineFit {
    let w: Vec<f64> = points.iter().map(|p| 1.0 / (p.1 * p.1)).collect();
    let sw: f64 = w.iter().sum();
    let mx = points.iter().zip(&w).map(|(p, w)| w * p.0).sum::<f64>() / sw;
    let my = points.iter().zip(&w).map(|(p, w)| w * p.1).sum::<f64>() / sw;
    let sxx: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.0 - mx) * (p.0 - mx))
        .sum();
    let sxy: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.0 - mx) * (p.1 - my))
        .sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    LineFit {
        intercept,
        slope,
        residuals: points
            .iter()
            .map(|&(x, y)| (x, y, intercept + slope * x - y))
            .collect(),
    }
}

/// The zone-lock residuals of one machine, fitted to the batch sweep: a trip's hold in
/// the simulator is its hand-off, plus the latencies of the allocator lines it touches
/// (the cache hierarchy's), plus these. ns.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TripFit {
    /// Machine name.
    pub machine: &'static str,
    /// Residual per refill trip (`CostModel::refill_trip_ns`).
    pub refill_trip_ns: f64,
    /// Residual per drain trip (`CostModel::drain_trip_ns`).
    pub drain_trip_ns: f64,
    /// Instructions per line under the lock (`CostModel::locked_line_ns`).
    pub locked_line_ns: f64,
    /// Per published point: (direction, batch, published ns, lines per trip, the
    /// lines' time on the core's fill buffers in ns, fitted ns).
    pub points: Vec<(&'static str, u32, f64, f64, f64, f64)>,
    /// The throughput column, the check the latency fit does not use: per published
    /// batch, (batch, published pages/s, simulated pages/s with the fitted residuals),
    /// one CPU as will-it-scale's per-task figure.
    pub throughput: Vec<(u32, f64, f64)>,
}

/// What a throughput curve says a refill trip plus a drain trip cost: the fall of the
/// time per page from the smallest to the largest batch, divided by the fall of the
/// trips per page of each kind (1/batch), ns. `pts`: (batch, pages/s), ascending.
pub fn trip_pair_ns(pts: &[(u32, f64)]) -> f64 {
    let (Some(&(b0, p0)), Some(&(b1, p1))) = (pts.first(), pts.last()) else {
        return f64::NAN;
    };
    (1e9 / p0 - 1e9 / p1) / (1.0 / f64::from(b0) - 1.0 / f64::from(b1))
}

/// Weighted least squares for `y ≈ Σ β_k x_k` with weights `w` (normal equations,
/// Gaussian elimination; `n` parameters).
fn weighted_ls<const N: usize>(rows: &[([f64; N], f64, f64)]) -> [f64; N] {
    let mut a = [[0.0; N]; N];
    let mut v = [0.0; N];
    for (x, y, w) in rows {
        for i in 0..N {
            v[i] += w * x[i] * y;
            for j in 0..N {
                a[i][j] += w * x[i] * x[j];
            }
        }
    }
    for c in 0..N {
        let p = (c..N)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .unwrap_or(c);
        a.swap(c, p);
        v.swap(c, p);
        let d = a[c][c];
        if d.abs() < 1e-300 {
            continue;
        }
        let pivot = a[c];
        for r in 0..N {
            if r != c {
                let f = a[r][c] / d;
                for (x, p) in a[r].iter_mut().zip(pivot) {
                    *x -= f * p;
                }
                v[r] -= f * v[c];
            }
        }
    }
    let mut b = [0.0; N];
    for i in 0..N {
        b[i] = if a[i][i].abs() < 1e-300 {
            0.0
        } else {
            v[i] / a[i][i]
        };
    }
    b
}

/// Fits the zone-lock residuals of `machine` to its published batch sweep: the sweep
/// runs in the simulator twice with the residuals at zero and the per-line cost at 0
/// and 1 ns, which gives each point's line time `A` (the hierarchy's latencies,
/// overlapped as `sim/overlap.rs` schedules them) and lines per trip `L`; then
/// published ≈ `fgraph_ns` + trip + A + line × L, by least squares on the relative
/// error, with one trip residual per direction and one per-line cost, none negative (a
/// coefficient that would be is fixed at zero: the lines' latencies alone already
/// exceed the published figure). `fgraph_ns` is function_graph's own cost inside the
/// window it times, a published figure, not fitted: the published latencies contain
/// it, holds do not. A third run with the fitted residuals gives the throughput
/// column beside the published one ([`TripFit::throughput`]), which the fit does not
/// use.
///
/// # Errors
/// A failed run.
pub fn fit_trip_residuals(machine: &Machine, seed: u64) -> Result<TripFit, SimError> {
    let run_with = |refill: f64, drain: f64, line_ns: f64| -> Result<Vec<Row>, SimError> {
        let mut o = SimOptions::new(machine.clone(), Config::default());
        o.seed = seed;
        o.cpus = Some(1);
        o.cost = Some(CostModel {
            refill_trip_ns: refill,
            drain_trip_ns: drain,
            locked_line_ns: line_ns,
            ..machine.cost
        });
        batch_sweep(
            machine,
            &[("loops".to_owned(), "2".to_owned())],
            &o,
            &|_| {},
        )
    };
    let (r0, r1) = (run_with(0.0, 0.0, 0.0)?, run_with(0.0, 0.0, 1.0)?);
    let fg = machine.cost.fgraph_ns;
    let mut pts = Vec::new();
    for p in PUBLISHED_SWEEP.iter().filter(|p| p.machine == machine.name) {
        let find = |rows: &[Row]| {
            rows.iter()
                .find(|r| r.extra.get("batch").copied() == Some(f64::from(p.batch)))
                .cloned()
        };
        let (Some(a0), Some(a1)) = (find(&r0), find(&r1)) else {
            continue;
        };
        for (dir, publ, lat0, lat1) in [
            (
                "refill",
                p.alloc_avg_us,
                a0.alloc_lat_avg_us,
                a1.alloc_lat_avg_us,
            ),
            (
                "drain",
                p.free_avg_us,
                a0.free_lat_avg_us,
                a1.free_lat_avg_us,
            ),
        ] {
            let (Some(l0), Some(l1)) = (lat0, lat1) else {
                continue;
            };
            // The tracer's in-window cost is in every reported latency (the sweep is
            // `fgraph_timed`); `a` is the lines' own time.
            let a = l0 * 1000.0 - fg;
            let lines = (l1 - l0) * 1000.0;
            pts.push((dir, p.batch, publ * 1000.0, lines, a));
        }
    }
    // Non-negative least squares by elimination: a coefficient that comes out negative
    // (no physical meaning: the lines' latencies alone exceed the published figure) is
    // fixed at zero and the others refitted.
    let mut free = [true; 3];
    let mut b = [0.0; 3];
    for _ in 0..3 {
        let rows: Vec<([f64; 3], f64, f64)> = pts
            .iter()
            .map(|&(dir, _, publ, lines, a)| {
                let r = f64::from(u8::from(dir == "refill"));
                let x = [r, 1.0 - r, lines];
                let x = std::array::from_fn(|k| if free[k] { x[k] } else { 0.0 });
                (x, publ - fg - a, 1.0 / (publ * publ))
            })
            .collect();
        b = weighted_ls(&rows);
        match (0..3).find(|&k| free[k] && b[k] < 0.0) {
            Some(k) => free[k] = false,
            None => break,
        }
    }
    for k in 0..3 {
        if !free[k] {
            b[k] = 0.0;
        }
    }
    let points = pts
        .iter()
        .map(|&(dir, batch, publ, lines, a)| {
            let t = if dir == "refill" { b[0] } else { b[1] };
            (dir, batch, publ, lines, a, fg + t + a + b[2] * lines)
        })
        .collect();
    let fitted = run_with(b[0], b[1], b[2])?;
    let throughput = PUBLISHED_SWEEP
        .iter()
        .filter(|p| p.machine == machine.name)
        .filter_map(|p| {
            let r = fitted
                .iter()
                .find(|r| r.extra.get("batch").copied() == Some(f64::from(p.batch)))?;
            Some((
                p.batch,
                p.pages_per_s,
                r.extra.get("pages_per_s_per_cpu").copied()?,
            ))
        })
        .collect();
    Ok(TripFit {
        machine: machine.name,
        refill_trip_ns: b[0],
        drain_trip_ns: b[1],
        locked_line_ns: b[2],
        points,
        throughput,
    })
}

/// The config of one batch-sweep point: high fixed at 2 × batch, batch fixed, no
/// batch scaling (`batch_scale_max=0`: refills and drains move exactly one batch).
pub fn sweep_config(batch: u32) -> Config {
    let mut c = Preset::Linux612.config();
    c.fixed_batch = Some(batch);
    c.fixed_high = Some(2 * batch);
    c.batch_scale_max = 0;
    c
}

/// The presets of the kbuild table, base → patch10.
pub fn kbuild_configs() -> Vec<Config> {
    PUBLISHED_KBUILD
        .iter()
        .map(|r| r.config.parse().expect("preset names parse"))
        .collect()
}

/// One column of the kbuild table: name, ours, published.
fn kbuild_columns(r: &Row, p: &KbuildRow) -> [(&'static str, f64, f64); 4] {
    [
        (
            "build time",
            1e4 / r.score.unwrap_or(f64::NAN),
            p.build_time,
        ),
        (
            "zone lock %",
            r.zone_lock_pct.unwrap_or(f64::NAN),
            p.zone_lock_pct,
        ),
        ("free_high", r.free_high.unwrap_or(f64::NAN), p.free_high),
        ("alloc_zone", r.alloc_zone.unwrap_or(f64::NAN), p.alloc_zone),
    ]
}

/// The kbuild table, ours beside the published one, with the relative error of each
/// cell. `rows` are normalised ([`crate::row::normalise`]) and in [`PUBLISHED_KBUILD`] order;
/// build time is `100 × makespan / base makespan` (= 10⁴ / normalised score).
pub fn kbuild_table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} | {:>22} | {:>22} | {:>22} | {:>22}",
        "config", "build time", "zone lock %", "free_high", "alloc_zone"
    );
    let _ = writeln!(
        s,
        "{:<8} | {:>6} {:>6} {:>8} | {:>6} {:>6} {:>8} | {:>6} {:>6} {:>8} | {:>6} {:>6} {:>8}",
        "",
        "ours",
        "pub",
        "rel.err",
        "ours",
        "pub",
        "rel.err",
        "ours",
        "pub",
        "rel.err",
        "ours",
        "pub",
        "rel.err"
    );
    for (r, p) in rows.iter().zip(PUBLISHED_KBUILD.iter()) {
        let _ = write!(s, "{:<8}", p.config);
        for (_, ours, publ) in kbuild_columns(r, p) {
            let _ = write!(
                s,
                " | {:>6.1} {:>6.1} {:>7.0}%",
                ours,
                publ,
                100.0 * (ours - publ) / publ
            );
        }
        s.push('\n');
    }
    s
}

/// What the decay tick (`decay_pcp_high`, once a second per CPU, each CPU at its own
/// skewed time) did during each row's build: the virtual build time, the per-CPU ticks
/// that ran before the last task ended, the mean number of pagesets a tick acted on
/// (those above high_min), their mean `high` just before and just after it, and the
/// drains the ticks made (`decay_drain`). Rows without tuning
/// (base … patch5) have no raised pageset: their `high` columns are empty.
pub fn kbuild_decay_table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} | {:>9} | {:>5} | {:>8} | {:>12} | {:>11} | {:>12}",
        "config", "build (s)", "ticks", "pagesets", "high before", "high after", "decay drains"
    );
    for r in rows {
        let e = |k: &str| r.extra.get(k).copied().unwrap_or(f64::NAN);
        let config = r.config.as_deref().unwrap_or("");
        let config = config.split(',').next().unwrap_or(config);
        let (before, after) = if e("tick_pcps") > 0.0 {
            (
                format!("{:.0}", e("tick_high_before")),
                format!("{:.0}", e("tick_high_after")),
            )
        } else {
            ("-".to_owned(), "-".to_owned())
        };
        let _ = writeln!(
            s,
            "{:<8} | {:>9.3} | {:>5.0} | {:>8.1} | {:>12} | {:>11} | {:>12.0}",
            config,
            e("makespan_s"),
            e("ticks"),
            e("tick_pcps"),
            before,
            after,
            e("decay_drain")
        );
    }
    s
}

/// Where each row's zone-lock time went, by trip kind (the engine's `LockTally`):
/// refills (and direct allocations) and drains (and direct frees) of the workload's
/// CPUs — how many, the share that found the lock taken, mean wait and hold per trip —,
/// the decay's and kswapd's trips (which delay no CPU: their holds, and the share of
/// the workload's wait spent queued right behind one), the lock's busy share of the
/// build (Σ holds ÷ makespan), the wait per page moved under the lock, and how long one
/// CPU's decay tick kept the lock busy past its time (mean, largest).
pub fn kbuild_lock_table(rows: &[Row]) -> String {
    let mut s = String::new();
    // Each row by its whole config (two rows of one preset differ in a switch or policy).
    let w = rows
        .iter()
        .map(|r| r.config.as_deref().unwrap_or("").len())
        .max()
        .unwrap_or(0)
        .max(8);
    let _ = writeln!(
        s,
        "{:<w$} | {:>6} | {:>9} | {:>6} | {:>8} | {:>8} | {:>9} | {:>6} | {:>8} | {:>8} | {:>6} | {:>8} | {:>6} | {:>6} | {:>7} | {:>9}",
        "config",
        "lock %",
        "refills",
        "cont %",
        "wait us",
        "hold us",
        "drains",
        "cont %",
        "wait us",
        "hold us",
        "bg",
        "bg hold",
        "behind",
        "busy %",
        "ns/page",
        "tick busy"
    );
    for r in rows {
        let e = |k: &str| r.extra.get(k).copied().unwrap_or(f64::NAN);
        let config = r.config.as_deref().unwrap_or("");
        let per = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };
        let wait = e("refill_wait_s") + e("drain_wait_s");
        let behind = e("bg_wait_behind_s");
        let hold = e("refill_hold_s") + e("drain_hold_s") + e("bg_hold_s");
        let ticks = e("ticks");
        let _ = writeln!(
            s,
            "{:<w$} | {:>6.1} | {:>9.0} | {:>6.1} | {:>8.2} | {:>8.2} | {:>9.0} | {:>6.1} | {:>8.2} | {:>8.2} | {:>6.0} | {:>6.1}ms | {:>5.1}% | {:>6.1} | {:>7.1} | {:>5.0}/{:<3.0}",
            config,
            r.zone_lock_pct.unwrap_or(f64::NAN),
            e("refill_trips"),
            100.0 * per(e("refill_contended"), e("refill_trips")),
            1e6 * per(e("refill_wait_s"), e("refill_trips")),
            1e6 * per(e("refill_hold_s"), e("refill_trips")),
            e("drain_trips"),
            100.0 * per(e("drain_contended"), e("drain_trips")),
            1e6 * per(e("drain_wait_s"), e("drain_trips")),
            1e6 * per(e("drain_hold_s"), e("drain_trips")),
            e("bg_trips"),
            1e3 * e("bg_hold_s"),
            100.0 * per(behind, wait),
            100.0 * per(hold, e("makespan_s")),
            1e9 * per(wait, e("zone_lock_pages")),
            1e6 * per(e("tick_burst_s"), ticks),
            1e6 * e("tick_burst_max_s"),
        );
    }
    let _ = writeln!(
        s,
        "lines touched under the lock per trip (share charged beyond the LLC: another core's modified copy, another socket, DRAM), whole run:"
    );
    for r in rows {
        let e = |k: &str| r.extra.get(k).copied().unwrap_or(f64::NAN);
        let config = r.config.as_deref().unwrap_or("");
        let _ = write!(s, "{config:<w$} |");
        for kind in ["refill", "drain", "bg"] {
            let (lines, missed, trips) = (
                e(&format!("{kind}_lines")),
                e(&format!("{kind}_lines_missed")),
                e(&format!("{kind}_trips")),
            );
            let per = if trips > 0.0 { lines / trips } else { 0.0 };
            let share = if lines > 0.0 {
                100.0 * missed / lines
            } else {
                0.0
            };
            let _ = write!(s, " {kind} {per:>8.0} ({share:>4.1}%)");
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "zone-lock wait by second of the build (share of the row's wait; trips):"
    );
    for r in rows {
        let config = r.config.as_deref().unwrap_or("");
        let waits: Vec<(f64, f64)> = (0..)
            .map_while(|i| {
                let w = r.extra.get(&format!("tick{i}_wait_s"))?;
                Some((*w, r.extra[&format!("tick{i}_trips")]))
            })
            .collect();
        let total: f64 = waits.iter().map(|w| w.0).sum();
        let _ = write!(s, "{config:<w$} |");
        for (w, n) in waits {
            let share = if total > 0.0 { 100.0 * w / total } else { 0.0 };
            let _ = write!(s, " {share:>5.1}% ({n:.0})");
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "(cont % = trips that found the lock taken; behind = share of the wait queued right behind a decay/kswapd trip; busy % = Σ holds ÷ build; ns/page = wait ÷ pages moved under the lock; tick busy = µs one CPU's decay tick kept the lock busy, mean/largest)"
    );
    s
}

/// One step of the kbuild table in one column: does ours move the way the published
/// figures move?
#[derive(Clone, Debug, PartialEq)]
pub struct Direction {
    /// `"base → patch1"`.
    pub step: String,
    /// Column name.
    pub column: &'static str,
    /// Our change (normalised units or points of %).
    pub ours: f64,
    /// The published change.
    pub published: f64,
    /// Same sign, or both changes within [`FLAT`] of the column's base value.
    pub agrees: bool,
}

/// Changes smaller than this share of the base-row value (0.5 %) are "flat": the
/// published table's noise (patch1 → patch3 moves zone lock % by 0.2 points) does not
/// have a direction a model can be held to, so a flat published step agrees with a flat
/// simulated one as well as with any sign.
pub const FLAT: f64 = 0.005;

/// The direction of every step of every column, ours against published.
pub fn kbuild_directions(rows: &[Row]) -> Vec<Direction> {
    let mut v = Vec::new();
    let base = PUBLISHED_KBUILD[0];
    for i in 1..rows.len().min(PUBLISHED_KBUILD.len()) {
        let (a, b) = (&rows[i - 1], &rows[i]);
        let (pa, pb) = (&PUBLISHED_KBUILD[i - 1], &PUBLISHED_KBUILD[i]);
        let ca = kbuild_columns(a, pa);
        let cb = kbuild_columns(b, pb);
        let cbase = kbuild_columns(&rows[0], &base);
        for k in 0..4 {
            let ours = cb[k].1 - ca[k].1;
            let publ = cb[k].2 - ca[k].2;
            let flat_pub = publ.abs() <= FLAT * cbase[k].2;
            let agrees = flat_pub || ours.signum() == publ.signum() && ours != 0.0;
            v.push(Direction {
                step: format!("{} → {}", pa.config, pb.config),
                column: cb[k].0,
                ours,
                published: publ,
                agrees,
            });
        }
    }
    v
}

/// The directions as text: one line per step and column, and the count that agree.
pub fn directions_text(d: &[Direction]) -> String {
    let mut s = String::new();
    for x in d {
        let _ = writeln!(
            s,
            "  {:<18} {:<12} ours {:>+8.1}  published {:>+8.1}  {}",
            x.step,
            x.column,
            x.ours,
            x.published,
            if x.agrees {
                "same direction"
            } else {
                "DIFFERENT"
            }
        );
    }
    let _ = writeln!(
        s,
        "{} of {} steps move in the published direction (published changes within {:.1} % of base count as flat)",
        d.iter().filter(|x| x.agrees).count(),
        d.len(),
        FLAT * 100.0
    );
    s
}

/// The batch sweep of one machine in the simulator: page_fault1 (with
/// `workload_overrides`, on `base.cpus` CPUs) with high = 2 × batch, one row per batch
/// of the published sweep plus 4095; [`sweep_table`] prints them beside the published
/// figures. docs/sim-cost-model.md uses one CPU and `loops=2`.
///
/// # Errors
/// A failed run.
pub fn batch_sweep(
    machine: &Machine,
    workload_overrides: &[(String, String)],
    base: &SimOptions,
    progress: &(dyn Fn(&Row) + Sync),
) -> Result<Vec<Row>, SimError> {
    let w = workload::build("batch_sweep", Scale::Full, workload_overrides)
        .expect("batch_sweep builds with its defaults");
    let batches: Vec<u32> = PUBLISHED_SWEEP
        .iter()
        .filter(|r| r.machine == "spr-2s-224")
        .map(|r| r.batch)
        .chain([4095])
        .collect();
    let configs: Vec<Config> = batches.iter().map(|&b| sweep_config(b)).collect();
    let mut o = base.clone();
    o.machine = machine.clone();
    let mut rows = compare(&*w, &o, &configs, progress)?;
    for (r, b) in rows.iter_mut().zip(&batches) {
        r.extra.insert("batch".into(), f64::from(*b));
        if let (Some(s), Some(c)) = (r.score, r.cpus) {
            r.extra
                .insert("pages_per_s_per_cpu".into(), s / f64::from(c));
        }
    }
    Ok(rows)
}

/// The batch sweep rows beside the published ones (same machine name), with relative
/// errors of the latencies. Throughput is per CPU (will-it-scale reports per task).
pub fn sweep_table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>5} | {:>9} {:>9} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>6}",
        "machine", "batch", "pages/s", "pub", "free", "pub", "f.p99", "pub", "alloc", "pub", "a.p99", "pub", "lock%"
    );
    for r in rows {
        let m = r.machine.as_deref().unwrap_or("-");
        let b = r.extra.get("batch").copied().unwrap_or(0.0) as u32;
        let p = PUBLISHED_SWEEP
            .iter()
            .find(|p| p.machine == m && p.batch == b);
        let pf = |f: fn(&SweepRow) -> f64| p.map_or("-".to_owned(), |p| format!("{:.2}", f(p)));
        let o = |x: Option<f64>| x.map_or("-".to_owned(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "{:<10} {:>5} | {:>9.0} {:>9} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>6.1}",
            m,
            b,
            r.extra.get("pages_per_s_per_cpu").copied().unwrap_or(f64::NAN),
            p.map_or("-".to_owned(), |p| format!("{:.0}", p.pages_per_s)),
            o(r.free_lat_avg_us),
            pf(|p| p.free_avg_us),
            o(r.free_lat_p99_us),
            pf(|p| p.free_p99_us),
            o(r.alloc_lat_avg_us),
            pf(|p| p.alloc_avg_us),
            o(r.alloc_lat_p99_us),
            pf(|p| p.alloc_p99_us),
            r.zone_lock_pct.unwrap_or(f64::NAN),
        );
    }
    s
}

/// The kbuild ablation (base → patch10) on `machine`, normalised to base.
///
/// # Errors
/// A failed run.
pub fn kbuild_ablation(
    overrides: &[(String, String)],
    base: &SimOptions,
    progress: &(dyn Fn(&Row) + Sync),
) -> Result<Vec<Row>, SimError> {
    let w = workload::build("kbuild", Scale::Full, &calibrated("kbuild", overrides))
        .expect("kbuild builds");
    let mut rows = compare(&*w, base, &kbuild_configs(), progress)?;
    crate::row::normalise(&mut rows);
    Ok(rows)
}

/// Error of a normalised kbuild ablation against the published table: the root mean
/// square, over the seven rows, of the build-time error (points) and the zone-lock
/// error (points), equally weighted. free_high and alloc_zone are outputs of the
/// allocator's logic, not of the cost model, so they are not fitted.
pub fn kbuild_error(rows: &[Row]) -> f64 {
    let mut sum = 0.0;
    let mut n = 0.0;
    for (r, p) in rows.iter().zip(PUBLISHED_KBUILD.iter()) {
        let c = kbuild_columns(r, p);
        sum += (c[0].1 - c[0].2).powi(2) + (c[1].1 - c[1].2).powi(2);
        n += 2.0;
    }
    (sum / n).sqrt()
}

/// One point of the kbuild grid of [`refit`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct GridPoint {
    /// kbuild's `compute_ns_per_page`.
    pub compute_ns_per_page: u64,
    /// Free memory at the start (MiB above the high watermark; `None`: all free).
    pub headroom_mib: Option<u64>,
    /// [`kbuild_error`] of the ablation, points, averaged over the seeds.
    pub error: f64,
    /// Steps of the table that move the published way (of 24), the fewest over the
    /// seeds.
    pub directions: usize,
}

/// The result of [`refit`]: the batch-sweep line fits, and the kbuild grid.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Refit {
    /// Zone-lock residual fits per machine.
    pub trips: Vec<TripFit>,
    /// Every grid point.
    pub grid: Vec<GridPoint>,
    /// The best grid point: the most steps in the published direction, then the least
    /// error.
    pub best: Option<GridPoint>,
}

/// Refits the free parameters: the zone-lock residuals from the batch sweep of both
/// calibration machines ([`fit_trip_residuals`]), then kbuild's compute per page and the
/// free memory at the start over a grid, each point a kbuild ablation with `tasks`
/// tasks on spr-2s-224 (the full table uses 896; 224 keeps the fit to a few minutes),
/// once per seed, with SPR's refitted residuals. The best point has the most steps in
/// the published direction with every seed, then the least mean [`kbuild_error`].
/// Each point's configs run `jobs` at a time ([`SimOptions::jobs`]; 0: the host's
/// parallelism). `progress` gets one line per grid point. No `computes` or no
/// `headrooms`: no grid, the residuals' fit alone.
///
/// # Errors
/// A failed run.
pub fn refit(
    tasks: u32,
    computes: &[u64],
    headrooms: &[Headroom],
    seeds: &[u64],
    jobs: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Refit, SimError> {
    let seed = seeds.first().copied().unwrap_or(1);
    let trips = ["spr-2s-224", "icx-2s-128"]
        .into_iter()
        .map(|m| fit_trip_residuals(&Machine::by_name(m).expect("known machine"), seed))
        .collect::<Result<Vec<_>, _>>()?;
    let spr = Machine::by_name("spr-2s-224").expect("known machine");
    let fit = trips
        .iter()
        .find(|t| t.machine == spr.name)
        .expect("spr fitted");
    let cost = CostModel {
        refill_trip_ns: fit.refill_trip_ns,
        drain_trip_ns: fit.drain_trip_ns,
        locked_line_ns: fit.locked_line_ns,
        ..spr.cost
    };
    let mut grid = Vec::new();
    for &compute in computes {
        for &headroom in headrooms {
            let overrides = vec![
                ("tasks".to_owned(), tasks.to_string()),
                ("compute_ns_per_page".to_owned(), compute.to_string()),
            ];
            let mut error = 0.0;
            let mut directions = usize::MAX;
            for &seed in seeds {
                let mut o = SimOptions::new(spr.clone(), Config::default());
                o.cost = Some(cost);
                o.seed = seed;
                o.headroom = headroom;
                o.jobs = jobs;
                let rows = kbuild_ablation(&overrides, &o, &|_| {})?;
                error += kbuild_error(&rows) / seeds.len() as f64;
                let agree = kbuild_directions(&rows).iter().filter(|d| d.agrees).count();
                directions = directions.min(agree);
            }
            let p = GridPoint {
                compute_ns_per_page: compute,
                headroom_mib: headroom.mib("kbuild"),
                error,
                directions: if seeds.is_empty() { 0 } else { directions },
            };
            progress(&grid_line(&p));
            grid.push(p);
        }
    }
    let best = grid.iter().copied().min_by(|a, b| {
        b.directions
            .cmp(&a.directions)
            .then(a.error.total_cmp(&b.error))
    });
    Ok(Refit { trips, grid, best })
}

fn grid_line(p: &GridPoint) -> String {
    format!(
        "compute_ns_per_page={:<6} headroom_mib={:<6} rms error {:.2}, {} of 24 steps in the published direction (fewest over the seeds)",
        p.compute_ns_per_page,
        p.headroom_mib.map_or("all".to_owned(), |m| m.to_string()),
        p.error,
        p.directions
    )
}

/// The refit as text: the trip fits with their residuals, the constants in use, and
/// the kbuild grid (when it ran).
pub fn refit_report(r: &Refit) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "batch sweep: zone-lock hold = hand-off + the lines on the core's fill buffers (cache hierarchy, overlapped misses) + trip residual + line cost × lines (ns)"
    );
    for t in &r.trips {
        let m = Machine::by_name(t.machine).expect("known machine");
        let _ = writeln!(
            s,
            "  {:<10} fitted: refill_trip_ns {:.1}, drain_trip_ns {:.1}, locked_line_ns {:.2}   (in use: {:.1}, {:.1}, {:.2})",
            t.machine,
            t.refill_trip_ns,
            t.drain_trip_ns,
            t.locked_line_ns,
            m.cost.refill_trip_ns,
            m.cost.drain_trip_ns,
            m.cost.locked_line_ns
        );
        for &(dir, batch, publ, lines, a, fitted) in &t.points {
            let _ = writeln!(
                s,
                "      {dir:<6} batch {batch:>4}: published {publ:>8.0} ns, lines/trip {lines:>7.0}, their time {a:>8.0} ns, fitted {fitted:>8.0} ns ({:+.1}%)",
                100.0 * (fitted - publ) / publ
            );
        }
        let _ = writeln!(
            s,
            "      (each latency includes function_graph's in-window cost, fgraph_ns {:.0} ns per trip, which holds and virtual time do not)",
            m.cost.fgraph_ns
        );
        for &(batch, publ, sim) in &t.throughput {
            let _ = writeln!(
                s,
                "      pages/s batch {batch:>4}: published {publ:>7.0}, simulated {sim:>7.0} ({:+.2}%)",
                100.0 * (sim - publ) / publ
            );
        }
        let publ: Vec<(u32, f64)> = t.throughput.iter().map(|x| (x.0, x.1)).collect();
        let sim: Vec<(u32, f64)> = t.throughput.iter().map(|x| (x.0, x.2)).collect();
        let _ = writeln!(
            s,
            "      a refill + a drain trip as the pages/s curve prices them (time per page saved from the first to the last batch ÷ trips per page saved): published {:.0} ns, simulated {:.0} ns",
            trip_pair_ns(&publ),
            trip_pair_ns(&sim)
        );
    }
    if r.grid.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "kbuild grid (rms error of build time and zone lock %, points; steps in the published direction):"
    );
    for p in &r.grid {
        let _ = writeln!(s, "  {}", grid_line(p));
    }
    if let Some(b) = &r.best {
        let _ = writeln!(s, "best: {}", grid_line(b));
    }
    let _ = writeln!(
        s,
        "in use: compute_ns_per_page={KBUILD_COMPUTE_NS_PER_PAGE} headroom_mib={KBUILD_HEADROOM_MIB}"
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_recovers_a_line() {
        let f = least_squares(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]);

        assert!((f.intercept - 1.0).abs() < 1e-12);
        assert!((f.slope - 2.0).abs() < 1e-12);
        assert!(f.residuals.iter().all(|r| r.2.abs() < 1e-12));
    }

    #[test]
    fn trip_pair_cost_from_a_throughput_curve() {
        // 1000 ns per page plus 3000 ns per refill + drain pair, batch 50 → 500.
        let pps = |b: u32| 1e9 / (1000.0 + 3000.0 / f64::from(b));
        let c = trip_pair_ns(&[(50, pps(50)), (100, pps(100)), (500, pps(500))]);
        assert!((c - 3000.0).abs() < 1e-6, "{c}");
        assert!(trip_pair_ns(&[]).is_nan());
    }

    #[test]
    fn weighted_least_squares_recovers_coefficients() {
        let rows: Vec<([f64; 3], f64, f64)> = (0..6)
            .map(|i| {
                let (r, l) = (f64::from(i % 2), f64::from(i * 7 + 1));
                ([r, 1.0 - r, l], 100.0 * r + 40.0 * (1.0 - r) + 2.5 * l, 1.0)
            })
            .collect();
        let b = weighted_ls(&rows);
        assert!((b[0] - 100.0).abs() < 1e-9 && (b[1] - 40.0).abs() < 1e-9);
        assert!((b[2] - 2.5).abs() < 1e-9);
    }

    #[test]
    fn directions_flag_a_wrong_step() {
        let mk = |score: f64, lock: f64, fh: f64, az: f64| Row {
            score: Some(score),
            zone_lock_pct: Some(lock),
            free_high: Some(fh),
            alloc_zone: Some(az),
            ..Row::default()
        };
        // Published: base → patch1 lowers every column.
        let good = [mk(100.0, 43.0, 100.0, 100.0), mk(104.0, 40.0, 50.0, 95.0)];
        assert!(kbuild_directions(&good).iter().all(|d| d.agrees));
        let bad = [mk(100.0, 43.0, 100.0, 100.0), mk(104.0, 45.0, 50.0, 95.0)];
        let d = kbuild_directions(&bad);
        assert_eq!(d.iter().filter(|d| !d.agrees).count(), 1);
        assert_eq!(d[1].column, "zone lock %");
    }
}
