//! The simulator's subcommands of the `pagealloc` binary: `sim`, `compare --sim` and
//! `calibrate`, on top of the library functions of [`crate::sim`]; the tables and the
//! normalisation are the lab's ([`crate::report`]).

use clap::Args;

use super::{config_of, configs_of, parse_list, parse_params, CliError, CommonOpts};
use crate::report::{self, WORKLOAD_COLUMNS};
use crate::sim::{calibrate, compare, run, CostModel, Machine, SimOptions, MACHINES};
use crate::workload::{self, Scale, Workload};
use crate::Row;

/// Options of `pagealloc sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Workload name (see `pagealloc list`); it runs at the spec's (full) scale.
    pub workload: String,
    /// Machine: spr-2s-224, icx-2s-128, skx-2s-112, skx-4s-768, sn2-28n-56, desktop-8,
    /// or host (this machine: CPUs, caches, nodes and zones read from sysfs and /proc).
    /// Default: the machine the workload was measured on.
    #[arg(long)]
    pub machine: Option<String>,
    /// pagealloc config: a preset with optional `,key=value` overrides.
    #[arg(long, default_value = pagealloc::Preset::Linux612.name())]
    pub config: String,
    /// Simulator options.
    #[command(flatten)]
    pub sim: SimFlags,
}

/// Options shared by `sim` and `compare --sim`.
#[derive(Debug, Args, Clone)]
pub struct SimFlags {
    /// CPUs, seed, parameters, JSON.
    #[command(flatten)]
    pub common: CommonOpts,
    /// Divide the machine's memory by this factor (keeps the ratios of watermarks,
    /// high and pages per CPU; see docs/sim-cost-model.md).
    #[arg(long = "mem-scale", default_value_t = 1)]
    pub mem_scale: u64,
    /// Cost model overrides.
    #[command(flatten)]
    pub cost: CostOpts,
    /// Page-cache model (memory kept between the low and high watermarks by a modelled
    /// kswapd): on or off. Default: off.
    #[arg(long = "page-cache", value_parser = ["on", "off"])]
    pub page_cache: Option<String>,
    /// Free memory at the start, with a unit (6000MiB), above each zone's high watermark;
    /// the rest is held by the rest of the system for the whole run. `all`: all memory
    /// free. Default: the workload's calibrated value (kbuild 6000MiB, the others all).
    #[arg(long, value_name = "SIZE|all")]
    pub headroom: Option<String>,
}

/// `--cost`, of `sim` and `compare --sim`: one definition, parsed by one function
/// ([`CostModel::apply`] on the machine's model).
#[derive(Debug, Args, Clone, Default)]
pub struct CostOpts {
    /// Cost model overrides, KEY=VALUE[,KEY=VALUE…], applied to the machine's model
    /// (the keys are listed at the end of `pagealloc sim --help` and `pagealloc list`,
    /// and explained in docs/sim-cost-model.md); every row runs under them; the table's
    /// footer and the JSON rows (`extra["cost.KEY"]`) name them.
    #[arg(long, value_name = "KEY=VALUE[,…]")]
    pub cost: Option<String>,
}

impl CostOpts {
    /// The `KEY=VALUE` pairs `--cost` names, trimmed, in its order (validated by
    /// [`CostModel::apply`] before any row runs).
    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.cost
            .as_deref()
            .into_iter()
            .flat_map(|spec| spec.split(','))
            .filter_map(|i| i.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
    }

    /// Marks JSON rows too: `extra["cost.KEY"]` is each overridden parameter's value in
    /// the model the row ran under (`o.cost`).
    fn mark(&self, o: &SimOptions, rows: &mut [Row]) {
        let Some(c) = o.cost else { return };
        for (key, _) in self.pairs() {
            if let Some(&(_, v)) = c.list().iter().find(|(k, _)| *k == key) {
                for r in rows.iter_mut() {
                    r.extra.insert(format!("cost.{key}"), v);
                }
            }
        }
    }

    /// The overrides as one line for a table's footer, or `None` without `--cost`.
    fn note(&self) -> Option<String> {
        self.cost.as_ref()?;
        let items: Vec<String> = self.pairs().map(|(k, v)| format!("{k}={v}")).collect();
        Some(format!(
            "cost model: the machine's with --cost {} (not the default model)",
            items.join(",")
        ))
    }
}

/// Options of `pagealloc calibrate`.
///
/// Two parts, chosen by flag: `--kbuild` (the default when neither is given) and
/// `--sweep`. Both start with the batch sweep's fit (the per-line cost under the zone
/// lock and the tracer's in-window cost, beside the trips' measured fixed costs).
#[derive(Debug, Args)]
#[command(
    after_long_help = "Parts: no flag or --kbuild: the batch sweep's fit, then the \
kbuild grid. --sweep: the batch sweep's fit, then the simulated batch sweep beside the \
published one (no kbuild grid; --tasks, --computes and --headrooms are unused). \
--kbuild --sweep: all of it."
)]
pub struct CalibrateArgs {
    /// Run the kbuild grid (after the batch sweep's fit). The default when --sweep is
    /// not given; with --sweep, give it to run both.
    #[arg(long)]
    pub kbuild: bool,
    /// kbuild tasks per grid point (the published build is 896 tasks; fewer is faster).
    #[arg(long, default_value_t = 224)]
    pub tasks: u32,
    /// Grid of kbuild `compute_ns_per_page`, comma-separated.
    #[arg(long, default_value = "2000,2500,3000,3500,4500")]
    pub computes: String,
    /// Grid of kbuild's free memory at the start above the high watermark, with a unit
    /// (`all`: all memory free), comma-separated.
    #[arg(long, default_value = "6000MiB")]
    pub headrooms: String,
    /// Root seeds, comma-separated: every grid point runs once per seed; its error is
    /// the mean, its directions the fewest.
    #[arg(long, default_value = "1")]
    pub seeds: String,
    /// Simulate the batch sweep on spr-2s-224 and icx-2s-128 (one task, two loops of
    /// page_fault1) and print it beside the published one; alone, without the kbuild
    /// grid (add --kbuild for both).
    #[arg(long)]
    pub sweep: bool,
    /// Print the fit as one JSON object (and, with --sweep, the sweep's rows one per
    /// line) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Simulations at a time, each on a thread of its own (default: the host's
    /// available parallelism); the results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
}

fn usage(m: impl std::fmt::Display) -> CliError {
    CliError::usage(m)
}

fn failed(e: impl std::fmt::Display) -> CliError {
    CliError::run(e)
}

fn machine_of(name: Option<&str>, workload: &str) -> Result<Machine, CliError> {
    match name {
        Some(n) => Machine::by_name(n).map_err(|e| usage(e.to_string())),
        None => Ok(Machine::seed_for(workload)),
    }
}

fn workload_full(name: &str, params: &[String]) -> Result<Box<dyn Workload>, CliError> {
    let ov = calibrate::calibrated(name, &parse_params(params)?);
    workload::build(name, Scale::Full, &ov).map_err(|e| usage(e.to_string()))
}

fn options(
    machine: Machine,
    config: pagealloc::Config,
    f: &SimFlags,
) -> Result<SimOptions, CliError> {
    let mut o = SimOptions::new(machine, config);
    o.seed = f.common.seed;
    o.cpus = f.common.cpus;
    match f.common.cpus {
        Some(n) if n == 0 || n > o.machine.cpus => {
            return Err(usage(format!(
                "--cpus {n}: machine {} has CPUs 1..={}",
                o.machine.name, o.machine.cpus
            )));
        }
        _ => {}
    }
    o.machine
        .pages_per_node(f.mem_scale)
        .map_err(|e| usage(e.to_string()))?;
    o.mem_scale = f.mem_scale;
    if let Some(spec) = &f.cost.cost {
        let mut c = o.machine.cost;
        c.apply(spec).map_err(usage)?;
        o.cost = Some(c);
    }
    o.page_cache = f.page_cache.as_deref().map(|s| s == "on");
    if let Some(h) = &f.headroom {
        o.headroom = h.parse().map_err(usage)?;
        let pages = o
            .machine
            .pages_per_node(f.mem_scale)
            .map_err(|e| usage(e.to_string()))?;
        let have_mib = (pages * u64::from(o.machine.nodes) * pagealloc::PAGE_SIZE as u64) >> 20;
        if let crate::sim::Headroom::Mib(m) = o.headroom {
            if m > have_mib {
                return Err(usage(format!(
                    "--headroom {h}: machine {} has {have_mib} MiB (with --mem-scale {})",
                    o.machine.name, f.mem_scale
                )));
            }
        }
    }
    Ok(o)
}

fn columns(f: &SimFlags) -> Vec<&'static str> {
    let mut c = WORKLOAD_COLUMNS.to_vec();
    c.insert(1, "machine");
    if f.common.seeds.is_some() {
        let at = c.iter().position(|&k| k == "score").map_or(0, |i| i + 1);
        c.insert(at, "score_stddev_pct");
        c.push("seeds");
    }
    c.push("free_o9_avg");
    c.push("free_o9_end");
    c.push("trace_hash");
    c
}

/// The root seeds of `--seeds N`: the seed and the N - 1 after it (one: the seed).
fn seeds(f: &SimFlags) -> Vec<u64> {
    (0..u64::from(f.common.seeds.unwrap_or(1)))
        .map(|i| f.common.seed.wrapping_add(i))
        .collect()
}

fn describe(o: &SimOptions, w: &dyn Workload) -> String {
    let m = &o.machine;
    format!(
        "{} ({}); memory scale {} ({} MiB per node simulated, {}); {} on {} CPUs; seed {}",
        m.name,
        m.description,
        o.mem_scale,
        (m.pages_per_node(o.mem_scale).unwrap_or(0) * 4096) >> 20,
        o.headroom.describe(w.name()),
        w.name(),
        o.cpus.unwrap_or_else(|| m.default_workload_cpus(w.name())),
        o.seed
    )
}

/// The speed line under a table: page ops simulated, the CPU time of the simulating
/// threads and the rate per core (what the host's load does not change), and the wall
/// time `wall` s of the whole command with the rate it gave (`jobs` runs at a time).
fn footer(rows: &[Row], wall: f64, jobs: usize) -> String {
    let sum = |k: &str| -> f64 { rows.iter().filter_map(|r| r.extra.get(k)).sum() };
    let (ops, cpu) = (sum("page_ops"), sum("run_cpu_s"));
    let makespan: Vec<String> = rows
        .iter()
        .filter_map(|r| r.extra.get("makespan_s"))
        .map(|s| format!("{s:.3}"))
        .collect();
    format!(
        "virtual makespan (s): {}\n{:.0} page ops simulated in {:.1} s of CPU time: {:.2} M page ops/s per core; {:.1} s wall ({} at a time): {:.2} M page ops/s in all",
        makespan.join(" "),
        ops,
        cpu,
        ops / cpu.max(1e-9) / 1e6,
        wall,
        jobs,
        ops / wall.max(1e-9) / 1e6
    )
}

/// `pagealloc sim`.
///
/// # Errors
/// Bad input ([`CliError::Usage`]) or a failed run (the message has the seed and the
/// replay command).
pub fn cmd_sim(a: &SimArgs) -> Result<(), CliError> {
    let w = workload_full(&a.workload, &a.sim.common.params)?;
    let m = machine_of(a.machine.as_deref(), &a.workload)?;
    let o = options(m, config_of(&a.config)?, &a.sim)?;
    if !a.sim.common.json {
        eprintln!("simulating {}", describe(&o, &*w));
    }
    let seeds = seeds(&a.sim);
    let progress = super::Progress::new(seeds.len() as u64, seeds.len() > 1 && !a.sim.common.json);
    let mut runs = Vec::new();
    for &seed in &seeds {
        let o = SimOptions { seed, ..o.clone() };
        runs.push(run(&*w, &o).map_err(failed)?);
        progress.inc(&format!("{} seed {seed}", w.name()));
    }
    progress.finish();
    let mut row = if a.sim.common.seeds.is_some() {
        crate::stats::merge(runs, "seeds")
    } else {
        runs.swap_remove(0)
    };
    a.sim.cost.mark(&o, std::slice::from_mut(&mut row));
    if a.sim.common.json {
        print!("{}", report::json_lines(&[row]));
    } else {
        let mut cols = columns(&a.sim);
        cols.push("score_unit");
        report::print_table(std::slice::from_ref(&row), &cols);
        let wall = row.wall_s.unwrap_or(0.0);
        println!("{}", footer(std::slice::from_ref(&row), wall, 1));
        if let Some(n) = a.sim.cost.note() {
            println!("{n}");
        }
    }
    Ok(())
}

/// `pagealloc compare WORKLOAD --sim`: every config simulated on one machine, rows
/// normalised to the first. kbuild on spr-2s-224 also prints the published table beside
/// ours; `--batches` runs the batch sweep's fixed batches instead of `--configs`.
///
/// # Errors
/// Bad input or a failed run.
pub fn cmd_compare(a: &super::CompareArgs) -> Result<(), CliError> {
    if a.opts.runs.is_some() {
        return Err(usage(
            "--runs repeats runs on threads; a simulation is deterministic: give --seeds N",
        ));
    }
    if a.alloc.trim() != "pagealloc" {
        return Err(usage(format!(
            "--sim simulates pagealloc configs only; got --alloc {}",
            a.alloc
        )));
    }
    let f = SimFlags {
        common: a.opts.common.clone(),
        mem_scale: a.mem_scale,
        cost: a.cost.clone(),
        page_cache: None,
        headroom: a.headroom.clone(),
    };
    let (workload_name, machine, configs) = (
        a.workload.as_str(),
        a.machine.as_deref(),
        a.configs.as_deref(),
    );
    let f = &f;
    let w = workload_full(workload_name, &f.common.params)?;
    let m = machine_of(machine, workload_name)?;
    let sweep = a.batches;
    if sweep && workload_name != "batch_sweep" {
        return Err(usage(format!(
            "--batches runs the batch sweep: the workload is batch_sweep, not {workload_name}"
        )));
    }
    let cfgs: Vec<pagealloc::Config> = if sweep {
        calibrate::PUBLISHED_SWEEP
            .iter()
            .filter(|r| r.machine == "spr-2s-224")
            .map(|r| r.batch)
            .chain([4095])
            .map(calibrate::sweep_config)
            .collect()
    } else {
        configs_of(configs)?
            .iter()
            .map(|c| config_of(c))
            .collect::<Result<_, _>>()?
    };
    let mut o = options(m.clone(), cfgs[0].clone(), f)?;
    o.jobs = a.jobs.map_or(0, |j| j as usize);
    let jobs = o.jobs().min(cfgs.len());
    let seeds = seeds(f);
    if !f.common.json {
        eprintln!(
            "simulating {} configs × {} seeds, {jobs} at a time: {}",
            cfgs.len(),
            seeds.len(),
            describe(&o, &*w)
        );
    }
    let pb = super::Progress::new((cfgs.len() * seeds.len()) as u64, true);
    let t0 = std::time::Instant::now();
    // One `compare` per seed (its configs in parallel); runs[c][s] is config c, seed s.
    let mut runs: Vec<Vec<Row>> = cfgs.iter().map(|_| Vec::new()).collect();
    for &seed in &seeds {
        let o = SimOptions { seed, ..o.clone() };
        let done = |r: &Row| pb.finished(r);
        let rows = compare(&*w, &o, &cfgs, &done).map_err(failed)?;
        for (c, r) in rows.into_iter().enumerate() {
            runs[c].push(r);
        }
    }
    let mut rows: Vec<Row> = if f.common.seeds.is_some() {
        runs.into_iter()
            .map(|r| crate::stats::merge(r, "seeds"))
            .collect()
    } else {
        runs.into_iter().flatten().collect()
    };
    f.cost.mark(&o, &mut rows);
    let wall = t0.elapsed().as_secs_f64();
    pb.finish();
    if sweep {
        for (r, c) in rows.iter_mut().zip(&cfgs) {
            let b = c.fixed_batch.unwrap_or(0);
            r.extra.insert("batch".into(), f64::from(b));
            if let (Some(s), Some(n)) = (r.score, r.cpus) {
                r.extra
                    .insert("pages_per_s_per_cpu".into(), s / f64::from(n));
            }
        }
    }
    let raw = rows.clone();
    report::normalise(&mut rows);
    if f.common.json {
        print!("{}", report::json_lines(&rows));
        return Ok(());
    }
    super::print_compare(a.format, &raw, &rows, &columns(f));
    println!("{}", footer(&rows, wall, jobs));
    if let Some(n) = f.cost.note() {
        println!("{n}");
    }
    let kbuild_table = workload_name == "kbuild"
        && m.name == "spr-2s-224"
        && rows.len() >= calibrate::PUBLISHED_KBUILD.len()
        && rows
            .iter()
            .zip(calibrate::PUBLISHED_KBUILD.iter())
            .all(|(r, p)| {
                r.config
                    .as_deref()
                    .is_some_and(|c| c.split(',').next() == Some(p.config))
            });
    if kbuild_table {
        println!("\nkbuild on spr-2s-224, ours beside the published table (base = 100):");
        print!("{}", calibrate::kbuild_table(&rows));
        print!(
            "{}",
            calibrate::directions_text(&calibrate::kbuild_directions(&rows))
        );
        println!("\nthe decay tick during the build (mean high of the pagesets it acted on):");
        print!("{}", calibrate::kbuild_decay_table(&rows));
    }
    if workload_name == "kbuild" {
        println!("\nthe zone lock by trip kind (per trip: mean wait and hold):");
        print!("{}", calibrate::kbuild_lock_table(&rows));
    }
    if sweep {
        println!("\nbatch sweep, ours beside the published figures (throughput per CPU):");
        print!("{}", calibrate::sweep_table(&raw));
    }
    Ok(())
}

/// `pagealloc calibrate`: refit the free parameters and print the fit and its residuals.
///
/// # Errors
/// Bad input or a failed run.
pub fn cmd_calibrate(a: &CalibrateArgs) -> Result<(), CliError> {
    let computes: Vec<u64> = parse_list(&a.computes, "compute_ns_per_page", "ns, e.g. 3000")?;
    let headrooms: Vec<crate::sim::Headroom> = parse_list(
        &a.headrooms,
        "headroom",
        "a size (6000MiB), `all` or `default`",
    )?;
    let seeds: Vec<u64> = parse_list(&a.seeds, "seed", "integers")?;
    if a.tasks == 0 {
        return Err(usage("--tasks must be at least 1"));
    }
    let jobs = a.jobs.map_or(0, |j| j as usize);
    // `--sweep` alone: no grid (refit with no grid points fits the residuals only).
    let kbuild = a.kbuild || !a.sweep;
    let computes = if kbuild { computes } else { Vec::new() };
    let r = calibrate::refit(a.tasks, &computes, &headrooms, &seeds, jobs, &|line| {
        eprintln!("{line}")
    })
    .map_err(failed)?;
    if a.json {
        println!("{}", serde_json::to_string(&r).expect("the fit serialises"));
    } else {
        print!("{}", calibrate::refit_report(&r));
    }
    if a.sweep {
        for name in ["spr-2s-224", "icx-2s-128"] {
            let m = Machine::by_name(name).expect("known machine");
            let mut o = SimOptions::new(m.clone(), pagealloc::Config::default());
            o.seed = seeds[0];
            o.cpus = Some(1);
            o.jobs = jobs;
            let loops = [("loops".to_owned(), "2".to_owned())];
            let pb = super::Progress::new(
                calibrate::PUBLISHED_SWEEP
                    .iter()
                    .filter(|r| r.machine == "spr-2s-224")
                    .count() as u64
                    + 1,
                true,
            );
            let rows =
                calibrate::batch_sweep(&m, &loops, &o, &|r| pb.finished(r)).map_err(failed)?;
            pb.finish();
            if a.json {
                print!("{}", report::json_lines(&rows));
            } else {
                print!("{}", calibrate::sweep_table(&rows));
            }
        }
    }
    Ok(())
}

/// The machines, for `pagealloc list` and `--help`.
pub fn machines_help() -> String {
    let mut s = String::from("Machines (simulator):\n");
    for m in MACHINES {
        s += &format!("  {:<12} {}\n", m.name, m.description);
    }
    s += &match Machine::host() {
        Ok(h) => format!("  {:<12} {}\n", h.name, h.description),
        Err(e) => format!("  {:<12} this machine (unavailable here: {e})\n", "host"),
    };
    s += &format!(
        "Cost model keys (--cost KEY=NS, each 0..={}): {}\n",
        crate::sim::machine::MAX_COST_NS,
        CostModel::KEYS.join(", ")
    );
    s
}
