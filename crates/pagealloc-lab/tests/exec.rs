//! Every workload's op stream through the thread executor on pagealloc (with memory, so
//! touches really write): the counts match the dry run's, everything is freed, and
//! `validate()` passes (the executor runs it and fails the run otherwise).

use pagealloc::Config;
use pagealloc_lab::exec::{self, ExecError, ExecOptions};
use pagealloc_lab::peers::{self, Block, HandleSpace, PageSource, SourceError, SourceSpec};
use pagealloc_lab::workload::overrides as kv;
use pagealloc_lab::workload::{by_name, names, DryRun, MigrateKind, Workload};

/// Small parameters, so each workload runs in milliseconds.
fn small(name: &str) -> Vec<(&'static str, &'static str)> {
    match name {
        "page_fault1" | "batch_sweep" => vec![("pages_per_loop", "512"), ("loops", "4")],
        "page_fault1_thp" => vec![("pages_per_loop", "2048"), ("loops", "3")],
        "kbuild" => vec![
            ("tasks", "20"),
            ("median_pages", "64"),
            ("min_pages", "16"),
            ("max_pages", "256"),
            ("chunks", "4"),
            ("compute_ns_per_page", "10"),
        ],
        "netperf" => vec![("messages", "500")],
        "lmbench" => vec![("chunks", "100")],
        "bulk" => vec![("pages", "1000"), ("rounds", "5")],
        "high_order_stress" => vec![
            ("fill_pages", "4000"),
            ("attempts", "10"),
            ("interval_ns", "1000"),
        ],
        "thp_mix" => vec![
            ("pages_per_loop", "1024"),
            ("loops", "2"),
            ("break_pages_per_cpu", "100"),
        ],
        "parallel_free" => vec![("region_pages", "4096")],
        "zonelist_hog" => vec![("total_pages", "1000")],
        "purger" => vec![("batch_pages", "64"), ("rounds", "4")],
        "mass_exit" => vec![("rss_pages", "512")],
        other => panic!("no small parameters for {other}"),
    }
}

fn workload(name: &str) -> Box<dyn Workload> {
    by_name(name, &kv(&small(name))).unwrap_or_else(|e| panic!("{e}"))
}

fn source(name: &'static str, cpus: usize, frames: u64) -> Box<dyn PageSource> {
    let config = Config::default();
    peers::build(&SourceSpec {
        name,
        config,
        cpus,
        frames,
        memory: true,
    })
    .unwrap()
}

fn opts(cpus: u32) -> ExecOptions {
    ExecOptions {
        sample_ms: 1,
        ..ExecOptions::new(cpus)
    }
}

#[test]
fn every_workload_matches_its_dry_run_on_pagealloc() {
    for &name in names() {
        for cpus in [1u32, 2, 3] {
            let w = workload(name);
            let src = source("pagealloc", cpus as usize, 1 << 15);
            let dry = match DryRun::new(cpus, 7).run(&*w) {
                Ok(d) => d,
                Err(e) => {
                    // Too few CPUs for this workload: the executor refuses it the same way.
                    let got = exec::run(&*w, &*src, &opts(cpus)).unwrap_err();
                    assert!(matches!(got, ExecError::Workload(_)), "{name}: {got}");
                    assert_eq!(got.to_string(), e.to_string());
                    continue;
                }
            };
            let r = exec::run(
                &*w,
                &*src,
                &ExecOptions {
                    seed: 7,
                    ..opts(cpus)
                },
            )
            .unwrap_or_else(|e| panic!("{name} on {cpus} CPUs: {e}"));
            let t = &r.total;
            assert_eq!(t.allocs, t.frees, "{name}: everything allocated is freed");
            assert_eq!(t.sends, t.recvs, "{name}");
            assert_eq!(t.sends, dry.total.sends, "{name}: sends");
            assert_eq!(t.barriers, dry.total.barriers, "{name}: barriers");
            assert_eq!(t.exits, dry.total.exits, "{name}: task exits");
            if name == "kbuild" {
                // Which CPU takes which task (and so draws its sizes) is up to the
                // threads' timing: only the task count and the page directories are fixed.
                assert!(t.allocs[1] >= t.exits.max(1) - 1, "{name}");
                continue;
            }
            for o in 0..t.allocs.len() {
                assert_eq!(
                    t.allocs[o] + t.alloc_failures[o],
                    dry.total.allocs[o],
                    "{name} on {cpus} CPUs: order-{o} requests"
                );
            }
            if name != "high_order_stress" {
                assert_eq!(
                    t.failed_allocs(),
                    0,
                    "{name}: no failures with ample memory"
                );
                assert_eq!(t.touches, dry.total.touches, "{name}: touches");
                // One contract, one trace hash: the same ops with the same results.
                assert_eq!(r.trace_hash, dry.trace_hash, "{name} on {cpus} CPUs: trace");
            }
            assert!(
                r.score.is_finite() && r.score >= 0.0,
                "{name}: score {}",
                r.score
            );
            let c = r.counters.expect("pagealloc has counters");
            assert!(c.pgalloc + c.pgfree > 0, "{name}: counters moved");
            let row = r.row();
            assert_eq!(row.alloc, "pagealloc");
            assert!(row.zone_lock_pct.is_some() && row.pcp_peak_pages.is_some());
            // The spec's zone lock %: wait for zone locks ÷ CPU time of the window.
            let pct = 100.0 * row.extra["lock_wait_s"] / row.extra["cpu_time_s"];
            assert!(row.extra["cpu_time_s"] > 0.0, "{name}");
            assert!((row.zone_lock_pct.unwrap() - pct).abs() < 1e-9, "{name}");
        }
    }
}

#[test]
fn refills_and_drains_are_timed_as_zone_lock_trips() {
    let w = by_name(
        "page_fault1",
        &kv(&[("pages_per_loop", "4096"), ("loops", "4")]),
    )
    .unwrap();
    let src = source("pagealloc", 2, 1 << 15);
    let r = exec::run(&*w, &*src, &opts(2)).unwrap();
    let l = r.latency.as_ref().unwrap();
    let c = r.counters.unwrap();
    assert_eq!(l.alloc.len(), 2 * 4 * 4096);
    assert_eq!(l.free.len(), 2 * 4 * 4096);
    // Every refill is an allocation that took the zone lock; the ticker may hide a few.
    assert!(!l.alloc_trip.is_empty() && l.alloc_trip.len() <= c.pcp_refill + c.alloc_direct);
    assert!(!l.free_trip.is_empty());
    assert!(!r.pcp_samples.is_empty());
    let row = r.row();
    assert!(row.alloc_lat_avg_us.unwrap() > 0.0 && row.free_lat_p99_us.unwrap() > 0.0);
}

#[test]
fn every_peer_runs_page_fault1() {
    let w = workload("page_fault1");
    for name in peers::names() {
        let src = source(name, 2, 1 << 14);
        let r = exec::run(&*w, &*src, &opts(2)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.total.allocs[0], 2 * 4 * 512, "{name}");
        assert_eq!(r.alloc, name);
        assert_eq!(r.counters.is_some(), name == "pagealloc", "{name}");
    }
}

#[test]
fn higher_orders_work_on_the_peers_that_serve_them() {
    let w = workload("netperf"); // order-2 blocks, freed on the other CPU
    for name in peers::names() {
        let src = source(name, 2, 1 << 14);
        let r = exec::run(&*w, &*src, &opts(2));
        if name == "pool" {
            let e = r.unwrap_err();
            assert!(e.to_string().contains("order-0 frames only"), "{e}");
        } else {
            let r = r.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(r.total.allocs[2], 500, "{name}");
        }
    }
}

/// A source that hands out the same frame twice: the executor must refuse it.
#[derive(Debug)]
struct Broken;

impl PageSource for Broken {
    fn name(&self) -> &'static str {
        "broken"
    }
    fn allocate(&self, _: usize, order: u8, _: MigrateKind) -> Result<Block, SourceError> {
        Ok(Block { handle: 0, order })
    }
    fn free(&self, _: usize, _: Block) -> Result<(), SourceError> {
        Ok(())
    }
    fn touch(&self, _: Block) {}
    fn has_memory(&self) -> bool {
        false
    }
    fn handle_space(&self) -> HandleSpace {
        HandleSpace::Frames { frames: 1024 }
    }
}

#[test]
fn a_frame_handed_out_twice_fails_the_run() {
    let w = workload("page_fault1");
    let e = exec::run(&*w, &Broken, &opts(1)).unwrap_err();
    assert!(matches!(e, ExecError::BadBlock(_)), "{e}");
    assert!(e.to_string().contains("already allocated"), "{e}");
}

#[test]
fn a_leak_fails_validation() {
    // pagealloc with a block allocated outside the run: validate() sees it.
    let w = workload("bulk");
    let src = source("pagealloc", 1, 1 << 14);
    let leaked = src.allocate(0, 0, MigrateKind::Movable).unwrap();
    let e = exec::run(&*w, &*src, &opts(1)).unwrap_err();
    assert!(e.to_string().contains("still allocated"), "{e}");
    src.free(0, leaked).unwrap();
    src.validate().unwrap();
}

#[test]
fn the_kernel_peer_recycles_addresses_across_cpus_without_deadlock() {
    // Every CPU starts with an empty free list and takes from the others': many short
    // runs on 2 and 4 threads make them do it at once. A deadlock fails by the timeout.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let w = by_name(
            "page_fault1",
            &kv(&[("pages_per_loop", "64"), ("loops", "3")]),
        )
        .unwrap();
        for cpus in [2u32, 4] {
            for _ in 0..20 {
                let src = source("kernel", cpus as usize, 0);
                let r = exec::run(&*w, &*src, &opts(cpus)).unwrap();
                assert_eq!(r.total.allocs[0], u64::from(cpus) * 3 * 64);
            }
        }
        // netperf: the sender's list stays empty, frees land on the receiver's.
        let w = by_name("netperf", &kv(&[("messages", "3000")])).unwrap();
        let src = source("kernel", 2, 0);
        exec::run(&*w, &*src, &opts(2)).unwrap();
        tx.send(()).unwrap();
    });
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("kernel peer runs finish");
}

/// pagealloc, except that CPU 1's allocations panic.
#[derive(Debug)]
struct PanicsOnCpu1(Box<dyn PageSource>);

impl PageSource for PanicsOnCpu1 {
    fn name(&self) -> &'static str {
        "panics"
    }
    fn allocate(&self, cpu: usize, order: u8, kind: MigrateKind) -> Result<Block, SourceError> {
        assert!(cpu != 1, "injected failure on CPU 1");
        self.0.allocate(cpu, order, kind)
    }
    fn free(&self, cpu: usize, b: Block) -> Result<(), SourceError> {
        self.0.free(cpu, b)
    }
    fn touch(&self, b: Block) {
        self.0.touch(b);
    }
    fn has_memory(&self) -> bool {
        self.0.has_memory()
    }
    fn handle_space(&self) -> HandleSpace {
        self.0.handle_space()
    }
    fn pcp_pages(&self) -> Option<u64> {
        self.0.pcp_pages()
    }
}

#[test]
fn a_panicking_thread_stops_the_run_instead_of_hanging_it() {
    // CPU 0 fills its share and waits at barrier 0 for CPU 1, which panics; the sampler
    // runs too (the source has per-CPU pages). The run must end, with the panic.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let w = workload("high_order_stress");
        let src = PanicsOnCpu1(source("pagealloc", 2, 1 << 14));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            exec::run(&*w, &src, &opts(2))
        }));
        tx.send(r.is_err()).unwrap();
    });
    let panicked = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the run ends");
    assert!(panicked, "the thread's panic is passed on");
}

/// `CopyIn`/`CopyOut` on threads move real bytes: what one copy writes into a block,
/// the other reads back, on every peer with memory behind its blocks.
#[test]
fn copies_move_the_bytes_through_the_block() {
    for name in peers::names() {
        let src = source(name, 1, 1 << 12);
        if !src.has_memory() {
            continue;
        }
        // Order 2 where the source serves it (the pool serves order 0 only).
        let (b, bytes) = match src.allocate(0, 2, MigrateKind::Unmovable) {
            Ok(b) => (b, 10_240u32),
            Err(SourceError::Unsupported { .. }) => {
                (src.allocate(0, 0, MigrateKind::Unmovable).unwrap(), 4096)
            }
            Err(e) => panic!("{name}: {e}"),
        };
        let mut sent: Vec<u8> = (0..bytes).map(|i| (i * 7 % 251) as u8).collect();
        src.copy(b, &mut sent, true);
        let mut got = vec![0u8; bytes as usize];
        src.copy(b, &mut got, false);
        assert_eq!(got, sent, "{name}");
        src.free(0, b).unwrap();
    }
}
