//! The workload every CPU runs: allocations and frees of orders 0-10, blocks freed on
//! another CPU, blocks handed to the timer interrupt, page tables, the decay tick, idle
//! time.

use crate::arch::{self, rdtsc};
use crate::hotplug::{cpu_offline_online, OFFLINE_ACK, OFFLINE_REQ};
use crate::irq::encode;
use crate::kprintln;
use crate::pagetables::{map_page_tables, PtError};
use crate::park::{free_local, park};
use crate::percpu::percpu;
use crate::spin::Spin;
use crate::{alloc, DONE, MAX_ZONES, NCPUS, RUN_START, RUN_TICKS, TICK_EVERY};
use alloc::vec::Vec;
use core::sync::atomic::Ordering::*;
use pagealloc::{Frame, Gfp, MAX_ORDER};

/// Blocks handed from one CPU to another to free: (block, allocating CPU).
pub(crate) static REMOTE: Spin<Vec<(Frame, usize)>> = Spin::new(Vec::new());

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One CPU's run: random allocations and frees of orders 0-10 on its pagesets, blocks
/// handed to other CPUs to free, blocks handed to its timer interrupt to free, page
/// tables built and torn down through the `x86_64` adapter; the decay tick every
/// `TICK_EVERY` timer interrupts. Odd CPUs (CPU 0 when alone) go idle for the last 40 %
/// of the run so their `high` decays; the last CPU is taken offline and back at 40 %.
pub(crate) fn work(cpu: usize) {
    let a = alloc();
    let pc = percpu(cpu);
    let n = NCPUS.load(Relaxed);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((cpu as u64 + 1) * 0x2545_f491_4f6c_dd1d));
    let mut stash: [Option<Frame>; 128] = [None; 128];
    let start = RUN_START.load(Relaxed);
    let len = RUN_TICKS.load(Relaxed);
    let idle_from = if cpu % 2 == 1 || n == 1 {
        start + len / 10 * 6
    } else {
        u64::MAX
    };
    let offline_at = start + len / 10 * 4;
    let victim = n - 1;
    let mut offline_done = false;
    let mut last_tick = 0u64;
    let mut idle = false;
    let zones = a.nr_zones().min(MAX_ZONES);
    // Interrupts are on (CPL 3): the timer interrupts the workload anywhere, inside the
    // allocator's locks included.
    pc.parked.store(false, Release);
    let mut ops = 0u64;
    loop {
        let now = rdtsc();
        if now - start >= len {
            break;
        }
        // The decay tick.
        let t = pc.irq_ticks.load(Relaxed);
        if t >= last_tick + TICK_EVERY {
            last_tick = t;
            a.tick(cpu);
            pc.ticks.fetch_add(1, Relaxed);
        }
        // CPU offline and back: the last CPU parks (frees what it holds), CPU 0 takes it
        // offline (its pagesets drained) and back online.
        if OFFLINE_REQ.load(Acquire) == cpu {
            park(a, cpu, &mut stash);
            OFFLINE_ACK.store(true, Release);
            while OFFLINE_REQ.load(Acquire) == cpu {
                core::hint::spin_loop();
            }
            pc.parked.store(false, Release);
        }
        if cpu == 0 && !offline_done && now >= offline_at {
            offline_done = true;
            cpu_offline_online(a, victim, &mut stash);
        }
        if now >= idle_from {
            if !idle {
                idle = true;
                for z in 0..zones {
                    if let Some(p) = a.pcp_info(cpu, z) {
                        pc.idle_high[z].store(p.high, Relaxed);
                    }
                }
            }
            arch::hlt();
            continue;
        }
        ops += 1;
        if ops.is_multiple_of(512) {
            for z in 0..zones {
                if let Some(p) = a.pcp_info(cpu, z) {
                    pc.peak_high[z].fetch_max(p.high, Relaxed);
                }
            }
        }
        let k = rng.below(stash.len() as u64) as usize;
        match rng.below(100) {
            0..=47 => {
                let order = match rng.below(100) {
                    0..=69 => 0,
                    70..=89 => 1 + rng.below(3) as u8,
                    90..=98 => 4 + rng.below(6) as u8,
                    _ => MAX_ORDER,
                };
                let gfp = if rng.below(2) == 0 {
                    Gfp::KERNEL
                } else {
                    Gfp::USER
                };
                if let Some(old) = stash[k].take() {
                    free_local(a, cpu, old);
                }
                match a.alloc_on(cpu, order, gfp, None) {
                    Ok(f) => {
                        stash[k] = Some(f);
                        pc.allocs.fetch_add(1, Relaxed);
                    }
                    Err(_) => {
                        pc.alloc_fails.fetch_add(1, Relaxed);
                    }
                }
            }
            48..=87 => {
                if let Some(f) = stash[k].take() {
                    free_local(a, cpu, f);
                }
            }
            88..=94 => {
                // Hand one block to the others, free one of theirs.
                let mine = stash[k].take();
                let theirs = REMOTE.with(|q| {
                    if let Some(f) = mine {
                        if q.len() >= 256 {
                            return Some((f, cpu));
                        }
                        q.push((f, cpu));
                    }
                    let at = q.iter().position(|&(_, c)| c != cpu)?;
                    Some(q.swap_remove(at))
                });
                if let Some((f, from)) = theirs {
                    match a.free_on(cpu, f) {
                        Ok(()) if from != cpu => pc.remote_frees.fetch_add(1, Relaxed),
                        Ok(()) => pc.frees.fetch_add(1, Relaxed),
                        Err(_) => pc.errors.fetch_add(1, Relaxed),
                    };
                }
            }
            95..=97 => {
                // Hand one block to the timer interrupt, which frees it nolock.
                if let Some(f) = stash[k] {
                    if f.order <= 3
                        && pc
                            .handoff
                            .compare_exchange(0, encode(f), AcqRel, Relaxed)
                            .is_ok()
                    {
                        stash[k] = None;
                    }
                }
            }
            _ => match map_page_tables(a, cpu) {
                Ok(()) => {
                    pc.pt_maps.fetch_add(1, Relaxed);
                }
                // Memory ran short (the stashes hold large blocks): not a violation.
                Err(PtError::NoFrame) => {
                    pc.alloc_fails.fetch_add(1, Relaxed);
                }
                Err(PtError::Broken(why)) => {
                    kprintln!("page tables on cpu {cpu}: {why}");
                    pc.errors.fetch_add(1, Relaxed);
                }
            },
        }
    }
    // Done: nothing more from the interrupt, everything back.
    arch::lapic_timer_stop();
    park(a, cpu, &mut stash);
    DONE.fetch_add(1, AcqRel);
}
