//! thp_mix's THP faults follow the 2 MiB clear `predict` measures on the host beside the
//! kernel's runs (`predict::clear`): the simulated fault costs the probe plus what the
//! kernel's fault takes beside it, and the simulator's own share is the one the
//! calibration subtracts.

use pagealloc_lab::predict::{self, clear, HostNow};
use pagealloc_lab::sim::start::StartState;

mod common;

/// `predict thp_mix --cpus 1` at its default size, simulated from an empty start with a
/// probe of `clear_us` µs (`None`: not measured).
fn cpu_us_per_page(clear_us: Option<f64>) -> f64 {
    let opts = common::predict_opts("thp_mix", 1);
    let host = HostNow {
        line_ns: None,
        clear_us,
    };
    predict::simulate_with(&opts, "linux-6.18", &StartState::default(), host)
        .unwrap()
        .0
        .cpu_us_per_op
}

/// Base pages per THP fault.
const THP_PAGES: f64 = 512.0;

#[test]
fn the_simulated_thp_fault_follows_the_probe() {
    let (fast, slow) = (cpu_us_per_page(Some(50.0)), cpu_us_per_page(Some(110.0)));
    let per_fault = (slow - fast) * THP_PAGES;
    assert!(
        (per_fault - 60.0).abs() < 0.6,
        "{fast} {slow}: {per_fault} µs"
    );
    // Without a probe the evening's constant stands in.
    let none = cpu_us_per_page(None) * THP_PAGES;
    let evening = f64::from(predict::work::THP_FAULT_WORK_NS) * 1e-3;
    let own = f64::from(clear::SIM_THP_FAULT_NS) * 1e-3;
    assert!((none - own - evening).abs() < 0.02 * none, "{none}");
}

#[test]
fn the_simulators_own_thp_fault_is_the_one_the_calibration_subtracts() {
    // The probe at which the fault's work beyond the simulator's is 0.
    let zero = f64::from(clear::SIM_THP_FAULT_NS - clear::THP_FAULT_BESIDE_CLEAR_NS) * 1e-3;
    assert_eq!(clear::thp_fault_work_ns(zero), 0);
    let own = cpu_us_per_page(Some(zero)) * THP_PAGES;
    let want = f64::from(clear::SIM_THP_FAULT_NS) * 1e-3;
    assert!(
        (own - want).abs() < 0.02 * want,
        "the simulator charges a THP fault {own:.2} µs of its own, SIM_THP_FAULT_NS says {want:.2}: re-measure it"
    );
}
