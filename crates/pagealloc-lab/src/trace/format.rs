//! The trace file: what `pagealloc trace record` writes and `pagealloc trace replay` reads.
//!
//! # Layout
//! ```text
//! magic    8 bytes  "PATRACE1"
//! body     zlib stream (flate2) of:
//!   header_len  u32 little-endian
//!   header      JSON, header_len bytes (a [`Header`])
//!   events      header.events records, each:
//!     kind        u8      (an [`EventKind`])
//!     cpu         varint
//!     ts_delta    varint  ns since the previous record (records are in time order)
//!     pid         varint
//!     flags       u8      the tracer's common_flags (0x08 hardirq, 0x10 softirq, 0x40 NMI)
//!     then by kind:
//!       page events   pfn (zigzag varint, delta to the previous page event's pfn),
//!                     order u8, migratetype u8 (+1: -1 is 0), aux varint
//!                     (alloc: gfp flags; zone_locked: percpu_refill)
//!       lock events   lock address varint, aux varint (begin: flags; end: ret)
//!       sched_switch  prev_pid varint, next_pid | prev_state << 32 varint
//!       sched_waking  woken pid varint, target_cpu varint (recorded on request only)
//!       vmstat        the work function's address varint, 0 varint (`vmstat_update` only)
//!   end marker  u8 0xFF
//! ```
//! Varints are LEB128 (7 bits a byte, low first). A file that ends early, has a bad
//! magic, a header that does not parse, more records than it announces or no end
//! marker is refused as a whole.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::twin::layout::{HostCpuDesc, VmSysctls};

/// The first 8 bytes of a trace file.
pub const MAGIC: &[u8; 8] = b"PATRACE1";

/// Version of the header and record layout.
pub const VERSION: u32 = 1;

/// At most this many events in one file (bounds the memory a file can make replay use).
pub const MAX_EVENTS: u64 = 200_000_000;

/// At most this many bytes of JSON header.
pub const MAX_HEADER: u32 = 64 << 20;

/// What an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum EventKind {
    /// `kmem:mm_page_alloc`: a block handed to a caller.
    Alloc = 1,
    /// `kmem:mm_page_free`: a block freed.
    Free = 2,
    /// `kmem:mm_page_free_batched`: an order-0 page freed through a batch
    /// (`free_unref_folios`); the same page also shows as [`EventKind::Free`].
    FreeBatched = 3,
    /// `kmem:mm_page_alloc_zone_locked`: a block taken from the buddy lists under the
    /// zone lock (aux: `percpu_refill`).
    ZoneLocked = 4,
    /// `kmem:mm_page_pcpu_drain`: a block a pageset handed back to the buddy lists.
    PcpuDrain = 5,
    /// `lock:contention_begin`.
    LockBegin = 6,
    /// `lock:contention_end`.
    LockEnd = 7,
    /// `sched:sched_switch`.
    Switch = 8,
    /// `sched:sched_waking`: a task being woken (recorded only when asked for:
    /// `trace record --wakeups`, `predict`).
    Waking = 9,
    /// `workqueue:workqueue_execute_start` of `vmstat_update` (filtered by its address
    /// in `/proc/kallsyms`; not recorded where the symbol cannot be read): the vmstat
    /// worker's pass on the CPU, whose `decay_pcp_high` lowers every pageset's `high`
    /// there by an eighth and drains what is above it: a decay that drains nothing
    /// leaves no page event, this one shows it.
    Vmstat = 10,
}

impl EventKind {
    /// Every kind, with its tracefs event path.
    pub const ALL: [(EventKind, &'static str); 10] = [
        (EventKind::Alloc, "kmem/mm_page_alloc"),
        (EventKind::Free, "kmem/mm_page_free"),
        (EventKind::FreeBatched, "kmem/mm_page_free_batched"),
        (EventKind::ZoneLocked, "kmem/mm_page_alloc_zone_locked"),
        (EventKind::PcpuDrain, "kmem/mm_page_pcpu_drain"),
        (EventKind::LockBegin, "lock/contention_begin"),
        (EventKind::LockEnd, "lock/contention_end"),
        (EventKind::Switch, "sched/sched_switch"),
        (EventKind::Waking, "sched/sched_waking"),
        (EventKind::Vmstat, "workqueue/workqueue_execute_start"),
    ];

    fn from_u8(v: u8) -> Option<EventKind> {
        Self::ALL.iter().map(|&(k, _)| k).find(|&k| k as u8 == v)
    }

    /// A page event (carries pfn, order, migratetype).
    pub fn is_page(self) -> bool {
        matches!(
            self,
            Self::Alloc | Self::Free | Self::FreeBatched | Self::ZoneLocked | Self::PcpuDrain
        )
    }
}

/// One recorded event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Nanoseconds since the first event of the trace.
    pub ts: u64,
    /// CPU it happened on.
    pub cpu: u32,
    /// Kind.
    pub kind: EventKind,
    /// Task that was running.
    pub pid: u32,
    /// common_flags: interrupt context and irqs off.
    pub flags: u8,
    /// Page events: the block's first pfn; lock events: the lock address;
    /// sched_switch: prev_pid; sched_waking: the woken task's pid.
    pub pfn: u64,
    /// Page events: order.
    pub order: u8,
    /// Page events: migratetype (-1: none).
    pub mt: i8,
    /// Alloc: gfp flags; ZoneLocked: percpu_refill; lock events: flags / ret;
    /// sched_switch: next_pid in the low 32 bits, prev_state in the high 32 (its low
    /// byte 0: the task left runnable, preempted); sched_waking: the CPU it is woken on.
    pub aux: u64,
}

/// common_flags bits of interrupt context (kernel/trace/trace.h).
pub const FLAG_HARDIRQ: u8 = 0x08;
/// Softirq context.
pub const FLAG_SOFTIRQ: u8 = 0x10;
/// NMI context.
pub const FLAG_NMI: u8 = 0x40;

impl Event {
    /// A made-up event of `kind` on `cpu` for block `pfn`, at time 0, of order 0 with no
    /// migratetype, by pid 1 in task context: the base that synthetic traces (tests, the
    /// docs' examples) complete with struct update syntax.
    pub fn synthetic(cpu: u32, kind: EventKind, pfn: u64) -> Event {
        Event {
            ts: 0,
            cpu,
            kind,
            pid: 1,
            flags: 0,
            pfn,
            order: 0,
            mt: -1,
            aux: 0,
        }
    }

    /// Allocated or freed in interrupt context (hardirq, softirq or NMI).
    pub fn in_interrupt(&self) -> bool {
        self.flags & (FLAG_HARDIRQ | FLAG_SOFTIRQ | FLAG_NMI) != 0
    }
}

/// Pageblock (`pfn >> 9`) → the migratetype the trace's events first show for it: an
/// allocation, a refill or a drain carries one, a free does not. For the blocks a trace
/// frees without having allocated them.
pub fn pageblock_types(ev: &[Event]) -> std::collections::HashMap<u64, i8> {
    let mut types = std::collections::HashMap::new();
    for e in ev {
        if matches!(
            e.kind,
            EventKind::Alloc | EventKind::ZoneLocked | EventKind::PcpuDrain
        ) && e.mt >= 0
        {
            types.entry(e.pfn >> 9).or_insert(e.mt);
        }
    }
    types
}

/// Per CPU: what the tracer said it lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Losses {
    /// CPU.
    pub cpu: u32,
    /// `overrun` of per_cpu/cpuN/stats.
    pub overrun: u64,
    /// `commit overrun`.
    pub commit_overrun: u64,
    /// `dropped events`.
    pub dropped: u64,
    /// Pages the reader saw flagged with missed events.
    pub missed_pages: u64,
}

impl Losses {
    /// Nothing lost.
    pub fn none(&self) -> bool {
        self.overrun == 0 && self.commit_overrun == 0 && self.dropped == 0 && self.missed_pages == 0
    }
}

/// The machine's state at one instant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// `/proc/zoneinfo`, verbatim.
    pub zoneinfo: String,
    /// `/proc/pagetypeinfo`, verbatim: the free blocks per order and migratetype and
    /// the pageblocks per type of each zone (empty in files written before it was
    /// recorded, and where the kernel has none).
    #[serde(default)]
    pub pagetypeinfo: String,
    /// The `vm` sysctls (and THP) that size zones and pagesets.
    pub vm: VmSysctls,
}

/// The file's header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// [`VERSION`].
    pub version: u32,
    /// `uname -r` of the recording machine.
    pub kernel_release: String,
    /// The command recorded (argv).
    pub command: Vec<String>,
    /// Its exit status (None: killed by a signal).
    pub exit_status: Option<i32>,
    /// Tracer clock of the first event, ns (the records' times are relative to it).
    pub t0_ns: u64,
    /// Nanoseconds between the start of the recording and the end of the command.
    pub duration_ns: u64,
    /// Every CPU of the machine (node, cache slice, online).
    pub cpus: Vec<HostCpuDesc>,
    /// At the start.
    pub start: Snapshot,
    /// At the end.
    pub end: Snapshot,
    /// What the tracer said it lost, per CPU (all zero in a file `record` wrote).
    pub losses: Vec<Losses>,
    /// Number of event records.
    pub events: u64,
    /// Per-CPU buffer size used, KiB.
    pub buffer_kb: u64,
}

/// Why a trace file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Not readable.
    #[error("{0}")]
    Io(String),
    /// Not a trace or damaged.
    #[error("{0}")]
    Corrupt(String),
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Encodes events in the record layout (without the end marker).
pub fn encode_events(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::with_capacity(events.len() * 8);
    let mut prev_ts = 0u64;
    let mut prev_pfn = 0u64;
    for e in events {
        out.push(e.kind as u8);
        put_varint(&mut out, u64::from(e.cpu));
        put_varint(&mut out, e.ts.saturating_sub(prev_ts));
        prev_ts = prev_ts.max(e.ts);
        put_varint(&mut out, u64::from(e.pid));
        out.push(e.flags);
        if e.kind.is_page() {
            put_varint(&mut out, zigzag(e.pfn.wrapping_sub(prev_pfn) as i64));
            prev_pfn = e.pfn;
            out.push(e.order);
            out.push((i16::from(e.mt) + 1).clamp(0, 255) as u8);
            put_varint(&mut out, e.aux);
        } else {
            put_varint(&mut out, e.pfn);
            put_varint(&mut out, e.aux);
        }
    }
    out
}

/// Writes a whole trace file to `w`.
///
/// # Errors
/// The writer's.
pub fn write(w: impl Write, header: &Header, events: &[Event]) -> std::io::Result<()> {
    let mut w = w;
    w.write_all(MAGIC)?;
    let mut z = flate2::write::ZlibEncoder::new(w, flate2::Compression::best());
    let h = serde_json::to_vec(header).map_err(std::io::Error::other)?;
    z.write_all(&(h.len() as u32).to_le_bytes())?;
    z.write_all(&h)?;
    z.write_all(&encode_events(events))?;
    z.write_all(&[0xFF])?;
    z.finish()?.flush()
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn u8(&mut self) -> Result<u8, FormatError> {
        let v = *self
            .b
            .get(self.i)
            .ok_or_else(|| FormatError::Corrupt("truncated (ends inside an event)".into()))?;
        self.i += 1;
        Ok(v)
    }
    fn varint(&mut self) -> Result<u64, FormatError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(FormatError::Corrupt("a varint longer than 64 bits".into()))
    }
}

/// Reads a whole trace file.
///
/// # Errors
/// [`FormatError::Io`] for a file that cannot be read, [`FormatError::Corrupt`] for
/// anything else wrong with it.
pub fn read(path: &std::path::Path) -> Result<(Header, Vec<Event>), FormatError> {
    let f = std::fs::File::open(path)
        .map_err(|e| FormatError::Io(format!("{}: {e}", path.display())))?;
    read_from(f).map_err(|e| match e {
        FormatError::Corrupt(m) => {
            FormatError::Corrupt(format!("{}: not a usable trace: {m}", path.display()))
        }
        e => e,
    })
}

/// Reads a trace from a reader.
///
/// # Errors
/// See [`read`].
pub fn read_from(r: impl Read) -> Result<(Header, Vec<Event>), FormatError> {
    let mut r = r;
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .map_err(|_| FormatError::Corrupt("shorter than the magic".into()))?;
    if &magic != MAGIC {
        return Err(FormatError::Corrupt(
            "bad magic (not written by `pagealloc trace record`)".into(),
        ));
    }
    let mut z = flate2::read::ZlibDecoder::new(r);
    let mut len = [0u8; 4];
    z.read_exact(&mut len)
        .map_err(|e| FormatError::Corrupt(format!("header length: {e}")))?;
    let len = u32::from_le_bytes(len);
    if len > MAX_HEADER {
        return Err(FormatError::Corrupt(format!("header of {len} bytes")));
    }
    let mut h = vec![0u8; len as usize];
    z.read_exact(&mut h)
        .map_err(|e| FormatError::Corrupt(format!("header: {e}")))?;
    let header: Header =
        serde_json::from_slice(&h).map_err(|e| FormatError::Corrupt(format!("header: {e}")))?;
    if header.version != VERSION {
        return Err(FormatError::Corrupt(format!(
            "version {} (this build reads {VERSION})",
            header.version
        )));
    }
    if header.events > MAX_EVENTS {
        return Err(FormatError::Corrupt(format!(
            "{} events announced (at most {MAX_EVENTS})",
            header.events
        )));
    }
    let mut body = Vec::new();
    z.read_to_end(&mut body)
        .map_err(|e| FormatError::Corrupt(format!("compressed body: {e}")))?;
    let mut c = Cursor { b: &body, i: 0 };
    let mut events = Vec::with_capacity(header.events.min(1 << 24) as usize);
    let mut ts = 0u64;
    let mut prev_pfn = 0u64;
    for _ in 0..header.events {
        let k = c.u8()?;
        let kind = EventKind::from_u8(k)
            .ok_or_else(|| FormatError::Corrupt(format!("unknown event kind {k}")))?;
        let cpu = u32::try_from(c.varint()?)
            .map_err(|_| FormatError::Corrupt("CPU out of range".into()))?;
        ts = ts
            .checked_add(c.varint()?)
            .ok_or_else(|| FormatError::Corrupt("time overflows".into()))?;
        let pid = c.varint()? as u32;
        let flags = c.u8()?;
        let (pfn, order, mt, aux) = if kind.is_page() {
            let pfn = prev_pfn.wrapping_add(unzigzag(c.varint()?) as u64);
            prev_pfn = pfn;
            let order = c.u8()?;
            let mt = (i16::from(c.u8()?) - 1) as i8;
            (pfn, order, mt, c.varint()?)
        } else {
            (c.varint()?, 0, -1, c.varint()?)
        };
        events.push(Event {
            ts,
            cpu,
            kind,
            pid,
            flags,
            pfn,
            order,
            mt,
            aux,
        });
    }
    if c.u8()? != 0xFF || c.i != body.len() {
        return Err(FormatError::Corrupt(
            "no end marker after the announced events".into(),
        ));
    }
    Ok((header, events))
}
