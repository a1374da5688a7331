//! The workload registry: names, defaults and `key=value` overrides.
//!
//! # Design
//! Each workload's file declares its [`Entry`]: its name, how to build it, and the
//! simulator's defaults for it (the machine its seed measurement ran on, the CPUs it
//! runs on there, its headroom, its calibrated parameters). [`ENTRIES`] lists them, one
//! line a workload; nothing else in the lab matches on a workload's name to find its
//! defaults. A new workload is its own file, its `mod` line in `workload/mod.rs`, and
//! its line in [`ENTRIES`].

use super::{ParamError, Params, Workload, WorkloadError};

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
];

/// Which defaults a workload starts from, before overrides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scale {
    /// About 1–3 s of real allocation work on a 2-core laptop ([`Default`] params).
    Laptop,
    /// The spec's scale, for the simulator ([`Params::full_scale`]).
    Full,
}

/// The CPUs a workload runs on by default in the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DefaultCpus {
    /// Every CPU of the machine; the workload takes what its parameters need.
    Machine,
    /// The CPUs of one socket (kbuild's `make -j<CPUs per socket>` on socket 0).
    Socket,
}

/// Builds a registered workload: `(name, scale, overrides)`.
pub type BuildFn =
    fn(&'static str, Scale, &[(String, String)]) -> Result<Box<dyn Workload>, WorkloadError>;

/// One registered workload: its name, its constructor and its simulator defaults.
/// Declared in the workload's own file, listed in [`ENTRIES`].
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The registry name (`-w NAME`), unique.
    pub name: &'static str,
    /// Builds the workload at a scale with `key=value` overrides.
    pub build: BuildFn,
    /// The machine (`--machine` name) the seed measured it on: the simulator's default.
    pub seed_machine: &'static str,
    /// The CPUs it runs on when `--cpus` is not given.
    pub cpus: DefaultCpus,
    /// Free memory at the start, MiB above each zone's high watermark, unless
    /// `--headroom` says otherwise; `None`: all memory free.
    pub headroom_mib: Option<u64>,
    /// Parameters the simulator's calibration sets (`key`, value), before the caller's
    /// own overrides.
    pub calibrated: &'static [(&'static str, u64)],
}

impl Entry {
    /// `name` built by `build`, with the default simulator settings: the desktop
    /// machine, all its CPUs, all memory free, nothing calibrated.
    pub const fn new(name: &'static str, build: BuildFn) -> Self {
        Entry {
            name,
            build,
            seed_machine: "desktop-8",
            cpus: DefaultCpus::Machine,
            headroom_mib: None,
            calibrated: &[],
        }
    }

    /// With `machine` as the seed's machine.
    pub const fn seed_machine(self, machine: &'static str) -> Self {
        Entry {
            seed_machine: machine,
            ..self
        }
    }

    /// With `cpus` as the default CPUs.
    pub const fn cpus(self, cpus: DefaultCpus) -> Self {
        Entry { cpus, ..self }
    }

    /// With `mib` of headroom by default.
    pub const fn headroom_mib(self, mib: u64) -> Self {
        Entry {
            headroom_mib: Some(mib),
            ..self
        }
    }

    /// With `params` set by the simulator's calibration.
    pub const fn calibrated(self, params: &'static [(&'static str, u64)]) -> Self {
        Entry {
            calibrated: params,
            ..self
        }
    }
}

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

/// Workload `name` from `P`'s defaults at `scale` ([`Default`] or
/// [`Params::full_scale`]) through `new`: the [`BuildFn`] of most entries.
pub(super) fn scaled<P: Params, W: Workload + 'static>(
    name: &'static str,
    scale: Scale,
    overrides: &[(String, String)],
    new: impl FnOnce(P) -> Result<W, WorkloadError>,
) -> Result<Box<dyn Workload>, WorkloadError> {
    let params = match scale {
        Scale::Laptop => P::default(),
        Scale::Full => P::full_scale(),
    };
    make(name, params, overrides, new)
}

/// Workload `name` from `params` with `overrides` applied, through `new`.
pub(super) fn make<P: Params, W: Workload + 'static>(
    name: &'static str,
    mut params: P,
    overrides: &[(String, String)],
    new: impl FnOnce(P) -> Result<W, WorkloadError>,
) -> Result<Box<dyn Workload>, WorkloadError> {
    for (key, value) in overrides {
        params.set(key, value).map_err(|e| match e {
            ParamError::UnknownKey => WorkloadError::UnknownParam {
                workload: name,
                key: key.clone(),
                valid: P::KEYS,
            },
            ParamError::BadValue(reason) => WorkloadError::InvalidParam {
                workload: name,
                key: key.clone(),
                value: value.clone(),
                reason,
            },
        })?;
    }
    Ok(Box::new(new(params)?))
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
