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
//! [`CpuDriver`], and [`Engine`] is its [`crate::workload::Backend`]. Zone-lock wait
//! and busy time are summed over each CPU's measured window.
//!
//! Files, one concept each: this one the loop and the engine's state; `backend` the
//! ops' effects (the driver's backend); `replay` an allocator call's lines through the
//! caches, the streamer, the fill buffers and the zone locks; `tick` the decay ticks
//! and samples; `reserve` the headroom and page-cache models; `output` what a run
//! gives back.
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

use pagealloc::{Allocator, Config, Counters, Frame, Pfn, Platform};

use super::hierarchy::Hierarchy;
use super::machine::{CostModel, Machine};
use super::overlap::Overlap;
use super::trace::{self, LineMap};
use crate::row::histogram;
use crate::workload::driver::{BarrierTable, ContractError, SlotCell, TraceBlock};
use crate::workload::{CpuDriver, TraceHash, Workload, WorkloadError};

mod backend;
mod output;
mod replay;
mod reserve;
mod tick;

pub(crate) use output::{EngineOutput, LockTally, TripKind};
use replay::Streamer;
pub(crate) use tick::{tick_phase_ns, HZ};

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
    /// (`CostModel::fgraph_ns`), and the CPU pays it after each trip, outside the lock;
    /// holds do not contain it.
    pub(crate) fgraph_timed: bool,
    /// The start state ([`super::start`]): pagesets and free lists; empty: each
    /// pageset starts empty at its initial `high`.
    pub(crate) start: super::start::StartState,
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
    type Slot = FrameSlot;
    fn order(&self) -> u8 {
        self.order
    }
    fn trace_word(&self) -> u64 {
        self.pfn.0
    }
}

/// A driver's slot holding a [`Frame`], in one word: `pfn << 8 | order`, or
/// `u64::MAX` when empty (no frame of the simulator has a PFN of 2^56 or more, nor an
/// order of 255).
#[derive(Clone, Copy, Debug)]
pub struct FrameSlot(u64);

impl SlotCell<Frame> for FrameSlot {
    const EMPTY: Self = FrameSlot(u64::MAX);
    #[inline]
    fn full(f: Frame) -> Self {
        debug_assert!(f.pfn.0 < 1 << 56, "pfn {} in a slot", f.pfn.0);
        FrameSlot(f.pfn.0 << 8 | u64::from(f.order))
    }
    #[inline]
    fn block(self) -> Option<Frame> {
        (self.0 != u64::MAX).then(|| Frame::new(Pfn(self.0 >> 8), self.0 as u8))
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
    /// `predict`: the other processes' ops on the program's CPUs (sim::start).
    background: Option<super::start::Background>,
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
    let a = Allocator::with_platform(&layout, spec.config.clone(), platform.clone())
        .map_err(|e| EngineError::Build(e.to_string()))?;
    // Before the access sink: the start state is no access of the run.
    let (pcp_start, held) = if spec.start.is_empty() {
        (0, Default::default())
    } else {
        super::start::apply(&a, &spec.start).map_err(EngineError::Build)?
    };
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
        background: super::start::Background::of(&spec.start, held),
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
            busy_per_cpu: Vec::new(),
            sleeps: vec![0; n],
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
            pcp_start,
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
    if !spec.start.is_empty() {
        e.base_counters = e.a.counters();
    }
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
    // The sink goes in after the headroom and page-cache models took their blocks: their
    // accesses are no access of the run (they were reported and discarded: 130 k order-10
    // allocations at kbuild's headroom, 2 % of a `sim kbuild` run's instructions).
    e.a.set_access_sink(Arc::new(trace::ThreadSink));
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
    // Signed conversions, unchecked: one instruction each way (an unsigned or a
    // saturating one adds a branch or compares and selects on x86-64).
    // SAFETY: `x` is not NaN and `0 <= x < 2^52` (both tested above), so its truncation
    // is an integer an `i64` holds, which is all `to_int_unchecked` requires. No shared
    // state is touched: no lock is involved.
    let i: i64 = unsafe { x.to_int_unchecked() };
    (i + i64::from(x - i as f64 >= 0.5)) as u64
}

impl Engine<'_> {
    fn run(&mut self, drivers: &mut [CpuDriver<Frame>], name: &str) -> Result<(), EngineError> {
        let mut next = self.heap.pop();
        while let Some(Reverse(k)) = next {
            let (t, c) = (k >> CPU_BITS, (k & CPU_MASK) as u32);
            self.housekeeping(t);
            let cpu = c as usize;
            next = loop {
                self.step(drivers, cpu)?;
                let v = &self.cpus[cpu];
                if v.state != State::Runnable {
                    break self.heap.pop();
                }
                if v.time >> (64 - CPU_BITS) != 0 {
                    return Err(EngineError::Contract(format!(
                        "{name}: virtual time passed {} ns (78 h) on cpu {cpu}: the run is too long for its costs (fewer loops, or smaller --cost values)",
                        1u64 << (64 - CPU_BITS)
                    )));
                }
                let key = event_key(v.time, cpu as u32);
                // Stay on this CPU while it is still the earliest (no heap round trip).
                // Else the earliest is next, and this CPU takes its place in the heap:
                // one sift down instead of a push and a pop (the keys are distinct, so
                // the heap pops the same sequence either way).
                match self.heap.peek() {
                    Some(&Reverse(top)) if top < key => {
                        let mut top = self.heap.peek_mut().expect("peeked");
                        break Some(std::mem::replace(&mut *top, Reverse(key)));
                    }
                    _ => {
                        if v.time >= self.next_tick || v.time >= self.next_sample {
                            self.heap.push(Reverse(key));
                            break self.heap.pop();
                        }
                    }
                }
            };
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

    fn socket(&self, cpu: usize) -> u32 {
        match self.cpus.get(cpu) {
            Some(v) => v.socket,
            None => self.spec.machine.socket_of(cpu as u32),
        }
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
        if let Some(bg) = self
            .background
            .as_mut()
            .filter(|_| drivers[cpu].measuring())
        {
            let m = drivers[cpu].measured();
            bg.run_to(&self.a, cpu, m.allocs.iter().chain(&m.frees).sum());
        }
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

    /// The pagesets' pages, less what `predict`'s background ops put there.
    fn pcp_pages(&self) -> u64 {
        let p = self.a.nr_pcp_pages();
        self.background.as_ref().map_or(p, |b| b.pcp_pages(p))
    }

    fn finish(mut self, drivers: &[CpuDriver<Frame>]) -> EngineOutput {
        let pcp = self.pcp_pages();
        self.out.pcp_peak = self.out.pcp_peak.max(pcp);
        self.out.pcp_final = pcp;
        self.out.huge.2 = super::free_pageblocks(&self.a);
        // Every replayed line, and nothing else, is a line access of the hierarchy.
        self.out.meta_levels = self.mem.counters().lines;
        let (base, cache_alloc, cache_free) =
            self.window_base.unwrap_or((self.base_counters, 0, 0));
        self.out.counters = self.a.counters().since(&base);
        if let Some(bg) = &self.background {
            self.out.counters = self.out.counters.since(bg.counters());
        }
        self.out.cache_alloc_pages -= cache_alloc;
        self.out.cache_free_pages -= cache_free;
        self.out.makespan_ns = self.cpus.iter().map(|v| v.end).max().unwrap_or(0);
        self.out.lock_wait_ns = self.cpus.iter().map(|v| v.wait).sum();
        self.out.busy_per_cpu = self.cpus.iter().map(|v| v.busy).collect();
        self.out.busy_ns = self.out.busy_per_cpu.iter().sum();
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
}

#[cfg(test)]
mod tests {
    use super::{event_key, round_ns, CPU_BITS, CPU_MASK};

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
