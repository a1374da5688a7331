//! `pagealloc twin`: a workload on this machine's kernel and on pagealloc `linux-6.12`
//! with the kernel's own zones, side by side (see [`crate::twin`]).

use std::path::PathBuf;

use clap::Args;

use super::{parse_list, CliError};
use crate::twin::{self, render, TwinError, TwinOptions, TwinWorkload};

/// `pagealloc twin`.
#[derive(Debug, Args)]
pub struct TwinArgs {
    /// page_fault1 (map 128 MiB, touch every page, unmap, per CPU), bulk (allocate N
    /// pages then free them, per CPU) or xcpu (CPU pairs: one allocates, the other frees).
    pub workload: String,
    /// CPUs to run on, comma-separated kernel ids (default: every CPU this process may
    /// use; xcpu pairs them in order: 0 allocates, 1 frees, …).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Seconds the workload runs.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Seconds sampled after the run while the pagesets decay (high falls 1/8 per
    /// second: from a large high_max back to high_min takes 30 s or more).
    #[arg(long = "idle-seconds", default_value_t = 30.0)]
    pub idle_seconds: f64,
    /// Pages per loop of a worker (default: page_fault1 32768 = 128 MiB, bulk 10000,
    /// xcpu 512 per chunk handed over).
    #[arg(long)]
    pub pages: Option<u64>,
    /// Start pagealloc with all memory free (default: the kernel's free pages per zone).
    #[arg(long)]
    pub all_free: bool,
    /// Do not park on pagealloc's CPUs the pages the kernel kept on its lists and the
    /// workload never took.
    #[arg(long)]
    pub no_parked: bool,
    /// Print the whole result as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write twin_<workload>.json and one plot per CPU (PNG and SVG) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl From<TwinError> for CliError {
    fn from(e: TwinError) -> Self {
        // Unsupported kernels and bad arguments exit with status 2, the rest with 1.
        match e.exit_code() {
            2 => CliError::usage(e),
            _ => CliError::run(e),
        }
    }
}

/// Runs `pagealloc twin`.
///
/// # Errors
/// [`CliError::Usage`] (status 2) for bad arguments and kernels without PCP high
/// auto-tuning or an unparsable zoneinfo; [`CliError::Run`] for a file it may not read,
/// a CPU it may not pin to, or a failed run.
pub fn cmd_twin(a: &TwinArgs) -> Result<(), CliError> {
    let workload: TwinWorkload = a.workload.parse()?;
    let cpus = match &a.cpus {
        Some(s) => parse_list::<usize>(s, "CPU", "kernel CPU ids, e.g. 0,1")?,
        None => Vec::new(),
    };
    let opts = TwinOptions {
        workload,
        cpus,
        seconds: a.seconds,
        idle_seconds: a.idle_seconds,
        pages: a.pages,
        parked: !a.no_parked,
        same_free: !a.all_free,
        out: a.out.clone(),
    };
    let t0 = std::time::Instant::now();
    let r = twin::run(&opts, &mut |line| {
        eprintln!("[{:6.1} s] {line}", t0.elapsed().as_secs_f64());
    })?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&r).map_err(|e| CliError::run(e.to_string()))?
        );
    } else {
        print!("{}", render::text(&r));
        if let Some(dir) = &a.out {
            println!(
                "wrote {}/twin_{workload}.json and twin_{workload}_cpuN.{{png,svg}}",
                dir.display()
            );
        }
    }
    Ok(())
}
