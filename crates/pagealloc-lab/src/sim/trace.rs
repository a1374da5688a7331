//! The allocator's access stream in the simulator: the sink the engine installs
//! (`Allocator::set_access_sink`), and the mapping of each reported [`Line`] to a cache
//! line of the kernel's layout.
//!
//! # Design
//! The allocator reports each line of its state it touches, in program order, from the
//! thread that runs it ([`pagealloc::access`]). The simulator is single-threaded per run,
//! so the sink appends to a thread-local buffer (no lock, no atomic per access) that the
//! engine drains after each operation and replays through the cache hierarchy: accesses
//! made with the zone lock held go to the lock's hold, the others to the CPU's clock.
//!
//! # The layout charged
//! What is charged is the kernel's layout, not this crate's (whose metadata entry is 16
//! bytes): the published tables were measured on Linux.
//! - `struct page`: 64 bytes, one cache line per frame (`Line::Frame`).
//! - `pageblock_flags`: 4 bits per pageblock, 128 pageblocks per line.
//! - `struct zone`: one line per `free_area[order]` (6 list heads of 16 bytes and
//!   `nr_free`: 104 bytes, so about 1.6 lines; one is charged), one for the vmstat
//!   counters, one for watermarks and flags.
//! - zonelist: `struct zoneref` is 16 bytes, 4 per line.
//! - `struct per_cpu_pages`: lock, count, high, batch and the other scalars in the first
//!   48 bytes, then `lists[NR_PCP_LISTS]` of 16 bytes: list `l` is in line
//!   `(48 + 16 l) / 64`.
//! - Order-0 rings (`Config::own_bitmap`, not a kernel layout): each ring's buffer,
//!   16 frame indices per line, lines of their own (`Line::PcpArray`).
//!
//! Each line has a home NUMA node: the frame's node for `struct page` and pageblock bits
//! (the memmap lives on its node), the zone's node, the zonelist's node, the CPU's node
//! for its pagesets.

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;

use pagealloc::{Access, AccessSink, Line, ZoneLine};

thread_local! {
    /// This thread's sink state. Only [`with_local`] reaches it.
    static LOCAL: UnsafeCell<Local> = const {
        UnsafeCell::new(Local {
            buf: ManuallyDrop::new(Vec::new()),
            map: ManuallyDrop::new(None),
            ahead: (0, 0, 0),
        })
    };
}

/// A thread's sink: the reports buffered since the engine last drained them, the map
/// that places each report when it is made, and the hierarchy's frame records to load
/// ahead.
///
/// Nothing in it is dropped with the thread (`ManuallyDrop`): a thread-local without
/// drop glue needs no destructor registered, so each report reaches it without testing
/// whether one was (a load and a branch per report). [`install`]`(None)`, which every
/// simulation ends with, frees the map and the buffer instead.
#[derive(Debug)]
struct Local {
    buf: ManuallyDrop<Vec<Rec>>,
    /// The machine's line map ([`install`]); no map, no records.
    map: ManuallyDrop<Option<LineMap>>,
    /// The address of frame 0's record, bytes per record, and frames (0: none).
    ahead: (usize, usize, u64),
}

/// Runs `f` on this thread's sink state.
///
/// The buffer was a `RefCell`; its borrow flag, checked and written twice per report,
/// was the sink's hottest instruction in `perf record` (the sink is ~10 % of a kbuild
/// run). The exclusive borrow is instead guaranteed by construction.
#[inline(always)]
fn with_local<R>(f: impl FnOnce(&mut Local) -> R) -> R {
    // Only the pointer is taken inside `with`: with the sink's work inside it, `with`
    // was not inlined (a call per report, ~+30 instructions).
    let l = LOCAL.with(UnsafeCell::get);
    // SAFETY: `LOCAL` is this thread's own (thread-local: no other thread reaches it, no
    // lock is needed), alive while the thread runs (`with` above panics once it is
    // destroyed, before any use), and `with_local` is its only user. The closures
    // passed here (a placement and a push, a swap with the engine's buffer, a clear,
    // setting the map or the hint) call no code that could report an access or drain
    // the buffer, so no second `&mut` to it exists while `f` runs.
    f(unsafe { &mut *l })
}

/// From now on this thread's sink places and buffers each report through `map`
/// (`None`: it drops them, and the buffer's memory is freed). Drops what was buffered.
pub(crate) fn install(map: Option<LineMap>) {
    // The old map and buffer are dropped after `with_local`'s borrow has ended.
    let (old_map, old_buf) = with_local(|l| {
        let keep = map.is_some();
        let old_map = std::mem::replace(&mut *l.map, map);
        l.buf.clear();
        let old_buf = if keep {
            Vec::new()
        } else {
            std::mem::take(&mut *l.buf)
        };
        (old_map, old_buf)
    });
    drop((old_map, old_buf));
}

/// From now on the sink of this thread asks the host to load frame `pfn`'s record of
/// the cache hierarchy (`base + pfn * bytes`, for `pfn < frames`) into its caches when
/// the allocator reports frame `pfn`'s metadata line
/// ([`super::hierarchy::Hierarchy::frame_records`]).
///
/// The engine replays a call's lines only after the call returns; without the hint
/// every frame's record was a host cache miss at the replay (the hottest load of the
/// run in `perf record`), and with it the miss overlaps the rest of the allocator's
/// call. A hint only: no result depends on it. `frames == 0` turns it off.
pub(crate) fn load_ahead(base: *const u64, bytes: usize, frames: u64) {
    with_local(|l| l.ahead = (base as usize, bytes, frames));
}

/// One buffered report, placed: its line's key and home node ([`LineMap::place`]),
/// computed when the allocator reports it, and its flags. A frame's node is not looked
/// up here: the replay asks [`LineMap::node_of_pfn`] only for the frame lines served
/// from DRAM (`sim/hierarchy.rs`' `Home`), about one in seven.
///
/// The sink used to store the report's fields and the replay to place them; placing at
/// once reads each field of the [`Access`] at its own width (the allocator builds it
/// with narrow stores: copying it whole would stall on store forwarding) and leaves the
/// replay the key it charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rec {
    /// The line's key; for a lock's trip marker, the zone.
    key: u64,
    /// The kind in the low byte, `write` (bit 8), `locked` (bit 9), `dep` (bits
    /// 16..24), the home node in the high 32 bits.
    info: u64,
}

/// A frame's `struct page` line (its key is `K_META | pfn`).
const KIND_FRAME: u64 = 0;
/// Another line of allocator state.
const KIND_LINE: u64 = 1;
/// A zone lock just taken ([`ZoneLine::Lock`]): a trip marker, not a line.
const KIND_LOCK: u64 = 2;

impl Rec {
    /// The record of `a`, placed by `map`.
    #[inline(always)]
    pub(crate) fn new(map: &LineMap, a: &Access) -> Rec {
        match a.line {
            Line::Frame(pfn) => Rec::of_frame(pfn, a.write, a.locked, a.dep),
            Line::Zone {
                zone,
                line: ZoneLine::Lock,
            } => Rec::lock(zone, a.write, a.locked, a.dep),
            line => Rec::placed(map.place(line), a.write, a.locked, a.dep),
        }
    }

    /// The flags of a report of kind `kind` (`info` but the node).
    #[inline(always)]
    fn flags(kind: u64, write: bool, locked: bool, dep: u8) -> u64 {
        kind | u64::from(write) << 8 | u64::from(locked) << 9 | u64::from(dep) << 16
    }

    /// The record of a report of frame `pfn`'s metadata line.
    #[inline(always)]
    fn of_frame(pfn: u64, write: bool, locked: bool, dep: u8) -> Rec {
        Rec {
            key: K_META | pfn,
            info: Rec::flags(KIND_FRAME, write, locked, dep),
        }
    }

    /// The trip marker of zone `zone`'s lock ([`ZoneLine::Lock`]).
    #[inline(always)]
    fn lock(zone: u16, write: bool, locked: bool, dep: u8) -> Rec {
        Rec {
            key: u64::from(zone),
            info: Rec::flags(KIND_LOCK, write, locked, dep),
        }
    }

    /// The record of a report of another line, placed at `p`.
    #[inline(always)]
    fn placed(p: Place, write: bool, locked: bool, dep: u8) -> Rec {
        Rec {
            key: p.key,
            info: Rec::flags(KIND_LINE, write, locked, dep) | u64::from(p.node) << 32,
        }
    }

    /// The line's key ([`Place::key`]).
    #[inline(always)]
    pub(crate) fn key(self) -> u64 {
        self.key
    }

    /// The line's home node ([`Place::node`]); 0 for a frame's line, whose node is
    /// its PFN's ([`LineMap::node_of_pfn`]).
    #[inline(always)]
    pub(crate) fn node(self) -> u32 {
        (self.info >> 32) as u32
    }

    /// Whether the line is written.
    #[inline(always)]
    pub(crate) fn write(self) -> bool {
        self.info & 1 << 8 != 0
    }

    /// Whether the zone lock is held ([`Access::locked`]).
    #[inline(always)]
    pub(crate) fn locked(self) -> bool {
        self.info & 1 << 9 != 0
    }

    /// [`Access::dep`].
    #[inline(always)]
    pub(crate) fn dep(self) -> u8 {
        (self.info >> 16) as u8
    }

    /// The PFN, for a frame's metadata line.
    #[inline(always)]
    pub(crate) fn frame(self) -> Option<u64> {
        (self.info & 0xff == KIND_FRAME).then_some(self.key & !K_META)
    }

    /// The zone, for its lock's trip marker ([`ZoneLine::Lock`]).
    #[inline(always)]
    pub(crate) fn lock_of_zone(self) -> Option<u16> {
        (self.info & 0xff == KIND_LOCK).then_some(self.key as u16)
    }
}

/// The engine's sink: places each report and appends it to this thread's buffer.
///
/// The allocator's reports come by kind of line with their fields as scalars
/// ([`AccessSink::frame`], [`AccessSink::zone`], [`AccessSink::pcp`],
/// [`AccessSink::pageblock`]): each builds its record straight from them, the records
/// [`ThreadSink::access`] builds from the same [`Access`] (`Rec::new`). Through
/// `access` each report was built in memory by the allocator, read back field by field
/// and matched on its line here: 50–85 instructions per report, now 46 (a frame's) to
/// 78 (a pageset line's), and ~5 fewer in the allocator's `emit_*` (docs/performance.md,
/// "Simulator speed").
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ThreadSink;

/// Appends `r` to the buffer of `l`.
#[inline(always)]
fn push(l: &mut Local, r: Rec) {
    if l.buf.len() < l.buf.capacity() {
        l.buf.push(r);
    } else {
        push_growing(&mut l.buf, r);
    }
}

/// Asks the host to load frame `pfn`'s hierarchy record ([`load_ahead`]).
#[inline(always)]
fn hint_frame(l: &Local, pfn: u64) {
    let (base, bytes, frames) = l.ahead;
    if pfn < frames {
        super::ahead::line(base.wrapping_add(pfn as usize * bytes));
    }
}

impl AccessSink for ThreadSink {
    #[inline]
    fn access(&self, a: Access) {
        with_local(|l| {
            let Some(map) = &*l.map else {
                return;
            };
            if let Line::Frame(pfn) = a.line {
                hint_frame(l, pfn);
            }
            push(l, Rec::new(map, &a));
        });
    }

    #[inline]
    fn frame(&self, pfn: u64, write: bool, locked: bool, dep: u8) {
        with_local(|l| {
            if l.map.is_none() {
                return;
            }
            hint_frame(l, pfn);
            push(l, Rec::of_frame(pfn, write, locked, dep));
        });
    }

    #[inline]
    fn zone(&self, zone: u16, line: ZoneLine, write: bool, locked: bool) {
        with_local(|l| {
            let Some(map) = &*l.map else {
                return;
            };
            let r = if line == ZoneLine::Lock {
                Rec::lock(zone, write, locked, 0)
            } else {
                Rec::placed(map.place_zone(zone, line), write, locked, 0)
            };
            push(l, r);
        });
    }

    #[inline]
    fn pcp(&self, cpu: u32, zone: u16, list: u8, write: bool, locked: bool) {
        with_local(|l| {
            let Some(map) = &*l.map else {
                return;
            };
            push(
                l,
                Rec::placed(map.place_pcp(cpu, zone, list), write, locked, 0),
            );
        });
    }

    #[inline]
    fn pageblock(&self, pfn: u64, write: bool, locked: bool) {
        with_local(|l| {
            let Some(map) = &*l.map else {
                return;
            };
            push(l, Rec::placed(map.place_pageblock(pfn), write, locked, 0));
        });
    }
}

/// [`push`] when the buffer is full: a few times per run (the buffer keeps its
/// allocation), so out of line, and the sink's own code keeps few registers to save.
#[cold]
#[inline(never)]
fn push_growing(b: &mut Vec<Rec>, r: Rec) {
    b.push(r);
}

/// Moves this thread's buffered records into `out` (cleared first).
pub(crate) fn drain_into(out: &mut Vec<Rec>) {
    out.clear();
    with_local(|l| std::mem::swap(&mut *l.buf, out));
}

/// Drops this thread's buffered records (work no CPU is charged for).
pub(crate) fn discard() {
    with_local(|l| l.buf.clear());
}

/// A [`Line::PcpArray`] in 56 bits: buffer line (28 bits), list (4), zone (8), CPU (16).
fn pcp_array_word(cpu: u32, zone: u16, list: u8, line: u32) -> u64 {
    u64::from(line & 0x0fff_ffff)
        | u64::from(list & 0xf) << 28
        | u64::from(zone & 0xff) << 32
        | u64::from(cpu & 0xffff) << 40
}

// Disjoint key spaces: the top byte says what the key is.
/// Key of frame 0's `struct page` line; frame `pfn`'s is `K_META | pfn` (a dense range of
/// the hierarchy).
pub(crate) const K_META: u64 = 1 << 56;
const K_PAGEBLOCK: u64 = 2 << 56;
const K_ZONE: u64 = 3 << 56;
const K_ZONELIST: u64 = 4 << 56;
const K_PCP: u64 = 5 << 56;
/// Key of the first indexed line ([`LineMap::indexed`]): zone, zonelist, pageset and
/// pageblock lines numbered densely, in a table of the hierarchy instead of its map.
const K_INDEXED: u64 = 6 << 56;
/// Lines of the order-0 rings' buffers (`Config::own_bitmap`): `K_PCP_ARRAY | word`,
/// the word of [`pcp_array_word`]; each on its CPU's node.
const K_PCP_ARRAY: u64 = 7 << 56;

/// Lines per zone: `free_area[0..32]`, counters, watermarks, lock.
const ZONE_LINES: u64 = 35;
/// Lines per pageset: the header and the list heads (`(48 + 16 l) / 64`).
const PCP_LINES: u64 = (48 + 16 * pagealloc::NR_PCP_LISTS as u64) / 64 + 1;

/// Pageblocks per line of `pageblock_flags` (4 bits each).
const PAGEBLOCKS_PER_LINE: u64 = 128;

/// PFNs per chunk of [`LineMap::node_of_pfn`]'s table: 1 GiB of 4 KiB frames (a
/// 512 GiB machine has 512 chunks).
const CHUNK_SHIFT: u32 = 18;
/// A chunk that more than one span starts in: searched.
const MIXED: u32 = u32::MAX;

/// Where a reported line lives, for the cache hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    /// Line key, unique across every kind of line.
    pub(crate) key: u64,
    /// NUMA node of the memory.
    pub(crate) node: u32,
}

/// The facts of the machine the mapping needs.
#[derive(Clone, Debug)]
pub(crate) struct LineMap {
    /// Node of each zone.
    zone_node: Vec<u32>,
    /// Node of each CPU.
    cpu_node: Vec<u32>,
    /// Per node `(start_pfn, end_pfn)`, sorted by start.
    node_spans: Vec<(u64, u64, u32)>,
    /// [`LineMap::node_of_pfn`] of every PFN of chunk `pfn >> CHUNK_SHIFT` when they all
    /// have the same answer, else [`MIXED`]: one load per frame line instead of a
    /// binary search over the spans (a chain of dependent loads, ~2 % of a kbuild run).
    chunk_node: Vec<u32>,
    /// Nodes (of zones and CPUs), and zonelist lines per node.
    nodes: u64,
    zonelist_lines: u64,
    /// Start of each kind's indexes among the indexed keys, and their count.
    zonelist_at: u64,
    pcp_at: u64,
    pageblock_at: u64,
    indexed: u64,
}

impl LineMap {
    pub(crate) fn new(a: &pagealloc::Allocator, layout: &pagealloc::Layout) -> LineMap {
        let zone_node: Vec<u32> = (0..a.nr_zones())
            .map(|z| a.zone_info(z).map_or(0, |i| i.node as u32))
            .collect();
        let cpu_node: Vec<u32> = (0..a.nr_cpus())
            .map(|c| a.cpu_node(c).unwrap_or(0) as u32)
            .collect();
        let mut node_spans: Vec<(u64, u64, u32)> = layout
            .zones()
            .map(|(node, z)| (z.start_pfn, z.end_pfn(), node as u32))
            .collect();
        node_spans.sort_unstable();
        let nzones = zone_node.len() as u64;
        let nodes = zone_node
            .iter()
            .chain(&cpu_node)
            .map(|&n| u64::from(n) + 1)
            .max()
            .unwrap_or(1);
        let zonelist_lines = nzones / 4 + 1;
        let zonelist_at = nzones * ZONE_LINES;
        let pcp_at = zonelist_at + nodes * zonelist_lines;
        let pageblock_at = pcp_at + cpu_node.len() as u64 * nzones * PCP_LINES;
        let max_pfn = node_spans.iter().map(|s| s.1).max().unwrap_or(0);
        let search = |pfn: u64| {
            let k = node_spans.partition_point(|s| s.0 <= pfn);
            node_spans.get(k.saturating_sub(1)).map_or(0, |s| s.2)
        };
        // The answer changes only at a span's start: a chunk with no start strictly
        // inside it has its first PFN's answer throughout.
        let chunk_node = (0..=max_pfn >> CHUNK_SHIFT)
            .map(|c| {
                let (lo, hi) = (c << CHUNK_SHIFT, (c + 1) << CHUNK_SHIFT);
                if node_spans.iter().any(|s| lo < s.0 && s.0 < hi) {
                    MIXED
                } else {
                    search(lo)
                }
            })
            .collect();
        let indexed =
            pageblock_at + (max_pfn >> pagealloc::PAGEBLOCK_ORDER) / PAGEBLOCKS_PER_LINE + 1;
        LineMap {
            zone_node,
            cpu_node,
            node_spans,
            chunk_node,
            nodes,
            zonelist_lines,
            zonelist_at,
            pcp_at,
            pageblock_at,
            indexed,
        }
    }

    /// The indexed line keys, `(base, count)`, for [`super::hierarchy::Hierarchy::with_indexed_lines`]:
    /// every zone, zonelist, pageset and pageblock line of the machine maps to one of
    /// them (a line outside the numbering keeps a key of its kind, served by the map).
    pub(crate) fn indexed(&self) -> (u64, u64) {
        (K_INDEXED, self.indexed)
    }

    /// Node of CPU `cpu`.
    #[inline]
    pub(crate) fn cpu_node(&self, cpu: usize) -> u32 {
        self.cpu_node[cpu]
    }

    /// Node of the memory holding frame `pfn`.
    #[inline]
    pub(crate) fn node_of_pfn(&self, pfn: u64) -> u32 {
        if let Some(&n) = self.chunk_node.get((pfn >> CHUNK_SHIFT) as usize) {
            if n != MIXED {
                return n;
            }
        }
        self.search_node(pfn)
    }

    /// [`LineMap::node_of_pfn`] by a search over the spans: for the chunks several spans
    /// start in and PFNs beyond the table. Out of line: rare, and inlined into the sink
    /// its registers cost every report a save and a restore.
    #[cold]
    #[inline(never)]
    fn search_node(&self, pfn: u64) -> u32 {
        if self.node_spans.len() == 1 {
            return self.node_spans[0].2;
        }
        let k = self.node_spans.partition_point(|s| s.0 <= pfn);
        self.node_spans[k.saturating_sub(1)].2
    }

    /// The cache line and home node of a reported line. Zone, zonelist, pageset and
    /// pageblock lines get an indexed key ([`LineMap::indexed`]) when their numbers are
    /// within the machine's (always, for what the allocator reports), else a key of
    /// their kind; either way distinct lines get distinct keys.
    #[inline(always)]
    pub(crate) fn place(&self, line: Line) -> Place {
        match line {
            Line::Frame(pfn) => Place {
                key: K_META | pfn,
                node: self.node_of_pfn(pfn),
            },
            Line::Pageblock(pfn) => self.place_pageblock(pfn),
            Line::Zone { zone, line } => self.place_zone(zone, line),
            Line::Zonelist { node, pos } => {
                let (n, l) = (u64::from(node), u64::from(pos) / 4);
                let i = if n < self.nodes && l < self.zonelist_lines {
                    self.zonelist_at + n * self.zonelist_lines + l
                } else {
                    u64::MAX
                };
                Place {
                    key: self.indexed_or(i, K_ZONELIST | (n << 16) | l),
                    node: n as u32,
                }
            }
            Line::PcpArray {
                cpu,
                zone,
                list,
                line,
            } => Place {
                key: K_PCP_ARRAY | pcp_array_word(cpu, zone, list, line),
                node: self.cpu_node[(cpu & 0xffff) as usize],
            },
            Line::Pcp { cpu, zone, list } => self.place_pcp(cpu, zone, list),
        }
    }

    /// A line's key: indexed (`K_INDEXED + i`) when `i` is within the numbering, else
    /// `key`, of its kind.
    #[inline(always)]
    fn indexed_or(&self, i: u64, key: u64) -> u64 {
        if i < self.indexed {
            K_INDEXED + i
        } else {
            key
        }
    }

    /// [`LineMap::place`] of [`Line::Pageblock`]`(pfn)`.
    #[inline(always)]
    pub(crate) fn place_pageblock(&self, pfn: u64) -> Place {
        let l = (pfn >> pagealloc::PAGEBLOCK_ORDER) / PAGEBLOCKS_PER_LINE;
        Place {
            key: self.indexed_or(self.pageblock_at + l, K_PAGEBLOCK | l),
            node: self.node_of_pfn(pfn),
        }
    }

    /// [`LineMap::place`] of [`Line::Zone`]` { zone, line }`.
    #[inline(always)]
    pub(crate) fn place_zone(&self, zone: u16, line: ZoneLine) -> Place {
        let nzones = self.zone_node.len() as u64;
        // free_area[o] is line o; counters, watermarks, lock are 32, 33, 34.
        let sub = match line {
            ZoneLine::FreeArea(o) => u64::from(o),
            ZoneLine::Counters => 32,
            ZoneLine::Watermarks => 33,
            ZoneLine::Lock => 34,
        };
        let z = u64::from(zone);
        let i = if z < nzones && sub < ZONE_LINES {
            z * ZONE_LINES + sub
        } else {
            u64::MAX
        };
        Place {
            key: self.indexed_or(i, K_ZONE | (z << 8) | sub),
            node: self.zone_node[z as usize],
        }
    }

    /// [`LineMap::place`] of [`Line::Pcp`]` { cpu, zone, list }`.
    #[inline(always)]
    pub(crate) fn place_pcp(&self, cpu: u32, zone: u16, list: u8) -> Place {
        let nzones = self.zone_node.len() as u64;
        let l = if list == pagealloc::access::PCP_HEADER {
            0
        } else {
            (48 + 16 * list as u64) / 64
        };
        let (c, z) = (u64::from(cpu), u64::from(zone));
        let i = if c < self.cpu_node.len() as u64 && z < nzones && l < PCP_LINES {
            self.pcp_at + (c * nzones + z) * PCP_LINES + l
        } else {
            u64::MAX
        };
        Place {
            key: self.indexed_or(i, K_PCP | (c << 24) | (z << 8) | l),
            node: self.cpu_node[c as usize],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagealloc::{Allocator, Config, Gfp, Layout, ManualPlatform};
    use std::sync::Arc;

    #[test]
    fn the_sink_buffers_what_the_allocator_reports() {
        let layout = Layout::single(1 << 14, 2);
        let mut a =
            Allocator::with_platform(&layout, Config::default(), Arc::new(ManualPlatform::new()))
                .unwrap();
        a.set_access_sink(Arc::new(ThreadSink));
        install(None);
        let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
        let mut out = Vec::new();
        drain_into(&mut out);
        assert!(out.is_empty(), "no map installed: nothing recorded");
        a.free_on(0, f).unwrap();
        install(Some(LineMap::new(&a, &layout)));
        let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
        drain_into(&mut out);
        assert!(out.iter().any(|x| x.frame() == Some(f.pfn.0)));
        drain_into(&mut out);
        assert!(out.is_empty(), "drained");
        a.free_on(0, f).unwrap();
        install(None);
    }

    #[test]
    fn a_record_keeps_the_report_s_flags_and_its_line_s_place() {
        let layout = Layout::numa(2, 1 << 14, 2);
        let a =
            Allocator::with_platform(&layout, Config::default(), Arc::new(ManualPlatform::new()))
                .unwrap();
        let m = LineMap::new(&a, &layout);
        let hi = layout.zones().nth(1).unwrap().1.start_pfn;
        let lines = [
            Line::Frame(0),
            Line::Frame(hi + 5),
            Line::Frame((1 << 40) + 5),
            Line::Pageblock(512 * 7),
            Line::Zone {
                zone: 1,
                line: ZoneLine::FreeArea(10),
            },
            Line::Zone {
                zone: 0,
                line: ZoneLine::Counters,
            },
            Line::Zone {
                zone: 1,
                line: ZoneLine::Watermarks,
            },
            Line::Zone {
                zone: 1,
                line: ZoneLine::Lock,
            },
            Line::Zonelist { node: 1, pos: 1 },
            Line::Pcp {
                cpu: 3,
                zone: 1,
                list: pagealloc::access::PCP_HEADER,
            },
            Line::Pcp {
                cpu: 1,
                zone: 0,
                list: 13,
            },
            Line::PcpArray {
                cpu: 2,
                zone: 1,
                list: 13,
                line: (1 << 28) - 1,
            },
        ];
        for (i, line) in lines.into_iter().enumerate() {
            let acc = Access {
                line,
                write: i % 2 == 0,
                locked: i % 3 == 0,
                dep: (i * 37) as u8,
            };
            let r = Rec::new(&m, &acc);
            assert_eq!(
                (r.write(), r.locked(), r.dep()),
                (acc.write, acc.locked, acc.dep),
                "{line:?}"
            );
            match line {
                Line::Zone {
                    zone,
                    line: ZoneLine::Lock,
                } => {
                    assert_eq!(r.lock_of_zone(), Some(zone));
                    assert_eq!(r.frame(), None);
                }
                _ => {
                    let p = m.place(line);
                    let node = match line {
                        Line::Frame(pfn) => m.node_of_pfn(pfn),
                        _ => r.node(),
                    };
                    assert_eq!((r.key(), node), (p.key, p.node), "{line:?}");
                    assert_eq!(r.lock_of_zone(), None);
                    let pfn = match line {
                        Line::Frame(pfn) => Some(pfn),
                        _ => None,
                    };
                    assert_eq!(r.frame(), pfn, "{line:?}");
                }
            }
        }
    }

    #[test]
    fn the_sink_s_reports_by_kind_record_what_access_records() {
        let layout = Layout::numa(2, 1 << 14, 2);
        let a =
            Allocator::with_platform(&layout, Config::default(), Arc::new(ManualPlatform::new()))
                .unwrap();
        let hi = layout.zones().nth(1).unwrap().1.start_pfn;
        install(Some(LineMap::new(&a, &layout)));
        let s = ThreadSink;
        let zone_lines = [
            ZoneLine::FreeArea(0),
            ZoneLine::FreeArea(10),
            ZoneLine::Counters,
            ZoneLine::Watermarks,
            ZoneLine::Lock,
        ];
        let (mut by_kind, mut whole) = (Vec::new(), Vec::new());
        for (i, flags) in [(false, false), (true, false), (false, true), (true, true)]
            .into_iter()
            .enumerate()
        {
            let (write, locked) = flags;
            let dep = (i * 37) as u8;
            let mut both = |line: Line, dep: u8, by: &dyn Fn()| {
                by();
                drain_into(&mut by_kind);
                s.access(Access {
                    line,
                    write,
                    locked,
                    dep,
                });
                drain_into(&mut whole);
                assert_eq!(by_kind, whole, "{line:?}");
                assert_eq!(by_kind.len(), 1);
            };
            for pfn in [0, hi + 5, (1 << 40) + 5] {
                both(Line::Frame(pfn), dep, &|| s.frame(pfn, write, locked, dep));
                both(Line::Pageblock(pfn), 0, &|| s.pageblock(pfn, write, locked));
            }
            for zone in [0, 1] {
                for line in zone_lines {
                    both(Line::Zone { zone, line }, 0, &|| {
                        s.zone(zone, line, write, locked)
                    });
                }
            }
            for (cpu, zone) in [(0, 0), (3, 1)] {
                for list in [0, 5, 13, pagealloc::access::PCP_HEADER] {
                    both(Line::Pcp { cpu, zone, list }, 0, &|| {
                        s.pcp(cpu, zone, list, write, locked)
                    });
                }
            }
        }
        install(None);
        s.frame(1, true, false, 0);
        drain_into(&mut by_kind);
        assert!(by_kind.is_empty(), "no map installed: nothing recorded");
    }

    #[test]
    fn the_node_of_a_frame_is_its_span_s() {
        // Spans of 1.5 chunks: one starts inside chunk 1, one on chunk 3's first PFN.
        let layout = Layout::numa(3, 3 << (CHUNK_SHIFT - 1), 1);
        let a =
            Allocator::with_platform(&layout, Config::default(), Arc::new(ManualPlatform::new()))
                .unwrap();
        let m = LineMap::new(&a, &layout);
        assert!(m.chunk_node.contains(&MIXED) && m.chunk_node.iter().any(|&n| n != MIXED));
        for (node, z) in layout.zones() {
            for pfn in [z.start_pfn, z.start_pfn + 1, z.end_pfn() - 1] {
                assert_eq!(m.node_of_pfn(pfn), node as u32, "pfn {pfn}");
            }
        }
        assert_eq!(
            m.node_of_pfn(u64::MAX >> 1),
            2,
            "beyond the last span: its node"
        );
    }

    #[test]
    fn lines_map_to_distinct_keys_and_their_nodes() {
        let layout = Layout::numa(2, 1 << 14, 2);
        let a =
            Allocator::with_platform(&layout, Config::default(), Arc::new(ManualPlatform::new()))
                .unwrap();
        let m = LineMap::new(&a, &layout);
        let hi = layout.zones().nth(1).unwrap().1.start_pfn;
        assert_eq!(m.place(Line::Frame(0)).node, 0);
        assert_eq!(m.place(Line::Frame(hi)).node, 1);
        // The chunk table answers as the search over the spans does, at and around
        // every span's edges and beyond the last frame.
        let search = |pfn: u64| {
            let k = m.node_spans.partition_point(|s| s.0 <= pfn);
            m.node_spans[k.saturating_sub(1)].2
        };
        for &(start, end, _) in &m.node_spans {
            for pfn in [start, end]
                .into_iter()
                .flat_map(|p| p.saturating_sub(2)..p + 2)
                .chain([0, (1 << CHUNK_SHIFT) + 1, u64::MAX >> 1])
            {
                assert_eq!(m.node_of_pfn(pfn), search(pfn), "pfn {pfn}");
            }
        }
        assert_ne!(m.place(Line::Frame(1)).key, m.place(Line::Pageblock(1)).key);
        // 128 pageblocks share a line.
        assert_eq!(
            m.place(Line::Pageblock(0)).key,
            m.place(Line::Pageblock(127 << pagealloc::PAGEBLOCK_ORDER))
                .key
        );
        let pcp = |list| {
            m.place(Line::Pcp {
                cpu: 1,
                zone: 0,
                list,
            })
        };
        assert_eq!(pcp(pagealloc::access::PCP_HEADER).key, pcp(0).key);
        assert_ne!(pcp(0).key, pcp(1).key);
        assert_eq!(pcp(0).node, a.cpu_node(1).unwrap() as u32);
        // Array pagesets' ring lines: their own keys, on the CPU's node.
        let ring = |cpu, list, line| {
            m.place(Line::PcpArray {
                cpu,
                zone: 0,
                list,
                line,
            })
        };
        let keys = [ring(1, 0, 0), ring(1, 0, 1), ring(1, 1, 0), ring(0, 0, 0)].map(|p| p.key);
        for (i, k) in keys.iter().enumerate() {
            assert!(keys[..i].iter().all(|x| x != k), "{keys:?}");
            assert_ne!(*k, pcp(0).key);
        }
        assert_eq!(ring(1, 0, 5).node, a.cpu_node(1).unwrap() as u32);
    }
}
