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
//! each copy carries what a KiB of it costs beyond the hierarchy's charge when the
//! simulator serves it from the other end's cache (`cross_copy_in_ns_per_kib` for the
//! sender's copy, `cross_copy_out_ns_per_kib` for the receiver's: [`CrossCopy`]).
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::program::{script, Fill, Once, Phase, Program, RETRY_FOREVER};
use super::shared_cpu::SharedCpu;
use super::{check_cpus, CpuScript, MigrateKind, Op, OpResult, Rng, Slot, WorkloadError};

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
    /// Ends on two CPUs: share of `recv_protocol_ns` the sender's CPU does instead of
    /// the receiver's, % (see [`Sender`]); both ends on one CPU: none.
    pub(crate) recv_on_sender_pct: u32,
    /// Ends on two CPUs: share of `recv_protocol_ns` done where an skb arrives, %: on the
    /// sender's CPU when the reader is parked as the skb arrives, else on the
    /// receiver's at that receive (TCP's socket backlog: see [`ReaderState`]); 0: none
    /// (no reader state is kept). Both ends on one CPU: none.
    pub(crate) recv_arrival_pct: u32,
    /// Share of messages whose blocks the sender's CPU frees, %: the receiver copies
    /// them out and hands them back, and the sender frees what has come back after each
    /// message it sends, without waiting (see [`Sender`]); 0: the receiver frees every
    /// block.
    pub(crate) sender_free_pct: u32,
    /// The parts of such a message the receiver hands back (bit i: part i); it frees
    /// the others itself (`u16::MAX`: every part). SCTP hands back the chunks, which
    /// its sender frees once acknowledged, and frees the packet they were copied into.
    pub(crate) back_parts: u16,
    /// The parts that begin a new skb (bit i: part i; part 0 always does): the sender
    /// queues each skb as soon as it is built and the receiver takes them one by one,
    /// as AF_UNIX sends a write larger than an skb's fragments (see [`Skbs`]); 0: the
    /// message is one skb.
    pub(crate) skb_starts: u16,
    /// One pair on one CPU: messages the writer queues per turn (0: until full).
    pub(crate) turn_messages: u32,
    /// One pair on one CPU: the cost of a hand-over between the ends, ns.
    pub(crate) shared_switch_ns: u64,
    /// Ends on two CPUs: the sender's copy into blocks whose lines the receiver's core
    /// held last (it read them out), per KiB the simulator's cache hierarchy serves from
    /// the receiver's cache, ns, beyond its charge (see [`CrossCopy`]).
    pub(crate) cross_copy_in_ns_per_kib: u64,
    /// Ends on two CPUs: the receiver's copy out of lines the sender's core wrote, per
    /// KiB served from the sender's cache, ns, beyond the hierarchy's charge.
    pub(crate) cross_copy_out_ns_per_kib: u64,
    /// Ends on two CPUs: the sender's work per message on memory the receiver's CPU
    /// freed last, ns, beyond the allocator's and the hierarchy's charge (see
    /// [`StreamShape::cross_ns`]).
    pub(crate) cross_send_ns: u64,
    /// Ends on two CPUs: the receiver's work per message on memory the sender's CPU
    /// took, ns, beyond the allocator's and the hierarchy's charge.
    pub(crate) cross_recv_ns: u64,
    /// Ends on two CPUs: every this many messages (0: never) the sender also takes one
    /// order-1 unmovable block before the message's parts, a new slab page of the skb
    /// caches, and sends it after the message's first skb; the receiver frees it (see
    /// [`StreamShape::slab`]). Both ends on one CPU: never.
    pub(crate) slab_every: u32,
}

/// The cost of a stream's copies when its ends run on two CPUs, beyond what the cache
/// hierarchy charges for the same copies.
///
/// The hierarchy charges a line another core holds its transfer latency once per page
/// and then streams the rest at `latency / mlp`, no slower than the core's own L2: on
/// the `host` machine (published Zen 4 figures: 20 ns) that is the price of a local
/// copy. A live two-CPU stream pays far more for those lines: the kernel's
/// `_copy_from_iter` (the sender's copy into the new blocks, whose lines the receiver's
/// core read last) and `_copy_to_iter` (the receiver's copy of lines the sender's core
/// has modified) take most of a two-CPU AF_UNIX write's CPU (`perf record -e
/// cpu-clock`; predict/work.rs). Each copy op carries the rate per KiB; the simulator
/// charges it on the lines its hierarchy served from another CPU's cache
/// ([`crate::sim::hierarchy::Charge::crossed`]), so blocks that come cold from DRAM (a
/// refill from the free lists) pay the hierarchy's DRAM charge alone, and both ends on
/// one CPU pay nothing. Real executors ignore it: the hardware pays.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CrossCopy;

impl CrossCopy {
    /// A copy op's rate from the workload's (bounded by its parameter's limit).
    pub(crate) fn rate(ns_per_kib: u64) -> u32 {
        u32::try_from(ns_per_kib).unwrap_or(u32::MAX)
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

    /// The receive protocol's work per message charged on the sender's CPU, where
    /// each skb arrives, and on the receiver's: `recv_on_sender_pct` of it,
    /// `recv_arrival_pct` (at most what is left) and the rest (they add up to
    /// `recv_protocol_ns`).
    fn recv_protocol_split(&self) -> (u64, u64, u64) {
        let pct = |p: u32| self.recv_protocol_ns * u64::from(p) / 100;
        let on_sender_pct = self.recv_on_sender_pct.min(100);
        let on_sender = pct(on_sender_pct);
        let arrival = pct(self.recv_arrival_pct.min(100 - on_sender_pct));
        (
            on_sender,
            arrival,
            self.recv_protocol_ns - on_sender - arrival,
        )
    }

    /// The sender's and the receiver's work per skb `i` of `skbs` on memory the other
    /// end's CPU touched last (`cross_send_ns`, `cross_recv_ns`, by the skb's bytes).
    ///
    /// AF_UNIX with the ends on two CPUs: the writer allocates what the reader's CPU
    /// freed and the reader frees what the writer's CPU allocated, and each end's
    /// allocator, slab and memory-cgroup paths pay for it. In cpu-clock profiles by
    /// call path (predict/work.rs, `UNIX_CROSS_SEND_NS`) the writer's page allocation
    /// (its refills from the free lists the reader's drains filled, with interrupts off
    /// under the zone lock), its `__alloc_skb` and its memcg charge cost more at two CPUs
    /// than at one, and the reader's page frees (its drains), `consume_skb` and memcg
    /// uncharge more again; the simulator's allocator charges the refills' and drains'
    /// lines through the hierarchy, and the slab and the memcg are not modelled, so the
    /// rest is charged here as compute. Both ends on one CPU: none.
    fn cross_ns(&self, skbs: &[Skbs], i: usize) -> (u64, u64) {
        (
            skb_share(self.cross_send_ns, skbs, i),
            skb_share(self.cross_recv_ns, skbs, i),
        )
    }

    /// Whether message `j` (0-based) carries a slab page: one per `slab_every`.
    ///
    /// The objects of TCP's skbs (`skbuff_fclone_cache`, the heads from `kmalloc`) come
    /// from slabs of order 1. With both ends on one CPU they are freed on the CPU that
    /// took them and the slabs are reused; with the writer on one CPU and the reader
    /// freeing on the other, the writer's CPU now and then finds no partial slab and
    /// takes a new page (`allocate_slab` under `tcp_stream_alloc_skb`), and a slab
    /// emptied by remote frees is given back (`discard_slab` from `__put_partials`),
    /// mostly on the reader's CPU (docs/predict.md).
    fn slab(&self, j: u32) -> bool {
        self.slab_every > 0 && (j + 1) % self.slab_every == 0
    }

    /// The slot a slab page is carried in (after the message's blocks), if any.
    fn slab_slot(&self) -> Option<std::ops::Range<Slot>> {
        (self.slab_every > 0).then_some(self.blocks..self.blocks + 1)
    }

    /// Blocks the receiver hands back over the whole stream.
    fn returned_blocks(&self) -> u64 {
        let per_message: u32 = self
            .slot_parts()
            .filter(|(r, _)| self.part_back(r))
            .map(|(_, p)| p.blocks)
            .sum();
        (0..self.messages).filter(|&j| self.returns(j)).count() as u64 * u64::from(per_message)
    }

    /// Whether a returned message's part in `slots` goes back (`back_parts`).
    fn part_back(&self, slots: &std::ops::Range<Slot>) -> bool {
        self.slot_parts()
            .position(|(r, _)| r == *slots)
            .is_some_and(|i| self.back_parts & (1 << i) != 0)
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

/// One skb of a message: its blocks' slots and its parts (with their slots). An
/// AF_UNIX write larger than an skb's fragments (`UNIX_SKB_FRAGS_SZ`) is sent as
/// several skbs (`unix_stream_sendmsg` loops: allocate, copy, queue, wake the reader);
/// the reader copies and frees them one by one and may sleep between them.
#[derive(Clone, Debug)]
struct Skbs {
    slots: std::ops::Range<Slot>,
    parts: Vec<(std::ops::Range<Slot>, Part)>,
}

impl Skbs {
    fn bytes(&self) -> u64 {
        self.parts
            .iter()
            .map(|(_, p)| u64::from(p.blocks) * u64::from(p.bytes))
            .sum()
    }

    /// The copy of every part of the skb, into its blocks (the writer's) or out of them
    /// (the reader's), with what a KiB of it served from the other end's cache costs
    /// beyond the hierarchy's charge (`ns_per_kib`, [`CrossCopy`]).
    fn copy(&self, into_block: bool, ns_per_kib: u64, out: &mut VecDeque<Phase>) {
        for (slots, p) in &self.parts {
            out.push_back(Phase::Copy {
                slots: slots.clone(),
                bytes: p.bytes,
                into_block,
                cross_ns_per_kib: CrossCopy::rate(ns_per_kib),
            });
        }
    }
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
    /// The message's skbs: their slot ranges and parts.
    fn skbs(&self) -> Vec<Skbs> {
        let mut v: Vec<Skbs> = Vec::new();
        for (i, (slots, p)) in self.slot_parts().enumerate() {
            match v.last_mut() {
                Some(s) if i > 0 && self.skb_starts & (1 << i) == 0 => {
                    s.slots.end = slots.end;
                    s.parts.push((slots, p));
                }
                _ => v.push(Skbs {
                    slots: slots.clone(),
                    parts: vec![(slots, p)],
                }),
            }
        }
        v
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
        // Each pair's reader state, shared by its two ends (with the switch on).
        let readers: Vec<Option<Arc<ReaderState>>> = (0..pairs)
            .map(|_| (self.recv_arrival_pct > 0).then(|| Arc::new(ReaderState::default())))
            .collect();
        Ok((0..cpus)
            .map(|cpu| {
                if cpu >= 2 * pairs {
                    return script(Once::idle());
                }
                let reader = readers[(cpu / 2) as usize].clone();
                if cpu % 2 == 0 {
                    Sender::script(*self, cpu + 1, reader)
                } else {
                    let receiver = script(Receiver {
                        shape: *self,
                        from_cpu: cpu - 1,
                        left: self.messages,
                        reader: reader.clone(),
                        at: None,
                    });
                    match reader {
                        Some(state) => Box::new(Parking {
                            inner: receiver,
                            state,
                            waiting: None,
                        }),
                        None => receiver,
                    }
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
            recv_on_sender_pct: 0,
            recv_arrival_pct: 0,
            cross_copy_in_ns_per_kib: 0,
            cross_copy_out_ns_per_kib: 0,
            cross_send_ns: 0,
            cross_recv_ns: 0,
            slab_every: 0,
            ..*self
        };
        let writer = Sender::script(shape, 0, None);
        let reader = script(Receiver {
            shape,
            from_cpu: 0,
            left: shape.messages,
            reader: None,
            at: None,
        });
        Box::new(SharedCpu::new(
            writer,
            reader,
            shape.inbox_capacity(),
            shape.inbox_resume(),
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

/// An skb's share of a message's `ns` by its bytes (`done`: the bytes before it); the
/// shares add up to `ns` exactly.
fn share(ns: u64, done: &mut u64, bytes: u64, total: u64) -> u64 {
    if total == 0 {
        return ns;
    }
    let before = u128::from(ns) * u128::from(*done) / u128::from(total);
    *done += bytes;
    let after = u128::from(ns) * u128::from(*done) / u128::from(total);
    (after - before) as u64
}

/// Smallest order whose block holds `bytes`.
pub(crate) fn order_for(bytes: u64) -> u32 {
    bytes
        .div_ceil(super::PAGE_SIZE)
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
}

/// The sending end.
///
/// With `sender_free_pct` above 0 the receiver hands the blocks of those messages back
/// to the sender's CPU, and the sender frees them as TCP over loopback does: the reader
/// (`tcp_recvmsg`) does not free a consumed skb allocated on another CPU but queues it
/// on that CPU's deferred-free list (`skb_attempt_defer_free`: `skb->alloc_cpu`), and
/// the sender's CPU frees the list in its next `NET_RX` softirq (`net_rx_action` →
/// `skb_defer_free_flush`), which runs after every transmit on loopback. So after each
/// message it sends, the sender takes back what has come back so far, never waiting
/// ([`Phase::TryRecv`]), and frees it; only after its last message does it wait for
/// the rest. The live kernel freed 99.2-99.7 % of the stream's order-3 fragments on the
/// sender's CPU in softirq on a quiet machine, 58-89 % while other processes held that
/// CPU (docs/predict.md).
///
/// With the ends on two CPUs the sender also does `recv_on_sender_pct` of the receive
/// protocol's work, as TCP over loopback does: a writer running beside its reader
/// holds its own socket nearly always, so the reader's ACKs wait in its backlog and the
/// transmits they release run in its `release_sock` (`tcp_data_snd_check` →
/// `tcp_write_xmit`; on one CPU the reader's ACK pushes them in the reader's softirq),
/// beside its own pushes in `tcp_sendmsg`. And it does `recv_arrival_pct` of it for each
/// skb that arrives while the reader is parked ([`ReaderState`]): loopback delivers a
/// segment in the transmitting CPU's `NET_RX` softirq, where `tcp_v4_rcv` processes it
/// at once when the reader does not own its socket. (docs/predict.md, predict/work.rs.)
///
/// Neither end can wait on the other forever: the sender waits only on a full inbox of
/// the receiver (woken at `resume`), the receiver only on an empty one; the receiver's
/// hand-backs since the sender last emptied its inbox are at most the messages its own
/// inbox held then (the sender sends nothing in between), so they fit in the
/// sender's inbox (the same capacity) and the receiver's sends back never block.
#[derive(Debug)]
struct Sender {
    shape: StreamShape,
    to_cpu: u32,
    left: u32,
    /// Returned blocks taken back so far (counted by [`Counted`]).
    taken: Arc<AtomicU64>,
    /// Whether the wait for the last returned blocks has been queued.
    tail_queued: bool,
    /// The pair's reader state: with it, where an skb's moved receive work runs is
    /// decided as the skb is sent ([`ReaderState`]).
    reader: Option<Arc<ReaderState>>,
    /// With `reader`: the skb (message, index) built and to be sent next.
    at_send: Option<(u32, usize)>,
}

impl Sender {
    /// The sender's script sending to `to_cpu`.
    fn script(
        shape: StreamShape,
        to_cpu: u32,
        reader: Option<Arc<ReaderState>>,
    ) -> Box<dyn CpuScript> {
        let taken = Arc::new(AtomicU64::new(0));
        let inner = script(Sender {
            shape,
            to_cpu,
            left: shape.messages,
            taken: taken.clone(),
            tail_queued: false,
            reader,
            at_send: None,
        });
        if shape.sender_free_pct == 0 {
            return inner;
        }
        Box::new(Counted {
            inner,
            taken,
            tried: false,
        })
    }

    /// The slots returned blocks are taken into.
    fn back(&self) -> std::ops::Range<Slot> {
        let s = self.shape;
        let start = s.slab_slot().map_or(s.blocks, |r| r.end);
        start..start + s.inbox_capacity().max(1) as Slot
    }
}

/// A sender's script that counts the returned blocks it took back without waiting
/// (each [`Op::TryRecv`] that got a block), so that it knows how many to wait for after
/// its last message.
#[derive(Debug)]
struct Counted {
    inner: Box<dyn CpuScript>,
    taken: Arc<AtomicU64>,
    /// The op issued last was a `TryRecv`.
    tried: bool,
}

impl CpuScript for Counted {
    fn slot_count(&self) -> Slot {
        self.inner.slot_count()
    }

    fn next(&mut self, last: OpResult, rng: &mut dyn Rng) -> Op {
        if self.tried && last.ok {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }
        let op = self.inner.next(last, rng);
        self.tried = matches!(op, Op::TryRecv { .. });
        op
    }
}

impl Program for Sender {
    fn slot_count(&self) -> Slot {
        // The message's blocks, a slab page's, and an inbox's worth for the blocks
        // handed back.
        if self.shape.sender_free_pct > 0 {
            self.back().end
        } else {
            self.shape.slab_slot().map_or(self.shape.blocks, |r| r.end)
        }
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        let s = self.shape;
        if let Some((j, i)) = self.at_send.take() {
            // The reader's state as skb `i` arrives decides who does its moved work.
            let skbs = s.skbs();
            let state = self.reader.as_ref().expect("at_send only with a reader");
            let parked = state.parked.load(Ordering::Acquire);
            if parked {
                let (_, moved, _) = s.recv_protocol_split();
                compute(out, skb_share(moved, &skbs, i));
            }
            state
                .by_writer
                .lock()
                .expect("reader state")
                .push_back(parked);
            self.send_skb(j, i, &skbs, out);
            if i + 1 < skbs.len() {
                self.build_skb(i + 1, &skbs, out);
                self.at_send = Some((j, i + 1));
            } else {
                self.take_back(out);
            }
            return true;
        }
        if self.left == 0 {
            if s.sender_free_pct == 0 || self.tail_queued {
                return false;
            }
            // The blocks still to come back: wait for each.
            self.tail_queued = true;
            let back = self.back();
            let room = u64::from(back.end - back.start);
            let mut rest = s
                .returned_blocks()
                .saturating_sub(self.taken.load(Ordering::Relaxed));
            if rest == 0 {
                return false;
            }
            while rest > 0 {
                let n = rest.min(room);
                let r = back.start..back.start + n as Slot;
                out.push_back(Phase::Recv(r.clone()));
                out.push_back(Phase::Free(r));
                rest -= n;
            }
            return true;
        }
        let j = s.messages - self.left;
        self.left -= 1;
        compute(out, s.syscall_ns);
        let skbs = s.skbs();
        if let Some(r) = s.slab_slot().filter(|_| s.slab(j)) {
            out.push_back(Phase::Fill(
                Fill::new(r, 1, MigrateKind::Unmovable).retry(RETRY_FOREVER, s.backoff_ns),
            ));
        }
        if self.reader.is_some() {
            // Up to the first skb's send: the reader's state is read when it goes.
            self.build_skb(0, &skbs, out);
            self.at_send = Some((j, 0));
            return true;
        }
        for i in 0..skbs.len() {
            self.build_skb(i, &skbs, out);
            self.send_skb(j, i, &skbs, out);
        }
        self.take_back(out);
        true
    }
}

/// `ns`'s share for skb `i` of `skbs` by its bytes (the shares add up to `ns`).
fn skb_share(ns: u64, skbs: &[Skbs], i: usize) -> u64 {
    let total: u64 = skbs.iter().map(Skbs::bytes).sum();
    let mut done: u64 = skbs[..i].iter().map(Skbs::bytes).sum();
    share(ns, &mut done, skbs[i].bytes(), total)
}

impl Sender {
    /// Skb `i` of message `j` up to its send: its blocks, the copy into them, the
    /// transmit's protocol work and, without a reader state, the receive work the
    /// sender's CPU always does.
    fn build_skb(&self, i: usize, skbs: &[Skbs], out: &mut VecDeque<Phase>) {
        let s = self.shape;
        let skb = &skbs[i];
        for (slots, p) in &skb.parts {
            out.push_back(Phase::Fill(
                Fill::new(slots.clone(), p.order, MigrateKind::Unmovable)
                    .retry(RETRY_FOREVER, s.backoff_ns),
            ));
        }
        skb.copy(true, s.cross_copy_in_ns_per_kib, out);
        let recv_here = s.recv_protocol_split().0;
        compute(
            out,
            skb_share(s.send_protocol_ns, skbs, i)
                + skb_share(recv_here, skbs, i)
                + s.cross_ns(skbs, i).0,
        );
    }

    /// Sends skb `i` of message `j` (and the slab page after the first).
    fn send_skb(&self, j: u32, i: usize, skbs: &[Skbs], out: &mut VecDeque<Phase>) {
        out.push_back(Phase::Send {
            slots: skbs[i].slots.clone(),
            to_cpu: self.to_cpu,
        });
        if let Some(r) = self
            .shape
            .slab_slot()
            .filter(|_| i == 0 && self.shape.slab(j))
        {
            out.push_back(Phase::Send {
                slots: r,
                to_cpu: self.to_cpu,
            });
        }
    }

    /// After a message: frees what the receiver has handed back so far.
    fn take_back(&self, out: &mut VecDeque<Phase>) {
        if self.shape.sender_free_pct > 0 {
            // The transmit's softirq frees what the receiver has handed back so far.
            let back = self.back();
            out.push_back(Phase::TryRecv(back.clone()));
            out.push_back(Phase::Free(back));
        }
    }
}

#[derive(Debug)]
struct Receiver {
    shape: StreamShape,
    from_cpu: u32,
    left: u32,
    /// The pair's reader state: with it, each skb's processing is queued only once it
    /// has been received, when the sender has said who did its moved work.
    reader: Option<Arc<ReaderState>>,
    /// With `reader`: the skb (message, index) received and to be processed next.
    at: Option<(u32, usize)>,
}

impl Program for Receiver {
    fn slot_count(&self) -> Slot {
        self.shape.slab_slot().map_or(self.shape.blocks, |r| r.end)
    }

    fn refill(&mut self, _rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        let s = self.shape;
        let skbs = s.skbs();
        if let Some((j, i)) = self.at.take() {
            let state = self.reader.as_ref().expect("at only with a reader");
            let by_writer = state
                .by_writer
                .lock()
                .expect("reader state")
                .pop_front()
                .expect("the sender says who processed each skb before sending it");
            let (_, moved, rest) = s.recv_protocol_split();
            // Not done where it arrived: from the socket's backlog, in this receive.
            let here = if by_writer { rest } else { rest + moved };
            self.process_skb(j, i, &skbs, here, out);
            if i + 1 < skbs.len() {
                out.push_back(Phase::Recv(skbs[i + 1].slots.clone()));
                self.at = Some((j, i + 1));
            }
            return true;
        }
        if self.left == 0 {
            return false;
        }
        let j = s.messages - self.left;
        self.left -= 1;
        // The first skb wakes the reader; its `read` takes the rest as they come.
        out.push_back(Phase::Recv(skbs[0].slots.clone()));
        if self.reader.is_some() {
            self.at = Some((j, 0));
            return true;
        }
        let (_, moved, rest) = s.recv_protocol_split();
        let here = moved + rest;
        for i in 0..skbs.len() {
            if i > 0 {
                out.push_back(Phase::Recv(skbs[i].slots.clone()));
            }
            self.process_skb(j, i, &skbs, here, out);
        }
        true
    }
}

impl Receiver {
    /// Skb `i` of message `j` once received (the slab page and the system call with
    /// the first): the copy out, the frees or hand-backs and `recv_ns`'s share of it.
    fn process_skb(
        &self,
        j: u32,
        i: usize,
        skbs: &[Skbs],
        recv_ns: u64,
        out: &mut VecDeque<Phase>,
    ) {
        let s = &self.shape;
        let skb = &skbs[i];
        if i == 0 {
            if let Some(r) = s.slab_slot().filter(|_| s.slab(j)) {
                // The slab page the writer took: emptied by the reader's frees, given back.
                out.push_back(Phase::Recv(r.clone()));
                out.push_back(Phase::Free(r));
            }
            compute(out, s.syscall_ns);
        }
        skb.copy(false, s.cross_copy_out_ns_per_kib, out);
        if s.returns(j) && s.back_parts != u16::MAX {
            for (slots, _) in &skb.parts {
                out.push_back(if s.part_back(slots) {
                    Phase::Send {
                        slots: slots.clone(),
                        to_cpu: self.from_cpu,
                    }
                } else {
                    Phase::Free(slots.clone())
                });
            }
        } else if s.returns(j) {
            out.push_back(Phase::Send {
                slots: skb.slots.clone(),
                to_cpu: self.from_cpu,
            });
        } else {
            out.push_back(Phase::Free(skb.slots.clone()));
        }
        compute(out, skb_share(recv_ns, skbs, i) + s.cross_ns(skbs, i).1);
    }
}

/// A stream pair's reader as its writer sees it, for TCP's rule of where a segment's
/// receive work runs (`recv_arrival_pct`).
///
/// Over loopback the writer's transmit delivers each segment in its own CPU's
/// `NET_RX` softirq (`__dev_queue_xmit` → `netif_rx` → `net_rx_action`), where
/// `tcp_v4_rcv` takes the reader's socket lock: when the reader does not own the
/// socket (asleep in `sk_wait_data`, which releases it around its sleep and takes it
/// again only once it runs) the segment is processed there and then (`tcp_v4_do_rcv`
/// → `tcp_rcv_established`: queued, the reader woken): the writer's CPU does the work.
/// When the reader owns it (inside `tcp_recvmsg`, copying what is queued) the segment
/// goes to the socket's backlog (`tcp_add_backlog`) and the reader processes it in
/// `release_sock` (`__release_sock` → `sk_backlog_rcv`) or, before it would sleep, in
/// `__sk_flush_backlog` from `tcp_recvmsg_locked`: the reader's CPU does it. So a
/// reader that keeps up, asleep when data arrives, leaves the work to the writer, and
/// one that lags, always inside its receive, does it itself.
///
/// `parked` is set by [`Parking`] while the reader waits for data, from the moment its
/// receive finds nothing until it runs again after the wakeup; the sender reads it as
/// it sends each skb and queues its answer in `by_writer`, which the receiver takes
/// once it has received that skb (both in skb order).
#[derive(Debug, Default)]
pub(crate) struct ReaderState {
    parked: AtomicBool,
    by_writer: Mutex<VecDeque<bool>>,
}

/// The receiving end's script with its waits made visible ([`ReaderState`]): each
/// `Recv` of the inner script is first tried without waiting; if the inbox is empty
/// the reader is parked and waits (`Recv`) until it is given a block and runs again.
/// The inner script sees each receive complete once, as before.
#[derive(Debug)]
struct Parking {
    inner: Box<dyn CpuScript>,
    state: Arc<ReaderState>,
    /// The slot of the receive being tried (`false`) or waited for (`true`).
    waiting: Option<(Slot, bool)>,
}

impl CpuScript for Parking {
    fn slot_count(&self) -> Slot {
        self.inner.slot_count()
    }

    fn next(&mut self, last: OpResult, rng: &mut dyn Rng) -> Op {
        let last = match self.waiting.take() {
            Some((slot, false)) if !last.ok => {
                self.state.parked.store(true, Ordering::Release);
                self.waiting = Some((slot, true));
                return Op::Recv { slot };
            }
            Some((_, parked)) => {
                if parked {
                    self.state.parked.store(false, Ordering::Release);
                }
                // The inner script's receive has completed.
                OpResult::OK
            }
            None => last,
        };
        match self.inner.next(last, rng) {
            Op::Recv { slot } => {
                self.waiting = Some((slot, false));
                Op::TryRecv { slot }
            }
            op => op,
        }
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
