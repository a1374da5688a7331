//! The batch sweep: the published zone-lock trip latencies (commit 52166607ecc9) and the
//! fit of the cost model's per-line cost and of the tracer's in-window cost to them,
//! with the trips' fixed costs measured on the live kernel (docs/sim-cost-model.md
//! §4.1, §4.4).

use super::*;

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

/// The batch sweep's fit of one machine: a trip's hold in the simulator is its
/// hand-off, the latencies of the allocator lines it touches (the cache hierarchy's),
/// `locked_line_ns` per line and the trip's fixed cost measured on the live kernel
/// (`refill_trip_ns`, `drain_trip_ns`, not fitted: [`super::live`]); the published
/// latencies add function_graph's own cost inside each timed window, `fgraph_ns`,
/// fitted here. ns.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TripFit {
    /// Machine name.
    pub machine: &'static str,
    /// Fixed cost per refill trip (`CostModel::refill_trip_ns`), measured, as used.
    pub refill_trip_ns: f64,
    /// Fixed cost per drain trip (`CostModel::drain_trip_ns`), measured, as used.
    pub drain_trip_ns: f64,
    /// Instructions per line under the lock (`CostModel::locked_line_ns`), fitted.
    pub locked_line_ns: f64,
    /// function_graph's cost inside each timed window (`CostModel::fgraph_ns`), fitted.
    pub fgraph_ns: f64,
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

/// Fits `machine`'s batch sweep: the sweep runs in the simulator twice with the trips'
/// fixed costs and the tracer at zero and the per-line cost at 0 and 1 ns, which gives
/// each point's line time `A` (the hierarchy's latencies, overlapped as
/// `sim/overlap.rs` schedules them) and lines per trip `L`; then published ≈
/// `fgraph_ns` + trip + A + line × L, with `trip` the machine's measured fixed cost of
/// that direction (`CostModel::refill_trip_ns`, `drain_trip_ns`), by least squares on
/// the relative error for `fgraph_ns` (the tracer's in-window cost, one for both
/// directions: the same tracer times both functions) and the per-line cost, neither
/// negative (a coefficient that would be is fixed at zero). A third run with the fitted
/// values gives the throughput column beside the published one
/// ([`TripFit::throughput`]), which the fit does not use.
///
/// # Errors
/// A failed run.
pub fn fit_trip_residuals(machine: &Machine, seed: u64) -> Result<TripFit, SimError> {
    let run_with = |trips: bool, line_ns: f64, fgraph: f64| -> Result<Vec<Row>, SimError> {
        let mut o = SimOptions::new(machine.clone(), Config::default());
        o.seed = seed;
        o.cpus = Some(1);
        let t = if trips { 1.0 } else { 0.0 };
        o.cost = Some(CostModel {
            refill_trip_ns: machine.cost.refill_trip_ns * t,
            drain_trip_ns: machine.cost.drain_trip_ns * t,
            locked_line_ns: line_ns,
            fgraph_ns: fgraph,
            ..machine.cost
        });
        batch_sweep(
            machine,
            &[("loops".to_owned(), "2".to_owned())],
            &o,
            &|_| {},
        )
    };
    let (r0, r1) = (run_with(false, 0.0, 0.0)?, run_with(false, 1.0, 0.0)?);
    let trip_of = |dir: &str| {
        if dir == "refill" {
            machine.cost.refill_trip_ns
        } else {
            machine.cost.drain_trip_ns
        }
    };
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
            // With no trip cost, no tracer and no per-line cost, a latency is the
            // lines' own time.
            let a = l0 * 1000.0;
            let lines = (l1 - l0) * 1000.0;
            pts.push((dir, p.batch, publ * 1000.0, lines, a));
        }
    }
    // Non-negative least squares by elimination: a coefficient that comes out negative
    // is fixed at zero and the other refitted.
    let mut free = [true; 2];
    let mut b = [0.0; 2];
    for _ in 0..2 {
        let rows: Vec<([f64; 2], f64, f64)> = pts
            .iter()
            .map(|&(dir, _, publ, lines, a)| {
                let x = [1.0, lines];
                let x = std::array::from_fn(|k| if free[k] { x[k] } else { 0.0 });
                (x, publ - trip_of(dir) - a, 1.0 / (publ * publ))
            })
            .collect();
        b = weighted_ls(&rows);
        match (0..2).find(|&k| free[k] && b[k] < 0.0) {
            Some(k) => free[k] = false,
            None => break,
        }
    }
    for k in 0..2 {
        if !free[k] {
            b[k] = 0.0;
        }
    }
    let [fgraph, line] = b;
    let points = pts
        .iter()
        .map(|&(dir, batch, publ, lines, a)| {
            (
                dir,
                batch,
                publ,
                lines,
                a,
                fgraph + trip_of(dir) + a + line * lines,
            )
        })
        .collect();
    let fitted = run_with(true, line, fgraph)?;
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
        refill_trip_ns: machine.cost.refill_trip_ns,
        drain_trip_ns: machine.cost.drain_trip_ns,
        locked_line_ns: line,
        fgraph_ns: fgraph,
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
}
