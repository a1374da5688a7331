//! A stream's two ends on one CPU: the writer and the reader take turns on one virtual
//! CPU, as the kernel's scheduler runs two tasks pinned to one CPU.
//!
//! # Design
//! The simulator runs one [`CpuScript`] per virtual CPU; this one holds both ends'
//! scripts and interleaves their ops, so neither the executor nor the engine needs a
//! run queue. The writer runs until its next message would not fit the socket buffer
//! (the executor's inbox: queued blocks plus those the reader holds, as the executor
//! counts them) or, with `turn` > 0, until it has queued `turn` messages (the reader,
//! woken by the first of them, preempts it then: the kernel switched on average every
//! ~1.7 AF_UNIX messages on one CPU, `pagealloc predict unix_stream --cpus 1`); the
//! reader then runs until the buffer is empty or, when the writer stopped on a full
//! buffer, until it has drained to `resume` blocks: the socket's write-space rule wakes
//! the writer there, and the woken writer preempts the reader (TCP on one CPU: the
//! live writer slept 0.010-0.011 times per write, the reader never, its switches all
//! preemptions; `sk_stream_write_space` wakes it at two thirds of its buffer, 102 of
//! 154 messages: 0.0096). Each hand-over is one `Compute` of
//! `switch_ns`: the sleeper's context switch and the local wakeup (no IPI, no idle).
//! Sends and receives go through the CPU's own inbox, so every block is still counted
//! as the executor counts a message; a send never blocks (it is issued only when it
//! fits) and a receive never finds the inbox empty, so the CPU never parks.
//!
//! # Invariants
//! - `queued` + `held` mirror the executor's inbox and the receiver's unfreed blocks
//!   exactly: the script issues a `Send` only when the executor would accept it.
//! - The writer's slots are `0..w`, the reader's `w..w + r`; each end sees its own.

use super::{CpuScript, Op, OpResult, Rng, Slot};

/// The writer's index in [`SharedCpu::ends`].
const WRITER: usize = 0;
/// The reader's.
const READER: usize = 1;

/// A writer and a reader on one CPU.
#[derive(Debug)]
pub(crate) struct SharedCpu {
    ends: [Box<dyn CpuScript>; 2],
    /// First slot of each end.
    base: [Slot; 2],
    /// An op an end produced that waits for its turn (a send that would not fit, a
    /// receive from an empty buffer).
    pending: [Option<Op>; 2],
    /// The result of each end's last issued op.
    last: [OpResult; 2],
    done: [bool; 2],
    current: usize,
    /// The end whose op was issued last (`None`: a hand-over's `Compute`).
    issued_by: Option<usize>,
    /// Blocks in the inbox.
    queued: usize,
    /// Blocks the reader received and has not freed.
    held: usize,
    capacity: usize,
    /// Blocks the buffer drains to before a writer that stopped on a full buffer is
    /// woken (and preempts the reader).
    resume: usize,
    /// The writer stopped on a full buffer.
    blocked: bool,
    /// Blocks the writer queues per turn (0: until the buffer is full).
    turn_blocks: usize,
    /// Blocks queued in the current turn.
    sent: usize,
    switch_ns: u64,
}

impl SharedCpu {
    /// `writer` and `reader` (each sending to or receiving from CPU 0) on one CPU whose
    /// inbox holds `capacity` blocks; the writer yields after `turn_blocks` blocks (0:
    /// when full) and, stopped on a full inbox, takes the CPU back once it has drained
    /// to `resume` blocks; a hand-over costs `switch_ns`.
    pub(crate) fn new(
        writer: Box<dyn CpuScript>,
        reader: Box<dyn CpuScript>,
        capacity: usize,
        resume: usize,
        turn_blocks: usize,
        switch_ns: u64,
    ) -> Self {
        let base = [0, writer.slot_count()];
        SharedCpu {
            ends: [writer, reader],
            base,
            pending: [None, None],
            last: [OpResult::OK; 2],
            done: [false; 2],
            current: WRITER,
            issued_by: None,
            queued: 0,
            held: 0,
            capacity: capacity.max(1),
            resume,
            blocked: false,
            turn_blocks,
            sent: 0,
            switch_ns,
        }
    }

    /// Hands the CPU to the other end: a context switch.
    fn switch(&mut self) -> Op {
        self.current = 1 - self.current;
        self.sent = 0;
        self.issued_by = None;
        Op::Compute { ns: self.switch_ns }
    }

    fn remap(&self, op: Op, end: usize) -> Op {
        let b = self.base[end];
        match op {
            Op::Alloc { slot, order, kind } => Op::Alloc {
                slot: slot + b,
                order,
                kind,
            },
            Op::Free { slot } => Op::Free { slot: slot + b },
            Op::Touch { slot } => Op::Touch { slot: slot + b },
            Op::CopyIn {
                slot,
                bytes,
                cross_ns_per_kib,
            } => Op::CopyIn {
                slot: slot + b,
                bytes,
                cross_ns_per_kib,
            },
            Op::CopyOut {
                slot,
                bytes,
                cross_ns_per_kib,
            } => Op::CopyOut {
                slot: slot + b,
                bytes,
                cross_ns_per_kib,
            },
            Op::Send { slot, .. } => Op::Send {
                slot: slot + b,
                to_cpu: 0,
            },
            Op::Recv { slot } => Op::Recv { slot: slot + b },
            Op::TryRecv { slot } => Op::TryRecv { slot: slot + b },
            other => other,
        }
    }
}

impl CpuScript for SharedCpu {
    fn slot_count(&self) -> Slot {
        self.base[READER] + self.ends[READER].slot_count()
    }

    fn next(&mut self, last: OpResult, rng: &mut dyn Rng) -> Op {
        if let Some(e) = self.issued_by.take() {
            self.last[e] = last;
        }
        loop {
            let t = self.current;
            if self.done[t] {
                if self.done[1 - t] {
                    return Op::Done;
                }
                self.current = 1 - t;
                continue;
            }
            let op = match self.pending[t].take() {
                Some(op) => op,
                None => {
                    let r = std::mem::replace(&mut self.last[t], OpResult::OK);
                    self.ends[t].next(r, rng)
                }
            };
            match op {
                Op::Done => {
                    self.done[t] = true;
                    continue;
                }
                Op::Send { .. } => {
                    let full = self.queued + self.held >= self.capacity;
                    let turn_over = self.turn_blocks > 0 && self.sent >= self.turn_blocks;
                    if (full || turn_over) && !self.done[READER] {
                        self.blocked = full;
                        self.pending[t] = Some(op);
                        return self.switch();
                    }
                    self.queued += 1;
                    self.sent += 1;
                }
                Op::Recv { .. } => {
                    if self.blocked && self.queued + self.held <= self.resume {
                        // The write-space wakeup: the woken writer preempts the reader.
                        self.blocked = false;
                        self.pending[t] = Some(op);
                        return self.switch();
                    }
                    if self.queued == 0 {
                        self.pending[t] = Some(op);
                        if self.done[WRITER] {
                            // Nothing will come: the executor parks the CPU on the
                            // receive and reports the deadlock (a script bug).
                            self.issued_by = Some(t);
                            return self.remap(op, t);
                        }
                        return self.switch();
                    }
                    self.queued -= 1;
                    self.held += 1;
                }
                Op::Free { .. } if t == READER => self.held = self.held.saturating_sub(1),
                _ => {}
            }
            self.issued_by = Some(t);
            return self.remap(op, t);
        }
    }
}
