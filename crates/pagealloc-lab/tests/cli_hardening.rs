//! The command lines of the hardening issue (round 3), on the built binary: each refused
//! with one `error:` line and exit status 2 before it runs, or run to success; and the
//! output of `report` and `twin --out` written whole or not at all.

mod common;

use common::pagealloc_until as run;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn pagealloc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagealloc"))
}

/// Refused: status 2, one `error:` line saying `what`, within 30 s (before any run).
fn refused(args: &[&str], what: &str) {
    let (code, err) = run(args, Duration::from_secs(30));
    assert_eq!(code, Some(2), "{args:?}: {err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{args:?}: {err}");
    assert!(errors[0].contains(what), "{args:?}: {err}");
}

#[test]
fn the_issues_command_lines_are_refused() {
    let quick = ["-p", "loops=1", "-p", "pages_per_loop=64"];
    for cost in [
        "fault_ns=1e15",
        "fault_ns=1e18",
        "fault_ns=1e20",
        "wake_ns=1000001",
    ] {
        let mut a = vec!["sim", "page_fault1", "--cpus", "1", "--cost", cost];
        a.extend(quick);
        refused(&a, "0..=1000000");
    }
    refused(
        &[
            "twin",
            "page_fault1",
            "--cpus",
            "1",
            "--seconds",
            "1",
            "--idle-seconds",
            "0",
            "--pages",
            "4503599627370497",
        ],
        "--pages",
    );
    for cpus in ["0-18446744073709551615", "0-4000000000", "4000000000"] {
        refused(&["twin", "page_fault1", "--cpus", cpus], "--cpus");
    }
    refused(
        &["run", "page_fault1", "-p", "loops=1", "-p", "loops=2"],
        "given twice",
    );
    refused(
        &["run", "page_fault1", "--config", "linux-6.12,poison"],
        "missing `=value`",
    );
    refused(
        &[
            "sim",
            "page_fault1",
            "--machine",
            "desktop-8",
            "--headroom",
            "16TiB",
        ],
        "--headroom",
    );
    refused(&["bench", "repeat", "--iterations", "0"], "--iterations");
}

/// `high == batch`: the pageset drains, `validate()` holds throughout.
#[test]
fn a_fixed_high_equal_to_batch_stresses_clean() {
    let (code, err) = run(
        &[
            "stress",
            "--seconds",
            "2",
            "--progress-s",
            "0",
            "--config",
            "linux-6.12,fixed_high=1,fixed_batch=1",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{err}");
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pagealloc-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Names and contents of the files of `dir`, sorted.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn output_paths_are_checked_before_the_run() {
    let d = scratch("paths");
    let file = d.join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let f = file.to_str().unwrap();
    // twin --out onto a file: refused at once, not after the run.
    refused(
        &[
            "twin",
            "page_fault1",
            "--cpus",
            "1",
            "--seconds",
            "5",
            "--idle-seconds",
            "0",
            "--out",
            f,
        ],
        "not a directory",
    );
    refused(&["report", "--quick", "--out", f], "not a directory");
    let below = file.join("sub");
    refused(
        &["report", "--quick", "--out", below.to_str().unwrap()],
        "a-file",
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    std::fs::remove_dir_all(&d).unwrap();
}

/// SIGINT or SIGTERM during `report --quick`: the previous report stays whole (its files
/// unchanged, nothing added) and no staging directory is left once the next run starts.
#[test]
fn an_interrupted_report_leaves_the_previous_one_whole() {
    let d = scratch("report");
    let out = d.join("report");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("report.md"), "# the previous report\n").unwrap();
    std::fs::write(out.join("series.json"), "[]\n").unwrap();
    let before = snapshot(&out);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let mut child = pagealloc()
            .args(["report", "--quick", "--out", out.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn report");
        // Let it write some of its files (plots are written as their sections finish).
        std::thread::sleep(Duration::from_secs(4));
        // SAFETY: the pid is our own child's, not yet waited for.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        assert!(!status.success(), "report finished before the signal");
        assert_eq!(
            snapshot(&out),
            before,
            "signal {sig}: the previous report changed"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}
