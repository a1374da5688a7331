//! Message streams between CPU pairs: the shared engine of netperf and lmbench.
//!
//! # Design
//! Pair `k` is sender CPU `2k` and receiver CPU `2k + 1`: neighbours, hence on the same
//! socket when CPUs are numbered socket by socket (as the simulator's machines are).
//! CPUs past the pairs are idle. One pair on one CPU runs both ends on it, taking
//! turns ([`SharedCpu`]). A message is one or more [`Part`]s, each `blocks`
//! blocks of one order, all unmovable (socket buffers); its header lives in slab memory,
//! which makes no page allocation per message. Per message, as the real programs do:
//! - the sender enters the system call (`syscall_ns`), allocates the blocks (retrying
//!   after `backoff_ns` of compute when an allocation fails: the receiver frees, so
//!   memory comes back), copies `bytes_per_block` from its user buffer into each block
//!   ([`Op::CopyIn`](super::Op::CopyIn)), runs the protocol's transmit side
//!   (`send_protocol_ns`) and queues the blocks to the receiver;
//! - the receiver takes them from its inbox, enters its system call (`syscall_ns`),
//!   copies each block out to its user buffer ([`Op::CopyOut`](super::Op::CopyOut)),
//!   frees the blocks one after the other (the cross-CPU free of the original
//!   workloads) and runs the protocol's receive side (`recv_protocol_ns`).
//!
//! The copies are charged by the executor (a real `memcpy` on threads, the cache
//! hierarchy in the simulator); the system calls and protocol work are `Compute`, and
//! so is what the copies cost beyond the hierarchy's charge when the ends run on two
//! CPUs (`cross_copy_in_ns_per_kib` after the sender's copy, `cross_copy_out_ns_per_kib`
//! after the receiver's: [`CrossCopy`]).
//!
//! # Flow control
//! The inbox is the socket's buffer: it holds `window` messages; a sender with `window`
//! messages queued blocks (sleeps, as in `sctp_wait_for_sndbuf` or
//! `sock_alloc_send_pskb`) and is woken only once the receiver has drained the queue
//! to `resume` messages (the socket's write-space rule: an SCTP window-update SACK,
//! `unix_writable`). A receiver with nothing queued sleeps in `recvmsg` and is woken by
//! the next message. Both sleeps are idle time; each wakeup costs what the executor
//! charges for it (see the executor contract). Memory is bounded by pairs × (window +
//! 1) messages.

use std::collections::VecDeque;

use super::program::{script, Fill, Once, Phase, Program, RETRY_FOREVER};
use super::shared_cpu::SharedCpu;
use super::{check_cpus, CpuScript, MigrateKind, Op, Rng, Slot, WorkloadError};

/// The shape of one stream workload, resolved from its parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamShape {
    /// Pairs asked for; 0 = as many as fit (cpus / 2).
    pub(crate) pairs: u32,
    /// Messages per pair.
    pub(crate) messages: u32,
    /// The blocks a message is carried in, by order, allocated in this order.
    pub(crate) parts: [Part; MAX_PARTS],
    /// Parts used.
    pub(crate) nr_parts: u8,
    /// Blocks per message (the parts' sum).
    pub(crate) blocks: u32,
    /// Messages the receiver's inbox holds.
    pub(crate) window: u32,
    /// Messages the inbox must drain to before a blocked sender is woken (`< window`).
    pub(crate) resume: u32,
    pub(crate) backoff_ns: u64,
    /// One system call's entry and exit, each side, ns.
    pub(crate) syscall_ns: u64,
    /// The protocol's work per message on the sender and on the receiver, ns.
    pub(crate) send_protocol_ns: u64,
    pub(crate) recv_protocol_ns: u64,
    /// Share of messages whose blocks the sender frees, %: the receiver copies them
    /// out and hands them back (as TCP over loopback drops a page fragment's last
    /// reference in the sender's ACK processing); 0: the receiver frees every block.
    pub(crate) sender_free_pct: u32,
    /// One pair on one CPU: messages the writer queues per turn (0: until full).
    pub(crate) turn_messages: u32,
    /// One pair on one CPU: the cost of a hand-over between the ends, ns.
    pub(crate) shared_switch_ns: u64,
    /// Ends on two CPUs: the sender's copy into blocks whose lines the receiver's core
    /// held last (it read them out), per KiB, ns, beyond what the simulator's cache
    /// hierarchy charges (see [`CrossCopy`]).
    pub(crate) cross_copy_in_ns_per_kib: u64,
    /// Ends on two CPUs: the receiver's copy out of lines the sender's core wrote, per
    /// KiB, ns, beyond the hierarchy's charge.
    pub(crate) cross_copy_out_ns_per_kib: u64,
}

/// The cost of a stream's copies when its ends run on two CPUs, beyond what the cache
/// hierarchy charges for the same copies.
///
/// The hierarchy charges a line another core holds its transfer latency once per page
/// and then streams the rest at `latency / mlp`, no slower than the core's own L2: on
/// the `host` machine (published Zen 4 figures: 20 ns) that is the price of a local
/// copy. A live two-CPU stream pays far more: the kernel's `_copy_from_iter` (the
/// sender's copy into the new blocks, whose lines the receiver's core read last) and
/// `_copy_to_iter` (the receiver's copy of lines the sender's core has modified) take
/// most of a two-CPU AF_UNIX write's CPU (`perf record -e cpu-clock`), and a copy
/// between two threads on two CPUs costs its writer 167 ns and its reader 47 ns per
/// KiB more than on one (predict/work.rs). The workload charges that difference as
/// `Compute` after each copy; both ends on one CPU pay nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CrossCopy;

impl CrossCopy {
    /// ns for `bytes` at `ns_per_kib`.
    pub(crate) fn ns(bytes: u64, ns_per_kib: u64) -> u64 {
        bytes.saturating_mul(ns_per_kib) / 1024
    }
}

impl StreamShape {
    /// Whether message `j` (0-based) goes back to the sender to be freed: spread
    /// evenly, `sender_free_pct` of them.
    fn returns(&self, j: u32) -> bool {
        let p = u64::from(self.sender_free_pct.min(100));
        let j = u64::from(j);
        (j + 1) * p / 100 > j * p / 100
    }

    /// Messages the sender runs ahead before it takes back the blocks of a returned
    /// one: the window less one (its inbox then never holds a window's messages).
    fn lag(&self) -> u32 {
        self.window.saturating_sub(1).max(1)
    }
}

/// At most this many parts per message (one per order).
pub(crate) const MAX_PARTS: usize = 11;

/// Blocks of one order in a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Part {
    /// Order of the blocks.
    pub(crate) order: u8,
    /// How many.
    pub(crate) blocks: u32,
    /// Payload bytes copied into (and out of) each.
    pub(crate) bytes: u32,
}

/// A message's parts from a list (at most [`MAX_PARTS`]); returns the array, the count
/// and the blocks in all.
pub(crate) fn parts_of(list: &[Part]) -> ([Part; MAX_PARTS], u8, u32) {
    let mut a = [Part::default(); MAX_PARTS];
    let n = list.len().min(MAX_PARTS);
    a[..n].copy_from_slice(&list[..n]);
    (a, n as u8, a[..n].iter().map(|p| p.blocks).sum())
}

impl StreamShape {
    /// Payload bytes of one message (every part's blocks).
    fn message_bytes(&self) -> u64 {
        self.parts[..usize::from(self.nr_parts)]
            .iter()
            .map(|p| u64::from(p.blocks) * u64::from(p.bytes))
            .sum()
    }

    /// The parts with their slot ranges.
    fn slot_parts(&self) -> impl Iterator<Item = (std::ops::Range<Slot>, Part)> + '_ {
        let mut next = 0;
        self.parts[..usize::from(self.nr_parts)]
            .iter()
            .map(move |p| {
                let r = next..next + p.blocks;
                next += p.blocks;
                (r, *p)
            })
    }

    /// Blocks an inbox holds before sends block.
    pub(crate) fn inbox_capacity(&self) -> usize {
        self.window as usize * self.blocks as usize
    }

    /// Blocks an inbox drains to before a blocked sender is woken.
    pub(crate) fn inbox_resume(&self) -> usize {
        self.resume.min(self.window.saturating_sub(1)) as usize * self.blocks as usize
    }

    /// The scripts for `cpus` CPUs.
    pub(crate) fn scripts(
        &self,
        workload: &'static str,
        cpus: u32,
    ) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        if cpus == 1 && self.pairs <= 1 {
            return Ok(vec![self.shared_cpu()]);
        }
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
                        next: 0,
                        taken_back: 0,
                    })
                } else {
                    script(Receiver {
                        shape: *self,
                        from_cpu: cpu - 1,
                        left: self.messages,
                    })
                }
            })
            .collect())
    }
}

impl StreamShape {
    /// One pair with both ends on CPU 0 ([`SharedCpu`]): the receiver frees every
    /// block (with one CPU, the sender's frees land on the same pageset).
    fn shared_cpu(&self) -> Box<dyn CpuScript> {
        let shape = StreamShape {
            sender_free_pct: 0,
            cross_copy_in_ns_per_kib: 0,
            cross_copy_out_ns_per_kib: 0,
            ..*self
        };
        let writer = script(Sender {
            shape,
            to_cpu: 0,
            left: shape.messages,
            next: 0,
            taken_back: 0,
        });
        let reader = script(Receiver {
            shape,
            from_cpu: 0,
            left: shape.messages,
        });
        Box::new(SharedCpu::new(
            writer,
            reader,
            shape.inbox_capacity(),
            shape.turn_messages as usize * shape.blocks as usize,
            shape.shared_switch_ns,
        ))
    }
}

/// `Compute` for `ns`, or nothing for 0.
fn compute(out: &mut VecDeque<Phase>, ns: u64) {
    if ns > 0 {
        out.push_back(Phase::Op(Op::Compute { ns }));
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
    /// Index of the next message to send.
    next: u32,
    /// Messages below this index whose returned blocks were taken back (or did not
    /// return).
    taken_back: u32,
}

impl Sender {
    /// Takes back and frees the blocks of returned messages below `upto`.
    fn take_back(&mut self, upto: u32, out: &mut VecDeque<Phase>) {
        let s = self.shape;
        let back = s.blocks..2 * s.blocks;
        while self.taken_back < upto {
            if s.returns(self.taken_back) {
                out.push_back(Phase::Recv(back.clone()));
                out.push_back(Phase::Free(back.clone()));
            }
            self.taken_back += 1;
        }
    }
}

impl Program for Sender {
    fn slot_count(&self) -> Slot {
        // The message's blocks, and as many for the blocks a receiver hands back.
        if self.shape.sender_free_pct > 0 {
            2 * self.shape.blocks
        } else {
            self.shape.blocks
        }
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.left == 0 {
            // The blocks of the last messages that come back.
            if self.taken_back < self.next && self.shape.sender_free_pct > 0 {
                self.take_back(self.next, out);
                return true;
            }
            return false;
        }
        self.left -= 1;
        if self.shape.sender_free_pct > 0 {
            self.take_back(self.next.saturating_sub(self.shape.lag()), out);
        }
        self.next += 1;
        let s = &self.shape;
        let blocks = 0..s.blocks;
        compute(out, s.syscall_ns);
        for (slots, p) in s.slot_parts() {
            out.push_back(Phase::Fill(
                Fill::new(slots, p.order, MigrateKind::Unmovable)
                    .retry(RETRY_FOREVER, s.backoff_ns),
            ));
        }
        for (slots, p) in s.slot_parts() {
            out.push_back(Phase::Copy {
                slots,
                bytes: p.bytes,
                into_block: true,
            });
        }
        compute(
            out,
            CrossCopy::ns(s.message_bytes(), s.cross_copy_in_ns_per_kib),
        );
        compute(out, s.send_protocol_ns);
        out.push_back(Phase::Send {
            slots: blocks,
            to_cpu: self.to_cpu,
        });
        true
    }
}

#[derive(Debug)]
struct Receiver {
    shape: StreamShape,
    from_cpu: u32,
    left: u32,
}

impl Program for Receiver {
    fn slot_count(&self) -> Slot {
        self.shape.blocks
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if self.left == 0 {
            return false;
        }
        let j = self.shape.messages - self.left;
        self.left -= 1;
        let s = &self.shape;
        let blocks = 0..s.blocks;
        out.push_back(Phase::Recv(blocks.clone()));
        compute(out, s.syscall_ns);
        for (slots, p) in s.slot_parts() {
            out.push_back(Phase::Copy {
                slots,
                bytes: p.bytes,
                into_block: false,
            });
        }
        compute(
            out,
            CrossCopy::ns(s.message_bytes(), s.cross_copy_out_ns_per_kib),
        );
        if s.returns(j) {
            out.push_back(Phase::Send {
                slots: blocks,
                to_cpu: self.from_cpu,
            });
        } else {
            out.push_back(Phase::Free(blocks));
        }
        compute(out, s.recv_protocol_ns);
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
