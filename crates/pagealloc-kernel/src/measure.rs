//! The PCP hit's cost, measured on CPU 0 before the run.

use crate::arch::{self, rdtsc};
use crate::kprintln;
use core::hint::black_box;
use pagealloc::{Allocator, Gfp};

/// The PCP hit's cost on CPU 0 before the run (no interrupt source enabled yet): a warm
/// order-0 pair, `alloc_on` + `free_on`, and the nolock pair, 100 000 pairs a round,
/// 9 rounds: the median, and the least (a vCPU on a busy host is descheduled now and
/// then, which only lengthens a round). Picoseconds.
pub(crate) fn measure_pcp_hit(a: &Allocator) {
    let pair = |nolock: bool| -> (u64, u64) {
        let mut r = [0u64; 9];
        for x in r.iter_mut() {
            let n = 100_000u64;
            let t0 = rdtsc();
            for _ in 0..n {
                if nolock {
                    let f = a.alloc_pages_nolock(0, 0, None).expect("nolock alloc");
                    a.free_pages_nolock(0, black_box(f)).expect("nolock free");
                } else {
                    let f = a.alloc_on(0, 0, Gfp::KERNEL, None).expect("alloc");
                    a.free_on(0, black_box(f)).expect("free");
                }
            }
            *x = arch::tsc_to_ns((rdtsc() - t0) * 1000 / n);
        }
        r.sort_unstable();
        (r[4], r[0])
    };
    let ns = |ps: u64| alloc::format!("{}.{:02}", ps / 1000, ps % 1000 / 10);
    let before = a.counters();
    let checked = pair(false);
    let nolock = pair(true);
    let c = a.counters().since(&before);
    kprintln!(
        "pcp hit: {} ns per alloc_on+free_on pair (order 0; least round {}), {} ns per nolock pair (least {}); {} refills, {} zone-lock trips in {} pairs",
        ns(checked.0),
        ns(checked.1),
        ns(nolock.0),
        ns(nolock.1),
        c.pcp_refill,
        c.zone_lock,
        c.nolock_alloc + c.pgalloc - c.nolock_alloc
    );
}
