//! Message streams between CPU pairs: the shared engine of netperf and lmbench.
//!
//! # Design
//! Pair `k` is sender CPU `2k` and receiver CPU `2k + 1`: neighbours, hence on the same
//! socket when CPUs are numbered socket by socket (as the simulator's machines are).
//! CPUs past the pairs are idle. A message is a head block (order 0) and `data_blocks`
//! blocks of `data_order`, all unmovable (socket buffers). The sender allocates them,
//! retrying after `backoff_ns` of compute when an allocation fails (the receiver frees,
//! so memory comes back), writes them (copy from user) and sends them, head first. The
//! receiver takes them from its inbox, reads them (copy to user, modelled as a touch) and
//! frees them: the cross-CPU free of the original workloads.
//!
//! The inbox holds `window` messages (the socket buffer): a sender more than `window`
//! messages ahead blocks, which bounds memory to pairs × (window + 1) messages.

use std::collections::VecDeque;

use super::program::{script, Fill, Once, Phase, Program, RETRY_FOREVER};
use super::{check_cpus, CpuScript, MigrateKind, Rng, Slot, WorkloadError};

/// The shape of one stream workload, resolved from its parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamShape {
    /// Pairs asked for; 0 = as many as fit (cpus / 2).
    pub(crate) pairs: u32,
    /// Messages per pair.
    pub(crate) messages: u32,
    pub(crate) data_order: u8,
    pub(crate) data_blocks: u32,
    /// Messages the receiver's inbox holds.
    pub(crate) window: u32,
    pub(crate) backoff_ns: u64,
}

impl StreamShape {
    /// Blocks per message: the head plus the data blocks.
    pub(crate) fn parts(&self) -> u32 {
        1 + self.data_blocks
    }

    /// Blocks an inbox holds before sends block.
    pub(crate) fn inbox_capacity(&self) -> usize {
        self.window as usize * self.parts() as usize
    }

    /// The scripts for `cpus` CPUs.
    pub(crate) fn scripts(
        &self,
        workload: &'static str,
        cpus: u32,
    ) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let pairs = if self.pairs == 0 {
            cpus / 2
        } else {
            self.pairs
        };
        check_cpus(workload, 2 * pairs.max(1), cpus)?;
        Ok((0..cpus)
            .map(|cpu| {
                if cpu >= 2 * pairs {
                    script(Once::idle())
                } else if cpu % 2 == 0 {
                    script(Sender {
                        shape: *self,
                        to_cpu: cpu + 1,
                        left: self.messages,
                    })
                } else {
                    script(Receiver {
                        parts: self.parts(),
                        left: self.messages,
                    })
                }
            })
            .collect())
    }
}

/// Smallest order whose block holds `bytes`.
pub(crate) fn order_for(bytes: u64) -> u32 {
    bytes
        .div_ceil(super::PAGE_SIZE)
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
}

#[derive(Debug)]
struct Sender {
    shape: StreamShape,
    to_cpu: u32,
    left: u32,
}

impl Program for Sender {
    fn slot_count(&self) -> Slot {
        self.shape.parts()
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        let s = &self.shape;
        let parts = s.parts();
        out.push_back(Phase::Fill(
            Fill::new(0..1, 0, MigrateKind::Unmovable).retry(RETRY_FOREVER, s.backoff_ns),
        ));
        out.push_back(Phase::Fill(
            Fill::new(1..parts, s.data_order, MigrateKind::Unmovable)
                .retry(RETRY_FOREVER, s.backoff_ns),
        ));
        out.push_back(Phase::Touch(0..parts));
        out.push_back(Phase::Send {
            slots: 0..parts,
            to_cpu: self.to_cpu,
        });
        true
    }
}

#[derive(Debug)]
struct Receiver {
    parts: u32,
    left: u32,
}

impl Program for Receiver {
    fn slot_count(&self) -> Slot {
        self.parts
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        out.push_back(Phase::Recv(0..self.parts));
        out.push_back(Phase::Touch(0..self.parts));
        out.push_back(Phase::Free(0..self.parts));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::order_for;

    #[test]
    fn orders_for_sizes() {
        assert_eq!(order_for(1), 0);
        assert_eq!(order_for(4096), 0);
        assert_eq!(order_for(4097), 1);
        assert_eq!(order_for(10_240), 2);
        assert_eq!(order_for(32_768), 3);
    }
}
