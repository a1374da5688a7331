//! A PCP policy of one's own, run through the lab: Asterinas' per-CPU pool balancing
//! (its frame allocator keeps each CPU's cache near a target share of free memory) as a
//! [`PcpPolicy`], beside `linux-6.12` in the simulator.
//!
//! The policy, for a pageset of a zone with `free` pages in its buddy lists and `n`
//! online CPUs, `target = free / n / 2`:
//! - sizing: `high_min = target / 8` (the floor), `high_max = 2 × target` (the ceiling),
//!   with `free` = the zone's managed pages at sizing time;
//! - a refill (the list ran empty) takes the pageset up to `target` (the allocator
//!   bounds it to what fits below `high - batch`); `high` follows the ceiling
//!   `2 × target` of the free memory now;
//! - a free that reaches the ceiling drains down to `target` (`nr_pcp_high` = ceiling,
//!   `nr_pcp_free` = `count - target`);
//! - no free_high (Asterinas has no process-exit detection) and no idle decay: the tick
//!   only returns what lies above the ceiling of the free memory now.
//!
//! This program registers the policy as `pool-balance` and then is the lab's command
//! line, so every `--config`/`--configs` may name it. With no arguments it runs
//!
//! ```text
//! compare page_fault1 --sim --machine spr-2s-224 --cpus 224 \
//!     --configs linux-6.12,linux-6.12,policy=pool-balance
//! ```
//!
//! i.e. `cargo run --release -p pagealloc-lab --example pool_balance`; any other command
//! line is passed on: `cargo run --release -p pagealloc-lab --example pool_balance --
//! compare kbuild --sim --configs linux-6.18,linux-6.18,policy=pool-balance`.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use pagealloc::policy::{PcpPolicy, Policy, PolicyZone, Sizing};
use pagealloc::tune::{Decay, PcpState, Tune};

/// Asterinas-style pool balancing (see the module docs).
#[derive(Debug)]
struct PoolBalance;

impl PoolBalance {
    /// `free / online CPUs / 2`, pages.
    fn target(z: &PolicyZone) -> i32 {
        let n = u64::from(z.online_cpus().max(1));
        (z.free_pages() / n / 2).min(i32::MAX as u64 / 4) as i32
    }
}

impl PcpPolicy for PoolBalance {
    fn name(&self) -> &str {
        "pool-balance"
    }

    fn high_bounds(&self, s: &Sizing) -> (i32, i32) {
        let target =
            (s.managed / u64::from(s.online_cpus.max(1)) / 2).min(i32::MAX as u64 / 4) as i32;
        (target / 8, 2 * target)
    }

    fn free_high(&self, _st: &PcpState, _order: u8, _t: &Tune) -> bool {
        false
    }

    fn nr_pcp_high(&self, st: &mut PcpState, z: &PolicyZone, _free_high: bool, _t: &Tune) -> i32 {
        st.high = 2 * Self::target(z);
        st.high
    }

    fn nr_pcp_free(&self, st: &mut PcpState, limit: i32, _free_high: bool, _t: &Tune) -> i32 {
        // Down to the target, half the ceiling.
        (st.count - limit / 2).max(st.batch)
    }

    fn nr_pcp_alloc(&self, st: &mut PcpState, z: &PolicyZone, order: u8, _t: &Tune) -> i32 {
        let target = Self::target(z);
        st.high = 2 * target;
        ((target - st.count).max(st.batch) >> order).max(1)
    }

    fn decay_pcp_high(&self, st: &mut PcpState, z: &PolicyZone, _t: &Tune) -> Decay {
        st.high = (2 * Self::target(z)).max(st.high_min);
        Decay {
            excess: (st.count - st.high).max(0),
            todo: false,
        }
    }
}

fn main() -> ExitCode {
    pagealloc_lab::policies::register(Policy::new(Arc::new(PoolBalance)));
    let mut args: Vec<String> = std::env::args().collect();
    if args.len() == 1 {
        args.extend(
            [
                "compare",
                "page_fault1",
                "--sim",
                "--machine",
                "spr-2s-224",
                "--cpus",
                "224",
                "--configs",
                "linux-6.12,linux-6.12,policy=pool-balance",
            ]
            .map(String::from),
        );
    }
    let cli = pagealloc_lab::cli::Cli::parse_from(args);
    match pagealloc_lab::cli::dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
