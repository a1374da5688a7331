//! The live-kernel twin: run a workload on this machine's kernel and on pagealloc built
//! with the same zones, and put the two pageset trajectories side by side. pagealloc runs
//! the config that models the running kernel ([`host::config_for_release`]: `linux-6.18`
//! on 6.18.7 and later, `linux-6.12` on 6.10–6.14, …) unless one is chosen.
//!
//! # Design
//! 1. [`host`]: read `/proc/zoneinfo` (parsed by [`pagealloc::os::zoneinfo`]), the
//!    `vm` sysctls and the sysfs topology, and refuse a kernel without PCP high
//!    auto-tuning (no `high_min`/`high_max`: older than 6.7).
//! 2. [`layout`]: build pagealloc's [`pagealloc::Layout`] (nodes, zones, spans, managed
//!    pages, holes) and [`pagealloc::Config`] (`min_free_kbytes`,
//!    `watermark_scale_factor`, `percpu_pagelist_high_fraction`, THP, each CPU's
//!    cache slice) from what the kernel shows.
//! 3. [`kernel`]: run the workload in forked processes pinned one per CPU (the kernel
//!    allocates the pages at each fault and frees them at unmap), sample every
//!    populated zone's pagesets every 10 ms during the run and an idle time after it,
//!    and measure each worker's rate in pages per second.
//! 4. [`model`]: drive pagealloc with the same operation sequence on a manual clock
//!    advanced at the kernel run's measured rates, ticking once per second of that
//!    clock, and sample the same quantities.
//! 5. [`compare`]: sizing, growth to `high_max`, range of `count`, settled `high`, idle
//!    decay (by steps and by seconds), each with a verdict against a stated tolerance;
//!    [`render`]: the side-by-side text, JSON and the plot.
//!
//! # What it cannot see
//! Which of a pageset's lists the pages sit on (zoneinfo shows only the total), the
//! kernel's reclaim (pagealloc has none: a zone near its watermarks behaves differently
//! once the kernel starts reclaiming page cache), page-table pages the faults allocate
//! (one order-0 unmovable page per 512 touched), and other processes' allocations on a
//! busy machine (reported as pages parked before the run and as CPU idleness).

pub mod compare;
pub mod host;
pub mod kernel;
pub mod layout;
pub mod model;
pub mod render;

use std::fmt;
use std::path::PathBuf;

use pagealloc::Config;
use serde::Serialize;

pub use compare::{Line, Verdict};

/// Sampling period of both trajectories.
pub const SAMPLE_MS: u64 = 10;

/// The workloads the twin runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TwinWorkload {
    /// Processes pinned one per CPU map a region (128 MiB), touch every page, unmap
    /// it, in a loop (will-it-scale `page_fault1`).
    PageFault1,
    /// Each CPU allocates N pages (10 000 by default) and frees them, in a loop.
    Bulk,
    /// Pairs of CPUs: one allocates (touches pages of a shared mapping), the other
    /// frees them (punches them out of the shared memory).
    Xcpu,
}

impl TwinWorkload {
    /// Every workload, in the order of `--help`.
    pub const ALL: [TwinWorkload; 3] = [Self::PageFault1, Self::Bulk, Self::Xcpu];

    /// The name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::PageFault1 => "page_fault1",
            Self::Bulk => "bulk",
            Self::Xcpu => "xcpu",
        }
    }

    /// Pages one worker allocates before freeing them, unless `--pages` says otherwise.
    pub const fn default_pages(self) -> u64 {
        match self {
            Self::PageFault1 => 32_768, // 128 MiB
            Self::Bulk => 10_000,
            Self::Xcpu => 512, // one 2 MiB chunk handed over at a time
        }
    }
}

impl std::str::FromStr for TwinWorkload {
    type Err = TwinError;
    fn from_str(s: &str) -> Result<Self, TwinError> {
        Self::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                TwinError::Usage(format!(
                    "unknown twin workload {s:?}; choose one of: page_fault1, bulk, xcpu"
                ))
            })
    }
}

impl fmt::Display for TwinWorkload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct TwinOptions {
    /// The workload.
    pub workload: TwinWorkload,
    /// CPUs to run on (kernel ids); empty: every CPU this process may use.
    pub cpus: Vec<usize>,
    /// Seconds the workload runs.
    pub seconds: f64,
    /// Seconds sampled after it, while the pagesets decay.
    pub idle_seconds: f64,
    /// Pages per worker loop (`None`: [`TwinWorkload::default_pages`]).
    pub pages: Option<u64>,
    /// Start pagealloc with the kernel's pageset state: the pages the kernel kept parked
    /// on each CPU's lists (those the workload never took: the lowest count seen during
    /// the run) and each CPU's `high` before the run.
    pub parked: bool,
    /// Start pagealloc with the kernel's free pages per zone (the rest allocated up
    /// front), rather than with all memory free.
    pub same_free: bool,
    /// Where to write the plot and JSON (`None`: nothing written).
    pub out: Option<PathBuf>,
    /// The config pagealloc runs (its sysctls are replaced by the host's); `None`: the
    /// one that models the running kernel ([`host::config_for_release`]).
    pub config: Option<Config>,
}

impl TwinOptions {
    /// Laptop-friendly defaults for `workload`: every CPU, 10 s, 30 s idle.
    pub fn new(workload: TwinWorkload) -> TwinOptions {
        TwinOptions {
            workload,
            cpus: Vec::new(),
            seconds: 10.0,
            idle_seconds: 30.0,
            pages: None,
            parked: true,
            same_free: true,
            out: None,
            config: None,
        }
    }

    /// Pages per worker loop.
    pub fn pages(&self) -> u64 {
        self.pages.unwrap_or(self.workload.default_pages())
    }
}

/// Why the twin could not run. Each is one line for the user.
#[derive(Debug)]
pub enum TwinError {
    /// The kernel has no PCP high auto-tuning, or its zoneinfo cannot be parsed: there
    /// is nothing to compare against (exit status 2).
    Unsupported(String),
    /// A file could not be read or a CPU could not be pinned (permission, sandbox).
    Denied(String),
    /// A bad argument.
    Usage(String),
    /// Something else failed during the run.
    Failed(String),
}

impl TwinError {
    /// The process exit status the CLI uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Unsupported(_) | Self::Usage(_) => 2,
            Self::Denied(_) | Self::Failed(_) => 1,
        }
    }
}

impl fmt::Display for TwinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported(s) => write!(f, "twin: unsupported kernel: {s}"),
            Self::Denied(s) => write!(f, "twin: not permitted: {s}"),
            Self::Usage(s) => write!(f, "twin: {s}"),
            Self::Failed(s) => write!(f, "twin: {s}"),
        }
    }
}

impl std::error::Error for TwinError {}

/// Everything one twin run found.
#[derive(Clone, Debug, Serialize)]
pub struct TwinReport {
    /// The workload.
    pub workload: TwinWorkload,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// The config pagealloc ran (with the host's sysctls), and why it was chosen.
    pub config: String,
    /// Why: chosen by `--config`, or the release's row of [`host::config_for_release`].
    pub config_why: String,
    /// CPUs the workload ran on.
    pub cpus: Vec<usize>,
    /// Pages per worker loop.
    pub pages: u64,
    /// The zone the workload's pages came from (`node N Name`).
    pub zone: String,
    /// What the machine was doing before the run.
    pub before: kernel::Before,
    /// Measured rates, pages per second, per CPU of the run.
    pub rates: Vec<f64>,
    /// The kernel's trajectory.
    pub kernel: Trajectory,
    /// pagealloc's trajectory.
    pub ours: Trajectory,
    /// The side-by-side lines with verdicts.
    pub lines: Vec<Line>,
    /// Notes for the reader (busy machine, parked pages, reclaim …).
    pub notes: Vec<String>,
}

/// One CPU's pageset at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pcp {
    /// Pages on the lists.
    pub count: i64,
    /// Current limit.
    pub high: i64,
}

/// The pagesets of the sampled zone for every CPU of the run, at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the workload started (negative: before it).
    pub t: f64,
    /// In the idle time after the workload.
    pub idle: bool,
    /// One per CPU of the run, in the order of [`TwinReport::cpus`].
    pub pcp: Vec<Pcp>,
    /// Pages each CPU's worker had allocated so far.
    pub pages: Vec<u64>,
}

/// A sampled run and the fixed sizing of its pagesets.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Trajectory {
    /// Per CPU of the run: (batch, high_min, high_max).
    pub sizing: Vec<(i64, i64, i64)>,
    /// Seconds the workload ran.
    pub run_seconds: f64,
    /// The samples, ascending in time.
    pub samples: Vec<Sample>,
}

/// Runs the twin: the kernel, then pagealloc, then the comparison. `progress` gets one
/// line per phase (the CLI prints them to stderr).
///
/// # Errors
/// [`TwinError`], one line each.
pub fn run(opts: &TwinOptions, progress: &mut dyn FnMut(&str)) -> Result<TwinReport, TwinError> {
    if !(opts.seconds > 0.0 && opts.seconds.is_finite()) {
        return Err(TwinError::Usage(format!(
            "--seconds must be positive, not {}",
            opts.seconds
        )));
    }
    if !(opts.idle_seconds >= 0.0 && opts.idle_seconds.is_finite()) {
        return Err(TwinError::Usage(format!(
            "--idle-seconds must be 0 or more, not {}",
            opts.idle_seconds
        )));
    }
    let max_pages = host::physical_pages();
    if opts.pages() == 0 || opts.pages() > max_pages {
        return Err(TwinError::Usage(format!(
            "--pages must be 1..={max_pages} (this machine's memory in pages), not {}",
            opts.pages()
        )));
    }
    let h = host::Host::read()?;
    let (base, why) = match &opts.config {
        Some(c) => (c.clone(), "chosen with --config".to_owned()),
        None => host::config_for_release(&h.release)
            .map(|(c, w)| (c, format!("the running kernel's: {w}")))
            .ok_or_else(|| {
                TwinError::Unsupported(format!(
                    "kernel {}: no preset models it (PCP high auto-tuning came with 6.7); \
                     choose one with --config",
                    h.release
                ))
            })?,
    };
    let cpus = host::choose_cpus(&opts.cpus, opts.workload)?;
    // Built now to fail before the run if the zones cannot be modelled; built again
    // below from the zoneinfo at the start (managed pages can change: balloons).
    layout::build(&h.zoneinfo, &h.vm, &h.cpus)?;
    let first_node = h
        .cpus
        .iter()
        .find(|c| c.cpu == cpus[0])
        .map_or(0, |c| c.node);
    progress(&format!(
        "twin {}: kernel {}, CPUs {:?}, {} s + {} s idle, {} pages per loop",
        opts.workload,
        h.release,
        cpus,
        opts.seconds,
        opts.idle_seconds,
        opts.pages()
    ));
    let krun = kernel::run(opts, &cpus, first_node, &mut *progress)?;
    let built = layout::build(&krun.start_zoneinfo, &h.vm, &h.cpus)?.with_config(base)?;
    progress(&format!(
        "driving pagealloc {} ({why}) on the same zones at the measured rates",
        built.config
    ));
    let zone = built
        .zone_index(krun.zone_node, &krun.zone_name)
        .ok_or_else(|| {
            TwinError::Failed(format!(
                "zone node {} {} is not in the layout",
                krun.zone_node, krun.zone_name
            ))
        })?;
    let input = model::ModelInput {
        workload: opts.workload,
        pages: opts.pages(),
        cpus: cpus.clone(),
        rates: krun.rates.clone(),
        run_seconds: krun.kernel.run_seconds,
        idle_seconds: opts.idle_seconds,
        zone,
        parked: if opts.parked {
            krun.parked_floor()
        } else {
            vec![0; cpus.len()]
        },
        start_high: if opts.parked {
            krun.before.high.clone()
        } else {
            vec![0; cpus.len()]
        },
        tick_phase_ms: (0..cpus.len())
            .map(|i| compare::tick_phase_ms(&krun.kernel, i))
            .collect(),
        start_free: if opts.same_free {
            Some(
                krun.start_free
                    .iter()
                    .filter_map(|(node, name, free)| {
                        built.zone_index(*node, name).map(|z| (z, *free))
                    })
                    .collect(),
            )
        } else {
            None
        },
    };
    if input.tick_phase_ms.iter().any(|&p| p > 0) {
        progress(&format!(
            "the kernel's decay ticks fell {:?} ms past each second of the run on CPUs {:?}: pagealloc ticks there too",
            input.tick_phase_ms, input.cpus
        ));
    }
    let ours = model::run(&built, &input)?;
    let sizing = compare::sizing(&krun.start_zoneinfo, &ours.allocator_sizing);
    let mut lines = sizing;
    lines.extend(compare::trajectories(&krun.kernel, &ours.trajectory));
    let mut notes = krun.notes.clone();
    if let Some(z) = krun.start_zoneinfo.zone(krun.zone_node, &krun.zone_name) {
        let high = z.high.saturating_sub(z.boost);
        // One loop of every worker would take the zone below its high watermark.
        let need = opts.pages() * cpus.len() as u64;
        if opts.same_free && z.free < high + need {
            notes.push(format!(
                "node {} {} had {} free pages at the start (watermarks min {} low {} high {}),                  fewer than the high watermark plus one loop of every worker ({need}): the                  kernel reclaims page cache to stay above its watermarks, pagealloc (started                  with the same free pages) has no reclaim, so its zone stays below high and                  its pagesets stop growing; --all-free starts pagealloc with all memory free",
                z.node,
                z.name,
                z.free,
                z.min.saturating_sub(z.boost),
                z.low.saturating_sub(z.boost),
                high
            ));
        }
    }
    notes.extend(ours.notes.iter().cloned());
    let report = TwinReport {
        workload: opts.workload,
        kernel_release: h.release.clone(),
        config: built.config.to_string(),
        config_why: why,
        cpus,
        pages: opts.pages(),
        zone: format!("node {} {}", krun.zone_node, krun.zone_name),
        before: krun.before.clone(),
        rates: krun.rates.clone(),
        kernel: krun.kernel,
        ours: ours.trajectory,
        lines,
        notes,
    };
    if let Some(dir) = &opts.out {
        render::write_files(&report, dir).map_err(TwinError::Failed)?;
    }
    Ok(report)
}
