//! Simulator tests: determinism, the cross-check against the reference executor, bad
//! input, and the kbuild ablation's directions against the published table.
//!
//! The full-scale runs are `#[ignore]`d (they take about a minute in release); run them
//! with `cargo test --release -p pagealloc-lab --test sim -- --ignored --nocapture`.

use pagealloc::Config;
use pagealloc_lab::sim::{self, calibrate, Machine, SimOptions};
use pagealloc_lab::workload::{self, dry_run, Scale};

fn small(name: &str, pairs: &[(&str, &str)]) -> Box<dyn workload::Workload> {
    workload::build(name, Scale::Laptop, &kv(pairs)).unwrap()
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn opts(machine: &str, config: &str, seed: u64) -> SimOptions {
    let mut o = SimOptions::new(
        Machine::by_name(machine).unwrap(),
        config.parse::<Config>().unwrap(),
    );
    o.seed = seed;
    o
}

#[test]
fn kbuild_ablation_full() {
    if std::env::var("SIM_FULL").is_err() {
        return;
    }
    let o = opts("spr-2s-224", "base", 1);
    let t0 = std::time::Instant::now();
    let rows = calibrate::kbuild_ablation(&[], &o, &|r| {
        eprintln!(
            "{} {:.1}s {:.2} Mops/s",
            r.config.as_deref().unwrap_or(""),
            r.wall_s.unwrap_or(0.0),
            r.extra["page_ops_per_wall_s"] / 1e6
        )
    })
    .unwrap();
    eprintln!("wall {:.1}s", t0.elapsed().as_secs_f64());
    println!(
        "{}",
        pagealloc_lab::report::table(&rows, pagealloc_lab::report::WORKLOAD_COLUMNS)
    );
    println!("{}", calibrate::kbuild_table(&rows));
    for d in calibrate::kbuild_directions(&rows) {
        println!("{d:?}");
    }
}

#[test]
fn kbuild_one_full() {
    let Ok(config) = std::env::var("SIM_ONE") else {
        return;
    };
    let o = opts("spr-2s-224", &config, 1);
    let w = workload::build("kbuild", Scale::Full, &[]).unwrap();
    let r = sim::run(&*w, &o).unwrap();
    println!("{}", r.to_json());
}

#[test]
fn same_seed_same_hash_other_seed_other_hash() {
    let w = small(
        "kbuild",
        &[
            ("tasks", "24"),
            ("median_pages", "256"),
            ("max_pages", "2048"),
        ],
    );
    let mut o = opts("desktop-8", "patch7", 42);
    o.cpus = Some(4);
    let a = sim::run(&*w, &o).unwrap();
    let b = sim::run(&*w, &o).unwrap();
    assert!(a.trace_hash.is_some());
    assert_eq!(a.trace_hash, b.trace_hash, "seed {} replays", o.seed);
    assert_eq!(a.score, b.score);
    assert_eq!(a.zone_lock_pct, b.zone_lock_pct);
    assert_eq!(a.extra, {
        let mut e = b.extra.clone();
        e.insert("page_ops_per_wall_s".into(), a.extra["page_ops_per_wall_s"]);
        e
    });
    o.seed = 43;
    let c = sim::run(&*w, &o).unwrap();
    assert_ne!(a.trace_hash, c.trace_hash, "another seed, another trace");
}

/// The simulator does what the reference executor does: same ops, same pages allocated
/// and freed, on 2 virtual CPUs. (kbuild is left out: its shared task queue is served
/// in a different order by round-robin and by virtual time, so the tasks drawn differ.)
#[test]
fn two_virtual_cpus_match_the_dry_run() {
    for (name, pairs) in [
        (
            "page_fault1",
            &[("pages_per_loop", "512"), ("loops", "4")][..],
        ),
        ("netperf", &[("messages", "200")][..]),
        ("bulk", &[("pages", "3000"), ("rounds", "2")][..]),
    ] {
        let w = small(name, pairs);
        let reference = dry_run(&*w, 2, 9);
        let mut o = opts("desktop-8", "linux-6.12", 9);
        o.cpus = Some(2);
        let r = sim::run(&*w, &o).unwrap();
        let pages: u64 = reference
            .total
            .allocs
            .iter()
            .enumerate()
            .map(|(k, n)| n << k)
            .sum();
        assert_eq!(r.extra["ops"], reference.ops as f64, "{name}: ops");
        assert_eq!(r.extra["pgalloc"], pages as f64, "{name}: pages allocated");
        assert_eq!(r.extra["pgfree"], pages as f64, "{name}: pages freed");
        assert_eq!(r.extra["alloc_fail"], 0.0, "{name}");
        assert_eq!(r.cpus, Some(2));
    }
}

#[test]
fn a_failing_run_reports_seed_and_replay_command() {
    let w = small("netperf", &[("pairs", "4")]);
    let mut o = opts("desktop-8", "base", 77);
    o.cpus = Some(2);
    let e = sim::run(&*w, &o).unwrap_err();
    let msg = e.to_string();
    assert_eq!(e.seed, 77);
    assert!(msg.contains("needs 8 CPUs"), "{msg}");
    assert!(
        msg.contains("pagealloc sim netperf --machine desktop-8 --config base --seed 77"),
        "{msg}"
    );
}
