//! The commands that run workloads on real threads: `run`, `compare` (without
//! `--sim`), `bench` and `report`.

use super::parse::{config_of, configs_of, parse_list, split_allocs, workload_of};
use super::progress::Progress;
use super::{
    print_compare, sim, BenchArgs, CliError, CompareArgs, ReportArgs, RunArgs, WorkloadOpts,
};
use crate::bench::{self, BenchKind, BenchParams};
use crate::exec::{self, ExecOptions};
use crate::report::{self, compare_columns, job, BENCH_COLUMNS, WORKLOAD_COLUMNS};
use crate::units::MemSize;
use crate::workload::Workload;
use crate::{peers, Row};

/// `--cpus` (checked by its value parser), or the CPUs this process may use.
fn cpus_of(o: &WorkloadOpts) -> u32 {
    o.common
        .cpus
        .unwrap_or_else(|| (exec::host_cpus().max(1) as u64).min(crate::limits::MAX_THREADS) as u32)
}

/// One row of `workload` on `alloc` (with `config`): one run, runs repeated for
/// `--seconds` (the median-score run stands for all), or `--runs N` runs merged into
/// one row with their means, spreads and samples ([`crate::stats::merge`]).
fn measure(
    w: &dyn Workload,
    alloc: &'static str,
    config: &pagealloc::Config,
    o: &WorkloadOpts,
    cpus: u32,
    warned: &mut Vec<String>,
    progress: &Progress,
) -> Result<Row, CliError> {
    let opts = ExecOptions {
        seed: o.common.seed,
        latency: !o.no_latency,
        ..ExecOptions::new(cpus)
    };
    let frames = o.memory.map(MemSize::pages);
    let t0 = std::time::Instant::now();
    let mut rows = Vec::new();
    loop {
        let r = exec::run_named(w, alloc, config, &opts, frames).map_err(|e| {
            let what = if alloc == "pagealloc" {
                format!("{} on pagealloc {config}", w.name())
            } else {
                format!("{} on {alloc}", w.name())
            };
            match e {
                exec::ExecError::Workload(e) => CliError::usage(e.to_string()),
                e => CliError::run(format!("{what}: {e}")),
            }
        })?;
        for warn in &r.warnings {
            if !warned.contains(warn) {
                eprintln!("warning: {warn}");
                warned.push(warn.clone());
            }
        }
        rows.push(r.row());
        if let Some(n) = o.runs {
            let what = if alloc == "pagealloc" {
                format!("{} on pagealloc {config}", w.name())
            } else {
                format!("{} on {alloc}", w.name())
            };
            progress.inc(&format!("{what}: run {}/{n}", rows.len()));
            if rows.len() < n as usize {
                continue;
            }
            return Ok(crate::stats::merge(rows, "runs"));
        }
        match o.seconds {
            Some(s) if t0.elapsed().as_secs_f64() < s => {}
            _ => break,
        }
    }
    // The median-score run stands for all.
    rows.sort_by(|a, b| a.score.unwrap_or(0.0).total_cmp(&b.score.unwrap_or(0.0)));
    let n = rows.len();
    let mut row = rows.swap_remove(n / 2);
    if n > 1 {
        row.extra.insert("runs".into(), n as f64);
    }
    Ok(row)
}

fn emit(rows: &[Row], columns: &[&str], json: bool) {
    if json {
        print!("{}", report::json_lines(rows));
    } else {
        report::print_table(rows, columns);
    }
}

/// Refuses `--seeds` on threads: runs there are not seeded repetitions.
fn threads_only(o: &WorkloadOpts) -> Result<(), CliError> {
    if o.common.seeds.is_some() {
        return Err(CliError::usage(
            "--seeds repeats simulations (sim, compare --sim); on threads use --runs N",
        ));
    }
    Ok(())
}

/// The columns of a row of several runs: the score's stddev (% of the mean) after it.
fn with_spread(mut cols: Vec<&'static str>, o: &WorkloadOpts) -> Vec<&'static str> {
    if o.runs.is_some() {
        let at = cols.iter().position(|&c| c == "score").map_or(0, |i| i + 1);
        cols.insert(at, "score_stddev_pct");
        cols.push("runs");
    }
    cols
}

pub(super) fn cmd_run(a: &RunArgs) -> Result<(), CliError> {
    threads_only(&a.opts)?;
    let w = workload_of(&a.workload, &a.opts.common.params)?;
    let alloc = peers::canonical(&a.alloc).map_err(|e| CliError::usage(e.to_string()))?;
    let config = config_of(&a.config)?;
    let cpus = cpus_of(&a.opts);
    let runs = a.opts.runs.unwrap_or(1);
    let progress = Progress::new(u64::from(runs), runs > 1 && !a.opts.common.json);
    let row = measure(
        &*w,
        alloc,
        &config,
        &a.opts,
        cpus,
        &mut Vec::new(),
        &progress,
    )?;
    progress.finish();
    let mut cols = with_spread(WORKLOAD_COLUMNS.to_vec(), &a.opts);
    cols.push("score_unit");
    emit(&[row], &cols, a.opts.common.json);
    Ok(())
}

pub(super) fn cmd_compare(a: &CompareArgs) -> Result<(), CliError> {
    if a.sim {
        return sim::cmd_compare(a);
    }
    if a.cost.cost.is_some() {
        return Err(CliError::usage(
            "--cost sets the simulator's cost model: it needs --sim",
        ));
    }
    threads_only(&a.opts)?;
    let w = workload_of(&a.workload, &a.opts.common.params)?;
    let allocs = split_allocs(&a.alloc)?;
    let configs = configs_of(a.configs.as_deref())?;
    let cpus = cpus_of(&a.opts);
    let mut plan: Vec<(&'static str, pagealloc::Config)> = Vec::new();
    for &al in &allocs {
        if al == "pagealloc" {
            for c in &configs {
                plan.push((al, config_of(c)?));
            }
        } else {
            plan.push((al, pagealloc::Config::default()));
        }
    }
    let runs = a.opts.runs.map_or(1, u64::from);
    let pb = Progress::new(plan.len() as u64 * runs, runs > 1 && !a.opts.common.json);
    let mut rows = Vec::new();
    let mut warned = Vec::new();
    for (al, cfg) in &plan {
        pb.set_message(format!("{al} {cfg}"));
        rows.push(measure(&*w, al, cfg, &a.opts, cpus, &mut warned, &pb)?);
        if a.opts.runs.is_none() {
            pb.inc(&format!("{al} {cfg}"));
        }
    }
    pb.finish();
    let raw = rows.clone();
    report::normalise(&mut rows);
    if a.opts.common.json {
        print!("{}", report::json_lines(&rows));
    } else {
        let cols = with_spread(compare_columns(), &a.opts);
        print_compare(a.format, &raw, &rows, &cols);
    }
    Ok(())
}

pub(super) fn cmd_bench(a: &BenchArgs) -> Result<(), CliError> {
    let kinds: Vec<BenchKind> = parse_list(&a.kind, "benchmark", "bulk, repeat, rand")?;
    let allocs = split_allocs(&a.alloc)?;
    let config = config_of(&a.config)?;
    let threads: Vec<u32> = parse_list(&a.cpus, "CPU count", "1, 2, …")?;
    let orders: Vec<u8> = parse_list(&a.order, "order", "0..=10")?;
    if let Some(o) = orders.iter().find(|&&o| o > 10) {
        return Err(CliError::usage(format!(
            "invalid order `{o}`; valid: 0..=10"
        )));
    }
    for &t in &threads {
        crate::limits::check_threads(u64::from(t))
            .map_err(|e| CliError::usage(format!("invalid CPU count: {e}")))?;
    }
    // The field is public: a value built in code gets the parser's check too.
    crate::limits::check_memory(a.memory)
        .map_err(|e| CliError::usage(format!("invalid --memory: {e}")))?;
    let memory_bytes = a.memory.bytes();
    let total = kinds.len() * allocs.len() * threads.len() * orders.len();
    let pb = indicatif::ProgressBar::new(total as u64);
    let mut rows = Vec::new();
    for &kind in &kinds {
        for &alloc in &allocs {
            for &t in &threads {
                for &order in &orders {
                    pb.set_message(format!("{kind} {alloc} × {t} order {order}"));
                    let p = BenchParams {
                        kind,
                        alloc,
                        config: config.clone(),
                        threads: t,
                        order,
                        memory_bytes,
                        iterations: a.iterations,
                        seed: a.seed,
                        reuse: a.reuse,
                    };
                    match bench::run(&p) {
                        Ok(r) => rows.push(r),
                        Err(e @ peers::SourceError::Unsupported { .. }) => {
                            pb.suspend(|| eprintln!("skipped: {e}"));
                        }
                        Err(e) => return Err(CliError::run(format!("bench {kind} {alloc}: {e}"))),
                    }
                    pb.inc(1);
                }
            }
        }
    }
    pb.finish_and_clear();
    let mut cols = BENCH_COLUMNS.to_vec();
    if a.counters {
        cols.extend_from_slice(bench::COUNTER_COLUMNS);
    }
    emit(&rows, &cols, a.json);
    Ok(())
}

pub(super) fn cmd_report(a: &ReportArgs) -> Result<(), CliError> {
    let mode = if a.tiny {
        job::Mode::Tiny
    } else if a.quick {
        job::Mode::Quick
    } else {
        job::Mode::Full
    };
    // Written whole or not at all (`output`): the path is checked before the run.
    let staged = crate::output::Staged::dir(&a.out).map_err(CliError::usage)?;
    let s = job::run(staged.path(), mode).map_err(CliError::run)?;
    staged.commit_dir().map_err(CliError::usage)?;
    for w in &s.warnings {
        eprintln!("warning: {w}");
    }
    println!("{}", s.text.trim_end());
    println!(
        "\nreport written to {} in {:.0} s ({} files): {}",
        a.out.display(),
        s.seconds,
        s.files.len(),
        a.out.join("report.md").display()
    );
    Ok(())
}
