//! The pages the CPU's LRU add batch holds past an unmap (6.18's unmap does not drain
//! it): thp_mix's prelude's (`lru_held_thp`, `lru_held_base`), freed when the batch next
//! moves, inside the window (a THP moves it at once, 4 KiB faults once they fill it),
//! and page_fault1's last loop's (`lru_tail`), freed after the window, as `predict`
//! reads them off each recording (`predict::foreign::lru_held`, `lru_tail`): frees and
//! pageset pages of the program's window.

mod common;

use pagealloc::{MigrateType, SeedList};
use pagealloc_lab::predict::program::Size;
use pagealloc_lab::predict::{self, Figures, PredictOptions};
use pagealloc_lab::sim::start::{PagesetStart, StartState};

/// thp_mix at `cpus` CPUs, two loops of 2 MiB a CPU after a prelude of 512 pages, from
/// pagesets holding the prelude's pages and the page tables (the pageset lines count
/// from a start state), with `held` pages of the prelude per CPU left in the LRU batch
/// and `tail` of the last loop.
fn run(cpus: u32, held: &[u32], tail: &[u32]) -> Figures {
    let opts = PredictOptions {
        workload: "thp_mix".into(),
        cpus,
        size: Size {
            pages: 512,
            count: 2,
            extra: 512,
        },
        config: None,
        exe: "unused".into(),
        runs: 1,
    };
    let normal = predict::saved::host_zones()
        .iter()
        .position(|z| z.starts_with("Normal"))
        .expect("the host has a Normal zone");
    let st = StartState {
        pagesets: (0..cpus as usize)
            .map(|cpu| PagesetStart {
                cpu,
                zone: normal,
                count: 620,
                high: 28_500,
                taken: vec![
                    SeedList {
                        order: 0,
                        mt: MigrateType::Movable,
                        blocks: 600,
                    },
                    SeedList {
                        order: 0,
                        mt: MigrateType::Unmovable,
                        blocks: 20,
                    },
                ],
                used: [(0, 0), (0, 1)].into_iter().collect(),
                refilled: None,
                alloc_factor: 0,
                free_count: 0,
            })
            .collect(),
        lru_held: held.to_vec(),
        lru_tail: tail.to_vec(),
        ..StartState::default()
    };
    predict::simulate(&opts, "linux-6.18", &st).unwrap().0
}

/// Each held page is one more order-0 free of the window, on the pageset at its end;
/// nothing else moves (the THP CPU's order-9 blocks, the allocations).
#[test]
fn the_batchs_pages_are_freed_in_the_window() {
    let ops = 2.0 * 512.0;
    let frees = |f: &Figures| (f.free_per_op[0] * ops).round();
    let none = run(1, &[], &[]);
    let held = run(1, &[23], &[]);
    assert_eq!(frees(&held) - frees(&none), 23.0);
    assert_eq!(held.pcp_end - none.pcp_end, 23.0, "{none:?} {held:?}");
    assert_eq!(held.pcp_peak - none.pcp_peak, 23.0);
    assert_eq!(held.alloc_per_op, none.alloc_per_op);
    assert_eq!(held.free_per_op[9], none.free_per_op[9]);
    // At two CPUs each group's CPU frees its own: the order-0 CPU's after its faults
    // filled the batch.
    let ops = 2.0 * ops;
    let frees = |f: &Figures| (f.free_per_op[0] * ops).round();
    let none = run(2, &[], &[]);
    let both = run(2, &[5, 7], &[]);
    assert_eq!(frees(&both) - frees(&none), 12.0);
    assert_eq!(both.pcp_end - none.pcp_end, 12.0);
    // The order-0 CPU's last loop leaves 9 for after the window (the THP CPU's tail
    // is not read: a THP moves the batch).
    let tail = run(2, &[5, 7], &[4, 9]);
    assert_eq!(frees(&both) - frees(&tail), 9.0);
    assert_eq!(both.pcp_end - tail.pcp_end, 9.0);
}

/// page_fault1 at one CPU, two loops of 16 MiB, from a pageset holding the faults' pages:
/// the last loop's pages the batch holds are freed after the window, out of its frees
/// and its pageset's end; the allocations and the refills stay.
#[test]
fn page_fault1s_last_pages_stay_in_the_batch_past_the_window() {
    let (opts, normal) = common::page_fault1_16m(2);
    let run = |held: &[u32]| {
        let st = StartState {
            pagesets: vec![common::page_fault1_pageset(normal, 4300, 28_500, 40)],
            lru_tail: held.to_vec(),
            ..StartState::default()
        };
        predict::simulate(&opts, "linux-6.18", &st).unwrap().0
    };
    let ops = 2.0 * 4096.0;
    let frees = |f: &Figures| (f.free_per_op[0] * ops).round();
    let none = run(&[]);
    let held = run(&[27]);
    assert_eq!(frees(&none) - frees(&held), 27.0);
    assert_eq!(none.pcp_end - held.pcp_end, 27.0, "{none:?} {held:?}");
    assert_eq!(held.alloc_per_op, none.alloc_per_op);
    assert_eq!(held.refills_per_op, none.refills_per_op);
}
