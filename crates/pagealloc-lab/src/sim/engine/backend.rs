//! The engine as the workload driver's [`Backend`]: each op's effect on the real
//! allocator, the caches and the virtual clocks; inboxes and barriers that park and
//! wake CPUs.

use pagealloc::{Frame, Gfp, MigrateType};

use super::{event_key, round_ns, Call, Engine, EngineError, Park, State};
use crate::sim::hierarchy::{user_page, Charge, Hierarchy, Span, LINE_BYTES};
use crate::workload::{Backend, Flow, MigrateKind};
use std::cmp::Reverse;

impl Engine<'_> {
    /// The first `bytes` of block `f` as page data.
    fn span(&self, f: Frame, bytes: u64) -> Span {
        Span {
            page: f.pfn.0,
            bytes,
            node: self.lines.node_of_pfn(f.pfn.0),
        }
    }

    /// Page-data work by `cpu` through the hierarchy: charged to its clock, and in its
    /// measured window counted for the cache miss % (LLC misses ÷ data lines). Returns
    /// the lines it served from another CPU's cache ([`Charge::crossed`]).
    fn data(&mut self, cpu: usize, work: impl FnOnce(&mut Hierarchy) -> Charge) -> u64 {
        let (lines, missed) = self.mem.data_totals();
        let c = work(&mut self.mem);
        if self.cpus[cpu].measuring {
            let (lines_after, missed_after) = self.mem.data_totals();
            self.out.data_lines += lines_after - lines;
            self.out.data_llc_misses += missed_after - missed;
        }
        self.charge(cpu, c.ns);
        c.crossed
    }

    fn park(&mut self, cpu: usize, on: Park) {
        let v = &mut self.cpus[cpu];
        v.state = State::Parked;
        v.parked_on = Some(on);
    }

    /// `waker` wakes `cpu`, which sleeps in `Send` or `Recv`: the waker pays the
    /// wakeup's instructions; the sleeper runs again once the wakeup has reached it
    /// (idle time) and it has switched back in (busy time).
    fn wake(&mut self, waker: usize, cpu: usize) {
        let c = self.spec.cost;
        self.out.sleeps[cpu] += 1;
        self.charge(waker, c.wake_ns);
        let now = self.cpus[waker].time + round_ns(c.wakeup_ns);
        let v = &mut self.cpus[cpu];
        v.state = State::Runnable;
        v.parked_on = None;
        v.time = v.time.max(now);
        self.charge(cpu, c.switch_ns);
        let v = &self.cpus[cpu];
        self.heap.push(Reverse(event_key(v.time, cpu as u32)));
    }

    /// A block `cpu` received has left it (freed, or sent on): once every block it
    /// received is gone, they stop counting against its inbox and a blocked sender
    /// is woken.
    fn release_received(&mut self, cpu: usize, f: Frame) {
        let held = &mut self.unfreed[cpu];
        if let Some(e) = held.iter_mut().find(|e| **e == Some(f.pfn.0)) {
            *e = None;
            if held.iter().all(Option::is_none) {
                held.clear();
                if self.inboxes[cpu].len() <= self.resume {
                    if let Some(s) = self.blocked_senders[cpu].pop_front() {
                        self.wake(cpu, s as usize);
                    }
                }
            }
        }
    }
}

/// The effects of ops in virtual time: the real allocator as the virtual CPU, costs
/// charged to its clock, inboxes and barriers that park and wake CPUs.
impl Backend for Engine<'_> {
    type Block = Frame;
    type Error = EngineError;

    fn alloc(
        &mut self,
        cpu: usize,
        order: u8,
        kind: MigrateKind,
    ) -> Result<Option<Frame>, EngineError> {
        let cost = self.spec.cost;
        let t = self.cpus[cpu].time;
        let busy = self.cpus[cpu].busy;
        self.platform.set(cpu, t);
        let gfp = Gfp::from_migratetype(match kind {
            MigrateKind::Unmovable => MigrateType::Unmovable,
            MigrateKind::Movable => MigrateType::Movable,
            MigrateKind::Reclaimable => MigrateType::Reclaimable,
        });
        let scanned = self.a.cpu_zonelist_scanned(cpu);
        self.streams[cpu].hint();
        let r = self.a.alloc_on_reported(cpu, order, gfp, None);
        let fault = if kind == MigrateKind::Movable && r.is_ok() {
            cost.fault_ns
        } else {
            0.0
        };
        // The instructions of every zone the walk checked past the first, as the
        // allocator counted them (`zonelist_scanned`); the first is in `alloc_fast_ns`.
        let checks = (self.a.cpu_zonelist_scanned(cpu) - scanned) as f64;
        self.charge(
            cpu,
            cost.alloc_fast_ns + fault + checks * cost.zone_check_ns,
        );
        self.out.page_ops += 1;
        self.replay(cpu, Call::Alloc, self.cpus[cpu].time);
        let v = &mut self.cpus[cpu];
        v.sys += v.busy - busy;
        Ok(r.ok())
    }

    fn free(&mut self, cpu: usize, f: Frame) -> Result<(), EngineError> {
        let t = self.cpus[cpu].time;
        let busy = self.cpus[cpu].busy;
        self.platform.set(cpu, t);
        self.streams[cpu].hint();
        self.a.free_on_reported(cpu, f).map_err(|e| {
            EngineError::Contract(format!("cpu {cpu}: free of {f:?} refused: {e:?}"))
        })?;
        self.charge(cpu, self.spec.cost.free_fast_ns);
        self.out.page_ops += 1;
        self.replay(cpu, Call::Free, self.cpus[cpu].time);
        let v = &mut self.cpus[cpu];
        v.sys += v.busy - busy;
        self.release_received(cpu, f);
        Ok(())
    }

    fn touch(&mut self, cpu: usize, f: Frame) -> Result<(), EngineError> {
        let span = self.span(f, f.pages() * pagealloc::PAGE_SIZE as u64);
        self.data(cpu, |m| m.touch(cpu, span, true));
        Ok(())
    }

    fn copy(
        &mut self,
        cpu: usize,
        f: Frame,
        bytes: u32,
        into_block: bool,
        cross_ns_per_kib: u32,
    ) -> Result<(), EngineError> {
        let block = self.span(f, u64::from(bytes));
        let user = Span {
            page: user_page(cpu as u32, 0),
            bytes: u64::from(bytes),
            node: self.lines.cpu_node(cpu),
        };
        let crossed = if into_block {
            self.data(cpu, |m| m.copy(cpu, user, block))
        } else {
            self.data(cpu, |m| m.copy(cpu, block, user))
        };
        // What the hierarchy leaves of the lines it served from another CPU's cache.
        let kib = crossed as f64 * LINE_BYTES as f64 / 1024.0;
        self.charge(cpu, kib * f64::from(cross_ns_per_kib));
        Ok(())
    }

    fn compute(&mut self, cpu: usize, ns: u64) {
        self.charge(cpu, ns as f64);
    }

    fn send(&mut self, cpu: usize, to: usize, f: Frame) -> Result<Flow, EngineError> {
        if to >= self.cpus.len() {
            return Err(EngineError::Contract(format!(
                "cpu {cpu}: send to cpu {to} of {}",
                self.cpus.len()
            )));
        }
        if self.inboxes[to].len() + self.unfreed[to].len() >= self.capacity {
            self.blocked_senders[to].push_back(cpu as u32);
            self.park(cpu, Park::Send);
            return Ok(Flow::Blocked);
        }
        self.inboxes[to].push_back(f);
        self.charge(cpu, self.spec.cost.message_ns);
        if self.cpus[to].parked_on == Some(Park::Recv) {
            self.wake(cpu, to);
        }
        self.release_received(cpu, f);
        Ok(Flow::Done)
    }

    fn recv(&mut self, cpu: usize) -> Result<Option<Frame>, EngineError> {
        let Some(f) = self.inboxes[cpu].pop_front() else {
            self.park(cpu, Park::Recv);
            return Ok(None);
        };
        self.charge(cpu, self.spec.cost.message_ns);
        self.unfreed[cpu].push(Some(f.pfn.0));
        Ok(Some(f))
    }

    fn try_recv(&mut self, cpu: usize) -> Result<Option<Frame>, EngineError> {
        if self.inboxes[cpu].is_empty() {
            return Ok(None);
        }
        self.recv(cpu)
    }

    fn barrier(&mut self, cpu: usize, id: u32) -> Result<Flow, EngineError> {
        self.park(cpu, Park::Barrier);
        self.released = self.barriers.arrive(cpu, id)?;
        Ok(Flow::Blocked)
    }

    fn done(&mut self, cpu: usize) -> Result<(), EngineError> {
        self.barriers.done(cpu)?;
        let v = &mut self.cpus[cpu];
        v.state = State::Done;
        v.end = v.time;
        Ok(())
    }

    fn window_opened(&mut self, cpu: usize) {
        let v = &mut self.cpus[cpu];
        v.measuring = true;
        v.measure_start = v.time;
        if self.measured_after.is_some() && self.window_base.is_none() {
            self.window_base = Some((
                self.a.counters(),
                self.out.cache_alloc_pages,
                self.out.cache_free_pages,
            ));
            if !self.spec.start.is_empty() {
                // From a start state the pageset lines count from the window, as
                // `predict`'s kernel side counts them.
                let pcp = self.a.nr_pcp_pages();
                self.out.pcp_start = pcp;
                self.out.pcp_peak = pcp;
            }
        }
    }

    fn stamp(&self, cpu: usize) -> u64 {
        self.cpus[cpu].time
    }
}
