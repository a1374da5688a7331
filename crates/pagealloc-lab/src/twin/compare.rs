//! The comparison: what the kernel did beside what pagealloc did, line by line, each
//! with a stated tolerance and a verdict.
//!
//! # Lines
//! - sizing, per zone: the min/low/high watermarks (boost left out), `batch`,
//!   `high_min`, `high_max` — exact;
//! - per CPU of the run:
//!   - growth: the time and the pages the CPU's worker had allocated when `high` first
//!     reached `high_max` (±10 %), or the peak `high` when it never did (±10 %);
//!   - the range of `count` during the run (±10 % of the larger, at least 2 batches);
//!   - the settled `high`: the median over the last quarter of the run (±10 %);
//!   - idle decay: the number of decay steps back to `high_min` (±1), the steps the
//!     kernel took that `decay_pcp_high` predicts exactly from the state sampled just
//!     before each (≥ 90 %; the count the tick saw may be anywhere between the two
//!     samples around it, which matters when the `count - (batch << SCALE)` term binds
//!     on a CPU that is not really idle), and the seconds back to `high_min`. The kernel's decay
//!     runs from a deferrable timer, which fires late on an idle CPU, so seconds get a
//!     wide tolerance (±2 s or ±25 %) and steps are the stricter check.

use pagealloc::tune::{decay, PcpState, Tune};
use pagealloc::Config;
use serde::Serialize;

use super::model::ZoneSizing;
use super::{Sample, Trajectory};
use pagealloc::os::zoneinfo::KernelZoneinfo;

/// The outcome of one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within tolerance.
    Agree,
    /// Outside it.
    Differ,
    /// Nothing to compare (e.g. no idle time sampled).
    NotApplicable,
}

impl Verdict {
    /// Short text for the table.
    pub const fn label(self) -> &'static str {
        match self {
            Verdict::Agree => "ok",
            Verdict::Differ => "DIFFERS",
            Verdict::NotApplicable => "n/a",
        }
    }
    fn of(ok: bool) -> Verdict {
        if ok {
            Verdict::Agree
        } else {
            Verdict::Differ
        }
    }
}

/// One line of the side-by-side comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Line {
    /// `sizing` or `CPU n`.
    pub group: String,
    /// What is compared.
    pub what: String,
    /// The kernel's value.
    pub kernel: String,
    /// pagealloc's value.
    pub ours: String,
    /// The tolerance, in words.
    pub tolerance: String,
    /// The verdict.
    pub verdict: Verdict,
}

fn line(group: &str, what: &str, kernel: String, ours: String, tol: &str, v: Verdict) -> Line {
    Line {
        group: group.to_owned(),
        what: what.to_owned(),
        kernel,
        ours,
        tolerance: tol.to_owned(),
        verdict: v,
    }
}

/// `|a - b| <= max(rel * max(|a|, |b|), abs)`.
pub fn within(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= (rel * a.abs().max(b.abs())).max(abs)
}

/// Both values of a pair (a range, or `high` and `count`) [`within`] ±10 % or ±2
/// batches of the other side's.
fn both_within(a: (i64, i64), b: (i64, i64), batch: f64) -> bool {
    within(a.0 as f64, b.0 as f64, 0.10, 2.0 * batch)
        && within(a.1 as f64, b.1 as f64, 0.10, 2.0 * batch)
}

fn distinct(v: impl Iterator<Item = i64>) -> String {
    let mut v: Vec<i64> = v.collect();
    v.sort_unstable();
    v.dedup();
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("/")
}

type GetOurs = fn(&(usize, i64, i64, i64)) -> i64;
type GetKernel = fn(&pagealloc::os::zoneinfo::KernelPageset) -> i64;

/// The sizing lines: every populated zone of the kernel against pagealloc's zone of
/// the same node and name.
pub fn sizing(k: &KernelZoneinfo, ours: &[ZoneSizing]) -> Vec<Line> {
    let mut out = Vec::new();
    for kz in k.populated() {
        let g = format!("node {} {}", kz.node, kz.name);
        let Some(oz) = ours.iter().find(|o| o.node == kz.node && o.name == kz.name) else {
            out.push(line(
                &g,
                "zone",
                "present".into(),
                "missing".into(),
                "exact",
                Verdict::Differ,
            ));
            continue;
        };
        let kw = [kz.min, kz.low, kz.high].map(|w| w.saturating_sub(kz.boost));
        for (i, name) in ["min watermark", "low watermark", "high watermark"]
            .iter()
            .enumerate()
        {
            out.push(line(
                &g,
                name,
                kw[i].to_string(),
                oz.wmark[i].to_string(),
                "exact",
                Verdict::of(kw[i] == oz.wmark[i]),
            ));
        }
        let ours_of = |c: usize| oz.pcp.iter().find(|p| p.0 == c);
        let fields: [(&str, GetOurs, GetKernel); 3] = [
            ("batch", |p| p.1, |k| k.batch),
            ("high_min", |p| p.2, |k| k.high_min.unwrap_or(-1)),
            ("high_max", |p| p.3, |k| k.high_max.unwrap_or(-1)),
        ];
        let wmarks_agree = kw == oz.wmark;
        for (name, get_o, get_k) in fields {
            let ok = kz
                .pagesets
                .iter()
                .all(|p| ours_of(p.cpu).is_some_and(|o| get_o(o) == get_k(p)));
            let mut ours_text =
                distinct(kz.pagesets.iter().filter_map(|p| ours_of(p.cpu)).map(get_o));
            let mut verdict = Verdict::of(ok);
            if !ok && name == "high_min" && wmarks_agree {
                let cpus: Option<Vec<(i64, i64, i64)>> = kz
                    .pagesets
                    .iter()
                    .map(|p| ours_of(p.cpu).map(|o| (o.1, o.2, get_k(p))))
                    .collect();
                let boost = cpus
                    .and_then(|c| boost_at_sizing(oz.wmark[1], oz.wmark[2], oz.boost_factor, &c));
                if let Some(b) = boost {
                    let at: Vec<i64> = kz
                        .pagesets
                        .iter()
                        .filter_map(|p| ours_of(p.cpu))
                        .map(|o| highsize_at(oz.wmark[1], b, o.1, o.2).unwrap_or(o.2))
                        .collect();
                    ours_text = format!(
                        "{} (sized at a watermark boost of {b} pages; {ours_text} at none)",
                        distinct(at.into_iter())
                    );
                    verdict = Verdict::Agree;
                }
            }
            out.push(line(
                &g,
                name,
                distinct(kz.pagesets.iter().map(get_k)),
                ours_text,
                "exact, every CPU",
                verdict,
            ));
        }
    }
    out
}

/// `high_min` of a pageset whose `high_min` at no boost is `h0` (batch `batch`) had
/// its zone been sized while the watermark boost was `boost`: `zone_highsize` divides
/// the low watermark *with* the boost (`low_wmark_pages`) by the node's CPUs, found
/// from `h0` (`None` when `h0` is the 4-batch floor or no CPU count gives it).
fn highsize_at(low: u64, boost: u64, batch: i64, h0: i64) -> Option<i64> {
    let floor = batch.saturating_mul(4);
    if h0 <= floor || h0 <= 0 {
        return None;
    }
    let h = h0 as u64;
    // low / n == h  <=>  low / (h + 1) < n <= low / h
    let n = low / (h + 1) + 1;
    if n == 0 || low / n != h {
        return None;
    }
    Some((((low + boost) / n).min(i64::MAX as u64) as i64).max(floor))
}

/// The watermark boost at the kernel's last pageset sizing that makes pagealloc's
/// `high_min` the kernel's on every CPU, if one does. `high_min` is `zone_highsize`
/// of the low watermark with the boost of that moment (`low_wmark_pages`), which
/// /proc/zoneinfo does not keep: pagesets sized while a fragmenting fallback had
/// boosted the zone (a write of `vm.percpu_pagelist_high_fraction`, CPU or memory
/// hotplug) keep a larger `high_min` after the boost is gone. A boost is a whole
/// number of pageblocks (`boost_watermark` adds one at a time) up to `max_boost` (the
/// high watermark × `watermark_boost_factor` / 10000, at least a pageblock), or
/// `max_boost` itself; docs/mechanisms.md §6.1. `cpus`: per CPU (batch, pagealloc's
/// `high_min` at no boost, the kernel's).
fn boost_at_sizing(low: u64, high: u64, factor: u64, cpus: &[(i64, i64, i64)]) -> Option<u64> {
    let pb = pagealloc::frame::PAGEBLOCK_PAGES;
    if factor == 0 || cpus.is_empty() {
        return None;
    }
    let max_boost = (high.saturating_mul(factor) / 10000).max(pb);
    let mut b = 0;
    while b < max_boost {
        b = (b + pb).min(max_boost);
        if cpus
            .iter()
            .all(|&(batch, h0, k)| highsize_at(low, b, batch, h0) == Some(k))
        {
            return Some(b);
        }
    }
    None
}

/// What one CPU's samples show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuFacts {
    /// First time `high >= high_max` during the run, and the worker's pages then.
    pub reached_max: Option<(f64, u64)>,
    /// Highest `high` during the run.
    pub peak_high: i64,
    /// Lowest and highest `count` during the run.
    pub count_range: (i64, i64),
    /// Median `high` over the last quarter of the run.
    pub settled_high: i64,
    /// Decay steps (decreases of `high`) in the idle time until `high` is first back at
    /// `high_min` (or the idle time ends). Later steps (other work raised `high` again)
    /// are not counted.
    pub decay_steps: usize,
    /// Of those, how many `decay_pcp_high` predicts exactly from the sample before
    /// (`high`, and `count` anywhere between that sample's and the next one's: the
    /// tick fell between them).
    pub predicted_steps: usize,
    /// Seconds from the end of the run until `high` is back at `high_min`.
    pub back_to_min: Option<f64>,
    /// `high` and `count` at the last sample.
    pub last: (i64, i64),
}

/// The facts of CPU `i` of a trajectory.
pub fn facts(tr: &Trajectory, i: usize) -> CpuFacts {
    let (batch, hmin, hmax) = tr.sizing[i];
    let run: Vec<&Sample> = tr.samples.iter().filter(|s| !s.idle).collect();
    let idle: Vec<&Sample> = tr.samples.iter().filter(|s| s.idle).collect();
    let mut f = CpuFacts {
        reached_max: run
            .iter()
            .find(|s| s.pcp[i].high >= hmax)
            .map(|s| (s.t, s.pages[i])),
        peak_high: run.iter().map(|s| s.pcp[i].high).max().unwrap_or(0),
        count_range: (
            run.iter().map(|s| s.pcp[i].count).min().unwrap_or(0),
            run.iter().map(|s| s.pcp[i].count).max().unwrap_or(0),
        ),
        ..CpuFacts::default()
    };
    let tail = &run[run.len() * 3 / 4..];
    let mut highs: Vec<i64> = tail.iter().map(|s| s.pcp[i].high).collect();
    highs.sort_unstable();
    f.settled_high = highs.get(highs.len() / 2).copied().unwrap_or(0);
    let tune = Tune::from_config(&Config::default());
    let mut prev = run.last().copied();
    for s in &idle {
        if let Some(p) = prev {
            let h0 = p.pcp[i].high;
            let h1 = s.pcp[i].high;
            if h1 < h0 && h0 > hmin && f.back_to_min.is_none() {
                f.decay_steps += 1;
                let after = |count: i64| {
                    let mut st = PcpState {
                        count: count as i32,
                        high: h0 as i32,
                        high_min: hmin as i32,
                        high_max: hmax as i32,
                        batch: batch as i32,
                        ..PcpState::default()
                    };
                    decay(&mut st, &tune);
                    i64::from(st.high)
                };
                // decay_pcp_high is monotone in count; the tick saw a count between
                // the two samples' (the same on an idle CPU).
                let (a, b) = (after(p.pcp[i].count), after(s.pcp[i].count));
                if (a.min(b)..=a.max(b)).contains(&h1) {
                    f.predicted_steps += 1;
                }
            }
        }
        if f.back_to_min.is_none() && s.pcp[i].high <= hmin {
            f.back_to_min = Some(s.t - tr.run_seconds);
        }
        prev = Some(s);
    }
    if let Some(s) = tr.samples.last() {
        f.last = (s.pcp[i].high, s.pcp[i].count);
    }
    f
}

/// The phase of CPU `i`'s decay tick within each second of a trajectory's clock, in ms
/// rounded to the sampling period: the circular mean of the times (modulo 1 s) at which
/// idle samples saw `high` step down, each taken half a period before the sample. 0
/// when no step was seen.
pub fn tick_phase_ms(tr: &Trajectory, i: usize) -> u64 {
    let hmin = tr.sizing.get(i).map_or(0, |s| s.1);
    let half = super::SAMPLE_MS as f64 / 2000.0;
    let (mut sx, mut sy, mut n) = (0.0f64, 0.0f64, 0);
    for w in tr.samples.windows(2) {
        let (p, s) = (&w[0], &w[1]);
        if s.idle && s.pcp[i].high < p.pcp[i].high && p.pcp[i].high > hmin {
            let a = (s.t - half).rem_euclid(1.0) * std::f64::consts::TAU;
            sx += a.cos();
            sy += a.sin();
            n += 1;
        }
    }
    if n == 0 {
        return 0;
    }
    let phase = sy.atan2(sx).rem_euclid(std::f64::consts::TAU) / std::f64::consts::TAU;
    let period = super::SAMPLE_MS;
    ((phase * 1000.0 / period as f64).round() as u64 * period) % 1000
}

fn opt_s(v: Option<f64>) -> String {
    v.map_or_else(|| "never".into(), |t| format!("{t:.2} s"))
}

/// The trajectory lines, per CPU of the run.
pub fn trajectories(k: &Trajectory, o: &Trajectory) -> Vec<Line> {
    let mut out = Vec::new();
    let n = k.sizing.len().min(o.sizing.len());
    let has_idle = k.samples.iter().any(|s| s.idle) && o.samples.iter().any(|s| s.idle);
    for i in 0..n {
        let g = format!("CPU #{i}");
        let (kf, of) = (facts(k, i), facts(o, i));
        let batch = k.sizing[i].0.max(1) as f64;
        match (kf.reached_max, of.reached_max) {
            (None, None) => out.push(line(
                &g,
                "peak high (high_max never reached)",
                kf.peak_high.to_string(),
                of.peak_high.to_string(),
                "±10 %",
                Verdict::of(within(
                    kf.peak_high as f64,
                    of.peak_high as f64,
                    0.10,
                    batch,
                )),
            )),
            (kr, or) => {
                let pages = |r: Option<(f64, u64)>| r.map_or("never".into(), |r| r.1.to_string());
                out.push(line(
                    &g,
                    "pages allocated until high = high_max",
                    pages(kr),
                    pages(or),
                    "±10 %",
                    Verdict::of(match (kr, or) {
                        (Some(a), Some(b)) => within(a.1 as f64, b.1 as f64, 0.10, batch),
                        _ => false,
                    }),
                ));
                out.push(line(
                    &g,
                    "time until high = high_max",
                    opt_s(kr.map(|r| r.0)),
                    opt_s(or.map(|r| r.0)),
                    "±10 % or ±0.1 s",
                    Verdict::of(match (kr, or) {
                        (Some(a), Some(b)) => within(a.0, b.0, 0.10, 0.1),
                        _ => false,
                    }),
                ));
            }
        }
        out.push(line(
            &g,
            "count during the run (min..max)",
            format!("{}..{}", kf.count_range.0, kf.count_range.1),
            format!("{}..{}", of.count_range.0, of.count_range.1),
            "each ±10 % or ±2 batches",
            Verdict::of(both_within(kf.count_range, of.count_range, batch)),
        ));
        out.push(line(
            &g,
            "settled high (median, last quarter of the run)",
            kf.settled_high.to_string(),
            of.settled_high.to_string(),
            "±10 %",
            Verdict::of(within(
                kf.settled_high as f64,
                of.settled_high as f64,
                0.10,
                batch,
            )),
        ));
        if !has_idle {
            out.push(line(
                &g,
                "idle decay",
                "-".into(),
                "-".into(),
                "needs --idle-seconds > 0",
                Verdict::NotApplicable,
            ));
            continue;
        }
        out.push(line(
            &g,
            "idle decay steps to high_min",
            kf.decay_steps.to_string(),
            of.decay_steps.to_string(),
            "±1 step",
            Verdict::of(kf.decay_steps.abs_diff(of.decay_steps) <= 1),
        ));
        out.push(line(
            &g,
            "kernel decay steps decay_pcp_high predicts exactly",
            format!("{} of {}", kf.predicted_steps, kf.decay_steps),
            format!("{} of {}", of.predicted_steps, of.decay_steps),
            "≥ 90 % of the kernel's",
            if kf.decay_steps == 0 {
                Verdict::NotApplicable
            } else {
                Verdict::of(kf.predicted_steps * 10 >= kf.decay_steps * 9)
            },
        ));
        out.push(line(
            &g,
            "seconds after the run back to high_min",
            opt_s(kf.back_to_min),
            opt_s(of.back_to_min),
            "±2 s or ±25 % (deferrable timer)",
            Verdict::of(match (kf.back_to_min, of.back_to_min) {
                (Some(a), Some(b)) => within(a, b, 0.25, 2.0),
                (None, None) => true,
                _ => false,
            }),
        ));
        out.push(line(
            &g,
            "high, count at the end",
            format!("{}, {}", kf.last.0, kf.last.1),
            format!("{}, {}", of.last.0, of.last.1),
            "each ±10 % or ±2 batches",
            Verdict::of(both_within(kf.last, of.last, batch)),
        ));
    }
    out
}
