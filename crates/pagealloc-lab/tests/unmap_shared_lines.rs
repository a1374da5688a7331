//! parallel_free's shared lines (`shared_lines`, `line_transfer_ns`): with two exiting
//! tasks or more each batch of the unmap's frees fetches the lines of their memory
//! cgroup another CPU wrote last (page_fault1's unmaps too, at two CPUs or more); one
//! task, or the terms at 0, leave the run as it was. page_fault1's faults pay their own
//! (`fault_shared_lines`) once every 31 faults of a CPU, at two CPUs or more.
//! Seen through the simulator's own counters (docs/predict.md, parallel_free).

use pagealloc::Config;
use pagealloc_lab::sim::{self, Machine, SimOptions};
use pagealloc_lab::workload::{self, Scale};
use pagealloc_lab::Row;

/// Pages per task: 132 batches of 31 and one of 4.
const PAGES: u64 = 4096;
const BATCHES: u64 = 133;

/// `name` at laptop scale with `base` and then `extra` parameters, on `cpus` CPUs of
/// desktop-8 under linux-6.12, seed 1.
fn simulate(name: &str, cpus: u32, base: &[(&str, &str)], extra: &[(&str, &str)]) -> Row {
    let ov: Vec<(String, String)> = base
        .iter()
        .chain(extra)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let w = workload::build(name, Scale::Laptop, &ov).unwrap();
    let mut o = SimOptions::new(
        Machine::by_name("desktop-8").unwrap(),
        "linux-6.12".parse::<Config>().unwrap(),
    );
    o.cpus = Some(cpus);
    o.seed = 1;
    sim::run(w.as_ref(), &o).unwrap_or_else(|e| panic!("{name}: {}", e.error))
}

/// parallel_free with `tasks` exiting tasks.
fn run(tasks: u32, extra: &[(&str, &str)]) -> Row {
    let pages = PAGES.to_string();
    let tasks_s = tasks.to_string();
    let base = [
        ("region_pages", pages.as_str()),
        ("tasks", tasks_s.as_str()),
        ("unmap_work_ns", "200"),
        ("gather_pages", "1"),
    ];
    simulate("parallel_free", tasks, &base, extra)
}

/// page_fault1 with 2 loops of 4 096 pages (page tables on, frees after the gather
/// pages) and `extra`, on `cpus` CPUs.
fn page_fault1(cpus: u32, extra: &[(&str, &str)]) -> Row {
    let base = [
        ("pages_per_loop", "4096"),
        ("loops", "2"),
        ("pte_tables", "1"),
        ("gather_pages", "1"),
    ];
    simulate("page_fault1", cpus, &base, extra)
}

fn x(r: &Row, k: &str) -> f64 {
    r.extra.get(k).copied().unwrap_or(0.0)
}

/// `shared` did what `plain` did (the `same` counters equal) and took `want` seconds
/// more CPU, exactly (to a nanosecond per page).
fn assert_only_cpu_added(plain: &Row, shared: &Row, same: &[&str], want: f64) {
    for k in same {
        assert_eq!(x(plain, k), x(shared, k), "{k}");
    }
    let added = x(shared, "cpu_time_s") - x(plain, "cpu_time_s");
    assert!(
        (added - want).abs() < 1e-9 * PAGES as f64,
        "added {added} s, want {want} s"
    );
}

const ON: [(&str, &str); 2] = [("shared_lines", "8"), ("line_transfer_ns", "150")];

/// Two tasks: each batch costs 8 × 150 ns more on each CPU, exactly, and the
/// allocator does the same (blocks, refills, drains).
#[test]
fn two_tasks_pay_each_batch_its_shared_lines() {
    let plain = run(2, &[]);
    let shared = run(2, &ON);
    let want = 2.0 * BATCHES as f64 * 8.0 * 150.0 * 1e-9;
    assert_only_cpu_added(
        &plain,
        &shared,
        &[
            "alloc_blocks_o0",
            "free_blocks_o0",
            "pcp_refill",
            "pcp_drain",
        ],
        want,
    );
    assert!(x(&shared, "elapsed_s") > x(&plain, "elapsed_s"));
    assert_ne!(plain.trace_hash, shared.trace_hash);
}

/// One task shares its lines with nobody: the same run, the same trace; and the
/// terms at 0 (the default) are the run without them.
#[test]
fn one_task_or_zero_terms_change_nothing() {
    let alone = run(1, &[]);
    let alone_on = run(1, &ON);
    assert!(alone.trace_hash.is_some());
    assert_eq!(alone.trace_hash, alone_on.trace_hash);
    assert_eq!(x(&alone, "cpu_time_s"), x(&alone_on, "cpu_time_s"));
    let zero = run(2, &[("shared_lines", "0"), ("line_transfer_ns", "150")]);
    assert_eq!(run(2, &[]).trace_hash, zero.trace_hash);
}

/// page_fault1's unmaps take the same term: at two CPUs each loop's unmap pays its
/// batches' shared lines (16 MiB: 132 batches of 31 and one of 4), at one CPU nothing.
#[test]
fn page_fault1_unmaps_pay_them_at_two_cpus() {
    let pf = page_fault1;
    let (plain, shared) = (pf(2, &[]), pf(2, &ON));
    let want = 2.0 * 2.0 * BATCHES as f64 * 8.0 * 150.0 * 1e-9;
    assert_only_cpu_added(
        &plain,
        &shared,
        &["alloc_blocks_o0", "free_blocks_o0"],
        want,
    );
    assert_eq!(pf(1, &[]).trace_hash, pf(1, &ON).trace_hash);
}

/// page_fault1's faults: at two CPUs every 31st fault of each CPU (its LRU add's
/// batch, carried across regions and loops: 2 × 4096 faults hold 264 full batches)
/// pays `fault_shared_lines` × `line_transfer_ns`, exactly, beside the unmaps' lines;
/// the allocator does the same; at one CPU nothing changes.
#[test]
fn page_fault1_faults_pay_theirs_every_31_faults() {
    // Both runs with the unmaps' lines on (`ON`); the second with the faults' too.
    let faults = [ON[0], ON[1], ("fault_shared_lines", "12")];
    let pf = page_fault1;
    let (plain, shared) = (pf(2, &ON), pf(2, &faults));
    let want = 2.0 * (2.0 * 4096.0 / 31.0f64).floor() * 12.0 * 150.0 * 1e-9;
    assert_only_cpu_added(
        &plain,
        &shared,
        &[
            "alloc_blocks_o0",
            "free_blocks_o0",
            "pcp_refill",
            "pcp_refill_pages",
        ],
        want,
    );
    assert!(x(&shared, "elapsed_s") > x(&plain, "elapsed_s"));
    assert_eq!(pf(1, &ON).trace_hash, pf(1, &faults).trace_hash);
}

/// `predict`'s page_fault1 at two CPUs takes both terms of `predict/work.rs` with the
/// line time it measured: from 40 to 160 ns a line each CPU pays 120 ns more for each of
/// the unmaps' 8 lines per batch (16 loops of 132 batches of 31 and one of 4) and each of
/// the faults' 12 per 31 faults (65 536 faults: 2 114 batches), exactly.
#[test]
fn predict_charges_page_fault1_both_terms_at_the_measured_line() {
    use pagealloc_lab::predict::{self, work, PredictOptions};
    use pagealloc_lab::sim::start::StartState;
    let size = predict::default_size("page_fault1").unwrap();
    assert_eq!((size.pages, size.count), (4096, 16));
    let opts = PredictOptions {
        workload: "page_fault1".into(),
        cpus: 2,
        size,
        config: None,
        exe: std::path::PathBuf::new(),
        runs: 1,
    };
    let at = |ns: f64| {
        predict::simulate_with(
            &opts,
            "linux-6.18",
            &StartState::default(),
            predict::HostNow {
                line_ns: Some(ns),
                clear_us: None,
            },
        )
        .unwrap()
        .0
    };
    let (near, apart) = (at(40.0), at(160.0));
    let faults: f64 = 16.0 * 4096.0;
    let per_cpu_ns = 120.0
        * (16.0 * BATCHES as f64 * f64::from(work::UNMAP_SHARED_LINES)
            + (faults / 31.0).floor() * f64::from(work::FAULT_SHARED_LINES));
    let want_us = 2.0 * per_cpu_ns * 1e-3 / (2.0 * faults);
    let added = apart.cpu_us_per_op - near.cpu_us_per_op;
    assert!(
        (added - want_us).abs() < 1e-6,
        "added {added} µs per fault, want {want_us}"
    );
    assert_eq!(near.alloc_per_op, apart.alloc_per_op);
    assert_eq!(near.free_per_op, apart.free_per_op);
}
