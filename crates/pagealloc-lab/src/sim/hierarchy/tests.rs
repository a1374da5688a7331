//! The hierarchy's properties, one test each, and its error against exact LRU on
//! traces shaped like the workloads.

use std::collections::{BTreeMap, HashMap};

use super::*;
use crate::sim::machine::ICX_CACHES;

/// A small machine: 2 sockets of 4 CPUs, one node per socket, one thread per core;
/// L1 4 pages, L2 32 pages, LLC 256 pages per socket.
fn small() -> CacheSpec {
    CacheSpec {
        threads_per_core: 1,
        l1_bytes: 4 * 4096,
        l2_bytes: 32 * 4096,
        ..ICX_CACHES
    }
}

const SMALL_LLC: u64 = 256 * 4096;

fn small_cpus() -> Vec<(u32, u32)> {
    (0..8).map(|c| (c / 4, c / 4)).collect()
}

fn hier() -> Hierarchy {
    Hierarchy::with_spec(small(), SMALL_LLC, small_cpus(), 1 << 16)
}

fn page(pfn: u64) -> Span {
    Span {
        page: pfn,
        bytes: 4096,
        node: 0,
    }
}

#[test]
fn capacities_come_from_the_machine() {
    let spr = Machine::by_name("spr-2s-224").unwrap();
    let h = Hierarchy::new(&spr, 16);
    // 48 KiB L1 and 2 MiB L2 per core, two threads: 384 and 16 384 lines per CPU.
    assert_eq!(h.capacities(), (384, 16_384, 105 * 1024 * 1024 / 64));
    let sn2 = Machine::by_name("sn2-28n-56").unwrap();
    let h = Hierarchy::new(&sn2, 16);
    assert_eq!(h.capacities().0, 256, "16 KiB, one thread per core");
}

#[test]
fn lines_hit_where_they_were_left() {
    let mut h = hier();
    let c = h.access(0, 7, 0, false);
    assert_eq!(c.level, Level::LocalDram);
    assert_eq!(c.ns, ICX_CACHES.dram_local_ns);
    assert_eq!(h.access(0, 7, 0, false).level, Level::L1);
    assert_eq!(
        h.access(0, 8, 1, false).level,
        Level::RemoteDram,
        "home node 1"
    );
    // 256 other lines (L1 holds 256): out of L1, still in L2.
    for k in 100..356 {
        h.access(0, k, 0, false);
    }
    assert_eq!(h.access(0, 7, 0, false).level, Level::L2);
    // 2048 others (L2 holds 2048): out of L2, in the LLC.
    for k in 1000..3048 {
        h.access(0, k, 0, false);
    }
    assert_eq!(h.access(0, 7, 0, false).level, Level::Llc);
    // The LLC holds 16384 lines.
    for k in 10_000..26_384 {
        h.access(0, k, 0, false);
    }
    assert_eq!(h.access(0, 7, 0, false).level, Level::LocalDram);
    let n = h.counters();
    assert_eq!(n.line_accesses(), 6 + 256 + 2048 + 16_384);
    assert_eq!(n.data_accesses(), 0);
}

#[test]
fn writes_by_another_core_invalidate() {
    let mut h = hier();
    h.access(0, 1, 0, true);
    assert_eq!(
        h.access(1, 1, 0, false).level,
        Level::Peer,
        "modified in CPU 0's L2"
    );
    assert_eq!(h.access(1, 1, 0, false).level, Level::L1);
    h.access(1, 1, 0, true);
    assert_eq!(
        h.access(0, 1, 0, false).level,
        Level::Peer,
        "CPU 1's write took the line from CPU 0"
    );
    // A clean line held by another core of the socket comes from the LLC.
    h.access(2, 2, 0, false);
    assert_eq!(h.access(3, 2, 0, false).level, Level::Llc);
}

#[test]
fn other_sockets_transfer_across() {
    let mut h = hier();
    h.access(0, 1, 0, true);
    assert_eq!(h.access(4, 1, 0, false).level, Level::RemoteCache);
    assert_eq!(
        h.access(0, 1, 0, true).level,
        Level::RemoteCache,
        "back across"
    );
    // Not in any cache: DRAM of its home node.
    assert_eq!(h.access(4, 99, 0, false).level, Level::RemoteDram);
    assert_eq!(h.access(4, 98, 1, false).level, Level::LocalDram);
}

#[test]
fn a_page_freed_by_one_cpu_and_reused_by_another_hits_the_llc() {
    let mut h = hier();
    h.touch(0, page(10), true);
    // CPU 0 goes on writing 40 pages: page 10 leaves its L2 (32 pages), not the LLC.
    for p in 100..140 {
        h.touch(0, page(p), true);
    }
    let c = h.touch(1, page(10), true);
    assert_eq!(c.level, Level::Llc);
    let spec = small();
    let stream = spec.llc_ns / spec.mlp;
    assert!((c.ns - (spec.llc_ns + 63.0 * stream)).abs() < 1e-9, "{c:?}");
    // The same reuse on the other socket is a cross-socket transfer.
    assert_eq!(h.touch(4, page(10), false).level, Level::RemoteCache);
    // Right after the writer, still modified in its L2: a snoop.
    h.touch(2, page(11), true);
    assert_eq!(h.touch(3, page(11), false).level, Level::Peer);
}

#[test]
fn a_page_that_cycled_through_a_large_list_has_left_the_llc() {
    let mut h = hier();
    h.touch(0, page(10), true);
    // A per-CPU list of 300 pages cycles through CPU 0 and CPU 1 (same socket): 300 pages
    // written since page 10, more than the 256 of the LLC.
    for p in 1000..1300 {
        h.touch(p as usize % 2, page(p), true);
    }
    assert_eq!(h.touch(1, page(10), true).level, Level::LocalDram);
    // A short list (100 pages) keeps it.
    h.touch(0, page(20), true);
    for p in 2000..2100 {
        h.touch(0, page(p), true);
    }
    assert_eq!(h.touch(1, page(20), true).level, Level::Llc);
}

#[test]
fn bulk_touches_charge_latency_plus_streaming_and_count_lines() {
    let mut h = hier();
    let spec = small();
    // An order-3 block, cold: eight pages from DRAM.
    let c = h.touch(
        0,
        Span {
            page: 40,
            bytes: 8 * 4096,
            node: 0,
        },
        true,
    );
    let dram = spec.dram_local_ns + 63.0 * spec.dram_local_ns / spec.mlp;
    assert_eq!(c.level, Level::LocalDram);
    assert!((c.ns - 8.0 * dram).abs() < 1e-6);
    // 10 KB of it again: two whole pages and 32 lines of the third, from L2 (the block
    // is larger than the 4 pages of L1).
    let c = h.touch(
        0,
        Span {
            page: 40,
            bytes: 10_240,
            node: 0,
        },
        false,
    );
    assert_eq!(c.level, Level::L2);
    let n = h.counters();
    assert_eq!(n.data_accesses(), 8 * 64 + 160);
    assert_eq!(n.data_llc_misses(), 8 * 64);
    assert!((n.cache_miss_pct() - 100.0 * 512.0 / 672.0).abs() < 1e-9);
    // A copy reads the source and writes the destination.
    let src = Span {
        page: user_page(0, 0),
        bytes: 10_240,
        node: 0,
    };
    h.touch(0, src, true);
    let before = h.counters().clone();
    let dst = Span {
        page: 200,
        bytes: 10_240,
        node: 0,
    };
    let c = h.copy(0, src, dst);
    let d = h.counters().since(&before);
    assert_eq!(d.data_accesses(), 2 * 160, "both sides, 10 KB each");
    assert!(c.ns > 0.0);
    // A remote socket's read of the block: misses the LLC; the running totals say what
    // the counters' sums say.
    h.touch(
        5,
        Span {
            page: 40,
            bytes: 8 * 4096,
            node: 0,
        },
        false,
    );
    let n = h.counters();
    assert!(n.data_llc_misses() > 8 * 64, "the remote read counted");
    assert_eq!(h.data_totals(), (n.data_accesses(), n.data_llc_misses()));
}

#[test]
fn user_pages_are_apart_from_frames_and_each_other() {
    assert_ne!(user_page(0, 0), user_page(1, 0));
    assert!(user_page(0, 0) > 1 << 40);
    let mut h = hier();
    h.touch(0, page(5), true);
    let u = Span {
        page: user_page(0, 5),
        bytes: 4096,
        node: 0,
    };
    assert_eq!(h.touch(0, u, true).level, Level::LocalDram);
}

// ---- exact LRU reference ----------------------------------------------------------

/// A fully associative LRU cache of `cap` lines holding weighted entries.
#[derive(Debug)]
struct Lru {
    cap: u64,
    used: u64,
    tick: u64,
    at: HashMap<u64, (u64, u64)>,
    order: BTreeMap<u64, u64>,
}

impl Lru {
    fn new(cap: u64) -> Self {
        Lru {
            cap,
            used: 0,
            tick: 0,
            at: HashMap::new(),
            order: BTreeMap::new(),
        }
    }
    fn contains(&self, k: u64) -> bool {
        self.at.contains_key(&k)
    }
    fn remove(&mut self, k: u64) {
        if let Some((t, w)) = self.at.remove(&k) {
            self.order.remove(&t);
            self.used -= w;
        }
    }
    fn touch(&mut self, k: u64, w: u64) {
        self.remove(k);
        self.tick += 1;
        self.at.insert(k, (self.tick, w));
        self.order.insert(self.tick, k);
        self.used += w;
        while self.used > self.cap {
            let (&t, &old) = self.order.iter().next().unwrap();
            if old == k {
                break;
            }
            self.order.remove(&t);
            let (_, ow) = self.at.remove(&old).unwrap();
            self.used -= ow;
        }
    }
}

/// The same hierarchy with exact LRU everywhere and MESI-style sharing (a read leaves
/// the other copies; a write invalidates them).
#[derive(Debug)]
struct Exact {
    cpus: Vec<(u32, u32)>,
    l1: Vec<Lru>,
    l2: Vec<Lru>,
    llc: Vec<Lru>,
    modified: HashMap<u64, usize>,
}

impl Exact {
    fn new(h: &Hierarchy, cpus: Vec<(u32, u32)>) -> Self {
        let (l1, l2, llc) = h.capacities();
        let sockets = cpus.iter().map(|c| c.0).max().unwrap() as usize + 1;
        Exact {
            l1: (0..cpus.len()).map(|_| Lru::new(l1)).collect(),
            l2: (0..cpus.len()).map(|_| Lru::new(l2)).collect(),
            llc: (0..sockets).map(|_| Lru::new(llc)).collect(),
            cpus,
            modified: HashMap::new(),
        }
    }

    fn access(&mut self, cpu: usize, k: u64, w: u64, home: u32, write: bool) -> Level {
        let (s, node) = self.cpus[cpu];
        let same = |c: usize, cpus: &[(u32, u32)]| cpus[c].0 == s;
        let mod_by = self.modified.get(&k).copied();
        let level = if self.l1[cpu].contains(k) {
            Level::L1
        } else if self.l2[cpu].contains(k) {
            Level::L2
        } else if mod_by.is_some_and(|o| o != cpu && same(o, &self.cpus) && self.l2[o].contains(k))
        {
            Level::Peer
        } else if self.llc[s as usize].contains(k)
            || (0..self.cpus.len()).any(|o| same(o, &self.cpus) && self.l2[o].contains(k))
        {
            Level::Llc
        } else if self.llc.iter().any(|c| c.contains(k)) || self.l2.iter().any(|c| c.contains(k)) {
            Level::RemoteCache
        } else if node == home {
            Level::LocalDram
        } else {
            Level::RemoteDram
        };
        if write {
            for o in 0..self.cpus.len() {
                if o != cpu {
                    self.l1[o].remove(k);
                    self.l2[o].remove(k);
                }
            }
            for (i, c) in self.llc.iter_mut().enumerate() {
                if i != s as usize {
                    c.remove(k);
                }
            }
            self.modified.insert(k, cpu);
        } else if mod_by.is_some_and(|o| o != cpu) {
            self.modified.remove(&k);
        }
        self.l1[cpu].touch(k, w);
        self.l2[cpu].touch(k, w);
        self.llc[s as usize].touch(k, w);
        level
    }
}

/// One access of a trace.
#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A metadata line.
    Line { cpu: usize, key: u64, write: bool },
    /// A whole page of data.
    Page { cpu: usize, pfn: u64, write: bool },
}

/// Per-level counts of a trace under both models and the share of accesses (weighted
/// by lines) classified at a different level.
#[derive(Debug)]
struct Compare {
    ours: [u64; 7],
    exact: [u64; 7],
    differ: u64,
    total: u64,
}

impl Compare {
    fn differ_pct(&self) -> f64 {
        100.0 * self.differ as f64 / self.total as f64
    }
    fn llc_miss_pct(counts: &[u64; 7]) -> f64 {
        let all: u64 = counts.iter().sum();
        let miss: u64 = counts[4..].iter().sum();
        100.0 * miss as f64 / all as f64
    }
}

fn compare(trace: &[Ev]) -> Compare {
    let cpus = small_cpus();
    let mut ours = hier();
    let mut exact = Exact::new(&ours, cpus.clone());
    let mut c = Compare {
        ours: [0; 7],
        exact: [0; 7],
        differ: 0,
        total: 0,
    };
    for &ev in trace {
        let (a, b, w) = match ev {
            Ev::Line { cpu, key, write } => (
                ours.access(cpu, key, 0, write).level,
                exact.access(cpu, key | 1 << 63, 1, 0, write),
                1,
            ),
            Ev::Page { cpu, pfn, write } => (
                ours.touch(cpu, page(pfn), write).level,
                exact.access(cpu, pfn, 64, 0, write),
                64,
            ),
        };
        c.ours[a as usize] += w;
        c.exact[b as usize] += w;
        c.total += w;
        if a != b {
            c.differ += w;
        }
    }
    c
}

/// A trace shaped like page_fault1 on the real allocator: every CPU allocates `pages`
/// order-0 pages one at a time (pcp list head written, the page's `struct page` line
/// written, the page zeroed), then frees them all (head and `struct page` written), in
/// `loops` rounds; CPUs interleave op by op. Zone-lock trips (the allocator's refills
/// and drains) show as the zone's lines written by whichever CPU takes the lock.
fn page_fault1_trace(pages: usize, loops: usize) -> Vec<Ev> {
    use pagealloc::{Allocator, Config, Gfp, Layout, MigrateType};
    let cpus = 8;
    let layout = Layout::single(1 << 16, cpus);
    let a = Allocator::new(&layout, Config::linux_6_6()).unwrap();
    let gfp = Gfp::from_migratetype(MigrateType::Movable);
    let mut t = Vec::new();
    let zone_lines = |t: &mut Vec<Ev>, cpu| {
        for key in 0..4 {
            t.push(Ev::Line {
                cpu,
                key: 1_000_000 + key,
                write: true,
            });
        }
    };
    let mut held: Vec<Vec<pagealloc::Frame>> = vec![Vec::new(); cpus];
    for _ in 0..loops {
        for _ in 0..pages {
            for (cpu, h) in held.iter_mut().enumerate() {
                let before = a.counters().zone_lock;
                let f = a.alloc_on(cpu, 0, gfp, None).unwrap();
                if a.counters().zone_lock != before {
                    zone_lines(&mut t, cpu);
                }
                t.push(Ev::Line {
                    cpu,
                    key: 2_000_000 + cpu as u64,
                    write: true,
                });
                t.push(Ev::Line {
                    cpu,
                    key: f.pfn.0 / 4,
                    write: true,
                });
                t.push(Ev::Page {
                    cpu,
                    pfn: f.pfn.0,
                    write: true,
                });
                h.push(f);
            }
        }
        for _ in 0..pages {
            for (cpu, h) in held.iter_mut().enumerate() {
                let f = h.pop().unwrap();
                let before = a.counters().zone_lock;
                a.free_on(cpu, f).unwrap();
                if a.counters().zone_lock != before {
                    zone_lines(&mut t, cpu);
                }
                t.push(Ev::Line {
                    cpu,
                    key: 2_000_000 + cpu as u64,
                    write: true,
                });
                t.push(Ev::Line {
                    cpu,
                    key: f.pfn.0 / 4,
                    write: true,
                });
            }
        }
    }
    t
}

/// A trace shaped like netperf on the real allocator: 4 pairs (sender 2k, receiver
/// 2k+1, same socket), one order-2 block per 10 KB message: the sender writes its
/// `struct page` line, reads its user buffer and writes 10 KB into the block; the
/// receiver reads the 10 KB, writes its user buffer, frees the block. `window` messages
/// in flight per pair.
fn netperf_trace(messages: usize, window: usize) -> Vec<Ev> {
    use pagealloc::{Allocator, Config, Gfp, Layout, MigrateType};
    let cpus = 8;
    let layout = Layout::single(1 << 16, cpus);
    let a = Allocator::new(&layout, Config::linux_6_6()).unwrap();
    let gfp = Gfp::from_migratetype(MigrateType::Unmovable);
    let mut t = Vec::new();
    let user = |cpu: usize, i: u64| 1 << 40 | (cpu as u64) << 20 | i;
    let mut queues: Vec<std::collections::VecDeque<pagealloc::Frame>> = vec![Default::default(); 4];
    let mut sent = 0;
    let mut got = 0;
    while got < messages * 4 {
        for (pair, q) in queues.iter_mut().enumerate() {
            let (s, r) = (2 * pair, 2 * pair + 1);
            if sent < messages * 4 && q.len() < window {
                let f = a.alloc_on(s, 2, gfp, None).unwrap();
                t.push(Ev::Line {
                    cpu: s,
                    key: f.pfn.0 / 4,
                    write: true,
                });
                for i in 0..3 {
                    t.push(Ev::Page {
                        cpu: s,
                        pfn: user(s, i),
                        write: false,
                    });
                    t.push(Ev::Page {
                        cpu: s,
                        pfn: f.pfn.0 + i,
                        write: true,
                    });
                }
                q.push_back(f);
                sent += 1;
            }
            // The receiver runs a little behind: it takes a message once half the
            // window is queued (or the sender is done).
            let ready = q.len() > window / 2 || sent >= messages * 4;
            if let Some(f) = ready.then(|| q.pop_front()).flatten() {
                for i in 0..3 {
                    t.push(Ev::Page {
                        cpu: r,
                        pfn: f.pfn.0 + i,
                        write: false,
                    });
                    t.push(Ev::Page {
                        cpu: r,
                        pfn: user(r, i),
                        write: true,
                    });
                }
                t.push(Ev::Line {
                    cpu: r,
                    key: f.pfn.0 / 4,
                    write: true,
                });
                a.free_on(r, f).unwrap();
                got += 1;
            }
        }
    }
    t
}

fn report(name: &str, c: &Compare) {
    println!(
        "{name}: {} line-weighted accesses, {:.2} % classified at another level than exact LRU; \
         LLC miss % ours {:.2}, exact {:.2}",
        c.total,
        c.differ_pct(),
        Compare::llc_miss_pct(&c.ours),
        Compare::llc_miss_pct(&c.exact)
    );
    for (i, l) in Level::ALL.iter().enumerate() {
        println!(
            "  {:>12}: ours {:>9} exact {:>9}",
            l.name(),
            c.ours[i],
            c.exact[i]
        );
    }
}

#[test]
fn approximation_error_against_exact_lru_is_small() {
    // page_fault1 with lists of 40 pages (in L2), 200 (in the LLC: 4 CPUs × 200 > 256?
    // no — 800 pages per socket cycle, more than the LLC) and 20 (in L2 of each CPU).
    for (name, trace, bound) in [
        ("page_fault1, 20 pages", page_fault1_trace(20, 6), 2.0),
        ("page_fault1, 40 pages", page_fault1_trace(40, 4), 5.0),
        ("page_fault1, 200 pages", page_fault1_trace(200, 3), 5.0),
        ("netperf, window 8", netperf_trace(300, 8), 5.0),
        ("netperf, window 32", netperf_trace(300, 32), 5.0),
    ] {
        let c = compare(&trace);
        report(name, &c);
        assert!(
            c.differ_pct() <= bound,
            "{name}: {:.2} % of accesses classified differently (bound {bound} %)",
            c.differ_pct()
        );
        let (ours, exact) = (
            Compare::llc_miss_pct(&c.ours),
            Compare::llc_miss_pct(&c.exact),
        );
        assert!(
            (ours - exact).abs() <= bound,
            "{name}: LLC miss % ours {ours:.2}, exact {exact:.2}"
        );
    }
}

#[test]
fn dense_lines_in_the_frames_records_or_apart_agree() {
    // 2^12 keys share the frames' records (2^16 frames); the same keys in a range of
    // 2^17, more than the frames, get a table of their own. Keys past 2^12 go to the
    // map in the first and stay dense in the second: only keys below 2^12 are compared.
    let base = 1 << 56;
    let mut shared = hier().with_dense_lines(base, 1 << 12);
    let mut apart = hier().with_dense_lines(base, 1 << 17);
    let mut x = 12345u64;
    for i in 0..20_000u64 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let cpu = (x >> 33) as usize % 8;
        let key = base + (x >> 40) % (1 << 12);
        let write = x >> 63 == 1;
        assert_eq!(
            shared.access(cpu, key, 0, write),
            apart.access(cpu, key, 0, write),
            "access {i}"
        );
        // Page touches of the same frames must not disturb the lines, nor the reverse.
        if i % 7 == 0 {
            let p = page(key % (1 << 12));
            assert_eq!(shared.touch(cpu, p, write), apart.touch(cpu, p, write));
        }
    }
    assert_eq!(shared.counters(), apart.counters());
}

#[test]
fn read_mostly_lines_are_shared_until_written() {
    let mut h = hier();
    let zonelist = 42;
    h.access(0, zonelist, 0, true);
    // Every CPU reads it: once from where it is, then from its own L1 — no ping-pong.
    for round in 0..3 {
        for cpu in 0..8 {
            let l = h.access(cpu, zonelist, 0, false).level;
            match (round, cpu) {
                (_, 0) => assert_eq!(l, Level::L1),
                (0, 1) => assert_eq!(l, Level::Peer, "modified in CPU 0's cache"),
                (0, 2 | 3) => assert_eq!(l, Level::Llc),
                (0, _) => assert_eq!(l, Level::RemoteCache, "cpu {cpu}"),
                _ => assert_eq!(l, Level::L1, "round {round} cpu {cpu}"),
            }
        }
    }
    // A write invalidates the shared copies.
    h.access(5, zonelist, 0, true);
    assert_eq!(h.access(4, zonelist, 0, false).level, Level::Peer);
    assert_eq!(h.access(0, zonelist, 0, false).level, Level::RemoteCache);
    // Dense lines (one per frame) keep a single owner: a reader takes it over.
    let mut d = hier().with_dense_lines(1 << 56, 16);
    let meta = (1 << 56) + 3;
    d.access(0, meta, 0, false);
    d.access(1, meta, 0, false);
    assert_eq!(d.access(0, meta, 0, false).level, Level::Llc);
}

#[test]
fn shared_copies_age_out_of_the_sharers_caches() {
    let mut h = hier();
    let zone = 42;
    h.access(0, zone, 0, true);
    assert_eq!(h.access(1, zone, 0, false).level, Level::Peer);
    assert_eq!(h.access(2, zone, 0, false).level, Level::Llc);
    assert_eq!(h.access(2, zone, 0, false).level, Level::L1);
    // CPU 2 clears 8 pages (L1 holds 4): its copy has left L1, not L2.
    for p in 0..8 {
        h.touch(2, page(100 + p), true);
    }
    assert_eq!(h.access(2, zone, 0, false).level, Level::L2);
    assert_eq!(h.access(2, zone, 0, false).level, Level::L1);
    // 64 more pages (L2 holds 32): gone from its private caches too, so it is served
    // from where the line is (CPU 1 owns it, same socket: the LLC).
    for p in 0..64 {
        h.touch(2, page(200 + p), true);
    }
    assert_eq!(h.access(2, zone, 0, false).level, Level::Llc);
    // CPU 0, a sharer since CPU 1 read its modified copy, has not moved: still in L1.
    assert_eq!(h.access(0, zone, 0, false).level, Level::L1);
    // A write drops every sharer's copy.
    h.access(3, zone, 0, true);
    assert_eq!(h.access(2, zone, 0, false).level, Level::Peer);
}

#[test]
fn huge_blocks_are_one_entry() {
    let mut h = hier();
    let thp = Span {
        page: 1024,
        bytes: 512 * 4096,
        node: 0,
    };
    // 512 pages: larger than the 256-page LLC, so never resident, and one entry.
    let c = h.touch(0, thp, true);
    assert_eq!(c.level, Level::LocalDram);
    let spec = small();
    let want = spec.dram_local_ns + (512.0 * 64.0 - 1.0) * spec.dram_local_ns / spec.mlp;
    assert!((c.ns - want).abs() < 1e-6, "{c:?}");
    assert_eq!(h.touch(0, thp, true).level, Level::LocalDram);
    assert_eq!(h.counters().data_accesses(), 2 * 512 * 64);
    // A 64-page block fits the LLC: the second touch by a neighbour hits there.
    let block = Span {
        page: 4096,
        bytes: 64 * 4096,
        node: 0,
    };
    h.touch(0, block, true);
    assert_eq!(h.touch(1, block, true).level, Level::Llc);
}

/// A copy counts the lines it was served from another CPU's cache ([`Charge::crossed`]):
/// a page another core of the socket wrote (its L2) or left in the socket's LLC, or
/// another socket's cache; not a cold page (DRAM), not the CPU's own, not a page the
/// other core held so long ago that only DRAM has it.
#[test]
fn copies_count_the_lines_another_cpu_served() {
    let mut h = hier();
    let user = |cpu: u32| Span {
        page: user_page(cpu, 0),
        bytes: 4096,
        node: 0,
    };
    h.touch(0, user(0), true);
    h.touch(1, user(1), true);
    // Cold: DRAM, nothing crossed; the writer's own source lines neither.
    let c = h.copy(0, user(0), page(10));
    assert_eq!(c.crossed, 0);
    assert_eq!(h.copy(0, user(0), page(10)).crossed, 0, "its own lines");
    // CPU 1 (same socket) reads the page CPU 0 modified: all 64 lines from CPU 0's L2.
    let c = h.copy(1, page(10), user(1));
    assert_eq!(c.level, Level::Peer);
    assert_eq!(c.crossed, 64);
    // CPU 0 writes it again after CPU 1 read it: 64 lines from CPU 1's cache.
    assert_eq!(h.copy(0, user(0), page(10)).crossed, 64);
    // A page CPU 4 (the other socket) wrote: from its socket's cache.
    h.touch(4, page(20), true);
    let c = h.copy(0, page(20), user(0));
    assert_eq!((c.level, c.crossed), (Level::RemoteCache, 64));
    // A page CPU 1 wrote, then evicted from its L2 (32 pages) but still in the LLC
    // (256 pages): crossed; then out of the LLC too: DRAM, not crossed.
    h.touch(1, page(30), true);
    for p in 0..40 {
        h.touch(1, page(1000 + p), true);
    }
    let c = h.copy(0, page(30), user(0));
    assert_eq!((c.level, c.crossed), (Level::Llc, 64));
    h.touch(1, page(31), true);
    for p in 0..300 {
        h.touch(1, page(2000 + p), true);
    }
    let c = h.copy(0, page(31), user(0));
    assert_eq!((c.level, c.crossed), (Level::LocalDram, 0));
    // A part of a page: its lines.
    h.touch(1, page(40), true);
    let half = Span {
        bytes: 2048,
        ..page(40)
    };
    assert_eq!(h.copy(0, half, user(0)).crossed, 32);
}
