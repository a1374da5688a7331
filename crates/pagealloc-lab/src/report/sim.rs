//! The simulator's sections of the `report` main job: the kbuild ablation on spr-2s-224
//! beside the published table, and the batch sweep beside the published one.
//!
//! Sizes follow the job's [`Mode`]: `Full` is the spec's scale (the kbuild ablation takes
//! about half a minute here); `Quick` and `Tiny` shrink the build and the memory and say
//! so in the section text, since their numbers are not comparable with the published
//! ones.

use std::fmt::Write as _;

use indicatif::ProgressBar;
use pagealloc::Config;

use super::ReportError;
use super::{Mode, Section};
use crate::sim::calibrate::{self, PUBLISHED_KBUILD, PUBLISHED_SWEEP};
use crate::sim::{compare, Machine, SimOptions};
use crate::workload::overrides as kv;
use crate::workload::{self, Scale};

/// The simulator's sections for a report of size `mode`; `pb` shows which run is going.
///
/// # Errors
/// A failed simulation (the message has the seed and the replay command).
pub fn sections(mode: Mode, pb: &ProgressBar) -> Result<Vec<Section>, ReportError> {
    let k = kbuild(mode, pb)?;
    pb.inc(1);
    let s = sweep(mode, pb)?;
    pb.inc(1);
    Ok(vec![k, s])
}

fn kbuild(mode: Mode, pb: &ProgressBar) -> Result<Section, ReportError> {
    let spr = Machine::by_name("spr-2s-224").expect("known machine");
    let (overrides, mem_scale, configs) = match mode {
        Mode::Full => (Vec::new(), 1, PUBLISHED_KBUILD.len()),
        Mode::Quick => (kv(&[("tasks", "112")]), 4, PUBLISHED_KBUILD.len()),
        Mode::Tiny => (
            kv(&[
                ("tasks", "24"),
                ("median_pages", "256"),
                ("max_pages", "2048"),
            ]),
            64,
            3,
        ),
    };
    let mut o = SimOptions::new(spr, Config::default());
    o.mem_scale = mem_scale;
    pb.set_message("simulator: kbuild on spr-2s-224");
    let w = workload::build(
        "kbuild",
        Scale::Full,
        &calibrate::calibrated("kbuild", &overrides),
    )?;
    let cfgs: Vec<Config> = calibrate::kbuild_configs()
        .into_iter()
        .take(configs)
        .collect();
    let mut rows = compare(&*w, &o, &cfgs, &|_| {})?;
    crate::report::normalise(&mut rows);
    let intro = format!(
        "The simulator (docs/sim-cost-model.md): `make -j112` on socket 0 of spr-2s-224, \
         112 virtual CPUs, memory scale {mem_scale}, {} (divided by the memory scale; the \
         headroom model), seed {}, kbuild parameters {}. Our normalised rows first; the \
         published table beside them follows.",
        o.headroom.describe("kbuild"),
        o.seed,
        w.params()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
    );
    let close = super::published::kbuild_closeness(&rows);
    let mut after = format!(
        "Beside the published kbuild table ({}); build time = 100 × makespan ÷ base \
         makespan.\n\n{}\n{}.\n",
        super::published::KBUILD_SOURCE,
        super::published::kbuild_markdown(&rows),
        close.line()
    );
    if rows.len() == PUBLISHED_KBUILD.len() {
        let d = calibrate::kbuild_directions(&rows);
        let _ = write!(
            after,
            "\nEach step's change, ours against published:\n\n```\n{}```\n",
            calibrate::directions_text(&d)
        );
    }
    let _ = write!(
        after,
        "\n**Where it is off, and why.** The directions are the model's claim; the \
         magnitudes are not fitted beyond build time and zone lock % \
         (docs/sim-cost-model.md §4). The simulated zone lock share falls faster than the \
         published one from patch5 on, and alloc_zone from patch7 on stays 2–3× the \
         published: the simulated build is a few hundred tasks long (the real one runs \
         for minutes), so the decay never lowers `high` during it and the pagesets' \
         growth is not yet paid back. `cache miss %` is the share of page touches that \
         found the page's data out of the last-level cache: each task touches thousands \
         of pages once, and a CPU's share of the 105 MiB cache (about 240 pages) is far \
         smaller than its pageset, so a page reused from the pageset was last touched \
         long ago and is cold; it is not perf's cache-miss rate of the published runs \
         (misses over all LLC references, code and stack included).\n"
    );
    if mode != Mode::Full {
        after += "\nReduced size: not comparable with the published figures; the default \
                  suite runs the spec's scale.\n";
    }
    let closeness = Some(format!(
        "simulated kbuild on spr-2s-224{}: {}",
        if mode == Mode::Full {
            ""
        } else {
            " (reduced size)"
        },
        close.line()
    ));
    let mut columns = super::report_columns();
    columns.push("trace_hash");
    after += &super::latency_markdown(&rows);
    Ok(Section {
        id: "sim_kbuild".into(),
        title: "Simulator: kbuild ablation on spr-2s-224".into(),
        intro,
        after,
        closeness,
        rows,
        columns,
        ..Section::default()
    })
}

fn sweep(mode: Mode, pb: &ProgressBar) -> Result<Section, ReportError> {
    let machines: &[&str] = match mode {
        Mode::Tiny => &["spr-2s-224"],
        _ => &["spr-2s-224", "icx-2s-128"],
    };
    let (loops, mem_scale) = match mode {
        Mode::Full => ("2", 1),
        Mode::Quick => ("1", 16),
        Mode::Tiny => ("1", 64),
    };
    let mut rows = Vec::new();
    for &name in machines {
        pb.set_message(format!("simulator: batch sweep on {name}"));
        let m = Machine::by_name(name).expect("known machine");
        let mut o = SimOptions::new(m.clone(), Config::default());
        o.cpus = Some(1);
        o.mem_scale = mem_scale;
        let mut overrides = kv(&[("loops", loops)]);
        if mode == Mode::Tiny {
            overrides.push(("pages_per_loop".into(), "4096".into()));
        }
        let mut r = calibrate::batch_sweep(&m, &overrides, &o, &|_| {})?;
        if mode == Mode::Tiny {
            r.truncate(2);
        }
        rows.extend(r);
    }
    let intro = format!(
        "The simulator: page_fault1 on one virtual CPU (will-it-scale reports per task), \
         high = 2 × batch, `batch_scale_max=0`, {loops} loop(s), memory scale {mem_scale}. \
         Its trip latencies include function_graph's own cost, as the published ones do \
         (docs/sim-cost-model.md §4.1). Beside the published sweep ({} points; {}); batch \
         4095 has no published point:\n\n{}\n{}.",
        PUBLISHED_SWEEP.len(),
        super::published::SWEEP_SOURCE,
        super::published::sweep_markdown(&rows, None),
        super::published::sweep_line(&rows, None)
    ) + " The averages and the throughput are the calibrated figures \
         (docs/sim-cost-model.md §4.1); the p99s fall short of the published ones because \
         the model's trips of one batch vary only with the cache state of the lines they \
         touch, while the measured ones also met interrupts, other CPUs' traffic and the \
         tracer: the published p99 is 1.5–3 × its average, ours within a few % of it.";
    let closeness = Some(format!(
        "simulated batch sweep{}: {}",
        if mode == Mode::Full {
            ""
        } else {
            " (reduced size)"
        },
        super::published::sweep_line(&rows, None)
    ));
    Ok(Section {
        id: "sim_batch_sweep".into(),
        title: "Simulator: batch sweep".into(),
        intro,
        closeness,
        after: super::latency_markdown(&rows),
        rows,
        columns: vec!["machine", "batch", "pages_per_s_per_cpu", "trace_hash"],
        ..Section::default()
    })
}
