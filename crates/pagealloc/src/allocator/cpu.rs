//! The per-CPU data that is not per zone, in a module of its own: [`crate::policy`] reads
//! it (`PolicyZone::online_cpus`) and must not import the allocator, which reads the
//! config that names the policy.

use crate::stats::Stats;
use crate::sync::atomic::AtomicBool;

/// Per-CPU data that is not per zone.
pub(crate) struct CpuInfo {
    pub(crate) node: usize,
    /// The first zone of the node's zonelist (`usize::MAX`: none), where the PCP hit
    /// looks first.
    pub(crate) home_zone: usize,
    pub(crate) llc_slice_bytes: u64,
    pub(crate) online: AtomicBool,
    /// Lock-free events (atomic adds).
    pub(crate) stats: Stats,
}
