//! Every option of every subcommand, taken from the CLI's own definition (clap's command
//! tree, so a new option is covered without editing this file), and every `-p` and
//! `--cost` parameter, fed the numbers an adversarial user tries: 0, -1, NaN, ∞, 1e300,
//! u64::MAX and a huge range. Each run must either be refused with one `error:` line and
//! exit status 2, or succeed (exit 0) within a deadline under a 4 GiB address-space
//! limit: never a panic, an abort, a hang or unbounded memory.

mod common;

use clap::CommandFactory;
use pagealloc_lab::cli::Cli;
use std::process::{Command, Stdio};
use std::time::Duration;

const VALUES: &[&str] = &[
    "0",
    "-1",
    "nan",
    "inf",
    "1e300",
    "18446744073709551615",
    "0-18446744073709551615",
];

/// Options whose value is not a number at all (paths), left to their own tests.
const NOT_NUMBERS: &[&str] = &["out"];

/// The arguments that make each subcommand's run short, as `(option, value)` pairs
/// (positionals first, with an empty option), so that a value that is valid runs to
/// completion quickly; the option under test replaces its base entry.
fn base(sub: &str) -> Vec<(&'static str, &'static str)> {
    let quick_workload = [
        ("", "page_fault1"),
        ("-p", "loops=1"),
        ("-p", "pages_per_loop=64"),
    ];
    let mut v: Vec<(&str, &str)> = match sub {
        "run" => vec![("cpus", "1"), ("seconds", "0.2"), ("memory", "16MiB")],
        "compare" => vec![
            ("configs", "linux-6.12"),
            ("alloc", "pagealloc"),
            ("cpus", "1"),
            ("seconds", "0.2"),
            ("memory", "16MiB"),
        ],
        "sim" => vec![("machine", "desktop-8"), ("cpus", "1")],
        "bench" => vec![
            ("", "repeat"),
            ("alloc", "pagealloc"),
            ("cpus", "1"),
            ("order", "0"),
            ("memory", "4MiB"),
            ("iterations", "1"),
        ],
        "stress" => vec![
            ("threads", "1"),
            ("seconds", "0.2"),
            ("ops", "2000"),
            ("memory", "4MiB"),
            ("progress-s", "0"),
        ],
        "twin" => vec![
            ("", "page_fault1"),
            ("cpus", "1"),
            ("seconds", "0.2"),
            ("idle-seconds", "0"),
            ("pages", "64"),
        ],
        "calibrate" => vec![("tasks", "2"), ("seeds", "1"), ("jobs", "1")],
        _ => vec![],
    };
    if matches!(sub, "run" | "compare" | "sim") {
        v.splice(0..0, quick_workload);
    }
    v
}

/// The command line: `sub`, its base with `opt` (if any) replaced by `value`.
fn line(sub: &str, opt: Option<&str>, value: &str) -> Vec<String> {
    let mut args = vec![sub.to_owned()];
    for (k, v) in base(sub) {
        if Some(k) == opt {
            continue;
        }
        match k {
            "" => args.push(v.to_owned()),
            "-p" => args.extend(["-p".to_owned(), v.to_owned()]),
            k => args.push(format!("--{k}={v}")),
        }
    }
    if let Some(o) = opt {
        args.push(format!("--{o}={value}"));
    }
    args
}

/// Runs the binary under a 4 GiB address-space limit; its exit code (None: killed by
/// a signal) and stderr. Panics if it outlives `deadline`.
fn run(args: &[String], deadline: Duration) -> (Option<i32>, String) {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_pagealloc"))
        .args(args);
    common::run_until(cmd, deadline)
}

/// Refused with one `error:` line and status 2, or run to success; nothing else.
fn check(args: &[String], failures: &mut Vec<String>) {
    let (code, err) = run(args, Duration::from_secs(90));
    let error_lines = err.lines().filter(|l| l.starts_with("error")).count();
    let ok = match code {
        Some(2) => error_lines == 1 && !err.contains("panicked"),
        Some(0) => !err.contains("panicked"),
        _ => false,
    };
    if !ok {
        failures.push(format!(
            "{args:?}: exit {code:?}, stderr: {}",
            err.lines().take(3).collect::<Vec<_>>().join(" | ")
        ));
    }
}

#[test]
fn every_numeric_option_of_every_subcommand_is_refused_or_runs() {
    let cli = Cli::command();
    let mut failures = Vec::new();
    let mut options = 0;
    for sub in cli.get_subcommands() {
        let name = sub.get_name();
        // report: its one option is a path (tests/report_output.rs); calibrate: every
        // run refits the model over simulated machines, minutes in a debug build (its
        // options are lists parsed and bounded by the same functions as sim's).
        if name == "report" || name == "calibrate" {
            continue;
        }
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if !arg.get_action().takes_values() || NOT_NUMBERS.contains(&long) || long == "param" {
                continue;
            }
            options += 1;
            for v in VALUES {
                check(&line(name, Some(long), v), &mut failures);
            }
        }
    }
    assert!(options > 30, "only {options} options found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_workload_parameter_and_cost_is_refused_or_runs() {
    use pagealloc_lab::workload;
    let mut failures = Vec::new();
    let mut keys = 0;
    for &w in workload::names() {
        let params = workload::by_name(w, &[]).expect("workload").params();
        for (key, _) in params {
            keys += 1;
            // 0 may be valid and then runs the workload at its laptop size (seconds
            // to minutes): built only, which is where a value is checked.
            if let Err(e) = workload::by_name(w, &[(key.to_owned(), "0".to_owned())]) {
                assert!(!e.to_string().is_empty());
            }
            for v in &VALUES[1..] {
                let args: Vec<String> = [
                    "run",
                    w,
                    "--cpus=1",
                    "--seconds=0.2",
                    "--memory=64MiB",
                    "-p",
                    &format!("{key}={v}"),
                ]
                .map(str::to_owned)
                .to_vec();
                check(&args, &mut failures);
            }
        }
    }
    assert!(keys > 40, "only {keys} parameters found");
    for key in pagealloc_lab::sim::machine::CostModel::KEYS {
        for v in VALUES {
            let mut args = line("sim", None, "");
            args.push(format!("--cost={key}={v}"));
            check(&args, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every `-p` parameter of every workload and every `--cost` parameter has a documented
/// upper bound: in the one table (`PARAM_BOUNDS`, `MAX_COST_NS`) that `pagealloc list`
/// and `pagealloc sim --help` print, and the setter refuses just past it.
#[test]
fn every_parameter_has_a_documented_bound() {
    use pagealloc_lab::workload::{self, param_bound};
    let mut listed = String::new();
    Command::new(env!("CARGO_BIN_EXE_pagealloc"))
        .arg("list")
        .stderr(Stdio::null())
        .output()
        .map(|o| listed = String::from_utf8_lossy(&o.stdout).into_owned())
        .expect("list");
    for &w in workload::names() {
        for (key, _) in workload::by_name(w, &[]).expect("workload").params() {
            let (max, _) = param_bound(key).unwrap_or_else(|| panic!("{w}: `{key}` has no bound"));
            assert!(
                listed
                    .lines()
                    .any(|l| l.trim_start().starts_with(key) && l.contains(&max.to_string())),
                "`pagealloc list` does not show the bound of `{key}`"
            );
            let over = if max.fract() == 0.0 && max < 1e15 {
                format!("{}", max as u64 + 1)
            } else {
                format!("{}", max * 2.0)
            };
            let r = workload::by_name(w, &[(key.to_owned(), over.clone())]);
            assert!(
                r.is_err(),
                "{w}: {key}={over} accepted past its bound {max}"
            );
        }
    }
    let help = Command::new(env!("CARGO_BIN_EXE_pagealloc"))
        .args(["sim", "--help"])
        .output()
        .expect("sim --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let max = pagealloc_lab::sim::machine::MAX_COST_NS;
    assert!(
        help.contains(&format!("each 0..={max}")),
        "sim --help does not state the cost bound"
    );
    for key in pagealloc_lab::sim::machine::CostModel::KEYS {
        let mut c = pagealloc_lab::sim::machine::MACHINES[0].cost;
        assert!(c.set(key, &max.to_string()).is_ok(), "{key}");
        assert!(
            c.set(key, &(max * 1.01).to_string()).is_err(),
            "{key} past its bound"
        );
    }
}
