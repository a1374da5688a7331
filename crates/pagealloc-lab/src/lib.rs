//! The pagealloc laboratory.
//!
//! The lab runs the page-allocation patterns of the Linux PCP series' measurements
//! (published figures: docs/sim-cost-model.md §4) on two executors: real pinned threads, and a
//! deterministic discrete-event simulator of hundreds of virtual CPUs. Both run the same
//! workload definitions, which live in [`workload`].
//!
//! # Design
//! A workload is written once, as per-CPU state machines ([`workload::CpuScript`]) that
//! emit [`workload::Op`]s: allocate into a slot, free a slot, touch, compute, send to
//! another CPU, receive, barrier. Scripts own no threads, clocks or randomness: the
//! executor drives them, times them and hands them a seeded [`workload::Rng`]. This is
//! what lets the thread executor and the simulator agree on *what* was done and differ
//! only in *how long* it took.
//!
//! [`workload::dry_run`] is the reference executor: round-robin, no allocator, fake
//! frame ids. It defines the semantics the real executors must match and checks the
//! conservation invariant (every block allocated is freed exactly once).

#![warn(missing_docs)]

pub mod bench;
pub mod cli;
pub mod exec;
pub mod host_alloc;
pub mod limits;
pub mod output;
pub mod peers;
pub mod policies;
pub mod predict;
pub mod report;
pub mod row;
pub mod sim;
pub mod stats;
pub mod stress;
pub mod trace;
pub mod twin;
pub mod units;
pub mod workload;

pub use row::Row;
