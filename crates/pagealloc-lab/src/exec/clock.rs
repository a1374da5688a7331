//! A cheap clock for timing single operations.
//!
//! `Instant::now()` costs about 50 ns on some virtual machines (this one included),
//! as much as the allocator's fast path it would time. On x86-64 with an invariant TSC
//! (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo) the executor reads the TSC
//! instead (about 10 ns), converted with a rate measured once against `Instant`;
//! elsewhere it falls back to `Instant`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A point in time of [`now`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp(u64);

struct Rate {
    /// ns per TSC tick; `None`: use `Instant` (stamps are then ns since `base`).
    ns_per_tick: Option<f64>,
    base: Instant,
}

static RATE: OnceLock<Rate> = OnceLock::new();

fn invariant_tsc() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
            c.lines().find(|l| l.starts_with("flags")).is_some_and(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.contains(&"constant_tsc") && f.contains(&"nonstop_tsc")
            })
        })
}

#[cfg(target_arch = "x86_64")]
fn tsc() -> u64 {
    // SAFETY: 1. RDTSC is available on every x86-64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc() -> u64 {
    0
}

fn rate() -> &'static Rate {
    RATE.get_or_init(|| {
        let base = Instant::now();
        if !invariant_tsc() {
            return Rate {
                ns_per_tick: None,
                base,
            };
        }
        let (t0, c0) = (Instant::now(), tsc());
        std::thread::sleep(Duration::from_millis(20));
        let (t1, c1) = (Instant::now(), tsc());
        let ticks = c1.wrapping_sub(c0);
        let ns = (t1 - t0).as_nanos() as f64;
        Rate {
            ns_per_tick: (ticks > 0).then(|| ns / ticks as f64),
            base,
        }
    })
}

/// Measures the clock's rate now (once per process), so no run pays for it.
pub(crate) fn calibrate() {
    rate();
}

/// The current time.
#[inline]
pub(crate) fn now() -> Stamp {
    match rate().ns_per_tick {
        Some(_) => Stamp(tsc()),
        None => Stamp(rate().base.elapsed().as_nanos() as u64),
    }
}

/// Nanoseconds since `s`.
#[inline]
pub(crate) fn since_ns(s: Stamp) -> u64 {
    let r = rate();
    match r.ns_per_tick {
        Some(k) => (tsc().wrapping_sub(s.0) as f64 * k) as u64,
        None => (r.base.elapsed().as_nanos() as u64).saturating_sub(s.0),
    }
}

/// CPU time the calling thread has used, ns (`CLOCK_THREAD_CPUTIME_ID`): what the
/// zone-lock % divides by (spinning on a full inbox or at a barrier counts, time
/// descheduled does not).
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: 1. `ts` is a valid, writable timespec owned by this frame; the call
    // writes only into it. 2. CLOCK_THREAD_CPUTIME_ID is supported on every Linux.
    // No lock is involved: the clock is per thread.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
