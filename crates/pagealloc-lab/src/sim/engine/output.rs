//! What a simulation gives back: [`EngineOutput`], and the zone-lock accounting by
//! trip kind.

use hdrhistogram::Histogram;

use pagealloc::Counters;

use crate::workload::OpCounts;

/// Raw outcome of one simulation.
#[derive(Clone, Debug)]
pub(crate) struct EngineOutput {
    /// Counts per workload CPU over the measured window.
    pub(crate) measured_per_cpu: Vec<OpCounts>,
    /// Counts per workload CPU over the whole run.
    pub(crate) per_cpu: Vec<OpCounts>,
    /// Per workload CPU: start of its measured window, ns.
    pub(crate) measure_start: Vec<u64>,
    /// Per workload CPU: time of its `Done`, ns.
    pub(crate) end: Vec<u64>,
    /// Σ zone-lock wait over workload CPUs' measured windows, ns.
    pub(crate) lock_wait_ns: u64,
    /// Σ busy time (everything charged, waits included) over workload CPUs' measured
    /// windows, ns: their CPU time.
    pub(crate) busy_ns: u64,
    /// Per workload CPU: its busy time in its measured window, ns (they add up to
    /// `busy_ns`).
    pub(crate) busy_per_cpu: Vec<u64>,
    /// Of `busy_ns`, the time in the allocator's calls (allocations with their page
    /// fault, frees): the system time; the rest is the workload's own (touches, copies,
    /// compute, messages).
    pub(crate) sys_ns: u64,
    /// Page-data lines accessed by workload CPUs in their measured windows, and how many
    /// missed the LLC (the cache miss % is their ratio).
    pub(crate) data_lines: u64,
    pub(crate) data_llc_misses: u64,
    /// Allocator lines (reported accesses) charged, by hierarchy level, whole run.
    pub(crate) meta_levels: [u64; 7],
    /// Of those, `struct page` lines beyond L2 charged as prefetched (L2 streamer).
    pub(crate) meta_prefetched: u64,
    /// Zone-lock trip hold times of refills/direct allocations and of drains/direct
    /// frees in the measured window, ns.
    pub(crate) alloc_trips: Histogram<u64>,
    pub(crate) free_trips: Histogram<u64>,
    /// Zone-lock accounting by trip kind ([`TripKind`]): refills and direct allocations
    /// and drains and direct frees of workload CPUs in their measured windows; decay
    /// ticks and the page-cache model's kswapd over the whole run.
    pub(crate) lock_kinds: [LockTally; 3],
    /// Decay ticks: Σ and largest time the zone locks stayed busy with one CPU's tick's
    /// drains (from the tick to the end of its last drain's hold, the longest zone), ns.
    pub(crate) tick_burst_ns: u64,
    pub(crate) tick_burst_max_ns: u64,
    /// Per tick interval of the build (`tick_interval_ms` slices from 0): Σ wait of
    /// the workload's zone-lock trips that started in it, ns, and how many trips.
    pub(crate) wait_by_tick: Vec<(f64, u64)>,
    /// Allocator counters over the measured window (all CPUs).
    pub(crate) counters: Counters,
    /// Largest and last sampled total of pages on per-CPU lists.
    pub(crate) pcp_peak: u64,
    pub(crate) pcp_final: u64,
    /// With a start state: pages on the pagesets after it was applied, or when the
    /// measured window opened (0 without one).
    pub(crate) pcp_start: u64,
    /// Free order-≥9 blocks in pageblocks (`free_pageblocks`): Σ over the pcp samples, the
    /// samples, and the last (at the end).
    pub(crate) huge: (f64, u64, u64),
    /// Ops executed (all kinds) and allocator calls (allocs + frees).
    pub(crate) ops: u64,
    pub(crate) page_ops: u64,
    pub(crate) trace_hash: u64,
    pub(crate) makespan_ns: u64,
    /// Per CPU: the times it slept in a `Send` or `Recv` and was woken.
    pub(crate) sleeps: Vec<u64>,
    /// Pages the page-cache model took from and gave back to the zones (not workload
    /// work: subtracted from the counters in the row).
    pub(crate) cache_alloc_pages: u64,
    pub(crate) cache_free_pages: u64,
    /// Page-cache model reclaims (free fell below low) and pages it holds at the end.
    pub(crate) reclaims: u64,
    pub(crate) cache_final_pages: u64,
    /// Pages held by the rest of the system (the headroom model), all zones.
    pub(crate) held_pages: u64,
    /// Decay ticks that ran before the last workload CPU finished, one per CPU per
    /// `vmstat_update` (each CPU ticks at its own skewed time, [`tick_phase_ns`]): a
    /// machine of N CPUs makes N a second.
    pub(crate) ticks: u64,
    /// Σ over those ticks of Σ `high` over the ticking CPU's pagesets the decay acts on
    /// (high above high_min when the tick starts), read just before and just after its
    /// decay, and Σ of how many pagesets that was.
    pub(crate) tick_high_before: u64,
    pub(crate) tick_high_after: u64,
    pub(crate) tick_pcps: u64,
}

/// The kind of a zone-lock trip, for [`LockTally`]: what the CPU was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TripKind {
    /// A workload allocation's trip: a pcp refill (`rmqueue_bulk`) or a direct
    /// allocation (`rmqueue_buddy`).
    Refill = 0,
    /// A workload free's trip: a pcp drain (`free_pcppages_bulk`) or a direct free.
    Drain = 1,
    /// A decay tick's drain (`decay_pcp_high` from `vmstat_update`) or the page-cache
    /// model's kswapd: the lock is occupied, no workload CPU is delayed.
    Background = 2,
}

/// Zone-lock trips of one [`TripKind`]: how many, how many found the lock taken, their
/// waits and holds, and the waits *other* trips spent queued right behind one of this
/// kind (the holder that released the lock to them). Counts only; they change nothing.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LockTally {
    pub(crate) trips: u64,
    pub(crate) contended: u64,
    pub(crate) wait_ns: f64,
    pub(crate) hold_ns: f64,
    /// Σ wait of workload trips whose lock was last released by a trip of this kind.
    pub(crate) wait_behind_ns: f64,
    /// Lines touched under the lock by trips of this kind (whole run), and of them those
    /// charged beyond the socket's LLC (another core's modified copy, another socket,
    /// DRAM).
    pub(crate) lines: u64,
    pub(crate) lines_missed: u64,
}
