//! Free: the public entry points, the ownership check, bulk free.

use super::{Allocator, BulkFreeError};
use crate::frame::{Frame, FreeError, MAX_ORDER};
use crate::memmap::State;
use crate::pcp::{Hit, Pageset};
use crate::zone::*;

/// The error of a free whose compare-and-swap found `state`.
#[cold]
#[inline(never)]
fn refused(frame: Frame, state: State) -> FreeError {
    match state {
        State::Reserved => FreeError::ForeignFrame(frame.pfn),
        _ => FreeError::NotAllocated(frame.pfn),
    }
}

/// The error of a free of a block allocated with order `allocated`.
#[cold]
#[inline(never)]
fn wrong_order(frame: Frame, allocated: u8) -> FreeError {
    FreeError::OrderMismatch {
        pfn: frame.pfn,
        allocated,
        given: frame.order,
    }
}

impl Allocator {
    /// Free a block on the current CPU.
    #[inline]
    pub fn free_pages(&self, frame: Frame) -> Result<(), FreeError> {
        self.free_on(self.current_cpu(), frame)
    }

    /// Index of the zone containing `pfn`.
    #[inline]
    pub(crate) fn zone_of(&self, pfn: u64) -> Option<usize> {
        if self.by_pfn.len() == 1 {
            let (s, e, i) = self.by_pfn[0];
            return (pfn >= s && pfn < e).then_some(i);
        }
        let k = self.by_pfn.partition_point(|&(s, _, _)| s <= pfn);
        let (s, e, i) = *self.by_pfn.get(k.checked_sub(1)?)?;
        (pfn >= s && pfn < e).then_some(i)
    }

    /// Check that `frame` is an allocated block of this allocator and take ownership of
    /// it: one compare-and-swap `Allocated -> Freeing` on the head's state, then the order
    /// (stable once the block is ours). `trusted` (only from
    /// [`Allocator::free_on_unchecked`]) skips the state transition and the order check.
    #[inline(always)]
    pub(super) fn claim_for_free(&self, frame: Frame, trusted: bool) -> Result<usize, FreeError> {
        let pfn = frame.pfn.0;
        if frame.order > MAX_ORDER {
            return Err(FreeError::InvalidOrder(frame.order));
        }
        let zi = self
            .zone_of(pfn)
            .ok_or(FreeError::ForeignFrame(frame.pfn))?;
        let z = &self.zones[zi];
        if trusted {
            // The block the caller vouches for must at least lie aligned inside the zone.
            if pfn & ((1u64 << frame.order) - 1) != 0 || pfn + (1u64 << frame.order) > z.end_pfn {
                return Err(FreeError::InvalidOrder(frame.order));
            }
            if frame.order == 0 && z.own_bitmap() {
                // Still the block's owner's bit to drop: a ring holds no owned frame.
                z.own_take(pfn);
                self.meta[z.meta_index(pfn) as usize].set_state(State::Freeing);
            }
        } else if frame.order == 0 && z.own_bitmap() {
            // `Config::own_bitmap`: the bit is the ownership of an order-0 block. Until the
            // frame reaches a ring or the zone it reads as a block being freed (its
            // metadata is ours to write: the bit was), so that `validate()` running
            // meanwhile counts it allocated, as it counts the frames the hit moves
            // under the pageset lock.
            if !z.own_take(pfn) {
                return Err(self.own_refused(frame));
            }
            self.meta[z.meta_index(pfn) as usize].set_state(State::Freeing);
        } else {
            // An allocated head of this order is aligned and inside its zone.
            let e = &self.meta[z.meta_index(pfn) as usize];
            match e.begin_free() {
                Ok(()) => {}
                Err(State::Reserved) => return Err(FreeError::ForeignFrame(frame.pfn)),
                Err(_) => return Err(FreeError::NotAllocated(frame.pfn)),
            }
            let allocated = e.order();
            if allocated != frame.order {
                // Give the block back to its owner untouched: only this thread moves a
                // `Freeing` head (with `Config::own_bitmap` an order-0 frame's state is no
                // ownership: a drain may have written it since, and then it stays so).
                e.end_free_refused();
                if allocated == 0 && z.own_bitmap() && !z.owned(pfn) {
                    // An order-0 frame on a ring, unwritten: not allocated.
                    return Err(FreeError::NotAllocated(frame.pfn));
                }
                return Err(FreeError::OrderMismatch {
                    pfn: frame.pfn,
                    allocated,
                    given: frame.order,
                });
            }
        }
        #[cfg(feature = "std")]
        if self.cfg.poison {
            if let Some(r) = &self.region {
                r.poison(
                    pfn - self.region_base_pfn,
                    frame.pages(),
                    crate::config::POISON_BYTE,
                );
            }
        }
        Ok(zi)
    }

    /// The error of an order-0 free that found the frame's ownership bit clear
    /// (`Config::own_bitmap`), from its metadata, read only: a hole is a foreign frame,
    /// the head of an allocated block of another order a wrong order, anything else (a
    /// free frame, a tail, an order-0 frame on a ring, whose metadata still reads
    /// `Allocated`) not allocated.
    #[cold]
    #[inline(never)]
    fn own_refused(&self, frame: Frame) -> FreeError {
        let pfn = frame.pfn.0;
        let Some(zi) = self.zone_of(pfn) else {
            return FreeError::ForeignFrame(frame.pfn);
        };
        let e = &self.meta[self.zones[zi].meta_index(pfn) as usize];
        match (e.state(), e.order()) {
            (State::Reserved, _) => FreeError::ForeignFrame(frame.pfn),
            (State::Allocated | State::Freeing, o) if o != 0 => FreeError::OrderMismatch {
                pfn: frame.pfn,
                allocated: o,
                given: frame.order,
            },
            _ => FreeError::NotAllocated(frame.pfn),
        }
    }

    /// Free a block as CPU `cpu`. A double free, a frame this allocator did not hand out
    /// (never allocated, in a hole, outside every zone, inside a larger block) or a wrong
    /// order is refused with a [`FreeError`] and changes nothing; of two threads freeing
    /// one block at once exactly one succeeds.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Frame, FreeError, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 2), Config::default())?;
    /// let f = a.alloc_on(0, 1, Gfp::USER, None)?; // two pages
    /// let wrong_order = Frame::new(f.pfn, 0);
    /// assert!(matches!(a.free_on(0, wrong_order), Err(FreeError::OrderMismatch { .. })));
    /// a.free_on(1, f)?; // any CPU may free it: it joins CPU 1's pageset
    /// assert!(matches!(a.free_on(1, f), Err(FreeError::NotAllocated(_))));
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn free_on(&self, cpu: usize, frame: Frame) -> Result<(), FreeError> {
        // Two inlined copies of the hit, picked by one test per call: as in `alloc_on`.
        if self.ring_hits {
            return self.free_on_lists::<true>(cpu, frame, false);
        }
        self.free_on_lists::<false>(cpu, frame, false)
    }

    /// [`Allocator::free_on`] for a caller that installed an access sink
    /// ([`Allocator::set_access_sink`]: the simulator, at every free): straight to the
    /// reported hit and the full path, without the inlined quiet hit, which serves no
    /// order while a sink is installed (the same free, checks and reports as `free_on`).
    /// Without a sink, the same free by the full path.
    #[cfg(feature = "access")]
    #[inline]
    pub fn free_on_reported(&self, cpu: usize, frame: Frame) -> Result<(), FreeError> {
        self.free_on_slow(cpu, frame, false)
    }

    /// [`Allocator::free_on`] (`trusted` false) or [`Allocator::free_on_unchecked`]
    /// with the hit for the pageset's list forms: linked lists only (`RINGS` false), or
    /// rings and linked lists.
    #[inline(always)]
    fn free_on_lists<const RINGS: bool>(
        &self,
        cpu: usize,
        frame: Frame,
        trusted: bool,
    ) -> Result<(), FreeError> {
        match self.free_hit::<RINGS, Quiet>(cpu, frame, trusted) {
            Hit::Done => Ok(()),
            Hit::Miss => self.free_on_slow(cpu, frame, trusted),
            Hit::Refused(state) if !trusted => Err(refused(frame, state)),
            Hit::WrongOrder(allocated) if !trusted => Err(wrong_order(frame, allocated)),
            _ => self.free_on_slow(cpu, frame, trusted),
        }
    }

    /// [`Allocator::free_on`] past the inlined PCP hit: with an access sink installed the
    /// hit reported (the inlined copy serves no order then, [`crate::pcp`]'s `Hot::report`);
    /// else the checks with their errors, then `free_unref_page` (which may find the
    /// pageset busy or the block for the zone).
    #[inline(never)]
    fn free_on_slow(&self, cpu: usize, frame: Frame, trusted: bool) -> Result<(), FreeError> {
        #[cfg(feature = "access")]
        match self.free_hit::<true, Reported>(cpu, frame, trusted) {
            Hit::Done => return Ok(()),
            Hit::Refused(state) if !trusted => return Err(refused(frame, state)),
            Hit::WrongOrder(allocated) if !trusted => return Err(wrong_order(frame, allocated)),
            _ => {}
        }
        if cpu >= self.cpus.len() {
            return Err(FreeError::InvalidCpu(cpu));
        }
        let zi = self.claim_for_free(frame, trusted)?;
        self.free_unref_page(cpu, &self.zones[zi], frame.pfn.0, frame.order);
        Ok(())
    }

    /// [`Allocator::free_on`] without the ownership check (the compare-and-swap on the
    /// frame's state and the order check), for callers that track ownership themselves,
    /// as a kernel trusts its own callers. Still refused: a CPU, order or frame outside
    /// this allocator, and a misaligned frame.
    ///
    /// # Safety
    /// `frame` must be a block this allocator handed out with exactly this order and not
    /// freed since, and no other thread may free it concurrently. Otherwise the
    /// allocator's lists are corrupted: the same frames are handed out to several owners
    /// (aliasing the memory behind `Allocator::frame_ptr`), a pageset list can loop on
    /// itself so that allocation never runs out, and `validate()` fails.
    #[inline(always)]
    pub unsafe fn free_on_unchecked(&self, cpu: usize, frame: Frame) -> Result<(), FreeError> {
        if self.ring_hits {
            return self.free_on_lists::<true>(cpu, frame, true);
        }
        self.free_on_lists::<false>(cpu, frame, true)
    }

    /// Free to the buddy lists directly (`free_one_page`).
    #[cold]
    pub(crate) fn free_to_zone(&self, cpu: usize, z: &Zone, pfn: u64, order: u8) {
        self.with_buddy(cpu, z, |b| {
            // `free_one_page` completes the frees nolock callers deferred.
            self.complete_deferred_locked(b);
            self.free_to_zone_locked(b, pfn, order);
        });
        self.reclaim_progress(z);
    }

    /// The locked part of `free_one_page`: the claimed block at `pfn` to the free lists of
    /// the zone whose lock `b` holds.
    pub(super) fn free_to_zone_locked(&self, b: &mut crate::buddy::Buddy<'_>, pfn: u64, order: u8) {
        self.meta[b.z.meta_index(pfn) as usize].set_state(State::Tail);
        b.free_pages(pfn, order);
        b.rec().moved(1 << order);
        b.st.pgfree.add(1 << order);
        b.st.free_direct.add(1);
    }

    /// Free many blocks (`free_unref_folios`): the pageset stays locked across consecutive
    /// frames of one zone. Stops at the first refused frame: the frames before it are
    /// freed, the ones from it on are not.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// // Frees are checked in every build: a double free is refused.
    /// let a = Allocator::new(&Layout::single(16384, 1), Config::default())?;
    /// let mut frames = Vec::new();
    /// a.alloc_bulk_on(0, 0, Gfp::USER, None, 3, &mut frames)?;
    /// frames.insert(1, frames[0]); // the same frame twice
    /// let e = a.free_bulk_on(0, &frames).unwrap_err();
    /// assert_eq!(e.index, 1); // the first copy was freed, the rest was not
    /// a.free_bulk_on(0, &frames[2..])?;
    /// a.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn free_bulk_on(&self, cpu: usize, frames: &[Frame]) -> Result<(), BulkFreeError> {
        if cpu >= self.cpus.len() && !frames.is_empty() {
            return Err(BulkFreeError {
                index: 0,
                error: FreeError::InvalidCpu(cpu),
            });
        }
        let mut held: Option<(usize, crate::sync::SpinGuard<'_, crate::pcp::Pcp>)> = None;
        for (index, f) in frames.iter().enumerate() {
            let zi = self
                .claim_for_free(*f, false)
                .map_err(|error| BulkFreeError { index, error })?;
            let z = &self.zones[zi];
            let slot = self.slot(cpu, zi);
            let pfn = f.pfn.0;
            if self.cfg.pcp_buddy {
                // Each block to its pageblock's owner (`free_unref_page`), no lock held.
                drop(held.take());
                self.free_unref_page(cpu, z, pfn, f.order);
                continue;
            }
            let Some((mt, pb)) = crate::pcp::pcp_free_types(slot, z, pfn, f.order) else {
                held = None;
                self.free_to_zone(cpu, z, pfn, f.order);
                continue;
            };
            if held.as_ref().is_none_or(|(hz, _)| *hz != zi) {
                drop(held.take());
                held = slot.pcp.try_lock().map(|g| (zi, g));
            }
            match held.as_mut() {
                Some((_, pcp)) => {
                    let i = z.meta_index(pfn);
                    self.commit_free_any(Pageset { cpu, zone: z, slot }, pcp, i, f.order, mt, pb)
                }
                None => self.free_to_zone(cpu, z, pfn, f.order),
            }
        }
        Ok(())
    }
}
