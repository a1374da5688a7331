//! The reference executor: every script round-robin, no allocator, fake frame ids.
//!
//! # Design
//! Each round gives every unfinished CPU one op, in CPU order. Allocations succeed
//! (optionally only up to a page budget, to exercise the failure paths), frames are
//! sequence numbers, inboxes are `VecDeque`s, blocked ops (empty inbox, full inbox,
//! barrier) are retried next round. It checks the executor contract of [`super`] on the
//! scripts and, at the end, that every block allocated was freed exactly once.
//!
//! It is the semantics the thread executor and the simulator must match, and the test
//! bed for workloads: op counts, conservation, determinism (a hash of the trace).
//!
//! # What it cannot see
//! Time. A `Compute` is free and all CPUs advance in lock step, so it says nothing about
//! contention or throughput, only about what was done.

use std::collections::VecDeque;

use super::{cpu_seed, CpuScript, Op, OpCounts, OpResult, SplitMix64, Workload, WorkloadError};

/// Options of a dry run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRun {
    cpus: u32,
    seed: u64,
    capacity_pages: Option<u64>,
    max_rounds: Option<u64>,
    trace: bool,
}

/// One completed op of a CPU, as recorded with [`DryRun::trace`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceEntry {
    /// The op.
    pub op: Op,
    /// Its result.
    pub ok: bool,
    /// The order of the block it acted on (as passed to [`OpCounts::record`]).
    pub block_order: Option<u8>,
}

/// What a dry run did.
#[derive(Clone, Debug)]
pub struct DryRunStats {
    /// Counts per CPU over the whole run.
    pub per_cpu: Vec<OpCounts>,
    /// Counts per CPU in the measured window (see [`Workload::measured_after`]).
    pub measured_per_cpu: Vec<OpCounts>,
    /// Sum of `per_cpu`.
    pub total: OpCounts,
    /// Sum of `measured_per_cpu`.
    pub measured: OpCounts,
    /// Scheduler rounds until all scripts were done.
    pub rounds: u64,
    /// Ops completed, all CPUs.
    pub ops: u64,
    /// Most base pages live at once (allocated and not yet freed, inboxes included).
    pub peak_live_pages: u64,
    /// Longest inbox seen.
    pub peak_inbox: usize,
    /// Hash of every CPU's sequence of completed ops and results: equal runs, equal hash.
    pub trace_hash: u64,
    /// Per CPU, every completed op, if [`DryRun::trace`] was on.
    pub trace: Option<Vec<Vec<TraceEntry>>>,
}

/// Runs `workload` on `cpus` CPUs with root seed `seed`, allocations always succeeding.
///
/// # Panics
/// If the workload cannot run on `cpus` CPUs, or a script breaks the executor contract
/// (see [`DryRun::run`]).
pub fn dry_run(workload: &dyn Workload, cpus: u32, seed: u64) -> DryRunStats {
    DryRun::new(cpus, seed)
        .run(workload)
        .unwrap_or_else(|e| panic!("dry run of {}: {e}", workload.name()))
}

#[derive(Clone, Copy, Debug)]
struct Block {
    id: u64,
    order: u8,
}

#[derive(Debug)]
struct Cpu {
    script: Box<dyn CpuScript>,
    rng: SplitMix64,
    slots: Vec<Option<Block>>,
    /// The op issued and not yet completed (blocked ops stay here).
    pending: Option<Op>,
    last: OpResult,
    done: bool,
    measuring: bool,
}

/// Outcome of trying a pending op.
enum Step {
    Completed { ok: bool, order: Option<u8> },
    Blocked,
}

impl DryRun {
    /// A dry run on `cpus` CPUs, CPU `i` seeded with [`cpu_seed`]`(seed, i)`.
    pub fn new(cpus: u32, seed: u64) -> Self {
        DryRun {
            cpus,
            seed,
            capacity_pages: None,
            max_rounds: None,
            trace: false,
        }
    }

    /// Fail an allocation when it would bring the live pages above `pages`.
    pub fn capacity_pages(mut self, pages: u64) -> Self {
        self.capacity_pages = Some(pages);
        self
    }

    /// Panic if the run takes more than `rounds` rounds (a livelocked script).
    pub fn max_rounds(mut self, rounds: u64) -> Self {
        self.max_rounds = Some(rounds);
        self
    }

    /// Record every completed op in [`DryRunStats::trace`].
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// Runs `workload` to completion.
    ///
    /// # Errors
    /// The workload's [`Workload::scripts`] error (too few CPUs).
    ///
    /// # Panics
    /// On any breach of the executor contract: a slot out of range, alloc or recv into a
    /// full slot, free, touch or send of an empty slot, a send to a CPU that does not
    /// exist, barriers with different ids, a deadlock (every unfinished CPU blocked), a
    /// script done with blocks held, blocks left in an inbox, a block not freed exactly
    /// once; and when [`DryRun::max_rounds`] is exceeded.
    pub fn run(&self, workload: &dyn Workload) -> Result<DryRunStats, WorkloadError> {
        let scripts = workload.scripts(self.cpus)?;
        assert_eq!(scripts.len(), self.cpus as usize, "one script per CPU");
        let n = scripts.len();
        let capacity = workload.inbox_capacity();
        let measured_after = workload.measured_after();
        let mut cpus: Vec<Cpu> = scripts
            .into_iter()
            .enumerate()
            .map(|(i, script)| Cpu {
                slots: vec![None; script.slot_count() as usize],
                script,
                rng: SplitMix64::new(cpu_seed(self.seed, i as u32)),
                pending: None,
                last: OpResult::OK,
                done: false,
                measuring: measured_after.is_none(),
            })
            .collect();
        let mut inboxes: Vec<VecDeque<Block>> = vec![VecDeque::new(); n];
        let mut rec = Recorder {
            per_cpu: vec![OpCounts::default(); n],
            measured_per_cpu: vec![OpCounts::default(); n],
            trace: self.trace.then(|| vec![Vec::new(); n]),
            measured_after,
            hash: FNV_OFFSET,
            ops: 0,
        };
        let mut freed: Vec<bool> = Vec::new(); // by frame id
        let mut live_pages = 0u64;
        let mut peak_live_pages = 0u64;
        let mut peak_inbox = 0usize;
        let mut rounds = 0u64;

        loop {
            if cpus.iter().all(|c| c.done) {
                break;
            }
            rounds += 1;
            if let Some(max) = self.max_rounds {
                assert!(rounds <= max, "{}: more than {max} rounds", workload.name());
            }
            let mut progress = false;
            for i in 0..n {
                let c = &mut cpus[i];
                if c.done {
                    continue;
                }
                let op = match c.pending {
                    Some(op) => op,
                    None => {
                        let op = c.script.next(c.last, &mut c.rng);
                        c.pending = Some(op);
                        progress = true;
                        op
                    }
                };
                let step = match op {
                    Op::Alloc { slot, order, .. } => {
                        assert!(order <= super::MAX_ORDER, "cpu {i}: order {order}");
                        let entry = slot_mut(&mut c.slots, i, slot);
                        assert!(entry.is_none(), "cpu {i}: alloc into full slot {slot}");
                        let pages = 1u64 << order;
                        let fits = match self.capacity_pages {
                            Some(cap) => live_pages + pages <= cap,
                            None => true,
                        };
                        if fits {
                            *entry = Some(Block {
                                id: freed.len() as u64,
                                order,
                            });
                            freed.push(false);
                            live_pages += pages;
                            peak_live_pages = peak_live_pages.max(live_pages);
                        }
                        Step::Completed {
                            ok: fits,
                            order: None,
                        }
                    }
                    Op::Free { slot } => {
                        let block = take(&mut c.slots, i, slot, "free");
                        let f = &mut freed[block.id as usize];
                        assert!(!*f, "cpu {i}: block {} freed twice", block.id);
                        *f = true;
                        live_pages -= 1 << block.order;
                        Step::Completed {
                            ok: true,
                            order: Some(block.order),
                        }
                    }
                    Op::Touch { slot } => {
                        let block = slot_mut(&mut c.slots, i, slot)
                            .unwrap_or_else(|| panic!("cpu {i}: touch of empty slot {slot}"));
                        Step::Completed {
                            ok: true,
                            order: Some(block.order),
                        }
                    }
                    Op::Compute { .. } | Op::Exit => Step::Completed {
                        ok: true,
                        order: None,
                    },
                    Op::Send { slot, to_cpu } => {
                        let to = to_cpu as usize;
                        assert!(to < n, "cpu {i}: send to cpu {to_cpu} of {n}");
                        if inboxes[to].len() >= capacity {
                            Step::Blocked
                        } else {
                            let block = take(&mut c.slots, i, slot, "send");
                            inboxes[to].push_back(block);
                            peak_inbox = peak_inbox.max(inboxes[to].len());
                            Step::Completed {
                                ok: true,
                                order: Some(block.order),
                            }
                        }
                    }
                    Op::Recv { slot } => {
                        let entry = slot_mut(&mut c.slots, i, slot);
                        assert!(entry.is_none(), "cpu {i}: recv into full slot {slot}");
                        match inboxes[i].pop_front() {
                            Some(block) => {
                                *entry = Some(block);
                                Step::Completed {
                                    ok: true,
                                    order: Some(block.order),
                                }
                            }
                            None => Step::Blocked,
                        }
                    }
                    Op::Barrier { .. } => Step::Blocked, // opened below, once all arrive
                    Op::Done => {
                        assert!(
                            c.slots.iter().all(Option::is_none),
                            "cpu {i}: done with blocks in its slots"
                        );
                        c.done = true;
                        c.pending = None;
                        progress = true;
                        continue;
                    }
                };
                if let Step::Completed { ok, order } = step {
                    rec.record(i, c, op, ok, order);
                    progress = true;
                }
            }

            // Barriers: open when every CPU waits at one, with the same id.
            let waiting: Vec<u32> = cpus
                .iter()
                .filter_map(|c| match c.pending {
                    Some(Op::Barrier { id }) => Some(id),
                    _ => None,
                })
                .collect();
            if !waiting.is_empty() {
                let finished = cpus.iter().filter(|c| c.done).count();
                assert!(
                    finished == 0,
                    "{}: {finished} CPU(s) finished while others wait at barrier {}",
                    workload.name(),
                    waiting[0]
                );
                if waiting.len() == n {
                    assert!(
                        waiting.iter().all(|&id| id == waiting[0]),
                        "{}: CPUs wait at different barriers {waiting:?}",
                        workload.name()
                    );
                    for (i, c) in cpus.iter_mut().enumerate() {
                        let op = c.pending.expect("waiting at a barrier");
                        rec.record(i, c, op, true, None);
                    }
                    progress = true;
                }
            }
            assert!(
                progress,
                "{}: deadlock; pending ops {:?}, inbox lengths {:?}",
                workload.name(),
                cpus.iter().map(|c| c.pending).collect::<Vec<_>>(),
                inboxes.iter().map(VecDeque::len).collect::<Vec<_>>()
            );
        }

        for (i, inbox) in inboxes.iter().enumerate() {
            assert!(
                inbox.is_empty(),
                "cpu {i}: {} blocks left in its inbox",
                inbox.len()
            );
        }
        if let Some(id) = freed.iter().position(|f| !f) {
            panic!("{}: block {id} never freed", workload.name());
        }
        assert_eq!(live_pages, 0);
        let total = OpCounts::sum(&rec.per_cpu);
        assert_eq!(total.allocs, total.frees, "allocs and frees by order");
        assert_eq!(total.sends, total.recvs);
        Ok(DryRunStats {
            measured: OpCounts::sum(&rec.measured_per_cpu),
            per_cpu: rec.per_cpu,
            measured_per_cpu: rec.measured_per_cpu,
            total,
            rounds,
            ops: rec.ops,
            peak_live_pages,
            peak_inbox,
            trace_hash: rec.hash,
            trace: rec.trace,
        })
    }
}

/// Accounting of completed ops: counts, measured window, trace and its hash.
struct Recorder {
    per_cpu: Vec<OpCounts>,
    measured_per_cpu: Vec<OpCounts>,
    trace: Option<Vec<Vec<TraceEntry>>>,
    measured_after: Option<u32>,
    hash: u64,
    ops: u64,
}

impl Recorder {
    /// Completes `cpu`'s pending `op`.
    fn record(&mut self, cpu: usize, c: &mut Cpu, op: Op, ok: bool, order: Option<u8>) {
        self.per_cpu[cpu].record(&op, ok, order);
        if c.measuring {
            self.measured_per_cpu[cpu].record(&op, ok, order);
        }
        if let (Some(id), Op::Barrier { id: b }) = (self.measured_after, op) {
            if id == b {
                c.measuring = true;
            }
        }
        if let Some(trace) = &mut self.trace {
            trace[cpu].push(TraceEntry {
                op,
                ok,
                block_order: order,
            });
        }
        self.hash = fnv(self.hash, cpu as u64);
        for word in op_words(&op) {
            self.hash = fnv(self.hash, word);
        }
        self.hash = fnv(self.hash, u64::from(ok));
        self.ops += 1;
        c.pending = None;
        c.last = OpResult { ok };
    }
}

fn slot_mut(slots: &mut [Option<Block>], cpu: usize, slot: u32) -> &mut Option<Block> {
    let len = slots.len();
    slots
        .get_mut(slot as usize)
        .unwrap_or_else(|| panic!("cpu {cpu}: slot {slot} beyond its table of {len}"))
}

fn take(slots: &mut [Option<Block>], cpu: usize, slot: u32, what: &str) -> Block {
    slot_mut(slots, cpu, slot)
        .take()
        .unwrap_or_else(|| panic!("cpu {cpu}: {what} of empty slot {slot}"))
}

const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;

/// FNV-1a over one 64-bit word, byte by byte.
fn fnv(mut hash: u64, word: u64) -> u64 {
    for byte in word.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01B3);
    }
    hash
}

/// A stable encoding of an op for the trace hash (independent of `Hash` impls).
fn op_words(op: &Op) -> [u64; 4] {
    match *op {
        Op::Alloc { slot, order, kind } => [1, u64::from(slot), u64::from(order), kind as u64],
        Op::Free { slot } => [2, u64::from(slot), 0, 0],
        Op::Touch { slot } => [3, u64::from(slot), 0, 0],
        Op::Compute { ns } => [4, ns, 0, 0],
        Op::Send { slot, to_cpu } => [5, u64::from(slot), u64::from(to_cpu), 0],
        Op::Recv { slot } => [6, u64::from(slot), 0, 0],
        Op::Barrier { id } => [7, u64::from(id), 0, 0],
        Op::Exit => [8, 0, 0, 0],
        Op::Done => [9, 0, 0, 0],
    }
}
