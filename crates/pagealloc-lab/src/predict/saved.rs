//! A `predict` run kept on disk and its simulator side replayed from it: `pagealloc
//! predict W --cpus N --save DIR` writes what each kernel run's simulation started
//! from, and `pagealloc predict --from DIR [--config C] [--run K]` simulates again from
//! it, without root or a recording, and prints the same table against the saved
//! kernel figures: a kernel moment replayed under another config, or one run's
//! divergence bisected by editing its start state.
//!
//! # Format
//! A directory of JSON files, written whole or not at all ([`crate::output::Staged`]):
//! - `predict.json` ([`Manifest`]): the format's name and [`VERSION`], the workload, CPUs
//!   and size, the config the simulator ran with, the kernel's release, its figures
//!   (the medians of the runs, the time lines from the runs without the recorder), the
//!   notes of the run, the host's zones the start states number zones by, and the line
//!   transfer time measured for the run (`line_ns`, a simulator input);
//! - `run-K.json` (K = 1 ..= runs, [`SavedRun`]): that kernel run's figures (under the
//!   recorder), its start state ([`StartState`]) and the simulator's figures and trace
//!   hash from it when saved.
//!
//! A file of another version, a missing or unreadable one, or values outside what
//! `predict` itself takes are refused with one line naming the file.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::program::Size;
use super::{
    by_cpu_note, cpu_us_by_cpu, figures_of, lines_of, simulate_row, trips_of, Figures, HostNow,
    PredictOptions, Prediction,
};
use crate::sim::start::StartState;

/// The format's name in `predict.json`.
pub const FORMAT: &str = "pagealloc-predict-start";
/// The format's version: a file of another is refused.
pub const VERSION: u32 = 1;
/// The manifest's file name.
pub const MANIFEST: &str = "predict.json";

/// `predict.json`: what was run and the kernel's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The program (predict's name).
    pub workload: String,
    /// CPUs.
    pub cpus: u32,
    /// Size.
    pub size: Size,
    /// The simulator's config when saved.
    pub config: String,
    /// The recorded kernel's release.
    pub kernel_release: String,
    /// The kernel's figures as `predict` printed them (medians; times from the runs
    /// without the recorder).
    pub kernel: Figures,
    /// The saved run's notes.
    pub notes: Vec<String>,
    /// Kernel runs: `run-1.json ..= run-{runs}.json`.
    pub runs: u32,
    /// The host's zones (`kind start_pfn+pages`), whose indices the start states use.
    pub host_zones: Vec<String>,
    /// The time a line took between the program's CPUs as measured for the run and
    /// given to the simulator (ns; `None`: not measured).
    #[serde(default)]
    pub line_ns: Option<f64>,
    /// A 2 MiB clear on CPU 0 as measured for the run and given to the simulator (µs;
    /// `None`: not measured, as in sessions saved before the probe).
    #[serde(default)]
    pub clear_us: Option<f64>,
}

/// `run-K.json`: one kernel run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedRun {
    /// [`VERSION`].
    pub version: u32,
    /// The kernel's figures of this run (under the recorder).
    pub kernel: Figures,
    /// Where the simulator started.
    pub start: StartState,
    /// The simulator's figures from `start` when saved.
    pub sim: Option<Figures>,
    /// Their trace hash.
    pub trace_hash: Option<String>,
    /// The kernel run's recording (`predict --save`): written beside as `run-K.trace`
    /// (`trace record`'s format, for `trace replay` and event-by-event comparison),
    /// never read back.
    #[serde(skip)]
    pub recording: Option<std::sync::Arc<super::kernel::Recording>>,
}

/// The host's zones as [`Manifest::host_zones`] names them; empty when the host
/// machine cannot be read.
pub fn host_zones() -> Vec<String> {
    crate::sim::Machine::by_name("host")
        .ok()
        .and_then(|m| m.host)
        .map(|h| {
            h.layout
                .nodes
                .iter()
                .flat_map(|n| &n.zones)
                .map(|z| format!("{:?} {}+{}", z.kind, z.start_pfn, z.pages))
                .collect()
        })
        .unwrap_or_default()
}

/// The end of the host's highest zone, in pfns; `None` when the host machine cannot be
/// read.
fn host_pfn_end() -> Option<u64> {
    let m = crate::sim::Machine::by_name("host").ok()?;
    m.host?
        .layout
        .nodes
        .iter()
        .flat_map(|n| &n.zones)
        .map(|z| z.start_pfn + z.pages)
        .max()
}

fn run_file(k: usize) -> String {
    format!("run-{k}.json")
}

/// Writes `v` as JSON to `dir/name`: indented (`pretty`), or on one line (a run's
/// file: tens of thousands of background ops; `jq` reads and edits it).
fn write_json<T: Serialize>(dir: &Path, name: &str, v: &T, pretty: bool) -> Result<(), String> {
    let p = dir.join(name);
    let text = if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    }
    .map_err(|e| format!("{}: {e}", p.display()))?;
    std::fs::write(&p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))
}

/// Writes `m` and `runs` into `dir` (a staging directory: the caller commits it).
///
/// # Errors
/// One line naming the file that could not be written.
pub fn write(dir: &Path, m: &Manifest, runs: &[SavedRun]) -> Result<(), String> {
    for (i, r) in runs.iter().enumerate() {
        write_json(dir, &run_file(i + 1), r, false)?;
        if let Some(rec) = &r.recording {
            let p = dir.join(format!("run-{}.trace", i + 1));
            std::fs::File::create(&p)
                .and_then(|f| {
                    crate::trace::format::write(std::io::BufWriter::new(f), &rec.0, &rec.1)
                })
                .map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    write_json(dir, MANIFEST, m, true)
}

fn read_json<T: for<'de> Deserialize<'de>>(dir: &Path, name: &str) -> Result<T, String> {
    let p = dir.join(name);
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a saved predict run: {e}", p.display()))
}

/// The largest CPU count a saved run may name (the simulator's own limit is checked
/// when it runs).
const MAX_CPUS: u32 = 1024;

/// Reads a directory `write` wrote and checks it: format and version, the size within
/// what `predict` takes, every CPU and order in the start states within the run's.
///
/// # Errors
/// One line naming the file and what is wrong with it.
pub fn load(dir: &Path) -> Result<(Manifest, Vec<SavedRun>), String> {
    if !dir.is_dir() {
        return Err(format!(
            "{}: no such directory (a `predict --save` directory)",
            dir.display()
        ));
    }
    let mp = dir.join(MANIFEST);
    // The version first, so that another version's fields are not what is reported.
    let head: serde_json::Value = read_json(dir, MANIFEST)?;
    if head.get("format").and_then(|v| v.as_str()) != Some(FORMAT) {
        return Err(format!(
            "{}: not a saved predict run (no \"format\": \"{FORMAT}\")",
            mp.display()
        ));
    }
    match head.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(VERSION) => {}
        v => {
            return Err(format!(
                "{}: format version {}, this pagealloc reads version {VERSION}",
                mp.display(),
                v.map_or("missing".into(), |v| v.to_string())
            ))
        }
    }
    let m: Manifest = read_json(dir, MANIFEST)?;
    let bad = |what: String| Err(format!("{}: {what}", mp.display()));
    if super::default_size(&m.workload).is_none() {
        return bad(format!("unknown workload {:?}", m.workload));
    }
    if !(1..=MAX_CPUS).contains(&m.cpus) {
        return bad(format!("cpus {}: out of range (1 ..= {MAX_CPUS})", m.cpus));
    }
    let s = m.size;
    let streams = super::is_stream(&m.workload);
    if (!streams && !(512..=262_144).contains(&s.pages))
        || !(1..=1 << 20).contains(&s.count)
        || (streams && !(1..=1 << 20).contains(&s.extra))
        || (m.workload == "thp_mix" && (s.pages % 512 != 0 || s.extra > 1 << 24))
    {
        return bad(format!(
            "size {} pages, count {}, extra {}: outside what `predict {}` takes",
            s.pages, s.count, s.extra, m.workload
        ));
    }
    if !(1..=20).contains(&m.runs) {
        return bad(format!("runs {}: out of range (1 ..= 20)", m.runs));
    }
    let mut runs = Vec::new();
    for k in 1..=m.runs as usize {
        let name = run_file(k);
        let rp = dir.join(&name);
        let r: SavedRun = read_json(dir, &name)?;
        if r.version != VERSION {
            return Err(format!(
                "{}: format version {}, this pagealloc reads version {VERSION}",
                rp.display(),
                r.version
            ));
        }
        let st = &r.start;
        let cpu_bad = st
            .pagesets
            .iter()
            .map(|p| p.cpu)
            .chain(st.background.iter().map(|o| o.cpu))
            .find(|&c| c >= m.cpus as usize);
        if let Some(c) = cpu_bad {
            return Err(format!(
                "{}: CPU {c} in the start state, the run has {}",
                rp.display(),
                m.cpus
            ));
        }
        let order_bad = st
            .pagesets
            .iter()
            .flat_map(|p| p.taken.iter().map(|l| l.order))
            .chain(st.background.iter().map(|o| o.order))
            .find(|&o| o > pagealloc::MAX_ORDER);
        if let Some(o) = order_bad {
            return Err(format!("{}: order {o} in the start state", rp.display()));
        }
        // Blocks are placed by a search of their zone's span: no span past this host's
        // memory.
        let end = host_pfn_end();
        if let Some(&(a, b)) = st
            .zone_spans
            .iter()
            .find(|&&(a, b)| a > b || end.is_none_or(|e| b > e))
        {
            return Err(format!(
                "{}: zone span {a}..{b} outside this host's memory",
                rp.display()
            ));
        }
        runs.push(r);
    }
    Ok((m, runs))
}

/// The options a saved run was made with (no program binary: only the simulator runs).
pub fn options(m: &Manifest) -> PredictOptions {
    PredictOptions {
        workload: m.workload.clone(),
        cpus: m.cpus,
        size: m.size,
        config: Some(m.config.clone()),
        exe: std::path::PathBuf::new(),
        runs: m.runs,
    }
}

/// Simulates again from the saved start states: every run's (the medians against the
/// saved kernel medians, as `predict` printed them) or run `only`'s (1-based; against
/// that run's kernel figures, taken under the recorder, times included), with `config`
/// or the saved one. `progress` gets a line per run.
///
/// # Errors
/// One line: `only` names no run, the config or the start state does not apply, or the
/// simulation failed.
pub fn replay(
    m: &Manifest,
    runs: &[SavedRun],
    config: Option<&str>,
    only: Option<usize>,
    progress: &mut dyn FnMut(&str),
) -> Result<Prediction, String> {
    let mut opts = options(m);
    let config = config.unwrap_or(&m.config).to_owned();
    opts.config = Some(config.clone());
    let picked: Vec<(usize, &SavedRun)> = match only {
        Some(k) if k == 0 || k > runs.len() => {
            return Err(format!(
                "--run {k}: the saved run has runs 1 ..= {}",
                runs.len()
            ))
        }
        Some(k) => vec![(k, &runs[k - 1])],
        None => runs.iter().enumerate().map(|(i, r)| (i + 1, r)).collect(),
    };
    let mut notes = Vec::new();
    let here = host_zones();
    if here != m.host_zones {
        notes.push(format!(
            "saved on a host whose zones were {:?}; this one's are {here:?}: the start state's zones are taken by index",
            m.host_zones
        ));
    }
    let mut sims = Vec::new();
    let mut hash = String::new();
    let mut same = Vec::new();
    let mut by_cpu = Vec::new();
    for (k, r) in &picked {
        progress(&format!(
            "simulating run {k} of {} from its saved start state, config {config}",
            runs.len()
        ));
        let row = simulate_row(
            &opts,
            &config,
            &r.start,
            HostNow {
                line_ns: m.line_ns,
                clear_us: m.clear_us,
            },
        )
        .map_err(|e| format!("run {k}: {e}"))?;
        by_cpu.push(cpu_us_by_cpu(&opts, &row));
        let (f, h) = figures_of(&opts, &r.start, &row);
        if hash.is_empty() {
            hash.clone_from(&h);
        }
        same.push(match (&r.sim, &r.trace_hash) {
            (Some(s), Some(sh)) if *s == f && *sh == h => format!("run {k}: as saved"),
            (Some(s), sh) => format!(
                "run {k}: differs from the saved simulation (trace hash {h}, saved {}; {})",
                sh.as_deref().unwrap_or("none"),
                if *s == f {
                    "same figures"
                } else {
                    "other figures"
                }
            ),
            _ => format!("run {k}: no saved simulation"),
        });
        sims.push(f);
    }
    let kernel = match only {
        Some(_) => picked[0].1.kernel.clone(),
        None => m.kernel.clone(),
    };
    notes.push(format!(
        "replayed from the saved start states of {} (kernel {}), config {config}; {}",
        match only {
            Some(k) => format!("run {k} (kernel figures: that run's, under the recorder)"),
            None => format!("{} runs (kernel figures: as saved)", runs.len()),
        },
        m.kernel_release,
        same.join(", ")
    ));
    notes.push(format!(
        "refill trips/op, pages/refill trip, drain trips/op, pages/drain trip per run, kernel → sim: {}",
        picked
            .iter()
            .zip(&sims)
            .map(|((k, r), s)| format!("{k}: {} → {}", trips_of(&r.kernel), trips_of(s)))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    notes.extend(by_cpu_note(&opts, &by_cpu));
    let sim = Figures::median_of(&sims);
    Ok(Prediction {
        lines: lines_of(&m.workload, m.cpus, &kernel, Some(&sim)),
        kernel,
        sim: Some(sim),
        trace_hash: Some(hash),
        notes,
        runs: Vec::new(),
        config,
        kernel_release: m.kernel_release.clone(),
        line_ns: m.line_ns,
        clear_us: m.clear_us,
    })
}
