//! Calibration: the published figures, the fit of the cost model's free parameters, and
//! the tables that put the simulator beside the published numbers.
//!
//! # Design
//! Two published data sets (docs/sim-cost-model.md §4):
//! 1. The **batch sweep** (page_fault1 with high = 2 × batch, no free scaling) gives the
//!    time of one zone-lock trip as a function of the pages it moves, for Sapphire
//!    Rapids and Ice Lake, timed with function_graph. The simulator charges a trip the
//!    latencies of the allocator lines it touches (through the cache hierarchy) and a
//!    fixed cost per trip measured on the live kernel ([`live`]);
//!    [`fit_trip_residuals`] fits what is left — an instruction cost per line and the
//!    tracer's own cost in each timed window — and [`refit`] prints them with every
//!    point's residual.
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

mod kbuild;
pub mod live;
mod sweep;

pub use kbuild::*;
pub use sweep::*;

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

/// Refits the free parameters: the per-line cost and the tracer's in-window cost from
/// the batch sweep of both calibration machines ([`fit_trip_residuals`]), then kbuild's compute per page and the
/// free memory at the start over a grid, each point a kbuild ablation with `tasks`
/// tasks on spr-2s-224 (the full table uses 896; 224 keeps the fit to a few minutes),
/// once per seed, with SPR's refitted per-line cost. The best point has the most steps in
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
        fgraph_ns: fit.fgraph_ns,
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
        "batch sweep: zone-lock hold = hand-off + the lines on the core's fill buffers (cache hierarchy, overlapped misses) + the trip's fixed cost (measured on the live kernel) + line cost × lines; published latency = hold + function_graph's in-window cost (ns)"
    );
    for t in &r.trips {
        let m = Machine::by_name(t.machine).expect("known machine");
        let _ = writeln!(
            s,
            "  {:<10} measured: refill_trip_ns {:.1}, drain_trip_ns {:.1}; fitted: locked_line_ns {:.2}, fgraph_ns {:.1}   (in use: {:.2}, {:.1})",
            t.machine,
            t.refill_trip_ns,
            t.drain_trip_ns,
            t.locked_line_ns,
            t.fgraph_ns,
            m.cost.locked_line_ns,
            m.cost.fgraph_ns
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
            "      (each latency includes function_graph's in-window cost, fgraph_ns {:.0} ns per trip; the sweep's CPUs pay it outside the lock, other workloads never)",
            t.fgraph_ns
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
