//! The allocator's side of [`PcpPolicy`]: each call bounded as the module docs of
//! [`crate::policy`] say, and the allocator's calls that pick the kernel's function or
//! the config's policy.

use super::{PcpPolicy, PolicyZone, ZoneRead};
use crate::tune::{self, Decay, PcpState, Sizing, Tune, ZoneFlags, PCPF_FREE_HIGH_BATCH};

impl ZoneRead for crate::zone::Zone {
    fn free_pages(&self) -> u64 {
        crate::zone::Zone::free_pages(self)
    }
    fn managed(&self) -> u64 {
        self.managed
    }
    fn wmark(&self, i: usize) -> u64 {
        crate::zone::Zone::wmark(self, i)
    }
}

/// Run one policy call on `st`, then restore what a policy may not change and clamp
/// `high` into its bounds (the kernel's clamp: `hi` wins when `lo > hi`).
fn guarded<R>(st: &mut PcpState, f: impl FnOnce(&mut PcpState) -> R) -> R {
    let keep = *st;
    let r = f(st);
    st.count = keep.count;
    st.batch = keep.batch;
    st.high_min = keep.high_min;
    st.high_max = keep.high_max;
    st.flags = (st.flags & !PCPF_FREE_HIGH_BATCH) | (keep.flags & PCPF_FREE_HIGH_BATCH);
    st.high = st.high.max(st.high_min).min(st.high_max);
    st.free_count = st.free_count.clamp(0, 1 << 30);
    st.count_min = st.count_min.max(0);
    r
}

/// The sizes a policy answers, bounded: each in `[0, 2^28]`, `high_min <= high_max`.
pub(crate) fn high_bounds(p: &dyn PcpPolicy, s: &Sizing) -> (i32, i32) {
    let cap = crate::config::MAX_FIXED_HIGH as i32;
    let (lo, hi) = p.high_bounds(s);
    let hi = hi.clamp(0, cap);
    (lo.clamp(0, hi), hi)
}

/// [`PcpPolicy::nr_pcp_alloc`], bounded as the kernel's refills are (module docs).
pub(crate) fn nr_pcp_alloc(
    p: &dyn PcpPolicy,
    st: &mut PcpState,
    z: &PolicyZone,
    order: u8,
    t: &Tune,
) -> i32 {
    let n = guarded(st, |s| p.nr_pcp_alloc(s, z, order, t));
    // The kernel's own bound: what fits below `high` less a batch, or else one batch of
    // pages (order 0) or `max(batch >> order, 2)` blocks, one block with a batch of 1.
    let batch = st.batch.max(1);
    let kernel_most = match (order, batch) {
        (_, 1) => 1,
        (0, b) => b,
        (o, b) => (b >> o.min(30)).max(2),
    };
    let room = (st.high.saturating_sub(st.count).saturating_sub(batch)).max(0) >> order.min(30);
    n.clamp(1, room.max(kernel_most))
}

/// [`PcpPolicy::decay_pcp_high`], bounded: the excess in `[0, count]`.
pub(crate) fn decay(p: &dyn PcpPolicy, st: &mut PcpState, z: &PolicyZone, t: &Tune) -> Decay {
    let d = guarded(st, |s| p.decay_pcp_high(s, z, t));
    let excess = d.excess.clamp(0, st.count.max(0));
    Decay {
        excess,
        todo: d.todo || excess > 0,
    }
}

/// The tuning half of `free_unref_page_commit` with a policy's decisions: the same steps
/// as [`tune::on_free`]'s full form, each answer bounded.
pub(crate) fn on_free(
    p: &dyn PcpPolicy,
    st: &mut PcpState,
    order: u8,
    z: &PolicyZone,
    t: &Tune,
) -> tune::FreeDecision {
    if t.refill_scaling {
        st.alloc_factor >>= 1;
    }
    let mut free_high = false;
    if (1..=crate::frame::COSTLY_ORDER).contains(&order) {
        free_high = p.free_high(st, order, t);
        st.flags |= tune::PCPF_PREV_FREE_HIGH_ORDER;
    } else {
        st.flags &= !tune::PCPF_PREV_FREE_HIGH_ORDER;
    }
    if t.free_count && st.free_count < tune::shl_sat(st.batch, t.scale) {
        st.free_count += 1 << order;
    }
    let limit = guarded(st, |s| p.nr_pcp_high(s, z, free_high, t));
    let limit = limit.clamp(0, st.high_max.max(st.count).max(0));
    let drain = if st.count >= limit {
        let n = guarded(st, |s| p.nr_pcp_free(s, limit, free_high, t));
        let cap = st
            .high_max
            .max(0)
            .saturating_add(crate::pcp::refill_overshoot(st.batch));
        n.clamp((st.count - cap).max(0), st.count.max(0))
    } else {
        0
    };
    tune::FreeDecision { free_high, drain }
}

impl crate::Allocator {
    /// What a policy sees of `zone`, with the flags read at the start of the decision.
    pub(crate) fn policy_zone<'a>(
        &'a self,
        zone: &'a crate::zone::Zone,
        flags: ZoneFlags,
    ) -> PolicyZone<'a> {
        PolicyZone {
            zone,
            flags,
            cpus: &self.cpus,
        }
    }

    /// `nr_pcp_alloc`: the kernel's, or the config's policy's (bounded).
    pub(crate) fn nr_pcp_alloc(
        &self,
        st: &mut PcpState,
        zone: &crate::zone::Zone,
        zf: ZoneFlags,
        order: u8,
    ) -> i32 {
        match &self.cfg.policy {
            None => tune::nr_pcp_alloc(st, zf, order, &self.tune),
            Some(p) => nr_pcp_alloc(&*p.0, st, &self.policy_zone(zone, zf), order, &self.tune),
        }
    }

    /// The full form of a free's tuning (not a PCP hit): the kernel's, or the config's
    /// policy's (bounded). Out of line, as the kernel's full form is.
    #[inline(never)]
    pub(crate) fn on_free_full(
        &self,
        st: &mut PcpState,
        zone: &crate::zone::Zone,
        zf: ZoneFlags,
        order: u8,
    ) -> tune::FreeDecision {
        match &self.cfg.policy {
            None => tune::on_free_full(st, order, zf, &self.tune),
            Some(p) => on_free(&*p.0, st, order, &self.policy_zone(zone, zf), &self.tune),
        }
    }
}
