//! The workload language: executor-agnostic page-allocation scripts.
//!
//! # Design
//! A [`Workload`] is a parameterised recipe. For a given CPU count it produces one
//! [`CpuScript`] per CPU: a state machine the executor asks for one [`Op`] at a time,
//! passing the [`OpResult`] of the previous op and the CPU's [`Rng`]. Blocks live in a
//! per-CPU *slot table* owned by the executor (`Vec<Option<block>>` of
//! [`CpuScript::slot_count`] entries); scripts name slots, never frames, so the same
//! script drives a real allocator, a simulated one, or [`dry_run()`]'s fake frame ids.
//!
//! Most scripts are small *programs* (see `program.rs`): lists of phases such as "fill
//! slots 0..n with order-0 blocks, touching each" or "free every held slot", refilled
//! per loop or per task. The one file per workload holds its `Params` (defaults for a
//! laptop run of about 1–3 s, [`Params::full_scale`] for the simulator at the spec's
//! scale) and the program that generates its phases.
//!
//! # Executor contract
//! Written once, in [`driver`]: every executor keeps a [`CpuDriver`] per CPU and
//! supplies only the effects of ops through a [`Backend`]; [`dry_run()`] is the
//! reference backend.
//! 1. `next` is called once with [`OpResult::OK`] to start, then once after each op
//!    *completes*, with that op's result. Only [`Op::Alloc`] can fail (`ok == false`,
//!    the slot stays empty); every other op reports `ok == true`.
//! 2. Slots: all empty at the start. `Alloc` and `Recv` need an empty slot and fill it;
//!    `Touch`, `CopyIn` and `CopyOut` need a full slot; `Free` and `Send` need a full
//!    slot and empty it. A
//!    violation is a script bug: executors panic.
//! 3. `Recv` takes the oldest block of the CPU's own inbox (FIFO) and blocks while it is
//!    empty. `Send` blocks while the destination inbox holds
//!    [`Workload::inbox_capacity`] blocks (the socket buffer); once blocked, it stays
//!    blocked until the inbox has drained to [`Workload::inbox_resume`] blocks (the
//!    socket's write-space hysteresis). Blocks a CPU took from its inbox count
//!    against it until the CPU has freed (or sent on) all it took (a whole message), as an skb and
//!    its fragments count against the socket's buffer until `consume_skb` frees it. A blocked op is retried without calling `next`
//!    again: the script sees each op complete exactly once.
//!    A CPU blocked in `Send` or `Recv` *sleeps*, as a task blocked in `sendmsg` or
//!    `recvmsg` does: the wait is idle time, not CPU time, and the CPU that unblocks it
//!    wakes it. On threads the sleep and the wakeup are real (a futex); the simulator
//!    charges the wakeup from its cost model (the waker's `try_to_wake_up`, the
//!    sleeper's idle exit and context switch). Barriers are not sleeps (set-up only).
//! 4. `Barrier`: every script of the workload passes the same sequence of barrier ids;
//!    a barrier opens when all CPUs have reached it. A script that is `Done` while
//!    others wait at a barrier is a deadlock (a script bug).
//! 5. After [`Op::Done`], `next` is never called again. At `Done` the script's slots are
//!    empty, and at the end of the run every inbox is empty.
//! 6. Accounting: executors record each completed op with [`OpCounts::record`], per CPU.
//!    Ops completed after a CPU leaves the [`Workload::measured_after`] barrier go to the
//!    measured window, which [`Workload::work_units`] and the elapsed time are taken
//!    over; the rest (set-up, e.g. fragmenting memory) is counted but not scored.
//!
//! # Invariants
//! - Live blocks of a CPU <= `slot_count()`, blocks queued to a CPU <=
//!   `inbox_capacity()`: memory use is bounded by the parameters alone.
//! - Over a run, per order: blocks allocated == blocks freed (checked by [`dry_run()`]).
//! - Scripts are deterministic functions of (their parameters, the op results, the RNG
//!   stream) — plus, for kbuild, the order in which CPUs take tasks from the shared
//!   queue, which the simulator makes deterministic too.

mod counts;
pub mod driver;
mod dry_run;
mod entry;
mod params;
mod program;
mod registry;
mod rng;

mod bulk;
mod high_order_stress;
mod kbuild;
mod lmbench;
mod mass_exit;
mod netperf;
mod page_fault1;
mod parallel_free;
mod purger;
mod shared_cpu;
mod stream;
mod thp_mix;
mod zonelist_hog;

use std::fmt;

pub use counts::OpCounts;
pub use driver::{Backend, CpuDriver, Flow, Step, TraceEntry, TraceHash};
pub use dry_run::{dry_run, DryRun, DryRunStats};
pub use entry::{BuildFn, DefaultCpus, Entry, Scale};
pub use params::{overrides, param_bound, ParamError, Params, PARAM_BOUNDS};
pub use registry::{build, by_name, entry, names, ENTRIES};
pub use rng::{cpu_seed, Rng, SplitMix64};

pub use bulk::{Bulk, BulkParams};
pub use high_order_stress::{HighOrderStress, HighOrderStressParams};
pub use kbuild::{Kbuild, KbuildParams, KBUILD_COMPUTE_NS_PER_PAGE, KBUILD_HEADROOM_MIB};
pub use lmbench::{Lmbench, LmbenchParams};
pub use mass_exit::{MassExit, MassExitParams};
pub use netperf::{Netperf, NetperfParams};
pub(crate) use page_fault1::pending_tables;
pub use page_fault1::{PageFault1, PageFault1Params};
pub use parallel_free::{ParallelFree, ParallelFreeParams};
pub use purger::{Purger, PurgerParams};
pub use thp_mix::{ThpMix, ThpMixParams, LRU_BATCH};
pub use zonelist_hog::{ZonelistHog, ZonelistHogParams};

/// Highest block order a workload may request (2^10 pages = 4 MiB), as in Linux.
pub const MAX_ORDER: u8 = 10;
/// Number of distinct orders, `0..=MAX_ORDER`; the length of per-order arrays.
pub const NR_ORDERS: usize = MAX_ORDER as usize + 1;
/// Bytes in a base page.
pub const PAGE_SIZE: u64 = 4096;

/// What a request is for: the allocator maps it to a migratetype (Linux `gfp_migratetype`).
#[doc(alias = "migratetype")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MigrateKind {
    /// Kernel memory that never moves: page tables, kernel stacks, socket buffers.
    Unmovable,
    /// User memory the kernel could migrate: anonymous pages, THP.
    Movable,
    /// Caches the kernel can drop on demand: reclaimable slab.
    Reclaimable,
}

impl fmt::Display for MigrateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MigrateKind::Unmovable => "unmovable",
            MigrateKind::Movable => "movable",
            MigrateKind::Reclaimable => "reclaimable",
        })
    }
}

/// Index into a CPU's slot table, which the executor owns (see the executor contract).
pub type Slot = u32;

/// One operation of a [`CpuScript`]. See the module docs for the executor contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Allocate a block of 2^`order` pages into the empty `slot`. May fail.
    Alloc {
        /// Destination slot; must be empty.
        slot: Slot,
        /// Block order, `0..=MAX_ORDER`.
        order: u8,
        /// Request type.
        kind: MigrateKind,
    },
    /// Free the block in `slot`; the slot becomes empty.
    Free {
        /// A full slot.
        slot: Slot,
    },
    /// Write the whole block in `slot` (the simulator charges it to its cache model).
    Touch {
        /// A full slot.
        slot: Slot,
    },
    /// Copy `bytes` from this CPU's user buffer into the block in `slot` (a `sendmsg`'s
    /// copy from user space): the executor reads the buffer and writes the block's first
    /// `bytes` (at most the block's size).
    CopyIn {
        /// A full slot.
        slot: Slot,
        /// Bytes copied.
        bytes: u32,
        /// ns per KiB of the copy that the simulator's hierarchy serves from another
        /// CPU's cache, beyond its own charge (a stream's ends on two CPUs: the
        /// workload's `cross_copy_in_ns_per_kib`); executors without a cache model
        /// ignore it (the hardware pays).
        cross_ns_per_kib: u32,
    },
    /// Copy the first `bytes` of the block in `slot` out to this CPU's user buffer (a
    /// `recvmsg`'s copy to user space): the executor reads the block and writes the
    /// buffer.
    CopyOut {
        /// A full slot.
        slot: Slot,
        /// Bytes copied.
        bytes: u32,
        /// As [`Op::CopyIn`]'s (`cross_copy_out_ns_per_kib`).
        cross_ns_per_kib: u32,
    },
    /// Pure computation for `ns` nanoseconds: no memory traffic the lab models.
    Compute {
        /// Duration in nanoseconds.
        ns: u64,
    },
    /// Move the block in `slot` to the inbox of `to_cpu` (a cross-CPU free follows);
    /// the slot becomes empty. Blocks while that inbox is full.
    Send {
        /// A full slot.
        slot: Slot,
        /// Destination CPU, `< cpus`.
        to_cpu: u32,
    },
    /// Take the oldest block of this CPU's inbox into the empty `slot`. Blocks while the
    /// inbox is empty.
    Recv {
        /// Destination slot; must be empty.
        slot: Slot,
    },
    /// Take the oldest block of this CPU's inbox into the empty `slot` if there is one;
    /// never blocks: with the inbox empty the op fails (`ok` false) and the slot stays
    /// empty (a softirq freeing what other CPUs handed back so far).
    TryRecv {
        /// Destination slot; must be empty.
        slot: Slot,
    },
    /// Wait until every CPU of the workload has reached barrier `id`.
    Barrier {
        /// Barrier id; all CPUs pass the same sequence of ids.
        id: u32,
    },
    /// A task exited (kbuild's task count); no allocation effect.
    Exit,
    /// The script is finished; its slots are empty.
    Done,
}

/// The result of the previous op, passed to [`CpuScript::next`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpResult {
    /// `false` only when an [`Op::Alloc`] failed or an [`Op::TryRecv`] found the inbox
    /// empty.
    pub ok: bool,
}

impl OpResult {
    /// Success, and the value of the first call.
    pub const OK: OpResult = OpResult { ok: true };
    /// A failed allocation.
    pub const FAILED: OpResult = OpResult { ok: false };
}

/// One CPU's part of a workload: a state machine emitting [`Op`]s.
pub trait CpuScript: fmt::Debug + Send {
    /// Size of the slot table the executor must provide; every slot the script names is
    /// below it. Fixed for the life of the script.
    fn slot_count(&self) -> Slot;

    /// The next op, given the result of the previous one ([`OpResult::OK`] on the first
    /// call) and this CPU's random stream.
    fn next(&mut self, last: OpResult, rng: &mut dyn Rng) -> Op;
}

/// How a workload's score is derived from its measured window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScoreKind {
    /// [`Workload::work_units`] per second of elapsed time (throughput).
    Rate,
    /// 100 / elapsed seconds: makespan-based (kbuild's build time, time to free).
    InverseMakespan,
    /// [`Workload::work_units`] is the score itself, independent of time (a success rate).
    Absolute,
}

/// A named set of CPUs whose score is reported separately (thp_mix's two groups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuGroup {
    /// Short name, e.g. `"all"`, `"thp"`, `"base"`.
    pub name: &'static str,
    /// CPU indices, ascending.
    pub cpus: Vec<u32>,
}

impl CpuGroup {
    /// The group of all `cpus` CPUs, named `"all"`.
    pub fn all(cpus: u32) -> Self {
        CpuGroup {
            name: "all",
            cpus: (0..cpus).collect(),
        }
    }
}

/// A parameterised workload: makes per-CPU scripts and defines the score.
pub trait Workload: fmt::Debug + Send + Sync {
    /// The registry name, e.g. `"page_fault1_thp"`.
    fn name(&self) -> &'static str;

    /// The parameters in effect, as `(key, value)` in declaration order (for reports).
    fn params(&self) -> Vec<(&'static str, String)>;

    /// One script per CPU, `cpus` of them (CPUs with no part get an idle script).
    ///
    /// # Errors
    /// [`WorkloadError::TooFewCpus`] if the parameters need more CPUs than `cpus`.
    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError>;

    /// How the score is computed from [`Workload::work_units`] and elapsed time; by
    /// default [`ScoreKind::Rate`], throughput.
    fn score_kind(&self) -> ScoreKind {
        ScoreKind::Rate
    }

    /// Unit of the score, for table headers: `"pages/s"`, `"messages/s"`, `"%"`…; by
    /// default the one the kind implies with the default work units: `"pages/s"` for a
    /// rate, `"100/s"` for a makespan (the score is 100 / elapsed seconds), `"%"` for an
    /// absolute score.
    fn score_unit(&self) -> &'static str {
        match self.score_kind() {
            ScoreKind::Rate => "pages/s",
            ScoreKind::InverseMakespan => "100/s",
            ScoreKind::Absolute => "%",
        }
    }

    /// Work done in a measured window, from the counts of the CPUs in scope (all CPUs,
    /// or one [`CpuGroup`]): pages, messages, bytes, tasks, or a success percentage; by
    /// default the pages allocated.
    fn work_units(&self, counts: &OpCounts) -> f64 {
        counts.allocated_pages() as f64
    }

    /// The score of a measured window that took `elapsed_secs`, per [`Workload::score_kind`].
    fn score(&self, counts: &OpCounts, elapsed_secs: f64) -> f64 {
        match self.score_kind() {
            ScoreKind::Rate => self.work_units(counts) / elapsed_secs,
            ScoreKind::InverseMakespan => 100.0 / elapsed_secs,
            ScoreKind::Absolute => self.work_units(counts),
        }
    }

    /// Groups of CPUs scored separately; by default one group of all CPUs.
    fn groups(&self, cpus: u32) -> Vec<CpuGroup> {
        vec![CpuGroup::all(cpus)]
    }

    /// Blocks an inbox holds before `Send` to it blocks. 0 (the default) for workloads
    /// that never send.
    fn inbox_capacity(&self) -> usize {
        0
    }

    /// Blocks an inbox must have drained to before a sender blocked on it (a full inbox)
    /// is woken: the socket's write-space hysteresis. By default `inbox_capacity() - 1`,
    /// the sender is woken as soon as there is room for one block.
    fn inbox_resume(&self) -> usize {
        self.inbox_capacity().saturating_sub(1)
    }

    /// The barrier after which the measured window starts (per CPU, on leaving it);
    /// `None` (the default) measures the whole run.
    fn measured_after(&self) -> Option<u32> {
        None
    }
}

/// Why a workload could not be built or run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// No workload of this name.
    #[error("unknown workload `{name}`; valid: {}", valid.join(", "))]
    UnknownWorkload {
        /// The name asked for.
        name: String,
        /// The valid names.
        valid: &'static [&'static str],
    },
    /// The workload has no parameter of this name.
    #[error("unknown parameter `{key}` for workload {workload}; valid: {}", valid.join(", "))]
    UnknownParam {
        /// The workload.
        workload: &'static str,
        /// The key asked for.
        key: String,
        /// The workload's valid keys.
        valid: &'static [&'static str],
    },
    /// The value does not parse or is out of range.
    #[error("invalid value `{value}` for {workload}.{key}: {reason}")]
    InvalidParam {
        /// The workload.
        workload: &'static str,
        /// The parameter.
        key: String,
        /// The offending value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The parameters need more CPUs than the executor has.
    #[error("workload {workload} needs {need} CPUs, the executor has {have}")]
    TooFewCpus {
        /// The workload.
        workload: &'static str,
        /// CPUs needed.
        need: u32,
        /// CPUs available.
        have: u32,
    },
}

/// Shorthand for a parameter range check in the workloads' constructors.
fn invalid(
    workload: &'static str,
    key: &str,
    value: impl fmt::Display,
    reason: &str,
) -> WorkloadError {
    WorkloadError::InvalidParam {
        workload,
        key: key.to_owned(),
        value: value.to_string(),
        reason: reason.to_owned(),
    }
}

/// Checks `order <= MAX_ORDER` for parameter `key`.
fn check_order(workload: &'static str, key: &str, order: u8) -> Result<(), WorkloadError> {
    if order > MAX_ORDER {
        return Err(invalid(workload, key, order, "orders are 0..=10"));
    }
    Ok(())
}

/// Checks `value > 0` for parameter `key`.
fn check_nonzero(workload: &'static str, key: &str, value: u64) -> Result<(), WorkloadError> {
    if value == 0 {
        return Err(invalid(workload, key, value, "must be at least 1"));
    }
    Ok(())
}

/// Checks that `cpus` is at least `need`.
fn check_cpus(workload: &'static str, need: u32, have: u32) -> Result<(), WorkloadError> {
    if have < need {
        return Err(WorkloadError::TooFewCpus {
            workload,
            need,
            have,
        });
    }
    Ok(())
}

/// Participant `i`'s part of `total` split `n` ways: the remainder goes to the first
/// participants, so the parts sum to `total` exactly.
fn share(total: u64, n: u32, i: u32) -> u64 {
    let n = u64::from(n);
    let i = u64::from(i);
    total / n + u64::from(i < total % n)
}

/// [`share`] of parameter `key`'s `total` as a slot count, for participant `i` of `n`
/// (`per`: `"CPU"`, `"thread"`); refused when a part needs 2^32 slots or more.
fn share_slots(
    workload: &'static str,
    key: &str,
    total: u64,
    n: u32,
    i: u32,
    per: &str,
) -> Result<Slot, WorkloadError> {
    Slot::try_from(share(total, n, i))
        .map_err(|_| invalid(workload, key, total, &format!("over 2^32 pages per {per}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_slots_splits_exactly_and_refuses_a_part_past_u32() {
        let parts: Vec<Slot> = (0..3)
            .map(|i| share_slots("w", "k", 10, 3, i, "CPU").unwrap())
            .collect();
        assert_eq!(parts, [4, 3, 3]);
        assert_eq!(share_slots("w", "k", 1 << 32, 2, 1, "CPU"), Ok(1 << 31));
        assert_eq!(
            share_slots("w", "k", 1 << 32, 1, 0, "thread").unwrap_err(),
            invalid("w", "k", 1u64 << 32, "over 2^32 pages per thread")
        );
    }
}
