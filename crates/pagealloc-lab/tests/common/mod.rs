//! What the command-line test files share: running the built binary (under a deadline, or
//! to its end) and checking a refusal's one error line. Not every file uses every helper.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` with stdout discarded and stderr captured: its exit code (None: killed by a
/// signal) and stderr. Panics, after killing it, if it outlives `deadline`.
#[allow(dead_code)]
pub(crate) fn run_until(mut cmd: Command, deadline: Duration) -> (Option<i32>, String) {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pagealloc");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read stderr");
    (status.code(), err)
}

/// Runs the built `pagealloc` with `args` and extra environment `env`, to its end.
#[allow(dead_code)]
pub(crate) fn pagealloc(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pagealloc"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runs")
}

/// Runs the built `pagealloc` with `args` under `deadline`, as [`run_until`]: its exit
/// code and stderr.
#[allow(dead_code)]
pub(crate) fn pagealloc_until(args: &[&str], deadline: Duration) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pagealloc"));
    cmd.args(args);
    run_until(cmd, deadline)
}

/// `o` is a refusal: exit 2 and one `error:` line on stderr, which contains `says`.
#[allow(dead_code)]
pub(crate) fn one_line_exit_2(o: &Output, says: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "one error line: {err}");
    assert!(lines[0].contains(says), "{says:?} in {err}");
}

/// `predict`'s page_fault1 at one CPU, `count` loops of 16 MiB, one kernel run (the
/// simulator side only: no executable), and the index of the host's Normal zone.
#[allow(dead_code)]
pub(crate) fn page_fault1_16m(count: u64) -> (pagealloc_lab::predict::PredictOptions, usize) {
    let opts = pagealloc_lab::predict::PredictOptions {
        workload: "page_fault1".into(),
        cpus: 1,
        size: pagealloc_lab::predict::program::Size {
            pages: 4096,
            count,
            extra: 0,
        },
        config: None,
        exe: "unused".into(),
        runs: 1,
    };
    let normal = pagealloc_lab::predict::saved::host_zones()
        .iter()
        .position(|z| z.starts_with("Normal"))
        .expect("the host has a Normal zone");
    (opts, normal)
}

/// A one-CPU page_fault1 pageset of `count` pages (`high` its `high`) on zone `zone`
/// whose lists hold the faults' pages (4 200 movable) and `unmovable` pages for the
/// page tables and the gather's pages.
#[allow(dead_code)]
pub(crate) fn page_fault1_pageset(
    zone: usize,
    count: u32,
    high: i32,
    unmovable: u32,
) -> pagealloc_lab::sim::start::PagesetStart {
    use pagealloc::{MigrateType, SeedList};
    pagealloc_lab::sim::start::PagesetStart {
        cpu: 0,
        zone,
        count,
        high,
        taken: vec![
            SeedList {
                order: 0,
                mt: MigrateType::Movable,
                blocks: 4200,
            },
            SeedList {
                order: 0,
                mt: MigrateType::Unmovable,
                blocks: unmovable,
            },
        ],
        used: [(0, 0), (0, 1)].into_iter().collect(),
        refilled: None,
        alloc_factor: 0,
        free_count: 0,
    }
}

/// `predict`'s options for program `name` on `cpus` CPUs at its default size, for its
/// simulator side (no binary runs).
#[allow(dead_code)]
pub(crate) fn predict_opts(name: &str, cpus: u32) -> pagealloc_lab::predict::PredictOptions {
    use pagealloc_lab::predict;
    predict::PredictOptions {
        workload: name.into(),
        cpus,
        size: predict::default_size(name).unwrap(),
        config: None,
        exe: "unused".into(),
        runs: 1,
    }
}

/// `predict`'s simulation of program `name` on `cpus` CPUs of `host` at its default
/// size, from the simulator's own start state.
#[allow(dead_code)]
pub(crate) fn predicted(name: &str, cpus: u32) -> pagealloc_lab::predict::Figures {
    pagealloc_lab::predict::simulate(&predict_opts(name, cpus), "linux-6.18", &Default::default())
        .unwrap_or_else(|e| panic!("{name} at {cpus}: {e}"))
        .0
}
