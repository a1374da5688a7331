//! The replay of an allocator call's reported lines: through the cache hierarchy,
//! the L2 streamer over `struct page` and the core's fill buffers, and into the
//! zone locks' holds in virtual time (see the module docs of `engine`).

use super::{round_ns, Call, Engine, TripKind, CPU_BITS, NO_CPU};
use crate::row::record_ns;
use crate::sim::hierarchy::{Hierarchy, Home, Level};
use crate::sim::overlap::Overlap;
use crate::sim::trace::{self, LineMap, Rec};

/// The L2 streamer of one CPU, as far as `struct page` accesses go: the hardware
/// prefetcher detects accesses that walk a 4 KiB page line by line, forward or backward,
/// and fetches the next lines ahead of them (Intel's optimization manual, "Data
/// Prefetching": the L2 streamer tracks 32 streams, one per 4 KiB page, and runs up to
/// 20 lines ahead). `struct page` is 64 bytes, so frames with neighbouring PFNs have
/// neighbouring metadata lines: a refill that takes the frames of a split block one by
/// one walks memmap sequentially, and its lines arrive prefetched. An access within two
/// lines of the last one in a tracked page is charged an L2 hit (the line was on its
/// way); anything else is charged what the hierarchy says.
///
/// Lines are named by their keys (`K_META | pfn`, never 0): the keys of one memmap page
/// differ only in their low 6 bits, so a slot keeps the key of the last line accessed
/// in its page, which names the page (`key >> 6`) and the line's offset in it (`key %
/// 64`) at once; two keys of the same page are within two lines iff the keys are.
///
/// The slot that matched last and its key are in the record's first host line
/// (`repr(C)`, 64-byte aligned), which the engine hints at the start of each call
/// ([`Streamer::hint`]): a refill's lines match it one after another without reading
/// the slots (the record of one of 224 CPUs was a host miss at a call's first frame
/// line).
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(super) struct Streamer {
    /// The key of the last line accessed in slot `last`'s page: the slot's key, which
    /// `keys[last]` holds only once another slot is used (a page's lines are one slot's
    /// whatever their offset, so `keys[last]` names the same page meanwhile).
    last_key: u64,
    /// The slot that matched last (checked first: a refill walks one page for many
    /// accesses), and the slot to replace next (round robin).
    last: usize,
    next: usize,
    /// Per tracked memmap page: the key of the last line accessed in it (0 = free
    /// slot). A page is in at most one slot.
    keys: [u64; STREAMS],
    /// Per bucket of memmap pages ([`bucket`]): the slots whose page falls in it, a bit
    /// each. A page is looked for in its bucket's slots alone (usually none or one),
    /// not in all 32: a drain's frames come from scattered memmap pages, and the scan of
    /// every slot was 5 % of the contended kbuild rows' instructions.
    buckets: [u32; BUCKETS],
}

/// Streams the model tracks per CPU (the L2 streamer's 32).
const STREAMS: usize = 32;
// A bucket's slots are the bits of a `u32`.
const _: () = assert!(STREAMS <= 32);
/// Lines of `struct page` per 4 KiB page of memmap.
const METAS_PER_PAGE: u64 = 64;
/// Buckets of [`Streamer::buckets`]; a power of two.
const BUCKETS: usize = 64;

/// The bucket of the memmap page of key `key`: its page number's low bits (the pages a
/// refill walks in turn fall in different buckets).
#[inline(always)]
fn bucket(key: u64) -> usize {
    (key / METAS_PER_PAGE) as usize % BUCKETS
}

/// Whether keys `a` and `b` are lines of the same memmap page.
#[inline(always)]
fn same_page(a: u64, b: u64) -> bool {
    (a ^ b) < METAS_PER_PAGE
}

impl Streamer {
    pub(super) fn new() -> Streamer {
        Streamer {
            last_key: 0,
            last: 0,
            next: 0,
            keys: [0; STREAMS],
            buckets: [0; BUCKETS],
        }
    }

    /// Asks the host to load the record's first line (`last_key`, `last`, `next`): a
    /// hint only, made before the allocator's call whose lines the replay then feeds
    /// to this streamer.
    #[inline(always)]
    pub(super) fn hint(&self) {
        crate::sim::ahead::line(std::ptr::from_ref(self) as usize);
    }

    /// Records an access to the metadata line `key` (a frame's, `K_META | pfn`: not 0);
    /// true if the streamer had it coming.
    #[inline]
    fn prefetched(&mut self, key: u64) -> bool {
        debug_assert!(key >= METAS_PER_PAGE, "a frame line's key");
        if same_page(self.last_key, key) {
            let near = self.last_key.abs_diff(key) <= 2;
            self.last_key = key;
            return near;
        }
        // Another slot: the last one's key goes back into its slot. `last` and `next`
        // are slots (below `STREAMS`): the masks only spare the bounds checks.
        self.keys[self.last % STREAMS] = self.last_key;
        let (k, near) = match self.find(key) {
            Some(k) => (k, self.keys[k].abs_diff(key) <= 2),
            None => {
                let k = self.next % STREAMS;
                let old = self.keys[k];
                if old != 0 {
                    self.buckets[bucket(old)] &= !(1 << k);
                }
                self.buckets[bucket(key)] |= 1 << k;
                self.next = (k + 1) % STREAMS;
                (k, false)
            }
        };
        self.keys[k] = key;
        self.last = k;
        self.last_key = key;
        near
    }

    /// The slot that tracks the memmap page of `key`, if one does: among the slots of
    /// its bucket (the one slot a page can be in, as a scan of every slot finds it).
    #[inline(always)]
    fn find(&self, key: u64) -> Option<usize> {
        let mut slots = self.buckets[bucket(key)];
        while slots != 0 {
            let k = slots.trailing_zeros() as usize % STREAMS;
            if same_page(self.keys[k], key) {
                return Some(k);
            }
            slots &= slots - 1;
        }
        None
    }
}

/// A record's home node: a frame's looked up from its PFN, only when asked (the line
/// comes from DRAM); any other line's is in the record.
#[derive(Clone, Copy)]
struct RecHome<'a>(Rec, &'a LineMap);

impl Home for RecHome<'_> {
    #[inline(always)]
    fn node(self) -> u32 {
        match self.0.frame() {
            Some(pfn) => self.1.node_of_pfn(pfn),
            None => self.0.node(),
        }
    }
}

/// A zone-lock hold being replayed.
#[derive(Clone, Copy, Debug)]
struct Trip {
    zone: usize,
    /// When the hold began (after any wait), ns.
    start: f64,
    /// The wait before it, ns.
    wait: f64,
    /// The hold's fixed part (hand-off, residual) when opened; the whole hold once
    /// closed, ns.
    hold: f64,
    /// The instructions around its lines (`locked_line_ns` each), ns.
    lines: f64,
    /// Its lines, and of them those charged beyond the socket's LLC
    /// ([`super::LockTally::lines`], added when it closes).
    count: u64,
    missed: u64,
}

/// What the lines of one run change: the hierarchy, the core's fill buffers, the CPU's
/// streamer, the prefetched-line counter, the trip's tally (`None` between trips).
/// Borrowed apart from the engine, so that the loop over the run's lines
/// ([`run_lines`]) gets them as distinct references and keeps what they hold in
/// registers across lines.
struct Run<'a> {
    mem: &'a mut Hierarchy,
    lines: &'a LineMap,
    overlap: &'a mut Overlap,
    stream: &'a mut Streamer,
    prefetched: &'a mut u64,
    trip: Option<&'a mut Trip>,
}

/// Replays the lines of `xs` by `cpu` up to the first trip marker or, in a trip, the
/// first line reported without the lock (`xs[0]` is neither); returns how many.
/// Each line goes through the cache hierarchy and the streamer (an L2 hit, `l2_ns`,
/// when the streamer had it coming) to the fill buffers; in a trip it adds `line_ns`
/// to the hold's instructions.
///
/// The references of `r` are arguments, which the compiler knows do not alias (in the
/// caller they are fields of one engine), also once inlined (out of line, 0.4 % more
/// instructions in callgrind's `sim kbuild -p tasks=112`).
#[inline(always)]
fn run_lines(r: Run<'_>, cpu: usize, l2_ns: f64, line_ns: f64, xs: &[Rec]) -> usize {
    let Run {
        mem,
        lines: map,
        overlap,
        stream,
        prefetched,
        trip,
    } = r;
    let in_trip = trip.is_some();
    // The trip's tally, in locals: the same additions in the same order.
    let (mut lines, mut count, mut missed) = trip
        .as_ref()
        .map_or((0.0, 0, 0), |t| (t.lines, t.count, t.missed));
    let mut mem = mem.lines(cpu);
    let mut n = 0;
    for &x in xs {
        if x.lock_of_zone().is_some() || (in_trip && !x.locked()) {
            break;
        }
        n += 1;
        // The line's level counts in the hierarchy's counters (`meta_levels`).
        let c = mem.access(x.key(), RecHome(x, map), x.write());
        let (mut ns, mut level) = (c.ns, c.level);
        if x.frame().is_some() && stream.prefetched(x.key()) && c.level > Level::L2 {
            ns = l2_ns;
            level = Level::L2;
            *prefetched += 1;
        }
        overlap.access(x.key(), level, ns, x.dep());
        if in_trip {
            lines += line_ns;
            count += 1;
            missed += u64::from(level >= Level::Peer); // beyond the LLC, or HITM
        }
    }
    if let Some(t) = trip {
        t.lines = lines;
        t.count = count;
        t.missed = missed;
    }
    n
}

impl Engine<'_> {
    /// Replays the accesses the allocator reported during its last call, made as `cpu`
    /// from time `at`: each line through the cache hierarchy; the lines reported with
    /// the zone lock held go to that lock's hold (which starts once the lock is free and
    /// costs a hand-off when another CPU held it last, plus the trip's own instructions),
    /// the others to the CPU. Returns the time the call ends (`at` for background work,
    /// whose CPU is not delayed).
    pub(super) fn replay(&mut self, cpu: usize, call: Call, at: u64) -> u64 {
        trace::drain_into(&mut self.buf);
        let buf = std::mem::take(&mut self.buf);
        let line_ns = self.spec.cost.locked_line_ns;
        let mut now = at as f64;
        let mut trip: Option<Trip> = None;
        // Each run of accesses (a hold, or the accesses between holds) is scheduled on
        // the core's fill buffers: independent misses overlap, chases do not.
        self.overlap.begin(now);
        let mut i = 0;
        while let Some(&x) = buf.get(i) {
            if let Some(zone) = x.lock_of_zone() {
                now = match trip.take() {
                    Some(t) => self.close_trip(cpu, call, t),
                    None => self.overlap.end(),
                };
                let t = self.open_trip(cpu, call, zone as usize, now);
                self.overlap.begin(t.start + t.hold);
                trip = Some(t);
                i += 1;
                continue;
            }
            if !x.locked() {
                if let Some(t) = trip.take() {
                    now = self.close_trip(cpu, call, t);
                    self.overlap.begin(now);
                }
            }
            // The lines up to the next marker (or, in a trip, the next line reported
            // without the lock): `x` is one of them.
            i += run_lines(
                Run {
                    mem: &mut self.mem,
                    lines: &self.lines,
                    overlap: &mut self.overlap,
                    stream: &mut self.streams[cpu],
                    prefetched: &mut self.out.meta_prefetched,
                    trip: trip.as_mut(),
                },
                cpu,
                self.l2_ns,
                line_ns,
                &buf[i..],
            );
        }
        now = match trip.take() {
            Some(t) => self.close_trip(cpu, call, t),
            None => self.overlap.end(),
        };
        self.buf = buf;
        if call == Call::Background {
            return at;
        }
        let end = round_ns(now);
        let v = &mut self.cpus[cpu];
        if v.measuring {
            v.busy += end.saturating_sub(v.time);
        }
        v.time = v.time.max(end);
        end
    }

    /// A zone-lock trip by `cpu` on zone `z` begins at `now`: it waits until the lock is
    /// free, then pays the hand-off and the trip's instructions.
    fn open_trip(&mut self, cpu: usize, call: Call, z: usize, now: f64) -> Trip {
        if self.spec.page_cache && call != Call::Background {
            self.page_cache_reclaim(z, round_ns(now));
        }
        let c = &self.spec.cost;
        let socket = self.socket(cpu);
        let l = &self.locks[z];
        let start = now.max(l.free_at as f64);
        let handoff = if l.last_cpu == cpu as u32 || l.last_cpu == NO_CPU {
            0.0
        } else if l.last_socket == socket {
            c.handoff_socket_ns
        } else {
            c.handoff_remote_ns
        };
        let fixed = match call {
            Call::Alloc => c.refill_trip_ns,
            Call::Free | Call::Background => c.drain_trip_ns,
        };
        if start > now && call != Call::Background && self.cpus[cpu].measuring {
            self.out.lock_kinds[l.last_kind as usize].wait_behind_ns += start - now;
        }
        Trip {
            zone: z,
            start,
            wait: start - now,
            hold: handoff + fixed,
            lines: 0.0,
            count: 0,
            missed: 0,
        }
    }

    /// The trip `t` ends: the lock is busy until then; returns the CPU's time after it.
    /// In the CPU's measured window its wait is counted and the hold recorded.
    fn close_trip(&mut self, cpu: usize, call: Call, mut t: Trip) -> f64 {
        // The hold lasts until the last line of the run has arrived, plus the
        // instructions around its lines.
        t.hold = self.overlap.end() - t.start + t.lines;
        let end = t.start + t.hold;
        let socket = self.socket(cpu);
        let l = &mut self.locks[t.zone];
        l.free_at = round_ns(end);
        l.last_cpu = cpu as u32;
        l.last_socket = socket;
        let kind = match call {
            Call::Alloc => TripKind::Refill,
            Call::Free => TripKind::Drain,
            Call::Background => TripKind::Background,
        };
        l.last_kind = kind;
        let k = &mut self.out.lock_kinds[kind as usize];
        k.lines += t.count;
        k.lines_missed += t.missed;
        if call == Call::Background || self.cpus[cpu].measuring {
            k.trips += 1;
            k.contended += u64::from(t.wait > 0.0);
            k.wait_ns += t.wait;
            k.hold_ns += t.hold;
        }
        // Ticks past the engine's time limit (`event_key`) are not kept: the run stops
        // with an error at its next event.
        if call != Call::Background
            && self.cpus[cpu].measuring
            && t.start < (1u64 << (64 - CPU_BITS)) as f64
        {
            let i = (t.start as u64 / self.tick_ns) as usize;
            if self.out.wait_by_tick.len() <= i {
                self.out.wait_by_tick.resize(i + 1, (0.0, 0));
            }
            self.out.wait_by_tick[i].0 += t.wait;
            self.out.wait_by_tick[i].1 += 1;
        }
        if call != Call::Background && self.cpus[cpu].measuring {
            let v = &mut self.cpus[cpu];
            v.wait += round_ns(t.wait);
            let h = if call == Call::Free {
                &mut self.out.free_trips
            } else {
                &mut self.out.alloc_trips
            };
            // What function_graph would print: the hold plus the tracer's own work
            // inside the window it times (the lock is not held any longer for it here:
            // the tracer runs before the lock is taken and after it is released, but
            // inside the extracted function whose duration is reported).
            let traced = if self.spec.fgraph_timed {
                self.spec.cost.fgraph_ns
            } else {
                0.0
            };
            record_ns(h, round_ns(t.hold + traced));
        }
        // The tracer's in-window work is the CPU's, outside the lock.
        if self.spec.fgraph_timed && call != Call::Background {
            end + self.spec.cost.fgraph_ns
        } else {
            end
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::trace::K_META;
    use crate::workload::{Rng, SplitMix64};

    /// The streamer as a scan of every slot: the model [`Streamer`] implements.
    struct Scan {
        keys: [u64; STREAMS],
        next: usize,
    }

    impl Scan {
        fn prefetched(&mut self, key: u64) -> bool {
            match self.keys.iter().position(|&k| same_page(k, key)) {
                Some(k) => {
                    let near = self.keys[k].abs_diff(key) <= 2;
                    self.keys[k] = key;
                    near
                }
                None => {
                    self.keys[self.next] = key;
                    self.next = (self.next + 1) % STREAMS;
                    false
                }
            }
        }
    }

    #[test]
    fn the_buckets_find_what_a_scan_of_every_slot_finds() {
        let mut s = Streamer::new();
        let mut scan = Scan {
            keys: [0; STREAMS],
            next: 0,
        };
        let mut rng = SplitMix64::new(31);
        let (mut pfn, mut near) = (0u64, 0);
        for _ in 0..200_000 {
            // Walks of neighbouring frames (a refill's split block), jumps among the
            // pages of a few hundred (a drain's scattered frees) and far away.
            pfn = match rng.next_u64() % 8 {
                0..=3 => pfn.wrapping_add(rng.next_u64() % 5).wrapping_sub(2) % (1 << 20),
                4..=6 => rng.next_u64() % (300 * METAS_PER_PAGE),
                _ => rng.next_u64() % (1 << 27),
            };
            let key = K_META | pfn;
            let got = s.prefetched(key);
            assert_eq!(got, scan.prefetched(key), "pfn {pfn}");
            let mut keys = s.keys;
            keys[s.last] = s.last_key;
            assert_eq!(keys, scan.keys);
            near += usize::from(got);
        }
        assert!(near > 10_000, "{near} lines prefetched: the walks are seen");
    }
}
