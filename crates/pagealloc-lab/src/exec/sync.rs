//! The executor's cross-thread machinery: the barrier of the workload language (with the
//! id check and the measured-window snapshot), the abort flag, the wait queues of the
//! inboxes, the pinning.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::outcome::{ExecError, STUCK_AFTER};

/// Shared stop flag: set when any thread fails, so the others leave their waits.
#[derive(Debug, Default)]
pub(crate) struct Abort(AtomicBool);

impl Abort {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Waits with a spin, then yields, checking `abort` and a deadline.
#[derive(Debug)]
pub(crate) struct Waiter {
    spins: u32,
    since: Instant,
}

impl Waiter {
    pub(crate) fn new() -> Self {
        Waiter {
            spins: 0,
            since: Instant::now(),
        }
    }

    /// One round of waiting; an error when the run aborted or the wait is stuck.
    pub(crate) fn wait(
        &mut self,
        abort: &Abort,
        what: &dyn Fn() -> String,
    ) -> Result<(), ExecError> {
        self.spins += 1;
        if self.spins < 64 {
            std::hint::spin_loop();
            return Ok(());
        }
        if abort.is_set() {
            return Err(ExecError::Aborted);
        }
        if self.spins % 1024 == 0 && self.since.elapsed() > STUCK_AFTER {
            return Err(ExecError::Stuck(what()));
        }
        std::thread::yield_now();
        Ok(())
    }
}

/// The workload barrier: opens when all `n` threads arrived with the same id.
#[derive(Debug)]
pub(crate) struct IdBarrier {
    n: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
    /// Id each thread waits at (`u32::MAX`: none).
    ids: Vec<AtomicU32>,
    /// Threads whose script is done (a barrier then can never open).
    done: AtomicU32,
    /// Counters snapshot taken by the last arriver at the measured barrier.
    pub(crate) snapshot: Mutex<Option<pagealloc::Counters>>,
}

impl IdBarrier {
    pub(crate) fn new(n: u32) -> Self {
        IdBarrier {
            n,
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            ids: (0..n).map(|_| AtomicU32::new(u32::MAX)).collect(),
            done: AtomicU32::new(0),
            snapshot: Mutex::new(None),
        }
    }

    pub(crate) fn mark_done(&self) {
        self.done.fetch_add(1, Ordering::AcqRel);
    }

    /// Waits at barrier `id` as thread `me`. The last arriver runs `on_open` before
    /// releasing the others. Returns when the barrier opened.
    pub(crate) fn wait(
        &self,
        me: usize,
        id: u32,
        abort: &Abort,
        on_open: impl FnOnce(),
    ) -> Result<(), ExecError> {
        let gen = self.generation.load(Ordering::Acquire);
        self.ids[me].store(id, Ordering::Release);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            let ids: Vec<u32> = self.ids.iter().map(|a| a.load(Ordering::Acquire)).collect();
            if ids.iter().any(|&i| i != id) {
                return Err(ExecError::Script(format!(
                    "CPUs wait at different barriers: {ids:?}"
                )));
            }
            on_open();
            self.arrived.store(0, Ordering::Release);
            self.generation.fetch_add(1, Ordering::AcqRel);
            return Ok(());
        }
        let mut w = Waiter::new();
        while self.generation.load(Ordering::Acquire) == gen {
            // A thread that finished after opening this barrier bumped the generation
            // first: look again before calling it a script bug.
            if self.done.load(Ordering::Acquire) > 0
                && self.generation.load(Ordering::Acquire) == gen
            {
                return Err(ExecError::Script(format!(
                    "a CPU finished its script while CPU {me} waits at barrier {id}"
                )));
            }
            w.wait(abort, &|| format!("CPU {me} at barrier {id}"))?;
        }
        Ok(())
    }
}

/// The CPUs this process may run on, in order (sched_getaffinity).
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: 1. `cpu_set_t` is a plain bit array, valid when zeroed; 2. the kernel
    // writes at most `size_of::<cpu_set_t>()` bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: 1. pid 0 is the calling thread; 2. `set` is a valid, writable cpu_set_t of
    // the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        return (0..n).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: 1. `c < CPU_SETSIZE`, inside the set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins the calling thread to host CPU `cpu`.
pub(crate) fn pin_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: 1. a zeroed `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: 1. the caller passes a CPU from `allowed_cpus`, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: 1. pid 0 is the calling thread; 2. `set` is a valid cpu_set_t of that size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A wait queue for tasks that sleep until a condition holds (a socket's `sk_sleep`):
/// a sleeper blocks on a condition variable, so its wait is off the CPU (a futex), and
/// a waker that changed the condition wakes it.
///
/// No lost wakeup: a sleeper registers (`sleepers`), then checks its condition under
/// the mutex before each wait; a waker changes the condition, then reads `sleepers`
/// and, if any, notifies under the same mutex. Both sides order their two steps with
/// `SeqCst`, so either the sleeper sees the change or the waker sees the sleeper.
#[derive(Debug, Default)]
pub(crate) struct WaitQueue {
    sleepers: AtomicU32,
    lock: Mutex<()>,
    cv: Condvar,
}

/// How long one sleep lasts before the sleeper looks at the abort flag and the
/// deadline again.
const SLEEP_SLICE: Duration = Duration::from_millis(20);

impl WaitQueue {
    /// Sleeps until `ready()` holds; an error when the run aborted or the wait is stuck.
    pub(crate) fn sleep_until(
        &self,
        ready: impl Fn() -> bool,
        abort: &Abort,
        what: &dyn Fn() -> String,
    ) -> Result<(), ExecError> {
        let since = Instant::now();
        let mut g = self.lock.lock().expect("wait queue lock");
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        let r = loop {
            if ready() {
                break Ok(());
            }
            if abort.is_set() {
                break Err(ExecError::Aborted);
            }
            if since.elapsed() > STUCK_AFTER {
                break Err(ExecError::Stuck(what()));
            }
            g = self
                .cv
                .wait_timeout(g, SLEEP_SLICE)
                .expect("wait queue lock")
                .0;
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Wakes the sleepers, if any (call after changing their condition).
    pub(crate) fn wake(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().expect("wait queue lock");
            self.cv.notify_all();
        }
    }
}
