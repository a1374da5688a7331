//! The workload registry: names, defaults and `key=value` overrides.
//!
//! # Design
//! Each workload's file declares its [`Entry`]: its name, how to build it, and the
//! simulator's defaults for it (the machine its seed measurement ran on, the CPUs it
//! runs on there, its headroom, its calibrated parameters). [`ENTRIES`] lists them, one
//! line a workload; nothing else in the lab matches on a workload's name to find its
//! defaults. A new workload is its own file, its `mod` line in `workload/mod.rs`, and
//! its line in [`ENTRIES`].

use super::entry::{Entry, Scale};
use super::{Workload, WorkloadError};

/// The registered workloads, in the spec's order: one line a workload.
pub const ENTRIES: &[Entry] = &[
    super::page_fault1::ENTRY,
    super::page_fault1::THP_ENTRY,
    super::kbuild::ENTRY,
    super::netperf::ENTRY,
    super::lmbench::ENTRY,
    super::page_fault1::BATCH_SWEEP_ENTRY,
    super::bulk::ENTRY,
    super::high_order_stress::ENTRY,
    super::thp_mix::ENTRY,
    super::parallel_free::ENTRY,
    super::zonelist_hog::ENTRY,
    super::purger::ENTRY,
    super::mass_exit::ENTRY,
];

const NAMES: [&str; ENTRIES.len()] = {
    let mut names = [""; ENTRIES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = ENTRIES[i].name;
        i += 1;
    }
    names
};

/// The registered workload names, in the spec's order.
pub fn names() -> &'static [&'static str] {
    &NAMES
}

/// The registry entry of workload `name`, if it is registered.
pub fn entry(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.name == name)
}

/// Workload `name` at laptop scale, with `overrides` (`(key, value)`) applied.
///
/// # Errors
/// An unknown name or key, or a bad value; the error lists the valid choices.
pub fn by_name(
    name: &str,
    overrides: &[(String, String)],
) -> Result<Box<dyn Workload>, WorkloadError> {
    build(name, Scale::Laptop, overrides)
}

/// Workload `name` at `scale`, with `overrides` (`(key, value)`) applied.
///
/// # Errors
/// As [`by_name`].
pub fn build(
    name: &str,
    scale: Scale,
    overrides: &[(String, String)],
) -> Result<Box<dyn Workload>, WorkloadError> {
    match entry(name) {
        Some(e) => (e.build)(e.name, scale, overrides),
        None => Err(WorkloadError::UnknownWorkload {
            name: name.to_owned(),
            valid: names(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::param_bound;

    #[test]
    fn every_entry_answers_consistently() {
        for (i, e) in ENTRIES.iter().enumerate() {
            assert!(!e.name.is_empty(), "entry {i} has no name");
            assert!(
                ENTRIES[..i].iter().all(|f| f.name != e.name),
                "{} is registered twice",
                e.name
            );
            assert_eq!(entry(e.name).map(|f| f.name), Some(e.name));
            for scale in [Scale::Laptop, Scale::Full] {
                let w = build(e.name, scale, &[]).unwrap();
                assert_eq!(w.name(), e.name, "{} builds another workload", e.name);
            }
            if let Some(mib) = e.headroom_mib {
                assert!((1..=1 << 20).contains(&mib), "{}: headroom {mib}", e.name);
            }
            // The calibrated parameters are the workload's own keys, within their bounds,
            // and the workload builds with them.
            let ov: Vec<(String, String)> = e
                .calibrated
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.to_string()))
                .collect();
            for (k, v) in e.calibrated {
                let (max, _) =
                    param_bound(k).unwrap_or_else(|| panic!("{}: {k} unbounded", e.name));
                assert!((*v as f64) <= max, "{}: {k}={v} above {max}", e.name);
            }
            build(e.name, Scale::Full, &ov).unwrap();
        }
        assert_eq!(names().len(), ENTRIES.len());
        assert!(matches!(
            build("no_such_workload", Scale::Laptop, &[]),
            Err(WorkloadError::UnknownWorkload { .. })
        ));
    }
}
