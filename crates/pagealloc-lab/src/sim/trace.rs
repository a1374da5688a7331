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

use std::cell::{Cell, UnsafeCell};

use pagealloc::{Access, AccessSink, Line, ZoneLine};

thread_local! {
    /// This thread's buffered reports. Only [`with_buf`] reaches it.
    static BUF: UnsafeCell<Vec<Packed>> = const { UnsafeCell::new(Vec::new()) };
    /// The cache hierarchy's frame records, for [`ThreadSink`] to load ahead: the
    /// address of frame 0's record, bytes per record, and frames (0: none).
    static AHEAD: Cell<(usize, usize, u64)> = const { Cell::new((0, 0, 0)) };
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
    AHEAD.with(|c| c.set((base as usize, bytes, frames)));
}

/// The host prefetch of frame `pfn`'s record, if [`load_ahead`] named a table.
#[inline(always)]
fn prefetch_frame(pfn: u64) {
    let (base, bytes, frames) = AHEAD.with(Cell::get);
    if pfn < frames {
        super::ahead::line(base.wrapping_add(pfn as usize * bytes));
    }
}

/// One buffered [`Access`] in two words, written and read field by field.
///
/// The allocator builds each [`Access`] on its stack with narrow stores (an enum tag
/// byte, a payload word, three flag bytes); copying it whole reads those bytes back
/// with wide loads, which the host cannot forward from the narrow stores (a
/// store-forwarding stall of about a dozen cycles per access, the largest single cost
/// of the sink in `perf record`). Encoding reads each field at its own width, and the
/// buffer holds 16 bytes per access instead of 24.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packed {
    /// The line's payload: the PFN, or its small fields side by side (see `encode`).
    word: u64,
    /// The line's kind in the low byte, `write` (bit 8), `locked` (bit 9), `dep` (bits 16..24).
    info: u64,
}

const KIND_FRAME: u64 = 0;
const KIND_PAGEBLOCK: u64 = 1;
const KIND_ZONE: u64 = 2;
const KIND_ZONELIST: u64 = 3;
const KIND_PCP: u64 = 4;
const KIND_PCP_ARRAY: u64 = 5;

/// A [`Line::PcpArray`] in 56 bits: buffer line (28 bits), list (4), zone (8), CPU (16).
fn pcp_array_word(cpu: u32, zone: u16, list: u8, line: u32) -> u64 {
    u64::from(line & 0x0fff_ffff)
        | u64::from(list & 0xf) << 28
        | u64::from(zone & 0xff) << 32
        | u64::from(cpu & 0xffff) << 40
}

/// A [`ZoneLine`] as 16 bits: `free_area[o]` is `o`, the others above 255.
const ZL_COUNTERS: u64 = 0x100;
const ZL_WATERMARKS: u64 = 0x101;
const ZL_LOCK: u64 = 0x102;

impl Packed {
    /// The record of `a`.
    #[inline(always)]
    pub(crate) fn encode(a: &Access) -> Packed {
        let (kind, word) = match a.line {
            Line::Frame(pfn) => (KIND_FRAME, pfn),
            Line::Pageblock(pfn) => (KIND_PAGEBLOCK, pfn),
            Line::Zone { zone, line } => {
                let sub = match line {
                    ZoneLine::FreeArea(o) => u64::from(o),
                    ZoneLine::Counters => ZL_COUNTERS,
                    ZoneLine::Watermarks => ZL_WATERMARKS,
                    ZoneLine::Lock => ZL_LOCK,
                };
                (KIND_ZONE, u64::from(zone) << 16 | sub)
            }
            Line::Zonelist { node, pos } => (KIND_ZONELIST, u64::from(node) << 16 | u64::from(pos)),
            Line::Pcp { cpu, zone, list } => (
                KIND_PCP,
                u64::from(cpu) << 32 | u64::from(zone) << 8 | u64::from(list),
            ),
            Line::PcpArray {
                cpu,
                zone,
                list,
                line,
            } => (KIND_PCP_ARRAY, pcp_array_word(cpu, zone, list, line)),
        };
        Packed {
            word,
            info: kind
                | u64::from(a.write) << 8
                | u64::from(a.locked) << 9
                | u64::from(a.dep) << 16,
        }
    }

    /// The record of a report of `line` (no flags): for [`LineMap::place`].
    #[inline(always)]
    fn of_line(line: Line) -> Packed {
        Packed::encode(&Access {
            line,
            write: false,
            locked: false,
            dep: 0,
        })
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
        (self.info & 0xff == KIND_FRAME).then_some(self.word)
    }

    /// The zone, for its lock's trip marker ([`ZoneLine::Lock`]).
    #[inline(always)]
    pub(crate) fn lock_of_zone(self) -> Option<u16> {
        (self.info & 0xff == KIND_ZONE && self.word & 0xffff == ZL_LOCK)
            .then_some((self.word >> 16) as u16)
    }

    /// The access this record holds.
    #[inline(always)]
    #[cfg_attr(not(test), allow(dead_code))] // the engine reads the fields directly
    pub(crate) fn decode(self) -> Access {
        let w = self.word;
        let line = match self.info & 0xff {
            KIND_FRAME => Line::Frame(w),
            KIND_PAGEBLOCK => Line::Pageblock(w),
            KIND_ZONE => Line::Zone {
                zone: (w >> 16) as u16,
                line: match w & 0xffff {
                    ZL_COUNTERS => ZoneLine::Counters,
                    ZL_WATERMARKS => ZoneLine::Watermarks,
                    ZL_LOCK => ZoneLine::Lock,
                    o => ZoneLine::FreeArea(o as u8),
                },
            },
            KIND_ZONELIST => Line::Zonelist {
                node: (w >> 16) as u16,
                pos: w as u16,
            },
            KIND_PCP_ARRAY => Line::PcpArray {
                cpu: (w >> 40) as u32,
                zone: (w >> 32) as u8 as u16,
                list: (w >> 28) as u8 & 0xf,
                line: w as u32 & 0x0fff_ffff,
            },
            _ => Line::Pcp {
                cpu: (w >> 32) as u32,
                zone: (w >> 8) as u16,
                list: w as u8,
            },
        };
        Access {
            line,
            write: self.info & 1 << 8 != 0,
            locked: self.info & 1 << 9 != 0,
            dep: (self.info >> 16) as u8,
        }
    }
}

/// The engine's sink: appends to this thread's buffer.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ThreadSink;

impl AccessSink for ThreadSink {
    #[inline]
    fn access(&self, a: Access) {
        if let Line::Frame(pfn) = a.line {
            prefetch_frame(pfn);
        }
        let p = Packed::encode(&a);
        with_buf(|b| {
            if b.len() < b.capacity() {
                b.push(p);
            } else {
                push_growing(b, p);
            }
        });
    }
}

/// [`ThreadSink::access`]'s push when the buffer is full: a few times per run (the
/// buffer keeps its allocation), so out of line, and the sink's own code keeps few
/// registers to save.
#[cold]
#[inline(never)]
fn push_growing(b: &mut Vec<Packed>, p: Packed) {
    b.push(p);
}

/// Runs `f` on this thread's buffer.
///
/// The buffer was a `RefCell`; its borrow flag, checked and written twice per report,
/// was the sink's hottest instruction in `perf record` (the sink is ~10 % of a kbuild
/// run). The exclusive borrow is instead guaranteed by construction.
#[inline(always)]
fn with_buf<R>(f: impl FnOnce(&mut Vec<Packed>) -> R) -> R {
    // SAFETY: `BUF` is this thread's own (thread-local: no other thread reaches it, no
    // lock is needed), and `with_buf` is its only user. The closures passed here (a
    // push, a swap with the engine's buffer, a clear) call no code that could report
    // an access or drain the buffer, so no second `&mut` to it exists while `f` runs.
    BUF.with(|b| f(unsafe { &mut *b.get() }))
}

/// Moves this thread's buffered accesses into `out` (cleared first).
pub(crate) fn drain_into(out: &mut Vec<Packed>) {
    out.clear();
    with_buf(|b| std::mem::swap(b, out));
}

/// Drops this thread's buffered accesses (work no CPU is charged for).
pub(crate) fn discard() {
    with_buf(Vec::clear);
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
    #[inline]
    #[cfg_attr(not(test), allow(dead_code))] // the engine places records
    pub(crate) fn place(&self, line: Line) -> Place {
        self.place_packed(Packed::of_line(line))
    }

    /// [`LineMap::place`] of a buffered report, read from its record.
    #[inline]
    pub(crate) fn place_packed(&self, p: Packed) -> Place {
        let nzones = self.zone_node.len() as u64;
        let indexed = |i: u64, key: u64| {
            if i < self.indexed {
                K_INDEXED + i
            } else {
                key
            }
        };
        let w = p.word;
        match p.info & 0xff {
            KIND_FRAME => Place {
                key: K_META | w,
                node: self.node_of_pfn(w),
            },
            KIND_PAGEBLOCK => {
                let l = (w >> pagealloc::PAGEBLOCK_ORDER) / PAGEBLOCKS_PER_LINE;
                Place {
                    key: indexed(self.pageblock_at + l, K_PAGEBLOCK | l),
                    node: self.node_of_pfn(w),
                }
            }
            KIND_ZONE => {
                // free_area[o] is line o; counters, watermarks, lock are 32, 33, 34.
                let sub = match w & 0xffff {
                    o if o < ZL_COUNTERS => o,
                    s => s - ZL_COUNTERS + 32,
                };
                let z = w >> 16;
                let i = if z < nzones && sub < ZONE_LINES {
                    z * ZONE_LINES + sub
                } else {
                    u64::MAX
                };
                Place {
                    key: indexed(i, K_ZONE | (z << 8) | sub),
                    node: self.zone_node[z as usize],
                }
            }
            KIND_ZONELIST => {
                let (n, l) = (w >> 16, (w & 0xffff) / 4);
                let i = if n < self.nodes && l < self.zonelist_lines {
                    self.zonelist_at + n * self.zonelist_lines + l
                } else {
                    u64::MAX
                };
                Place {
                    key: indexed(i, K_ZONELIST | (n << 16) | l),
                    node: n as u32,
                }
            }
            KIND_PCP_ARRAY => Place {
                key: K_PCP_ARRAY | w,
                node: self.cpu_node[(w >> 40) as usize],
            },
            _ => {
                let list = w as u8;
                let l = if list == pagealloc::access::PCP_HEADER {
                    0
                } else {
                    (48 + 16 * list as u64) / 64
                };
                let (c, z) = (w >> 32, (w >> 8) & 0xffff);
                let i = if c < self.cpu_node.len() as u64 && z < nzones && l < PCP_LINES {
                    self.pcp_at + (c * nzones + z) * PCP_LINES + l
                } else {
                    u64::MAX
                };
                Place {
                    key: indexed(i, K_PCP | (c << 24) | (z << 8) | l),
                    node: self.cpu_node[c as usize],
                }
            }
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
        let mut a = Allocator::with_platform(
            &Layout::single(1 << 14, 2),
            Config::default(),
            Arc::new(ManualPlatform::new()),
        )
        .unwrap();
        a.set_access_sink(Arc::new(ThreadSink));
        discard();
        let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
        let mut out = Vec::new();
        drain_into(&mut out);
        assert!(out.iter().any(|x| x.decode().line == Line::Frame(f.pfn.0)));
        drain_into(&mut out);
        assert!(out.is_empty(), "drained");
        a.free_on(0, f).unwrap();
        discard();
    }

    #[test]
    fn a_packed_access_decodes_to_itself() {
        let lines = [
            Line::Frame(0),
            Line::Frame((1 << 40) + 5),
            Line::Pageblock(512 * 77),
            Line::Zone {
                zone: 3,
                line: ZoneLine::FreeArea(10),
            },
            Line::Zone {
                zone: 65_535,
                line: ZoneLine::Counters,
            },
            Line::Zone {
                zone: 0,
                line: ZoneLine::Watermarks,
            },
            Line::Zone {
                zone: 1,
                line: ZoneLine::Lock,
            },
            Line::Zonelist { node: 27, pos: 200 },
            Line::Pcp {
                cpu: 767,
                zone: 5,
                list: pagealloc::access::PCP_HEADER,
            },
            Line::Pcp {
                cpu: u32::MAX,
                zone: u16::MAX,
                list: 13,
            },
            Line::PcpArray {
                cpu: 65_535,
                zone: 255,
                list: 13,
                line: (1 << 28) - 1,
            },
            Line::PcpArray {
                cpu: 3,
                zone: 1,
                list: 0,
                line: 0,
            },
        ];
        for (i, line) in lines.into_iter().enumerate() {
            let a = Access {
                line,
                write: i % 2 == 0,
                locked: i % 3 == 0,
                dep: (i * 37) as u8,
            };
            assert_eq!(Packed::encode(&a).decode(), a);
        }
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
