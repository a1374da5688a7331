//! The replay's report: the lines with verdicts ([`ReplayReport`]), the text and
//! side-by-side tables, `replay.json` and the plots.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Side, Trip, TOLERANCE};
use crate::report::plot::{self, Chart, Series};

/// One line of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Line {
    /// `total` or `cpu N`.
    pub scope: String,
    /// What is compared.
    pub what: String,
    /// The kernel's value.
    pub kernel: f64,
    /// pagealloc's.
    pub pagealloc: f64,
    /// Within the tolerance (medians: equal).
    pub agree: bool,
}

pub(super) fn line(scope: &str, what: &str, k: f64, p: f64, exact: bool) -> Line {
    let agree = if exact {
        k == p
    } else {
        (p - k).abs() <= TOLERANCE * k.abs() || (k == 0.0 && p == 0.0)
    };
    Line {
        scope: scope.into(),
        what: what.into(),
        kernel: k,
        pagealloc: p,
        agree,
    }
}

/// What the replay found.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    /// The trace file.
    pub file: String,
    /// Kernel release of the recording.
    pub kernel_release: String,
    /// The command recorded.
    pub command: Vec<String>,
    /// The config replayed.
    pub config: String,
    /// Which preset fits the recording kernel.
    pub preset_note: String,
    /// Seconds of trace.
    pub seconds: f64,
    /// Events replayed (allocations + frees).
    pub replayed: u64,
    /// Sum of the totals' kernel refill trips.
    pub refill_trips_kernel: u64,
    /// pagealloc's.
    pub refill_trips_pagealloc: u64,
    /// Kernel drain trips.
    pub drain_trips_kernel: u64,
    /// pagealloc's.
    pub drain_trips_pagealloc: u64,
    /// Kernel pages refilled.
    pub pages_refilled_kernel: u64,
    /// pagealloc's.
    pub pages_refilled_pagealloc: u64,
    /// Kernel pages drained.
    pub pages_drained_kernel: u64,
    /// pagealloc's.
    pub pages_drained_pagealloc: u64,
    /// pagealloc's drains that were free_high drains.
    pub free_high_pagealloc: u64,
    /// The lines with verdicts, total first.
    pub lines: Vec<Line>,
    /// Per CPU that did anything: (cpu, kernel, pagealloc).
    pub cpus: Vec<(u32, Side, Side)>,
    /// Per CPU: pagealloc's `high` (summed over zones) every 10 ms of trace time.
    pub high_pagealloc: Vec<(u32, Vec<(f64, i64)>)>,
    /// Per CPU: the kernel's `high` (summed over zones) at the start and at the end.
    pub high_kernel: Vec<(u32, i64, i64)>,
    /// Allocations and frees in interrupt context.
    pub interrupt_ops: u64,
    /// Frees of blocks allocated before the trace began.
    pub freed_before_trace: u64,
    /// Allocations by THP-sized (order-9) blocks.
    pub order9_allocs: u64,
    /// pagealloc allocations that failed.
    pub failed_allocs: u64,
    /// Blocks taken off pagealloc's pagesets as allocations the kernel did not trace: at
    /// each kernel refill of a list, what pagealloc's copy of it still held (the kernel
    /// refills only an empty list; `alloc_pages_bulk` emits no `mm_page_alloc`).
    pub untraced_allocs_inferred: u64,
    /// Their pages.
    pub untraced_pages_inferred: u64,
    /// Per CPU: (CPU, blocks, pages) of [`ReplayReport::untraced_allocs_inferred`].
    pub untraced_inferred: Vec<(u32, u64, u64)>,
    /// Each CPU's pageset in the zone the stream mostly uses (the highest populated
    /// one), at the start: (cpu, kernel count, pagealloc count, kernel high,
    /// pagealloc high).
    pub start_pcp: Vec<(u32, i64, i64, i64, i64)>,
    /// Per CPU at the end: (CPU, kernel count, pagealloc count), all zones' pagesets.
    pub end_pcp: Vec<(u32, i64, i64)>,
    /// Things the reader should know.
    pub notes: Vec<String>,
}

/// The side-by-side table.
pub fn text(r: &ReplayReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "trace {} ({:?}), {:.2} s, {} allocations and frees replayed",
        r.file, r.command, r.seconds, r.replayed
    );
    let _ = writeln!(s, "{}; replayed through {}", r.preset_note, r.config);
    let _ = writeln!(
        s,
        "{:<8} {:<24} {:>12} {:>12} {:>8}  verdict",
        "scope", "what", "kernel", "pagealloc", "ratio"
    );
    for l in &r.lines {
        let ratio = if l.kernel > 0.0 {
            format!("{:.3}", l.pagealloc / l.kernel)
        } else {
            "-".into()
        };
        let _ = writeln!(
            s,
            "{:<8} {:<24} {:>12} {:>12} {:>8}  {}",
            l.scope,
            l.what,
            l.kernel,
            l.pagealloc,
            ratio,
            if l.agree {
                "agree"
            } else if l.what.contains("median") {
                "differ (medians must be equal)"
            } else {
                "differ (beyond ±5 %)"
            }
        );
    }
    for (c, kc, pc, kh, ph) in &r.start_pcp {
        let _ = writeln!(
            s,
            "cpu {c}: start pageset (main zone) kernel count {kc} high {kh}, pagealloc count {pc} high {ph}"
        );
    }
    for (c, kc, pc) in &r.end_pcp {
        let _ = writeln!(
            s,
            "cpu {c}: pagesets (all zones) at the end: kernel count {kc}, pagealloc count {pc}"
        );
    }
    for (c, a, b) in &r.high_kernel {
        let ph = r
            .high_pagealloc
            .iter()
            .find(|x| x.0 == *c)
            .and_then(|x| x.1.last())
            .map_or(0, |x| x.1);
        let _ = writeln!(s, "cpu {c}: high (all zones) kernel {a} at the start, {b} at the end; pagealloc {ph} at the end");
    }
    let _ = writeln!(
        s,
        "{} operations in interrupt context, {} order-9 allocations, {} frees of blocks allocated before the trace",
        r.interrupt_ops, r.order9_allocs, r.freed_before_trace
    );
    let per: Vec<String> = r
        .untraced_inferred
        .iter()
        .map(|(c, b, p)| format!("cpu {c} {b} blocks ({p} pages)"))
        .collect();
    let _ = writeln!(
        s,
        "{} untraced allocations inferred ({} pages: the kernel refilled a list pagealloc's copy still held pages on){}{}",
        r.untraced_allocs_inferred,
        r.untraced_pages_inferred,
        if per.is_empty() { "" } else { ": " },
        per.join(", ")
    );
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// The kernel beside several replays of one trace (the first report's lines; each
/// config's value, and `=` where it agrees with the kernel, `≠` where not).
pub fn side_by_side(reports: &[ReplayReport]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let Some(first) = reports.first() else {
        return s;
    };
    let names: Vec<&str> = reports
        .iter()
        .map(|r| r.config.split(',').next().unwrap_or(""))
        .collect();
    let _ = write!(s, "{:<8} {:<24} {:>10}", "scope", "what", "kernel");
    for n in &names {
        let _ = write!(s, " {n:>12}");
    }
    s.push('\n');
    for l in &first.lines {
        let _ = write!(s, "{:<8} {:<24} {:>10}", l.scope, l.what, l.kernel);
        for r in reports {
            let cell = r
                .lines
                .iter()
                .find(|x| x.scope == l.scope && x.what == l.what)
                .map_or("-".to_string(), |x| {
                    format!("{} {}", x.pagealloc, if x.agree { "=" } else { "≠" })
                });
            let _ = write!(s, " {cell:>12}");
        }
        s.push('\n');
    }
    s
}

fn cumulative(v: &[Trip]) -> Vec<(f64, f64)> {
    let mut acc = 0.0;
    let mut pts = vec![(0.0, 0.0)];
    for t in v {
        acc += t.pages as f64;
        pts.push((t.t, acc));
    }
    let step = pts.len().div_ceil(2000).max(1);
    let last = *pts.last().unwrap_or(&(0.0, 0.0));
    let mut out: Vec<_> = pts.into_iter().step_by(step).collect();
    out.push(last);
    out
}

/// Writes `replay.json` and a plot per CPU into `dir`, each whole or not at all.
///
/// # Errors
/// A file that cannot be written, as text.
pub fn write_files(r: &ReplayReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    let json = dir.join("replay.json");
    let tmp = dir.join(".replay.json.tmp");
    let text = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, text + "\n").map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &json).map_err(|e| format!("{}: {e}", json.display()))?;
    files.push(json);
    for (c, k, p) in &r.cpus {
        let chart = Chart {
            // The config is in replay.json and the text output; the preset alone fits here.
            title: format!(
                "replay CPU {c}: pages refilled and drained, kernel vs {}",
                r.config.split(',').next().unwrap_or("pagealloc")
            ),
            x_label: "seconds of trace".into(),
            y_label: "pages (cumulative)".into(),
            x_ranked: false,
            log_y: false,
            series: vec![
                Series {
                    name: "kernel refilled".into(),
                    points: cumulative(&k.refills),
                    dashed: false,
                },
                Series {
                    name: "pagealloc refilled".into(),
                    points: cumulative(&p.refills),
                    dashed: true,
                },
                Series {
                    name: "kernel drained".into(),
                    points: cumulative(&k.drains),
                    dashed: false,
                },
                Series {
                    name: "pagealloc drained".into(),
                    points: cumulative(&p.drains),
                    dashed: true,
                },
            ],
        };
        files.extend(
            plot::write(&chart, &dir.join(format!("replay_cpu{c}"))).map_err(|e| e.to_string())?,
        );
        if let Some((_, hs)) = r.high_pagealloc.iter().find(|x| x.0 == *c) {
            let (ks, ke) = r
                .high_kernel
                .iter()
                .find(|x| x.0 == *c)
                .map_or((0, 0), |x| (x.1, x.2));
            let chart = Chart {
                title: format!(
                    "replay CPU {c}: high (all zones), kernel (start, end) vs pagealloc"
                ),
                x_label: "seconds of trace".into(),
                y_label: "pages".into(),
                x_ranked: false,
                log_y: false,
                series: vec![
                    Series {
                        name: "pagealloc high".into(),
                        points: hs.iter().map(|x| (x.0, x.1 as f64)).collect(),
                        dashed: true,
                    },
                    Series {
                        name: "kernel high".into(),
                        points: vec![(0.0, ks as f64), (r.seconds, ke as f64)],
                        dashed: false,
                    },
                ],
            };
            files.extend(
                plot::write(&chart, &dir.join(format!("replay_high_cpu{c}")))
                    .map_err(|e| e.to_string())?,
            );
        }
    }
    Ok(files)
}
