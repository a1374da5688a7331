//! The per-CPU cache model: is a page hot or cold when a CPU writes it?
//!
//! # Design
//! Each CPU owns an LRU cache of its LLC slice (`llc_slice_bytes`, the share of the
//! socket's last-level cache Linux attributes to one CPU). An exact LRU per CPU would
//! cost a list per CPU and a lookup per touch; instead the model keeps, per frame, who
//! touched it last and at which point of that CPU's *touch clock* (base pages written by
//! the CPU so far). A touch by CPU `c` is hot iff `c` was the last toucher and fewer than
//! `capacity` pages were written by `c` since: the page's reuse distance fits the slice.
//! This is LRU's hit condition with the distance counted in pages written rather than
//! distinct pages (the same for the streaming writes the workloads do, pessimistic for
//! repeated writes of one page). It gives the two effects the issue asks for: a page
//! freed and soon reused by the same CPU is hot; a page that sat long on a list (the CPU
//! wrote a slice's worth since) or was last written by another CPU is cold.
//!
//! # What it cannot see
//! Reads, the workload's own working set (a `Compute` writes nothing), hardware
//! prefetch, inclusive/exclusive hierarchy effects, and sharing of the LLC between the
//! CPUs of a socket (each CPU has its own slice).
//!
//! # Invariants
//! Deterministic: state is a function of the sequence of touches only.

/// Per-frame last-toucher stamps and per-CPU touch clocks.
#[derive(Debug)]
pub(crate) struct CacheModel {
    /// Per frame (indexed by PFN): `(cpu + 1) << 48 | clock`, 0 = never touched.
    /// Allocated zeroed, so the OS backs only the frames that are touched.
    stamps: Vec<u64>,
    /// Per CPU: base pages written so far (48 bits are plenty: 2^48 pages = 1 EiB).
    clocks: Vec<u64>,
    /// Slice capacity in base pages.
    capacity: u64,
}

const CLOCK_BITS: u32 = 48;
const CLOCK_MASK: u64 = (1 << CLOCK_BITS) - 1;

impl CacheModel {
    /// A model of `cpus` CPUs with `slice_bytes` each, over frames `0..frames`.
    pub(crate) fn new(cpus: usize, slice_bytes: u64, frames: u64) -> Self {
        CacheModel {
            stamps: vec![0; frames as usize],
            clocks: vec![0; cpus],
            capacity: (slice_bytes / pagealloc::PAGE_SIZE as u64).max(1),
        }
    }

    /// CPU `cpu` writes the block of `pages` frames at `pfn`; returns how many of them
    /// were hot. The block is judged by its head frame (the whole block was last written
    /// together) but it advances the clock by all its pages.
    pub(crate) fn touch(&mut self, cpu: usize, pfn: u64, pages: u64) -> u64 {
        let clock = self.clocks[cpu];
        let owner = (cpu as u64 + 1) << CLOCK_BITS;
        let stamp = &mut self.stamps[pfn as usize];
        let hot = if *stamp & !CLOCK_MASK == owner {
            let then = *stamp & CLOCK_MASK;
            // Written since, plus the block itself, must fit the slice (an order-9 block
            // of 512 pages is never hot in a 240-page slice).
            clock - then + pages <= self.capacity
        } else {
            false
        };
        let new_clock = clock + pages;
        self.clocks[cpu] = new_clock;
        *stamp = owner | (new_clock & CLOCK_MASK);
        if hot {
            pages
        } else {
            0
        }
    }

    /// Slice capacity in base pages.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_soon_by_the_same_cpu_is_hot() {
        let mut c = CacheModel::new(2, 4 * 4096, 100);
        assert_eq!(c.capacity(), 4);
        assert_eq!(c.touch(0, 10, 1), 0, "first touch is cold");
        assert_eq!(c.touch(0, 10, 1), 1, "immediate reuse is hot");
        assert_eq!(c.touch(1, 10, 1), 0, "another CPU's page is cold");
        assert_eq!(c.touch(0, 10, 1), 0, "and cold again for the first one");
    }

    #[test]
    fn a_slice_of_other_writes_evicts() {
        let mut c = CacheModel::new(1, 4 * 4096, 100);
        c.touch(0, 0, 1);
        for pfn in 1..4 {
            c.touch(0, pfn, 1);
        }
        assert_eq!(c.touch(0, 0, 1), 1, "3 pages written since: fits 4");
        for pfn in 1..=4 {
            c.touch(0, pfn, 1);
        }
        assert_eq!(c.touch(0, 0, 1), 0, "4 pages written since: evicted");
    }

    #[test]
    fn blocks_larger_than_the_slice_are_cold() {
        let mut c = CacheModel::new(1, 4 * 4096, 100);
        c.touch(0, 0, 8);
        assert_eq!(c.touch(0, 0, 8), 0);
        c.touch(0, 16, 2);
        assert_eq!(c.touch(0, 16, 2), 2);
    }
}
