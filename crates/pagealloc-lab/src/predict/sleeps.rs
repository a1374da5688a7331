//! A stream's sleeps as the recorder saw them: per task, the times it left its CPU
//! asleep (`sched_switch` with a non-zero `prev_state`) inside its window, and how long
//! a wakeup took to run it (`sched_waking` to the `sched_switch` onto it).
//!
//! `predict` compares the sleeps of the runs without the recorder (the tasks' own
//! voluntary-switch counts): the tracer slows the traced tasks unevenly (an AF_UNIX
//! writer pays for every page event it emits), which changes who waits for whom. These
//! figures are the traced run's, for the note beside them.

use std::collections::HashMap;

use super::program::ProgramResult;
use crate::trace::format::{Event, EventKind};

/// Per task of `prog` (in its order): sleeps in its window, and the median time from
/// a `sched_waking` of it to its `sched_switch` in, ns (0 without wakeups recorded).
/// `ev` as the recorder returns them (times from `t0_ns` on the monotonic clock).
pub fn traced(ev: &[Event], t0_ns: u64, prog: &ProgramResult) -> Vec<(u64, u64)> {
    let index: HashMap<u32, usize> = prog
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.pid, i))
        .collect();
    let inside = |i: usize, ts: u64| {
        let t = &prog.tasks[i];
        (t.start_ns..=t.end_ns).contains(&(ts + t0_ns))
    };
    let mut sleeps = vec![0u64; prog.tasks.len()];
    let mut waking: HashMap<u32, u64> = HashMap::new();
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); prog.tasks.len()];
    for e in ev {
        match e.kind {
            EventKind::Waking => {
                let pid = e.pfn as u32;
                if index.get(&pid).is_some_and(|&i| inside(i, e.ts)) {
                    waking.entry(pid).or_insert(e.ts);
                }
            }
            EventKind::Switch => {
                let (prev, next) = (e.pfn as u32, (e.aux & 0xffff_ffff) as u32);
                let state = (e.aux >> 32) & 0xff;
                if let Some(&i) = index.get(&prev) {
                    if state != 0 && inside(i, e.ts) {
                        sleeps[i] += 1;
                    }
                }
                if let (Some(&i), Some(w)) = (index.get(&next), waking.remove(&next)) {
                    latencies[i].push(e.ts.saturating_sub(w));
                }
            }
            _ => {}
        }
    }
    sleeps
        .into_iter()
        .zip(latencies)
        .map(|(s, mut l)| {
            l.sort_unstable();
            (s, l.get(l.len() / 2).copied().unwrap_or(0))
        })
        .collect()
}

/// The note `predict` prints for a traced stream: each end's sleeps per operation
/// and median wakeup latency.
pub fn note(ev: &[Event], t0_ns: u64, prog: &ProgramResult) -> String {
    let ops = prog.ops.max(1) as f64;
    let per = traced(ev, t0_ns, prog)
        .iter()
        .zip(["writer", "reader"])
        .map(|(&(s, l), side)| {
            format!(
                "{side} {:.3} (wakeup to running {:.1} µs)",
                s as f64 / ops,
                l as f64 * 1e-3
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!("kernel, traced (sched_switch, sched_waking): sleeps/op {per}")
}

#[cfg(test)]
mod tests {
    use super::traced;
    use crate::predict::program::{ProgramResult, TaskWindow};
    use crate::trace::format::{Event, EventKind};

    fn at(ts: u64, kind: EventKind, pfn: u64, aux: u64) -> Event {
        Event {
            ts,
            aux,
            ..Event::synthetic(0, kind, pfn)
        }
    }

    /// A sleep counts when the task leaves its CPU in a sleeping state inside its
    /// window; a preemption (state 0) or a sleep outside the window does not; the
    /// wakeup latency runs from `sched_waking` to the switch onto the task.
    #[test]
    fn sleeps_and_wakeup_latency() {
        let prog = ProgramResult {
            ops: 1,
            tasks: vec![TaskWindow {
                pid: 5,
                start_ns: 100,
                end_ns: 1_000,
                ..TaskWindow::default()
            }],
        };
        let asleep = 1u64 << 32;
        let ev = [
            at(50, EventKind::Switch, 5, 9 | asleep),
            at(200, EventKind::Switch, 5, 9 | asleep),
            at(300, EventKind::Waking, 5, 0),
            at(340, EventKind::Switch, 9, 5),
            at(400, EventKind::Switch, 5, 9),
            at(500, EventKind::Switch, 9, 5),
        ];
        assert_eq!(traced(&ev, 0, &prog), vec![(1, 40)]);
    }
}
