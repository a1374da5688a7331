//! Access reporting: the memory the allocator touches, as it touches it.
//!
//! # Design
//! The code paths that do the work report each cache line of allocator state they read
//! or write: the per-frame metadata (the kernel's `struct page`) of a frame, by PFN — the
//! frame itself and the list neighbours whose links change, the buddies looked up while
//! merging (`__free_one_page`), the frames a cluster cut or pageblock scan visits; the
//! pageblock-type entry of a pageblock (`get_pfnblock_migratetype`); the zone's own lines
//! (a free-area head, the free-page counters, the watermarks and flags); the zonelist
//! entries a walk reads (`get_page_from_freelist`); and the pageset's lock/count line and
//! list heads (`rmqueue_pcplist`, `free_unref_page_commit`). Each report says whether the
//! zone lock is held, and how its address was found ([`Access::dep`]): computed (a buddy by
//! PFN, a pageblock entry, a zone or pageset line), or read from a line reported just
//! before (a list link followed) — the difference between misses a core overlaps and
//! misses it takes one after the other. The code path that makes the access knows which.
//!
//! A user who wants the stream builds the crate with the `access` feature and installs an
//! [`AccessSink`] with `Allocator::set_access_sink` (the simulator does, to charge each
//! line through its cache model). Without the feature the sink is a zero-sized type whose
//! `sink()` is a constant `None`: every report site compiles away, and the allocator is
//! instruction for instruction the one without the seam (docs/performance.md, "The
//! access seam"). With the feature, the PCP hits are generic over the seam too: the copy
//! inlined into `alloc_on`/`free_on` is `Quiet`, the build without the feature's; installing
//! a sink clears the order masks it tests (`Hot::report` in `pcp/mod.rs`), and the
//! out-of-line paths it falls to run the same hits with `S` = `Reported` first, which report
//! what they touch (the lines the zonelist walk and the full free path report for the same
//! operation, in the same order). The pageset refills and drains (`rmqueue_bulk`, `free_pcppages_bulk`) test for a sink once
//! per zone-lock trip (`seam!` in `zone/rec.rs`) and run one of two copies of the trip,
//! by the type parameter `S: Seam` of `Rec`, `Buddy` and the paths between: with its
//! report sites (`Reported`), or with none (`Quiet`), the code without the feature. The rest (the zonelist walk, and the zone trips of
//! `rmqueue_buddy`, `free_one_page` and the slow path's, through `with_buddy`) keep one
//! never-taken branch on the sink pointer per report site. The reporting code itself is
//! in `#[cold]` functions. Under the zone lock the accesses are also counted, always
//! (feature or not), into per-CPU counters (`zone_lock_meta`, `zone_lock_lines`, beside
//! `zone_lock_pages`), so real-thread runs can print "metadata lines per page moved under
//! the lock" — the quantity Lu's merge-skipping and clustered-refill series reduce.
//!
//! # What it does not report
//! The frames' data (a workload's concern), the stack, the allocator's own read-mostly
//! configuration. The zone lock word is reported once per acquisition
//! ([`ZoneLine::Lock`]) as a trip marker, not as a line to charge: its cost is the lock's
//! hand-off, which a lock model charges. A frame's metadata touched several times in one step (order,
//! type, state, links of one list insertion) is one report.

// The list reporter that reports nothing, by the path the unit tests name it.
#[cfg(test)]
pub(crate) use crate::memmap::NoTouch;
#[cfg(feature = "access")]
use alloc::sync::Arc;
use core::cell::Cell;
use core::fmt;

/// A line of the zone's own state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneLine {
    /// `free_area[order]`: the list heads of one order (and `nr_free`).
    FreeArea(u8),
    /// The free-page counters (`NR_FREE_PAGES` and the highatomic counts).
    Counters,
    /// Watermarks, boost and flags (read by every watermark test).
    Watermarks,
    /// The zone lock, just taken: reported once per acquisition, first of the hold's
    /// accesses, so a consumer can tell the trips of one operation apart. Not counted in
    /// `zone_lock_lines` (its cost is the lock's hand-off).
    Lock,
}

/// One cache line of allocator state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Line {
    /// The per-frame metadata (`struct page`) of this PFN.
    Frame(u64),
    /// The pageblock-type entry of the pageblock containing this PFN.
    Pageblock(u64),
    /// A line of zone `zone`.
    Zone {
        /// Zone index.
        zone: u16,
        /// Which line.
        line: ZoneLine,
    },
    /// Entry `pos` of node `node`'s zonelist (the zone reference and its full-zone cache
    /// bit).
    Zonelist {
        /// Node whose zonelist is walked.
        node: u16,
        /// Position in the zonelist.
        pos: u16,
    },
    /// The pageset of (`cpu`, `zone`): `list` is a list head index
    /// (`0..NR_PCP_LISTS`), or [`PCP_HEADER`] for its lock, count and `high`.
    Pcp {
        /// CPU owning the pageset.
        cpu: u32,
        /// Zone index.
        zone: u16,
        /// List head, or [`PCP_HEADER`].
        list: u8,
    },
    /// Line `line` of the ring buffer of list `list` of the pageset of (`cpu`, `zone`),
    /// with `Config::own_bitmap`'s order-0 rings: 16 frame indices per line. The list's
    /// head and length are reported as its [`Line::Pcp`] line.
    PcpArray {
        /// CPU owning the pageset.
        cpu: u32,
        /// Zone index.
        zone: u16,
        /// List index (`0..NR_PCP_LISTS`).
        list: u8,
        /// Line of the list's buffer: entry slot / 16.
        line: u32,
    },
}

/// The `list` of [`Line::Pcp`] naming the pageset's lock/count/high line.
pub const PCP_HEADER: u8 = u8::MAX;

/// One reported access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// What was touched.
    pub line: Line,
    /// Written (else read).
    pub write: bool,
    /// With the zone lock held.
    pub locked: bool,
    /// How the line's address was found, for a consumer modelling memory-level
    /// parallelism: `0` when the code knew it without loading it from another reported
    /// line (PFN arithmetic: a buddy, a pageblock entry, the frames of a block; an array
    /// entry: a zonelist slot, a zone or pageset line; a pointer the code already held);
    /// `k ≥ 1` when it was read from the line reported `k` reports earlier in the same
    /// call (a list link followed: `list_del` reaching the neighbours through the frame's
    /// `lru`), so that load cannot start before that line has arrived.
    pub dep: u8,
}

/// Receives the allocator's accesses, in program order, from the thread that made them.
///
/// Called with locks held (the zone lock for `locked` accesses): an implementation must
/// not call back into the allocator, and should be quick.
///
/// Every report reaches [`AccessSink::access`] unless the sink overrides one of the
/// methods by kind of line ([`AccessSink::frame`], [`AccessSink::zone`],
/// [`AccessSink::pcp`], [`AccessSink::pageblock`]): the allocator calls those, with the
/// line's fields as scalars, and by default they build the [`Access`] and hand it on. A
/// sink that overrides one must treat its report exactly as `access` would treat the
/// same [`Access`]; it spares building the `Access` in memory and matching on its line.
pub trait AccessSink: Send + Sync + fmt::Debug {
    /// One access.
    fn access(&self, a: Access);

    /// An access to [`Line::Frame`]`(pfn)`.
    #[inline]
    fn frame(&self, pfn: u64, write: bool, locked: bool, dep: u8) {
        self.access(Access {
            line: Line::Frame(pfn),
            write,
            locked,
            dep,
        });
    }

    /// An access to [`Line::Zone`]` { zone, line }` (`dep` 0).
    #[inline]
    fn zone(&self, zone: u16, line: ZoneLine, write: bool, locked: bool) {
        self.access(Access {
            line: Line::Zone { zone, line },
            write,
            locked,
            dep: 0,
        });
    }

    /// An access to [`Line::Pcp`]` { cpu, zone, list }` (`dep` 0).
    #[inline]
    fn pcp(&self, cpu: u32, zone: u16, list: u8, write: bool, locked: bool) {
        self.access(Access {
            line: Line::Pcp { cpu, zone, list },
            write,
            locked,
            dep: 0,
        });
    }

    /// An access to [`Line::Pageblock`]`(pfn)` (`dep` 0).
    #[inline]
    fn pageblock(&self, pfn: u64, write: bool, locked: bool) {
        self.access(Access {
            line: Line::Pageblock(pfn),
            write,
            locked,
            dep: 0,
        });
    }
}

/// The installed sink, if any (a field of every zone, read on every path). With the
/// `access` feature off it is zero-sized and [`Tracer::sink`] is a constant `None`.
#[derive(Clone, Default)]
pub(crate) struct Tracer(#[cfg(feature = "access")] Option<Arc<dyn AccessSink>>);

impl Tracer {
    #[cfg(feature = "access")]
    pub(crate) fn new(sink: Arc<dyn AccessSink>) -> Tracer {
        Tracer(Some(sink))
    }
    /// The sink when one is installed.
    #[cfg(feature = "access")]
    #[inline(always)]
    pub(crate) fn sink(&self) -> Option<&dyn AccessSink> {
        self.0.as_deref()
    }
    /// Never a sink: the feature is off, so every report site folds away.
    #[cfg(not(feature = "access"))]
    #[inline(always)]
    pub(crate) fn sink(&self) -> Option<&dyn AccessSink> {
        None
    }
    /// A sink is installed: the test that picks a path's reported copy.
    #[inline(always)]
    pub(crate) fn on(&self) -> bool {
        self.sink().is_some()
    }
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.sink().is_some() {
            "Tracer(on)"
        } else {
            "Tracer(off)"
        })
    }
}

/// Accesses under the zone lock since it was taken; moved into the holder's counters by
/// the guard just before unlocking. Lives in the lock-protected part of the zone.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Per-frame metadata accesses.
    pub(crate) meta: Cell<u64>,
    /// All reported accesses (metadata, pageblock entries, zone lines).
    pub(crate) lines: Cell<u64>,
    /// Pages moved between the buddy lists and a pageset or a caller.
    pub(crate) pages: Cell<u64>,
}

impl Tally {
    #[inline]
    pub(crate) fn bump(c: &Cell<u64>, n: u64) {
        c.set(c.get() + n);
    }
}

// The reporting calls, out of line. Each takes its line's fields as scalars (in
// registers) and builds the `Access` itself: a `Line` built by the caller would be
// passed through memory, written with narrow stores and read back with a wide load the
// host cannot forward (a stall per report, measured in docs/sim-cost-model.md).

#[cold]
#[inline(never)]
pub(crate) fn emit_frame(s: &dyn AccessSink, pfn: u64, write: bool, locked: bool, dep: u8) {
    s.frame(pfn, write, locked, dep);
}

#[cold]
#[inline(never)]
pub(crate) fn emit_pageblock(s: &dyn AccessSink, pfn: u64, write: bool, locked: bool) {
    s.pageblock(pfn, write, locked);
}

#[cold]
#[inline(never)]
pub(crate) fn emit_zone(s: &dyn AccessSink, zone: u16, line: ZoneLine, write: bool, locked: bool) {
    s.zone(zone, line, write, locked);
}

#[cold]
#[inline(never)]
pub(crate) fn emit_pcp(
    s: &dyn AccessSink,
    cpu: u32,
    zone: u16,
    list: u8,
    write: bool,
    locked: bool,
) {
    s.pcp(cpu, zone, list, write, locked);
}

#[cold]
#[inline(never)]
pub(crate) fn emit_pcp_array(
    s: &dyn AccessSink,
    cpu: u32,
    zone: u16,
    list: u8,
    line: u32,
    write: bool,
    locked: bool,
) {
    s.access(Access {
        line: Line::PcpArray {
            cpu,
            zone,
            list,
            line,
        },
        write,
        locked,
        dep: 0,
    });
}

/// The full-zone cache's own access to position `pos` of `node`'s zonelist: the line
/// holding the entry, its `z_to_n` and its full bit — read by `zlc_zone_worth_trying` for
/// a skipped zone, written by `zlc_mark_zone_full` and by a wipe (`zlc_setup` after a
/// second, `zlc_clear_zones_full`) that clears its bit.
#[cold]
#[inline(never)]
pub(crate) fn emit_zonelist(s: &dyn AccessSink, node: usize, pos: usize, write: bool) {
    s.access(Access {
        line: Line::Zonelist {
            node: node as u16,
            pos: pos as u16,
        },
        write,
        locked: false,
        dep: 0,
    });
}

/// One zone of a zonelist walk: the zonelist entry (and its full-zone cache bit), and the
/// zone's watermark and free-page lines the watermark test reads (`zone_watermark_fast`).
#[cold]
#[inline(never)]
pub(crate) fn emit_zone_check(s: &dyn AccessSink, node: usize, pos: usize, zone: usize) {
    let locked = false;
    s.access(Access {
        line: Line::Zonelist {
            node: node as u16,
            pos: pos as u16,
        },
        write: false,
        locked,
        dep: 0,
    });
    for line in [ZoneLine::Watermarks, ZoneLine::Counters] {
        s.zone(zone as u16, line, false, locked);
    }
}
