//! RCU's grace period after page_fault1's unmaps (`table_free_lag`): each loop's page
//! tables and their RCU batch page are freed after the unmap of the loop `lag` later,
//! as `predict` reads it off each recording (`predict::foreign::table_free_lag`), and
//! the last loops' tables, which the kernel frees after its window, are out of the
//! simulated lines.

mod common;

use pagealloc_lab::predict::{self, Figures};
use pagealloc_lab::sim::start::StartState;

/// page_fault1 at one CPU, four loops of 16 MiB, from a pageset whose lists hold the
/// faults' pages and 20 unmovable pages: one loop's 8 page tables, their RCU batch page
/// and the unmap's 9 gather pages, each loop's given back before the next loop (lag 0).
fn run(lag: u32) -> Figures {
    let (opts, normal) = common::page_fault1_16m(4);
    let st = StartState {
        pagesets: vec![common::page_fault1_pageset(normal, 4300, 28_500, 20)],
        table_free_lag: lag,
        ..StartState::default()
    };
    predict::simulate(&opts, "linux-6.18", &st).unwrap().0
}

/// With the tables freed at their unmap the 20 unmovable pages serve every loop: no
/// refill. Held over two more unmaps, three loops' tables (27 pages) and a gather (9)
/// are out at once: the unmovable list refills. The last two loops' 18 pages are
/// freed after the kernel's window: the frees per fault and the pageset's end fall by
/// them.
#[test]
fn tables_held_over_a_grace_period_refill_the_unmovable_list() {
    let ops = 4.0 * 4096.0;
    let now = run(0);
    let late = run(2);
    assert_eq!(now.refills_per_op * ops, 0.0);
    assert!(
        late.refills_per_op * ops >= 1.0,
        "{}",
        late.refills_per_op * ops
    );
    assert_eq!(now.alloc_per_op[0], late.alloc_per_op[0]);
    let frees = |f: &Figures| (f.free_per_op[0] * ops).round();
    assert_eq!(frees(&now), (now.alloc_per_op[0] * ops).round());
    assert_eq!(frees(&now) - frees(&late), 18.0);
    let refilled = late.refills_per_op * ops * late.pages_per_refill;
    assert_eq!(now.pcp_end - 18.0 + refilled, late.pcp_end);
}
