//! Issue 10's command lines, on the built binary: every bad number is refused with exit
//! status 2 and an `error:` line before anything runs; nothing panics or hangs (each
//! command runs under a deadline and is killed past it); good edge values run (exit 0).

mod common;

use common::pagealloc_until as run;
use std::time::Duration;

fn refused(args: &[&str]) {
    let (code, err) = run(args, Duration::from_secs(30));
    assert_eq!(code, Some(2), "{args:?}: {err}");
    assert!(err.starts_with("error:"), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

#[test]
fn bad_numbers_exit_2_before_running() {
    let seconds = ["-1", "nan", "inf", "-inf", "1e300", "x"];
    for s in seconds {
        refused(&["run", "page_fault1", &format!("--seconds={s}")]);
        refused(&["stress", &format!("--seconds={s}")]);
    }
    for c in ["0", "100000", "-3", "1.5", "9999999999999999999999"] {
        refused(&["run", "page_fault1", &format!("--cpus={c}")]);
        refused(&["compare", "page_fault1", &format!("--cpus={c}")]);
        refused(&["stress", &format!("--threads={c}")]);
        refused(&["stress", &format!("--cpus={c}")]);
        refused(&["bench", "repeat", &format!("--cpus={c}")]);
    }
    for m in [
        "0MiB",
        "3MiB",
        "99999999MiB",
        "-1MiB",
        "abc",
        "1e30GiB",
        "nanGiB",
        "infGiB",
        "64",
    ] {
        refused(&["run", "page_fault1", &format!("--memory={m}")]);
        refused(&["compare", "page_fault1", &format!("--memory={m}")]);
        refused(&["stress", &format!("--memory={m}")]);
        refused(&["bench", "repeat", &format!("--memory={m}")]);
    }
    refused(&[
        "sim",
        "page_fault1",
        "--cpus",
        "100000",
        "--machine",
        "desktop-8",
    ]);
    refused(&[
        "sim",
        "page_fault1",
        "--cpus",
        "9",
        "--machine",
        "desktop-8",
    ]);
    refused(&["sim", "page_fault1", "--cpus", "0"]);
    // Repetitions: --runs on threads, --seeds in the simulator, 1..=1000; each on the
    // executor it is for only.
    for n in ["0", "1001", "-1", "2.5", "99999999999999999999999"] {
        refused(&["run", "page_fault1", &format!("--runs={n}")]);
        refused(&["compare", "page_fault1", &format!("--runs={n}")]);
        refused(&["sim", "page_fault1", &format!("--seeds={n}")]);
        refused(&["compare", "page_fault1", "--sim", &format!("--seeds={n}")]);
    }
    refused(&["run", "page_fault1", "--seeds", "3"]);
    refused(&["compare", "page_fault1", "--sim", "--runs", "3"]);
    refused(&["run", "page_fault1", "--runs", "3", "--seconds", "1"]);
    refused(&["compare", "page_fault1", "--format", "lkp", "--json"]);
    // Config values refused as the kernel bounds them, on every command that takes one.
    for cfg in [
        "linux-6.12,fixed_batch=67108864",
        "linux-6.12,fixed_batch=2147483648",
        "linux-6.12,fixed_batch=0",
        "linux-6.12,high_fraction=3",
        "linux-6.12,batch_scale_max=7",
        "linux-6.12,checked=off",
    ] {
        refused(&["run", "page_fault1", "--config", cfg]);
        refused(&["stress", "--config", cfg]);
        refused(&["bench", "repeat", "--config", cfg]);
    }
}

#[test]
fn edge_values_that_are_valid_run() {
    let ok = |args: &[&str]| {
        let (code, err) = run(args, Duration::from_secs(120));
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    };
    ok(&[
        "stress",
        "--threads",
        "1",
        "--memory",
        "4MiB",
        "--seconds",
        "0.3",
        "--progress-s",
        "0",
    ]);
    ok(&[
        "stress",
        "--threads",
        "3",
        "--cpus",
        "1",
        "--ops",
        "20000",
        "--churn",
        "--progress-s",
        "0",
        "--config",
        "base,fixed_batch=1024",
    ]);
    ok(&["list"]);
}

#[test]
fn a_batch_too_large_for_the_zone_is_a_clear_error_not_a_livelock() {
    // fixed_batch=65535 on 64 MiB: 4 batches exceed the zone; refused at build (exit 1
    // for a run that cannot start, with the reason), in well under the deadline.
    let (code, err) = run(
        &[
            "stress",
            "--config",
            "linux-6.12,fixed_batch=65535",
            "--seconds",
            "1",
        ],
        Duration::from_secs(30),
    );
    assert!(matches!(code, Some(1) | Some(2)), "{err}");
    assert!(err.contains("fixed_batch"), "{err}");
}
