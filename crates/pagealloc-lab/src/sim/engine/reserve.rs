//! Memory the workload does not get: the headroom model (held by the rest of the
//! system for the whole run) and the page-cache model (taken back by a modelled
//! kswapd between the low and high watermarks).

use pagealloc::{Frame, Gfp};

use super::{Call, Engine};
use crate::sim::trace;

impl Engine<'_> {
    /// Takes order-10 blocks of zone `z` on its home CPU until its free pages are below
    /// `target + 1024`, and returns them with the count of blocks that came from another
    /// zone (a fallback: given back at once, and the taking stops).
    fn take_blocks(&mut self, z: usize, target: u64) -> (Vec<Frame>, u64) {
        let info = self.a.zone_info(z).expect("zone_info: index in range");
        let cpu = self.cache_cpu[z];
        let mut free = info.free;
        let mut blocks = Vec::new();
        let mut strays = 0;
        while free >= target.saturating_add(1024) {
            let got = self
                .a
                .alloc_on(cpu, 10, Gfp::USER | Gfp::NORETRY, Some(info.node));
            // Not charged (below): dropped at once, so that the buffer does not hold
            // every access of the hundreds of thousands of blocks the headroom model
            // takes on a 512 GiB machine until the end of the loop.
            trace::discard();
            match got {
                Ok(f) if self.a.zone_of_pfn(f.pfn) == Some(z) => {
                    blocks.push(f);
                    free -= 1024;
                }
                Ok(f) => {
                    self.a.free_on(cpu, f).expect("just allocated");
                    strays += 1;
                    break;
                }
                Err(_) => break,
            }
        }
        // The rest of the system's allocations: not charged, and they leave the caches
        // as they were.
        trace::discard();
        (blocks, strays)
    }

    /// The headroom model: the rest of the system takes order-10 blocks of zone `z` until
    /// its free pages are down to `headroom` above the high watermark, and keeps them for
    /// the whole run (memory kswapd cannot give back while the workload runs). Not charged
    /// to any CPU; the row's counters start after it.
    pub(super) fn hold_all_but(&mut self, z: usize, headroom: u64) {
        let target = self
            .a
            .zone_info(z)
            .expect("zone_info: index in range")
            .wmark[2]
            .saturating_add(headroom);
        // Held to the end of the run: never freed.
        let (held, _) = self.take_blocks(z, target);
        self.out.held_pages += held.len() as u64 * 1024;
    }

    /// The page cache grows back: take order-10 blocks from zone `z` until its free
    /// pages are down to the high watermark (a build machine's memory is full of page
    /// cache; kswapd keeps free pages between the low and the high watermark).
    pub(super) fn page_cache_grow(&mut self, z: usize) {
        let high = self
            .a
            .zone_info(z)
            .expect("zone_info: index in range")
            .wmark[2];
        let (blocks, strays) = self.take_blocks(z, high);
        self.out.cache_alloc_pages += (blocks.len() as u64 + strays) * 1024;
        self.out.cache_free_pages += strays * 1024;
        self.cache_blocks[z].extend(blocks);
    }

    /// kswapd: when zone `z`'s free pages fell below the low watermark, reclaim page
    /// cache (free its blocks) until they reach the high watermark. The frees occupy the
    /// zone lock from `now` (replayed as background work of the zone's first CPU).
    pub(super) fn page_cache_reclaim(&mut self, z: usize, now: u64) {
        let info = self.a.zone_info(z).expect("zone_info: index in range");
        let [_, low, high, _] = info.wmark;
        if info.free >= low || self.cache_blocks[z].is_empty() {
            return;
        }
        self.out.reclaims += 1;
        let cpu = self.cache_cpu[z];
        let mut free = info.free;
        let mut blocks = 0u64;
        while free < high {
            let Some(f) = self.cache_blocks[z].pop() else {
                break;
            };
            self.a
                .free_on(cpu, f)
                .expect("page cache blocks are allocated");
            self.out.cache_free_pages += 1024;
            free += 1024;
            blocks += 1;
        }
        if blocks > 0 {
            self.replay(cpu, Call::Background, now);
        }
    }
}
