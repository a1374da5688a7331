//! The time a written cache line takes to move between the program's two CPUs, measured
//! beside the kernel's runs (a ping-pong of two pinned threads): the unmaps' shared lines
//! cost it (docs/predict.md).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A cache line of its own for [`line_transfer_ns`]'s counter.
#[repr(align(128))]
struct Line(std::sync::atomic::AtomicU64);

impl Line {
    /// Hands the line to the other end: `from` becomes `from + 1` unless a stop (or
    /// anything else) was written meanwhile, which stays.
    fn pass(&self, from: u64) {
        use std::sync::atomic::Ordering;
        let _ = self
            .0
            .compare_exchange(from, from + 1, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// Pins the calling thread to `cpu`; false if the kernel refused.
pub(super) fn pin_thread(cpu: u32) -> bool {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes one bit of it
    // (cpu < CPU_SETSIZE, checked above); sched_setaffinity reads it for the calling
    // thread only (pid 0). No lock is involved.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Round trips of one trial of [`line_transfer_ns`].
const LINE_ROUND_TRIPS: u64 = 10_000;
/// Trials of [`line_transfer_ns`]; it gives their least.
const LINE_TRIALS: u64 = 7;
/// A counter value that tells the other thread of [`line_transfer_ns`] to stop.
const LINE_STOP: u64 = u64::MAX;

/// The time one written cache line takes to move between CPUs 0 and 1, ns one way: two
/// threads pinned there take turns incrementing one counter (10 000 round trips a
/// trial), the least of 7 trials (a preempted thread only adds time). On this KVM guest
/// it follows where the host runs the two vCPUs: 38-48 ns while they share an L3,
/// 122-170 ns while they do not, changing from one minute (or second) to the next
/// (docs/predict.md); the unmaps' shared lines cost it (`parallel_free`'s and
/// `page_fault1`'s `line_transfer_ns`). `None` below two CPUs, when a thread could not
/// be pinned, or when a trial took over a second (the other thread never ran).
pub fn line_transfer_ns(cpus: u32) -> Option<f64> {
    use std::sync::atomic::AtomicU64;
    use std::time::Instant;
    if cpus < 2 {
        return None;
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    let peer = {
        let line = line.clone();
        std::thread::spawn(move || {
            if !pin_thread(1) {
                line.0.store(LINE_STOP, Ordering::Release);
                return;
            }
            let mut want = 1;
            loop {
                let v = line.0.load(Ordering::Acquire);
                if v == LINE_STOP {
                    return;
                }
                // A compare-exchange, not a store: a stop written meanwhile stays.
                if v == want {
                    line.pass(want);
                    want += 2;
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    // The measuring end runs on a thread of its own too: the caller's affinity stays.
    let main = {
        let line = line.clone();
        std::thread::spawn(move || {
            let mut best = f64::INFINITY;
            if !pin_thread(0) {
                line.0.store(LINE_STOP, Ordering::Release);
                return best;
            }
            let mut next = 0u64;
            // Waits until the counter is `v`; false if told to stop or after a second.
            let wait = |v: u64, start: Instant| loop {
                match line.0.load(Ordering::Acquire) {
                    x if x == v => return true,
                    LINE_STOP => return false,
                    _ if start.elapsed() > Duration::from_secs(1) => return false,
                    _ => std::hint::spin_loop(),
                }
            };
            for _ in 0..LINE_TRIALS {
                let start = Instant::now();
                for _ in 0..LINE_ROUND_TRIPS {
                    if !wait(next, start) {
                        line.0.store(LINE_STOP, Ordering::Release);
                        return f64::INFINITY;
                    }
                    line.pass(next);
                    next += 2;
                }
                // The last answer, so the trial holds whole round trips.
                if !wait(next, start) {
                    line.0.store(LINE_STOP, Ordering::Release);
                    return f64::INFINITY;
                }
                let ns = start.elapsed().as_nanos() as f64 / (2 * LINE_ROUND_TRIPS) as f64;
                best = best.min(ns);
            }
            line.0.store(LINE_STOP, Ordering::Release);
            best
        })
    };
    let best = main.join().unwrap_or(f64::INFINITY);
    line.0.store(LINE_STOP, Ordering::Release);
    let _ = peer.join();
    best.is_finite().then_some(best)
}
