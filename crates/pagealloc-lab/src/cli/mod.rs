//! The `pagealloc` command line: `run`, `compare`, `bench`, `report`, `list`, `sim`,
//! `calibrate`, `stress`, `twin`, `trace`, `predict`.
//!
//! # Design
//! The command line sits on top of the lab: the executors, the simulator and the
//! reports are library functions that print nothing and know no flags; this module and
//! its files parse, call them and print. One clap-derive [`Command`] enum holds every
//! subcommand, so other tools add theirs with one variant and one match arm in
//! [`dispatch`]. Lists (`a,b,c`) go through one parser, [`parse_list`]; bad input is one
//! error, [`CliError::Usage`]. Values clap cannot check by itself (workload, config,
//! allocator names, `key=value` parameters) are checked in `parse.rs` and refused with
//! one line naming the valid choices and exit status 2, like clap's own errors. A run
//! whose checks fail exits with status 1.
//!
//! The files: this one holds the commands' arguments and the dispatch; `threads.rs`
//! runs `run`, `compare`, `bench` and `report` on real threads; [`sim`] the simulator's
//! subcommands (`sim`, `calibrate`, `compare --sim`); [`twin`], [`trace`] and
//! [`predict`] theirs; `progress.rs` the progress of many runs ([`Progress`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use pagealloc::Preset;

mod parse;
pub mod predict;
mod progress;
pub mod sim;
mod threads;
pub mod trace;
pub mod twin;

pub use parse::{
    config_of, configs_of, parse_list, parse_list_with, parse_params, split_allocs, split_configs,
    workload_of,
};
pub use progress::Progress;

use crate::bench::BenchKind;
use crate::report;
use crate::units::MemSize;
use crate::workload;
use crate::{peers, Row};

/// What can end a command: printed as one line after `error: `.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input: the usage error of every subcommand (exit status 2, like clap's own).
    #[error("{0}")]
    Usage(String),
    /// A run failed (exit status 1).
    #[error("{0}")]
    Run(String),
}

impl CliError {
    /// A usage error saying `m`.
    pub fn usage(m: impl std::fmt::Display) -> Self {
        CliError::Usage(m.to_string())
    }
    /// A failed run saying `m`.
    pub fn run(m: impl std::fmt::Display) -> Self {
        CliError::Run(m.to_string())
    }
    /// `m` as the error of a tool whose errors carry their exit status (`code`): 2 is a
    /// usage error, anything else a failed run.
    pub fn with_code(code: i32, m: impl std::fmt::Display) -> Self {
        match code {
            2 => CliError::usage(m),
            _ => CliError::run(m),
        }
    }
    /// The process exit status.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Run(_) => 1,
        }
    }
}

/// The lab of the pagealloc page-frame allocator: the seed papers' workloads on real
/// threads against pagealloc configs and peer allocators, LLFree's microbenchmarks and
/// the report.
#[derive(Debug, Parser)]
#[command(
    name = "pagealloc",
    version,
    propagate_version = true,
    after_help = TERMS
)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The words the help texts use.
const TERMS: &str = "Terms: \"the spec\" is the project's reference for the Linux \
6.7-6.12 page allocator and for the workloads, machines and sizes of the published runs \
(the simulator's \"full scale\"); \"the seed papers\" are the published measurements the \
lab reproduces (Huang Ying's PCP auto-tuning series and its batch-scale commit, LLFree's \
benchmarks), listed with their sources and figures in \
crates/pagealloc-lab/docs/published.md. The lab's README: crates/pagealloc-lab/README.md.";

/// `--cpus` of `run`: pinned threads.
const CPUS_THREADS: &str = "CPUs the workload runs on, 1..=1024: one thread each, pinned \
to the CPUs this process may use (default: all of them; more than that runs unpinned, \
with a warning)";

/// `--cpus` of `sim`: virtual CPUs.
const CPUS_SIM: &str = "Virtual CPUs the workload runs on: CPUs 1..=N of the simulated \
machine (default: kbuild one socket, the other workloads the whole machine)";

/// `--cpus` of `compare`: either.
const CPUS_COMPARE: &str = "CPUs the workload runs on: on threads, 1..=1024 pinned threads \
(default: the CPUs this process may use); with --sim, CPUs 1..=N of the simulated machine \
(default: kbuild one socket, the other workloads the whole machine)";

/// Every subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one workload on real threads (one pinned thread per CPU) and print its row.
    #[command(after_long_help = workloads_help(), mut_arg("cpus", |a| a.help(CPUS_THREADS)))]
    Run(RunArgs),
    /// Run one workload under several configs and/or allocators, normalised to the first
    /// row = 100.
    #[command(after_long_help = workloads_help(), mut_arg("cpus", |a| a.help(CPUS_COMPARE)))]
    Compare(CompareArgs),
    /// LLFree's microbenchmarks: bulk, repeat, rand (ns per operation).
    Bench(BenchArgs),
    /// The main job: run the default suite and write report.md, JSON and plots, then
    /// print the report's summary. Duration on a 2-CPU machine shared with other builds
    /// (load 17-29): the default suite 11-28 min, --quick about 2 min (less on an idle
    /// machine; the README has the measurements). Progress on stderr throughout.
    Report(ReportArgs),
    /// List workloads with their parameters, configs, allocators, benchmarks and
    /// simulated machines.
    List(ListArgs),
    /// Simulate one workload at the spec's scale on a described machine (virtual CPUs,
    /// the real allocator, a calibrated cost model) and print its row.
    #[command(after_long_help = sim::machines_help(), mut_arg("cpus", |a| a.help(CPUS_SIM)))]
    Sim(sim::SimArgs),
    /// Refit the simulator's free parameters to the published calibration data and print
    /// the fit with its residuals.
    Calibrate(sim::CalibrateArgs),
    /// Soak test: random allocations and frees of random orders on real threads, remote
    /// frees, thread churn (CPUs drained or offlined/onlined), decay ticks, memory
    /// pressure across the watermarks; validates throughout, exits 1 on any violation.
    Stress(crate::stress::StressArgs),
    /// The live-kernel twin: run a workload on this machine's kernel (sampling its
    /// pagesets in /proc/zoneinfo) and on pagealloc linux-6.12 built from the kernel's
    /// own zones, and print both side by side with a verdict per line.
    Twin(twin::TwinArgs),
    /// Kernel ground truth: record the live kernel's page allocations while a command
    /// runs (`trace record -- CMD`), and replay a recording through pagealloc beside the
    /// kernel's own refills and drains (`trace replay FILE`).
    Trace(trace::TraceArgs),
    /// The simulator beside the live kernel: a workload as a real program on this
    /// machine's kernel with the recorder on (root and tracefs) and the same workload in
    /// the simulator on `--machine host`, allocator events per operation, rate, CPU time,
    /// idle, zone-lock wait and pageset pages side by side, a verdict per line.
    Predict(predict::PredictArgs),
    /// `predict`'s real programs (run by the recorder; not for direct use).
    #[command(hide = true)]
    PredictProgram(predict::ProgramArgs),
}

/// Options of every workload run, on threads (`run`, `compare`) or in the simulator
/// (`sim`, `compare --sim`).
#[derive(Clone, Debug, Args)]
pub struct CommonOpts {
    /// CPUs the workload runs on (each command's help says which kind: pinned threads,
    /// or virtual CPUs of the simulated machine).
    #[arg(long, value_parser = crate::limits::cpus)]
    pub cpus: Option<u32>,
    /// Root seed (CPU i gets a stream derived from it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Workload parameter override, KEY=VALUE (repeatable; see `pagealloc list`).
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Print one JSON object per row on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Simulator only (`sim`, `compare --sim`): run every row under N root seeds (the
    /// seed and the N - 1 after it), 1..=1000; the row shows the mean and stddev of its
    /// metrics and its JSON carries the samples (on threads: --runs).
    #[arg(long, value_name = "N", value_parser = crate::limits::runs)]
    pub seeds: Option<u32>,
}

/// Options shared by `run` and `compare`.
#[derive(Debug, Args)]
pub struct WorkloadOpts {
    /// CPUs, seed, parameters, JSON.
    #[command(flatten)]
    pub common: CommonOpts,
    /// Repeat the run until this many seconds have passed and report the median score
    /// (default: one run).
    #[arg(long, value_parser = crate::limits::seconds, conflicts_with = "runs")]
    pub seconds: Option<f64>,
    /// Threads only: run every row N times, 1..=1000; the row shows the mean and stddev
    /// of its metrics and its JSON carries the samples (in the simulator: --seeds).
    #[arg(long, value_name = "N", value_parser = crate::limits::runs)]
    pub runs: Option<u32>,
    /// Memory of frame-range allocators, with a unit: 512MiB, 2GiB (default: 512MiB or
    /// CPUs × 64MiB, or more when the workload's size parameters need it).
    #[arg(long, value_name = "SIZE", value_parser = crate::limits::memory)]
    pub memory: Option<MemSize>,
    /// Do not time single operations (pure throughput; no latency columns).
    #[arg(long)]
    pub no_latency: bool,
}

/// `pagealloc run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Workload name (see below or `pagealloc list`).
    pub workload: String,
    /// Allocator: pagealloc or a peer (see `pagealloc list`).
    #[arg(long, default_value = "pagealloc")]
    pub alloc: String,
    /// pagealloc config: a preset with optional `,key=value` overrides (see
    /// `pagealloc list`).
    #[arg(long, default_value = Preset::Linux612.name())]
    pub config: String,
    /// Shared options.
    #[command(flatten)]
    pub opts: WorkloadOpts,
}

/// `pagealloc compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Workload name.
    pub workload: String,
    /// pagealloc configs, comma-separated: each starts with a preset name, and a
    /// `key=value` item belongs to the config before it only (`base,patch7,
    /// batch_scale_max=3` is base and patch7 with batch_scale_max=3; give an override
    /// after each config it is for: `base,merge_skip=on,linux-6.12,merge_skip=on`). One
    /// row each when pagealloc is among the allocators. Default: the kernel series'
    /// presets (base … linux-6.12). Also spelled `--config` (as `run` and `bench` do).
    #[arg(long, visible_alias = "config")]
    pub configs: Option<String>,
    /// Allocators, comma-separated; pagealloc gives one row per config, a peer one row.
    #[arg(long, default_value = "pagealloc")]
    pub alloc: String,
    /// Shared options.
    #[command(flatten)]
    pub opts: WorkloadOpts,
    /// Run the configs in the simulator instead of on threads (see `pagealloc sim`).
    #[arg(long)]
    pub sim: bool,
    /// With --sim, for batch_sweep: run the sweep's fixed batches (63 … 4095, high =
    /// 2 × batch) instead of --configs and print them beside the published figures.
    #[arg(long, requires = "sim", conflicts_with = "configs")]
    pub batches: bool,
    /// Simulated machine (with --sim): a published one or `host` (this machine, read
    /// from sysfs and /proc); default: the workload's seed machine.
    #[arg(long, requires = "sim")]
    pub machine: Option<String>,
    /// With --sim: free memory at the start above each zone's high watermark, with a
    /// unit (6000MiB), or `all` (see `pagealloc sim --help`). Default: the workload's
    /// calibrated value.
    #[arg(long, value_name = "SIZE|all", requires = "sim")]
    pub headroom: Option<String>,
    /// With --sim (`sim`'s option): cost model overrides for every config.
    #[command(flatten)]
    pub cost: sim::CostOpts,
    /// With --sim: divide the machine's memory by this factor, as `pagealloc sim
    /// --mem-scale` does (keeps the ratios of watermarks, high and pages per CPU; size
    /// parameters such as zonelist_hog's `total_pages` are not scaled: give them for the
    /// scaled machine). Every config runs at the same scale.
    #[arg(long = "mem-scale", default_value_t = 1, requires = "sim")]
    pub mem_scale: u64,
    /// With --sim: simulations at a time, each on a thread of its own (default: the
    /// host's available parallelism); the rows do not depend on it.
    #[arg(long, requires = "sim", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Table layout: `table` (the lab's, normalised to the first row = 100), `lkp`
    /// (0-day/LKP: `base ±%stddev  %change  new ±%stddev  metric`), `mmtests`
    /// (compare-mmtests: Hmean for rates, Amean for costs, gain against the first
    /// config, `*` marks where Welch's t-test gives p < 0.05). The spreads and the test
    /// need several samples: --runs N on threads, --seeds N in the simulator.
    #[arg(long, value_enum, default_value_t = Format::Table, conflicts_with = "json")]
    pub format: Format,
}

/// `compare --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The lab's table.
    Table,
    /// 0-day/LKP's comparison ([`crate::stats::lkp_table`]).
    Lkp,
    /// mmtests' comparison ([`crate::stats::mmtests_table`]).
    Mmtests,
}

/// Prints the rows of a `compare` in `format` (`raw`: the rows before normalisation,
/// for the statistics' tables; `rows`: normalised, for the lab's).
pub fn print_compare(format: Format, raw: &[Row], rows: &[Row], columns: &[&str]) {
    match format {
        Format::Table => report::print_table(rows, columns),
        Format::Lkp => print!("{}", crate::stats::lkp_table(raw)),
        Format::Mmtests => print!("{}", crate::stats::mmtests_table(raw)),
    }
}

/// `pagealloc bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Benchmarks, comma-separated: bulk, repeat, rand.
    pub kind: String,
    /// Allocators, comma-separated.
    #[arg(long, default_value = "pagealloc,buddy_system_allocator")]
    pub alloc: String,
    /// pagealloc config: a preset with optional `,key=value` overrides (one config;
    /// also spelled `--configs`, as `compare` does).
    #[arg(long, visible_alias = "configs", default_value = "linux-6.12")]
    pub config: String,
    /// CPU counts, comma-separated: one pinned thread allocating as each CPU.
    #[arg(long, default_value = "1,2")]
    pub cpus: String,
    /// Block orders, comma-separated.
    #[arg(long, default_value = "0,9")]
    pub order: String,
    /// Memory with a unit (1GiB, 512MiB): the frame range, half of which is in use at
    /// the peak.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = crate::limits::memory)]
    pub memory: MemSize,
    /// Runs per row, 1..=1000; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub iterations: u32,
    /// Seed of rand's shuffle.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One source for all the iterations of a row: later runs start from the state the
    /// one before left (tuned pagesets, shuffled free lists). Default: a fresh source per
    /// iteration, as LLFree's bench builds its allocator anew for each.
    #[arg(long)]
    pub reuse: bool,
    /// Add the allocator's counters to the table (pagealloc rows): zone-lock trips per
    /// 1000 block operations, % of them that waited, wait ns per operation, metadata
    /// lines touched under the lock per page moved, % of freed pages drained. JSON rows
    /// always carry them.
    #[arg(long)]
    pub counters: bool,
    /// Print one JSON object per row instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `pagealloc list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `pagealloc report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The quick suite: fewer configs and smaller workloads (2 min 7 s measured on 2
    /// CPUs at load 22-25).
    #[arg(long)]
    pub quick: bool,
    /// The smallest suite (seconds), for tests.
    #[arg(long, hide = true)]
    pub tiny: bool,
    /// Output directory.
    #[arg(long, default_value = "report")]
    pub out: PathBuf,
}

/// The workloads and their parameters with defaults, for `--help`.
pub fn workloads_help() -> String {
    let mut s = String::from("Workloads (parameters with their laptop defaults; -p KEY=VALUE):\n");
    for &name in workload::names() {
        if let Ok(w) = workload::by_name(name, &[]) {
            let ps: Vec<String> = w.params().iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!(
                "  {name:<18} {} ({})\n",
                ps.join(" "),
                w.score_unit()
            ));
        }
    }
    s.push_str("Parameter bounds (-p KEY=VALUE: each 0..=max):\n");
    for (k, max, unit) in workload::PARAM_BOUNDS {
        s.push_str(&format!("  {k:<20} {max} {unit}\n"));
    }
    s
}

/// Entry point of the binary: parses, runs, maps errors to exit statuses.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs one command.
///
/// # Errors
/// [`CliError::Usage`] for bad values, [`CliError::Run`] for failed runs.
pub fn dispatch(command: Command) -> Result<(), CliError> {
    match command {
        Command::Run(a) => threads::cmd_run(&a),
        Command::Compare(a) => threads::cmd_compare(&a),
        Command::Bench(a) => threads::cmd_bench(&a),
        Command::Report(a) => threads::cmd_report(&a),
        Command::Sim(a) => sim::cmd_sim(&a),
        Command::Calibrate(a) => sim::cmd_calibrate(&a),
        Command::Twin(a) => twin::cmd_twin(&a),
        Command::Trace(a) => trace::cmd_trace(&a),
        Command::Predict(a) => predict::cmd_predict(&a),
        Command::PredictProgram(a) => predict::cmd_program(&a),
        Command::List(a) => {
            if a.json {
                println!("{}", list_json());
            } else {
                print!("{}", list_text());
            }
            Ok(())
        }
        Command::Stress(a) => match crate::stress::run(&a) {
            Ok(rep) => {
                print_stress(&rep, a.json);
                Ok(())
            }
            Err(crate::stress::StressError::Failed(rep)) => {
                print_stress(&rep, a.json);
                Err(CliError::run(format!(
                    "stress: {} violation(s)",
                    rep.violations()
                )))
            }
            Err(e @ crate::stress::StressError::Args(_)) => Err(CliError::usage(e.to_string())),
            Err(e) => Err(CliError::run(e.to_string())),
        },
    }
}

fn print_stress(rep: &crate::stress::StressReport, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string(rep).expect("the stress report serialises")
        );
    } else {
        println!("{rep}");
    }
}

/// `pagealloc list --json`: every choice of the command line, from the registries.
fn list_json() -> String {
    let workloads: Vec<serde_json::Value> = workload::names()
        .iter()
        .filter_map(|&name| workload::by_name(name, &[]).ok())
        .map(|w| {
            let params: serde_json::Map<String, serde_json::Value> = w
                .params()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.into()))
                .collect();
            serde_json::json!({
                "name": w.name(),
                "params": params,
                "score_unit": w.score_unit(),
            })
        })
        .collect();
    serde_json::json!({
        "workloads": workloads,
        "presets": Preset::ALL.map(Preset::name),
        "config_keys": pagealloc::Config::KEYS.split(", ").collect::<Vec<_>>(),
        "allocators": peers::names(),
        "benchmarks": BenchKind::ALL.map(BenchKind::name),
        "machines": crate::sim::MACHINES.iter().map(|m| m.name).chain(["host"]).collect::<Vec<_>>(),
    })
    .to_string()
}

fn list_text() -> String {
    format!(
        "{}\nConfigs: {} with ,key=value overrides; keys: {}\n\nAllocators: {}\n\nBenchmarks: bulk, repeat, rand\n\n{}",
        workloads_help(),
        Preset::NAMES,
        pagealloc::Config::KEYS,
        &peers::Peer::names_help(),
        sim::machines_help()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
