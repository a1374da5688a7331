//! Memory-level parallelism: how long a run of allocator accesses takes on one core when
//! its independent misses overlap and its pointer chases do not.
//!
//! # Design
//! A core keeps a bounded number of L1D misses in flight — one line fill buffer each —
//! and its L2 a bounded number of misses to the LLC and beyond (the L2 miss queue, the
//! "superqueue"); both are [`CacheSpec::fill_buffers`] and [`CacheSpec::l2_misses`],
//! shared by the core's hardware threads. Whether two misses overlap depends on the
//! program, not the cache: a load whose address is computed (a buddy by PFN, a pageblock
//! entry, a zone line) can issue while earlier misses are outstanding; a load whose
//! address was read from another line (a list link: `list_del` reaches the neighbours
//! through the frame's `lru`) cannot issue before that line has arrived. The allocator
//! says which in each report ([`pagealloc::Access::dep`]); this model only schedules.
//!
//! [`Overlap`] replays one run (a zone-lock hold, or the accesses between two holds) in
//! program order with an issue clock:
//! - an access issues at the issue clock; a chased one (`dep = k`) not before the line
//!   reported `k` back has arrived, and the issue clock moves to that time (what comes
//!   after a pointer chase in a list walk uses the pointer);
//! - an L1 hit completes one L1 latency later — or when the line arrives, if an earlier
//!   access of the run is still filling it (the second touch of a line waits for the
//!   first's fill);
//! - a miss takes the fill buffer that frees first (and, beyond L2, an L2 queue entry as
//!   well), starts when both are free, holds them for its latency; the issue clock moves
//!   to its start (buffers are allocated in program order);
//! - the run ends when its last access completes: under x86's store ordering the unlock
//!   (a store) becomes visible only after every store before it, so a hold lasts until
//!   its last line has arrived.
//!
//! The instructions around each line (the engine's `locked_line_ns` under the zone
//! lock) are added to the run's time, not overlapped with its misses: the hold stays
//! linear in that cost, which is what the batch-sweep fit assumes.
//!
//! # What it cannot see
//! The reorder buffer's bound on how far past a stalled load the core runs (only the
//! fill buffers bound it here); a buddy lookup whose PFN is known as soon as the frame's
//! *address* is, issued only after the frame's own line arrived when the report order
//! puts the chase first; bank and mesh contention; the sibling hyperthread's use of the
//! shared buffers (each thread gets its share).
//!
//! [`CacheSpec::fill_buffers`]: super::machine::CacheSpec::fill_buffers
//! [`CacheSpec::l2_misses`]: super::machine::CacheSpec::l2_misses

use super::hierarchy::Level;
use super::machine::CacheSpec;

/// Completion times of the last reports, for `dep` look-backs (a power of two).
const RECENT: usize = 16;
/// Lines filled during the run, direct-mapped by key (a power of two).
const TABLE: usize = 64;

/// The schedule of one run of accesses on one core (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Overlap {
    /// This hardware thread's fill buffers.
    fill: Buffers,
    /// This hardware thread's L2 miss queue entries.
    queue: Buffers,
    /// Completion time of the last [`RECENT`] accesses, by report number.
    recent: [f64; RECENT],
    /// Reports seen (indexes `recent`).
    n: usize,
    /// Lines filled in this run: key, run number, completion.
    table: [(u64, u32, f64); TABLE],
    /// Run number (invalidates `table` at each [`Overlap::begin`]).
    run: u32,
    /// The issue clock, ns.
    issue: f64,
    /// The latest completion so far, ns.
    end: f64,
}

impl Overlap {
    /// A core of `spec` (each hardware thread gets its share of the buffers, at least one).
    pub(crate) fn new(spec: &CacheSpec) -> Overlap {
        let share = |n: u32| (n / spec.threads_per_core.max(1)).max(1) as usize;
        Overlap {
            fill: Buffers::new(share(spec.fill_buffers)),
            queue: Buffers::new(share(spec.l2_misses)),
            recent: [0.0; RECENT],
            n: 0,
            table: [(u64::MAX, 0, 0.0); TABLE],
            run: 0,
            issue: 0.0,
            end: 0.0,
        }
    }

    /// A new run starting at `t`, ns: nothing in flight.
    #[inline]
    pub(crate) fn begin(&mut self, t: f64) {
        self.fill.reset(t);
        self.queue.reset(t);
        self.run = self.run.wrapping_add(1);
        self.issue = t;
        self.end = t;
    }

    /// When the run's last access completes, ns.
    #[inline]
    pub(crate) fn end(&self) -> f64 {
        self.end
    }

    /// One access of line `key`, served from `level` in `ns` (its unloaded latency),
    /// with `dep` as [`pagealloc::Access::dep`]. Returns its completion time.
    #[inline]
    pub(crate) fn access(&mut self, key: u64, level: Level, ns: f64, dep: u8) -> f64 {
        if dep != 0 {
            self.chase(dep);
        }
        let slot = ((key ^ (key >> 6)) as usize) & (TABLE - 1);
        let done = if level == Level::L1 {
            let (tk, tr, td) = self.table[slot];
            let arrived = if tk == key && tr == self.run { td } else { 0.0 };
            later(self.issue + ns, arrived)
        } else {
            let (fi, ffree) = self.fill.earliest();
            let mut start = later(self.issue, ffree);
            let far = level > Level::L2;
            let mut qi = 0;
            if far {
                let (i, qfree) = self.queue.earliest();
                qi = i;
                start = later(start, qfree);
            }
            let done = start + ns;
            self.fill.take(fi, done);
            if far {
                self.queue.take(qi, done);
            }
            self.issue = start;
            self.table[slot] = (key, self.run, done);
            done
        };
        self.recent[self.n & (RECENT - 1)] = done;
        self.n = self.n.wrapping_add(1);
        if done > self.end {
            self.end = done;
        }
        done
    }
}

impl Overlap {
    /// A chased access (`dep = k`, see [`Overlap::access`]) issues no earlier than the
    /// line reported `k` back arrived. Out of line: most accesses are not chases, and
    /// the replay's loop keeps fewer registers without it.
    #[inline(never)]
    fn chase(&mut self, dep: u8) {
        let k = dep as usize;
        if k <= RECENT && k <= self.n {
            let from = self.recent[(self.n - k) & (RECENT - 1)];
            self.issue = later(self.issue, from);
        }
    }
}

/// The later of two times, ns: `a.max(b)` for the schedule's times, which are never
/// NaN. One compare: `f64::max` also orders NaN, which costs five more instructions on
/// each reported line.
///
/// On x86-64 it is one `maxsd` (`b > a ? b : a`, the same choice): as a branch, the L1
/// hit's `later(issue + ns, arrived)` was among the replay's costliest instructions in
/// `perf record` (its outcome depends on the data).
#[inline(always)]
fn later(a: f64, b: f64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_cvtsd_f64, _mm_max_sd, _mm_set_sd};
        // SAFETY: SSE2 is in the x86-64 baseline, so these intrinsics are available on
        // every CPU the binary runs on; they read only their register arguments (no
        // memory, no lock involved). MAXSD dest, src yields `dest > src ? dest : src`.
        unsafe { _mm_cvtsd_f64(_mm_max_sd(_mm_set_sd(b), _mm_set_sd(a))) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        if b > a {
            b
        } else {
            a
        }
    }
}

/// Buffers of one kind (fill buffers, L2 miss queue entries): when each is free again.
///
/// A run starts with every buffer free at its start, `base`. Instead of writing `base`
/// into every buffer at each [`Overlap::begin`] (most runs are a few lines and use few
/// of them), the buffers the run has taken are the first `used` of `free_at`, and the
/// others are free at `base`. Every completion time of a run is at or after its start
/// (the issue clock never goes back), so while a buffer is untaken the earliest free
/// time is `base`, without a scan. Which of several equally early buffers is taken is
/// not observable: the schedule depends only on the set of free times, and that is the
/// same as with every buffer written.
#[derive(Clone, Debug)]
struct Buffers {
    free_at: Vec<f64>,
    used: usize,
    base: f64,
}

impl Buffers {
    fn new(n: usize) -> Buffers {
        Buffers {
            free_at: vec![0.0; n],
            used: 0,
            base: 0.0,
        }
    }

    /// A run starts at `t`: every buffer free.
    #[inline]
    fn reset(&mut self, t: f64) {
        self.used = 0;
        self.base = t;
    }

    /// A buffer that frees first: (index, time).
    #[inline]
    fn earliest(&self) -> (usize, f64) {
        if self.used < self.free_at.len() {
            (self.used, self.base)
        } else {
            earliest(&self.free_at)
        }
    }

    /// Buffer `i` (from [`Buffers::earliest`]) is busy until `done`.
    #[inline]
    fn take(&mut self, i: usize, done: f64) {
        debug_assert!(done >= self.base, "a run's times are at or after its start");
        self.free_at[i] = done;
        if i == self.used {
            self.used += 1;
        }
    }
}

/// The entry that frees first: (index, time).
#[inline]
fn earliest(v: &[f64]) -> (usize, f64) {
    let mut best = (0, v[0]);
    for (i, &t) in v.iter().enumerate().skip(1) {
        if t < best.1 {
            best = (i, t);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::machine::SPR_CACHES;

    fn core() -> Overlap {
        let mut o = Overlap::new(&SPR_CACHES);
        o.begin(0.0);
        o
    }

    #[test]
    fn independent_misses_overlap_up_to_the_fill_buffers() {
        let per_thread = (SPR_CACHES.fill_buffers / SPR_CACHES.threads_per_core) as u64;
        let mut o = core();
        for i in 0..per_thread {
            o.access(i, Level::LocalDram, 100.0, 0);
        }
        assert_eq!(o.end(), 100.0, "one latency for a buffer's worth");
        o.access(per_thread, Level::LocalDram, 100.0, 0);
        assert_eq!(o.end(), 200.0, "the next waits for a free buffer");
    }

    #[test]
    fn a_pointer_chase_is_serial() {
        let mut o = core();
        for i in 0..10 {
            o.access(i, Level::LocalDram, 100.0, if i == 0 { 0 } else { 1 });
        }
        assert_eq!(o.end(), 1000.0);
    }

    #[test]
    fn a_second_touch_waits_for_the_first_fill() {
        let mut o = core();
        o.access(7, Level::Llc, 30.0, 0);
        let t = o.access(7, Level::L1, 2.5, 0);
        assert_eq!(t, 30.0);
        // A chase from it starts when it arrived.
        let t2 = o.access(8, Level::Llc, 30.0, 1);
        assert_eq!(t2, 60.0);
        o.begin(100.0);
        assert_eq!(o.access(7, Level::L1, 2.5, 0), 102.5, "a new run");
    }

    #[test]
    fn untaken_buffers_schedule_as_written_ones() {
        use crate::workload::{Rng, SplitMix64};
        // The schedule with every buffer's free time written at each run's start, as
        // `Buffers` stands for it.
        fn reference(
            fill: &mut [f64],
            queue: &mut [f64],
            issue: &mut f64,
            level: Level,
            ns: f64,
            from: Option<f64>,
        ) -> f64 {
            if let Some(f) = from {
                *issue = issue.max(f);
            }
            let (fi, ffree) = earliest(fill);
            let mut start = issue.max(ffree);
            let far = level > Level::L2;
            let (qi, qfree) = earliest(queue);
            if far {
                start = later(start, qfree);
            }
            let done = start + ns;
            fill[fi] = done;
            if far {
                queue[qi] = done;
            }
            *issue = start;
            done
        }
        let spec = CacheSpec {
            fill_buffers: 4,
            l2_misses: 6,
            threads_per_core: 1,
            ..SPR_CACHES
        };
        let mut o = Overlap::new(&spec);
        let mut rng = SplitMix64::new(12);
        let mut t = 0.0;
        for _ in 0..200 {
            o.begin(t);
            let (mut fill, mut queue, mut issue) = (vec![t; 4], vec![t; 6], t);
            let mut done_at: Vec<f64> = Vec::new();
            for i in 0..rng.below(20) {
                let level = if rng.percent(50) {
                    Level::L2
                } else {
                    Level::LocalDram
                };
                let ns = [0.0, 5.0, 30.0, 110.0][rng.below(4) as usize];
                let dep = if i > 0 && rng.percent(30) { 1 } else { 0 };
                let from = (dep == 1).then(|| done_at[done_at.len() - 1]);
                // Distinct keys: no line is filled twice in a run.
                let got = o.access(1000 * i + 7, level, ns, dep);
                let want = reference(&mut fill, &mut queue, &mut issue, level, ns, from);
                assert_eq!(got, want);
                done_at.push(got);
            }
            t = o.end() + rng.below(50) as f64;
        }
    }

    #[test]
    fn the_l2_queue_bounds_misses_beyond_l2_only() {
        let spec = CacheSpec {
            fill_buffers: 8,
            l2_misses: 2,
            threads_per_core: 1,
            ..SPR_CACHES
        };
        let mut o = Overlap::new(&spec);
        o.begin(0.0);
        for i in 0..4 {
            o.access(i, Level::L2, 8.0, 0);
        }
        assert_eq!(o.end(), 8.0, "L2 hits use fill buffers only");
        o.begin(0.0);
        for i in 0..4 {
            o.access(i, Level::LocalDram, 100.0, 0);
        }
        assert_eq!(o.end(), 200.0, "two at a time beyond L2");
    }
}
