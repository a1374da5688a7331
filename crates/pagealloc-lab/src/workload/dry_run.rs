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

use super::driver::{
    Backend, BarrierTable, ContractError, CpuDriver, Flow, Step, TraceBlock, TraceEntry, TraceHash,
};
use super::{MigrateKind, OpCounts, Workload, WorkloadError};

/// Options of a dry run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRun {
    cpus: u32,
    seed: u64,
    capacity_pages: Option<u64>,
    max_rounds: Option<u64>,
    trace: bool,
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
    /// Hash of every CPU's sequence of completed ops and results
    /// ([`super::driver::TraceHash`]): equal runs, equal hash. The thread executor's
    /// hash of the same ops and results is the same.
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

impl TraceBlock for Block {
    type Slot = Option<Block>;
    fn order(&self) -> u8 {
        self.order
    }
}

/// The dry run's effects: fake frames, `VecDeque` inboxes, barriers opened by the
/// round loop.
struct World {
    capacity_pages: Option<u64>,
    inbox_capacity: usize,
    inbox_resume: usize,
    /// Per sender CPU: blocked on a full inbox, not yet woken (it drained to
    /// `inbox_resume`).
    asleep: Vec<bool>,
    inboxes: Vec<VecDeque<Block>>,
    /// Per receiving CPU: ids of the blocks taken from its inbox since it last held
    /// none (`None` once freed); they count against the inbox until all are freed.
    unfreed: Vec<Vec<Option<u64>>>,
    barriers: BarrierTable,
    /// CPUs released by the last barrier to open, to be completed by the round loop.
    released: Vec<usize>,
    /// Per frame id: freed yet.
    freed: Vec<bool>,
    live_pages: u64,
    peak_live_pages: u64,
    peak_inbox: usize,
}

impl World {
    /// A block `cpu` received has left it (freed, or sent on): once every block it
    /// received is gone, they stop counting against its inbox.
    fn release_received(&mut self, cpu: usize, id: u64) {
        let held = &mut self.unfreed[cpu];
        if let Some(e) = held.iter_mut().find(|e| **e == Some(id)) {
            *e = None;
            if held.iter().all(Option::is_none) {
                held.clear();
            }
        }
    }
}

impl Backend for World {
    type Block = Block;
    type Error = ContractError;

    fn alloc(&mut self, _: usize, order: u8, _: MigrateKind) -> Result<Option<Block>, Self::Error> {
        let pages = 1u64 << order;
        if self
            .capacity_pages
            .is_some_and(|cap| self.live_pages + pages > cap)
        {
            return Ok(None);
        }
        let b = Block {
            id: self.freed.len() as u64,
            order,
        };
        self.freed.push(false);
        self.live_pages += pages;
        self.peak_live_pages = self.peak_live_pages.max(self.live_pages);
        Ok(Some(b))
    }

    fn free(&mut self, cpu: usize, b: Block) -> Result<(), Self::Error> {
        let f = &mut self.freed[b.id as usize];
        if *f {
            return Err(ContractError(format!(
                "cpu {cpu}: block {} freed twice",
                b.id
            )));
        }
        *f = true;
        self.live_pages -= 1 << b.order;
        self.release_received(cpu, b.id);
        Ok(())
    }

    fn touch(&mut self, _: usize, _: Block) -> Result<(), Self::Error> {
        Ok(())
    }

    fn compute(&mut self, _: usize, _: u64) {}

    fn send(&mut self, cpu: usize, to: usize, b: Block) -> Result<Flow, Self::Error> {
        let n = self.inboxes.len();
        let inbox = self
            .inboxes
            .get_mut(to)
            .ok_or_else(|| ContractError(format!("cpu {cpu}: send to cpu {to} of {n}")))?;
        let asleep = &mut self.asleep[cpu];
        let held = inbox.len() + self.unfreed[to].len();
        if held >= self.inbox_capacity || (*asleep && held > self.inbox_resume) {
            *asleep = true;
            return Ok(Flow::Blocked);
        }
        *asleep = false;
        inbox.push_back(b);
        self.peak_inbox = self.peak_inbox.max(inbox.len());
        self.release_received(cpu, b.id);
        Ok(Flow::Done)
    }

    fn recv(&mut self, cpu: usize) -> Result<Option<Block>, Self::Error> {
        let b = self.inboxes[cpu].pop_front();
        if let Some(b) = b {
            self.unfreed[cpu].push(Some(b.id));
        }
        Ok(b)
    }

    fn try_recv(&mut self, cpu: usize) -> Result<Option<Block>, Self::Error> {
        self.recv(cpu)
    }

    fn barrier(&mut self, cpu: usize, id: u32) -> Result<Flow, Self::Error> {
        self.released = self.barriers.arrive(cpu, id)?;
        Ok(Flow::Blocked)
    }

    fn done(&mut self, cpu: usize) -> Result<(), Self::Error> {
        self.barriers.done(cpu)
    }

    fn window_opened(&mut self, _: usize) {}
}

impl DryRun {
    /// A dry run on `cpus` CPUs, CPU `i` seeded with [`super::cpu_seed`]`(seed, i)`.
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
        let name = workload.name();
        let mut cpus: Vec<CpuDriver<Block>> =
            CpuDriver::for_scripts(scripts, self.seed, workload.measured_after())
                .into_iter()
                .map(|d| d.trace(self.trace))
                .collect();
        let mut world = World {
            capacity_pages: self.capacity_pages,
            inbox_capacity: workload.inbox_capacity(),
            inbox_resume: workload.inbox_resume(),
            asleep: vec![false; n],
            inboxes: vec![VecDeque::new(); n],
            unfreed: vec![Vec::new(); n],
            barriers: BarrierTable::new(n),
            released: Vec::new(),
            freed: Vec::new(),
            live_pages: 0,
            peak_live_pages: 0,
            peak_inbox: 0,
        };
        let mut rounds = 0u64;
        while !cpus.iter().all(CpuDriver::is_done) {
            rounds += 1;
            if let Some(max) = self.max_rounds {
                assert!(rounds <= max, "{name}: more than {max} rounds");
            }
            let mut progress = false;
            for c in cpus.iter_mut().filter(|c| !c.is_done()) {
                // A barrier op is issued once; waiting CPUs are not stepped again.
                if matches!(c.pending(), Some(super::Op::Barrier { .. })) {
                    continue;
                }
                let step = c.step(&mut world).unwrap_or_else(|e| panic!("{name}: {e}"));
                progress |= !matches!(step, Step::Blocked(_));
            }
            // Barriers: open when every CPU waits at one.
            for w in std::mem::take(&mut world.released) {
                cpus[w].complete_barrier(&mut world);
                progress = true;
            }
            assert!(
                progress,
                "{name}: deadlock; pending ops {:?}, inbox lengths {:?}",
                cpus.iter().map(CpuDriver::pending).collect::<Vec<_>>(),
                world.inboxes.iter().map(VecDeque::len).collect::<Vec<_>>()
            );
        }

        for (i, inbox) in world.inboxes.iter().enumerate() {
            assert!(
                inbox.is_empty(),
                "cpu {i}: {} blocks left in its inbox",
                inbox.len()
            );
        }
        if let Some(id) = world.freed.iter().position(|f| !f) {
            panic!("{name}: block {id} never freed");
        }
        assert_eq!(world.live_pages, 0);
        let per_cpu: Vec<OpCounts> = cpus.iter().map(|c| c.counts().clone()).collect();
        let measured_per_cpu: Vec<OpCounts> = cpus.iter().map(|c| c.measured().clone()).collect();
        let total = OpCounts::sum(&per_cpu);
        assert_eq!(total.allocs, total.frees, "allocs and frees by order");
        assert_eq!(total.sends, total.recvs);
        Ok(DryRunStats {
            measured: OpCounts::sum(&measured_per_cpu),
            per_cpu,
            measured_per_cpu,
            total,
            rounds,
            ops: cpus.iter().map(CpuDriver::ops).sum(),
            peak_live_pages: world.peak_live_pages,
            peak_inbox: world.peak_inbox,
            trace_hash: TraceHash::combine(cpus.iter().map(CpuDriver::trace_hash)),
            trace: self
                .trace
                .then(|| cpus.iter_mut().filter_map(CpuDriver::take_trace).collect()),
        })
    }
}
