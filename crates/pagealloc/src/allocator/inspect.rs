//! Inspection: getters, counters, pageset and zone info, pageblock and frame queries.

use super::Allocator;
use crate::config::Config;
#[cfg(feature = "std")] // frame_ptr
use crate::frame::Frame;
use crate::frame::{MigrateType, Pfn, MAX_ORDER};
use crate::memmap::State;
use crate::pcp::PcpSlot;
use crate::platform::Platform;
use crate::stats::{Counters, PcpInfo, Stats, ZoneInfo};
use crate::sync::atomic::Ordering::Relaxed;
use crate::zone::*;
use alloc::sync::Arc;

impl Allocator {
    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    /// The platform seam.
    pub fn platform(&self) -> &Arc<dyn Platform> {
        &self.platform
    }
    /// Number of CPUs (online or not).
    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }
    /// Number of zones.
    pub fn nr_zones(&self) -> usize {
        self.zones.len()
    }
    /// Number of nodes.
    pub fn nr_nodes(&self) -> usize {
        self.zonelists.len()
    }
    /// Zone indices of a node (empty for a node that does not exist, as
    /// [`Allocator::zonelist`]).
    pub fn node_zones(&self, node: usize) -> &[usize] {
        self.node_zones.get(node).map_or(&[], |z| &z[..])
    }
    /// Node of a CPU; `None` for a CPU that does not exist.
    pub fn cpu_node(&self, cpu: usize) -> Option<usize> {
        self.cpus.get(cpu).map(|c| c.node)
    }
    /// Zone index holding `pfn`.
    pub fn zone_of_pfn(&self, pfn: Pfn) -> Option<usize> {
        self.zone_of(pfn.0)
    }
    /// Pages managed by all zones.
    pub fn managed_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.managed).sum()
    }
    /// Free pages in the buddy lists of all zones (NR_FREE_PAGES; pcp pages excluded).
    pub fn nr_free_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.free_pages()).sum()
    }
    /// Pages cached in all pagesets (`free_pcp`).
    pub fn nr_pcp_pages(&self) -> u64 {
        (0..self.cpus.len())
            .flat_map(|c| (0..self.zones.len()).map(move |z| (c, z)))
            .map(|(c, z)| self.slot(c, z).pcp.lock().st.count.max(0) as u64)
            .sum()
    }

    /// All counters, summed over CPUs and zones. [`Counters::since`] gives the events of
    /// an interval; [`Allocator::vmstat`] prints them.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// let start = a.counters();
    /// let f = a.alloc_on(0, 0, Gfp::USER, None)?;
    /// let d = a.counters().since(&start);
    /// // One page handed out; one refill brought a batch from the zone under its lock.
    /// assert_eq!((d.pgalloc, d.pcp_refill, d.alloc_zone), (1, 1, 63));
    /// assert_eq!(d.get("zone_lock"), Some(1));
    /// a.free_on(0, f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for s in self.pcps.iter() {
            s.stats.accumulate(&mut c);
        }
        for z in self.zones.iter() {
            for s in z.cpu_stats.iter() {
                s.accumulate(&mut c);
            }
        }
        for cpu in self.cpus.iter() {
            cpu.stats.accumulate(&mut c);
        }
        c
    }

    /// Counters of one CPU (its pagesets, its zone-lock trips, its lock-free events);
    /// `None` for a CPU that does not exist.
    pub fn cpu_counters(&self, cpu: usize) -> Option<Counters> {
        let info = self.cpus.get(cpu)?;
        let mut c = Counters::default();
        for z in 0..self.zones.len() {
            self.slot(cpu, z).stats.accumulate(&mut c);
            self.zones[z].cpu_stats[cpu].accumulate(&mut c);
        }
        info.stats.accumulate(&mut c);
        Some(c)
    }

    /// Counters of one CPU in one zone only: its pageset there and its zone-lock trips
    /// there. Two cells per counter, cheap enough to read around every operation (the
    /// simulator takes per-operation deltas with it); see [`Allocator::cpu_counters`].
    /// `None` for a CPU or zone that does not exist.
    #[inline]
    pub fn cpu_zone_counters(&self, cpu: usize, zone: usize) -> Option<Counters> {
        let slot = self.checked_slot(cpu, zone)?;
        let mut c = Counters::default();
        slot.stats.accumulate(&mut c);
        self.zones[zone].cpu_stats[cpu].accumulate(&mut c);
        Some(c)
    }

    /// The pageset of (`cpu`, `zone`), if both exist (a bad zone index must not reach
    /// another CPU's pageset).
    #[inline]
    fn checked_slot(&self, cpu: usize, zone: usize) -> Option<&PcpSlot> {
        (cpu < self.cpus.len() && zone < self.zones.len()).then(|| self.slot(cpu, zone))
    }

    /// Zone-lock acquisitions by `cpu` in all zones: the `zone_lock` counter of
    /// [`Allocator::cpu_counters`] alone, one cell per zone, cheap enough to read around
    /// every operation to tell a pcp hit from a zone-lock trip (the simulator does).
    /// 0 for a CPU that does not exist.
    pub fn cpu_zone_lock_count(&self, cpu: usize) -> u64 {
        self.zones
            .iter()
            .map(|z| z.cpu_stats.get(cpu).map_or(0, |s| s.zone_lock.get()))
            .sum()
    }

    /// Zonelist entries past the first zone checked by `cpu`'s walks: the
    /// `zonelist_scanned` counter of [`Allocator::cpu_counters`] alone, one cell, cheap
    /// enough to read around every operation (the simulator charges each entry's
    /// instructions with it). 0 for a CPU that does not exist.
    #[inline]
    pub fn cpu_zonelist_scanned(&self, cpu: usize) -> u64 {
        self.cpus
            .get(cpu)
            .map_or(0, |c| c.stats.zonelist_scanned.get())
    }

    /// Reset every counter (not atomic with concurrent work).
    pub fn reset_counters(&self) {
        for s in self.pcps.iter() {
            s.stats.reset();
        }
        for z in self.zones.iter() {
            z.cpu_stats.iter().for_each(Stats::reset);
        }
        self.cpus.iter().for_each(|c| c.stats.reset());
    }

    /// One pageset's state (`/proc/zoneinfo`'s pageset lines plus the tuning fields).
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?; // 1 GiB
    /// let p = a.pcp_info(0, 0).unwrap();
    /// assert_eq!((p.count, p.batch), (0, 63)); // zone_batchsize of a 1 GiB zone
    /// assert!(p.high_min < p.high_max); // auto-tuning on
    ///
    /// let f = a.alloc_on(0, 0, Gfp::USER, None)?;
    /// let p = a.pcp_info(0, 0).unwrap();
    /// assert_eq!(p.count, 62); // one batch refilled, one page handed out
    /// assert_eq!(p.high, p.high_min + 63); // nr_pcp_alloc raised high by the refill
    /// assert_eq!(p.alloc_factor, 1); // and the next order-0 refill doubles
    /// a.free_on(0, f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pcp_info(&self, cpu: usize, zone: usize) -> Option<PcpInfo> {
        let p = self.checked_slot(cpu, zone)?.pcp.lock();
        Some(PcpInfo {
            cpu,
            zone,
            count: p.st.count,
            high: p.st.high,
            batch: p.st.batch,
            high_min: p.st.high_min,
            high_max: p.st.high_max,
            flags: p.st.flags,
            alloc_factor: p.st.alloc_factor,
            free_factor: p.st.free_factor,
            free_count: p.st.free_count,
        })
    }

    /// Blocks on one list of a pageset (`pcp->lists[order_to_pindex(mt, order)]`'s
    /// length; `count` is the sum of the lists' pages). `None` for a CPU or zone that does
    /// not exist, an order the pagesets do not cache or a migratetype that has no list.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout, MigrateType};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// let f = a.alloc_on(0, 0, Gfp::MOVABLE, None)?; // refills a batch of 63, takes one
    /// assert_eq!(a.pcp_list_len(0, 0, 0, MigrateType::Movable), Some(62));
    /// assert_eq!(a.pcp_list_len(0, 0, 0, MigrateType::Unmovable), Some(0));
    /// assert_eq!(a.pcp_list_len(0, 0, 5, MigrateType::Movable), None);
    /// a.free_on(0, f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pcp_list_len(&self, cpu: usize, zone: usize, order: u8, mt: MigrateType) -> Option<u32> {
        if !self.pcp_allowed(order) || mt as usize >= crate::frame::NR_PCPTYPES {
            return None;
        }
        let slot = self.checked_slot(cpu, zone)?;
        let pi = crate::pcp::pindex(order, mt, slot.hot.thp_lists);
        Some(slot.pcp.lock().list_len(pi, slot.hot.ring_at(order)))
    }

    /// One zone's state: free pages, watermarks, free blocks per order, flags.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout, MAX_ORDER};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 2), Config::default())?;
    /// let z = a.zone_info(0).unwrap();
    /// assert_eq!((z.name, z.managed, z.free), ("Normal", 262_144, 262_144));
    /// let [min, low, high, promo] = z.wmark;
    /// assert!(min < low && low < high && high < promo);
    /// // A fresh zone is all order-10 blocks.
    /// assert_eq!(z.nr_free[MAX_ORDER as usize], 262_144 >> MAX_ORDER);
    /// assert!(!z.below_high && !z.reclaim_active);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn zone_info(&self, zone: usize) -> Option<ZoneInfo> {
        let z = self.zones.get(zone)?;
        let nr_free = {
            let g = z.lock_inspect();
            g.free.nr_free
        };
        Some(ZoneInfo {
            zone,
            node: z.node,
            name: z.kind.name(),
            free: z.free_pages(),
            wmark: [
                z.wmark_raw(WMARK_MIN),
                z.wmark_raw(WMARK_LOW),
                z.wmark_raw(WMARK_HIGH),
                z.wmark_raw(WMARK_PROMO),
            ],
            boost: z.boost(),
            spanned: z.end_pfn - z.start_pfn,
            managed: z.managed,
            nr_free,
            below_high: z.has_flag(ZONE_BELOW_HIGH),
            reclaim_active: z.has_flag(ZONE_RECLAIM_ACTIVE),
            reserved_highatomic: z.nr_reserved_highatomic.get(),
            lowmem_reserve: z.lowmem_reserve(),
        })
    }

    /// The pageblock type of the pageblock holding `pfn`.
    pub fn pageblock_type(&self, pfn: Pfn) -> Option<MigrateType> {
        let zi = self.zone_of(pfn.0)?;
        Some(self.zones[zi].pageblock_mt(pfn.0))
    }

    /// Retag the pageblock holding `pfn` (`set_pageblock_migratetype` with
    /// `move_freepages_block`): its free blocks move to the new type's lists. Used for
    /// isolation (type [`MigrateType::Isolate`]) and by tests of pageblock changes.
    pub fn set_pageblock_type(&self, pfn: Pfn, mt: MigrateType) -> Option<u64> {
        let zi = self.zone_of(pfn.0)?;
        let z = &self.zones[zi];
        let cpu = self.current_cpu();
        self.with_buddy(cpu, z, |b| b.move_freepages_block(pfn.0, mt))
    }

    /// Raise (`true`) or lower the merge-skipping disable depth of every zone: callers
    /// that need contiguity (contiguous allocation, offlining) turn skipping off while
    /// they run (Appendix A's "cluster disable depth"). Raising it also merges the frames
    /// skipped so far, so that the caller sees fully merged free lists. Lowering below
    /// zero is ignored.
    pub fn merge_skip_disable(&self, disable: bool) {
        for z in self.zones.iter() {
            if disable {
                z.merge_disable.fetch_add(1, Relaxed);
            } else {
                let _ = z
                    .merge_disable
                    .fetch_update(Relaxed, Relaxed, |d| d.checked_sub(1));
            }
        }
        if disable {
            self.compact();
        }
    }

    /// The free buddy block holding `pfn`: its head, order and the migratetype of the
    /// free list it is on (`None` if the frame is not in a free block of the buddy
    /// lists: allocated, on a pageset, or in a hole). With clustered refill, a frame a
    /// concurrent refill has just cut may still read as free: an inspection aid.
    pub fn free_block_of(&self, pfn: Pfn) -> Option<(Pfn, u8, MigrateType)> {
        let zi = self.zone_of(pfn.0)?;
        let z = &self.zones[zi];
        let _g = z.lock_inspect();
        for o in 0..=MAX_ORDER {
            let head = pfn.0 & !((1u64 << o) - 1);
            if !z.contains(head) {
                break;
            }
            // The first aligned-down frame that heads a block heads the block holding pfn.
            let e = &self.meta[z.meta_index(head) as usize];
            match e.state() {
                State::Tail => continue,
                State::Buddy if pfn.0 < head + (1u64 << e.order()) => {
                    return Some((Pfn(head), e.order(), MigrateType::from_u8(e.mt())?));
                }
                _ => return None,
            }
        }
        None
    }

    /// Address of a block in the memory backing (allocators built with
    /// [`Allocator::with_memory`] only): `None` unless all 2^order frames of the block
    /// lie inside the mapping, so the pointer is valid for `frame.pages() * PAGE_SIZE`
    /// bytes.
    #[cfg(feature = "std")]
    pub fn frame_ptr(&self, frame: Frame) -> Option<core::ptr::NonNull<u8>> {
        let r = self.region.as_ref()?;
        if frame.order > MAX_ORDER {
            return None;
        }
        let idx = frame.pfn.0.checked_sub(self.region_base_pfn)?;
        // The last frame of the block must be inside the mapping too.
        r.frame_ptr(idx.checked_add(frame.pages() - 1)?)?;
        core::ptr::NonNull::new(r.frame_ptr(idx)?)
    }

    /// The frame holding an address of the memory backing.
    #[cfg(feature = "std")]
    pub fn pfn_of_ptr(&self, p: *const u8) -> Option<Pfn> {
        let r = self.region.as_ref()?;
        let off = (p as usize).checked_sub(r.as_ptr() as usize)?;
        (off < r.len()).then(|| Pfn(self.region_base_pfn + (off / crate::frame::PAGE_SIZE) as u64))
    }
}
