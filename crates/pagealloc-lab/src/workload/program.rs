//! Phase programs: the small interpreter most scripts are written in.
//!
//! # Design
//! A script is a [`Program`], which produces [`Phase`]s in batches (one page_fault1 loop,
//! one kbuild task, one message), run by a [`Runner`], which turns phases into [`Op`]s
//! and implements [`CpuScript`]. The runner tracks which slots hold a block, so phases
//! can say "free every held slot of this range" and stay correct after an allocation
//! failed: a failed [`Fill`] leaves a short prefix (or a gap, when later phases fill
//! other ranges), and the touches, frees and sends skip the empty slots.
//!
//! Hand-written state machines for ten workloads were longer and each got the
//! alloc-failure path subtly wrong in a different way; one interpreter gets it right once.
//!
//! # Invariants
//! - `held` is exactly the set of slots the executor has full (given the contract in
//!   the module docs of [`super`]).
//! - At `Done`, `held` is empty: asserted, since a leak is a script bug.
//! - Memory: a batch is O(phases), never O(pages); ranges are not expanded.

use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;

use super::{CpuScript, MigrateKind, Op, OpResult, Rng, Slot};

/// Allocate one block into each slot of a range, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fill {
    slots: Range<Slot>,
    order: u8,
    kind: MigrateKind,
    touch: bool,
    work_ns: u64,
    unmovable_per_mille: u32,
    retries: u32,
    backoff_ns: u64,
}

/// [`Fill::retry`] count meaning "until it succeeds".
pub(crate) const RETRY_FOREVER: u32 = u32::MAX;

impl Fill {
    /// Allocates `order`/`kind` blocks into `slots`; the first failure ends the phase.
    pub(crate) fn new(slots: Range<Slot>, order: u8, kind: MigrateKind) -> Self {
        Fill {
            slots,
            order,
            kind,
            touch: false,
            work_ns: 0,
            unmovable_per_mille: 0,
            retries: 0,
            backoff_ns: 0,
        }
    }

    /// Touches each block right after allocating it (a page fault zeroes the page).
    pub(crate) fn touching(mut self) -> Self {
        self.touch = true;
        self
    }

    /// Computes `ns` after each block is allocated (and touched): the work of the page
    /// fault outside the allocator. 0 (the default) emits nothing.
    pub(crate) fn working(mut self, ns: u64) -> Self {
        self.work_ns = ns;
        self
    }

    /// Requests `Unmovable` instead of the phase's kind with probability `per_mille`/1000
    /// (page tables among anonymous pages). Draws from the RNG only when non-zero.
    pub(crate) fn unmovable_per_mille(mut self, per_mille: u32) -> Self {
        self.unmovable_per_mille = per_mille;
        self
    }

    /// Slots the phase allocates into.
    pub(crate) fn slot_count(&self) -> Slot {
        self.slots.end - self.slots.start
    }

    /// What the phase's blocks are for.
    pub(crate) fn kind(&self) -> MigrateKind {
        self.kind
    }

    /// The phase's first `n` slots and the rest, each with the phase's settings.
    pub(crate) fn split(self, n: Slot) -> (Fill, Fill) {
        let at = self.slots.start + n.min(self.slot_count());
        let mut rest = self.clone();
        rest.slots = at..self.slots.end;
        let mut first = self;
        first.slots.end = at;
        (first, rest)
    }

    /// On failure, computes `backoff_ns` and retries the same slot, up to `retries`
    /// times in a row ([`RETRY_FOREVER`]: no limit) before ending the phase.
    pub(crate) fn retry(mut self, retries: u32, backoff_ns: u64) -> Self {
        self.retries = retries;
        self.backoff_ns = backoff_ns;
        self
    }
}

/// One step of a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Allocate into a range of slots.
    Fill(Fill),
    /// Copy `bytes` between the user buffer and every held slot of the range: into the
    /// blocks (`into_block`) or out of them.
    Copy {
        /// Slots copied.
        slots: Range<Slot>,
        /// Bytes per slot.
        bytes: u32,
        /// Direction: into the blocks (`CopyIn`) or out (`CopyOut`).
        into_block: bool,
        /// The ops' `cross_ns_per_kib` ([`Op::CopyIn`]).
        cross_ns_per_kib: u32,
    },
    /// Free every held slot of the range, ascending (an unmap, an exit).
    Free(Range<Slot>),
    /// Free each held slot of the range with probability `percent` / 100.
    FreeRandom {
        /// Slots considered.
        slots: Range<Slot>,
        /// Probability of freeing each held slot, in %.
        percent: u32,
    },
    /// Send every held slot of the range to `to_cpu`, ascending.
    Send {
        /// Slots sent.
        slots: Range<Slot>,
        /// Destination CPU.
        to_cpu: u32,
    },
    /// Receive into each slot of the range, ascending.
    Recv(Range<Slot>),
    /// Receive into the slots of the range, ascending, what the inbox holds now: stops
    /// at the first empty inbox, never waits ([`Op::TryRecv`]).
    TryRecv(Range<Slot>),
    /// Emit one op as is: `Alloc` (its failure just leaves the slot empty), `Compute`,
    /// `Barrier` or `Exit`.
    Op(Op),
}

/// A script written as batches of phases.
pub(crate) trait Program: fmt::Debug + Send {
    /// The slot table size the phases need (see [`CpuScript::slot_count`]).
    fn slot_count(&self) -> Slot;

    /// Appends the next batch of phases to `out` and returns `true`, or returns `false`
    /// (appending nothing) when the program is finished. A batch is never empty.
    fn refill(&mut self, rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool;
}

/// A program that yields one fixed batch (or none: an idle CPU).
#[derive(Clone, Debug)]
pub(crate) struct Once {
    slot_count: Slot,
    phases: Vec<Phase>,
}

impl Once {
    /// A program running `phases` once with a table of `slot_count` slots.
    pub(crate) fn new(slot_count: Slot, phases: Vec<Phase>) -> Self {
        Once { slot_count, phases }
    }

    /// A CPU with nothing to do.
    pub(crate) fn idle() -> Self {
        Once::new(0, Vec::new())
    }
}

impl Program for Once {
    fn slot_count(&self) -> Slot {
        self.slot_count
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.phases.is_empty() {
            return false;
        }
        out.extend(self.phases.drain(..));
        true
    }
}

/// Boxes a program as a [`CpuScript`].
pub(crate) fn script<P: Program + 'static>(program: P) -> Box<dyn CpuScript> {
    Box::new(Runner::new(program))
}

/// Runs a [`Program`] as a [`CpuScript`].
#[derive(Debug)]
pub(crate) struct Runner<P> {
    program: P,
    queue: VecDeque<Phase>,
    active: Option<Active>,
    held: Held,
    /// The slot of the `Alloc` issued last, whose result the next call brings.
    pending_alloc: Option<Slot>,
    finished: bool,
}

impl<P: Program> Runner<P> {
    pub(crate) fn new(program: P) -> Self {
        let held = Held::new(program.slot_count());
        Runner {
            program,
            queue: VecDeque::new(),
            active: None,
            held,
            pending_alloc: None,
            finished: false,
        }
    }

    /// Updates `held` for an op about to be returned, checking the slot rules.
    fn issue(&mut self, op: Op) -> Op {
        match op {
            Op::Alloc { slot, .. } => {
                assert!(!self.held.contains(slot), "alloc into full slot {slot}");
                self.pending_alloc = Some(slot);
            }
            Op::Recv { slot } => {
                assert!(!self.held.contains(slot), "recv into full slot {slot}");
                self.held.insert(slot);
            }
            Op::TryRecv { slot } => {
                // Held once it succeeded, as an allocation.
                assert!(!self.held.contains(slot), "recv into full slot {slot}");
                self.pending_alloc = Some(slot);
            }
            Op::Free { slot } | Op::Send { slot, .. } => self.held.remove(slot),
            Op::Touch { slot } | Op::CopyIn { slot, .. } | Op::CopyOut { slot, .. } => {
                assert!(
                    self.held.contains(slot),
                    "touch or copy of empty slot {slot}"
                )
            }
            Op::Compute { .. } | Op::Barrier { .. } | Op::Exit | Op::Done => {}
        }
        op
    }
}

impl<P: Program> CpuScript for Runner<P> {
    fn slot_count(&self) -> Slot {
        self.program.slot_count()
    }

    fn next(&mut self, last: OpResult, rng: &mut dyn Rng) -> Op {
        if let Some(slot) = self.pending_alloc.take() {
            if last.ok {
                self.held.insert(slot);
            }
        }
        loop {
            if let Some(active) = &mut self.active {
                if let Some(op) = active.step(last, rng, &self.held) {
                    return self.issue(op);
                }
                self.active = None;
            }
            match self.queue.pop_front() {
                Some(Phase::Op(op)) => return self.issue(op),
                Some(phase) => self.active = Some(Active::start(phase)),
                None => {
                    if self.finished || !self.program.refill(rng, &mut self.queue) {
                        self.finished = true;
                        assert_eq!(self.held.count, 0, "script done with blocks held");
                        return Op::Done;
                    }
                    assert!(!self.queue.is_empty(), "program refilled an empty batch");
                }
            }
        }
    }
}

/// The phase being run, with its cursor.
#[derive(Debug)]
enum Active {
    Fill {
        fill: Fill,
        next: Slot,
        awaiting: Awaiting,
        retries_left: u32,
    },
    /// Copy, free or send the held slots of a range.
    Scan {
        slots: Range<Slot>,
        action: Scan,
    },
    Recv(Range<Slot>),
    /// Receive without waiting; `issued`: a `TryRecv` was issued (its result is `last`).
    TryRecv {
        slots: Range<Slot>,
        issued: bool,
    },
}

/// What a fill issued last, hence what `last` means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Awaiting {
    Nothing,
    Alloc,
    Touch,
    Work,
    Backoff,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scan {
    Copy {
        bytes: u32,
        into_block: bool,
        cross: u32,
    },
    Free,
    FreeRandom(u32),
    Send(u32),
}

impl Active {
    fn start(phase: Phase) -> Self {
        let scan = |slots, action| Active::Scan { slots, action };
        match phase {
            Phase::Fill(fill) => Active::Fill {
                next: fill.slots.start,
                retries_left: fill.retries,
                fill,
                awaiting: Awaiting::Nothing,
            },
            Phase::Copy {
                slots,
                bytes,
                into_block,
                cross_ns_per_kib: cross,
            } => scan(
                slots,
                Scan::Copy {
                    bytes,
                    into_block,
                    cross,
                },
            ),
            Phase::Free(slots) => scan(slots, Scan::Free),
            Phase::FreeRandom { slots, percent } => scan(slots, Scan::FreeRandom(percent)),
            Phase::Send { slots, to_cpu } => scan(slots, Scan::Send(to_cpu)),
            Phase::Recv(slots) => Active::Recv(slots),
            Phase::TryRecv(slots) => Active::TryRecv {
                slots,
                issued: false,
            },
            Phase::Op(_) => unreachable!("single ops are issued directly"),
        }
    }

    /// The phase's next op, or `None` when it is over.
    fn step(&mut self, last: OpResult, rng: &mut dyn Rng, held: &Held) -> Option<Op> {
        match self {
            Active::Fill {
                fill,
                next,
                awaiting,
                retries_left,
            } => {
                match *awaiting {
                    Awaiting::Alloc if last.ok => {
                        if fill.touch {
                            *awaiting = Awaiting::Touch;
                            return Some(Op::Touch { slot: *next });
                        }
                        if fill.work_ns > 0 {
                            *awaiting = Awaiting::Work;
                            return Some(Op::Compute { ns: fill.work_ns });
                        }
                        *next += 1;
                        *retries_left = fill.retries;
                    }
                    Awaiting::Alloc => {
                        if *retries_left == 0 {
                            *awaiting = Awaiting::Nothing;
                            *next = fill.slots.end;
                            return None;
                        }
                        if fill.retries != RETRY_FOREVER {
                            *retries_left -= 1;
                        }
                        *awaiting = Awaiting::Backoff;
                        return Some(Op::Compute {
                            ns: fill.backoff_ns,
                        });
                    }
                    Awaiting::Touch if fill.work_ns > 0 => {
                        *awaiting = Awaiting::Work;
                        return Some(Op::Compute { ns: fill.work_ns });
                    }
                    Awaiting::Touch | Awaiting::Work => {
                        *next += 1;
                        *retries_left = fill.retries;
                    }
                    Awaiting::Backoff | Awaiting::Nothing => {}
                }
                if *next >= fill.slots.end {
                    return None;
                }
                let kind =
                    if fill.unmovable_per_mille > 0 && rng.per_mille(fill.unmovable_per_mille) {
                        MigrateKind::Unmovable
                    } else {
                        fill.kind
                    };
                *awaiting = Awaiting::Alloc;
                Some(Op::Alloc {
                    slot: *next,
                    order: fill.order,
                    kind,
                })
            }
            Active::Scan { slots, action } => {
                for slot in slots.by_ref() {
                    if !held.contains(slot) {
                        continue;
                    }
                    match *action {
                        Scan::Copy {
                            bytes,
                            into_block: true,
                            cross,
                        } => {
                            return Some(Op::CopyIn {
                                slot,
                                bytes,
                                cross_ns_per_kib: cross,
                            })
                        }
                        Scan::Copy {
                            bytes,
                            into_block: false,
                            cross,
                        } => {
                            return Some(Op::CopyOut {
                                slot,
                                bytes,
                                cross_ns_per_kib: cross,
                            })
                        }
                        Scan::Free => return Some(Op::Free { slot }),
                        Scan::FreeRandom(percent) => {
                            if rng.percent(percent) {
                                return Some(Op::Free { slot });
                            }
                        }
                        Scan::Send(to_cpu) => return Some(Op::Send { slot, to_cpu }),
                    }
                }
                None
            }
            Active::Recv(slots) => slots.next().map(|slot| Op::Recv { slot }),
            Active::TryRecv { slots, issued } => {
                if *issued && !last.ok {
                    return None;
                }
                *issued = true;
                slots.next().map(|slot| Op::TryRecv { slot })
            }
        }
    }
}

/// The set of full slots: a bitset with a population count.
struct Held {
    bits: Vec<u64>,
    count: u64,
}

impl Held {
    fn new(slots: Slot) -> Self {
        Held {
            bits: vec![0; (slots as usize).div_ceil(64)],
            count: 0,
        }
    }

    fn contains(&self, slot: Slot) -> bool {
        let (word, bit) = (slot as usize / 64, slot % 64);
        self.bits.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    fn insert(&mut self, slot: Slot) {
        let (word, bit) = (slot as usize / 64, slot % 64);
        let w = self
            .bits
            .get_mut(word)
            .unwrap_or_else(|| panic!("slot {slot} beyond the slot table"));
        debug_assert!(*w & (1 << bit) == 0);
        *w |= 1 << bit;
        self.count += 1;
    }

    fn remove(&mut self, slot: Slot) {
        assert!(self.contains(slot), "free or send of empty slot {slot}");
        self.bits[slot as usize / 64] &= !(1 << (slot % 64));
        self.count -= 1;
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Held({} of {} slots)", self.count, self.bits.len() * 64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::SplitMix64;

    /// Drives a script with a scripted sequence of alloc results, returning its ops.
    fn drive(script: &mut dyn CpuScript, mut alloc_ok: impl FnMut(u32) -> bool) -> Vec<Op> {
        let mut rng = SplitMix64::new(1);
        let mut ops = Vec::new();
        let mut last = OpResult::OK;
        let mut allocs = 0;
        loop {
            let op = script.next(last, &mut rng);
            ops.push(op);
            last = match op {
                Op::Alloc { .. } => {
                    allocs += 1;
                    OpResult {
                        ok: alloc_ok(allocs),
                    }
                }
                Op::Done => return ops,
                _ => OpResult::OK,
            };
        }
    }

    #[test]
    fn fill_touch_free() {
        let phases = vec![
            Phase::Fill(Fill::new(0..2, 0, MigrateKind::Movable).touching()),
            Phase::Free(0..2),
        ];
        let mut s = Runner::new(Once::new(2, phases));
        let alloc = |slot| Op::Alloc {
            slot,
            order: 0,
            kind: MigrateKind::Movable,
        };
        assert_eq!(
            drive(&mut s, |_| true),
            vec![
                alloc(0),
                Op::Touch { slot: 0 },
                alloc(1),
                Op::Touch { slot: 1 },
                Op::Free { slot: 0 },
                Op::Free { slot: 1 },
                Op::Done
            ]
        );
    }

    #[test]
    fn failed_fill_is_truncated_and_frees_skip_the_gap() {
        let phases = vec![
            Phase::Fill(Fill::new(0..3, 0, MigrateKind::Movable)),
            Phase::Fill(Fill::new(3..4, 1, MigrateKind::Movable)),
            Phase::Free(0..4),
        ];
        let mut s = Runner::new(Once::new(4, phases));
        // Second alloc fails: the first fill stops at slot 1; slot 3 still gets filled.
        let ops = drive(&mut s, |n| n != 2);
        let frees: Vec<Op> = ops
            .iter()
            .copied()
            .filter(|op| matches!(op, Op::Free { .. }))
            .collect();
        assert_eq!(frees, vec![Op::Free { slot: 0 }, Op::Free { slot: 3 }]);
    }

    #[test]
    fn retries_back_off_then_give_up() {
        let fill = Fill::new(0..1, 0, MigrateKind::Movable).retry(2, 7);
        let mut s = Runner::new(Once::new(1, vec![Phase::Fill(fill), Phase::Free(0..1)]));
        let ops = drive(&mut s, |_| false);
        let computes = ops
            .iter()
            .filter(|op| **op == Op::Compute { ns: 7 })
            .count();
        assert_eq!(computes, 2);
        assert_eq!(
            ops.iter()
                .filter(|op| matches!(op, Op::Alloc { .. }))
                .count(),
            3
        );
        assert_eq!(ops.last(), Some(&Op::Done));
    }

    #[test]
    fn idle_is_done_at_once() {
        let mut s = Runner::new(Once::idle());
        assert_eq!(drive(&mut s, |_| true), vec![Op::Done]);
    }
}
