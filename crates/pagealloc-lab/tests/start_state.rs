//! `predict unix_stream --cpus 2` from a recorded kernel start state: the zones' free
//! lists as the kernel's `/proc/pagetypeinfo` showed them at the start of one run (a
//! quiet session of 2026-11-27; its other processes' ops left out: without them the run
//! is the same), where the simulator ping-ponged the stream's pagesets. And a start state
//! saved and replayed (`predict --save`, `predict --from`): the same state back, the same
//! simulation from it, and the refusals of a missing, corrupt or other-version file.

mod common;
use common::{one_line_exit_2, pagealloc};

use std::collections::BTreeSet;

use std::path::{Path, PathBuf};

use pagealloc::{Gfp, MigrateType, SeedList};
use pagealloc_lab::predict::program::Size;
use pagealloc_lab::predict::saved::{self, Manifest, SavedRun};
use pagealloc_lab::predict::{self, Figures, PredictOptions};
use pagealloc_lab::sim::start::{BackgroundOp, PagesetStart, StartState, ZoneFreeStart};

/// `(cpu, zone, count, high, taken as (order, migratetype, blocks), used)`.
type Pageset = (
    usize,
    usize,
    u32,
    i32,
    &'static [(u8, u8, u32)],
    &'static [(u8, u8)],
);

/// The program's CPUs' pagesets at the run's start (DMA's are empty at `high` 0).
const PAGESETS: [Pageset; 4] = [
    (
        0,
        1,
        42_192,
        42_269,
        &[(1, 0, 4), (2, 0, 2), (3, 0, 8)],
        &[(1, 0), (2, 0), (3, 0)],
    ),
    (
        1,
        1,
        262,
        27_589,
        &[(0, 0, 246), (1, 0, 2), (2, 0, 1), (3, 0, 1)],
        &[(0, 0), (0, 2), (1, 0), (2, 0), (3, 0)],
    ),
    (
        0,
        2,
        272_825,
        295_377,
        &[(0, 0, 4104), (0, 1, 795), (3, 0, 1)],
        &[(0, 0), (0, 1), (1, 0), (2, 0), (3, 0)],
    ),
    (
        1,
        2,
        31_366,
        337_141,
        &[
            (0, 0, 2030),
            (0, 1, 17_719),
            (0, 2, 720),
            (1, 0, 152),
            (1, 1, 685),
            (1, 2, 106),
            (2, 0, 162),
            (2, 1, 766),
            (3, 0, 121),
            (3, 1, 727),
            (9, 1, 1),
        ],
        &[
            (0, 0),
            (0, 1),
            (0, 2),
            (1, 0),
            (1, 1),
            (1, 2),
            (2, 0),
            (2, 1),
            (3, 0),
            (3, 1),
            (9, 1),
        ],
    ),
];

/// Each zone's free pages and free blocks by migratetype (unmovable, movable,
/// reclaimable) and order 0..=10. Normal has no free unmovable block; DMA has one of
/// order 8.
const ZONES: [(&str, u64, [[u64; 11]; 3]); 3] = [
    (
        "DMA",
        3840,
        [
            [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0],
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3],
            [0; 11],
        ],
    ),
    (
        "DMA32",
        40_184,
        [
            [0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0],
            [236, 248, 220, 156, 140, 105, 66, 53, 36, 1, 0],
            [894, 831, 477, 229, 73, 20, 21, 5, 3, 0, 0],
        ],
    ),
    (
        "Normal",
        955_374,
        [
            [0; 11],
            [
                39_630, 34_102, 48_285, 16_846, 7605, 5431, 2055, 355, 102, 0, 0,
            ],
            [4686, 2925, 702, 528, 68, 76, 0, 0, 0, 0, 0],
        ],
    ),
];

fn recorded() -> StartState {
    let mt = |m: u8| match m {
        0 => MigrateType::Unmovable,
        1 => MigrateType::Movable,
        _ => MigrateType::Reclaimable,
    };
    StartState {
        pagesets: PAGESETS
            .iter()
            .map(|&(cpu, zone, count, high, taken, used)| PagesetStart {
                cpu,
                zone,
                count,
                high,
                taken: taken
                    .iter()
                    .map(|&(order, m, blocks)| SeedList {
                        order,
                        mt: mt(m),
                        blocks,
                    })
                    .collect(),
                used: used.iter().copied().collect::<BTreeSet<_>>(),
                refilled: None,
                // Not captured with this state (0: unknown, as `predict` says when the
                // recording does not show them).
                alloc_factor: 0,
                free_count: 0,
            })
            .collect(),
        free_lists: ZONES
            .iter()
            .enumerate()
            .map(|(zone, &(name, free, shape))| ZoneFreeStart {
                zone,
                name: name.into(),
                shape: Some(shape),
                free,
            })
            .collect(),
        background: Vec::new(),
        zone_spans: Vec::new(),
        table_free_lag: 0,
        lru_held: Vec::new(),
        lru_tail: Vec::new(),
        zone_managed: Vec::new(),
    }
}

fn simulate(start: &StartState) -> Figures {
    let opts = PredictOptions {
        workload: "unix_stream".into(),
        cpus: 2,
        size: predict::default_size("unix_stream").unwrap(),
        config: None,
        exe: "unused".into(),
        runs: 1,
    };
    predict::simulate(&opts, "linux-6.18", start).unwrap().0
}

/// Each write allocates blocks of orders 3, 2, 1, 0 unmovable. With Normal holding no
/// free unmovable block, `ALLOC_NOFRAGMENT` passes Normal by (no whole pageblock to
/// claim) and the walk went on to DMA32 and then DMA, whose pagesets (batch 1, `high`
/// 6..240) refilled one block a trip and drained on every free: 2.96 refills of 4.7
/// pages and 2.96 drains of 4.7 pages per write. The kernel keeps DMA's 3 840 pages
/// from such a request (its `lowmem_reserve` against Normal, 24 090 pages), fails the
/// walk and retries it without `ALLOC_NOFRAGMENT`, claiming a movable block in Normal:
/// in this run 0.242 refills of 57.8 pages and 0.179 drains of 91.3 pages per write.
#[test]
fn falling_writes_do_not_ping_pong_through_dma() {
    let f = simulate(&recorded());
    let trips = format!(
        "{:.3}/{:.1}/{:.3}/{:.1}",
        f.refills_per_op, f.pages_per_refill, f.drains_per_op, f.pages_per_drain
    );
    assert!(
        f.refills_per_op < 0.3 && f.pages_per_refill > 40.0,
        "refills/write, pages/refill, drains/write, pages/drain: {trips}"
    );
    assert!(
        f.drains_per_op < 0.3 && f.pages_per_drain > 40.0,
        "refills/write, pages/refill, drains/write, pages/drain: {trips}"
    );
}

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "pagealloc-start-state-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// page_fault1 on one CPU, two loops of 512 pages: quick in a debug build.
fn small_opts() -> PredictOptions {
    PredictOptions {
        workload: "page_fault1".into(),
        cpus: 1,
        size: Size {
            pages: 512,
            count: 2,
            extra: 0,
        },
        config: None,
        exe: "unused".into(),
        runs: 2,
    }
}

/// The recorded state cut to CPU 0, with a refill scale, recent frees and other
/// processes' ops that take the program's list: every field of a start state set.
fn small_state() -> StartState {
    let mut st = recorded();
    st.pagesets.retain(|p| p.cpu == 0);
    for p in &mut st.pagesets {
        p.alloc_factor = 2;
        p.free_count = 300;
    }
    st.background = (0..700)
        .map(|i| BackgroundOp {
            cpu: 0,
            after: 100 + i / 7,
            order: if i % 50 == 0 { 3 } else { 0 },
            gfp: Gfp::MOVABLE,
            alloc: i % 5 != 4,
            before: None,
            tick: false,
        })
        .collect();
    // Frees of blocks allocated before the run (held from the start) and a decay.
    st.background.extend((0..50u64).map(|i| BackgroundOp {
        cpu: 0,
        after: 150,
        order: 0,
        gfp: Gfp::MOVABLE,
        alloc: false,
        before: Some(1_100_000 + i),
        tick: false,
    }));
    st.background.push(BackgroundOp {
        cpu: 0,
        after: 160,
        order: 0,
        gfp: Gfp(0),
        alloc: false,
        before: None,
        tick: true,
    });
    st.zone_spans = vec![(0, 4096), (4096, 1_048_576), (1_048_576, 1_200_000)];
    st
}

/// Saved and loaded, a start state comes back equal, and the simulator from the
/// loaded one gives the figures and the trace hash it gave from the original; replayed,
/// every line's simulator value is those figures'.
#[test]
fn a_saved_start_state_loads_equal_and_replays_the_same_run() {
    let opts = small_opts();
    let states = [small_state(), StartState::default()];
    let mut runs = Vec::new();
    for st in &states {
        let (f, h) = predict::simulate(&opts, "linux-6.18", st).unwrap();
        runs.push(SavedRun {
            version: saved::VERSION,
            kernel: Figures {
                refills_per_op: 1e-3,
                pages_per_refill: 300.0,
                ..Figures::default()
            },
            start: st.clone(),
            sim: Some(f),
            trace_hash: Some(h),
            recording: None,
        });
    }
    // The two starts differ in what the run does: the background takes the list.
    assert_ne!(runs[0].sim, runs[1].sim);
    let m = Manifest {
        format: saved::FORMAT.into(),
        version: saved::VERSION,
        workload: opts.workload.clone(),
        cpus: opts.cpus,
        size: opts.size,
        config: "linux-6.18".into(),
        kernel_release: "6.18.0-test".into(),
        kernel: Figures::median_of(&[runs[0].kernel.clone(), runs[1].kernel.clone()]),
        notes: vec!["a note".into()],
        runs: 2,
        host_zones: saved::host_zones(),
        line_ns: None,
        clear_us: Some(61.5),
    };
    let d = scratch("roundtrip");
    saved::write(&d, &m, &runs).unwrap();
    let (m2, runs2) = saved::load(&d).unwrap();
    assert_eq!(m2, m);
    assert_eq!(runs2, runs);
    assert_eq!(runs2[0].start, states[0]);
    let p = saved::replay(&m2, &runs2, None, Some(1), &mut |_| {}).unwrap();
    assert_eq!(p.sim.as_ref(), runs[0].sim.as_ref());
    assert_eq!(p.trace_hash, runs[0].trace_hash);
    assert!(
        p.notes.iter().any(|n| n.contains("run 1: as saved")),
        "{:?}",
        p.notes
    );
    let refills = p
        .lines
        .iter()
        .find(|l| l.metric == "refill trips/op")
        .unwrap();
    assert_eq!(refills.kernel, Some(1e-3));
    assert_eq!(refills.sim, runs[0].sim.as_ref().map(|s| s.refills_per_op));
    // All runs: the medians of both, against the saved kernel medians.
    let p = saved::replay(&m2, &runs2, None, None, &mut |_| {}).unwrap();
    let sims: Vec<Figures> = runs.iter().map(|r| r.sim.clone().unwrap()).collect();
    assert_eq!(p.sim, Some(Figures::median_of(&sims)));
    assert_eq!(p.kernel, m.kernel);
    // Another config: another run from the same state.
    let p = saved::replay(&m2, &runs2, Some("linux-6.12"), Some(1), &mut |_| {}).unwrap();
    assert_eq!(p.config, "linux-6.12");
    let _ = std::fs::remove_dir_all(&d);
}

/// The committed saved run (`predict page_fault1 --cpus 1 --pages 512 --count 2
/// --save`, this machine, 2026-11-27).
fn committed() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/predict-page_fault1"
    ))
}

#[test]
fn predict_from_a_saved_run_prints_the_table() {
    let dir = committed().to_str().unwrap();
    let o = pagealloc(&["predict", "--from", dir], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.starts_with("predict page_fault1 at 1 CPU(s)"), "{out}");
    assert!(out.contains("refill trips/op"), "{out}");
    assert!(
        out.contains("note: replayed from the saved start states"),
        "{out}"
    );
    let o = pagealloc(
        &[
            "predict",
            "--from",
            dir,
            "--run",
            "1",
            "--config",
            "linux-6.12",
            "--json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.lines().count() >= 12, "{out}");
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["workload"], "page_fault1");
    }
}

#[test]
fn predict_from_refuses_bad_saves_in_one_line() {
    let d = scratch("refusals");
    let copy = |name: &str| {
        let to = d.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for f in ["predict.json", "run-1.json"] {
            std::fs::copy(committed().join(f), to.join(f)).unwrap();
        }
        to
    };
    let from = |p: &Path, extra: &[&str]| {
        let mut a = vec!["predict", "--from", p.to_str().unwrap()];
        a.extend_from_slice(extra);
        pagealloc(&a, &[])
    };
    one_line_exit_2(&from(&d.join("none"), &[]), "no such directory");
    // A manifest of another version.
    let v2 = copy("v2");
    let text = std::fs::read_to_string(v2.join("predict.json")).unwrap();
    std::fs::write(
        v2.join("predict.json"),
        text.replace("\"version\": 1", "\"version\": 2"),
    )
    .unwrap();
    one_line_exit_2(
        &from(&v2, &[]),
        "format version 2, this pagealloc reads version 1",
    );
    // A run's file cut short.
    let cut = copy("cut");
    let text = std::fs::read_to_string(cut.join("run-1.json")).unwrap();
    std::fs::write(cut.join("run-1.json"), &text[..text.len() / 2]).unwrap();
    one_line_exit_2(&from(&cut, &[]), "run-1.json: not a saved predict run");
    // A run's file missing.
    let gone = copy("gone");
    std::fs::remove_file(gone.join("run-1.json")).unwrap();
    one_line_exit_2(&from(&gone, &[]), "run-1.json");
    // A start state naming a CPU the run does not have.
    let cpu = copy("cpu");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cpu.join("run-1.json")).unwrap()).unwrap();
    r["start"]["pagesets"][0]["cpu"] = 7.into();
    std::fs::write(cpu.join("run-1.json"), r.to_string()).unwrap();
    one_line_exit_2(&from(&cpu, &[]), "CPU 7 in the start state, the run has 1");
    // A zone span no host has (its blocks' search would not end).
    let span = copy("span");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(span.join("run-1.json")).unwrap()).unwrap();
    r["start"]["zone_spans"] = serde_json::json!([[0, u64::MAX]]);
    std::fs::write(span.join("run-1.json"), r.to_string()).unwrap();
    one_line_exit_2(&from(&span, &[]), "outside this host's memory");
    // A run the save does not have, a config there is none of, flags of a recording.
    one_line_exit_2(&from(committed(), &["--run", "2"]), "--run 2");
    one_line_exit_2(&from(committed(), &["--config", "nope"]), "nope");
    let o = from(committed(), &["--cpus", "2"]);
    assert_eq!(o.status.code(), Some(2));
    one_line_exit_2(
        &pagealloc(&["predict", "page_fault1", "--run", "1"], &[]),
        "--run",
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// page_fault1's unmap with the mmu_gather's pages (`gather_pages=1`, as `predict`
/// runs it): the kernel takes the gather's pages while it gathers and frees the blocks
/// at the flush, so no allocation between the frees halves the pageset's `free_count`,
/// and the drain when the frees reach `high` is `free_count`-sized: `batch << 5`, 2 016
/// pages (the kernel's drains here: 1 500–2 016). The pageset's lists hold the faults'
/// pages (no refill), and the unmap's 2 612th free reaches `high`: one drain. With a
/// gather page taken every 509 frees between them it was three drains of 652 pages.
#[test]
fn an_unmap_drains_as_many_pages_as_it_freed_in_a_row() {
    let (opts, normal) = common::page_fault1_16m(1);
    let st = StartState {
        pagesets: vec![common::page_fault1_pageset(normal, 30_000, 28_500, 64)],
        ..StartState::default()
    };
    let f = predict::simulate(&opts, "linux-6.18", &st).unwrap().0;
    let trips = (f.refills_per_op * 4096.0, f.drains_per_op * 4096.0);
    assert_eq!(trips, (0.0, 1.0), "{}", f.pages_per_drain);
    assert!(f.pages_per_drain >= 2000.0, "{}", f.pages_per_drain);
}
