//! `pagealloc twin`: a workload on this machine's kernel and on pagealloc (the config
//! that models the running kernel, or `--config`) with the kernel's own zones, side by
//! side (see [`crate::twin`]).

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
    /// CPUs: a bare number is a *count* N (the first N CPUs this process may use, as
    /// `--cpus` of the other commands); a comma or a range makes a list of kernel CPU
    /// *ids* (`0,2`, `2-3`, `5,`). So `--cpus 1` is one CPU (the first allowed) and
    /// `--cpus 1,` is CPU id 1. Default: every CPU this process may use. xcpu pairs them
    /// in order: the first allocates, the second frees, …
    #[arg(long)]
    pub cpus: Option<String>,
    /// Seconds the workload runs (above 0, at most 1e8).
    #[arg(long, default_value_t = 10.0, value_parser = crate::limits::seconds)]
    pub seconds: f64,
    /// Seconds sampled after the run while the pagesets decay (high falls 1/8 per
    /// second: from a large high_max back to high_min takes 30 s or more); 0..=1e8.
    #[arg(long = "idle-seconds", default_value_t = 30.0, value_parser = crate::limits::seconds)]
    pub idle_seconds: f64,
    /// Pages per loop of a worker, 1 up to this machine's memory in pages (default:
    /// page_fault1 32768 = 128 MiB, bulk 10000, xcpu 512 per chunk handed over).
    #[arg(long)]
    pub pages: Option<u64>,
    /// Start pagealloc with all memory free (default: the kernel's free pages per zone).
    #[arg(long)]
    pub all_free: bool,
    /// Start pagealloc's pagesets empty at high_min, rather than with the kernel's high
    /// and the pages it kept on its lists that the workload never took.
    #[arg(long)]
    pub no_parked: bool,
    /// pagealloc's config (a preset with `,key=value` overrides; the host's vm sysctls
    /// replace its own). Default: the one that models the running kernel — `linux-6.18`
    /// on 6.18.7 and later, `linux-6.18,decay_batched=off` on 6.16 – 6.18.6,
    /// `linux-6.18,free_high_min_count=off,decay_batched=off` on 6.15, `linux-6.12` on
    /// 6.10 – 6.14, `patch10` on 6.7 – 6.9.
    #[arg(long)]
    pub config: Option<String>,
    /// Print the whole result as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write `twin_<workload>.json` and one plot per CPU (PNG and SVG) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl From<TwinError> for CliError {
    fn from(e: TwinError) -> Self {
        // Unsupported kernels and bad arguments exit with status 2, the rest with 1.
        CliError::with_code(e.exit_code(), e)
    }
}

/// `--cpus`: a count, or CPU ids with a comma or a range.
fn cpus_of(s: &str) -> Result<Vec<usize>, CliError> {
    const VALID: &str = "a count (2) or CPU ids (0,1 or 2-3 or 5,)";
    if !s.contains([',', '-']) {
        let n: usize = s
            .trim()
            .parse()
            .map_err(|_| CliError::usage(format!("invalid --cpus `{s}`; valid: {VALID}")))?;
        let allowed = twin::host::allowed_cpus();
        if n == 0 || n > allowed.len() {
            return Err(CliError::usage(format!(
                "--cpus {n}: this process may use {} CPUs ({allowed:?})",
                allowed.len()
            )));
        }
        return Ok(allowed[..n].to_vec());
    }
    // CPU ids name this machine's CPUs: a range past them is refused before it is
    // expanded (an id list is never longer than the machine).
    let ncpus = twin::host::configured_cpus();
    let mut ids = Vec::new();
    for item in parse_list::<String>(s, "CPU", VALID)? {
        let bad = || CliError::usage(format!("invalid CPU `{item}` in --cpus; valid: {VALID}"));
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b {
                    return Err(bad());
                }
                if b >= ncpus {
                    return Err(CliError::usage(format!(
                        "--cpus {item}: this machine has CPUs 0..={}",
                        ncpus - 1
                    )));
                }
                ids.extend(a..=b);
            }
            None => {
                let id: usize = item.parse().map_err(|_| bad())?;
                if id >= ncpus {
                    return Err(CliError::usage(format!(
                        "--cpus {item}: this machine has CPUs 0..={}",
                        ncpus - 1
                    )));
                }
                ids.push(id);
            }
        }
        if ids.len() > ncpus {
            return Err(CliError::usage(format!(
                "--cpus {s}: more CPUs than this machine's {ncpus}"
            )));
        }
    }
    Ok(ids)
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
        Some(s) => cpus_of(s)?,
        None => Vec::new(),
    };
    // Written whole or not at all (`output`): the path is checked before the run.
    let staged = match &a.out {
        Some(d) => Some(crate::output::Staged::dir(d).map_err(CliError::usage)?),
        None => None,
    };
    let opts = TwinOptions {
        workload,
        cpus,
        seconds: a.seconds,
        idle_seconds: a.idle_seconds,
        pages: a.pages,
        parked: !a.no_parked,
        same_free: !a.all_free,
        out: staged.as_ref().map(|s| s.path().to_path_buf()),
        config: a
            .config
            .as_deref()
            .map(crate::policies::config)
            .transpose()
            .map_err(|e| CliError::usage(format!("--config: {e}")))?,
    };
    let t0 = std::time::Instant::now();
    let r = twin::run(&opts, &mut |line| {
        eprintln!("[{:6.1} s] {line}", t0.elapsed().as_secs_f64());
    })?;
    if let Some(s) = staged {
        s.commit_files().map_err(CliError::usage)?;
    }
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
