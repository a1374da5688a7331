//! The fixed cost of a zone-lock trip on the live kernel, from recordings of a
//! page_fault1 loop (`sim::calibrate::live`, docs/sim-cost-model.md §4.1).
//!
//! ```text
//! pagealloc trace record --pages-only --out r.trace -- \
//!     pagealloc predict-program --cpus 1 --pages 32768 --count 4 --extra 0 --result r.json page_fault1
//! cargo run --release -p pagealloc-lab --example trip_cost -- r.trace [more.trace …]
//! ```
//!
//! One line per recording and direction, then per direction the median of the
//! recordings' fixed costs and their range.

use std::process::ExitCode;

use pagealloc_lab::sim::calibrate::live::{busiest_task, quantile, trip_costs};
use pagealloc_lab::trace::format;

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: trip_cost TRACE [TRACE…] (recordings of `pagealloc trace record`)");
        return ExitCode::from(2);
    }
    let mut fixed: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for p in &paths {
        let (_, events) = match format::read(std::path::Path::new(p)) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("{p}: {e}");
                return ExitCode::from(2);
            }
        };
        let Some((pid, cpu)) = busiest_task(&events) else {
            eprintln!("{p}: no allocation in task context");
            return ExitCode::from(2);
        };
        for (k, c) in trip_costs(&events, pid, cpu).iter().enumerate() {
            let Some(c) = c else { continue };
            println!(
                "{p}: {:<6} {:>5} trips of {:>5.0} blocks: baseline {:>5.0}, lead {:>5.0}, trail {:>5.0}, inner {:>4.0} ns → fixed {:>5.0} ns (quartiles {:.0} … {:.0})",
                c.direction,
                c.trips,
                c.blocks,
                c.baseline_ns,
                c.lead_ns,
                c.trail_ns,
                c.inner_ns,
                c.fixed_ns,
                c.fixed_quartiles_ns.0,
                c.fixed_quartiles_ns.1
            );
            fixed[k].push(c.fixed_ns);
        }
    }
    for (name, mut v) in ["refill", "drain"].into_iter().zip(fixed) {
        if v.is_empty() {
            continue;
        }
        let med = quantile(&mut v, 0.5);
        println!(
            "{name}: fixed cost per trip, median of {} recordings {med:.0} ns (range {:.0} … {:.0})",
            v.len(),
            v[0],
            v[v.len() - 1]
        );
    }
    ExitCode::SUCCESS
}
