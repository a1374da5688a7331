//! Bring your own PCP policy: the decisions of the per-CPU page lists a researcher would
//! change, as a trait whose default methods are the kernel's ([`crate::tune`]).
//!
//! # The decisions
//! | method | kernel function | when it is consulted |
//! |---|---|---|
//! | [`PcpPolicy::high_bounds`] | `zone_highsize`, `zone_set_pageset_high_and_batch` | sizing: build, hotplug, `set_high_fraction`, watermark changes |
//! | [`PcpPolicy::free_high`] | the free_high test of `free_unref_page_commit` | a free of order 1..=3 |
//! | [`PcpPolicy::nr_pcp_high`] | `nr_pcp_high` | a free that is not a PCP hit (below) |
//! | [`PcpPolicy::nr_pcp_free`] | `nr_pcp_free` | such a free whose `count` reached the limit |
//! | [`PcpPolicy::nr_pcp_alloc`] | `nr_pcp_alloc` | a refill (the list was empty) |
//! | [`PcpPolicy::decay_pcp_high`] | `decay_pcp_high` | the decay tick (`Allocator::tick`) |
//!
//! A policy is never consulted on the PCP hit: an allocation from a non-empty list, and
//! an order-0 free on a healthy zone (no BELOW_HIGH, no RECLAIM_ACTIVE) that leaves
//! `count` below a `high` inside `[high_min, high_max]`. Those keep the kernel's
//! bookkeeping (`alloc_factor` halved, `free_count` raised or halved) and nothing else.
//! With no policy set ([`Config::policy`](crate::Config::policy) `None`) the allocator
//! calls [`crate::tune`] directly, as it always has: the built-in presets cost nothing.
//!
//! # Safety of a user's answers
//! Whatever a policy answers, the allocator stays sound and bounded: the fields a policy
//! may not change (`count`, `batch`, `high_min`, `high_max`, the FREE_HIGH_BATCH flag) are
//! restored after each call; `high` is clamped into `[high_min, high_max]`; a refill takes
//! at least one block and at most what fits below `high - batch`, or the kernel's
//! smallest refill when less fits (`batch` pages at order 0, `max(batch >> order, 2)`
//! blocks above; so `count` stays within the bound `validate()` checks); a drain
//! frees at most `count` and at least enough to bring `count` back to `high_max` plus
//! [the refill overshoot](crate::tune); a free's limit lies in `[0, max(high_max, count)]`;
//! the decay excess in `[0, count]`; the sizes in `[0, 2^28]` with `high_min <= high_max`.
//! The kernel's own answers are inside every one of these bounds, so a policy that
//! forwards to the defaults behaves as no policy.
//!
//! ```
//! use std::sync::Arc;
//! use pagealloc::policy::{PcpPolicy, Policy, PolicyZone};
//! use pagealloc::tune::{PcpState, Tune};
//! use pagealloc::{Allocator, Config, Gfp, Layout};
//!
//! /// Refills of one batch, never more (the kernel doubles them up to batch << SCALE).
//! #[derive(Debug)]
//! struct OneBatch;
//! impl PcpPolicy for OneBatch {
//!     fn name(&self) -> &str { "one-batch" }
//!     fn nr_pcp_alloc(&self, st: &mut PcpState, _z: &PolicyZone, order: u8, _t: &Tune) -> i32 {
//!         (st.batch >> order).max(1)
//!     }
//! }
//!
//! let cfg = Config::default().with_policy(Policy::new(Arc::new(OneBatch)));
//! assert_eq!(cfg.to_string(), "linux-6.12,policy=one-batch");
//! let a = Allocator::new(&Layout::single(262_144, 1), cfg)?;
//! let f = a.alloc_on(0, 0, Gfp::KERNEL, None)?;
//! a.free_on(0, f)?;
//! assert_eq!(a.pcp_info(0, 0).expect("cpu 0, zone 0").count, 63); // one batch, not more
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use alloc::sync::Arc;
use core::fmt;

pub use crate::tune::Sizing;
use crate::tune::{self, Decay, PcpState, Tune, ZoneFlags};

mod bounded;
pub(crate) use bounded::{decay, high_bounds};

/// What a policy may read of the zone it decides for, read when it is asked.
pub struct PolicyZone<'a> {
    pub(crate) zone: &'a dyn ZoneRead,
    pub(crate) flags: ZoneFlags,
    pub(crate) cpus: &'a [crate::allocator::CpuInfo],
}

impl PolicyZone<'_> {
    /// The zone flags the kernel's tuning reads (read once, at the start of the decision).
    pub fn flags(&self) -> ZoneFlags {
        self.flags
    }
    /// Free pages in the zone's buddy lists now.
    pub fn free_pages(&self) -> u64 {
        self.zone.free_pages()
    }
    /// Managed pages of the zone.
    pub fn managed(&self) -> u64 {
        self.zone.managed()
    }
    /// Watermark `i` (0 min, 1 low, 2 high, 3 promo), boost included.
    pub fn wmark(&self, i: usize) -> u64 {
        self.zone.wmark(i.min(3))
    }
    /// Online CPUs of the allocator.
    pub fn online_cpus(&self) -> u32 {
        self.cpus
            .iter()
            .filter(|c| c.online.load(crate::sync::atomic::Ordering::Relaxed))
            .count() as u32
    }
}

/// What [`PolicyZone`] reads of the zone, implemented by the zone (`policy/bounded.rs`):
/// behind a trait so that this module, which [`Config`](crate::Config) names, names no
/// module that reads the config.
pub(crate) trait ZoneRead {
    /// Free pages in the zone's buddy lists now.
    fn free_pages(&self) -> u64;
    /// Managed pages of the zone.
    fn managed(&self) -> u64;
    /// Watermark `i` (0..=3), boost included.
    fn wmark(&self, i: usize) -> u64;
}

impl fmt::Debug for PolicyZone<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyZone")
            .field("flags", &self.flags)
            .field("free_pages", &self.free_pages())
            .field("managed", &self.managed())
            .finish()
    }
}

/// The PCP decisions of the allocator. Every method but [`PcpPolicy::name`] defaults to
/// the kernel's function (the preset's switches are in `t`), so a policy overrides only
/// what it changes. Each method is called with the pageset's lock held; it may change
/// the tunable fields of `st` (`high`, `alloc_factor`, `free_factor`, `free_count`,
/// `count_min`, the PCPF_PREV_FREE_HIGH_ORDER flag) and reads the rest. See the module
/// docs for when each is consulted and how its answers are bounded.
#[doc(alias = "per_cpu_pages")]
pub trait PcpPolicy: Send + Sync + fmt::Debug {
    /// A short name, printed in config strings (`linux-6.12,policy=NAME`) and reports.
    fn name(&self) -> &str;

    /// `(high_min, high_max)` of the zone's pagesets.
    #[doc(alias = "zone_highsize")]
    #[doc(alias = "zone_set_pageset_high_and_batch")]
    fn high_bounds(&self, s: &Sizing) -> (i32, i32) {
        tune::high_bounds(s)
    }

    /// Whether a free of `order` (1..=3; `st.count` includes it) is a free_high free:
    /// drain the pageset as a process exit would.
    #[doc(alias = "free_unref_page_commit")]
    fn free_high(&self, st: &PcpState, order: u8, t: &Tune) -> bool {
        tune::free_high(st, order, t)
    }

    /// The count at which a free drains; may move `high`.
    fn nr_pcp_high(&self, st: &mut PcpState, z: &PolicyZone, free_high: bool, t: &Tune) -> i32 {
        tune::nr_pcp_high(st, z.flags, free_high, t)
    }

    /// Pages one drain frees, once `count` reached `limit`.
    fn nr_pcp_free(&self, st: &mut PcpState, limit: i32, free_high: bool, t: &Tune) -> i32 {
        tune::nr_pcp_free(st, limit, free_high, t)
    }

    /// Blocks of `order` one refill takes from the zone; may move `high`.
    fn nr_pcp_alloc(&self, st: &mut PcpState, z: &PolicyZone, order: u8, t: &Tune) -> i32 {
        tune::nr_pcp_alloc(st, z.flags, order, t)
    }

    /// One decay tick: lower `high`, return the pages above it.
    fn decay_pcp_high(&self, st: &mut PcpState, _z: &PolicyZone, t: &Tune) -> Decay {
        tune::decay(st, t)
    }
}

/// The kernel's policy: every decision as the preset's switches make it. The allocator
/// calls [`crate::tune`] directly when no policy is set; this type exists to name it and
/// to forward to (a policy may wrap it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Kernel;

impl PcpPolicy for Kernel {
    fn name(&self) -> &str {
        "kernel"
    }
}

/// A shared policy, as [`Config::policy`](crate::Config::policy) holds it. Two are equal
/// when they are the same object.
#[derive(Clone)]
pub struct Policy(pub Arc<dyn PcpPolicy>);

impl Policy {
    /// Wrap a policy.
    pub fn new(p: Arc<dyn PcpPolicy>) -> Policy {
        Policy(p)
    }
    /// The policy's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }
}

impl PartialEq for Policy {
    fn eq(&self, o: &Policy) -> bool {
        Arc::as_ptr(&self.0) as *const u8 == Arc::as_ptr(&o.0) as *const u8
    }
}
impl Eq for Policy {}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Policy({:?})", self.0)
    }
}
