//! Clustered order-0 free lists (Aaron Lu's RFC "zone lock scalability for order 0",
//! patches 3/5 and 4/5; docs/mechanisms.md Appendix A). Not in mainline; [`Config::clustered_refill`](crate::Config::clustered_refill).
//!
//! # Design
//! Every entry of an order-0 free list belongs to a *cluster*: a run of consecutive list
//! entries of at most `batch` frames, described by a slot (`tail`, `len`) in a per-zone
//! array; a frame's `aux` word holds its slot id. A refill (`rmqueue_bulk`) walks the
//! clusters from the list head, reading two frames per cluster (the head's `aux`, the
//! tail's `next`), and cuts all the whole clusters it wants off the list in one
//! `list_cut_position` (one frame written: the new head's `prev`). The cut frames keep
//! state `Buddy` until the refilling CPU, after dropping the zone lock, walks them once
//! to make them `Pcp` (the *fix-up*). So the per-frame metadata touched under the zone
//! lock per refill drops from one per page to about one per cluster
//! (`refill_meta_touched`, `cluster_cut`).
//!
//! Frames join the cluster of their list neighbour at insertion (head inserts join the
//! head cluster, tail inserts the tail cluster) while it has fewer than `batch` frames;
//! a drain (`free_pcppages_bulk`) first asks for fresh clusters, so a bulk free of
//! exactly one batch of one migratetype becomes exactly one cluster.
//!
//! # Locking rules
//! [`Clusters`] lives in the zone's free area: zone lock. Between the cut and the fix-up
//! the cut frames are on no list but still say `Buddy`: a zone-lock holder that would
//! interpret order-0 `Buddy` states (an order-0 merge, the pageblock scanners
//! `move_freepages_block` / `scan_pageblock`, the deferred merge) first calls
//! [`Buddy::settle`](crate::buddy::Buddy::settle), which waits until `Zone::cluster_inflight` (cuts not yet fixed up,
//! raised under the zone lock, lowered with release ordering after the fix-up) is zero —
//! the RFC's `in_progress` counter. A fixer holds only its own pcp lock and never waits,
//! so the wait is bounded by one fix-up. The lock holder's own cut, if any, is fixed up
//! in place under the lock first (rare: a refill that has to fall back and steal).
//! With merge skipping on, order-0 frees never merge, so the wait is rare.
//!
//! # Invariants (checked by `validate`)
//! On every order-0 list, equal `aux` values form contiguous runs, one run per live slot,
//! with `slot.len` = run length and `slot.tail` = the run's last entry; live slots +
//! free slots = all slots; no cut is pending when the zone lock is free.

use crate::frame::NR_MIGRATETYPES;
use crate::memmap::{List, PageMeta, Touch, NIL};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// One cluster: the last list entry of the run and its length.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    tail: u32,
    len: u32,
}

/// Frames cut off an order-0 free list by a refill, linked `first..=last`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cut {
    pub(crate) first: u32,
    pub(crate) last: u32,
    pub(crate) len: u32,
    /// Already fixed up (made `Pcp`) under the zone lock by [`Buddy::settle`](crate::buddy::Buddy::settle).
    pub(crate) fixed: bool,
}

/// The clusters of one zone's order-0 free lists. Zone lock.
#[derive(Debug, Default)]
pub(crate) struct Clusters {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Bit `mt`: the next head insert on the order-0 `mt` list starts a new cluster.
    fresh: u8,
    /// The current zone-lock holder's cut, not yet spliced into its pcp list.
    pub(crate) pending: Option<Cut>,
}

impl Clusters {
    fn alloc_slot(&mut self, tail: u32) -> u32 {
        let s = Slot { tail, len: 1 };
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = s;
                id
            }
            None => {
                self.slots.push(s);
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn release(&mut self, id: u32) {
        self.slots[id as usize].len = 0;
        self.free.push(id);
    }

    /// Every order-0 list starts a new cluster at its next head insert.
    pub(crate) fn start_fresh(&mut self) {
        self.fresh = (1u8 << NR_MIGRATETYPES) - 1;
    }

    /// Entry `i` was just inserted at the head (or tail) of the order-0 `mt` list: join
    /// its neighbour's cluster if that has room below `cap`, else open a new one.
    pub(crate) fn on_insert(&mut self, m: &[PageMeta], i: u32, tail: bool, mt: u8, cap: u32) {
        let e = &m[i as usize];
        let nb = if tail { e.prev() } else { e.next() };
        let bit = 1u8 << mt;
        let fresh = !tail && self.fresh & bit != 0;
        if !tail {
            self.fresh &= !bit;
        }
        if nb != NIL && !fresh {
            let c = m[nb as usize].aux();
            let s = &mut self.slots[c as usize];
            if s.len < cap.max(1) {
                s.len += 1;
                if tail {
                    s.tail = i;
                }
                e.set_aux(c);
                return;
            }
        }
        let c = self.alloc_slot(i);
        e.set_aux(c);
    }

    /// The `len` entries `last`, `prev(last)`, … were just spliced, in one piece, at the
    /// head of the order-0 `mt` list (`last` right before the old head): what `len`
    /// calls of [`Clusters::on_insert`] at the head, `last` first, do, in one pass that
    /// writes each entry's `aux` once. Each entry joins the cluster of the one inserted
    /// before it (the first, the old head's) while that has room below `cap`, else opens
    /// a new one with itself as the tail; a fresh list starts a new cluster.
    pub(crate) fn on_insert_head_run(
        &mut self,
        m: &[PageMeta],
        last: u32,
        len: u32,
        mt: u8,
        cap: u32,
    ) {
        let cap = cap.max(1);
        let bit = 1u8 << mt;
        let fresh = self.fresh & bit != 0;
        self.fresh &= !bit;
        let nb = m[last as usize].next();
        let mut cur = (nb != NIL && !fresh).then(|| m[nb as usize].aux());
        let mut i = last;
        for k in 0..len {
            let e = &m[i as usize];
            let c = match cur {
                Some(c) if self.slots[c as usize].len < cap => {
                    self.slots[c as usize].len += 1;
                    c
                }
                _ => {
                    let c = self.alloc_slot(i);
                    cur = Some(c);
                    c
                }
            };
            e.set_aux(c);
            if k + 1 < len {
                i = e.prev();
            }
        }
    }

    /// Entry `i` is about to be unlinked from an order-0 list.
    pub(crate) fn on_remove(&mut self, m: &[PageMeta], i: u32) {
        let e = &m[i as usize];
        let c = e.aux();
        let s = &mut self.slots[c as usize];
        s.len -= 1;
        if s.len == 0 {
            self.release(c);
        } else if s.tail == i {
            // Runs are contiguous, so the previous entry is in the same cluster.
            s.tail = e.prev();
        }
    }

    /// Cut whole clusters off the head of `list` while they fit in `max` frames.
    /// Returns the cut (not yet fixed up) and the number of clusters, or `None`.
    pub(crate) fn cut(
        &mut self,
        m: &[PageMeta],
        list: &mut List,
        max: u32,
        t: &mut impl Touch,
    ) -> Option<(Cut, u32)> {
        let mut cur = list.head()?;
        let (mut total, mut k, mut last) = (0u32, 0u32, NIL);
        // Whether `cur` was read from `last`'s link, reported just before.
        let mut chased = 0;
        loop {
            let c = m[cur as usize].aux();
            t.meta(cur, false, chased);
            let s = self.slots[c as usize];
            if total + s.len > max {
                break;
            }
            total += s.len;
            last = s.tail;
            k += 1;
            self.release(c);
            cur = m[last as usize].next();
            chased = 0;
            if last != cur {
                // The slot table held the run's tail; the next run's head is its link.
                t.meta(last, false, 0);
                chased = 1;
            }
            if cur == NIL {
                break;
            }
        }
        if k == 0 {
            return None;
        }
        let first = list.cut_front(m, last, total, t);
        Some((
            Cut {
                first,
                last,
                len: total,
                fixed: false,
            },
            k,
        ))
    }

    /// Check the invariants of the module docs against the order-0 lists.
    pub(crate) fn check(&self, lists: &[List], m: &[PageMeta]) -> Result<(), String> {
        if self.pending.is_some() {
            return Err("a cluster cut is pending with the zone lock free".into());
        }
        let mut seen = alloc::vec![false; self.slots.len()];
        let mut live = 0usize;
        for (mt, l) in lists.iter().enumerate() {
            let mut prev_c = u32::MAX;
            let mut run = 0u32;
            let mut prev_i = NIL;
            let mut close = |c: u32, run: u32, last: u32| -> Result<(), String> {
                let s = self
                    .slots
                    .get(c as usize)
                    .ok_or_else(|| format!("o0/{mt}: cluster id {c} out of range"))?;
                if seen[c as usize] {
                    return Err(format!("o0/{mt}: cluster {c} is not one contiguous run"));
                }
                seen[c as usize] = true;
                if s.len != run || s.tail != last {
                    return Err(format!(
                        "o0/{mt}: cluster {c} says len {} tail {} but the run has {run} ending at {last}",
                        s.len, s.tail
                    ));
                }
                Ok(())
            };
            for i in l.iter(m) {
                let c = m[i as usize].aux();
                if c != prev_c {
                    if run > 0 {
                        close(prev_c, run, prev_i)?;
                        live += 1;
                    }
                    prev_c = c;
                    run = 0;
                }
                run += 1;
                prev_i = i;
            }
            if run > 0 {
                close(prev_c, run, prev_i)?;
                live += 1;
            }
        }
        if live + self.free.len() != self.slots.len() {
            return Err(format!(
                "{} cluster slots but {live} live and {} free",
                self.slots.len(),
                self.free.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memmap::NoTouch;

    fn ids(l: &List, m: &[PageMeta]) -> Vec<u32> {
        l.iter(m).map(|i| m[i as usize].aux()).collect()
    }

    #[test]
    fn inserts_join_until_cap_and_cut_takes_whole_clusters() {
        let m: Vec<PageMeta> = (0..32).map(|_| PageMeta::new()).collect();
        let mut c = Clusters::default();
        let mut l = List::new();
        for i in 0..7 {
            l.push_head(&m, i, &mut NoTouch);
            c.on_insert(&m, i, false, 2, 3);
        }
        // head-first runs of at most 3: [6] [5 4 3] [2 1 0]
        assert_eq!(ids(&l, &m), [2, 1, 1, 1, 0, 0, 0]);
        c.check(core::slice::from_ref(&l), &m).unwrap();
        // a fresh start opens a new cluster even though the head one has room
        c.start_fresh();
        l.push_head(&m, 7, &mut NoTouch);
        c.on_insert(&m, 7, false, 2, 3);
        l.push_head(&m, 8, &mut NoTouch);
        c.on_insert(&m, 8, false, 2, 3);
        assert_eq!(ids(&l, &m)[..3], [3, 3, 2]);
        // tail inserts join the tail cluster only when it has room
        l.push_tail(&m, 9, &mut NoTouch);
        c.on_insert(&m, 9, true, 2, 3);
        assert_eq!(*ids(&l, &m).last().unwrap(), 4);
        c.check(core::slice::from_ref(&l), &m).unwrap();
        // removing a cluster's tail moves the tail back
        c.on_remove(&m, 0);
        l.remove(&m, 0, &mut NoTouch);
        c.check(core::slice::from_ref(&l), &m).unwrap();
        // cut: [8 7] (2) + [6] (1) fit in 4, [5 4 3] does not
        let (cut, k) = c.cut(&m, &mut l, 4, &mut crate::access::NoTouch).unwrap();
        assert_eq!((cut.first, cut.last, cut.len, k), (8, 6, 3, 2));
        assert_eq!(l.head(), Some(5));
        c.check(core::slice::from_ref(&l), &m).unwrap();
        assert!(c.cut(&m, &mut l, 2, &mut crate::access::NoTouch).is_none());
    }

    /// A run spliced at a list's head gets, in one pass, the clusters (ids, lengths,
    /// tails) that one head insert per entry gives: on an empty list, after a fresh
    /// start, and joining a head cluster with room, for runs shorter and longer than
    /// the cap.
    #[test]
    fn a_spliced_run_gets_the_clusters_of_one_insert_per_entry() {
        for (start_fresh, before, run, cap) in [
            (false, 0, 7, 3),
            (false, 2, 7, 3),
            (true, 2, 7, 3),
            (false, 1, 2, 4),
            (false, 3, 1, 4),
            (false, 5, 12, 5),
        ] {
            let build = |one_pass: bool| {
                let m: Vec<PageMeta> = (0..32).map(|_| PageMeta::new()).collect();
                let mut c = Clusters::default();
                let mut l = List::new();
                for i in 0..before {
                    l.push_head(&m, i, &mut NoTouch);
                    c.on_insert(&m, i, false, 1, cap);
                }
                if start_fresh {
                    c.start_fresh();
                }
                // the run: entries before..before+run, `last` = before, spliced at the head
                let (first, last) = (before + run - 1, before);
                // linked first..=last through a list of their own
                let mut chain = List::new();
                for i in before..before + run {
                    chain.push_head(&m, i, &mut NoTouch);
                }
                l.splice_after(&m, None, first, last, run, &mut NoTouch);
                if one_pass {
                    c.on_insert_head_run(&m, last, run, 1, cap);
                } else {
                    let mut i = last;
                    for _ in 0..run {
                        c.on_insert(&m, i, false, 1, cap);
                        i = m[i as usize].prev();
                    }
                }
                c.check(core::slice::from_ref(&l), &m).unwrap();
                let slots: Vec<(u32, u32)> = c.slots.iter().map(|s| (s.tail, s.len)).collect();
                (ids(&l, &m), slots, c.free.clone())
            };
            assert_eq!(
                build(true),
                build(false),
                "fresh {start_fresh}, {before} before, run {run}, cap {cap}"
            );
        }
    }
}
