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
//! // The allocator takes it for good (`&'static mut`), so it is handed over once.
//! static mut META: [PageMeta; 4096] = [const { PageMeta::new() }; 4096];
//! // SAFETY: taken once, at boot, before any other code could name `META`; nothing
//! // else reads or writes it afterwards.
//! let meta: &'static mut [PageMeta] = unsafe { &mut *core::ptr::addr_of_mut!(META) };
//!
//! let layout = Layout::single(4096, 2); // frames 0..4096, 2 CPUs
//! assert!(layout.metadata_size() <= core::mem::size_of_val(meta));
//! let a = Allocator::with_metadata(&layout, Config::default(), Arc::new(KernelHooks), meta)
//!     .expect("build");
//! let f = a.alloc_pages(0, Gfp::KERNEL).expect("a page");
//! // physical address = (base of RAM) + f.pfn.0 * PAGE_SIZE
//! a.free_pages(f).expect("free");
//! a.tick(0); // from the timer interrupt, once per second per CPU
//! a.validate().expect("invariants");
//! ```
//!
//! ### Bootstrapping in a kernel
//! The allocator's own structures (the `Arc<dyn Platform>`, the zones, the pagesets, a
//! few `Vec`s: kilobytes, growing with CPUs × zones) come from the global allocator, so a
//! kernel needs a heap *before* it has a frame allocator. The order that works, as the
//! repository's kernel (`crates/pagealloc-kernel`) does it:
//! 1. a small bootstrap heap in the kernel image (a `static` byte array in `.bss`, a few
//!    MiB, behind any `#[global_allocator]`, e.g. `linked_list_allocator`);
//! 2. the firmware's memory map (e820 / UEFI / the PVH start info) turned into a
//!    [`Layout`]: one [`NodeLayout`] per NUMA node (ACPI SRAT), zones cut at 16 MiB and
//!    4 GiB with their real PFNs, every range that is not usable RAM — and the kernel
//!    image itself — a zone hole;
//! 3. the per-frame metadata ([`Layout::metadata_size`] bytes, 16 per spanned frame)
//!    carved from usable RAM right after the image, zeroed (zero bytes are a valid
//!    [`PageMeta`]), added to the holes, and handed over as a `&'static mut [PageMeta]`
//!    to [`Allocator::with_metadata`];
//! 4. from then on page frames come from the allocator; the heap is only for the
//!    allocator's bookkeeping and the kernel's own small objects. The hot paths allocate
//!    nothing on the heap (array pagesets' rings grow under their lock; the nolock pair
//!    never touches them), and [`Allocator::tick`], `validate()` and the reports are the
//!    only other users, all in process context.
//!
//! From interrupt handlers use the nolock pair, [`Allocator::alloc_pages_nolock`] and
//! [`Allocator::free_pages_nolock`]: trylocks only, never a wait, frees deferred when
//! both the pageset and the zone lock are taken.
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
//! - `lowmem_reserve` is taken against Normal for every request (no request is limited
//!   to DMA or DMA32, and none reaches for a Movable zone's reserve); CMA is not
//!   implemented.
//! - Decay updates `high` under the pcp lock (the kernel tolerates a lockless race).

#![no_std]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod access;
mod allocator;
mod buddy;
mod build_error;
mod cluster;
pub mod config;
pub mod frame;
pub mod memmap;
mod pcp;
mod pcp_buddy;
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
pub use allocator::{
    Allocator, BuildError, BulkFreeError, FreeListSeed, FreeListsSeeded, PagesetSeed, SeedError,
    SeedList,
};
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

/// The crate's README: its Rust blocks (the first allocation, real zones with holes, the
/// no_std setup with static metadata) run as doctests, so the README cannot drift from
/// the API.
#[cfg(all(doctest, feature = "std"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
