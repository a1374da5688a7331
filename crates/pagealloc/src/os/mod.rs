//! Operating-system seams, available only with the `std` feature.
//!
//! Everything that touches the host lives here so the allocator core stays
//! `no_std`:
//!
//! - [`sysfs`]: CPU / NUMA node / last-level-cache topology read from sysfs;
//! - [`zoneinfo`]: the running kernel's zones and per-CPU pagesets, parsed from
//!   `/proc/zoneinfo`;
//! - [`mmap`]: anonymous memory regions whose 4 KiB frames have real
//!   addresses (optionally backed by transparent or hugetlbfs huge pages);
//! - [`current_cpu`] and [`monotonic_ns`]: the CPU the caller runs on and a
//!   monotonic clock.

pub mod mmap;
pub mod sysfs;
pub mod zoneinfo;

/// The CPU the calling thread is running on right now (`sched_getcpu(3)`).
///
/// The answer may be stale as soon as it is returned (the thread can
/// migrate); it is a hint for picking a per-CPU cache, never a lock. Returns
/// 0 when the call fails or on targets without `sched_getcpu`.
pub fn current_cpu() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes no arguments and reads or writes no
        // caller memory; it only returns a CPU number or -1.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Nanoseconds on a monotonic clock (`CLOCK_MONOTONIC`).
///
/// Only differences between two readings are meaningful. Never goes
/// backwards within a process.
pub fn monotonic_ns() -> u64 {
    #[cfg(unix)]
    {
        let mut ts = core::mem::MaybeUninit::<libc::timespec>::uninit();
        // SAFETY: `ts.as_mut_ptr()` points to writable storage for one
        // `timespec` that outlives the call; CLOCK_MONOTONIC is a valid
        // clock id on every unix libc supports.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, ts.as_mut_ptr()) };
        if rc == 0 {
            // SAFETY: clock_gettime returned 0, which means it fully
            // initialised the `timespec` behind `ts`.
            let ts = unsafe { ts.assume_init() };
            let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
            let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
            return secs.saturating_mul(1_000_000_000).saturating_add(nanos);
        }
    }
    instant_ns()
}

/// Fallback clock: nanoseconds since the first call, from [`std::time::Instant`].
fn instant_ns() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    let anchor = *ANCHOR.get_or_init(Instant::now);
    u64::try_from(anchor.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_cpu_is_a_known_cpu() {
        let cpu = current_cpu();
        if let Ok(topo) = sysfs::HostTopology::read() {
            assert!(
                topo.cpus.iter().any(|c| c.id == cpu),
                "cpu {cpu} not in host topology"
            );
        }
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b >= a + 1_000_000, "a={a} b={b}");
        assert!(instant_ns() <= instant_ns());
    }
}
