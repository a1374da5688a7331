//! The order of a THP unmap's frees (`workload/page_fault1.rs`, `unmap_zapping`): the
//! zap frees each THP's deposited page table as it reaches the THP, before the gather
//! frees the THPs, as the live kernel's thp_mix does; the order-0 frees before them
//! leave the pageset's `free_count` off a multiple of 512, so the THP free that reaches
//! `high` drains five blocks (2 560 pages), as the kernel's recordings show, where the
//! THPs freed first would drain four.

mod common;

use pagealloc_lab::predict::{self, Figures};
use pagealloc_lab::sim::start::StartState;

/// thp_mix at one CPU as `predict` runs it (the gather's pages, a table per THP), one
/// loop of 8 THPs after a prelude of 512 pages, from page_fault1's pageset of `count`
/// pages (its movable pages the prelude's, 20 unmovable for the tables and the gather
/// page, the rest on a list nothing takes from) whose `high` is `high`: the THPs are
/// refilled from the free lists, so the unmap's frees raise the pageset by 8 × 512
/// pages beside the tables.
fn run(count: u32, high: i32) -> Figures {
    let (mut opts, normal) = common::page_fault1_16m(1);
    opts.workload = "thp_mix".into();
    opts.size.extra = 512;
    let st = StartState {
        pagesets: vec![common::page_fault1_pageset(normal, count, high, 20)],
        ..StartState::default()
    };
    predict::simulate(&opts, "linux-6.18", &st).unwrap().0
}

/// A `high` the unmap's THP frees reach: one drain of five THPs (2 560 pages: the
/// `free_count` of 2 052 the tables' frees leave, not 2 048), and the pageset ends that
/// much lower; below it, no drain.
#[test]
fn a_thp_unmap_that_reaches_high_drains_five_thps() {
    let ops = 4096.0;
    let low = run(17_000, 20_000);
    assert_eq!((low.drains_per_op * ops).round(), 1.0, "{low:?}");
    assert_eq!(low.pages_per_drain, 2560.0, "{low:?}");
    let high = run(17_000, 28_500);
    assert_eq!(high.drains_per_op, 0.0, "{high:?}");
    assert_eq!(high.pcp_end - low.pcp_end, 2560.0, "{high:?} {low:?}");
    assert_eq!(low.free_per_op[9], high.free_per_op[9]);
}
