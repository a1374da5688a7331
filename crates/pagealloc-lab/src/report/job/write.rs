//! The report's opening summary and its files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::exec;
use crate::report::section::{Mode, Section};
use crate::report::{markdown_table, ReportError};

fn host_line() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or_else(
            || "?".into(),
            |kb| format!("{:.1} GiB", kb as f64 / 1048576.0),
        );
    format!(
        "{model}, {} CPUs usable, {mem} RAM, Linux {kernel}",
        exec::host_cpus()
    )
}

/// The load line of a real-thread section, with a warning when the load was above the
/// CPUs this process may use.
fn load_line(load: (f64, f64)) -> String {
    let cpus = exec::host_cpus().max(1) as f64;
    let mut s = format!(
        "Measured on this host ({}); load average (1 min) {:.2} when the section started, \
         {:.2} when it ended.",
        host_line(),
        load.0,
        load.1
    );
    if load.0.max(load.1) > cpus {
        s += &format!(
            " **Warning: load above the {cpus:.0} usable CPUs**: other processes competed \
             for the CPUs, so absolute times (ns, µs, pages/s) are inflated and differ from \
             run to run, and off-CPU time shows as idle %; compare rows of one table \
             (ratios, measured side by side), not absolute figures across reports."
        );
    }
    s
}

/// What the report opens with: what was run, on what, how long, and how close each
/// reproduced table came.
pub(super) fn summary_text(sections: &[Section], mode: Mode, seconds: f64, runs: u32) -> String {
    let mut t = String::new();
    let loads: Vec<f64> = sections
        .iter()
        .filter_map(|s| s.load)
        .flat_map(|(a, b)| [a, b])
        .collect();
    let (lo, hi) = loads
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
    let cpus = exec::host_cpus();
    let _ = writeln!(t, "## Summary\n");
    let _ = writeln!(
        t,
        "- **What ran**: the {} suite, {runs} workload runs on real threads (one pinned \
         thread per CPU, every run ending with `validate()` and a check of every block), \
         LLFree's microbenchmarks, the simulator's kbuild ablation and batch sweep, and the \
         live-kernel twin: {} sections below.",
        match mode {
            Mode::Full => "default",
            Mode::Quick => "`--quick`",
            Mode::Tiny => "tiny (tests)",
        },
        sections.len()
    );
    let _ = writeln!(t, "- **On**: {}.", host_line());
    if lo.is_finite() {
        let warn = if hi > cpus as f64 {
            format!(
                " **Above the {cpus} usable CPUs**: absolute times are inflated and vary \
                 between runs; the ratios within a table (measured side by side) are the \
                 figures to read."
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "- **Load** (1-minute average, sampled at each real-thread section's start and \
             end): {lo:.2} … {hi:.2}.{warn}"
        );
    }
    let _ = writeln!(
        t,
        "- **How long**: {seconds:.0} s for the suite (the build before it not included)."
    );
    let _ = writeln!(
        t,
        "- **How close to the published figures** (sources: \
         crates/pagealloc-lab/docs/published.md; differences are ours against published, \
         relative):"
    );
    for s in sections {
        if let Some(c) = &s.closeness {
            let _ = writeln!(t, "  - {c}.");
        }
    }
    let _ = writeln!(
        t,
        "  - netperf, lmbench, the other workloads and the microbenchmarks: no published \
         figures in the project's reference (held out, or not the same machine and \
         allocator), so no comparison."
    );
    let _ = writeln!(
        t,
        "- **Reading the tables**: score, free_high, alloc_zone and PCP pages are % of the \
         table's first row where the section says so; zone lock % = time waiting for zone \
         locks ÷ CPU time, where the wait is wall time (a waiter that yields its CPU, or \
         is preempted, is still waiting), so on a loaded machine it can pass 100 %. A *trip* is one pass under a zone lock (a refill when \
         allocating, a drain when freeing; µs, as published); a *call* is one allocation \
         or free, PCP hits included (ns). Each latency table gives count, avg, p50, p99, \
         p99.9 and max from one histogram, and `tail %`, the share of all the time that \
         the values above the p99 carry. Where the average exceeds the p99, that tail \
         carries most of the time: a few trips hundreds of times longer than the rest, \
         during which the thread was descheduled (preempted inside the trip, or waiting \
         for the lock behind a preempted holder) on a machine with more runnable threads \
         than CPUs. Read p50 and p99 for the allocator, max and p99.9 for the machine.\n"
    );
    t
}

/// Writes `report.md` (opening with `summary`), one `<id>.json` per section (an array
/// of rows) and its further data files, and returns the files written (plots were
/// written by their sections).
///
/// # Errors
/// A file that cannot be written.
pub fn write_report(
    out: &Path,
    sections: &[Section],
    mode: Mode,
    seconds: f64,
    summary: &str,
) -> Result<Vec<PathBuf>, ReportError> {
    let mut files = Vec::new();
    let mut md = String::new();
    let _ = writeln!(md, "# pagealloc lab report\n");
    let _ = writeln!(
        md,
        "Suite: {} ({:.0} s). Host: {}. Real threads, one pinned per CPU; every run ends \
         with `validate()` and a check of every block returned.\n",
        match mode {
            Mode::Full => "default",
            Mode::Quick => "--quick",
            Mode::Tiny => "--tiny",
        },
        seconds,
        host_line()
    );
    md.push_str(summary);
    md.push('\n');
    for s in sections {
        let _ = writeln!(md, "## {}\n", s.title);
        if let Some(load) = s.load {
            let _ = writeln!(md, "{}\n", load_line(load));
        }
        if !s.intro.is_empty() {
            let _ = writeln!(md, "{}\n", s.intro);
        }
        if !s.rows.is_empty() {
            md.push_str(&markdown_table(&s.rows, &s.columns));
            md.push('\n');
        }
        if !s.after.is_empty() {
            let _ = writeln!(md, "{}\n", s.after.trim_end());
        }
        for p in &s.plots {
            let stem = p.trim_end_matches(".png");
            let _ = writeln!(md, "![{}]({p}) ([SVG]({stem}.svg))\n", s.title);
            files.push(out.join(p));
            files.push(out.join(format!("{stem}.svg")));
        }
        let _ = writeln!(md, "Data: [`{}.json`]({}.json)\n", s.id, s.id);
        let json = serde_json::to_string_pretty(&s.rows).expect("rows serialise");
        let path = out.join(format!("{}.json", s.id));
        std::fs::write(&path, json + "\n").map_err(|e| ReportError::io(&path, e))?;
        files.push(path);
        for (stem, value) in &s.data {
            let json = serde_json::to_string_pretty(value).expect("JSON values serialise");
            let path = out.join(format!("{stem}.json"));
            std::fs::write(&path, json + "\n").map_err(|e| ReportError::io(&path, e))?;
            files.push(path);
        }
    }
    let path = out.join("report.md");
    std::fs::write(&path, md).map_err(|e| ReportError::io(&path, e))?;
    files.push(path);
    Ok(files)
}
