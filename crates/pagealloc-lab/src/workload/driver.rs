//! The executor contract, written once: a slot table and a per-CPU driver over a small
//! [`Backend`] trait.
//!
//! # Design
//! Every executor (the thread executor, the simulator, [`super::dry_run()`]) keeps one
//! [`CpuDriver`] per CPU. The driver owns what the contract of [`super`] is about: the
//! script, its RNG stream, the [`SlotTable`], the op issued and not yet completed, the
//! measured window, the [`OpCounts`] and the [`TraceHash`]. The executor supplies only
//! the *effects* of an op through [`Backend`]: allocate, free, touch, compute, move a
//! block to an inbox and back, wait at a barrier. Whether an effect waits (threads spin
//! on a full inbox), parks a virtual CPU (the simulator) or is retried next round (the
//! dry run) is the executor's business; the driver sees [`Flow::Blocked`] and retries
//! the same op on the next [`CpuDriver::step`] without asking the script again.
//!
//! Barriers that an executor opens itself (all CPUs arrived, as the simulator and the
//! dry run see it) are completed with [`CpuDriver::complete_barrier`]; their arrival and
//! id checks are [`BarrierTable`]'s.
//!
//! # Invariants
//! - A slot is full exactly while its block is live in this CPU's hands: the driver
//!   fills it on a successful `Alloc` or `Recv`, empties it on a completed `Free` or
//!   `Send`, and leaves it alone while an op is blocked.
//! - `next` is called once per completed op (plus once to start), never after `Done`.
//! - The trace hash of a CPU is a function of its sequence of completed ops, their
//!   results, and the executor's stamps ([`Backend::stamp`], [`TraceBlock::trace_word`]).

use std::fmt;

use super::{cpu_seed, CpuScript, MigrateKind, Op, OpCounts, OpResult, SplitMix64, MAX_ORDER};

/// A block as an executor hands it to a slot.
pub trait TraceBlock: Copy + fmt::Debug {
    /// How a [`SlotTable`] stores a slot that may hold this block: `Option<Self>`, or a
    /// smaller form of the same information (the simulator's frames: one word).
    type Slot: SlotCell<Self>;
    /// The block's order (for [`OpCounts::record`]).
    fn order(&self) -> u8;
    /// The word the block adds to the trace hash: its frame number where the executor
    /// is deterministic (the simulator), 0 where it is not (real threads) or where the
    /// frame is a fake (the dry run), so those traces depend on ops and results only.
    fn trace_word(&self) -> u64 {
        0
    }
}

/// A slot of a [`SlotTable`]: empty, or holding one block of type `B`.
pub trait SlotCell<B>: Copy + fmt::Debug {
    /// The empty slot.
    const EMPTY: Self;
    /// The slot holding `block`.
    fn full(block: B) -> Self;
    /// The block it holds, if any.
    fn block(self) -> Option<B>;
}

impl<B: Copy + fmt::Debug> SlotCell<B> for Option<B> {
    const EMPTY: Self = None;
    #[inline]
    fn full(block: B) -> Self {
        Some(block)
    }
    #[inline]
    fn block(self) -> Option<B> {
        self
    }
}

/// A script broke the executor contract (a script bug).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("script broke the executor contract: {0}")]
pub struct ContractError(pub String);

/// Whether an effect completed or must be retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// The op completed.
    Done,
    /// The op cannot complete yet (full or empty inbox, barrier not open): the driver
    /// retries it on its next [`CpuDriver::step`].
    Blocked,
}

/// The effects of ops on one executor. `cpu` is the CPU whose driver calls.
pub trait Backend {
    /// What a slot holds.
    type Block: TraceBlock;
    /// The executor's error; contract breaches convert into it.
    type Error: From<ContractError>;

    /// Allocates a block of 2^`order` pages; `Ok(None)` when the allocation failed
    /// (out of memory: a result the script sees, not an error).
    fn alloc(
        &mut self,
        cpu: usize,
        order: u8,
        kind: MigrateKind,
    ) -> Result<Option<Self::Block>, Self::Error>;
    /// Frees a block the CPU held.
    fn free(&mut self, cpu: usize, block: Self::Block) -> Result<(), Self::Error>;
    /// Writes the whole block.
    fn touch(&mut self, cpu: usize, block: Self::Block) -> Result<(), Self::Error>;
    /// Copies `bytes` between the CPU's user buffer and the start of `block`: into the
    /// block (`into_block`, a copy from user space) or out of it. By default the block is
    /// touched as a whole (executors that model copies override this). `cross_ns_per_kib`:
    /// what a KiB the cache model serves from another CPU's cache costs beyond its
    /// charge ([`Op::CopyIn`]).
    fn copy(
        &mut self,
        cpu: usize,
        block: Self::Block,
        bytes: u32,
        into_block: bool,
        cross_ns_per_kib: u32,
    ) -> Result<(), Self::Error> {
        let _ = (bytes, into_block, cross_ns_per_kib);
        self.touch(cpu, block)
    }
    /// Computes for `ns` nanoseconds.
    fn compute(&mut self, cpu: usize, ns: u64);
    /// Puts `block` into `to_cpu`'s inbox, or reports it full ([`Flow::Blocked`]: the
    /// block stays in the sender's slot). `to_cpu` is checked to exist.
    fn send(&mut self, cpu: usize, to_cpu: usize, block: Self::Block) -> Result<Flow, Self::Error>;
    /// Takes the oldest block of the CPU's own inbox; `Ok(None)` while it is empty.
    fn recv(&mut self, cpu: usize) -> Result<Option<Self::Block>, Self::Error>;
    /// The same without waiting: `Ok(None)` with the inbox empty, and the CPU goes on
    /// (the simulator does not park it).
    fn try_recv(&mut self, cpu: usize) -> Result<Option<Self::Block>, Self::Error>;
    /// Arrives at barrier `id`: [`Flow::Done`] once it is passed (an executor that waits
    /// inside), [`Flow::Blocked`] if the executor opens it later with
    /// [`CpuDriver::complete_barrier`].
    fn barrier(&mut self, cpu: usize, id: u32) -> Result<Flow, Self::Error>;
    /// The CPU's script is done (its slots are empty).
    fn done(&mut self, cpu: usize) -> Result<(), Self::Error>;
    /// The CPU's measured window starts now (see [`super::Workload::measured_after`]);
    /// called before its first op when the whole run is measured.
    fn window_opened(&mut self, cpu: usize);
    /// A word mixed into the trace hash after each completed op: the simulator's virtual
    /// clock; 0 (the default) for executors whose time is not reproducible.
    fn stamp(&self, cpu: usize) -> u64 {
        let _ = cpu;
        0
    }
}

/// A CPU's slot table: `slot_count()` entries, all empty at the start.
///
/// The entries are stored up to the end of the 4 KiB of entries holding the highest
/// slot filled so far (the rest are empty by definition): a script's table is sized for
/// its largest batch (kbuild's: 65 536 pages per task at full scale, 1 MiB of entries
/// per CPU), and writing it whole at the start cost the simulator a page fault per 4 KiB
/// of it for entries most tasks never reach.
///
/// A slot is stored as `B::Slot` ([`TraceBlock::Slot`]): the simulator's frames take 8
/// bytes a slot instead of an `Option`'s 24 (kbuild's tables are read and written at
/// every op of 224 CPUs; a third of the host cache lines).
#[derive(Clone, Debug)]
pub struct SlotTable<B: TraceBlock> {
    cpu: usize,
    /// The table's size: slots `0..len` exist.
    len: usize,
    /// Slots `0..slots.len()`; every slot from `slots.len()` to `len` is empty.
    slots: Vec<B::Slot>,
}

impl<B: TraceBlock> SlotTable<B> {
    /// `n` empty slots of CPU `cpu` (the CPU names errors).
    pub fn new(cpu: usize, n: usize) -> Self {
        SlotTable {
            cpu,
            len: n,
            slots: Vec::new(),
        }
    }

    /// The entry of `slot` (`None` beyond the stored ones), or an error if the table has
    /// no such slot.
    #[inline]
    fn entry(&self, slot: u32) -> Result<Option<B>, ContractError> {
        if slot as usize >= self.len {
            return Err(self.breach(format_args!("slot {slot} beyond its table of {}", self.len)));
        }
        Ok(self.slots.get(slot as usize).and_then(|e| e.block()))
    }

    /// The error of a breach of the slot rules (out of the hot path: the checks run on
    /// every op of every CPU).
    #[cold]
    #[inline(never)]
    fn breach(&self, what: fmt::Arguments<'_>) -> ContractError {
        ContractError(format!("cpu {}: {what}", self.cpu))
    }

    /// Checks that `slot` exists and is empty (the target of `Alloc` and `Recv`).
    #[inline]
    pub fn check_empty(&mut self, slot: u32, what: &str) -> Result<(), ContractError> {
        match self.entry(slot)? {
            None => Ok(()),
            Some(_) => Err(self.breach(format_args!("{what} into full slot {slot}"))),
        }
    }

    /// The block in `slot`, which must be full.
    #[inline]
    pub fn get(&mut self, slot: u32, what: &str) -> Result<B, ContractError> {
        match self.entry(slot)? {
            Some(b) => Ok(b),
            None => Err(self.breach(format_args!("{what} of empty slot {slot}"))),
        }
    }

    /// Puts `block` into `slot` (checked empty before).
    #[inline]
    fn fill(&mut self, slot: u32, block: B) {
        match self.slots.get_mut(slot as usize) {
            Some(e) => *e = B::Slot::full(block),
            None => self.grow_to(slot, block),
        }
    }

    /// [`SlotTable::fill`] beyond the stored slots: stores up to the end of the 4 KiB
    /// of entries holding `slot` (within the table), which that entry's page fault
    /// brought in anyway, so that a table filled in ascending order grows once per 4 KiB
    /// and not at every fill (out of line: the growth inlined cost every fill ~50
    /// instructions in callgrind).
    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, slot: u32, block: B) {
        let per_page = (4096 / std::mem::size_of::<B::Slot>().max(1)).max(1);
        let i = slot as usize;
        let end = ((i / per_page + 1) * per_page).min(self.len).max(i + 1);
        self.slots.resize(end, B::Slot::EMPTY);
        self.slots[i] = B::Slot::full(block);
    }

    /// Empties `slot`.
    #[inline]
    fn clear(&mut self, slot: u32) {
        if let Some(e) = self.slots.get_mut(slot as usize) {
            *e = B::Slot::EMPTY;
        }
    }

    /// The first full slot, if any.
    pub fn first_full(&self) -> Option<usize> {
        self.slots.iter().position(|e| e.block().is_some())
    }
}

/// The trace hash: every completed op of a CPU, its result, its block and the
/// executor's stamp, mixed word by word (rotate, xor, multiply by the 64-bit FNV prime);
/// a run's hash mixes the CPUs' hashes in CPU order ([`TraceHash::combine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceHash(u64);

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash(0xCBF2_9CE4_8422_2325)
    }
}

impl TraceHash {
    /// Mixes one word in.
    pub fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x0100_0000_01B3);
    }

    /// The value.
    pub fn value(self) -> u64 {
        self.0
    }

    /// The run's hash from its CPUs' hashes, in CPU order.
    pub fn combine(per_cpu: impl IntoIterator<Item = u64>) -> u64 {
        let mut h = TraceHash::default();
        for (i, c) in per_cpu.into_iter().enumerate() {
            h.mix(i as u64);
            h.mix(c);
        }
        h.value()
    }
}

/// A stable one-word encoding of an op for the trace hash (independent of `Hash`).
fn op_word(op: &Op) -> u64 {
    match *op {
        Op::Alloc { slot, order, kind } => {
            1 | u64::from(slot) << 8 | u64::from(order) << 40 | (kind as u64) << 48
        }
        Op::Free { slot } => 2 | u64::from(slot) << 8,
        Op::Touch { slot } => 3 | u64::from(slot) << 8,
        Op::CopyIn {
            slot,
            bytes,
            cross_ns_per_kib,
        } => 10 | u64::from(slot) << 8 | u64::from(bytes) << 32 ^ cross_word(cross_ns_per_kib),
        Op::CopyOut {
            slot,
            bytes,
            cross_ns_per_kib,
        } => 11 | u64::from(slot) << 8 | u64::from(bytes) << 32 ^ cross_word(cross_ns_per_kib),
        Op::Compute { ns } => 4 ^ ns << 8,
        Op::Send { slot, to_cpu } => 5 | u64::from(slot) << 8 | u64::from(to_cpu) << 40,
        Op::Recv { slot } => 6 | u64::from(slot) << 8,
        Op::TryRecv { slot } => 12 | u64::from(slot) << 8,
        Op::Barrier { id } => 7 | u64::from(id) << 8,
        Op::Exit => 8,
        Op::Done => 9,
    }
}

/// A copy's cross-CPU rate in [`op_word`]: 0 (every copy but a two-CPU stream's) leaves
/// the word as it was before copies had one.
fn cross_word(ns_per_kib: u32) -> u64 {
    u64::from(ns_per_kib).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// One completed op of a CPU, as recorded with [`CpuDriver::trace`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceEntry {
    /// The op.
    pub op: Op,
    /// Its result.
    pub ok: bool,
    /// The order of the block it acted on (as passed to [`OpCounts::record`]).
    pub block_order: Option<u8>,
}

/// What one [`CpuDriver::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The op completed.
    Completed(Op),
    /// The op is blocked; the next step retries it.
    Blocked(Op),
    /// The script is done; never step again.
    Done,
}

/// One CPU's side of the executor contract: script, RNG, slots, pending op, measured
/// window, counts and trace hash.
#[derive(Debug)]
pub struct CpuDriver<B: TraceBlock> {
    cpu: usize,
    script: Box<dyn CpuScript>,
    rng: SplitMix64,
    slots: SlotTable<B>,
    pending: Option<Op>,
    last: OpResult,
    measured_after: Option<u32>,
    measuring: bool,
    started: bool,
    done: bool,
    counts: OpCounts,
    measured: OpCounts,
    hash: TraceHash,
    ops: u64,
    trace: Option<Vec<TraceEntry>>,
}

impl<B: TraceBlock> CpuDriver<B> {
    /// CPU `cpu` running `script` with [`cpu_seed`]`(seed, cpu)`; the measured window
    /// opens on leaving barrier `measured_after` (or at the start).
    pub fn new(
        cpu: usize,
        script: Box<dyn CpuScript>,
        seed: u64,
        measured_after: Option<u32>,
    ) -> Self {
        CpuDriver {
            cpu,
            slots: SlotTable::new(cpu, script.slot_count() as usize),
            script,
            rng: SplitMix64::new(cpu_seed(seed, cpu as u32)),
            pending: None,
            last: OpResult::OK,
            measured_after,
            measuring: false,
            started: false,
            done: false,
            counts: OpCounts::default(),
            measured: OpCounts::default(),
            hash: TraceHash::default(),
            ops: 0,
            trace: None,
        }
    }

    /// Drivers for `scripts`, CPU `i` running `scripts[i]`.
    pub fn for_scripts(
        scripts: Vec<Box<dyn CpuScript>>,
        seed: u64,
        measured_after: Option<u32>,
    ) -> Vec<Self> {
        scripts
            .into_iter()
            .enumerate()
            .map(|(i, s)| CpuDriver::new(i, s, seed, measured_after))
            .collect()
    }

    /// Also record every completed op ([`CpuDriver::take_trace`]).
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on.then(Vec::new);
        self
    }

    /// Runs the pending op, asking the script for a new one first if there is none.
    ///
    /// # Errors
    /// A breach of the contract ([`ContractError`], converted) or a backend error.
    pub fn step<K: Backend<Block = B>>(&mut self, k: &mut K) -> Result<Step, K::Error> {
        if self.done {
            return Ok(Step::Done);
        }
        if !self.started {
            self.started = true;
            if self.measured_after.is_none() {
                self.measuring = true;
                k.window_opened(self.cpu);
            }
        }
        let op = match self.pending {
            Some(op) => op,
            None => {
                let op = self.script.next(self.last, &mut self.rng);
                self.pending = Some(op);
                op
            }
        };
        let cpu = self.cpu;
        let (ok, block): (bool, Option<B>) = match op {
            Op::Alloc { slot, order, kind } => {
                if order > MAX_ORDER {
                    return Err(ContractError(format!("cpu {cpu}: order {order}")).into());
                }
                self.slots.check_empty(slot, "alloc")?;
                match k.alloc(cpu, order, kind)? {
                    Some(b) => {
                        self.slots.fill(slot, b);
                        (true, Some(b))
                    }
                    None => (false, None),
                }
            }
            Op::Free { slot } => {
                let b = self.slots.get(slot, "free")?;
                self.slots.clear(slot);
                k.free(cpu, b)?;
                (true, Some(b))
            }
            Op::Touch { slot } => {
                let b = self.slots.get(slot, "touch")?;
                k.touch(cpu, b)?;
                (true, Some(b))
            }
            Op::CopyIn {
                slot,
                bytes,
                cross_ns_per_kib,
            }
            | Op::CopyOut {
                slot,
                bytes,
                cross_ns_per_kib,
            } => {
                let b = self.slots.get(slot, "copy")?;
                let into_block = matches!(op, Op::CopyIn { .. });
                k.copy(cpu, b, bytes, into_block, cross_ns_per_kib)?;
                (true, Some(b))
            }
            Op::Compute { ns } => {
                k.compute(cpu, ns);
                (true, None)
            }
            Op::Exit => (true, None),
            Op::Send { slot, to_cpu } => {
                let b = self.slots.get(slot, "send")?;
                if k.send(cpu, to_cpu as usize, b)? == Flow::Blocked {
                    return Ok(Step::Blocked(op));
                }
                self.slots.clear(slot);
                (true, Some(b))
            }
            Op::Recv { slot } => {
                self.slots.check_empty(slot, "recv")?;
                let Some(b) = k.recv(cpu)? else {
                    return Ok(Step::Blocked(op));
                };
                self.slots.fill(slot, b);
                (true, Some(b))
            }
            Op::TryRecv { slot } => {
                self.slots.check_empty(slot, "recv")?;
                match k.try_recv(cpu)? {
                    Some(b) => {
                        self.slots.fill(slot, b);
                        (true, Some(b))
                    }
                    None => (false, None),
                }
            }
            Op::Barrier { id } => {
                if k.barrier(cpu, id)? == Flow::Blocked {
                    return Ok(Step::Blocked(op));
                }
                (true, None)
            }
            Op::Done => {
                if let Some(s) = self.slots.first_full() {
                    return Err(
                        ContractError(format!("cpu {cpu}: done with a block in slot {s}")).into(),
                    );
                }
                self.done = true;
                self.pending = None;
                k.done(cpu)?;
                return Ok(Step::Done);
            }
        };
        self.complete(k, op, ok, block);
        Ok(Step::Completed(op))
    }

    /// Completes the pending barrier, which the executor opened (every CPU arrived).
    ///
    /// # Panics
    /// If the pending op is not a barrier.
    pub fn complete_barrier<K: Backend<Block = B>>(&mut self, k: &mut K) {
        let op = self.pending.expect("waiting at a barrier");
        assert!(
            matches!(op, Op::Barrier { .. }),
            "cpu {}: {op:?} is not a barrier",
            self.cpu
        );
        self.complete(k, op, true, None);
    }

    fn complete<K: Backend<Block = B>>(&mut self, k: &mut K, op: Op, ok: bool, block: Option<B>) {
        let order = match op {
            Op::Alloc { .. } => None,
            _ => block.map(|b| b.order()),
        };
        self.counts.record(&op, ok, order);
        // A window open from the start measures what `counts` does: no second record.
        if self.measuring && self.measured_after.is_some() {
            self.measured.record(&op, ok, order);
        }
        if let (Some(id), Op::Barrier { id: b }) = (self.measured_after, op) {
            if id == b && !self.measuring {
                self.measuring = true;
                k.window_opened(self.cpu);
            }
        }
        if let Some(t) = &mut self.trace {
            t.push(TraceEntry {
                op,
                ok,
                block_order: order,
            });
        }
        let word = match (op, block) {
            (Op::Alloc { .. } | Op::TryRecv { .. }, None) => u64::MAX,
            (_, Some(b)) => b.trace_word(),
            (_, None) => 0,
        };
        for w in [op_word(&op), u64::from(ok), word, k.stamp(self.cpu)] {
            self.hash.mix(w);
        }
        self.ops += 1;
        self.pending = None;
        self.last = OpResult { ok };
    }

    /// The CPU.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
    /// The op issued and not yet completed.
    pub fn pending(&self) -> Option<Op> {
        self.pending
    }
    /// Whether the script is done.
    pub fn is_done(&self) -> bool {
        self.done
    }
    /// Whether the measured window is open.
    pub fn measuring(&self) -> bool {
        self.measuring
    }
    /// Counts of the whole run so far.
    pub fn counts(&self) -> &OpCounts {
        &self.counts
    }
    /// Counts of the measured window so far (the whole run's when the window opens at
    /// the start).
    pub fn measured(&self) -> &OpCounts {
        if self.measured_after.is_none() {
            &self.counts
        } else {
            &self.measured
        }
    }
    /// Ops completed.
    pub fn ops(&self) -> u64 {
        self.ops
    }
    /// This CPU's trace hash so far.
    pub fn trace_hash(&self) -> u64 {
        self.hash.value()
    }
    /// The recorded trace (with [`CpuDriver::trace`] on).
    pub fn take_trace(&mut self) -> Option<Vec<TraceEntry>> {
        self.trace.take()
    }
}

/// Barriers as an executor that sees every CPU sees them (the simulator, the dry run):
/// who waits at which id, and the contract's checks (one id at a time, no CPU done
/// while others wait).
#[derive(Clone, Debug)]
pub struct BarrierTable {
    cpus: usize,
    id: Option<u32>,
    waiting: Vec<usize>,
    done: usize,
}

impl BarrierTable {
    /// Barriers of `cpus` CPUs.
    pub fn new(cpus: usize) -> Self {
        BarrierTable {
            cpus,
            id: None,
            waiting: Vec::new(),
            done: 0,
        }
    }

    /// `cpu` arrives at barrier `id`. Returns the CPUs to release (all of them, the last
    /// arrival included) when it was the last one, else an empty list.
    ///
    /// # Errors
    /// Another CPU waits at another id, or a CPU is done while this one waits.
    pub fn arrive(&mut self, cpu: usize, id: u32) -> Result<Vec<usize>, ContractError> {
        if let Some(other) = self.id.filter(|&o| o != id) {
            return Err(ContractError(format!(
                "cpus wait at different barriers {other} and {id}"
            )));
        }
        if self.done > 0 {
            return Err(ContractError(format!(
                "{} cpu(s) finished while cpu {cpu} waits at barrier {id}",
                self.done
            )));
        }
        self.id = Some(id);
        self.waiting.push(cpu);
        if self.waiting.len() == self.cpus {
            self.id = None;
            return Ok(std::mem::take(&mut self.waiting));
        }
        Ok(Vec::new())
    }

    /// `cpu`'s script is done.
    ///
    /// # Errors
    /// Others wait at a barrier.
    pub fn done(&mut self, cpu: usize) -> Result<(), ContractError> {
        self.done += 1;
        match self.id {
            Some(id) => Err(ContractError(format!(
                "cpu {cpu} finished while others wait at barrier {id}"
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_table_stores_only_up_to_its_highest_filled_slot() {
        use pagealloc::{Frame, Pfn};
        // The simulator's frames: one word a slot (`FrameSlot`).
        let f = |pfn, order| Frame::new(Pfn(pfn), order);
        let mut t: SlotTable<Frame> = SlotTable::new(3, 3000);
        assert!(t.check_empty(2999, "alloc").is_ok());
        assert!(t.check_empty(3000, "alloc").is_err(), "beyond the table");
        assert!(t.get(5, "free").is_err(), "empty");
        assert_eq!(t.first_full(), None);
        t.fill(700, f(7, 3));
        // To the end of the 4 KiB of 8-byte entries holding slot 700.
        assert_eq!(t.slots.len(), 1024);
        assert_eq!(t.get(700, "free"), Ok(f(7, 3)));
        assert!(t.check_empty(700, "alloc").is_err(), "full");
        assert!(t.check_empty(701, "alloc").is_ok());
        // Frame 0 of order 0 and the largest PFN a slot keeps are full slots.
        t.fill(2, f(0, 0));
        t.fill(3, f((1 << 56) - 1, 10));
        assert_eq!(t.slots.len(), 1024, "a lower slot does not grow the store");
        // The last page of entries ends with the table.
        t.fill(2999, f(9, 0));
        assert_eq!(t.slots.len(), 3000);
        assert_eq!(t.get(2999, "free"), Ok(f(9, 0)));
        t.clear(2999);
        assert_eq!(t.first_full(), Some(2));
        assert_eq!(t.get(2, "free"), Ok(f(0, 0)));
        assert_eq!(t.get(3, "free"), Ok(f((1 << 56) - 1, 10)));
        t.clear(2);
        t.clear(3);
        t.clear(700);
        assert_eq!(t.first_full(), None);
        assert!(t.get(700, "free").is_err());
    }
}
