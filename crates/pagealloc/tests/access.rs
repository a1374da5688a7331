//! The access-reporting seam (`pagealloc::access`): what the allocator reports, and the
//! per-CPU totals it keeps under the zone lock. The tests that install a sink need the
//! `access` feature (`cargo test -p pcp-pagealloc --features access --test access`; the
//! workspace's tests have it, the lab enables it); the totals are kept without it.

#[cfg(feature = "access")]
use pagealloc::access::PCP_HEADER;
#[cfg(feature = "access")]
use pagealloc::{Access, AccessSink, Line, ZoneLine};
use pagealloc::{Allocator, Config, Frame, Gfp, Layout, ManualPlatform};
use std::sync::Arc;
#[cfg(feature = "access")]
use std::sync::Mutex;

/// Records every access.
#[cfg(feature = "access")]
#[derive(Debug, Default)]
struct Log(Mutex<Vec<Access>>);

#[cfg(feature = "access")]
impl AccessSink for Log {
    fn access(&self, a: Access) {
        self.0.lock().unwrap().push(a);
    }
}

#[cfg(feature = "access")]
impl Log {
    fn take(&self) -> Vec<Access> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// An allocator of `pages` frames on 2 CPUs with a manual platform, and the log of its
/// accesses, installed as its sink when `sink`.
#[cfg(feature = "access")]
fn two_cpus(pages: u64, cfg: Config, sink: bool) -> (Allocator, Arc<Log>) {
    let mut a = Allocator::with_platform(
        &Layout::single(pages, 2),
        cfg,
        Arc::new(ManualPlatform::new()),
    )
    .unwrap();
    let log = Arc::new(Log::default());
    if sink {
        a.set_access_sink(log.clone());
    }
    (a, log)
}

#[cfg(feature = "access")]
fn traced(cfg: Config) -> (Allocator, Arc<Log>) {
    two_cpus(1 << 16, cfg, true)
}

#[cfg(feature = "access")]
#[test]
fn a_pcp_hit_reports_the_pageset_and_the_frames_without_the_zone_lock() {
    let (a, log) = traced(Config::default());
    // First allocation refills (zone lock), the second one is a hit.
    let f0 = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let refill = log.take();
    assert!(
        refill.iter().any(|x| x.locked),
        "the refill ran under the zone lock"
    );
    assert!(refill
        .iter()
        .any(|x| x.locked && matches!(x.line, Line::Frame(_))));
    let f1 = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let hit = log.take();
    assert!(
        hit.iter().all(|x| !x.locked),
        "a hit takes no zone lock: {hit:?}"
    );
    assert!(hit.contains(&Access {
        line: Line::Frame(f1.pfn.0),
        write: true,
        locked: false,
        dep: 0
    }));
    assert!(hit.iter().any(|x| matches!(
        x.line,
        Line::Pcp {
            cpu: 0,
            list: PCP_HEADER,
            ..
        }
    )));
    assert!(hit
        .iter()
        .any(|x| matches!(x.line, Line::Zonelist { pos: 0, .. })));
    a.free_on(0, f1).unwrap();
    let free = log.take();
    assert!(free.iter().any(|x| x.line == Line::Pageblock(f1.pfn.0)));
    assert!(free
        .iter()
        .any(|x| x.line == Line::Frame(f1.pfn.0) && x.write));
    a.free_on(0, f0).unwrap();
    a.validate().unwrap();
}

#[cfg(feature = "access")]
#[test]
fn counters_count_the_accesses_under_the_zone_lock_with_or_without_a_sink() {
    let run = |sink: bool| {
        let (a, log) = two_cpus(1 << 16, Config::default(), sink);
        let fs: Vec<Frame> = (0..2000)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
            .collect();
        for f in fs {
            a.free_on(0, f).unwrap();
        }
        a.drain_cpu(0);
        let lock = |x: &Access| {
            matches!(
                x.line,
                Line::Zone {
                    line: ZoneLine::Lock,
                    ..
                }
            )
        };
        let log = log.take();
        let trips = log.iter().filter(|x| lock(x)).count() as u64;
        if sink {
            assert_eq!(trips, a.counters().zone_lock, "one Lock marker per trip");
        }
        let locked = log.iter().filter(|x| x.locked && !lock(x)).count() as u64;
        (a.counters(), locked)
    };
    let (quiet, _) = run(false);
    let (loud, locked) = run(true);
    assert!(quiet.zone_lock_meta > 0 && quiet.zone_lock_pages >= 4000);
    assert_eq!(
        (
            quiet.zone_lock_meta,
            quiet.zone_lock_lines,
            quiet.zone_lock_pages
        ),
        (
            loud.zone_lock_meta,
            loud.zone_lock_lines,
            loud.zone_lock_pages
        ),
        "the sink does not change what is counted"
    );
    assert_eq!(
        locked, loud.zone_lock_lines,
        "every locked report is counted"
    );
}

/// Merge skipping (Lu) exists to cut `struct page` work under the zone lock: with it, a
/// drain of order-0 pages looks up no buddies, so the metadata lines per page moved fall.
#[test]
fn merge_skipping_cuts_metadata_lines_per_page_moved() {
    let per_page = |merge_skip: bool| {
        let a = Allocator::with_platform(
            &Layout::single(1 << 16, 2),
            Config {
                merge_skip,
                ..Config::default()
            },
            Arc::new(ManualPlatform::new()),
        )
        .unwrap();
        // Allocate on CPU 0, free on CPU 1: CPU 1's drains return scattered pages.
        let fs: Vec<Frame> = (0..8000)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
            .collect();
        a.reset_counters();
        for f in fs {
            a.free_on(1, f).unwrap();
        }
        a.drain_cpu(1);
        let c = a.cpu_counters(1).unwrap();
        assert!(c.zone_lock_pages >= 8000);
        a.validate().unwrap();
        c.zone_lock_meta as f64 / c.zone_lock_pages as f64
    };
    let (off, on) = (per_page(false), per_page(true));
    eprintln!("metadata lines per page moved: merge_skip off {off:.2}, on {on:.2}");
    assert!(
        on < 0.8 * off,
        "merge skipping: {on:.2} metadata lines per page moved, without: {off:.2}"
    );
}

/// Each report says how its address was found (`Access::dep`): a list link followed
/// points back at the frame it was read from; buddy lookups while merging are computed
/// from the PFN and do not wait for anything.
#[cfg(feature = "access")]
#[test]
fn reports_tag_pointer_chases_and_computed_addresses() {
    let (a, log) = traced(Config {
        merge_skip: false,
        ..Config::default()
    });
    let fs: Vec<Frame> = (0..600)
        .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
        .collect();
    let allocs = log.take();
    for f in fs {
        a.free_on(0, f).unwrap();
    }
    a.drain_cpu(0);
    let frees = log.take();
    for all in [&allocs, &frees] {
        for (i, x) in all.iter().enumerate() {
            let k = x.dep as usize;
            if k == 0 {
                continue;
            }
            assert!(i >= k, "report {i} points before the stream: {x:?}");
            let from = &all[i - k];
            assert!(
                matches!(from.line, Line::Frame(_)) && matches!(x.line, Line::Frame(_)),
                "a chase goes from a frame to a frame: {from:?} -> {x:?}"
            );
            assert_eq!(from.locked, x.locked, "one call's chase: {from:?} -> {x:?}");
        }
    }
    // A pcp hit pops the list head: the new head was read from the popped frame.
    let (a2, log2) = traced(Config::default());
    let _ = a2.alloc_on(0, 0, Gfp::USER, None).unwrap();
    log2.take();
    let f = a2.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let hit = log2.take();
    let at = hit
        .iter()
        .position(|x| x.line == Line::Frame(f.pfn.0))
        .expect("the popped frame is reported");
    assert_eq!(hit[at].dep, 0, "the head is held in the list head");
    assert!(
        hit.iter()
            .skip(at + 1)
            .any(|x| x.dep == 1 && matches!(x.line, Line::Frame(p) if p != f.pfn.0)),
        "the new head is a chase from the popped frame: {hit:?}"
    );
    // The drain merges: its buddy lookups (reads) are computed, its list unlinks chase.
    let locked_frames = |dep: fn(u8) -> bool, write: bool| {
        frees
            .iter()
            .filter(|x| {
                x.locked && x.write == write && dep(x.dep) && matches!(x.line, Line::Frame(_))
            })
            .count()
    };
    let lookups = locked_frames(|d| d == 0, false);
    let chased = locked_frames(|d| d > 0, true);
    assert!(lookups > 100, "buddy lookups by PFN: {lookups}");
    assert!(chased > 100, "list neighbours reached by a link: {chased}");
}

/// `own_bitmap` (ours): a drain of an order-0 ring finds each leaving frame through its
/// index in the ring, not through the `lru` link of the frame before it, so the loads of
/// the frames do not wait for each other. Freed in a scattered order, the drains of the
/// linked lists (`fast,own_bitmap=off`) chase from frame to frame, those of the rings
/// from ring lines to frames, never from a frame to a frame.
#[cfg(feature = "access")]
#[test]
fn own_bitmap_drains_read_indices_from_the_ring() {
    for ring in [false, true] {
        let mut c: Config = "fast,thp=off".parse().unwrap();
        c.own_bitmap = ring;
        let (a, log) = traced(c);
        let mut fs: Vec<Frame> = (0..3000)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
            .collect();
        // A fixed scatter: every 7th frame first, and so on.
        fs.sort_by_key(|f| (f.pfn.0 % 7, f.pfn.0));
        log.take();
        for f in fs {
            a.free_on(0, f).unwrap();
        }
        a.drain_cpu(0);
        let frees = log.take();
        let (mut frame_to_frame, mut ring_to_frame, mut ring_lines) = (0, 0, 0);
        for (i, x) in frees.iter().enumerate() {
            if matches!(x.line, Line::PcpArray { cpu: 0, .. }) {
                ring_lines += 1;
            }
            if x.dep == 0 || !matches!(x.line, Line::Frame(_)) {
                continue;
            }
            match frees[i - x.dep as usize].line {
                Line::Frame(_) => frame_to_frame += 1,
                Line::PcpArray { .. } => ring_to_frame += 1,
                // a linked list's tail, held in its head
                Line::Pcp { .. } => {}
                other => panic!("a frame found from {other:?}"),
            }
        }
        let drained = a.counters().pcp_drain_pages;
        eprintln!(
            "own_bitmap={ring}: {drained} pages drained, frame->frame {frame_to_frame}, \
             ring->frame {ring_to_frame}, ring lines {ring_lines}"
        );
        assert!(drained >= 3000);
        if ring {
            assert_eq!(frame_to_frame, 0);
            assert!(ring_to_frame as u64 >= drained, "{ring_to_frame}");
        } else {
            assert_eq!((ring_to_frame, ring_lines), (0, 0));
            assert!(frame_to_frame as u64 >= drained, "{frame_to_frame}");
        }
        a.validate().unwrap();
    }
}

/// The zonelist full-zone cache reports its own accesses: a zone found full writes its
/// entry's line (`zlc_mark_zone_full`), a zone the cache skips still reads it
/// (`zlc_zone_worth_trying`: `z_to_n` and the bit) but none of the zone's lines, and the
/// wipe after a second writes the lines whose bits it clears.
#[cfg(feature = "access")]
#[test]
fn the_zonelist_cache_reports_its_reads_and_writes() {
    let p = Arc::new(ManualPlatform::new());
    let cfg = Config {
        zonelist_cache: true,
        ..Config::default()
    };
    let mut a = Allocator::with_platform(&Layout::numa(3, 16_384, 1), cfg, p.clone()).unwrap();
    let log = Arc::new(Log::default());
    a.set_access_sink(log.clone());
    let zl = a.zonelist(0).to_vec();
    // Fill the first two zones of CPU 0's zonelist from their own nodes' CPUs.
    let mut held = Vec::new();
    for &zi in &zl[..2] {
        loop {
            let f = a.alloc_on(zi, 0, Gfp::USER, None).unwrap();
            if a.zone_of_pfn(f.pfn) != Some(zi) {
                a.free_on(zi, f).unwrap();
                break;
            }
            held.push((zi, f));
        }
    }
    let zonelist = |x: &Access, pos: u16, write: bool| {
        x.write == write && matches!(x.line, Line::Zonelist { node: 0, pos: q } if q == pos)
    };
    let zone_line =
        |x: &Access, z: usize| matches!(x.line, Line::Zone { zone, .. } if zone as usize == z);
    // First walk: positions 0 and 1 are found full and marked.
    log.take();
    let f = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    assert_eq!(a.zone_of_pfn(f.pfn), Some(zl[2]));
    let first = log.take();
    assert!(first.iter().any(|x| zonelist(x, 0, true)));
    assert!(first.iter().any(|x| zonelist(x, 1, true)));
    // Second walk: position 1 is skipped, read but not checked.
    let g = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let second = log.take();
    assert!(second.iter().any(|x| zonelist(x, 1, false)));
    assert!(!second.iter().any(|x| zone_line(x, zl[1])), "{second:?}");
    assert!(!second.iter().any(|x| zonelist(x, 1, true)));
    // More than a second later the wipe writes the bits it clears: position 1's line is
    // written before its zone is checked again (and marked again after).
    p.advance(2_000_000_000);
    let h = a.alloc_on(0, 0, Gfp::USER, None).unwrap();
    let third = log.take();
    let wiped = third.iter().position(|x| zonelist(x, 1, true));
    let checked = third.iter().position(|x| zone_line(x, zl[1]));
    assert!(
        matches!((wiped, checked), (Some(w), Some(c)) if w < c),
        "{third:?}"
    );
    for x in [f, g, h] {
        a.free_on(0, x).unwrap();
    }
    for (cpu, x) in held {
        a.free_on(cpu, x).unwrap();
    }
    a.validate().unwrap();
}

/// A sink changes no result: with one installed, the PCP hits run out of line in their
/// reported copy (`S` = `Reported`) instead of the inlined one, and do the same
/// work — the same frames in the same order, the same counters — on linked lists and on
/// order-0 rings, for order-0 and THP blocks, from two CPUs, through refills and drains.
#[cfg(feature = "access")]
#[test]
fn a_sink_changes_no_result() {
    let run = |cfg: &Config, sink: bool| {
        let (a, log) = two_cpus(1 << 16, cfg.clone(), sink);
        let mut held: Vec<(usize, Frame)> = Vec::new();
        let mut got = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let cpu = (x >> 8) as usize % 2;
            if (x >> 16) % 8 < 5 || held.is_empty() {
                let order = if (x >> 24) % 16 == 0 { 9 } else { 0 };
                if let Ok(f) = a.alloc_on(cpu, order, Gfp::USER, None) {
                    got.push((step, f.pfn.0, f.order));
                    held.push((cpu, f));
                }
            } else {
                let k = (x >> 32) as usize % held.len();
                let (_, f) = held.swap_remove(k);
                a.free_on(cpu, f).unwrap();
            }
        }
        for (cpu, f) in held {
            a.free_on(cpu, f).unwrap();
        }
        a.validate().unwrap();
        assert_eq!(sink, !log.take().is_empty());
        (got, a.counters())
    };
    for name in [
        "linux-6.12",
        "linux-6.12,own_bitmap=on",
        "fast",
        "fast,own_bitmap=off",
    ] {
        let cfg: Config = name.parse().unwrap();
        let (quiet, loud) = (run(&cfg, false), run(&cfg, true));
        assert!(quiet.1.pgalloc > 20_000 && quiet.1.pcp_refill > 0 && quiet.1.zone_lock > 0);
        assert_eq!(quiet.0, loud.0, "{name}: the frames handed out");
        assert_eq!(quiet.1, loud.1, "{name}: the counters");
    }
}

/// `thp_merge_skip`'s drains (`drain_thp_splice`) report each block in its turn when a
/// sink is installed and, quiet, add the reports' counts once per drain: both forms
/// must leave the same blocks, lists and counters. Order-9 blocks of three types, freed in random order on either CPU, so
/// that drains find runs broken by type (one THP list for every type, or the movable one
/// apart), with the pageblock types looked up or cached.
#[cfg(feature = "access")]
#[test]
fn thp_drains_without_a_sink_are_the_reported_ones() {
    let run = |cfg: &Config, sink: bool| {
        let (a, log) = two_cpus(1 << 17, cfg.clone(), sink);
        let gfps = [
            Gfp::USER,
            Gfp::KERNEL,
            Gfp(Gfp::KERNEL.0 | Gfp::RECLAIMABLE.0),
        ];
        let mut held: Vec<Frame> = Vec::new();
        let mut got = Vec::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..30_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let cpu = (x >> 8) as usize % 2;
            if (x >> 16) % 8 < 4 || held.is_empty() {
                let order = if (x >> 24) % 4 == 0 { 0 } else { 9 };
                let gfp = gfps[(x >> 40) as usize % 3];
                if let Ok(f) = a.alloc_on(cpu, order, gfp, None) {
                    got.push((step, f.pfn.0, f.order));
                    held.push(f);
                }
            } else {
                let k = (x >> 32) as usize % held.len();
                a.free_on(cpu, held.swap_remove(k)).unwrap();
            }
        }
        for (k, f) in held.into_iter().enumerate() {
            a.free_on(k % 2, f).unwrap();
        }
        a.validate().unwrap();
        assert_eq!(sink, !log.take().is_empty());
        (got, a.counters())
    };
    for (lists, cached) in [("2", false), ("1", false), ("1", true)] {
        let cfg: Config = format!("fast,thp_pcp_lists={lists},pcp_migratetype_cache={cached}")
            .parse()
            .unwrap();
        assert!(cfg.thp_merge_skip);
        let (quiet, loud) = (run(&cfg, false), run(&cfg, true));
        let c = &quiet.1;
        // Drains of huge pages happened, in runs spliced merge-skipped onto the free lists.
        assert!(
            c.pcp_drain > 100 && c.merge_skipped > 1000 && c.zone_lock_meta > 0,
            "{c:?}"
        );
        assert_eq!(
            quiet.0, loud.0,
            "lists={lists} cached={cached}: the frames handed out"
        );
        assert_eq!(
            quiet.1, loud.1,
            "lists={lists} cached={cached}: the counters"
        );
    }
}

/// `own_bitmap` (ours): an order-0 free to a pageset reads and writes no frame metadata
/// line (its ownership is a bit, its list a ring of indices); each frame's line is
/// written once, when a drain moves it to the buddy lists. Without the switch every free
/// writes its frame.
#[cfg(feature = "access")]
#[test]
fn own_bitmap_frees_touch_no_frame_line_until_the_drain() {
    for own in [false, true] {
        let mut c: Config = "fast,thp=off".parse().unwrap();
        c.own_bitmap = own;
        let (a, log) = traced(c);
        let fs: Vec<Frame> = (0..3000)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).unwrap())
            .collect();
        a.drain_cpu(0);
        log.take();
        let (mut frees, mut free_frame_lines) = (0u64, 0u64);
        for f in fs.iter().rev().step_by(3).chain(fs.iter().step_by(3)) {
            let drains = a.counters().pcp_drain;
            if a.free_on(0, *f).is_err() {
                continue; // freed already (the two passes overlap)
            }
            let seen = log.take();
            if a.counters().pcp_drain != drains {
                continue; // this free set off a drain
            }
            frees += 1;
            free_frame_lines += seen
                .iter()
                .filter(|x| matches!(x.line, Line::Frame(_)))
                .count() as u64;
        }
        a.drain_cpu(0);
        let drain = log.take();
        let written: std::collections::HashSet<_> = drain
            .iter()
            .filter_map(|x| match x.line {
                Line::Frame(p) if x.write => Some(p),
                _ => None,
            })
            .collect();
        let unwritten = a.counters().free_unwritten;
        eprintln!(
            "own_bitmap={own}: {frees} frees without a drain, {free_frame_lines} frame \
             lines; {unwritten} frees unwritten; last drain wrote {} frames",
            written.len()
        );
        assert!(frees > 500, "{frees}");
        if own {
            assert_eq!(free_frame_lines, 0);
            assert!(unwritten >= frees, "{unwritten}");
        } else {
            assert!(free_frame_lines >= frees, "{free_frame_lines}");
            assert_eq!(unwritten, 0);
        }
        assert!(!written.is_empty());
        a.validate().unwrap();
    }
}
