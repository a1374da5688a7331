//! Zone-lock hold time per refill and per drain, merge skipping + clustered refill on vs
//! off (Aaron Lu's RFC, docs/mechanisms.md Appendix A), on a page_fault1-like loop: each thread
//! allocates N order-0 pages, then frees them, repeatedly (will-it-scale page_fault1
//! maps, touches and unmaps 128 MiB per iteration).
//!
//! ```text
//! cargo run --release -p pcp-pagealloc --example lock_hold -- [--threads 2] [--pages 16384]
//!     [--rounds 8] [--runs 5]
//! ```
//!
//! The phases are separated by barriers, and the counters are read and reset between
//! them, so the allocation phase's zone-lock trips are refills (`rmqueue_bulk`) and the
//! free phase's are drains (`free_pcppages_bulk`). Per phase: hold ns per trip
//! (`zone_lock_hold_ns / zone_lock`), the longest hold, pages per trip, metadata frames
//! touched under the lock per refill, and contention. Configurations run interleaved in
//! every run; the table shows medians over runs. A benchmark, not a test: nothing is
//! asserted about time. `validate()` runs at the end of every run.

use pagealloc::{Allocator, Config, Counters, Gfp, Layout};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

const CONFIGS: [(&str, &str); 5] = [
    ("off", "linux-6.12"),
    ("merge_skip", "linux-6.12,merge_skip=on"),
    ("clustered", "linux-6.12,clustered_refill=on"),
    ("both", "linux-6.12,merge_skip=on,clustered_refill=on"),
    (
        "both+splice",
        "linux-6.12,merge_skip=on,clustered_refill=on,splice_drain=on",
    ),
];

const HELP: &str = "lock_hold: zone-lock hold time per refill and per drain, merge skipping + clustered refill on vs off

USAGE: cargo run --release -p pcp-pagealloc --example lock_hold -- [OPTIONS]

OPTIONS:
  --threads <T>   threads, one CPU each, sharing one zone (default 2)
  --pages <N>     order-0 pages each thread allocates then frees per round (default 16384 = 64 MiB)
  --rounds <R>    measured rounds per run, after one warm-up round (default 8)
  --runs <K>      runs; every configuration once per run, interleaved (default 5)
  -h, --help      this text";

struct Args {
    threads: usize,
    pages: usize,
    rounds: usize,
    runs: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        threads: 2,
        pages: 16384,
        rounds: 8,
        runs: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "-h" || k == "--help" {
            println!("{HELP}");
            std::process::exit(0);
        }
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        let n: usize = v
            .parse()
            .map_err(|_| format!("{k}: expected a positive number, got {v:?}"))?;
        if n == 0 {
            return Err(format!("{k} must be at least 1"));
        }
        match k.as_str() {
            "--threads" => a.threads = n,
            "--pages" => a.pages = n,
            "--rounds" => a.rounds = n,
            "--runs" => a.runs = n,
            _ => return Err(format!("unknown option {k}\n\n{HELP}")),
        }
    }
    Ok(a)
}

/// Sums over the measured rounds of one run.
#[derive(Default, Clone, Copy)]
struct Phase {
    trips: u64,
    hold_ns: u64,
    max_hold_ns: u64,
    contended: u64,
    ops: u64,
    pages: u64,
    touched: u64,
    clusters: u64,
    wall_ns: u64,
}

impl Phase {
    fn add_alloc(&mut self, c: &Counters, wall: u64) {
        self.add(c, wall);
        self.ops += c.pcp_refill;
        self.pages += c.pcp_refill_pages;
        self.touched += c.refill_meta_touched;
        self.clusters += c.cluster_cut;
    }
    fn add_free(&mut self, c: &Counters, wall: u64) {
        self.add(c, wall);
        self.ops += c.pcp_drain;
        self.pages += c.pcp_drain_pages;
    }
    fn add(&mut self, c: &Counters, wall: u64) {
        self.trips += c.zone_lock;
        self.hold_ns += c.zone_lock_hold_ns;
        self.max_hold_ns = self.max_hold_ns.max(c.zone_lock_max_hold_ns);
        self.contended += c.zone_lock_contended;
        self.wall_ns += wall;
    }
    fn per_trip(&self) -> f64 {
        self.hold_ns as f64 / self.trips.max(1) as f64
    }
}

struct Run {
    refill: Phase,
    drain: Phase,
    batch: i32,
}

fn measure(cfg: &Config, a: &Args) -> Run {
    // At least 1 GiB so that the zone's batch is the kernel's usual 63 (metadata only:
    // the frames are never touched).
    let pages = ((a.threads * a.pages) as u64 * 5 / 4 + 8192).max(1 << 18);
    let alloc = Allocator::new(&Layout::single(pages, a.threads), cfg.clone()).expect("allocator");
    let barrier = Barrier::new(a.threads);
    let out = Mutex::new(Run {
        refill: Phase::default(),
        drain: Phase::default(),
        batch: alloc.pcp_info(0, 0).unwrap().batch,
    });
    std::thread::scope(|s| {
        for t in 0..a.threads {
            let (alloc, barrier, out) = (&alloc, &barrier, &out);
            s.spawn(move || {
                let mut held = Vec::with_capacity(a.pages);
                for round in 0..=a.rounds {
                    let measured = round > 0; // round 0 warms up (and builds clusters)
                    barrier.wait();
                    let t0 = Instant::now();
                    for _ in 0..a.pages {
                        held.push(alloc.alloc_on(t, 0, Gfp::USER, None).expect("memory"));
                    }
                    let wall = t0.elapsed().as_nanos() as u64;
                    if barrier.wait().is_leader() {
                        let c = alloc.counters();
                        if measured {
                            out.lock().unwrap().refill.add_alloc(&c, wall);
                        }
                        alloc.reset_counters();
                    }
                    barrier.wait();
                    let t0 = Instant::now();
                    for f in held.drain(..) {
                        alloc.free_on(t, f).expect("free");
                    }
                    let wall = t0.elapsed().as_nanos() as u64;
                    if barrier.wait().is_leader() {
                        let c = alloc.counters();
                        if measured {
                            out.lock().unwrap().drain.add_free(&c, wall);
                        }
                        alloc.reset_counters();
                    }
                }
            });
        }
    });
    alloc.drain_all_pages();
    let t = alloc.validate().expect("validate at the end of the run");
    assert_eq!(t.allocated, 0, "every page came back");
    out.into_inner().unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let cfgs: Vec<(&str, Config)> = CONFIGS
        .iter()
        .map(|(n, s)| (*n, s.parse::<Config>().expect("config")))
        .collect();
    eprintln!(
        "lock_hold: {} threads x {} pages ({} MiB each), {} rounds + 1 warm-up, {} runs, {} configs",
        a.threads,
        a.pages,
        (a.pages * 4096) >> 20,
        a.rounds,
        a.runs,
        cfgs.len()
    );
    let mut results: Vec<Vec<Run>> = cfgs.iter().map(|_| Vec::new()).collect();
    for run in 0..a.runs {
        for (i, (name, c)) in cfgs.iter().enumerate() {
            eprint!("\rrun {}/{} {name:<12}", run + 1, a.runs);
            results[i].push(measure(c, &a));
        }
    }
    eprintln!("\rdone{:30}", "");
    println!(
        "\nzone-lock hold per trip (median of {} runs; {} threads, {} order-0 pages each per round, {} rounds, batch {})\n",
        a.runs, a.threads, a.pages, a.rounds, results[0][0].batch
    );
    println!(
        "| config | refill hold ns | refill max ns | pages/refill | meta touched/refill | clusters/refill | drain hold ns | drain max ns | pages/drain | contended % | alloc ns/page | free ns/page |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, (name, _)) in cfgs.iter().enumerate() {
        let r = &results[i];
        let med = |f: &dyn Fn(&Run) -> f64| median(r.iter().map(f).collect());
        let per_op = |p: &Phase, x: u64| x as f64 / p.ops.max(1) as f64;
        let total_pages = (a.threads * a.pages * a.rounds) as f64;
        println!(
            "| {name} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
            med(&|r| r.refill.per_trip()),
            med(&|r| r.refill.max_hold_ns as f64),
            med(&|r| per_op(&r.refill, r.refill.pages)),
            med(&|r| per_op(&r.refill, r.refill.touched)),
            med(&|r| per_op(&r.refill, r.refill.clusters)),
            med(&|r| r.drain.per_trip()),
            med(&|r| r.drain.max_hold_ns as f64),
            med(&|r| per_op(&r.drain, r.drain.pages)),
            med(&|r| 100.0
                * (r.refill.contended + r.drain.contended) as f64
                / (r.refill.trips + r.drain.trips).max(1) as f64),
            // wall time summed over threads, per page handled
            med(&|r| r.refill.wall_ns as f64 / total_pages),
            med(&|r| r.drain.wall_ns as f64 / total_pages),
        );
    }
    println!(
        "\nhold = zone_lock_hold_ns / zone_lock trips in the phase; max = longest single hold;\n\
         alloc/free ns/page = each thread's phase wall time, summed over threads, per page."
    );
}
