//! Housekeeping: pageset sizing (`zone_pcp_update`), the tick, drains, CPU hotplug and
//! `percpu_pagelist_high_fraction`.

use super::Allocator;
use crate::config::ConfigError;
use crate::frame::AllocError;
use crate::sync::atomic::Ordering::Relaxed;
use crate::tune;
use crate::zone::*;

impl Allocator {
    fn online_cpus(&self) -> u32 {
        self.cpus.iter().filter(|c| c.online.load(Relaxed)).count() as u32
    }

    /// `zone_pcp_update` for every zone (docs/mechanisms.md §2.2): recompute (high_min, high_max, batch)
    /// and write them into every CPU's pageset when they changed. Offline CPUs get the
    /// boot pageset (0, 0, 1): nothing is cached on them.
    pub(super) fn update_all_pcp_sizes(&self, init: bool) {
        let _g = self.setup_lock.lock();
        let online = self.online_cpus();
        let fraction = self.high_fraction.load(Relaxed);
        for z in self.zones.iter() {
            let (hmin, hmax, batch) = if !self.cfg.pcp {
                (0, 0, 1)
            } else {
                let batch = self
                    .cfg
                    .fixed_batch
                    .map_or_else(|| tune::zone_batchsize(z.managed), |b| b as i32);
                let node_cpus = self
                    .cpus
                    .iter()
                    .filter(|c| c.node == z.node && c.online.load(Relaxed))
                    .count() as u32;
                let s = tune::Sizing {
                    low_wmark: z.wmark(WMARK_LOW),
                    managed: z.managed,
                    batch,
                    node_cpus,
                    online_cpus: online,
                    high_fraction: fraction,
                    auto_tune: self.cfg.auto_tune,
                };
                let (lo, hi) = match self.cfg.fixed_high {
                    Some(h) => (h as i32, h as i32),
                    None => match &self.cfg.policy {
                        None => tune::high_bounds(&s),
                        Some(p) => crate::policy::high_bounds(&*p.0, &s),
                    },
                };
                (lo, hi, batch)
            };
            let triple = [hmin as u32, hmax as u32, batch as u32];
            let cached = z.pageset_sizes();
            z.set_pageset_sizes(triple);
            for cpu in 0..self.cpus.len() {
                let on = self.cpus[cpu].online.load(Relaxed);
                if !on {
                    self.set_pcp_sizes(cpu, z.idx, 0, 0, 1, init);
                } else if init || cached != triple || {
                    // A CPU back online still has the boot pageset: with fixed sizes the
                    // zone's triple did not change, so compare the CPU's own sizes.
                    let st = self.slot(cpu, z.idx).pcp.lock().st;
                    (st.high_min, st.high_max, st.batch) != (hmin, hmax, batch)
                } {
                    self.set_pcp_sizes(cpu, z.idx, hmin, hmax, batch, init);
                }
            }
        }
    }

    /// One decay tick for `cpu` (`vmstat_update` → `refresh_cpu_vm_stats`): decay each of
    /// its pagesets' `high` and return the excess, drain remote-node pagesets idle for
    /// three ticks. Returns true while work remains. The std ticker calls this for every
    /// online CPU once per [`Config::tick_interval_ms`](crate::Config::tick_interval_ms);
    /// no_std and simulated users call it.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// // 1 GiB, THP off (a smaller min_free_kbytes, so a smaller high_min).
    /// let a = Allocator::new(&Layout::single(262_144, 1), "linux-6.12,thp=off".parse()?)?;
    /// let mut frames = Vec::new();
    /// a.alloc_bulk_on(0, 0, Gfp::USER, None, 4000, &mut frames)?;
    /// a.free_bulk_on(0, &frames)?; // a burst of frees: high grew, pages stay cached
    /// let busy = a.pcp_info(0, 0).unwrap();
    /// assert!(busy.high > busy.high_min && busy.count > busy.high_min);
    /// // Idle from now on: each tick takes an eighth off high and returns the excess.
    /// let mut ticks = 0;
    /// while a.tick(0) {
    ///     ticks += 1;
    /// }
    /// let idle = a.pcp_info(0, 0).unwrap();
    /// assert!(ticks > 5);
    /// assert_eq!((idle.high, idle.count), (idle.high_min, idle.high_min));
    /// assert!(a.counters().decay_drain >= 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tick(&self, cpu: usize) -> bool {
        let mut todo = false;
        if cpu >= self.cpus.len() {
            return false;
        }
        self.complete_deferred(cpu);
        for z in self.zones.iter() {
            todo |= self.tick_zone(cpu, z);
        }
        todo
    }

    /// [`Allocator::tick`] for every online CPU.
    pub fn tick_all(&self) -> bool {
        let mut todo = false;
        for c in 0..self.cpus.len() {
            if self.cpus[c].online.load(Relaxed) {
                todo |= self.tick(c);
            }
        }
        todo
    }

    /// `drain_pages(cpu)`: return every page cached on `cpu` to the zones.
    pub fn drain_cpu(&self, cpu: usize) {
        if cpu >= self.cpus.len() {
            return;
        }
        for z in self.zones.iter() {
            self.drain_pages_zone(cpu, z);
        }
    }

    /// `drain_all_pages(NULL)`: drain every CPU's pagesets that hold pages, from the
    /// calling thread (no IPIs, as in 6.x). Serialized.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 2), Config::default())?;
    /// for cpu in 0..2 {
    ///     let f = a.alloc_on(cpu, 0, Gfp::USER, None)?;
    ///     a.free_on(cpu, f)?;
    /// }
    /// assert!(a.nr_pcp_pages() > 0);
    /// a.drain_all_pages();
    /// assert_eq!(a.nr_pcp_pages(), 0);
    /// assert_eq!(a.nr_free_pages(), a.managed_pages());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain_all_pages(&self) {
        let _g = self.drain_lock.lock();
        self.complete_deferred(self.current_cpu());
        for cpu in 0..self.cpus.len() {
            for z in self.zones.iter() {
                if self.slot(cpu, z.idx).pcp.lock().st.count != 0 {
                    self.drain_pages_zone(cpu, z);
                }
            }
        }
    }

    /// Take `cpu` offline (`page_alloc_cpu_dead`): drain its pagesets, give it the boot
    /// pageset (nothing cached) and resize the others (fewer CPUs share the node).
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// let f = a.alloc_on(1, 0, Gfp::USER, None)?; // CPU 1 now caches a batch
    /// let shared = a.pcp_info(0, 0).unwrap().high_min;
    /// a.cpu_offline(1)?;
    /// let off = a.pcp_info(1, 0).unwrap();
    /// assert_eq!((off.count, off.high_max, off.batch), (0, 0, 1)); // the boot pageset
    /// assert!(a.pcp_info(0, 0).unwrap().high_min > shared); // one CPU left to share the node
    /// a.free_on(0, f)?;
    /// a.cpu_online(1)?;
    /// assert_eq!(a.pcp_info(1, 0).unwrap().high_min, shared);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cpu_offline(&self, cpu: usize) -> Result<(), AllocError> {
        let c = self.cpus.get(cpu).ok_or(AllocError::InvalidCpu(cpu))?;
        c.online.store(false, Relaxed);
        self.update_all_pcp_sizes(false);
        self.drain_cpu(cpu);
        self.pcp_buddy_offline(cpu);
        Ok(())
    }

    /// Bring `cpu` online (`page_alloc_cpu_online`): size its pagesets.
    pub fn cpu_online(&self, cpu: usize) -> Result<(), AllocError> {
        let c = self.cpus.get(cpu).ok_or(AllocError::InvalidCpu(cpu))?;
        c.online.store(true, Relaxed);
        self.update_all_pcp_sizes(false);
        // A CPU coming back starts from high_min.
        for z in self.zones.iter() {
            let mut p = self.slot(cpu, z.idx).pcp.lock();
            p.st.high = p.st.high_min;
        }
        Ok(())
    }

    /// `vm.percpu_pagelist_high_fraction`: 0 (auto-tuning) or ≥ 8 (high =
    /// managed/fraction per CPU, tuning off). Anything else is refused and nothing changes.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// a.set_high_fraction(64)?;
    /// let p = a.pcp_info(0, 0).unwrap();
    /// assert_eq!((p.high_min, p.high_max), (262_144 / 64 / 2, 262_144 / 64 / 2));
    /// assert!(a.set_high_fraction(4).is_err()); // must be 0 or >= 8
    /// assert_eq!(a.high_fraction(), 64);
    /// a.set_high_fraction(0)?; // auto-tuning again
    /// assert!(a.pcp_info(0, 0).unwrap().high_min < a.pcp_info(0, 0).unwrap().high_max);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_high_fraction(&self, fraction: u32) -> Result<(), ConfigError> {
        crate::config::high_fraction_rule(&fraction).map_err(|why| ConfigError::Invalid {
            key: "high_fraction",
            why,
        })?;
        self.high_fraction.store(fraction, Relaxed);
        self.update_all_pcp_sizes(false);
        Ok(())
    }

    /// Current `percpu_pagelist_high_fraction`.
    pub fn high_fraction(&self) -> u32 {
        self.high_fraction.load(Relaxed)
    }
}
