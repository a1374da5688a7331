//! The simulator's speed work changes no result: trace hashes of small runs pinned
//! (from commit e8afe6a's binary; re-pinned when the zone-lock trips' fixed costs
//! became the live kernel's measured ones and kbuild's compute per page was refitted,
//! docs/sim-cost-model.md §4.1–4.2: the hashes mix every op's virtual clock), and `compare --sim` in parallel gives the rows of a
//! serial run.

use std::process::Command;

fn run(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pagealloc"))
        .args(args)
        .arg("--json")
        .output()
        .expect("run the pagealloc binary");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap()
}

/// The hashes printed by `pagealloc sim … --json` (page ops as e8afe6a's).
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: a minute in a debug build")]
fn trace_hashes_are_pinned() {
    let cases: [(&[&str], &str, f64); 3] = [
        (
            &[
                "sim",
                "kbuild",
                "--machine",
                "spr-2s-224",
                "-p",
                "tasks=16",
                "--mem-scale",
                "16",
            ],
            "8bdd9710304a74b3",
            193_362.0,
        ),
        (
            &[
                "sim",
                "kbuild",
                "--machine",
                "spr-2s-224",
                "-p",
                "tasks=16",
                "--mem-scale",
                "16",
                "--page-cache",
                "on",
            ],
            "0c51a516f96f8ea9",
            193_362.0,
        ),
        (
            &[
                "sim",
                "page_fault1",
                "--machine",
                "skx-2s-112",
                "--cpus",
                "8",
                "-p",
                "pages_per_loop=512",
                "-p",
                "loops=2",
                "--mem-scale",
                "16",
            ],
            "fe2a68cef2a1866c",
            16_384.0,
        ),
    ];
    for (args, hash, ops) in cases {
        let r = run(args);
        assert_eq!(r["trace_hash"], hash, "{args:?}");
        assert_eq!(r["extra"]["page_ops"], ops, "{args:?}");
    }
}

/// `compare --sim` on 2 jobs and on 1: the same rows, hashes and page ops, in order;
/// progress on stderr as plain lines (a pipe is not a terminal).
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: a minute in a debug build")]
fn parallel_compare_equals_serial() {
    let rows = |jobs: &str| -> Vec<(String, String, String)> {
        let out = Command::new(env!("CARGO_BIN_EXE_pagealloc"))
            .args([
                "compare",
                "kbuild",
                "--sim",
                "--machine",
                "spr-2s-224",
                "--configs",
                "base,patch7,linux-6.12",
                "-p",
                "tasks=8",
                "--mem-scale",
                "32",
                "--json",
                "--jobs",
                jobs,
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        // stderr is a pipe here, not a terminal: one plain progress line per run.
        assert!(
            err.contains("[3/3] ")
                && err.contains("page ops/s per core")
                && err.contains("ETA 0 s"),
            "{err}"
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let r: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    r["config"].to_string(),
                    r["trace_hash"].to_string(),
                    r["extra"]["page_ops"].to_string(),
                )
            })
            .collect()
    };
    let serial = rows("1");
    assert_eq!(serial.len(), 3);
    assert_eq!(serial, rows("2"), "parallel rows are the serial rows");
}
