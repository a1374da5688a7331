//! Statistics as the field publishes them: rows of several runs (`--runs N` on threads,
//! `--seeds N` in the simulator) with their mean, spread and samples, and the two
//! comparison tables mm engineers read.
//!
//! # Design
//! - One table of metrics, [`METRICS`]: the row field each reads, whether it is a rate
//!   (higher is better: the score) or a cost (lower is better: zone lock %, latencies,
//!   counters), and so which mean mmtests prints for it (Hmean for rates, Amean for the
//!   rest). [`merge`] and both tables read it; nothing else names the metrics.
//! - [`merge`] turns the rows of N runs of one config into one: each metric's field
//!   becomes the arithmetic mean of its samples, `extra["<metric>_stddev"]` the sample
//!   standard deviation (n − 1), [`Row::samples`] keeps the raw values (the JSON carries
//!   them), `extra["score_stddev_pct"]` is the score's stddev as % of its mean.
//! - [`lkp_table`]: 0-day/LKP's comparison, `base ±%stddev  %change  new ±%stddev
//!   metric`, each config after the first against it; `%change` = (new − base) / base
//!   of the means.
//! - [`mmtests_table`]: mmtests' `compare-mmtests` layout: per metric one line of its
//!   Hmean (rates) or Amean (costs) and one of its Stddev, each config with its gain
//!   against the first in brackets — `(  +5.30%)`, or `*  +5.30%*` when Welch's t-test
//!   finds the difference of the samples significant (two-sided p < [`ALPHA`]). As in
//!   mmtests, the gain is signed so that positive is better: (new − base) / base for a
//!   rate, (base − new) / base for a cost.
//! - [`welch`]: Welch's unequal-variance t-test; the t distribution's CDF is statrs'
//!   (`StudentsT`), not written here.
//!
//! # What it cannot see
//! Runs on real threads of a shared host are not independent samples of one
//! distribution (the host's load drifts between them); interleave configs (`compare`
//! runs them config by config, N each) and read the spread before the mark. Seeds in
//! the simulator are independent by construction, but the spread they show is the
//! workload's randomness, not a machine's noise.

use std::fmt::Write as _;

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::Row;

/// Significance level of the mmtests mark: a difference is marked when Welch's
/// two-sided p-value is below it (95 % confidence, as mmtests' default).
pub const ALPHA: f64 = 0.05;

/// Which mean of a metric's samples mmtests prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A rate, higher is better: the harmonic mean (mmtests' Hmean).
    Rate,
    /// A cost (a time, a share, a count), lower is better: the arithmetic mean (Amean).
    Cost,
}

/// One metric of a row.
#[derive(Debug)]
pub struct Metric {
    /// The row's field (its JSON key).
    pub key: &'static str,
    /// Rate or cost.
    pub kind: Kind,
    get: fn(&Row) -> Option<f64>,
    set: fn(&mut Row, f64),
}

impl Metric {
    /// The metric's value in `r`.
    pub fn get(&self, r: &Row) -> Option<f64> {
        (self.get)(r)
    }
}

macro_rules! metrics {
    ($($field:ident: $kind:ident),* $(,)?) => {
        /// The metrics a row of several runs keeps samples of, in table order.
        pub const METRICS: &[Metric] = &[$(Metric {
            key: stringify!($field),
            kind: Kind::$kind,
            get: |r| r.$field,
            set: |r, v| r.$field = Some(v),
        }),*];
    };
}

metrics! {
    score: Rate,
    zone_lock_pct: Cost,
    free_high: Cost,
    alloc_zone: Cost,
    cache_miss_pct: Cost,
    pcp_peak_pages: Cost,
    alloc_lat_avg_us: Cost,
    alloc_lat_p99_us: Cost,
    free_lat_avg_us: Cost,
    free_lat_p99_us: Cost,
}

/// Mean and spread of samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator; 0 for one sample).
    pub stddev: f64,
    /// Harmonic mean, where every sample is > 0.
    pub hmean: Option<f64>,
}

impl Summary {
    /// The summary of `samples`, or `None` if there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let n = samples.len();
        if n == 0 {
            return None;
        }
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let hmean = samples
            .iter()
            .all(|&x| x > 0.0)
            .then(|| n as f64 / samples.iter().map(|x| 1.0 / x).sum::<f64>());
        Some(Summary {
            n,
            mean,
            stddev: var.sqrt(),
            hmean,
        })
    }

    /// The standard deviation as % of the mean (0 for a zero mean).
    pub fn stddev_pct(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            100.0 * self.stddev / self.mean.abs()
        }
    }

    /// The mean mmtests prints for `kind`: Hmean for a rate (Amean where a sample is
    /// not positive), Amean for a cost; with its name.
    pub fn mean_for(&self, kind: Kind) -> (&'static str, f64) {
        match (kind, self.hmean) {
            (Kind::Rate, Some(h)) => ("Hmean", h),
            _ => ("Amean", self.mean),
        }
    }
}

/// Welch's t-test of two samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Welch {
    /// t statistic, (mean a − mean b) / sqrt(var a / n a + var b / n b).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

impl Welch {
    /// Whether the difference is significant at [`ALPHA`].
    pub fn significant(&self) -> bool {
        self.p < ALPHA
    }
}

/// Welch's t-test of `a` against `b`; `None` with fewer than 2 samples on a side.
/// Two samples without any spread differ significantly exactly when their means differ
/// (t = ±∞, p = 0; equal: t = 0, p = 1).
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (sa, sb) = (Summary::of(a)?, Summary::of(b)?);
    let va = sa.stddev.powi(2) / a.len() as f64;
    let vb = sb.stddev.powi(2) / b.len() as f64;
    let diff = sa.mean - sb.mean;
    if va + vb == 0.0 {
        let (t, p) = if diff == 0.0 {
            (0.0, 1.0)
        } else {
            (diff.signum() * f64::INFINITY, 0.0)
        };
        return Some(Welch {
            t,
            df: (a.len() + b.len() - 2) as f64,
            p,
        });
    }
    let t = diff / (va + vb).sqrt();
    let df =
        (va + vb).powi(2) / (va.powi(2) / (a.len() - 1) as f64 + vb.powi(2) / (b.len() - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = (2.0 * dist.sf(t.abs())).min(1.0);
    Some(Welch { t, df, p })
}

/// One row out of the rows of `runs` runs of one config (in run order): the run with the
/// median score stands for the rest (its other columns, its trace hash), each metric
/// of [`METRICS`] that every run has becomes its mean, with its stddev in
/// `extra["<metric>_stddev"]` and its values in [`Row::samples`]; `extra[count_key]` is
/// the number of runs (`runs`, or `seeds` in the simulator). The simulator's work
/// counters (`page_ops`, `run_cpu_s`) are summed over the runs.
///
/// # Panics
/// If `runs` is empty.
pub fn merge(mut runs: Vec<Row>, count_key: &str) -> Row {
    assert!(!runs.is_empty(), "merge of no runs");
    let n = runs.len();
    let mut samples = std::collections::BTreeMap::new();
    for m in METRICS {
        let v: Vec<f64> = runs.iter().filter_map(|r| m.get(r)).collect();
        if v.len() == n {
            samples.insert(m.key.to_owned(), v);
        }
    }
    let sums: Vec<(&str, f64)> = ["page_ops", "run_cpu_s"]
        .into_iter()
        .filter_map(|k| {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.extra.get(k).copied())
                .collect();
            (v.len() == n).then(|| (k, v.iter().sum()))
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        let s = |i: usize| runs[i].score.unwrap_or(0.0);
        s(a).total_cmp(&s(b))
    });
    let mut row = runs.swap_remove(order[n / 2]);
    for m in METRICS {
        if let Some(s) = samples.get(m.key).and_then(|v| Summary::of(v)) {
            (m.set)(&mut row, s.mean);
            row.extra.insert(format!("{}_stddev", m.key), s.stddev);
            if m.key == "score" {
                row.extra.insert("score_stddev_pct".into(), s.stddev_pct());
            }
        }
    }
    for (k, v) in sums {
        row.extra.insert(k.to_owned(), v);
    }
    row.extra.insert(count_key.to_owned(), n as f64);
    row.samples = samples;
    row
}

/// The name a table gives a row: its config (pagealloc), else its allocator.
fn label(r: &Row) -> String {
    r.config.clone().unwrap_or_else(|| r.alloc.clone())
}

/// A metric's samples in `r`: [`Row::samples`], or the one value of a single run.
fn samples_of(r: &Row, m: &Metric) -> Option<Vec<f64>> {
    match r.samples.get(m.key) {
        Some(v) => Some(v.clone()),
        None => r
            .extra
            .get(&format!("{}_raw", m.key))
            .copied()
            .or_else(|| m.get(r))
            .map(|v| vec![v]),
    }
}

/// A metric's summary and samples in each row of a table.
type PerRow = Vec<(Summary, Vec<f64>)>;

/// The metrics every row has samples of, with each row's summary and samples.
fn table_metrics(rows: &[Row]) -> Vec<(&'static Metric, PerRow)> {
    METRICS
        .iter()
        .filter_map(|m| {
            let per: Option<PerRow> = rows
                .iter()
                .map(|r| samples_of(r, m).and_then(|v| Some((Summary::of(&v)?, v))))
                .collect();
            per.map(|p| (m, p))
        })
        .collect()
}

/// The name of metric `m` in the LKP table: `workload.metric`, the score with its unit.
fn lkp_name(rows: &[Row], m: &Metric) -> String {
    let w = rows
        .first()
        .and_then(|r| r.workload.clone().or_else(|| r.bench.clone()))
        .unwrap_or_default();
    match (m.key, rows.first().and_then(|r| r.score_unit.as_deref())) {
        ("score", Some(u)) => format!("{w}.score ({u})"),
        (k, _) => format!("{w}.{k}"),
    }
}

/// A value in 10 characters at most: fixed point with the digits it deserves.
fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{v:.3e}")
    } else if a >= 1000.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `± x%`, or blanks for a single run (no spread measured).
fn pm(s: &Summary) -> String {
    if s.n > 1 {
        format!("±{:>3.0}%", s.stddev_pct())
    } else {
        "     ".into()
    }
}

/// 0-day/LKP's comparison table of `rows` (raw or normalised: the samples are raw),
/// each config after the first against it:
///
/// ```text
///       base          patch7
/// ---------------- ---------------------------
///          %stddev     %change         %stddev
///              \          |                \
///     226573 ±  2%      +2.4%     232107 ±  1%  page_fault1.score (pages/s)
/// ```
pub fn lkp_table(rows: &[Row]) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let _ = write!(out, "{:>16}", label(&rows[0]));
    for r in &rows[1..] {
        let _ = write!(out, " {:>27}", label(r));
    }
    out.push('\n');
    out.push_str("----------------");
    for _ in &rows[1..] {
        out.push_str(" ---------------------------");
    }
    out.push('\n');
    out.push_str("         %stddev");
    for _ in &rows[1..] {
        out.push_str("     %change         %stddev");
    }
    out.push('\n');
    out.push_str("             \\  ");
    for _ in &rows[1..] {
        out.push_str("        |                \\  ");
    }
    out.push('\n');
    for (m, per) in table_metrics(rows) {
        let (base, _) = &per[0];
        let _ = write!(out, "{:>10} {}", num(base.mean), pm(base));
        for (s, _) in &per[1..] {
            let change = if base.mean == 0.0 {
                "    n/a".to_owned()
            } else {
                format!("{:>+7.1}%", 100.0 * (s.mean - base.mean) / base.mean.abs())
            };
            let _ = write!(out, " {change:>11} {:>9} {}", num(s.mean), pm(s));
        }
        let _ = writeln!(out, "  {}", lkp_name(rows, m));
    }
    let n: Vec<String> = rows
        .iter()
        .map(|r| r.samples.values().next().map_or(1, Vec::len).to_string())
        .collect();
    let _ = writeln!(
        out,
        "means of {} samples per config; ± is the sample stddev as % of the mean; %change of the means against {}",
        n.join("/"),
        label(&rows[0])
    );
    out
}

/// mmtests' comparison table of `rows` (`compare-mmtests` layout), each config after
/// the first against it; the gain is positive for better, `*…*` marks a difference
/// Welch's t-test finds significant (p < [`ALPHA`]).
///
/// ```text
///                                 base               patch7
/// Hmean     score          226573.00 (   0.00%)   232107.00 *   2.44%*
/// Stddev    score            4531.00 (   0.00%)     2321.00 (  48.77%)
/// ```
pub fn mmtests_table(rows: &[Row]) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let width = rows
        .iter()
        .map(|r| label(r).len())
        .max()
        .unwrap_or(0)
        .max(22);
    let _ = write!(out, "{:26}", "");
    for r in rows {
        let _ = write!(out, " {:>width$}", label(r));
    }
    out.push('\n');
    let gain = |m: &Metric, base: f64, v: f64| -> f64 {
        if base == 0.0 {
            0.0
        } else {
            let d = 100.0 * (v - base) / base.abs();
            // `+ 0.0`: no "-0.00%" for a cost that did not move.
            if m.kind == Kind::Rate {
                d + 0.0
            } else {
                -d + 0.0
            }
        }
    };
    for (m, per) in table_metrics(rows) {
        let (mean_name, base_mean) = per[0].0.mean_for(m.kind);
        let _ = write!(out, "{mean_name:<9} {:<16}", m.key);
        for (i, (s, v)) in per.iter().enumerate() {
            let (_, mean) = s.mean_for(m.kind);
            let g = gain(m, base_mean, mean);
            let sig = i > 0 && welch(&per[0].1, v).is_some_and(|w| w.significant());
            let (l, r) = if sig { ('*', '*') } else { ('(', ')') };
            let cell = format!("{:.2} {l}{g:>7.2}%{r}", mean);
            let _ = write!(out, " {cell:>width$}");
        }
        out.push('\n');
        let _ = write!(out, "{:<9} {:<16}", "Stddev", m.key);
        let base_sd = per[0].0.stddev;
        for (s, _) in &per {
            // mmtests' Stddev line: the gain is the change of the spread, less is better.
            let g = if base_sd == 0.0 {
                0.0
            } else {
                100.0 * (base_sd - s.stddev) / base_sd
            };
            let cell = format!("{:.2} ({g:>7.2}%)", s.stddev);
            let _ = write!(out, " {cell:>width$}");
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Hmean for rates, Amean for costs; gain in brackets (positive = better) against {}; *…* = significant, Welch's t-test two-sided p < {ALPHA}",
        label(&rows[0])
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// The three examples of Welch's t-test in the textbook treatment (Wikipedia,
    /// "Welch's t-test", Examples: equal sizes and variances; unequal sizes and
    /// variances; unequal sizes, unequal variances): t, ν and the two-sided p as
    /// published (t to 2 decimals — −2.2255 is printed −2.22 —, ν to 1, p to 3 within
    /// a unit of the last place: 0.0355 is printed 0.036).
    #[test]
    fn welch_matches_the_textbook_examples() {
        // The last number: p to 6 places from the t density integrated numerically
        // (Simpson's rule, 200 000 steps), independently of statrs.
        type Case<'a> = (&'a [f64], &'a [f64], f64, f64, f64, f64);
        let cases: [Case<'_>; 3] = [
            (
                &[
                    27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0,
                    21.7, 21.4,
                ],
                &[
                    27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9,
                    20.5, 24.4,
                ],
                -2.46,
                25.0,
                0.021,
                0.021378,
            ),
            (
                &[17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8],
                &[
                    21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5,
                    22.5, 23.6, 21.5, 22.5, 23.5, 21.5, 21.8,
                ],
                -1.57,
                9.9,
                0.149,
                0.148842,
            ),
            (
                &[19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0],
                &[
                    28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7, 23.2, 17.5, 20.6,
                    18.0, 23.9, 21.6, 24.3, 20.4, 23.9, 13.3,
                ],
                -2.22,
                24.5,
                0.036,
                0.035485,
            ),
        ];
        for (a, b, t, df, p, p6) in cases {
            let w = welch(a, b).unwrap();
            assert!(close(w.t, t, 0.01), "{w:?} t {t}");
            assert!(close(w.df, df, 0.05), "{w:?} df {df}");
            assert!(close(w.p, p, 0.001), "{w:?} p {p}");
            assert!(close(w.p, p6, 0.000_001), "{w:?} p {p6}");
            let back = welch(b, a).unwrap();
            assert!(close(back.t, -w.t, 1e-12) && close(back.p, w.p, 1e-12));
        }
        // The t table: with equal samples' spreads the two-sided p at the 97.5 %
        // quantile of t(ν) is 0.05 (ν = 18: 2.101).
        let a: Vec<f64> = (0..10).map(f64::from).collect();
        let sd = Summary::of(&a).unwrap().stddev;
        let shift = 2.101 * (2.0 * sd * sd / 10.0).sqrt();
        let b: Vec<f64> = a.iter().map(|x| x + shift).collect();
        let w = welch(&a, &b).unwrap();
        assert!(close(w.df, 18.0, 1e-9) && close(w.p, 0.05, 0.0005), "{w:?}");
    }

    #[test]
    fn welch_edges() {
        assert_eq!(welch(&[1.0], &[1.0, 2.0]), None);
        let same = welch(&[3.0, 3.0], &[3.0, 3.0, 3.0]).unwrap();
        assert_eq!((same.t, same.p), (0.0, 1.0));
        let apart = welch(&[3.0, 3.0], &[4.0, 4.0]).unwrap();
        assert!(apart.significant() && apart.t == f64::NEG_INFINITY);
    }

    #[test]
    fn summary_of_known_samples() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample variance 32/7, hmean 8 / Σ 1/x.
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.mean, 5.0);
        assert!(close(s.stddev, (32.0f64 / 7.0).sqrt(), 1e-12));
        let h = 8.0 / (0.5 + 0.75 + 0.4 + 1.0 / 7.0 + 1.0 / 9.0);
        assert!(close(s.hmean.unwrap(), h, 1e-12));
        assert_eq!(s.mean_for(Kind::Rate).0, "Hmean");
        assert_eq!(s.mean_for(Kind::Cost), ("Amean", 5.0));
        assert_eq!(
            Summary::of(&[0.0, 1.0]).unwrap().mean_for(Kind::Rate).0,
            "Amean"
        );
        assert_eq!(Summary::of(&[]), None);
    }

    fn run(config: &str, score: f64, lock: f64) -> Row {
        Row {
            workload: Some("page_fault1".into()),
            alloc: "pagealloc".into(),
            config: Some(config.into()),
            score: Some(score),
            score_unit: Some("pages/s".into()),
            zone_lock_pct: Some(lock),
            ..Row::default()
        }
    }

    fn merged(config: &str, scores: &[f64], locks: &[f64]) -> Row {
        let runs = scores
            .iter()
            .zip(locks)
            .map(|(&s, &l)| run(config, s, l))
            .collect();
        merge(runs, "runs")
    }

    #[test]
    fn merge_keeps_every_sample_and_the_mean() {
        let r = merged("base", &[100.0, 110.0, 90.0, 104.0, 96.0], &[5.0; 5]);
        assert_eq!(r.samples["score"], [100.0, 110.0, 90.0, 104.0, 96.0]);
        assert_eq!(r.samples["zone_lock_pct"].len(), 5);
        assert_eq!(r.score, Some(100.0));
        assert_eq!(r.extra["runs"], 5.0);
        let sd = Summary::of(&r.samples["score"]).unwrap().stddev;
        assert_eq!(r.extra["score_stddev"], sd);
        assert!(close(r.extra["score_stddev_pct"], sd, 1e-12));
        // A metric some run lacks keeps no samples.
        let mut runs = vec![run("base", 1.0, 1.0), run("base", 2.0, 1.0)];
        runs[1].zone_lock_pct = None;
        assert!(!merge(runs, "runs").samples.contains_key("zone_lock_pct"));
        // The JSON carries the samples.
        let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(j["samples"]["score"].as_array().unwrap().len(), 5);
    }

    fn two() -> Vec<Row> {
        vec![
            merged("base", &[100.0, 101.0, 99.0], &[10.0, 10.5, 9.5]),
            merged("linux-6.12", &[120.0, 121.0, 119.0], &[10.1, 9.4, 10.6]),
        ]
    }

    #[test]
    fn lkp_layout() {
        let t = lkp_table(&two());
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].ends_with("linux-6.12") && lines[0].contains("base"),
            "{t}"
        );
        assert_eq!(lines[1], "---------------- ---------------------------");
        assert_eq!(lines[2], "         %stddev     %change         %stddev");
        assert_eq!(lines[3], "             \\          |                \\  ");
        let score = lines[4];
        assert!(score.ends_with("page_fault1.score (pages/s)"), "{t}");
        assert!(
            score.contains("+20.0%") && score.contains("±  1%"),
            "{score}"
        );
        // The columns line up under the header's marks.
        assert_eq!(score.find("±"), lines[3].find('\\').map(|i| i - 2));
        assert!(lines[5].ends_with("page_fault1.zone_lock_pct") && lines[5].contains("+0.3%"));
        assert!(t.contains("means of 3/3 samples"), "{t}");
    }

    #[test]
    fn mmtests_layout_and_marks() {
        let t = mmtests_table(&two());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].trim_start().starts_with("base"), "{t}");
        let score = lines[1];
        assert!(score.starts_with("Hmean     score "), "{t}");
        assert!(
            score.contains("(   0.00%)") && score.contains("*  20.00%*"),
            "{score}"
        );
        assert!(lines[2].starts_with("Stddev    score "), "{t}");
        // The zone lock moved by 0.1 with a spread of 0.6: no mark, and a cost's gain
        // is positive when it falls.
        let lock = lines[3];
        assert!(lock.starts_with("Amean     zone_lock_pct"), "{lock}");
        assert!(lock.contains("(  -0.33%)") && !lock.contains('*'), "{lock}");
        // One run each: no test, no mark.
        let one = vec![run("base", 100.0, 1.0), run("fast", 200.0, 1.0)];
        assert!(!mmtests_table(&one).lines().nth(1).unwrap().contains('*'));
    }
}
