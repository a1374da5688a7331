//! Short stress runs: real threads, remote frees, churn, pressure across the watermarks;
//! nothing may be lost or violated. The long soak is `pagealloc stress --seconds N`.

use pagealloc_lab::stress::{run, StressArgs, StressError, StressReport};

fn args(threads: usize, seconds: f64, churn: bool, config: &str) -> StressArgs {
    StressArgs {
        threads,
        seconds,
        churn,
        config: config.into(),
        memory: pagealloc_lab::units::MemSize::mib(32),
        validate_ms: 300,
        progress_s: 0,
        ..StressArgs::default()
    }
}

fn check(a: &StressArgs) -> StressReport {
    let rep = match run(a) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    println!("{rep}");
    assert_eq!(rep.frames_lost, 0);
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    assert!(rep.ops > 1000, "too few ops: {}", rep.ops);
    assert!(rep.allocs > 0 && rep.local_frees > 0 && rep.remote_frees > 0);
    assert!(rep.refused_as_expected > 0, "no invalid free exercised");
    assert!(rep.validations >= 2, "validated {} times", rep.validations);
    // Pressure went both ways across the watermarks.
    assert!(rep.below_low >= 1 && rep.above_high >= 1, "{rep}");
    rep
}

#[test]
fn churn_with_hotplug_and_pressure_linux_6_12() {
    let a = args(4, 3.0, true, "linux-6.12");
    let rep = check(&a);
    assert!(rep.replaced_threads >= 2, "too few threads replaced: {rep}");
    assert!(rep.cpu_drains >= 1 && rep.cpu_hotplugs >= 1, "{rep}");
    assert_eq!(rep.cpu_drains + rep.cpu_hotplugs, rep.replaced_threads);
    assert!(rep.high_fraction_switches > 0);
}

#[test]
fn poisoned_frames_patch10() {
    // Freed frames are poisoned and validate() checks the poison: a write after free
    // or a block handed out twice would show (slower: every free writes its frames).
    let mut a = args(2, 2.5, false, "patch10");
    a.poison = true;
    check(&a);
}

#[test]
fn shared_pagesets_base_preset() {
    // Six threads on three CPUs: pagesets are contended, trylocks fail over to the zone.
    let mut a = args(6, 2.0, false, "base");
    a.cpus = Some(3);
    check(&a);
}

#[test]
fn op_budget_stops_the_run() {
    let mut a = args(2, 0.0, false, "patch7,fixed_batch=7,fixed_high=28");
    a.ops = 20_000;
    let rep = run(&a).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        rep.ops >= 20_000 && rep.ops < 20_000 + 10_000,
        "{}",
        rep.ops
    );
    assert_eq!(rep.frames_lost, 0);
}

#[test]
fn bad_arguments_are_errors() {
    let mut a = args(0, 1.0, false, "linux-6.12");
    assert!(matches!(run(&a), Err(StressError::Args(_))));
    a.threads = 1;
    a.config = "no-such-preset".into();
    let e = run(&a).unwrap_err();
    assert!(e.to_string().contains("no-such-preset"), "{e}");
}

#[test]
fn cli_exit_statuses() {
    let bin = env!("CARGO_BIN_EXE_pagealloc");
    let out = std::process::Command::new(bin)
        .args([
            "stress",
            "--threads",
            "2",
            "--seconds",
            "1",
            "--memory",
            "16MiB",
        ])
        .args(["--churn", "--progress-s", "0"])
        .output()
        .expect("run pagealloc stress");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("frames lost        0"), "{stdout}");
    assert!(stdout.contains("errors             none"), "{stdout}");
    // --json: the same report as one object.
    let out = std::process::Command::new(bin)
        .args([
            "stress",
            "--threads",
            "2",
            "--ops",
            "2000",
            "--memory",
            "16MiB",
        ])
        .args(["--progress-s", "0", "--json"])
        .output()
        .expect("run pagealloc stress --json");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["frames_lost"], 0, "{v}");
    assert!(v["ops"].as_u64().unwrap() >= 2000, "{v}");
    let out = std::process::Command::new(bin)
        .args(["stress", "--threads", "0"])
        .output()
        .expect("run pagealloc stress");
    assert_eq!(out.status.code(), Some(2), "bad input is a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threads"));
}

#[test]
fn irq_thread_through_the_nolock_pair() {
    // A thread plays an interrupt handler on CPU 0 beside CPU 0's worker: nolock
    // allocations and frees (some deferred), and every deferred free completed.
    let mut a = args(2, 2.5, true, "linux-6.12");
    a.irq = true;
    let rep = check(&a);
    assert!(rep.irq_allocs > 0 && rep.irq_frees > 0, "{rep}");
    assert!(rep.nolock_trylock_fail > 0, "no trylock ever failed: {rep}");
    assert_eq!(rep.nolock_deferred, rep.nolock_deferred_done, "{rep}");
}
