//! PCP auto-tuning as pure functions over copyable state: sizing (`zone_batchsize`,
//! `zone_highsize`), the free path (`free_high` detection, `nr_pcp_high`, `nr_pcp_free`),
//! the allocation path (`nr_pcp_alloc`) and the decay tick (`decay_pcp_high`).
//!
//! # Design
//! Everything the kernel's functions read or write on `struct per_cpu_pages` is in
//! [`PcpState`]; the zone flags they test are in [`ZoneFlags`]; the switches of the series
//! are in [`Tune`]. The pageset code (`pcp/`) calls these with the pcp lock held and acts
//! on the answers (moves pages), so each formula can be table-tested alone against
//! `docs/mechanisms.md` (§2–§5, cited per function).
//!
//! Partners: [`on_free`] raises `free_count` and halves `alloc_factor`; [`on_alloc`]
//! halves `free_count`; [`nr_pcp_alloc`] raises `alloc_factor` and `high`;
//! [`nr_pcp_high`] raises or cuts `high` on free; [`decay`] brings it back down.

/// `PCPF_PREV_FREE_HIGH_ORDER`: the previous free on this pcp was order 1..=3.
pub const PCPF_PREV_FREE_HIGH_ORDER: u8 = 0x01;
/// `PCPF_FREE_HIGH_BATCH`: this CPU's share of the data cache is large (> 3 batches), so
/// free_high keeps one batch in the pcp.
pub const PCPF_FREE_HIGH_BATCH: u8 = 0x02;

/// The tunable fields of one pageset (one CPU, one zone). Counts in base pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcpState {
    /// Pages on all lists.
    pub count: i32,
    /// Current limit; re-clamped into [high_min, high_max] before use.
    pub high: i32,
    /// Lower bound of `high`.
    pub high_min: i32,
    /// Upper bound of `high`.
    pub high_max: i32,
    /// Refill/drain chunk.
    pub batch: i32,
    /// PCPF_* bits.
    pub flags: u8,
    /// Order-0 refill scale exponent, 0..=SCALE (V3 5/9).
    pub alloc_factor: u8,
    /// Drain scale exponent of v6.6 .. V3 8/9 (replaced by `free_count`).
    pub free_factor: u8,
    /// Pages freed recently (V3 9/9); halved by every allocation.
    pub free_count: i32,
    /// Lowest `count` since the last tick (V2 09/10, non-mainline).
    pub count_min: i32,
}

/// Zone flags read by the tuning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneFlags {
    /// ZONE_BELOW_HIGH: free pages fell below the high watermark.
    pub below_high: bool,
    /// ZONE_RECLAIM_ACTIVE: (modelled) kswapd is reclaiming on this node.
    pub reclaim_active: bool,
}

/// The switches of the series that the tuning functions read; copied out of a
/// [`Config`](crate::Config) by [`Tune::from_config`] (in `config.rs`, so that this module
/// imports no config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tune {
    /// `CONFIG_PCP_BATCH_SCALE_MAX`.
    pub scale: u8,
    /// V3 1/9.
    pub prev_order: bool,
    /// V3 3/9.
    pub bounded: bool,
    /// V3 4/9 + 5/9.
    pub refill_scaling: bool,
    /// V3 7/9.
    pub auto_tune: bool,
    /// V3 8/9.
    pub below_high: bool,
    /// V3 9/9.
    pub free_count: bool,
    /// V2 09/10.
    pub count_min: bool,
    /// 6.16: free_high needs `free_count >= batch + high_min / 2`.
    pub free_high_min: bool,
}

fn clamp(x: i32, lo: i32, hi: i32) -> i32 {
    // The kernel's clamp: if lo > hi the answer is hi (docs/mechanisms.md §0.3).
    x.max(lo).min(hi)
}

/// `zone_batchsize` (docs/mechanisms.md §2.1): `2^n - 1` pages, about 0.1 % of the zone up to 1 MiB/4.
///
/// ```
/// use pagealloc::tune::zone_batchsize;
///
/// // Zones of 16 MiB, 64 MiB, 256 MiB and 1 GiB (4 KiB pages): 1, 3, 15, 63; 63 is the
/// // ceiling, reached from about 688 MiB.
/// let batches: Vec<i32> = [4096, 16384, 65536, 262_144].map(zone_batchsize).to_vec();
/// assert_eq!(batches, [1, 3, 15, 63]);
/// assert_eq!(zone_batchsize(64 << 20), 63);
/// ```
pub fn zone_batchsize(managed: u64) -> i32 {
    let mut b = (managed >> 10).min((1024 * 1024 / crate::frame::PAGE_SIZE) as u64) as i64;
    b /= 4;
    if b < 1 {
        b = 1;
    }
    // round_down_pow2(b + b/2) - 1: a 2^n - 1 value, to avoid cache-colour aliasing.
    let x = (b + b / 2) as u64;
    let r = 1u64 << (63 - x.leading_zeros());
    (r as i32 - 1).max(1)
}

/// `zone_highsize` (docs/mechanisms.md §2.2): `max(total / cpus, batch * 4)` where `total` is the low
/// watermark (fraction 0) or `managed / fraction`, and `cpus` the CPUs of the zone's node
/// (plus one coming online; all online CPUs for a memory-only node).
pub fn zone_highsize(
    low_wmark: u64,
    managed: u64,
    batch: i32,
    node_cpus: u32,
    cpu_online: u32,
    online_cpus: u32,
    fraction: u32,
) -> i32 {
    let total = if fraction == 0 {
        low_wmark
    } else {
        managed / fraction as u64
    };
    let mut n = node_cpus + cpu_online;
    if n == 0 {
        n = online_cpus.max(1);
    }
    ((total / n as u64).min(i32::MAX as u64) as i32).max(batch * 4)
}

/// The inputs of the sizing (`zone_set_pageset_high_and_batch`) for one zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    /// The zone's low watermark, pages.
    pub low_wmark: u64,
    /// The zone's managed pages.
    pub managed: u64,
    /// The pagesets' batch (`zone_batchsize` or `Config::fixed_batch`).
    pub batch: i32,
    /// Online CPUs of the zone's node.
    pub node_cpus: u32,
    /// Online CPUs.
    pub online_cpus: u32,
    /// `vm.percpu_pagelist_high_fraction` (0: auto).
    pub high_fraction: u32,
    /// `Config::auto_tune`.
    pub auto_tune: bool,
}

/// `(high_min, high_max)` for a zone (docs/mechanisms.md §2.2, `zone_set_pageset_high_and_batch`)
/// from its [`Sizing`]; the CPUs are the online ones (`zone_highsize`'s `cpu_online` 0).
/// Without auto-tuning (v6.6) both are the low-watermark share, the old fixed `high`.
///
/// ```
/// use pagealloc::tune::{high_bounds, Sizing};
///
/// // docs/mechanisms.md §2.4: a 4 GiB zone, low watermark 3096, batch 63, 8 CPUs.
/// let s = Sizing {
///     low_wmark: 3096, managed: 1 << 20, batch: 63, node_cpus: 8, online_cpus: 8,
///     high_fraction: 0, auto_tune: true,
/// };
/// assert_eq!(high_bounds(&s), (387, 16384));
/// // v6.6: one fixed high, the low-watermark share.
/// assert_eq!(high_bounds(&Sizing { auto_tune: false, ..s }), (387, 387));
/// // vm.percpu_pagelist_high_fraction = 16: managed / 16 per CPU, tuning off.
/// assert_eq!(high_bounds(&Sizing { high_fraction: 16, ..s }), (8192, 8192));
/// ```
pub fn high_bounds(s: &Sizing) -> (i32, i32) {
    let hs = |f| {
        zone_highsize(
            s.low_wmark,
            s.managed,
            s.batch,
            s.node_cpus,
            0,
            s.online_cpus,
            f,
        )
    };
    if s.high_fraction != 0 {
        let h = hs(s.high_fraction);
        (h, h)
    } else if !s.auto_tune {
        let h = hs(0);
        (h, h)
    } else {
        (hs(0), hs(8))
    }
}

/// `PCPF_FREE_HIGH_BATCH` from the per-CPU data-cache slice (docs/mechanisms.md §3.3,
/// `zone_pcp_update_cacheinfo`): set when the slice holds more than three batches.
pub fn free_high_batch(slice_bytes: u64, batch: i32) -> bool {
    (slice_bytes >> crate::frame::PAGE_SHIFT) > 3 * batch.max(0) as u64
}

/// What one free decided: whether it was a free_high free, and how many pages to drain
/// to the zone now (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreeDecision {
    /// The free triggered free_high.
    pub free_high: bool,
    /// Pages to return with `free_pcppages_bulk` (0: keep everything).
    pub drain: i32,
}

/// The tuning half of `free_unref_page_commit` (docs/mechanisms.md §3.2), called after the page was
/// put on its list and `count` raised. Halves `alloc_factor`, detects free_high, raises
/// `free_count`, computes the limit ([`nr_pcp_high`]) and the drain ([`nr_pcp_free`]).
///
/// ```
/// use pagealloc::tune::{on_free, PcpState, Tune, ZoneFlags, PCPF_PREV_FREE_HIGH_ORDER};
/// use pagealloc::Config;
///
/// let t = Tune::from_config(&Config::default());
/// // A pageset of batch 63 that has been freeing order-1 blocks: the previous free was
/// // order 1..=3 and about a batch was freed since the last allocation.
/// let mut st = PcpState {
///     count: 500, // the block just freed included
///     high: 1000, high_min: 387, high_max: 16384, batch: 63,
///     flags: PCPF_PREV_FREE_HIGH_ORDER, free_count: 100,
///     ..PcpState::default()
/// };
/// let d = on_free(&mut st, 1, ZoneFlags::default(), &t);
/// // free_high: drain min(count, batch << SCALE) and cut high by batch << SCALE.
/// assert!(d.free_high);
/// assert_eq!((d.drain, st.high), (500, 387));
///
/// // An order-0 free never triggers it, and resets the run of high-order frees.
/// let mut st = PcpState { count: 500, high: 1000, high_min: 387, high_max: 16384,
///     batch: 63, flags: PCPF_PREV_FREE_HIGH_ORDER, free_count: 100, ..PcpState::default() };
/// let d = on_free(&mut st, 0, ZoneFlags::default(), &t);
/// assert!(!d.free_high && d.drain == 0);
/// assert_eq!(st.flags & PCPF_PREV_FREE_HIGH_ORDER, 0);
/// ```
#[inline(always)]
pub fn on_free(st: &mut PcpState, order: u8, zf: ZoneFlags, t: &Tune) -> FreeDecision {
    on_free_or(st, order, zf, t, |st| on_free_full(st, order, zf, t))
}

/// [`on_free`] whose full form is `full`: the common case decided here, inline, and
/// everything else by `full` (the kernel's [`on_free`] in full, or a policy's).
#[inline(always)]
pub(crate) fn on_free_or(
    st: &mut PcpState,
    order: u8,
    zf: ZoneFlags,
    t: &Tune,
    full: impl FnOnce(&mut PcpState) -> FreeDecision,
) -> FreeDecision {
    let high_order = (1..=crate::frame::COSTLY_ORDER).contains(&order);
    // The common case, decided without `nr_pcp_high`: not a free_high candidate, no zone
    // flag, `high` already inside its bounds (so the clamp keeps it) and above `count` (so
    // nothing drains and `high` is not raised). What remains is the bookkeeping below,
    // exactly as the full form does it.
    if !high_order
        && !zf.below_high
        && !zf.reclaim_active
        && st.count < st.high
        && st.high_min <= st.high
        && st.high <= st.high_max
    {
        if t.refill_scaling {
            st.alloc_factor >>= 1;
        }
        st.flags &= !PCPF_PREV_FREE_HIGH_ORDER;
        if t.free_count && st.free_count < shl_sat(st.batch, t.scale) {
            st.free_count += 1 << order;
        }
        return FreeDecision {
            free_high: false,
            drain: 0,
        };
    }
    full(st)
}

/// [`on_free`] in full: `nr_pcp_high` and `nr_pcp_free`.
#[inline(never)]
pub(crate) fn on_free_full(st: &mut PcpState, order: u8, zf: ZoneFlags, t: &Tune) -> FreeDecision {
    if t.refill_scaling {
        st.alloc_factor >>= 1;
    }
    let batch = st.batch;
    let mut free_high = false;
    let high_order = (1..=crate::frame::COSTLY_ORDER).contains(&order);
    if high_order {
        free_high = self::free_high(st, order, t);
        st.flags |= PCPF_PREV_FREE_HIGH_ORDER;
    } else {
        st.flags &= !PCPF_PREV_FREE_HIGH_ORDER;
    }
    if t.free_count && st.free_count < shl_sat(batch, t.scale) {
        // Updated after the free_high test, saturating near batch << SCALE.
        st.free_count += 1 << order;
    }
    let limit = nr_pcp_high(st, zf, free_high, t);
    let drain = if st.count >= limit {
        nr_pcp_free(st, limit, free_high, t)
    } else {
        0
    };
    FreeDecision { free_high, drain }
}

/// The free_high test of `free_unref_page_commit` (docs/mechanisms.md §3.3) for a free of
/// `order` 1..=3, `count` already including it: pages were freed recently, the previous
/// free was order 1..=3 too (V3 1/9), and with a large cache slice at least a batch is
/// cached (V3 3/9). `order` is not read: the caller tests the range.
pub fn free_high(st: &PcpState, _order: u8, t: &Tune) -> bool {
    let batch = st.batch;
    // v6.6: free_factor > 0. V3 9/9: free_count >= batch. 6.16 (c544a952ba61): half
    // of high_min more.
    let recent = if t.free_count {
        let min = if t.free_high_min { st.high_min / 2 } else { 0 };
        st.free_count >= batch.saturating_add(min)
    } else {
        st.free_factor > 0
    };
    recent
        && (!t.prev_order || st.flags & PCPF_PREV_FREE_HIGH_ORDER != 0)
        && (!t.bounded || st.flags & PCPF_FREE_HIGH_BATCH == 0 || st.count >= batch)
}

/// The allocation-side bookkeeping of `rmqueue_pcplist` (docs/mechanisms.md §4.2): every pcp allocation
/// halves `free_count` (v6.6 .. V3 8/9: `free_factor`).
#[inline]
pub fn on_alloc(st: &mut PcpState, t: &Tune) {
    if t.free_count {
        st.free_count >>= 1;
    } else {
        st.free_factor >>= 1;
    }
}

/// `x << s` saturated at `i32::MAX`: the batch and high arithmetic (`batch << SCALE`,
/// `batch << free_factor`, `base << alloc_factor`) never wraps to a negative count, even
/// for a batch far beyond anything `zone_batchsize` gives.
#[inline]
pub(crate) fn shl_sat(x: i32, s: u8) -> i32 {
    ((x as i64) << s.min(32)).min(i32::MAX as i64) as i32
}

/// The amount by which a free under pressure cuts `high` (`max(free_count, batch)`;
/// before V3 9/9, `batch << free_factor`).
fn pressure_step(st: &PcpState, t: &Tune) -> i32 {
    if t.free_count {
        st.free_count.max(st.batch)
    } else {
        shl_sat(st.batch, st.free_factor.min(20))
    }
}

/// `nr_pcp_high` (docs/mechanisms.md §3.4): the count at which a free drains; may move `high`.
pub fn nr_pcp_high(st: &mut PcpState, zf: ZoneFlags, free_high: bool, t: &Tune) -> i32 {
    let (high_min, high_max, batch) = (st.high_min, st.high_max, st.batch);
    st.high = clamp(st.high, high_min, high_max);
    let h = st.high;
    if h == 0 {
        return 0;
    }
    if free_high {
        if t.bounded {
            st.high = (h - shl_sat(batch, t.scale)).max(high_min);
        }
        return 0;
    }
    if zf.reclaim_active {
        if t.auto_tune {
            st.high = (h - pressure_step(st, t)).max(high_min);
        }
        return (batch * 4).min(st.high);
    }
    if high_min == high_max {
        return h;
    }
    if t.below_high && zf.below_high {
        st.high = (h - pressure_step(st, t)).max(high_min);
        return st.count.max(high_min);
    }
    if st.count >= h {
        // About to drain: a bigger pcp would have avoided it; raise for next time.
        let need = if t.free_count {
            st.free_count + batch
        } else {
            shl_sat(batch, st.free_factor.min(20)).saturating_add(batch)
        };
        if st.high < need {
            st.high = clamp(need, high_min, high_max);
        }
    }
    h
}

/// `nr_pcp_free` (docs/mechanisms.md §3.5, and v6.6's free_factor form): pages one drain frees.
pub fn nr_pcp_free(st: &mut PcpState, limit: i32, free_high: bool, t: &Tune) -> i32 {
    let batch = st.batch;
    if free_high {
        return if t.bounded {
            st.count.min(shl_sat(batch, t.scale))
        } else {
            st.count
        };
    }
    // A pageset that cannot keep a batch below its limit. The kernel returns 1 for
    // `high < batch` (the boot pageset: count 1, so the drain empties it) and otherwise
    // keeps `batch` pages, freeing `clamp(free_count, batch, high - batch)`: 0 at `high
    // == batch`, a pageset that would never drain. `zone_highsize` keeps the kernel's
    // high at 4 batches or more, so it never gets here with more cached; a fixed high
    // (`Config::fixed_high`) can, with blocks of higher orders cached, so the drain
    // takes what reaches the limit (at least 1, the kernel's answer for the boot
    // pageset), leaving the pageset below it.
    if limit <= batch {
        return st.count.saturating_sub(limit).saturating_add(1).max(1);
    }
    let (min_nr, max_nr) = (batch, limit - batch);
    if t.free_count {
        return clamp(st.free_count, min_nr, max_nr);
    }
    // v6.6: double the drain on each consecutive drain without an allocation.
    let n = batch.checked_shl(st.free_factor as u32).unwrap_or(i32::MAX);
    let n = if n < 0 || st.free_factor >= 31 {
        i32::MAX
    } else {
        n
    };
    if t.refill_scaling {
        // V3 4/9 capped the factor at SCALE (7/9 turned `<` into `<=`; we use `<=` from
        // the capped step on, a deviation of one patch inside the series).
        if n <= max_nr && st.free_factor < t.scale {
            st.free_factor += 1;
        }
    } else if n < max_nr {
        st.free_factor = st.free_factor.saturating_add(1);
    }
    clamp(n, min_nr, max_nr)
}

/// `nr_pcp_alloc` (docs/mechanisms.md §4.3): blocks of `order` to take from the zone in one refill.
/// Raises `high` (auto-tuning, zone healthy) and `alloc_factor` (order 0).
///
/// ```
/// use pagealloc::tune::{nr_pcp_alloc, PcpState, Tune, ZoneFlags};
/// use pagealloc::Config;
///
/// let t = Tune::from_config(&Config::default());
/// let mut st = PcpState { batch: 63, high_min: 387, high_max: 16384, ..PcpState::default() };
/// // Back-to-back order-0 refills of an empty pageset double up to batch << SCALE.
/// let sizes: Vec<i32> =
///     (0..7).map(|_| nr_pcp_alloc(&mut st, ZoneFlags::default(), 0, &t)).collect();
/// assert_eq!(sizes, [63, 126, 252, 504, 1008, 2016, 2016]);
/// assert!(st.high > st.high_min); // each refill raised high
/// // Order 1..=3 and THP refills count blocks: 63 >> order, at least 2.
/// assert_eq!(nr_pcp_alloc(&mut st, ZoneFlags::default(), 3, &t), 7);
/// ```
pub fn nr_pcp_alloc(st: &mut PcpState, zf: ZoneFlags, order: u8, t: &Tune) -> i32 {
    let base = st.batch;
    st.high = clamp(st.high, st.high_min, st.high_max);
    let mut h = st.high;
    if h < base {
        return 1;
    }
    if !t.refill_scaling {
        // v6.6: a constant batch >> order, at least two blocks.
        return if base > 1 {
            (base >> order).max(2)
        } else {
            base
        };
    }
    let mut n = if order == 0 {
        shl_sat(base, st.alloc_factor)
    } else {
        base
    };
    // V3 7/9 gated growth by RECLAIM_ACTIVE; 8/9 by BELOW_HIGH.
    let pressure = if t.below_high {
        zf.below_high
    } else {
        zf.reclaim_active
    };
    if t.auto_tune && st.high_min != st.high_max && !pressure {
        h = (h + n).min(st.high_max);
        st.high = h;
    }
    if order == 0 {
        let cap = (h - st.count - base).max(base);
        if n <= cap && st.alloc_factor < t.scale {
            st.alloc_factor += 1;
        }
        n = n.min(cap);
    }
    if n > 1 {
        n = (n >> order).max(2);
    }
    n
}

/// Result of one decay tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decay {
    /// Pages above the new `high` to return to the zone now.
    pub excess: i32,
    /// Work remains (keeps the vmstat worker re-arming).
    pub todo: bool,
}

/// `decay_pcp_high` (docs/mechanisms.md §5.2): `high` loses 1/8 per tick down to high_min, never more
/// than one maximal drain below `count`; the excess above `high` is returned.
/// With `count_min` (V2 09/10, non-mainline) only pages that stayed idle since the last
/// tick are decayed: `high - min(count_min, high >> 3)`.
///
/// ```
/// use pagealloc::tune::{decay, PcpState, Tune};
/// use pagealloc::Config;
///
/// let t = Tune::from_config(&Config::default());
/// let mut st = PcpState {
///     count: 15_000, high: 16384, high_min: 387, high_max: 16384, batch: 63,
///     ..PcpState::default()
/// };
/// let d = decay(&mut st, &t);
/// assert_eq!(st.high, 16384 - 16384 / 8); // an eighth off
/// assert_eq!(d.excess, 15_000 - 14_336); // pages above the new high go back
/// assert!(d.todo);
/// ```
pub fn decay(st: &mut PcpState, t: &Tune) -> Decay {
    let mut todo = false;
    if !t.auto_tune {
        return Decay {
            excess: 0,
            todo: false,
        };
    }
    if st.high > st.high_min {
        let step = if t.count_min {
            st.count_min.max(0).min(st.high >> 3)
        } else {
            st.high >> 3
        };
        st.high = (st.count - shl_sat(st.batch, t.scale))
            .max(st.high - step)
            .max(st.high_min);
        if st.high > st.high_min {
            todo = true;
        }
    }
    let excess = st.count - st.high;
    if t.count_min {
        st.count_min = st.count.min(st.high);
    }
    Decay {
        excess: excess.max(0),
        todo: todo || excess > 0,
    }
}

#[cfg(test)]
mod tests;
