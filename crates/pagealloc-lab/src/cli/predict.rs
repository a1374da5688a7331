//! `pagealloc predict`: a workload as a real program on the live kernel (recorded) and
//! in the simulator on `host`, side by side (see [`crate::predict`]); and the hidden
//! `pagealloc predict-program` that the recorder runs.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::predict::{self, program, saved, PredictOptions};

/// `pagealloc predict`.
#[derive(Debug, Args)]
pub struct PredictArgs {
    /// page_fault1 (each CPU maps 16 MiB, writes every page, unmaps; 16 loops),
    /// parallel_free (each CPU faults in 256 MiB, then one munmap, timed), unix_stream
    /// (AF_UNIX stream, 4096 writes of 64 KiB, writer CPU 0, reader CPU 1), tcp_stream
    /// (TCP over loopback, 16 384 writes of 16 KiB) or thp_mix (after 64 MiB of order-0
    /// faults per CPU, half the CPUs fault THPs (MADV_HUGEPAGE), the others 4 KiB
    /// pages; at one CPU, THPs). Not with --from.
    #[arg(required_unless_present = "from", conflicts_with = "from")]
    pub workload: Option<String>,
    /// CPUs (the first N): 1 or 2 and up to this machine's count.
    #[arg(long, default_value_t = 2, value_parser = crate::limits::cpus)]
    pub cpus: u32,
    /// The simulator's config (default: the preset that models the running kernel, as
    /// `trace replay` picks it).
    #[arg(long)]
    pub config: Option<String>,
    /// Pages per loop (page_fault1, thp_mix) or per CPU's region (parallel_free),
    /// 512 ..= 262 144, a multiple of 512 for thp_mix.
    #[arg(long)]
    pub pages: Option<u64>,
    /// Loops per CPU (faulting programs) or messages (streams), 1 ..= 1 048 576.
    #[arg(long)]
    pub count: Option<u64>,
    /// Bytes per message (streams), 1 ..= 1 048 576.
    #[arg(long)]
    pub bytes: Option<u64>,
    /// Kernel runs, 1 ..= 20: each kernel figure is their median (the simulator is
    /// deterministic and runs once).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// One JSON object per compared line (workload, cpus, metric, kernel, sim, verdict).
    #[arg(long)]
    pub json: bool,
    /// Also keep each kernel run's start state, the kernel's figures and the
    /// simulator's options in directory DIR (JSON; written whole or not at all, a
    /// directory there before is replaced), for `--from`, and each run's recording
    /// (run-K.trace, for `trace replay`).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
    /// Run only the simulator side again, from the start states `--save` kept in DIR
    /// (no root, no kernel), and print the table against the saved kernel figures.
    /// Takes --config (default: the saved one), --run, --json.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["cpus", "pages", "count", "bytes", "runs", "save"])]
    pub from: Option<PathBuf>,
    /// With --from: replay only kernel run K (1-based) against that run's own kernel
    /// figures (taken under the recorder, times included).
    #[arg(long, value_name = "K")]
    pub run: Option<usize>,
}

/// `pagealloc predict-program` (hidden): one real program, for the recorder.
#[derive(Debug, Args)]
pub struct ProgramArgs {
    /// The program.
    pub workload: String,
    /// CPUs.
    #[arg(long)]
    pub cpus: u32,
    /// Pages.
    #[arg(long)]
    pub pages: u64,
    /// Loops or messages.
    #[arg(long)]
    pub count: u64,
    /// Bytes per message, or order-0 pages broken first.
    #[arg(long)]
    pub extra: u64,
    /// Where the result goes (JSON).
    #[arg(long)]
    pub result: PathBuf,
}

fn bounded(what: &str, v: Option<u64>, lo: u64, hi: u64) -> Result<Option<u64>, CliError> {
    match v {
        Some(x) if !(lo..=hi).contains(&x) => Err(CliError::usage(format!(
            "--{what} {x}: out of range ({lo} ..= {hi})"
        ))),
        _ => Ok(v),
    }
}

/// Runs `pagealloc predict`.
///
/// # Errors
/// One line: exit status 2 for bad input or no root/tracefs, 1 for a failed run.
pub fn cmd_predict(a: &PredictArgs) -> Result<(), CliError> {
    if let Some(dir) = &a.from {
        return cmd_replay(a, dir);
    }
    if a.run.is_some() {
        return Err(CliError::usage("--run: only with --from"));
    }
    let workload = a.workload.clone().unwrap_or_default();
    let names: Vec<&str> = predict::WORKLOADS.iter().map(|w| w.0).collect();
    let mut size = predict::default_size(&workload).ok_or_else(|| {
        CliError::usage(format!(
            "unknown workload {workload:?}: one of {}",
            names.join(", ")
        ))
    })?;
    if let Some(p) = bounded("pages", a.pages, 512, 262_144)? {
        if workload == "thp_mix" && p % 512 != 0 {
            return Err(CliError::usage(format!(
                "--pages {p}: thp_mix needs a multiple of 512"
            )));
        }
        size.pages = p;
    }
    if let Some(c) = bounded("count", a.count, 1, 1 << 20)? {
        size.count = c;
    }
    if let Some(b) = bounded("bytes", a.bytes, 1, 1 << 20)? {
        if !workload.ends_with("_stream") {
            return Err(CliError::usage("--bytes: only the streams take it"));
        }
        size.extra = b;
    }
    let online = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    if a.cpus > online {
        return Err(CliError::usage(format!(
            "--cpus {}: this machine has CPUs 1..={online}",
            a.cpus
        )));
    }
    if let Some(c) = &a.config {
        super::config_of(c)?;
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::run(format!("predict: the binary's own path: {e}")))?;
    // A bad --save path fails before the runs, not after.
    let staged = match &a.save {
        Some(d) => Some(crate::output::Staged::dir(d).map_err(CliError::usage)?),
        None => None,
    };
    predict::kernel::KEEP_RECORDINGS.store(staged.is_some(), std::sync::atomic::Ordering::Relaxed);
    let opts = PredictOptions {
        workload,
        cpus: a.cpus,
        size,
        config: a.config.clone(),
        exe,
        runs: a.runs,
    };
    let p = predict::predict(&opts, &mut |m| eprintln!("{m}"))?;
    if let Some(st) = staged {
        let m = saved::Manifest {
            format: saved::FORMAT.into(),
            version: saved::VERSION,
            workload: opts.workload.clone(),
            cpus: opts.cpus,
            size: opts.size,
            config: p.config.clone(),
            kernel_release: p.kernel_release.clone(),
            kernel: p.kernel.clone(),
            notes: p.notes.clone(),
            runs: p.runs.len() as u32,
            host_zones: saved::host_zones(),
            line_ns: p.line_ns,
            clear_us: p.clear_us,
        };
        saved::write(st.path(), &m, &p.runs).map_err(CliError::run)?;
        st.commit_dir().map_err(CliError::run)?;
    }
    print_prediction(a, &opts, &p)
}

/// Prints `p` as the table or, with `--json`, one object per line.
fn print_prediction(
    a: &PredictArgs,
    opts: &PredictOptions,
    p: &predict::Prediction,
) -> Result<(), CliError> {
    if a.json {
        let mut out = String::new();
        for l in &p.lines {
            out.push_str(&serde_json::to_string(l).map_err(CliError::run)?);
            out.push('\n');
        }
        print!("{out}");
    } else {
        print!("{}", predict::text(opts, p));
    }
    Ok(())
}

/// Runs `pagealloc predict --from DIR`: the simulator side again from a saved run.
fn cmd_replay(a: &PredictArgs, dir: &std::path::Path) -> Result<(), CliError> {
    let (m, runs) = saved::load(dir).map_err(CliError::usage)?;
    if let Some(c) = &a.config {
        super::config_of(c)?;
    }
    let mut opts = saved::options(&m);
    let p = saved::replay(&m, &runs, a.config.as_deref(), a.run, &mut |m| {
        eprintln!("{m}");
    })
    .map_err(|e| {
        if e.starts_with("--run") {
            CliError::usage(e)
        } else {
            CliError::run(e)
        }
    })?;
    opts.config = Some(p.config.clone());
    print_prediction(a, &opts, &p)
}

/// Runs `pagealloc predict-program`.
///
/// # Errors
/// One line, exit status 1.
pub fn cmd_program(a: &ProgramArgs) -> Result<(), CliError> {
    let s = program::Size {
        pages: a.pages,
        count: a.count,
        extra: a.extra,
    };
    program::run(&a.workload, a.cpus, s, &a.result).map_err(CliError::run)
}
