//! `pagealloc trace replay`: a recorded kernel stream through pagealloc, beside the
//! kernel's own refill and drain decisions.
//!
//! # Design
//! 1. The kernel's side is read off its events ([`kernel_trips`]): a refill trip is a
//!    run of `mm_page_alloc_zone_locked` with `percpu_refill=1` on one CPU, a drain trip
//!    a run of `mm_page_pcpu_drain`; a drain that directly follows a free on its CPU is a
//!    drain on free (`free_frozen_page_commit`: count above `high` or free_high), any
//!    other one is the decay tick's or a drain of the whole CPU.
//! 2. pagealloc is built from the trace's start zoneinfo and sysctls (the twin's
//!    [`crate::twin::layout::build`]; CPU `c` is kernel CPU `c`, pfns are the kernel's),
//!    every CPU's pageset in every zone started at the kernel's `high` and count
//!    ([`Allocator::seed_pageset`]): each list holds the blocks the stream takes from it
//!    before the kernel's first refill of it (the deepest the stream takes the list below
//!    its start), the rest of the count on a list the stream does not take from; its
//!    `alloc_factor` from the kernel's first order-0 refill of it (`batch <<
//!    alloc_factor` when uncapped), its `free_count` from the kernel's first drain on a
//!    free of it, and its count from that drain too where the start snapshot missed
//!    pages the pageset took or gave without an event before the trace began
//!    (trace::start). Then each zone's free lists take the kernel's shape
//!    (`/proc/pagetypeinfo`; trace::freelists, [`Allocator::seed_free_lists`]), the
//!    blocks the trace frees without having seen them allocated (allocated before it
//!    began) held at their kernel pfns.
//! 3. Every allocation and free is replayed on its CPU in time order on a
//!    [`ManualPlatform`] clock set to the event's time. Each CPU's decay tick
//!    (`vmstat_update`) runs at the worker's passes on that CPU where the trace recorded
//!    them (`EventKind::Vmstat`); in a trace without them, every second at the phase of
//!    the kernel's first drain that followed no free (a decay's; a second after the start
//!    when there is none), waiting while the CPU is idle (`sched_switch` to pid 0: the
//!    work is deferrable). A
//!    kernel pfn maps to the frame pagealloc handed out for it; pagealloc chooses its
//!    own frames, so a block is never the kernel's pfn unless both allocators pick the
//!    same one. Each operation's trips are the difference of its CPU's counters around
//!    it; a tick's drains are one trip, as the kernel's events show 6.18.7's chunks.
//! 4. The kernel refills a list only when it is empty, and some of its allocations emit
//!    no event (`alloc_pages_bulk`): at the first event of each kernel refill run, what
//!    pagealloc's copy of that list still holds is taken off as allocations
//!    ([`Allocator::take_from_pcp_list`]; trace::untraced finds the runs and the kernel pfns
//!    left on the list, which then name the frames taken).
//!
//! # Files
//! This file builds and runs the replay; `trips` has the two sides' trips (the kernel's
//! events, pagealloc's counters), the request flags, the
//! preset for a release and the tick plan; `report` the report, its tables and files;
//! trace::untraced the kernel's lists as its events show them, trace::lists the kernel's
//! blocks still out and the pagesets' lists at the start.
//! The start state is built with trace::freelists (the zones' free lists) and
//! trace::start (`free_count`).
//!
//! What still differs from the kernel and why: tests/data/traces/README.md.

mod report;
mod trips;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pagealloc::os::zoneinfo::KernelZoneinfo;
use pagealloc::{Allocator, Config, Frame, ManualPlatform};

use super::format::{self, Event, EventKind, Header};
use super::lists::{Freed, Live};
use super::untraced;
use super::{TraceError, DEFAULT_CONFIG};
use crate::twin::layout;
use report::line;
pub use report::{side_by_side, text, write_files, Line, ReplayReport};
pub use trips::{gfp_of, kernel_trips, preset_for, Side, Trip};
use trips::{push_trips, Cause, TickPlan};

/// Relative tolerance of a verdict.
pub const TOLERANCE: f64 = 0.05;

/// Trace seconds between samples of `high`.
const SAMPLE_NS: u64 = 10_000_000;

/// Options of a replay.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// `--config` (None: the config that fits the trace's kernel, [`preset_for`]; [`DEFAULT_CONFIG`] when none does).
    pub config: Option<String>,
    /// Where to write the JSON and the plots.
    pub out: Option<PathBuf>,
}

/// Reads and replays a trace file.
///
/// # Errors
/// [`TraceError::Unsupported`] for a file that is not a usable trace (exit 2),
/// [`TraceError::Usage`] for a bad config.
pub fn replay_file(path: &Path, opts: &ReplayOptions) -> Result<ReplayReport, TraceError> {
    let (h, ev) = format::read(path).map_err(|e| TraceError::Unsupported(e.to_string()))?;
    let mut r = replay(&h, &ev, opts)?;
    r.file = path.display().to_string();
    if let Some(dir) = &opts.out {
        write_files(&r, dir).map_err(TraceError::Failed)?;
    }
    Ok(r)
}

fn pcp_of(zi: &KernelZoneinfo) -> HashMap<u32, (i64, i64)> {
    let mut m: HashMap<u32, (i64, i64)> = HashMap::new();
    for z in zi.populated() {
        for p in &z.pagesets {
            let e = m.entry(p.cpu as u32).or_default();
            e.0 += p.count;
            e.1 += p.high;
        }
    }
    m
}

/// The replay's clocks: each CPU's next decay tick, whether it is idle and whether a
/// tick waits for it to wake, and the next sample of `high` (with the samples so far).
struct Clocks {
    next_tick: Vec<u64>,
    idle: Vec<bool>,
    deferred: Vec<bool>,
    next_sample: u64,
    high: Vec<Vec<(f64, i64)>>,
}

fn pcp_cached(order: u8, thp: bool) -> bool {
    order <= 3 || (thp && order == 9)
}

/// Replays a decoded trace.
///
/// # Errors
/// See [`replay_file`].
pub fn replay(h: &Header, ev: &[Event], opts: &ReplayOptions) -> Result<ReplayReport, TraceError> {
    let zi = KernelZoneinfo::parse(&h.start.zoneinfo)
        .map_err(|e| TraceError::Unsupported(format!("the trace's start zoneinfo: {e}")))?;
    let (fits, mut preset_note) = preset_for(&h.kernel_release);
    let name = match (&opts.config, &fits) {
        (Some(c), _) => c.clone(),
        (None, Some(p)) => p.clone(),
        (None, None) => DEFAULT_CONFIG.to_string(),
    };
    if fits.is_none() {
        preset_note.push_str(&format!("; replayed through `{name}` all the same"));
    }
    let base: Config = name
        .parse()
        .map_err(|e| TraceError::Usage(format!("--config {name}: {e}")))?;
    let mut built = layout::build(&zi, &h.start.vm, &h.cpus)
        .map_err(|e| TraceError::Unsupported(e.to_string()))?;
    built.config = Config {
        min_free_kbytes: Some(h.start.vm.min_free_kbytes),
        watermark_scale_factor: h.start.vm.watermark_scale_factor,
        high_fraction: h.start.vm.percpu_pagelist_high_fraction,
        thp: h.start.vm.thp,
        ..base
    };
    built
        .config
        .validate()
        .map_err(|e| TraceError::Usage(format!("--config {name} with the trace's sysctls: {e}")))?;
    let ncpus = built.layout.cpus.len();
    if let Some(e) = ev.iter().find(|e| e.cpu as usize >= ncpus) {
        return Err(TraceError::Unsupported(format!(
            "an event on CPU {} but the trace describes {ncpus} CPUs",
            e.cpu
        )));
    }
    let clock = Arc::new(ManualPlatform::new());
    let a = Allocator::with_platform(&built.layout, built.config.clone(), clock.clone())
        .map_err(|e| TraceError::Unsupported(format!("building pagealloc from the trace: {e}")))?;
    let thp = built.config.thp;
    let mut notes = Vec::new();

    // Blocks freed before being allocated in the trace, and each list's depth: per
    // (CPU, zone, order, migratetype), the deepest the stream takes the list below
    // where it started (allocations served without a refill), counting the kernel's own
    // refills and drains and the blocks its lists lost without an event (trace::lists,
    // the reading `predict`'s simulator starts from too).
    let zone_of = |pfn: u64| a.zone_of_pfn(pagealloc::Pfn(pfn)).unwrap_or(usize::MAX);
    // The kernel's refill runs, each with the blocks its list lost without an event
    // (untraced): allocated there, so a later free of one is no block from before the
    // trace, and taken off the list's depth.
    let starts = untraced::refill_starts(ev, zone_of, |o| pcp_cached(o, thp));
    let reading = super::lists::list_events(ev, zone_of, |o| pcp_cached(o, thp), &starts);
    let pre = reading.before;
    let depth = super::lists::depths(reading.events);
    let pre_pages: u64 = pre.iter().map(|p| 1u64 << p.1).sum();
    let normal = zi
        .populated()
        .filter_map(|z| built.zone_index(z.node, &z.name))
        .max()
        .unwrap_or(0);
    // Each CPU's pagesets as the kernel's were (`Allocator::seed_pageset`): its `high`,
    // each list the blocks the stream takes from it before its first refill, and the
    // rest of the kernel's count on a list the stream never takes from (so that the
    // count that decides drains starts where the kernel's did).
    let kzone = &built.zones[normal];
    let kps = |c: usize| {
        zi.zone(kzone.0, &kzone.1)
            .and_then(|z| z.pageset(c))
            .map_or((0, 0), |p| (p.count, p.high))
    };
    let mts = [
        pagealloc::MigrateType::Unmovable,
        pagealloc::MigrateType::Movable,
        pagealloc::MigrateType::Reclaimable,
    ];
    // Each pageset's first order-0 refill in the kernel: `batch << alloc_factor` when the
    // room below `high` did not cap it, which tells the refill scale the trace began with.
    let first_refill = super::start::first_refills(ev, zone_of);
    // Each pageset's free_count, from the kernel's first drain on a free of it.
    let free_counts = super::start::free_counts(
        ev,
        zone_of,
        |o| pcp_cached(o, thp),
        |c, z| {
            a.pcp_info(c as usize, z)
                .map_or((1, 0), |i| (i.batch.max(1), i.high_min))
        },
        built.config.batch_scale_max,
    );
    let start_counts = super::start::counts(
        ev,
        zone_of,
        |o| pcp_cached(o, thp),
        |c, z| {
            let (node, name) = built.zones.get(z)?;
            let p = zi.zone(*node, name)?.pageset(c as usize)?;
            Some((p.count, p.high))
        },
    );
    for kz in zi.populated() {
        let Some(z) = built.zone_index(kz.node, &kz.name) else {
            continue;
        };
        for p in &kz.pagesets {
            let c = p.cpu;
            if c >= ncpus {
                continue;
            }
            // The count the first drain on a free says the trace began with, where it
            // is not the snapshot's (trace::start::counts).
            let pc = start_counts.get(&(c as u32, z)).copied().unwrap_or(p.count);
            if pc != p.count {
                notes.push(format!(
                    "cpu {c} zone {}: count at the start {pc}, the start zoneinfo's {} {:+} (read off the kernel's first drain on a free: pages the pageset took or gave without an event before the trace began)",
                    kz.name,
                    p.count,
                    pc - p.count
                ));
            }
            // Each list the blocks the stream takes from it before its first refill,
            // the rest of the count parked where the stream never reaches.
            let lists = depth
                .get(&(c, z))
                .map(|l| super::lists::seed_lists(pc.max(0) as u64, l))
                .unwrap_or_else(|| super::lists::seed_lists(pc.max(0) as u64, &Default::default()));
            let batch = u64::from(a.pcp_info(c, z).map_or(1, |i| i.batch.max(1) as u32));
            let alloc_factor =
                super::start::alloc_factor_of(first_refill.get(&(c as u32, z)), batch);
            a.seed_pageset(
                c,
                z,
                &pagealloc::PagesetSeed {
                    high: p.high.clamp(0, i64::from(i32::MAX)) as i32,
                    lists: &lists,
                    alloc_factor,
                    free_count: free_counts.get(&(c as u32, z)).copied().unwrap_or(0),
                },
            )
            .map_err(|e| TraceError::Failed(format!("seeding CPU {c}'s pageset: {e}")))?;
        }
    }
    // The zones' free lists as the kernel's were (trace::freelists), the blocks the trace
    // frees without allocating them held where the kernel had them.
    let spans: Vec<(u64, u64)> = built
        .layout
        .zones()
        .map(|(_, zl)| (zl.start_pfn, zl.end_pfn()))
        .collect();
    let held = super::freelists::place_held(&a, &pre, &spans, normal);
    let mut pool = held.pool;
    // Blocks the trace allocates, by kernel pfn.
    let mut map: Live<Frame> = Live::new();
    let pre_failed = held.failed;
    if held.moved > 0 {
        notes.push(format!(
            "{} blocks allocated before the trace held elsewhere in their zone than at their kernel pfn (a seeded pageset or a hole had it)",
            held.moved
        ));
    }
    let kfree = if h.start.pagetypeinfo.is_empty() {
        Default::default()
    } else {
        // A table this cannot read costs the shape, not the replay.
        super::pagetype::parse(&h.start.pagetypeinfo).unwrap_or_else(|e| {
            notes.push(format!("the trace's start {e}: free lists not shaped"));
            Default::default()
        })
    };
    for kz in zi.populated() {
        let Some(z) = built.zone_index(kz.node, &kz.name) else {
            continue;
        };
        let shape = kfree.get(&(kz.node, kz.name.clone())).map(|k| {
            let (s, note) = super::freelists::shape_of(k, kz.free);
            notes.extend(note);
            s
        });
        let hz = held.by_zone.get(&z).map_or(&[][..], Vec::as_slice);
        let note = super::freelists::seed_zone(&a, z, &kz.name, shape, kz.free, hz)
            .map_err(|e| TraceError::Failed(format!("seeding the free lists: {e}")))?;
        notes.push(note);
    }
    // Setting the zones up (filling and freeing them) left flags a drain or kswapd
    // would have cleared: the kernel's zones start above their high watermarks.
    for z in 0..a.nr_zones() {
        a.settle_zone_flags(z);
    }
    // What ALLOC_NOFRAGMENT sees in each zone, the kernel's and pagealloc's after the
    // seed (docs/mechanisms.md §11.6).
    {
        for z in 0..built.zones.len() {
            let (node, name) = &built.zones[z];
            if let Some(k) = kfree.get(&(*node, name.clone())) {
                let p = super::pagetype::of_allocator(&a, z);
                notes.push(super::pagetype::compare(k, &p, *node, name));
            }
        }
    }
    let kstart = pcp_of(&zi);
    let kend = KernelZoneinfo::parse(&h.end.zoneinfo)
        .map(|z| pcp_of(&z))
        .unwrap_or_default();
    let pcp_now = |a: &Allocator, c: usize| -> (i64, i64) {
        (0..a.nr_zones()).fold((0, 0), |acc, z| {
            let p = a.pcp_info(c, z).unwrap_or_default();
            (acc.0 + i64::from(p.count), acc.1 + i64::from(p.high))
        })
    };
    let start_pcp: Vec<(u32, i64, i64, i64, i64)> = (0..ncpus as u32)
        .filter(|c| kstart.contains_key(c))
        .map(|c| {
            let (kc, kh) = kps(c as usize);
            let p = a.pcp_info(c as usize, normal).unwrap_or_default();
            (c, kc, i64::from(p.count), kh, i64::from(p.high))
        })
        .collect();
    a.reset_counters();

    // The replay.
    let ktrips = kernel_trips(ev);
    let ticks = TickPlan::of(ev, &ktrips, ncpus);
    // A recording with the vmstat worker's passes (`EventKind::Vmstat`) says when each
    // CPU's decay ran: the replay ticks there, not on a schedule of its own.
    let passes = ev.iter().filter(|e| e.kind == EventKind::Vmstat).count();
    if passes > 0 {
        notes.push(format!(
            "decay ticks at the kernel's {passes} vmstat_update passes the trace shows"
        ));
    } else if let Some(p) = ticks.phase_ns {
        notes.push(format!(
            "decay ticks at {:.3} s past each second of the trace (the kernel's first drain not on a free)",
            p as f64 / 1e9
        ));
    }
    let mut ours: HashMap<u32, Side> = HashMap::new();
    let mut clk = Clocks {
        high: vec![Vec::new(); ncpus],
        next_tick: vec![
            if passes > 0 {
                u64::MAX
            } else {
                ticks.first_ns()
            };
            ncpus
        ],
        idle: ticks.idle_at_start.clone(),
        deferred: vec![false; ncpus],
        next_sample: 0,
    };
    let mut deferred_ticks = 0u64;
    let (mut replayed, mut interrupt_ops, mut freed_before, mut order9, mut failed) =
        (0u64, 0, 0, 0, 0);
    let mut free_high = 0u64;
    let (mut split_pages, mut realloc, mut zone_modified) = (0u64, 0u64, 0u64);
    // One CPU's decay tick (`vmstat_update`), its drain chunks one run of zone-lock work.
    let tick_one = |a: &Allocator, c: usize, nt: u64, ours: &mut HashMap<u32, Side>| {
        let before = a.cpu_counters(c).unwrap_or_default();
        a.tick(c);
        let after = a.cpu_counters(c).unwrap_or_default();
        push_trips(
            ours.entry(c as u32).or_default(),
            &before,
            &after,
            nt,
            Cause::Tick,
        );
    };
    let tick_to = |a: &Allocator, t: u64, ours: &mut HashMap<u32, Side>, clk: &mut Clocks| {
        loop {
            let (c, tt) = clk
                .next_tick
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|x| x.1)
                .unwrap_or((0, u64::MAX));
            let nt = tt.min(clk.next_sample);
            if nt > t {
                break;
            }
            clock.set_now(nt);
            if clk.next_sample <= tt {
                for (c, hs) in clk.high.iter_mut().enumerate() {
                    hs.push((nt as f64 / 1e9, pcp_now(a, c).1));
                }
                clk.next_sample += SAMPLE_NS;
            } else {
                // The vmstat work is deferrable: on an idle CPU it waits for the CPU to
                // wake (the sched_switch away from the idle task).
                if clk.idle[c] {
                    clk.deferred[c] = true;
                } else {
                    tick_one(a, c, nt, ours);
                }
                clk.next_tick[c] += 1_000_000_000;
            }
        }
        clock.set_now(t);
    };
    // Untraced allocations inferred (per CPU: blocks, pages), the frames taken for them
    // that no kernel pfn names, and the lost pfns no frame stood for.
    let mut inferred: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut spare: Vec<Frame> = Vec::new();
    let mut unpaired: std::collections::HashSet<u64> = Default::default();
    let mut unpaired_frees = 0u64;
    for (i, e) in ev.iter().enumerate() {
        if e.kind == EventKind::Vmstat && (e.cpu as usize) < ncpus {
            // `vmstat_update` on this CPU: `decay_pcp_high` on each of its pagesets.
            tick_to(&a, e.ts, &mut ours, &mut clk);
            tick_one(&a, e.cpu as usize, e.ts, &mut ours);
            continue;
        }
        let start = starts.get(&i);
        if start.is_none()
            && !matches!(
                e.kind,
                EventKind::Alloc | EventKind::Free | EventKind::Switch
            )
        {
            continue;
        }
        tick_to(&a, e.ts, &mut ours, &mut clk);
        if let Some(st) = start {
            // The kernel found this list empty: what pagealloc's copy still holds was
            // allocated without an event, before the refill.
            let (c, z, order, mt) = st.list;
            let mt = mts[mt.clamp(0, 2) as usize];
            let held = a.pcp_list_len(c as usize, z, order, mt).unwrap_or(0);
            let mut got = Vec::new();
            if held > 0 {
                a.take_from_pcp_list(c as usize, z, order, mt, held, &mut got)
                    .map_err(|err| {
                        TraceError::Failed(format!(
                            "inferring untraced allocations on CPU {c}: {err}"
                        ))
                    })?;
            }
            let n = inferred.entry(c).or_default();
            n.0 += got.len() as u64;
            n.1 += (got.len() as u64) << order;
            let mut frames = got.into_iter();
            for &p in &st.lost {
                match frames.next() {
                    Some(f) => {
                        if let Some(old) = map.insert(p, order, f) {
                            let _ = a.free_on(c as usize, old);
                            realloc += 1;
                        }
                    }
                    None => {
                        unpaired.insert(p);
                    }
                }
            }
            spare.extend(frames);
            continue;
        }
        if e.kind == EventKind::Switch {
            let c = e.cpu as usize;
            let to_idle = e.aux == 0;
            if clk.idle[c] && !to_idle && clk.deferred[c] {
                // The deferred tick runs as the CPU wakes; the next is re-armed a
                // second on (`round_jiffies_relative`: on the same phase).
                clk.deferred[c] = false;
                deferred_ticks += 1;
                tick_one(&a, c, e.ts, &mut ours);
            }
            clk.idle[c] = to_idle;
            continue;
        }
        let c = e.cpu as usize;
        replayed += 1;
        if e.in_interrupt() {
            interrupt_ops += 1;
        }
        let before = a.cpu_counters(c).unwrap_or_default();
        let is_free = e.kind == EventKind::Free;
        if is_free {
            let f = match map.free(e.pfn, e.order) {
                Freed::Whole(f) => Some(f),
                Freed::Part => {
                    split_pages += 1;
                    None
                }
                Freed::Unknown => match pool.get_mut(&(e.pfn, e.order)).and_then(Vec::pop) {
                    Some(f) => Some(f),
                    None if unpaired.remove(&e.pfn) => {
                        unpaired_frees += 1;
                        None
                    }
                    None => {
                        freed_before += 1;
                        None
                    }
                },
            };
            let Some(f) = f else { continue };
            a.free_on(c, f).map_err(|err| {
                TraceError::Failed(format!(
                    "replaying a free of pfn {:#x} on CPU {c}: {err}",
                    e.pfn
                ))
            })?;
        } else {
            if e.order == 9 {
                order9 += 1;
            }
            if e.aux & trips::GFP_ZONE_MODIFIERS != 0 {
                zone_modified += 1;
            }
            match a.alloc_on(c, e.order, gfp_of(e.aux, e.mt), None) {
                Ok(f) => {
                    if let Some(old) = map.insert(e.pfn, e.order, f) {
                        // Allocated again without a traced free (a free path without
                        // the event): keep pagealloc's books straight.
                        let _ = a.free_on(c, old);
                        realloc += 1;
                    }
                }
                Err(_) => failed += 1,
            }
        }
        let after = a.cpu_counters(c).unwrap_or_default();
        free_high += after.free_high - before.free_high;
        push_trips(
            ours.entry(e.cpu).or_default(),
            &before,
            &after,
            e.ts,
            if is_free { Cause::Free } else { Cause::Alloc },
        );
    }
    let end_ts = ev.last().map_or(0, |e| e.ts);
    tick_to(&a, end_ts, &mut ours, &mut clk);
    if deferred_ticks > 0 {
        notes.push(format!(
            "{deferred_ticks} decay ticks deferred to the end of an idle period (sched_switch)"
        ));
    }
    // Each CPU's pages on its pagesets (all zones) at the end, beside the kernel's.
    let end_pcp: Vec<(u32, i64, i64)> = (0..ncpus as u32)
        .filter_map(|c| kend.get(&c).map(|k| (c, k.0, pcp_now(&a, c as usize).0)))
        .collect();
    for (_, (_, _, f)) in map.blocks.drain() {
        let _ = a.free_on(0, f);
    }
    for (_, v) in pool.drain() {
        for f in v {
            let _ = a.free_on(0, f);
        }
    }
    for f in spare {
        let _ = a.free_on(0, f);
    }
    a.validate()
        .map_err(|e| TraceError::Failed(format!("pagealloc invariants after the replay: {e}")))?;

    let mut cpus: Vec<u32> = ktrips.keys().chain(ours.keys()).copied().collect();
    cpus.sort_unstable();
    cpus.dedup();
    let mut lines = Vec::new();
    let mut per = Vec::new();
    let empty = Side::default();
    let mut kt = Side::default();
    let mut pt = Side::default();
    for &c in &cpus {
        let k = ktrips.get(&c).unwrap_or(&empty).clone();
        let p = ours.get(&c).unwrap_or(&empty).clone();
        kt.refills.extend(k.refills.iter().copied());
        kt.drains.extend(k.drains.iter().copied());
        pt.refills.extend(p.refills.iter().copied());
        pt.drains.extend(p.drains.iter().copied());
        per.push((c, k, p));
    }
    let add = |lines: &mut Vec<Line>, scope: &str, k: &Side, p: &Side| {
        let kinds = [
            ("refill", "refilled", &k.refills, &p.refills),
            ("drain", "drained", &k.drains, &p.drains),
        ];
        for (kind, done, kv, pv) in kinds {
            let (kn, pn) = (kv.len() as f64, pv.len() as f64);
            lines.push(line(scope, &format!("{kind} trips"), kn, pn, false));
            let (ks, ps) = (Side::sum(kv) as f64, Side::sum(pv) as f64);
            lines.push(line(scope, &format!("pages {done}"), ks, ps, false));
            let (km, pm) = (Side::median(kv), Side::median(pv));
            lines.push(line(scope, &format!("{kind} median (pages)"), km, pm, true));
        }
        let on_free = |v: &[Trip]| v.iter().filter(|t| t.on_free).count() as f64;
        let (kf, pf) = (on_free(&k.drains), on_free(&p.drains));
        lines.push(line(scope, "drains on a free", kf, pf, false));
    };
    add(&mut lines, "total", &kt, &pt);
    for (c, k, p) in &per {
        add(&mut lines, &format!("cpu {c}"), k, p);
    }
    if freed_before > 0 {
        notes.push(format!("{freed_before} frees of blocks allocated before the trace that pagealloc could not pre-allocate (skipped)"));
    }
    if pre_failed > 0 {
        notes.push(format!("{pre_failed} blocks allocated before the trace found no free place in pagealloc's zone to be held at"));
    }
    if !pre.is_empty() {
        notes.push(format!(
            "{} blocks ({} pages) freed in the trace were allocated before it began: pagealloc held them before the replay",
            pre.len(),
            pre_pages
        ));
    }
    if split_pages > 0 {
        notes.push(format!("{split_pages} frees of single pages of blocks allocated whole (split_page): pagealloc frees the block with its last page"));
    }
    if unpaired_frees > 0 {
        notes.push(format!("{unpaired_frees} frees of blocks the kernel's pagesets lost without an event that pagealloc's copy of the list did not hold (skipped)"));
    }
    if zone_modified > 0 {
        notes.push(format!("{zone_modified} allocations asked for GFP_DMA or GFP_DMA32: pagealloc's requests carry no zone modifier, so they walked the whole zonelist"));
    }
    if realloc > 0 {
        notes.push(format!(
            "{realloc} pfns allocated again without a traced free in between"
        ));
    }
    if failed > 0 {
        notes.push(format!(
            "{failed} allocations failed in pagealloc (it has no reclaim)"
        ));
    }
    let tsum = |v: &[Trip]| Side::sum(v);
    Ok(ReplayReport {
        file: String::new(),
        kernel_release: h.kernel_release.clone(),
        command: h.command.clone(),
        config: built.config.to_string(),
        preset_note,
        seconds: end_ts as f64 / 1e9,
        replayed,
        refill_trips_kernel: kt.refills.len() as u64,
        refill_trips_pagealloc: pt.refills.len() as u64,
        drain_trips_kernel: kt.drains.len() as u64,
        drain_trips_pagealloc: pt.drains.len() as u64,
        pages_refilled_kernel: tsum(&kt.refills),
        pages_refilled_pagealloc: tsum(&pt.refills),
        pages_drained_kernel: tsum(&kt.drains),
        pages_drained_pagealloc: tsum(&pt.drains),
        free_high_pagealloc: free_high,
        lines,
        high_pagealloc: cpus
            .iter()
            .map(|&c| (c, clk.high[c as usize].clone()))
            .collect(),
        high_kernel: cpus
            .iter()
            .map(|&c| {
                (
                    c,
                    kstart.get(&c).map_or(0, |x| x.1),
                    kend.get(&c).map_or(0, |x| x.1),
                )
            })
            .collect(),
        cpus: per,
        interrupt_ops,
        freed_before_trace: pre.len() as u64 + freed_before,
        order9_allocs: order9,
        failed_allocs: failed,
        untraced_allocs_inferred: inferred.values().map(|x| x.0).sum(),
        untraced_pages_inferred: inferred.values().map(|x| x.1).sum(),
        untraced_inferred: {
            let mut v: Vec<(u32, u64, u64)> =
                inferred.iter().map(|(&c, &(b, p))| (c, b, p)).collect();
            v.sort_unstable();
            v
        },
        start_pcp,
        end_pcp,
        notes,
    })
}
