//! The kbuild table: the published ablation (spr-2s-224, base → patch10), the
//! simulator's rows beside it, and the direction of every step
//! (docs/sim-cost-model.md §4.2, §4.3).

use super::*;

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

#[cfg(test)]
mod tests {
    use super::*;

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
