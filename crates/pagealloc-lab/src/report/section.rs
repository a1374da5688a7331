//! What the report's jobs share: the suite's size and a report's part. Every job
//! (the main job, the simulator's sections, the twin's section) fills [`Section`]s;
//! `job::write_report` writes them.

use crate::Row;

/// Size of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The default suite (the README has its measured duration).
    Full,
    /// `--quick`: fewer configs, smaller workloads (about 2 min on 2 loaded CPUs).
    Quick,
    /// Seconds: the smallest parameters that still exercise every part (tests).
    Tiny,
}

/// One part of a report.
#[derive(Clone, Debug, Default)]
pub struct Section {
    /// File-name stem of its JSON (`<id>.json`) and plots.
    pub id: String,
    /// Heading.
    pub title: String,
    /// Markdown text before the table.
    pub intro: String,
    /// Result rows.
    pub rows: Vec<Row>,
    /// Table columns (keys of [`Row`]; empty ones are dropped).
    pub columns: Vec<&'static str>,
    /// Plot file names (PNG; an SVG of the same stem sits beside it).
    pub plots: Vec<String>,
    /// Markdown after the main table: the latency tables, the published table beside
    /// ours, notes on surprising figures.
    pub after: String,
    /// For the report's summary: how close the section comes to what it reproduces (a
    /// published table, the live kernel), one line; `None` for sections that reproduce
    /// nothing published.
    pub closeness: Option<String>,
    /// Real-thread sections: the 1-minute load average when the section started and
    /// when it ended.
    pub load: Option<(f64, f64)>,
    /// Further JSON files beside `<id>.json`: (file stem, value).
    pub data: Vec<(String, serde_json::Value)>,
}
