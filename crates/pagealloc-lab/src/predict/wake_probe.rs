//! A wakeup across the program's two CPUs, measured at run time beside the streams'
//! timing runs: what one costs the waker, the sleeper's switches, and how long the
//! sleeper takes to run. The streams' wakeups cost what the host makes them cost (in
//! this KVM guest the IPI exits to the hypervisor and the idle vCPU has halted), and
//! that moves from one hour to the next as the host's load does (docs/predict.md,
//! "What the kernel corrected"); `predict` gives the simulator this probe's figures in
//! place of fixed constants ([`super::work::wake_costs`]).
//!
//! The probe: two threads pinned to CPUs 0 and 1 at the normal policy (as the streams
//! run) take turns waking each other through a futex each, one round trip a turn. Each
//! side reads its thread CPU clock around its `FUTEX_WAKE` (the waker's cost:
//! `try_to_wake_up`, the IPI and its exit) and around its `FUTEX_WAIT` (the sleeper's
//! switch out and back in, the syscall's entry and exit), and the woken side reads the
//! monotonic clock against the waker's stamp taken just before its wake (the latency).
//! Each figure is the median of its samples, not their least: a wakeup is cheap (under
//! 1 µs each) while another process runs on the sleeper's CPU, whose vCPU then has not
//! halted, and that is the perturbation here, not a dearer wakeup.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// One probe's figures, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeProbe {
    /// The waker's CPU in a `FUTEX_WAKE` of a sleeper on the other CPU.
    pub waker_ns: f64,
    /// The sleeper's CPU in its `FUTEX_WAIT` (switched out, then back in).
    pub sleeper_ns: f64,
    /// From just before the waker's `FUTEX_WAKE` to the sleeper running again.
    pub latency_ns: f64,
}

/// Round trips of one probe.
const ROUND_TRIPS: usize = 1_000;
/// A round trip's limit: past it the other thread is taken to have never run.
const STUCK: Duration = Duration::from_secs(1);

/// One side's futex word (`1`: woken) on a cache line of its own.
#[repr(align(128))]
struct Word(AtomicU32);

/// What the two threads share.
struct Shared {
    /// Each side's futex word.
    words: [Word; 2],
    /// The waker's monotonic stamp (ns since `epoch`) just before its last wake.
    stamp: AtomicU64,
    /// Set when either side gives up: the other stops at its next turn.
    stop: AtomicBool,
    epoch: Instant,
}

/// The calling thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec owned by this frame; the clock id is a
    // constant the kernel knows. No lock is involved.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `FUTEX_WAIT` on `w` while it holds 0, up to 10 ms a call.
fn futex_wait(w: &AtomicU32) {
    let t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    // SAFETY: the futex word is an AtomicU32 that outlives the call (the caller holds
    // an Arc of it); the kernel only reads it and the timeout owned by this frame.
    // No lock of ours is held.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            0u32,
            &t as *const libc::timespec,
        )
    };
}

/// `FUTEX_WAKE` of one waiter on `w`.
fn futex_wake(w: &AtomicU32) {
    // SAFETY: as in `futex_wait`; FUTEX_WAKE reads no user memory but the word's
    // address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1u32,
        )
    };
}

/// Pins the calling thread to `cpu`; false if the kernel refused.
fn pin(cpu: u32) -> bool {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET sets one bit inside it (cpu
    // below CPU_SETSIZE, checked above); sched_setaffinity reads it for this thread
    // (pid 0) only. No lock is involved.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Per-side samples: waker CPU, sleeper CPU, latency (ns).
type Samples = [Vec<u64>; 3];

/// One side of the ping-pong: `me` 0 starts. Returns its samples, or `None` when it
/// could not be pinned or the other side stopped answering.
fn side(sh: &Shared, me: usize, cpu: u32) -> Option<Samples> {
    if !pin(cpu) {
        sh.stop.store(true, Ordering::Release);
        return None;
    }
    let other = 1 - me;
    let mut s: Samples = Default::default();
    let turns = ROUND_TRIPS;
    for turn in 0..=turns {
        if me == 1 || turn > 0 {
            // Sleep until the other side wakes us.
            let start = Instant::now();
            let c0 = thread_cpu_ns();
            while sh.words[me].0.load(Ordering::Acquire) == 0 {
                if sh.stop.load(Ordering::Acquire) || start.elapsed() > STUCK {
                    sh.stop.store(true, Ordering::Release);
                    return None;
                }
                futex_wait(&sh.words[me].0);
            }
            let now = sh.epoch.elapsed().as_nanos() as u64;
            s[1].push(thread_cpu_ns() - c0);
            s[2].push(now.saturating_sub(sh.stamp.load(Ordering::Acquire)));
            sh.words[me].0.store(0, Ordering::Release);
        }
        if turn == turns && me == 1 {
            break;
        }
        if turn == turns {
            // The last answer: wake the other side a final time so it ends.
            sh.words[other].0.store(1, Ordering::Release);
            futex_wake(&sh.words[other].0);
            break;
        }
        // Wake the other side (asleep by now: it slept right after waking us).
        sh.stamp
            .store(sh.epoch.elapsed().as_nanos() as u64, Ordering::Release);
        sh.words[other].0.store(1, Ordering::Release);
        let c0 = thread_cpu_ns();
        futex_wake(&sh.words[other].0);
        s[0].push(thread_cpu_ns() - c0);
    }
    Some(s)
}

fn median(v: &mut [u64]) -> f64 {
    v.sort_unstable();
    v.get(v.len() / 2).map_or(0.0, |&x| x as f64)
}

/// Measures a wakeup between CPUs 0 and 1 (see the module). `None` below two CPUs,
/// when a thread could not be pinned, or when a side stopped answering for a second.
pub fn measure(cpus: u32) -> Option<WakeProbe> {
    if cpus < 2 {
        return None;
    }
    let sh = Arc::new(Shared {
        words: [Word(AtomicU32::new(0)), Word(AtomicU32::new(0))],
        stamp: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        epoch: Instant::now(),
    });
    let threads: Vec<_> = (0..2)
        .map(|me| {
            let sh = sh.clone();
            std::thread::spawn(move || side(&sh, me, me as u32))
        })
        .collect();
    let mut all: Vec<Samples> = Vec::new();
    for t in threads {
        all.push(t.join().ok()??);
    }
    // Both sides' samples together.
    let mut m = [0.0; 3];
    for (k, x) in m.iter_mut().enumerate() {
        let mut v: Vec<u64> = all.iter().flat_map(|s| s[k].iter().copied()).collect();
        if v.is_empty() {
            return None;
        }
        *x = median(&mut v);
    }
    Some(WakeProbe {
        waker_ns: m[0],
        sleeper_ns: m[1],
        latency_ns: m[2],
    })
}

/// Each figure's median over the probes that answered (`None`: none did).
pub fn median_of(probes: &[Option<WakeProbe>]) -> Option<WakeProbe> {
    let ok: Vec<&WakeProbe> = probes.iter().flatten().collect();
    if ok.is_empty() {
        return None;
    }
    let m = |f: fn(&WakeProbe) -> f64| {
        let mut v: Vec<f64> = ok.iter().map(|p| f(p)).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Some(WakeProbe {
        waker_ns: m(|p| p.waker_ns),
        sleeper_ns: m(|p| p.sleeper_ns),
        latency_ns: m(|p| p.latency_ns),
    })
}

/// The note `predict` prints: each probe (waker / sleeper / latency, µs) beside the
/// CPU µs per operation of the timing run after it (`times`: rate, CPU µs/op, idle %).
pub fn note(probes: &[Option<WakeProbe>], times: &[(f64, f64, f64)]) -> Option<String> {
    let m = median_of(probes)?;
    let each = probes
        .iter()
        .zip(times)
        .map(|(p, t)| match p {
            Some(p) => format!(
                "{:.2}/{:.2}/{:.1}: {:.2}",
                p.waker_ns * 1e-3,
                p.sleeper_ns * 1e-3,
                p.latency_ns * 1e-3,
                t.1
            ),
            None => format!("-: {:.2}", t.1),
        })
        .collect::<Vec<_>>()
        .join("; ");
    Some(format!(
        "kernel: a futex wakeup between CPUs 0 and 1 costs the waker {:.2} µs and the sleeper {:.2}, and runs the sleeper {:.1} µs after (medians, given to the simulator; before each timing run, waker/sleeper/latency: CPU µs/op: {each})",
        m.waker_ns * 1e-3,
        m.sleeper_ns * 1e-3,
        m.latency_ns * 1e-3
    ))
}

#[cfg(test)]
mod tests {
    use super::measure;

    /// Below two CPUs there is nothing to measure; at two, when the machine has them,
    /// the probe's figures are positive.
    #[test]
    fn probe_figures() {
        assert_eq!(measure(1), None);
        let online = std::thread::available_parallelism().map_or(1, |n| n.get());
        if online < 2 {
            return;
        }
        if let Some(p) = measure(2) {
            assert!(p.waker_ns > 0.0 && p.sleeper_ns > 0.0, "{p:?}");
            assert!(p.latency_ns > 0.0, "{p:?}");
        }
    }
}
