//! # pagealloc
//!
//! A Linux-style page-frame allocator: 2^order contiguous frames (order 0..=10) from zones
//! on NUMA nodes, a buddy allocator with migratetypes, pageblock stealing and the
//! high-atomic reserve, watermarks, and per-CPU page caches (pagesets) in front of every
//! zone whose size tunes itself as in Linux 6.7–6.12 (and, with the `linux-6.18` preset,
//! the fallback, free_high and decay changes up to 6.18.y). Every mechanism of the Linux
//! PCP series — and a few that never made it to mainline — is a [`Config`] switch, so its
//! effect can be measured alone; the counters ([`Counters`]) say what happened.
//!
//! ```
//! use pagealloc::{Allocator, Config, Gfp, Layout};
//! // 64 MiB, one node, 2 CPUs
//! let a = Allocator::new(&Layout::single(16384, 2), Config::default()).unwrap();
//! let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
//! a.free_on(0, f).unwrap();
//! assert!(a.free_on(0, f).is_err()); // double free detected, in every build
//! a.validate().unwrap();
//! print!("{}", a.zoneinfo());
//! ```
//!
//! The reference for every formula is the repository's `docs/mechanisms.md` (cited by section in
//! the docs); kernel names (`rmqueue_pcplist`, `nr_pcp_high`, `free_pcppages_bulk`, …)
//! are kept so a kernel reviewer can map this code to `mm/page_alloc.c`.
//!
//! ## no_std
//! Without the default `std` feature the crate is `#![no_std]` + `alloc`: supply a
//! [`Platform`] (CPU id and clock) and, if you like, the metadata buffer
//! ([`Allocator::with_metadata`], sized by [`Layout::metadata_size`]), and call
//! [`Allocator::tick`] once per second per CPU yourself.
//!
//! ```
//! // In a kernel: `#![no_std]`, `extern crate alloc;`, and pagealloc with
//! // `default-features = false`. Nothing below needs std.
//! use alloc::sync::Arc;
//! use pagealloc::{Allocator, Config, Gfp, Layout, PageMeta, Platform};
//! # extern crate alloc;
//!
//! /// The kernel's hooks: which CPU am I on, what time is it.
//! #[derive(Debug)]
//! struct KernelHooks;
//! impl Platform for KernelHooks {
//!     fn current_cpu(&self) -> usize {
//!         0 // e.g. read from the per-CPU area / GS base
//!     }
//!     fn now_ns(&self) -> u64 {
//!         0 // e.g. TSC scaled to ns
//!     }
//! }
//!
//! // Metadata for 4096 frames (16 MiB) in the kernel image: no allocation needed for it.
//! static META: [PageMeta; 4096] = [const { PageMeta::new() }; 4096];
//!
//! let layout = Layout::single(4096, 2); // frames 0..4096, 2 CPUs
//! assert!(layout.metadata_size() <= core::mem::size_of_val(&META));
//! let a = Allocator::with_metadata(&layout, Config::default(), Arc::new(KernelHooks), &META)
//!     .expect("build");
//! let f = a.alloc_pages(0, Gfp::KERNEL).expect("a page");
//! // physical address = (base of RAM) + f.pfn.0 * PAGE_SIZE
//! a.free_pages(f).expect("free");
//! a.tick(0); // from the timer interrupt, once per second per CPU
//! a.validate().expect("invariants");
//! ```
//!
//! ## Features
//! - `std` (default): mmap-backed memory, the host's CPU and clock, sysfs topology, a
//!   background decay ticker.
//! - `x86_64`: the `x86_64` crate's `FrameAllocator` / `FrameDeallocator` for 4 KiB and
//!   2 MiB frames, no_std (`x86_64::FrameAdapter`, for hobby and research kernels).
//!
//! ## Deviations from the kernel
//! - No reclaim: the slow path wakes a modelled kswapd (RECLAIM_ACTIVE from free < low
//!   until free ≥ high), drains all pagesets and gives back the high-atomic reserve, then
//!   fails with [`AllocError::OutOfMemory`].
//! - `lowmem_reserve` and ALLOC_NOFRAGMENT are not modelled; CMA is not implemented.
//! - Decay updates `high` under the pcp lock (the kernel tolerates a lockless race).

#![no_std]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod access;
mod allocator;
mod buddy;
mod cluster;
pub mod config;
pub mod frame;
pub mod memmap;
mod pcp;
pub mod platform;
pub mod policy;
mod report;
pub mod stats;
pub mod sync;
pub mod topology;
pub mod tune;
mod validate;
mod zone;
mod zonelist;

#[cfg(feature = "std")]
pub mod os;
#[cfg(feature = "std")]
mod ticker;
#[cfg(feature = "x86_64")]
pub mod x86_64;

pub use access::{Access, AccessSink, Line, ZoneLine};
pub use allocator::{Allocator, BuildError, BulkFreeError};
pub use config::{Config, ConfigError, Preset, ThpPcpLists, POISON_BYTE};
pub use frame::{
    AllocError, Frame, FreeError, Gfp, MigrateType, Pfn, MAX_ORDER, PAGEBLOCK_ORDER, PAGE_SIZE,
};
pub use memmap::{metadata_size, PageMeta};
pub use pcp::NR_PCP_LISTS;
pub use platform::{ManualPlatform, Platform};
pub use report::{VmstatDisplay, ZoneinfoDisplay};
pub use stats::{Counters, PcpInfo, ZoneInfo};
pub use topology::{CpuLayout, Layout, LayoutError, NodeLayout, ZoneKind, ZoneLayout};
pub use validate::{PageTotals, ValidateError};
pub use zone::{min_free_kbytes, zone_wmarks};

#[cfg(feature = "std")]
pub use platform::OsPlatform;
