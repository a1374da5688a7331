//! The nolock pair, [`Allocator::alloc_pages_nolock`] and [`Allocator::free_pages_nolock`]:
//! allocation and free from a context that must never wait for a lock (an interrupt
//! handler, an NMI, a tracing hook), as Linux's `alloc_pages_nolock` /
//! `free_pages_nolock` (6.15, `ALLOC_TRYLOCK` / `FPI_TRYLOCK`).
//!
//! # Design
//! Every lock is taken with `try_lock`, never waited for:
//! - an allocation tries the CPU's pageset of each zone of the zonelist (a block already on
//!   the list; a nolock allocation never refills, since a refill takes the zone lock while
//!   holding the pageset's), then the zone itself (one block off the buddy lists). No
//!   slow path: when every lock is taken or no zone passes its low watermark it fails
//!   (`nolock_alloc_fail`), as the kernel returns NULL.
//! - a free is checked as [`Allocator::free_on`]'s (the compare-and-swap on the frame's
//!   state wins the block), then goes to the pageset when its lock is free and the free
//!   would not drain it (the decision of `free_unref_page_commit` is computed on a copy of
//!   the pageset's state first: a drain takes the zone lock), else to the zone when its
//!   lock is free, else it is *deferred*: pushed on the zone's lock-free list
//!   ([`Zone::deferred`](crate::zone), the kernel's `zone->trylock_free_pages`), a stack
//!   linked through the frames' `next` metadata. The block stays `Freeing` (owned by
//!   nobody but the list) until a later holder of the zone lock completes it:
//!   `free_one_page` (every direct free to the zone), a nolock call that took the zone
//!   lock, [`Allocator::tick`], [`Allocator::drain_all_pages`] or
//!   [`Allocator::complete_deferred`]. `validate()` counts the deferred pages
//!   ([`PageTotals::deferred`](crate::PageTotals::deferred)), so none is lost.
//!
//! The stack is pushed with a compare-and-swap (release) and emptied whole with a swap
//! (acquire) by the lock holder (`llist_add` / `llist_del_all`): no pop of single
//! entries, so no ABA. Neither path allocates heap memory: pagesets whose lists are
//! rings (`Config::own_bitmap`'s order-0 lists), which grow on a
//! push, are passed over for the zone.

use super::Allocator;
use crate::buddy::Buddy;
use crate::frame::{AllocError, Frame, FreeError, MigrateType, Pfn, MAX_ORDER};
use crate::memmap::NIL;
use crate::pcp::{pcp_free_types, pindex, Pageset};
use crate::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use crate::topology::ZoneKind;
use crate::tune;
use crate::zone::{Reported, Zone, WMARK_LOW};

impl Allocator {
    /// Allocate 2^`order` unmovable frames as CPU `cpu` without ever waiting for a lock
    /// (`alloc_pages_nolock`): safe to call from an interrupt handler that interrupted
    /// this allocator on the same CPU. Prefers `node` (`None`: the CPU's node).
    ///
    /// Fails with [`AllocError::OutOfMemory`] when no block could be had without waiting
    /// (every lock tried was taken, or no zone of the zonelist passes its low watermark);
    /// there is no slow path (`nolock_alloc_fail`). Free the block with either
    /// [`Allocator::free_pages_nolock`] or [`Allocator::free_on`].
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 1), Config::default())?;
    /// let f = a.alloc_pages_nolock(0, 2, None)?; // nothing cached yet: from the zone
    /// a.free_pages_nolock(0, f)?;
    /// let c = a.counters();
    /// assert_eq!((c.nolock_alloc, c.nolock_free, c.nolock_deferred), (1, 1, 0));
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alloc_pages_nolock(
        &self,
        cpu: usize,
        order: u8,
        node: Option<usize>,
    ) -> Result<Frame, AllocError> {
        if order > MAX_ORDER {
            return Err(AllocError::InvalidOrder(order));
        }
        let c = self.cpus.get(cpu).ok_or(AllocError::InvalidCpu(cpu))?;
        let node = node.unwrap_or(c.node);
        let zl = self
            .zonelists
            .get(node)
            .ok_or(AllocError::InvalidNode(node))?;
        let mt = MigrateType::Unmovable;
        let fa = self.cfg.highatomic_free_accounting;
        for &zi in zl.iter() {
            let z = &self.zones[zi];
            if z.kind == ZoneKind::Movable
                || !z.watermark_fast(order, z.alloc_mark(WMARK_LOW), WMARK_LOW as u32, fa)
            {
                continue;
            }
            if let Some(pfn) = self.nolock_rmqueue(cpu, z, order, mt) {
                c.stats.nolock_alloc.add_shared(1);
                return Ok(Frame::new(Pfn(pfn), order));
            }
        }
        c.stats.nolock_alloc_fail.add_shared(1);
        Err(AllocError::OutOfMemory)
    }

    /// One zone of [`Allocator::alloc_pages_nolock`]: the pageset's list if its lock is
    /// free and the list holds a block, else the zone if its lock is free.
    fn nolock_rmqueue(&self, cpu: usize, z: &Zone, order: u8, mt: MigrateType) -> Option<u64> {
        let st = &self.cpus[cpu].stats;
        let slot = self.slot(cpu, z.idx);
        if self.pcp_allowed(order) && !slot.hot.ring_at(order) {
            match slot.pcp.try_lock() {
                Some(mut pcp) => {
                    let pi = pindex(order, mt, slot.hot.thp_lists);
                    if !pcp.lists[pi].is_empty() {
                        tune::on_alloc(&mut pcp.st, &self.tune);
                        // Not empty: `take_from_list` pops without a refill.
                        return self.take_from_list(
                            Pageset { cpu, zone: z, slot },
                            &mut pcp,
                            order,
                            mt,
                            0,
                        );
                    }
                }
                None => st.nolock_trylock_fail.add_shared(1),
            }
        }
        let Some(mut g) = z.try_lock(cpu, &*self.platform) else {
            st.nolock_trylock_fail.add_shared(1);
            return None;
        };
        let mut b = g.buddy::<Reported>(&self.meta, &self.cfg);
        self.complete_deferred_locked(&mut b);
        self.take_direct_locked(&mut b, order, mt, WMARK_LOW as u32)
    }

    /// Free a block as CPU `cpu` without ever waiting for a lock (`free_pages_nolock`):
    /// safe from an interrupt handler. The block is checked as by [`Allocator::free_on`]
    /// (a double free, a foreign frame or a wrong order is refused and changes nothing),
    /// then freed to the pageset or the zone, or, when both locks are taken, deferred
    /// (`nolock_deferred`) until the next holder of the zone lock completes it (see the
    /// module docs). Either way the block is no longer the caller's.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 2), Config::default())?;
    /// let f = a.alloc_on(0, 0, Gfp::KERNEL, None)?;
    /// a.free_pages_nolock(1, f)?; // CPU 1's pageset was free: cached there
    /// assert!(a.free_pages_nolock(1, f).is_err()); // a double free is refused
    /// assert_eq!(a.pcp_info(1, 0).unwrap().count, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn free_pages_nolock(&self, cpu: usize, frame: Frame) -> Result<(), FreeError> {
        if cpu >= self.cpus.len() {
            return Err(FreeError::InvalidCpu(cpu));
        }
        let zi = self.claim_for_free(frame, false)?;
        let st = &self.cpus[cpu].stats;
        st.nolock_free.add_shared(1);
        let z = &self.zones[zi];
        let (pfn, order) = (frame.pfn.0, frame.order);
        let slot = self.slot(cpu, zi);
        if let Some((mt, pb_mt)) = pcp_free_types(slot, z, pfn, order) {
            // `Config::pcp_buddy`: another CPU's pageblock goes to its pageset, whose
            // lock this path may not wait for: deferred like a busy pageset's.
            if !slot.hot.ring_at(order) && !self.pcp_buddy_foreign(cpu, z, pfn) {
                match slot.pcp.try_lock() {
                    Some(mut pcp) => {
                        // The free's decision on a copy, the block counted in as
                        // `commit_free` does first: a drain would take the zone lock.
                        let mut probe = pcp.st;
                        probe.count += 1 << order;
                        if tune::on_free(&mut probe, order, z.tune_flags(), &self.tune).drain <= 0 {
                            let i = z.meta_index(pfn);
                            self.commit_free_any(
                                Pageset { cpu, zone: z, slot },
                                &mut pcp,
                                i,
                                order,
                                mt,
                                pb_mt,
                            );
                            return Ok(());
                        }
                    }
                    None => st.nolock_trylock_fail.add_shared(1),
                }
            }
        }
        match z.try_lock(cpu, &*self.platform) {
            Some(mut g) => {
                let mut b = g.buddy::<Reported>(&self.meta, &self.cfg);
                self.complete_deferred_locked(&mut b);
                self.free_to_zone_locked(&mut b, pfn, order);
                drop(g);
                self.reclaim_progress(z);
            }
            None => {
                st.nolock_trylock_fail.add_shared(1);
                st.nolock_deferred.add_shared(1);
                self.defer_free(z, pfn);
            }
        }
        Ok(())
    }

    /// Push the claimed block at `pfn` (its head `Freeing`, its order in its metadata) on
    /// `z`'s deferred list (`llist_add`). Lock-free: a failed compare-and-swap means
    /// another push or the lock holder's take succeeded.
    fn defer_free(&self, z: &Zone, pfn: u64) {
        let i = z.meta_index(pfn);
        let e = &self.meta[i as usize];
        let mut head = z.deferred.load(Relaxed);
        loop {
            // The block is ours (claimed): nobody else reads or writes its links until
            // the push below publishes them.
            e.set_next(head);
            match z.deferred.compare_exchange_weak(head, i, Release, Relaxed) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Complete the deferred frees of the zone whose lock `b` holds (`llist_del_all` and
    /// `free_one_page` for each): returns the blocks freed.
    pub(super) fn complete_deferred_locked(&self, b: &mut Buddy<'_>) -> u64 {
        let z = b.z;
        if z.deferred.load(Relaxed) == NIL {
            return 0;
        }
        // Acquire: pairs with the pushes' release, so each entry's `next`, order and
        // state, written before its push, are visible here.
        let mut i = z.deferred.swap(NIL, Acquire);
        let mut n = 0;
        while i != NIL {
            let e = &self.meta[i as usize];
            let next = e.next();
            let order = e.order();
            self.free_to_zone_locked(b, z.pfn_of(i), order);
            n += 1;
            i = next;
        }
        b.st.nolock_deferred_done.add(n);
        n
    }

    /// Complete every zone's deferred nolock frees now, taking each zone lock (waiting for
    /// it) as CPU `cpu`; returns the blocks freed. [`Allocator::tick`] and
    /// [`Allocator::drain_all_pages`] call it; a kernel may call it from its idle loop.
    /// Never call it where the nolock pair is needed (an interrupt handler): it waits.
    pub fn complete_deferred(&self, cpu: usize) -> u64 {
        let cpu = cpu.min(self.cpus.len().saturating_sub(1));
        let mut n = 0;
        for z in self.zones.iter() {
            if z.deferred.load(Relaxed) != NIL {
                n += self.with_buddy(cpu, z, |b| self.complete_deferred_locked(b));
                self.reclaim_progress(z);
            }
        }
        n
    }

    /// Pages of `z` on its deferred list, walked under its lock (`validate()`): `Err` if an
    /// entry is not the `Freeing` head of a block inside the zone, or the list is longer
    /// than the zone (a loop).
    pub(crate) fn deferred_pages_locked(&self, z: &Zone) -> Result<u64, alloc::string::String> {
        use crate::memmap::State;
        let mut i = z.deferred.load(Acquire);
        let (mut pages, mut n) = (0u64, 0u64);
        while i != NIL {
            if i < z.meta_base || !z.contains(z.pfn_of(i)) {
                return Err(alloc::format!(
                    "deferred free list holds index {i} outside the zone"
                ));
            }
            let e = &self.meta[i as usize];
            let pfn = z.pfn_of(i);
            if e.state() != State::Freeing {
                return Err(alloc::format!("deferred free {pfn:#x} reads {e:?}"));
            }
            pages += 1 << e.order();
            n += 1;
            if n > z.end_pfn - z.start_pfn {
                return Err(alloc::format!("deferred free list loops (at {pfn:#x})"));
            }
            i = e.next();
        }
        Ok(pages)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{AllocError, Allocator, Config, FreeError, Gfp, Layout};
    use alloc::vec::Vec;

    /// 64 MiB; 16 MiB under miri (CI's miri step interprets these tests: building and
    /// validating a zone costs time per frame there, and nothing here needs more).
    fn build(cpus: usize, cfg: &str) -> Allocator {
        let pages = if cfg!(miri) { 4096 } else { 16384 };
        Allocator::new(&Layout::single(pages, cpus), cfg.parse::<Config>().unwrap()).unwrap()
    }

    /// A block cached on the pageset: the nolock allocation pops it and the nolock free
    /// caches it again, neither taking the zone lock.
    #[test]
    fn pageset_hit_takes_no_zone_lock() {
        let a = build(1, "linux-6.12");
        let f = a.alloc_on(0, 0, Gfp::KERNEL, None).unwrap(); // refills the unmovable list
        a.free_on(0, f).unwrap();
        let before = a.counters();
        let g = a.alloc_pages_nolock(0, 0, None).unwrap();
        a.free_pages_nolock(0, g).unwrap();
        let c = a.counters().since(&before);
        assert_eq!((c.nolock_alloc, c.nolock_free), (1, 1));
        assert_eq!((c.zone_lock, c.pcp_refill, c.alloc_direct), (0, 0, 0));
        assert_eq!((c.pgalloc, c.pgfree), (1, 1));
        assert_eq!(c.nolock_trylock_fail + c.nolock_deferred, 0);
        a.validate().unwrap();
    }

    /// An empty list is not refilled (a refill holds the pageset lock while it waits for
    /// the zone's): the block comes from the zone under a trylock.
    #[test]
    fn empty_list_takes_the_zone_without_refill() {
        let a = build(1, "linux-6.12");
        let f = a.alloc_pages_nolock(0, 0, None).unwrap();
        let c = a.counters();
        assert_eq!((c.pcp_refill, c.alloc_direct, c.zone_lock), (0, 1, 1));
        assert_eq!(a.pcp_info(0, 0).unwrap().count, 0);
        a.free_pages_nolock(0, f).unwrap();
        a.validate().unwrap();
    }

    /// Both locks taken (as when the interrupt came while this CPU refilled): the free is
    /// deferred, the allocation fails at once, a double free of the deferred block is
    /// refused; validate() counts the deferred page, the tick completes it.
    #[test]
    fn both_locks_taken_defers_and_tick_completes() {
        let a = build(1, "linux-6.12");
        let f = a.alloc_on(0, 0, Gfp::KERNEL, None).unwrap();
        let managed = a.managed_pages();
        {
            let _pcp = a.slot(0, 0).pcp.lock();
            let _zone = a.zones[0].lock_inspect();
            a.free_pages_nolock(0, f).unwrap();
            assert_eq!(
                a.alloc_pages_nolock(0, 0, None),
                Err(AllocError::OutOfMemory)
            );
            assert_eq!(
                a.free_pages_nolock(0, f),
                Err(FreeError::NotAllocated(f.pfn))
            );
        }
        let c = a.counters();
        assert_eq!((c.nolock_deferred, c.nolock_deferred_done), (1, 0));
        assert_eq!((c.nolock_alloc_fail, c.nolock_trylock_fail), (1, 4));
        let t = a.validate().unwrap();
        assert_eq!((t.allocated, t.deferred), (1, 1));
        assert_eq!(t.buddy + t.pcp + t.allocated, managed);
        a.tick(0);
        assert_eq!(a.counters().nolock_deferred_done, 1);
        let t = a.validate().unwrap();
        assert_eq!((t.allocated, t.deferred), (0, 0));
        let c = a.counters();
        assert_eq!(c.pgalloc, c.pgfree);
    }

    /// A deferred free is completed by the next direct free to the zone (`free_one_page`),
    /// blocks of several orders.
    #[test]
    fn direct_free_completes_deferred() {
        let a = build(1, "linux-6.12");
        let fs: Vec<_> = (0..=10)
            .map(|o| a.alloc_on(0, o, Gfp::KERNEL, None).unwrap())
            .collect();
        let big = a.alloc_on(0, 5, Gfp::KERNEL, None).unwrap();
        {
            let _pcp = a.slot(0, 0).pcp.lock();
            let _zone = a.zones[0].lock_inspect();
            for f in &fs {
                a.free_pages_nolock(0, *f).unwrap();
            }
        }
        let deferred: u64 = fs.iter().map(|f| f.pages()).sum();
        assert_eq!(a.validate().unwrap().deferred, deferred);
        a.free_on(0, big).unwrap(); // order 5: to the zone
        let c = a.counters();
        assert_eq!((c.nolock_deferred, c.nolock_deferred_done), (11, 11));
        let t = a.validate().unwrap();
        assert_eq!((t.allocated, t.deferred), (0, 0));
    }

    /// A nolock free never drains: once the pageset is at `high` the blocks go to the zone.
    #[test]
    fn nolock_free_never_drains() {
        let a = build(2, "linux-6.12,fixed_batch=2,fixed_high=8");
        let fs: Vec<_> = (0..32)
            .map(|_| a.alloc_on(1, 0, Gfp::KERNEL, None).unwrap())
            .collect();
        let before = a.counters();
        for f in fs {
            a.free_pages_nolock(0, f).unwrap();
        }
        let c = a.counters().since(&before);
        let p = a.pcp_info(0, 0).unwrap();
        assert_eq!(c.pcp_drain, 0, "{c:?} {p:?}");
        assert!(p.count < p.high, "{p:?}");
        assert_eq!(c.free_direct + p.count as u64, 32);
        assert!(c.free_direct > 0);
        a.validate().unwrap();
    }

    #[test]
    fn bad_arguments_are_refused() {
        let a = build(1, "linux-6.12");
        assert_eq!(
            a.alloc_pages_nolock(0, 11, None),
            Err(AllocError::InvalidOrder(11))
        );
        assert_eq!(
            a.alloc_pages_nolock(1, 0, None),
            Err(AllocError::InvalidCpu(1))
        );
        assert_eq!(
            a.alloc_pages_nolock(0, 0, Some(1)),
            Err(AllocError::InvalidNode(1))
        );
        let f = a.alloc_pages_nolock(0, 0, None).unwrap();
        assert_eq!(a.free_pages_nolock(1, f), Err(FreeError::InvalidCpu(1)));
        a.free_pages_nolock(0, f).unwrap();
        assert_eq!(a.counters().nolock_free, 1);
    }
}
