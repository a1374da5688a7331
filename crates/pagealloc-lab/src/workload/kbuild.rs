//! kbuild: `make -j` as a stream of short-lived compiler tasks.
//!
//! # Design
//! A shared queue of `tasks` tickets stands for make's job server: a CPU that finishes a
//! task takes the next ticket, so tasks start on whichever CPU is idle. A task:
//! 1. allocates its page directory (order 1, unmovable);
//! 2. over `chunks` rounds, computes `compute_ns_per_page` per page it is about to touch,
//!    then faults in its share of a log-normally distributed number of order-0 pages
//!    (anonymous memory, movable, with page-table pages mixed in as unmovable);
//! 3. meanwhile allocates a few order 1–3 slab blocks (unmovable or reclaimable) at
//!    random round boundaries and frees each at a later boundary;
//! 4. exits on the same CPU: thousands of order-0 frees, then the order-1 page directory —
//!    the pattern that made 6.6's free_high drain at every exit (patch1).
//!
//! Tasks do not migrate: the exit pattern, not the migration, is what the series changed.
//! Score: 100 / makespan; the task count ([`Op::Exit`]) is the work.
//!
//! [`Op::Exit`]: super::Op::Exit

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::params::define_params;
use super::program::{script, Fill, Phase, Program};
use super::{
    check_nonzero, invalid, share, CpuScript, MigrateKind, Op, OpCounts, Params, Rng, ScoreKind,
    Slot, Workload, WorkloadError,
};

define_params! {
    /// Parameters of kbuild.
    pub struct KbuildParams {
        /// Tasks (compiler runs) in the whole build, shared by all CPUs (full scale: 8
        /// waves of 112).
        tasks: u32 = 512, full 896;
        /// Median order-0 pages per task (log-normal).
        median_pages: u32 = 2_048, full 4_096;
        /// Log-normal shape: the standard deviation of ln(pages).
        sigma: f64 = 0.8, full 1.0;
        /// Lower clamp of pages per task.
        min_pages: u32 = 256, full 256;
        /// Upper clamp of pages per task: bounds a CPU's slot table (64 MiB, 256 MiB).
        max_pages: u32 = 16_384, full 65_536;
        /// Compute/allocate rounds per task.
        chunks: u32 = 8, full 8;
        /// Compute per page faulted in, ns (the compiler's work between faults); the knob
        /// the simulator's zone-lock share is calibrated with.
        compute_ns_per_page: u64 = 1_000, full 2_000;
        /// Most order 1–3 slab blocks per task (uniform in 0..=max).
        slab_blocks_max: u32 = 4, full 4;
        /// Page-table pages among the order-0 pages, per mille (one per 512 ≈ 2).
        pagetable_per_mille: u32 = 2, full 2;
    }
}

/// kbuild: a stream of short-lived tasks on all CPUs.
#[derive(Clone, Debug)]
pub struct Kbuild {
    params: KbuildParams,
}

const NAME: &str = "kbuild";

impl Kbuild {
    /// kbuild with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts, `min_pages > max_pages`, or a
    /// negative or non-finite `sigma`.
    pub fn new(params: KbuildParams) -> Result<Self, WorkloadError> {
        let p = &params;
        check_nonzero(NAME, "tasks", u64::from(p.tasks))?;
        check_nonzero(NAME, "median_pages", u64::from(p.median_pages))?;
        check_nonzero(NAME, "max_pages", u64::from(p.max_pages))?;
        check_nonzero(NAME, "chunks", u64::from(p.chunks))?;
        if p.min_pages > p.max_pages {
            return Err(invalid(NAME, "min_pages", p.min_pages, "above max_pages"));
        }
        if !(p.sigma.is_finite() && p.sigma >= 0.0) {
            return Err(invalid(NAME, "sigma", p.sigma, "must be finite and >= 0"));
        }
        if p.pagetable_per_mille > 1000 {
            return Err(invalid(
                NAME,
                "pagetable_per_mille",
                p.pagetable_per_mille,
                "at most 1000",
            ));
        }
        if p.slab_blocks_max > 1 << 16 {
            return Err(invalid(
                NAME,
                "slab_blocks_max",
                p.slab_blocks_max,
                "at most 65536",
            ));
        }
        Ok(Kbuild { params })
    }
}

impl Workload for Kbuild {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let tickets = Arc::new(AtomicU32::new(0));
        Ok((0..cpus)
            .map(|_| {
                script(TaskStream {
                    p: self.params.clone(),
                    tickets: Arc::clone(&tickets),
                })
            })
            .collect())
    }

    fn score_kind(&self) -> ScoreKind {
        ScoreKind::InverseMakespan
    }

    fn score_unit(&self) -> &'static str {
        "100/s"
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        counts.exits as f64
    }
}

/// Slot of the page directory; slab blocks follow, then the order-0 pages.
const PGD: Slot = 0;

/// One CPU taking tasks from the shared queue.
#[derive(Debug)]
struct TaskStream {
    p: KbuildParams,
    /// The job server: next task number, shared by all CPUs of the run.
    tickets: Arc<AtomicU32>,
}

impl TaskStream {
    fn first_page_slot(&self) -> Slot {
        1 + self.p.slab_blocks_max
    }
}

/// A slab block's life within a task, in round boundaries `0..=chunks`.
struct SlabBlock {
    slot: Slot,
    order: u8,
    kind: MigrateKind,
    alloc_at: u32,
    free_at: u32,
}

impl Program for TaskStream {
    fn slot_count(&self) -> Slot {
        self.first_page_slot() + self.p.max_pages
    }

    fn refill(&mut self, rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        // Relaxed: the ticket is the only shared datum; no other memory is published.
        if self.tickets.fetch_add(1, Ordering::Relaxed) >= self.p.tasks {
            return false;
        }
        let p = &self.p;
        let sampled = rng.lognormal(f64::from(p.median_pages), p.sigma).round();
        // `as` saturates (and maps NaN to 0); the clamp does the rest.
        let pages = (sampled as u32).clamp(p.min_pages, p.max_pages);
        let slabs: Vec<SlabBlock> = (0..rng.below(u64::from(p.slab_blocks_max) + 1) as u32)
            .map(|i| {
                let alloc_at = rng.below(u64::from(p.chunks)) as u32;
                SlabBlock {
                    slot: 1 + i,
                    order: 1 + rng.below(3) as u8,
                    kind: if rng.percent(50) {
                        MigrateKind::Unmovable
                    } else {
                        MigrateKind::Reclaimable
                    },
                    alloc_at,
                    // In alloc_at+1 ..= chunks: freed before the exit.
                    free_at: alloc_at + 1 + rng.below(u64::from(p.chunks - alloc_at)) as u32,
                }
            })
            .collect();

        out.push_back(Phase::Op(Op::Alloc {
            slot: PGD,
            order: 1,
            kind: MigrateKind::Unmovable,
        }));
        let base = self.first_page_slot();
        let mut start = base;
        for round in 0..=p.chunks {
            for s in slabs.iter().filter(|s| s.free_at == round) {
                out.push_back(Phase::Free(s.slot..s.slot + 1));
            }
            for s in slabs.iter().filter(|s| s.alloc_at == round) {
                out.push_back(Phase::Op(Op::Alloc {
                    slot: s.slot,
                    order: s.order,
                    kind: s.kind,
                }));
            }
            if round == p.chunks {
                break;
            }
            let len = share(u64::from(pages), p.chunks, round) as Slot;
            if len == 0 {
                continue;
            }
            let ns = u64::from(len) * p.compute_ns_per_page;
            if ns > 0 {
                out.push_back(Phase::Op(Op::Compute { ns }));
            }
            out.push_back(Phase::Fill(
                Fill::new(start..start + len, 0, MigrateKind::Movable)
                    .touching()
                    .unmovable_per_mille(p.pagetable_per_mille),
            ));
            start += len;
        }
        // Exit: the address space, then the page directory.
        out.push_back(Phase::Free(base..start));
        out.push_back(Phase::Free(PGD..PGD + 1));
        out.push_back(Phase::Op(Op::Exit));
        true
    }
}
