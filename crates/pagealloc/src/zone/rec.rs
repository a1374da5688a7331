//! [`Rec`]: the access seam's reports for one zone (docs/performance.md, "The access
//! seam"): what the zone's paths touch, counted under the zone lock and, with a sink
//! installed, reported to it ([`crate::access`] has the sink and the access types).

use super::Zone;
use crate::access::{
    emit_frame, emit_pageblock, emit_pcp, emit_pcp_array, emit_zone, AccessSink, Tally, ZoneLine,
};
use crate::memmap::Touch;

/// Reports for one zone, under its lock (`tally` given) or not.
///
/// `SINK`: whether a sink may be installed. `true` (the default), each report site tests
/// the zone's sink; `false`, the caller has tested that none is (`Tracer::on`, once per
/// operation or zone-lock trip) and every report site compiles away, leaving the tally
/// counts: the code is the build's without the `access` feature.
pub(crate) struct Rec<'a, const SINK: bool = true> {
    pub(crate) z: &'a Zone,
    pub(crate) tally: Option<&'a Tally>,
}

impl<'a, const SINK: bool> Rec<'a, SINK> {
    /// Under the zone lock: counted and, with a sink, reported.
    #[inline]
    pub(crate) fn locked(z: &'a Zone, tally: &'a Tally) -> Rec<'a, SINK> {
        Rec {
            z,
            tally: Some(tally),
        }
    }
    /// Without the zone lock: reported to a sink only.
    #[inline]
    pub(crate) fn unlocked(z: &'a Zone) -> Rec<'a, SINK> {
        Rec { z, tally: None }
    }

    /// The installed sink, if `SINK` says there may be one.
    #[inline(always)]
    fn sink(&self) -> Option<&'a dyn AccessSink> {
        if SINK {
            self.z.trace.sink()
        } else {
            None
        }
    }

    /// Whether the accesses are made with the zone lock held.
    #[inline]
    fn is_locked(&self) -> bool {
        self.tally.is_some()
    }

    /// The metadata of frame `pfn`, its address computed (PFN arithmetic).
    #[inline]
    pub(crate) fn frame(&self, pfn: u64, write: bool) {
        self.frame_dep(pfn, write, 0);
    }

    /// The metadata of frame `pfn`, its address read from the line reported `dep`
    /// reports earlier (0: computed), as [`Access::dep`](crate::access::Access::dep).
    #[inline]
    pub(crate) fn frame_dep(&self, pfn: u64, write: bool, dep: u8) {
        if let Some(t) = self.tally {
            Tally::bump(&t.meta, 1);
            Tally::bump(&t.lines, 1);
        }
        if let Some(s) = self.sink() {
            emit_frame(s, pfn, write, self.is_locked(), dep);
        }
    }

    /// The pageblock-type entry of the pageblock holding `pfn`.
    #[inline]
    pub(crate) fn pageblock(&self, pfn: u64, write: bool) {
        if let Some(t) = self.tally {
            Tally::bump(&t.lines, 1);
        }
        if let Some(s) = self.sink() {
            emit_pageblock(s, pfn, write, self.is_locked());
        }
    }

    /// A line of the zone.
    #[inline]
    pub(crate) fn zone(&self, line: ZoneLine, write: bool) {
        if let Some(t) = self.tally {
            Tally::bump(&t.lines, 1);
        }
        if let Some(s) = self.sink() {
            emit_zone(s, self.z.idx as u16, line, write, self.is_locked());
        }
    }

    /// A line of the pageset of (`cpu`, this zone): a list head or
    /// [`PCP_HEADER`](crate::access::PCP_HEADER).
    #[inline]
    pub(crate) fn pcp(&self, cpu: usize, list: u8, write: bool) {
        if let Some(t) = self.tally {
            Tally::bump(&t.lines, 1);
        }
        if let Some(s) = self.sink() {
            emit_pcp(
                s,
                cpu as u32,
                self.z.idx as u16,
                list,
                write,
                self.is_locked(),
            );
        }
    }

    /// The line of the ring buffer of list `list` holding buffer slot `slot` (array
    /// pagesets).
    #[inline]
    pub(crate) fn pcp_array(&self, cpu: usize, list: u8, slot: u32, write: bool) {
        if let Some(t) = self.tally {
            Tally::bump(&t.lines, 1);
        }
        if let Some(s) = self.sink() {
            emit_pcp_array(
                s,
                cpu as u32,
                self.z.idx as u16,
                list,
                slot / 16,
                write,
                self.is_locked(),
            );
        }
    }

    /// The counts of `frames` [`Rec::frame_dep`] reports and `others` reports of other
    /// lines ([`Rec::pageblock`], [`Rec::pcp_array`], …) at once, for a caller that
    /// reports nothing else to a sink (`SINK` false or none installed): a loop's counts
    /// in one update instead of one per step.
    #[inline]
    pub(crate) fn counted(&self, frames: u64, others: u64) {
        debug_assert!(self.sink().is_none());
        if let Some(t) = self.tally {
            Tally::bump(&t.meta, frames);
            Tally::bump(&t.lines, frames + others);
        }
    }

    /// `n` pages moved under the lock.
    #[inline]
    pub(crate) fn moved(&self, n: u64) {
        if let Some(t) = self.tally {
            Tally::bump(&t.pages, n);
        }
    }
}

impl<const SINK: bool> Touch for Rec<'_, SINK> {
    #[inline]
    fn meta(&mut self, idx: u32, write: bool, dep: u8) {
        self.frame_dep(self.z.pfn_of(idx), write, dep);
    }
}
