//! The kernel side of the twin: the workload in forked processes pinned one per CPU,
//! and a sampler reading `/proc/zoneinfo` every [`SAMPLE_MS`].
//!
//! # Design
//! Workers are processes (as will-it-scale's), forked before the run and blocked on a
//! pipe until the start. They share one anonymous `MAP_SHARED` page with the parent
//! (a private `Shared` struct): a stop flag, per-worker page counters (added every 512 pages, read by
//! the sampler) and error slots. A worker only makes system calls (`sched_setaffinity`,
//! `mmap`, `munmap`, `madvise`, `read`, `sched_yield`, `_exit`) and touches memory: it
//! never allocates, so forking from a process with threads is safe.
//!
//! - `page_fault1` and `bulk`: map N pages (`MADV_NOHUGEPAGE`, so every fault takes one
//!   order-0 page), write one byte per page, unmap, repeat.
//! - `xcpu`: CPUs in pairs; the first touches 512-page chunks of a shared mapping (a
//!   ring of [`RING`] chunks), the second punches each full chunk out
//!   (`MADV_REMOVE`), so the pages are allocated on one CPU and freed on the other.
//!
//! Before the start the sampler watches the idle machine for [`PRE_MS`]; after the
//! stop it keeps sampling for the idle time. `/proc/stat` gives each CPU's idleness in
//! both windows, `/proc/vmstat` which zone the pages came from (`pgalloc_*`) and
//! whether kswapd reclaimed meanwhile.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pagealloc::os::zoneinfo::KernelZoneinfo;
use serde::Serialize;

use super::{Pcp, Sample, Trajectory, TwinError, TwinOptions, TwinWorkload, SAMPLE_MS};

/// Chunks in an `xcpu` pair's ring.
pub const RING: usize = 8;
/// Pages a worker touches between two updates of its counter.
const COUNT_STEP: u64 = 512;
/// Most workers (CPUs) one run can have.
const MAX_WORKERS: usize = 256;
/// The window watched before the start.
pub const PRE_MS: u64 = 1000;
const PAGE: usize = 4096;

const EMPTY: u32 = 0;
const FULL: u32 = 1;

/// The page shared between the parent and its workers.
#[repr(C)]
struct Shared {
    stop: AtomicU32,
    ready: AtomicU32,
    /// errno of a worker that failed (pinning, mmap), else 0.
    err: [AtomicI32; MAX_WORKERS],
    /// Pages allocated (touched) by each worker.
    pages: [AtomicU64; MAX_WORKERS],
    /// xcpu: the producer of pair `p` has exited.
    done: [AtomicU32; MAX_WORKERS],
    /// xcpu: chunk states, `RING` per pair.
    ring: [AtomicU32; MAX_WORKERS * RING],
}

/// What the machine was doing before the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Before {
    /// Pages on each CPU's lists of the sampled zone at the start (the last sample
    /// before it).
    pub count: Vec<i64>,
    /// Each CPU's `high` then.
    pub high: Vec<i64>,
    /// How much `count` moved during the window before the start (max − min): other
    /// work allocating and freeing on that CPU.
    pub count_moved: Vec<i64>,
    /// Idle share of each CPU in the window before the start, %.
    pub idle_pct: Vec<f64>,
    /// Idle share of each CPU during the idle time after the run, %.
    pub idle_after_pct: Vec<f64>,
    /// Lowest `count` seen during the run: pages the workload never took (parked on
    /// lists it does not use), which raise the floor of `count`.
    pub run_floor: Vec<i64>,
}

/// The kernel run.
#[derive(Clone, Debug)]
pub struct KernelRun {
    /// The sampled zone's node id.
    pub zone_node: usize,
    /// The sampled zone's name.
    pub zone_name: String,
    /// Its trajectory.
    pub kernel: Trajectory,
    /// Pages per second of each CPU's worker (xcpu: of the pair, on both CPUs).
    pub rates: Vec<f64>,
    /// zoneinfo at the start.
    pub start_zoneinfo: KernelZoneinfo,
    /// Free pages of every populated zone at the start: (node, name, free).
    pub start_free: Vec<(usize, String, u64)>,
    /// The machine before and around the run.
    pub before: Before,
    /// Things the reader should know.
    pub notes: Vec<String>,
}

impl KernelRun {
    /// Pages to park on each CPU of pagealloc before its run: what the kernel had
    /// before the run and never gave to the workload.
    pub fn parked_floor(&self) -> Vec<u64> {
        self.before
            .count
            .iter()
            .zip(&self.before.run_floor)
            .map(|(&b, &f)| b.min(f).max(0) as u64)
            .collect()
    }
}

/// One raw sample: every populated zone's pagesets for the run's CPUs.
struct Raw {
    t: f64,
    idle: bool,
    zones: Vec<(usize, String, Vec<Pcp>, u64)>,
    pages: Vec<u64>,
}

fn snapshot(cpus: &[usize]) -> Result<KernelZoneinfo, TwinError> {
    super::host::read_zoneinfo(std::path::Path::new(pagealloc::os::zoneinfo::PROC_ZONEINFO))
        .and_then(|z| {
            for c in cpus {
                if z.populated().next().and_then(|z| z.pageset(*c)).is_none() {
                    return Err(TwinError::Unsupported(format!(
                        "/proc/zoneinfo shows no pageset for CPU {c}"
                    )));
                }
            }
            Ok(z)
        })
}

fn raw(z: &KernelZoneinfo, cpus: &[usize], t: f64, idle: bool, pages: Vec<u64>) -> Raw {
    Raw {
        t,
        idle,
        zones: z
            .populated()
            .map(|zone| {
                let pcp = cpus
                    .iter()
                    .map(|&c| {
                        zone.pageset(c).map_or(Pcp::default(), |p| Pcp {
                            count: p.count,
                            high: p.high,
                        })
                    })
                    .collect();
                (zone.node, zone.name.clone(), pcp, zone.free)
            })
            .collect(),
        pages,
    }
}

/// Per CPU (busy jiffies, all jiffies) from `/proc/stat`.
fn cpu_times() -> Vec<(usize, u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let cpu: usize = w.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = w.take(8).filter_map(|x| x.parse().ok()).collect();
            if v.len() < 5 {
                return None;
            }
            let total: u64 = v.iter().sum();
            let idle = v[3] + v[4];
            Some((cpu, total - idle, total))
        })
        .collect()
}

fn idle_pct(a: &[(usize, u64, u64)], b: &[(usize, u64, u64)], cpus: &[usize]) -> Vec<f64> {
    cpus.iter()
        .map(|c| {
            let x = a.iter().find(|t| t.0 == *c);
            let y = b.iter().find(|t| t.0 == *c);
            match (x, y) {
                (Some(x), Some(y)) if y.2 > x.2 => {
                    100.0 * (1.0 - (y.1 - x.1) as f64 / (y.2 - x.2) as f64)
                }
                _ => f64::NAN,
            }
        })
        .collect()
}

fn vmstat() -> Vec<(String, u64)> {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

fn vm_delta(a: &[(String, u64)], b: &[(String, u64)], key: &str) -> u64 {
    let get = |s: &[(String, u64)]| s.iter().find(|(k, _)| k == key).map_or(0, |(_, v)| *v);
    get(b).saturating_sub(get(a))
}

/// An anonymous mapping of `bytes`, shared with children when `shared`.
fn map(bytes: usize, shared: bool) -> Result<*mut u8, TwinError> {
    let flags = libc::MAP_ANONYMOUS
        | if shared {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        };
    // SAFETY: 1. a fresh anonymous mapping at an address the kernel picks cannot alias
    // existing memory; 2. the result is checked before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(TwinError::Failed(format!(
            "mmap of {bytes} bytes: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: 1. [p, p + bytes) is the mapping just made; the advice only sets its
    // huge-page policy (one order-0 page per fault); failure (no THP) is harmless.
    unsafe { libc::madvise(p, bytes, libc::MADV_NOHUGEPAGE) };
    Ok(p.cast())
}

/// The worker processes and their shared state; dropping kills what still runs.
struct Workers {
    shared: *mut Shared,
    pids: Vec<libc::pid_t>,
    go_fd: libc::c_int,
    rings: Vec<(*mut u8, usize)>,
}

impl Workers {
    fn shared(&self) -> &Shared {
        // SAFETY: 1. `shared` points to a live MAP_SHARED mapping of at least
        // size_of::<Shared>() bytes, zero-initialised (a valid all-atomics value), unmapped
        // only in Drop; 2. every field is an atomic, so the children's concurrent writes
        // are fine.
        unsafe { &*self.shared }
    }

    fn pages(&self, n: usize) -> Vec<u64> {
        (0..n)
            .map(|i| self.shared().pages[i].load(Ordering::Relaxed))
            .collect()
    }

    fn reap(&mut self) -> Result<(), TwinError> {
        let mut bad = None;
        for (i, pid) in self.pids.drain(..).enumerate() {
            let mut status = 0;
            // SAFETY: 1. `pid` is a child of this process not yet waited for; 2. `status`
            // is a writable int.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            if !ok && bad.is_none() {
                // SAFETY: see `shared` (the child is gone: nothing writes any more).
                let errno = unsafe { &*self.shared }.err[i].load(Ordering::Relaxed);
                bad = Some((i, errno, status));
            }
        }
        match bad {
            None => Ok(()),
            Some((i, errno, status)) => Err(worker_error(i, errno, status)),
        }
    }
}

fn worker_error(i: usize, errno: i32, status: i32) -> TwinError {
    let e = std::io::Error::from_raw_os_error(errno);
    match errno {
        libc::EPERM | libc::EINVAL if errno != 0 => {
            TwinError::Denied(format!("worker {i} cannot pin itself to its CPU: {e}"))
        }
        0 => TwinError::Failed(format!("worker {i} died (wait status {status:#x})")),
        _ => TwinError::Failed(format!("worker {i} failed: {e}")),
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: 1. `pid` is our child, not yet reaped (so the id is not reused).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
        // SAFETY: 1. the fd is ours, closed once.
        unsafe { libc::close(self.go_fd) };
        for &(p, len) in &self.rings {
            // SAFETY: 1. a mapping made by `map` and not unmapped elsewhere; the
            // children that used it have exited.
            unsafe { libc::munmap(p.cast(), len) };
        }
        // SAFETY: 1. as above, for the shared control page.
        unsafe { libc::munmap(self.shared.cast(), std::mem::size_of::<Shared>()) };
    }
}

/// What one child does. Runs after `fork`: system calls and memory writes only.
#[derive(Clone, Copy)]
enum Role {
    /// page_fault1 / bulk: map, touch, unmap `pages` pages.
    Loop { pages: usize },
    /// xcpu producer of pair `pair`.
    Produce { pair: usize, ring: *mut u8 },
    /// xcpu consumer of pair `pair`.
    Consume { pair: usize, ring: *mut u8 },
}

fn pin_self(cpu: usize) -> i32 {
    // SAFETY: 1. a zeroed `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: 1. `cpu` is below CPU_SETSIZE (checked by the caller via allowed_cpus).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: 1. pid 0 is this process; 2. `set` is a valid cpu_set_t of that size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        0
    } else {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM)
    }
}

/// The body of worker `i` (never returns).
///
/// # Safety
/// Call only in a freshly forked child; `sh` is the shared control page and every
/// ring pointer a live shared mapping of `RING` chunks of `chunk` pages.
unsafe fn child(
    i: usize,
    cpu: usize,
    role: Role,
    sh: &Shared,
    go_fd: libc::c_int,
    chunk: usize,
) -> ! {
    let e = pin_self(cpu);
    if e != 0 {
        sh.err[i].store(e, Ordering::Relaxed);
        // SAFETY: 1. _exit ends this child without running the parent's destructors.
        unsafe { libc::_exit(3) };
    }
    sh.ready.fetch_add(1, Ordering::Release);
    let mut b = 0u8;
    // SAFETY: 1. `go_fd` is the read end of the start pipe; `b` is a 1-byte buffer.
    if unsafe { libc::read(go_fd, (&raw mut b).cast(), 1) } != 1 {
        // SAFETY: as above.
        unsafe { libc::_exit(4) };
    }
    let stop = || sh.stop.load(Ordering::Relaxed) != 0;
    match role {
        Role::Loop { pages } => {
            // `twin::run` bounds `pages` by the machine's memory; a product that does not
            // fit would map less than the loop touches.
            let Some(bytes) = pages.checked_mul(PAGE) else {
                // SAFETY: 1. as above.
                unsafe { libc::_exit(5) }
            };
            while !stop() {
                // SAFETY: 1. a fresh private anonymous mapping; checked below.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        bytes,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                if p == libc::MAP_FAILED {
                    sh.err[i].store(libc::ENOMEM, Ordering::Relaxed);
                    // SAFETY: as above.
                    unsafe { libc::_exit(5) };
                }
                // SAFETY: 1. [p, p + bytes) is the mapping just made; the advice only
                // sets its huge-page policy.
                unsafe { libc::madvise(p, bytes, libc::MADV_NOHUGEPAGE) };
                let base = p.cast::<u8>();
                let mut since = 0;
                for pg in 0..pages {
                    // SAFETY: 1. pg * PAGE < bytes: inside the private mapping, which
                    // nothing else references.
                    unsafe { base.add(pg * PAGE).write_volatile(1) };
                    since += 1;
                    if since == COUNT_STEP {
                        sh.pages[i].fetch_add(since, Ordering::Relaxed);
                        since = 0;
                    }
                }
                sh.pages[i].fetch_add(since, Ordering::Relaxed);
                // SAFETY: 1. the whole mapping made above, not used afterwards.
                unsafe { libc::munmap(p, bytes) };
            }
        }
        Role::Produce { pair, ring } => {
            let mut k = 0;
            while !stop() {
                let st = &sh.ring[pair * RING + k];
                while st.load(Ordering::Acquire) != EMPTY {
                    if stop() {
                        sh.done[pair].store(1, Ordering::Release);
                        // SAFETY: as above.
                        unsafe { libc::_exit(0) };
                    }
                    // SAFETY: 1. no arguments, no memory.
                    unsafe { libc::sched_yield() };
                }
                for pg in 0..chunk {
                    // SAFETY: 1. chunk k of the ring, inside the shared mapping; the
                    // consumer does not touch it while it is EMPTY.
                    unsafe { ring.add((k * chunk + pg) * PAGE).write_volatile(1) };
                }
                sh.pages[i].fetch_add(chunk as u64, Ordering::Relaxed);
                st.store(FULL, Ordering::Release);
                k = (k + 1) % RING;
            }
            sh.done[pair].store(1, Ordering::Release);
        }
        Role::Consume { pair, ring } => {
            let mut k = 0;
            loop {
                let st = &sh.ring[pair * RING + k];
                if st.load(Ordering::Acquire) == FULL {
                    // SAFETY: 1. chunk k of the shared ring; the producer does not touch
                    // it while it is FULL; MADV_REMOVE frees its pages (on this CPU).
                    unsafe {
                        libc::madvise(
                            ring.add(k * chunk * PAGE).cast(),
                            chunk * PAGE,
                            libc::MADV_REMOVE,
                        )
                    };
                    sh.pages[i].fetch_add(chunk as u64, Ordering::Relaxed);
                    st.store(EMPTY, Ordering::Release);
                    k = (k + 1) % RING;
                } else if sh.done[pair].load(Ordering::Acquire) != 0 {
                    break;
                } else {
                    // SAFETY: 1. no arguments, no memory.
                    unsafe { libc::sched_yield() };
                }
            }
        }
    }
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}

fn spawn(w: TwinWorkload, cpus: &[usize], pages: usize) -> Result<Workers, TwinError> {
    if cpus.len() > MAX_WORKERS {
        return Err(TwinError::Usage(format!(
            "at most {MAX_WORKERS} CPUs per twin run, not {}",
            cpus.len()
        )));
    }
    let shared = map(std::mem::size_of::<Shared>(), true)?.cast::<Shared>();
    let mut fds = [0; 2];
    // SAFETY: 1. `fds` is a writable array of two ints.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(TwinError::Failed(format!(
            "pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    let mut ws = Workers {
        shared,
        pids: Vec::new(),
        go_fd: fds[1],
        rings: Vec::new(),
    };
    let chunk = pages;
    let mut roles = Vec::new();
    for (i, _) in cpus.iter().enumerate() {
        roles.push(match w {
            TwinWorkload::PageFault1 | TwinWorkload::Bulk => Role::Loop { pages },
            TwinWorkload::Xcpu => {
                let pair = i / 2;
                if i % 2 == 0 {
                    let len = RING * chunk * PAGE;
                    ws.rings.push((map(len, true)?, len));
                }
                let ring = ws.rings[pair].0;
                if i % 2 == 0 {
                    Role::Produce { pair, ring }
                } else {
                    Role::Consume { pair, ring }
                }
            }
        });
    }
    for (i, (&cpu, &role)) in cpus.iter().zip(&roles).enumerate() {
        // SAFETY: 1. the child runs only `child`, which makes system calls and writes
        // shared atomics and its own mappings: nothing that needs another thread's lock.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            drop(ws);
            // SAFETY: 1. the read end is ours, closed once.
            unsafe { libc::close(fds[0]) };
            return Err(TwinError::Failed(format!("fork: {e}")));
        }
        if pid == 0 {
            // SAFETY: 1. freshly forked child; `shared` and the rings are live shared
            // mappings inherited from the parent.
            unsafe { child(i, cpu, role, &*shared, fds[0], chunk) };
        }
        ws.pids.push(pid);
    }
    // SAFETY: 1. the read end is ours (the children hold their own copies).
    unsafe { libc::close(fds[0]) };
    // Wait until every worker pinned itself (or one failed).
    let t0 = Instant::now();
    while ws.shared().ready.load(Ordering::Acquire) < cpus.len() as u32 {
        if let Some(i) = (0..cpus.len()).find(|&i| ws.shared().err[i].load(Ordering::Relaxed) != 0)
        {
            let e = ws.shared().err[i].load(Ordering::Relaxed);
            return Err(match e {
                libc::EPERM | libc::EINVAL => TwinError::Denied(format!(
                    "cannot pin a process to CPU {}: {}",
                    cpus[i],
                    std::io::Error::from_raw_os_error(e)
                )),
                _ => worker_error(i, e, 0),
            });
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(TwinError::Failed(
                "workers did not start within 10 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(ws)
}

/// Sleeps until `deadline` (returns at once if it passed).
fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
}

/// Runs the workload on the kernel and samples it.
///
/// # Errors
/// [`TwinError`] for a zoneinfo that cannot be read, a CPU that cannot be pinned, a
/// worker that fails.
pub fn run(
    opts: &TwinOptions,
    cpus: &[usize],
    first_node: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<KernelRun, TwinError> {
    let period = Duration::from_millis(SAMPLE_MS);
    snapshot(cpus)?;
    let mut ws = spawn(opts.workload, cpus, opts.pages() as usize)?;
    let n = cpus.len();
    let mut raws: Vec<Raw> = Vec::new();
    // The window before the start: workers are pinned and blocked.
    progress(&format!(
        "watching the machine for {PRE_MS} ms before the start"
    ));
    let st0 = cpu_times();
    let pre = Instant::now();
    let mut next = pre;
    let mut pre_raw = Vec::new();
    while next < pre + Duration::from_millis(PRE_MS) {
        let z = snapshot(cpus)?;
        pre_raw.push(raw(&z, cpus, 0.0, false, vec![0; n]));
        next += period;
        sleep_until(next);
    }
    let st1 = cpu_times();
    let zi_start = snapshot(cpus)?;
    let vm0 = vmstat();
    progress(&format!(
        "running {} on the kernel for {} s",
        opts.workload, opts.seconds
    ));
    let go = vec![1u8; n];
    // SAFETY: 1. `go_fd` is the write end of the pipe; `go` holds n bytes.
    let wrote = unsafe { libc::write(ws.go_fd, go.as_ptr().cast(), n) };
    if wrote != n as isize {
        return Err(TwinError::Failed(format!(
            "start pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    let t0 = Instant::now();
    let run_end = t0 + Duration::from_secs_f64(opts.seconds);
    let mut next = t0;
    while next < run_end {
        let t = t0.elapsed().as_secs_f64();
        let z = snapshot(cpus)?;
        raws.push(raw(&z, cpus, t, false, ws.pages(n)));
        next += period;
        sleep_until(next);
    }
    ws.shared().stop.store(1, Ordering::Relaxed);
    let run_seconds = t0.elapsed().as_secs_f64();
    let done_pages = ws.pages(n);
    ws.reap()?;
    let vm1 = vmstat();
    let zi_end = snapshot(cpus)?;
    progress(&format!(
        "sampling the idle kernel for {} s",
        opts.idle_seconds
    ));
    let st2 = cpu_times();
    let idle_end = Instant::now() + Duration::from_secs_f64(opts.idle_seconds);
    let mut next = Instant::now();
    while next < idle_end {
        let t = t0.elapsed().as_secs_f64();
        let z = snapshot(cpus)?;
        raws.push(raw(&z, cpus, t, true, done_pages.clone()));
        next += period;
        sleep_until(next);
    }
    let st3 = cpu_times();
    drop(ws);

    // Which zone the pages came from: the largest pgalloc_* delta.
    let names = ["DMA", "DMA32", "Normal", "Movable"];
    let zone_name = names
        .iter()
        .max_by_key(|nm| vm_delta(&vm0, &vm1, &format!("pgalloc_{}", nm.to_lowercase())))
        .map(|s| (*s).to_owned())
        .unwrap_or_else(|| "Normal".into());
    let zone_node = if zi_start
        .zone(first_node, &zone_name)
        .is_some_and(|z| z.populated())
    {
        first_node
    } else {
        zi_start
            .populated()
            .find(|z| z.name == zone_name)
            .map_or(0, |z| z.node)
    };
    let pick = |r: &Raw| -> Vec<Pcp> {
        r.zones
            .iter()
            .find(|(nd, nm, _, _)| *nd == zone_node && *nm == zone_name)
            .map_or_else(|| vec![Pcp::default(); n], |z| z.2.clone())
    };
    let samples: Vec<Sample> = raws
        .iter()
        .map(|r| Sample {
            t: r.t,
            idle: r.idle,
            pcp: pick(r),
            pages: r.pages.clone(),
        })
        .collect();
    let pre_pcp: Vec<Vec<Pcp>> = pre_raw.iter().map(pick).collect();
    let last_pre = pre_pcp
        .last()
        .cloned()
        .unwrap_or_else(|| vec![Pcp::default(); n]);
    let kzone = zi_start
        .zone(zone_node, &zone_name)
        .ok_or_else(|| TwinError::Failed(format!("zone {zone_name} vanished")))?;
    let sizing: Vec<(i64, i64, i64)> = cpus
        .iter()
        .map(|&c| {
            kzone.pageset(c).map_or((0, 0, 0), |p| {
                (p.batch, p.high_min.unwrap_or(0), p.high_max.unwrap_or(0))
            })
        })
        .collect();
    let run_floor: Vec<i64> = (0..n)
        .map(|i| {
            samples
                .iter()
                .filter(|s| !s.idle)
                .map(|s| s.pcp[i].count)
                .min()
                .unwrap_or(0)
        })
        .collect();
    let before = Before {
        count: last_pre.iter().map(|p| p.count).collect(),
        high: last_pre.iter().map(|p| p.high).collect(),
        count_moved: (0..n)
            .map(|i| {
                let it = pre_pcp.iter().map(|v| v[i].count);
                it.clone().max().unwrap_or(0) - it.min().unwrap_or(0)
            })
            .collect(),
        idle_pct: idle_pct(&st0, &st1, cpus),
        idle_after_pct: idle_pct(&st2, &st3, cpus),
        run_floor,
    };
    let rates: Vec<f64> = match opts.workload {
        TwinWorkload::Xcpu => (0..n)
            .map(|i| done_pages[i / 2 * 2] as f64 / run_seconds)
            .collect(),
        _ => done_pages.iter().map(|&p| p as f64 / run_seconds).collect(),
    };
    let mut notes = Vec::new();
    for (i, &c) in cpus.iter().enumerate() {
        if before.idle_pct[i] < 90.0 {
            notes.push(format!(
                "busy machine: CPU {c} was {:.0} % idle before the run and {:.0} % during the idle time after it (other processes run there)",
                before.idle_pct[i], before.idle_after_pct[i]
            ));
        }
        if before.count[i] > 0 {
            notes.push(format!(
                "CPU {c} had {} pages on its {zone_name} lists before the run ({} moved during the {PRE_MS} ms watched); the lowest count during the run was {}: {} pages the workload never took{}",
                before.count[i],
                before.count_moved[i],
                before.run_floor[i],
                before.count[i].min(before.run_floor[i]).max(0),
                if opts.parked { " (pagealloc starts with them parked on its unmovable list)" } else { "" }
            ));
        }
    }
    let reclaimed = vm_delta(&vm0, &vm1, "pgsteal_kswapd") + vm_delta(&vm0, &vm1, "pgsteal_direct");
    if reclaimed > 0 {
        notes.push(format!(
            "the kernel reclaimed {reclaimed} pages during the run (kswapd or direct reclaim); pagealloc does not reclaim"
        ));
    }
    for (a, b) in zi_start.populated().zip(zi_end.populated()) {
        if a.managed != b.managed {
            notes.push(format!(
                "node {} {} managed pages changed during the run: {} -> {} (memory balloon or hotplug)",
                a.node, a.name, a.managed, b.managed
            ));
        }
    }
    Ok(KernelRun {
        zone_node,
        zone_name,
        kernel: Trajectory {
            sizing,
            run_seconds,
            samples,
        },
        rates,
        start_free: zi_start
            .populated()
            .map(|z| (z.node, z.name.clone(), z.free))
            .collect(),
        start_zoneinfo: zi_start,
        before,
        notes,
    })
}
