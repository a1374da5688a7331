//! The other processes on a program's CPUs, read off its recording: their allocations
//! and frees of pageset orders while the program ran there and the vmstat worker's
//! passes, which the simulator replays beside the program (`sim::start::Background`),
//! and every process's events as changes to the pagesets' lists (the start state's
//! reading).

use std::collections::HashMap;

use super::program::{ProgramResult, TaskWindow};
use crate::sim::start;
use crate::trace::format::{Event, EventKind};

/// Every process's page events as changes to their pagesets' lists, read as `trace
/// replay` reads its start ([`crate::trace::lists::list_events`], the untraced
/// allocations at the kernel's refills included). `spans`: each allocator zone's pfns.
pub(super) fn list_events(ev: &[Event], spans: &[(u64, u64)]) -> Vec<start::ListEvent> {
    let zone_of = |pfn: u64| {
        spans
            .iter()
            .position(|&(a, b)| (a..b).contains(&pfn))
            .unwrap_or(usize::MAX)
    };
    let cached = |o: u8| o <= 3 || o == 9;
    let untraced = crate::trace::untraced::refill_starts(ev, zone_of, cached);
    crate::trace::lists::list_events(ev, zone_of, cached, &untraced).events
}

/// A decay tick of `cpu`'s pagesets (the vmstat worker's pass), replayed after the ops
/// of that CPU done so far (`done`).
fn decay_tick(cpu: u32, done: &HashMap<u32, u64>) -> start::BackgroundOp {
    start::BackgroundOp {
        cpu: cpu as usize,
        after: done.get(&cpu).copied().unwrap_or(0),
        order: 0,
        gfp: pagealloc::Gfp(0),
        alloc: false,
        before: None,
        tick: true,
    }
}

/// The other processes' allocations and frees of pageset orders on the program's CPUs
/// while the program ran there (from its first task's window start to its last one's
/// end on that CPU; with `pre_window`, from the recording's start, less the program's
/// own task-context ops before its window), each with the program's allocations and
/// frees on that CPU before it ([`start::Background`]), and a note of their totals. A
/// free is kept when its block was allocated by such an op (an earlier one, on any of
/// these CPUs).
pub(super) fn background(
    ev: &[Event],
    t0: u64,
    prog: &ProgramResult,
    cpus: u32,
    owner: &super::foreign::Frees,
    pre_window: bool,
) -> (Vec<start::BackgroundOp>, String) {
    let cached = |o: u8| o <= 3 || o == 9;
    let mut span: HashMap<u32, (u64, u64)> = HashMap::new();
    for t in &prog.tasks {
        let s = span.entry(t.cpu).or_insert((u64::MAX, 0));
        *s = (s.0.min(t.start_ns), s.1.max(t.end_ns));
    }
    let win: HashMap<u32, TaskWindow> = prog.tasks.iter().map(|t| (t.pid, *t)).collect();
    let mut done: HashMap<u32, u64> = HashMap::new();
    let mut live: HashMap<u64, (u8, i8, u64)> = HashMap::new();
    let mut out = Vec::new();
    let (mut allocs, mut frees, mut unseen, mut other) = (0u64, 0u64, 0u64, 0u64);
    let mut ticks = 0u64;
    // Per CPU: the last page event's task and kind.
    let mut last: HashMap<u32, (u32, EventKind)> = HashMap::new();
    let types = crate::trace::format::pageblock_types(ev);
    // The vmstat worker's passes, where recorded (`EventKind::Vmstat`): each is a decay
    // of the CPU's pagesets, whether or not it drained (one that drains nothing leaves
    // no page event, only the lower `high`). Those before the program's window on the
    // CPU (its prelude) run as the window begins. Without them, a run of drains is read
    // as a decay (below).
    let passes = ev.iter().any(|e| e.kind == EventKind::Vmstat);
    for e in ev.iter().filter(|e| e.cpu < cpus) {
        let t = e.ts + t0;
        if e.kind == EventKind::Vmstat {
            if span.get(&e.cpu).is_some_and(|s| t <= s.1) {
                ticks += 1;
                out.push(decay_tick(e.cpu, &done));
            }
            continue;
        }
        // A run of drains by another task on the program's CPU that no free of that
        // task's began: the vmstat worker's decay of the CPU's pagesets (its `high`
        // lowered, the pages above it drained), replayed as a decay tick.
        let prev = if e.kind.is_page() {
            last.insert(e.cpu, (e.pid, e.kind))
        } else {
            last.get(&e.cpu).copied()
        };
        let inside = span.get(&e.cpu).is_some_and(|s| (s.0..=s.1).contains(&t));
        if e.kind == EventKind::PcpuDrain
            && !passes
            && inside
            && !win.contains_key(&e.pid)
            && !matches!(
                prev,
                Some((pid, EventKind::PcpuDrain | EventKind::Free | EventKind::FreeBatched))
                    if pid == e.pid
            )
        {
            ticks += 1;
            out.push(decay_tick(e.cpu, &done));
        }
        // A free is the block's owner's (`foreign`).
        let mine = owner.counts(
            e,
            win.get(&e.pid)
                .is_some_and(|w| (w.start_ns..=w.end_ns).contains(&t)),
        );
        if mine {
            if matches!(e.kind, EventKind::Alloc | EventKind::Free) {
                *done.entry(e.cpu).or_default() += 1;
            }
            continue;
        }
        // Before a faulting program's window (its prelude, its start): the other
        // processes' ops on its CPUs, and the frees in interrupt context in its task
        // (RCU's), took from and gave to the lists the start state seeded; they run as
        // the window begins (a stream's start is not replayed).
        let earlier = pre_window
            && span.get(&e.cpu).is_some_and(|s| t < s.0)
            && (!win.contains_key(&e.pid) || e.in_interrupt());
        if !(inside || earlier) || !cached(e.order) {
            continue;
        }
        let after = done.get(&e.cpu).copied().unwrap_or(0);
        match e.kind {
            EventKind::Alloc => {
                live.insert(e.pfn, (e.order, e.mt, e.aux));
                allocs += 1;
                out.push(start::BackgroundOp {
                    cpu: e.cpu as usize,
                    after,
                    order: e.order,
                    gfp: crate::trace::replay::gfp_of(e.aux, e.mt),
                    alloc: true,
                    before: None,
                    tick: false,
                });
            }
            EventKind::Free => match live.remove(&e.pfn) {
                Some((order, mt, aux)) if order == e.order => {
                    frees += 1;
                    out.push(start::BackgroundOp {
                        cpu: e.cpu as usize,
                        after,
                        order,
                        gfp: crate::trace::replay::gfp_of(aux, mt),
                        alloc: false,
                        before: None,
                        tick: false,
                    });
                }
                // A block allocated before: held from the start, freed when due, its
                // migratetype its pageblock's as the recording shows it (else movable).
                None => {
                    unseen += 1;
                    out.push(start::BackgroundOp {
                        cpu: e.cpu as usize,
                        after,
                        order: e.order,
                        gfp: match types.get(&(e.pfn >> 9)) {
                            Some(0) => pagealloc::Gfp(0),
                            Some(2) => pagealloc::Gfp::RECLAIMABLE,
                            _ => pagealloc::Gfp::MOVABLE,
                        },
                        alloc: false,
                        before: Some(e.pfn),
                        tick: false,
                    });
                }
                Some(_) => other += 1,
            },
            _ => {}
        }
    }
    let how = if passes {
        "its recorded passes, the prelude's as the window begins"
    } else {
        "drains no free began"
    };
    let note = format!(
        "kernel: other processes on the program's CPUs while it ran: {allocs} allocations and {frees} frees of their blocks (replayed beside it in the simulator), {unseen} frees of blocks allocated before (held from the start, replayed), {other} of another order than allocated (not replayed); {ticks} decays of the CPUs' pagesets by the vmstat worker ({how}: replayed as decay ticks)"
    );
    (out, note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::program::Size;
    use crate::predict::PredictOptions;
    use crate::sim::start::{PagesetStart, StartState};
    use pagealloc::{MigrateType, SeedList};

    fn at(ts: u64, pid: u32, kind: EventKind, pfn: u64) -> Event {
        Event {
            ts,
            pid,
            pfn,
            mt: 1,
            ..Event::synthetic(0, kind, pfn)
        }
    }

    fn ticks(ops: &[start::BackgroundOp]) -> Vec<u64> {
        ops.iter().filter(|o| o.tick).map(|o| o.after).collect()
    }

    /// The vmstat worker's recorded passes on the program's CPU are its decays, drained
    /// or not: one in the prelude runs as the window begins, one inside it after the
    /// program's ops before it, one after the window not at all, and the pass's own
    /// drain is not read as another. Without recorded passes a run of drains by another
    /// task is still read as one. Another process's allocation before the window runs as
    /// the window begins (a faulting program's), the prelude's own does not.
    #[test]
    fn vmstat_passes_are_decay_ticks() {
        let prog = ProgramResult {
            ops: 1,
            tasks: vec![TaskWindow {
                pid: 7,
                start_ns: 100,
                end_ns: 300,
                ..TaskWindow::default()
            }],
        };
        let worker = 4;
        let mut ev = vec![
            at(10, 7, EventKind::Alloc, 1), // the prelude's
            at(20, 9, EventKind::Alloc, 6), // another process's before the window
            at(50, worker, EventKind::Vmstat, 0xffff_8000),
            at(110, 7, EventKind::Alloc, 2),
            at(120, 7, EventKind::Free, 2),
            at(130, worker, EventKind::Vmstat, 0xffff_8000),
            at(131, worker, EventKind::PcpuDrain, 3),
            at(140, 7, EventKind::Alloc, 5),
            at(400, worker, EventKind::Vmstat, 0xffff_8000),
        ];
        let owner = crate::predict::foreign::frees(&ev, 0, &prog);
        let (ops, note) = background(&ev, 0, &prog, 1, &owner, true);
        assert_eq!(ticks(&ops), vec![0, 2], "{ops:?}");
        // Before the window only the other process's allocation, as the window begins.
        let takes: Vec<_> = ops.iter().filter(|o| o.alloc).map(|o| o.after).collect();
        assert_eq!(takes, vec![0], "{ops:?}");
        let (ops, _) = background(&ev, 0, &prog, 1, &owner, false);
        assert!(
            ops.iter().all(|o| !o.alloc),
            "a stream's start is not replayed: {ops:?}"
        );
        assert!(
            note.contains("2 decays") && note.contains("recorded passes"),
            "{note}"
        );
        ev.retain(|e| e.kind != EventKind::Vmstat);
        let (ops, note) = background(&ev, 0, &prog, 1, &owner, true);
        assert_eq!(ticks(&ops), vec![2], "{ops:?}");
        assert!(note.contains("drains no free began"), "{note}");
    }

    /// A decay that drains nothing still lowers `high` by an eighth: page_fault1's
    /// frees then reach it and drain (through the simulator's counters), where
    /// without the pass they stay below the `high` the start state read.
    #[test]
    fn a_decay_that_drains_nothing_makes_the_frees_drain() {
        let opts = PredictOptions {
            workload: "page_fault1".into(),
            cpus: 1,
            size: Size {
                pages: 512,
                count: 1,
                extra: 0,
            },
            config: None,
            exe: "unused".into(),
            runs: 1,
        };
        // CPU 0's Normal pageset 16 000 pages deep, `high` 18 000: seven eighths of it,
        // 15 750, lies between the count after the loop's faults and after its unmap.
        let mut st = StartState {
            pagesets: vec![PagesetStart {
                cpu: 0,
                zone: 2,
                count: 16_000,
                high: 18_000,
                taken: vec![SeedList {
                    order: 0,
                    mt: MigrateType::Movable,
                    blocks: 600,
                }],
                used: [(0u8, 1u8)].into_iter().collect(),
                refilled: None,
                alloc_factor: 0,
                free_count: 0,
            }],
            ..StartState::default()
        };
        let quiet = crate::predict::simulate(&opts, "linux-6.18", &st)
            .unwrap()
            .0;
        st.background.push(start::BackgroundOp {
            cpu: 0,
            after: 400,
            order: 0,
            gfp: pagealloc::Gfp(0),
            alloc: false,
            before: None,
            tick: true,
        });
        let decayed = crate::predict::simulate(&opts, "linux-6.18", &st)
            .unwrap()
            .0;
        assert_eq!(quiet.drains_per_op, 0.0, "{quiet:?}");
        assert!(decayed.drains_per_op > 0.0, "{decayed:?}");
        // The pass itself drained nothing: every drain is the program's, on a free.
        assert!(decayed.pcp_end < 0.0, "{decayed:?}");
    }
}
