//! Frees the kernel makes in a faulting program's window, in the context of one of its
//! tasks, of blocks no task of the program allocated: other processes' blocks, not the
//! program's work.
//!
//! # Design
//! A forked faulting program (`page_fault1`, `parallel_free`, `thp_mix`) frees only
//! what its own tasks allocated, in its prelude or in its window, and the recording
//! holds both (the recorder starts the program). Two of the kernel's deferred frees run
//! in whatever task is on the CPU and free other processes' blocks there (`perf record
//! -k CLOCK_MONOTONIC -e kmem:mm_page_alloc -e kmem:mm_page_free -g -C 0 --
//! pagealloc predict-program thp_mix --cpus 1`, each freed pfn matched to its
//! allocation; 2026-11-27, four runs: 0, 25, 38 and 78 such frees in the window, all of
//! other processes' blocks but one page table of the program's prelude):
//! - the CPU's LRU add batch (`folio_batch_move_lru` under `map_anon_folio_pmd`: a THP
//!   flushes the batch at once) drops its references to the pages of processes that
//!   ran on the CPU before and have unmapped them since (`readlink`, shells: 22-27
//!   order-0 movable pages at the program's first THP fault);
//! - RCU's callbacks, in the softirq that interrupts the program's task: page tables of
//!   exited processes (`tlb_remove_table_rcu`, 16-51) and other RCU-freed pages.
//!
//! They are counted as other processes' frees: out of the program's blocks per
//! operation and pageset lines, and replayed beside it in the simulator as frees of
//! blocks held from the start (`kernel::background`), as the other processes' own
//! frees on its CPUs are.

use std::collections::{HashMap, HashSet};

use super::program::{ProgramResult, TaskWindow};
use crate::trace::format::{Event, EventKind};

/// The frees (`ts`, `pfn`) by the program's tasks inside their windows of blocks none
/// of its tasks allocated earlier in the recording, for the faulting programs
/// ([`super::kernel::timed_in_batches`]); none for the streams, whose tasks are threads
/// of a process whose main thread allocates too. `ev` sorted by time, from `t0` on the
/// monotonic clock.
pub fn foreign_frees(
    workload: &str,
    ev: &[Event],
    t0: u64,
    prog: &ProgramResult,
) -> HashSet<(u64, u64)> {
    let mut out = HashSet::new();
    if !super::kernel::timed_in_batches(workload) {
        return out;
    }
    let win: HashMap<u32, TaskWindow> = prog.tasks.iter().map(|t| (t.pid, *t)).collect();
    // Blocks the program's tasks hold, by first pfn (a count: a synthetic or lost-event
    // recording may show a pfn allocated twice).
    let mut held: HashMap<u64, u32> = HashMap::new();
    for e in ev {
        let Some(w) = win.get(&e.pid) else {
            continue;
        };
        match e.kind {
            EventKind::Alloc => *held.entry(e.pfn).or_default() += 1,
            EventKind::Free => {
                let own = match held.get_mut(&e.pfn) {
                    Some(n) if *n > 1 => {
                        *n -= 1;
                        true
                    }
                    Some(_) => held.remove(&e.pfn).is_some(),
                    None => false,
                };
                let t = e.ts + t0;
                if !own && (w.start_ns..=w.end_ns).contains(&t) {
                    out.insert((e.ts, e.pfn));
                }
            }
            _ => {}
        }
    }
    out
}

/// The note of [`foreign_frees`]' frees: how many, in interrupt context and not.
pub fn note(ev: &[Event], foreign: &HashSet<(u64, u64)>) -> String {
    let irq = ev
        .iter()
        .filter(|e| {
            e.kind == EventKind::Free && e.in_interrupt() && foreign.contains(&(e.ts, e.pfn))
        })
        .count();
    format!(
        "kernel: {} frees in the program's windows of blocks its tasks did not allocate ({irq} in interrupt context: RCU's; the rest the CPU's LRU batch): other processes' blocks, counted as theirs (replayed)",
        foreign.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::program::TaskWindow;

    fn ev(ts: u64, pid: u32, kind: EventKind, pfn: u64) -> Event {
        Event {
            ts,
            cpu: 0,
            kind,
            pid,
            flags: 0,
            pfn,
            order: 0,
            mt: 1,
            aux: 0,
        }
    }

    /// Only the window's frees of blocks the program did not allocate are foreign: its
    /// prelude's blocks freed in the window are its own, another process's block freed
    /// by it is not, and nothing is foreign for a stream.
    #[test]
    fn frees_of_blocks_the_program_did_not_allocate() {
        let prog = ProgramResult {
            ops: 1,
            tasks: vec![TaskWindow {
                pid: 7,
                start_ns: 100,
                end_ns: 200,
                ..TaskWindow::default()
            }],
        };
        let e = vec![
            ev(10, 7, EventKind::Alloc, 1),  // the prelude's
            ev(20, 9, EventKind::Alloc, 2),  // another process's
            ev(30, 7, EventKind::Free, 5),   // before the window: not counted anyway
            ev(110, 7, EventKind::Free, 1),  // its own
            ev(120, 7, EventKind::Free, 2),  // another's, in its context
            ev(130, 7, EventKind::Free, 3),  // allocated before the recording
            ev(140, 7, EventKind::Alloc, 4), // the window's
            ev(150, 7, EventKind::Free, 4),
            ev(250, 7, EventKind::Free, 6), // after the window
        ];
        let f = foreign_frees("thp_mix", &e, 0, &prog);
        let mut v: Vec<_> = f.iter().copied().collect();
        v.sort_unstable();
        assert_eq!(v, vec![(120, 2), (130, 3)]);
        assert!(foreign_frees("unix_stream", &e, 0, &prog).is_empty());
        assert!(note(&e, &f).starts_with("kernel: 2 frees"));
    }
}
