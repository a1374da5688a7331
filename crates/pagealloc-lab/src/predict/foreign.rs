//! Frees the kernel makes in a program's window, in the context of one of its tasks, of
//! blocks no task of the program allocated: other processes' blocks, not the program's
//! work.
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
use crate::sim::start::StartState;
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

/// [`Frees`] of a recording of a program. The streams' tasks are threads of a process
/// whose main thread allocates too (the sockets, their pages that RCU frees in the
/// softirq that interrupts a stream's task: `GFP_KERNEL_ACCOUNT | __GFP_ZERO` order-0
/// pages, 3 and 16 of them in the windows of a one- and a two-CPU TCP run): the
/// simulated stream has no main thread, so those are other processes' blocks here too;
/// the two ends of a one-CPU stream share its CPU's window. `ev` sorted by time, from
/// `t0` on the monotonic clock.
pub fn frees(ev: &[Event], t0: u64, prog: &ProgramResult) -> Frees {
    let mut out = Frees::default();
    let win: HashMap<u32, TaskWindow> = prog.tasks.iter().map(|t| (t.pid, *t)).collect();
    let mut by_cpu: HashMap<u32, TaskWindow> = HashMap::new();
    for t in &prog.tasks {
        let w = by_cpu.entry(t.cpu).or_insert(*t);
        w.start_ns = w.start_ns.min(t.start_ns);
        w.end_ns = w.end_ns.max(t.end_ns);
    }
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

/// Per CPU `0..cpus`, the order-0 movable blocks the program's task there allocated
/// before its window (its prelude) whose free inside that window counts as the
/// program's ([`Frees::counts`]): thp_mix's prelude's last faults, which the CPU's LRU
/// add batch (`folio_batch`, 31 folios) still held when the prelude unmapped them (its
/// unmap does not drain the batch) and which the batch's next move frees, at the first
/// THP fault (`folio_batch_move_lru` under `map_anon_folio_pmd`) or once the window's
/// 4 KiB faults have filled it. 0–30 a run: the batch's fill at the prelude's start
/// sets how many, and another process's fault that fills it first frees them before
/// the window. `ev` sorted by time, from `t0`.
pub fn lru_held(ev: &[Event], t0: u64, prog: &ProgramResult, f: &Frees, cpus: u32) -> Vec<u32> {
    let win: HashMap<u32, TaskWindow> = prog.tasks.iter().map(|t| (t.pid, *t)).collect();
    let inside = |w: &TaskWindow, at: u64| (w.start_ns..=w.end_ns).contains(&at);
    // The prelude's blocks not freed yet: their task.
    let mut prelude: HashMap<u64, u32> = HashMap::new();
    let mut out = vec![0u32; cpus as usize];
    for e in ev {
        let at = e.ts + t0;
        match e.kind {
            EventKind::Alloc => match win.get(&e.pid) {
                Some(w) if at < w.start_ns && e.order == 0 && e.mt == 1 => {
                    prelude.insert(e.pfn, e.pid);
                }
                _ => {
                    prelude.remove(&e.pfn);
                }
            },
            EventKind::Free => {
                let Some(pid) = prelude.remove(&e.pfn) else {
                    continue;
                };
                let w = win[&pid];
                let mine = e.pid == pid && inside(&w, at);
                if inside(&w, at) && f.counts(e, mine) {
                    if let Some(n) = out.get_mut(w.cpu as usize) {
                        *n += 1;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Per CPU `0..cpus`, the order-0 movable blocks the program's task there allocated
/// inside its window that no free had given back by its window's end: page_fault1's
/// (and thp_mix's order-0 CPUs') last loop's last faults, which the CPU's LRU add batch
/// still held after the last unmap (the process's exit frees them). `ev` sorted by time, from `t0`.
pub fn lru_tail(ev: &[Event], t0: u64, prog: &ProgramResult, cpus: u32) -> Vec<u32> {
    let win: HashMap<u32, TaskWindow> = prog.tasks.iter().map(|t| (t.pid, *t)).collect();
    // The window's blocks not freed yet: their task's CPU.
    let mut held: HashMap<u64, u32> = HashMap::new();
    for e in ev {
        let at = e.ts + t0;
        match e.kind {
            EventKind::Alloc => match win.get(&e.pid) {
                Some(w) if (w.start_ns..=w.end_ns).contains(&at) && e.order == 0 && e.mt == 1 => {
                    held.insert(e.pfn, e.pid);
                }
                _ => {
                    held.remove(&e.pfn);
                }
            },
            EventKind::Free => {
                if let Some(pid) = held.get(&e.pfn) {
                    if at <= win[pid].end_ns {
                        held.remove(&e.pfn);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = vec![0u32; cpus as usize];
    for pid in held.values() {
        if let Some(n) = out.get_mut(win[pid].cpu as usize) {
            *n += 1;
        }
    }
    out
}

/// The pages the CPUs' LRU add batches held past an unmap in a kernel run ([`lru_held`],
/// [`lru_tail`]) as workload `wl`'s parameters, each CPU group's median (of two, the
/// upper): thp_mix's `lru_held_thp`, `lru_held_base` and `lru_tail` (its order-0
/// CPUs'), page_fault1's `lru_tail`; and how many CPUs each tail is on.
fn lru_set(wl: &str, cpus: u32, start: &StartState) -> (Vec<(&'static str, u32)>, usize) {
    let n = cpus as usize;
    let median = |of: &[u32], group: std::ops::Range<usize>| {
        let mut v: Vec<u32> = group.map(|c| of.get(c).copied().unwrap_or(0)).collect();
        v.sort_unstable();
        v.get(v.len() / 2)
            .copied()
            .unwrap_or(0)
            .min(crate::workload::LRU_BATCH - 1)
    };
    match wl {
        "thp_mix" => {
            let thp = (super::program::thp_cpus(cpus) as usize).min(n);
            let base = thp..n;
            (
                vec![
                    ("lru_held_thp", median(&start.lru_held, 0..thp)),
                    ("lru_held_base", median(&start.lru_held, base.clone())),
                    ("lru_tail", median(&start.lru_tail, base.clone())),
                ],
                base.len(),
            )
        }
        "page_fault1" => (vec![("lru_tail", median(&start.lru_tail, 0..n))], n),
        _ => (Vec::new(), 0),
    }
}

/// The workload `wl`'s parameters of the pages the CPUs' LRU add batches held past an
/// unmap in a kernel run ([`lru_held`], [`lru_tail`]; each CPU group's median, of two
/// the upper), those above 0: thp_mix's `lru_held_thp`, `lru_held_base` and `lru_tail`
/// (its order-0 CPUs'), page_fault1's `lru_tail`.
pub fn lru_overrides(wl: &str, cpus: u32, start: &StartState) -> Vec<(String, String)> {
    lru_set(wl, cpus, start)
        .0
        .into_iter()
        .filter(|&(_, v)| v > 0)
        .map(|(k, v)| (k.to_owned(), v.to_string()))
        .collect()
}

/// The pages the simulated scripts free as they end that the kernel freed after its
/// window: the workload's `lru_tail` (each CPU group's median of [`lru_tail`]) on every
/// CPU of its group.
pub fn lru_tail_pages(wl: &str, cpus: u32, start: &StartState) -> u64 {
    let (set, tail_cpus) = lru_set(wl, cpus, start);
    set.iter()
        .find(|(k, _)| *k == "lru_tail")
        .map_or(0, |&(_, v)| u64::from(v) * tail_cpus as u64)
}

/// Loops of the program whose unmap ended before RCU freed a loop's page tables: on
/// each CPU of `cpus` (those faulting 4 KiB pages), the order-0 unmovable blocks its
/// task allocated inside its window (page tables, their RCU batch page, the unmap's
/// gather pages) that no free had given back by the window's end, in loops of
/// `per_loop` (a loop's tables and batch page), rounded; the median over those CPUs
/// (of two, the upper).
/// RCU frees a loop's tables a grace period after its unmap, and the tables of the
/// loops unmapped within that period before the window ends are still held then: the
/// loops unmapped in a grace period. `ev` sorted by time, from `t0`.
pub fn table_free_lag(
    ev: &[Event],
    t0: u64,
    prog: &ProgramResult,
    cpus: &[u32],
    per_loop: u64,
) -> u32 {
    let win: HashMap<u32, TaskWindow> = prog
        .tasks
        .iter()
        .filter(|t| cpus.contains(&t.cpu))
        .map(|t| (t.pid, *t))
        .collect();
    if win.is_empty() || per_loop == 0 {
        return 0;
    }
    // By task: its window's unmovable order-0 blocks not freed yet.
    let mut held: HashMap<u32, HashSet<u64>> = HashMap::new();
    // The task of each such block, by pfn.
    let mut owner: HashMap<u64, u32> = HashMap::new();
    for e in ev {
        let at = e.ts + t0;
        match e.kind {
            EventKind::Alloc if e.order == 0 && e.mt == 0 => {
                if let Some(w) = win.get(&e.pid) {
                    if (w.start_ns..=w.end_ns).contains(&at) {
                        held.entry(e.pid).or_default().insert(e.pfn);
                        owner.insert(e.pfn, e.pid);
                    }
                }
            }
            EventKind::Free => {
                if let Some(pid) = owner.get(&e.pfn).copied() {
                    if win.get(&pid).is_some_and(|w| at <= w.end_ns) {
                        owner.remove(&e.pfn);
                        if let Some(h) = held.get_mut(&pid) {
                            h.remove(&e.pfn);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut lags: Vec<u32> = win
        .keys()
        .map(|pid| {
            let n = held.get(pid).map_or(0, HashSet::len) as u64;
            u32::try_from((n + per_loop / 2) / per_loop).unwrap_or(u32::MAX)
        })
        .collect();
    lags.sort_unstable();
    lags[lags.len() / 2]
}

/// The page-table pages the simulated program frees after the kernel's window: the
/// last `lag` loops' tables and RCU batch pages on each CPU faulting 4 KiB pages
/// ([`table_free_lag`]), which a simulated script must still give back before it ends
/// (`workload::pending_tables`) and the kernel frees after the window. 0 for the
/// other programs.
pub fn after_window(workload: &str, cpus: u32, s: super::program::Size, lag: u32) -> u64 {
    let base_cpus = match workload {
        "page_fault1" => cpus,
        "thp_mix" => cpus.saturating_sub(super::program::thp_cpus(cpus)),
        _ => 0,
    };
    let p = crate::workload::PageFault1Params {
        pages_per_loop: u32::try_from(s.pages).unwrap_or(u32::MAX),
        loops: u32::try_from(s.count).unwrap_or(u32::MAX),
        order: 0,
        pte_tables: 1,
        gather_pages: 1,
        ..Default::default()
    };
    u64::from(base_cpus) * crate::workload::pending_tables(&p, lag)
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

    /// `e` in interrupt context (a softirq).
    fn irq(mut e: Event) -> Event {
        e.flags = crate::trace::format::FLAG_SOFTIRQ;
        e
    }

    /// `e` of an order-0 unmovable block (a page table, a batch page).
    fn unmovable(mut e: Event) -> Event {
        e.mt = 0;
        e
    }

    /// A program of one operation whose tasks are `(pid, cpu, start_ns, end_ns)`.
    fn program(tasks: &[(u32, u32, u64, u64)]) -> ProgramResult {
        ProgramResult {
            ops: 1,
            tasks: tasks
                .iter()
                .map(|&(pid, cpu, start_ns, end_ns)| TaskWindow {
                    pid,
                    cpu,
                    start_ns,
                    end_ns,
                    ..TaskWindow::default()
                })
                .collect(),
        }
    }

    /// Three loops of two page tables and a batch page each (order 0, unmovable) and
    /// a gather page: RCU (another task) frees the first loop's inside the window, the
    /// last two loops' after it. The gather page and the faults' movable pages are
    /// freed inside; another task's tables and a CPU not faulting 4 KiB pages count
    /// for nothing.
    #[test]
    fn table_free_lag_counts_the_loops_rcu_had_not_freed() {
        let prog = program(&[(7, 0, 100, 1000), (8, 1, 100, 1000)]);
        let mut e = Vec::new();
        for l in 0..3u64 {
            let t = 100 + l * 100;
            for k in 0..3 {
                e.push(unmovable(ev(t + k, 7, EventKind::Alloc, 100 + l * 10 + k)));
                // Beside: a page table of another task, one of the task on CPU 1.
                e.push(unmovable(ev(t + k, 9, EventKind::Alloc, 500 + l * 10 + k)));
                e.push(unmovable(ev(t + k, 8, EventKind::Alloc, 700 + l * 10 + k)));
            }
            e.push(ev(t + 10, 7, EventKind::Alloc, 300 + l));
            e.push(ev(t + 50, 7, EventKind::Free, 300 + l));
            e.push(unmovable(ev(t + 20, 7, EventKind::Alloc, 400 + l)));
            e.push(unmovable(ev(t + 60, 7, EventKind::Free, 400 + l)));
        }
        for k in 0..3 {
            e.push(irq(ev(450, 3, EventKind::Free, 100 + k)));
            e.push(irq(ev(1100, 3, EventKind::Free, 110 + k)));
        }
        e.sort_by_key(|x| x.ts);
        assert_eq!(table_free_lag(&e, 0, &prog, &[0], 3), 2);
        assert_eq!(table_free_lag(&e, 0, &prog, &[0], 2), 3);
        assert_eq!(
            table_free_lag(&e, 0, &prog, &[0, 1], 3),
            3,
            "the upper median"
        );
        assert_eq!(table_free_lag(&e, 0, &prog, &[2], 3), 0);
    }

    /// Only the window's frees of blocks the program did not allocate are other
    /// processes': its prelude's blocks freed in the window are its own, another
    /// process's block freed by it is not; its block freed by another task on its CPU
    /// inside its window is its own; its prelude's blocks freed by RCU (interrupt
    /// context) inside the window are not the window's, whichever task ran them.
    #[test]
    fn frees_follow_the_blocks_owner() {
        let prog = program(&[(7, 0, 100, 200)]);
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
        let f = frees(&e, 0, &prog);
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
        assert!(note(&e, &f).starts_with("kernel: 3 frees"));
    }

    /// thp_mix's prelude faults four movable pages and a page table on CPU 0 and unmaps
    /// them: two pages are freed before the window, the two the LRU batch held inside
    /// it (one by the task, one by another process filling the batch); the page
    /// table, freed by RCU in interrupt context, and a block of the window are not
    /// the prelude's held pages; CPU 1's task freed none inside its window.
    #[test]
    fn lru_held_counts_the_preludes_pages_freed_in_the_window() {
        let prog = program(&[(7, 0, 100, 200), (8, 1, 100, 200)]);
        let table = unmovable(ev(14, 7, EventKind::Alloc, 5));
        let mut e = vec![
            ev(10, 7, EventKind::Alloc, 1),
            ev(11, 7, EventKind::Alloc, 2),
            ev(12, 7, EventKind::Alloc, 3),
            ev(13, 7, EventKind::Alloc, 4),
            table,
            ev(15, 8, EventKind::Alloc, 6),
            ev(50, 7, EventKind::Free, 1),
            ev(51, 7, EventKind::Free, 2),
            ev(52, 8, EventKind::Free, 6),
            ev(110, 7, EventKind::Alloc, 9),
            ev(120, 7, EventKind::Free, 3),
            ev(130, 3, EventKind::Free, 4),
            irq(ev(140, 7, EventKind::Free, 5)),
            ev(150, 7, EventKind::Free, 9),
        ];
        e.sort_by_key(|x| x.ts);
        let f = frees(&e, 0, &prog);
        assert_eq!(lru_held(&e, 0, &prog, &f, 2), vec![2, 0]);
        // Shifted by the clock's origin, nothing changes.
        let late: Vec<Event> = e.iter().map(|x| Event { ts: x.ts - 5, ..*x }).collect();
        let f = frees(&late, 5, &prog);
        assert_eq!(lru_held(&late, 5, &prog, &f, 2), vec![2, 0]);
    }

    /// page_fault1's window faults four movable pages on CPU 0 and frees two inside
    /// it; one more after it: two held at its end. A page table and a page allocated
    /// before the window are not its faults.
    #[test]
    fn lru_tail_counts_the_windows_pages_not_freed_by_its_end() {
        let prog = program(&[(7, 0, 100, 200)]);
        let table = unmovable(ev(115, 7, EventKind::Alloc, 5));
        let mut e = vec![
            ev(50, 7, EventKind::Alloc, 9),
            ev(110, 7, EventKind::Alloc, 1),
            ev(111, 7, EventKind::Alloc, 2),
            ev(112, 7, EventKind::Alloc, 3),
            ev(113, 7, EventKind::Alloc, 4),
            table,
            ev(150, 7, EventKind::Free, 1),
            ev(160, 3, EventKind::Free, 2),
            ev(250, 7, EventKind::Free, 3),
        ];
        e.sort_by_key(|x| x.ts);
        assert_eq!(lru_tail(&e, 0, &prog, 2), vec![2, 0]);
    }

    /// A one-CPU stream: the writer (7) and the reader (8) share CPU 0; the main thread
    /// (6) is not one of its tasks.
    #[test]
    fn a_streams_frees_follow_the_blocks_owner_too() {
        let prog = program(&[(7, 0, 100, 210), (8, 0, 105, 200)]);
        let mut e = vec![
            ev(10, 6, EventKind::Alloc, 1),      // the main thread's socket page
            irq(ev(120, 7, EventKind::Free, 1)), // freed by RCU in the writer's softirq
            ev(130, 7, EventKind::Alloc, 2),     // an skb's page
            ev(140, 8, EventKind::Free, 2),      // freed by the reader: the stream's
            ev(150, 7, EventKind::Alloc, 3),     // another
            ev(205, 3, EventKind::Free, 3),      // by ksoftirqd in the writer's window only
        ];
        e.sort_by_key(|x| x.ts);
        let f = frees(&e, 0, &prog);
        assert_eq!(f.theirs.iter().copied().collect::<Vec<_>>(), vec![(120, 1)]);
        assert_eq!(f.ours.iter().copied().collect::<Vec<_>>(), vec![(205, 3)]);
        assert!(f.counts(&e[3], true));
    }
}
