//! A workload's registry entry, declared in the workload's own file: its name, its
//! constructor and the simulator's defaults for it. `registry.rs` lists the entries.

use super::{ParamError, Params, Workload, WorkloadError};

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
/// Declared in the workload's own file, listed in `registry::ENTRIES`.
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
