//! pagealloc's side of the twin: the same operation sequence on the kernel's zones, on
//! a manual clock advanced at the kernel run's measured rates.
//!
//! # Design
//! The allocator runs in this thread on a [`ManualPlatform`]. Virtual time advances in
//! steps of [`SAMPLE_MS`]; in each step every worker (a CPU of `page_fault1`/`bulk`, a
//! pair of `xcpu`) performs the operations its kernel twin managed in that time: a page
//! the kernel faulted in and unmapped at `r` pages per second is one allocation and one
//! free, each charged `1 / (2r)` s. Workers are interleaved in slices of [`SLICE`]
//! operations, as concurrent CPUs would be. Once per second of virtual time every CPU
//! ticks ([`Allocator::tick`], the `vmstat_update` → `decay_pcp_high` stand-in), at the
//! phase within the second at which the kernel's tick was seen firing on that CPU; the
//! pagesets are sampled after each step. When the run time is over each worker frees
//! what it holds (the last unmap) and only the ticks go on.
//!
//! Before the run the allocator can be brought to the kernel's state: the same free
//! pages per zone (the rest allocated up front in blocks of order 10 and 4, which
//! bypass the pagesets and keep the pageblocks movable), then the pages the kernel kept
//! parked on each CPU (allocated as unmovable on that CPU and freed there, so they sit
//! on a list the movable workload never takes from) and each CPU's `high` (raised by
//! refills as the kernel's was).

use std::sync::Arc;

use pagealloc::{Allocator, Frame, Gfp, ManualPlatform, PcpInfo, ZoneInfo};

use super::layout::BuiltLayout;
use super::{Pcp, Sample, Trajectory, TwinError, TwinWorkload, SAMPLE_MS};

/// Operations one worker performs before the next one's turn.
pub const SLICE: u64 = 64;

/// What to drive.
#[derive(Clone, Debug)]
pub struct ModelInput {
    /// The workload.
    pub workload: TwinWorkload,
    /// Pages per worker loop (xcpu: per chunk handed over).
    pub pages: u64,
    /// Kernel CPU ids of the run.
    pub cpus: Vec<usize>,
    /// Pages per second, per CPU of the run (xcpu: the pair's rate on both CPUs).
    pub rates: Vec<f64>,
    /// Seconds of the run.
    pub run_seconds: f64,
    /// Seconds of idle time after it.
    pub idle_seconds: f64,
    /// The sampled zone (allocator index).
    pub zone: usize,
    /// Pages to park on each CPU of the run before it starts.
    pub parked: Vec<u64>,
    /// `high` each CPU of the run should start with (the kernel's before the run; 0:
    /// leave it at high_min).
    pub start_high: Vec<i64>,
    /// Free pages to start with, per allocator zone index (`None`: all free).
    pub start_free: Option<Vec<(usize, u64)>>,
    /// Per CPU of the run: ms past each whole second at which its tick fires (the
    /// kernel's phase, see [`super::compare::tick_phase_ms`]); other CPUs tick at 0.
    pub tick_phase_ms: Vec<u64>,
}

/// One zone's sizing as pagealloc computed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneSizing {
    /// Kernel node id.
    pub node: usize,
    /// Zone name.
    pub name: String,
    /// min, low, high watermarks.
    pub wmark: [u64; 3],
    /// Per CPU of the layout: (cpu, batch, high_min, high_max).
    pub pcp: Vec<(usize, i64, i64, i64)>,
    /// `vm.watermark_boost_factor` of the config it was built with (the kernel's
    /// default, 15000, unless the config says otherwise).
    pub boost_factor: u64,
}

/// pagealloc's run.
#[derive(Clone, Debug)]
pub struct ModelRun {
    /// The trajectory of the sampled zone.
    pub trajectory: Trajectory,
    /// Every zone's sizing right after the build.
    pub allocator_sizing: Vec<ZoneSizing>,
    /// Things the reader should know.
    pub notes: Vec<String>,
}

/// The pageset of `cpu` in `zone`, indices of the layout the allocator was built from
/// (so always present; an empty one otherwise).
fn pcp_info(a: &Allocator, cpu: usize, zone: usize) -> PcpInfo {
    a.pcp_info(cpu, zone).unwrap_or_default()
}

/// The state of `zone`, an index of the allocator's layout.
fn zone_info(a: &Allocator, zone: usize) -> ZoneInfo {
    a.zone_info(zone).unwrap_or_default()
}

/// Every zone's sizing of a freshly built allocator.
pub fn sizing(a: &Allocator, b: &BuiltLayout) -> Vec<ZoneSizing> {
    (0..a.nr_zones())
        .map(|z| {
            let zi = zone_info(a, z);
            ZoneSizing {
                node: b.zones[z].0,
                name: b.zones[z].1.clone(),
                wmark: [zi.wmark[0], zi.wmark[1], zi.wmark[2]],
                boost_factor: u64::from(b.config.watermark_boost_factor),
                pcp: (0..a.nr_cpus())
                    .map(|c| {
                        let p = pcp_info(a, c, z);
                        (
                            c,
                            i64::from(p.batch),
                            i64::from(p.high_min),
                            i64::from(p.high_max),
                        )
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Brings every zone to its target free pages (within 16 pages) by allocating the rest
/// as movable blocks that bypass the pagesets. Returns the blocks held and the zones
/// whose target was below what allocation can reach (the low watermark).
pub(crate) fn occupy(a: &Allocator, targets: &[(usize, u64)]) -> (Vec<Frame>, Vec<usize>) {
    let gfp = Gfp::MOVABLE; // no KSWAPD: filling memory must not start the kswapd model
    let mut held: Vec<(usize, Frame)> = Vec::new();
    for order in [10u8, 4] {
        while let Ok(f) = a.alloc_on(0, order, gfp, None) {
            let z = a.zone_of_pfn(f.pfn).unwrap_or(usize::MAX);
            held.push((z, f));
        }
    }
    let mut short = Vec::new();
    for &(z, target) in targets {
        let mut free = zone_info(a, z).free;
        if free > target {
            short.push(z);
            continue;
        }
        for order in [10u8, 4] {
            let size = 1u64 << order;
            let mut i = 0;
            while i < held.len() {
                if held[i].0 == z && held[i].1.order == order && free + size <= target {
                    let (_, f) = held.swap_remove(i);
                    let _ = a.free_on(0, f);
                    free += size;
                } else {
                    i += 1;
                }
            }
        }
    }
    (held.into_iter().map(|(_, f)| f).collect(), short)
}

/// A worker's state: what it holds and whether it is allocating or freeing.
struct Worker {
    /// Allocating CPU.
    acpu: usize,
    /// Freeing CPU (the same but for xcpu).
    fcpu: usize,
    /// Index of the allocating CPU in the run's CPU list.
    slot: usize,
    rate: f64,
    held: Vec<Frame>,
    freeing: bool,
    budget: f64,
    allocated: u64,
}

/// Allocate up to `n` order-0 pages of type `gfp` on CPU `c` (fewer if the zone runs
/// out) and free them all there: the pages end on the CPU's pageset and, through the
/// refills, raise its `high` as the kernel's did. `what` names the step in an error.
pub(crate) fn cycle_pages(
    a: &Allocator,
    c: usize,
    gfp: Gfp,
    n: i64,
    what: impl Fn() -> String,
) -> Result<(), TwinError> {
    let mut got = Vec::new();
    for _ in 0..n.max(0) {
        match a.alloc_on(c, 0, gfp, None) {
            Ok(f) => got.push(f),
            Err(_) => break,
        }
    }
    for f in got {
        a.free_on(c, f)
            .map_err(|e| TwinError::Failed(format!("{}: {e}", what())))?;
    }
    Ok(())
}

/// Drives pagealloc.
///
/// # Errors
/// [`TwinError::Failed`] when the allocator cannot be built or a free fails.
pub fn run(b: &BuiltLayout, inp: &ModelInput) -> Result<ModelRun, TwinError> {
    let clock = Arc::new(ManualPlatform::new());
    let a = Allocator::with_platform(&b.layout, b.config.clone(), clock.clone())
        .map_err(|e| TwinError::Failed(format!("building pagealloc: {e}")))?;
    let a = &a;
    let allocator_sizing = sizing(a, b);
    let mut notes = Vec::new();
    let mut occupied = Vec::new();
    if let Some(t) = &inp.start_free {
        // The parked pages are taken from the sampled zone's free pages below.
        let parked: u64 = inp.parked.iter().sum();
        let t: Vec<(usize, u64)> = t
            .iter()
            .map(|&(z, f)| (z, if z == inp.zone { f + parked } else { f }))
            .collect();
        let (held, short) = occupy(a, &t);
        occupied = held;
        for z in short {
            notes.push(format!(
                "pagealloc: zone {} {} starts with {} free pages, above the kernel's (its low watermark stops the fill)",
                b.zones[z].0,
                b.zones[z].1,
                zone_info(a, z).free
            ));
        }
    }
    let n = inp.cpus.len();
    // Raise each CPU's high to the kernel's as the kernel raised it: refills (each
    // allocation that empties the list raises high by the refill) followed by frees,
    // then a drain, which leaves high alone. A zone flagged below its high watermark
    // by the fill stops refills from raising high until a drain clears the flag,
    // hence a few rounds.
    for (i, &c) in inp.cpus.iter().enumerate() {
        // Parking (below) raises high again by about the pages it parks.
        let parked = i64::try_from(inp.parked.get(i).copied().unwrap_or(0)).unwrap_or(0);
        let target = inp.start_high.get(i).copied().unwrap_or(0) - parked;
        for _ in 0..3 {
            let high = i64::from(pcp_info(a, c, inp.zone).high);
            if high >= target {
                break;
            }
            cycle_pages(a, c, Gfp::USER, target - high, || {
                format!("warming CPU {c}'s pageset")
            })?;
            a.drain_cpu(c);
        }
    }
    for (i, &c) in inp.cpus.iter().enumerate() {
        let k = i64::try_from(inp.parked.get(i).copied().unwrap_or(0)).unwrap_or(i64::MAX);
        // A zone flagged below its high watermark (by the fill above) drains every
        // free; the first round's drains clear the flag once the zone is above it,
        // so a second round parks the rest.
        for _ in 0..3 {
            let have = i64::from(pcp_info(a, c, inp.zone).count);
            if have >= k {
                break;
            }
            cycle_pages(a, c, Gfp::KERNEL, k - have, || {
                format!("parking a page on CPU {c}")
            })?;
        }
    }
    let start_high: Vec<i64> = inp
        .cpus
        .iter()
        .map(|&c| i64::from(pcp_info(a, c, inp.zone).high))
        .collect();
    let parked_count: Vec<i64> = inp
        .cpus
        .iter()
        .map(|&c| i64::from(pcp_info(a, c, inp.zone).count))
        .collect();
    let mut workers: Vec<Worker> = match inp.workload {
        TwinWorkload::Xcpu => (0..n / 2)
            .map(|p| Worker {
                acpu: inp.cpus[2 * p],
                fcpu: inp.cpus[2 * p + 1],
                slot: 2 * p,
                rate: inp.rates[2 * p],
                held: Vec::new(),
                freeing: false,
                budget: 0.0,
                allocated: 0,
            })
            .collect(),
        _ => (0..n)
            .map(|i| Worker {
                acpu: inp.cpus[i],
                fcpu: inp.cpus[i],
                slot: i,
                rate: inp.rates[i],
                held: Vec::new(),
                freeing: false,
                budget: 0.0,
                allocated: 0,
            })
            .collect(),
    };
    let dt = SAMPLE_MS as f64 / 1000.0;
    let steps_run = (inp.run_seconds / dt).round() as u64;
    let steps_all = steps_run + (inp.idle_seconds / dt).round() as u64;
    let step_ns = SAMPLE_MS * 1_000_000;
    let mut samples = Vec::with_capacity(steps_all as usize);
    let mut failed_allocs = 0u64;
    let sample = |a: &Allocator, t: f64, idle: bool, ws: &[Worker]| {
        let mut pages = vec![0; n];
        for w in ws {
            pages[w.slot] = w.allocated;
            if w.fcpu != w.acpu {
                pages[w.slot + 1] = w.allocated - w.held.len() as u64;
            }
        }
        Sample {
            t,
            idle,
            pcp: inp
                .cpus
                .iter()
                .map(|&c| {
                    let p = pcp_info(a, c, inp.zone);
                    Pcp {
                        count: i64::from(p.count),
                        high: i64::from(p.high),
                    }
                })
                .collect(),
            pages,
        }
    };
    samples.push(sample(a, 0.0, false, &workers));
    for step in 1..=steps_all {
        let running = step <= steps_run;
        if running {
            for w in workers.iter_mut() {
                w.budget += 2.0 * w.rate * dt;
            }
            loop {
                let mut any = false;
                for w in workers.iter_mut() {
                    let mut k = 0;
                    while k < SLICE && w.budget >= 1.0 {
                        w.budget -= 1.0;
                        k += 1;
                        if w.freeing {
                            match w.held.pop() {
                                Some(f) => a.free_on(w.fcpu, f).map_err(|e| {
                                    TwinError::Failed(format!("free on CPU {}: {e}", w.fcpu))
                                })?,
                                None => {
                                    w.freeing = false;
                                    w.budget += 1.0;
                                    k -= 1;
                                }
                            }
                        } else if w.held.len() as u64 >= inp.pages {
                            w.freeing = true;
                            w.budget += 1.0;
                            k -= 1;
                        } else {
                            match a.alloc_on(w.acpu, 0, Gfp::USER, None) {
                                Ok(f) => {
                                    w.held.push(f);
                                    w.allocated += 1;
                                }
                                Err(_) => {
                                    failed_allocs += 1;
                                    w.freeing = true;
                                }
                            }
                        }
                    }
                    any |= w.budget >= 1.0;
                }
                if !any {
                    break;
                }
            }
        } else if step == steps_run + 1 {
            // The stop: each worker's last unmap.
            for w in workers.iter_mut() {
                for f in w.held.drain(..) {
                    a.free_on(w.fcpu, f)
                        .map_err(|e| TwinError::Failed(format!("free on CPU {}: {e}", w.fcpu)))?;
                }
            }
        }
        clock.advance(step_ns);
        let now_ms = step * SAMPLE_MS;
        for c in 0..a.nr_cpus() {
            let phase = inp
                .cpus
                .iter()
                .position(|&x| x == c)
                .and_then(|i| inp.tick_phase_ms.get(i))
                .copied()
                .unwrap_or(0);
            if now_ms >= phase && (now_ms - phase) % 1000 == 0 && now_ms > 0 {
                a.tick(c);
            }
        }
        samples.push(sample(a, step as f64 * dt, !running, &workers));
    }
    if failed_allocs > 0 {
        notes.push(format!(
            "pagealloc: {failed_allocs} allocations failed (out of memory: the worker unmapped early)"
        ));
    }
    for f in occupied {
        let _ = a.free_on(0, f);
    }
    a.validate()
        .map_err(|e| TwinError::Failed(format!("pagealloc invariants after the twin run: {e}")))?;
    if parked_count.iter().any(|&c| c > 0) || inp.start_high.iter().any(|&h| h > 0) {
        notes.push(format!(
            "pagealloc started with {parked_count:?} pages parked on the run's CPUs and high {start_high:?}"
        ));
    }
    Ok(ModelRun {
        trajectory: Trajectory {
            sizing: inp
                .cpus
                .iter()
                .map(|&c| {
                    let p = pcp_info(a, c, inp.zone);
                    (
                        i64::from(p.batch),
                        i64::from(p.high_min),
                        i64::from(p.high_max),
                    )
                })
                .collect(),
            run_seconds: steps_run as f64 * dt,
            samples,
        },
        allocator_sizing,
        notes,
    })
}
