//! The table tests of `tune`'s formulas (docs/mechanisms.md §2–§5).

use super::*;
use crate::config::Preset;

fn tune(p: Preset) -> Tune {
    Tune::from_config(&p.config())
}

#[test]
fn batch_per_zone_size() {
    // docs/mechanisms.md §2.1 table
    let mib = |m: u64| m * 256;
    for (size, batch) in [
        (mib(16), 1),
        (mib(64), 3),
        (mib(128), 7),
        (mib(256), 15),
        (mib(512), 31),
        (176_128, 63),
        (mib(1024), 63),
        (mib(1 << 20), 63),
    ] {
        assert_eq!(zone_batchsize(size), batch, "{size} pages");
    }
    assert_eq!(zone_batchsize(176_127), 31);
    assert_eq!(zone_batchsize(0), 1);
}

#[test]
fn high_min_max_worked_example() {
    // docs/mechanisms.md §2.4: one node, 8 CPUs, 4 GiB zone: LOW = 3096, batch 63.
    let m = 1_048_576;
    let b = zone_batchsize(m);
    assert_eq!(b, 63);
    let s = Sizing {
        low_wmark: 3096,
        managed: m,
        batch: b,
        node_cpus: 8,
        online_cpus: 8,
        high_fraction: 0,
        auto_tune: true,
    };
    assert_eq!(high_bounds(&s), (387, 16384));
    // tuning off (v6.6): fixed at the low-watermark share
    let off = Sizing {
        auto_tune: false,
        ..s
    };
    assert_eq!(high_bounds(&off), (387, 387));
    // high fraction 8: managed/8/cpus, both bounds
    let eighth = Sizing {
        high_fraction: 8,
        ..s
    };
    assert_eq!(high_bounds(&eighth), (16384, 16384));
    // floor of 4 batches; memory-only node uses online CPUs
    assert_eq!(zone_highsize(100, m, 63, 8, 0, 8, 0), 252);
    assert_eq!(zone_highsize(8000, m, 63, 0, 0, 4, 0), 2000);
    // a CPU coming online counts
    assert_eq!(zone_highsize(3096, m, 63, 7, 1, 8, 0), 387);
}

fn healthy() -> ZoneFlags {
    ZoneFlags::default()
}

#[test]
fn refill_sizes_grow_63_to_2016() {
    // docs/mechanisms.md §4.3: batch 63, healthy zone, order 0: 63, 126, 252, 504, 1008, 2016.
    let t = tune(Preset::Linux612);
    let mut st = PcpState {
        batch: 63,
        high_min: 387,
        high_max: 16384,
        ..Default::default()
    };
    let mut got = alloc::vec::Vec::new();
    for _ in 0..8 {
        let n = nr_pcp_alloc(&mut st, healthy(), 0, &t);
        got.push(n);
        // the refill is consumed before the next one (count back to 0)
    }
    assert_eq!(got, [63, 126, 252, 504, 1008, 2016, 2016, 2016]);
    assert_eq!(st.alloc_factor, 5);
    // higher orders: 31, 15, 7 blocks, THP 2 blocks
    for (o, n) in [(1, 31), (2, 15), (3, 7), (9, 2)] {
        let mut st = PcpState {
            batch: 63,
            high_min: 387,
            high_max: 16384,
            ..Default::default()
        };
        assert_eq!(nr_pcp_alloc(&mut st, healthy(), o, &t), n, "order {o}");
    }
    // cap by high - count - batch, never below batch
    let mut st = PcpState {
        batch: 63,
        high: 400,
        high_min: 400,
        high_max: 400,
        alloc_factor: 3,
        count: 300,
        ..Default::default()
    };
    assert_eq!(nr_pcp_alloc(&mut st, healthy(), 0, &t), 63);
    assert_eq!(st.alloc_factor, 3, "no growth when capped");
    // the scale cap
    let mut t2 = t;
    t2.scale = 2;
    let mut st = PcpState {
        batch: 63,
        high_min: 387,
        high_max: 16384,
        ..Default::default()
    };
    let v: alloc::vec::Vec<_> = (0..5)
        .map(|_| nr_pcp_alloc(&mut st, healthy(), 0, &t2))
        .collect();
    assert_eq!(v, [63, 126, 252, 252, 252]);
    // base: constant batch >> order
    let tb = tune(Preset::Base);
    let mut st = PcpState {
        batch: 63,
        high: 387,
        high_min: 387,
        high_max: 387,
        ..Default::default()
    };
    for _ in 0..4 {
        assert_eq!(nr_pcp_alloc(&mut st, healthy(), 0, &tb), 63);
    }
    assert_eq!(nr_pcp_alloc(&mut st, healthy(), 3, &tb), 7);
    // boot pageset: one page
    let mut st = PcpState {
        batch: 1,
        ..Default::default()
    };
    assert_eq!(nr_pcp_alloc(&mut st, healthy(), 0, &t), 1);
}

#[test]
fn refill_raises_high_unless_below_high() {
    let t = tune(Preset::Linux612);
    let mut st = PcpState {
        batch: 63,
        high_min: 387,
        high_max: 16384,
        ..Default::default()
    };
    nr_pcp_alloc(&mut st, healthy(), 0, &t);
    assert_eq!(st.high, 387 + 63);
    let below = ZoneFlags {
        below_high: true,
        ..Default::default()
    };
    nr_pcp_alloc(&mut st, below, 0, &t);
    assert_eq!(st.high, 450);
    // patch7 gates growth by RECLAIM_ACTIVE, not BELOW_HIGH
    let t7 = tune(Preset::Patch7);
    let mut st = PcpState {
        batch: 63,
        high_min: 387,
        high_max: 16384,
        ..Default::default()
    };
    nr_pcp_alloc(&mut st, below, 0, &t7);
    assert_eq!(st.high, 450);
    let ra = ZoneFlags {
        reclaim_active: true,
        ..Default::default()
    };
    nr_pcp_alloc(&mut st, ra, 0, &t7);
    assert_eq!(st.high, 450);
}

#[test]
fn decay_16384_to_387_in_29_ticks() {
    let t = tune(Preset::Linux612);
    let mut st = PcpState {
        batch: 63,
        high: 16384,
        high_min: 387,
        high_max: 16384,
        ..Default::default()
    };
    let mut ticks = 0;
    while st.high > 387 {
        let d = decay(&mut st, &t);
        assert_eq!(d.excess, 0);
        ticks += 1;
        assert!(ticks < 100);
    }
    assert_eq!(ticks, 29);
    assert!(!decay(&mut st, &t).todo);
    // with pages cached, high never falls more than batch<<SCALE below count
    let mut st = PcpState {
        batch: 63,
        high: 16384,
        high_min: 387,
        high_max: 16384,
        count: 16000,
        ..Default::default()
    };
    let d = decay(&mut st, &t);
    assert_eq!(st.high, 16384 - 2048);
    assert_eq!(d.excess, 16000 - 14336);
    st.count -= d.excess;
    let d = decay(&mut st, &t);
    assert_eq!(st.high, 14336 - 14336 / 8);
    assert_eq!(d.excess, 14336 - st.high);
    // no decay before patch7
    let mut st2 = st;
    assert_eq!(decay(&mut st2, &tune(Preset::Patch5)).excess, 0);
    assert_eq!(st2, st);
}

#[test]
fn count_min_decays_only_idle_pages() {
    let mut t = tune(Preset::Linux612);
    t.count_min = true;
    let mut st = PcpState {
        batch: 63,
        high: 8000,
        high_min: 387,
        high_max: 16384,
        count: 5000,
        count_min: 100,
        ..Default::default()
    };
    decay(&mut st, &t);
    assert_eq!(st.high, 7900, "only the 100 idle pages decay");
    assert_eq!(st.count_min, 5000);
}

fn st63() -> PcpState {
    PcpState {
        batch: 63,
        high: 1000,
        high_min: 387,
        high_max: 16384,
        count: 100,
        ..Default::default()
    }
}

#[test]
fn free_high_threshold_6_16() {
    // docs/mechanisms.md §11.3: 6.16 needs free_count >= batch + high_min / 2
    // (63 + 387 / 2 = 256 here); 6.12 needs batch (63).
    let z = healthy();
    for (p, fc, want) in [
        (Preset::Linux612, 63, true),
        (Preset::Linux612, 62, false),
        (Preset::Linux618, 63, false),
        (Preset::Linux618, 255, false),
        (Preset::Linux618, 256, true),
    ] {
        let t = tune(p);
        let mut st = st63();
        st.count = 100 + 2;
        st.free_count = fc;
        st.flags |= PCPF_PREV_FREE_HIGH_ORDER;
        let d = on_free(&mut st, 1, z, &t);
        assert_eq!(d.free_high, want, "{p} free_count {fc}");
    }
}

#[test]
fn free_high_conditions() {
    // docs/mechanisms.md §3.3: all of order 1..=3, previous free order 1..=3, free_count >= batch,
    // and with FREE_HIGH_BATCH count >= batch.
    let t = tune(Preset::Linux612);
    let z = healthy();
    // (order, prev flag, free_count, cache flag, count before) -> free_high
    let cases = [
        (1, true, 63, false, 100, true),
        (3, true, 63, false, 100, true),
        (0, true, 63, false, 100, false),
        (9, true, 63, false, 100, false),
        (4, true, 63, false, 100, false),
        (1, false, 63, false, 100, false),
        (1, true, 62, false, 100, false),
        (1, true, 63, true, 60, false),
        (1, true, 63, true, 61, true), // count includes the page just freed (+2)
    ];
    for (i, &(order, prev, fc, cache, count, want)) in cases.iter().enumerate() {
        let mut st = st63();
        st.count = count + (1 << order);
        st.free_count = fc;
        if prev {
            st.flags |= PCPF_PREV_FREE_HIGH_ORDER;
        }
        if cache {
            st.flags |= PCPF_FREE_HIGH_BATCH;
        }
        let d = on_free(&mut st, order, z, &t);
        assert_eq!(d.free_high, want, "case {i}");
        assert_eq!(
            st.flags & PCPF_PREV_FREE_HIGH_ORDER != 0,
            (1..=3).contains(&order),
            "case {i} flag"
        );
        if want {
            assert_eq!(d.drain, st.count.min(63 << 5));
            assert_eq!(
                st.high, 387,
                "high cut by batch << SCALE, floored at high_min"
            );
        }
    }
    // v6.6: free_factor > 0 and order 1..=3 is enough, and it drains everything
    let tb = tune(Preset::Base);
    let mut st = PcpState {
        batch: 63,
        high: 387,
        high_min: 387,
        high_max: 387,
        count: 300,
        free_factor: 1,
        ..Default::default()
    };
    let d = on_free(&mut st, 1, z, &tb);
    assert!(d.free_high);
    assert_eq!(d.drain, 300);
}

#[test]
fn process_exit_does_not_drain() {
    // docs/mechanisms.md §3.7: thousands of order-0 frees, then one order-1 free (the PGD).
    let t = tune(Preset::Linux612);
    let mut st = PcpState {
        batch: 63,
        high: 387,
        high_min: 387,
        high_max: 16384,
        ..Default::default()
    };
    let mut drained = 0;
    for _ in 0..5000 {
        st.count += 1;
        let d = on_free(&mut st, 0, healthy(), &t);
        assert!(!d.free_high);
        st.count -= d.drain;
        drained += d.drain;
    }
    assert!(drained > 0);
    assert_eq!(st.free_count, 2016, "saturates at batch << SCALE");
    assert!(
        st.high >= 2016,
        "high raised toward free_count + batch: {}",
        st.high
    );
    let before = st.count;
    st.count += 2;
    let d = on_free(&mut st, 1, healthy(), &t);
    assert!(
        !d.free_high,
        "one order-1 free after order-0 frees keeps the pcp"
    );
    assert_eq!(d.drain, 0);
    assert_eq!(st.count, before + 2);
    // base (v6.6): the same sequence drains everything at the PGD free
    let tb = tune(Preset::Base);
    let mut st = PcpState {
        batch: 63,
        high: 387,
        high_min: 387,
        high_max: 387,
        ..Default::default()
    };
    for _ in 0..5000 {
        st.count += 1;
        let d = on_free(&mut st, 0, healthy(), &tb);
        st.count -= d.drain;
    }
    st.count += 2;
    let d = on_free(&mut st, 1, healthy(), &tb);
    assert!(d.free_high);
    assert_eq!(d.drain, st.count);
}

#[test]
fn nr_pcp_high_and_free_cases() {
    let t = tune(Preset::Linux612);
    // healthy, about to drain: raise to free_count + batch, drain at the old high
    let mut st = st63();
    st.count = 1000;
    st.free_count = 1500;
    assert_eq!(nr_pcp_high(&mut st, healthy(), false, &t), 1000);
    assert_eq!(st.high, 1563);
    assert_eq!(nr_pcp_free(&mut st, 1000, false, &t), 937);
    // below high: cut by max(free_count, batch), drain at count >= high_min
    let mut st = st63();
    st.count = 500;
    st.free_count = 10;
    let bh = ZoneFlags {
        below_high: true,
        ..Default::default()
    };
    assert_eq!(nr_pcp_high(&mut st, bh, false, &t), 500);
    assert_eq!(st.high, 937);
    // reclaim active: limit min(4 batch, high)
    let mut st = st63();
    let ra = ZoneFlags {
        reclaim_active: true,
        ..Default::default()
    };
    assert_eq!(nr_pcp_high(&mut st, ra, false, &t), 252);
    assert_eq!(st.high, 937);
    // disabled pcp
    let mut st = PcpState {
        batch: 1,
        ..Default::default()
    };
    assert_eq!(nr_pcp_high(&mut st, healthy(), false, &t), 0);
    assert_eq!(nr_pcp_free(&mut st, 0, false, &t), 1);
    // high == batch (a fixed high): down below high, in both forms, not 0
    for tt in [t, tune(Preset::Base)] {
        let mut st = PcpState {
            batch: 8,
            high: 8,
            high_min: 8,
            high_max: 8,
            count: 12,
            free_count: 100,
            ..Default::default()
        };
        assert_eq!(nr_pcp_free(&mut st, 8, false, &tt), 5);
        st.count = 8;
        assert_eq!(nr_pcp_free(&mut st, 8, false, &tt), 1);
    }
    // v6.6 free_factor doubling
    let tb = tune(Preset::Base);
    let mut st = PcpState {
        batch: 63,
        high: 10000,
        high_min: 10000,
        high_max: 10000,
        count: 10000,
        ..Default::default()
    };
    let v: alloc::vec::Vec<_> = (0..9)
        .map(|_| nr_pcp_free(&mut st, 10000, false, &tb))
        .collect();
    assert_eq!(v, [63, 126, 252, 504, 1008, 2016, 4032, 8064, 9937]);
}

proptest::proptest! {
    /// The short form of `on_free` decides exactly as the full one: same state after,
    /// same decision, for any state, order, zone flags and switches.
    #[test]
    fn on_free_short_form_is_the_full_form(
        count in 0i32..600, high in 0i32..600, high_min in 0i32..600, high_max in 0i32..600,
        batch in 1i32..70, flags: u8, alloc_factor in 0u8..4, free_factor in 0u8..4,
        free_count in 0i32..600, order in 0u8..10, below_high: bool, reclaim_active: bool,
        sw in 0u8..=255, scale in 0u8..6,
    ) {
        let st = PcpState {
            count, high, high_min, high_max, batch, flags, alloc_factor, free_factor,
            free_count, count_min: count,
        };
        let t = Tune {
            scale,
            prev_order: sw & 1 != 0,
            bounded: sw & 2 != 0,
            refill_scaling: sw & 4 != 0,
            auto_tune: sw & 8 != 0,
            below_high: sw & 16 != 0,
            free_count: sw & 32 != 0,
            count_min: sw & 64 != 0,
            free_high_min: sw & 128 != 0,
        };
        let zf = ZoneFlags { below_high, reclaim_active };
        let (mut a, mut b) = (st, st);
        let da = on_free(&mut a, order, zf, &t);
        let db = on_free_full(&mut b, order, zf, &t);
        proptest::prop_assert_eq!(da, db);
        proptest::prop_assert_eq!(a, b);
    }
}
