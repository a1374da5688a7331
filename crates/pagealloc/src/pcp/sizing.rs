//! Sizing: the bounds of a pageset (`high_min`, `high_max`, `batch`), written by
//! `zone_set_pageset_high_and_batch`'s store, and what `validate` accepts of `high` and
//! `count` against them. `nr_pcp_high`, `nr_pcp_alloc`, `nr_pcp_free` and
//! `decay_pcp_high` are pure functions of the pageset's state, in [`crate::tune`].

use super::Pcp;
use crate::allocator::Allocator;
use crate::frame::THP_ORDER;
use crate::sync::SpinGuard;
use crate::tune;

/// The most pages refills can leave on a pageset beyond its `high`: `nr_pcp_alloc`
/// caps an order-0 refill at `max(high - count - batch, batch)`, so one refill may end
/// `batch` above `high`; a higher-order refill takes `max(batch >> order, 2)` blocks (one
/// block when `batch` is 1) whatever `count` is. A list is refilled only when empty, so
/// each of the 14 lists adds at most one such refill; frees past `high` drain.
pub(crate) fn refill_overshoot(batch: i32) -> i32 {
    let batch = batch.max(1);
    let blocks = |order: u8| -> i32 {
        let n = if batch > 1 {
            (batch >> order).max(2)
        } else {
            1
        };
        n << order
    };
    let low: i32 = (0..=3u8)
        .map(|o| if o == 0 { batch } else { blocks(o) })
        .sum();
    3 * low + 2 * blocks(THP_ORDER)
}

impl Pcp {
    /// What `validate` checks of every pageset not [`resized`](Pcp::resized) since:
    /// `high_min <= high <= high_max` and `count <= high_max`, each up to what refills may
    /// add beyond `high` ([`refill_overshoot`]): a refill may leave `count` above
    /// `high_max`, and `decay_pcp_high` then sets `high` to `count - (batch << SCALE)`,
    /// above `high_max` too, as the kernel does. A zone so small that its low-watermark
    /// share exceeds its high-fraction share has `high_min > high_max`; the kernel's
    /// `clamp` then yields `high_max` and a cut under pressure stops at `high_min`, so the
    /// bounds are the smaller and the larger of the two.
    pub(crate) fn within_bounds(&self) -> bool {
        let st = &self.st;
        let (lo, hi) = (st.high_min.min(st.high_max), st.high_min.max(st.high_max));
        let top = hi as i64 + refill_overshoot(st.batch) as i64;
        lo <= st.high && st.high as i64 <= top && st.count as i64 <= top
    }

    /// Clear `resized` once the pageset is inside its bounds again (a refill or a tick).
    #[inline]
    pub(crate) fn settle_resize(&mut self) {
        if self.resized && self.within_bounds() {
            self.resized = false;
        }
    }
}

impl Allocator {
    /// Write sizes into a pageset (`zone_set_pageset_high_and_batch`'s store): `high`,
    /// `count` and the factors are not touched; FREE_HIGH_BATCH from the cache slice.
    pub(crate) fn set_pcp_sizes(
        &self,
        cpu: usize,
        zone: usize,
        high_min: i32,
        high_max: i32,
        batch: i32,
        init: bool,
    ) {
        let mut pcp: SpinGuard<'_, Pcp> = self.slot(cpu, zone).pcp.lock();
        pcp.st.high_min = high_min;
        pcp.st.high_max = high_max;
        pcp.st.batch = batch;
        if init {
            // `high` starts at 0 and is clamped to high_min on first use; start there.
            pcp.st.high = high_min;
        }
        // As `pageset_update`, `high` and `count` are left alone: they may now lie outside
        // the new bounds until the next clamp or drain.
        pcp.resized |= !pcp.within_bounds();
        let big = self.cfg.free_high_bounded
            && tune::free_high_batch(self.cpus[cpu].llc_slice_bytes, batch);
        if big {
            pcp.st.flags |= tune::PCPF_FREE_HIGH_BATCH;
        } else {
            pcp.st.flags &= !tune::PCPF_FREE_HIGH_BATCH;
        }
    }
}
