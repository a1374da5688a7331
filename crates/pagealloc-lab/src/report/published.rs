//! Our rows beside the published tables they reproduce: Markdown tables with the
//! published column and the difference next to each of ours, and the one-line verdicts
//! (directions, magnitudes) the report's summary collects.
//!
//! The figures are [`PUBLISHED_KBUILD`] and [`PUBLISHED_SWEEP`]; where they come from
//! (paper or mail, machine, date) is `crates/pagealloc-lab/docs/published.md`, whose
//! tables a test holds equal to the constants.

use std::fmt::Write as _;

use crate::sim::calibrate::{KbuildRow, SweepRow, FLAT, PUBLISHED_KBUILD, PUBLISHED_SWEEP};
use crate::Row;

/// Where the kbuild table comes from, in one line.
pub const KBUILD_SOURCE: &str = "Huang Ying, \"[PATCH -V3 0/9] mm: PCP high auto-tuning\" \
    and its patches 1/9–9/9 (linux-mm, 16 Oct 2023): kbuild, `make -j112` on one socket of \
    a 2-socket 224-CPU Sapphire Rapids server, rows cumulative, base = v6.6-rc = 100 \
    (crates/pagealloc-lab/docs/published.md §1)";

/// Where the batch sweep comes from, in one line.
pub const SWEEP_SOURCE: &str = "Huang Ying, \"mm: restrict the pcp batch scale factor to \
    avoid too long latency\" (commit 52166607ecc9, linux-mm, Oct 2023): will-it-scale \
    page_fault1 per task, high = 2 × batch, zone-lock code timed with ftrace's \
    function_graph, on a 2-socket Sapphire Rapids (224 CPUs) and a 2-socket Ice Lake \
    (128 CPUs) (crates/pagealloc-lab/docs/published.md §2)";

/// The preset a row's config starts with (`"patch7,tick_interval_ms=100"` → `patch7`).
fn preset(r: &Row) -> &str {
    r.config
        .as_deref()
        .map_or("", |c| c.split(',').next().unwrap_or(c))
}

/// The published kbuild row of a preset (`patch10` is the published 6.7 row).
pub fn kbuild_row(preset: &str) -> Option<&'static KbuildRow> {
    PUBLISHED_KBUILD.iter().find(|p| p.config == preset)
}

/// Our four kbuild columns of a normalised row: build time (100 × makespan / base
/// makespan = 10⁴ / normalised score), zone lock %, free_high and alloc_zone (base = 100).
fn kbuild_ours(r: &Row) -> [f64; 4] {
    [
        r.score.map_or(f64::NAN, |s| 1e4 / s),
        r.zone_lock_pct.unwrap_or(f64::NAN),
        r.free_high.unwrap_or(f64::NAN),
        r.alloc_zone.unwrap_or(f64::NAN),
    ]
}

fn kbuild_pub(p: &KbuildRow) -> [f64; 4] {
    [p.build_time, p.zone_lock_pct, p.free_high, p.alloc_zone]
}

/// The kbuild columns' names.
pub const KBUILD_COLUMNS: [&str; 4] = ["build time", "zone lock %", "free_high", "alloc_zone"];

/// `ours` against `published` as a relative difference, `+12 %`.
fn rel(ours: f64, published: f64) -> String {
    if !ours.is_finite() || published == 0.0 {
        return "–".into();
    }
    format!("{:+.0} %", 100.0 * (ours - published) / published)
}

/// `v` with `dec` decimals (thousands grouped from 10 000 on), "–" when not finite.
fn num(v: f64, dec: usize) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v.abs() >= 1e4 {
        super::fmt_num(v.round())
    } else {
        format!("{v:.dec$}")
    }
}

/// A Markdown table of normalised kbuild rows (any presets, any order) beside the
/// published table: per column ours, published and the relative difference; a preset
/// the table does not have (linux-6.12) gets "–".
pub fn kbuild_markdown(rows: &[Row]) -> String {
    let mut s = String::from("| config |");
    for c in KBUILD_COLUMNS {
        let _ = write!(s, " {c} ours | published | diff |");
    }
    s.push_str("\n|---|");
    s.push_str(&"---:|".repeat(3 * KBUILD_COLUMNS.len()));
    s.push('\n');
    for r in rows {
        let p = kbuild_row(preset(r));
        let _ = write!(s, "| {} |", preset(r));
        for (i, ours) in kbuild_ours(r).into_iter().enumerate() {
            let (publ, d) = p.map_or(("–".into(), "–".into()), |p| {
                let v = kbuild_pub(p)[i];
                (num(v, 1), rel(ours, v))
            });
            let _ = write!(s, " {} | {publ} | {d} |", num(ours, 1));
        }
        s.push('\n');
    }
    s
}

/// How close a set of normalised kbuild rows is to the published table.
#[derive(Clone, Debug, PartialEq)]
pub struct KbuildCloseness {
    /// Steps between consecutive published presets among the rows, × 4 columns.
    pub steps: usize,
    /// Of them, those that move in the published direction (or where the published
    /// change is flat, within [`FLAT`] of base).
    pub agree: usize,
    /// Per column: the smallest and largest relative difference over the rows, %.
    pub range_pct: [(f64, f64); 4],
}

/// The closeness of `rows` (normalised, base first) to the published kbuild table: the
/// rows whose preset it has, taken in their order.
pub fn kbuild_closeness(rows: &[Row]) -> KbuildCloseness {
    let matched: Vec<([f64; 4], [f64; 4])> = rows
        .iter()
        .filter_map(|r| kbuild_row(preset(r)).map(|p| (kbuild_ours(r), kbuild_pub(p))))
        .collect();
    let base = kbuild_pub(&PUBLISHED_KBUILD[0]);
    let (mut steps, mut agree) = (0, 0);
    for w in matched.windows(2) {
        for (k, b) in base.iter().enumerate() {
            let ours = w[1].0[k] - w[0].0[k];
            let publ = w[1].1[k] - w[0].1[k];
            steps += 1;
            if publ.abs() <= FLAT * b || (ours != 0.0 && ours.signum() == publ.signum()) {
                agree += 1;
            }
        }
    }
    let mut range_pct = [(f64::INFINITY, f64::NEG_INFINITY); 4];
    for (ours, publ) in &matched {
        for k in 0..4 {
            if ours[k].is_finite() && publ[k] != 0.0 {
                let d = 100.0 * (ours[k] - publ[k]) / publ[k];
                range_pct[k].0 = range_pct[k].0.min(d);
                range_pct[k].1 = range_pct[k].1.max(d);
            }
        }
    }
    KbuildCloseness {
        steps,
        agree,
        range_pct,
    }
}

impl KbuildCloseness {
    /// One line: directions, then each column's range of differences.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} of {} steps move in the published direction",
            self.agree, self.steps
        );
        for (k, (lo, hi)) in self.range_pct.iter().enumerate() {
            if lo.is_finite() {
                let _ = write!(s, "; {} {lo:+.0} … {hi:+.0} %", KBUILD_COLUMNS[k]);
            }
        }
        s
    }
}

/// The published sweep point of `machine` at `batch`.
pub fn sweep_row(machine: &str, batch: u32) -> Option<&'static SweepRow> {
    PUBLISHED_SWEEP
        .iter()
        .find(|p| p.machine == machine && p.batch == batch)
}

/// The sweep's columns: (name, ours from a row, published).
type SweepCol = (&'static str, fn(&Row) -> Option<f64>, fn(&SweepRow) -> f64);

const SWEEP_COLS: [SweepCol; 4] = [
    ("free avg µs", |r| r.free_lat_avg_us, |p| p.free_avg_us),
    ("free p99 µs", |r| r.free_lat_p99_us, |p| p.free_p99_us),
    ("alloc avg µs", |r| r.alloc_lat_avg_us, |p| p.alloc_avg_us),
    ("alloc p99 µs", |r| r.alloc_lat_p99_us, |p| p.alloc_p99_us),
];

fn batch_of(r: &Row) -> u32 {
    r.extra.get("batch").copied().unwrap_or(0.0) as u32
}

/// A Markdown table of batch-sweep rows beside the published sweep of `against` (the
/// row's own machine when `None`): pages/s per CPU (simulator rows only) and the four
/// trip latencies, each with the published figure and the relative difference.
pub fn sweep_markdown(rows: &[Row], against: Option<&str>) -> String {
    let per_cpu = rows
        .iter()
        .any(|r| r.extra.contains_key("pages_per_s_per_cpu"));
    let mut s = String::from("| machine | batch |");
    if per_cpu {
        s.push_str(" pages/s per CPU | published | diff |");
    }
    for (n, _, _) in SWEEP_COLS {
        let _ = write!(s, " {n} | published | diff |");
    }
    s.push_str("\n|---|---:|");
    s.push_str(&"---:|".repeat(3 * (SWEEP_COLS.len() + usize::from(per_cpu))));
    s.push('\n');
    for r in rows {
        let m = against.unwrap_or_else(|| r.machine.as_deref().unwrap_or("-"));
        let p = sweep_row(m, batch_of(r));
        let _ = write!(
            s,
            "| {} | {} |",
            r.machine.as_deref().unwrap_or("-"),
            batch_of(r)
        );
        let mut cell = |ours: Option<f64>, publ: Option<f64>| {
            let o = ours.unwrap_or(f64::NAN);
            let _ = write!(
                s,
                " {} | {} | {} |",
                num(o, 2),
                publ.map_or("–".into(), |v| num(v, 2)),
                publ.map_or("–".into(), |v| rel(o, v))
            );
        };
        if per_cpu {
            cell(
                r.extra.get("pages_per_s_per_cpu").copied(),
                p.map(|p| p.pages_per_s),
            );
        }
        for (_, ours, publ) in SWEEP_COLS {
            cell(ours(r), p.map(publ));
        }
        s.push('\n');
    }
    s
}

/// How close batch-sweep rows are to the published sweep (of `against`, or each row's
/// machine): per column the range of relative differences, %, over the points the
/// published sweep has; and whether each column grows with the batch as the published
/// one does (every step up).
pub fn sweep_line(rows: &[Row], against: Option<&str>) -> String {
    let mut cols: Vec<SweepCol> = Vec::new();
    if rows
        .iter()
        .any(|r| r.extra.contains_key("pages_per_s_per_cpu"))
    {
        cols.push((
            "pages/s per CPU",
            |r| r.extra.get("pages_per_s_per_cpu").copied(),
            |p| p.pages_per_s,
        ));
    }
    cols.extend(SWEEP_COLS);
    let mut parts = Vec::new();
    let (mut ups, mut steps) = (0, 0);
    for (name, ours, publ) in cols {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        let mut prev: Option<(String, f64)> = None;
        for r in rows {
            let m = against.unwrap_or_else(|| r.machine.as_deref().unwrap_or("-"));
            let (Some(p), Some(o)) = (sweep_row(m, batch_of(r)), ours(r)) else {
                continue;
            };
            let d = 100.0 * (o - publ(p)) / publ(p);
            lo = lo.min(d);
            hi = hi.max(d);
            let key = r.machine.clone().unwrap_or_default();
            if name.contains("µs") {
                if let Some((pm, pv)) = &prev {
                    if *pm == key {
                        steps += 1;
                        ups += usize::from(o > *pv);
                    }
                }
            }
            prev = Some((key, o));
        }
        if lo.is_finite() {
            parts.push(format!("{name} {lo:+.0} … {hi:+.0} %"));
        }
    }
    format!(
        "latencies grow with the batch as published in {ups} of {steps} steps; {}",
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kb(config: &str, score: f64, lock: f64, fh: f64, az: f64) -> Row {
        Row {
            alloc: "pagealloc".into(),
            config: Some(config.into()),
            score: Some(score),
            zone_lock_pct: Some(lock),
            free_high: Some(fh),
            alloc_zone: Some(az),
            ..Row::default()
        }
    }

    #[test]
    fn kbuild_rows_meet_their_published_rows_by_preset() {
        // The published rows themselves: every step agrees, every difference is 0.
        let rows: Vec<Row> = PUBLISHED_KBUILD
            .iter()
            .map(|p| {
                kb(
                    p.config,
                    1e4 / p.build_time,
                    p.zone_lock_pct,
                    p.free_high,
                    p.alloc_zone,
                )
            })
            .collect();
        let c = kbuild_closeness(&rows);
        assert_eq!((c.agree, c.steps), (24, 24));
        for (lo, hi) in c.range_pct {
            assert!(lo.abs() < 1e-9 && hi.abs() < 1e-9);
        }
        // A subset with a preset the table lacks: linux-6.12 is left out of the steps.
        let sub = vec![
            kb("base", 100.0, 40.0, 100.0, 100.0),
            kb("patch7,tick_interval_ms=100", 125.0, 10.0, 200.0, 20.0),
            kb("linux-6.12", 120.0, 5.0, 1.0, 1.0),
        ];
        let c = kbuild_closeness(&sub);
        // base → patch7: build time down, lock down, free_high up (published down),
        // alloc_zone down.
        assert_eq!((c.agree, c.steps), (3, 4));
        assert_eq!(c.range_pct[2], (0.0, 100.0 * (200.0 - 6.2) / 6.2));
        let md = kbuild_markdown(&sub);
        assert!(md.contains("| patch7 | 80.0 | 86.4 | -7 % |"), "{md}");
        assert!(md.contains("| linux-6.12 | 83.3 | – | – |"), "{md}");
    }

    #[test]
    fn sweep_rows_meet_the_published_point_of_their_machine() {
        let mut r = Row {
            machine: Some("spr-2s-224".into()),
            free_lat_avg_us: Some(4.66),
            free_lat_p99_us: Some(3.57),
            alloc_lat_avg_us: Some(2.67),
            alloc_lat_p99_us: Some(6.83),
            ..Row::default()
        };
        r.extra.insert("batch".into(), 63.0);
        let md = sweep_markdown(&[r.clone()], None);
        assert!(md.contains("| 4.66 | 2.33 | +100 % |"), "{md}");
        let line = sweep_line(&[r.clone()], None);
        assert!(line.contains("free avg µs +100 … +100 %"), "{line}");
        // A host row compared with a named machine.
        r.machine = Some("host".into());
        assert!(sweep_markdown(&[r], Some("spr-2s-224")).contains("| host | 63 |"));
    }

    #[test]
    fn the_published_doc_holds_the_constants() {
        let doc = include_str!("../../docs/published.md");
        for p in PUBLISHED_KBUILD {
            let line = format!(
                "| {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                p.config, p.build_time, p.zone_lock_pct, p.free_high, p.alloc_zone
            );
            assert!(doc.contains(&line), "missing {line}");
        }
        for p in PUBLISHED_SWEEP {
            let line = format!(
                "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
                p.machine,
                p.batch,
                p.pages_per_s,
                p.free_avg_us,
                p.free_p99_us,
                p.alloc_avg_us,
                p.alloc_p99_us
            );
            assert!(doc.contains(&line), "missing {line}");
        }
    }
}
