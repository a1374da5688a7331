//! The pcp buddy allocator (`Config::pcp_buddy`): Johannes Weiner's RFC "mm: page_alloc:
//! pcp buddy allocator" (linux-mm, April 2026, never merged), written from its
//! description; docs/mechanisms.md A.15 says what the RFC specifies and where this
//! differs.
//!
//! # Design
//! A pageset claims whole pageblocks from its zone and splits them outside the zone
//! lock. The pageblock is then tagged with the claiming CPU ([`Owners`]), and every free
//! of a frame of it goes to that CPU's pageset, whichever CPU frees it: a jemalloc-style
//! purger or an exiting process returns the pages to the pageset they came from, which
//! reuses them without the zone lock. When the owner drains, a bottom-up merge pass over
//! the owned blocks it returns runs under its pageset lock, and the zone lock is taken
//! for the merged chunks. A refill has four phases ([`Allocator::pcp_buddy_refill`]),
//! after a split of an owned block already on the pageset, which takes no zone lock at
//! all:
//! - 0: recover the owner's fragments that earlier drains left in the zone;
//! - 1: claim a whole free pageblock of the request's type;
//! - 2: take one sub-pageblock chunk of the request's type, without fallback (not owned);
//! - 3: the usual `rmqueue_bulk`, fallback included (the caller's, for what is missing).
//!
//! A pageblock goes back to the zone, untagged, when a drain finds it wholly free in the
//! zone, or when its CPU goes offline ([`Allocator::pcp_buddy_offline`]). A pageblock
//! can also become wholly free in the zone without its owner's drain seeing it (the
//! owner's fragments, allocated from the zone by others and freed to the owner, drained
//! later by blocks the release test does not look at): phase 1 of any CPU may then
//! claim it from under its tag, and the old owner drops the stale entry at its next
//! refill, drain or offline.
//!
//! # Locking rules
//! A pageblock's tag changes with the zone lock held, and under the pageset lock of the
//! CPU it will name (a claim, in that CPU's refill) or of the CPU it names (a release, in
//! that CPU's drain or offline). A claim takes only a pageblock wholly free in the zone,
//! so no block of it is being freed: a free reads the tag without a lock, locks the
//! named pageset and reads the tag again, and for as long as it holds that lock and its
//! block, the tag cannot change. [`Pcp::owned`] is protected by its pageset's lock.
//! Lock order: pcp, then zone; a free holds no pageset lock when it takes the owner's.
//!
//! Frees go to the owner; refills do not look at tags. Phases 2 and 3 of another CPU
//! take blocks off the zone's lists whatever pageblock they belong to (the buddy lists
//! do not know owners), so a fragment of `c`'s pageblock that a drain of `c` left in the
//! zone may sit on another pageset until it is allocated (its free then goes to `c`) or
//! drained. The RFC does not say whether its refills skip owned fragments; skipping
//! them would need owner-aware free lists.
//!
//! # Invariants (checked by `validate`)
//! A pageblock tagged `c` is in `c`'s [`Pcp::owned`] of its zone (other CPUs' lists may
//! hold it as a stale entry, which they drop), `c` is online, and a CPU owns at most
//! [`MAX_OWNED`] pageblocks of a zone.

mod owners;

use crate::access::PCP_HEADER;
use crate::allocator::Allocator;
use crate::buddy::Buddy;
use crate::frame::{MigrateType, PAGEBLOCK_ORDER};
use crate::memmap::State;
use crate::pcp::{pindex, Pcp, PcpSlot, NR_PCP_LISTS};
use crate::sync::atomic::Ordering::Relaxed;
use crate::zone::{seam, Rec, Reported, Seam, Zone};
use alloc::vec::Vec;
pub(crate) use owners::{check_config, hit_orders, Owned, Owners};
use owners::{pb_index, pb_start, OwnedBlock};

/// Pageblocks one CPU may own in one zone. The RFC states no limit; ours keeps a
/// CPU from taking a zone's free pageblocks for itself (each CPU's claims stay within
/// 4 × 2 MiB) and bounds phase 0's walk. A choice (docs/mechanisms.md A.15).
pub(crate) const MAX_OWNED: usize = 4;
/// The largest order the pageset lists keep below the pageblock order
/// (`PAGE_ALLOC_COSTLY_ORDER`): a claimed block's remainder is kept in blocks of this
/// order and split again by later refills.
const PCP_TOP: u8 = 3;
const PB_PAGES: u64 = 1 << PAGEBLOCK_ORDER;

/// [`Pcp::within_bounds`] with room for the pageblocks a pageset may claim: a claim
/// puts a whole pageblock on the pageset, whatever its `high`, and up to [`MAX_OWNED`]
/// claims can follow one another before a free drains.
pub(crate) fn within_bounds(p: &Pcp) -> bool {
    let st = &p.st;
    let (lo, hi) = (st.high_min.min(st.high_max), st.high_min.max(st.high_max));
    let claims = (MAX_OWNED as u64 * PB_PAGES) as i64;
    let top = hi as i64 + crate::pcp::refill_overshoot(st.batch) as i64 + claims;
    lo <= st.high && st.high as i64 <= top && st.count as i64 <= top
}

/// A block taken for the pageset: head PFN, order, owned (phases 0 and 1).
type Chunk = (u64, u8, bool);

/// Blocks (head PFN, order) a drain returns.
type Blocks = Vec<(u64, u8)>;

/// A refill of list `pi` (blocks of `order`, type `mt`) of `cpu`'s pageset of `zone`
/// with up to `n` blocks, the `rmqueue_bulk` call it comes before.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Want<'a> {
    pub(crate) cpu: usize,
    pub(crate) zone: &'a Zone,
    pub(crate) slot: &'a PcpSlot,
    pub(crate) order: u8,
    pub(crate) mt: MigrateType,
    pub(crate) pi: usize,
    pub(crate) n: i32,
}

impl Allocator {
    /// The owner of `pfn`'s pageblock when it is not `cpu`: a free there goes to the
    /// owner (`free_pages_nolock`, which may not wait for that lock, defers it instead).
    pub(crate) fn pcp_buddy_foreign(&self, cpu: usize, z: &Zone, pfn: u64) -> bool {
        self.cfg.pcp_buddy && self.pb_owners.of(z, pfn).is_some_and(|c| c != cpu)
    }

    /// The free of a block of an owned pageblock on another CPU: it goes to the owner's
    /// pageset (`free_unref_page_commit` there, which may drain it). False (nothing
    /// done) when no other CPU owns the pageblock or the owner's lists do not take the
    /// block: the caller frees it as usual.
    #[cold]
    pub(crate) fn pcp_buddy_free(&self, cpu: usize, zone: &Zone, pfn: u64, order: u8) -> bool {
        Rec::<Reported>::unlocked(zone).pageblock(pfn, false);
        let Some(owner) = self.pb_owners.of(zone, pfn) else {
            return false;
        };
        if owner == cpu || owner >= self.cpus.len() {
            return false;
        }
        let slot = self.slot(owner, zone.idx);
        let Some((mt, pb_mt)) = crate::pcp::pcp_free_types(slot, zone, pfn, order) else {
            return false;
        };
        let mut pcp = slot.pcp.lock();
        Rec::<Reported>::unlocked(zone).pcp(owner, PCP_HEADER, true);
        // Under the owner's lock the tag cannot change (module docs).
        if self.pb_owners.of(zone, pfn) != Some(owner) {
            return false;
        }
        slot.stats.pcp_buddy_remote_free.add(1);
        let i = zone.meta_index(pfn);
        let ps = crate::pcp::Pageset {
            cpu: owner,
            zone,
            slot,
        };
        self.commit_free_any(ps, &mut pcp, i, order, mt, pb_mt);
        true
    }

    /// The refill `w` (`order < PAGEBLOCK_ORDER`): first by splitting owned blocks
    /// already on the pageset (no zone lock), then phases 0–2 under one zone-lock hold,
    /// their blocks split after it. Returns the blocks put on list `w.pi`; the caller's
    /// `rmqueue_bulk` (phase 3) takes the rest.
    /// Reported as `S` ([`Seam`]).
    pub(crate) fn pcp_buddy_refill<S: Seam>(&self, w: &Want<'_>, pcp: &mut Pcp) -> i32 {
        let Want {
            cpu,
            zone,
            slot,
            order,
            mt,
            pi: _,
            n,
        } = *w;
        // An offline CPU claims nothing (`cpu_offline` releases under this lock).
        if !self.cpus[cpu].online.load(Relaxed) {
            return 0;
        }
        let r = Rec::<S>::unlocked(zone);
        let m = &self.meta[..];
        let mut got = 0i32;
        self.prune(zone, cpu, pcp);
        // Split owned blocks of the larger pageset lists of this type: no zone lock.
        for k in (order + 1..=PCP_TOP).rev() {
            let pk = pindex(k, mt, slot.hot.thp_lists);
            while got < n {
                let Some(i) = pcp.lists[pk].head() else { break };
                let pfn = zone.pfn_of(i);
                if self.pb_owners.of(zone, pfn) != Some(cpu) {
                    break;
                }
                r.pcp(cpu, pk as u8, true);
                pcp.lists[pk].pop_head(m, &mut Rec::<S>::unlocked(zone));
                let c = (pfn, k, true);
                got += self.split_to_pcp(w, pcp, c, true, n - got, &r);
            }
        }
        if got > 0 {
            slot.stats.pcp_buddy_local.add(1);
            if got >= n {
                return got;
            }
        }
        let want = ((n - got) as u64) << order;
        let mut chunks: Vec<Chunk> = Vec::new();
        let mut taken = 0u64;
        {
            let mut g = zone.lock::<S>(cpu, &*self.platform);
            let mut b = g.buddy::<S>(m, &self.cfg);
            // Phase 0: the owner's fragments in the zone.
            for ob in pcp.owned.iter_mut() {
                if taken >= want {
                    break;
                }
                if !ob.in_zone || self.pb_owners.get(zone, ob.pb) != Some(cpu) {
                    continue;
                }
                let start = pb_start(zone, ob.pb);
                if b.pb_mt(start.max(zone.start_pfn)) != mt {
                    continue;
                }
                let before = taken;
                taken += recover(&mut b, zone, start, order, want - taken, &mut chunks);
                slot.stats.pcp_buddy_recovered.add(taken - before);
                // Looked at in full unless it stopped because enough was found.
                ob.in_zone = taken < want;
            }
            // Phase 1: claim a whole pageblock of this type.
            if taken < want && pcp.owned.len() < MAX_OWNED {
                if let Some(pfn) = b.smallest(PAGEBLOCK_ORDER, mt) {
                    let pb = pb_index(zone, pfn) as u32;
                    // Wholly free: a stale tag (module docs) may be taken over.
                    if self.pb_owners.get(zone, pb) != Some(cpu) {
                        pcp.owned.push(OwnedBlock { pb, in_zone: false });
                    }
                    self.pb_owners.set(zone, pb, Some(cpu));
                    b.rec().pageblock(pfn, true);
                    chunks.push((pfn, PAGEBLOCK_ORDER, true));
                    taken += PB_PAGES;
                    slot.stats.pcp_buddy_claim.add(1);
                }
            }
            // Phase 2: one chunk below the pageblock order, of this type only.
            if taken < want {
                let short = want - taken;
                let top = (64 - (short - 1).leading_zeros()) as u8;
                let mut k = top.clamp(order, PAGEBLOCK_ORDER - 1);
                loop {
                    if let Some(pfn) = b.smallest(k, mt) {
                        chunks.push((pfn, k, false));
                        taken += 1 << k;
                        slot.stats.pcp_buddy_chunk.add(1 << k);
                        break;
                    }
                    if k == order {
                        break;
                    }
                    k -= 1;
                }
            }
            if taken > 0 {
                slot.stats.pcp_refill.add(1);
                slot.stats.pcp_refill_pages.add(taken);
                slot.stats.alloc_zone.add(taken);
                b.rec().moved(taken);
            }
            b.rec().pcp(cpu, PCP_HEADER, true);
        }
        // Split outside the zone lock: the blocks are ours (pageset lock held, on no list).
        for c in chunks {
            got += self.split_to_pcp(w, pcp, c, false, n - got, &r);
        }
        got
    }

    /// Split block `c` (on no list, pageset lock held) into: up to `need` blocks of
    /// `order` at the tail of list `pi`, the rest as the largest aligned blocks of order
    /// ≤ [`PCP_TOP`] on the lists of their orders. Returns blocks put on `pi`;
    /// `pcp.count` grows by the block unless it was `counted` (taken off a list of
    /// this pageset).
    fn split_to_pcp<S: Seam>(
        &self,
        w: &Want<'_>,
        pcp: &mut Pcp,
        c: Chunk,
        counted: bool,
        need: i32,
        r: &Rec<'_, S>,
    ) -> i32 {
        let Want {
            cpu,
            zone,
            slot,
            order,
            mt,
            pi,
            n: _,
        } = *w;
        let m = &self.meta[..];
        let (pfn, k, _) = c;
        let end = pfn + (1u64 << k);
        let mut p = pfn;
        let mut put = 0i32;
        while p < end && put < need.max(0) {
            let i = zone.meta_index(p);
            set_pcp_head(&m[i as usize], order, mt, slot.hot.mt_cache);
            r.frame(p, true);
            pcp.lists[pi].push_tail(m, i, &mut Rec::<S>::unlocked(zone));
            put += 1;
            p += 1 << order;
        }
        while p < end {
            let mut o = (p.trailing_zeros() as u8).min(PCP_TOP);
            while p + (1u64 << o) > end {
                o -= 1;
            }
            let i = zone.meta_index(p);
            set_pcp_head(&m[i as usize], o, mt, slot.hot.mt_cache);
            r.frame(p, true);
            let pk = pindex(o, mt, slot.hot.thp_lists);
            r.pcp(cpu, pk as u8, true);
            pcp.lists[pk].push_head(m, i, &mut Rec::<S>::unlocked(zone));
            p += 1 << o;
        }
        if !counted {
            pcp.st.count += 1 << k;
        }
        put
    }

    /// `free_pcppages_bulk` with `pcp_buddy`: `n` pages from the list tails, round robin
    /// from list `start`; the owned blocks among them merged with each other under the
    /// pageset lock, bottom-up, then everything freed under one zone-lock hold. A
    /// pageblock found wholly free in the zone afterwards goes back untagged.
    /// Reported as `S` ([`Seam`]).
    pub(crate) fn pcp_buddy_drain<S: Seam>(
        &self,
        cpu: usize,
        zone: &Zone,
        slot: &PcpSlot,
        n: i32,
        pcp: &mut Pcp,
        start: usize,
    ) {
        let mut n = n.min(pcp.st.count);
        if n <= 0 {
            return;
        }
        let m = &self.meta[..];
        let r = Rec::<S>::unlocked(zone);
        let before = pcp.st.count;
        let (mut owned, mut other): (Blocks, Blocks) = (Vec::new(), Vec::new());
        let mut pi = start % NR_PCP_LISTS;
        while n > 0 && pcp.st.count > 0 {
            while pcp.lists[pi].is_empty() {
                pi = (pi + 1) % NR_PCP_LISTS;
            }
            let k = crate::pcp::order_of(pi);
            r.pcp(cpu, pi as u8, true);
            while let Some(i) = pcp.lists[pi].pop_tail(m, &mut Rec::<S>::unlocked(zone)) {
                let pfn = zone.pfn_of(i);
                n -= 1 << k;
                pcp.st.count -= 1 << k;
                if k < PAGEBLOCK_ORDER && self.pb_owners.of(zone, pfn) == Some(cpu) {
                    owned.push((pfn, k));
                } else {
                    other.push((pfn, k));
                }
                if n <= 0 {
                    break;
                }
            }
            pi = (pi + 1) % NR_PCP_LISTS;
        }
        // The merge pass, pageset lock held: buddies among the owned blocks drained.
        let merges = merge_bottom_up(&mut owned, |pfn| {
            r.frame(pfn, true);
            m[zone.meta_index(pfn) as usize].set_state_flags(State::Tail, 0);
        });
        for &(pfn, k) in &owned {
            let e = &m[zone.meta_index(pfn) as usize];
            e.set_order(k);
        }
        slot.stats.pcp_buddy_merge.add(merges);
        let mut g = zone.lock::<S>(cpu, &*self.platform);
        let mut b = g.buddy::<S>(m, &self.cfg);
        b.rec().pcp(cpu, PCP_HEADER, true);
        for &(pfn, k) in owned.iter().chain(other.iter()) {
            let mt = b.pb_mt(pfn);
            m[zone.meta_index(pfn) as usize].set_state_flags(State::Tail, 0);
            b.free_one(pfn, k, mt, false);
            b.rec().moved(1 << k);
        }
        // Owned pageblocks that are whole in the zone again go back; the others are
        // marked for phase 0.
        let mut released = 0;
        pcp.owned.retain_mut(|ob| {
            if self.pb_owners.get(zone, ob.pb) != Some(cpu) {
                return false;
            }
            let s = pb_start(zone, ob.pb);
            let touched = owned
                .iter()
                .any(|&(p, _)| p >> PAGEBLOCK_ORDER == s >> PAGEBLOCK_ORDER);
            if !touched {
                return true;
            }
            if whole_free(&b, zone, s) {
                self.pb_owners.set(zone, ob.pb, None);
                b.rec().pageblock(s.max(zone.start_pfn), true);
                released += 1;
                return false;
            }
            ob.in_zone = true;
            true
        });
        drop(g);
        slot.stats.pcp_buddy_release.add(released);
        slot.stats.pcp_drain.add(1);
        slot.stats
            .pcp_drain_pages
            .add((before - pcp.st.count) as u64);
    }

    /// Drop the stale entries of `cpu`'s owned list (pageset lock held): pageblocks
    /// another CPU has claimed since (module docs). A tag that no longer names `cpu`
    /// cannot name it again but by `cpu`'s own claim.
    fn prune(&self, zone: &Zone, cpu: usize, pcp: &mut Pcp) {
        pcp.owned
            .retain(|ob| self.pb_owners.get(zone, ob.pb) == Some(cpu));
    }

    /// CPU `cpu` went offline (its pagesets drained): empty them of what frees routed
    /// there meanwhile and give its pageblocks back, untagged.
    pub(crate) fn pcp_buddy_offline(&self, cpu: usize) {
        if !self.cfg.pcp_buddy {
            return;
        }
        for z in self.zones.iter() {
            let slot = self.slot(cpu, z.idx);
            let mut pcp = slot.pcp.lock();
            let c = pcp.st.count;
            if c > 0 {
                seam!(z, S => self.pcp_buddy_drain::<S>(cpu, z, slot, c, &mut pcp, 0));
            }
            let mut released = 0;
            let _g = z.lock::<Reported>(cpu, &*self.platform);
            for ob in pcp.owned.drain(..) {
                if self.pb_owners.get(z, ob.pb) == Some(cpu) {
                    self.pb_owners.set(z, ob.pb, None);
                    released += 1;
                }
            }
            slot.stats.pcp_buddy_release.add(released);
        }
    }

    /// The ownership invariants of zone `zi` (module docs), with every pageset of the
    /// zone locked by the caller (`pcps[cpu]`).
    pub(crate) fn pcp_buddy_check(
        &self,
        zi: usize,
        pcps: &[crate::sync::SpinGuard<'_, Pcp>],
    ) -> Result<(), alloc::string::String> {
        use alloc::format;
        if !self.cfg.pcp_buddy {
            return Ok(());
        }
        let z = &self.zones[zi];
        for (pb, tag) in self.pb_owners.zone_tags(zi) {
            let holders: Vec<usize> = (0..pcps.len())
                .filter(|&c| pcps[c].owned.iter().any(|o| o.pb == pb))
                .collect();
            match tag {
                Some(c) if !holders.contains(&c) => {
                    return Err(format!(
                        "pageblock {pb} tagged cpu {c} but owned by cpus {holders:?}"
                    ));
                }
                _ => {}
            }
        }
        for (cpu, pcp) in pcps.iter().enumerate() {
            if pcp.owned.len() > MAX_OWNED {
                return Err(format!("cpu {cpu} owns {} pageblocks", pcp.owned.len()));
            }
            let online = self.cpus[cpu].online.load(Relaxed);
            if !online
                && pcp
                    .owned
                    .iter()
                    .any(|o| self.pb_owners.get(z, o.pb) == Some(cpu))
            {
                return Err(format!("offline cpu {cpu} still owns pageblocks"));
            }
        }
        Ok(())
    }
}

/// Make the frame at `e` the head of a pageset block of `order`.
fn set_pcp_head(e: &crate::memmap::PageMeta, order: u8, mt: MigrateType, mt_cache: bool) {
    e.set_order(order);
    e.set_state(State::Pcp);
    if mt_cache {
        e.set_mt(mt as u8);
    }
}

/// Phase 0 over one owned pageblock starting at `start`, zone lock held: take its free
/// blocks of order ≥ `order` off the zone's lists until `want` pages are taken, walking
/// the pageblock block by block (each head's order says where the next one starts).
/// Returns pages taken.
fn recover<S: Seam>(
    b: &mut Buddy<'_, S>,
    z: &Zone,
    start: u64,
    order: u8,
    want: u64,
    out: &mut Vec<Chunk>,
) -> u64 {
    let mut taken = 0;
    let mut p = start.max(z.start_pfn);
    let end = (start + PB_PAGES).min(z.end_pfn);
    while p < end && taken < want {
        b.rec().frame(p, false);
        let e = &b.m[z.meta_index(p) as usize];
        let (s, o) = (e.state(), e.order());
        if s == State::Buddy && o >= order && o <= PAGEBLOCK_ORDER {
            let mt = b.del_from_list(p, o);
            b.account(-(1i64 << o), mt);
            out.push((p, o, true));
            taken += 1 << o;
        }
        let step = match s {
            State::Buddy | State::Pcp | State::Allocated | State::Freeing => 1u64 << o,
            _ => 1,
        };
        p += step.min(PB_PAGES);
    }
    taken
}

/// The pageblock at `start` lies in one free block of the zone (order ≥ the pageblock
/// order), zone lock held.
fn whole_free<S: Seam>(b: &Buddy<'_, S>, z: &Zone, start: u64) -> bool {
    for o in PAGEBLOCK_ORDER..=crate::frame::MAX_ORDER {
        let h = start & !((1u64 << o) - 1);
        if h < z.start_pfn || !z.contains(h) {
            return false;
        }
        b.rec().frame(h, false);
        let e = &b.m[z.meta_index(h) as usize];
        if e.state() == State::Buddy && e.order() >= o {
            return true;
        }
    }
    false
}

/// The bottom-up merge of RFC's drain: `blocks` (PFN, order), disjoint, become the
/// fewest aligned blocks they form (each below the pageblock order), the frames that
/// stop heading a block handed to `gone` (which marks them `Tail`). Returns the merges
/// made.
fn merge_bottom_up(blocks: &mut Blocks, gone: impl Fn(u64)) -> u64 {
    blocks.sort_unstable();
    let mut merges = 0;
    for k in 0..PAGEBLOCK_ORDER {
        let mut out: Blocks = Vec::with_capacity(blocks.len());
        let mut j = 0;
        while j < blocks.len() {
            let (p, o) = blocks[j];
            let pair =
                o == k && p & (1u64 << k) == 0 && blocks.get(j + 1) == Some(&(p + (1u64 << k), k));
            if pair {
                gone(p + (1u64 << k));
                out.push((p, k + 1));
                merges += 1;
                j += 2;
            } else {
                out.push((p, o));
                j += 1;
            }
        }
        *blocks = out;
    }
    merges
}

#[cfg(test)]
mod tests {
    use super::merge_bottom_up;

    #[test]
    fn merges_bottom_up() {
        // 0..4 whole (order 2), 5 alone, 6+7 (order 1), 8 alone not aligned with 5.
        let mut v = alloc::vec![
            (3, 0),
            (0, 0),
            (1, 0),
            (2, 0),
            (5, 0),
            (6, 0),
            (7, 0),
            (9, 0)
        ];
        let m = merge_bottom_up(&mut v, |_| {});
        assert_eq!(v, alloc::vec![(0, 2), (5, 0), (6, 1), (9, 0)]);
        assert_eq!(m, 4);
        // Mixed orders: (0,1)+(2,1) -> (0,2); + (4,2) -> (0,3).
        let mut v = alloc::vec![(4, 2), (2, 1), (0, 1)];
        assert_eq!(merge_bottom_up(&mut v, |_| {}), 2);
        assert_eq!(v, alloc::vec![(0, 3)]);
    }
}
