//! The run's end: what was handed over freed, the pagesets and counters printed, the
//! pagesets drained, `validate()`, the frames lost, the verdict.

use crate::kprintln;
use crate::percpu::percpu;
use crate::workload::REMOTE;
use crate::MAX_ZONES;
use core::sync::atomic::Ordering::*;
use pagealloc::Allocator;

/// After the run: free what was handed over, drain, validate, print, decide.
pub(crate) fn finish(a: &Allocator, n: usize, seconds: u64) -> Result<(), &'static str> {
    let left = REMOTE.with(core::mem::take);
    for (f, c) in left {
        if a.free_on(0, f).is_err() {
            percpu(0).errors.fetch_add(1, Relaxed);
        }
        let _ = c;
    }
    kprintln!("run: done ({seconds} s)");
    // Pagesets as the run left them (before the final drain).
    kprintln!("pagesets (zone: high_min / peak high while allocating / high when idle began / high now / count):");
    for cpu in 0..n {
        let pc = percpu(cpu);
        let mut line = alloc::format!("  cpu {cpu}:");
        for z in 0..a.nr_zones().min(MAX_ZONES) {
            let Some(p) = a.pcp_info(cpu, z) else {
                continue;
            };
            let idle = pc.idle_high[z].load(Relaxed);
            line += &alloc::format!(
                " z{z} {}/{}/{}/{}/{}",
                p.high_min,
                pc.peak_high[z].load(Relaxed),
                if idle < 0 {
                    alloc::string::String::from("-")
                } else {
                    alloc::format!("{idle}")
                },
                p.high,
                p.count
            );
        }
        kprintln!("{line}");
    }
    let mut errors = 0;
    for cpu in 0..n {
        let p = percpu(cpu);
        kprintln!(
            "  cpu {cpu}: {} allocs ({} failed), {} local frees, {} remote frees, {} page tables, {} decay ticks; irq: {} timer interrupts, {} nolock allocs ({} failed), {} nolock frees",
            p.allocs.load(Relaxed),
            p.alloc_fails.load(Relaxed),
            p.frees.load(Relaxed),
            p.remote_frees.load(Relaxed),
            p.pt_maps.load(Relaxed),
            p.ticks.load(Relaxed),
            p.irq_ticks.load(Relaxed),
            p.irq_allocs.load(Relaxed),
            p.irq_alloc_fails.load(Relaxed),
            p.irq_frees.load(Relaxed)
        );
        let (e, ie) = (p.errors.load(Relaxed), p.irq_errors.load(Relaxed));
        if e + ie > 0 {
            kprintln!(
                "  cpu {cpu}: {e} refused frees or broken page tables, {ie} refused nolock frees"
            );
        }
        errors += e + ie;
    }
    a.drain_all_pages();
    let c = a.counters();
    kprintln!("counters:");
    for (name, v) in c.iter().filter(|&(_, v)| v != 0) {
        kprintln!("  {name} {v}");
    }
    let v = a.validate();
    let lost = a.managed_pages() - a.nr_free_pages();
    match &v {
        Ok(t) => kprintln!(
            "validate: ok (buddy {} pcp {} allocated {} deferred {} managed {})",
            t.buddy,
            t.pcp,
            t.allocated,
            t.deferred,
            t.managed
        ),
        Err(e) => kprintln!("validate: FAILED: {e}"),
    }
    kprintln!("frames lost: {lost}");
    kprintln!("errors: {errors}");
    if v.is_err() || lost != 0 || errors != 0 || c.pgalloc != c.pgfree {
        return Err("the run found violations");
    }
    Ok(())
}
