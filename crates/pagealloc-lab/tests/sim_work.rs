//! The workloads' work outside the allocator (`fault_work_ns`, `unmap_work_ns`) and a
//! stream with both ends on one virtual CPU, seen through the simulator's counters.

use pagealloc::Config;
use pagealloc_lab::sim::{self, Machine, SimOptions};
use pagealloc_lab::workload::{self, Scale};
use pagealloc_lab::Row;

fn run(name: &str, cpus: u32, pairs: &[(&str, &str)]) -> Row {
    let ov: Vec<(String, String)> = pairs
        .iter()
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

fn x(r: &Row, k: &str) -> f64 {
    r.extra.get(k).copied().unwrap_or(0.0)
}

/// Each fault computes `fault_work_ns` and each unmapped page `unmap_work_ns`, nothing
/// else changes: the same blocks, refills and drains (the allocator's own counters),
/// and exactly that much more CPU time on one CPU (no lock to wait for).
#[test]
fn fault_and_unmap_work_add_exactly_their_time() {
    let base = [("pages_per_loop", "2048"), ("loops", "4")];
    let plain = run("page_fault1", 1, &base);
    let mut with = base.to_vec();
    with.extend([("fault_work_ns", "1000"), ("unmap_work_ns", "300")]);
    let worked = run("page_fault1", 1, &with);
    for k in [
        "alloc_blocks_o0",
        "free_blocks_o0",
        "pcp_refill",
        "pcp_drain",
    ] {
        assert_eq!(x(&plain, k), x(&worked, k), "{k}");
    }
    let pages = 2048.0 * 4.0;
    let added = x(&worked, "cpu_time_s") - x(&plain, "cpu_time_s");
    let want = pages * (1000.0 + 300.0) * 1e-9;
    assert!(
        (added - want).abs() < 1e-9 * pages,
        "added {added} s, want {want} s"
    );
    // 0 (the default) emits nothing: the published model's trace is untouched.
    let zero = run(
        "page_fault1",
        1,
        &[
            ("pages_per_loop", "2048"),
            ("loops", "4"),
            ("fault_work_ns", "0"),
            ("unmap_work_ns", "0"),
        ],
    );
    assert_eq!(zero.trace_hash, plain.trace_hash);
}

/// AF_UNIX with both ends on one CPU: every chunk's four blocks are allocated and freed
/// on that CPU, the CPU never idles, and a shorter turn (the reader preempting the
/// writer after each chunk) costs one more hand-over per chunk.
#[test]
fn a_stream_runs_both_ends_on_one_cpu() {
    let base = [("pairs", "1"), ("chunks", "512"), ("chunk_bytes", "65536")];
    let full = run("lmbench", 1, &base);
    for o in 0..4 {
        assert_eq!(x(&full, &format!("alloc_blocks_o{o}")), 512.0, "order {o}");
        assert_eq!(x(&full, &format!("free_blocks_o{o}")), 512.0, "order {o}");
    }
    assert!(x(&full, "idle_pct") < 1e-9, "idle {}", x(&full, "idle_pct"));
    let mut one = base.to_vec();
    one.extend([("turn_messages", "1"), ("shared_switch_ns", "1000")]);
    let turned = run("lmbench", 1, &one);
    assert_eq!(x(&turned, "alloc_blocks_o3"), 512.0);
    assert!(
        x(&turned, "cpu_time_s") > x(&full, "cpu_time_s") + 512.0 * 1e-6 * 0.9,
        "{} vs {}",
        x(&turned, "cpu_time_s"),
        x(&full, "cpu_time_s")
    );
}

/// `gather_pages=1`: each unmap takes the live kernel's mmu_gather pages (one after 7
/// blocks and one per 509 more, at most 19) and, freeing 4 KiB pages' tables, their RCU
/// batch's page, and gives them all back: the allocator's own counters show 9 + 1 more
/// order-0 blocks per 16 MiB loop, 1 per 8 THPs, 19 + 1 per 256 MiB unmap; 0 (the
/// default) leaves the trace as it was.
#[test]
fn an_unmap_takes_its_gather_pages() {
    let base = [
        ("pages_per_loop", "4096"),
        ("loops", "2"),
        ("pte_tables", "1"),
    ];
    let plain = run("page_fault1", 1, &base);
    let mut with = base.to_vec();
    with.push(("gather_pages", "1"));
    let gathered = run("page_fault1", 1, &with);
    assert_eq!(x(&plain, "alloc_blocks_o0"), 2.0 * (4096.0 + 8.0));
    assert_eq!(
        x(&gathered, "alloc_blocks_o0"),
        2.0 * (4096.0 + 8.0 + 9.0 + 1.0)
    );
    assert_eq!(
        x(&gathered, "free_blocks_o0"),
        x(&gathered, "alloc_blocks_o0")
    );
    let mut zero = base.to_vec();
    zero.push(("gather_pages", "0"));
    assert_eq!(run("page_fault1", 1, &zero).trace_hash, plain.trace_hash);
    let thp = run(
        "thp_mix",
        1,
        &[
            ("pages_per_loop", "4096"),
            ("loops", "2"),
            ("thp_cpus", "1"),
            ("break_pages_per_cpu", "16"),
            ("pte_tables", "1"),
            ("gather_pages", "1"),
        ],
    );
    assert_eq!(x(&thp, "alloc_blocks_o9"), 16.0);
    // Counted from the measured window (after the prelude): per loop 8 deposited
    // tables and one gather page (a THP's table is freed at once: no RCU batch).
    assert_eq!(x(&thp, "alloc_blocks_o0"), 2.0 * (8.0 + 1.0));
    let free = run(
        "parallel_free",
        1,
        &[("region_pages", "65536"), ("gather_pages", "1")],
    );
    // Counted from the munmap: the faults before it are not.
    assert_eq!(x(&free, "alloc_blocks_o0"), 19.0 + 1.0);
    assert_eq!(x(&free, "free_blocks_o0"), 65536.0 + 19.0 + 1.0);
}
