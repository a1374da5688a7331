//! The run on threads ([`run`]): one thread per CPU, its backend (the source as that
//! CPU, timed; the inboxes; the barriers) and its loop ([`drive`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use crate::peers::{Block, Counters, PageSource, SourceError};
use crate::row::{record_ns, CpuWindow};
use crate::workload::driver::TraceBlock;
use crate::workload::{
    Backend, CpuDriver, CpuScript, Flow, MigrateKind, Op, OpCounts, Step, TraceHash, Workload,
    NR_ORDERS,
};
use crate::Row;

use super::clock;
use super::live::LiveMap;
use super::outcome::{BadBlock, ExecError, ExecResult, Latencies, PcpSample};
use super::sync::{self, Abort, IdBarrier, WaitQueue, Waiter};
use super::ExecOptions;

/// Per-thread output.
struct ThreadOut {
    counts: OpCounts,
    window: CpuWindow,
    /// When the thread began its script, ns since the run's epoch.
    began_ns: u64,
    /// The thread's CPU clock at the window's start, then its CPU time in the window.
    cpu_ns: u64,
    trace_hash: u64,
    latency: Option<Latencies>,
    alloc_free_ns: u64,
    touch_ns: u64,
    alloc_ns_by_order: [(u64, u64); NR_ORDERS],
}

/// A CPU's inbox: the queue (the socket buffer), the wait queue its receiver sleeps on
/// while it is empty, and the one its sender sleeps on while it is full.
struct Inbox {
    queue: ArrayQueue<Block>,
    /// Blocks counted against the inbox: sent and not yet released by the receiver
    /// (queued, or received and not all freed: an skb counts against its socket's
    /// buffer until freed). One counter, raised by the sender before each push and
    /// lowered by a whole message at a release, so a sender never sees a count in
    /// the middle of a message it is sending.
    held: AtomicUsize,
    data: WaitQueue,
    space: WaitQueue,
}

impl Inbox {
    /// Blocks counted against the inbox.
    fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }
}

/// Shared state of one run.
struct Shared<'a> {
    source: &'a dyn PageSource,
    inboxes: Vec<Option<Inbox>>,
    /// Blocks an inbox drains to before its sleeping sender is woken.
    resume: usize,
    /// Blocks an inbox holds (queued or received and not freed) before sends block.
    capacity: usize,
    barrier: IdBarrier,
    abort: Abort,
    live: LiveMap,
    measured_after: Option<u32>,
    epoch: Instant,
    opts: &'a ExecOptions,
}

/// Runs `workload` on `source` with `opts`.
///
/// # Errors
/// See [`ExecError`]: the run fails on any broken check.
pub fn run(
    workload: &dyn Workload,
    source: &dyn PageSource,
    opts: &ExecOptions,
) -> Result<ExecResult, ExecError> {
    let n = opts.cpus.max(1);
    let scripts = workload.scripts(n).map_err(ExecError::Workload)?;
    let mut warnings = Vec::new();
    let allowed = sync::allowed_cpus();
    let pinned = opts.pin && allowed.len() >= n as usize;
    if opts.pin && !pinned {
        warnings.push(format!(
            "{n} CPUs asked, this process may use {}: threads run unpinned",
            allowed.len()
        ));
    }
    let cap = workload.inbox_capacity();
    let shared = Shared {
        source,
        inboxes: (0..n)
            .map(|_| {
                (cap > 0).then(|| Inbox {
                    queue: ArrayQueue::new(cap),
                    held: AtomicUsize::new(0),
                    data: WaitQueue::default(),
                    space: WaitQueue::default(),
                })
            })
            .collect(),
        resume: workload.inbox_resume(),
        capacity: cap,
        barrier: IdBarrier::new(n),
        abort: Abort::default(),
        live: LiveMap::new(source.handle_space()),
        measured_after: workload.measured_after(),
        epoch: Instant::now(),
        opts,
    };
    if opts.latency {
        clock::calibrate();
    }
    let before = source.counters();
    let start = std::sync::Barrier::new(n as usize + 1);
    let stop_sampler = AtomicBool::new(false);
    let samples: Mutex<Vec<PcpSample>> = Mutex::new(Vec::new());
    let peak = AtomicU64::new(0);

    let outs: Vec<Result<ThreadOut, ExecError>> = std::thread::scope(|s| {
        let handles: Vec<_> = scripts
            .into_iter()
            .enumerate()
            .map(|(i, script)| {
                let shared = &shared;
                let start = &start;
                let host_cpu = allowed.get(i).copied();
                std::thread::Builder::new()
                    .name(format!("cpu{i}"))
                    .spawn_scoped(s, move || {
                        if let (true, Some(c)) = (pinned, host_cpu) {
                            // A failed pin leaves the thread unpinned; the run still counts.
                            let _ = sync::pin_to(c);
                        }
                        start.wait();
                        // A panicking thread stops the others (they may wait for it).
                        let _guard = AbortOnPanic(&shared.abort);
                        let r = drive(i, script, shared);
                        if r.is_err() {
                            shared.abort.set();
                        }
                        r
                    })
                    .expect("spawn an executor thread")
            })
            .collect();
        let sampler = (opts.sample_ms > 0 && source.pcp_pages().is_some()).then(|| {
            let (stop, samples, peak, epoch) = (&stop_sampler, &samples, &peak, shared.epoch);
            s.spawn(move || {
                let period = Duration::from_millis(opts.sample_ms);
                while !stop.load(Ordering::Relaxed) {
                    let total = source.pcp_pages().unwrap_or(0);
                    let p = source.pcp_info(0).unwrap_or_default();
                    peak.fetch_max(total, Ordering::Relaxed);
                    samples.lock().expect("sampler lock").push(PcpSample {
                        t_ms: epoch.elapsed().as_millis() as u64,
                        total_pages: total,
                        cpu0_high: p.high,
                        cpu0_count: p.count,
                        cpu0_high_min: p.high_min,
                    });
                    std::thread::sleep(period);
                }
            })
        });
        start.wait();
        // Join every worker before acting on a panic: the sampler must be stopped
        // first, or the scope would wait for it forever.
        let mut panicked = None;
        let mut outs = Vec::with_capacity(handles.len());
        for h in handles {
            match h.join() {
                Ok(r) => outs.push(r),
                Err(p) => {
                    shared.abort.set();
                    outs.push(Err(ExecError::Aborted));
                    panicked.get_or_insert(p);
                }
            }
        }
        if sampler.is_some() && opts.linger_ms > 0 && panicked.is_none() {
            std::thread::sleep(Duration::from_millis(opts.linger_ms));
        }
        stop_sampler.store(true, Ordering::Relaxed);
        if let Some(h) = sampler {
            h.join().expect("sampler thread");
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
        outs
    });

    // The first real error wins over the `Aborted` of the threads it stopped.
    let mut threads = Vec::with_capacity(outs.len());
    let mut first_err = None;
    for o in outs {
        match o {
            Ok(t) => threads.push(t),
            Err(ExecError::Aborted) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if threads.len() != n as usize {
        return Err(ExecError::Aborted);
    }

    // End-of-run checks.
    for (i, q) in shared.inboxes.iter().enumerate() {
        if let Some(q) = q {
            if !q.queue.is_empty() {
                return Err(ExecError::Script(format!(
                    "{} blocks left in CPU {i}'s inbox",
                    q.queue.len()
                )));
            }
        }
    }
    let live = shared.live.live_frames();
    if live != 0 {
        return Err(BadBlock::Leaked(live).into());
    }
    let pcp_final = source.pcp_pages();
    let after = source.counters();
    source.validate()?;

    let per_cpu: Vec<OpCounts> = threads.iter().map(|t| t.counts.clone()).collect();
    let total = OpCounts::sum(&per_cpu);
    if total.allocs != total.frees {
        return Err(ExecError::Script(format!(
            "allocations by order {:?} != frees {:?}",
            total.allocs, total.frees
        )));
    }
    let windows: Vec<CpuWindow> = threads.iter().map(|t| t.window.clone()).collect();
    let measured = OpCounts::sum(windows.iter().map(|w| &w.counts));
    let failed = total.failed_allocs();
    if failed > 0 && workload.score_kind() == crate::workload::ScoreKind::Rate {
        warnings.push(format!(
            "{}: {failed} allocations failed (out of memory); the throughput counts only \
             what was allocated (more memory: --memory)",
            workload.name()
        ));
    }
    let began = threads.iter().map(|t| t.began_ns).min().unwrap_or(0);
    let ended = windows.iter().map(|w| w.end_ns).max().unwrap_or(0);
    let wall_s = ended.saturating_sub(began) as f64 / 1e9;
    let snapshot = shared
        .barrier
        .snapshot
        .lock()
        .expect("snapshot lock")
        .take();
    let counters = match (after, snapshot.or(before)) {
        (Some(a), Some(b)) => Some(a.since(&b)),
        _ => None,
    };
    let latency = opts.latency.then(|| {
        let mut l = Latencies::new();
        for t in &threads {
            if let Some(tl) = &t.latency {
                l.merge(tl);
            }
        }
        l
    });
    let mut by_order = [None; NR_ORDERS];
    if opts.latency {
        for (o, slot) in by_order.iter_mut().enumerate() {
            let (sum, cnt) = threads.iter().fold((0u64, 0u64), |(s, c), t| {
                (s + t.alloc_ns_by_order[o].0, c + t.alloc_ns_by_order[o].1)
            });
            if cnt > 0 {
                *slot = Some(sum as f64 / cnt as f64);
            }
        }
    }
    let pcp_peak = source
        .pcp_pages()
        .map(|_| peak.load(Ordering::Relaxed).max(pcp_final.unwrap_or(0)));
    let mut r = ExecResult {
        workload: workload.name(),
        alloc: source.name(),
        config: source.config(),
        cpus: n,
        seed: opts.seed,
        pinned,
        score: 0.0,
        score_unit: workload.score_unit(),
        elapsed_s: 0.0,
        wall_s,
        cpu_time_ns: threads.iter().map(|t| t.cpu_ns).sum(),
        trace_hash: TraceHash::combine(threads.iter().map(|t| t.trace_hash)),
        windows,
        per_cpu,
        total,
        measured,
        counters,
        latency,
        alloc_free_s: threads.iter().map(|t| t.alloc_free_ns).sum::<u64>() as f64 / 1e9,
        touch_s: threads.iter().map(|t| t.touch_ns).sum::<u64>() as f64 / 1e9,
        alloc_avg_ns_by_order: by_order,
        pcp_samples: samples.into_inner().expect("sampler lock"),
        pcp_peak_pages: pcp_peak,
        pcp_final_pages: pcp_final,
        warnings,
        row: Row::default(),
    };
    r.row = r.measure(workload);
    r.score = r.row.score.unwrap_or(0.0);
    r.elapsed_s = r.row.extra["elapsed_s"];
    Ok(r)
}

/// Sets the abort flag when dropped during a panic.
struct AbortOnPanic<'a>(&'a Abort);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.set();
        }
    }
}

/// Operations shorter than this are not checked for a zone-lock trip: reading a CPU's
/// counters costs about 90 ns, as much as the fast path, and a refill or drain moves a
/// batch (at least a few hundred ns; microseconds at the default batch of 63). What a
/// trip cheaper than this would be — a direct zone allocation of a ready block — goes
/// untimed, and is counted with the next timed trip's counter delta.
pub const TRIP_MIN_NS: u64 = 250;

/// Whether this CPU took a zone lock since the last check (`Some(true)`), did not
/// (`Some(false)`), or the decay ticker worked on it meanwhile so the op cannot be told
/// apart (`None`). Updates `last` to now.
fn zone_trip(src: &dyn PageSource, cpu: usize, last: &mut Option<Counters>) -> Option<bool> {
    let now = src.cpu_counters(cpu)?;
    let prev = last.replace(now)?;
    let ticker = now.decay_drain != prev.decay_drain
        || now.expire_drain != prev.expire_drain
        || now.drain_cpu != prev.drain_cpu;
    (!ticker).then_some(now.zone_lock != prev.zone_lock)
}

impl TraceBlock for Block {
    type Slot = Option<Block>;
    fn order(&self) -> u8 {
        self.order
    }
}

/// One thread's effects: the source, as CPU `cpu`, timed; inboxes are bounded MPMC
/// queues (a full or empty one is [`Flow::Blocked`], and the loop in [`drive`] waits);
/// barriers wait inside.
struct ThreadBackend<'s, 'a> {
    sh: &'s Shared<'a>,
    out: ThreadOut,
    measuring: bool,
    /// Whether to look for zone-lock trips (latency on, a source with counters).
    trips: bool,
    last_counters: Option<Counters>,
    /// The CPU's user buffer for `CopyIn`/`CopyOut` (a process's send or receive
    /// buffer), grown to the largest copy.
    user: Vec<u8>,
    /// Blocks this CPU took from its inbox since it last held none (`None` once
    /// freed); they count against the inbox until all are freed (a whole message).
    received: Vec<Option<Block>>,
}

impl<'s> ThreadBackend<'s, '_> {
    /// Records a timed allocation (`Some((succeeded, order))`) or free (`None`) of
    /// `dt` ns, and, for a slow one, whether it was a zone-lock trip.
    fn timed(&mut self, cpu: usize, dt: u64, alloc: Option<(bool, u8)>) {
        self.out.alloc_free_ns += dt;
        let l = self.out.latency.as_mut().expect("latency on");
        match alloc {
            Some((true, o)) => {
                record_ns(&mut l.alloc, dt);
                if self.measuring {
                    let e = &mut self.out.alloc_ns_by_order[usize::from(o)];
                    e.0 += dt;
                    e.1 += 1;
                }
            }
            Some((false, _)) => {}
            None => record_ns(&mut l.free, dt),
        }
        if self.trips
            && dt >= TRIP_MIN_NS
            && zone_trip(self.sh.source, cpu, &mut self.last_counters) == Some(true)
        {
            let h = if alloc.is_some() {
                &mut l.alloc_trip
            } else {
                &mut l.free_trip
            };
            record_ns(h, dt);
        }
    }

    fn inbox(&self, cpu: usize, of: usize) -> Result<&'s Inbox, ExecError> {
        self.sh
            .inboxes
            .get(of)
            .ok_or_else(|| ExecError::Script(format!("CPU {cpu}: send to CPU {of}")))?
            .as_ref()
            .ok_or_else(|| ExecError::Script(format!("CPU {cpu}: inbox capacity 0")))
    }

    fn now_ns(&self) -> u64 {
        self.sh.epoch.elapsed().as_nanos() as u64
    }

    /// A block this CPU received has left it (freed, or sent on): once every block it
    /// received is gone, they stop counting against its inbox and a blocked sender may
    /// be woken.
    fn release_received(&mut self, cpu: usize, b: Block) -> Result<(), ExecError> {
        if let Some(e) = self.received.iter_mut().find(|e| **e == Some(b)) {
            *e = None;
            if self.received.iter().all(Option::is_none) {
                let n = self.received.len();
                self.received.clear();
                let inbox = self.inbox(cpu, cpu)?;
                inbox.held.fetch_sub(n, Ordering::SeqCst);
                if inbox.held() <= self.sh.resume {
                    inbox.space.wake();
                }
            }
        }
        Ok(())
    }
}

impl Backend for ThreadBackend<'_, '_> {
    type Block = Block;
    type Error = ExecError;

    fn alloc(&mut self, cpu: usize, o: u8, kind: MigrateKind) -> Result<Option<Block>, ExecError> {
        let t0 = self.sh.opts.latency.then(clock::now);
        let r = self.sh.source.allocate(cpu, o, kind);
        let dt = t0.map(clock::since_ns);
        let b = match r {
            Ok(b) => {
                if b.order != o {
                    return Err(BadBlock::WrongOrder { asked: o, block: b }.into());
                }
                self.sh.live.claim(b)?;
                Some(b)
            }
            Err(SourceError::OutOfMemory) => None,
            Err(e) => return Err(e.into()),
        };
        if let Some(dt) = dt {
            self.timed(cpu, dt, Some((b.is_some(), o)));
        }
        Ok(b)
    }

    fn free(&mut self, cpu: usize, b: Block) -> Result<(), ExecError> {
        self.sh.live.release(b)?;
        let t0 = self.sh.opts.latency.then(clock::now);
        self.sh.source.free(cpu, b)?;
        if let Some(t0) = t0 {
            self.timed(cpu, clock::since_ns(t0), None);
        }
        self.release_received(cpu, b)
    }

    fn touch(&mut self, _: usize, b: Block) -> Result<(), ExecError> {
        let t0 = self.sh.opts.latency.then(clock::now);
        self.sh.source.touch(b);
        if let Some(t0) = t0 {
            self.out.touch_ns += clock::since_ns(t0);
        }
        Ok(())
    }

    fn copy(
        &mut self,
        _: usize,
        b: Block,
        bytes: u32,
        into_block: bool,
        _cross_ns_per_kib: u32,
    ) -> Result<(), ExecError> {
        let t0 = self.sh.opts.latency.then(clock::now);
        let n = bytes as usize;
        if self.user.len() < n {
            // A user buffer the program wrote before (its pages faulted in).
            self.user.resize(n, 0x3c);
        }
        self.sh.source.copy(b, &mut self.user[..n], into_block);
        if let Some(t0) = t0 {
            self.out.touch_ns += clock::since_ns(t0);
        }
        Ok(())
    }

    fn compute(&mut self, _: usize, ns: u64) {
        let t0 = Instant::now();
        let d = Duration::from_nanos(ns);
        while t0.elapsed() < d {
            std::hint::spin_loop();
        }
    }

    fn send(&mut self, cpu: usize, to: usize, b: Block) -> Result<Flow, ExecError> {
        let inbox = self.inbox(cpu, to)?;
        if inbox.held() >= self.sh.capacity {
            return Ok(Flow::Blocked);
        }
        inbox.held.fetch_add(1, Ordering::SeqCst);
        let flow = match inbox.queue.push(b) {
            Ok(()) => {
                inbox.data.wake();
                Flow::Done
            }
            Err(_) => {
                inbox.held.fetch_sub(1, Ordering::SeqCst);
                Flow::Blocked
            }
        };
        if flow == Flow::Done {
            // A received block sent on leaves this CPU's socket as a freed one does.
            self.release_received(cpu, b)?;
        }
        Ok(flow)
    }

    fn recv(&mut self, cpu: usize) -> Result<Option<Block>, ExecError> {
        let inbox = self.inbox(cpu, cpu)?;
        let b = inbox.queue.pop();
        if let Some(b) = b {
            self.received.push(Some(b));
        }
        Ok(b)
    }

    fn try_recv(&mut self, cpu: usize) -> Result<Option<Block>, ExecError> {
        // `recv` never waits here: the driver spins on a blocked `Recv`.
        self.recv(cpu)
    }

    fn barrier(&mut self, cpu: usize, id: u32) -> Result<Flow, ExecError> {
        let sh = self.sh;
        let snap = sh.measured_after == Some(id);
        sh.barrier.wait(cpu, id, &sh.abort, || {
            if snap {
                *sh.barrier.snapshot.lock().expect("snapshot lock") = sh.source.counters();
            }
        })?;
        Ok(Flow::Done)
    }

    fn done(&mut self, _: usize) -> Result<(), ExecError> {
        self.out.window.end_ns = self.now_ns();
        self.out.cpu_ns = clock::thread_cpu_ns().saturating_sub(self.out.cpu_ns);
        self.sh.barrier.mark_done();
        Ok(())
    }

    fn window_opened(&mut self, _: usize) {
        self.measuring = true;
        self.out.window.start_ns = self.now_ns();
        self.out.cpu_ns = clock::thread_cpu_ns();
    }
}

/// One CPU's loop: the driver steps the script; a blocked op waits (spin, then yield)
/// and is retried.
fn drive(cpu: usize, script: Box<dyn CpuScript>, sh: &Shared<'_>) -> Result<ThreadOut, ExecError> {
    let src = sh.source;
    let trips = sh.opts.latency && src.cpu_counters(cpu).is_some();
    let mut k = ThreadBackend {
        sh,
        out: ThreadOut {
            counts: OpCounts::default(),
            window: CpuWindow::default(),
            began_ns: 0,
            cpu_ns: 0,
            trace_hash: 0,
            latency: sh.opts.latency.then(Latencies::new),
            alloc_free_ns: 0,
            touch_ns: 0,
            alloc_ns_by_order: [(0, 0); NR_ORDERS],
        },
        measuring: false,
        trips,
        last_counters: if trips { src.cpu_counters(cpu) } else { None },
        user: Vec::new(),
        received: Vec::new(),
    };
    let mut d = CpuDriver::new(cpu, script, sh.opts.seed, sh.measured_after);
    k.out.began_ns = k.now_ns();
    let mut waiter: Option<Waiter> = None;
    loop {
        match d.step(&mut k)? {
            Step::Completed(_) => waiter = None,
            Step::Blocked(op @ Op::Recv { .. }) => {
                let inbox = k.inbox(cpu, cpu)?;
                inbox
                    .data
                    .sleep_until(|| !inbox.queue.is_empty(), &sh.abort, &|| {
                        format!("CPU {cpu} asleep in {op:?}")
                    })?;
            }
            Step::Blocked(op @ Op::Send { to_cpu, .. }) => {
                let inbox = k.inbox(cpu, to_cpu as usize)?;
                inbox
                    .space
                    .sleep_until(|| inbox.held() <= sh.resume, &sh.abort, &|| {
                        format!("CPU {cpu} asleep in {op:?}")
                    })?;
            }
            Step::Blocked(op) => waiter
                .get_or_insert_with(Waiter::new)
                .wait(&sh.abort, &|| format!("CPU {cpu} blocked on {op:?}"))?,
            Step::Done => break,
        }
    }
    let mut out = k.out;
    out.counts = d.counts().clone();
    out.window.counts = d.measured().clone();
    out.trace_hash = d.trace_hash();
    Ok(out)
}
