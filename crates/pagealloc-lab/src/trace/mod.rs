//! Kernel ground truth: record the live kernel's page allocations while any program
//! runs, and replay them through pagealloc.
//!
//! # Design
//! 1. [`record`]: a private tracefs instance records, on every CPU and for every
//!    process, `kmem:mm_page_alloc`, `mm_page_free`, `mm_page_free_batched`,
//!    `mm_page_alloc_zone_locked` (each block a refill or a direct allocation took from
//!    the buddy lists), `mm_page_pcpu_drain` (each block a pageset gave back),
//!    `lock:contention_begin/end` and `sched:sched_switch`, plus `/proc/zoneinfo`,
//!    `/proc/pagetypeinfo` and the `vm` sysctls at the start and the end; a trace that lost an event is refused.
//! 2. [`format`](mod@format): the compact file (magic, zlib of a JSON header and varint records).
//! 3. [`replay`]: builds pagealloc from the trace's own zones and sysctls (the twin's
//!    [`crate::twin::layout::build`]), starts each CPU's pagesets at the recorded count
//!    and `high` ([`pagealloc::Allocator::seed_pageset`]), replays every allocation and
//!    free on its CPU in time order on a clock that follows the trace (each CPU's decay
//!    tick once a second, on the kernel's phase, deferred while the CPU is idle), and
//!    puts the kernel's refill and drain trips beside pagealloc's, per CPU and in total,
//!    with a verdict per line.
//!
//! # What the kernel's events say and what they do not
//! A refill trip is a run of `mm_page_alloc_zone_locked` events with `percpu_refill=1`
//! on one CPU (nothing else of that CPU between them: `rmqueue_bulk` holds the zone lock
//! with interrupts off); a drain trip a run of `mm_page_pcpu_drain` events. The kernel
//! marks `percpu_refill` for every pcp-cacheable order and pcp migratetype, so a direct
//! allocation of such a block that bypassed a busy pageset reads as a refill of one
//! block; those are rare (a pageset found locked). Pages already on the pagesets when the
//! recording starts show only as allocations without a refill.

pub mod format;
pub mod freelists;
pub mod lists;
pub mod pagetype;
pub mod record;
pub mod replay;
pub mod start;
pub(crate) mod untraced;

use std::fmt;

/// The preset replay uses when neither `--config` nor the trace's kernel release names
/// one (a release [`replay::preset_for`] cannot read): the newest the core has.
pub const DEFAULT_CONFIG: &str = "linux-6.18";

/// Why recording or replaying failed. Each is one line for the user.
#[derive(Debug)]
pub enum TraceError {
    /// No root, no tracefs, no such event, or a file that is not a usable trace
    /// (exit status 2).
    Unsupported(String),
    /// A bad argument (exit status 2).
    Usage(String),
    /// The tracer lost events: the trace is refused (exit status 1).
    Lost(String),
    /// Something else failed (exit status 1).
    Failed(String),
}

impl TraceError {
    /// The process exit status the CLI uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Unsupported(_) | Self::Usage(_) => 2,
            Self::Lost(_) | Self::Failed(_) => 1,
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported(s) | Self::Usage(s) | Self::Lost(s) | Self::Failed(s) => {
                write!(f, "trace: {s}")
            }
        }
    }
}

impl std::error::Error for TraceError {}
