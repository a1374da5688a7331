//! The command line's contract, on the built binary: error paths exit 2 with one line
//! naming the valid choices; `run`/`compare`/`bench --json` print rows with the contract's
//! keys; `report --tiny` writes its files.

mod common;

use std::path::PathBuf;
use std::process::Output;

fn pagealloc(args: &[&str]) -> Output {
    common::pagealloc(args, &[])
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2, and the first line of stderr names every one of `valid`.
fn refused(args: &[&str], valid: &[&str]) {
    let o = pagealloc(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(first.starts_with("error:"), "{args:?}: {err}");
    for v in valid {
        assert!(first.contains(v), "{args:?}: `{v}` missing from: {first}");
    }
    assert!(o.stdout.is_empty(), "{args:?}: nothing on stdout");
}

#[test]
fn unknown_workload_names_the_workloads() {
    refused(&["run", "nope"], &["page_fault1", "kbuild", "zonelist_hog"]);
    refused(&["compare", "nope"], &["netperf", "lmbench"]);
}

#[test]
fn unknown_config_names_the_presets() {
    refused(
        &["run", "page_fault1", "--config", "patch99"],
        &["base", "patch7", "linux-6.12"],
    );
    refused(
        &["compare", "page_fault1", "--configs", "base,bogus"],
        &["base", "patch10", "linux-6.12"],
    );
    refused(
        &["run", "page_fault1", "--config", "base,no_such_key=1"],
        &["batch_scale_max", "fixed_batch"],
    );
}

#[test]
fn unknown_allocator_names_the_allocators() {
    let mut all = vec![
        "pagealloc",
        "buddy_system_allocator",
        "system",
        "pool",
        "kernel",
    ];
    // The C builds are behind the default-on `peers` feature.
    if cfg!(feature = "peers") {
        all.extend(["mimalloc", "jemalloc"]);
    }
    refused(&["run", "page_fault1", "--alloc", "tcmalloc"], &all);
    refused(
        &["compare", "page_fault1", "--alloc", "pagealloc,tcmalloc"],
        &all,
    );
    refused(&["bench", "repeat", "--alloc", "tcmalloc"], &all);
    if !cfg!(feature = "peers") {
        refused(
            &["run", "page_fault1", "--alloc", "mimalloc"],
            &["pagealloc"],
        );
    }
}

#[test]
fn unknown_parameter_and_benchmark_name_the_valid_ones() {
    refused(
        &["run", "page_fault1", "-p", "nope=1"],
        &["pages_per_loop", "loops", "order"],
    );
    refused(&["bench", "shuffle"], &["bulk", "repeat", "rand"]);
    refused(&["bench", "repeat", "--order", "11"], &["0..=10"]);
}

#[test]
fn unknown_flag_and_subcommand_exit_2() {
    for args in [
        &["run", "page_fault1", "--bogus"][..],
        &["frobnicate"][..],
        &["bench"][..],
    ] {
        let o = pagealloc(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn bad_headroom_is_a_usage_error() {
    refused(
        &["sim", "kbuild", "--headroom", "lots"],
        &["lots", "MiB", "all"],
    );
    refused(
        &["calibrate", "--headrooms", "4000MiB,x"],
        &["invalid headroom `x`"],
    );
    // A headroom needs its unit; --headroom belongs to the simulator.
    refused(&["sim", "kbuild", "--headroom", "6000"], &["6000", "MiB"]);
    let o = pagealloc(&["compare", "kbuild", "--headroom", "100MiB"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// Every memory flag takes a unit, and a number without one is refused, not guessed.
#[test]
fn memory_flags_take_units() {
    refused(
        &["run", "page_fault1", "--memory", "512"],
        &["512", "MiB", "GiB"],
    );
    refused(&["bench", "repeat", "--memory", "1"], &["MiB", "GiB"]);
    refused(&["stress", "--memory", "64"], &["MiB", "GiB"]);
}

/// `list --json` is the registries as one object.
#[test]
fn list_prints_json() {
    let o = pagealloc(&["list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let names = |k: &str| -> Vec<String> {
        v[k].as_array()
            .unwrap_or_else(|| panic!("{k}: {v}"))
            .iter()
            .map(|x| {
                x.as_str()
                    .map_or_else(|| x["name"].to_string(), str::to_owned)
            })
            .collect()
    };
    assert!(names("presets").contains(&"patch7".to_owned()));
    assert!(names("allocators").contains(&"kernel".to_owned()));
    assert!(names("machines").contains(&"spr-2s-224".to_owned()));
    assert!(names("benchmarks").contains(&"rand".to_owned()));
    assert!(names("workloads").iter().any(|w| w.contains("kbuild")));
    assert!(names("config_keys").contains(&"batch_scale_max".to_owned()));
}

/// The batch sweep is an explicit flag, not a guess from the default config list.
#[test]
fn the_batch_sweep_is_asked_for_by_flag() {
    refused(
        &["compare", "page_fault1", "--sim", "--batches"],
        &["--batches", "batch_sweep"],
    );
    for args in [
        &["compare", "batch_sweep", "--batches"][..],
        &[
            "compare",
            "batch_sweep",
            "--sim",
            "--batches",
            "--configs",
            "base",
        ][..],
    ] {
        let o = pagealloc(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

/// `--cpus` is one flag (threads or virtual CPUs), checked once: 0 is refused.
#[test]
fn zero_cpus_is_refused_on_threads_and_in_the_simulator() {
    for args in [
        &["run", "page_fault1", "--cpus", "0"][..],
        &["sim", "kbuild", "--cpus", "0"][..],
        &["compare", "kbuild", "--sim", "--cpus", "0"][..],
    ] {
        let o = pagealloc(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--cpus"), "{args:?}");
    }
}

#[test]
fn too_few_cpus_is_a_usage_error() {
    // One pair runs on one CPU (both ends, taking turns); two pairs need four.
    refused(
        &["run", "netperf", "--cpus", "3", "-p", "pairs=2"],
        &["needs 4 CPUs"],
    );
}

fn json_rows(o: &Output) -> Vec<serde_json::Value> {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn run_and_compare_print_rows_with_the_contract_keys() {
    let o = pagealloc(&[
        "run",
        "page_fault1",
        "--cpus",
        "2",
        "-p",
        "pages_per_loop=512",
        "-p",
        "loops=2",
        "--json",
    ]);
    let rows = json_rows(&o);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    for key in [
        "workload",
        "alloc",
        "config",
        "cpus",
        "machine",
        "score",
        "zone_lock_pct",
        "free_high",
        "alloc_zone",
        "pcp_peak_pages",
        "pcp_final_pages",
        "alloc_lat_avg_us",
        "alloc_lat_p99_us",
    ] {
        assert!(r.get(key).is_some(), "missing {key}: {r}");
    }
    assert_eq!(r["alloc"], "pagealloc");
    assert_eq!(r["config"], "linux-6.12");
    assert_eq!(r["cpus"], 2);

    let o = pagealloc(&[
        "compare",
        "page_fault1",
        "--cpus",
        "2",
        "-p",
        "pages_per_loop=512",
        "-p",
        "loops=2",
        "--configs",
        "base,linux-6.12",
        "--alloc",
        "pagealloc,pool",
        "--json",
    ]);
    let rows = json_rows(&o);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["config"], "base");
    assert_eq!(rows[0]["score"], 100.0);
    assert_eq!(rows[1]["config"], "linux-6.12");
    assert_eq!(rows[2]["alloc"], "pool");
    assert!(
        rows[2].get("zone_lock_pct").is_none(),
        "the pool has no zone lock"
    );
}

/// `compare --sim --mem-scale N` simulates every config on the machine with its memory
/// divided by N, the run `sim --mem-scale N` makes; the flag belongs to the simulator.
/// A small simulated page_fault1 (2 CPUs of skx-2s-112 at 1/64 of its memory, one loop
/// of 512 pages): the run the `compare --sim` tests below make under several configs.
const SMALL_SIM_PF1: [&str; 11] = [
    "page_fault1",
    "--machine",
    "skx-2s-112",
    "--cpus",
    "2",
    "-p",
    "pages_per_loop=512",
    "-p",
    "loops=1",
    "--mem-scale",
    "64",
];

#[test]
fn compare_sim_takes_the_memory_scale() {
    let mut args = vec!["compare", "--sim", "--configs", "linux-6.12,base", "--json"];
    args.extend(SMALL_SIM_PF1);
    let rows = json_rows(&pagealloc(&args));
    assert_eq!(rows.len(), 2);
    let mut args = vec!["sim", "--json"];
    args.extend(SMALL_SIM_PF1);
    let single = json_rows(&pagealloc(&args));
    for r in &rows {
        assert_eq!(r["extra"]["mem_scale"], 64.0, "{r}");
    }
    assert_eq!(rows[0]["config"], "linux-6.12");
    assert_eq!(
        rows[0]["trace_hash"], single[0]["trace_hash"],
        "compare's first row is sim's run at the same scale"
    );
    let o = pagealloc(&["compare", "page_fault1", "--mem-scale", "8"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    refused(
        &["compare", "page_fault1", "--sim", "--mem-scale", "0"],
        &["scale"],
    );
}

/// `compare --sim --jobs N` runs N simulations at a time; the rows, their order and
/// their hashes do not depend on N, and the table's footer prints the rate per core.
#[test]
fn compare_sim_rows_do_not_depend_on_jobs() {
    let run = |jobs: &str, json: bool| {
        let mut args = vec![
            "compare",
            "--sim",
            "--configs",
            "base,patch7,linux-6.12",
            "--jobs",
            jobs,
        ];
        args.extend(SMALL_SIM_PF1);
        if json {
            args.push("--json");
        }
        pagealloc(&args)
    };
    let key = |r: &serde_json::Value| {
        (
            r["config"].to_string(),
            r["trace_hash"].to_string(),
            r["score"].to_string(),
        )
    };
    let one: Vec<_> = json_rows(&run("1", true)).iter().map(key).collect();
    let three: Vec<_> = json_rows(&run("3", true)).iter().map(key).collect();
    assert_eq!(one.len(), 3);
    assert_eq!(one, three, "same rows in the same order");
    let o = run("2", false);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("M page ops/s per core") && text.contains("(2 at a time)"),
        "{text}"
    );
    refused(
        &["compare", "page_fault1", "--sim", "--jobs", "0"],
        &["jobs"],
    );
}

/// `compare --sim --cost` is `sim --cost`: the same errors, applied to every row, and
/// named under the table.
#[test]
fn compare_sim_takes_cost_overrides() {
    let with = |cost: Option<&str>, json: bool| {
        let mut args = vec!["compare", "--sim", "--configs", "linux-6.12,base"];
        args.extend(SMALL_SIM_PF1);
        if let Some(c) = cost {
            args.extend(["--cost", c]);
        }
        if json {
            args.push("--json");
        }
        pagealloc(&args)
    };
    for cmd in ["sim", "compare"] {
        let mut args = vec![cmd];
        if cmd == "compare" {
            args.push("--sim");
        }
        args.extend(SMALL_SIM_PF1);
        let mut unknown = args.clone();
        unknown.extend(["--cost", "drain_trip_ns=0,nope_ns=1"]);
        refused(&unknown, &["nope_ns", "drain_trip_ns", "fault_ns"]);
        let mut bad = args.clone();
        bad.extend(["--cost", "fault_ns=-1"]);
        refused(&bad, &["fault_ns", "-1"]);
        args.extend(["--cost", "fault_ns"]);
        refused(&args, &["fault_ns", "key=value"]);
    }
    refused(
        &["compare", "page_fault1", "--cost", "fault_ns=1"],
        &["--cost", "--sim"],
    );
    let lock = |rows: &[serde_json::Value]| -> Vec<(String, f64)> {
        rows.iter()
            .map(|r| {
                (
                    r["config"].to_string(),
                    r["zone_lock_pct"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    let default_rows = json_rows(&with(None, true));
    // Three times the fault's cost: the zone lock is held for a smaller share of the run.
    let slow_rows = json_rows(&with(Some("fault_ns=3000"), true));
    for r in &default_rows {
        assert!(r["extra"].get("cost.fault_ns").is_none(), "{r}");
    }
    for r in &slow_rows {
        assert_eq!(
            r["extra"]["cost.fault_ns"], 3000.0,
            "JSON rows name it: {r}"
        );
    }
    let (default, slow) = (lock(&default_rows), lock(&slow_rows));
    assert_eq!(default.len(), 2);
    for (d, s) in default.iter().zip(&slow) {
        assert_eq!(d.0, s.0);
        assert!(
            s.1 < d.1,
            "every row runs under the override: {default:?} {slow:?}"
        );
    }
    let o = with(Some(" fault_ns = 3000 "), false);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("--cost fault_ns=3000 (not the default model)"),
        "{text}"
    );
    let text = String::from_utf8_lossy(&with(None, false).stdout).into_owned();
    assert!(!text.contains("--cost"), "{text}");
}

/// `calibrate --sweep` alone runs the sweep without the kbuild grid.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: minutes in a debug build")]
fn calibrate_sweep_alone_skips_the_kbuild_grid() {
    let o = pagealloc(&["calibrate", "--sweep"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("batch sweep: zone-lock hold"), "{text}");
    assert!(text.contains("f.p99"), "the sweep's table: {text}");
    assert!(!text.contains("kbuild grid"), "{text}");
    assert!(
        !stderr(&o).contains("compute_ns_per_page="),
        "{}",
        stderr(&o)
    );
}

/// `--seeds N` (simulator) and `--runs N` (threads): one row per config with the mean,
/// its stddev and the N samples in the JSON; the LKP and mmtests layouts of `compare`.
#[test]
fn seeds_and_runs_give_rows_with_samples_and_the_fields_tables() {
    let mut args = vec![
        "compare",
        "--sim",
        "--configs",
        "linux-6.12,base",
        "--seeds",
        "5",
        "--json",
    ];
    args.extend(SMALL_SIM_PF1);
    let rows = json_rows(&pagealloc(&args));
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["samples"]["score"].as_array().unwrap().len(), 5, "{r}");
        assert_eq!(r["samples"]["zone_lock_pct"].as_array().unwrap().len(), 5);
        assert_eq!(r["extra"]["seeds"], 5.0);
        let s: Vec<f64> = r["samples"]["score"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let mean = s.iter().sum::<f64>() / 5.0;
        let raw = r["extra"]["score_raw"].as_f64().unwrap();
        assert!((raw - mean).abs() <= 1e-9 * mean, "{r}");
    }
    // Seed 1 of five is `sim --seed 1`'s run: the samples are the runs themselves.
    let mut one = vec!["sim", "--json", "--config", "linux-6.12"];
    one.extend(SMALL_SIM_PF1);
    let single = json_rows(&pagealloc(&one));
    assert_eq!(rows[0]["samples"]["score"][0], single[0]["score"]);

    for (format, marks) in [
        (
            "lkp",
            &["%stddev     %change         %stddev", ".score (pages/s)"][..],
        ),
        (
            "mmtests",
            &[
                "Hmean     score",
                "Stddev    score",
                "Amean     zone_lock_pct",
                "Welch",
            ][..],
        ),
    ] {
        let mut args = vec![
            "compare",
            "--sim",
            "--configs",
            "linux-6.12,base",
            "--seeds",
            "3",
            "--format",
            format,
        ];
        args.extend(SMALL_SIM_PF1);
        let o = pagealloc(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        for m in marks {
            assert!(out.contains(m), "{format}: {m} missing in\n{out}");
        }
    }

    let o = pagealloc(&[
        "compare",
        "page_fault1",
        "--cpus",
        "1",
        "-p",
        "pages_per_loop=256",
        "-p",
        "loops=1",
        "--configs",
        "base",
        "--alloc",
        "pagealloc,frame-alloc",
        "--runs",
        "3",
        "--json",
    ]);
    let rows = json_rows(&o);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["alloc"], "frame-alloc");
    for r in &rows {
        assert_eq!(r["samples"]["score"].as_array().unwrap().len(), 3, "{r}");
        assert_eq!(r["extra"]["runs"], 3.0);
        assert!(r["extra"]["score_stddev"].as_f64().unwrap() >= 0.0);
    }
}

#[test]
fn bench_prints_llfree_rows() {
    let o = pagealloc(&[
        "bench",
        "bulk,repeat,rand",
        "--alloc",
        "pagealloc,buddy,pool,frame-alloc",
        "--cpus",
        "1,2",
        "--order",
        "0,9",
        "--memory",
        "32MiB",
        "--iterations",
        "1",
        "--json",
    ]);
    let rows = json_rows(&o);
    // pool skips order 9: 3 kinds × (2 + 2 + 1 + 2 orders) × 2 thread counts
    assert_eq!(rows.len(), 42);
    assert!(rows.iter().any(|r| r["alloc"] == "frame-alloc"));
    for r in &rows {
        let bench = r["bench"].as_str().unwrap();
        if bench == "repeat" {
            assert!(r["pair_ns"].as_f64().unwrap() > 0.0, "{r}");
            // LLFree's repeat: as many pairs at every order, frames / threads / 2.
            let cpus = r["cpus"].as_u64().unwrap();
            assert_eq!(
                r["extra"]["pairs_per_thread"].as_f64(),
                Some((8192 / cpus / 2) as f64),
                "{r}"
            );
        } else {
            assert!(r["get_ns"].as_f64().unwrap() > 0.0 && r["put_ns"].as_f64().unwrap() > 0.0);
            // LLFree's bulk and rand: 2^order rounds.
            let order = r["order"].as_u64().unwrap();
            assert_eq!(
                r["extra"]["rounds"].as_f64(),
                Some((1u64 << order) as f64),
                "{r}"
            );
        }
        assert!(r.get("cpus").is_some() && r.get("order").is_some());
    }
    assert!(stderr(&o).contains("order-0 frames only"));
}

/// `--counters`: pagealloc rows carry what their runs did under the zone lock, and the
/// columns show a mechanism's effect: merge skipping and clusters (`fast`) touch fewer
/// metadata lines per page moved under the lock than the kernel's merging.
#[test]
fn bench_counters_show_the_zone_lock_work() {
    let run = |config: &str, extra: &[&str]| {
        let mut args = vec![
            "bench",
            "bulk",
            "--alloc",
            "pagealloc,buddy",
            "--config",
            config,
            "--cpus",
            "1",
            "--order",
            "0",
            "--memory",
            "32MiB",
            "--iterations",
            "1",
        ];
        args.extend_from_slice(extra);
        let o = pagealloc(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    let meta_per_page = |config: &str| {
        let rows = json_rows(&run(config, &["--json"]));
        assert_eq!(rows.len(), 2);
        // Only a source with counters gets them.
        assert!(
            rows[1]["extra"].get("meta_per_page").is_none(),
            "{}",
            rows[1]
        );
        let e = &rows[0]["extra"];
        assert!(e["zone_lock_per_kop"].as_f64().unwrap() > 0.0, "{e}");
        assert!(e["drained_pct"].as_f64().unwrap() > 0.0, "{e}");
        e["meta_per_page"].as_f64().unwrap()
    };
    let (kernel, fast) = (meta_per_page("linux-6.12"), meta_per_page("fast"));
    assert!(
        fast > 0.0 && fast < kernel,
        "fast {fast}, linux-6.12 {kernel}"
    );
    let table = String::from_utf8(run("fast", &["--counters"]).stdout).unwrap();
    for head in [
        "lock/kop",
        "waited %",
        "wait ns/op",
        "meta/page",
        "drained %",
    ] {
        assert!(table.contains(head), "{table}");
    }
    let plain = String::from_utf8(run("fast", &[]).stdout).unwrap();
    assert!(!plain.contains("meta/page"), "{plain}");
}

/// Each iteration of a row runs on a fresh source, as LLFree's bench builds its
/// allocator anew for each: three iterations do per block what one does. With `--reuse`
/// the later ones start from the pagesets the first left (full, `high` tuned) and make
/// fewer zone trips per block.
#[test]
fn bench_runs_each_iteration_on_a_fresh_source_unless_reuse() {
    let counters = |iterations: &str, reuse: bool| {
        let mut args = vec![
            "bench",
            "bulk",
            "--alloc",
            "pagealloc",
            "--config",
            "fast",
            "--cpus",
            "1",
            "--order",
            "0",
            "--memory",
            "32MiB",
            "--iterations",
            iterations,
            "--json",
        ];
        if reuse {
            args.push("--reuse");
        }
        let rows = json_rows(&pagealloc(&args));
        assert_eq!(rows.len(), 1);
        let e = &rows[0]["extra"];
        (
            e["zone_lock_per_kop"].as_f64().unwrap(),
            e["meta_per_page"].as_f64().unwrap(),
        )
    };
    let one = counters("1", false);
    assert_eq!(counters("3", false), one, "fresh sources: every run alike");
    let aged = counters("3", true);
    assert!(aged.0 < one.0, "reused: {aged:?}, fresh: {one:?}");
}

#[test]
fn report_tiny_writes_its_files() {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("pagealloc-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = pagealloc(&["report", "--tiny", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for section in ["page_fault1", "kbuild", "Batch sweep", "PCP high", "LLFree"] {
        assert!(md.contains(section), "report.md lacks {section}");
    }
    // The summary opens the report; reproduced tables carry the published column, the
    // difference and the source; latencies carry the whole histogram summary with units;
    // real-thread sections carry the load.
    let summary = md.find("## Summary").expect("a summary");
    assert!(summary < md.find("## page_fault1").unwrap());
    for needle in [
        "**How close to the published figures**",
        "kbuild on this host",
        "steps move in the published direction",
        "| build time ours | published | diff |",
        "| free avg µs | published | diff |",
        "docs/published.md",
        "| alloc trips | alloc trip avg µs | alloc trip p50 µs | alloc trip p99 µs | alloc trip p99.9 µs | alloc trip max µs |",
        "alloc call avg ns",
        "load average (1 min)",
    ] {
        assert!(md.contains(needle), "report.md lacks {needle}");
    }
    assert!(!md.contains(" us |"), "a unit written `us`");
    // The plotted series of the PCP timeline are in the data, with the last sample in the table.
    let samples: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("pcp_over_time_samples.json")).unwrap(),
    )
    .unwrap();
    for cfg in ["base", "linux-6.12"] {
        let s = samples[cfg].as_array().expect("samples per config");
        assert!(!s.is_empty(), "{cfg}: no samples");
        let last = s.last().unwrap();
        let rows: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("pcp_over_time.json")).unwrap())
                .unwrap();
        let row = rows
            .iter()
            .find(|r| r["config"].as_str().unwrap().starts_with(cfg))
            .unwrap();
        assert_eq!(
            row["extra"]["cpu0_count_last"].as_f64(),
            last["cpu0_count"].as_f64()
        );
    }
    for f in [
        "throughput_vs_cpus.png",
        "throughput_vs_cpus.svg",
        "latency_vs_batch.png",
        "latency_vs_batch.svg",
        "pcp_over_time.png",
        "pcp_over_time.svg",
        "kbuild_series.json",
        "batch_sweep.json",
        "llfree_bench.json",
    ] {
        let meta = std::fs::metadata(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(meta.len() > 100, "{f} is nearly empty");
    }
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kbuild_series.json")).unwrap())
            .unwrap();
    assert_eq!(rows[0]["score"], 100.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn more_cpus_than_the_host_runs_unpinned_with_a_warning() {
    let cpus = (pagealloc_lab::exec::host_cpus() + 1).to_string();
    let o = pagealloc(&[
        "run",
        "page_fault1",
        "--cpus",
        &cpus,
        "--memory",
        "64MiB",
        "-p",
        "pages_per_loop=256",
        "-p",
        "loops=1",
        "--json",
    ]);
    let rows = json_rows(&o);
    assert_eq!(rows[0]["cpus"].to_string(), cpus);
    let err = stderr(&o);
    assert!(
        err.contains("warning:") && err.contains("unpinned"),
        "{err}"
    );
}

#[test]
fn running_out_of_memory_is_reported() {
    // 8 MiB for 2 × 16 MiB of faulted pages: allocations fail, the row still comes.
    let o = pagealloc(&[
        "run",
        "page_fault1",
        "--cpus",
        "2",
        "--memory",
        "8MiB",
        "-p",
        "pages_per_loop=4096",
        "-p",
        "loops=1",
        "--json",
    ]);
    let rows = json_rows(&o);
    assert!(rows[0]["extra"]["alloc_failures"].as_f64().unwrap() > 0.0);
    let err = stderr(&o);
    assert!(err.contains("allocations failed (out of memory)"), "{err}");
}

#[test]
fn help_and_list_say_what_each_command_takes() {
    let out = |args: &[&str]| {
        let o = pagealloc(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // `list` names the simulated machines its help promises.
    let list = out(&["list"]);
    for m in ["Machines", "spr-2s-224", "icx-2s-128", "desktop-8"] {
        assert!(list.contains(m), "list lacks {m}");
    }
    // `--cpus` says which kind of CPU on each command.
    let run = out(&["run", "--help"]);
    assert!(
        run.contains("pinned") && !run.contains("simulated machine"),
        "{run}"
    );
    let sim = out(&["sim", "--help"]);
    assert!(
        sim.contains("Virtual CPUs") && !sim.contains("pinned to"),
        "{sim}"
    );
    // Terms are defined where they are used.
    let top = out(&["--help"]);
    assert!(top.contains("\"the spec\"") && top.contains("docs/published.md"));
    // The twin's count-or-id rule is spelled out.
    let twin = out(&["twin", "--help"]);
    assert!(twin.contains("`--cpus 1,` is CPU id 1"), "{twin}");
    // `--config` and `--configs` are accepted by bench and compare alike.
    let rows = json_rows(&pagealloc(&[
        "bench",
        "repeat",
        "--configs",
        "base",
        "--alloc",
        "pagealloc",
        "--cpus",
        "1",
        "--order",
        "0",
        "--memory",
        "16MiB",
        "--iterations",
        "1",
        "--json",
    ]));
    assert_eq!(rows[0]["config"], "base");
    let rows = json_rows(&pagealloc(&[
        "compare",
        "page_fault1",
        "--config",
        "base",
        "--cpus",
        "1",
        "--memory",
        "64MiB",
        "-p",
        "pages_per_loop=256",
        "-p",
        "loops=1",
        "--json",
    ]));
    assert_eq!(rows[0]["config"], "base");
}
