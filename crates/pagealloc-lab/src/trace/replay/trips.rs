//! The two sides' trips: the kernel's read off its events ([`kernel_trips`]), pagealloc's
//! off its counters around each operation ([`push_trips`]), the request flags
//! ([`gfp_of`]), the preset that fits a release
//! ([`preset_for`]) and when each CPU's decay tick runs ([`TickPlan`]).

use std::collections::HashMap;

use pagealloc::{Counters, Gfp};
use serde::Serialize;

use super::super::format::{Event, EventKind};

/// One trip: when, how many pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Trip {
    /// Seconds into the trace.
    pub t: f64,
    /// Pages moved.
    pub pages: u64,
    /// A drain on a free (not the tick's or a whole-CPU drain).
    pub on_free: bool,
}

/// Trips of one side on one CPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Side {
    /// Refill trips.
    pub refills: Vec<Trip>,
    /// Drain trips.
    pub drains: Vec<Trip>,
}

impl Side {
    pub(super) fn sum(v: &[Trip]) -> u64 {
        v.iter().map(|t| t.pages).sum()
    }
    pub(super) fn median(v: &[Trip]) -> f64 {
        let mut p: Vec<u64> = v.iter().map(|t| t.pages).collect();
        if p.is_empty() {
            return 0.0;
        }
        p.sort_unstable();
        let n = p.len();
        if n % 2 == 1 {
            p[n / 2] as f64
        } else {
            (p[n / 2 - 1] + p[n / 2]) as f64 / 2.0
        }
    }
}

/// Which config fits a kernel release, and a sentence saying so: the twin's table
/// ([`config_for_release`](crate::twin::host::config_for_release)) from 6.7 on, `base`
/// for 6.0-6.6 (before the PCP auto-tuning series), none before 6.0.
pub fn preset_for(release: &str) -> (Option<String>, String) {
    if let Some((c, why)) = crate::twin::host::config_for_release(release) {
        return (Some(c.to_string()), format!("kernel {release}: {why}"));
    }
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let (maj, min) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    let (p, why) = if maj == 6 && min < 7 {
        (
            Some("base".to_string()),
            "before the PCP auto-tuning series: `base` (6.6) fits",
        )
    } else {
        (None, "older than 6.0: no preset models its pagesets")
    };
    (p, format!("kernel {release}: {why}"))
}

/// The kernel's trips per CPU.
pub fn kernel_trips(events: &[Event]) -> HashMap<u32, Side> {
    let mut sides: HashMap<u32, Side> = HashMap::new();
    // Per CPU: the kind of the previous page event and whether a run is open.
    let mut prev: HashMap<u32, EventKind> = HashMap::new();
    let mut before_drain: HashMap<u32, EventKind> = HashMap::new();
    for e in events.iter().filter(|e| e.kind.is_page()) {
        let s = sides.entry(e.cpu).or_default();
        let p = prev.get(&e.cpu).copied();
        let pages = 1u64 << e.order.min(20);
        match e.kind {
            EventKind::ZoneLocked if e.aux != 0 => {
                let t = e.ts as f64 / 1e9;
                if p == Some(EventKind::ZoneLocked) {
                    if let Some(last) = s.refills.last_mut() {
                        last.pages += pages;
                    }
                } else {
                    s.refills.push(Trip {
                        t,
                        pages,
                        on_free: false,
                    });
                }
            }
            EventKind::PcpuDrain => {
                let t = e.ts as f64 / 1e9;
                if p == Some(EventKind::PcpuDrain) {
                    if let Some(last) = s.drains.last_mut() {
                        last.pages += pages;
                    }
                } else {
                    let b = p.unwrap_or(EventKind::Alloc);
                    before_drain.insert(e.cpu, b);
                    let on_free = matches!(b, EventKind::Free | EventKind::FreeBatched);
                    s.drains.push(Trip { t, pages, on_free });
                }
            }
            _ => {}
        }
        // A zone_locked event without percpu_refill ends a refill run too.
        let k = if e.kind == EventKind::ZoneLocked && e.aux == 0 {
            EventKind::Alloc
        } else {
            e.kind
        };
        prev.insert(e.cpu, k);
    }
    sides
}

/// `__GFP_DMA` (bit 0) and `__GFP_DMA32` (bit 2) of include/linux/gfp_types.h: the
/// zone modifiers [`gfp_of`] cannot carry (pagealloc's [`Gfp`] has none; none of the
/// committed traces' allocations set them).
pub(super) const GFP_ZONE_MODIFIERS: u64 = 1 << 0 | 1 << 2;

/// The pagealloc flags of a kernel request: its migratetype, `__GFP_HIGH` (bit 5),
/// no `__GFP_DIRECT_RECLAIM` (bit 10) = atomic, `__GFP_KSWAPD_RECLAIM` (bit 11),
/// `__GFP_NORETRY` (bit 16), `__GFP_THISNODE` (bit 21): the bit numbers of
/// include/linux/gfp_types.h, the same from 6.0 to 6.18.
pub fn gfp_of(kernel_gfp: u64, mt: i8) -> Gfp {
    let bit = |b: u32| kernel_gfp & (1 << b) != 0;
    let mut g = match mt {
        1 => Gfp::MOVABLE,
        2 => Gfp::RECLAIMABLE,
        0 => Gfp(0),
        _ if bit(3) => Gfp::MOVABLE,
        _ if bit(4) => Gfp::RECLAIMABLE,
        _ => Gfp(0),
    };
    if bit(5) {
        g = g | Gfp::HIGH;
    }
    if !bit(10) {
        g = g | Gfp::ATOMIC;
    }
    if bit(11) {
        g = g | Gfp::KSWAPD;
    }
    if bit(16) {
        g = g | Gfp::NORETRY;
    }
    if bit(21) {
        g = g | Gfp::THISNODE;
    }
    g
}

/// What ran the zone-lock work [`push_trips`] records.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    Alloc,
    Free,
    Tick,
}

/// Adds the trips one operation (or tick) made, from its CPU's counters around it. A
/// tick's drains are one run (the kernel's events cannot tell the chunks of one
/// `decay_pcp_high` apart: nothing else of the CPU runs between them), an operation's
/// each refill or drain its own.
pub(super) fn push_trips(s: &mut Side, before: &Counters, after: &Counters, ts: u64, cause: Cause) {
    let t = ts as f64 / 1e9;
    let split = |n: u64, pages: u64| -> Vec<u64> {
        (0..n)
            .map(|i| pages / n + u64::from(i < pages % n))
            .collect()
    };
    let nr = after.pcp_refill - before.pcp_refill;
    if nr > 0 {
        for p in split(nr, after.pcp_refill_pages - before.pcp_refill_pages) {
            s.refills.push(Trip {
                t,
                pages: p,
                on_free: false,
            });
        }
    }
    let nd = after.pcp_drain - before.pcp_drain;
    if nd > 0 {
        let pages = after.pcp_drain_pages - before.pcp_drain_pages;
        let n = if cause == Cause::Tick { 1 } else { nd };
        for p in split(n, pages) {
            s.drains.push(Trip {
                t,
                pages: p,
                on_free: cause == Cause::Free,
            });
        }
    }
}

/// When the replay runs each CPU's decay tick.
pub(super) struct TickPlan {
    /// Offset of the ticks into each second of the trace: the time of the kernel's
    /// first drain that followed no free (a decay's), if any.
    pub(super) phase_ns: Option<u64>,
    /// Per CPU: idle when the trace began (its first sched_switch leaves the idle task).
    pub(super) idle_at_start: Vec<bool>,
}

impl TickPlan {
    pub(super) fn of(ev: &[Event], kernel: &HashMap<u32, Side>, ncpus: usize) -> TickPlan {
        let phase_ns = kernel
            .values()
            .flat_map(|s| s.drains.iter())
            .filter(|d| !d.on_free)
            .map(|d| (d.t * 1e9) as u64)
            .min()
            .map(|t| t % 1_000_000_000);
        let mut idle_at_start = vec![false; ncpus];
        let mut seen = vec![false; ncpus];
        for e in ev.iter().filter(|e| e.kind == EventKind::Switch) {
            let c = e.cpu as usize;
            if c < ncpus && !seen[c] {
                seen[c] = true;
                idle_at_start[c] = e.pfn == 0;
            }
        }
        TickPlan {
            phase_ns,
            idle_at_start,
        }
    }

    /// The first tick: at the phase, else a second into the trace.
    pub(super) fn first_ns(&self) -> u64 {
        self.phase_ns.unwrap_or(1_000_000_000)
    }
}
