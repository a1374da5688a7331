//! kbuild: `make -j` as a stream of short-lived compiler processes.
//!
//! # Design
//! A shared queue of `tasks` tickets stands for make's job server: a CPU that finishes a
//! task takes the next ticket, so tasks start on whichever CPU is idle (fork/exec/exit
//! of short-lived processes on any idle CPU). A task is one process's life, and each
//! step is a page-allocation pattern the V3 series' descriptions name:
//! 1. **fork**: the kernel stack (`dup_task_struct`; 16 KiB, `stack_order` 2), then the
//!    page directory (`dup_mm` → `pgd_alloc`: order 1 with page-table isolation, as
//!    V3 1/9 describes). With `vmap_stack` (x86-64's default `CONFIG_VMAP_STACK`) the
//!    stack is vmalloc'ed, i.e. 2^`stack_order` order-0 pages; without it, one
//!    order-2 block.
//! 2. **exec and run**: over `chunks` rounds, the compiler computes
//!    `compute_ns_per_page` per page it is about to touch, then faults in its share of a
//!    log-normally distributed number of order-0 pages (anonymous memory: heap and
//!    stack, movable, touched; page-table pages mixed in as unmovable). Meanwhile the
//!    kernel's caches grow for it: up to `slab_blocks_max` slab blocks of order 1–3
//!    (task, mm, VMA, file and dentry objects; unmovable or reclaimable), each taken at
//!    a random round. A slab page lives as long as an object on it, so none is freed
//!    while the task runs.
//! 3. **exit** on the same CPU: `exit_mmap` frees the address space (thousands of
//!    order-0 frees), then the page directory goes (order 1) — V3 1/9's "process exit"
//!    pattern, whose single order-1 free made 6.6 drain the whole pcp at every exit.
//!    Then the final context switch releases the kernel stack (`put_task_stack`), and
//!    the RCU callbacks that free the task's objects empty its slab pages, which go back
//!    to the allocator together: the only **run of consecutive order 1–3 frees** of a
//!    task. With a vmalloc'ed stack (order 0) the page directory stays alone, as in
//!    V3 1/9's description; the slab burst after it is what free_high sees from patch1
//!    on (two consecutive order 1–3 frees), and what V3 9/9's `free_count` detects
//!    sooner than `free_factor` (a burst right after a flood that did not drain).
//!
//! The exit is what the series changed for kbuild: the V3 cover letter's kbuild (224
//! CPUs, 8 × `make -j28`) measured free_high 100 → 8.8 and alloc_zone 100 → 20.0 over
//! the series, and V3 1/9 alone 80 % fewer free_high drains (docs/mechanisms.md §3.7, §9.2).
//! Tasks do not migrate: the exit pattern, not the migration, is what the series
//! changed. Score: 100 / makespan; the task count ([`Op::Exit`]) is the work.
//!
//! # Scale: tasks, their lifetime, and the decay tick
//! The published kbuild is LKP's `kbuild` program: it loops `make mrproper`, `make
//! defconfig` and `make -j` until its `runtime` (300 s by default) has passed, so the
//! measured run lasts minutes and every CPU's `vmstat_update` decays its pcp hundreds of
//! times. One kernel build is tens of thousands of short processes: a measured x86
//! defconfig-style build ran 29 135 processes with 31.5 M minor faults and 1 079 s of
//! user time, i.e. about 38 ms of CPU and 1 080 faults per process. Here a task stands
//! for one compile's processes: at full scale it lives about 76 ms of virtual time
//! (the build's makespan × 112 CPUs ÷ tasks), so a tick comes once every dozen or so
//! task lifetimes on a CPU, as in the real build; what `tasks` sets is how many ticks
//! the build lasts. Full scale (896) ends before the workload CPUs' first ticks on
//! spr-2s-224 (0.6–0.8 s; CPUs 0–111 first tick at 667–1000 ms, the kernel's
//! `round_jiffies` skew: the decay never acts on a tuned pageset); `-p tasks=8960` (10×)
//! lasts 3.6–7 s, with the decay acting each second. The decay is not what the long
//! build changes: switched off there, the rows move by under a point
//! (docs/sim-cost-model.md §4.3 has the tables and the sources).
//!
//! What the synthesis leaves out, and why (docs/sim-cost-model.md §4.3): the page cache
//! as such (the simulator's headroom model stands for the memory the rest of the
//! machine holds: the published patch9 row needs the zone near its high watermark),
//! make's serial phases (LKP's loop: `drop_caches`, `mrproper`, configuration, then
//! `make -j` with its prepare steps and the serial vmlinux link), the build's full
//! length in ticks (hundreds in LKP's 300 s run; a few here, see above), and whatever
//! makes the real build's large zone-lock trips cost as much per page as its small ones
//! (the published zone lock % is nearly proportional to alloc_zone; ours collapses
//! once the lock leaves saturation: §4.3, "Where the zone-lock wait goes").
//!
//! [`Op::Exit`]: super::Op::Exit

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::entry::{scaled, DefaultCpus, Entry};
use super::params::define_params;
use super::program::{script, Fill, Phase, Program};
use super::{
    check_nonzero, check_order, invalid, share, CpuScript, MigrateKind, Op, OpCounts, Params, Rng,
    ScoreKind, Slot, Workload, WorkloadError,
};

/// The registry entry of kbuild: the seed measured it on Sapphire Rapids, 2 sockets, as `make -j112`
/// on one socket; the simulator runs it with its calibrated compute and headroom.
pub(super) const ENTRY: Entry = Entry::new(NAME, |n, s, o| scaled(n, s, o, Kbuild::new))
    .seed_machine("spr-2s-224")
    .cpus(DefaultCpus::Socket)
    .headroom_mib(KBUILD_HEADROOM_MIB)
    .calibrated(&[("compute_ns_per_page", KBUILD_COMPUTE_NS_PER_PAGE)]);

/// kbuild's `compute_ns_per_page` fitted to the published table (§4.2 of
/// docs/sim-cost-model.md): 4500 ns of work per page, of which `fault_ns` (1500 on SPR)
/// is charged by the cost model at each fault; the simulator runs kbuild with it unless
/// `-p` overrides it.
pub const KBUILD_COMPUTE_NS_PER_PAGE: u64 = 3000;

/// kbuild's free memory at the start of the build, MiB above the high watermark of each
/// zone (the headroom model, docs/sim-cost-model.md §3; fitted, §4.2, to the published
/// table's patch7 → patch9 step, the one step that depends on it.
pub const KBUILD_HEADROOM_MIB: u64 = 6000;

define_params! {
    /// Parameters of kbuild.
    pub struct KbuildParams {
        /// Tasks (compiler runs) in the whole build, shared by all CPUs (full scale: 8
        /// waves of 112, which end before the workload CPUs' decay acts; 8960 lasts several
        /// ticks: see "Scale" above).
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
        /// Most order 1–3 slab blocks per task (uniform in 0..=max): allocated while the
        /// task runs, freed together after it exits.
        slab_blocks_max: u32 = 8, full 8;
        /// Order of a kernel stack (2: 16 KiB, x86-64 `THREAD_SIZE_ORDER`).
        stack_order: u8 = 2, full 2;
        /// Kernel stacks are vmalloc'ed (`CONFIG_VMAP_STACK`, the x86-64 default): a
        /// stack is 2^stack_order order-0 pages. `false`: one order-`stack_order` block.
        vmap_stack: bool = true, full true;
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
        check_order(NAME, "stack_order", p.stack_order)?;
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

    fn work_units(&self, counts: &OpCounts) -> f64 {
        counts.exits as f64
    }
}

/// Slot of the page directory; the kernel stack, the slab blocks and the order-0 pages
/// follow.
const PGD: Slot = 0;
/// First slot of the kernel stack (one block, or 2^stack_order pages with vmap_stack).
const STACK: Slot = 1;

/// One CPU taking tasks from the shared queue.
#[derive(Debug)]
struct TaskStream {
    p: KbuildParams,
    /// The job server: next task number, shared by all CPUs of the run.
    tickets: Arc<AtomicU32>,
}

impl TaskStream {
    /// Slots of the kernel stack.
    fn stack_slots(&self) -> Slot {
        if self.p.vmap_stack {
            1 << self.p.stack_order
        } else {
            1
        }
    }

    fn first_slab_slot(&self) -> Slot {
        STACK + self.stack_slots()
    }

    fn first_page_slot(&self) -> Slot {
        self.first_slab_slot() + self.p.slab_blocks_max
    }
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
        let nslabs = rng.below(u64::from(p.slab_blocks_max) + 1) as u32;
        let first_slab = self.first_slab_slot();
        let stack_end = first_slab;
        // Slab block i: allocated at the start of round `alloc_at[i]`, order 1–3.
        let slabs: Vec<(Slot, u8, MigrateKind, u32)> = (0..nslabs)
            .map(|i| {
                let order = 1 + rng.below(3) as u8;
                let kind = if rng.percent(50) {
                    MigrateKind::Unmovable
                } else {
                    MigrateKind::Reclaimable
                };
                (
                    first_slab + i,
                    order,
                    kind,
                    rng.below(u64::from(p.chunks)) as u32,
                )
            })
            .collect();

        // fork: the child's kernel stack (dup_task_struct), then its page directory
        // (dup_mm → pgd_alloc; order 1 with page-table isolation).
        if p.vmap_stack {
            out.push_back(Phase::Fill(Fill::new(
                STACK..stack_end,
                0,
                MigrateKind::Unmovable,
            )));
        } else {
            out.push_back(Phase::Op(Op::Alloc {
                slot: STACK,
                order: p.stack_order,
                kind: MigrateKind::Unmovable,
            }));
        }
        out.push_back(Phase::Op(Op::Alloc {
            slot: PGD,
            order: 1,
            kind: MigrateKind::Unmovable,
        }));
        // exec and run: compute, fault in anonymous memory (page tables among it), and
        // grow the kernel's caches (new slab pages) along the way.
        let base = self.first_page_slot();
        let mut start = base;
        for round in 0..p.chunks {
            for &(slot, order, kind, _) in slabs.iter().filter(|s| s.3 == round) {
                out.push_back(Phase::Op(Op::Alloc { slot, order, kind }));
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
        // exit: exit_mmap frees the address space (the order-0 flood), then the page
        // directory (order 1); the last context switch frees the kernel stack, and the
        // RCU callbacks that free the task's objects empty its slab pages, which go back
        // together: a run of consecutive order 1–3 frees.
        out.push_back(Phase::Free(base..start));
        out.push_back(Phase::Free(PGD..PGD + 1));
        out.push_back(Phase::Free(STACK..stack_end));
        out.push_back(Phase::Free(first_slab..base));
        out.push_back(Phase::Op(Op::Exit));
        true
    }
}
