//! Operation counts: what a run did, independent of how long it took.
//!
//! # Design
//! Both executors keep one [`OpCounts`] per CPU (two with a measured window) and feed
//! every completed op to [`OpCounts::record`], so a workload's [`work_units`] mean the
//! same on threads, in the simulator and in the dry run. Per-CPU counts are summed with
//! [`OpCounts::merge`] for a group or the whole run.
//!
//! [`work_units`]: super::Workload::work_units
//!
//! # Invariants
//! At the end of a complete run, over all CPUs: `allocs[o] == frees[o]` for every order
//! `o`, and `sends == recvs`.

use super::{Op, NR_ORDERS};

/// Counts of completed operations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpCounts {
    /// Successful allocations, by order.
    pub allocs: [u64; NR_ORDERS],
    /// Failed allocations, by order.
    pub alloc_failures: [u64; NR_ORDERS],
    /// Frees, by the order of the freed block.
    pub frees: [u64; NR_ORDERS],
    /// Touch ops.
    pub touches: u64,
    /// Base pages written by touch ops (a touch of an order-9 block is 512).
    pub touched_pages: u64,
    /// `CopyIn` and `CopyOut` ops.
    pub copies: u64,
    /// Bytes they copied.
    pub copied_bytes: u64,
    /// Nanoseconds of `Compute` requested.
    pub compute_ns: u64,
    /// Blocks sent to another CPU's inbox.
    pub sends: u64,
    /// Blocks received from the own inbox.
    pub recvs: u64,
    /// Barriers passed.
    pub barriers: u64,
    /// Task exits (kbuild).
    pub exits: u64,
}

impl OpCounts {
    /// Records one completed op. `ok` is the op's result (only an `Alloc` can fail);
    /// `block_order` is the order of the block the op acted on: the slot's block for
    /// `Free`, `Touch`, the copies and `Send`, the received block for `Recv`; it is ignored for the
    /// other ops (an `Alloc` carries its order).
    ///
    /// # Panics
    /// If `block_order` is `None` for `Free`, `Touch`, `Send` or `Recv`.
    pub fn record(&mut self, op: &Op, ok: bool, block_order: Option<u8>) {
        let order = || usize::from(block_order.expect("block_order is required for slot ops"));
        match *op {
            Op::Alloc { order, .. } => {
                let counter = if ok {
                    &mut self.allocs
                } else {
                    &mut self.alloc_failures
                };
                counter[usize::from(order)] += 1;
            }
            Op::Free { .. } => self.frees[order()] += 1,
            Op::Touch { .. } => {
                self.touches += 1;
                self.touched_pages += 1 << order();
            }
            Op::CopyIn { bytes, .. } | Op::CopyOut { bytes, .. } => {
                order();
                self.copies += 1;
                self.copied_bytes += u64::from(bytes);
            }
            Op::Compute { ns } => self.compute_ns += ns,
            Op::Send { .. } => {
                order();
                self.sends += 1;
            }
            Op::Recv { .. } => {
                order();
                self.recvs += 1;
            }
            // An empty inbox: nothing received.
            Op::TryRecv { .. } if !ok => {}
            Op::TryRecv { .. } => {
                order();
                self.recvs += 1;
            }
            Op::Barrier { .. } => self.barriers += 1,
            Op::Exit => self.exits += 1,
            Op::Done => {}
        }
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &OpCounts) {
        for o in 0..NR_ORDERS {
            self.allocs[o] += other.allocs[o];
            self.alloc_failures[o] += other.alloc_failures[o];
            self.frees[o] += other.frees[o];
        }
        self.touches += other.touches;
        self.touched_pages += other.touched_pages;
        self.copies += other.copies;
        self.copied_bytes += other.copied_bytes;
        self.compute_ns += other.compute_ns;
        self.sends += other.sends;
        self.recvs += other.recvs;
        self.barriers += other.barriers;
        self.exits += other.exits;
    }

    /// The sum of several counts (a group of CPUs, or all of them).
    pub fn sum<'a>(counts: impl IntoIterator<Item = &'a OpCounts>) -> OpCounts {
        let mut total = OpCounts::default();
        for c in counts {
            total.merge(c);
        }
        total
    }

    /// Successful allocations, all orders.
    pub fn alloc_ops(&self) -> u64 {
        self.allocs.iter().sum()
    }

    /// Failed allocations, all orders.
    pub fn failed_allocs(&self) -> u64 {
        self.alloc_failures.iter().sum()
    }

    /// Frees, all orders.
    pub fn free_ops(&self) -> u64 {
        self.frees.iter().sum()
    }

    /// Base pages allocated (an order-o allocation is 2^o pages).
    pub fn allocated_pages(&self) -> u64 {
        pages(&self.allocs)
    }

    /// Base pages freed.
    pub fn freed_pages(&self) -> u64 {
        pages(&self.frees)
    }
}

fn pages(by_order: &[u64; NR_ORDERS]) -> u64 {
    by_order
        .iter()
        .enumerate()
        .map(|(order, n)| n << order)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::MigrateKind;

    #[test]
    fn record_and_merge() {
        let mut c = OpCounts::default();
        let alloc = Op::Alloc {
            slot: 0,
            order: 9,
            kind: MigrateKind::Movable,
        };
        c.record(&alloc, true, None);
        c.record(&alloc, false, None);
        c.record(&Op::Touch { slot: 0 }, true, Some(9));
        c.record(&Op::Free { slot: 0 }, true, Some(9));
        c.record(&Op::Compute { ns: 5 }, true, None);
        assert_eq!(c.allocs[9], 1);
        assert_eq!(c.alloc_failures[9], 1);
        assert_eq!(c.touched_pages, 512);
        assert_eq!(c.allocated_pages(), 512);
        assert_eq!(c.freed_pages(), 512);
        let total = OpCounts::sum([&c, &c]);
        assert_eq!(total.allocs[9], 2);
        assert_eq!(total.compute_ns, 10);
    }
}
