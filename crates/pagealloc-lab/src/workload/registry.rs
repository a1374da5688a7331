//! The workload registry: names, defaults and `key=value` overrides.

use super::{
    Bulk, BulkParams, HighOrderStress, HighOrderStressParams, Kbuild, KbuildParams, Lmbench,
    LmbenchParams, MassExit, MassExitParams, Netperf, NetperfParams, PageFault1, PageFault1Params,
    ParallelFree, ParallelFreeParams, ParamError, Params, Purger, PurgerParams, ThpMix,
    ThpMixParams, Workload, WorkloadError, ZonelistHog, ZonelistHogParams,
};

/// Which defaults a workload starts from, before overrides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scale {
    /// About 1–3 s of real allocation work on a 2-core laptop ([`Default`] params).
    Laptop,
    /// The spec's scale, for the simulator ([`Params::full_scale`]).
    Full,
}

const NAMES: &[&str] = &[
    "page_fault1",
    "page_fault1_thp",
    "kbuild",
    "netperf",
    "lmbench",
    "batch_sweep",
    "bulk",
    "high_order_stress",
    "thp_mix",
    "parallel_free",
    "zonelist_hog",
    "purger",
    "mass_exit",
];

/// The registered workload names, in the spec's order.
pub fn names() -> &'static [&'static str] {
    NAMES
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
    match name {
        "page_fault1" | "batch_sweep" => {
            let name = if name == "batch_sweep" {
                "batch_sweep"
            } else {
                "page_fault1"
            };
            make(name, pick::<PageFault1Params>(scale), overrides, |p| {
                PageFault1::new(name, p)
            })
        }
        "page_fault1_thp" => {
            let params = match scale {
                Scale::Laptop => PageFault1Params::thp(),
                Scale::Full => PageFault1Params::thp_full_scale(),
            };
            make("page_fault1_thp", params, overrides, |p| {
                PageFault1::new("page_fault1_thp", p)
            })
        }
        "kbuild" => make(
            "kbuild",
            pick::<KbuildParams>(scale),
            overrides,
            Kbuild::new,
        ),
        "netperf" => make(
            "netperf",
            pick::<NetperfParams>(scale),
            overrides,
            Netperf::new,
        ),
        "lmbench" => make(
            "lmbench",
            pick::<LmbenchParams>(scale),
            overrides,
            Lmbench::new,
        ),
        "bulk" => make("bulk", pick::<BulkParams>(scale), overrides, Bulk::new),
        "high_order_stress" => make(
            "high_order_stress",
            pick::<HighOrderStressParams>(scale),
            overrides,
            HighOrderStress::new,
        ),
        "thp_mix" => make(
            "thp_mix",
            pick::<ThpMixParams>(scale),
            overrides,
            ThpMix::new,
        ),
        "parallel_free" => make(
            "parallel_free",
            pick::<ParallelFreeParams>(scale),
            overrides,
            ParallelFree::new,
        ),
        "zonelist_hog" => make(
            "zonelist_hog",
            pick::<ZonelistHogParams>(scale),
            overrides,
            ZonelistHog::new,
        ),
        "purger" => make(
            "purger",
            pick::<PurgerParams>(scale),
            overrides,
            Purger::new,
        ),
        "mass_exit" => make(
            "mass_exit",
            pick::<MassExitParams>(scale),
            overrides,
            MassExit::new,
        ),
        _ => Err(WorkloadError::UnknownWorkload {
            name: name.to_owned(),
            valid: NAMES,
        }),
    }
}

fn pick<P: Params>(scale: Scale) -> P {
    match scale {
        Scale::Laptop => P::default(),
        Scale::Full => P::full_scale(),
    }
}

fn make<P: Params, W: Workload + 'static>(
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
