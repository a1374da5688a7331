//! lmbench3 bw_unix: AF_UNIX stream bandwidth between CPU pairs.
//!
//! # Design
//! The writer writes 64 KiB chunks; each is an order-0 head plus order-3 blocks (32 KiB
//! fragments: two per chunk), freed by the reader on the neighbouring CPU after copying;
//! see `stream.rs` for pairing, flow control and the failure path. Score: bytes received
//! per second.

use super::params::define_params;
use super::stream::StreamShape;
use super::{
    check_nonzero, check_order, CpuScript, OpCounts, Params, ScoreKind, Workload, WorkloadError,
    PAGE_SIZE,
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
        let shape = StreamShape {
            pairs: p.pairs,
            messages: p.chunks,
            data_order: p.fragment_order,
            data_blocks: u64::from(p.chunk_bytes).div_ceil(fragment_bytes) as u32,
            window: p.window_chunks,
            backoff_ns: p.retry_backoff_ns,
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
        let chunks = counts.recvs / u64::from(self.shape.parts());
        (chunks * u64::from(self.params.chunk_bytes)) as f64
    }

    fn inbox_capacity(&self) -> usize {
        self.shape.inbox_capacity()
    }
}
