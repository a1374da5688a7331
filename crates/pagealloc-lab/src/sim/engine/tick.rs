//! Periodic work in virtual time: each CPU's decay tick at its skewed instant, and
//! the samples of the per-CPU lists (with the page-cache model's regrowth).

use super::{Call, Engine};

/// The kernel's timer frequency the decay ticks are skewed in: `CONFIG_HZ_1000`, what
/// LKP's x86_64 kernel configs (`x86_64-rhel-8.3`, the one the PCP series' figures were
/// measured with) select. One jiffy is `1e9 / HZ` ns. docs/sim-cost-model.md §2.
pub(crate) const HZ: u64 = 1000;

/// When `cpu` first runs its decay tick, ns after the start (time 0 is on a whole
/// second of jiffies); it ticks again every `tick_ns` after that.
///
/// The kernel's `vmstat_update` (mm/vmstat.c, which calls `refresh_cpu_vm_stats` and so
/// `decay_pcp_high`) re-arms itself with `round_jiffies_relative(sysctl_stat_interval)`
/// on its own CPU, and `round_jiffies_common` (kernel/time/timer.c) skews every CPU
/// "so that all CPUs do not fire at once": it adds `cpu * 3` jiffies, rounds to a
/// whole second and takes the `cpu * 3` off again. With the default interval of one
/// second (`sysctl_stat_interval = HZ`) CPU n therefore runs at every whole second less
/// `3n mod HZ` jiffies: CPU 0 at 1 s, CPU 1 three jiffies before it, and from CPU
/// `HZ / 3 + 1` on the skew wraps round the second. The first tick of each CPU falls
/// within the first interval, as on a machine that has been up for a while (the boot
/// path, `start_shepherd_timer` and `vmstat_shepherd`, only starts the chain). For an
/// interval other than one second the same skew is taken modulo the interval.
pub(crate) fn tick_phase_ns(cpu: usize, tick_ns: u64, hz: u64) -> u64 {
    let jiffy_ns = 1_000_000_000 / hz.max(1);
    let skew = (cpu as u64 * 3 % hz.max(1)) * jiffy_ns % tick_ns.max(1);
    tick_ns.max(1) - skew
}

impl Engine<'_> {
    /// Decay ticks and pcp samples due at or before `t`.
    pub(super) fn housekeeping(&mut self, t: u64) {
        while self.next_sample <= t || self.next_tick <= t {
            if self.next_sample <= self.next_tick {
                let pcp = self.pcp_pages();
                self.out.pcp_peak = self.out.pcp_peak.max(pcp);
                self.out.pcp_final = pcp;
                let h = crate::sim::free_pageblocks(&self.a);
                self.out.huge = (self.out.huge.0 + h as f64, self.out.huge.1 + 1, h);
                if self.spec.page_cache {
                    for z in 0..self.nzones {
                        self.page_cache_reclaim(z, self.next_sample);
                        self.page_cache_grow(z);
                    }
                }
                self.next_sample += self.spec.sample_ns.max(1);
            } else {
                let now = self.next_tick;
                let cpu = self.tick_order[self.tick_pos];
                let (raised, before) = self.raised_high(cpu);
                let busy_before: Vec<u64> = self.locks.iter().map(|l| l.free_at).collect();
                self.platform.set(cpu, now);
                self.a.tick(cpu);
                // Decay drains occupy the locks; their CPU is not delayed.
                self.replay(cpu, Call::Background, now);
                // How long the tick kept a zone lock busy past its time (report only).
                let burst = self
                    .locks
                    .iter()
                    .zip(&busy_before)
                    .filter(|(l, &b)| l.free_at != b)
                    .map(|(l, _)| l.free_at.saturating_sub(now))
                    .max()
                    .unwrap_or(0);
                self.out.tick_burst_ns += burst;
                self.out.tick_burst_max_ns = self.out.tick_burst_max_ns.max(burst);
                let after = self.high_of(&raised);
                self.out.ticks += 1;
                self.out.tick_high_before += before;
                self.out.tick_high_after += after;
                self.out.tick_pcps += raised.len() as u64;
                self.tick_pos += 1;
                if self.tick_pos == self.tick_order.len() {
                    self.tick_pos = 0;
                    self.tick_round += 1;
                }
                let next = self.tick_order[self.tick_pos];
                self.next_tick = self.tick_first[next] + self.tick_round * self.tick_ns;
            }
        }
    }

    /// `cpu`'s pagesets the decay acts on (`high` above high_min), and Σ of their
    /// `high` (read for the report only: it changes no state and charges nothing).
    fn raised_high(&self, cpu: usize) -> (Vec<(usize, usize)>, u64) {
        let mut set = Vec::new();
        let mut sum = 0u64;
        for zone in 0..self.nzones {
            if let Some(p) = self.a.pcp_info(cpu, zone) {
                if p.high > p.high_min {
                    set.push((cpu, zone));
                    sum += p.high as u64;
                }
            }
        }
        (set, sum)
    }

    /// Σ `high` over `set`.
    fn high_of(&self, set: &[(usize, usize)]) -> u64 {
        set.iter()
            .filter_map(|&(c, z)| self.a.pcp_info(c, z))
            .map(|p| p.high.max(0) as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::tick_phase_ns;

    /// `round_jiffies_common`'s skew at HZ=1000 and a 1 s interval: CPU n 3n ms before
    /// the second, wrapping round it past CPU 333; other HZ scale the jiffy.
    #[test]
    fn decay_ticks_are_skewed_three_jiffies_per_cpu() {
        let s = 1_000_000_000;
        let ms = 1_000_000;
        assert_eq!(tick_phase_ns(0, s, 1000), s);
        assert_eq!(tick_phase_ns(1, s, 1000), s - 3 * ms);
        assert_eq!(tick_phase_ns(7, s, 1000), s - 21 * ms);
        assert_eq!(tick_phase_ns(333, s, 1000), s - 999 * ms);
        assert_eq!(tick_phase_ns(334, s, 1000), s - 2 * ms);
        assert_eq!(tick_phase_ns(1, s, 250), s - 12 * ms);
        assert_eq!(tick_phase_ns(1, 100 * ms, 1000), 97 * ms);
        assert_eq!(tick_phase_ns(40, 100 * ms, 1000), 80 * ms);
        for cpu in 0..1024 {
            let t = tick_phase_ns(cpu, s, 1000);
            assert!(t > 0 && t <= s, "cpu {cpu}: {t}");
        }
    }
}
