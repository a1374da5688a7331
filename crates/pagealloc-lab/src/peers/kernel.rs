//! The live kernel's page allocator: a block is a range of anonymous memory faulted in
//! at allocation (the kernel allocates and zeroes its pages) and given back at free with
//! `madvise(MADV_DONTNEED)` (the pages go back through the kernel's per-CPU lists to its
//! buddy allocator), as a page fault and an unmap do.
//!
//! # Design
//! Address space is reserved up front (`mmap` with `MAP_NORESERVE`, nothing faulted):
//! one region for blocks below order 9 (`MADV_NOHUGEPAGE`, so a fault takes one base
//! page) and one for order 9 and up (`MADV_HUGEPAGE`, 2 MiB aligned, so the kernel may
//! serve a block as one THP). Addresses are carved from a region with a bump pointer,
//! aligned to the block size, and reused per order from a per-CPU free list (refilled
//! from other CPUs' lists when empty), so steady state makes no `mmap`/`munmap` calls:
//! no VMA is created or split and the `mmap_lock` is only ever taken for reading, as in
//! will-it-scale's page_fault1, which maps once and faults. A per-block `mmap`/`munmap`
//! (tried first) mostly measured VMA handling and `mmap_lock` contention: 3× slower.
//!
//! Allocation writes one byte per 4 KiB page (a fault each; a THP block faults once);
//! `touch` then writes the whole block like every other source.
//!
//! Frees are batched as an unmap batches them: a CPU's frees of address-adjacent blocks
//! (a loop's region, freed in allocation order, whichever direction the addresses run)
//! grow one pending range, returned with a single `madvise(MADV_DONTNEED)` when a free
//! is not adjacent to it, when the CPU allocates next, or at `validate`/drop. That is
//! will-it-scale's page_fault1, which unmaps its 128 MiB region in one call, so its pages
//! go back through `zap_pte_range`'s mmu_gather batches and `free_pages_and_swap_cache`
//! rather than one syscall, one TLB flush and one `free_unref_page` path per block. An
//! address is reused only after its range was returned, so every allocation still faults.
//!
//! # What it measures
//! The kernel's page allocator plus what a fault and an unmap always cost: the trap,
//! the page-table update, the zeroing, the `madvise` call and its TLB flush.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use super::{block_bytes, copy_block, write_block, Block, HandleSpace, PageSource, SourceError};
use crate::workload::{MigrateKind, MAX_ORDER, NR_ORDERS};

const NAME: &str = "kernel";
/// The order from which blocks are placed in the huge-page region.
const HUGE_ORDER: u8 = 9;
/// Address space reserved per region (nothing is committed until faulted); smaller
/// sizes are tried when the kernel refuses (strict overcommit ignores MAP_NORESERVE).
const REGION_BYTES: [usize; 4] = [64 << 30, 16 << 30, 4 << 30, 1 << 30];
/// Freed address ranges moved at once from another CPU's list.
const STEAL_BATCH: usize = 64;

/// A reserved range of address space and its bump pointer.
#[derive(Debug)]
struct Region {
    base: usize,
    len: usize,
    /// Offset of the first never-used byte.
    next: AtomicUsize,
}

impl Region {
    /// The largest of [`REGION_BYTES`] the kernel grants.
    fn reserve_any(advice: libc::c_int) -> Result<Region, SourceError> {
        let mut err = None;
        for len in REGION_BYTES {
            match Region::reserve(len, advice) {
                Ok(r) => return Ok(r),
                Err(e) => err = Some(e),
            }
        }
        Err(err.expect("at least one size was tried"))
    }

    fn reserve(len: usize, advice: libc::c_int) -> Result<Region, SourceError> {
        let align = 2 << 20;
        // SAFETY: 1. a fresh private anonymous mapping at an address the kernel picks
        // cannot alias existing memory; MAP_NORESERVE commits nothing; 2. the result is
        // checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + align,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(SourceError::Build {
                source: NAME,
                why: format!(
                    "reserving {} GiB: {}",
                    len >> 30,
                    io::Error::last_os_error()
                ),
            });
        }
        let raw = p as usize;
        let base = raw.next_multiple_of(align);
        // Give back the unaligned head and the tail beyond `len`.
        unmap(raw, base - raw);
        unmap(base + len, raw + len + align - (base + len));
        // SAFETY: 1. [base, base + len) is the part of the mapping kept above; the
        // advice changes only the huge-page policy of the range, never its contents.
        // Failure (a kernel without THP) is harmless: the policy is a preference.
        unsafe { libc::madvise(base as *mut libc::c_void, len, advice) };
        Ok(Region {
            base,
            len,
            next: AtomicUsize::new(0),
        })
    }

    /// A never-used address range of `bytes`, aligned to `bytes`.
    fn carve(&self, bytes: usize) -> Option<usize> {
        let mut cur = self.next.load(Relaxed);
        loop {
            let start = (self.base + cur).next_multiple_of(bytes) - self.base;
            let end = start.checked_add(bytes)?;
            if end > self.len {
                return None;
            }
            match self.next.compare_exchange_weak(cur, end, Relaxed, Relaxed) {
                Ok(_) => return Some(self.base + start),
                Err(now) => cur = now,
            }
        }
    }
}

fn unmap(addr: usize, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: 1. [addr, addr + len) is part of a mapping this source made and that no
    // block lives in (an unused head or tail, or the whole region on drop).
    let rc = unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    assert_eq!(rc, 0, "munmap: {}", io::Error::last_os_error());
}

/// Freed blocks of one CPU whose pages have not been returned yet: one address range
/// `[lo, hi)` and the blocks in it.
#[derive(Debug, Default)]
struct Pending {
    lo: usize,
    hi: usize,
    blocks: Vec<(usize, u8)>,
}

/// A CPU's free lists (per order, addresses whose pages were returned) and its pending
/// range.
#[derive(Debug, Default)]
struct CpuFree {
    lists: [Vec<usize>; NR_ORDERS],
    pending: Pending,
}

/// Reserved regions, and per CPU per order the addresses of freed blocks.
#[derive(Debug)]
pub struct KernelSource {
    small: Region,
    huge: Region,
    free: Vec<Mutex<CpuFree>>,
}

/// Returns the pages of `[addr, addr + len)` to the kernel.
fn dontneed(addr: usize, len: usize) -> Result<(), SourceError> {
    // SAFETY: 1. the range is made of blocks of our reserved region that their owners no
    // longer use (freed, not yet reused); MADV_DONTNEED drops their pages, and a later
    // fault maps fresh zeroed ones.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    if rc != 0 {
        return Err(SourceError::Broken {
            source: NAME,
            what: format!("madvise: {}", io::Error::last_os_error()),
        });
    }
    Ok(())
}

impl CpuFree {
    /// Returns the pending range in one call and moves its blocks to the free lists.
    fn flush(&mut self) -> Result<(), SourceError> {
        if self.pending.blocks.is_empty() {
            return Ok(());
        }
        let (lo, hi) = (self.pending.lo, self.pending.hi);
        let r = dontneed(lo, hi - lo);
        for (a, o) in self.pending.blocks.drain(..) {
            self.lists[usize::from(o)].push(a);
        }
        r
    }

    /// Adds a freed block to the pending range, returning the range first when the block
    /// does not extend it.
    fn defer(&mut self, addr: usize, order: u8) -> Result<(), SourceError> {
        let end = addr + block_bytes(order);
        let p = &mut self.pending;
        if !p.blocks.is_empty() && end == p.lo {
            p.lo = addr;
        } else if !p.blocks.is_empty() && addr == p.hi {
            p.hi = end;
        } else {
            self.flush()?;
            self.pending.lo = addr;
            self.pending.hi = end;
        }
        self.pending.blocks.push((addr, order));
        Ok(())
    }
}

impl KernelSource {
    /// Reserves the address space for `cpus` CPUs.
    ///
    /// # Errors
    /// [`SourceError::Build`] if the reservation fails.
    pub fn new(cpus: usize) -> Result<Self, SourceError> {
        Ok(KernelSource {
            small: Region::reserve_any(libc::MADV_NOHUGEPAGE)?,
            huge: Region::reserve_any(libc::MADV_HUGEPAGE)?,
            free: (0..cpus.max(1))
                .map(|_| Mutex::new(Default::default()))
                .collect(),
        })
    }

    fn region(&self, order: u8) -> &Region {
        if order >= HUGE_ORDER {
            &self.huge
        } else {
            &self.small
        }
    }

    fn list(&self, cpu: usize) -> &Mutex<CpuFree> {
        &self.free[cpu % self.free.len()]
    }

    /// A freed address range of `order`: this CPU's own, or else a batch taken from
    /// another CPU's list (blocks freed remotely, as in netperf, pile up on the
    /// receiver's list and must flow back to the sender).
    fn reuse(&self, cpu: usize, order: u8) -> Result<Option<usize>, SourceError> {
        let o = usize::from(order);
        {
            let mut mine = self.list(cpu).lock().expect("free list");
            mine.flush()?;
            if let Some(a) = mine.lists[o].pop() {
                return Ok(Some(a));
            }
        }
        // One list locked at a time: two CPUs stealing from each other cannot deadlock.
        let n = self.free.len();
        for k in 1..n {
            let batch: Vec<usize> = {
                let mut theirs = self.free[(cpu + k) % n].lock().expect("free list");
                let have = theirs.lists[o].len();
                theirs.lists[o]
                    .drain(have - have.min(STEAL_BATCH)..)
                    .collect()
            };
            if !batch.is_empty() {
                let mut mine = self.list(cpu).lock().expect("free list");
                mine.lists[o].extend(batch);
                return Ok(mine.lists[o].pop());
            }
        }
        Ok(None)
    }

    /// Returns every CPU's pending range.
    fn flush_all(&self) -> Result<(), SourceError> {
        for f in &self.free {
            f.lock().expect("free list").flush()?;
        }
        Ok(())
    }
}

impl Drop for KernelSource {
    fn drop(&mut self) {
        // The whole reservation is unmapped below; pending ranges need no call of their own.
        unmap(self.small.base, self.small.len);
        unmap(self.huge.base, self.huge.len);
    }
}

impl PageSource for KernelSource {
    fn name(&self) -> &'static str {
        NAME
    }

    fn allocate(&self, cpu: usize, order: u8, _kind: MigrateKind) -> Result<Block, SourceError> {
        if order > MAX_ORDER {
            return Err(SourceError::Unsupported {
                source: NAME,
                why: format!("order {order} above {MAX_ORDER}"),
            });
        }
        let len = block_bytes(order);
        let addr = match self.reuse(cpu, order)? {
            Some(a) => a,
            None => self
                .region(order)
                .carve(len)
                .ok_or(SourceError::OutOfMemory)?,
        };
        super::memory::prefault(addr as *mut u8, len);
        Ok(Block {
            handle: addr as u64,
            order,
        })
    }

    fn free(&self, cpu: usize, block: Block) -> Result<(), SourceError> {
        let addr = block.handle as usize;
        let len = block_bytes(block.order);
        let r = self.region(block.order);
        if block.order > MAX_ORDER
            || addr < r.base
            || addr + len > r.base + r.len
            || addr % len != 0
        {
            return Err(SourceError::Broken {
                source: NAME,
                what: format!("free of {block:?}: not a block of this source"),
            });
        }
        self.list(cpu)
            .lock()
            .expect("free list")
            .defer(addr, block.order)
    }

    fn validate(&self) -> Result<(), SourceError> {
        self.flush_all()
    }

    fn touch(&self, block: Block) {
        // SAFETY: 1. the block is a range of our mapping of `block_bytes(order)` bytes;
        // 2. the executor touches only blocks its thread owns.
        unsafe { write_block(block.handle as *mut u8, block_bytes(block.order)) };
    }

    fn copy(&self, block: Block, buf: &mut [u8], into_block: bool) {
        // SAFETY: 1. the block is a range of our mapping of `block_bytes(order)` bytes;
        // 2. the executor copies only blocks its thread owns.
        unsafe { copy_block(block.handle as *mut u8, block.order, buf, into_block) };
    }

    fn has_memory(&self) -> bool {
        true
    }

    fn handle_space(&self) -> HandleSpace {
        HandleSpace::Addresses { size_aligned: true }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads byte `off` of `b`.
    fn byte(b: Block, off: usize) -> u8 {
        // SAFETY: 1. `b` is a block of the source's mapping of at least `off + 1` bytes
        // that this test owns; a read of a returned page faults in a zeroed one.
        unsafe { (b.handle as *const u8).add(off).read_volatile() }
    }

    #[test]
    fn adjacent_frees_are_returned_in_one_range_before_reuse() {
        let k = KernelSource::new(1).unwrap();
        let bs: Vec<Block> = (0..4)
            .map(|_| k.allocate(0, 0, MigrateKind::Movable).unwrap())
            .collect();
        for &b in &bs {
            k.touch(b);
            assert_eq!(byte(b, 100), 0x5a);
        }
        for &b in &bs {
            k.free(0, b).unwrap();
        }
        {
            let f = k.list(0).lock().unwrap();
            assert_eq!(f.pending.blocks.len(), 4, "one pending range");
            assert_eq!(f.pending.hi - f.pending.lo, 4 * block_bytes(0));
            assert!(
                f.lists[0].is_empty(),
                "nothing reusable before it is returned"
            );
        }
        // The next allocation returns the range first, then reuses a block of it: the
        // page is a fresh one (zeroed), not the one written above.
        let b = k.allocate(0, 0, MigrateKind::Movable).unwrap();
        assert!(bs.contains(&b));
        assert_eq!(byte(b, 100), 0);
        assert!(k.list(0).lock().unwrap().pending.blocks.is_empty());
        // A free that is not adjacent starts a new range; validate returns it.
        k.free(0, b).unwrap();
        k.validate().unwrap();
        assert!(k.list(0).lock().unwrap().pending.blocks.is_empty());
    }
}
