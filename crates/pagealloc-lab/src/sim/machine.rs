//! The machines of the seed measurements, as data, and their cost parameters.
//!
//! # Design
//! A [`Machine`] is plain data: CPUs, sockets, NUMA nodes, memory per node, LLC per
//! socket, and a [`CostModel`]. [`Machine::layout`] turns it into the core's
//! [`Layout`]: one Normal zone per node, CPUs numbered socket by socket (CPU `c` is on
//! socket `c / cpus_per_socket`), each with an LLC slice of `llc_per_socket /
//! cpus_per_socket` bytes (what Linux's `update_per_cpu_data_slice_size` computes).
//!
//! # Memory scaling
//! The simulator keeps 16 bytes of metadata per simulated frame plus 8 bytes of cache
//! model per frame (touched lazily), so 512 GiB costs about 2 GiB of real memory and is
//! the default (`mem_scale = 1`). A scale factor `s > 1` divides every node's memory by
//! `s`. The core computes watermarks and `high` from the managed pages, so with scaling
//! the *ratios* stay (watermarks ∝ managed, high_min ∝ low watermark / CPUs, high_max ∝
//! managed / 8 / CPUs, pages per CPU ∝ managed / CPUs), but their absolute sizes relative
//! to `batch` (63 for any zone above 1 GiB) shrink by `s`. Every run prints the factor.

use pagealloc::Layout;

use crate::workload::DefaultCpus;

/// Bytes per GiB.
const GIB: u64 = 1 << 30;
/// Bytes per MiB.
const MIB: u64 = 1 << 20;

/// The cost of each simulated event, in nanoseconds of virtual time. See
/// `docs/sim-cost-model.md` for the source of every value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// The instructions of an allocation's fast path (pcp trylock, list pop, counters),
    /// ns; the memory it touches is charged through the cache hierarchy.
    pub alloc_fast_ns: f64,
    /// The instructions of a free's fast path, ns; its memory as above.
    pub free_fast_ns: f64,
    /// The instructions of one zone a zonelist walk checks past the first (the loop
    /// body and `zone_watermark_fast` of a zone found full), at the fast path's ns per
    /// instruction; charged per entry of the allocator's own `zonelist_scanned` counter,
    /// as CPU time outside the lock; the lines it reads go through the hierarchy. ns.
    /// Measured, not fitted: 98 instructions per extra zone (`examples/hotpath`,
    /// `full3` − `full1`) × (`alloc_fast_ns` + `free_fast_ns`) / 254 instructions of
    /// the order-0 pair (docs/sim-cost-model.md §3).
    pub zone_check_ns: f64,
    /// The rest of a page fault around a movable (user) allocation: trap, page-table
    /// update, accounting, return; charged once per movable allocation, ns.
    pub fault_ns: f64,
    /// Fixed cost per zone-lock trip of a refill (`rmqueue_bulk`) or a direct allocation:
    /// what a trip costs beyond the lines it touches (the lock taken and released with
    /// interrupts saved and restored, the set-up, function calls), ns. Measured on the
    /// live kernel ([`LIVE_TRIP_NS`]), not fitted.
    pub refill_trip_ns: f64,
    /// The same for a drain (`free_pcppages_bulk`) or a direct free, ns. Measured.
    pub drain_trip_ns: f64,
    /// Instructions per allocator line accessed under the zone lock (list and counter
    /// updates around each access), ns. Fitted: the batch sweep's slope left after the
    /// lines' own latencies.
    pub locked_line_ns: f64,
    /// Extra hold time when the lock was last held by another CPU of the same socket:
    /// the lock's and the zone's cache lines move (hand-off), ns.
    pub handoff_socket_ns: f64,
    /// Extra hold time when the lock was last held by a CPU of another socket, ns.
    pub handoff_remote_ns: f64,
    /// Passing a block to another CPU (`Send`) or taking one (`Recv`): a few cache-line
    /// transfers, ns.
    pub message_ns: f64,
    /// Waking a task that sleeps in `sendmsg`/`recvmsg` on another CPU, paid by the
    /// waker: `try_to_wake_up` and the IPI it sends, ns.
    pub wake_ns: f64,
    /// From that wakeup to the sleeper's CPU running again: the IPI's delivery and the
    /// exit from the shallow idle state a short sleep uses (C1); idle time, ns.
    pub wakeup_ns: f64,
    /// The sleeper's context switches (out to the idle task when it blocks, back in
    /// when woken), paid by the sleeper once per sleep, ns.
    pub switch_ns: f64,
    /// The function_graph tracer's own cost inside the window it times, per traced
    /// call (the entry event written after the call time is taken, the return
    /// trampoline before the return time is), ns: fitted to the batch sweep, what its
    /// published latencies hold beyond the trips' measured cost and their lines. Only a
    /// run that models a function_graph measurement ([`super::fgraph_timed`]: the batch
    /// sweep) adds it, to each trip latency it reports and to the CPU's time after the
    /// trip; never to a hold.
    pub fgraph_ns: f64,
}

/// Largest value of every cost parameter (`--cost KEY=VALUE`), ns: one millisecond per
/// event, about a thousand times the slowest event the model charges (a wakeup or a
/// page fault, a few µs). Beyond it one event's cost alone would be a sizeable part of a
/// run, and a run's virtual time could pass the engine's 2^48 ns (78 h) limit.
pub const MAX_COST_NS: f64 = 1e6;

impl CostModel {
    /// The names of the parameters, in declaration order (for `--cost key=value`).
    pub const KEYS: &'static [&'static str] = &[
        "alloc_fast_ns",
        "free_fast_ns",
        "zone_check_ns",
        "fault_ns",
        "refill_trip_ns",
        "drain_trip_ns",
        "locked_line_ns",
        "handoff_socket_ns",
        "handoff_remote_ns",
        "message_ns",
        "wake_ns",
        "wakeup_ns",
        "switch_ns",
        "fgraph_ns",
    ];

    /// The parameters as `(name, value)`, in [`CostModel::KEYS`] order.
    pub fn list(&self) -> [(&'static str, f64); 14] {
        [
            ("alloc_fast_ns", self.alloc_fast_ns),
            ("free_fast_ns", self.free_fast_ns),
            ("zone_check_ns", self.zone_check_ns),
            ("fault_ns", self.fault_ns),
            ("refill_trip_ns", self.refill_trip_ns),
            ("drain_trip_ns", self.drain_trip_ns),
            ("locked_line_ns", self.locked_line_ns),
            ("handoff_socket_ns", self.handoff_socket_ns),
            ("handoff_remote_ns", self.handoff_remote_ns),
            ("message_ns", self.message_ns),
            ("wake_ns", self.wake_ns),
            ("wakeup_ns", self.wakeup_ns),
            ("switch_ns", self.switch_ns),
            ("fgraph_ns", self.fgraph_ns),
        ]
    }

    /// Sets one parameter by name.
    ///
    /// # Errors
    /// An unknown key (the message lists the valid ones) or a value that is not a number
    /// in `0..=`[`MAX_COST_NS`].
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), MachineError> {
        let bad = || MachineError::BadCost {
            key: key.trim().to_owned(),
            value: value.trim().to_owned(),
        };
        let v: f64 = value.trim().parse().map_err(|_| bad())?;
        if !(0.0..=MAX_COST_NS).contains(&v) {
            return Err(bad());
        }
        let field = match key.trim() {
            "alloc_fast_ns" => &mut self.alloc_fast_ns,
            "free_fast_ns" => &mut self.free_fast_ns,
            "zone_check_ns" => &mut self.zone_check_ns,
            "fault_ns" => &mut self.fault_ns,
            "refill_trip_ns" => &mut self.refill_trip_ns,
            "drain_trip_ns" => &mut self.drain_trip_ns,
            "locked_line_ns" => &mut self.locked_line_ns,
            "handoff_socket_ns" => &mut self.handoff_socket_ns,
            "handoff_remote_ns" => &mut self.handoff_remote_ns,
            "message_ns" => &mut self.message_ns,
            "wake_ns" => &mut self.wake_ns,
            "wakeup_ns" => &mut self.wakeup_ns,
            "switch_ns" => &mut self.switch_ns,
            "fgraph_ns" => &mut self.fgraph_ns,
            other => return Err(MachineError::UnknownCost(other.to_owned())),
        };
        *field = v;
        Ok(())
    }

    /// Applies `key=value[,key=value…]`.
    ///
    /// # Errors
    /// As [`CostModel::set`], or an item without `=`.
    pub fn apply(&mut self, spec: &str) -> Result<(), MachineError> {
        for item in spec.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| MachineError::CostSyntax(item.to_owned()))?;
            self.set(k, v)?;
        }
        Ok(())
    }
}

/// The fixed cost of one zone-lock trip on the live kernel, refill and drain, ns: what a
/// trip costs beyond its blocks (the lock with interrupts saved and restored, the set-up,
/// the first block's extra), from the recorder's timestamps of trips of 63–206 blocks in
/// page_fault1 on this project's 2-vCPU AMD EPYC guest (Linux 6.18), the median of 14
/// and 11 recordings ([`super::calibrate::live`], docs/sim-cost-model.md §4.1).
pub const LIVE_TRIP_NS: (f64, f64) = (280.0, 241.0);

/// The clock [`LIVE_TRIP_NS`] was measured at (the guest's TSC rate), GHz; the
/// published machines take it at the ratio of their clocks.
pub const LIVE_GHZ: f64 = 2.6;

/// Instructions of one extra zone checked and found full by a zonelist walk, measured
/// with callgrind on `examples/hotpath` (`full3` − `full1`, per pair, / 2).
pub const ZONE_CHECK_INSNS: f64 = 98.0;

/// Instructions of the checked order-0 allocate+free pair on a pcp hit (`examples/hotpath`
/// under callgrind), the instructions `alloc_fast_ns` + `free_fast_ns` stand for.
pub const FAST_PAIR_INSNS: f64 = 254.0;

/// `zone_check_ns` on SPR and ICX: [`ZONE_CHECK_INSNS`] at the fast path's ns per
/// instruction, (60 + 50 ns) / [`FAST_PAIR_INSNS`] = 0.433 ns, so 42.4 ns; other
/// machines scale it as they scale the fast path. docs/sim-cost-model.md §3.
pub const ZONE_CHECK_NS: f64 = ZONE_CHECK_INSNS * (60.0 + 50.0) / FAST_PAIR_INSNS;

/// The batch sweep's fit ([`super::calibrate::fit_trip_residuals`], `pagealloc
/// calibrate --sweep`, seed 1): instructions per line under the lock and
/// function_graph's in-window cost per timed trip, SPR and ICX, ns.
pub const SPR_LOCKED_LINE_NS: f64 = 2.21;
/// See [`SPR_LOCKED_LINE_NS`].
pub const SPR_FGRAPH_NS: f64 = 625.1;
/// See [`SPR_LOCKED_LINE_NS`].
pub const ICX_LOCKED_LINE_NS: f64 = 1.98;
/// See [`SPR_LOCKED_LINE_NS`].
pub const ICX_FGRAPH_NS: f64 = 461.7;

/// Sapphire Rapids (Xeon 8480+ class, 2 sockets, 224 threads, 2.0 GHz). The trips'
/// fixed costs are the live kernel's ([`LIVE_TRIP_NS`]) at the clocks' ratio; the
/// per-line cost and the tracer's cost are the least-squares fit of the published
/// batch sweep (see [`super::calibrate`]); the hand-off and touch costs are fitted to
/// the kbuild table or taken from typical figures (docs/sim-cost-model.md says which).
pub const SPR_COST: CostModel = CostModel {
    alloc_fast_ns: 60.0,
    free_fast_ns: 50.0,
    zone_check_ns: ZONE_CHECK_NS,
    fault_ns: 1500.0,
    refill_trip_ns: LIVE_TRIP_NS.0 * LIVE_GHZ / 2.0,
    drain_trip_ns: LIVE_TRIP_NS.1 * LIVE_GHZ / 2.0,
    locked_line_ns: SPR_LOCKED_LINE_NS,
    handoff_socket_ns: 120.0,
    handoff_remote_ns: 300.0,
    message_ns: 120.0,
    wake_ns: 600.0,
    wakeup_ns: 1_500.0,
    switch_ns: 500.0,
    fgraph_ns: SPR_FGRAPH_NS,
};

/// Ice Lake (Xeon 8358 class, 2 sockets, 128 threads): batch-sweep fit as for SPR.
pub const ICX_COST: CostModel = CostModel {
    alloc_fast_ns: 60.0,
    free_fast_ns: 50.0,
    zone_check_ns: ZONE_CHECK_NS,
    fault_ns: 1012.0,
    refill_trip_ns: LIVE_TRIP_NS.0 * LIVE_GHZ / 2.6,
    drain_trip_ns: LIVE_TRIP_NS.1 * LIVE_GHZ / 2.6,
    locked_line_ns: ICX_LOCKED_LINE_NS,
    handoff_socket_ns: 110.0,
    handoff_remote_ns: 280.0,
    message_ns: 110.0,
    wake_ns: 600.0,
    wakeup_ns: 1_500.0,
    switch_ns: 500.0,
    fgraph_ns: ICX_FGRAPH_NS,
};

/// Skylake-SP (2 sockets, 112 threads): no calibration data; Ice Lake's values scaled
/// by 1.15 (older core, slower uncore).
pub const SKX_COST: CostModel = scaled(ICX_COST, 1.15);

/// SGI Altix-class NUMA (28 nodes of 2 CPUs, 2006): no calibration data; Ice Lake's
/// values scaled by 3 (1.5 GHz in-order cores, a NUMAlink interconnect).
pub const SN2_COST: CostModel = scaled(ICX_COST, 3.0);

/// A desktop (8 CPUs, one socket): no calibration data; Ice Lake's values with a
/// cheaper hand-off (one small ring).
pub const DESKTOP_COST: CostModel = CostModel {
    handoff_socket_ns: 60.0,
    handoff_remote_ns: 60.0,
    ..ICX_COST
};

const fn scaled(c: CostModel, k: f64) -> CostModel {
    CostModel {
        alloc_fast_ns: c.alloc_fast_ns * k,
        free_fast_ns: c.free_fast_ns * k,
        zone_check_ns: c.zone_check_ns * k,
        fault_ns: c.fault_ns * k,
        refill_trip_ns: c.refill_trip_ns * k,
        drain_trip_ns: c.drain_trip_ns * k,
        locked_line_ns: c.locked_line_ns * k,
        handoff_socket_ns: c.handoff_socket_ns * k,
        handoff_remote_ns: c.handoff_remote_ns * k,
        message_ns: c.message_ns * k,
        wake_ns: c.wake_ns * k,
        wakeup_ns: c.wakeup_ns * k,
        switch_ns: c.switch_ns * k,
        fgraph_ns: c.fgraph_ns * k,
    }
}

/// One machine's cache hierarchy and memory latencies, from published hardware figures
/// (docs/sim-cost-model.md, "The cache hierarchy", cites each). Latencies are unloaded
/// load-to-use times of one 64-byte line; the LLC's capacity is
/// [`Machine::llc_per_socket`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheSpec {
    /// Core clock the cycle counts are converted with, GHz.
    pub ghz: f64,
    /// Hardware threads per core: each CPU (thread) gets `1 / threads_per_core` of its
    /// core's L1 and L2.
    pub threads_per_core: u32,
    /// L1 data cache per core, bytes.
    pub l1_bytes: u64,
    /// L1 hit latency, cycles.
    pub l1_cycles: f64,
    /// L2 per core, bytes.
    pub l2_bytes: u64,
    /// L2 hit latency, cycles.
    pub l2_cycles: f64,
    /// Bytes per cycle one core streams to or from its L1 and L2 (page zeroing and copies
    /// of lines found there).
    pub l1_l2_bytes_per_cycle: f64,
    /// LLC hit (the line is in this socket's LLC, clean), ns.
    pub llc_ns: f64,
    /// The line is modified in another core's private cache of this socket: a snoop
    /// (HITM) and a core-to-core transfer, ns.
    pub peer_ns: f64,
    /// The line is in a cache of another socket: a cross-socket transfer, ns.
    pub remote_cache_ns: f64,
    /// DRAM of the CPU's own node, ns.
    pub dram_local_ns: f64,
    /// DRAM of another node, ns.
    pub dram_remote_ns: f64,
    /// Line transfers one core keeps in flight when it streams from beyond its L2
    /// (L2 miss queue with the streamer prefetching): streaming bandwidth from a level is
    /// `mlp × 64 B / latency` (Little's law).
    pub mlp: f64,
    /// L1D misses one core keeps in flight (line fill buffers), shared by its hardware
    /// threads: how many independent allocator misses overlap (`sim/overlap.rs`).
    pub fill_buffers: u32,
    /// Misses one core's L2 keeps in flight to the LLC and beyond (the L2 miss queue),
    /// shared by its hardware threads.
    pub l2_misses: u32,
}

impl CacheSpec {
    /// L1 hit, ns.
    pub fn l1_ns(&self) -> f64 {
        self.l1_cycles / self.ghz
    }

    /// L2 hit, ns.
    pub fn l2_ns(&self) -> f64 {
        self.l2_cycles / self.ghz
    }
}

/// Sapphire Rapids, Xeon Platinum 8480+ (56 cores, 112 threads per socket, 105 MiB LLC).
pub const SPR_CACHES: CacheSpec = CacheSpec {
    ghz: 2.0,
    threads_per_core: 2,
    l1_bytes: 48 << 10,
    l1_cycles: 5.0,
    l2_bytes: 2 << 20,
    l2_cycles: 16.0,
    l1_l2_bytes_per_cycle: 32.0,
    llc_ns: 33.0,
    peer_ns: 60.0,
    remote_cache_ns: 160.0,
    dram_local_ns: 110.0,
    dram_remote_ns: 190.0,
    mlp: 32.0,
    fill_buffers: 16,
    l2_misses: 48,
};

/// Ice Lake-SP, Xeon Platinum 8358 class (32 cores, 64 threads per socket, 48 MiB LLC).
pub const ICX_CACHES: CacheSpec = CacheSpec {
    ghz: 2.6,
    threads_per_core: 2,
    l1_bytes: 48 << 10,
    l1_cycles: 5.0,
    l2_bytes: 1280 << 10,
    l2_cycles: 14.0,
    l1_l2_bytes_per_cycle: 32.0,
    llc_ns: 23.0,
    peer_ns: 50.0,
    remote_cache_ns: 120.0,
    dram_local_ns: 95.0,
    dram_remote_ns: 145.0,
    mlp: 16.0,
    fill_buffers: 12,
    l2_misses: 32,
};

/// Skylake-SP, Xeon Platinum 8180 class (28 cores, 56 threads per socket, 38.5 MiB LLC).
pub const SKX_CACHES: CacheSpec = CacheSpec {
    ghz: 2.5,
    threads_per_core: 2,
    l1_bytes: 32 << 10,
    l1_cycles: 5.0,
    l2_bytes: 1 << 20,
    l2_cycles: 14.0,
    l1_l2_bytes_per_cycle: 32.0,
    llc_ns: 26.0,
    peer_ns: 50.0,
    remote_cache_ns: 120.0,
    dram_local_ns: 90.0,
    dram_remote_ns: 140.0,
    mlp: 16.0,
    fill_buffers: 10,
    l2_misses: 32,
};

/// SGI Altix (sn2): Itanium 2 "Madison" 1.5 GHz, 2 CPUs per node on one front-side
/// bus, NUMAlink between nodes. Each CPU has its own 6 MiB L3; the model treats a
/// node's two L3s as one 12 MiB LLC (the other CPU's L3 is one bus snoop away).
pub const SN2_CACHES: CacheSpec = CacheSpec {
    ghz: 1.5,
    threads_per_core: 1,
    l1_bytes: 16 << 10,
    l1_cycles: 1.0,
    l2_bytes: 256 << 10,
    l2_cycles: 5.0,
    l1_l2_bytes_per_cycle: 16.0,
    llc_ns: 14.0 / 1.5,
    peer_ns: 150.0,
    remote_cache_ns: 350.0,
    dram_local_ns: 145.0,
    dram_remote_ns: 350.0,
    mlp: 14.0,
    fill_buffers: 16,
    l2_misses: 16,
};

/// A laptop/desktop part: Tiger Lake (Willow Cove) class, 4 cores, 8 threads, 12 MiB
/// LLC on a ring, one memory node.
pub const DESKTOP_CACHES: CacheSpec = CacheSpec {
    ghz: 3.0,
    threads_per_core: 2,
    l1_bytes: 48 << 10,
    l1_cycles: 5.0,
    l2_bytes: 1280 << 10,
    l2_cycles: 14.0,
    l1_l2_bytes_per_cycle: 32.0,
    llc_ns: 14.0,
    peer_ns: 30.0,
    remote_cache_ns: 30.0,
    dram_local_ns: 85.0,
    dram_remote_ns: 85.0,
    mlp: 16.0,
    fill_buffers: 12,
    l2_misses: 32,
};

/// A simulated machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// Name, e.g. `spr-2s-224`.
    pub name: &'static str,
    /// One line for listings.
    pub description: &'static str,
    /// Logical CPUs.
    pub cpus: u32,
    /// Sockets (LLC domains); CPUs are split evenly, socket by socket.
    pub sockets: u32,
    /// NUMA nodes; CPUs are split evenly, node by node.
    pub nodes: u32,
    /// Memory of the whole machine, bytes (before scaling).
    pub mem_bytes: u64,
    /// Last-level cache per socket, bytes.
    pub llc_per_socket: u64,
    /// Cost parameters.
    pub cost: CostModel,
    /// Caches and memory latencies (the simulator's cache hierarchy).
    pub caches: CacheSpec,
    /// `host` only: each CPU's LLC domain and node as sysfs shows them, and the zones
    /// as `/proc/zoneinfo` shows them (read by `sim::host`); `None` for the published
    /// machines, whose CPUs split evenly and whose nodes have one Normal zone each.
    pub host: Option<&'static HostShape>,
}

/// The host's shape beyond the uniform fields of [`Machine`] (`--machine host`).
#[derive(Clone, Debug, PartialEq)]
pub struct HostShape {
    /// Per CPU (index: kernel CPU id): its LLC domain (the simulator's socket) and its
    /// node, both numbered from 0.
    pub cpus: Vec<(u32, u32)>,
    /// The zones as the twin builds them from `/proc/zoneinfo`, every CPU online.
    pub layout: Layout,
    /// `model name` of `/proc/cpuinfo`, with vendor, family and model.
    pub cpu_model: String,
    /// Where the latencies came from.
    pub latency_source: &'static str,
}

impl HostShape {
    /// The layout with every zone span and hole divided by `s` (1: as read).
    ///
    /// # Errors
    /// [`MachineError::BadScale`] for 0, a node left with under 64 MiB managed, or a
    /// layout the core refuses.
    pub fn layout(&self, s: u64) -> Result<Layout, MachineError> {
        if s == 0 {
            return Err(MachineError::BadScale(s));
        }
        let mut l = self.layout.clone();
        for n in &mut l.nodes {
            for z in &mut n.zones {
                let end = (z.start_pfn + z.pages) / s;
                z.start_pfn /= s;
                z.pages = end - z.start_pfn;
                for h in &mut z.holes {
                    *h = (h.0 / s, h.1 / s);
                }
                z.holes.retain(|h| h.0 < h.1);
            }
            n.zones.retain(|z| z.pages > 0);
        }
        let small = l
            .nodes
            .iter()
            .any(|n| (managed(n.zones.iter()) * pagealloc::PAGE_SIZE as u64) >> 20 < 64);
        if small || l.validate().is_err() {
            return Err(MachineError::BadScale(s));
        }
        Ok(l)
    }

    /// The most frames a node manages after scaling by `s`.
    pub fn pages_per_node(&self, s: u64) -> Result<u64, MachineError> {
        let l = self.layout(s)?;
        Ok(l.nodes
            .iter()
            .map(|n| managed(n.zones.iter()))
            .max()
            .unwrap_or(0))
    }
}

fn managed<'a>(zones: impl Iterator<Item = &'a pagealloc::ZoneLayout>) -> u64 {
    zones
        .map(|z| z.pages - z.holes.iter().map(|h| h.1 - h.0).sum::<u64>())
        .sum()
}

/// The machines of the seed measurements (docs/sim-cost-model.md §1).
pub const MACHINES: &[Machine] = &[
    Machine {
        name: "spr-2s-224",
        description: "Sapphire Rapids, 2 sockets, 224 CPUs, 512 GiB, 105 MiB LLC/socket",
        cpus: 224,
        sockets: 2,
        nodes: 2,
        mem_bytes: 512 * GIB,
        llc_per_socket: 105 * MIB,
        cost: SPR_COST,
        caches: SPR_CACHES,
        host: None,
    },
    Machine {
        name: "icx-2s-128",
        description: "Ice Lake, 2 sockets, 128 CPUs, 256 GiB, 48 MiB LLC/socket",
        cpus: 128,
        sockets: 2,
        nodes: 2,
        mem_bytes: 256 * GIB,
        llc_per_socket: 48 * MIB,
        cost: ICX_COST,
        caches: ICX_CACHES,
        host: None,
    },
    Machine {
        name: "skx-2s-112",
        description: "Skylake-SP, 2 sockets, 112 CPUs, 64 GiB, 38.5 MiB LLC/socket",
        cpus: 112,
        sockets: 2,
        nodes: 2,
        mem_bytes: 64 * GIB,
        llc_per_socket: 77 * MIB / 2,
        cost: SKX_COST,
        caches: SKX_CACHES,
        host: None,
    },
    Machine {
        name: "skx-4s-768",
        description:
            "Skylake-SP, 4 sockets, 224 CPUs, 768 GiB, 38.5 MiB LLC/socket (parallel free)",
        // The spec gives the parallel-free box as skx with 768 GiB and 4 sockets; the
        // sockets are skx-2s-112's (28 cores, 56 threads, 38.5 MiB LLC each), four of them.
        cpus: 224,
        sockets: 4,
        nodes: 4,
        mem_bytes: 768 * GIB,
        llc_per_socket: 77 * MIB / 2,
        cost: SKX_COST,
        caches: SKX_CACHES,
        host: None,
    },
    Machine {
        name: "sn2-28n-56",
        description: "SGI Altix-class, 28 nodes of 2 CPUs, 96 GiB, 6 MiB L3 per CPU",
        cpus: 56,
        sockets: 28,
        nodes: 28,
        mem_bytes: 96 * GIB,
        llc_per_socket: 12 * MIB,
        cost: SN2_COST,
        caches: SN2_CACHES,
        host: None,
    },
    Machine {
        name: "desktop-8",
        description: "desktop, 1 socket, 8 CPUs, 4 GiB, 12 MiB LLC",
        cpus: 8,
        sockets: 1,
        nodes: 1,
        mem_bytes: 4 * GIB,
        llc_per_socket: 12 * MIB,
        cost: DESKTOP_COST,
        caches: DESKTOP_CACHES,
        host: None,
    },
];

/// Why a machine could not be found or built, or a cost override refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// No machine of this name.
    #[error("unknown machine `{0}`; valid: {names}", names = machine_names())]
    Unknown(String),
    /// A memory scale of 0, or one that leaves a node under 64 MiB.
    #[error("memory scale {0}: must be at least 1 and leave every node 64 MiB or more")]
    BadScale(u64),
    /// No cost parameter of this name.
    #[error("unknown cost parameter `{0}`; valid: {keys}", keys = CostModel::KEYS.join(", "))]
    UnknownCost(String),
    /// A cost value that is not a number in `0..=`[`MAX_COST_NS`].
    #[error("cost {key}: `{value}` is not a number of ns in 0..={MAX_COST_NS}")]
    BadCost {
        /// The parameter.
        key: String,
        /// The value given.
        value: String,
    },
    /// A cost override without `=`.
    #[error("cost override `{0}`: expected key=value")]
    CostSyntax(String),
    /// `host` asked for, but this machine could not be read.
    #[error("machine host: cannot describe this machine: {0}")]
    Host(String),
}

fn machine_names() -> String {
    MACHINES
        .iter()
        .map(|m| m.name)
        .chain(["host"])
        .collect::<Vec<_>>()
        .join(", ")
}

impl Machine {
    /// CPUs per socket (on `host`: of the first LLC domain).
    pub fn cpus_per_socket(&self) -> u32 {
        match self.host {
            Some(h) => h.cpus.iter().filter(|c| c.0 == 0).count() as u32,
            None => self.cpus / self.sockets,
        }
    }

    /// CPUs per node.
    pub fn cpus_per_node(&self) -> u32 {
        self.cpus / self.nodes
    }

    /// Socket (LLC domain) of `cpu`.
    pub fn socket_of(&self, cpu: u32) -> u32 {
        match self.host {
            Some(h) => h.cpus.get(cpu as usize).map_or(0, |c| c.0),
            None => cpu / self.cpus_per_socket(),
        }
    }

    /// NUMA node of `cpu`.
    pub fn node_of(&self, cpu: u32) -> u32 {
        match self.host {
            Some(h) => h.cpus.get(cpu as usize).map_or(0, |c| c.1),
            None => cpu / self.cpus_per_node().max(1),
        }
    }

    /// Each CPU's share of its socket's LLC, bytes.
    pub fn llc_slice_bytes(&self) -> u64 {
        self.llc_per_socket / u64::from(self.cpus_per_socket())
    }

    /// Base pages per node with memory divided by `mem_scale`.
    ///
    /// # Errors
    /// [`MachineError::BadScale`] for 0 or a node below 64 MiB.
    pub fn pages_per_node(&self, mem_scale: u64) -> Result<u64, MachineError> {
        if let Some(h) = self.host {
            return h.pages_per_node(mem_scale);
        }
        if mem_scale == 0 {
            return Err(MachineError::BadScale(mem_scale));
        }
        let bytes = self.mem_bytes / u64::from(self.nodes) / mem_scale;
        if bytes < 64 * MIB {
            return Err(MachineError::BadScale(mem_scale));
        }
        Ok(bytes / pagealloc::PAGE_SIZE as u64)
    }

    /// The core's layout of this machine with memory divided by `mem_scale`.
    ///
    /// # Errors
    /// As [`Machine::pages_per_node`].
    pub fn layout(&self, mem_scale: u64) -> Result<Layout, MachineError> {
        if let Some(h) = self.host {
            return h.layout(mem_scale);
        }
        let pages = self.pages_per_node(mem_scale)?;
        Ok(
            Layout::numa(self.nodes as usize, pages, self.cpus_per_node() as usize)
                .with_llc_slice(self.llc_slice_bytes()),
        )
    }

    /// The CPUs `workload` runs on by default, as its registry entry says
    /// ([`crate::workload::Entry::cpus`]): kbuild is `make -j<CPUs per socket>` on socket
    /// 0 (the spec's `make -j112` on one socket); every other workload uses the whole
    /// machine and takes what its parameters need.
    pub fn default_workload_cpus(&self, workload: &str) -> u32 {
        match crate::workload::entry(workload).map(|e| e.cpus) {
            Some(DefaultCpus::Socket) => self.cpus_per_socket(),
            Some(DefaultCpus::Machine) | None => self.cpus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_has_a_seed_machine_and_default_cpus() {
        for e in crate::workload::ENTRIES {
            let m = Machine::seed_for(e.name);
            assert_eq!(m.name, e.seed_machine, "{}: machine not described", e.name);
            let cpus = m.default_workload_cpus(e.name);
            assert!((1..=m.cpus).contains(&cpus), "{}: {cpus} CPUs", e.name);
        }
        // The seeds' machines, as the seed measurements name them.
        for (w, m) in [
            ("kbuild", "spr-2s-224"),
            ("batch_sweep", "spr-2s-224"),
            ("netperf", "icx-2s-128"),
            ("lmbench", "icx-2s-128"),
            ("bulk", "icx-2s-128"),
            ("page_fault1", "skx-2s-112"),
            ("page_fault1_thp", "skx-2s-112"),
            ("thp_mix", "skx-2s-112"),
            ("parallel_free", "skx-4s-768"),
            ("zonelist_hog", "sn2-28n-56"),
            ("high_order_stress", "desktop-8"),
            ("no_such_workload", "desktop-8"),
        ] {
            assert_eq!(Machine::seed_for(w).name, m, "{w}");
        }
    }

    #[test]
    fn every_machine_builds_a_valid_layout() {
        for m in MACHINES {
            assert_eq!(m.cpus % m.sockets, 0, "{}", m.name);
            assert_eq!(m.cpus % m.nodes, 0, "{}", m.name);
            let l = m
                .layout(m.mem_bytes / u64::from(m.nodes) / (64 << 20))
                .unwrap();
            l.validate().unwrap();
            assert_eq!(l.cpus.len(), m.cpus as usize);
            assert_eq!(l.nodes.len(), m.nodes as usize);
            assert_eq!(l.cpus[0].llc_slice_bytes, m.llc_slice_bytes());
        }
        let spr = Machine::by_name("spr-2s-224").unwrap();
        assert_eq!(spr.llc_slice_bytes(), 960 * 1024);
        assert_eq!(spr.pages_per_node(1).unwrap(), 64 << 20);
        assert_eq!(spr.socket_of(111), 0);
        assert_eq!(spr.socket_of(112), 1);
        assert_eq!(spr.default_workload_cpus("kbuild"), 112);
    }

    #[test]
    fn bad_names_and_scales_are_refused() {
        let e = Machine::by_name("vax").unwrap_err();
        assert!(e.to_string().contains("spr-2s-224"), "{e}");
        let d = Machine::by_name("desktop-8").unwrap();
        assert_eq!(d.pages_per_node(0), Err(MachineError::BadScale(0)));
        assert_eq!(d.pages_per_node(128), Err(MachineError::BadScale(128)));
    }

    #[test]
    fn cost_overrides_parse_and_refuse() {
        let mut c = SPR_COST;
        c.apply("locked_line_ns=4, handoff_socket_ns=90").unwrap();
        assert_eq!(c.locked_line_ns, 4.0);
        assert_eq!(c.handoff_socket_ns, 90.0);
        assert!(c
            .apply("nope=1")
            .unwrap_err()
            .to_string()
            .contains("alloc_fast_ns"));
        assert!(c.apply("message_ns=-1").is_err());
        assert!(c.apply("message_ns").is_err());
    }
}
