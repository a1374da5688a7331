//! Reports: the seeds' tables (terminal and Markdown), normalisation to a base row, plots,
//! and the `report` main job.
//!
//! # Design
//! Everything is drawn from [`Row`]s, the one result shape of every executor and tool.
//! A column is a key of the row's JSON (`score`, `zone_lock_pct`, … or a key of
//! `extra`); a column no row has a value for is left out of a table. [`normalise`]
//! turns the columns the spec states relative to base (score, free_high, alloc_zone,
//! peak/final PCP pages) into percentages of the first row and keeps the raw values in
//! `extra` (`score_raw`, …).

pub mod job;
pub mod plot;
pub mod published;
pub mod section;
pub mod sim;

pub use section::{Mode, Section};

use std::fmt::Write as _;

use crate::Row;

/// The columns of the series' tables (docs/mechanisms.md §9.2), after the row's identity.
pub const WORKLOAD_COLUMNS: &[&str] = &[
    "workload",
    "alloc",
    "config",
    "cpus",
    "score",
    "zone_lock_pct",
    "free_high",
    "alloc_zone",
    "cache_miss_pct",
    "idle_pct",
    "pcp_peak_pages",
    "pcp_final_pages",
    "alloc_lat_avg_us",
    "alloc_lat_p99_us",
    "free_lat_avg_us",
    "free_lat_p99_us",
];

/// [`WORKLOAD_COLUMNS`] with the raw score and its unit after the normalised one (for
/// tables of normalised rows).
pub fn compare_columns() -> Vec<&'static str> {
    let mut c = WORKLOAD_COLUMNS.to_vec();
    let after = c
        .iter()
        .position(|&k| k == "score")
        .expect("a score column")
        + 1;
    c.splice(after..after, ["score_raw", "score_unit"]);
    c
}

/// The report's main table of a workload section: [`compare_columns`] without the
/// latency columns, which get tables of their own ([`latency_markdown`]).
pub fn report_columns() -> Vec<&'static str> {
    compare_columns()
        .into_iter()
        .filter(|c| !c.contains("_lat_"))
        .collect()
}

/// The latency statistics of one histogram, in the order the tables print them.
const LAT_STATS: [&str; 7] = ["count", "avg", "p50", "p99", "p999", "max", "tail_pct"];

/// The columns of one latency table: the row's identity, then every statistic of the
/// `alloc` and `free` histograms of `kind` (`lat`: zone-lock trips in µs; `call`: every
/// call in ns).
fn latency_columns(kind: &str, unit: &str) -> Vec<String> {
    let mut c: Vec<String> = ["workload", "alloc", "config", "cpus", "batch"]
        .map(str::to_owned)
        .to_vec();
    for dir in ["alloc", "free"] {
        for st in LAT_STATS {
            c.push(match st {
                "count" | "tail_pct" => format!("{dir}_{kind}_{st}"),
                _ => format!("{dir}_{kind}_{st}_{unit}"),
            });
        }
    }
    c
}

/// The latency tables of `rows`: zone-lock trips (µs) and single calls (ns), each with
/// count, avg, p50, p99, p99.9, max and tail % from one histogram, and a line naming the
/// rows whose average exceeds their p99 with how much of the time their tail carries.
pub fn latency_markdown(rows: &[Row]) -> String {
    let mut s = String::new();
    for (kind, unit, what) in [
        (
            "lat",
            "us",
            "Zone-lock trips (µs): one refill (alloc) or drain (free) under the zone lock",
        ),
        (
            "call",
            "ns",
            "Calls (ns): every allocation and free, PCP hits included",
        ),
    ] {
        let cols = latency_columns(kind, unit);
        let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
        let present = present_columns(rows, &cols);
        if !present.iter().any(|c| c.ends_with("_count")) {
            continue;
        }
        let _ = writeln!(
            s,
            "{what}:

{}",
            markdown_table(rows, &cols)
        );
        let mut inverted = Vec::new();
        for r in rows {
            for dir in ["alloc", "free"] {
                let e = |st: &str| r.extra.get(&format!("{dir}_{kind}_{st}")).copied();
                if let (Some(avg), Some(p99), Some(tail), Some(max)) = (
                    e(&format!("avg_{unit}")),
                    e(&format!("p99_{unit}")),
                    e("tail_pct"),
                    e(&format!("max_{unit}")),
                ) {
                    if avg > p99 {
                        inverted.push(format!(
                            "{} {dir} (tail {tail:.0} %, max {} {})",
                            row_label(r),
                            fmt_num(max),
                            if unit == "us" { "µs" } else { "ns" }
                        ));
                    }
                }
            }
        }
        if !inverted.is_empty() {
            let _ = writeln!(
                s,
                "Average above p99 in: {}. There the values above the p99 carry most of \
                 the time (tail %): a few trips or calls orders of magnitude longer than \
                 the rest (max: milliseconds, a scheduler time slice), the thread \
                 descheduled inside them (see the summary); the p50 and p99 describe the \
                 allocator.\n",
                inverted.join("; ")
            );
        }
    }
    s
}

/// A short name of a row for a sentence: `batch 255`, `lmbench linux-6.12`,
/// `page_fault1 kernel`.
fn row_label(r: &Row) -> String {
    let who = r
        .config
        .as_deref()
        .map_or(r.alloc.as_str(), |c| c.split(',').next().unwrap_or(c));
    match r.extra.get("batch") {
        Some(b) => format!("batch {b}"),
        None => match r.workload.as_deref() {
            Some(w) => format!("{w} {who}"),
            None => who.to_owned(),
        },
    }
}

/// A latency column's header: `alloc_lat_p999_us` → `alloc trip p99.9 µs`,
/// `free_call_avg_ns` → `free call avg ns`, `alloc_lat_count` → `alloc trips`.
fn latency_header(col: &str) -> Option<String> {
    let (dir, rest) = col.split_once('_')?;
    if dir != "alloc" && dir != "free" {
        return None;
    }
    let (kind, rest) = rest.split_once('_')?;
    let kind = match kind {
        "lat" => "trip",
        "call" => "call",
        _ => return None,
    };
    Some(match rest {
        "count" => format!("{dir} {kind}s"),
        "tail_pct" => format!("{dir} {kind} tail %"),
        _ => {
            let (stat, unit) = rest.rsplit_once('_')?;
            let stat = if stat == "p999" { "p99.9" } else { stat };
            let unit = match unit {
                "us" => "µs",
                "ns" => "ns",
                _ => return None,
            };
            format!("{dir} {kind} {stat} {unit}")
        }
    })
}

/// The columns of a microbenchmark table.
pub const BENCH_COLUMNS: &[&str] = &[
    "bench", "alloc", "config", "cpus", "order", "get_ns", "put_ns", "pair_ns",
];

pub use crate::row::{normalise, NORMALISED};

/// Why the report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A run on threads failed.
    #[error("{label}: {error}")]
    Run {
        /// Which run.
        label: String,
        /// Its error.
        #[source]
        error: crate::exec::ExecError,
    },
    /// A microbenchmark failed.
    #[error("bench {label}: {error}")]
    Bench {
        /// Which one.
        label: String,
        /// Its error.
        #[source]
        error: crate::peers::SourceError,
    },
    /// A simulation failed (with its seed and replay command).
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
    /// A workload of the plan does not build.
    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),
    /// A config of the plan does not parse.
    #[error(transparent)]
    Config(#[from] pagealloc::ConfigError),
    /// A file or directory could not be written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The path.
        path: std::path::PathBuf,
        /// The error.
        #[source]
        error: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("{}: {why}", path.display())]
    Plot {
        /// The file.
        path: std::path::PathBuf,
        /// What the plotting library said.
        why: String,
    },
}

impl ReportError {
    fn io(path: &std::path::Path, error: std::io::Error) -> Self {
        ReportError::Io {
            path: path.to_owned(),
            error,
        }
    }

    fn plot(path: &std::path::Path, why: impl std::fmt::Display) -> Self {
        ReportError::Plot {
            path: path.to_owned(),
            why: why.to_string(),
        }
    }
}

/// Column header: the key, with the unit for the known ones.
pub fn header(col: &str) -> String {
    match col {
        "score" => "score".into(),
        "score_raw" => "raw score".into(),
        "score_stddev_pct" => "score ±%".into(),
        "score_unit" => "unit".into(),
        "zone_lock_pct" => "zone lock %".into(),
        "cache_miss_pct" => "cache miss %".into(),
        "idle_pct" => "idle %".into(),
        "pcp_peak_pages" => "peak pcp".into(),
        "pcp_final_pages" => "final pcp".into(),
        "get_ns" => "get ns".into(),
        "put_ns" => "put ns".into(),
        "pair_ns" => "pair ns".into(),
        "zone_lock_per_kop" => "lock/kop".into(),
        "contended_pct" => "waited %".into(),
        "lock_wait_ns_op" => "wait ns/op".into(),
        "meta_per_page" => "meta/page".into(),
        "drained_pct" => "drained %".into(),
        "vs_buddy_pct" => "vs buddy %".into(),
        "cpu0_high_last" => "cpu0 high last".into(),
        "cpu0_count_last" => "cpu0 count last".into(),
        "all_cpus_count_last" => "all CPUs count last".into(),
        "pages_per_s_per_cpu" => "pages/s per CPU".into(),
        other => latency_header(other).unwrap_or_else(|| other.replace('_', " ")),
    }
}

/// The cell of `row` in column `col` ("" when it has none).
pub fn cell(row: &Row, col: &str) -> String {
    let v = serde_json::to_value(row).expect("rows serialise");
    let found = v
        .get(col)
        .or_else(|| v.get("extra").and_then(|e| e.get(col)))
        .cloned();
    match found {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s,
        Some(serde_json::Value::Number(n)) => match n.as_f64() {
            Some(f) if n.is_f64() => fmt_num(f),
            _ => n.to_string(),
        },
        Some(other) => other.to_string(),
    }
}

/// A number for a table: whole numbers and thousands without decimals, smaller ones
/// with 1–3.
pub fn fmt_num(f: f64) -> String {
    let a = f.abs();
    if !f.is_finite() {
        format!("{f}")
    } else if a >= 1e4 {
        group_thousands(&format!("{f:.0}"))
    } else if f.fract() == 0.0 {
        format!("{f:.0}")
    } else if a >= 100.0 {
        format!("{f:.1}")
    } else if a >= 1.0 {
        format!("{f:.2}")
    } else if a == 0.0 {
        "0".into()
    } else {
        format!("{f:.3}")
    }
}

/// `1234567` → `1 234 567` (a digit string, optionally signed).
pub(crate) fn group_thousands(s: &str) -> String {
    let (sign, digits) = s.strip_prefix('-').map_or(("", s), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// The columns of `columns` that at least one row has a value in.
pub fn present_columns<'a>(rows: &[Row], columns: &[&'a str]) -> Vec<&'a str> {
    columns
        .iter()
        .copied()
        .filter(|c| rows.iter().any(|r| !cell(r, c).is_empty()))
        .collect()
}

/// A plain-text table, columns aligned, empty columns dropped.
pub fn table(rows: &[Row], columns: &[&str]) -> String {
    let cols = present_columns(rows, columns);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| cols.iter().map(|c| cell(r, c)).collect())
        .collect();
    let heads: Vec<String> = cols.iter().map(|c| header(c)).collect();
    let widths: Vec<usize> = (0..cols.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([heads[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |out: &mut String, vals: &[String]| {
        let parts: Vec<String> = vals
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:>w$}", w = *w))
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, &heads);
    for r in &cells {
        line(&mut out, r);
    }
    out
}

/// Prints [`table`] to stdout.
pub fn print_table(rows: &[Row], columns: &[&str]) {
    print!("{}", table(rows, columns));
}

/// A Markdown table, empty columns dropped.
pub fn markdown_table(rows: &[Row], columns: &[&str]) -> String {
    let cols = present_columns(rows, columns);
    let mut out = String::new();
    let heads: Vec<String> = cols.iter().map(|c| header(c)).collect();
    let _ = writeln!(out, "| {} |", heads.join(" | "));
    let _ = writeln!(
        out,
        "|{}|",
        cols.iter()
            .enumerate()
            .map(|(i, _)| if i < 1 { "---" } else { "---:" })
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in rows {
        let vals: Vec<String> = cols.iter().map(|c| cell(r, c)).collect();
        let _ = writeln!(out, "| {} |", vals.join(" | "));
    }
    out
}

/// Rows as JSON lines.
pub fn json_lines(rows: &[Row]) -> String {
    rows.iter().map(|r| r.to_json() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(alloc: &str, score: f64, free_high: f64) -> Row {
        Row {
            alloc: alloc.into(),
            score: Some(score),
            free_high: Some(free_high),
            zone_lock_pct: Some(12.5),
            ..Row::default()
        }
    }

    #[test]
    fn compare_columns_are_the_workload_columns_with_the_raw_score() {
        let c = compare_columns();
        assert_eq!(c.len(), WORKLOAD_COLUMNS.len() + 2);
        let at = c.iter().position(|&k| k == "score").unwrap();
        assert_eq!(c[at + 1..at + 3], ["score_raw", "score_unit"]);
    }

    #[test]
    fn normalise_makes_the_first_row_100_and_keeps_raw_values() {
        let mut rows = vec![
            row("a", 200.0, 0.0),
            row("b", 300.0, 0.0),
            row("c", 100.0, 5.0),
        ];
        normalise(&mut rows);
        assert_eq!(rows[0].score, Some(100.0));
        assert_eq!(rows[1].score, Some(150.0));
        assert_eq!(rows[2].score, Some(50.0));
        assert_eq!(rows[1].extra["score_raw"], 300.0);
        // base 0: equal stays 100, anything else has no ratio
        assert_eq!(rows[1].free_high, Some(100.0));
        assert_eq!(rows[2].free_high, None);
        // not a normalised column
        assert_eq!(rows[2].zone_lock_pct, Some(12.5));
    }

    #[test]
    fn tables_drop_empty_columns_and_align() {
        let rows = vec![row("pagealloc", 1234567.0, 3.0), row("kernel", 2.5, 0.0)];
        let t = table(&rows, WORKLOAD_COLUMNS);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("score") && !lines[0].contains("cache miss"));
        assert!(lines[1].contains("1 234 567"));
        assert_eq!(lines[1].len(), lines[2].len());
        let md = markdown_table(&rows, WORKLOAD_COLUMNS);
        assert!(md.starts_with("| alloc | score | zone lock % | free high |"));
        assert_eq!(md.lines().count(), 4);
    }

    #[test]
    fn latency_headers_name_the_kind_and_the_unit() {
        assert_eq!(header("alloc_lat_avg_us"), "alloc trip avg µs");
        assert_eq!(header("alloc_call_avg_ns"), "alloc call avg ns");
        assert_eq!(header("free_lat_p999_us"), "free trip p99.9 µs");
        assert_eq!(header("free_call_count"), "free calls");
        assert_eq!(header("alloc_lat_tail_pct"), "alloc trip tail %");
        assert_eq!(header("alloc_failures"), "alloc failures");
    }

    #[test]
    fn latency_tables_flag_an_average_above_the_p99() {
        let mut h = crate::row::histogram();
        for _ in 0..990 {
            crate::row::record_ns(&mut h, 2_000);
        }
        for _ in 0..10 {
            crate::row::record_ns(&mut h, 5_000_000); // ten preempted trips of 5 ms
        }
        let l = crate::row::LatencyStats::of(&h).unwrap();
        assert!(l.avg_ns > l.p99_ns, "{l:?}");
        assert!(l.tail_pct > 90.0, "{l:?}");
        let mut r = row("pagealloc", 1.0, 0.0);
        r.config = Some("base".into());
        l.insert(&mut r.extra, "alloc_lat", crate::row::LatUnit::Us);
        let md = latency_markdown(&[r]);
        assert!(
            md.contains("| alloc | config | alloc trips | alloc trip avg µs |"),
            "{md}"
        );
        assert!(
            md.contains("Average above p99 in: base alloc (tail 96 %"),
            "{md}"
        );
        assert!(
            !md.contains("Calls (ns)"),
            "no call histogram, no call table: {md}"
        );
    }

    #[test]
    fn numbers_are_formatted_for_reading() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(63.0), "63");
        assert_eq!(fmt_num(4095.0), "4095");
        assert_eq!(fmt_num(0.01234), "0.012");
        assert_eq!(fmt_num(12.345), "12.35");
        assert_eq!(fmt_num(123.45), "123.5");
        assert_eq!(fmt_num(-1234567.0), "-1 234 567");
    }
}
