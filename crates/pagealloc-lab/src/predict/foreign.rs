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

/// Which frees in the program's windows are its own, where the task that ran them says
/// otherwise (`ts`, `pfn` of each free event).
#[derive(Clone, Debug, Default)]
pub struct Frees {
    /// By one of the program's tasks inside its window, of blocks none of its tasks
    /// allocated earlier in the recording (other processes'), or in interrupt context
    /// of a block its task allocated before its window (its prelude's page tables,
    /// freed by RCU a grace period after the prelude's unmap: inside the window in some
    /// runs, before it in others; the simulated prelude has none): not the window's.
    pub theirs: HashSet<(u64, u64)>,
    /// By another task (`ksoftirqd`, another process's softirq) on a program's CPU
    /// inside that CPU's task's window, of a block the program's tasks allocated and had
    /// not freed: RCU's of the program's page tables run wherever the CPU's callbacks
    /// run. The program's, but for its prelude's blocks freed so (as in `theirs`).
    pub ours: HashSet<(u64, u64)>,
}

impl Frees {
    /// Whether event `e` is the program's, `mine` saying whether one of its tasks did
    /// it inside its window.
    pub fn counts(&self, e: &Event, mine: bool) -> bool {
        if e.kind != EventKind::Free {
            return mine;
        }
        let key = (e.ts, e.pfn);
        (mine && !self.theirs.contains(&key)) || self.ours.contains(&key)
    }
}

/// [`Frees`] of a recording of a program: of the faulting programs (`faulting`: forked
/// processes that free only what they allocated); none for the streams, whose tasks are
/// threads of a process whose main thread allocates too. `ev` sorted by time, from `t0`
/// on the monotonic clock.
pub fn frees(faulting: bool, ev: &[Event], t0: u64, prog: &ProgramResult) -> Frees {
    let mut out = Frees::default();
    if !faulting {
        return out;
    }
    let win: HashMap<u32, TaskWindow> = prog.tasks.iter().map(|t| (t.pid, *t)).collect();
    let by_cpu: HashMap<u32, TaskWindow> = prog.tasks.iter().map(|t| (t.cpu, *t)).collect();
    let inside = |w: &TaskWindow, e: &Event| (w.start_ns..=w.end_ns).contains(&(e.ts + t0));
    // Blocks the program's tasks hold, by first pfn (a count: a synthetic or lost-event
    // recording may show a pfn allocated twice).
    let mut held: HashMap<u64, u32> = HashMap::new();
    // Of those, the ones its task allocated before its window (the prelude's).
    let mut prelude: HashSet<u64> = HashSet::new();
    for e in ev {
        let task = win.get(&e.pid);
        match e.kind {
            EventKind::Alloc => {
                if let Some(w) = task {
                    *held.entry(e.pfn).or_default() += 1;
                    if e.ts + t0 < w.start_ns {
                        prelude.insert(e.pfn);
                    } else {
                        prelude.remove(&e.pfn);
                    }
                }
            }
            EventKind::Free => {
                let deferred = prelude.remove(&e.pfn) && e.in_interrupt();
                let was_held = match held.get_mut(&e.pfn) {
                    Some(n) if *n > 1 => {
                        *n -= 1;
                        true
                    }
                    Some(_) => held.remove(&e.pfn).is_some(),
                    None => false,
                };
                match task {
                    Some(w) if (!was_held || deferred) && inside(w, e) => {
                        out.theirs.insert((e.ts, e.pfn));
                    }
                    None if was_held
                        && !deferred
                        && by_cpu.get(&e.cpu).is_some_and(|w| inside(w, e)) =>
                    {
                        out.ours.insert((e.ts, e.pfn));
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    out
}

/// The note of [`Frees`]: how many each way, and of other processes' how many in
/// interrupt context.
pub fn note(ev: &[Event], f: &Frees) -> String {
    let irq = ev
        .iter()
        .filter(|e| {
            e.kind == EventKind::Free && e.in_interrupt() && f.theirs.contains(&(e.ts, e.pfn))
        })
        .count();
    format!(
        "kernel: {} frees in the program's windows of blocks its tasks did not allocate or its prelude's by RCU ({irq} in interrupt context; the rest the CPU's LRU batch): not the window's, replayed as other processes' frees; {} frees of the window's blocks by other tasks on its CPUs in its windows (RCU's of its page tables): counted as its own",
        f.theirs.len(),
        f.ours.len()
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

    /// Only the window's frees of blocks the program did not allocate are other
    /// processes': its prelude's blocks freed in the window are its own, another
    /// process's block freed by it is not; its block freed by another task on its CPU
    /// inside its window is its own; its prelude's blocks freed by RCU (interrupt
    /// context) inside the window are not the window's, whichever task ran them;
    /// nothing is reattributed for a stream.
    fn irq(mut e: Event) -> Event {
        e.flags = crate::trace::format::FLAG_SOFTIRQ;
        e
    }

    #[test]
    fn frees_follow_the_blocks_owner() {
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
            ev(155, 7, EventKind::Alloc, 8),
            ev(160, 3, EventKind::Free, 8), // its own, freed by ksoftirqd
            ev(170, 3, EventKind::Free, 9), // another's, by another
            ev(250, 7, EventKind::Free, 6), // after the window
            ev(50, 7, EventKind::Alloc, 10), // the prelude's page tables,
            ev(51, 7, EventKind::Alloc, 11),
            ev(52, 7, EventKind::Alloc, 12),
            irq(ev(180, 7, EventKind::Free, 10)), // freed by RCU in its softirq,
            irq(ev(185, 3, EventKind::Free, 11)), // in another task's,
            ev(190, 7, EventKind::Free, 12),      // by its task: its own
        ];
        let mut e = e;
        e.sort_by_key(|x| x.ts);
        let at = |ts: u64| e.iter().position(|x| x.ts == ts).unwrap_or(0);
        let f = frees(true, &e, 0, &prog);
        let sorted = |h: &HashSet<(u64, u64)>| {
            let mut v: Vec<_> = h.iter().copied().collect();
            v.sort_unstable();
            v
        };
        assert_eq!(sorted(&f.theirs), vec![(120, 2), (130, 3), (180, 10)]);
        assert_eq!(sorted(&f.ours), vec![(160, 8)]);
        assert!(f.counts(&e[at(110)], true) && !f.counts(&e[at(120)], true));
        assert!(f.counts(&e[at(160)], false) && !f.counts(&e[at(170)], false));
        assert!(!f.counts(&e[at(185)], false) && f.counts(&e[at(190)], true));
        let s = frees(false, &e, 0, &prog);
        assert!(s.theirs.is_empty() && s.ours.is_empty());
        assert!(note(&e, &f).starts_with("kernel: 3 frees"));
    }
}
