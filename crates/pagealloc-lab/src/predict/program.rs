//! The real programs `predict` runs on the live kernel (`pagealloc predict-program`,
//! started by the recorder): each does the same work as the lab workload of the same
//! name, one task pinned to each CPU, and writes when each task's measured window began
//! and ended (`CLOCK_MONOTONIC`, the clock the recorder's tracefs instance stamps events
//! with), its CPU time in the window and its pid or tid, as one JSON object.
//!
//! # Design
//! The faulting programs (`page_fault1`, `parallel_free`, `thp_mix`) fork one process
//! per CPU, as will-it-scale's process mode does (each its own mm: no mmap lock shared
//! between CPUs); a pipe pair is their barrier (each child writes a byte when its
//! prelude is done and waits for the parent's byte), a third pipe carries each child's
//! 56-byte record back (below `PIPE_BUF`: one atomic write). The stream programs
//! (`unix_stream`, `tcp_stream`) are two threads of one process, writer on CPU 0, reader
//! on CPU 1 (both on CPU 0 with one CPU), as lmbench's bw_unix and iperf3 run their two
//! ends.

use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

/// One task's measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskWindow {
    /// Process id (forked children) or thread id (stream threads).
    pub pid: u32,
    /// CPU it was pinned to.
    pub cpu: u32,
    /// `CLOCK_MONOTONIC` at the start of the window, ns.
    pub start_ns: u64,
    /// The same at its end, ns.
    pub end_ns: u64,
    /// CPU time the task used in the window, ns.
    pub cpu_ns: u64,
    /// Time the task waited runnable for a CPU in the window (`run_delay` of
    /// `/proc/thread-self/schedstat`): preempted by other processes, ns; 0 where the
    /// kernel keeps no schedstats.
    #[serde(default)]
    pub wait_ns: u64,
    /// Times the task slept in the window (voluntary context switches, `ru_nvcsw` of
    /// `getrusage(RUSAGE_THREAD)`): the stream programs' ends; 0 for the others.
    #[serde(default)]
    pub sleeps: u64,
    /// Times the task was preempted in the window (involuntary context switches,
    /// `ru_nivcsw`): the stream programs' ends; 0 for the others.
    #[serde(default)]
    pub preempts: u64,
}

/// What a program reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramResult {
    /// The operations done in the measured windows (pages faulted or freed, messages).
    pub ops: u64,
    /// Each task's window.
    pub tasks: Vec<TaskWindow>,
}

/// A program's size: what the lab workload of the same name takes as parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Size {
    /// Pages per loop (faulting programs) or per task's region (`parallel_free`).
    pub pages: u64,
    /// Loops per CPU (faulting programs) or messages (streams).
    pub count: u64,
    /// Bytes per message (streams), order-0 pages per CPU broken first (`thp_mix`).
    pub extra: u64,
}

fn mono_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec owned by this frame; the call writes
    // only into it. No lock: the clocks are per thread or global.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's voluntary (it slept) and involuntary (it was preempted)
/// context switches so far; 0 if unreadable.
fn switches_so_far() -> (u64, u64) {
    // SAFETY: rusage is plain integers, for which all-zero bytes are a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage owned by this frame; the call writes only
    // into it. No lock: RUSAGE_THREAD reads the calling thread's own counters.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } != 0 {
        return (0, 0);
    }
    (u.ru_nvcsw as u64, u.ru_nivcsw as u64)
}

/// The calling thread's time spent runnable but waiting for a CPU (`run_delay`, the
/// second field of `/proc/thread-self/schedstat`), ns; 0 if unreadable.
fn run_delay_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// Reads what a stream task reads at its window's edges once before the window: the
/// first read of `/proc/thread-self/schedstat` (`open` deep in `read_to_string`) faults
/// in a new page of the thread's stack, which would be counted as the program's
/// allocation (the kernel's two order-0 movable pages per run of both streams,
/// `do_anonymous_page` under `__libc_open`, `perf record -g -e kmem:mm_page_alloc`).
fn touch_window_stack() {
    std::hint::black_box((run_delay_ns(), switches_so_far()));
}

fn pin(cpu: u32) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes one bit of it
    // (cpu < 1024 = CPU_SETSIZE, checked by the caller's CPU count); sched_setaffinity
    // reads it for the calling thread only. No lock is involved.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(format!(
            "pinning to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// An anonymous private mapping of `len` bytes, aligned to `align` (a power of two,
/// at least a page), unmapped when dropped.
struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize, align: usize, advice: Option<libc::c_int>) -> Result<Mapping, String> {
        let total = len + align;
        // SAFETY: a fresh anonymous private mapping at an address the kernel picks:
        // it aliases nothing this process uses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        let start = p as usize;
        let aligned = start.next_multiple_of(align);
        // SAFETY: both ranges lie inside the mapping just made and nothing points into
        // them: trimming the unaligned head and the tail leaves [aligned, aligned+len).
        unsafe {
            if aligned > start {
                libc::munmap(p, aligned - start);
            }
            let tail = start + total - (aligned + len);
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
            if let Some(a) = advice {
                libc::madvise(aligned as *mut libc::c_void, len, a);
            }
        }
        Ok(Mapping {
            base: aligned as *mut u8,
            len,
        })
    }

    /// Writes one byte of every page: a page fault each (a THP fault per 2 MiB where
    /// the mapping is advised so).
    fn touch(&mut self) {
        for off in (0..self.len).step_by(PAGE) {
            // SAFETY: off < len: inside the mapping, which this value owns exclusively.
            unsafe { std::ptr::write_volatile(self.base.add(off), 1) };
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: [base, base+len) is this value's mapping; nothing refers to it after
        // the drop.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn pipe() -> Result<(std::fs::File, std::fs::File), String> {
    let mut fds = [0; 2];
    // SAFETY: fds is a writable array of two ints, as pipe(2) requires.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    use std::os::fd::FromRawFd;
    // SAFETY: both descriptors were just created by pipe(2) and are owned by nothing
    // else: each File becomes their only owner.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// Bytes of a child's record: seven little-endian u64 (pid, CPU, start, end, CPU time,
/// operations, wait), below `PIPE_BUF`: one atomic write.
const REC: usize = 56;

/// What one forked task does: its prelude (before the barrier) and its measured work,
/// which returns the operations it did.
type Task = dyn Fn(u32) -> Result<(Box<dyn FnOnce() -> u64>, ()), String>;

/// Forks one process per CPU; each runs `prelude(cpu)`, passes the barrier, then runs
/// the closure the prelude returned inside its measured window.
fn fork_tasks(cpus: u32, prelude: &Task) -> Result<ProgramResult, String> {
    let (ready_r, ready_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    let (res_r, res_w) = pipe()?;
    let mut children = Vec::new();
    for cpu in 0..cpus {
        // SAFETY: this process has one thread (the program runs before any thread is
        // spawned), so the child may run ordinary code; it leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            let code = child(cpu, prelude, &ready_w, &go_r, &res_w);
            // SAFETY: _exit ends the child without running the parent's atexit
            // handlers or flushing its copied buffers.
            unsafe { libc::_exit(code) };
        }
        children.push(pid);
    }
    drop(ready_w);
    drop(res_w);
    let mut ready = ready_r;
    let mut b = vec![0u8; cpus as usize];
    let got = ready.read_exact(&mut b);
    let mut go = go_w;
    // Release every child even if one failed to get ready (it has exited then).
    let _ = go.write_all(&vec![1u8; cpus as usize]);
    drop(go);
    let mut res = res_r;
    let mut out = ProgramResult::default();
    let mut rec = [0u8; REC];
    while res.read_exact(&mut rec).is_ok() {
        let w = |i: usize| u64::from_le_bytes(rec[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        out.tasks.push(TaskWindow {
            pid: w(0) as u32,
            cpu: w(1) as u32,
            start_ns: w(2),
            end_ns: w(3),
            cpu_ns: w(4),
            wait_ns: w(6),
            sleeps: 0,
            preempts: 0,
        });
        out.ops += w(5);
    }
    let mut failed = got.is_err();
    for pid in children {
        let mut status = 0;
        // SAFETY: pid is a child of this process; status is a writable int.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        failed |= !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
    if failed || out.tasks.len() != cpus as usize {
        return Err("a task of the program failed".into());
    }
    Ok(out)
}

fn child(
    cpu: u32,
    prelude: &Task,
    ready: &std::fs::File,
    go: &std::fs::File,
    res: &std::fs::File,
) -> i32 {
    if pin(cpu).is_err() {
        return 1;
    }
    let Ok((work, ())) = prelude(cpu) else {
        return 1;
    };
    let mut ready = ready;
    let mut go = go;
    if ready.write_all(&[1]).is_err() {
        return 1;
    }
    let mut b = [0u8; 1];
    if go.read_exact(&mut b).is_err() {
        return 1;
    }
    // The window holds the work alone: reading schedstat allocates, and the child's
    // first writes to heap pages it shares with its parent take a page each (COW
    // faults, counted as the program's otherwise: 2 per parallel_free task).
    let d0 = run_delay_ns();
    let start = mono_ns();
    let c0 = clock(libc::CLOCK_PROCESS_CPUTIME_ID);
    let ops = work();
    let cpu_ns = clock(libc::CLOCK_PROCESS_CPUTIME_ID).saturating_sub(c0);
    let end = mono_ns();
    let wait_ns = run_delay_ns().saturating_sub(d0);
    // SAFETY: getpid has no preconditions and cannot fail.
    let pid = unsafe { libc::getpid() } as u64;
    let mut rec = [0u8; REC];
    for (i, v) in [pid, u64::from(cpu), start, end, cpu_ns, ops, wait_ns]
        .into_iter()
        .enumerate()
    {
        rec[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    let mut res = res;
    i32::from(res.write_all(&rec).is_err())
}

fn page_fault1(cpus: u32, s: Size) -> Result<ProgramResult, String> {
    let len = s.pages as usize * PAGE;
    let loops = s.count;
    fork_tasks(cpus, &move |_cpu| {
        let work: Box<dyn FnOnce() -> u64> = Box::new(move || {
            for _ in 0..loops {
                match Mapping::new(len, PAGE, None) {
                    Ok(mut m) => m.touch(),
                    Err(_) => return 0,
                }
            }
            loops * (len / PAGE) as u64
        });
        Ok((work, ()))
    })
}

fn parallel_free(cpus: u32, s: Size) -> Result<ProgramResult, String> {
    let len = s.pages as usize * PAGE;
    fork_tasks(cpus, &move |_cpu| {
        let mut m = Mapping::new(len, PAGE, Some(libc::MADV_NOHUGEPAGE))?;
        m.touch();
        let work: Box<dyn FnOnce() -> u64> = Box::new(move || {
            drop(m);
            (len / PAGE) as u64
        });
        Ok((work, ()))
    })
}

fn thp_mix(cpus: u32, s: Size) -> Result<ProgramResult, String> {
    let len = s.pages as usize * PAGE;
    let loops = s.count;
    let brk = s.extra as usize * PAGE;
    let thp_cpus = thp_cpus(cpus);
    fork_tasks(cpus, &move |cpu| {
        // Prelude: split high-order blocks with order-0 faults, then free them.
        if brk > 0 {
            let mut m = Mapping::new(brk, PAGE, Some(libc::MADV_NOHUGEPAGE))?;
            m.touch();
        }
        let advice = if cpu < thp_cpus {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        let work: Box<dyn FnOnce() -> u64> = Box::new(move || {
            for _ in 0..loops {
                match Mapping::new(len, HUGE, Some(advice)) {
                    Ok(mut m) => m.touch(),
                    Err(_) => return 0,
                }
            }
            loops * (len / PAGE) as u64
        });
        Ok((work, ()))
    })
}

/// CPUs of `thp_mix` that fault THPs: half of them, at least one.
pub fn thp_cpus(cpus: u32) -> u32 {
    (cpus / 2).max(1)
}

/// The stream programs' two ends: writer on CPU 0, reader on CPU 1 (CPU 0 too with one
/// CPU). `ends` makes the connected pair.
fn stream<W, R>(cpus: u32, s: Size, ends: (W, R)) -> Result<ProgramResult, String>
where
    W: Write + Send + 'static,
    R: Read + Send + 'static,
{
    let (mut w, mut r) = ends;
    let messages = s.count;
    let bytes = s.extra as usize;
    let reader_cpu = u32::from(cpus > 1);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let b2 = barrier.clone();
    let writer = std::thread::spawn(move || -> Result<TaskWindow, String> {
        pin(0)?;
        let buf = vec![7u8; bytes];
        touch_window_stack();
        b2.wait();
        let start = mono_ns();
        let d0 = run_delay_ns();
        let s0 = switches_so_far();
        let c0 = clock(libc::CLOCK_THREAD_CPUTIME_ID);
        for _ in 0..messages {
            w.write_all(&buf).map_err(|e| format!("write: {e}"))?;
        }
        let cpu_ns = clock(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(c0);
        let wait_ns = run_delay_ns().saturating_sub(d0);
        let s1 = switches_so_far();
        let (sleeps, preempts) = (s1.0.saturating_sub(s0.0), s1.1.saturating_sub(s0.1));
        let end = mono_ns();
        drop(w);
        Ok(TaskWindow {
            pid: gettid(),
            cpu: 0,
            start_ns: start,
            end_ns: end,
            cpu_ns,
            wait_ns,
            sleeps,
            preempts,
        })
    });
    let reader = std::thread::spawn(move || -> Result<TaskWindow, String> {
        pin(reader_cpu)?;
        // Written before the window: a zeroed buffer's pages would be faulted in by the
        // first reads, inside it.
        let mut buf = vec![1u8; bytes.max(PAGE)];
        let want = messages * bytes as u64;
        touch_window_stack();
        barrier.wait();
        let start = mono_ns();
        let d0 = run_delay_ns();
        let s0 = switches_so_far();
        let c0 = clock(libc::CLOCK_THREAD_CPUTIME_ID);
        let mut got = 0u64;
        while got < want {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        let cpu_ns = clock(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(c0);
        let wait_ns = run_delay_ns().saturating_sub(d0);
        let s1 = switches_so_far();
        let (sleeps, preempts) = (s1.0.saturating_sub(s0.0), s1.1.saturating_sub(s0.1));
        let end = mono_ns();
        if got < want {
            return Err(format!("the stream ended after {got} of {want} bytes"));
        }
        Ok(TaskWindow {
            pid: gettid(),
            cpu: reader_cpu,
            start_ns: start,
            end_ns: end,
            cpu_ns,
            wait_ns,
            sleeps,
            preempts,
        })
    });
    let wt = writer
        .join()
        .map_err(|_| "the writer panicked".to_string())??;
    let rt = reader
        .join()
        .map_err(|_| "the reader panicked".to_string())??;
    Ok(ProgramResult {
        ops: messages,
        tasks: vec![wt, rt],
    })
}

fn unix_stream(cpus: u32, s: Size) -> Result<ProgramResult, String> {
    let (a, b) = std::os::unix::net::UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    stream(cpus, s, (a, b))
}

fn tcp_stream(cpus: u32, s: Size) -> Result<ProgramResult, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = l.local_addr().map_err(|e| e.to_string())?;
    let c = std::net::TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let (srv, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
    stream(cpus, s, (c, srv))
}

/// Runs program `name` on `cpus` CPUs at size `s` and writes its result as JSON to
/// `out`.
///
/// # Errors
/// An unknown name, a CPU count the program cannot use, or a failed system call: one
/// line.
pub fn run(name: &str, cpus: u32, s: Size, out: &Path) -> Result<(), String> {
    let online = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    if cpus == 0 || cpus > online.min(1024) {
        return Err(format!("--cpus {cpus}: this machine has CPUs 1..={online}"));
    }
    let r = match name {
        "page_fault1" => page_fault1(cpus, s)?,
        "parallel_free" => parallel_free(cpus, s)?,
        "thp_mix" => thp_mix(cpus, s)?,
        "unix_stream" => unix_stream(cpus, s)?,
        "tcp_stream" => tcp_stream(cpus, s)?,
        _ => return Err(format!("no program {name:?}")),
    };
    let text = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))
}
