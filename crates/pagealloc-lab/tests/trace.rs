//! `pagealloc trace`: the committed traces of real programs (recorded on Linux 6.18,
//! see tests/data/traces/README.md) replayed without root, the file format's checks,
//! and the recorder's refusals.

use std::path::{Path, PathBuf};

mod common;
use common::{one_line_exit_2, pagealloc};

use pagealloc_lab::trace::format::{self, Event, EventKind};
use pagealloc_lab::trace::replay::{self, ReplayOptions, ReplayReport};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/traces")
        .join(name)
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pagealloc-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Replays a committed trace through `linux-6.12` (named, so that the assertions keep
/// their meaning when the default preset moves on).
fn replay(name: &str) -> ReplayReport {
    let opts = ReplayOptions {
        config: Some("linux-6.12".into()),
        out: None,
    };
    replay::replay_file(&data(name), &opts).expect("replays")
}

/// The kernel's side is read off the events exactly: the trip counts of the committed
/// traces are what their events say (a regression test of the trip analysis), and the
/// JSON carries the eight fields the issue names.
#[test]
fn kernel_side_of_committed_traces() {
    for name in ["page_fault1", "bw_unix", "iperf3", "memhog", "compile"] {
        let f = format!("{name}.trace");
        let (h, ev) = format::read(&data(&f)).expect("reads");
        assert_eq!(h.events as usize, ev.len());
        assert!(
            h.losses.iter().all(|l| l.none()),
            "{name}: a committed trace lost nothing"
        );
        let trips = replay::kernel_trips(&ev);
        let refilled: u64 = ev
            .iter()
            .filter(|e| e.kind == EventKind::ZoneLocked && e.aux != 0)
            .map(|e| 1u64 << e.order)
            .sum();
        let drained: u64 = ev
            .iter()
            .filter(|e| e.kind == EventKind::PcpuDrain)
            .map(|e| 1u64 << e.order)
            .sum();
        let sum = |f: fn(&replay::Side) -> &Vec<replay::Trip>| -> u64 {
            trips
                .values()
                .flat_map(|s| f(s).iter())
                .map(|t| t.pages)
                .sum()
        };
        assert_eq!(sum(|s| &s.refills), refilled, "{name}");
        assert_eq!(sum(|s| &s.drains), drained, "{name}");
        // Replayed in full here for the two smallest (debug builds are slow).
        if !matches!(name, "iperf3" | "memhog") {
            continue;
        }
        let r = replay(&f);
        assert_eq!(r.pages_refilled_kernel, refilled, "{name}");
        assert_eq!(r.pages_drained_kernel, drained, "{name}");
        let allocs_frees = ev
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Alloc | EventKind::Free))
            .count() as u64;
        assert_eq!(
            r.replayed, allocs_frees,
            "{name}: every allocation and free replayed"
        );
        let j = serde_json::to_value(&r).expect("json");
        for k in [
            "refill_trips_kernel",
            "refill_trips_pagealloc",
            "drain_trips_kernel",
            "drain_trips_pagealloc",
            "pages_refilled_kernel",
            "pages_refilled_pagealloc",
            "pages_drained_kernel",
            "pages_drained_pagealloc",
        ] {
            assert!(j[k].is_u64(), "{name}: {k} in the JSON");
        }
    }
}

fn replay_with(name: &str, config: &str) -> ReplayReport {
    let opts = ReplayOptions {
        config: Some(config.into()),
        out: None,
    };
    replay::replay_file(&data(name), &opts).expect("replays")
}

/// Where pagealloc `linux-6.18` agrees with the 6.18 kernel on the committed traces
/// (within 5 %, medians equal), each pageset started at the kernel's count, `high` and
/// `free_count` (`Allocator::seed_pageset`, trace::start), each zone's free lists in the
/// kernel's shape (`Allocator::seed_free_lists`), and the allocations the kernel did not
/// trace inferred at its refills (`Allocator::take_from_pcp_list`). Every line of every
/// trace is asserted but the cells named here, which differ; their mechanism is in
/// tests/data/traces/README.md.
#[test]
fn linux_6_18_agrees_where_the_mechanism_is_the_same() {
    let all_but = |r: &ReplayReport, differ: &[(&str, &str)]| {
        for l in &r.lines {
            if !differ.contains(&(l.scope.as_str(), l.what.as_str())) {
                assert!(l.agree, "{}: {l:?}", r.file);
            }
        }
    };
    // page_fault1: every line. CPU 0's refill scale follows the kernel's only with the
    // untraced allocations inferred (its list ran dry six allocations early in the kernel).
    let pf = replay_with("page_fault1.trace", "linux-6.18");
    all_but(&pf, &[]);
    assert!(pf.untraced_allocs_inferred > 0);
    assert_eq!(pf.pages_refilled_pagealloc, pf.pages_refilled_kernel);
    let j = serde_json::to_value(&pf).expect("json");
    assert!(j["untraced_allocs_inferred"].is_u64());
    // AF_UNIX: every line, no drain on either side.
    let bw = replay_with("bw_unix.trace", "linux-6.18");
    all_but(&bw, &[]);
    // Each pageset starts where the kernel's was.
    for &(c, kc, pc, kh, ph) in &bw.start_pcp {
        assert_eq!(kh, ph, "cpu {c}: high seeded");
        assert!((kc - pc).abs() <= 8, "cpu {c}: count {kc} vs {pc}");
    }
    // The TCP stream: the receiver's one drain on a free and the pages refilled on both
    // CPUs; 6.12's free_high (free_count >= batch) drains both CPUs dozens of times.
    let ip = replay_with("iperf3.trace", "linux-6.18");
    all_but(
        &ip,
        &[
            ("total", "refill trips"),
            ("cpu 0", "refill trips"),
            ("cpu 1", "refill median (pages)"),
            ("total", "drain median (pages)"),
            ("cpu 1", "drain median (pages)"),
        ],
    );
    assert_eq!(ip.drain_trips_kernel, 1);
    let ip12 = replay_with("iperf3.trace", "linux-6.12");
    assert!(ip12.drain_trips_pagealloc >= 40 && ip12.free_high_pagealloc > 0);
    assert!(ip.drain_trips_pagealloc == 1 && ip.free_high_pagealloc == 0);
    // The compile: every line, CPU 0's one drain included (a free_high drain of its
    // DMA32 pageset, whose free_count start trace::start reads off it).
    let cc = replay_with("compile.trace", "linux-6.18");
    all_but(&cc, &[]);
    // The memory-hungry program: every line but CPU 1's fifth drain (its pageset lost
    // 934 pages without an event and no refill of those lists followed).
    let mh = replay_with("memhog.trace", "linux-6.18");
    let differ: Vec<(&str, &str)> = ["total", "cpu 1"]
        .iter()
        .flat_map(|&s| {
            ["drain trips", "pages drained", "drains on a free"]
                .into_iter()
                .map(move |w| (s, w))
        })
        .collect();
    all_but(&mh, &differ);
}

/// Replay is deterministic and any config replays.
#[test]
fn replay_is_deterministic_and_takes_any_config() {
    let a = replay("memhog.trace");
    let b = replay::replay_file(&data("memhog.trace"), &ReplayOptions::default()).expect("replays");
    if b.config == a.config {
        assert_eq!(a.lines, b.lines);
    }
    let c = replay("memhog.trace");
    assert_eq!(a.lines, c.lines);
    assert!(
        a.order9_allocs > 0,
        "the THP program allocated order-9 blocks"
    );
    let base = replay::replay_file(
        &data("memhog.trace"),
        &ReplayOptions {
            config: Some("base".into()),
            out: None,
        },
    )
    .expect("base replays");
    assert!(base.config.starts_with("base"));
    assert_eq!(base.pages_refilled_kernel, a.pages_refilled_kernel);
}

#[test]
fn format_round_trips() {
    let ev: Vec<Event> = (0..1000u64)
        .map(|i| Event {
            ts: i * 37,
            cpu: (i % 3) as u32,
            kind: [EventKind::Alloc, EventKind::Free, EventKind::Switch][(i % 3) as usize],
            pid: (i * 7) as u32,
            flags: (i % 256) as u8,
            pfn: if i % 3 == 2 {
                i
            } else {
                0x10_0000 + (i * 7919) % 5000
            },
            order: if i % 3 == 2 { 0 } else { (i % 11) as u8 },
            mt: if i % 3 == 2 { -1 } else { (i % 4) as i8 - 1 },
            aux: i * 1_000_003,
        })
        .collect();
    let (h, _) = format::read(&data("compile.trace")).expect("reads");
    let h = format::Header {
        events: ev.len() as u64,
        ..h
    };
    let mut buf = Vec::new();
    format::write(&mut buf, &h, &ev).expect("writes");
    let (h2, ev2) = format::read_from(&buf[..]).expect("reads back");
    assert_eq!(h2, h);
    assert_eq!(ev2, ev);
    // Every truncation is refused, never a panic.
    for cut in [0, 5, 8, 20, buf.len() / 2, buf.len() - 1] {
        assert!(format::read_from(&buf[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn corrupt_or_truncated_file_is_one_line_exit_2() {
    let dir = scratch("corrupt");
    let whole = std::fs::read(data("iperf3.trace")).expect("reads");
    let cut = dir.join("cut.trace");
    std::fs::write(&cut, &whole[..whole.len() / 3]).expect("writes");
    one_line_exit_2(
        &pagealloc(&["trace", "replay", cut.to_str().unwrap()], &[]),
        "not a usable trace",
    );
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, b"not a trace at all").expect("writes");
    one_line_exit_2(
        &pagealloc(&["trace", "replay", bad.to_str().unwrap()], &[]),
        "bad magic",
    );
    let missing = dir.join("missing.trace");
    let o = pagealloc(&["trace", "replay", missing.to_str().unwrap()], &[]);
    assert_ne!(o.status.code(), Some(0));
}

#[test]
fn recorder_without_tracefs_is_one_line_exit_2() {
    let o = pagealloc(
        &[
            "trace",
            "record",
            "--out",
            "/nonexistent/x.trace",
            "--",
            "true",
        ],
        &[("PAGEALLOC_TRACEFS", "/nonexistent/tracefs")],
    );
    one_line_exit_2(&o, "no tracefs");
}

/// Records a short command on this machine and replays it: needs root and tracefs, and
/// skips itself (saying so) without them.
#[test]
fn record_and_replay_live() {
    let root = pagealloc_lab::trace::record::tracefs_root();
    if let Err(e) = pagealloc_lab::trace::record::check_host(&root) {
        eprintln!("skipped: {e}");
        return;
    }
    let dir = scratch("live");
    let out = dir.join("live.trace");
    let o = pagealloc(
        &[
            "trace",
            "record",
            "--buffer-kb",
            "16384",
            "--out",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "head -c 8000000 /dev/zero | cat > /dev/null",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = replay::replay_file(&out, &ReplayOptions::default()).expect("replays");
    assert!(r.replayed > 0);
    // The free lists per order and type are saved beside zoneinfo (root reads them).
    let (h, _) = format::read(&out).expect("reads");
    assert!(
        h.start
            .pagetypeinfo
            .contains("Free pages count per migrate type"),
        "{}",
        h.start.pagetypeinfo
    );
}

/// Which preset fits the recording kernel: said for any release, none for one before 6.0.
#[test]
fn preset_for_other_kernels() {
    let name = |r: &str| replay::preset_for(r).0;
    assert_eq!(name("6.6.30-1").as_deref(), Some("base"));
    assert_eq!(name("6.8.0-45-generic").as_deref(), Some("patch10"));
    assert_eq!(name("6.12.9").as_deref(), Some("linux-6.12"));
    let (p, why) = replay::preset_for("6.18.44-fc-v657");
    assert_eq!(p.as_deref(), Some("linux-6.18"), "{why}");
    let (p, why) = replay::preset_for("5.15.0");
    assert_eq!(p, None);
    assert!(why.contains("no preset"), "{why}");
}

/// A buffer too small for the stream: the recorder refuses the trace and names
/// `--buffer-kb` (needs root and tracefs; skips itself without them). Whether 64 KiB
/// per CPU overflows depends on the machine's load: a run that lost nothing must have
/// written a trace that says so.
#[test]
fn lost_events_refuse_the_trace() {
    let root = pagealloc_lab::trace::record::tracefs_root();
    if let Err(e) = pagealloc_lab::trace::record::check_host(&root) {
        eprintln!("skipped: {e}");
        return;
    }
    let dir = scratch("lost");
    let out = dir.join("small.trace");
    let o = pagealloc(
        &[
            "trace",
            "record",
            "--buffer-kb",
            "64",
            "--out",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "head -c 200000000 /dev/zero | cat > /dev/null",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.success() {
        let (h, _) = format::read(&out).expect("reads");
        assert!(h.losses.iter().all(|l| l.none()));
    } else {
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("lost events") && err.contains("--buffer-kb"),
            "{err}"
        );
        assert!(!out.exists(), "a refused trace is not written");
    }
}

/// An event at `ts` ns: a page event of a movable block, or another kind (no type).
fn ev(ts: u64, cpu: u32, kind: EventKind, pfn: u64, aux: u64) -> Event {
    Event {
        ts,
        mt: if kind.is_page() { 1 } else { -1 },
        aux,
        ..Event::synthetic(cpu, kind, pfn)
    }
}

/// The decay tick is deferrable work: on a CPU that the trace shows idle (its last
/// sched_switch went to pid 0) it waits until the CPU wakes, then `high` decays; on a
/// busy CPU it runs a second into the trace.
#[test]
fn decay_waits_for_an_idle_cpu_to_wake() {
    let (h, _) = format::read(&data("iperf3.trace")).expect("reads");
    let s = 1_000_000_000u64;
    // An allocation on CPU 0 three seconds in; CPU 1 allocates at the start, then
    // goes idle at 0.5 s and wakes at 2.5 s (or never sleeps).
    let mut busy = vec![
        ev(0, 1, EventKind::Alloc, 0x20_0000, 0x14_0cca),
        ev(3 * s, 0, EventKind::Alloc, 0x20_1000, 0x14_0cca),
    ];
    let mut idle = busy.clone();
    idle.insert(1, ev(s / 2, 1, EventKind::Switch, 5, 0));
    idle.insert(2, ev(5 * s / 2, 1, EventKind::Switch, 0, 7));
    busy.sort_by_key(|e| e.ts);
    let opts = ReplayOptions {
        config: Some("linux-6.18".into()),
        out: None,
    };
    let high_at = |r: &ReplayReport, t: f64| -> i64 {
        let (_, v) = r.high_pagealloc.iter().find(|x| x.0 == 1).expect("cpu 1");
        v.iter().rev().find(|x| x.0 <= t + 1e-9).expect("sampled").1
    };
    let b = replay::replay(&h, &busy, &opts).expect("replays");
    let i = replay::replay(&h, &idle, &opts).expect("replays");
    let start = high_at(&b, 0.0);
    assert_eq!(high_at(&i, 0.0), start);
    assert!(high_at(&b, 1.5) < start, "busy: decayed at 1 s");
    assert_eq!(high_at(&i, 2.4), start, "idle: no decay while idle");
    assert!(high_at(&i, 2.9) < start, "idle: decayed as the CPU woke");
    assert!(
        i.notes.iter().any(|n| n.contains("1 decay ticks deferred")),
        "{:?}",
        i.notes
    );
}

/// Every committed trace carries its start `/proc/pagetypeinfo`: the free lists read add
/// up to the zoneinfo's free pages of each zone (two snapshots a moment apart: within
/// 2 %), and the replay starts pagealloc's free lists in that shape
/// (`Allocator::seed_free_lists`): per zone, type and order the kernel's free blocks,
/// the total the zoneinfo's. A trace without the table starts from whole blocks.
#[test]
fn free_lists_start_as_the_kernels() {
    use pagealloc::os::zoneinfo::KernelZoneinfo;
    use pagealloc_lab::trace::pagetype;
    let (h, ev) = format::read(&data("memhog.trace")).unwrap();
    let kfree = pagetype::parse(&h.start.pagetypeinfo).unwrap();
    let zi = KernelZoneinfo::parse(&h.start.zoneinfo).unwrap();
    let mut zones = 0;
    for z in zi.populated() {
        let k = &kfree[&(z.node, z.name.clone())];
        let pages: u64 = k.by_type.keys().map(|t| k.pages(t)).sum();
        let diff = pages.abs_diff(z.free);
        assert!(diff * 50 <= z.free, "{}: {pages} vs {}", z.name, z.free);
        zones += 1;
    }
    assert_eq!(zones, 3, "DMA, DMA32, Normal");
    let r = replay_with("memhog.trace", "linux-6.18");
    let cmp: Vec<&String> = r
        .notes
        .iter()
        .filter(|n| n.starts_with("free lists at the start"))
        .collect();
    assert_eq!(cmp.len(), 3, "{:?}", r.notes);
    // The note's two halves (kernel; pagealloc) say the same free pages per type and
    // whole free pageblocks (within what the two snapshots differ by: 2 %).
    let nums = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect()
    };
    // (DMA, pfn 1 to 3841 in pagealloc, lacks one of the kernel's order-10 places.)
    for n in cmp.iter().filter(|n| !n.contains("zone DMA:")) {
        let (k, p) = n.split_once("; pagealloc ").expect("two sides");
        let k = k.split_once(": kernel ").expect("kernel side").1;
        let (k, p) = (nums(k), nums(p));
        assert_eq!(k.len(), p.len(), "{n}");
        for (a, b) in k.iter().zip(&p) {
            assert!(a.abs_diff(*b) <= a / 50 + 2, "{n}");
        }
    }
    let shaped: Vec<&String> = r
        .notes
        .iter()
        .filter(|n| n.contains("free lists as the kernel's"))
        .collect();
    assert_eq!(shaped.len(), 3, "{:?}", r.notes);
    // Without the table: whole blocks, no comparison, no error.
    let bare = format::Header {
        start: format::Snapshot {
            pagetypeinfo: String::new(),
            ..h.start.clone()
        },
        ..h.clone()
    };
    let opts = ReplayOptions {
        config: Some("linux-6.18".into()),
        out: None,
    };
    let old = replay::replay(&bare, &ev, &opts).expect("replays");
    assert!(!old.notes.iter().any(|n| n.starts_with("free lists at")));
    assert!(old
        .notes
        .iter()
        .any(|n| n.contains("no /proc/pagetypeinfo")));
    assert!(pagetype::parse("").unwrap().is_empty());
}

/// A pageset that took pages without an event between the recorder's start snapshot and
/// the trace's start: the kernel drains on the free that brings its count to `high`, 700
/// pages of frees after a snapshot that read it 700 below `high`, 500 of them untraced
/// (`trace::start::counts` reads the start count off that first drain). The replay
/// starts from that count and drains on the same frees as many pages (200, then 400:
/// `free_count` grown by the frees between); from the snapshot's count it would not
/// have drained at all.
#[test]
fn the_first_drain_on_a_free_gives_the_start_count() {
    let (mut h, _) = format::read(&data("iperf3.trace")).expect("reads");
    // CPU 0's Normal pageset in the start zoneinfo: count set 700 below its high.
    let zi = &h.start.zoneinfo;
    let at = zi.find("zone   Normal").expect("a Normal zone");
    let cpu0 = at + zi[at..].find("cpu: 0").expect("CPU 0's pageset");
    let line = |key: &str| {
        let s = cpu0 + zi[cpu0..].find(key).expect(key) + key.len();
        let e = s + zi[s..].find('\n').expect("line end");
        (s, e, zi[s..e].trim().parse::<i64>().expect("a number"))
    };
    let (cs, ce, _) = line("count:");
    let (_, _, high) = line("high:");
    let snapshot = high - 700;
    h.start.zoneinfo = format!("{} {snapshot}{}", &zi[..cs], &zi[ce..]);
    let base = 0x30_0000u64;
    let mut ts = 0u64;
    let mut ev = Vec::new();
    let mut push = |kind: EventKind, pfn: u64| {
        ts += 1_000;
        ev.push(Event {
            ts,
            mt: 1,
            ..Event::synthetic(0, kind, pfn)
        });
    };
    for i in 0..200 {
        push(EventKind::Free, base + i);
    }
    for i in 0..200 {
        push(EventKind::PcpuDrain, base + 0x1_0000 + i);
    }
    for i in 0..400 {
        push(EventKind::Free, base + 0x1000 + i);
    }
    for i in 0..400 {
        push(EventKind::PcpuDrain, base + 0x1_1000 + i);
    }
    let opts = ReplayOptions {
        config: Some("linux-6.18".into()),
        out: None,
    };
    let r = replay::replay(&h, &ev, &opts).expect("replays");
    assert_eq!((r.drain_trips_kernel, r.pages_drained_kernel), (2, 600));
    assert_eq!(
        (r.drain_trips_pagealloc, r.pages_drained_pagealloc),
        (2, 600),
        "{:?}",
        r.notes
    );
    let want = format!("count at the start {}", high - 200);
    assert!(r.notes.iter().any(|n| n.contains(&want)), "{:?}", r.notes);
}

/// A recording with the vmstat worker's passes says when each CPU's decay ran: the
/// replay ticks CPU 1 at its one pass (0.3 s), not a second in, and not again.
#[test]
fn decay_runs_at_the_traced_vmstat_passes() {
    let (h, _) = format::read(&data("iperf3.trace")).expect("reads");
    let s = 1_000_000_000u64;
    let v = vec![
        ev(0, 1, EventKind::Alloc, 0x20_0000, 0x14_0cca),
        ev(3 * s / 10, 1, EventKind::Vmstat, 0xffff_ffff_8100_0000, 0),
        ev(3 * s, 0, EventKind::Alloc, 0x20_1000, 0x14_0cca),
    ];
    let opts = ReplayOptions {
        config: Some("linux-6.18".into()),
        out: None,
    };
    let r = replay::replay(&h, &v, &opts).expect("replays");
    let high_at = |t: f64| -> i64 {
        let (_, v) = r.high_pagealloc.iter().find(|x| x.0 == 1).expect("cpu 1");
        v.iter().rev().find(|x| x.0 <= t + 1e-9).expect("sampled").1
    };
    let start = high_at(0.0);
    assert_eq!(high_at(0.29), start);
    assert!(high_at(0.31) < start, "decayed at the pass");
    assert_eq!(high_at(2.9), high_at(0.31), "one pass, one decay");
    assert!(
        r.notes.iter().any(|n| n.contains("1 vmstat_update passes")),
        "{:?}",
        r.notes
    );
}
