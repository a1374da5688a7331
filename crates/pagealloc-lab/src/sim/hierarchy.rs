//! The machine's cache hierarchy: is a memory access an L1, L2 or LLC hit, a transfer
//! from another core or socket, or a DRAM access — and what does it cost?
//!
//! # Design
//! Levels, as on the seed machines: a private L1 and L2 per core (each hardware thread
//! gets `1 / threads_per_core` of them), one last-level cache per socket shared by its
//! CPUs, DRAM per NUMA node. The simulator reports two kinds of access:
//! - [`Hierarchy::access`]: one 64-byte line by an opaque `u64` key the caller chooses
//!   (per-frame metadata, zone and free-area lines, pcp list heads…), with the NUMA node
//!   of the memory it lives on and whether it is written;
//! - [`Hierarchy::touch`] and [`Hierarchy::copy`]: page data (zeroing a page, the
//!   copies of a network message), tracked **page-granular**: a page is one entry
//!   weighing its 64 lines, judged as a whole, charged the latency of its level plus a
//!   bandwidth term. Keys are page numbers: frames (`pfn < frames`, a dense table) or
//!   any other page the caller names (a workload's user buffer, see [`user_page`]).
//!
//! Entries live in tables, never in lists: frames in a dense, calloc'ed table (16 bytes
//! per frame, backed only where frames are touched), line keys in a hash map, or
//! densely for a key range the caller names ([`Hierarchy::with_dense_lines`]: one
//! metadata line per frame, kept in the frame's record beside its page entry), or by
//! index with the map's sharer semantics for another range
//! ([`Hierarchy::with_indexed_lines`]: the zone, zonelist, pageset and pageblock lines
//! the simulator numbers densely; no hashing on the hot path). Speed:
//! `cargo run --release -p pagealloc-lab --example hierarchy_speed` prints ns per line
//! access and per page touch (docs/sim-cost-model.md has the figures).
//!
//! **Residency without lists.** Exact LRU per cache would cost a list per cache and a
//! splice per access. Instead every entry (line or page) keeps who touched it last and
//! *when*, in the units of three insertion clocks: per CPU, lines inserted into its L1
//! and into its L2 (their misses); per socket, lines inserted into its LLC. An entry is
//! in a cache iff fewer lines than the cache holds were inserted since its last access
//! (with the entry's own weight): LRU's hit condition with the stack distance counted
//! in insertions, not in distinct lines touched (hits on lines older than ours, which
//! LRU also counts, are not). Each access is O(1): one table lookup and a few
//! subtractions. The error against exact LRU is measured on traces shaped like the
//! workloads (tests below; docs/sim-cost-model.md states it).
//!
//! **Coherence.** An entry remembers one owner: the last CPU that touched it (its
//! private caches and its socket's LLC hold it). Lines of the hash map (the read-mostly
//! ones: zone, zonelist, pageblock lines) also keep sharers, CPUs with a clean copy
//! that ages in their own L1 and L2 (see `LineEntry`); for every other entry another
//! CPU's access moves it:
//! - same socket: from the owner's private cache when the owner wrote it and still holds
//!   it (`Peer`: a snoop hit on a modified line), else from the LLC if resident;
//! - other socket: from that socket's caches if resident there (`RemoteCache`);
//! - otherwise from DRAM, local or remote by the line's home node.
//!
//! A write by another core thus invalidates the former owner's copy (and every
//! sharer's), as MESI does. For page data and dense lines a *read* by another core also
//! takes the line away from the former owner (which in MESI would keep a shared copy);
//! the traces measure what this costs in accuracy.
//!
//! # What it cannot see
//! Set conflicts (caches are fully associative), inclusive/non-inclusive differences
//! (every access refreshes the line at every level), prefetching beyond the streaming
//! term of bulk touches, write-backs of dirty lines (free), and bandwidth contention
//! between cores (every core streams at its own rate). An access is charged its
//! unloaded latency here; how the misses of a run overlap is the engine's
//! (`sim/overlap.rs`).
//!
//! # Invariants
//! Deterministic: the state is a function of the sequence of calls. Clocks of L1 and L2
//! are 32-bit and wrap; an entry untouched by its owner for 2^32 insertions may be
//! judged resident again (never happens at the workloads' scales: 2^32 lines is
//! 256 GiB through one core).

use rustc_hash::FxHashMap;

use super::machine::{CacheSpec, Machine};

/// Bytes in a cache line.
pub const LINE_BYTES: u64 = 64;
/// Lines in a base page.
pub const PAGE_LINES: u64 = pagealloc::PAGE_SIZE as u64 / LINE_BYTES;

/// Where an access was served from, nearest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The CPU's L1.
    L1,
    /// The CPU's L2.
    L2,
    /// The socket's LLC (clean, or held by another core of the socket unmodified).
    Llc,
    /// Modified in another core's private cache of the same socket (snoop, HITM).
    Peer,
    /// Held by a cache of another socket.
    RemoteCache,
    /// DRAM of the CPU's own node.
    LocalDram,
    /// DRAM of another node.
    RemoteDram,
}

impl Level {
    /// All levels, nearest first (the index of [`HierarchyCounters`]' arrays).
    pub const ALL: [Level; 7] = [
        Level::L1,
        Level::L2,
        Level::Llc,
        Level::Peer,
        Level::RemoteCache,
        Level::LocalDram,
        Level::RemoteDram,
    ];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Level::L1 => "L1",
            Level::L2 => "L2",
            Level::Llc => "LLC",
            Level::Peer => "peer",
            Level::RemoteCache => "remote cache",
            Level::LocalDram => "local DRAM",
            Level::RemoteDram => "remote DRAM",
        }
    }

    /// Whether perf would count this access as an LLC miss: served from outside the
    /// socket (another socket's cache or DRAM). A snoop hit in another core of the
    /// socket is an LLC hit, as in perf's `XSNP_HITM` events.
    pub fn missed_llc(self) -> bool {
        self >= Level::RemoteCache
    }
}

/// What an access or a bulk touch cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Charge {
    /// The farthest level any of its lines came from.
    pub level: Level,
    /// Virtual time, ns.
    pub ns: f64,
    /// Page-data lines ([`Hierarchy::touch`], [`Hierarchy::copy`]) served from another
    /// CPU's cache: lines another CPU owns that its private caches or its socket's LLC
    /// (where its evictions went) still hold ([`Level::Peer`], [`Level::Llc`],
    /// [`Level::RemoteCache`]); not this CPU's own lines, nor lines from DRAM.
    pub crossed: u64,
}

impl Charge {
    /// Nothing accessed.
    pub const NONE: Charge = Charge {
        level: Level::L1,
        ns: 0.0,
        crossed: 0,
    };

    fn join(self, other: Charge) -> Charge {
        Charge {
            level: self.level.max(other.level),
            ns: self.ns + other.ns,
            crossed: self.crossed + other.crossed,
        }
    }
}

/// Accesses by level, since the hierarchy was built.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HierarchyCounters {
    /// Single-line accesses ([`Hierarchy::access`]) served from each level, indexed as
    /// [`Level::ALL`].
    pub lines: [u64; 7],
    /// Page-data lines ([`Hierarchy::touch`], [`Hierarchy::copy`]) served from each
    /// level (a page served from one level counts its 64 lines there).
    pub data_lines: [u64; 7],
}

impl HierarchyCounters {
    /// Single-line accesses.
    pub fn line_accesses(&self) -> u64 {
        self.lines.iter().sum()
    }

    /// Page-data lines accessed.
    pub fn data_accesses(&self) -> u64 {
        self.data_lines.iter().sum()
    }

    /// Page-data lines that missed the LLC.
    pub fn data_llc_misses(&self) -> u64 {
        Level::ALL
            .iter()
            .zip(self.data_lines)
            .filter(|(l, _)| l.missed_llc())
            .map(|(_, n)| n)
            .sum()
    }

    /// Cache miss %: LLC misses ÷ page-data line accesses, as perf reports it (0 when
    /// no page data was touched).
    pub fn cache_miss_pct(&self) -> f64 {
        let all = self.data_accesses();
        if all == 0 {
            0.0
        } else {
            100.0 * self.data_llc_misses() as f64 / all as f64
        }
    }

    /// `self - earlier`, level by level.
    pub fn since(&self, earlier: &HierarchyCounters) -> HierarchyCounters {
        let mut d = self.clone();
        for i in 0..Level::ALL.len() {
            d.lines[i] -= earlier.lines[i];
            d.data_lines[i] -= earlier.data_lines[i];
        }
        d
    }
}

/// A span of page data: `bytes` from the start of page `page` (a frame number, or a
/// [`user_page`]) on, on NUMA node `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First page.
    pub page: u64,
    /// Bytes, from the start of the first page.
    pub bytes: u64,
    /// NUMA node of the memory.
    pub node: u32,
}

/// Spans longer than this many pages are tracked as one entry (see [`Hierarchy::touch`]):
/// 64 KiB, a socket buffer's largest fragment is below, a THP far above.
pub const WHOLE_SPAN_PAGES: u64 = 16;

/// Page keys of user buffers start here: far above any frame number (2^52 pages).
const USER_BASE: u64 = 1 << 52;
/// Pages reserved per CPU for its user buffers.
const USER_PAGES_PER_CPU: u64 = 1 << 20;

/// The page key of page `i` of CPU `cpu`'s user buffers (a process's own memory, which
/// is not a frame of the simulated allocator): distinct from every frame number and
/// every other CPU's user pages.
pub fn user_page(cpu: u32, i: u64) -> u64 {
    debug_assert!(i < USER_PAGES_PER_CPU);
    USER_BASE + u64::from(cpu) * USER_PAGES_PER_CPU + i
}

/// One entry's state, two words:
/// - `w0`: owner CPU + 1 (0: never touched) in the top 16 bits, the owner socket's LLC
///   clock after the last access in the low 48;
/// - `w1`: the owner's L1 clock after the last access in the low 32 bits, its L2 clock
///   (31 bits) above, the dirty bit (written by the owner) on top.
type Entry = [u64; 2];

const OWNER_SHIFT: u32 = 48;
const LLC_MASK: u64 = (1 << OWNER_SHIFT) - 1;
const L2_SHIFT: u32 = 32;
const L2_MASK: u32 = (1 << 31) - 1;
const DIRTY: u64 = 1 << 63;

/// A line of the hash map: its entry, and the CPUs that keep a shared (clean) copy
/// besides the owner (bit `c` of `sharers[c / 64]`, CPUs below 256).
///
/// The map holds the lines many CPUs read and few write (zone watermarks and counters,
/// free-area heads, zonelist entries, pageblock bits): a read of a clean line by a CPU
/// that is not its owner leaves the owner in place and makes the reader a sharer, whose
/// next reads hit its private caches while the copy is still there: a sharer's copy
/// ages in its L1 and L2 like any line it inserted (its stamps are in
/// [`Hierarchy::shared`]), and once it has left them the sharer is served again from
/// wherever the line is (the owner's caches, the LLCs, its home node's DRAM). A write
/// by anyone clears the sharers (invalidation) and takes ownership as for any line.
/// Dense lines (one per frame) keep the single owner.
#[derive(Clone, Copy, Debug, Default)]
struct LineEntry {
    e: Entry,
    sharers: [u64; 4],
}

/// CPUs that can be sharers of a map line; others take ownership on every access.
const MAX_SHARERS: usize = 256;

/// The cache hierarchy of one simulated machine. See the module docs.
#[derive(Debug)]
pub struct Hierarchy {
    /// Entries of frames, `stride` entries per frame (calloc'ed: only touched frames
    /// cost memory): the page's entry, then (stride 2) the frame's dense line entry;
    /// with stride 1, the dense lines' entries follow the frames'.
    frames: Vec<Entry>,
    nframes: usize,
    stride: usize,
    /// Dense line `i`'s entry is `frames[dense_at + (i << dense_shift)]`: one
    /// computation for both layouts, no branch on the layout per access.
    dense_at: usize,
    dense_shift: u32,
    /// Entries of other pages (user buffers).
    pages: FxHashMap<u64, Entry>,
    /// The dense line keys are `dense_base..dense_base + dense_count`: in the frames'
    /// records when `stride == 2`, else after them (`dense_at`).
    dense_base: u64,
    dense_count: usize,
    /// The line keys `indexed_base..indexed_base + indexed_count` with their sharers, by
    /// index ([`Hierarchy::with_indexed_lines`]), and per (line, sharer CPU) where the
    /// sharer's copy was last inserted (`MAX_SHARERS` words per line, meaningful while
    /// the sharer's bit is set; calloc'ed).
    indexed_base: u64,
    indexed_count: usize,
    indexed: Vec<LineEntry>,
    indexed_stamps: Vec<[u64; MAX_SHARERS]>,
    /// Entries of the other line keys, with their sharers.
    lines: FxHashMap<u64, LineEntry>,
    /// Per (line key, sharer CPU) of the lines in `lines`: where the sharer's copy was
    /// last inserted, on its L1 clock (low word) and its L2 clock (high word), as
    /// `Entry[1]` keeps an owner's.
    shared: FxHashMap<(u64, u32), u64>,
    state: State,
}

/// Where a map line's sharers keep their insertion stamps: the hash map for arbitrary
/// keys, a dense row for indexed ones. `get` is read only while the sharer's bit is
/// set; `clear` is called when it is cleared.
trait Stamps {
    /// Whether [`Stamps::clear`] does anything (else a write just drops the sharers).
    const CLEARS: bool;
    fn get(&mut self, cpu: usize) -> u64;
    fn set(&mut self, cpu: usize, stamps: u64);
    fn clear(&mut self, cpu: usize);
}

/// The stamps of map line `1` in the map `0`.
struct MapStamps<'a>(&'a mut FxHashMap<(u64, u32), u64>, u64);

impl Stamps for MapStamps<'_> {
    const CLEARS: bool = true;
    #[inline]
    fn get(&mut self, cpu: usize) -> u64 {
        *self.0.entry((self.1, cpu as u32)).or_insert(0)
    }
    #[inline]
    fn set(&mut self, cpu: usize, stamps: u64) {
        self.0.insert((self.1, cpu as u32), stamps);
    }
    #[inline]
    fn clear(&mut self, cpu: usize) {
        self.0.remove(&(self.1, cpu as u32));
    }
}

/// The stamps of an indexed line: one word per CPU below `MAX_SHARERS` (a stale word is
/// never read: the sharer bit says whether it is valid). Only CPUs below `MAX_SHARERS`
/// are sharers: the index is masked, which spares the bounds check.
struct RowStamps<'a>(&'a mut [u64; MAX_SHARERS]);

impl Stamps for RowStamps<'_> {
    const CLEARS: bool = false;
    #[inline]
    fn get(&mut self, cpu: usize) -> u64 {
        debug_assert!(cpu < MAX_SHARERS);
        self.0[cpu % MAX_SHARERS]
    }
    #[inline]
    fn set(&mut self, cpu: usize, stamps: u64) {
        debug_assert!(cpu < MAX_SHARERS);
        self.0[cpu % MAX_SHARERS] = stamps;
    }
    #[inline]
    fn clear(&mut self, _cpu: usize) {}
}

/// Per CPU: its insertion clocks and placement (one record: one host cache line serves
/// an access's lookups).
#[derive(Clone, Copy, Debug, Default)]
struct Core {
    /// Lines inserted into its L1 and its L2 (wrapping).
    l1_clock: u32,
    l2_clock: u32,
    /// Its socket and NUMA node.
    socket: u16,
    node: u32,
}

/// The CPU that accesses, with its record and its socket's LLC clock as they stand
/// ([`State::me`]): held in locals while it accesses, stored back after
/// ([`State::put`]), its clocks are not reloaded from the tables at every line.
#[derive(Clone, Copy, Debug)]
struct Me {
    cpu: usize,
    /// `cpu`'s owner field as an entry's first word keeps it: `(cpu + 1) << OWNER_SHIFT`
    /// (an entry is `cpu`'s iff its bits above `LLC_MASK` equal it).
    tag: u64,
    core: Core,
    llc: u64,
}

impl Me {
    /// The CPU's L1 and L2 clocks as an entry's second word keeps them (not dirty).
    #[inline]
    fn stamps(&self) -> u64 {
        let c = self.core;
        u64::from(c.l1_clock) | u64::from(c.l2_clock & L2_MASK) << L2_SHIFT
    }
}

/// A run of line accesses by one CPU ([`Hierarchy::lines`]): its clocks stay in the run
/// and are stored back when it is dropped.
pub(crate) struct LineRun<'a> {
    h: &'a mut Hierarchy,
    me: Me,
}

impl LineRun<'_> {
    /// [`Hierarchy::access`] by the run's CPU, the line's home node given as a [`Home`]
    /// (looked up only if the line comes from DRAM).
    #[inline(always)]
    pub(crate) fn access(&mut self, line: u64, home: impl Home, write: bool) -> Charge {
        self.h.access_as(&mut self.me, line, home, write)
    }
}

/// A line's home NUMA node, or how to find it: asked for only when the access is served
/// from DRAM (the one level whose cost depends on it), so a caller whose lookup costs
/// more than a load (a frame's node, from its PFN) pays it for those accesses alone.
pub(crate) trait Home: Copy {
    /// The node.
    fn node(self) -> u32;
}

impl Home for u32 {
    #[inline(always)]
    fn node(self) -> u32 {
        self
    }
}

impl Drop for LineRun<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.h.state.put(&self.me);
    }
}

/// Everything but the entries: capacities, clocks, costs, counters.
#[derive(Debug)]
struct State {
    spec: CacheSpec,
    /// Capacities in lines.
    l1_lines: u64,
    l2_lines: u64,
    llc_lines: u64,
    /// Per CPU: clocks, socket and node.
    core: Vec<Core>,
    /// Per socket: lines inserted into its LLC.
    llc_clock: Vec<u64>,
    /// Per level: latency of one line, ns; and ns per further line when streaming.
    latency: [f64; 7],
    stream: [f64; 7],
    counters: HierarchyCounters,
    /// Page-data lines so far, and of them those that missed the LLC: the sums of
    /// `counters.data_lines` kept as they grow ([`Hierarchy::data_totals`]).
    data_all: u64,
    data_missed: u64,
}

impl Hierarchy {
    /// The hierarchy of `machine`, with a dense table for frames `0..frames`.
    ///
    /// # Panics
    /// If the machine has more than 65 534 CPUs or more than 65 535 sockets.
    pub fn new(machine: &Machine, frames: u64) -> Self {
        let cpus = machine.cpus;
        assert!(cpus < u32::from(u16::MAX), "at most 65534 CPUs");
        Self::with_spec(
            machine.caches,
            machine.llc_per_socket,
            (0..cpus)
                .map(|c| (machine.socket_of(c), machine.node_of(c)))
                .collect(),
            frames,
        )
    }

    /// A hierarchy from its parts: `cpus[i]` = (socket, node) of CPU `i`, sockets and
    /// nodes numbered from 0. For tests and machines not in [`super::MACHINES`].
    pub fn with_spec(spec: CacheSpec, llc_bytes: u64, cpus: Vec<(u32, u32)>, frames: u64) -> Self {
        let sockets = cpus.iter().map(|&(s, _)| s as usize + 1).max().unwrap_or(1);
        assert!(sockets <= usize::from(u16::MAX), "at most 65535 sockets");
        let threads = u64::from(spec.threads_per_core.max(1));
        let lines = |bytes: u64| (bytes / threads / LINE_BYTES).max(1);
        let per_line = |bytes_per_ns: f64| LINE_BYTES as f64 / bytes_per_ns;
        let core_stream = per_line(spec.l1_l2_bytes_per_cycle * spec.ghz);
        // Little's law for the levels beyond L2, never faster than the core itself
        // streams from its L1/L2.
        let far_stream = |ns: f64| (ns / spec.mlp.max(1.0)).max(core_stream);
        let latency = [
            spec.l1_ns(),
            spec.l2_ns(),
            spec.llc_ns,
            spec.peer_ns,
            spec.remote_cache_ns,
            spec.dram_local_ns,
            spec.dram_remote_ns,
        ];
        let stream = [
            core_stream,
            core_stream,
            far_stream(spec.llc_ns),
            far_stream(spec.peer_ns),
            far_stream(spec.remote_cache_ns),
            far_stream(spec.dram_local_ns),
            far_stream(spec.dram_remote_ns),
        ];
        let state = State {
            spec,
            l1_lines: lines(spec.l1_bytes),
            l2_lines: lines(spec.l2_bytes),
            llc_lines: (llc_bytes / LINE_BYTES).max(1),
            core: cpus
                .iter()
                .map(|&(s, nd)| Core {
                    l1_clock: 0,
                    l2_clock: 0,
                    socket: s as u16,
                    node: nd,
                })
                .collect(),
            llc_clock: vec![0; sockets],
            latency,
            stream,
            counters: HierarchyCounters::default(),
            data_all: 0,
            data_missed: 0,
        };
        Hierarchy {
            frames: vec![[0; 2]; frames as usize],
            nframes: frames as usize,
            stride: 1,
            dense_at: 0,
            dense_shift: 0,
            pages: FxHashMap::default(),
            dense_base: 0,
            dense_count: 0,
            indexed_base: 0,
            indexed_count: 0,
            indexed: Vec::new(),
            indexed_stamps: Vec::new(),
            lines: FxHashMap::default(),
            shared: FxHashMap::default(),
            state,
        }
    }

    /// Keeps the line keys `base..base + count` in a dense table instead of the hash
    /// map: for the lines the simulator touches most and whose keys are an index, e.g.
    /// one metadata line per frame (`base | pfn`). With `count <= frames` line `base + i`
    /// shares frame `i`'s record (one host cache line holds a frame's page and its
    /// metadata line); otherwise it gets a table of its own. Other keys still go to the
    /// map. Call it right after construction: it drops the entries so far.
    pub fn with_dense_lines(mut self, base: u64, count: u64) -> Self {
        self.dense_base = base;
        self.dense_count = count as usize;
        if self.dense_count <= self.nframes {
            self.stride = 2;
            self.frames = vec![[0; 2]; 2 * self.nframes];
            (self.dense_at, self.dense_shift) = (1, 1);
        } else {
            self.stride = 1;
            self.frames = vec![[0; 2]; self.nframes + self.dense_count];
            (self.dense_at, self.dense_shift) = (self.nframes, 0);
        }
        self
    }

    /// Where dense line `i`'s entry is (frame `i`'s metadata line, in the engine):
    /// `(address of line 0's, bytes per line, lines)`. For host prefetch hints only ([`super::trace::load_ahead`]); the table is
    /// allocated once and never moves after [`Hierarchy::with_dense_lines`].
    pub(crate) fn frame_records(&self) -> (*const u64, usize, u64) {
        (
            self.frames.as_ptr().wrapping_add(self.dense_at).cast(),
            std::mem::size_of::<Entry>() << self.dense_shift,
            self.dense_count as u64,
        )
    }

    /// Keeps the line keys `base..base + count` in a table indexed by `key - base`
    /// instead of the hash map, with the map lines' semantics (sharers): for the
    /// read-mostly lines whose keys the caller can number densely (zone, zonelist,
    /// pageblock and pageset lines). Other keys still go to the map. Call it right after
    /// construction: it drops the entries so far.
    pub fn with_indexed_lines(mut self, base: u64, count: u64) -> Self {
        self.indexed_base = base;
        self.indexed_count = count as usize;
        self.indexed = vec![LineEntry::default(); self.indexed_count];
        self.indexed_stamps = vec![[0; MAX_SHARERS]; self.indexed_count];
        self.lines.clear();
        self.shared.clear();
        self
    }

    /// The machine data in use.
    pub fn spec(&self) -> &CacheSpec {
        &self.state.spec
    }

    /// Capacities in lines of one CPU's L1 and L2 and of one socket's LLC.
    pub fn capacities(&self) -> (u64, u64, u64) {
        let s = &self.state;
        (s.l1_lines, s.l2_lines, s.llc_lines)
    }

    /// Accesses so far, by level.
    pub fn counters(&self) -> &HierarchyCounters {
        &self.state.counters
    }

    /// Page-data lines accessed so far, and of them the LLC misses: what
    /// [`HierarchyCounters::data_accesses`] and [`HierarchyCounters::data_llc_misses`]
    /// of [`Hierarchy::counters`] say, without summing the levels.
    #[inline]
    pub(crate) fn data_totals(&self) -> (u64, u64) {
        (self.state.data_all, self.state.data_missed)
    }

    /// CPU `cpu` reads (or, with `write`, writes) the 64-byte line `line`, whose memory
    /// is on NUMA node `home`. Line keys are the caller's; they are a key space of their
    /// own, apart from the page keys of [`Hierarchy::touch`].
    #[inline]
    pub fn access(&mut self, cpu: usize, line: u64, home: u32, write: bool) -> Charge {
        let mut me = self.state.me(cpu);
        let c = self.access_as(&mut me, line, home, write);
        self.state.put(&me);
        c
    }

    /// CPU `cpu`'s clocks, for a run of line accesses by it ([`LineRun`]).
    #[inline]
    pub(crate) fn lines(&mut self, cpu: usize) -> LineRun<'_> {
        let me = self.state.me(cpu);
        LineRun { h: self, me }
    }

    /// [`Hierarchy::access`] by the CPU whose clocks `me` holds.
    #[inline(always)]
    fn access_as(&mut self, me: &mut Me, line: u64, home: impl Home, write: bool) -> Charge {
        let i = line.wrapping_sub(self.dense_base) as usize;
        let level = if i < self.dense_count {
            let k = self.dense_at + (i << self.dense_shift);
            debug_assert!(k < self.frames.len());
            // SAFETY: `i < dense_count`, and `with_dense_lines` sized `frames` for
            // `dense_at + (i << dense_shift)` with every such `i` (2 * nframes entries,
            // `dense_count <= nframes`; or nframes + dense_count); the table is never
            // resized after it. `&mut self` makes this the only reference to it.
            let e = unsafe { self.frames.get_unchecked_mut(k) };
            self.state.visit(me, e, 1, home, write)
        } else {
            let j = line.wrapping_sub(self.indexed_base) as usize;
            if j < self.indexed_count {
                debug_assert!(j < self.indexed.len() && j < self.indexed_stamps.len());
                // SAFETY: `with_indexed_lines` made both tables `indexed_count` long and
                // they are never resized after; `j < indexed_count`. `&mut self` makes
                // these the only references to them.
                let (le, row) = unsafe {
                    (
                        self.indexed.get_unchecked_mut(j),
                        self.indexed_stamps.get_unchecked_mut(j),
                    )
                };
                let mut row = RowStamps(row);
                self.state.shared_access(me, le, &mut row, home, write)
            } else {
                let (level, after) = self.map_access(*me, line, home.node(), write);
                *me = after;
                level
            }
        };
        let s = &mut self.state;
        s.counters.lines[level as usize] += 1;
        Charge {
            level,
            ns: s.latency[level as usize],
            crossed: 0,
        }
    }

    /// [`Hierarchy::access`] of a line of the hash map, and `me` after it. Out of line:
    /// few lines are (the dense and indexed ones are most), and the map's code inlined
    /// into the replay's loop made it keep fewer values in registers. `me` by value: a
    /// reference would keep the caller's copy in memory.
    #[inline(never)]
    fn map_access(&mut self, mut me: Me, line: u64, home: u32, write: bool) -> (Level, Me) {
        let le = self.lines.entry(line).or_default();
        let level = self.state.shared_access(
            &mut me,
            le,
            &mut MapStamps(&mut self.shared, line),
            home,
            write,
        );
        (level, me)
    }

    /// CPU `cpu` reads (or writes) `span`, page by page: each page is served whole from
    /// one level and charged that level's latency plus the streaming time of its other
    /// lines. A block of 2^order frames is the span of its `4096 << order` bytes. A span
    /// of more than [`WHOLE_SPAN_PAGES`] pages (a huge page) is one entry at its first
    /// page instead, judged and charged whole: O(1) per block, exact as long as the
    /// block is touched as a whole (its pages touched one by one later are new entries).
    pub fn touch(&mut self, cpu: usize, span: Span, write: bool) -> Charge {
        if span.bytes > WHOLE_SPAN_PAGES * pagealloc::PAGE_SIZE as u64 {
            // A huge block (THP): one entry at its first page, weighing all its lines.
            return self.touch_page(
                cpu,
                span.page,
                span.bytes.div_ceil(LINE_BYTES),
                span.node,
                write,
            );
        }
        let mut charge = Charge::NONE;
        let mut left = span.bytes;
        let mut page = span.page;
        while left > 0 {
            let bytes = left.min(pagealloc::PAGE_SIZE as u64);
            let lines = bytes.div_ceil(LINE_BYTES);
            charge = charge.join(self.touch_page(cpu, page, lines, span.node, write));
            left -= bytes;
            page += 1;
        }
        charge
    }

    /// CPU `cpu` copies `src` to `dst` (`min` of their lengths): reads the source pages
    /// and writes the destination pages. The loads and stores of a copy share the
    /// core's miss buffers, so their times add.
    pub fn copy(&mut self, cpu: usize, src: Span, dst: Span) -> Charge {
        let bytes = src.bytes.min(dst.bytes);
        let r = self.touch(cpu, Span { bytes, ..src }, false);
        let w = self.touch(cpu, Span { bytes, ..dst }, true);
        r.join(w)
    }

    fn touch_page(&mut self, cpu: usize, page: u64, lines: u64, home: u32, write: bool) -> Charge {
        let mut me = self.state.me(cpu);
        let (level, elsewhere) = if page < self.nframes as u64 {
            let e = &mut self.frames[self.stride * page as usize];
            let elsewhere = State::owned_elsewhere(&me, e);
            (self.state.visit(&mut me, e, lines, home, write), elsewhere)
        } else {
            let e = self.pages.entry(page).or_default();
            let elsewhere = State::owned_elsewhere(&me, e);
            (self.state.visit(&mut me, e, lines, home, write), elsewhere)
        };
        // Another CPU's lines that [`State::serve`] found in a cache, not in DRAM.
        let crossed = elsewhere && !matches!(level, Level::LocalDram | Level::RemoteDram);
        self.state.put(&me);
        let s = &mut self.state;
        s.counters.data_lines[level as usize] += lines;
        s.data_all += lines;
        if level.missed_llc() {
            s.data_missed += lines;
        }
        let l = level as usize;
        Charge {
            level,
            ns: s.latency[l] + (lines - 1) as f64 * s.stream[l],
            crossed: if crossed { lines } else { 0 },
        }
    }
}

impl State {
    /// An access of a line with sharers ([`LineEntry`]), its sharers' stamps in `st`.
    #[inline]
    fn shared_access<S: Stamps>(
        &mut self,
        me: &mut Me,
        le: &mut LineEntry,
        st: &mut S,
        home: impl Home,
        write: bool,
    ) -> Level {
        let cpu = me.cpu;
        let owner = (le.e[0] >> OWNER_SHIFT) as usize;
        let (word, bit) = (cpu / 64, 1u64 << (cpu % 64));
        if write {
            if S::CLEARS {
                for (w, bits) in le.sharers.iter_mut().enumerate() {
                    while *bits != 0 {
                        st.clear(64 * w + bits.trailing_zeros() as usize);
                        *bits &= *bits - 1;
                    }
                }
            } else {
                le.sharers = [0; 4];
            }
            self.visit(me, &mut le.e, 1, home, true)
        } else if owner == 0 || owner == cpu + 1 || cpu >= MAX_SHARERS {
            // First touch or the owner's own read: as any line.
            self.visit(me, &mut le.e, 1, home, false)
        } else if le.e[1] & DIRTY != 0 {
            // A modified line: the reader takes it over, the writer's copy is written
            // back and stays as a shared one (MESI's M -> S).
            let o = owner - 1;
            let stamps = le.e[1] & !DIRTY;
            let level = self.visit(me, &mut le.e, 1, home, false);
            if o < MAX_SHARERS {
                le.sharers[o / 64] |= 1 << (o % 64);
                st.set(o, stamps);
            }
            le.sharers[word] &= !bit;
            st.clear(cpu);
            level
        } else {
            let stamps = st.get(cpu);
            let level = if le.sharers[word] & bit != 0 {
                self.reread(me, &le.e, &stamps, home)
            } else {
                self.share(me, &le.e, home)
            };
            le.sharers[word] |= bit;
            st.set(cpu, me.stamps());
            level
        }
    }

    /// Is an entry last stamped `at` on `socket`'s LLC clock still in that LLC, for an
    /// access of `n` lines?
    #[inline(always)]
    fn in_llc(&self, socket: u16, at: u64, n: u64) -> bool {
        let now = self.llc_clock[socket as usize] & LLC_MASK;
        now.wrapping_sub(at) & LLC_MASK < self.llc_lines.saturating_sub(n - 1)
    }

    /// Is an entry stamped `w1` in the L2 of the CPU `me` holds, for an access of `n`
    /// lines?
    #[inline(always)]
    fn in_l2(&self, me: &Me, w1: u64, n: u64) -> bool {
        let at = (w1 >> L2_SHIFT) as u32 & L2_MASK;
        let d = me.core.l2_clock.wrapping_sub(at) & L2_MASK;
        u64::from(d) < self.l2_lines.saturating_sub(n - 1)
    }

    /// Classifies an access of `n` lines of entry `e` by `cpu` and moves the entry to
    /// `cpu` (its private caches and its socket's LLC, most recently used).
    #[inline(always)]
    fn visit(&mut self, me: &mut Me, e: &mut Entry, n: u64, home: impl Home, write: bool) -> Level {
        let mine = e[0] & !LLC_MASK == me.tag;
        let dirty = write || (mine && e[1] & DIRTY != 0);
        let (level, stamps, llc) = self.serve(me, e, n, home);
        e[0] = me.tag | (llc & LLC_MASK);
        e[1] = stamps | if dirty { DIRTY } else { 0 };
        level
    }
    /// CPU `cpu`'s record and its socket's LLC clock, to access lines with
    /// ([`State::put`] them back after).
    #[inline(always)]
    fn me(&self, cpu: usize) -> Me {
        let core = self.core[cpu];
        Me {
            cpu,
            tag: (cpu as u64 + 1) << OWNER_SHIFT,
            core,
            llc: self.llc_clock[usize::from(core.socket)],
        }
    }

    /// Stores the clocks of `me` ([`State::me`]).
    #[inline(always)]
    fn put(&mut self, me: &Me) {
        self.core[me.cpu] = me.core;
        self.llc_clock[usize::from(me.core.socket)] = me.llc;
    }

    /// Whether another CPU than `me` owns `e` (its lines are served from that CPU's
    /// caches, its socket's LLC, or DRAM: [`State::serve`]).
    #[inline(always)]
    fn owned_elsewhere(me: &Me, e: &Entry) -> bool {
        e[0] >> OWNER_SHIFT != 0 && e[0] & !LLC_MASK != me.tag
    }

    /// A read by sharer `cpu` of its shared copy, inserted at `stamps`
    /// ([`Hierarchy::shared`]): an L1 or L2 hit while the copy is still there (an L2
    /// hit brings it back into L1), else served as a new sharer's read
    /// ([`State::share`]).
    #[inline(always)]
    fn reread(&mut self, me: &mut Me, e: &Entry, stamps: &u64, home: impl Home) -> Level {
        let d1 = me.core.l1_clock.wrapping_sub(*stamps as u32);
        if u64::from(d1) < self.l1_lines {
            Level::L1
        } else if self.in_l2(me, *stamps, 1) {
            me.core.l1_clock = me.core.l1_clock.wrapping_add(1);
            Level::L2
        } else {
            self.share(me, e, home)
        }
    }

    /// A read by `cpu` of a clean line another CPU owns, which `cpu` keeps a shared copy
    /// of from now on ([`LineEntry::sharers`]): classified as [`State::visit`] would,
    /// the misses inserted into `cpu`'s caches, the owner left as it is.
    #[inline]
    fn share(&mut self, me: &mut Me, e: &Entry, home: impl Home) -> Level {
        self.serve(me, e, 1, home).0
    }

    /// Where an access of `n` lines of `e` by `cpu` is served from, and the insertion of
    /// its misses: into L1 unless it hit there, into L2 unless it hit L1 or L2, into the
    /// socket's LLC unless it was there. Returns the level, then `cpu`'s clocks after the
    /// insertion as an entry's second word keeps them ([`State::stamps`]) and its
    /// socket's LLC clock. The entry is not changed.
    ///
    /// One pass that reads `cpu`'s record and its socket's LLC clock once (the replay's
    /// hottest code: every reported line comes here).
    #[inline(always)]
    fn serve(&mut self, me: &mut Me, e: &Entry, n: u64, home: impl Home) -> (Level, u64, u64) {
        let (w0, w1) = (e[0], e[1]);
        let owner = (w0 >> OWNER_SHIFT) as usize;
        let llc_at = w0 & LLC_MASK;
        let c = me.core;
        let llc_now = me.llc;
        let llc_cap = self.llc_lines.saturating_sub(n - 1);
        let l2_cap = self.l2_lines.saturating_sub(n - 1);
        let in_l2 = |clock: u32| {
            let at = (w1 >> L2_SHIFT) as u32 & L2_MASK;
            u64::from(clock.wrapping_sub(at) & L2_MASK) < l2_cap
        };
        // Whether the entry is in this socket's LLC: an owner on the socket (or this
        // CPU) inserted it there, and fewer lines than it holds came in since.
        let in_own_llc = llc_now.wrapping_sub(llc_at) & LLC_MASK < llc_cap;
        // The home node is asked for only on the way to DRAM.
        let dram = || {
            if c.node == home.node() {
                Level::LocalDram
            } else {
                Level::RemoteDram
            }
        };
        let (level, in_this_llc) = if w0 & !LLC_MASK == me.tag {
            let d1 = c.l1_clock.wrapping_sub(w1 as u32);
            let level = if u64::from(d1) < self.l1_lines.saturating_sub(n - 1) {
                Level::L1
            } else if in_l2(c.l2_clock) {
                Level::L2
            } else if in_own_llc {
                Level::Llc
            } else {
                dram()
            };
            (level, in_own_llc)
        } else if owner != 0 {
            let o = self.core[owner - 1];
            let private = in_l2(o.l2_clock);
            if o.socket == c.socket {
                let level = if private && w1 & DIRTY != 0 {
                    Level::Peer
                } else if private || in_own_llc {
                    Level::Llc
                } else {
                    dram()
                };
                (level, in_own_llc)
            } else if private || self.in_llc(o.socket, llc_at, n) {
                (Level::RemoteCache, false)
            } else {
                (dram(), false)
            }
        } else {
            (dram(), false)
        };
        let n32 = n as u32;
        let (mut l1, mut l2, mut llc) = (c.l1_clock, c.l2_clock, llc_now);
        if level != Level::L1 {
            l1 = l1.wrapping_add(n32);
            me.core.l1_clock = l1;
            if level > Level::L2 {
                l2 = l2.wrapping_add(n32);
                me.core.l2_clock = l2;
            }
        }
        if !in_this_llc {
            llc += n;
            me.llc = llc;
        }
        (
            level,
            u64::from(l1) | u64::from(l2 & L2_MASK) << L2_SHIFT,
            llc,
        )
    }
}

#[cfg(test)]
mod tests;
