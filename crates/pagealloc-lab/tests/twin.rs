//! The live-kernel twin on recorded zoneinfo snapshots: parsing, refusing old kernels,
//! building pagealloc's layout from the kernel's zones (and matching its sizing), the
//! comparison's verdicts and the decay-step matching, and pagealloc driven through a
//! short workload.

mod common;

use std::path::PathBuf;

use pagealloc::os::zoneinfo::KernelZoneinfo;
use pagealloc::{Allocator, Preset};
use pagealloc_lab::twin::compare::{self, Verdict};
use pagealloc_lab::twin::host::{check_auto_tuning, config_for_release, read_zoneinfo};
use pagealloc_lab::twin::layout::{build, HostCpuDesc, VmSysctls};
use pagealloc_lab::twin::model::{self, ModelInput};
use pagealloc_lab::twin::{Pcp, Sample, Trajectory, TwinError, TwinWorkload};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../pagealloc/tests/data")
        .join(name)
}

fn cpus(nodes: &[usize]) -> Vec<HostCpuDesc> {
    nodes
        .iter()
        .enumerate()
        .map(|(cpu, &node)| HostCpuDesc {
            cpu,
            node,
            llc_slice_bytes: 16 << 20,
            online: true,
        })
        .collect()
}

/// The sysctls this VM had when its snapshot was recorded.
const VM_2CPU: VmSysctls = VmSysctls {
    min_free_kbytes: 67584,
    watermark_scale_factor: 10,
    percpu_pagelist_high_fraction: 0,
    thp: true,
};

#[test]
fn this_vm_snapshot_parses_and_has_auto_tuning() {
    let z = read_zoneinfo(&fixture("zoneinfo-2cpu-6.18.txt")).unwrap();
    check_auto_tuning(&z, "6.18").unwrap();
    let names: Vec<&str> = z.populated().map(|z| z.name.as_str()).collect();
    assert_eq!(names, ["DMA", "DMA32", "Normal"]);
    assert_eq!(
        z.zones.len(),
        5,
        "Movable and Device are listed, unpopulated"
    );
    let n = z.zone(0, "Normal").unwrap();
    assert_eq!(n.start_pfn, Some(1_048_576));
    assert_eq!(n.pagesets.len(), 2);
}

#[test]
fn kernels_before_6_7_and_garbage_are_refused_with_exit_2() {
    let z = read_zoneinfo(&fixture("zoneinfo-2cpu-pre6.7.txt")).unwrap();
    let e = check_auto_tuning(&z, "6.6.0").unwrap_err();
    assert!(matches!(e, TwinError::Unsupported(_)), "{e:?}");
    assert_eq!(e.exit_code(), 2);
    let msg = e.to_string();
    assert!(msg.contains("6.6.0") && msg.contains("6.7"), "{msg}");
    assert!(!msg.contains('\n'), "one line: {msg}");

    let dir = std::env::temp_dir().join(format!("twin-garbage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("zoneinfo");
    std::fs::write(&bad, "Node 0, zone Normal\n  pages free lots\n").unwrap();
    let e = read_zoneinfo(&bad).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.to_string().contains("line 2"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Build the layout from a snapshot and check pagealloc computes every watermark,
/// batch, high_min and high_max the kernel showed.
fn sizing_agrees(file: &str, vm: &VmSysctls, nodes: &[usize]) -> (KernelZoneinfo, usize) {
    let z = read_zoneinfo(&fixture(file)).unwrap();
    let b = build(&z, vm, &cpus(nodes)).unwrap();
    // spans, managed pages and holes as the kernel shows them
    for ((node, name), (_, zl)) in b.zones.iter().zip(b.layout.zones()) {
        let kz = z.zone(*node, name).unwrap();
        assert_eq!(zl.start_pfn, kz.start_pfn.unwrap());
        assert_eq!(zl.pages, kz.spanned);
        assert_eq!(zl.managed(), kz.managed, "{node} {name}");
    }
    let a = Allocator::new(&b.layout, b.config.clone()).unwrap();
    let lines = compare::sizing(&z, &model::sizing(&a, &b));
    assert!(!lines.is_empty());
    for l in &lines {
        assert_eq!(l.verdict, Verdict::Agree, "{l:?}");
    }
    (z, b.layout.nodes.len())
}

#[test]
fn layout_from_this_vm_reproduces_the_kernels_sizing() {
    let (z, nodes) = sizing_agrees("zoneinfo-2cpu-6.18.txt", &VM_2CPU, &[0, 0]);
    assert_eq!(nodes, 1);
    assert_eq!(z.populated().count(), 3);
}

#[test]
fn the_running_kernels_preset_with_the_hosts_sysctls() {
    // This VM's 6.18.y: linux-6.18, its sysctls kept, and its sizing still the kernel's
    // (the switches after 6.12 do not touch sizing).
    let (config, why) = config_for_release("6.18.44-fc-v657").unwrap();
    assert_eq!(config.preset, Preset::Linux618, "{why}");
    let z = read_zoneinfo(&fixture("zoneinfo-2cpu-6.18.txt")).unwrap();
    let b = build(&z, &VM_2CPU, &cpus(&[0, 0])).unwrap();
    let sysctls = |c: &pagealloc::Config| {
        (
            c.min_free_kbytes,
            c.watermark_scale_factor,
            c.high_fraction,
            c.thp,
        )
    };
    let before = sysctls(&b.config);
    let b = b.with_config(config).unwrap();
    assert_eq!(b.config.preset, Preset::Linux618);
    assert!(b.config.decay_batched && b.config.fallback_claim_first);
    assert_eq!(sysctls(&b.config), before);
    assert_eq!(before, (Some(67584), 10, 0, true));
    let a = Allocator::new(&b.layout, b.config.clone()).unwrap();
    for l in compare::sizing(&z, &model::sizing(&a, &b)) {
        assert_eq!(l.verdict, Verdict::Agree, "{l:?}");
    }
    // Other releases: the row that fits, or none before 6.7.
    let name = |r: &str| config_for_release(r).map(|(c, _)| c.to_string());
    assert_eq!(name("6.12.5").as_deref(), Some("linux-6.12"));
    assert_eq!(
        name("6.17.1").as_deref(),
        Some("linux-6.18,decay_batched=off")
    );
    assert_eq!(name("7.0.0").as_deref(), Some("linux-6.18"));
    assert_eq!(name("6.6.0"), None);
}

#[test]
fn layout_from_a_two_node_snapshot_reproduces_its_sizing() {
    let vm = VmSysctls {
        min_free_kbytes: 16384,
        ..VM_2CPU
    };
    let (_, nodes) = sizing_agrees("zoneinfo-2node-4cpu.txt", &vm, &[0, 0, 1, 1]);
    assert_eq!(nodes, 2);
    // Wrong sysctls: the watermarks and high_min no longer agree, and the lines say so.
    let z = read_zoneinfo(&fixture("zoneinfo-2node-4cpu.txt")).unwrap();
    let b = build(&z, &VM_2CPU, &cpus(&[0, 0, 1, 1])).unwrap();
    let a = Allocator::new(&b.layout, b.config.clone()).unwrap();
    let lines = compare::sizing(&z, &model::sizing(&a, &b));
    let differ: Vec<&str> = lines
        .iter()
        .filter(|l| l.verdict == Verdict::Differ)
        .map(|l| l.what.as_str())
        .collect();
    assert!(differ.contains(&"min watermark"), "{differ:?}");
    assert!(differ.contains(&"high_min"), "{differ:?}");
    assert!(
        !differ.contains(&"high_max"),
        "high_max needs no sysctl: {differ:?}"
    );
}

/// A one-CPU trajectory: `run` samples of (count, high) then idle ones.
fn traj(sizing: (i64, i64, i64), run: &[(i64, i64)], idle: &[(i64, i64)]) -> Trajectory {
    let mut samples = Vec::new();
    let dt = 0.5;
    for (k, &(count, high)) in run.iter().chain(idle).enumerate() {
        samples.push(Sample {
            t: k as f64 * dt,
            idle: k >= run.len(),
            pcp: vec![Pcp { count, high }],
            pages: vec![k as u64 * 1000],
        });
    }
    Trajectory {
        sizing: vec![sizing],
        run_seconds: run.len() as f64 * dt,
        samples,
    }
}

/// high decays by decay_pcp_high from `h` to `hmin`, one step per sample, count at 0.
fn decay_from(mut h: i64, hmin: i64) -> Vec<(i64, i64)> {
    let mut v = vec![(0, h)];
    while h > hmin {
        h = (h - (h >> 3)).max(hmin);
        v.push((0, h));
    }
    v
}

#[test]
fn verdicts_agree_on_equal_runs_and_flag_each_difference() {
    let size = (63, 1000, 8000);
    let run = [
        (0, 1000),
        (2000, 4000),
        (100, 8000),
        (3000, 8000),
        (200, 8000),
    ];
    let idle = decay_from(8000, 1000);
    let k = traj(size, &run, &idle);
    let lines = compare::trajectories(&k, &k.clone());
    for l in &lines {
        assert_eq!(l.verdict, Verdict::Agree, "{l:?}");
    }
    let steps = lines
        .iter()
        .find(|l| l.what.starts_with("kernel decay steps"))
        .unwrap();
    assert_eq!(steps.kernel, format!("{0} of {0}", idle.len() - 1));

    // pagealloc grows slower and its pages never leave the list
    let slow = [
        (0, 1000),
        (2000, 2000),
        (100, 3000),
        (5000, 5000),
        (5000, 8000),
    ];
    let o = traj(size, &slow, &idle);
    let differ: Vec<String> = compare::trajectories(&k, &o)
        .into_iter()
        .filter(|l| l.verdict == Verdict::Differ)
        .map(|l| l.what)
        .collect();
    assert!(
        differ
            .iter()
            .any(|w| w.starts_with("pages allocated until")),
        "{differ:?}"
    );
    assert!(
        differ.iter().any(|w| w.starts_with("count during")),
        "{differ:?}"
    );
    assert!(!differ.iter().any(|w| w.contains("decay")), "{differ:?}");
}

#[test]
fn decay_is_matched_by_steps_when_the_kernel_timer_fires_late() {
    let size = (63, 1000, 8000);
    let run = [(0, 8000), (0, 8000)];
    let steps = decay_from(8000, 1000);
    // The kernel's deferrable timer: every step arrives after three samples, not one.
    let late: Vec<(i64, i64)> = steps.iter().flat_map(|&s| [s, s, s]).collect();
    let k = traj(size, &run, &late);
    let o = traj(size, &run, &steps);
    let lines = compare::trajectories(&k, &o);
    let get = |w: &str| lines.iter().find(|l| l.what.starts_with(w)).unwrap();
    assert_eq!(get("idle decay steps").verdict, Verdict::Agree);
    assert_eq!(get("kernel decay steps").verdict, Verdict::Agree);
    let secs = get("seconds after the run");
    assert_eq!(secs.verdict, Verdict::Differ, "{secs:?}");

    // A kernel step the formula does not predict (high cut to a third) is counted as such.
    let mut odd = steps.clone();
    odd[1].1 = odd[0].1 / 3;
    let k = traj(size, &run, &odd);
    let f = compare::facts(&k, 0);
    assert_eq!(f.predicted_steps + 1, f.decay_steps, "{f:?}");
}

#[test]
fn pagealloc_driven_like_page_fault1_grows_high_to_high_max_then_decays() {
    let z = read_zoneinfo(&fixture("zoneinfo-2node-4cpu.txt")).unwrap();
    let vm = VmSysctls {
        min_free_kbytes: 16384,
        ..VM_2CPU
    };
    let b = build(&z, &vm, &cpus(&[0, 0, 1, 1])).unwrap();
    let zone = b.zone_index(0, "Normal").unwrap();
    let input = ModelInput {
        workload: TwinWorkload::PageFault1,
        pages: 40_000, // more than high_max: a loop needs refills every time
        cpus: vec![0, 1],
        rates: vec![200_000.0, 100_000.0],
        run_seconds: 2.0,
        idle_seconds: 40.0,
        zone,
        parked: vec![300, 0],
        start_free: Some(vec![(zone, 400_000)]),
        tick_phase_ms: vec![0, 250],
        start_high: vec![0, 5000],
    };
    let r = model::run(&b, &input).unwrap();
    let t = &r.trajectory;
    assert_eq!(t.sizing[0], (63, 699, 31250));
    // CPU 1 starts with the high it was given (raised by refills, as in the kernel)
    assert!(t.samples[0].pcp[1].high >= 5000, "{:?}", t.samples[0]);
    assert!(t.samples[0].pcp[0].high < 5000, "{:?}", t.samples[0]);
    let f0 = compare::facts(t, 0);
    let f1 = compare::facts(t, 1);
    // CPU 0 cycles 400k pages in 2 s, 40 000 at a time: its refills raise high to
    // high_max
    let (at, pages) = f0.reached_max.expect("CPU 0 reaches high_max");
    assert!(at < 2.0 && pages > 30_000, "{f0:?}");
    assert_eq!(f0.peak_high, 31250);
    // CPU 1 at half the rate gets there later, after about the same number of pages
    if let Some((t1, p1)) = f1.reached_max {
        assert!(t1 > at, "{f1:?}");
        assert!(
            compare::within(p1 as f64, pages as f64, 0.25, 0.0),
            "{f0:?} {f1:?}"
        );
    }
    // the parked pages (on the unmovable list) are a floor CPU 0's count does not go
    // below until a decay tick drains the excess over high, list 0 first, as the
    // kernel's decay_pcp_high does
    let first_second = t.samples.iter().filter(|s| s.t < 1.0);
    assert!(first_second.map(|s| s.pcp[0].count).min() >= Some(300));
    // the idle ticks decay high back to high_min, 1/8 per second
    assert_eq!(f0.predicted_steps, f0.decay_steps);
    assert!(f0.decay_steps >= 20, "{f0:?}");
    let back = f0.back_to_min.expect("back to high_min");
    assert!((20.0..40.0).contains(&back), "{back}");
    assert_eq!(f0.last.0, 699);
    // CPU 1 ticks a quarter second past each second, and the phase is recovered
    assert_eq!(compare::tick_phase_ms(t, 0), 0);
    assert_eq!(compare::tick_phase_ms(t, 1), 250);
}

fn pagealloc(args: &[&str]) -> std::process::Output {
    common::pagealloc(args, &[])
}

#[test]
fn cli_refuses_bad_arguments_in_one_line_with_status_2() {
    for args in [
        &["twin", "nosuch"][..],
        &["twin", "bulk", "--seconds", "0"],
        &["twin", "bulk", "--cpus", "0,0"],
        &["twin", "bulk", "--pages", "0"],
    ] {
        let o = pagealloc(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// A short real run on this machine: exit 0 with the kernel's sizing reproduced
/// exactly, or one line saying why the machine does not allow it (status 2: no
/// auto-tuning in this kernel; 1: not permitted).
#[test]
fn cli_short_live_run_or_one_line_why_not() {
    let o = pagealloc(&[
        "twin",
        "bulk",
        "--seconds",
        "0.3",
        "--idle-seconds",
        "0.2",
        "--pages",
        "2000",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    match o.status.code() {
        Some(0) => {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
            let lines = v["lines"].as_array().expect("lines");
            let sizing: Vec<&serde_json::Value> = lines
                .iter()
                .filter(|l| l["group"].as_str().is_some_and(|g| g.starts_with("node")))
                .collect();
            assert!(!sizing.is_empty());
            for l in sizing {
                assert_eq!(l["verdict"], "agree", "{l}");
            }
            let samples = v["kernel"]["samples"].as_array().expect("samples");
            assert!(samples.len() >= 20, "{} samples", samples.len());
            assert!(v["rates"][0].as_f64().unwrap() > 0.0);
        }
        Some(1 | 2) => {
            let last = err.trim().lines().last().unwrap_or("");
            assert!(last.starts_with("error: twin:"), "{err}");
        }
        other => panic!("status {other:?}: {err}"),
    }
}

/// Pagesets sized while the zone's watermark was boosted keep the boosted `high_min`
/// after the boost is gone (`low_wmark_pages` includes the boost; zoneinfo shows only
/// today's): the sizing line says at which boost, and only a whole number of
/// pageblocks (or the cap) explains it.
#[test]
fn high_min_sized_at_a_boost_is_recognised_and_only_then() {
    let text = std::fs::read_to_string(fixture("zoneinfo-2cpu-6.18.txt")).unwrap();
    let b = build(
        &KernelZoneinfo::parse(&text).unwrap(),
        &VM_2CPU,
        &cpus(&[0, 0]),
    )
    .unwrap();
    let a = Allocator::new(&b.layout, b.config.clone()).unwrap();
    let ours = model::sizing(&a, &b);
    let normal_high_min = |kernel_high_min: &str| {
        // Normal: low 20164, 2 CPUs: 10082 at no boost; 5 pageblocks: (20164 + 2560) / 2.
        let z = KernelZoneinfo::parse(&text.replace("high_min: 10082", kernel_high_min)).unwrap();
        compare::sizing(&z, &ours)
            .into_iter()
            .find(|l| l.group == "node 0 Normal" && l.what == "high_min")
            .unwrap()
    };
    let l = normal_high_min("high_min: 10082");
    assert_eq!((l.verdict, l.ours.as_str()), (Verdict::Agree, "10082"));
    let l = normal_high_min("high_min: 11362");
    assert_eq!(l.verdict, Verdict::Agree, "{l:?}");
    assert!(
        l.ours
            .starts_with("11362 (sized at a watermark boost of 2560 pages"),
        "{l:?}"
    );
    // 2562 or 2563 pages of boost: not a whole number of pageblocks.
    let l = normal_high_min("high_min: 11363");
    assert_eq!(l.verdict, Verdict::Differ, "{l:?}");
    // Above the cap (1.5 × high 25558 = 38337 pages: at most 29250).
    let l = normal_high_min("high_min: 40000");
    assert_eq!(l.verdict, Verdict::Differ, "{l:?}");
    // The cap itself: (20164 + 38337) / 2.
    let l = normal_high_min("high_min: 29250");
    assert!(l.ours.contains("boost of 38337 pages"), "{l:?}");
}
