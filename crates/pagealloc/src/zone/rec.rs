//! [`Rec`]: the access seam's reports for one zone (docs/performance.md, "The access
//! seam"): what the zone's paths touch, counted under the zone lock and, with a sink
//! installed, reported to it ([`crate::access`] has the sink and the access types).

use super::Zone;
use crate::access::{
    emit_frame, emit_pageblock, emit_pcp, emit_pcp_array, emit_zone, AccessSink, Tally, ZoneLine,
};
use crate::memmap::Touch;
use core::marker::PhantomData;

/// The access seam's form, a type parameter of the paths that report (as loom swaps
/// types for its model): [`Reported`], a sink may be installed and each report site
/// tests the zone's; [`Quiet`], the caller has tested that none is (`Tracer::on`, once per
/// operation or zone-lock trip) and every report site compiles away, leaving the tally
/// counts: the code is the build's without the `access` feature.
pub(crate) trait Seam {
    /// Whether a sink may be installed.
    const SINK: bool;
}

/// A sink may be installed: each report site tests for it.
pub(crate) enum Reported {}

impl Seam for Reported {
    const SINK: bool = true;
}

/// No sink is installed (the caller tested): every report site compiles away.
pub(crate) enum Quiet {}

impl Seam for Quiet {
    const SINK: bool = false;
}

/// `seam!(zone, S => expr)`: `expr` with the type `S` naming [`Reported`] if `zone` has
/// an access sink installed, else [`Quiet`] — the one test of the seam per operation or
/// zone-lock trip, choosing which copy of a path generic over [`Seam`] runs.
macro_rules! seam {
    ($zone:expr, $S:ident => $e:expr) => {
        if $zone.trace.on() {
            type $S = $crate::zone::Reported;
            $e
        } else {
            type $S = $crate::zone::Quiet;
            $e
        }
    };
}
pub(crate) use seam;

/// Reports for one zone, under its lock (`tally` given) or not, in the form `S`
/// ([`Seam`]).
pub(crate) struct Rec<'a, S: Seam = Reported> {
    pub(crate) z: &'a Zone,
    pub(crate) tally: Option<&'a Tally>,
    seam: PhantomData<S>,
}

impl<'a, S: Seam> Rec<'a, S> {
    /// Under the zone lock: counted and, with a sink, reported.
    #[inline]
    pub(crate) fn locked(z: &'a Zone, tally: &'a Tally) -> Rec<'a, S> {
        Rec {
            z,
            tally: Some(tally),
            seam: PhantomData,
        }
    }
    /// Without the zone lock: reported to a sink only.
    #[inline]
    pub(crate) fn unlocked(z: &'a Zone) -> Rec<'a, S> {
        Rec {
            z,
            tally: None,
            seam: PhantomData,
        }
    }

    /// The installed sink, if `S` says there may be one.
    #[inline(always)]
    fn sink(&self) -> Option<&'a dyn AccessSink> {
        if S::SINK {
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
    /// reports nothing else to a sink (`S` is [`Quiet`] or none is installed): a loop's counts
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

impl<S: Seam> Touch for Rec<'_, S> {
    #[inline]
    fn meta(&mut self, idx: u32, write: bool, dep: u8) {
        self.frame_dep(self.z.pfn_of(idx), write, dep);
    }
}
