//! One result row: the shared output of the thread executor, the simulator, the
//! microbenchmarks and the stress tool. `--json` prints one per line; tables and plots
//! are drawn from them. Keys follow the issue contract; a field that does not apply is
//! `None` and is left out of the JSON.

use hdrhistogram::Histogram;
use pagealloc::Counters;
use serde::{Deserialize, Serialize};

use crate::workload::{OpCounts, Workload};

pub mod extra;

pub use extra::Extra;

/// A workload result (one config or peer on one machine), with the seeds' columns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Workload name (registry name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Microbenchmark name (`bulk`, `repeat`, `rand`) for bench rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bench: Option<String>,
    /// Allocator: `pagealloc` or a peer's name.
    pub alloc: String,
    /// pagealloc config string (`preset[,overrides]`); absent for peers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// CPUs (threads or virtual CPUs) used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Bench order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order: Option<u8>,
    /// `host` for real threads, or the simulated machine's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Score: raw throughput here; `compare` normalises to the first row = 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Unit of the raw score (pages/s, messages/s, bytes/s, 1/s…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_unit: Option<String>,
    /// Time waiting for zone locks ÷ total CPU time, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_lock_pct: Option<f64>,
    /// Frees that triggered a free_high drain (raw count; `compare` normalises).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_high: Option<f64>,
    /// Pages taken from buddy lists for allocation (raw; `compare` normalises).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_zone: Option<f64>,
    /// Share of page touches that found the page cold, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_miss_pct: Option<f64>,
    /// Largest total of pages in per-CPU lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcp_peak_pages: Option<f64>,
    /// Pages in per-CPU lists at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcp_final_pages: Option<f64>,
    /// Average of one zone-lock trip for a refill, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_lat_avg_us: Option<f64>,
    /// p99 of one zone-lock trip for a refill, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_lat_p99_us: Option<f64>,
    /// Average of one zone-lock trip for a drain, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_lat_avg_us: Option<f64>,
    /// p99 of one zone-lock trip for a drain, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_lat_p99_us: Option<f64>,
    /// Bench: ns per get.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub get_ns: Option<f64>,
    /// Bench: ns per put.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub put_ns: Option<f64>,
    /// Bench repeat: ns per get+put pair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair_ns: Option<f64>,
    /// Simulator: hash of the trace (same seed, same hash).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_hash: Option<String>,
    /// Root seed of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Wall-clock seconds the run took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// Anything else worth keeping (per-group scores, counters…), name → value.
    /// Every key is declared in [`extra::EXTRA`].
    #[serde(default, skip_serializing_if = "Extra::is_empty")]
    pub extra: Extra,
    /// A row of several runs (`--runs`) or seeds (`--seeds`): each metric's raw value in
    /// every one of them, in run order ([`crate::stats::METRICS`]); the metric's field
    /// holds their mean.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub samples: std::collections::BTreeMap<String, Vec<f64>>,
}

/// Columns [`normalise`] rewrites as % of the first row.
pub const NORMALISED: &[&str] = &[
    "score",
    "free_high",
    "alloc_zone",
    "pcp_peak_pages",
    "pcp_final_pages",
];

/// Rewrites the [`NORMALISED`] columns of every row as a percentage of the first row's
/// value (the first row becomes 100), keeping the raw value in `extra["<col>_raw"]`.
/// A column whose base value is 0 stays 100 where the row's value is 0 too and empty
/// otherwise (no ratio exists); a column the base row lacks is left raw.
pub fn normalise(rows: &mut [Row]) {
    let Some(base) = rows.first().cloned() else {
        return;
    };
    for r in rows.iter_mut() {
        for &col in NORMALISED {
            let (Some(b), Some(v)) = (get_field(&base, col), get_field(r, col)) else {
                continue;
            };
            r.extra.insert(format!("{col}_raw"), v);
            // Equal values are exactly 100 (100 · v / v can round to 100.00000000000001).
            let pct = if v == b {
                Some(100.0)
            } else if b != 0.0 {
                Some(100.0 * v / b)
            } else if v == 0.0 {
                Some(100.0)
            } else {
                None
            };
            set_field(r, col, pct);
        }
    }
}

fn slot<'a>(r: &'a mut Row, col: &str) -> Option<&'a mut Option<f64>> {
    Some(match col {
        "score" => &mut r.score,
        "free_high" => &mut r.free_high,
        "alloc_zone" => &mut r.alloc_zone,
        "pcp_peak_pages" => &mut r.pcp_peak_pages,
        "pcp_final_pages" => &mut r.pcp_final_pages,
        _ => return None,
    })
}

fn get_field(r: &Row, col: &str) -> Option<f64> {
    let mut r = r.clone();
    slot(&mut r, col).and_then(|v| *v)
}

fn set_field(r: &mut Row, col: &str, v: Option<f64>) {
    if let Some(s) = slot(r, col) {
        *s = v;
    }
}

impl Row {
    /// One JSON object on one line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("rows serialise")
    }
}

/// An empty latency histogram (ns, 3 significant figures, auto-resizing): the one kind
/// every executor records trips and ops into.
pub fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant figures are valid")
}

/// Records `ns` into `h` (values below 1 ns count as 1).
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    // Auto-resizing histograms accept any value.
    let _ = h.record(ns.max(1));
}

/// The summary of one latency histogram: every figure from the same histogram (ns), so
/// count, average and percentiles always describe the same population.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyStats {
    /// Values recorded.
    pub count: u64,
    /// Mean, ns.
    pub avg_ns: f64,
    /// Median, ns.
    pub p50_ns: f64,
    /// 99th percentile, ns.
    pub p99_ns: f64,
    /// 99.9th percentile, ns.
    pub p999_ns: f64,
    /// Largest value, ns.
    pub max_ns: f64,
    /// Share of the summed time that values above the p99 carry, %: above 1 % the tail
    /// weighs more than its count, and when it passes about half the mean can exceed the
    /// p99 (a few values orders of magnitude above the rest, such as trips during which
    /// the thread was descheduled).
    pub tail_pct: f64,
}

/// The unit a [`LatencyStats`] is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatUnit {
    /// Microseconds (zone-lock trips, as the published tables give them).
    Us,
    /// Nanoseconds (single allocator calls, mostly PCP hits of tens of ns).
    Ns,
}

impl LatencyStats {
    /// The summary of `h` (ns); `None` if it is empty. Percentiles are HdrHistogram's
    /// `value_at_quantile` (3 significant figures), the one percentile of the lab.
    pub fn of(h: &Histogram<u64>) -> Option<LatencyStats> {
        if h.is_empty() {
            return None;
        }
        let p99 = h.value_at_quantile(0.99);
        let (mut all, mut tail) = (0.0f64, 0.0f64);
        for v in h.iter_recorded() {
            let t = h.median_equivalent(v.value_iterated_to()) as f64 * v.count_at_value() as f64;
            all += t;
            if v.value_iterated_to() > p99 {
                tail += t;
            }
        }
        Some(LatencyStats {
            count: h.len(),
            avg_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.5) as f64,
            p99_ns: p99 as f64,
            p999_ns: h.value_at_quantile(0.999) as f64,
            max_ns: h.max() as f64,
            tail_pct: if all > 0.0 { 100.0 * tail / all } else { 0.0 },
        })
    }

    /// Writes the summary into `extra` as `<prefix>_count`, `<prefix>_{avg,p50,p99,p999,
    /// max}_<unit>` and `<prefix>_tail_pct`.
    pub fn insert(&self, extra: &mut Extra, prefix: &str, unit: LatUnit) {
        let (div, u) = match unit {
            LatUnit::Us => (1e3, "us"),
            LatUnit::Ns => (1.0, "ns"),
        };
        extra.insert(format!("{prefix}_count"), self.count as f64);
        for (k, v) in [
            ("avg", self.avg_ns),
            ("p50", self.p50_ns),
            ("p99", self.p99_ns),
            ("p999", self.p999_ns),
            ("max", self.max_ns),
        ] {
            extra.insert(format!("{prefix}_{k}_{u}"), v / div);
        }
        extra.insert(format!("{prefix}_tail_pct"), self.tail_pct);
    }
}

/// One CPU's measured window, as an executor saw it.
#[derive(Clone, Debug, Default)]
pub struct CpuWindow {
    /// Ops completed in the window.
    pub counts: OpCounts,
    /// Start of the window (leaving the measured barrier, or the start), ns on the
    /// executor's clock.
    pub start_ns: u64,
    /// The CPU's `Done`, ns on the same clock.
    pub end_ns: u64,
}

/// Seconds from the earliest start to the latest end of `windows` (at least 1 ns).
fn span_s<'a>(windows: impl Iterator<Item = &'a CpuWindow>) -> f64 {
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for w in windows {
        lo = lo.min(w.start_ns);
        hi = hi.max(w.end_ns);
    }
    (hi.saturating_sub(lo).max(1)) as f64 * 1e-9
}

/// Everything a row is computed from, in the terms the columns are defined in; both
/// executors fill one and call [`Row::from_measurement`], so a column means the same
/// on threads and in the simulator.
#[derive(Debug)]
pub struct Measurement<'a> {
    /// The workload (name, score, groups).
    pub workload: &'a dyn Workload,
    /// `pagealloc` or the peer's name.
    pub alloc: String,
    /// pagealloc's config string; `None` for peers.
    pub config: Option<String>,
    /// `host`, or the simulated machine's name.
    pub machine: String,
    /// Root seed.
    pub seed: u64,
    /// Wall-clock seconds of the run.
    pub wall_s: f64,
    /// Per CPU of the workload, its measured window.
    pub windows: Vec<CpuWindow>,
    /// The allocator's counters over the measured window (sources with counters).
    pub counters: Option<Counters>,
    /// Σ over the workload's CPUs of the time spent waiting for any zone lock in the
    /// measured window, ns.
    pub zone_lock_wait_ns: Option<u64>,
    /// Σ over the workload's CPUs of their CPU time in the measured window, ns: the
    /// threads' own CPU clocks, or the virtual CPUs' busy time.
    pub cpu_time_ns: u64,
    /// Durations of zone-lock trips of allocations (refills, direct) and of frees
    /// (drains, direct), ns.
    pub trips: Option<(&'a Histogram<u64>, &'a Histogram<u64>)>,
    /// Base pages touched, and how many of them missed the last-level cache.
    pub touches: Option<(u64, u64)>,
    /// Largest and last total of pages on per-CPU lists.
    pub pcp_pages: Option<(u64, u64)>,
    /// The run's trace hash, where it is reproducible.
    pub trace_hash: Option<u64>,
}

impl Row {
    /// The row of a run, one definition per column (the lab README's column table,
    /// crates/pagealloc-lab/README.md):
    /// - score: [`Workload::score`] over all CPUs' measured windows (earliest start to
    ///   last `Done`); with several [`Workload::groups`], each group's in `score_<g>`;
    /// - zone lock %: zone-lock wait ÷ CPU time, over the measured window;
    /// - free_high, alloc_zone: the counters over the measured window (raw);
    /// - cache miss %: cold ÷ touched base pages;
    /// - idle %: the part of the CPUs' measured windows (each from its start to its
    ///   `Done`) that was not CPU time: sleeps in `Send`/`Recv` (and, on threads,
    ///   anything else the thread was off the CPU for);
    /// - alloc/free trip latency: count, average, p50, p99, p99.9 and max of one
    ///   zone-lock trip, µs, all from one histogram ([`LatencyStats`]).
    pub fn from_measurement(m: &Measurement<'_>) -> Row {
        let w = m.workload;
        let measured = OpCounts::sum(m.windows.iter().map(|c| &c.counts));
        let elapsed_s = span_s(m.windows.iter());
        let mut r = Row {
            workload: Some(w.name().to_owned()),
            alloc: m.alloc.clone(),
            config: m.config.clone(),
            cpus: Some(m.windows.len() as u32),
            machine: Some(m.machine.clone()),
            score: Some(w.score(&measured, elapsed_s)),
            score_unit: Some(w.score_unit().to_owned()),
            seed: Some(m.seed),
            wall_s: Some(m.wall_s),
            trace_hash: m.trace_hash.map(|h| format!("{h:016x}")),
            ..Row::default()
        };
        let groups = w.groups(m.windows.len() as u32);
        if groups.len() > 1 {
            for g in groups.iter().filter(|g| !g.cpus.is_empty()) {
                let sel = || g.cpus.iter().map(|&c| &m.windows[c as usize]);
                let counts = OpCounts::sum(sel().map(|c| &c.counts));
                r.extra
                    .insert(format!("score_{}", g.name), w.score(&counts, span_s(sel())));
            }
        }
        r.extra.insert("elapsed_s".into(), elapsed_s);
        r.extra
            .insert("alloc_failures".into(), measured.failed_allocs() as f64);
        if let Some(wait) = m.zone_lock_wait_ns {
            r.zone_lock_pct = Some(100.0 * wait as f64 / m.cpu_time_ns.max(1) as f64);
            r.extra.insert("lock_wait_s".into(), wait as f64 * 1e-9);
        }
        r.extra
            .insert("cpu_time_s".into(), m.cpu_time_ns as f64 * 1e-9);
        let windows_ns: u64 = m
            .windows
            .iter()
            .map(|w| w.end_ns.saturating_sub(w.start_ns))
            .sum();
        if windows_ns > 0 {
            let busy = m.cpu_time_ns as f64 / windows_ns as f64;
            r.extra
                .insert("idle_pct".into(), (100.0 * (1.0 - busy)).max(0.0));
        }
        if let Some(c) = &m.counters {
            r.free_high = Some(c.free_high as f64);
            r.alloc_zone = Some(c.alloc_zone as f64);
            for (k, v) in [
                ("pcp_refill", c.pcp_refill),
                ("pcp_drain", c.pcp_drain),
                ("zone_lock", c.zone_lock),
                ("zone_lock_contended", c.zone_lock_contended),
                ("pgalloc", c.pgalloc),
                ("pgfree", c.pgfree),
                ("alloc_fail", c.alloc_fail),
                ("decay_drain", c.decay_drain),
            ] {
                r.extra.insert(k.into(), v as f64);
            }
        }
        if let Some((alloc, free)) = m.trips {
            if let Some(l) = LatencyStats::of(alloc) {
                r.alloc_lat_avg_us = Some(l.avg_ns / 1e3);
                r.alloc_lat_p99_us = Some(l.p99_ns / 1e3);
                l.insert(&mut r.extra, "alloc_lat", LatUnit::Us);
            }
            if let Some(l) = LatencyStats::of(free) {
                r.free_lat_avg_us = Some(l.avg_ns / 1e3);
                r.free_lat_p99_us = Some(l.p99_ns / 1e3);
                l.insert(&mut r.extra, "free_lat", LatUnit::Us);
            }
        }
        if let Some((pages, cold)) = m.touches.filter(|&(p, _)| p > 0) {
            r.cache_miss_pct = Some(100.0 * cold as f64 / pages as f64);
        }
        if let Some((peak, last)) = m.pcp_pages {
            r.pcp_peak_pages = Some(peak as f64);
            r.pcp_final_pages = Some(last as f64);
        }
        r
    }
}
