//! `pagealloc trace record` and `pagealloc trace replay` (see [`crate::trace`]).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CliError;
use crate::trace::{format, record, replay, TraceError};

/// `pagealloc trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// record or replay.
    #[command(subcommand)]
    pub command: TraceCommand,
}

/// The two halves.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Record the kernel's page allocations, frees, refills and drains on every CPU
    /// (every process) while CMD runs, with /proc/zoneinfo and the vm sysctls at the
    /// start and the end (root and tracefs; another mount point: PAGEALLOC_TRACEFS=DIR).
    /// A trace that lost an event is refused.
    Record(RecordArgs),
    /// Replay a recorded trace through pagealloc built from the trace's own zones and
    /// sysctls, and put its refill and drain trips beside the kernel's, per CPU and in
    /// total, with a verdict per line (±5 %; medians equal).
    Replay(ReplayArgs),
}

/// `pagealloc trace record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The trace file to write.
    #[arg(long, default_value = "pagealloc.trace")]
    pub out: PathBuf,
    /// Per-CPU ring buffer, KiB (enlarge it if the recorder says it lost events).
    #[arg(long = "buffer-kb", default_value_t = record::DEFAULT_BUFFER_KB)]
    pub buffer_kb: u64,
    /// Page events only (no lock contention, no sched_switch, no vmstat worker passes): a
    /// smaller file.
    #[arg(long)]
    pub pages_only: bool,
    /// Record `sched:sched_waking` too (who woke whom, onto which CPU); off by default.
    #[arg(long, conflicts_with = "pages_only")]
    pub wakeups: bool,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `pagealloc trace replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace file.
    pub file: PathBuf,
    /// pagealloc config (`preset[,key=value…]`; default: the one that fits the trace's
    /// kernel, as `twin` picks it: `linux-6.18` on 6.18.7 and later, `base` before 6.7).
    #[arg(long)]
    pub config: Option<String>,
    /// Also replay through these configs (repeatable; e.g. `--versus linux-6.12`) and
    /// print their columns beside the first: kernel, `--config`, each `--versus`.
    #[arg(long)]
    pub versus: Vec<String>,
    /// Print the whole result as one JSON object instead of the table (one line per
    /// config with `--versus`).
    #[arg(long)]
    pub json: bool,
    /// Write `replay.json` and a plot per CPU (PNG and SVG) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl From<TraceError> for CliError {
    fn from(e: TraceError) -> Self {
        CliError::with_code(e.exit_code(), e)
    }
}

/// Runs `pagealloc trace …`.
///
/// # Errors
/// One line; exit status 2 for no root/tracefs, a bad argument or an unusable file.
pub fn cmd_trace(a: &TraceArgs) -> Result<(), CliError> {
    match &a.command {
        TraceCommand::Record(r) => {
            let opts = record::RecordOptions {
                command: r.command.clone(),
                buffer_kb: r.buffer_kb,
                all_events: !r.pages_only,
                wakeups: r.wakeups,
            };
            let (h, ev) = record::record(&opts, &mut |m| eprintln!("{m}"))?;
            // Written whole or not at all: a temporary file renamed into place.
            let tmp = r.out.with_extension("trace.tmp");
            let f = std::fs::File::create(&tmp)
                .map_err(|e| CliError::run(format!("trace: {}: {e}", tmp.display())))?;
            format::write(std::io::BufWriter::new(f), &h, &ev)
                .and_then(|()| std::fs::rename(&tmp, &r.out))
                .map_err(|e| {
                    let _ = std::fs::remove_file(&tmp);
                    CliError::run(format!("trace: writing {}: {e}", r.out.display()))
                })?;
            let size = std::fs::metadata(&r.out).map_or(0, |m| m.len());
            eprintln!(
                "wrote {} ({} events, {} bytes; command exit status {:?})",
                r.out.display(),
                h.events,
                size,
                h.exit_status
            );
            Ok(())
        }
        TraceCommand::Replay(r) => {
            // Written whole or not at all (`output`): the path is checked before the replay.
            let staged = match &r.out {
                Some(d) => Some(crate::output::Staged::dir(d).map_err(CliError::usage)?),
                None => None,
            };
            let opts = replay::ReplayOptions {
                config: r.config.clone(),
                out: staged.as_ref().map(|s| s.path().to_path_buf()),
            };
            eprintln!(
                "replaying {} (config: {})",
                r.file.display(),
                r.config
                    .as_deref()
                    .unwrap_or("the one that fits the trace's kernel")
            );
            let rep = replay::replay_file(&r.file, &opts)?;
            let mut all = vec![rep];
            for v in &r.versus {
                eprintln!("replaying {} (config: {v})", r.file.display());
                let o = replay::ReplayOptions {
                    config: Some(v.clone()),
                    out: None,
                };
                all.push(replay::replay_file(&r.file, &o)?);
            }
            if let Some(s) = staged {
                s.commit_files().map_err(CliError::usage)?;
            }
            if r.json {
                for rep in &all {
                    println!(
                        "{}",
                        serde_json::to_string(rep).map_err(|e| CliError::run(e.to_string()))?
                    );
                }
            } else if all.len() == 1 {
                print!("{}", replay::text(&all[0]));
            } else {
                print!("{}", replay::text(&all[0]));
                print!("{}", replay::side_by_side(&all));
            }
            Ok(())
        }
    }
}
