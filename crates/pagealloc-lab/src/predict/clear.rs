//! What clearing a 2 MiB block costs on this host now, measured beside the kernel's runs:
//! the reference a THP fault's time follows between sessions (docs/predict.md, "The
//! kernel's spread").
//!
//! A THP fault is mostly the clear of its 2 MiB (`clear_page_erms` under
//! `folio_zero_user`: 84-88 % of the fault in cpu-clock profiles), and what that clear
//! costs follows how much of the block the host's other tenants evicted from the
//! last-level cache since it was last written. This guest cannot see them; a user-space
//! clear of a block written a few milliseconds before can. The probe is the one the
//! calibration ran ([`THP_FAULT_BESIDE_CLEAR_NS`]): per round, a 64 MiB
//! write (the block leaves the caches), then five clears of the 2 MiB block with glibc's
//! `memset`, each after 3 ms of spinning; the round's mean; the least of five rounds
//! (other processes on the CPU only ever add time).

use std::time::{Duration, Instant};

/// Bytes of the probed block: one THP.
const BLOCK_BYTES: usize = 2 << 20;
/// Bytes written before each round so the block starts it out of the caches.
const EVICT_BYTES: usize = 64 << 20;
/// Rounds; the probe is their least.
const ROUNDS: usize = 5;
/// Clears per round; the round is their mean.
const CLEARS: usize = 5;
/// How long the CPU spins before each clear.
const IDLE: Duration = Duration::from_millis(3);

/// A THP fault's CPU time less the probe's, ns: the median over 56 samples of the lead's
/// host monitor (2026-11-28 05:15-08:45 UTC, load 0.2-8.2; every ~2 min on CPU 0 at
/// `SCHED_FIFO` priority 1: the probe, then five runs of `predict-program thp_mix --cpus
/// 1` (16 loops of 4 096 pages after 16 384 order-0 faults), their least CPU per base
/// page × 512, then the probe again; the probe taken as the mean of the two). Quartiles
/// 23.9 / 30.1 / 41.4 µs; the THP fault itself 62-175 µs over the same samples (median
/// 77). Over those samples the fault follows the probe at slope 0.94 (r 0.77; 41
/// morning samples) to 1.74 (the 11 samples under the helpers' builds); at slope 1 the
/// fault's spread falls from 14.4 to 9.7 µs in the morning and from 37 to 27 µs under
/// load (docs/predict.md, "The kernel's spread").
pub const THP_FAULT_BESIDE_CLEAR_NS: u32 = 30_100;

/// What the simulator itself charges a THP fault of thp_mix on `host` with its
/// `thp_fault_work_ns` at 0, ns: `pagealloc sim thp_mix --machine host --cpus 1` at
/// `predict`'s size, 128 THP faults in 4.446 ms of CPU (the window's frees, page tables
/// and the hierarchy's clears of blocks the pageset gives back within ~1 ms, which the
/// simulator finds in its last-level cache).
pub const SIM_THP_FAULT_NS: u32 = 34_740;

/// thp_mix's `thp_fault_work_ns` for a probe of `clear_us` µs ([`clear_2m_us`]): the
/// kernel's THP fault as the probe plus [`THP_FAULT_BESIDE_CLEAR_NS`], less what the
/// simulator charges itself ([`SIM_THP_FAULT_NS`]); at least 0.
pub fn thp_fault_work_ns(clear_us: f64) -> u64 {
    let ns = clear_us * 1e3 + f64::from(THP_FAULT_BESIDE_CLEAR_NS) - f64::from(SIM_THP_FAULT_NS);
    if ns.is_finite() && ns > 0.0 {
        ns.round() as u64
    } else {
        0
    }
}

/// A page-aligned buffer of `len` bytes, written once (its pages faulted in).
struct Buffer {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Buffer {
    fn new(len: usize) -> Option<Self> {
        let layout = std::alloc::Layout::from_size_align(len, 4096).ok()?;
        // SAFETY: `layout` has a non-zero size (len is one of the constants above).
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return None;
        }
        let b = Buffer { ptr, layout };
        b.fill(1);
        Some(b)
    }

    /// Writes `v` to every byte with glibc's `memset` (the calibration's clear).
    fn fill(&self, v: u8) {
        // SAFETY: `ptr` is this buffer's own allocation of `layout.size()` bytes, live
        // until drop, and only this thread holds the buffer; no lock is involved.
        unsafe {
            libc::memset(self.ptr.cast(), i32::from(v), self.layout.size());
        }
        // The bytes are never read: without this the compiler may drop the writes.
        std::hint::black_box(self.ptr);
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc` with this `layout` and is freed once, here.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// The probe on the calling thread: µs per 2 MiB clear (see the module's doc).
fn probe() -> Option<f64> {
    let block = Buffer::new(BLOCK_BYTES)?;
    let evict = Buffer::new(EVICT_BYTES)?;
    let mut best = f64::INFINITY;
    for round in 0..ROUNDS {
        evict.fill(round as u8);
        let mut sum = 0.0;
        for k in 0..CLEARS {
            let spin = Instant::now();
            while spin.elapsed() < IDLE {
                std::hint::spin_loop();
            }
            let t0 = crate::exec::clock::thread_cpu_ns();
            block.fill((round + k) as u8);
            sum += crate::exec::clock::thread_cpu_ns().saturating_sub(t0) as f64;
        }
        best = best.min(sum / CLEARS as f64 / 1e3);
    }
    best.is_finite().then_some(best)
}

/// What clearing a 2 MiB block takes on CPU `cpu` now, µs (the module's probe), run on
/// a thread of its own pinned there at `SCHED_FIFO` priority 1 when the kernel allows it
/// (as `predict` times the programs; else at the normal policy). `None` if the thread
/// could not be pinned or the buffers not allocated.
pub fn clear_2m_us(cpu: u32) -> Option<f64> {
    std::thread::spawn(move || {
        if !super::line::pin_thread(cpu) {
            return None;
        }
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: `p` is a valid sched_param; pid 0 is the calling thread, which ends
        // after the probe, so no other code runs at this policy. No lock is involved.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
        probe()
    })
    .join()
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_follows_the_probe_and_never_goes_negative() {
        assert_eq!(thp_fault_work_ns(100.0), 100_000 + 30_100 - 34_740);
        assert_eq!(thp_fault_work_ns(0.0), 0);
        assert_eq!(thp_fault_work_ns(f64::NAN), 0);
    }

    #[test]
    fn a_2_mib_clear_takes_a_time_memory_can_give() {
        // 2 MiB in at least 20 µs (100 GB/s, beyond any one core's store bandwidth)
        // and well under a second.
        let us = probe().expect("probe ran");
        assert!(us > 20.0 && us < 1e6, "{us}");
    }
}
