//! thp_mix: page_fault1 with THP on half the CPUs and order-0 pages on the other half,
//! after breaking all high-order blocks (the cost of merge skipping to THP).
//!
//! # Design
//! Prelude: every CPU allocates order-0 pages until `break_pages_per_cpu` or the first
//! failure, then (barrier 0) frees them all, so that every high-order block has been
//! split and must be merged again; barrier 1 starts the measured window. Then CPUs
//! `0..thp_cpus` run page_fault1 with order-9 blocks and the others with order 0, over
//! the same memory per loop. Score: pages per second, reported per group (`thp`, `base`).
//! With `pte_tables`, a THP CPU's unmap frees each THP's deposited page table as its zap
//! reaches the THP, before the gather frees the THPs (`zap_huge_pmd` →
//! `zap_deposited_table`, as the `munmap` of `pagealloc predict-program thp_mix` does on
//! the live kernel), so a THP free that reaches `high` drains 2 560 pages, not 2 048
//! (page_fault1's `unmap_zapping`).

use std::collections::VecDeque;

use super::entry::{scaled, Entry};
use super::page_fault1::{pages_faulted, FaultLoop, PageFault1Params};
use super::params::define_params;
use super::program::{script, Fill, Phase, Program};
use super::{
    check_cpus, check_nonzero, invalid, CpuGroup, CpuScript, MigrateKind, Op, OpCounts, Params,
    Rng, Slot, Workload, WorkloadError,
};

/// The registry entry of thp_mix: the seed measured it on Skylake, 2 sockets.
pub(super) const ENTRY: Entry =
    Entry::new(NAME, |n, s, o| scaled(n, s, o, ThpMix::new)).seed_machine("skx-2s-112");

define_params! {
    /// Parameters of thp_mix.
    pub struct ThpMixParams {
        /// CPUs faulting order-9 blocks; 0 = half of them. Spec: 56 of 112.
        thp_cpus: u32 = 0, full 56;
        /// Memory faulted in per loop, in base pages, both groups; a multiple of 512.
        pages_per_loop: u32 = 8_192, full 32_768;
        /// Loops per CPU.
        loops: u32 = 128, full 4;
        /// Prelude: order-0 pages each CPU takes (or fewer, at the first failure) to
        /// split every high-order block; full scale: skx-2s-112's 64 GiB / 112.
        break_pages_per_cpu: u32 = 16_384, full 149_796;
        /// 1: page-table pages as page_fault1's `pte_tables`; 0: none (the default).
        pte_tables: u8 = 0, full 0;
        /// Work of each order-0 fault outside the allocator, ns: page_fault1's
        /// `fault_work_ns` (0, the default: none).
        fault_work_ns: u32 = 0, full 0;
        /// The same for each THP fault, ns (0: none).
        thp_fault_work_ns: u32 = 0, full 0;
        /// Work of the unmap per block (order 0 or THP), ns: page_fault1's
        /// `unmap_work_ns` (0: none).
        unmap_work_ns: u32 = 0, full 0;
        /// 1: each unmap takes the mmu_gather's pages, as page_fault1's
        /// `gather_pages`; 0: none (the default).
        gather_pages: u8 = 0, full 0;
        /// The order-0 group's page tables freed after the unmap of the loop this many
        /// later (RCU's grace period): page_fault1's `table_free_lag` (0: none).
        table_free_lag: u32 = 0, full 0;
        /// Pages of the prelude's last faults the LRU add batch of each THP CPU still
        /// holds past the prelude's unmap, freed when the batch next moves: at the
        /// CPU's first THP fault (a large folio moves it at once). 0: none (the
        /// default; the kernel's unmap no longer drains the batch, `predict` reads it
        /// off each recording).
        lru_held_thp: u32 = 0, full 0;
        /// The same on each order-0 CPU, freed when its window's faults fill the batch
        /// ([`LRU_BATCH`] pages).
        lru_held_base: u32 = 0, full 0;
        /// The order-0 CPUs' last loop's pages their LRU add batch holds after the
        /// last unmap, freed as the script ends: page_fault1's `lru_tail` (0: none).
        lru_tail: u32 = 0, full 0;
    }
}

/// Folios per CPU LRU add batch (`folio_batch`, `FOLIO_BATCH_SIZE`): the batch moves
/// onto the LRU, dropping its references, when it is full or takes a large folio.
pub const LRU_BATCH: u32 = 31;

/// Order of the THP group's blocks.
const THP_ORDER: u8 = 9;

/// thp_mix: THP and order-0 page_fault1 side by side.
#[derive(Clone, Debug)]
pub struct ThpMix {
    params: ThpMixParams,
}

const NAME: &str = "thp_mix";

impl ThpMix {
    /// thp_mix with `params`.
    ///
    /// # Errors
    /// [`WorkloadError::InvalidParam`] for zero counts or a loop size that is not a
    /// multiple of 512 pages.
    pub fn new(params: ThpMixParams) -> Result<Self, WorkloadError> {
        check_nonzero(NAME, "loops", u64::from(params.loops))?;
        check_nonzero(NAME, "pages_per_loop", u64::from(params.pages_per_loop))?;
        for (name, held) in [
            ("lru_held_thp", params.lru_held_thp),
            ("lru_held_base", params.lru_held_base),
            ("lru_tail", params.lru_tail),
        ] {
            if held >= LRU_BATCH {
                return Err(invalid(
                    NAME,
                    name,
                    held,
                    "must be below the LRU batch's 31 folios",
                ));
            }
        }
        if params.pages_per_loop % (1 << THP_ORDER) != 0 {
            return Err(invalid(
                NAME,
                "pages_per_loop",
                params.pages_per_loop,
                "must be a multiple of 512",
            ));
        }
        Ok(ThpMix { params })
    }

    fn thp_cpus(&self, cpus: u32) -> u32 {
        match self.params.thp_cpus {
            0 => cpus / 2,
            n => n,
        }
    }

    fn fault_params(&self, order: u8) -> PageFault1Params {
        PageFault1Params {
            pages_per_loop: self.params.pages_per_loop,
            loops: self.params.loops,
            order,
            pte_tables: self.params.pte_tables,
            fault_work_ns: if order == THP_ORDER {
                self.params.thp_fault_work_ns
            } else {
                self.params.fault_work_ns
            },
            unmap_work_ns: self.params.unmap_work_ns,
            gather_pages: self.params.gather_pages,
            table_free_lag: self.params.table_free_lag,
            // A THP moves the batch at once: only 4 KiB faults leave pages in it.
            lru_tail: if order == THP_ORDER {
                0
            } else {
                self.params.lru_tail
            },
            shared_lines: 0,
            line_transfer_ns: 0,
            fault_shared_lines: 0,
        }
    }
}

impl Workload for ThpMix {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        let thp = self.thp_cpus(cpus);
        check_cpus(NAME, thp, cpus)?;
        Ok((0..cpus).map(|cpu| script(self.mixed(cpu < thp))).collect())
    }

    fn work_units(&self, counts: &OpCounts) -> f64 {
        pages_faulted(counts, self.params.pte_tables)
    }

    fn groups(&self, cpus: u32) -> Vec<CpuGroup> {
        let thp = self.thp_cpus(cpus).min(cpus);
        vec![
            CpuGroup {
                name: "thp",
                cpus: (0..thp).collect(),
            },
            CpuGroup {
                name: "base",
                cpus: (thp..cpus).collect(),
            },
        ]
    }

    fn measured_after(&self) -> Option<u32> {
        Some(1)
    }
}

impl ThpMix {
    /// The program of a CPU of the THP group (`thp`) or of the order-0 one.
    fn mixed(&self, thp: bool) -> Mixed {
        let (order, held) = if thp {
            (THP_ORDER, self.params.lru_held_thp)
        } else {
            (0, self.params.lru_held_base)
        };
        let pages = self.params.break_pages_per_cpu;
        let held = held.min(pages);
        let faults = FaultLoop::new(&self.fault_params(order));
        let held_at = faults.slot_count().max(pages - held);
        Mixed {
            prelude: Some(pages),
            lru: LruHeld {
                slots: held_at..held_at + held,
                // A THP moves the batch at once; 4 KiB faults once it is full.
                faults: if order == THP_ORDER || held == 0 {
                    1
                } else {
                    LRU_BATCH - held
                },
                pending: held > 0,
            },
            faults,
        }
    }
}

/// The prelude's last pages the CPU's LRU add batch holds past the prelude's unmap.
#[derive(Debug)]
struct LruHeld {
    /// Their slots (after the fault loop's and the rest of the prelude's).
    slots: std::ops::Range<Slot>,
    /// The window's faults (of movable blocks) until the batch moves and frees them.
    faults: Slot,
    /// Not freed yet.
    pending: bool,
}

/// The prelude, then the page_fault1 loop.
#[derive(Debug)]
struct Mixed {
    /// Pages of the prelude, until it has been emitted.
    prelude: Option<Slot>,
    lru: LruHeld,
    faults: FaultLoop,
}

impl Mixed {
    /// The fault loop's next phases, with the held pages' frees once its faults have
    /// filled the LRU batch.
    fn window(&mut self, rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        if !self.lru.pending {
            return self.faults.refill(rng, out);
        }
        let mut next = VecDeque::new();
        if !self.faults.refill(rng, &mut next) {
            return false;
        }
        for p in next {
            match p {
                Phase::Fill(f) if self.lru.pending && f.kind() == MigrateKind::Movable => {
                    let n = f.slot_count();
                    if n < self.lru.faults {
                        self.lru.faults -= n;
                        out.push_back(Phase::Fill(f));
                        continue;
                    }
                    let (first, rest) = f.split(self.lru.faults);
                    out.push_back(Phase::Fill(first));
                    out.push_back(Phase::Free(self.lru.slots.clone()));
                    self.lru.pending = false;
                    if rest.slot_count() > 0 {
                        out.push_back(Phase::Fill(rest));
                    }
                }
                p => out.push_back(p),
            }
        }
        true
    }
}

impl Program for Mixed {
    fn slot_count(&self) -> Slot {
        self.faults
            .slot_count()
            .max(self.prelude.unwrap_or(0))
            .max(self.lru.slots.end)
    }

    fn refill(&mut self, rng: &mut dyn Rng, out: &mut VecDeque<Phase>) -> bool {
        let Some(pages) = self.prelude.take() else {
            if self.window(rng, out) {
                return true;
            }
            if self.lru.pending {
                // The loops ended before the batch filled: a script gives back every
                // block.
                self.lru.pending = false;
                out.push_back(Phase::Free(self.lru.slots.clone()));
                return true;
            }
            return false;
        };
        let held = &self.lru.slots;
        let kept = pages - (held.end - held.start);
        out.push_back(Phase::Fill(Fill::new(0..kept, 0, MigrateKind::Movable)));
        if !held.is_empty() {
            out.push_back(Phase::Fill(Fill::new(
                held.clone(),
                0,
                MigrateKind::Movable,
            )));
        }
        out.push_back(Phase::Op(Op::Barrier { id: 0 }));
        out.push_back(Phase::Free(0..kept));
        out.push_back(Phase::Op(Op::Barrier { id: 1 }));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::SplitMix64;

    /// The phases of a CPU's program up to the end of its first loop.
    fn first_loop(p: &ThpMixParams, thp: bool) -> Vec<Phase> {
        let mut m = ThpMix::new(p.clone()).unwrap().mixed(thp);
        let mut rng = SplitMix64::new(1);
        let mut out = VecDeque::new();
        assert!(m.refill(&mut rng, &mut out) && m.refill(&mut rng, &mut out));
        out.into()
    }

    /// Slots freed by each free phase, in order.
    fn frees(ph: &[Phase]) -> Vec<std::ops::Range<Slot>> {
        ph.iter()
            .filter_map(|p| match p {
                Phase::Free(r) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// Movable blocks allocated before phase `i`.
    fn faults_before(ph: &[Phase], i: usize) -> Slot {
        ph[..i]
            .iter()
            .filter_map(|p| match p {
                Phase::Fill(f) if f.kind() == MigrateKind::Movable => Some(f.slot_count()),
                _ => None,
            })
            .sum()
    }

    /// A THP CPU's unmap frees each THP's deposited table as its zap reaches the THP,
    /// takes the gather's page once 7 THPs are gathered, and frees the THPs after every
    /// table, then the gather's page: the live kernel's order (`zap_huge_pmd`).
    #[test]
    fn the_thp_unmap_frees_each_table_at_its_zap_before_the_thps() {
        let p = ThpMixParams {
            pages_per_loop: 4096,
            loops: 1,
            break_pages_per_cpu: 16,
            pte_tables: 1,
            gather_pages: 1,
            unmap_work_ns: 100,
            ..ThpMixParams::default()
        };
        let ph = first_loop(&p, true);
        let window = ph
            .iter()
            .position(|x| *x == Phase::Op(Op::Barrier { id: 1 }))
            .unwrap();
        // After the last fault: the unmap's frees and the gather's page.
        let last_fault = ph
            .iter()
            .rposition(|x| matches!(x, Phase::Fill(f) if f.kind() == MigrateKind::Movable))
            .unwrap();
        assert!(last_fault > window);
        let unmap: Vec<_> = ph[last_fault + 1..]
            .iter()
            .filter(|x| !matches!(x, Phase::Op(_)))
            .cloned()
            .collect();
        assert_eq!(
            unmap,
            [
                Phase::Free(8..15),
                Phase::Fill(Fill::new(16..17, 0, MigrateKind::Unmovable)),
                Phase::Free(15..16),
                Phase::Free(0..8),
                Phase::Free(16..17),
            ],
            "{ph:?}"
        );
    }

    /// The held pages are the prelude's last, kept past its unmap and freed in the
    /// window: after the first THP fault, or after the 4 KiB faults that fill the
    /// batch; without them the prelude frees every page.
    #[test]
    fn the_lru_batch_frees_the_preludes_last_pages_in_the_window() {
        let p = ThpMixParams {
            pages_per_loop: 1024,
            loops: 2,
            break_pages_per_cpu: 100,
            pte_tables: 1,
            lru_held_thp: 20,
            lru_held_base: 20,
            ..ThpMixParams::default()
        };
        let thp = first_loop(&p, true);
        let f = frees(&thp);
        assert_eq!(f[0], 0..80, "the prelude's unmap: {thp:?}");
        assert_eq!(f[1].end - f[1].start, 20);
        let at = thp
            .iter()
            .position(|x| *x == Phase::Free(f[1].clone()))
            .unwrap();
        // The prelude's 100 and the first THP.
        assert_eq!(faults_before(&thp, at), 101, "{thp:?}");
        let base = first_loop(&p, false);
        let f = frees(&base);
        let at = base
            .iter()
            .position(|x| *x == Phase::Free(f[1].clone()))
            .unwrap();
        assert_eq!(faults_before(&base, at), 100 + 11, "{base:?}");
        let none = first_loop(
            &ThpMixParams {
                lru_held_thp: 0,
                ..p.clone()
            },
            true,
        );
        assert_eq!(frees(&none)[0], 0..100);
        assert!(ThpMix::new(ThpMixParams {
            lru_held_base: LRU_BATCH,
            ..p
        })
        .is_err());
    }
}
