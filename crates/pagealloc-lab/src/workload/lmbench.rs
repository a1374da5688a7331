//! lmbench3 bw_unix: AF_UNIX stream bandwidth between CPU pairs.
//!
//! # Design
//! What the real program does per 64 KiB `write` (see `stream.rs` for the script):
//! `unix_stream_sendmsg` builds one skb whose linear head (`head_bytes`) comes from a
//! slab cache (no page allocation per chunk) and whose rest sits in page fragments
//! that `alloc_skb_with_frags` takes largest first, at most order 3
//! (`PAGE_ALLOC_COSTLY_ORDER`), each as large as the pages still needed allow: for a
//! 64 KiB chunk 15 pages, one block each of orders 3, 2, 1 and 0, all unmovable, all on
//! the writer's CPU. This is what the live kernel (6.18) did: `pagealloc trace record`
//! of a 64 KiB-write AF_UNIX stream (tests/data/traces/bw_unix.trace, its program in
//! tests/data/traces/programs/bw_unix.py) shows exactly one block of each of these
//! orders per write, every one freed by the reader on its own CPU. The kernel queues
//! them as two skbs (at most `UNIX_SKB_FRAGS_SZ`, 32 KiB, of fragments each: the
//! order-3 block, then the rest), waking the reader for each; `skb_frag_bytes` models
//! that (full scale: two skbs; the small default: one skb per chunk). The writer copies
//! the payload from user space into them; the reader copies it out in `read` and frees
//! the blocks, one after the other. Both sides pay a system call and the socket's
//! bookkeeping; docs/sim-cost-model.md gives the source of each cost. Score: bytes
//! received per second.
//!
//! Flow control (see `stream.rs`): the writer queues up to 4 chunks in the default
//! 208 KiB send buffer, then sleeps until the reader has freed them all (a writer is
//! woken only when a quarter of the buffer or less is in flight); the reader sleeps
//! when the queue is empty. bw_unix's reader also writes a control word to the writer
//! every 10 MiB (160 chunks); that round trip is not modelled.

use super::entry::{scaled, Entry};
use super::params::define_params;
use super::stream::{parts_of, Part, StreamShape};
use super::{
    check_nonzero, check_order, invalid, CpuScript, OpCounts, Params, ScoreKind, Workload,
    WorkloadError, PAGE_SIZE,
};

/// The registry entry of lmbench: the seed measured it on Ice Lake, 2 sockets.
pub(super) const ENTRY: Entry =
    Entry::new(NAME, |n, s, o| scaled(n, s, o, Lmbench::new)).seed_machine("icx-2s-128");

define_params! {
    /// Parameters of lmbench.
    pub struct LmbenchParams {
        /// Writer/reader pairs; 0 = as many as fit (cpus / 2). Spec: 16 on icx-2s-128.
        pairs: u32 = 0, full 16;
        /// Chunks written per pair.
        chunks: u32 = 100_000, full 5_000;
        /// Bytes per chunk (one write).
        chunk_bytes: u32 = 65_536, full 65_536;
        /// Largest order of the fragments a chunk is carried in (`UNIX_SKB_FRAGS_SZ`,
        /// 32 KiB: order 3); the rest of the chunk takes smaller ones, largest first.
        fragment_order: u8 = 3, full 3;
        /// Bytes of a chunk in the skb's linear head (slab memory, no page allocation):
        /// a page, as the live kernel's trace of 64 KiB writes shows (15 pages in
        /// fragments).
        head_bytes: u32 = 4_096, full 4_096;
        /// Fragment bytes one skb carries at most (`UNIX_SKB_FRAGS_SZ`, 32 KiB on the
        /// live kernel: `unix_stream_sendmsg` sends a 64 KiB write as two skbs, the
        /// reader woken for each; full scale too: the published 6.6-era kernels split
        /// the same way); 0: one skb per chunk.
        skb_frag_bytes: u32 = 0, full 32_768;
        /// The writer's socket buffer, bytes: `net.core.wmem_default` (212 992;
        /// bw_unix's `socketpair` sets no `SO_SNDBUF`). The writer may queue a chunk
        /// while the chunks in flight take less than this (`sock_alloc_send_pskb`).
        sndbuf_bytes: u32 = 212_992, full 212_992;
        /// What a chunk's skb costs the send buffer beyond its payload, bytes: the
        /// `sk_buff` and `skb_shared_info` of its small linear head (`SKB_TRUESIZE`), an
        /// estimate.
        skb_overhead_bytes: u32 = 768, full 768;
        /// Compute before retrying a failed allocation, ns.
        retry_backoff_ns: u64 = 1_000, full 1_000;
        /// One system call's entry and exit (`write`, `read`), ns: `getpid()` measured
        /// at 191 and 217 ns on Skylake-X (docs/sim-cost-model.md §10).
        syscall_ns: u64 = 200, full 200;
        /// The socket's bookkeeping per chunk on the writer (`unix_stream_sendmsg`: skb
        /// heads from slab, memory accounting, queueing, waking the reader), ns. Full
        /// scale: what a 64 KiB write cost each side on the live kernel beyond the
        /// system calls and copies (`pagealloc predict unix_stream`), carried to Ice Lake
        /// at the ratio of the clocks (2.6 / 2.6 GHz); the default is the earlier
        /// estimate (docs/sim-cost-model.md §10).
        send_protocol_ns: u64 = 500, full 3_300;
        /// The same on the reader (`unix_stream_read_generic`: dequeue, accounting,
        /// `consume_skb`), ns.
        recv_protocol_ns: u64 = 500, full 3_300;
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
        /// With the ends on two CPUs: the writer's work per chunk on memory the
        /// reader's CPU freed last (its pageset's refills, skb heads, the memcg's
        /// charge), ns, beyond the allocator's and the hierarchy's charge
        /// (`stream.rs`, `StreamShape::cross_ns`). `pagealloc predict` sets what this
        /// guest's profiles show (`predict/work.rs`); 0 at full scale (not measured on
        /// the published machines).
        cross_send_ns: u64 = 0, full 0;
        /// The same on the reader, for memory the writer's CPU took (its pageset's
        /// drains, `consume_skb`, the memcg's uncharge), ns.
        cross_recv_ns: u64 = 0, full 0;
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
        check_nonzero(NAME, "sndbuf_bytes", u64::from(p.sndbuf_bytes))?;
        check_order(NAME, "fragment_order", p.fragment_order)?;
        // The pages of the chunk beyond its head, in blocks of descending order: each
        // the largest (up to fragment_order) that the pages still needed fill
        // (`alloc_skb_with_frags`).
        let mut pages =
            (u64::from(p.chunk_bytes).saturating_sub(u64::from(p.head_bytes))).div_ceil(PAGE_SIZE);
        let mut left = u64::from(p.chunk_bytes);
        let mut list: Vec<Part> = Vec::new();
        while pages > 0 {
            let o = (63 - pages.leading_zeros()).min(u32::from(p.fragment_order)) as u8;
            let bytes = (PAGE_SIZE << o).min(left);
            left -= bytes;
            match list.last_mut() {
                Some(l) if l.order == o => l.blocks += 1,
                _ => list.push(Part {
                    order: o,
                    blocks: 1,
                    bytes: bytes as u32,
                }),
            }
            pages -= 1 << o;
            if list.iter().map(|x| x.blocks).sum::<u32>() > 1024 {
                return Err(invalid(
                    NAME,
                    "chunk_bytes",
                    p.chunk_bytes,
                    "more than 1024 fragments per chunk",
                ));
            }
        }
        if list.is_empty() {
            // A chunk that fits the head: no page allocation, modelled as one order-0
            // block so that the stream still moves its bytes.
            list.push(Part {
                order: 0,
                blocks: 1,
                bytes: p.chunk_bytes.min(PAGE_SIZE as u32),
            });
        }
        let (parts, nr_parts, blocks) = parts_of(&list);
        let skb_starts = skb_starts(&parts[..usize::from(nr_parts)], p.skb_frag_bytes);
        let (window, resume) = unix_window(p);
        let shape = StreamShape {
            pairs: p.pairs,
            messages: p.chunks,
            parts,
            nr_parts,
            blocks,
            window,
            resume,
            backoff_ns: p.retry_backoff_ns,
            syscall_ns: p.syscall_ns,
            send_protocol_ns: p.send_protocol_ns,
            recv_protocol_ns: p.recv_protocol_ns,
            sender_free_pct: 0,
            back_parts: u16::MAX,
            recv_on_sender_pct: 0,
            recv_arrival_pct: 0,
            skb_starts,
            turn_messages: p.turn_messages,
            shared_switch_ns: p.shared_switch_ns,
            cross_copy_in_ns_per_kib: p.cross_copy_in_ns_per_kib,
            cross_copy_out_ns_per_kib: p.cross_copy_out_ns_per_kib,
            cross_send_ns: p.cross_send_ns,
            cross_recv_ns: p.cross_recv_ns,
            slab_every: 0,
        };
        Ok(Lmbench { params, shape })
    }
}

/// The parts that begin a new skb (bit i: part i), each skb carrying at most
/// `frag_bytes` of fragments (the parts are whole blocks of one order; a part holding
/// more blocks than fit is not split); 0 `frag_bytes`: one skb.
fn skb_starts(parts: &[Part], frag_bytes: u32) -> u16 {
    if frag_bytes == 0 {
        return 0;
    }
    let (mut starts, mut used) = (0u16, 0u64);
    for (i, p) in parts.iter().enumerate() {
        let b = u64::from(p.blocks) * u64::from(p.bytes);
        if i > 0 && used + b > u64::from(frag_bytes) {
            starts |= 1 << i;
            used = 0;
        }
        used += b;
    }
    starts
}

/// AF_UNIX flow control, in chunks: the writer queues a chunk while the chunks in
/// flight take less than the send buffer (4 with the defaults), and a sleeping writer
/// is woken when they take at most a quarter of it (`unix_writable`, from
/// `unix_write_space` as the reader frees each skb): 0 chunks with the defaults, so
/// the writer waits until the reader has drained the queue.
fn unix_window(p: &LmbenchParams) -> (u32, u32) {
    let truesize = u64::from(p.chunk_bytes) + u64::from(p.skb_overhead_bytes);
    let sndbuf = u64::from(p.sndbuf_bytes);
    let window = ((sndbuf - 1) / truesize + 1).min(1 << 16) as u32;
    let resume = ((sndbuf / 4) / truesize).min(u64::from(window - 1)) as u32;
    (window, resume)
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

    fn inbox_resume(&self) -> usize {
        self.shape.inbox_resume()
    }
}
