//! netperf SCTP_STREAM_MANY: pairs stream 10 KB messages.
//!
//! # Design
//! What the real program does per message (see `stream.rs` for the script):
//! `sctp_sendmsg` builds one skb whose linear buffer holds the 10 KB payload; above
//! 8 KiB slab passes it to the page allocator (`kmalloc_large`), one order-2 block; the
//! `sk_buff` and the chunk headers come from slab caches (no page allocation). The
//! payload is copied from user space into the block; the receiver copies it out in
//! `recvmsg` and frees the block (`kfree_skb` → `free_large_kmalloc`). Both sides pay a
//! system call and the protocol's work; docs/sim-cost-model.md gives the source of each
//! cost. Score: messages received per second.

use super::params::define_params;
use super::stream::{order_for, StreamShape};
use super::{
    check_nonzero, invalid, CpuScript, OpCounts, Params, ScoreKind, Workload, WorkloadError,
    MAX_ORDER,
};

define_params! {
    /// Parameters of netperf.
    pub struct NetperfParams {
        /// Sender/receiver pairs; 0 = as many as fit (cpus / 2). Spec: 64 on icx-2s-128.
        pairs: u32 = 0, full 64;
        /// Messages per pair.
        messages: u32 = 200_000, full 20_000;
        /// Message size in bytes; the data block is the smallest order that holds it.
        message_bytes: u32 = 10_240, full 10_240;
        /// Messages in flight per pair before the sender blocks (the socket buffer).
        window_messages: u32 = 32, full 32;
        /// Compute before retrying a failed allocation, ns.
        retry_backoff_ns: u64 = 1_000, full 1_000;
        /// One system call's entry and exit (`sendmsg`, `recvmsg`), ns: `getpid()`
        /// measured at 191 and 217 ns on Skylake-X
        /// (docs/sim-cost-model.md §10).
        syscall_ns: u64 = 200, full 200;
        /// SCTP's transmit work per message on the sender (`sctp_sendmsg` to the
        /// loopback's `sctp_rcv`, which runs in the sender's softirq), ns: half of the
        /// ≈ 2 µs per message a published run leaves for SCTP (docs/sim-cost-model.md
        /// §10).
        send_protocol_ns: u64 = 1_000, full 1_000;
        /// SCTP's receive work per message on the receiver (`sctp_recvmsg`, the
        /// ulpevent, the SACK), ns: the other half.
        recv_protocol_ns: u64 = 1_000, full 1_000;
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
        check_nonzero(NAME, "window_messages", u64::from(p.window_messages))?;
        let data_order = order_for(u64::from(p.message_bytes));
        if data_order > u32::from(MAX_ORDER) {
            return Err(invalid(
                NAME,
                "message_bytes",
                p.message_bytes,
                "above an order-10 block",
            ));
        }
        let shape = StreamShape {
            pairs: p.pairs,
            messages: p.messages,
            order: data_order as u8,
            blocks: 1,
            bytes_per_block: p.message_bytes,
            window: p.window_messages,
            backoff_ns: p.retry_backoff_ns,
            syscall_ns: p.syscall_ns,
            send_protocol_ns: p.send_protocol_ns,
            recv_protocol_ns: p.recv_protocol_ns,
        };
        Ok(Netperf { params, shape })
    }
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
        counts.recvs as f64
    }

    fn inbox_capacity(&self) -> usize {
        self.shape.inbox_capacity()
    }
}
