//! lmbench3 bw_unix: AF_UNIX stream bandwidth between CPU pairs.
//!
//! # Design
//! What the real program does per 64 KiB `write` (see `stream.rs` for the script):
//! `unix_stream_sendmsg` builds skbs whose small linear head comes from a slab cache
//! (no page allocation) and whose payload sits in page fragments of at most order 3
//! (`PAGE_ALLOC_COSTLY_ORDER`): two order-3 blocks per chunk. The writer copies the
//! payload from user space into them; the reader copies it out in `read` and frees both
//! blocks, one after the other. Both sides pay a system call and the socket's
//! bookkeeping; docs/sim-cost-model.md gives the source of each cost. Score: bytes
//! received per second.

use super::params::define_params;
use super::stream::StreamShape;
use super::{
    check_nonzero, check_order, invalid, CpuScript, OpCounts, Params, ScoreKind, Workload,
    WorkloadError, PAGE_SIZE,
};

define_params! {
    /// Parameters of lmbench.
    pub struct LmbenchParams {
        /// Writer/reader pairs; 0 = as many as fit (cpus / 2). Spec: 16 on icx-2s-128.
        pairs: u32 = 0, full 16;
        /// Chunks written per pair.
        chunks: u32 = 100_000, full 5_000;
        /// Bytes per chunk (one write).
        chunk_bytes: u32 = 65_536, full 65_536;
        /// Order of the fragments a chunk is carried in.
        fragment_order: u8 = 3, full 3;
        /// Chunks in flight per pair before the writer blocks: AF_UNIX's default 208 KiB
        /// send buffer holds about 3 of 64 KiB.
        window_chunks: u32 = 4, full 4;
        /// Compute before retrying a failed allocation, ns.
        retry_backoff_ns: u64 = 1_000, full 1_000;
        /// One system call's entry and exit (`write`, `read`), ns: `getpid()` measured
        /// at 191 and 217 ns on Skylake-X (docs/sim-cost-model.md §10).
        syscall_ns: u64 = 200, full 200;
        /// The socket's bookkeeping per chunk on the writer (`unix_stream_sendmsg`: skb
        /// heads from slab, memory accounting, queueing, waking the reader), ns: an
        /// estimate (docs/sim-cost-model.md §10).
        send_protocol_ns: u64 = 500, full 500;
        /// The same on the reader (`unix_stream_read_generic`: dequeue, accounting,
        /// `consume_skb`), ns.
        recv_protocol_ns: u64 = 500, full 500;
    }
}

/// lmbench AF_UNIX: chunk streams between CPU pairs.
#[derive(Clone, Debug)]
pub struct Lmbench {
    params: LmbenchParams,
    shape: StreamShape,
}

const NAME: &str = "lmbench";

impl Lmbench {
    /// lmbench with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts or a fragment order above 10.
    pub fn new(params: LmbenchParams) -> Result<Self, WorkloadError> {
        let p = &params;
        check_nonzero(NAME, "chunks", u64::from(p.chunks))?;
        check_nonzero(NAME, "chunk_bytes", u64::from(p.chunk_bytes))?;
        check_nonzero(NAME, "window_chunks", u64::from(p.window_chunks))?;
        check_order(NAME, "fragment_order", p.fragment_order)?;
        let fragment_bytes = PAGE_SIZE << p.fragment_order;
        let blocks = u64::from(p.chunk_bytes).div_ceil(fragment_bytes);
        if blocks > 1024 {
            return Err(invalid(
                NAME,
                "chunk_bytes",
                p.chunk_bytes,
                "more than 1024 fragments per chunk",
            ));
        }
        let shape = StreamShape {
            pairs: p.pairs,
            messages: p.chunks,
            order: p.fragment_order,
            blocks: blocks as u32,
            // The chunk is spread evenly over its fragments (the last one may be part
            // full in the kernel; the copies move the same bytes).
            bytes_per_block: (u64::from(p.chunk_bytes).div_ceil(blocks)) as u32,
            window: p.window_chunks,
            backoff_ns: p.retry_backoff_ns,
            syscall_ns: p.syscall_ns,
            send_protocol_ns: p.send_protocol_ns,
            recv_protocol_ns: p.recv_protocol_ns,
        };
        Ok(Lmbench { params, shape })
    }
}

impl Workload for Lmbench {
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
        "bytes/s"
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        let chunks = counts.recvs / u64::from(self.shape.blocks);
        (chunks * u64::from(self.params.chunk_bytes)) as f64
    }

    fn inbox_capacity(&self) -> usize {
        self.shape.inbox_capacity()
    }
}
