//! The twin's outputs: the side-by-side table (text or Markdown), JSON and one plot per
//! CPU of `high` and `count` over time, kernel beside pagealloc.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::compare::Verdict;
use super::TwinReport;
use crate::report::plot::{self, Chart, Series};

/// Points per plotted line at most (samples are thinned evenly).
const MAX_POINTS: usize = 1500;

/// The header lines: what ran, on what, and the state of the machine before it.
pub fn header(r: &TwinReport) -> Vec<String> {
    let mut h = vec![format!(
        "twin {} on Linux {}: CPUs {:?}, {} pages per loop, zone {}; {:.1} s run, {:.1} s idle sampled",
        r.workload,
        r.kernel_release,
        r.cpus,
        r.pages,
        r.zone,
        r.kernel.run_seconds,
        r.kernel
            .samples
            .iter()
            .filter(|s| s.idle)
            .map(|s| s.t)
            .fold(r.kernel.run_seconds, f64::max)
            - r.kernel.run_seconds
    )];
    h.push(format!("pagealloc config {}: {}", r.config, r.config_why));
    for (i, c) in r.cpus.iter().enumerate() {
        h.push(format!(
            "CPU {c} (#{i}): {:.0} pages/s; before the run {} pages parked (high {}), {:.0} % idle; lowest count in the run {}",
            r.rates.get(i).copied().unwrap_or(0.0),
            r.before.count.get(i).copied().unwrap_or(0),
            r.before.high.get(i).copied().unwrap_or(0),
            r.before.idle_pct.get(i).copied().unwrap_or(f64::NAN),
            r.before.run_floor.get(i).copied().unwrap_or(0),
        ));
    }
    h
}

/// The comparison table; `markdown` for the report, else aligned text.
pub fn table(r: &TwinReport, markdown: bool) -> String {
    let head = ["", "", "kernel", "pagealloc", "tolerance", "verdict"];
    let rows: Vec<[String; 6]> = r
        .lines
        .iter()
        .map(|l| {
            [
                l.group.clone(),
                l.what.clone(),
                l.kernel.clone(),
                l.ours.clone(),
                l.tolerance.clone(),
                l.verdict.label().to_owned(),
            ]
        })
        .collect();
    let mut s = String::new();
    if markdown {
        let _ = writeln!(s, "| {} |", head.join(" | "));
        let _ = writeln!(s, "|{}", "---|".repeat(head.len()));
        for row in &rows {
            let _ = writeln!(s, "| {} |", row.join(" | "));
        }
    } else {
        let mut w = head.map(|h| h.chars().count());
        for row in &rows {
            for (i, c) in row.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let fmt = |cells: &[String]| -> String {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let pad = w[i] - c.chars().count();
                    if (2..4).contains(&i) {
                        format!("{}{c}", " ".repeat(pad))
                    } else {
                        format!("{c}{}", " ".repeat(pad))
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        };
        let _ = writeln!(s, "{}", fmt(&head.map(str::to_owned)));
        for row in &rows {
            let _ = writeln!(s, "{}", fmt(row));
        }
    }
    s
}

/// "N of M lines agree".
pub fn summary(r: &TwinReport) -> String {
    let judged = r
        .lines
        .iter()
        .filter(|l| l.verdict != Verdict::NotApplicable)
        .count();
    let ok = r
        .lines
        .iter()
        .filter(|l| l.verdict == Verdict::Agree)
        .count();
    format!("{ok} of {judged} lines agree within tolerance")
}

/// The whole text output.
pub fn text(r: &TwinReport) -> String {
    let mut s = header(r).join("\n");
    s.push_str("\n\n");
    s.push_str(&table(r, false));
    let _ = writeln!(s, "\n{}", summary(r));
    if !r.notes.is_empty() {
        s.push_str("notes:\n");
        for n in &r.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    points.into_iter().step_by(step).collect()
}

/// One chart per CPU of the run.
pub fn charts(r: &TwinReport) -> Vec<(String, Chart)> {
    (0..r.cpus.len())
        .map(|i| {
            let line = |name: &str, tr: &super::Trajectory, high: bool| Series {
                name: name.to_owned(),
                points: thin(
                    tr.samples
                        .iter()
                        .map(|s| {
                            let p = s.pcp[i];
                            (s.t, if high { p.high } else { p.count } as f64)
                        })
                        .collect(),
                ),
                dashed: false,
            };
            (
                format!("twin_{}_cpu{}", r.workload, r.cpus[i]),
                Chart {
                    title: format!(
                        "twin {}: CPU {} {} pageset, kernel vs pagealloc (run ends at {:.1} s)",
                        r.workload, r.cpus[i], r.zone, r.kernel.run_seconds
                    ),
                    x_label: "seconds".into(),
                    y_label: "pages".into(),
                    x_ranked: false,
                    log_y: false,
                    series: vec![
                        line("kernel high", &r.kernel, true),
                        line("pagealloc high", &r.ours, true),
                        line("kernel count", &r.kernel, false),
                        line("pagealloc count", &r.ours, false),
                    ],
                },
            )
        })
        .collect()
}

/// Writes `twin_<workload>.json` and the plots into `dir`; returns the files.
///
/// # Errors
/// A file that cannot be written, as text.
pub fn write_files(r: &TwinReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    let json = dir.join(format!("twin_{}.json", r.workload));
    let text = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    std::fs::write(&json, text + "\n").map_err(|e| format!("{}: {e}", json.display()))?;
    files.push(json);
    for (stem, chart) in charts(r) {
        files.extend(plot::write(&chart, &dir.join(stem)).map_err(|e| e.to_string())?);
    }
    Ok(files)
}

/// The report's twin section: `page_fault1` for a few seconds on this machine, when it
/// allows it; otherwise the section says why not. Never fails the report.
pub fn report_section(
    mode: crate::report::Mode,
    out: &Path,
    pb: &indicatif::ProgressBar,
) -> crate::report::Section {
    use crate::report::{Mode, Section};
    let mut s = Section {
        id: "twin".into(),
        title: "Live-kernel twin: page_fault1 on this kernel and on pagealloc".into(),
        ..Section::default()
    };
    let (seconds, idle) = match mode {
        Mode::Full => (4.0, 12.0),
        Mode::Quick => (2.0, 4.0),
        Mode::Tiny => {
            s.intro = "Not run in the tiny suite (it needs seconds of the live kernel); \
                       `pagealloc twin page_fault1` runs it."
                .into();
            return s;
        }
    };
    pb.set_message(format!(
        "twin: page_fault1 on the kernel, {seconds} s + {idle} s idle"
    ));
    let opts = super::TwinOptions {
        seconds,
        idle_seconds: idle,
        out: Some(out.to_path_buf()),
        ..super::TwinOptions::new(super::TwinWorkload::PageFault1)
    };
    match super::run(&opts, &mut |_| {}) {
        Ok(r) => {
            let mut t = String::new();
            let _ = writeln!(
                t,
                "Every CPU maps 128 MiB, touches every page and unmaps it, in forked \
                 processes, while `/proc/zoneinfo` is sampled every 10 ms; pagealloc \
                 (the config that models the running kernel) is built from the kernel's \
                 zones and sysctls and driven with \
                 the same operations at the measured rates (`pagealloc twin --help`).\n"
            );
            for h in header(&r) {
                let _ = writeln!(t, "- {h}");
            }
            let _ = writeln!(t, "\n{}", table(&r, true));
            let _ = writeln!(t, "{}.", summary(&r));
            s.closeness = Some(format!("live-kernel twin (page_fault1): {}", summary(&r)));
            for n in &r.notes {
                let _ = writeln!(t, "\n- {n}");
            }
            s.intro = t;
            s.plots = charts(&r)
                .into_iter()
                .map(|(stem, _)| format!("{stem}.png"))
                .collect();
        }
        Err(e) => {
            s.intro = format!("Not run on this machine: {e}.");
            s.closeness = Some(format!("live-kernel twin: skipped ({e})"));
        }
    }
    s
}
