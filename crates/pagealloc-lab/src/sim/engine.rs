//! The discrete-event loop: virtual CPUs running workload scripts against the real
//! allocator, in virtual time.
//!
//! # Design
//! One [`VCpu`] per CPU of the workload, each with its own virtual clock. The next event
//! is always the runnable CPU with the smallest clock (ties: the lower CPU id), kept in a
//! binary heap; a CPU that just ran stays on the processor without a heap round trip
//! while it is still the smallest. An event executes one op of the script *at that
//! instant*, on the real allocator (`alloc_on`/`free_on` as that CPU, the
//! `SimPlatform` clock set to the CPU's time), and charges the op's cost to the
//! CPU's clock:
//! - an allocation or free: the fast path's instructions (a constant, plus the rest of
//!   a page fault for a movable allocation), then every line of allocator state the call
//!   touched, as the allocator reported it (`pagealloc::access`, buffered by
//!   [`trace::ThreadSink`], mapped by [`LineMap`]), each charged the latency the cache
//!   [`Hierarchy`] gives it. Lines reported with a zone lock held belong to that lock's
//!   hold: the lock is a resource in virtual time (`free_at`); a CPU arriving before
//!   `free_at` waits (that wait is the zone-lock %); the hold is the hand-off when the
//!   previous holder was another CPU (same socket or not), a fitted residual per trip,
//!   and the time the lines touched under the lock take on the core's fill buffers
//!   ([`Overlap`]: independent misses overlap, pointer chases do not; the hold ends
//!   when its last line has arrived);
//! - a touch or a copy: page data through the hierarchy;
//! - a compute: its duration; a send or receive: a message cost.
//!
//! Blocked ops (`Recv` on an empty inbox, `Send` to a full one, `Barrier`) park the CPU
//! off the heap; the CPU that unblocks it wakes it at its own time. A parked CPU is
//! idle (its clock moves, its busy time does not). Waking a CPU parked in `Send` or
//! `Recv` is a scheduler wakeup: the waker pays `wake_ns` (`try_to_wake_up`, the IPI),
//! the sleeper resumes `wakeup_ns` later (the IPI's delivery and the idle state's exit:
//! idle time) and then pays `switch_ns` (the context switch back into the task). A
//! sender blocked on a full inbox is woken only once the inbox has drained to
//! [`Workload::inbox_resume`]; blocks received count against the inbox until the
//! receiver has freed (or sent on) all it took (a whole message). Every tick interval
//! of virtual time each CPU gets [`pagealloc::Allocator::tick`] (decay) at its own
//! skewed instant ([`tick_phase_ns`]: CPU n 3n jiffies before the whole second, as the
//! kernel's `round_jiffies_relative` places `vmstat_update`), and the total of
//! pages on per-CPU lists is sampled every `sample_ns`.
//!
//! The executor contract (slots, blocked ops, barriers, measured window, counts, trace
//! hash) is [`crate::workload::driver`]'s: each virtual CPU has a
//! [`CpuDriver`], and [`Engine`] is its [`Backend`]. Zone-lock wait and busy time are
//! summed over each CPU's measured window.
//!
//! # Determinism
//! The loop is single-threaded; the only randomness is the scripts' streams
//! (`cpu_seed(root, cpu)`), the containers are `Vec`, `VecDeque` and `BinaryHeap` with a
//! total order, so a seed replays exactly. The trace hash mixes every completed op, its
//! result, the frame it got and the CPU's clock after it ([`Backend::stamp`]).
//!
//! # What it cannot see
//! An op runs atomically at its start time, so the allocator's state changes at once
//! and not over the op's duration; two CPUs never interleave inside the allocator. Lock
//! trips of remote drains (`drain_all_pages` from another CPU's slow path) are charged
//! to the drained CPU's next op. Decay ticks occupy the zone lock but do not delay the
//! CPU they run on, and a tick runs exactly at its skewed time (the kernel's work item
//! waits for its CPU's current task to yield; ours never does). Memory-level
//! parallelism is the fill-buffer schedule of [`Overlap`] (see what it cannot see
//! there). There is no scheduler: a CPU runs one script, never migrates, and
//! never idles except when blocked.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use pagealloc::{Allocator, Config, Counters, Frame, Gfp, MigrateType, Platform};

use super::hierarchy::{user_page, Charge, Hierarchy, Level, Span};
use super::machine::{CostModel, Machine};
use super::overlap::Overlap;
use super::trace::{self, LineMap};
use crate::row::{histogram, record_ns};
use crate::workload::driver::{BarrierTable, ContractError, TraceBlock};
use crate::workload::{
    Backend, CpuDriver, Flow, MigrateKind, OpCounts, TraceHash, Workload, WorkloadError,
};
use hdrhistogram::Histogram;

/// What one simulation needs besides the workload.
#[derive(Clone, Debug)]
pub(crate) struct EngineSpec {
    pub(crate) machine: Machine,
    pub(crate) cost: CostModel,
    pub(crate) config: Config,
    pub(crate) seed: u64,
    pub(crate) workload_cpus: u32,
    pub(crate) mem_scale: u64,
    pub(crate) sample_ns: u64,
    pub(crate) page_cache: bool,
    /// Free pages above the high watermark that each zone starts with; the rest is held
    /// by the rest of the system for the whole run. `None`: all memory free.
    pub(crate) headroom_pages: Option<u64>,
    /// The run models a function_graph measurement of the two zone-lock functions: each
    /// recorded trip latency also contains the tracer's in-window cost
    /// (`CostModel::fgraph_ns`); virtual time and holds do not.
    pub(crate) fgraph_timed: bool,
}

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
    /// Free order-≥9 blocks in pageblocks (`free_pageblocks`): Σ over the pcp samples, the
    /// samples, and the last (at the end).
    pub(crate) huge: (f64, u64, u64),
    /// Ops executed (all kinds) and allocator calls (allocs + frees).
    pub(crate) ops: u64,
    pub(crate) page_ops: u64,
    pub(crate) trace_hash: u64,
    pub(crate) makespan_ns: u64,
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

/// Why a simulation stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The workload cannot run on this many CPUs.
    #[error(transparent)]
    Workload(WorkloadError),
    /// The allocator refused the machine or config.
    #[error("cannot build the allocator: {0}")]
    Build(String),
    /// A script broke the executor contract or deadlocked.
    #[error("script error: {0}")]
    Contract(String),
}

impl From<ContractError> for EngineError {
    fn from(e: ContractError) -> Self {
        EngineError::Contract(e.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Runnable,
    Parked,
    Done,
}

/// What a parked CPU waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Park {
    Recv,
    Send,
    Barrier,
}

/// A virtual CPU's clock and placement; its script side is its [`CpuDriver`].
#[derive(Debug)]
struct VCpu {
    time: u64,
    busy: u64,
    /// Of `busy`, the part spent in the allocator's calls (`alloc_on` with its page
    /// fault, `free_on`): their instructions, lines and zone-lock waits and holds.
    sys: u64,
    wait: u64,
    state: State,
    parked_on: Option<Park>,
    measuring: bool,
    measure_start: u64,
    end: u64,
    socket: u32,
}

impl TraceBlock for Frame {
    fn order(&self) -> u8 {
        self.order
    }
    fn trace_word(&self) -> u64 {
        self.pfn.0
    }
}

/// A zone lock in virtual time.
#[derive(Clone, Copy, Debug)]
struct ZoneLock {
    free_at: u64,
    last_cpu: u32,
    last_socket: u32,
    /// The kind of the last trip (for [`LockTally::wait_behind_ns`]).
    last_kind: TripKind,
}

/// Whose clock an allocator call's accesses are charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    /// A workload allocation: its trips are refills or direct allocations.
    Alloc,
    /// A workload free: its trips are drains or direct frees.
    Free,
    /// Decay ticks and the page-cache model's kswapd: they occupy the zone locks and
    /// warm or cool the caches, but delay no workload CPU.
    Background,
}

/// The L2 streamer of one CPU, as far as `struct page` accesses go: the hardware
/// prefetcher detects accesses that walk a 4 KiB page line by line, forward or backward,
/// and fetches the next lines ahead of them (Intel's optimization manual, "Data
/// Prefetching": the L2 streamer tracks 32 streams, one per 4 KiB page, and runs up to
/// 20 lines ahead). `struct page` is 64 bytes, so frames with neighbouring PFNs have
/// neighbouring metadata lines: a refill that takes the frames of a split block one by
/// one walks memmap sequentially, and its lines arrive prefetched. An access within two
/// lines of the last one in a tracked page is charged an L2 hit (the line was on its
/// way); anything else is charged what the hierarchy says.
#[derive(Clone, Debug)]
struct Streamer {
    /// Per tracked memmap page: its number + 1 (0 = free slot), and the offset of the
    /// last line accessed in it. A page is in at most one slot.
    pages: [u64; STREAMS],
    offs: [u64; STREAMS],
    /// The slot to replace next (round robin), and the slot that matched last (checked
    /// first: a refill walks one page for many accesses).
    next: usize,
    last: usize,
}

/// Streams the model tracks per CPU (the L2 streamer's 32).
const STREAMS: usize = 32;
/// Lines of `struct page` per 4 KiB page of memmap.
const METAS_PER_PAGE: u64 = 64;

impl Streamer {
    fn new() -> Streamer {
        Streamer {
            pages: [0; STREAMS],
            offs: [0; STREAMS],
            next: 0,
            last: 0,
        }
    }

    /// Records an access to frame `pfn`'s metadata; true if the streamer had it coming.
    #[inline]
    fn prefetched(&mut self, pfn: u64) -> bool {
        let (page, off) = (pfn / METAS_PER_PAGE + 1, pfn % METAS_PER_PAGE);
        let found = if self.pages[self.last] == page {
            Some(self.last)
        } else {
            self.pages.iter().position(|&p| p == page)
        };
        match found {
            Some(k) => {
                self.last = k;
                let near = self.offs[k].abs_diff(off) <= 2;
                self.offs[k] = off;
                near
            }
            None => {
                let k = self.next;
                self.pages[k] = page;
                self.offs[k] = off;
                self.last = k;
                self.next = (k + 1) % STREAMS;
                false
            }
        }
    }
}

/// A zone-lock hold being replayed.
#[derive(Clone, Copy, Debug)]
struct Trip {
    zone: usize,
    /// When the hold began (after any wait), ns.
    start: f64,
    /// The wait before it, ns.
    wait: f64,
    /// The hold's fixed part (hand-off, residual) when opened; the whole hold once
    /// closed, ns.
    hold: f64,
    /// The instructions around its lines (`locked_line_ns` each), ns.
    lines: f64,
    /// Its lines, and of them those charged beyond the socket's LLC
    /// ([`LockTally::lines`], added when it closes).
    count: u64,
    missed: u64,
}

const NO_CPU: u32 = u32::MAX;

/// The simulator's platform seam: the virtual CPU and its clock.
#[derive(Debug, Default)]
struct SimPlatform {
    cpu: AtomicUsize,
    now: AtomicU64,
}

impl SimPlatform {
    fn set(&self, cpu: usize, now: u64) {
        self.cpu.store(cpu, Relaxed);
        self.now.store(now, Relaxed);
    }
}

impl Platform for SimPlatform {
    fn current_cpu(&self) -> usize {
        self.cpu.load(Relaxed)
    }
    fn now_ns(&self) -> u64 {
        self.now.load(Relaxed)
    }
}

struct Engine<'a> {
    spec: &'a EngineSpec,
    a: Allocator,
    platform: Arc<SimPlatform>,
    cpus: Vec<VCpu>,
    /// Runnable CPUs not running, by [`event_key`].
    heap: BinaryHeap<Reverse<u64>>,
    inboxes: Vec<VecDeque<Frame>>,
    capacity: usize,
    /// Blocks an inbox drains to before its blocked sender is woken.
    resume: usize,
    /// Per destination inbox: senders blocked on it, FIFO.
    blocked_senders: Vec<VecDeque<u32>>,
    /// Per receiving CPU: the blocks it took from its inbox since it last held none
    /// (`None` once freed). They count against the inbox until all are freed, as an
    /// skb with all its fragments counts against its socket's buffer until
    /// `consume_skb`.
    unfreed: Vec<Vec<Option<u64>>>,
    barriers: BarrierTable,
    /// CPUs released by the barrier that just opened, for the loop to complete.
    released: Vec<usize>,
    measured_after: Option<u32>,
    /// Counters and page-cache totals when the measured barrier opened.
    window_base: Option<(Counters, u64, u64)>,
    locks: Vec<ZoneLock>,
    nzones: usize,
    /// The machine's caches: every reported allocator line and every page-data touch.
    mem: Hierarchy,
    /// Where each reported line lives.
    lines: LineMap,
    /// The accesses of the allocator call being replayed (reused buffer).
    buf: Vec<trace::Rec>,
    /// Per machine CPU: its L2 streamer over `struct page` lines.
    streams: Vec<Streamer>,
    /// An L2 hit, ns (what a prefetched line costs).
    l2_ns: f64,
    /// The core's miss schedule for the run of accesses being replayed.
    overlap: Overlap,
    out: EngineOutput,
    /// The earliest pending decay tick, ns: `tick_first[tick_order[tick_pos]]` plus
    /// `tick_round` intervals.
    next_tick: u64,
    tick_ns: u64,
    /// Per machine CPU: its first tick ([`tick_phase_ns`]); the CPUs in the order of
    /// those times (ties by CPU number), which every later interval repeats; the place
    /// of the next tick in that order, and how many whole intervals have passed.
    tick_first: Vec<u64>,
    tick_order: Vec<usize>,
    tick_pos: usize,
    tick_round: u64,
    next_sample: u64,
    /// Page-cache model: blocks held per zone, and the CPU that allocates them.
    cache_blocks: Vec<Vec<Frame>>,
    cache_cpu: Vec<usize>,
    /// Allocator counters once the headroom model has taken its memory: the row counts
    /// the run's events only.
    base_counters: Counters,
}

/// Runs `workload` on `spec`'s machine to completion.
pub(crate) fn simulate(
    workload: &dyn Workload,
    spec: &EngineSpec,
) -> Result<EngineOutput, EngineError> {
    let scripts = workload
        .scripts(spec.workload_cpus)
        .map_err(EngineError::Workload)?;
    let layout = spec
        .machine
        .layout(spec.mem_scale)
        .map_err(|e| EngineError::Build(e.to_string()))?;
    let platform = Arc::new(SimPlatform::default());
    let mut a = Allocator::with_platform(&layout, spec.config.clone(), platform.clone())
        .map_err(|e| EngineError::Build(e.to_string()))?;
    a.set_access_sink(Arc::new(trace::ThreadSink));
    let lines = LineMap::new(&a, &layout);
    trace::install(Some(lines.clone()));
    let indexed = lines.indexed();
    let nzones = a.nr_zones();
    let frames = layout.zones().map(|(_, z)| z.end_pfn()).max().unwrap_or(0);
    let n = scripts.len();
    let cpus: Vec<VCpu> = (0..n)
        .map(|i| VCpu {
            time: 0,
            busy: 0,
            sys: 0,
            wait: 0,
            state: State::Runnable,
            parked_on: None,
            measuring: false,
            measure_start: 0,
            end: 0,
            socket: spec.machine.socket_of(i as u32),
        })
        .collect();
    let tick_ns = spec.config.tick_interval_ms.max(1) * 1_000_000;
    let mcpus = a.nr_cpus();
    let tick_first: Vec<u64> = (0..mcpus).map(|c| tick_phase_ns(c, tick_ns, HZ)).collect();
    let mut tick_order: Vec<usize> = (0..mcpus).collect();
    tick_order.sort_by_key(|&c| (tick_first[c], c));
    let next_tick = tick_order.first().map_or(u64::MAX, |&c| tick_first[c]);
    let mut e = Engine {
        spec,
        platform,
        heap: (0..n as u32).map(|c| Reverse(event_key(0, c))).collect(),
        inboxes: vec![VecDeque::new(); n],
        capacity: workload.inbox_capacity(),
        resume: workload.inbox_resume(),
        blocked_senders: vec![VecDeque::new(); n],
        unfreed: vec![Vec::new(); n],
        barriers: BarrierTable::new(n),
        released: Vec::new(),
        measured_after: workload.measured_after(),
        window_base: None,
        locks: vec![
            ZoneLock {
                free_at: 0,
                last_cpu: NO_CPU,
                last_socket: NO_CPU,
                last_kind: TripKind::Refill,
            };
            nzones
        ],
        nzones,
        mem: Hierarchy::new(&spec.machine, frames)
            .with_dense_lines(trace::K_META, frames)
            .with_indexed_lines(indexed.0, indexed.1),
        lines,
        buf: Vec::new(),
        streams: vec![Streamer::new(); mcpus],
        l2_ns: spec.machine.caches.l2_ns(),
        overlap: Overlap::new(&spec.machine.caches),
        cpus,
        a,
        out: EngineOutput {
            measured_per_cpu: Vec::new(),
            per_cpu: Vec::new(),
            measure_start: Vec::new(),
            end: Vec::new(),
            lock_wait_ns: 0,
            busy_ns: 0,
            sys_ns: 0,
            data_lines: 0,
            data_llc_misses: 0,
            meta_levels: [0; 7],
            meta_prefetched: 0,
            alloc_trips: histogram(),
            free_trips: histogram(),
            lock_kinds: [LockTally::default(); 3],
            tick_burst_ns: 0,
            tick_burst_max_ns: 0,
            wait_by_tick: Vec::new(),
            counters: Counters::default(),
            pcp_peak: 0,
            pcp_final: 0,
            huge: (0.0, 0, 0),
            ops: 0,
            page_ops: 0,
            trace_hash: 0,
            makespan_ns: 0,
            cache_alloc_pages: 0,
            cache_free_pages: 0,
            reclaims: 0,
            cache_final_pages: 0,
            held_pages: 0,
            ticks: 0,
            tick_high_before: 0,
            tick_high_after: 0,
            tick_pcps: 0,
        },
        next_tick,
        tick_ns,
        tick_first,
        tick_order,
        tick_pos: 0,
        tick_round: 0,
        next_sample: 0,
        cache_blocks: vec![Vec::new(); nzones],
        cache_cpu: Vec::new(),
        base_counters: Counters::default(),
    };
    e.cache_cpu = (0..nzones)
        .map(|z| {
            let node = e.a.zone_info(z).expect("zone_info: index in range").node;
            (0..mcpus)
                .find(|&c| e.a.cpu_node(c).expect("cpu_node: index in range") == node)
                .unwrap_or(0)
        })
        .collect();
    if let Some(h) = spec.headroom_pages {
        for z in 0..nzones {
            e.hold_all_but(z, h);
        }
        e.base_counters = e.a.counters();
    }
    if spec.page_cache {
        for z in 0..nzones {
            e.page_cache_grow(z);
        }
    }
    let mut drivers = CpuDriver::for_scripts(scripts, spec.seed, workload.measured_after());
    let (base, bytes, records) = e.mem.frame_records();
    trace::load_ahead(base, bytes, records);
    let ran = e.run(&mut drivers, workload.name());
    trace::load_ahead(std::ptr::null(), 0, 0);
    trace::install(None);
    ran?;
    Ok(e.finish(&drivers))
}

/// Bits of an [`event_key`] that hold the CPU.
const CPU_BITS: u32 = 16;
const CPU_MASK: u64 = (1 << CPU_BITS) - 1;

/// The heap's key of `cpu` at virtual time `t`: the pair `(t, cpu)` in one word, ordered
/// as the pair is (time first, ties to the lower CPU). One integer compare per step of
/// the heap's sift instead of a tuple's two: the heap's loops then compile without
/// data-dependent branches.
///
/// # Panics
/// If `cpu` needs more than 16 bits or `t` more than 48 (78 hours of virtual time).
#[inline]
fn event_key(t: u64, cpu: u32) -> u64 {
    assert!(
        t >> (64 - CPU_BITS) == 0 && u64::from(cpu) <= CPU_MASK,
        "event key out of range: t {t} ns, cpu {cpu}"
    );
    t << CPU_BITS | u64::from(cpu)
}

/// `x.round() as u64`, exactly (half away from zero; negative and NaN to 0, beyond
/// `u64::MAX` to it), without `f64::round`: on the default x86-64 target (no SSE4.1)
/// that is a call into libm, made several times per simulated op (~2 % of a kbuild run
/// in `perf record`). For `0 <= x < 2^52` the fraction `x - trunc(x)` is exact (Sterbenz:
/// `trunc(x)` is within a factor of two of `x`, or 0); from 2^52 on every `f64` is an
/// integer.
#[inline(always)]
fn round_ns(x: f64) -> u64 {
    if x.is_nan() || x < 0.0 {
        return 0;
    }
    if x >= (1u64 << 52) as f64 {
        return x as u64;
    }
    let i = x as u64;
    i + u64::from(x - i as f64 >= 0.5)
}

/// The kernel's timer frequency the decay ticks are skewed in: `CONFIG_HZ_1000`, what
/// LKP's x86_64 kernel configs (`x86_64-rhel-8.3`, the one the PCP series' figures were
/// measured with) select. One jiffy is `1e9 / HZ` ns. docs/sim-cost-model.md §2.
pub(crate) const HZ: u64 = 1000;

/// When `cpu` first runs its decay tick, ns after the start (time 0 is on a whole
/// second of jiffies); it ticks again every `tick_ns` after that.
///
/// The kernel's `vmstat_update` (mm/vmstat.c, which calls `refresh_cpu_vm_stats` and so
/// `decay_pcp_high`) re-arms itself with `round_jiffies_relative(sysctl_stat_interval)`
/// on its own CPU, and `round_jiffies_common` (kernel/time/timer.c) skews every CPU
/// "so that all CPUs do not fire at once": it adds `cpu * 3` jiffies, rounds to a
/// whole second and takes the `cpu * 3` off again. With the default interval of one
/// second (`sysctl_stat_interval = HZ`) CPU n therefore runs at every whole second less
/// `3n mod HZ` jiffies: CPU 0 at 1 s, CPU 1 three jiffies before it, and from CPU
/// `HZ / 3 + 1` on the skew wraps round the second. The first tick of each CPU falls
/// within the first interval, as on a machine that has been up for a while (the boot
/// path, `start_shepherd_timer` and `vmstat_shepherd`, only starts the chain). For an
/// interval other than one second the same skew is taken modulo the interval.
pub(crate) fn tick_phase_ns(cpu: usize, tick_ns: u64, hz: u64) -> u64 {
    let jiffy_ns = 1_000_000_000 / hz.max(1);
    let skew = (cpu as u64 * 3 % hz.max(1)) * jiffy_ns % tick_ns.max(1);
    tick_ns.max(1) - skew
}

impl Engine<'_> {
    fn run(&mut self, drivers: &mut [CpuDriver<Frame>], name: &str) -> Result<(), EngineError> {
        while let Some(Reverse(k)) = self.heap.pop() {
            let (t, c) = (k >> CPU_BITS, (k & CPU_MASK) as u32);
            self.housekeeping(t);
            let cpu = c as usize;
            loop {
                self.step(drivers, cpu)?;
                let v = &self.cpus[cpu];
                if v.state != State::Runnable {
                    break;
                }
                if v.time >> (64 - CPU_BITS) != 0 {
                    return Err(EngineError::Contract(format!(
                        "{name}: virtual time passed {} ns (78 h) on cpu {cpu}: the run is too long for its costs (fewer loops, or smaller --cost values)",
                        1u64 << (64 - CPU_BITS)
                    )));
                }
                let key = event_key(v.time, cpu as u32);
                // Stay on this CPU while it is still the earliest (no heap round trip).
                match self.heap.peek() {
                    Some(&Reverse(top)) if top < key => {
                        self.heap.push(Reverse(key));
                        break;
                    }
                    _ => {
                        if v.time >= self.next_tick || v.time >= self.next_sample {
                            self.heap.push(Reverse(key));
                            break;
                        }
                    }
                }
            }
        }
        if let Some(stuck) = self.cpus.iter().position(|v| v.state != State::Done) {
            return Err(EngineError::Contract(format!(
                "{name}: deadlock; cpu {stuck} waits on {:?}; pending ops {:?}; inbox lengths {:?}",
                drivers[stuck].pending(),
                drivers.iter().map(CpuDriver::pending).collect::<Vec<_>>(),
                self.inboxes.iter().map(VecDeque::len).collect::<Vec<_>>()
            )));
        }
        Ok(())
    }

    /// Decay ticks and pcp samples due at or before `t`.
    fn housekeeping(&mut self, t: u64) {
        while self.next_sample <= t || self.next_tick <= t {
            if self.next_sample <= self.next_tick {
                let pcp = self.a.nr_pcp_pages();
                self.out.pcp_peak = self.out.pcp_peak.max(pcp);
                self.out.pcp_final = pcp;
                let h = super::free_pageblocks(&self.a);
                self.out.huge = (self.out.huge.0 + h as f64, self.out.huge.1 + 1, h);
                if self.spec.page_cache {
                    for z in 0..self.nzones {
                        self.page_cache_reclaim(z, self.next_sample);
                        self.page_cache_grow(z);
                    }
                }
                self.next_sample += self.spec.sample_ns.max(1);
            } else {
                let now = self.next_tick;
                let cpu = self.tick_order[self.tick_pos];
                let (raised, before) = self.raised_high(cpu);
                let busy_before: Vec<u64> = self.locks.iter().map(|l| l.free_at).collect();
                self.platform.set(cpu, now);
                self.a.tick(cpu);
                // Decay drains occupy the locks; their CPU is not delayed.
                self.replay(cpu, Call::Background, now);
                // How long the tick kept a zone lock busy past its time (report only).
                let burst = self
                    .locks
                    .iter()
                    .zip(&busy_before)
                    .filter(|(l, &b)| l.free_at != b)
                    .map(|(l, _)| l.free_at.saturating_sub(now))
                    .max()
                    .unwrap_or(0);
                self.out.tick_burst_ns += burst;
                self.out.tick_burst_max_ns = self.out.tick_burst_max_ns.max(burst);
                let after = self.high_of(&raised);
                self.out.ticks += 1;
                self.out.tick_high_before += before;
                self.out.tick_high_after += after;
                self.out.tick_pcps += raised.len() as u64;
                self.tick_pos += 1;
                if self.tick_pos == self.tick_order.len() {
                    self.tick_pos = 0;
                    self.tick_round += 1;
                }
                let next = self.tick_order[self.tick_pos];
                self.next_tick = self.tick_first[next] + self.tick_round * self.tick_ns;
            }
        }
    }

    /// `cpu`'s pagesets the decay acts on (`high` above high_min), and Σ of their
    /// `high` (read for the report only: it changes no state and charges nothing).
    fn raised_high(&self, cpu: usize) -> (Vec<(usize, usize)>, u64) {
        let mut set = Vec::new();
        let mut sum = 0u64;
        for zone in 0..self.nzones {
            if let Some(p) = self.a.pcp_info(cpu, zone) {
                if p.high > p.high_min {
                    set.push((cpu, zone));
                    sum += p.high as u64;
                }
            }
        }
        (set, sum)
    }

    /// Σ `high` over `set`.
    fn high_of(&self, set: &[(usize, usize)]) -> u64 {
        set.iter()
            .filter_map(|&(c, z)| self.a.pcp_info(c, z))
            .map(|p| p.high.max(0) as u64)
            .sum()
    }

    fn socket(&self, cpu: usize) -> u32 {
        match self.cpus.get(cpu) {
            Some(v) => v.socket,
            None => self.spec.machine.socket_of(cpu as u32),
        }
    }

    /// Replays the accesses the allocator reported during its last call, made as `cpu`
    /// from time `at`: each line through the cache hierarchy; the lines reported with
    /// the zone lock held go to that lock's hold (which starts once the lock is free and
    /// costs a hand-off when another CPU held it last, plus the trip's own instructions),
    /// the others to the CPU. Returns the time the call ends (`at` for background work,
    /// whose CPU is not delayed).
    fn replay(&mut self, cpu: usize, call: Call, at: u64) -> u64 {
        trace::drain_into(&mut self.buf);
        let buf = std::mem::take(&mut self.buf);
        let line_ns = self.spec.cost.locked_line_ns;
        let mut now = at as f64;
        let mut trip: Option<Trip> = None;
        // Each run of accesses (a hold, or the accesses between holds) is scheduled on
        // the core's fill buffers: independent misses overlap, chases do not.
        self.overlap.begin(now);
        for &x in &buf {
            if let Some(zone) = x.lock_of_zone() {
                now = match trip.take() {
                    Some(t) => self.close_trip(cpu, call, t),
                    None => self.overlap.end(),
                };
                let t = self.open_trip(cpu, call, zone as usize, now);
                self.overlap.begin(t.start + t.hold);
                trip = Some(t);
                continue;
            }
            if !x.locked() {
                if let Some(t) = trip.take() {
                    now = self.close_trip(cpu, call, t);
                    self.overlap.begin(now);
                }
            }
            // The line's level counts in the hierarchy's counters (`meta_levels`).
            let c = self.mem.access(cpu, x.key(), x.node(), x.write());
            let (mut ns, mut level) = (c.ns, c.level);
            if let Some(pfn) = x.frame() {
                if self.streams[cpu].prefetched(pfn) && c.level > Level::L2 {
                    ns = self.l2_ns;
                    level = Level::L2;
                    self.out.meta_prefetched += 1;
                }
            }
            self.overlap.access(x.key(), level, ns, x.dep());
            if let Some(t) = trip.as_mut() {
                t.lines += line_ns;
                t.count += 1;
                t.missed += u64::from(level.missed_llc() || level == Level::Peer);
            }
        }
        now = match trip.take() {
            Some(t) => self.close_trip(cpu, call, t),
            None => self.overlap.end(),
        };
        self.buf = buf;
        if call == Call::Background {
            return at;
        }
        let end = round_ns(now);
        let v = &mut self.cpus[cpu];
        if v.measuring {
            v.busy += end.saturating_sub(v.time);
        }
        v.time = v.time.max(end);
        end
    }

    /// A zone-lock trip by `cpu` on zone `z` begins at `now`: it waits until the lock is
    /// free, then pays the hand-off and the trip's instructions.
    fn open_trip(&mut self, cpu: usize, call: Call, z: usize, now: f64) -> Trip {
        if self.spec.page_cache && call != Call::Background {
            self.page_cache_reclaim(z, round_ns(now));
        }
        let c = &self.spec.cost;
        let socket = self.socket(cpu);
        let l = &self.locks[z];
        let start = now.max(l.free_at as f64);
        let handoff = if l.last_cpu == cpu as u32 || l.last_cpu == NO_CPU {
            0.0
        } else if l.last_socket == socket {
            c.handoff_socket_ns
        } else {
            c.handoff_remote_ns
        };
        let fixed = match call {
            Call::Alloc => c.refill_trip_ns,
            Call::Free | Call::Background => c.drain_trip_ns,
        };
        if start > now && call != Call::Background && self.cpus[cpu].measuring {
            self.out.lock_kinds[l.last_kind as usize].wait_behind_ns += start - now;
        }
        Trip {
            zone: z,
            start,
            wait: start - now,
            hold: handoff + fixed,
            lines: 0.0,
            count: 0,
            missed: 0,
        }
    }

    /// The trip `t` ends: the lock is busy until then; returns the CPU's time after it.
    /// In the CPU's measured window its wait is counted and the hold recorded.
    fn close_trip(&mut self, cpu: usize, call: Call, mut t: Trip) -> f64 {
        // The hold lasts until the last line of the run has arrived, plus the
        // instructions around its lines.
        t.hold = self.overlap.end() - t.start + t.lines;
        let end = t.start + t.hold;
        let socket = self.socket(cpu);
        let l = &mut self.locks[t.zone];
        l.free_at = round_ns(end);
        l.last_cpu = cpu as u32;
        l.last_socket = socket;
        let kind = match call {
            Call::Alloc => TripKind::Refill,
            Call::Free => TripKind::Drain,
            Call::Background => TripKind::Background,
        };
        l.last_kind = kind;
        let k = &mut self.out.lock_kinds[kind as usize];
        k.lines += t.count;
        k.lines_missed += t.missed;
        if call == Call::Background || self.cpus[cpu].measuring {
            k.trips += 1;
            k.contended += u64::from(t.wait > 0.0);
            k.wait_ns += t.wait;
            k.hold_ns += t.hold;
        }
        // Ticks past the engine's time limit (`event_key`) are not kept: the run stops
        // with an error at its next event.
        if call != Call::Background
            && self.cpus[cpu].measuring
            && t.start < (1u64 << (64 - CPU_BITS)) as f64
        {
            let i = (t.start as u64 / self.tick_ns) as usize;
            if self.out.wait_by_tick.len() <= i {
                self.out.wait_by_tick.resize(i + 1, (0.0, 0));
            }
            self.out.wait_by_tick[i].0 += t.wait;
            self.out.wait_by_tick[i].1 += 1;
        }
        if call != Call::Background && self.cpus[cpu].measuring {
            let v = &mut self.cpus[cpu];
            v.wait += round_ns(t.wait);
            let h = if call == Call::Free {
                &mut self.out.free_trips
            } else {
                &mut self.out.alloc_trips
            };
            // What function_graph would print: the hold plus the tracer's own work
            // inside the window it times (the lock is not held any longer for it here:
            // the tracer runs before the lock is taken and after it is released, but
            // inside the extracted function whose duration is reported).
            let traced = if self.spec.fgraph_timed {
                self.spec.cost.fgraph_ns
            } else {
                0.0
            };
            record_ns(h, round_ns(t.hold + traced));
        }
        end
    }

    /// Takes order-10 blocks of zone `z` on its home CPU until its free pages are below
    /// `target + 1024`, and returns them with the count of blocks that came from another
    /// zone (a fallback: given back at once, and the taking stops).
    fn take_blocks(&mut self, z: usize, target: u64) -> (Vec<Frame>, u64) {
        let info = self.a.zone_info(z).expect("zone_info: index in range");
        let cpu = self.cache_cpu[z];
        let mut free = info.free;
        let mut blocks = Vec::new();
        let mut strays = 0;
        while free >= target.saturating_add(1024) {
            let got = self
                .a
                .alloc_on(cpu, 10, Gfp::USER | Gfp::NORETRY, Some(info.node));
            // Not charged (below): dropped at once, so that the buffer does not hold
            // every access of the hundreds of thousands of blocks the headroom model
            // takes on a 512 GiB machine until the end of the loop.
            trace::discard();
            match got {
                Ok(f) if self.a.zone_of_pfn(f.pfn) == Some(z) => {
                    blocks.push(f);
                    free -= 1024;
                }
                Ok(f) => {
                    self.a.free_on(cpu, f).expect("just allocated");
                    strays += 1;
                    break;
                }
                Err(_) => break,
            }
        }
        // The rest of the system's allocations: not charged, and they leave the caches
        // as they were.
        trace::discard();
        (blocks, strays)
    }

    /// The headroom model: the rest of the system takes order-10 blocks of zone `z` until
    /// its free pages are down to `headroom` above the high watermark, and keeps them for
    /// the whole run (memory kswapd cannot give back while the workload runs). Not charged
    /// to any CPU; the row's counters start after it.
    fn hold_all_but(&mut self, z: usize, headroom: u64) {
        let target = self
            .a
            .zone_info(z)
            .expect("zone_info: index in range")
            .wmark[2]
            .saturating_add(headroom);
        // Held to the end of the run: never freed.
        let (held, _) = self.take_blocks(z, target);
        self.out.held_pages += held.len() as u64 * 1024;
    }

    /// The page cache grows back: take order-10 blocks from zone `z` until its free
    /// pages are down to the high watermark (a build machine's memory is full of page
    /// cache; kswapd keeps free pages between the low and the high watermark).
    fn page_cache_grow(&mut self, z: usize) {
        let high = self
            .a
            .zone_info(z)
            .expect("zone_info: index in range")
            .wmark[2];
        let (blocks, strays) = self.take_blocks(z, high);
        self.out.cache_alloc_pages += (blocks.len() as u64 + strays) * 1024;
        self.out.cache_free_pages += strays * 1024;
        self.cache_blocks[z].extend(blocks);
    }

    /// kswapd: when zone `z`'s free pages fell below the low watermark, reclaim page
    /// cache (free its blocks) until they reach the high watermark. The frees occupy the
    /// zone lock from `now` (replayed as background work of the zone's first CPU).
    fn page_cache_reclaim(&mut self, z: usize, now: u64) {
        let info = self.a.zone_info(z).expect("zone_info: index in range");
        let [_, low, high, _] = info.wmark;
        if info.free >= low || self.cache_blocks[z].is_empty() {
            return;
        }
        self.out.reclaims += 1;
        let cpu = self.cache_cpu[z];
        let mut free = info.free;
        let mut blocks = 0u64;
        while free < high {
            let Some(f) = self.cache_blocks[z].pop() else {
                break;
            };
            self.a
                .free_on(cpu, f)
                .expect("page cache blocks are allocated");
            self.out.cache_free_pages += 1024;
            free += 1024;
            blocks += 1;
        }
        if blocks > 0 {
            self.replay(cpu, Call::Background, now);
        }
    }

    /// The first `bytes` of block `f` as page data.
    fn span(&self, f: Frame, bytes: u64) -> Span {
        Span {
            page: f.pfn.0,
            bytes,
            node: self.lines.node_of_pfn(f.pfn.0),
        }
    }

    /// Page-data work by `cpu` through the hierarchy: charged to its clock, and in its
    /// measured window counted for the cache miss % (LLC misses ÷ data lines).
    fn data(&mut self, cpu: usize, work: impl FnOnce(&mut Hierarchy) -> Charge) {
        let before = self.mem.counters().data_lines;
        let c = work(&mut self.mem);
        if self.cpus[cpu].measuring {
            let after = self.mem.counters().data_lines;
            for (l, (a, b)) in Level::ALL.iter().zip(after.iter().zip(before)) {
                self.out.data_lines += a - b;
                if l.missed_llc() {
                    self.out.data_llc_misses += a - b;
                }
            }
        }
        self.charge(cpu, c.ns);
    }

    /// Charges `ns` of work to `cpu`'s clock (and, in its measured window, its CPU time).
    fn charge(&mut self, cpu: usize, ns: f64) {
        let ns = round_ns(ns);
        let v = &mut self.cpus[cpu];
        v.time += ns;
        if v.measuring {
            v.busy += ns;
        }
    }

    /// Steps `cpu`'s driver once, then completes the barrier it may have opened.
    fn step(&mut self, drivers: &mut [CpuDriver<Frame>], cpu: usize) -> Result<(), EngineError> {
        drivers[cpu].step(self)?;
        if !self.released.is_empty() {
            let now = self.cpus[cpu].time;
            for w in std::mem::take(&mut self.released) {
                let v = &mut self.cpus[w];
                v.time = v.time.max(now);
                v.state = State::Runnable;
                v.parked_on = None;
                drivers[w].complete_barrier(self);
                if w != cpu {
                    self.heap
                        .push(Reverse(event_key(self.cpus[w].time, w as u32)));
                }
            }
        }
        Ok(())
    }

    fn park(&mut self, cpu: usize, on: Park) {
        let v = &mut self.cpus[cpu];
        v.state = State::Parked;
        v.parked_on = Some(on);
    }

    /// `waker` wakes `cpu`, which sleeps in `Send` or `Recv`: the waker pays the
    /// wakeup's instructions; the sleeper runs again once the wakeup has reached it
    /// (idle time) and it has switched back in (busy time).
    fn wake(&mut self, waker: usize, cpu: usize) {
        let c = self.spec.cost;
        self.charge(waker, c.wake_ns);
        let now = self.cpus[waker].time + round_ns(c.wakeup_ns);
        let v = &mut self.cpus[cpu];
        v.state = State::Runnable;
        v.parked_on = None;
        v.time = v.time.max(now);
        self.charge(cpu, c.switch_ns);
        let v = &self.cpus[cpu];
        self.heap.push(Reverse(event_key(v.time, cpu as u32)));
    }

    fn finish(mut self, drivers: &[CpuDriver<Frame>]) -> EngineOutput {
        let pcp = self.a.nr_pcp_pages();
        self.out.pcp_peak = self.out.pcp_peak.max(pcp);
        self.out.pcp_final = pcp;
        self.out.huge.2 = super::free_pageblocks(&self.a);
        // Every replayed line, and nothing else, is a line access of the hierarchy.
        self.out.meta_levels = self.mem.counters().lines;
        let (base, cache_alloc, cache_free) =
            self.window_base.unwrap_or((self.base_counters, 0, 0));
        self.out.counters = self.a.counters().since(&base);
        self.out.cache_alloc_pages -= cache_alloc;
        self.out.cache_free_pages -= cache_free;
        self.out.makespan_ns = self.cpus.iter().map(|v| v.end).max().unwrap_or(0);
        self.out.lock_wait_ns = self.cpus.iter().map(|v| v.wait).sum();
        self.out.busy_ns = self.cpus.iter().map(|v| v.busy).sum();
        self.out.sys_ns = self.cpus.iter().map(|v| v.sys).sum();
        self.out.trace_hash = TraceHash::combine(drivers.iter().map(CpuDriver::trace_hash));
        self.out.ops = drivers.iter().map(CpuDriver::ops).sum();
        self.out.cache_final_pages = self
            .cache_blocks
            .iter()
            .map(|b| b.len() as u64)
            .sum::<u64>()
            * 1024;
        self.out.measure_start = self.cpus.iter().map(|v| v.measure_start).collect();
        self.out.end = self.cpus.iter().map(|v| v.end).collect();
        self.out.per_cpu = drivers.iter().map(|d| d.counts().clone()).collect();
        self.out.measured_per_cpu = drivers.iter().map(|d| d.measured().clone()).collect();
        debug_assert!(self.a.validate().is_ok());
        self.out
    }

    /// A block `cpu` received has left it (freed, or sent on): once every block it
    /// received is gone, they stop counting against its inbox and a blocked sender
    /// is woken.
    fn release_received(&mut self, cpu: usize, f: Frame) {
        let held = &mut self.unfreed[cpu];
        if let Some(e) = held.iter_mut().find(|e| **e == Some(f.pfn.0)) {
            *e = None;
            if held.iter().all(Option::is_none) {
                held.clear();
                if self.inboxes[cpu].len() <= self.resume {
                    if let Some(s) = self.blocked_senders[cpu].pop_front() {
                        self.wake(cpu, s as usize);
                    }
                }
            }
        }
    }
}

/// The effects of ops in virtual time: the real allocator as the virtual CPU, costs
/// charged to its clock, inboxes and barriers that park and wake CPUs.
impl Backend for Engine<'_> {
    type Block = Frame;
    type Error = EngineError;

    fn alloc(
        &mut self,
        cpu: usize,
        order: u8,
        kind: MigrateKind,
    ) -> Result<Option<Frame>, EngineError> {
        let cost = self.spec.cost;
        let t = self.cpus[cpu].time;
        let busy = self.cpus[cpu].busy;
        self.platform.set(cpu, t);
        let gfp = Gfp::from_migratetype(match kind {
            MigrateKind::Unmovable => MigrateType::Unmovable,
            MigrateKind::Movable => MigrateType::Movable,
            MigrateKind::Reclaimable => MigrateType::Reclaimable,
        });
        let scanned = self.a.cpu_zonelist_scanned(cpu);
        let r = self.a.alloc_on(cpu, order, gfp, None);
        let fault = if kind == MigrateKind::Movable && r.is_ok() {
            cost.fault_ns
        } else {
            0.0
        };
        // The instructions of every zone the walk checked past the first, as the
        // allocator counted them (`zonelist_scanned`); the first is in `alloc_fast_ns`.
        let checks = (self.a.cpu_zonelist_scanned(cpu) - scanned) as f64;
        self.charge(
            cpu,
            cost.alloc_fast_ns + fault + checks * cost.zone_check_ns,
        );
        self.out.page_ops += 1;
        self.replay(cpu, Call::Alloc, self.cpus[cpu].time);
        let v = &mut self.cpus[cpu];
        v.sys += v.busy - busy;
        Ok(r.ok())
    }

    fn free(&mut self, cpu: usize, f: Frame) -> Result<(), EngineError> {
        let t = self.cpus[cpu].time;
        let busy = self.cpus[cpu].busy;
        self.platform.set(cpu, t);
        self.a.free_on(cpu, f).map_err(|e| {
            EngineError::Contract(format!("cpu {cpu}: free of {f:?} refused: {e:?}"))
        })?;
        self.charge(cpu, self.spec.cost.free_fast_ns);
        self.out.page_ops += 1;
        self.replay(cpu, Call::Free, self.cpus[cpu].time);
        let v = &mut self.cpus[cpu];
        v.sys += v.busy - busy;
        self.release_received(cpu, f);
        Ok(())
    }

    fn touch(&mut self, cpu: usize, f: Frame) -> Result<(), EngineError> {
        let span = self.span(f, f.pages() * pagealloc::PAGE_SIZE as u64);
        self.data(cpu, |m| m.touch(cpu, span, true));
        Ok(())
    }

    fn copy(
        &mut self,
        cpu: usize,
        f: Frame,
        bytes: u32,
        into_block: bool,
    ) -> Result<(), EngineError> {
        let block = self.span(f, u64::from(bytes));
        let user = Span {
            page: user_page(cpu as u32, 0),
            bytes: u64::from(bytes),
            node: self.lines.cpu_node(cpu),
        };
        if into_block {
            self.data(cpu, |m| m.copy(cpu, user, block));
        } else {
            self.data(cpu, |m| m.copy(cpu, block, user));
        }
        Ok(())
    }

    fn compute(&mut self, cpu: usize, ns: u64) {
        self.charge(cpu, ns as f64);
    }

    fn send(&mut self, cpu: usize, to: usize, f: Frame) -> Result<Flow, EngineError> {
        if to >= self.cpus.len() {
            return Err(EngineError::Contract(format!(
                "cpu {cpu}: send to cpu {to} of {}",
                self.cpus.len()
            )));
        }
        if self.inboxes[to].len() + self.unfreed[to].len() >= self.capacity {
            self.blocked_senders[to].push_back(cpu as u32);
            self.park(cpu, Park::Send);
            return Ok(Flow::Blocked);
        }
        self.inboxes[to].push_back(f);
        self.charge(cpu, self.spec.cost.message_ns);
        if self.cpus[to].parked_on == Some(Park::Recv) {
            self.wake(cpu, to);
        }
        self.release_received(cpu, f);
        Ok(Flow::Done)
    }

    fn recv(&mut self, cpu: usize) -> Result<Option<Frame>, EngineError> {
        let Some(f) = self.inboxes[cpu].pop_front() else {
            self.park(cpu, Park::Recv);
            return Ok(None);
        };
        self.charge(cpu, self.spec.cost.message_ns);
        self.unfreed[cpu].push(Some(f.pfn.0));
        Ok(Some(f))
    }

    fn barrier(&mut self, cpu: usize, id: u32) -> Result<Flow, EngineError> {
        self.park(cpu, Park::Barrier);
        self.released = self.barriers.arrive(cpu, id)?;
        Ok(Flow::Blocked)
    }

    fn done(&mut self, cpu: usize) -> Result<(), EngineError> {
        self.barriers.done(cpu)?;
        let v = &mut self.cpus[cpu];
        v.state = State::Done;
        v.end = v.time;
        Ok(())
    }

    fn window_opened(&mut self, cpu: usize) {
        let v = &mut self.cpus[cpu];
        v.measuring = true;
        v.measure_start = v.time;
        if self.measured_after.is_some() && self.window_base.is_none() {
            self.window_base = Some((
                self.a.counters(),
                self.out.cache_alloc_pages,
                self.out.cache_free_pages,
            ));
        }
    }

    fn stamp(&self, cpu: usize) -> u64 {
        self.cpus[cpu].time
    }
}

#[cfg(test)]
mod tests {
    use super::{event_key, round_ns, tick_phase_ns, CPU_BITS, CPU_MASK};

    /// `round_jiffies_common`'s skew at HZ=1000 and a 1 s interval: CPU n 3n ms before
    /// the second, wrapping round it past CPU 333; other HZ scale the jiffy.
    #[test]
    fn decay_ticks_are_skewed_three_jiffies_per_cpu() {
        let s = 1_000_000_000;
        let ms = 1_000_000;
        assert_eq!(tick_phase_ns(0, s, 1000), s);
        assert_eq!(tick_phase_ns(1, s, 1000), s - 3 * ms);
        assert_eq!(tick_phase_ns(7, s, 1000), s - 21 * ms);
        assert_eq!(tick_phase_ns(333, s, 1000), s - 999 * ms);
        assert_eq!(tick_phase_ns(334, s, 1000), s - 2 * ms);
        assert_eq!(tick_phase_ns(1, s, 250), s - 12 * ms);
        assert_eq!(tick_phase_ns(1, 100 * ms, 1000), 97 * ms);
        assert_eq!(tick_phase_ns(40, 100 * ms, 1000), 80 * ms);
        for cpu in 0..1024 {
            let t = tick_phase_ns(cpu, s, 1000);
            assert!(t > 0 && t <= s, "cpu {cpu}: {t}");
        }
    }

    #[test]
    fn round_ns_is_round_as_u64() {
        let mut s = 0x1234_5678u64;
        let mut draw = || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            s
        };
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.499_999_999_999_999_94,
            -0.5,
            -0.4,
            -7.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9_007_199_254_740_993.0,
            1e19,
            1e20,
        ];
        for _ in 0..100_000 {
            let bits = draw();
            xs.push(f64::from_bits(bits));
            xs.push((bits >> 11) as f64 / 1024.0);
            xs.push((bits >> 40) as f64 + 0.5);
        }
        for x in xs {
            assert_eq!(round_ns(x), x.round() as u64, "{x:e}");
        }
    }

    #[test]
    fn event_keys_order_as_time_then_cpu() {
        let pairs = [
            (0u64, 0u32),
            (0, 1),
            (0, 65_535),
            (1, 0),
            (1, 7),
            (999_999_999, 3),
            (1_000_000_000, 2),
            ((1 << 48) - 1, 65_535),
        ];
        for a in pairs {
            for b in pairs {
                assert_eq!(event_key(a.0, a.1).cmp(&event_key(b.0, b.1)), a.cmp(&b));
            }
            let k = event_key(a.0, a.1);
            assert_eq!((k >> CPU_BITS, (k & CPU_MASK) as u32), a);
        }
    }

    #[test]
    #[should_panic(expected = "event key out of range")]
    fn an_event_key_past_48_bits_of_time_panics() {
        event_key(1 << 48, 0);
    }
}
