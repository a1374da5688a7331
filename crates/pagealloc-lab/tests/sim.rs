//! Simulator tests: determinism, the cross-check against the reference executor, bad
//! input, and the kbuild ablation's directions against the published table.
//!
//! The full-scale kbuild ablation runs in release builds only (about 30 s); run it with
//! `cargo test --release -p pagealloc-lab --test sim -- --nocapture`.

use pagealloc::Config;
use pagealloc_lab::sim::{self, calibrate, Machine, SimOptions};
use pagealloc_lab::workload::overrides as kv;
use pagealloc_lab::workload::{self, dry_run, Scale};

fn small(name: &str, pairs: &[(&str, &str)]) -> Box<dyn workload::Workload> {
    workload::build(name, Scale::Laptop, &kv(pairs)).unwrap()
}

fn opts(machine: &str, config: &str, seed: u64) -> SimOptions {
    let mut o = SimOptions::new(
        Machine::by_name(machine).unwrap(),
        config.parse::<Config>().unwrap(),
    );
    o.seed = seed;
    o
}

/// The same small workload on 2 real threads (the lab's executor) and on 2 virtual CPUs
/// of a machine with the executor's layout (one node, 1 GiB, 2 MiB LLC slice): the
/// allocator counters agree. Pages allocated and freed must be equal; the pcp
/// traffic (refills, drains, pages taken from the zone) within 5 %: page_fault1's
/// per-CPU pattern is deterministic, so only the interleaving of the two CPUs on the
/// shared zone (and a decay tick, if the threads took over a second) can differ.
#[test]
fn two_virtual_cpus_match_two_threads() {
    use pagealloc_lab::exec::{self, ExecOptions};
    // base: a fixed high of a few hundred pages, so every loop refills and drains.
    let w = small("page_fault1", &[("pages_per_loop", "4096"), ("loops", "8")]);
    let config: Config = "base".parse().unwrap();
    let frames = 1u64 << 18;
    let threads = exec::run_named(
        &*w,
        "pagealloc",
        &config,
        &ExecOptions {
            latency: false,
            sample_ms: 0,
            pin: false,
            ..ExecOptions::new(2)
        },
        Some(frames),
    )
    .unwrap();
    let tc = threads.counters.expect("pagealloc has counters");
    let machine = Machine {
        name: "host-2",
        description: "the thread executor's layout",
        cpus: 2,
        sockets: 1,
        nodes: 1,
        mem_bytes: frames * 4096,
        llc_per_socket: 2 * pagealloc::topology::DEFAULT_LLC_SLICE,
        cost: Machine::by_name("desktop-8").unwrap().cost,
        caches: Machine::by_name("desktop-8").unwrap().caches,
        host: None,
    };
    let mut o = SimOptions::new(machine, config);
    o.cpus = Some(2);
    let r = sim::run(&*w, &o).unwrap();
    let within = |name: &str, ours: f64, theirs: u64| {
        let theirs = theirs as f64;
        println!("{name}: simulator {ours}, threads {theirs}");
        assert!(
            (ours - theirs).abs() <= 0.05 * theirs.max(1.0),
            "{name}: simulator {ours}, threads {theirs}"
        );
    };
    assert_eq!(r.extra["pgalloc"], tc.pgalloc as f64);
    assert_eq!(r.extra["pgfree"], tc.pgfree as f64);
    within("alloc_zone", r.alloc_zone.unwrap(), tc.alloc_zone);
    within("pcp_refill", r.extra["pcp_refill"], tc.pcp_refill);
    within("pcp_drain", r.extra["pcp_drain"], tc.pcp_drain);
    within("free_high", r.free_high.unwrap(), tc.free_high);
    // One row constructor: every column has the same definition on both executors.
    let tr = threads.row();
    for (who, row) in [("simulator", &r), ("threads", &tr)] {
        let pct = 100.0 * row.extra["lock_wait_s"] / row.extra["cpu_time_s"];
        assert!(
            (row.zone_lock_pct.unwrap() - pct).abs() < 1e-9,
            "{who}: zone lock % is wait ÷ CPU time"
        );
        assert_eq!(row.extra["alloc_failures"], 0.0, "{who}");
        assert_eq!(row.cpus, Some(2), "{who}");
    }
}

/// The step of the kbuild table the model cannot reproduce, and why
/// (docs/sim-cost-model.md §4.3): from patch7 to patch9 the published free_high falls
/// (−1.4 points); BELOW_HIGH's drains raise `free_factor` on more CPUs than
/// RECLAIM_ACTIVE's did, and every exit that drained fires free_high on its slab burst,
/// so here it rises.
const STRUCTURAL_MISSES: [(&str, &str); 1] = [("patch7 → patch9", "free_high")];

/// Checks that every step of `d` outside `misses` moves the published way, and that
/// BELOW_HIGH acted (patch7 and patch9 ran different traces).
fn check_directions(
    rows: &[pagealloc_lab::Row],
    d: &[calibrate::Direction],
    misses: &[(&str, &str)],
    seed: u64,
) {
    assert_eq!(d.len(), 24);
    for x in d {
        let known = misses.contains(&(x.step.as_str(), x.column));
        assert!(x.agrees || known, "{x:?} (seed {seed})");
    }
    assert_ne!(
        hash(rows, "patch7"),
        hash(rows, "patch9"),
        "BELOW_HIGH acts"
    );
}

fn hash(rows: &[pagealloc_lab::Row], config: &str) -> Option<String> {
    rows.iter()
        .find(|r| r.config.as_deref().and_then(|x| x.split(',').next()) == Some(config))
        .and_then(|r| r.trace_hash.clone())
}

/// The full kbuild ablation (896 tasks, seed 1, the calibrated headroom) on spr-2s-224:
/// prints the table beside the published one; every step of every column but the
/// structural miss moves the published way. Release builds only (about 30 s; minutes in
/// a debug build): `cargo test --release -p pagealloc-lab --test sim -- --nocapture`.
/// This build ends before the first decay tick (0.6–0.8 s of virtual time); the long
/// build, in which the decay acts (docs/sim-cost-model.md §4.3: 22 of 24 with these
/// values, the decay itself moving the rows by under a point), is the same ablation
/// with ten times the tasks: `pagealloc compare kbuild --sim --machine spr-2s-224 -p
/// tasks=8960` (800 s of CPU, too long for CI).
/// (A quarter of the tasks is not a faster stand-in: two waves of tasks grow patch7's
/// pcps less, so the calibrated headroom is never reached and patch9 runs patch7's
/// trace.)
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: minutes in a debug build")]
fn kbuild_moves_like_the_published_table() {
    let o = opts("spr-2s-224", "base", 1);
    let t0 = std::time::Instant::now();
    let rows = calibrate::kbuild_ablation(&[], &o, &|r| {
        eprintln!(
            "{} {:.1}s {:.2} M page ops/s; virtual build {:.3} s, decay drains {}",
            r.config.as_deref().unwrap_or(""),
            r.wall_s.unwrap_or(0.0),
            r.extra["page_ops_per_wall_s"] / 1e6,
            r.extra.get("makespan_s").copied().unwrap_or(f64::NAN),
            r.extra.get("decay_drain").copied().unwrap_or(f64::NAN)
        )
    })
    .unwrap();
    eprintln!("wall {:.1}s", t0.elapsed().as_secs_f64());
    print!("{}", calibrate::kbuild_table(&rows));
    let d = calibrate::kbuild_directions(&rows);
    print!("{}", calibrate::directions_text(&d));
    print!("{}", calibrate::kbuild_decay_table(&rows));
    print!("{}", calibrate::kbuild_lock_table(&rows));
    check_directions(&rows, &d, &STRUCTURAL_MISSES, o.seed);
}

/// The decay tick acts on a kbuild that outlasts it, and only where `high` is tuned:
/// on desktop-8 a build of a few seconds of virtual time (long compute between faults,
/// so few page operations) sees a tick every second; under patch7 each tick finds
/// raised pagesets, lowers their mean `high` by about 1/8 (`decay_pcp_high`) and drains
/// what is above it, while base's fixed `high` gives the tick nothing to do.
#[test]
fn the_decay_acts_on_a_build_that_outlasts_the_tick() {
    let w = small(
        "kbuild",
        &[
            ("tasks", "48"),
            ("median_pages", "1024"),
            ("max_pages", "4096"),
            ("compute_ns_per_page", "500000"),
        ],
    );
    let run = |config: &str| sim::run(&*w, &opts("desktop-8", config, 3)).unwrap();
    let tuned = run("patch7");
    let e = |k: &str| tuned.extra[k];
    assert!(e("makespan_s") > 2.0, "{}", e("makespan_s"));
    assert!(e("ticks") >= 2.0, "{}", e("ticks"));
    assert!(e("tick_pcps") > 0.0);
    let (before, after) = (e("tick_high_before"), e("tick_high_after"));
    assert!(
        after < 0.95 * before && after > 0.8 * before,
        "decay_pcp_high takes 1/8: {before} -> {after}"
    );
    assert!(
        e("decay_drain") > 0.0,
        "the ticks drained what was above high"
    );
    // The zone lock by trip kind: the decay's drains are background trips that held the
    // lock past their tick; every wait of a workload trip is queued behind some kind.
    assert!(e("bg_trips") >= e("decay_drain"), "{}", e("bg_trips"));
    assert!(e("bg_hold_s") > 0.0 && e("tick_burst_s") > 0.0);
    assert!(e("tick_burst_max_s") <= e("tick_burst_s"));
    let waited = e("refill_wait_s") + e("drain_wait_s");
    let behind = e("refill_wait_behind_s") + e("drain_wait_behind_s") + e("bg_wait_behind_s");
    assert!(
        (waited - behind).abs() <= 1e-9 * waited.max(1.0),
        "waits {waited} s, queued behind a kind {behind} s"
    );
    assert!(e("refill_trips") > 0.0 && e("drain_trips") > 0.0);
    assert!(e("refill_contended") <= e("refill_trips"));
    // One tick per CPU per second, each at its own skewed time (CPU n 3n ms before the
    // second, `round_jiffies_common`): 8 CPUs over a build of 4.1 s make 32, and the
    // decay drains of different CPUs, 3 ms apart, never queue behind one another (with
    // every CPU ticking at the same instant, 3 of these 6 found the lock taken).
    let whole = e("makespan_s").floor();
    assert!(
        e("ticks") >= 8.0 * (whole - 1.0) && e("ticks") <= 8.0 * (whole + 1.0),
        "{} ticks in {} s",
        e("ticks"),
        e("makespan_s")
    );
    assert!(e("bg_trips") > 0.0);
    assert_eq!(e("bg_contended"), 0.0, "decay drains queued together");
    let fixed = run("base");
    assert!(fixed.extra["ticks"] >= 2.0);
    assert_eq!(fixed.extra["tick_pcps"], 0.0, "base: high is not tuned");
    assert_eq!(fixed.extra["decay_drain"], 0.0);
    assert_eq!(
        fixed.extra["tick_burst_s"], 0.0,
        "base: the ticks take no lock"
    );
}

/// The headroom model: the rest of the system holds all but the asked headroom above each
/// zone's high watermark, the row's counters leave its allocations out, and with all
/// memory free BELOW_HIGH never acts (patch9 runs patch7's trace), while with a
/// headroom the workload's pcps outgrow, it does.
#[test]
fn headroom_holds_memory_and_lets_below_high_act() {
    let w = small(
        "kbuild",
        &[
            ("tasks", "32"),
            ("median_pages", "2048"),
            ("max_pages", "8192"),
        ],
    );
    let run = |config: &str, headroom: sim::Headroom| {
        let mut o = opts("desktop-8", config, 7);
        o.headroom = headroom;
        sim::run(&*w, &o).unwrap()
    };
    let free = run("patch7", sim::Headroom::AllFree);
    assert_eq!(free.extra["held_pages"], 0.0);
    assert_eq!(
        free.trace_hash,
        run("patch9", sim::Headroom::AllFree).trace_hash,
        "all memory free: BELOW_HIGH never acts"
    );
    // desktop-8: one zone of 4 GiB; keep 128 MiB above its high watermark: room for
    // the tasks (no allocation fails), not for patch7's pcps.
    let tight = run("patch7", sim::Headroom::Mib(128));
    assert_eq!(tight.extra["alloc_fail"], 0.0);
    let zone_pages = 1u64 << 20;
    let held = tight.extra["held_pages"];
    assert!(
        held > 0.9 * zone_pages as f64 && held < zone_pages as f64,
        "held {held}"
    );
    assert_eq!(tight.extra["headroom_mib"], 128.0);
    // The held blocks are not the workload's: pgalloc counts the workload's pages only.
    assert_eq!(tight.extra["pgalloc"], free.extra["pgalloc"]);
    assert_eq!(tight.extra["pgalloc"], tight.extra["pgfree"]);
    let tight9 = run("patch9", sim::Headroom::Mib(128));
    assert_ne!(
        tight.trace_hash, tight9.trace_hash,
        "128 MiB of headroom: BELOW_HIGH acts"
    );
    assert!(
        tight9.pcp_peak_pages < tight.pcp_peak_pages,
        "BELOW_HIGH stops pcp growth: {:?} vs {:?}",
        tight9.pcp_peak_pages,
        tight.pcp_peak_pages
    );
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
        // The run's own timings (host wall and CPU time) differ between runs.
        let mut e = b.extra.clone();
        for k in ["page_ops_per_wall_s", "run_cpu_s", "page_ops_per_cpu_s"] {
            e.insert(k.into(), a.extra[k]);
        }
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

/// `alloc_time_s` is the part of the CPU time spent in the allocator's calls (the
/// system time the zonelist hog's table reports): all of it for bulk, whose pages are
/// never touched, and part of it for page_fault1, whose touches (zeroing each page) are
/// the workload's own time.
#[test]
fn allocator_time_is_the_calls_share_of_cpu_time() {
    let mut o = opts("desktop-8", "linux-6.12", 1);
    o.cpus = Some(2);
    let bulk = sim::run(&*small("bulk", &[("pages", "2000"), ("rounds", "2")]), &o).unwrap();
    assert!(bulk.extra["alloc_time_s"] > 0.0);
    assert_eq!(bulk.extra["alloc_time_s"], bulk.extra["cpu_time_s"]);
    let pf = small("page_fault1", &[("pages_per_loop", "1024"), ("loops", "2")]);
    let pf = sim::run(&*pf, &o).unwrap();
    let (sys, cpu) = (pf.extra["alloc_time_s"], pf.extra["cpu_time_s"]);
    assert!(sys > 0.0 && sys < cpu, "alloc {sys} s of {cpu} s");
}

/// The batch sweep models a function_graph measurement: the tracer's in-window cost
/// (`fgraph_ns`) is in every trip latency the sweep reports, once per trip, and the CPU
/// pays it after each trip (the published throughput was taken with the tracer on),
/// outside the lock: the holds stay bare and the same pages move. page_fault1 (the
/// same program, not timed by the tracer) never sees it.
#[test]
fn function_graph_window_is_in_the_sweep_only() {
    let params = kv(&[("pages_per_loop", "1024"), ("loops", "2")]);
    let sim_at = |name: &str, fgraph: f64| {
        let w = workload::build(name, Scale::Laptop, &params).unwrap();
        let mut o = opts("icx-2s-128", "base", 1);
        o.cpus = Some(1);
        o.mem_scale = 64;
        let mut c = o.machine.cost;
        c.fgraph_ns = fgraph;
        o.cost = Some(c);
        sim::run(&*w, &o).unwrap()
    };
    assert!(sim::fgraph_timed("batch_sweep") && !sim::fgraph_timed("page_fault1"));
    let (bare, traced) = (sim_at("batch_sweep", 0.0), sim_at("batch_sweep", 500.0));
    for k in [
        "page_ops",
        "refill_trips",
        "drain_trips",
        "refill_lines",
        "drain_lines",
    ] {
        assert_eq!(bare.extra[k], traced.extra[k], "{k}");
    }
    for k in ["refill_hold_s", "drain_hold_s"] {
        assert!((bare.extra[k] - traced.extra[k]).abs() < 1e-9, "{k}");
    }
    for (b, t) in [
        (bare.alloc_lat_avg_us, traced.alloc_lat_avg_us),
        (bare.free_lat_avg_us, traced.free_lat_avg_us),
    ] {
        let (b, t) = (b.unwrap(), t.unwrap());
        assert!((t - b - 0.5).abs() < 0.002, "{b} µs -> {t} µs");
    }
    // The CPU's time: 500 ns more per trip of the measured window.
    let trips = traced.extra["refill_trips"] + traced.extra["drain_trips"];
    assert!(trips > 0.0);
    let more = traced.extra["cpu_time_s"] - bare.extra["cpu_time_s"];
    assert!(
        (more - trips * 500e-9).abs() < 1e-6,
        "{more} s more for {trips} trips"
    );
    assert!(traced.score.unwrap() < bare.score.unwrap());
    let pf1 = sim_at("page_fault1", 500.0);
    assert_eq!(pf1.trace_hash, bare.trace_hash);
    assert_eq!(pf1.free_lat_avg_us, bare.free_lat_avg_us);
    assert_eq!(pf1.alloc_lat_avg_us, bare.alloc_lat_avg_us);
}
