//! The pops and pushes of the pageset's own paths (`take_from_list`,
//! `free_unref_page_commit`) with an access sink installed: cold, out of line, each
//! reporting the lines the kernel's code would touch. Without a sink the callers run the
//! plain pop and push (docs/performance.md, "The access seam").

use super::ring::RingRec;
use super::Pcp;
use crate::access::PCP_HEADER;
use crate::zone::Rec;
use crate::zone::Zone;

/// The pop of an array pageset's hit with a sink installed: the pageset's count line,
/// the list's head and length, the buffer line read and the frame whose state the
/// caller writes.
#[cold]
#[inline(never)]
pub(super) fn ring_pop_traced(
    cpu: usize,
    zone: &Zone,
    pcp: &mut Pcp,
    pi: usize,
    frame: bool,
) -> Option<u32> {
    let r = Rec::<true>::unlocked(zone);
    r.pcp(cpu, PCP_HEADER, true);
    r.pcp(cpu, pi as u8, true);
    let ring = &mut pcp.rings[pi];
    if ring.is_empty() {
        return None;
    }
    let i = ring.pop_head(&mut RingRec { r: &r, cpu, pi })?;
    if frame {
        r.frame_dep(zone.pfn_of(i), true, 1);
    }
    Some(i)
}

/// The push of an array pageset's free with a sink installed: the pageblock lookup the
/// caller made, the pageset's count line, the list's head and length, the buffer line
/// written and the frame whose state the caller wrote.
#[cold]
#[inline(never)]
pub(super) fn ring_push_traced(
    cpu: usize,
    zone: &Zone,
    pcp: &mut Pcp,
    pi: usize,
    i: u32,
    frame: bool,
) {
    let r = Rec::<true>::unlocked(zone);
    r.pageblock(zone.pfn_of(i), false);
    r.pcp(cpu, PCP_HEADER, true);
    r.pcp(cpu, pi as u8, true);
    if frame {
        r.frame(zone.pfn_of(i), true);
    }
    pcp.rings[pi].push_head(i, &mut RingRec { r: &r, cpu, pi });
}

/// The pop of `take_from_list` with a sink installed: reports the pageset's count line,
/// the list head, the popped frame and its successor (`rmqueue_pcplist` without the zone
/// lock).
#[cold]
#[inline(never)]
pub(super) fn pop_traced(
    cpu: usize,
    zone: &Zone,
    pcp: &mut Pcp,
    pi: usize,
    m: &[crate::memmap::PageMeta],
) -> Option<u32> {
    let mut r = Rec::<true>::unlocked(zone);
    r.pcp(cpu, PCP_HEADER, true);
    r.pcp(cpu, pi as u8, true);
    pcp.lists[pi].pop_head(m, &mut r)
}

/// The push of `free_unref_page_commit` with a sink installed: reports the pageblock
/// lookup the caller made, the pageset's count line, the list head, the frame and the
/// old head.
#[cold]
#[inline(never)]
pub(super) fn push_traced(
    cpu: usize,
    zone: &Zone,
    pcp: &mut Pcp,
    pi: usize,
    m: &[crate::memmap::PageMeta],
    i: u32,
) {
    let mut r = Rec::<true>::unlocked(zone);
    r.pageblock(zone.pfn_of(i), false);
    r.pcp(cpu, PCP_HEADER, true);
    r.pcp(cpu, pi as u8, true);
    pcp.lists[pi].push_head(m, i, &mut r);
}
