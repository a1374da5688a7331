//! Progress of a command of many runs, on a terminal and in a log.

use crate::Row;

/// Progress of a command of many runs: indicatif's bar with an ETA on a terminal; with
/// `lines` and stderr not a terminal (a log, CI), one plain line per finished run instead
/// (what finished, the time so far and the ETA at the mean time per run).
#[derive(Debug)]
pub struct Progress {
    bar: indicatif::ProgressBar,
    lines: bool,
    total: u64,
    done: std::sync::atomic::AtomicU64,
    t0: std::time::Instant,
}

impl Progress {
    /// Progress over `total` runs; `lines`: print a line per run where no bar shows.
    pub fn new(total: u64, lines: bool) -> Self {
        use std::io::IsTerminal;
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} {msg} ETA {eta}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        Progress {
            bar,
            lines: lines && !std::io::stderr().is_terminal(),
            total,
            done: std::sync::atomic::AtomicU64::new(0),
            t0: std::time::Instant::now(),
        }
    }

    /// Names the run under way (the bar's message).
    pub fn set_message(&self, m: String) {
        self.bar.set_message(m);
    }

    /// One more run finished: `what` it was.
    pub fn inc(&self, what: &str) {
        self.bar.inc(1);
        let n = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if self.lines {
            let elapsed = self.t0.elapsed().as_secs_f64();
            let eta = elapsed / n as f64 * self.total.saturating_sub(n) as f64;
            eprintln!(
                "[{n}/{}] {what}; elapsed {elapsed:.0} s, ETA {eta:.0} s",
                self.total
            );
        }
    }

    /// One simulation finished with `row`: its config, machine, wall time and page ops/s.
    pub fn finished(&self, row: &Row) {
        self.inc(&format!(
            "{} on {}: {:.1} s, {:.2} M page ops/s per core",
            row.config.as_deref().unwrap_or("-"),
            row.machine.as_deref().unwrap_or("-"),
            row.wall_s.unwrap_or(0.0),
            row.extra.get("page_ops_per_cpu_s").copied().unwrap_or(0.0) / 1e6,
        ));
    }

    /// Prints `m` on stderr without tearing the bar.
    pub fn println(&self, m: &str) {
        self.bar.suspend(|| eprintln!("{m}"));
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
