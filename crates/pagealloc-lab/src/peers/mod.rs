//! Page sources: pagealloc and its peers behind one trait, so every executor, workload
//! and microbenchmark runs the same code on each of them.
//!
//! # Design
//! A [`PageSource`] hands out blocks of 2^order base pages ([`Block`]) on behalf of a CPU
//! index (the executor's thread), takes them back, and — where it has memory behind its
//! blocks — writes them ([`PageSource::touch`]). Sources that keep statistics expose the
//! pagealloc [`Counters`]; sources that can check themselves do so in
//! [`PageSource::validate`].
//!
//! | name | what | memory | orders |
//! |---|---|---|---|
//! | `pagealloc` | this workspace's allocator, any config | one mmap, prefaulted | 0..=10 |
//! | `buddy_system_allocator` | rcore's buddy `LockedFrameAllocator` over the same frame range | one mmap, prefaulted | 0..=10 |
//! | `frame-alloc` | frame-alloc 0.1's per-CPU magazines and depot over its lock-free bitmap buddy, over the same frame range | one mmap, prefaulted (always: its bitmaps live in it) | 0..=10 |
//! | `mimalloc`, `jemalloc`, `system` | 2^order × 4 KiB blocks aligned to their size | the allocator's own | 0..=10 |
//! (mimalloc and jemalloc are C builds, behind the lab's default-on `peers` feature)
//! | `pool` | a lock-free queue of order-0 frames (crossbeam `ArrayQueue`) | one mmap, prefaulted | 0 only |
//! | `kernel` | anonymous memory faulted in per block, `MADV_DONTNEED` on free | the live kernel's | 0..=10 |
//!
//! Frame-range sources (pagealloc, buddy, frame-alloc, pool) fail an allocation when their frames run
//! out, like a machine with that much memory. The others have no limit of their own.
//!
//! # What it cannot see
//! `mimalloc`, `jemalloc`, `system` and `kernel` have no zone lock, no per-CPU lists and
//! none of pagealloc's counters: their rows leave those columns empty.

mod buddy;
mod frame_alloc;
mod kernel;
mod malloc;
mod memory;
mod pagealloc;
mod pool;

use std::fmt;

use crate::workload::MigrateKind;

pub use self::buddy::BuddySource;
pub use self::frame_alloc::FrameAllocSource;
pub use self::kernel::KernelSource;
pub use self::malloc::{MallocKind, MallocSource};
pub use self::memory::Memory;
pub use self::pagealloc::PageallocSource;
pub use self::pool::PoolSource;

pub use ::pagealloc::{Counters, PcpInfo};

/// The page sources: the one registry their names, aliases, help text, parser and
/// [`build`] come from. With the lab's `peers` feature off (it is on by default),
/// mimalloc and jemalloc, the two C builds, are left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Peer {
    /// This workspace's allocator.
    #[value(name = "pagealloc")]
    Pagealloc,
    /// rcore's `buddy_system_allocator`.
    #[value(
        name = "buddy_system_allocator",
        alias = "buddy",
        alias = "buddy-system-allocator"
    )]
    Buddy,
    /// frame-alloc 0.1: per-CPU magazines over a lock-free bitmap buddy.
    #[value(name = "frame-alloc", alias = "frame_alloc")]
    FrameAlloc,
    /// mimalloc (C).
    #[cfg(feature = "peers")]
    #[value(name = "mimalloc")]
    Mimalloc,
    /// jemalloc (C, tikv-jemallocator).
    #[cfg(feature = "peers")]
    #[value(name = "jemalloc", alias = "tikv-jemallocator")]
    Jemalloc,
    /// The system allocator (glibc malloc).
    #[value(name = "system", alias = "std")]
    System,
    /// A lock-free queue of order-0 frames.
    #[value(name = "pool")]
    Pool,
    /// The live kernel (mmap/munmap).
    #[value(name = "kernel")]
    Kernel,
}

impl Peer {
    /// Every source, in the order tables list them.
    pub fn all() -> &'static [Peer] {
        <Peer as clap::ValueEnum>::value_variants()
    }

    /// The canonical name.
    pub const fn name(self) -> &'static str {
        match self {
            Peer::Pagealloc => "pagealloc",
            Peer::Buddy => "buddy_system_allocator",
            Peer::FrameAlloc => "frame-alloc",
            #[cfg(feature = "peers")]
            Peer::Mimalloc => "mimalloc",
            #[cfg(feature = "peers")]
            Peer::Jemalloc => "jemalloc",
            Peer::System => "system",
            Peer::Pool => "pool",
            Peer::Kernel => "kernel",
        }
    }

    /// The source called `name` (canonical name or alias).
    ///
    /// # Errors
    /// [`SourceError::UnknownSource`], which lists the valid names.
    pub fn parse(name: &str) -> Result<Peer, SourceError> {
        let n = name.trim();
        <Peer as clap::ValueEnum>::from_str(n, false)
            .map_err(|_| SourceError::UnknownSource(n.to_owned()))
    }

    /// The names with their aliases: `pagealloc, buddy_system_allocator (buddy), …`.
    pub fn names_help() -> String {
        Peer::all()
            .iter()
            .map(|p| {
                let v = clap::ValueEnum::to_possible_value(p).expect("no skipped variants");
                let alias = v.get_name_and_aliases().nth(1).map(str::to_owned);
                match alias {
                    Some(alias) => format!("{} ({alias})", p.name()),
                    None => p.name().to_owned(),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The canonical names of the sources, in the order tables list them.
pub fn names() -> Vec<&'static str> {
    Peer::all().iter().map(|p| p.name()).collect()
}

/// The canonical name of source `name`, or the error listing the valid ones.
///
/// # Errors
/// [`SourceError::UnknownSource`].
pub fn canonical(name: &str) -> Result<&'static str, SourceError> {
    Peer::parse(name).map(Peer::name)
}

/// A block handed out by a source: 2^`order` base pages.
///
/// `handle` is the source's own name for it: a PFN for frame-range sources, an address
/// for the others. Only the source that made it can interpret it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    /// PFN (frame-range sources) or address.
    pub handle: u64,
    /// Order of the block.
    pub order: u8,
}

/// Why an operation of a source failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceError {
    /// Out of memory: a normal result for a workload (the op reports failure).
    OutOfMemory,
    /// The source cannot serve this request at all (e.g. the pool and order > 0).
    Unsupported {
        /// The source.
        source: &'static str,
        /// Why.
        why: String,
    },
    /// The source refused a free, or its state is broken: a bug, the run fails.
    Broken {
        /// The source.
        source: &'static str,
        /// What is wrong.
        what: String,
    },
    /// No source of this name.
    UnknownSource(String),
    /// The source could not be built (bad config, mmap failed…).
    Build {
        /// The source.
        source: &'static str,
        /// Why.
        why: String,
    },
}

// Written out rather than derived: the variants' `source` fields name the allocator
// (thiserror would take them for the error's cause).
impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::OutOfMemory => f.write_str("out of memory"),
            SourceError::Unsupported { source, why } => write!(f, "{source}: {why}"),
            SourceError::Broken { source, what } => write!(f, "{source}: {what}"),
            SourceError::UnknownSource(n) => {
                write!(f, "unknown allocator `{n}`; valid: {}", Peer::names_help())
            }
            SourceError::Build { source, why } => write!(f, "cannot build {source}: {why}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// Where a source's frames live, for the executor's ownership check of every block it
/// hands out: a frame range `0..frames` (handles are PFNs) or addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleSpace {
    /// Handles are frame numbers in `0..frames`, blocks naturally aligned.
    Frames {
        /// Frames in the range.
        frames: u64,
    },
    /// Handles are addresses, 4 KiB aligned, or aligned to the block's size.
    Addresses {
        /// Blocks are aligned to their size (4 KiB × 2^order).
        size_aligned: bool,
    },
}

/// An allocator of 2^order-page blocks, used by CPU (thread) indices.
///
/// Implementations are shared by all executor threads (`Sync`); `cpu` is the caller's
/// thread index, `< cpus` given at construction.
pub trait PageSource: fmt::Debug + Send + Sync {
    /// Canonical name (a [`Peer::name`]).
    fn name(&self) -> &'static str;

    /// pagealloc's config string, for rows; `None` for peers.
    fn config(&self) -> Option<String> {
        None
    }

    /// Allocates a block of 2^`order` pages as CPU `cpu`.
    ///
    /// # Errors
    /// [`SourceError::OutOfMemory`] (a normal failure) or [`SourceError::Unsupported`].
    fn allocate(&self, cpu: usize, order: u8, kind: MigrateKind) -> Result<Block, SourceError>;

    /// Frees `block` as CPU `cpu`.
    ///
    /// # Errors
    /// [`SourceError::Broken`] when the source refuses it (a double free…).
    fn free(&self, cpu: usize, block: Block) -> Result<(), SourceError>;

    /// The lab's mapping behind the blocks, for sources whose handles are frame numbers
    /// into it: the defaults of [`PageSource::touch`], [`PageSource::copy`] and
    /// [`PageSource::has_memory`] use it. `None` (the default): no mapping, or memory
    /// the source reaches its own way (and overrides those three for).
    fn memory(&self) -> Option<&Memory> {
        None
    }

    /// Writes every byte of `block` (a page fault's zeroing, a copy). The default writes
    /// it in [`PageSource::memory`], and is a no-op for sources without memory behind
    /// their blocks.
    fn touch(&self, block: Block) {
        if let Some(m) = self.memory() {
            m.touch(block);
        }
    }

    /// Copies `buf` into the first `buf.len()` bytes of `block` (`into_block`: a socket's
    /// copy from user space) or those bytes of `block` into `buf` (a copy to user space).
    /// `buf` is at most the block's size. The default copies in [`PageSource::memory`];
    /// without it, it writes the whole block instead ([`PageSource::touch`]) or, out of
    /// the block, does nothing.
    fn copy(&self, block: Block, buf: &mut [u8], into_block: bool) {
        match self.memory() {
            Some(m) => m.copy(block, buf, into_block),
            None if into_block => self.touch(block),
            None => {}
        }
    }

    /// Whether [`PageSource::touch`] really writes memory; by default, whether
    /// [`PageSource::memory`] is there.
    fn has_memory(&self) -> bool {
        self.memory().is_some()
    }

    /// How handles are to be read, for the executor's check of every returned block.
    fn handle_space(&self) -> HandleSpace;

    /// pagealloc's counters summed over CPUs, for sources that keep them.
    fn counters(&self) -> Option<Counters> {
        None
    }

    /// Counters of one CPU.
    fn cpu_counters(&self, _cpu: usize) -> Option<Counters> {
        None
    }

    /// Pages in per-CPU caches right now.
    fn pcp_pages(&self) -> Option<u64> {
        None
    }

    /// The pageset of `cpu` in zone 0.
    fn pcp_info(&self, _cpu: usize) -> Option<PcpInfo> {
        None
    }

    /// Checks the source's invariants at the end of a run, with every block freed.
    ///
    /// # Errors
    /// [`SourceError::Broken`] describing the first broken invariant (for pagealloc,
    /// `validate()`'s error, or pages still allocated).
    fn validate(&self) -> Result<(), SourceError> {
        Ok(())
    }
}

/// What a source is built with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSpec {
    /// Canonical source name.
    pub name: &'static str,
    /// pagealloc config (ignored by peers).
    pub config: ::pagealloc::Config,
    /// CPU (thread) indices the source serves.
    pub cpus: usize,
    /// Frames of the frame range (pagealloc, buddy, pool).
    pub frames: u64,
    /// Back the frames with memory that [`PageSource::touch`] writes (prefaulted).
    pub memory: bool,
}

/// Builds the source `spec` describes.
///
/// # Errors
/// [`SourceError::Build`] when the allocator refuses the layout or config, or memory
/// cannot be mapped.
pub fn build(spec: &SourceSpec) -> Result<Box<dyn PageSource>, SourceError> {
    Ok(match Peer::parse(spec.name)? {
        Peer::Pagealloc => Box::new(PageallocSource::new(
            spec.config.clone(),
            spec.frames,
            spec.cpus,
            spec.memory,
        )?),
        Peer::Buddy => Box::new(BuddySource::new(spec.frames, spec.memory)?),
        Peer::FrameAlloc => Box::new(FrameAllocSource::new(spec.frames)?),
        #[cfg(feature = "peers")]
        Peer::Mimalloc => Box::new(MallocSource::new(MallocKind::Mimalloc)),
        #[cfg(feature = "peers")]
        Peer::Jemalloc => Box::new(MallocSource::new(MallocKind::Jemalloc)),
        Peer::System => Box::new(MallocSource::new(MallocKind::System)),
        Peer::Pool => Box::new(PoolSource::new(spec.frames, spec.memory)?),
        Peer::Kernel => Box::new(KernelSource::new(spec.cpus)?),
    })
}

/// Bytes of a block of `order`.
pub(crate) fn block_bytes(order: u8) -> usize {
    (crate::workload::PAGE_SIZE as usize) << order
}

/// Copies `buf` to `ptr` (`into_block`) or `buf.len()` bytes at `ptr` to `buf`, after
/// checking that `buf` fits a block of `order`.
///
/// # Safety
/// `ptr .. ptr + block_bytes(order)` must be valid for reads and writes and not accessed
/// by anyone else during the call (the caller owns the block).
///
/// # Panics
/// If `buf` is larger than the block (a script asking for more bytes than its block has).
pub(crate) unsafe fn copy_block(ptr: *mut u8, order: u8, buf: &mut [u8], into_block: bool) {
    assert!(
        buf.len() <= block_bytes(order),
        "copy of {} bytes with an order-{order} block",
        buf.len()
    );
    if into_block {
        // SAFETY: 1. `ptr` is valid for `block_bytes(order) >= buf.len()` bytes of writes
        // (caller); 2. the block is exclusively the caller's and `buf` is a distinct
        // borrow, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), ptr, buf.len()) };
    } else {
        // SAFETY: 1. `ptr` is valid for `buf.len()` bytes of reads (caller); 2. as above,
        // no overlap and no concurrent access.
        unsafe { std::ptr::copy_nonoverlapping(ptr, buf.as_mut_ptr(), buf.len()) };
    }
}

/// Fills `len` bytes at `ptr` with a pattern (the touch of a block).
///
/// # Safety
/// `ptr .. ptr + len` must be valid for writes and not accessed by anyone else during
/// the call (the caller owns the block).
pub(crate) unsafe fn write_block(ptr: *mut u8, len: usize) {
    // SAFETY: guaranteed by the caller (1: valid for writes; 2: exclusively owned).
    unsafe { std::ptr::write_bytes(ptr, 0x5a, len) };
}
