//! What a run gives: its result ([`ExecResult`]: the row, the latencies, the PCP
//! samples) or why it failed ([`ExecError`]).

use std::time::Duration;

use hdrhistogram::Histogram;

use crate::peers::{Block, Counters, SourceError};
use crate::row::{histogram, CpuWindow, LatUnit, LatencyStats, Measurement};
use crate::workload::driver::ContractError;
use crate::workload::{OpCounts, Workload, WorkloadError, NR_ORDERS};
use crate::Row;

/// How long one blocked op may wait before the run is declared stuck
/// ([`ExecError::Stuck`]).
pub(crate) const STUCK_AFTER: Duration = Duration::from_secs(120);

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The workload cannot run with these CPUs.
    #[error(transparent)]
    Workload(WorkloadError),
    /// A source error: unsupported request, refused free, failed validation.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A block returned or freed failed the executor's check.
    #[error("bad block: {0}")]
    BadBlock(#[from] BadBlock),
    /// A script broke the executor contract.
    #[error("script broke the executor contract: {0}")]
    Script(String),
    /// A blocked op waited longer than two minutes.
    #[error("stuck for {after:?}: {0}", after = STUCK_AFTER)]
    Stuck(String),
    /// Another thread failed first.
    #[error("aborted")]
    Aborted,
}

/// What was wrong with a block a source handed out or the executor freed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadBlock {
    /// Not of the order asked for.
    #[error("asked order {asked}, got {block:?}")]
    WrongOrder {
        /// The order asked for.
        asked: u8,
        /// The block returned.
        block: Block,
    },
    /// An address not aligned as the source promises.
    #[error("returned {block:?}: address not aligned to {align} bytes")]
    Misaligned {
        /// The block.
        block: Block,
        /// The alignment promised, bytes.
        align: u64,
    },
    /// Outside the source's frame range, or not naturally aligned.
    #[error("returned {block:?}: not an aligned block inside 0..{frames}")]
    OutOfRange {
        /// The block.
        block: Block,
        /// Frames in the range.
        frames: u64,
    },
    /// Overlaps a block that is live.
    #[error("returned {block:?}, but frame {frame} is already allocated")]
    AlreadyLive {
        /// The block.
        block: Block,
        /// The first frame already live.
        frame: u64,
    },
    /// Freed while not live.
    #[error("freed {block:?}, which was not allocated")]
    NotLive {
        /// The block.
        block: Block,
    },
    /// Frames still live when every script is done.
    #[error("{0} frames still live at the end")]
    Leaked(u64),
}

impl From<ContractError> for ExecError {
    fn from(e: ContractError) -> Self {
        ExecError::Script(e.0)
    }
}

/// One sample of the per-CPU lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcpSample {
    /// Time since the start of the run, ms.
    pub t_ms: u64,
    /// Pages in all per-CPU lists.
    pub total_pages: u64,
    /// CPU 0's `high` (zone 0).
    pub cpu0_high: i32,
    /// CPU 0's `count` (zone 0).
    pub cpu0_count: i32,
    /// CPU 0's `high_min` (zone 0): where the decay stops lowering `high`.
    pub cpu0_high_min: i32,
}

/// Latency histograms of a run, in ns.
#[derive(Clone, Debug)]
pub struct Latencies {
    /// Every successful allocation.
    pub alloc: Histogram<u64>,
    /// Every free.
    pub free: Histogram<u64>,
    /// Allocations that took a zone lock (refill or direct): one zone-lock trip each.
    pub alloc_trip: Histogram<u64>,
    /// Frees that took a zone lock (drain or direct).
    pub free_trip: Histogram<u64>,
}

impl Latencies {
    pub(super) fn new() -> Self {
        Latencies {
            alloc: histogram(),
            free: histogram(),
            alloc_trip: histogram(),
            free_trip: histogram(),
        }
    }

    pub(super) fn merge(&mut self, o: &Latencies) {
        let add = |a: &mut Histogram<u64>, b: &Histogram<u64>| {
            a.add(b).expect("auto-resizing histograms add");
        };
        add(&mut self.alloc, &o.alloc);
        add(&mut self.free, &o.free);
        add(&mut self.alloc_trip, &o.alloc_trip);
        add(&mut self.free_trip, &o.free_trip);
    }
}

/// What a run measured.
#[derive(Debug)]
pub struct ExecResult {
    /// Workload name.
    pub workload: &'static str,
    /// Source name.
    pub alloc: &'static str,
    /// pagealloc's config string.
    pub config: Option<String>,
    /// CPUs.
    pub cpus: u32,
    /// Root seed.
    pub seed: u64,
    /// Whether the threads were pinned.
    pub pinned: bool,
    /// The workload's score over the measured window.
    pub score: f64,
    /// Its unit.
    pub score_unit: &'static str,
    /// Seconds of the measured window.
    pub elapsed_s: f64,
    /// Seconds from the start barrier to the last `Done`.
    pub wall_s: f64,
    /// Per CPU: its measured window (counts, start and end on the run's clock).
    pub windows: Vec<CpuWindow>,
    /// Σ of the threads' CPU time in their measured windows, ns.
    pub cpu_time_ns: u64,
    /// Hash of every CPU's completed ops and results ([`TraceHash`](crate::workload::TraceHash)): the dry run's
    /// hash when the ops did not depend on timing (no failed allocation, no shared
    /// task queue).
    pub trace_hash: u64,
    /// Counts of the whole run, per CPU.
    pub per_cpu: Vec<OpCounts>,
    /// Counts of the whole run.
    pub total: OpCounts,
    /// Counts of the measured window.
    pub measured: OpCounts,
    /// Counters' change over the measured window (sources with counters).
    pub counters: Option<Counters>,
    /// Latencies (with [`ExecOptions::latency`](super::ExecOptions::latency)).
    pub latency: Option<Latencies>,
    /// Seconds spent in allocations and frees, all CPUs (with latency on).
    pub alloc_free_s: f64,
    /// Seconds spent in touches, all CPUs (with latency on).
    pub touch_s: f64,
    /// Mean ns of a successful allocation by order, measured window (latency on).
    pub alloc_avg_ns_by_order: [Option<f64>; NR_ORDERS],
    /// Samples of the per-CPU lists (sources with them).
    pub pcp_samples: Vec<PcpSample>,
    /// Largest total of per-CPU pages seen (samples and the end).
    pub pcp_peak_pages: Option<u64>,
    /// Per-CPU pages at the end, before validation.
    pub pcp_final_pages: Option<u64>,
    /// Warnings to show the user (unpinned run…).
    pub warnings: Vec<String>,
    /// The result row ([`ExecResult::row`]).
    pub(super) row: Row,
}

impl ExecResult {
    /// The result row (raw values; `compare` normalises).
    pub fn row(&self) -> Row {
        self.row.clone()
    }

    /// The row through [`Row::from_measurement`], plus the thread executor's own extras
    /// (every op's latency, time in allocator calls and touches).
    pub(super) fn measure(&self, workload: &dyn Workload) -> Row {
        let mut r = Row::from_measurement(&Measurement {
            workload,
            alloc: self.alloc.to_owned(),
            config: self.config.clone(),
            machine: "host".to_owned(),
            seed: self.seed,
            wall_s: self.wall_s,
            windows: self.windows.clone(),
            counters: self.counters,
            zone_lock_wait_ns: self.counters.map(|c| c.zone_lock_wait_ns),
            cpu_time_ns: self.cpu_time_ns,
            trips: self.latency.as_ref().map(|l| (&l.alloc_trip, &l.free_trip)),
            touches: None,
            pcp_pages: self.pcp_peak_pages.zip(self.pcp_final_pages),
            trace_hash: None,
        });
        if let Some(l) = &self.latency {
            // Every call, in ns (mostly PCP hits): not the trips' µs columns.
            if let Some(s) = LatencyStats::of(&l.alloc) {
                s.insert(&mut r.extra, "alloc_call", LatUnit::Ns);
            }
            if let Some(s) = LatencyStats::of(&l.free) {
                s.insert(&mut r.extra, "free_call", LatUnit::Ns);
            }
            r.extra.insert("alloc_free_s".into(), self.alloc_free_s);
            r.extra.insert("touch_s".into(), self.touch_s);
            for (o, v) in self.alloc_avg_ns_by_order.iter().enumerate() {
                if let Some(ns) = v {
                    r.extra.insert(format!("alloc_avg_us_order{o}"), ns / 1e3);
                }
            }
        }
        r
    }
}
