//! Effect tests of `Config::pcp_buddy` (Weiner's pcp buddy RFC, docs/mechanisms.md
//! A.15): the purger pattern (CPUs allocate, one CPU frees) with the switch on and off,
//! shown through the allocator's counters; ownership across CPU offline; no page lost
//! or handed out twice, on one thread and on several.

mod common;
use common::*;
use pagealloc::*;
use std::collections::HashSet;

const PAGES: u64 = 65_536; // 256 MiB, 128 pageblocks

fn alloc_n(a: &Allocator, cpu: usize, order: u8, n: usize) -> Vec<Frame> {
    (0..n)
        .map(|_| a.alloc_on(cpu, order, Gfp::USER, None).expect("alloc"))
        .collect()
}

/// Rounds of: CPUs 0..3 allocate 600 order-0 pages each, CPU 3 (the purger) frees them
/// all. Returns the counters of the rounds after the first (warm) one.
fn purger_rounds(config: &str, rounds: usize) -> (Allocator, Counters) {
    let (a, _) = manual(&Layout::single(PAGES, 4), cfg(config));
    let mut warm = Counters::default();
    for r in 0..rounds {
        if r == 1 {
            warm = a.counters();
        }
        let mut held = Vec::new();
        for cpu in 0..3 {
            held.extend(alloc_n(&a, cpu, 0, 600));
        }
        for f in held {
            a.free_on(3, f).expect("free");
        }
        a.validate().expect("validate");
    }
    let c = a.counters().since(&warm);
    (a, c)
}

/// The purger's frees go back to the allocating CPUs' pagesets (`pcp_buddy_remote_free`),
/// which serve the next round from them, splitting owned blocks without the zone lock
/// (`pcp_buddy_local`); without the switch the purger's pageset drains them to the zone
/// and the allocators refill from it. Fewer zone-lock trips and fewer pages through
/// the zone.
#[test]
fn purger_frees_return_to_the_owner_and_save_zone_trips() {
    let (on_a, on) = purger_rounds("linux-6.18,pcp_buddy=on", 6);
    // The owners reuse their pages: the warm rounds take no pages from the zone.
    let (_, off) = purger_rounds("linux-6.18", 6);
    assert!(on_a.counters().pcp_buddy_claim > 0);
    // Every free of the warm rounds was the purger's of another CPU's page.
    assert_eq!(on.pcp_buddy_remote_free, 5 * 1800, "{on:?}");
    assert_eq!(off.pcp_buddy_remote_free + off.pcp_buddy_claim, 0);
    assert!(
        on.zone_lock * 2 < off.zone_lock,
        "zone-lock trips: pcp_buddy {} vs {}",
        on.zone_lock,
        off.zone_lock
    );
    assert!(
        on.alloc_zone * 2 < off.alloc_zone,
        "pages through the zone: pcp_buddy {} vs {}",
        on.alloc_zone,
        off.alloc_zone
    );
    assert_eq!((on.pgalloc, on.pgfree), (off.pgalloc, off.pgfree));
}

/// A CPU's claimed pageblocks go back when it goes offline, and the frees of their
/// pages that follow take the usual path. Nothing is lost.
#[test]
fn offline_cpu_gives_its_pageblocks_back() {
    let (a, _) = manual(&Layout::single(PAGES, 4), cfg("linux-6.18,pcp_buddy=on"));
    let mine = alloc_n(&a, 1, 0, 300);
    assert!(a.counters().pcp_buddy_claim >= 1);
    a.validate().expect("validate");
    a.cpu_offline(1).expect("offline");
    let c = a.counters();
    assert_eq!(c.pcp_buddy_release, c.pcp_buddy_claim, "{c:?}");
    a.validate().expect("validate after offline");
    let before = a.counters().pcp_buddy_remote_free;
    for f in mine {
        a.free_on(2, f).expect("free");
    }
    assert_eq!(a.counters().pcp_buddy_remote_free, before);
    a.validate().expect("validate");
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    // An order-9 block of the released pageblocks is whole again.
    let huge = a.alloc_on(0, 9, Gfp::USER, None).expect("order 9");
    a.free_on(0, huge).expect("free");
    a.validate().expect("validate");
}

/// Exhaust the zone at every order the pagesets serve with the switch on, free from
/// other CPUs in a scrambled order: every block handed out once, all memory back.
#[test]
fn no_page_lost_or_handed_out_twice() {
    let (a, _) = manual(&Layout::single(16_384, 4), cfg("linux-6.18,pcp_buddy=on"));
    let mut all = Vec::new();
    let mut seen = HashSet::new();
    let mut cpu = 0;
    for step in 0.. {
        let order = [0u8, 0, 1, 3, 0, 2][step % 6];
        match a.alloc_on(cpu, order, Gfp::USER, None) {
            Ok(f) => {
                for p in f.pfn.0..f.pfn.0 + (1 << order) {
                    assert!(seen.insert(p), "pfn {p:#x} handed out twice");
                }
                all.push(f);
            }
            Err(AllocError::OutOfMemory) if order > 0 => {}
            Err(AllocError::OutOfMemory) => break,
            Err(e) => panic!("{e:?}"),
        }
        cpu = (cpu + 1) % 4;
        if all.len() % 997 == 0 {
            a.validate().expect("validate");
        }
    }
    a.validate().expect("validate full");
    let n = all.len();
    for k in 0..n {
        let f = all[(k * 7919) % n];
        a.free_on(k % 4, f).expect("free");
    }
    let c = a.counters();
    assert!(
        c.pcp_buddy_remote_free > 0 && c.pcp_buddy_merge > 0,
        "{c:?}"
    );
    assert!(c.pcp_buddy_local > 0 && c.pcp_buddy_claim > 0, "{c:?}");
    a.validate().expect("validate after frees");
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    a.validate().expect("validate drained");
}

/// Real threads, each its own CPU, allocating and handing half their blocks to the next
/// thread to free (frees of other CPUs' pageblocks race with the owners' refills and
/// drains), with one CPU going offline and online meanwhile.
#[test]
fn threads_free_each_others_pages() {
    let a =
        Allocator::new(&Layout::single(PAGES, 4), cfg("linux-6.18,pcp_buddy=on")).expect("build");
    let (tx, rx): (Vec<_>, Vec<_>) = (0..4).map(|_| std::sync::mpsc::channel::<Frame>()).unzip();
    let mut rx = rx.into_iter();
    std::thread::scope(|s| {
        for (cpu, tx_next) in (0..4).map(|c| (c, tx[(c + 1) % 4].clone())) {
            let rx = rx.next().unwrap();
            let a = &a;
            s.spawn(move || {
                for round in 0..40 {
                    let mut mine = alloc_n(a, cpu, (round % 2) as u8, 200);
                    for f in mine.split_off(100) {
                        tx_next.send(f).unwrap();
                    }
                    for f in mine {
                        a.free_on(cpu, f).unwrap();
                    }
                    while let Ok(f) = rx.try_recv() {
                        a.free_on(cpu, f).unwrap();
                    }
                    if cpu == 3 && round == 20 {
                        a.cpu_offline(2).unwrap();
                        a.cpu_online(2).unwrap();
                    }
                }
                drop(tx_next);
                while let Ok(f) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
                    a.free_on(cpu, f).unwrap();
                }
            });
        }
        drop(tx);
    });
    a.validate().expect("validate");
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    assert!(a.counters().pcp_buddy_remote_free > 0);
}

/// Linked pagesets only: refused beside the ring pagesets.
#[test]
fn refused_with_rings() {
    let e = Allocator::new(&Layout::single(PAGES, 2), cfg("fast,pcp_buddy=on")).unwrap_err();
    assert!(e.to_string().contains("pcp_buddy"), "{e}");
}
