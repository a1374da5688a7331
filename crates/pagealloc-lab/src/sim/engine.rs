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
//! - a fast-path allocation or free: a constant (plus the rest of a page fault for a
//!   movable allocation);
//! - each zone-lock trip the op made (learned from the allocator's counters: the CPU's
//!   `zone_lock` count, [`pagealloc::Allocator::cpu_zone_lock_count`], tells a pcp hit
//!   from a trip; the per-(CPU, zone) deltas of
//!   [`pagealloc::Allocator::cpu_zone_counters`] tell what the trip moved): the lock is a resource in virtual
//!   time (`free_at`); a CPU arriving before `free_at` waits (that wait is the zone-lock
//!   %); the hold is a fixed trip cost plus a cost per block moved plus a hand-off cost
//!   when the previous holder was another CPU (same socket or not);
//! - a touch: hot or cold per page, from the [`CacheModel`];
//! - a compute: its duration; a send or receive: a message cost.
//!
//! Blocked ops (`Recv` on an empty inbox, `Send` to a full one, `Barrier`) park the CPU
//! off the heap; the CPU that unblocks it wakes it at its own time. Every tick interval
//! of virtual time each CPU gets [`pagealloc::Allocator::tick`] (decay), and the total of
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
//! CPU they run on. There is no scheduler: a CPU runs one script, never migrates, and
//! never idles except when blocked.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use pagealloc::{Allocator, Config, Counters, Frame, Gfp, MigrateType, Platform};

use super::cache::CacheModel;
use super::machine::{CostModel, Machine};
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
    /// Page touches (base pages) and how many were cold.
    pub(crate) touched_pages: u64,
    pub(crate) cold_pages: u64,
    /// Zone-lock trip hold times of refills/direct allocations and of drains/direct
    /// frees in the measured window, ns.
    pub(crate) alloc_trips: Histogram<u64>,
    pub(crate) free_trips: Histogram<u64>,
    /// Allocator counters over the measured window (all CPUs).
    pub(crate) counters: Counters,
    /// Largest and last sampled total of pages on per-CPU lists.
    pub(crate) pcp_peak: u64,
    pub(crate) pcp_final: u64,
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
    wait: u64,
    state: State,
    parked_on: Option<Park>,
    measuring: bool,
    measure_start: u64,
    end: u64,
    socket: u32,
    home_zone: usize,
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
}

/// What an op did under zone locks, from counter deltas.
#[derive(Clone, Copy, Debug, Default)]
struct Trips {
    trips: u64,
    alloc_units: u64,
    free_units: u64,
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
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    inboxes: Vec<VecDeque<Frame>>,
    capacity: usize,
    /// Per destination inbox: senders blocked on it, FIFO.
    blocked_senders: Vec<VecDeque<u32>>,
    barriers: BarrierTable,
    /// CPUs released by the barrier that just opened, for the loop to complete.
    released: Vec<usize>,
    measured_after: Option<u32>,
    /// Counters and page-cache totals when the measured barrier opened.
    window_base: Option<(Counters, u64, u64)>,
    locks: Vec<ZoneLock>,
    /// Counter snapshots per (machine CPU, zone): deltas are taken against them.
    snaps: Vec<Counters>,
    nzones: usize,
    cache: CacheModel,
    out: EngineOutput,
    next_tick: u64,
    tick_ns: u64,
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
    let nzones = a.nr_zones();
    let frames = layout.zones().map(|(_, z)| z.end_pfn()).max().unwrap_or(0);
    let n = scripts.len();
    let cpus: Vec<VCpu> = (0..n)
        .map(|i| {
            let node = a.cpu_node(i).expect("cpu_node: index in range");
            VCpu {
                time: 0,
                busy: 0,
                wait: 0,
                state: State::Runnable,
                parked_on: None,
                measuring: false,
                measure_start: 0,
                end: 0,
                socket: spec.machine.socket_of(i as u32),
                home_zone: *a.node_zones(node).last().expect("every node has a zone"),
            }
        })
        .collect();
    let tick_ns = spec.config.tick_interval_ms.max(1) * 1_000_000;
    let mcpus = a.nr_cpus();
    let mut e = Engine {
        spec,
        platform,
        heap: (0..n as u32).map(|c| Reverse((0, c))).collect(),
        inboxes: vec![VecDeque::new(); n],
        capacity: workload.inbox_capacity(),
        blocked_senders: vec![VecDeque::new(); n],
        barriers: BarrierTable::new(n),
        released: Vec::new(),
        measured_after: workload.measured_after(),
        window_base: None,
        locks: vec![
            ZoneLock {
                free_at: 0,
                last_cpu: NO_CPU,
                last_socket: NO_CPU,
            };
            nzones
        ],
        snaps: (0..mcpus * nzones)
            .map(|i| {
                a.cpu_zone_counters(i / nzones, i % nzones)
                    .expect("cpu_zone_counters: index in range")
            })
            .collect(),
        nzones,
        cache: CacheModel::new(mcpus, spec.machine.llc_slice_bytes(), frames),
        cpus,
        a,
        out: EngineOutput {
            measured_per_cpu: Vec::new(),
            per_cpu: Vec::new(),
            measure_start: Vec::new(),
            end: Vec::new(),
            lock_wait_ns: 0,
            busy_ns: 0,
            touched_pages: 0,
            cold_pages: 0,
            alloc_trips: histogram(),
            free_trips: histogram(),
            counters: Counters::default(),
            pcp_peak: 0,
            pcp_final: 0,
            ops: 0,
            page_ops: 0,
            trace_hash: 0,
            makespan_ns: 0,
            cache_alloc_pages: 0,
            cache_free_pages: 0,
            reclaims: 0,
            cache_final_pages: 0,
            held_pages: 0,
        },
        next_tick: tick_ns,
        tick_ns,
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
        for (i, s) in e.snaps.iter_mut().enumerate() {
            *s =
                e.a.cpu_zone_counters(i / nzones, i % nzones)
                    .expect("cpu_zone_counters: index in range");
        }
    }
    if spec.page_cache {
        for z in 0..nzones {
            e.page_cache_grow(z);
        }
    }
    let mut drivers = CpuDriver::for_scripts(scripts, spec.seed, workload.measured_after());
    e.run(&mut drivers, workload.name())?;
    Ok(e.finish(&drivers))
}

impl Engine<'_> {
    fn run(&mut self, drivers: &mut [CpuDriver<Frame>], name: &str) -> Result<(), EngineError> {
        while let Some(Reverse((t, c))) = self.heap.pop() {
            self.housekeeping(t);
            let mut cpu = c as usize;
            loop {
                self.step(drivers, cpu)?;
                let v = &self.cpus[cpu];
                if v.state != State::Runnable {
                    break;
                }
                let key = (v.time, cpu as u32);
                // Stay on this CPU while it is still the earliest (no heap round trip).
                match self.heap.peek() {
                    Some(&Reverse(top)) if top < key => {
                        self.heap.push(Reverse(key));
                        break;
                    }
                    _ => {
                        if key.0 >= self.next_tick || key.0 >= self.next_sample {
                            self.heap.push(Reverse(key));
                            break;
                        }
                        cpu = key.1 as usize;
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
                if self.spec.page_cache {
                    for z in 0..self.nzones {
                        self.page_cache_reclaim(z, self.next_sample);
                        self.page_cache_grow(z);
                    }
                }
                self.next_sample += self.spec.sample_ns.max(1);
            } else {
                let now = self.next_tick;
                for cpu in 0..self.a.nr_cpus() {
                    self.platform.set(cpu, now);
                    self.a.tick(cpu);
                    for z in 0..self.nzones {
                        let t = self.trips(cpu, z, 0);
                        for _ in 0..t.trips {
                            // A decay drain: occupies the lock; its CPU is not delayed.
                            let hold = self.hold_ns(
                                cpu as u32,
                                self.socket(cpu),
                                z,
                                0,
                                t.free_units / t.trips.max(1),
                            );
                            let socket = self.socket(cpu);
                            let l = &mut self.locks[z];
                            l.free_at = l.free_at.max(now) + hold;
                            l.last_cpu = cpu as u32;
                            l.last_socket = socket;
                        }
                    }
                }
                self.next_tick += self.tick_ns;
            }
        }
    }

    fn socket(&self, cpu: usize) -> u32 {
        self.spec.machine.socket_of(cpu as u32)
    }

    /// Counter deltas of `cpu` in `zone` since the last look. `order` is the order of the
    /// op's block (a refill of order `k` moves `pages >> k` blocks).
    fn trips(&mut self, cpu: usize, zone: usize, order: u8) -> Trips {
        let now = self
            .a
            .cpu_zone_counters(cpu, zone)
            .expect("cpu_zone_counters: index in range");
        let snap = &mut self.snaps[cpu * self.nzones + zone];
        if now.zone_lock == snap.zone_lock {
            *snap = now;
            return Trips::default();
        }
        let d = now.since(snap);
        *snap = now;
        let direct_allocs = d.alloc_direct;
        let direct_frees = d.free_direct;
        Trips {
            trips: d.zone_lock,
            alloc_units: (d.pcp_refill_pages >> order) + direct_allocs,
            free_units: d.pcp_drain_pages + direct_frees,
        }
    }

    /// Hold time of one trip by `cpu` on zone `z` moving the given units.
    fn hold_ns(&self, cpu: u32, socket: u32, z: usize, alloc_units: u64, free_units: u64) -> u64 {
        let c = &self.spec.cost;
        let l = &self.locks[z];
        let handoff = if l.last_cpu == cpu || l.last_cpu == NO_CPU {
            0.0
        } else if l.last_socket == socket {
            c.handoff_socket_ns
        } else {
            c.handoff_remote_ns
        };
        let mut hold = handoff;
        if alloc_units > 0 || free_units == 0 {
            hold += c.refill_trip_ns + alloc_units as f64 * c.refill_block_ns;
        }
        if free_units > 0 {
            hold += c.drain_trip_ns + free_units as f64 * c.drain_page_ns;
        }
        hold.round() as u64
    }

    /// Charges the zone-lock trips `t` of zone `z` to `cpu`, starting at its clock.
    fn charge_trips(&mut self, cpu: usize, z: usize, t: Trips) {
        if t.trips == 0 {
            return;
        }
        if self.spec.page_cache {
            let now = self.cpus[cpu].time;
            self.page_cache_reclaim(z, now);
        }
        let socket = self.cpus[cpu].socket;
        for k in 0..t.trips {
            // Spread the units over the trips (usually exactly one).
            let share = |u: u64| u / t.trips + u64::from(k < u % t.trips);
            let (au, fu) = (share(t.alloc_units), share(t.free_units));
            let hold = self.hold_ns(cpu as u32, socket, z, au, fu);
            let v = &mut self.cpus[cpu];
            let l = &mut self.locks[z];
            let start = v.time.max(l.free_at);
            let wait = start - v.time;
            l.free_at = start + hold;
            l.last_cpu = cpu as u32;
            l.last_socket = socket;
            v.time = start + hold;
            if !v.measuring {
                continue;
            }
            v.busy += wait + hold;
            v.wait += wait;
            let h = if fu > 0 && au == 0 {
                &mut self.out.free_trips
            } else {
                &mut self.out.alloc_trips
            };
            record_ns(h, hold);
        }
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
            match self
                .a
                .alloc_on(cpu, 10, Gfp::USER | Gfp::NORETRY, Some(info.node))
            {
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
        let cpu = self.cache_cpu[z];
        self.snaps[cpu * self.nzones + z] = self
            .a
            .cpu_zone_counters(cpu, z)
            .expect("cpu_zone_counters: index in range");
    }

    /// kswapd: when zone `z`'s free pages fell below the low watermark, reclaim page
    /// cache (free its blocks) until they reach the high watermark. The frees occupy the
    /// zone lock from `now`.
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
        self.snaps[cpu * self.nzones + z] = self
            .a
            .cpu_zone_counters(cpu, z)
            .expect("cpu_zone_counters: index in range");
        let c = &self.spec.cost;
        let hold = (c.drain_trip_ns + blocks as f64 * c.drain_page_ns).round() as u64;
        let l = &mut self.locks[z];
        l.free_at = l.free_at.max(now) + hold;
        l.last_cpu = NO_CPU - 1;
        l.last_socket = NO_CPU;
    }

    /// Charges `ns` of work to `cpu`'s clock (and, in its measured window, its CPU time).
    fn charge(&mut self, cpu: usize, ns: f64) {
        let ns = ns.round() as u64;
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
                    self.heap.push(Reverse((self.cpus[w].time, w as u32)));
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

    fn wake(&mut self, cpu: usize, now: u64) {
        let v = &mut self.cpus[cpu];
        v.state = State::Runnable;
        v.parked_on = None;
        v.time = v.time.max(now);
        self.heap.push(Reverse((v.time, cpu as u32)));
    }

    fn finish(mut self, drivers: &[CpuDriver<Frame>]) -> EngineOutput {
        let pcp = self.a.nr_pcp_pages();
        self.out.pcp_peak = self.out.pcp_peak.max(pcp);
        self.out.pcp_final = pcp;
        let (base, cache_alloc, cache_free) =
            self.window_base.unwrap_or((self.base_counters, 0, 0));
        self.out.counters = self.a.counters().since(&base);
        self.out.cache_alloc_pages -= cache_alloc;
        self.out.cache_free_pages -= cache_free;
        self.out.makespan_ns = self.cpus.iter().map(|v| v.end).max().unwrap_or(0);
        self.out.lock_wait_ns = self.cpus.iter().map(|v| v.wait).sum();
        self.out.busy_ns = self.cpus.iter().map(|v| v.busy).sum();
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
        self.platform.set(cpu, t);
        let trips_before = self.a.cpu_zone_lock_count(cpu);
        let gfp = Gfp::from_migratetype(match kind {
            MigrateKind::Unmovable => MigrateType::Unmovable,
            MigrateKind::Movable => MigrateType::Movable,
            MigrateKind::Reclaimable => MigrateType::Reclaimable,
        });
        let r = self.a.alloc_on(cpu, order, gfp, None);
        let fault = if kind == MigrateKind::Movable && r.is_ok() {
            cost.fault_ns
        } else {
            0.0
        };
        self.charge(cpu, cost.alloc_fast_ns + fault);
        self.out.page_ops += 1;
        // The CPU's zone_lock count did not move: a pcp hit, no trip to charge.
        let locked = self.a.cpu_zone_lock_count(cpu) != trips_before;
        let home = self.cpus[cpu].home_zone;
        if locked {
            let tz = self.trips(cpu, home, order);
            self.charge_trips(cpu, home, tz);
        }
        match r {
            Ok(f) => {
                let z = self
                    .a
                    .zone_of_pfn(f.pfn)
                    .expect("allocated frame has a zone");
                if locked && z != home {
                    let tz = self.trips(cpu, z, order);
                    self.charge_trips(cpu, z, tz);
                }
                Ok(Some(f))
            }
            Err(_) => {
                for z in 0..self.nzones {
                    if z != home {
                        let tz = self.trips(cpu, z, order);
                        self.charge_trips(cpu, z, tz);
                    }
                }
                Ok(None)
            }
        }
    }

    fn free(&mut self, cpu: usize, f: Frame) -> Result<(), EngineError> {
        let t = self.cpus[cpu].time;
        self.platform.set(cpu, t);
        let trips_before = self.a.cpu_zone_lock_count(cpu);
        self.a.free_on(cpu, f).map_err(|e| {
            EngineError::Contract(format!("cpu {cpu}: free of {f:?} refused: {e:?}"))
        })?;
        self.charge(cpu, self.spec.cost.free_fast_ns);
        self.out.page_ops += 1;
        if self.a.cpu_zone_lock_count(cpu) != trips_before {
            let z = self.a.zone_of_pfn(f.pfn).expect("freed frame has a zone");
            let tz = self.trips(cpu, z, f.order);
            self.charge_trips(cpu, z, tz);
        }
        Ok(())
    }

    fn touch(&mut self, cpu: usize, f: Frame) -> Result<(), EngineError> {
        let cost = self.spec.cost;
        let pages = f.pages();
        let hot = self.cache.touch(cpu, f.pfn.0, pages);
        let cold = pages - hot;
        if self.cpus[cpu].measuring {
            self.out.touched_pages += pages;
            self.out.cold_pages += cold;
        }
        self.charge(
            cpu,
            hot as f64 * cost.touch_hot_ns + cold as f64 * cost.touch_cold_ns,
        );
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
        if self.inboxes[to].len() >= self.capacity {
            self.blocked_senders[to].push_back(cpu as u32);
            self.park(cpu, Park::Send);
            return Ok(Flow::Blocked);
        }
        self.inboxes[to].push_back(f);
        self.charge(cpu, self.spec.cost.message_ns);
        let now = self.cpus[cpu].time;
        if self.cpus[to].parked_on == Some(Park::Recv) {
            self.wake(to, now);
        }
        Ok(Flow::Done)
    }

    fn recv(&mut self, cpu: usize) -> Result<Option<Frame>, EngineError> {
        let Some(f) = self.inboxes[cpu].pop_front() else {
            self.park(cpu, Park::Recv);
            return Ok(None);
        };
        self.charge(cpu, self.spec.cost.message_ns);
        let now = self.cpus[cpu].time;
        if let Some(s) = self.blocked_senders[cpu].pop_front() {
            self.wake(s as usize, now);
        }
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
