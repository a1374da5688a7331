//! netperf SCTP_STREAM_MANY: pairs stream 10 KB messages.
//!
//! # Design
//! What the real program does per message (see `stream.rs` for the script), as
//! Debian's 6.1 kernel did it in a VM (scripts/sctp_vm.sh: the live kernel here has no
//! SCTP; docs/sim-cost-model.md §10): `sctp_sendmsg` copies the 10 KB payload into a
//! DATA chunk's linear skb, above 8 KiB a block from the page allocator
//! (`kmalloc_large`, one order-2 block per message, 1.005-1.04 in the VM); the
//! `sk_buff` and the headers come from slab caches. `sctp_packet_transmit` copies the
//! chunks it sends together into a new linear skb, the packet: while earlier data is
//! unacknowledged SCTP bundles chunks up to the path MTU (64 KiB on loopback), 3.5-4.0
//! per packet in the VM, one block of order 2-4 per packet (`packet_chunks`,
//! `second_packet_chunks`: each simulated message is one or two packets, each a block
//! of the order that holds its chunks). The
//! receiver copies the payload out in `recvmsg` and frees the packet; the chunks stay
//! queued on the sender until a SACK covers them and are freed where it is processed:
//! on the sender's CPU for 89 % of them with the ends on two CPUs (`sender_free_pct`;
//! the receiver hands the rest back to be freed on its side). Both sides pay a system
//! call and the protocol's work per message; docs/sim-cost-model.md gives the source of
//! each cost. Score: messages received per second. With `packet_chunks` 0 (the small
//! scale's default) a message is one order-2 block the receiver frees.
//!
//! Flow control (see `stream.rs`): the receive window holds rcvbuf / 2 bytes, 10
//! messages with the defaults; a sender facing a full window sleeps until the receiver
//! has read 64 KiB (7 messages) and sent a window update; a receiver with nothing
//! queued sleeps until the next message arrives. The few messages SCTP can also hold
//! in the sender's own buffer beyond the peer's window are not modelled.
//!
//! With `frag_bytes` above 0 it is a TCP stream over loopback instead (netperf
//! TCP_STREAM, iperf3): one page-fragment block per `frag_bytes` of stream, as the live
//! kernel allocates it; `sender_free_pct` of those blocks go back to the sender's CPU to
//! be freed (the live kernel frees 89-99.7 % there, in softirq: the reader queues each
//! consumed skb on its allocating CPU's deferred-free list, `skb_attempt_defer_free`).
//! The simulated sender frees what has come back after each message without waiting
//! (`stream.rs`).

use super::entry::{scaled, Entry};
use super::params::define_params;
use super::stream::{order_for, parts_of, Part, StreamShape};
use super::{
    check_nonzero, invalid, CpuScript, OpCounts, Params, ScoreKind, Workload, WorkloadError,
    MAX_ORDER,
};

/// The registry entry of netperf: the seed measured it on Ice Lake, 2 sockets.
pub(super) const ENTRY: Entry =
    Entry::new(NAME, |n, s, o| scaled(n, s, o, Netperf::new)).seed_machine("icx-2s-128");

define_params! {
    /// Parameters of netperf.
    pub struct NetperfParams {
        /// Sender/receiver pairs; 0 = as many as fit (cpus / 2). Spec: 64 on icx-2s-128.
        pairs: u32 = 0, full 64;
        /// Messages per pair.
        messages: u32 = 200_000, full 20_000;
        /// Message size in bytes; the data block is the smallest order that holds it.
        message_bytes: u32 = 10_240, full 10_240;
        /// The receiver's socket buffer, bytes: `net.core.rmem_default` (212 992; SCTP
        /// ignores the default of `net.sctp.sctp_rmem`, and netperf sets no
        /// `SO_RCVBUF` unless asked). SCTP's receive window is half of it
        /// (`sctp_association_init`); the sender sleeps when the window holds no
        /// further message.
        rcvbuf_bytes: u32 = 212_992, full 212_992;
        /// The path MTU, bytes: the loopback's 65 536. The receiver sends a window
        /// update once its window has reopened by max(rcvbuf / 16, path MTU)
        /// (`sctp_peer_needs_update`); only then is a blocked sender woken.
        path_mtu_bytes: u32 = 65_536, full 65_536;
        /// 0: SCTP (the seeds' SCTP_STREAM_MANY): one linear data block per message.
        /// Above 0: TCP over loopback (netperf TCP_STREAM, iperf3): the sender copies
        /// its writes into the socket's page fragment, one block of the smallest order
        /// that holds `frag_bytes` per `frag_bytes` of stream (`skb_page_frag_refill`:
        /// 32 768, order 3), and each simulated message is one such fragment carrying
        /// `frag_bytes / message_bytes` writes (each with its system call and protocol
        /// work on both sides). The live kernel (6.18) allocated exactly one order-3
        /// block per 32 KiB of a TCP loopback stream and nothing else per write
        /// (`pagealloc predict tcp_stream`, tests/data/traces/iperf3.trace).
        frag_bytes: u32 = 0, full 0;
        /// SCTP: DATA chunks per packet (0: the chunk is the packet, one block per
        /// message that the receiver frees). `sctp_sendmsg` copies each message into a
        /// chunk of its own (one order-2 block for 10 KB, `kmalloc_large`); the packet
        /// `sctp_packet_transmit` builds is a new linear skb the chunks are copied into,
        /// bundled up to the path MTU while earlier data is unacknowledged (SCTP's
        /// Nagle), of the smallest order that holds them; the receiver reads and frees
        /// the packet, the sender frees each chunk once a SACK covers it. Each
        /// simulated message is one such packet (two with `second_packet_chunks`).
        /// Full scale: Debian's 6.1 kernel in a VM bundled 3.5 chunks per packet at
        /// one CPU, half of the packets order 4 and half order 3 (4.0 at two CPUs
        /// under TCG; scripts/sctp_vm.sh, docs/sim-cost-model.md §10): a packet of 4
        /// and one of 3.
        packet_chunks: u32 = 0, full 4;
        /// SCTP with `packet_chunks` above 0: the chunks of a second packet in each
        /// simulated message (0: none).
        second_packet_chunks: u32 = 0, full 3;
        /// Share of messages whose blocks the sender's CPU frees, %; the receiver
        /// frees the rest. TCP over loopback frees most page fragments on the sender's
        /// CPU (its softirq empties the deferred-free list the reader fills): 89-99.7 %
        /// in the live kernel (docs/predict.md). SCTP with `packet_chunks` above 0: the
        /// share of chunks the sender's CPU frees (the SACK processed there; the packet
        /// is the receiver's to free): 89 % in the VM with the ends on two CPUs.
        sender_free_pct: u32 = 0, full 89;
        /// Compute before retrying a failed allocation, ns.
        retry_backoff_ns: u64 = 1_000, full 1_000;
        /// One system call's entry and exit (`sendmsg`, `recvmsg`), ns: `getpid()`
        /// measured at 191 and 217 ns on Skylake-X
        /// (docs/sim-cost-model.md §10).
        syscall_ns: u64 = 200, full 200;
        /// SCTP's work per message on the sender, ns (`sctp_sendmsg`, the chunk's
        /// copy into its packet, `sctp_packet_transmit`, the SACKs). Full scale: what a
        /// loopback TCP write cost the live kernel's writer beyond its system call and
        /// copy (1.41 µs: `pagealloc predict tcp_stream`, predict/work.rs) × SCTP's
        /// cost over TCP's per 10 KB message on the sender's side, 1.81 (1.77-1.83):
        /// instructions per message of Debian's 6.1 kernel under QEMU's instruction
        /// counting, both ends on one CPU as the TCP figure was taken
        /// (scripts/sctp_vm.sh, docs/sim-cost-model.md §10).
        send_protocol_ns: u64 = 1_400, full 2_560;
        /// SCTP's work per message on the receiver (`sctp_recvmsg`, the DATA chunks from
        /// the backlog, freeing the ulpevent, the window updates), ns. Full scale: the
        /// live TCP reader's 5.04 µs × the VM's SCTP/TCP ratio on the receiver's side,
        /// 2.02 (2.00-2.08).
        recv_protocol_ns: u64 = 600, full 10_160;
        /// With the ends on two CPUs: share of `recv_protocol_ns` the sender's CPU
        /// does instead of the receiver's, % (`stream.rs`, `Sender`: TCP over loopback
        /// transmits and receives a running writer's segments on the writer's CPU).
        /// 0 keeps all of it on the receiver.
        recv_on_sender_pct: u32 = 0, full 0;
        /// With the ends on two CPUs: share of `recv_protocol_ns` done where a message
        /// arrives, % (at most 100 − `recv_on_sender_pct`): on the sender's CPU when the
        /// receiver is asleep waiting for data as the message arrives (until it runs
        /// again), else on the receiver's CPU at that receive, as TCP's `tcp_v4_rcv`
        /// processes a segment at once when the reader does not own its socket and
        /// leaves it on the socket's backlog for the reader's `release_sock` when it
        /// does (`stream.rs`, `ReaderState`). 0: none; the receiver's state is not
        /// followed.
        recv_arrival_pct: u32 = 0, full 0;
        /// With both ends on one CPU (a pair on a 1-CPU run): messages the writer
        /// queues before the woken reader preempts it; 0: until the buffer is full.
        turn_messages: u32 = 0, full 0;
        /// With both ends on one CPU: a hand-over's cost (the sleeper's context switch
        /// and the local wakeup: the cost model's `switch_ns` + `wake_ns`), ns.
        shared_switch_ns: u64 = 1_100, full 1_100;
        /// With the ends on two CPUs: the sender's copy into blocks whose lines the
        /// receiver's core held last, per KiB the hierarchy serves from its cache, beyond
        /// the hierarchy's charge, ns (`stream.rs`, `CrossCopy`). Full scale: the live kernel's 89 ns/KiB here
        /// (`predict/work.rs`) at Ice Lake's core-to-core latency (× 50 / 165 ns: the
        /// moves are latency-bound), less the ~11 ns/KiB Ice Lake's hierarchy already
        /// charges for lines another core holds (docs/sim-cost-model.md §10).
        cross_copy_in_ns_per_kib: u64 = 0, full 16;
        /// The same for the receiver's copy of lines the sender's core wrote: 0 at full
        /// scale (Ice Lake's hierarchy streams a modified line from a peer core at
        /// 50 ns / 16, slower than the measured cross-core read scales to).
        cross_copy_out_ns_per_kib: u64 = 0, full 0;
        /// TCP with the ends on two CPUs: writes per new slab page of the skb caches,
        /// one order-1 unmovable block the writer's CPU takes and the reader's frees
        /// (`stream.rs`, `StreamShape::slab`); 0: none, as with both ends on one CPU.
        /// The live kernel took one per 200 to over 10 000 writes of 16 KiB, varying
        /// with the slabs' state (docs/predict.md).
        slab_every_writes: u32 = 0, full 0;
    }
}

/// netperf: message streams between CPU pairs.
#[derive(Clone, Debug)]
pub struct Netperf {
    params: NetperfParams,
    shape: StreamShape,
}

const NAME: &str = "netperf";

impl Netperf {
    /// netperf with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts or messages above 4 MiB.
    pub fn new(params: NetperfParams) -> Result<Self, WorkloadError> {
        let p = &params;
        check_nonzero(NAME, "messages", u64::from(p.messages))?;
        check_nonzero(NAME, "message_bytes", u64::from(p.message_bytes))?;
        check_nonzero(NAME, "rcvbuf_bytes", u64::from(p.rcvbuf_bytes))?;
        // Writes per simulated message: those that fill a fragment for TCP, the chunks
        // of a packet for SCTP.
        let writes = writes_per_message(p);
        let unit = if p.frag_bytes > 0 {
            p.frag_bytes.max(p.message_bytes)
        } else {
            p.message_bytes.saturating_mul(writes)
        };
        let (window, resume) = if p.frag_bytes > 0 {
            tcp_window(p, unit)
        } else {
            // SCTP's window counts messages; the simulated messages are packets of
            // `writes` of them: a packet is queued while any of its room is left.
            let (w, r) = sctp_window(p, p.message_bytes);
            (w.div_ceil(writes), r / writes)
        };
        let data_order = order_for(u64::from(unit));
        if data_order > u32::from(MAX_ORDER) {
            return Err(invalid(
                NAME,
                "message_bytes",
                p.message_bytes,
                "above an order-10 block",
            ));
        }
        let (parts, nr_parts, blocks) = if p.frag_bytes == 0 && p.packet_chunks > 0 {
            // The chunks (the messages' bytes copied in and, by the receiver, out) and
            // the packet they are copied into: its copy is part of the sender's
            // protocol work (`send_protocol_ns`), the receiver's copy is charged on the
            // chunks (the same bytes, written by the same core).
            let packet = |chunks: u32| Part {
                order: order_for(u64::from(p.message_bytes) * u64::from(chunks)) as u8,
                blocks: 1,
                bytes: 0,
            };
            let chunks = Part {
                order: order_for(u64::from(p.message_bytes)) as u8,
                blocks: writes,
                bytes: p.message_bytes,
            };
            if p.second_packet_chunks > 0 {
                parts_of(&[
                    chunks,
                    packet(p.packet_chunks),
                    packet(p.second_packet_chunks),
                ])
            } else {
                parts_of(&[chunks, packet(p.packet_chunks)])
            }
        } else {
            parts_of(&[Part {
                order: data_order as u8,
                blocks: 1,
                bytes: unit,
            }])
        };
        let shape = StreamShape {
            pairs: p.pairs,
            messages: p.messages.div_ceil(writes),
            parts,
            nr_parts,
            blocks,
            window,
            resume,
            backoff_ns: p.retry_backoff_ns,
            syscall_ns: p.syscall_ns * u64::from(writes),
            send_protocol_ns: p.send_protocol_ns * u64::from(writes),
            recv_protocol_ns: p.recv_protocol_ns * u64::from(writes),
            sender_free_pct: p.sender_free_pct.min(100),
            // SCTP's packets: the receiver hands back the chunks (part 0) and frees
            // the packet.
            back_parts: if p.frag_bytes == 0 && p.packet_chunks > 0 {
                1
            } else {
                u16::MAX
            },
            recv_on_sender_pct: p.recv_on_sender_pct.min(100),
            recv_arrival_pct: p.recv_arrival_pct.min(100),
            skb_starts: 0,
            turn_messages: p.turn_messages,
            shared_switch_ns: p.shared_switch_ns,
            cross_copy_in_ns_per_kib: p.cross_copy_in_ns_per_kib,
            cross_copy_out_ns_per_kib: p.cross_copy_out_ns_per_kib,
            cross_send_ns: 0,
            cross_recv_ns: 0,
            slab_every: if p.slab_every_writes == 0 {
                0
            } else {
                (p.slab_every_writes / writes).max(1)
            },
        };
        Ok(Netperf { params, shape })
    }
}

/// The writes one simulated message carries: its packets' chunks (at least 1) for
/// SCTP, `frag_bytes / message_bytes` (at least 1) for TCP.
fn writes_per_message(p: &NetperfParams) -> u32 {
    if p.frag_bytes == 0 && p.packet_chunks > 0 {
        p.packet_chunks.saturating_add(p.second_packet_chunks)
    } else if p.frag_bytes == 0 {
        1
    } else {
        (p.frag_bytes / p.message_bytes).max(1)
    }
}

/// SCTP's flow control over loopback, in messages: the receive window (rcvbuf / 2, at
/// least `SCTP_DEFAULT_MINWINDOW` = 1 500 bytes, and at least one message) and the queue
/// length a blocked sender is woken at (the window has reopened by max(rcvbuf >> 4,
/// path MTU) bytes: a window-update SACK).
fn sctp_window(p: &NetperfParams, unit: u32) -> (u32, u32) {
    let msg = u64::from(unit);
    let rwnd = (u64::from(p.rcvbuf_bytes) / 2).max(1_500);
    let window = (rwnd / msg).clamp(1, 1 << 16) as u32;
    let update = (u64::from(p.rcvbuf_bytes) >> 4).max(u64::from(p.path_mtu_bytes));
    let step = update.div_ceil(msg).min(u64::from(window)) as u32;
    (window, window - step)
}

/// TCP's flow control, in messages: the writer's send buffer (rcvbuf / 2, as SCTP's
/// window) and the queue length it is woken at: `sk_stream_write_space` wakes a writer
/// once the buffer's free space is at least half of what is still queued
/// (`sk_stream_wspace` ≥ `sk_stream_min_wspace`), i.e. at two thirds of the buffer.
fn tcp_window(p: &NetperfParams, unit: u32) -> (u32, u32) {
    let (window, _) = sctp_window(p, unit);
    (window, (2 * window / 3).min(window.saturating_sub(1)))
}

impl Workload for Netperf {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        self.shape.scripts(NAME, cpus)
    }

    fn score_kind(&self) -> ScoreKind {
        ScoreKind::Rate
    }

    fn score_unit(&self) -> &'static str {
        "messages/s"
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        // Messages received: with blocks handed back to the sender, its `Recv`s are not
        // messages, nor are a slab page's; every message is copied in and out once per
        // block.
        let messages = if self.shape.sender_free_pct > 0 || self.shape.slab_every > 0 {
            counts.copies as f64 / (2.0 * f64::from(self.shape.blocks))
        } else {
            counts.recvs as f64
        };
        messages * f64::from(writes_per_message(&self.params))
    }

    fn inbox_capacity(&self) -> usize {
        self.shape.inbox_capacity()
    }

    fn inbox_resume(&self) -> usize {
        self.shape.inbox_resume()
    }
}
