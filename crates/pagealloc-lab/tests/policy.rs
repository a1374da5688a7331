//! A user's PCP policy through the lab: the simulator runs it (a policy forwarding to the
//! kernel's defaults leaves the trace unchanged; one that never grows `high` refills
//! more), and config strings name registered policies.

use std::sync::Arc;

use pagealloc::policy::{PcpPolicy, Policy, PolicyZone};
use pagealloc::tune::{PcpState, Tune};
use pagealloc::Config;
use pagealloc_lab::sim::{self, Machine, SimOptions};
use pagealloc_lab::workload::{self, Scale};

#[derive(Debug)]
struct Forward;
impl PcpPolicy for Forward {
    fn name(&self) -> &str {
        "forward"
    }
}

/// Refills of one batch and `high` held at `high_min`.
#[derive(Debug)]
struct NeverGrow;
impl PcpPolicy for NeverGrow {
    fn name(&self) -> &str {
        "never-grow"
    }
    fn nr_pcp_alloc(&self, st: &mut PcpState, _z: &PolicyZone, order: u8, _t: &Tune) -> i32 {
        st.high = st.high_min;
        (st.batch >> order).max(1)
    }
    fn nr_pcp_high(&self, st: &mut PcpState, _z: &PolicyZone, fh: bool, _t: &Tune) -> i32 {
        st.high = st.high_min;
        if fh {
            0
        } else {
            st.high_min
        }
    }
}

#[test]
fn the_simulator_runs_a_policy() {
    let w = workload::build(
        "page_fault1",
        Scale::Laptop,
        &[
            ("pages_per_loop".to_owned(), "4096".to_owned()),
            ("loops".to_owned(), "8".to_owned()),
        ],
    )
    .unwrap();
    let base = SimOptions::new(Machine::by_name("desktop-8").unwrap(), Config::default());
    for preset in ["linux-6.12", "linux-6.18"] {
        let c: Config = preset.parse().unwrap();
        let configs = [
            c.clone(),
            c.clone().with_policy(Policy::new(Arc::new(Forward))),
            c.clone().with_policy(Policy::new(Arc::new(NeverGrow))),
        ];
        let rows = sim::compare(&*w, &base, &configs, &|_| {}).unwrap();
        assert_eq!(
            rows[1].config.as_deref(),
            Some(&*format!("{preset},policy=forward"))
        );
        assert_eq!(
            rows[0].trace_hash, rows[1].trace_hash,
            "{preset}: the kernel's decisions through the trait are the kernel's"
        );
        let refills = |i: usize| rows[i].extra["pcp_refill"];
        assert!(
            refills(2) > 2.0 * refills(0),
            "{preset}: never-grow {} refills, kernel {}",
            refills(2),
            refills(0)
        );
    }
}

#[test]
fn config_strings_name_registered_policies() {
    pagealloc_lab::policies::register(Policy::new(Arc::new(NeverGrow)));
    let c =
        pagealloc_lab::cli::config_of("linux-6.18,policy=never-grow,batch_scale_max=3").unwrap();
    assert_eq!(c.policy.as_ref().map(Policy::name), Some("never-grow"));
    assert_eq!(c.batch_scale_max, 3);
    assert_eq!(
        c.to_string(),
        "linux-6.18,batch_scale_max=3,policy=never-grow"
    );
    let e = pagealloc_lab::cli::config_of("linux-6.18,policy=absent").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("never-grow"), "{e}");
}
