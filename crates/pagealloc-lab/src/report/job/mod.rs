//! The `report` main job: a default suite of the seed workloads on real threads across
//! configs and peers, the batch sweep, the PCP timeline and LLFree's microbenchmarks,
//! written as `report.md` (tables), one JSON file per section and PNG/SVG plots.
//!
//! # Design
//! A report is a list of [`Section`]s (title, text, rows, columns, plots); the job fills
//! them and [`write_report`] writes them, so other tools (the simulator) can add theirs.
//! The suite's size is chosen by [`Mode`]: `Full`, `Quick` (fewer configs, smaller
//! workloads) and `Tiny` (seconds: for tests); the README has their measured
//! durations. Every run is a full executor run with all its checks: a failed check
//! fails the report.
//!
//! - `plan`: the suite's sizes in each mode, and the context every run goes through
//!   (progress, warnings, the load average around a section);
//! - `sections`: the real-thread sections, one function each (page_fault1 across peers
//!   and CPUs, the kbuild series, netperf and lmbench, the batch sweep, the PCP
//!   timeline, the other workloads, LLFree's microbenchmarks);
//! - `write`: the opening summary and the files (`report.md`, one JSON per section).

mod plan;
mod sections;
mod write;

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::ReportError;
pub use plan::loadavg;
use plan::{with_load, Ctx, Plan};
use sections::{batch_sweep, microbench, others, series, streams, throughput, timeline};
use write::summary_text;
pub use write::write_report;

pub use super::section::{Mode, Section};

/// What the job did.
#[derive(Debug)]
pub struct Summary {
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Seconds it took.
    pub seconds: f64,
    /// Warnings collected from the runs.
    pub warnings: Vec<String>,
    /// The report's opening summary (Markdown, one screen).
    pub text: String,
}

/// Prints `report: <s> s, step <pos>/<len>: <what>` to stderr every 15 s until `stop`.
fn plain_progress(pb: &ProgressBar, stop: &std::sync::atomic::AtomicBool, t0: Instant) {
    let mut next = 15u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let t = t0.elapsed().as_secs();
        if t >= next {
            next = t + 15;
            eprintln!(
                "report: {t:>4} s, step {}/{}: {}",
                pb.position(),
                pb.length().unwrap_or(0),
                pb.message()
            );
        }
    }
}

/// Runs the suite of `mode` and writes the report into `out`.
///
/// # Errors
/// A failed run (with its check's message) or a file that cannot be written.
pub fn run(out: &Path, mode: Mode) -> Result<Summary, ReportError> {
    let t0 = Instant::now();
    std::fs::create_dir_all(out).map_err(|e| ReportError::io(out, e))?;
    let plan = Plan::new(mode);
    let pb = ProgressBar::new(plan.steps());
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    // Piped output (a CI log) gets no bar: a plain line on stderr every 15 s instead.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lines =
        (!std::io::IsTerminal::is_terminal(&std::io::stderr()) && mode != Mode::Tiny).then(|| {
            let (pb, stop) = (pb.clone(), stop.clone());
            std::thread::spawn(move || plain_progress(&pb, &stop, t0))
        });
    let mut cx = Ctx {
        pb,
        warnings: Vec::new(),
        runs: 0,
    };
    let mut sections = Vec::new();
    sections.extend(with_load(&mut cx, |cx| throughput(cx, &plan, out))?);
    sections.extend(with_load(&mut cx, |cx| Ok(vec![series(cx, &plan)?]))?);
    sections.extend(with_load(&mut cx, |cx| streams(cx, &plan))?);
    sections.extend(with_load(&mut cx, |cx| {
        Ok(vec![batch_sweep(cx, &plan, out)?])
    })?);
    sections.extend(with_load(&mut cx, |cx| {
        Ok(vec![timeline(cx, &plan, out)?])
    })?);
    sections.extend(with_load(&mut cx, |cx| Ok(vec![others(cx, &plan)?]))?);
    sections.extend(with_load(&mut cx, |cx| Ok(vec![microbench(cx, &plan)?]))?);
    sections.extend(super::sim::sections(mode, &cx.pb)?);
    sections.extend(with_load(&mut cx, |cx| {
        let s = crate::twin::render::report_section(mode, out, &cx.pb);
        cx.pb.inc(1);
        Ok(vec![s])
    })?);
    cx.pb.finish_and_clear();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(h) = lines {
        let _ = h.join();
    }
    let seconds = t0.elapsed().as_secs_f64();
    let text = summary_text(&sections, mode, seconds, cx.runs);
    let files = write_report(out, &sections, mode, seconds, &text)?;
    Ok(Summary {
        files,
        seconds,
        warnings: cx.warnings,
        text,
    })
}
