//! A user's PCP policy ([`pagealloc::policy`]): its decisions show in the allocator's
//! counters, a policy forwarding to the kernel's defaults is the kernel, and absurd
//! answers are bounded (no panic, no lost page, `validate()` passes).

use std::sync::Arc;

use pagealloc::policy::{PcpPolicy, Policy, PolicyZone, Sizing};
use pagealloc::tune::{Decay, PcpState, Tune};
use pagealloc::{Allocator, Config, Frame, Gfp, Layout};

/// Deterministic ops on 4 CPUs: bursts of allocations of order 0..=3 and 9, frees of
/// most of them (some on another CPU), a decay tick every 64 ops.
fn workload(a: &Allocator, seed: u64) -> u64 {
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut held: Vec<Frame> = Vec::new();
    let mut failed = 0;
    for step in 0..20_000u64 {
        let cpu = (rnd() % 4) as usize;
        let r = rnd() % 100;
        if r < 55 || held.is_empty() {
            let order = match rnd() % 20 {
                0..=13 => 0,
                14 => 1,
                15 => 2,
                16 => 3,
                _ => 9,
            };
            let burst = if rnd() % 8 == 0 { 200 } else { 1 };
            for _ in 0..burst {
                match a.alloc_on(cpu, order, Gfp::USER, None) {
                    Ok(f) => held.push(f),
                    Err(_) => failed += 1,
                }
            }
        } else {
            let n = if rnd() % 8 == 0 { held.len() / 2 } else { 1 };
            for _ in 0..n {
                let i = (rnd() % held.len() as u64) as usize;
                let f = held.swap_remove(i);
                a.free_on(cpu, f).expect("a held frame frees");
            }
        }
        if step % 64 == 0 {
            for c in 0..4 {
                a.tick(c);
            }
        }
    }
    let t = a.validate().expect("valid after the ops");
    assert_eq!(t.buddy + t.pcp + t.allocated, t.managed, "no page lost");
    for f in held {
        a.free_on(0, f).expect("a held frame frees");
    }
    a.drain_all_pages();
    let t = a.validate().expect("valid after freeing all");
    assert_eq!((t.allocated, t.pcp), (0, 0));
    assert_eq!(t.buddy, t.managed, "every page back in the buddy lists");
    failed
}

fn build(cfg: Config) -> Allocator {
    // 1 GiB over 4 CPUs, one node: batch 63.
    Allocator::new(&Layout::single(1 << 18, 4), cfg).expect("allocator")
}

/// Refills of one batch, and `high` never raised above `high_min` (no auto-tuning up).
#[derive(Debug)]
struct NeverGrow;
impl PcpPolicy for NeverGrow {
    fn name(&self) -> &str {
        "never-grow"
    }
    fn nr_pcp_alloc(&self, st: &mut PcpState, _z: &PolicyZone, order: u8, _t: &Tune) -> i32 {
        st.high = st.high_min;
        ((st.batch >> order).max(2)).min(st.batch.max(1))
    }
    fn nr_pcp_high(&self, st: &mut PcpState, _z: &PolicyZone, free_high: bool, _t: &Tune) -> i32 {
        st.high = st.high_min;
        if free_high {
            0
        } else {
            st.high_min
        }
    }
}

/// Bursts on CPU 0: 2000 order-0 pages allocated, then all freed, 20 times.
fn bursts(a: &Allocator) {
    for _ in 0..20 {
        let held: Vec<Frame> = (0..2000)
            .map(|_| a.alloc_on(0, 0, Gfp::USER, None).expect("memory"))
            .collect();
        for f in held {
            a.free_on(0, f).expect("a held frame frees");
        }
    }
    a.validate().expect("valid");
}

#[test]
fn a_policy_that_never_grows_high_refills_more_often() {
    let kernel = build(Config::default());
    bursts(&kernel);
    let never = build(Config::default().with_policy(Policy::new(Arc::new(NeverGrow))));
    bursts(&never);
    let (k, n) = (kernel.counters(), never.counters());
    // linux-6.12 grows high to hold a burst and its refills to batch << SCALE; a batch
    // per refill and high_min take about 2000 / 63 refills per burst.
    assert!(
        n.pcp_refill > k.pcp_refill * 5,
        "refills: never-grow {} vs linux-6.12 {}",
        n.pcp_refill,
        k.pcp_refill
    );
    assert!(
        n.pcp_drain > k.pcp_drain,
        "drains: {} vs {}",
        n.pcp_drain,
        k.pcp_drain
    );
    // No pageset's high left high_min.
    for cpu in 0..4 {
        let p = never.pcp_info(cpu, 0).expect("cpu, zone 0");
        assert_eq!(p.high, p.high_min, "cpu {cpu}");
    }
}

/// Every decision forwarded to the kernel's default: the same counters as no policy.
#[derive(Debug)]
struct Forward;
impl PcpPolicy for Forward {
    fn name(&self) -> &str {
        "forward"
    }
}

#[test]
fn a_policy_forwarding_to_the_defaults_is_the_kernel() {
    for preset in ["base", "patch7", "linux-6.12", "linux-6.18"] {
        // Lock holds untimed: the counters then depend on the ops alone.
        let cfg: Config = format!("{preset},lock_stat=off").parse().expect("preset");
        let kernel = build(cfg.clone());
        let fk = workload(&kernel, 11);
        let fwd = build(cfg.with_policy(Policy::new(Arc::new(Forward))));
        let ff = workload(&fwd, 11);
        assert_eq!(fk, ff, "{preset}: failed allocations");
        assert_eq!(kernel.counters(), fwd.counters(), "{preset}");
    }
}

/// Absurd answers: every decision 0, or `i32::MAX`, or negative, and the fields a policy
/// may not change scribbled over.
#[derive(Debug)]
struct Absurd(i32);
impl Absurd {
    fn scribble(&self, st: &mut PcpState) {
        st.count = self.0;
        st.batch = self.0;
        st.high = self.0;
        st.high_min = self.0;
        st.high_max = self.0.wrapping_neg();
        st.free_count = self.0;
        st.alloc_factor = u8::MAX;
        st.free_factor = u8::MAX;
        st.flags = u8::MAX;
    }
}
impl PcpPolicy for Absurd {
    fn name(&self) -> &str {
        "absurd"
    }
    fn high_bounds(&self, _s: &Sizing) -> (i32, i32) {
        (self.0, self.0.wrapping_neg())
    }
    fn free_high(&self, _st: &PcpState, _order: u8, _t: &Tune) -> bool {
        self.0 % 2 == 0
    }
    fn nr_pcp_high(&self, st: &mut PcpState, _z: &PolicyZone, _fh: bool, _t: &Tune) -> i32 {
        self.scribble(st);
        self.0
    }
    fn nr_pcp_free(&self, st: &mut PcpState, _limit: i32, _fh: bool, _t: &Tune) -> i32 {
        self.scribble(st);
        self.0
    }
    fn nr_pcp_alloc(&self, st: &mut PcpState, _z: &PolicyZone, _order: u8, _t: &Tune) -> i32 {
        self.scribble(st);
        self.0
    }
    fn decay_pcp_high(&self, st: &mut PcpState, _z: &PolicyZone, _t: &Tune) -> Decay {
        self.scribble(st);
        Decay {
            excess: self.0,
            todo: true,
        }
    }
}

#[test]
fn absurd_answers_are_bounded() {
    for v in [0, 1, -1, i32::MAX, i32::MIN, u32::MAX as i32, 1 << 20] {
        let a = build(Config::default().with_policy(Policy::new(Arc::new(Absurd(v)))));
        workload(&a, 3);
        // Every pageset stays within its sizes plus what refills can overshoot.
        for cpu in 0..4 {
            let p = a.pcp_info(cpu, 0).expect("cpu, zone 0");
            assert!(
                p.high_min <= p.high_max && p.high_max <= 1 << 28,
                "{v}: {p:?}"
            );
            assert!(
                p.count >= 0 && p.count <= p.high_max.max(p.batch) + 20 * 2016,
                "{v}: cpu {cpu} {p:?}"
            );
        }
    }
}

#[test]
fn a_policy_is_printed_and_cannot_be_named_in_a_config_string() {
    let c = Config::default().with_policy(Policy::new(Arc::new(Forward)));
    assert_eq!(c.to_string(), "linux-6.12,policy=forward");
    let e = "linux-6.12,policy=forward".parse::<Config>().unwrap_err();
    assert!(e.to_string().contains("Config::with_policy"), "{e}");
    assert_ne!(c, Config::default());
    assert_eq!(c.clone(), c);
}
