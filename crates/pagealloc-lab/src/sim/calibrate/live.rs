//! The fixed cost of one zone-lock trip, measured on the live kernel from the
//! recorder's timestamps (docs/sim-cost-model.md §4.1).
//!
//! # Method
//! In a recording of a page_fault1 loop pinned to one CPU, a **drain trip** is a run of
//! `mm_page_pcpu_drain` events and a **refill trip** a run of `mm_page_alloc_zone_locked`
//! events with `percpu_refill=1` (`rmqueue_bulk` and `free_pcppages_bulk` hold the zone
//! lock with interrupts off: nothing else of that CPU lies between). Each trip sits
//! between two events of the loop's own rhythm: a drain between two
//! `mm_page_free_batched` (the commit loop of `free_unref_folios`, preemption off), a
//! refill between two `mm_page_alloc` (one per fault). For a trip of `N` blocks,
//!
//! ```text
//! lead  = first trip event − the bracket event before it
//! trail = the bracket event after it − last trip event
//! inner = mean gap between the trip's consecutive events (one block's work + one event)
//! fixed = lead + trail − baseline − inner
//! ```
//!
//! where `baseline` is the median gap between two bracket events with nothing between
//! them. The gap from bracket to bracket is `baseline + fixed + N × inner`: every
//! tracepoint's own cost is in `baseline` (the bracket's) or in `inner` (the trip's
//! events'), so `fixed` is what a trip costs beyond its blocks — the lock taken and
//! released with interrupts saved and restored, the trip's set-up (`nr_pcp_free`, the
//! list scan, `nr_pcp_alloc`) and whatever the first block costs more than the median
//! one (a refill's search of the free areas for a block to split). An upper bound of the
//! simulator's trip residual, which does not include the lines it charges apart.

use std::collections::HashMap;

use crate::trace::format::{Event, EventKind};

/// One direction's fixed cost in one recording, ns (medians over its trips).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TripCost {
    /// `refill` or `drain`.
    pub direction: &'static str,
    /// Trips measured (bracketed on both sides).
    pub trips: usize,
    /// Median blocks per trip.
    pub blocks: f64,
    /// Median gap between two bracket events with nothing between them.
    pub baseline_ns: f64,
    /// Median lead (bracket → first trip event).
    pub lead_ns: f64,
    /// Median trail (last trip event → bracket).
    pub trail_ns: f64,
    /// Median of the trips' mean inner gaps (one block and its event).
    pub inner_ns: f64,
    /// Median of the trips' `lead + trail − baseline − inner`.
    pub fixed_ns: f64,
    /// Its first and third quartiles over the trips.
    pub fixed_quartiles_ns: (f64, f64),
}

/// The value at quantile `q` of `v` (sorted in place; nearest rank). NaN when empty.
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((q * v.len() as f64) as usize).min(v.len() - 1);
    v[i]
}

/// What one event is to the measurement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Item {
    Drain,
    Refill,
    /// `mm_page_free_batched` of the task.
    FreeBatched,
    /// `mm_page_alloc` of the task.
    Alloc,
    /// Anything else (another task's event, an interrupt's, another kind): breaks a
    /// bracket.
    Other,
}

/// The task whose events the measurement reads: the `(pid, cpu)` with the most
/// `mm_page_alloc` events in task context.
pub fn busiest_task(events: &[Event]) -> Option<(u32, u32)> {
    let mut n: HashMap<(u32, u32), u64> = HashMap::new();
    for e in events {
        if e.kind == EventKind::Alloc && !e.in_interrupt() {
            *n.entry((e.pid, e.cpu)).or_default() += 1;
        }
    }
    n.into_iter()
        .max_by_key(|&(k, c)| (c, std::cmp::Reverse(k)))
        .map(|(k, _)| k)
}

/// The fixed cost of the refill and of the drain trips of task `pid` on `cpu` (module
/// docs), each `None` when the recording has no bracketed trip of that direction.
/// `events` in time order.
pub fn trip_costs(events: &[Event], pid: u32, cpu: u32) -> [Option<TripCost>; 2] {
    let item = |e: &Event| {
        if e.pid != pid || e.in_interrupt() {
            return Item::Other;
        }
        match e.kind {
            EventKind::PcpuDrain => Item::Drain,
            EventKind::ZoneLocked if e.aux == 1 => Item::Refill,
            EventKind::FreeBatched => Item::FreeBatched,
            EventKind::Alloc => Item::Alloc,
            _ => Item::Other,
        }
    };
    // Runs of equal items: (item, first ts, last ts, events, inner gaps).
    let mut runs: Vec<(Item, u64, u64, u32, Vec<f64>)> = Vec::new();
    for e in events.iter().filter(|e| e.cpu == cpu) {
        let it = item(e);
        match runs.last_mut() {
            Some(r) if r.0 == it && matches!(it, Item::Drain | Item::Refill) => {
                r.4.push(e.ts.saturating_sub(r.2) as f64);
                r.2 = e.ts;
                r.3 += 1;
            }
            _ => runs.push((it, e.ts, e.ts, 1, Vec::new())),
        }
    }
    let one = |trip: Item, bracket: Item, direction: &'static str| -> Option<TripCost> {
        let mut base: Vec<f64> = runs
            .windows(2)
            .filter(|w| w[0].0 == bracket && w[1].0 == bracket)
            .map(|w| w[1].1.saturating_sub(w[0].1) as f64)
            .collect();
        let baseline = quantile(&mut base, 0.5);
        // (lead, trail, the trip's mean inner gap, blocks)
        let mut trips: Vec<(f64, f64, f64, f64)> = runs
            .windows(3)
            .filter(|w| w[0].0 == bracket && w[1].0 == trip && w[2].0 == bracket)
            .map(|w| {
                let inner = &w[1].4;
                (
                    w[1].1.saturating_sub(w[0].1) as f64,
                    w[2].1.saturating_sub(w[1].2) as f64,
                    inner.iter().sum::<f64>() / inner.len() as f64,
                    f64::from(w[1].3),
                )
            })
            .collect();
        if trips.is_empty() || baseline.is_nan() {
            return None;
        }
        let mut all_inner: Vec<f64> = trips.iter().map(|t| t.2).filter(|x| !x.is_nan()).collect();
        let inner = quantile(&mut all_inner, 0.5);
        // A trip of one block has no inner gap of its own: the recording's median.
        for t in &mut trips {
            if t.2.is_nan() {
                t.2 = inner;
            }
        }
        let mut fixed: Vec<f64> = trips
            .iter()
            .map(|t| t.0 + t.1 - baseline - t.2)
            .filter(|x| !x.is_nan())
            .collect();
        let col = |f: fn(&(f64, f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = trips.iter().map(f).collect();
            quantile(&mut v, 0.5)
        };
        Some(TripCost {
            direction,
            trips: trips.len(),
            blocks: col(|t| t.3),
            baseline_ns: baseline,
            lead_ns: col(|t| t.0),
            trail_ns: col(|t| t.1),
            inner_ns: inner,
            fixed_ns: quantile(&mut fixed, 0.5),
            fixed_quartiles_ns: (quantile(&mut fixed, 0.25), quantile(&mut fixed, 0.75)),
        })
    };
    [
        one(Item::Refill, Item::Alloc, "refill"),
        one(Item::Drain, Item::FreeBatched, "drain"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, kind: EventKind, aux: u64) -> Event {
        Event {
            ts,
            aux,
            pid: 7,
            ..Event::synthetic(1, kind, 0)
        }
    }

    /// A made-up commit loop: free_batched every 170 ns; after some of them a drain of
    /// `n` blocks at 200 ns each that costs 60 ns more in all: the fixed cost is 60.
    #[test]
    fn a_drain_trips_fixed_cost_is_recovered() {
        let mut v = Vec::new();
        let mut t = 1000;
        for k in 0..40u64 {
            v.push(ev(t, EventKind::FreeBatched, 0));
            if k % 5 == 4 {
                let n = 3 + k % 4;
                // lead: rest of the commit (170) + 30 of the trip's set-up + one block
                t += 170 + 30 + 200;
                for i in 0..n {
                    v.push(ev(t, EventKind::PcpuDrain, 0));
                    if i + 1 < n {
                        t += 200;
                    }
                }
                t += 30; // the trip's end
            } else {
                t += 170;
            }
        }
        v.push(ev(t, EventKind::FreeBatched, 0));
        let [refill, drain] = trip_costs(&v, 7, 1);
        assert!(refill.is_none());
        let d = drain.expect("drain trips");
        assert_eq!(d.trips, 8);
        assert!((d.baseline_ns - 170.0).abs() < 1e-9, "{d:?}");
        assert!((d.inner_ns - 200.0).abs() < 1e-9, "{d:?}");
        assert!((d.fixed_ns - 60.0).abs() < 1e-9, "{d:?}");
        // Another task's event between breaks the bracket: that trip is not measured.
        let mut w = v.clone();
        let i = w
            .iter()
            .position(|e| e.kind == EventKind::PcpuDrain)
            .expect("a drain");
        w.insert(i, Event { pid: 8, ..w[i] });
        let d2 = trip_costs(&w, 7, 1)[1].clone().expect("drain trips");
        assert_eq!(d2.trips, 7);
        assert_eq!(busiest_task(&v), None);
    }

    #[test]
    fn refills_are_bracketed_by_allocations() {
        let mut v = Vec::new();
        let mut t = 0;
        for k in 0..20u64 {
            if k % 4 == 3 {
                t += 500; // set-up and the first block's extra
                for _ in 0..4 {
                    v.push(ev(t, EventKind::ZoneLocked, 1));
                    t += 100;
                }
            }
            v.push(ev(t, EventKind::Alloc, 0));
            t += 2000;
        }
        let c = trip_costs(&v, 7, 1)[0].clone().expect("refill trips");
        // lead 2000 + 500, trail 100, inner 100: 2500 + 100 − 2000 − 100 = 500.
        assert_eq!(c.trips, 5);
        assert!((c.fixed_ns - 500.0).abs() < 1e-9, "{c:?}");
        assert_eq!(busiest_task(&v), Some((7, 1)));
        assert!(quantile(&mut [], 0.5).is_nan());
    }
}
