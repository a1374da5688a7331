//! Which switches change policy: the result-level comparison behind docs/performance.md,
//! "Which switches earn their place". Every switch that is not a kernel commit, an RFC or
//! a seed mechanism runs on and off over the same workloads and seeds: two CPUs
//! allocating orders 0–3 and 9, freeing their own and each other's blocks in a shuffled
//! order, decay ticks and CPU drains between rounds. A run's result is what a user of the
//! allocator sees: every block handed out, as (cpu, pfn, order) in order, the free lists
//! after every round, and the counters of its decisions (refills, drains, fallbacks,
//! zone trips; not the times, nor the accesses it reports under the zone lock, nor the
//! counters that count a switch's own work). A switch whose runs are equal changes no
//! policy; one whose runs differ does. `cargo test -p pcp-pagealloc --test switches --
//! --nocapture` prints the table.

mod common;
use common::*;
use pagealloc::*;

/// What a run hands out and decides.
#[derive(PartialEq, Eq, Debug)]
struct Result_ {
    /// (cpu, pfn, order) of every allocation, in order.
    handed_out: Vec<(usize, u64, u8)>,
    /// The free lists per order after every round.
    lists: Vec<[u64; MAX_ORDER as usize + 1]>,
    /// The decision counters at the end.
    counters: Vec<(&'static str, u64)>,
}

/// Counters of work, not decisions: times, the accesses reported under the zone lock, and
/// the counts of a switch's own form of the same work.
fn is_work(name: &str) -> bool {
    name.ends_with("_ns")
        || matches!(
            name,
            "zone_lock_meta"
                | "zone_lock_lines"
                | "drain_spliced"
                | "free_unwritten"
                | "refill_meta_touched"
                | "drain_newest"
        )
}

/// The workload: `rounds` rounds on two CPUs (1 GiB), each CPU allocating `per_round`
/// blocks of the orders below; the blocks held are shuffled (an LCG seeded `seed`) and
/// three in four freed, each by the CPU the LCG names (a remote free half of the time);
/// every second round a decay tick on both CPUs, every third a drain of CPU 1; the last
/// round ends with a long run of frees (CPU 0 allocates 16 000 frames and frees them all,
/// page_fault1's loop).
fn run(c: Config, seed: u64) -> Result_ {
    let (a, p) = manual(&Layout::single(1 << 18, 2), c);
    let orders: [u8; 12] = [0, 0, 0, 0, 9, 1, 0, 2, 0, 3, 9, 0];
    let mut s = seed;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 33
    };
    let mut held: Vec<Frame> = Vec::new();
    let mut r = Result_ {
        handed_out: Vec::new(),
        lists: Vec::new(),
        counters: Vec::new(),
    };
    for round in 0..8u64 {
        for k in 0..1500u64 {
            let cpu = (k & 1) as usize;
            let order = orders[((k / 2 + round + seed) % orders.len() as u64) as usize];
            p.set_cpu(cpu);
            if let Ok(f) = a.alloc_on(cpu, order, Gfp::USER, None) {
                r.handed_out.push((cpu, f.pfn.0, f.order));
                held.push(f);
            }
        }
        for i in (1..held.len()).rev() {
            held.swap(i, next() as usize % (i + 1));
        }
        let keep = held.len() / 4;
        for f in held.split_off(keep) {
            let cpu = (next() & 1) as usize;
            p.set_cpu(cpu);
            a.free_on(cpu, f).unwrap();
        }
        if round % 2 == 1 {
            p.advance(1_000_000_000);
            a.tick(0);
            a.tick(1);
        }
        if round % 3 == 2 {
            a.drain_cpu(1);
        }
        if round == 7 {
            p.set_cpu(0);
            let run: Vec<Frame> = (0..16_000)
                .filter_map(|_| a.alloc_on(0, 0, Gfp::USER, None).ok())
                .collect();
            r.handed_out
                .extend(run.iter().map(|f| (0, f.pfn.0, f.order)));
            for f in run {
                a.free_on(0, f).unwrap();
            }
        }
        a.validate().unwrap();
        r.lists.push(a.zone_info(0).unwrap().nr_free);
    }
    for f in held {
        a.free_on(0, f).unwrap();
    }
    a.validate().unwrap();
    r.lists.push(a.zone_info(0).unwrap().nr_free);
    r.counters = a.counters().iter().filter(|(n, _)| !is_work(n)).collect();
    r
}

/// `base` with `kv` (key=value, comma-separated) applied.
fn with(base: &str, kv: &str) -> Config {
    let mut c = cfg(base);
    for kv in kv.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap();
        c.set(k, v).unwrap();
    }
    c
}

/// Whether `on` and `off` give the same result over three seeds; prints the row.
fn same(name: &str, off: &str, on: &str) -> bool {
    let mut equal = true;
    for seed in [1, 2, 3] {
        let (x, y) = (run(cfg(off), seed), run(cfg(on), seed));
        assert!(x.counters.iter().any(|&(n, v)| n == "pcp_drain" && v > 0));
        equal &= x == y;
    }
    println!("{name:<16} {off:<58} vs {on:<58} result-equal: {equal}");
    equal
}

/// The switches that only do the same work another way: equal results, on the kernel
/// presets' base and on `fast` without them.
#[test]
fn speed_switches_change_no_policy() {
    let cases: &[(&str, &str, &str)] = &[
        ("refill_runs", "linux-6.12", "linux-6.12,refill_runs=on"),
        ("refill_runs", "fast,refill_runs=off", "fast"),
        (
            "splice_drain",
            "linux-6.12,merge_skip=on",
            "linux-6.12,merge_skip=on,splice_drain=on",
        ),
        ("splice_drain", "fast,splice_drain=off", "fast"),
        ("own_bitmap", "linux-6.12", "linux-6.12,own_bitmap=on"),
        ("own_bitmap", "fast,own_bitmap=off", "fast"),
        ("lock_stat", "linux-6.12", "linux-6.12,lock_stat=off"),
    ];
    for &(name, off, on) in cases {
        assert!(same(name, off, on), "{name}: {off} vs {on}");
    }
}

/// The switches that decide differently: the frames handed out or the decisions differ.
#[test]
fn policy_switches_change_the_result() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "thp_refill_high",
            "linux-6.12",
            "linux-6.12,thp_refill_high=on",
        ),
        (
            "thp_drain_high",
            "linux-6.12",
            "linux-6.12,thp_drain_high=on",
        ),
        (
            "thp_merge_skip",
            "linux-6.12,merge_skip=on",
            "linux-6.12,merge_skip=on,thp_merge_skip=on",
        ),
        ("drain_newest", "linux-6.12", "linux-6.12,drain_newest=on"),
        ("merge_skip", "linux-6.12", "linux-6.12,merge_skip=on"),
        (
            "clustered_refill",
            "linux-6.12,merge_skip=on",
            "linux-6.12,merge_skip=on,clustered_refill=on",
        ),
    ];
    for &(name, off, on) in cases {
        assert!(!same(name, off, on), "{name}: {off} vs {on}");
    }
}

#[test]
fn the_helper_sees_a_difference_in_one_frame() {
    // The comparison is not blind: two seeds hand out different frames.
    assert_ne!(
        run(with("linux-6.12", ""), 1),
        run(with("linux-6.12", ""), 2)
    );
}
