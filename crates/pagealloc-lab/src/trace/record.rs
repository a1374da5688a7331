//! `pagealloc trace record`: the kernel's allocation stream while a command runs.
//!
//! # Design
//! The recorder reads tracefs itself rather than running `perf record`: a private
//! tracefs instance (`instances/pagealloc-<pid>`) gets its own per-CPU ring buffers, so
//! the recording neither disturbs nor is disturbed by another tracer on the machine, and
//! its per-CPU `stats` say exactly what was lost. One thread per CPU reads that CPU's
//! `trace_pipe_raw` (the ring buffer's own binary pages, no text formatting in the
//! kernel) while the command runs; the events are decoded with the field offsets the
//! kernel publishes in each event's `format` file, so the layout is the running
//! kernel's, not an assumption. Overwrite is off: a full buffer drops new events and
//! counts them, and any count above zero (or a page flagged with missed events) makes
//! the recorder refuse the trace and name the option that enlarges the buffer.
//!
//! `PAGEALLOC_TRACEFS` names another tracefs mount point (the tests point it at a
//! directory without one).

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::format::{Event, EventKind, Header, Losses, Snapshot, VERSION};
use super::TraceError;
use crate::twin::layout::{HostCpuDesc, VmSysctls};

/// The default tracefs mount point.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Per-CPU ring buffer size by default, KiB.
pub const DEFAULT_BUFFER_KB: u64 = 128 * 1024;

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// Per-CPU ring buffer, KiB.
    pub buffer_kb: u64,
    /// Record lock contention and sched_switch too (the page events are always recorded).
    pub all_events: bool,
    /// Record `sched:sched_waking` too (who wakes whom, on which CPU): off by default, so
    /// that traces recorded without it stay readable by readers that predate it.
    pub wakeups: bool,
}

/// The tracefs mount point: `PAGEALLOC_TRACEFS` or [`TRACEFS`].
pub fn tracefs_root() -> PathBuf {
    std::env::var_os("PAGEALLOC_TRACEFS").map_or_else(|| PathBuf::from(TRACEFS), PathBuf::from)
}

/// Byte offsets of an event's fields, from its `format` file.
#[derive(Clone, Debug, Default)]
struct Fields(HashMap<String, (usize, usize)>);

impl Fields {
    fn parse(text: &str) -> Fields {
        let mut m = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix("field:") else {
                continue;
            };
            let mut parts = rest.split(';');
            let decl = parts.next().unwrap_or("");
            let name = decl
                .split_whitespace()
                .last()
                .unwrap_or("")
                .split('[')
                .next()
                .unwrap_or("")
                .to_owned();
            let mut off = None;
            let mut size = None;
            for p in parts {
                let p = p.trim();
                if let Some(v) = p.strip_prefix("offset:") {
                    off = v.parse().ok();
                } else if let Some(v) = p.strip_prefix("size:") {
                    size = v.parse().ok();
                }
            }
            if let (Some(o), Some(s)) = (off, size) {
                m.insert(name, (o, s));
            }
        }
        Fields(m)
    }

    fn get(&self, data: &[u8], name: &str) -> Option<u64> {
        let &(o, s) = self.0.get(name)?;
        let b = data.get(o..o + s)?;
        Some(match s {
            1 => u64::from(b[0]),
            2 => u64::from(u16::from_le_bytes([b[0], b[1]])),
            4 => u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            8 => u64::from_le_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// The events of the running kernel: id → (kind, fields).
type Decoders = HashMap<u16, (EventKind, Fields)>;

fn read_text(p: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(p).map_err(|e| TraceError::Failed(format!("{}: {e}", p.display())))
}

fn write_text(p: &Path, s: &str) -> Result<(), TraceError> {
    std::fs::write(p, s)
        .map_err(|e| TraceError::Failed(format!("writing {s:?} to {}: {e}", p.display())))
}

/// Checks root and tracefs, or says in one line why recording cannot work here.
///
/// # Errors
/// [`TraceError::Unsupported`].
pub fn check_host(root: &Path) -> Result<(), TraceError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let probe = root.join("events/kmem/mm_page_alloc/format");
    if !probe.exists() && euid == 0 && root == Path::new(TRACEFS) && root.is_dir() {
        // tracefs not mounted yet: mount it (as `mount -t tracefs nodev` would).
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status();
    }
    if !probe.exists() {
        return Err(TraceError::Unsupported(format!(
            "no tracefs with the kmem events at {} (as root: mount -t tracefs nodev {TRACEFS}; \
             another mount point: PAGEALLOC_TRACEFS=DIR)",
            root.display()
        )));
    }
    if euid != 0 {
        return Err(TraceError::Unsupported(
            "recording the kernel's allocations needs root (tracefs instances and events)".into(),
        ));
    }
    Ok(())
}

fn losses(inst: &Path, cpu: u32, missed_pages: u64) -> Losses {
    let text =
        std::fs::read_to_string(inst.join(format!("per_cpu/cpu{cpu}/stats"))).unwrap_or_default();
    let get = |key: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|v| v.trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    Losses {
        cpu,
        overrun: get("overrun:"),
        commit_overrun: get("commit overrun:"),
        dropped: get("dropped events:"),
        missed_pages,
    }
}

/// A tracefs instance, removed when dropped.
struct Instance {
    path: PathBuf,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path.join("tracing_on"), "0");
        let _ = std::fs::write(self.path.join("events/enable"), "0");
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// One CPU's raw pages.
struct CpuPages {
    cpu: u32,
    pages: Vec<Vec<u8>>,
}

fn reader(path: PathBuf, cpu: u32, stop: Arc<AtomicBool>) -> Result<CpuPages, String> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut pages = Vec::new();
    let mut buf = vec![0u8; 4096];
    let mut idle_after_stop = 0;
    loop {
        match f.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => {
                pages.push(buf[..n].to_vec());
                idle_after_stop = 0;
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
        if stop.load(Ordering::Acquire) {
            idle_after_stop += 1;
            if idle_after_stop >= 3 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(CpuPages { cpu, pages })
}

/// Decodes one ring-buffer page; returns the events and whether the page says events
/// were missed before it.
fn decode_page(page: &[u8], cpu: u32, dec: &Decoders, out: &mut Vec<Event>) -> bool {
    const MISSED_EVENTS: u64 = 1 << 31;
    const MISSED_STORED: u64 = 1 << 30;
    if page.len() < 16 {
        return false;
    }
    let mut ts = u64::from_le_bytes(page[0..8].try_into().unwrap_or([0; 8]));
    let commit = u64::from_le_bytes(page[8..16].try_into().unwrap_or([0; 8]));
    let missed = commit & (MISSED_EVENTS | MISSED_STORED) != 0;
    let size = (commit & 0xF_FFFF) as usize;
    let data = &page[16..(16 + size).min(page.len())];
    let u32_at = |i: usize| {
        data.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut i = 0;
    while i + 4 <= data.len() {
        let Some(h) = u32_at(i) else { break };
        let type_len = h & 0x1F;
        let delta = u64::from(h >> 5);
        match type_len {
            29 => {
                // Padding: a null one (delta 0) ends the page.
                if delta == 0 {
                    break;
                }
                let Some(len) = u32_at(i + 4) else { break };
                i += 4 + len as usize;
            }
            30 => {
                let Some(a) = u32_at(i + 4) else { break };
                ts += (u64::from(a) << 27) | delta;
                i += 8;
            }
            31 => {
                let Some(a) = u32_at(i + 4) else { break };
                let abs = (u64::from(a) << 27) | delta;
                ts = abs | (ts & !((1u64 << 59) - 1));
                i += 8;
            }
            _ => {
                let (start, len) = if type_len == 0 {
                    let Some(len) = u32_at(i + 4) else { break };
                    (i + 8, (len as usize).saturating_sub(4))
                } else {
                    (i + 4, type_len as usize * 4)
                };
                ts += delta;
                let Some(payload) = data.get(start..start + len) else {
                    break;
                };
                i = start + len;
                let id = u16::from_le_bytes([payload[0], payload[1]]);
                let Some((kind, f)) = dec.get(&id) else {
                    continue;
                };
                let g = |n: &str| f.get(payload, n).unwrap_or(0);
                let mut e = Event {
                    ts,
                    cpu,
                    kind: *kind,
                    pid: g("common_pid") as u32,
                    flags: g("common_flags") as u8,
                    pfn: 0,
                    order: 0,
                    mt: -1,
                    aux: 0,
                };
                match kind {
                    EventKind::LockBegin => {
                        e.pfn = g("lock_addr");
                        e.aux = g("flags");
                    }
                    EventKind::LockEnd => {
                        e.pfn = g("lock_addr");
                        e.aux = g("ret");
                    }
                    EventKind::Waking => {
                        e.pfn = g("pid");
                        e.aux = g("target_cpu");
                    }
                    EventKind::Vmstat => e.pfn = g("function"),
                    EventKind::Switch => {
                        e.pfn = g("prev_pid");
                        // The task's state as it left (0: still runnable, preempted)
                        // in the high half.
                        e.aux =
                            (g("next_pid") & 0xffff_ffff) | ((g("prev_state") & 0xffff_ffff) << 32);
                    }
                    _ => {
                        e.pfn = g("pfn");
                        e.order = g("order") as u8;
                        e.mt = f
                            .get(payload, "migratetype")
                            .map_or(-1, |v| v as u32 as i32 as i8);
                        e.aux = match kind {
                            EventKind::Alloc => g("gfp_flags"),
                            EventKind::ZoneLocked => g("percpu_refill"),
                            _ => 0,
                        };
                    }
                }
                out.push(e);
            }
        }
    }
    missed
}

/// The address of kernel text symbol `name` (`/proc/kallsyms`; `None` where it is
/// missing or hidden, `kptr_restrict` showing zeros).
fn kernel_symbol(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (addr, _kind, sym) = (f.next()?, f.next()?, f.next()?);
        (sym == name)
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
            .filter(|&a| a != 0)
    })
}

/// `/proc/zoneinfo` (the pagesets' counts), `/proc/pagetypeinfo` and the vm sysctls.
/// The pages that move between the counts' read and the tracer's first or last event
/// have no event: at a recording's start (`counts_last`) the counts are read last,
/// right before the tracer starts, after the slow `pagetypeinfo` (it walks every free
/// list); at its end first. (One thp_mix recording read in the old order, counts
/// first, then `pagetypeinfo` and the readers' start: CPU 0's pageset took 2 517 pages
/// without an event before the trace began; `trace::start::counts` infers them since.)
fn snapshot(counts_last: bool) -> Result<Snapshot, TraceError> {
    let counts = || read_text(Path::new("/proc/zoneinfo"));
    let early = if counts_last { None } else { Some(counts()?) };
    // Root-only; a kernel without it records an empty string.
    let pagetypeinfo = read_text(Path::new("/proc/pagetypeinfo")).unwrap_or_default();
    let vm = VmSysctls::read().map_err(|e| TraceError::Failed(e.to_string()))?;
    Ok(Snapshot {
        zoneinfo: match early {
            Some(z) => z,
            None => counts()?,
        },
        pagetypeinfo,
        vm,
    })
}

/// Records `opts.command` and returns the header and the events, time-ordered.
/// `progress` gets one line per phase.
///
/// # Errors
/// [`TraceError::Unsupported`] without root or tracefs, [`TraceError::Lost`] when the
/// tracer lost events, [`TraceError::Failed`] otherwise.
pub fn record(
    opts: &RecordOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<(Header, Vec<Event>), TraceError> {
    if opts.command.is_empty() {
        return Err(TraceError::Usage(
            "no command to record (pagealloc trace record -- CMD ARGS…)".into(),
        ));
    }
    if !(64..=(16 << 20)).contains(&opts.buffer_kb) {
        return Err(TraceError::Usage(format!(
            "--buffer-kb {} out of range (64 ..= 16777216)",
            opts.buffer_kb
        )));
    }
    let root = tracefs_root();
    check_host(&root)?;
    let topo = pagealloc::os::sysfs::HostTopology::read()
        .map_err(|e| TraceError::Failed(format!("{e} (the CPU topology)")))?;
    let cpus = HostCpuDesc::from_topology(&topo);
    let inst_path = root.join(format!("instances/pagealloc-{}", std::process::id()));
    std::fs::create_dir(&inst_path)
        .map_err(|e| TraceError::Failed(format!("creating {}: {e}", inst_path.display())))?;
    let inst = Instance { path: inst_path };
    let p = |s: &str| inst.path.join(s);
    write_text(&p("tracing_on"), "0")?;
    write_text(&p("options/overwrite"), "0")?;
    // CLOCK_MONOTONIC: a program under the recorder can stamp its own phases on the
    // events' clock (`predict` counts each task's events inside its own window).
    write_text(&p("trace_clock"), "mono")?;
    write_text(&p("buffer_size_kb"), &opts.buffer_kb.to_string())?;
    let mut dec: Decoders = HashMap::new();
    for (kind, ev) in EventKind::ALL {
        if (!opts.all_events && !kind.is_page()) || (kind == EventKind::Waking && !opts.wakeups) {
            continue;
        }
        let dir = root.join("events").join(ev);
        let Ok(fmt) = std::fs::read_to_string(dir.join("format")) else {
            if kind.is_page() {
                return Err(TraceError::Unsupported(format!(
                    "this kernel has no {ev} event"
                )));
            }
            progress(&format!("this kernel has no {ev} event: not recorded"));
            continue;
        };
        let id: u16 = read_text(&dir.join("id"))?
            .trim()
            .parse()
            .map_err(|_| TraceError::Failed(format!("{ev}: unreadable id")))?;
        if kind == EventKind::Vmstat {
            // Only the vmstat worker's work: its function's address, else not recorded.
            let Some(addr) = kernel_symbol("vmstat_update") else {
                progress("no address of vmstat_update in /proc/kallsyms: its passes not recorded");
                continue;
            };
            write_text(
                &inst.path.join("events").join(ev).join("filter"),
                &format!("function == {addr:#x}"),
            )?;
        }
        dec.insert(id, (kind, Fields::parse(&fmt)));
        write_text(&inst.path.join("events").join(ev).join("enable"), "1")?;
    }
    let online: Vec<u32> = cpus
        .iter()
        .filter(|c| c.online)
        .map(|c| c.cpu as u32)
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for &c in &online {
        let path = p(&format!("per_cpu/cpu{c}/trace_pipe_raw"));
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || reader(path, c, stop)));
    }
    let start = match snapshot(true) {
        Ok(s) => s,
        Err(e) => {
            stop.store(true, Ordering::Release);
            for t in threads {
                let _ = t.join();
            }
            return Err(e);
        }
    };
    write_text(&p("tracing_on"), "1")?;
    let t_start = Instant::now();
    progress(&format!(
        "recording {} kmem/lock/sched events on CPUs {online:?} ({} KiB per CPU) while running {:?}",
        dec.len(),
        opts.buffer_kb,
        opts.command
    ));
    let status = std::process::Command::new(&opts.command[0])
        .args(&opts.command[1..])
        .status();
    write_text(&p("tracing_on"), "0")?;
    let duration_ns = t_start.elapsed().as_nanos() as u64;
    let end = snapshot(false)?;
    stop.store(true, Ordering::Release);
    let mut per_cpu = Vec::new();
    for t in threads {
        per_cpu.push(
            t.join()
                .map_err(|_| TraceError::Failed("a reader thread panicked".into()))?
                .map_err(TraceError::Failed)?,
        );
    }
    let status =
        status.map_err(|e| TraceError::Failed(format!("running {:?}: {e}", opts.command[0])))?;
    let mut events = Vec::new();
    let mut all_losses = Vec::new();
    for cp in &per_cpu {
        let mut missed = 0;
        for page in &cp.pages {
            if decode_page(page, cp.cpu, &dec, &mut events) {
                missed += 1;
            }
        }
        all_losses.push(losses(&inst.path, cp.cpu, missed));
    }
    drop(inst);
    if let Some(l) = all_losses.iter().find(|l| !l.none()) {
        return Err(TraceError::Lost(format!(
            "the tracer lost events on CPU {} (overrun {}, commit overrun {}, dropped {}, pages with missed events {}): \
             the trace is refused; enlarge the per-CPU buffer with --buffer-kb (now {}) or record a shorter run",
            l.cpu, l.overrun, l.commit_overrun, l.dropped, l.missed_pages, opts.buffer_kb
        )));
    }
    events.sort_by_key(|e| e.ts);
    let t0 = events.first().map_or(0, |e| e.ts);
    for e in &mut events {
        e.ts -= t0;
    }
    progress(&format!(
        "{} events in {:.2} s",
        events.len(),
        duration_ns as f64 / 1e9
    ));
    let header = Header {
        version: VERSION,
        kernel_release: crate::twin::host::kernel_release(),
        command: opts.command.clone(),
        exit_status: status.code(),
        t0_ns: t0,
        duration_ns,
        cpus,
        start,
        end,
        losses: all_losses,
        events: events.len() as u64,
        buffer_kb: opts.buffer_kb,
    };
    Ok((header, events))
}
