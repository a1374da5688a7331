//! zonelist_hog: threads together touch most of a many-node machine's memory, so nodes
//! fill and allocations fall back along the zonelist (the full-zone cache's case).
//!
//! # Design
//! The first `threads` CPUs each fault in their share of `total_pages` (order 0, movable,
//! touched) in one loop, then free it and exit; the other CPUs are idle. Allocations are
//! expected to fail near the end: a failure is retried after `backoff_ns` of compute
//! (another thread may free, or the allocator may reclaim), up to `retries` times in a
//! row, then the thread stops faulting and frees what it has. The executors report
//! system (allocator), user (touch) and elapsed time; the score is 100 / elapsed.
//! The spec's grid: threads ∈ {1, 19, 37, 55} × {12, 38, 64, 90} GiB of 96.

use super::params::define_params;
use super::program::{script, Fill, Once, Phase};
use super::{
    check_cpus, check_nonzero, invalid, share, CpuScript, MigrateKind, Op, OpCounts, Params,
    ScoreKind, Slot, Workload, WorkloadError,
};

define_params! {
    /// Parameters of zonelist_hog.
    pub struct ZonelistHogParams {
        /// Threads; 0 = one per CPU. Spec: 1, 19, 37 or 55 on sn2-28n-56.
        threads: u32 = 0, full 55;
        /// Pages touched by all threads together. Full scale: 90 GiB of 96.
        total_pages: u64 = 262_144, full 23_592_960;
        /// Retries of a failed allocation before the thread gives up.
        retries: u32 = 8, full 8;
        /// Compute before each retry, ns.
        backoff_ns: u64 = 10_000, full 10_000;
    }
}

/// zonelist_hog: fill most of memory from many threads.
#[derive(Clone, Debug)]
pub struct ZonelistHog {
    params: ZonelistHogParams,
}

const NAME: &str = "zonelist_hog";

impl ZonelistHog {
    /// zonelist_hog with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero pages.
    pub fn new(params: ZonelistHogParams) -> Result<Self, WorkloadError> {
        check_nonzero(NAME, "total_pages", params.total_pages)?;
        Ok(ZonelistHog { params })
    }
}

impl Workload for ZonelistHog {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let p = &self.params;
        let threads = match p.threads {
            0 => cpus,
            n => n,
        };
        check_cpus(NAME, threads.max(1), cpus)?;
        (0..cpus)
            .map(|cpu| {
                if cpu >= threads {
                    return Ok(script(Once::idle()));
                }
                let pages = Slot::try_from(share(p.total_pages, threads, cpu)).map_err(|_| {
                    invalid(
                        NAME,
                        "total_pages",
                        p.total_pages,
                        "over 2^32 pages per thread",
                    )
                })?;
                Ok(script(Once::new(
                    pages,
                    vec![
                        Phase::Fill(
                            Fill::new(0..pages, 0, MigrateKind::Movable)
                                .touching()
                                .retry(p.retries, p.backoff_ns),
                        ),
                        Phase::Free(0..pages),
                        Phase::Op(Op::Exit),
                    ],
                )))
            })
            .collect()
    }

    fn score_kind(&self) -> ScoreKind {
        ScoreKind::InverseMakespan
    }

    fn score_unit(&self) -> &'static str {
        "100/s"
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        counts.allocated_pages() as f64
    }
}
