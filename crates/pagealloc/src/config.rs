//! One [`Config`] with a documented field per mechanism, and the named presets that walk
//! the Linux PCP series step by step.
//!
//! # Presets
//! Cumulative, like the kernel series ("[PATCH -V3 0/9] mm: PCP high auto-tuning", whose
//! steps the seeds measured; the lab's reports use the same names; docs/mechanisms.md §10):
//!
//! | name | adds | kernel |
//! |---|---|---|
//! | `base` | fixed `high`, free_factor drains, `batch >> order` refills | v6.6 |
//! | `patch1` | free_high needs two consecutive order 1–3 frees | V3 1/9 |
//! | `patch3` | free_high drains ≤ batch<<SCALE, lowers high, keeps a batch with a large cache slice | V3 2/9, 3/9 |
//! | `patch5` | order-0 refills scaled by alloc_factor, factors capped by SCALE | V3 4/9, 5/9 |
//! | `patch7` | high auto-tuned in [high_min, high_max], decay 1/8 per second | V3 6/9, 7/9 |
//! | `patch9` | BELOW_HIGH: high cut only below the high watermark | V3 8/9 |
//! | `patch10` | free_count replaces free_factor (= v6.7 / v6.8) | V3 9/9 |
//! | `linux-6.12` | 2 THP lists, no pcp migratetype cache, chunked drains, claim-at-half stealing, free highatomic in watermarks | v6.10–6.12 |
//!
//! A config string is a preset name optionally followed by `,key=value` overrides, e.g.
//! `patch7,batch_scale_max=3,fixed_batch=127`; [`Config`]'s `Display` prints the same form.

use core::fmt;
use core::str::FromStr;

/// The named ablation steps. See the module docs.
///
/// ```
/// use pagealloc::Preset;
///
/// let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
/// assert_eq!(names.first(), Some(&"base"));
/// assert_eq!(names.last(), Some(&"linux-6.12"));
/// // Kernel versions are accepted as aliases.
/// assert_eq!("linux-6.8".parse::<Preset>()?, Preset::Patch10);
/// assert!(!Preset::Base.config().auto_tune && Preset::Patch7.config().auto_tune);
/// # Ok::<(), pagealloc::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Preset {
    /// v6.6, before the series.
    Base,
    /// + no drain at process exit.
    Patch1,
    /// + bounded free_high drain, FREE_HIGH_BATCH.
    Patch3,
    /// + scaled order-0 refill.
    Patch5,
    /// + auto-tuned high and decay.
    Patch7,
    /// + BELOW_HIGH.
    Patch9,
    /// + free_count (= v6.7/v6.8).
    Patch10,
    /// v6.12, the reference behaviour and the default.
    Linux612,
}

impl Preset {
    /// All presets in series order.
    pub const ALL: [Preset; 8] = [
        Preset::Base,
        Preset::Patch1,
        Preset::Patch3,
        Preset::Patch5,
        Preset::Patch7,
        Preset::Patch9,
        Preset::Patch10,
        Preset::Linux612,
    ];
    /// The preset's name.
    pub const fn name(self) -> &'static str {
        match self {
            Preset::Base => "base",
            Preset::Patch1 => "patch1",
            Preset::Patch3 => "patch3",
            Preset::Patch5 => "patch5",
            Preset::Patch7 => "patch7",
            Preset::Patch9 => "patch9",
            Preset::Patch10 => "patch10",
            Preset::Linux612 => "linux-6.12",
        }
    }
    /// Names accepted by [`Preset::from_str`], including the aliases.
    pub const NAMES: &'static str =
        "base (linux-6.6), patch1, patch3, patch5, patch7, patch9, patch10 (linux-6.7, linux-6.8), linux-6.12";

    /// The configuration of this preset.
    pub fn config(self) -> Config {
        let lvl = self as u8;
        let mut c = Config {
            preset: self,
            free_high_prev_order: lvl >= Preset::Patch1 as u8,
            free_high_bounded: lvl >= Preset::Patch3 as u8,
            refill_scaling: lvl >= Preset::Patch5 as u8,
            auto_tune: lvl >= Preset::Patch7 as u8,
            below_high: lvl >= Preset::Patch9 as u8,
            free_count: lvl >= Preset::Patch10 as u8,
            ..Config::LINUX_6_12
        };
        if self != Preset::Linux612 {
            c.thp_pcp_lists = 1;
            c.pcp_migratetype_cache = true;
            c.chunked_drain = false;
            c.steal_claim_half = false;
            c.highatomic_free_accounting = false;
        }
        c
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Ok(match s.trim() {
            "base" | "linux-6.6" | "6.6" => Preset::Base,
            "patch1" => Preset::Patch1,
            "patch3" => Preset::Patch3,
            "patch5" => Preset::Patch5,
            "patch7" => Preset::Patch7,
            "patch9" => Preset::Patch9,
            "patch10" | "linux-6.7" | "linux-6.8" | "6.7" | "6.8" => Preset::Patch10,
            "linux-6.12" | "6.12" | "default" => Preset::Linux612,
            other => return Err(ConfigError::UnknownPreset(other.into())),
        })
    }
}

/// Every switch and tunable of the allocator. Start from a preset
/// ([`Config::preset`], [`Config::default`] = `linux-6.12`) and change fields.
///
/// A config string is a preset name followed by `,key=value` overrides; `Display`
/// prints the same form, with only the keys that differ from the preset:
///
/// ```
/// use pagealloc::{Config, ConfigError, Preset};
///
/// let c: Config = "patch7,batch_scale_max=3,fixed_batch=127,merge_skip=on".parse()?;
/// assert_eq!(c.preset, Preset::Patch7);
/// assert!(c.auto_tune && !c.free_count); // patch7 has V3 7/9 but not yet 9/9
/// assert_eq!((c.batch_scale_max, c.fixed_batch), (3, Some(127)));
/// assert_eq!(c.to_string(), "patch7,batch_scale_max=3,fixed_batch=127,merge_skip=on");
/// assert_eq!(c.to_string().parse::<Config>()?, c);
///
/// // Mistakes are errors that say what would have been accepted.
/// let e = "patch7,batch_scale=3".parse::<Config>().unwrap_err();
/// assert!(matches!(e, ConfigError::UnknownKey(_)));
/// assert!(e.to_string().contains("batch_scale_max"));
/// assert!("patch7,batch_scale_max=9".parse::<Config>().is_err()); // 0..=6
///
/// // Or build it as a value.
/// let c = Config { merge_skip: true, clustered_refill: true, ..Config::default() };
/// assert_eq!(c.to_string(), "linux-6.12,merge_skip=on,clustered_refill=on");
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Config {
    /// The preset this config started from (used for printing).
    pub preset: Preset,

    // ---- the Linux PCP series ----
    /// V3 1/9: free_high needs the previous free on the pcp to be order 1–3 too, so the
    /// single order-1 page-directory free at process exit no longer drains the pcp.
    pub free_high_prev_order: bool,
    /// V3 3/9: a free_high drain frees at most `batch << SCALE` pages and lowers `high`
    /// by as much; with a large per-CPU cache slice (FREE_HIGH_BATCH) one batch is kept.
    pub free_high_bounded: bool,
    /// V3 4/9 + 5/9: order-0 refills grow as `batch << alloc_factor` (alloc_factor ≤
    /// SCALE) and free_factor is capped at SCALE.
    pub refill_scaling: bool,
    /// V3 7/9: `high` auto-tuned between high_min and high_max, with a decay of 1/8 per
    /// tick. Off: `high_min == high_max` (the fixed high of v6.6).
    pub auto_tune: bool,
    /// V3 8/9: ZONE_BELOW_HIGH, detected on the allocation path; while set, refills stop
    /// raising `high` and frees cut it. Off: only RECLAIM_ACTIVE cuts `high`.
    pub below_high: bool,
    /// V3 9/9: `free_count` (pages freed recently) replaces `free_factor` in the free_high
    /// test and drain sizing.
    pub free_count: bool,
    /// `CONFIG_PCP_BATCH_SCALE_MAX`: cap on the batch scale factor, 0..=6 (default 5).
    pub batch_scale_max: u8,
    /// `vm.percpu_pagelist_high_fraction`: 0 (auto-tuning between the low-watermark share
    /// and managed/8), or ≥ 8 (high = managed/fraction per CPU, tuning off).
    pub high_fraction: u32,
    /// Fixed `high` in pages for every pcp (high_min = high_max), overriding the sizing;
    /// for the batch sweep. `None`: computed.
    pub fixed_high: Option<u32>,
    /// Fixed `batch` in pages for every pcp, overriding `zone_batchsize`. `None`: computed.
    pub fixed_batch: Option<u32>,
    /// Per-CPU pagesets at all. Off: every order goes to the zone (the boot pageset).
    pub pcp: bool,

    // ---- v6.7/6.8 -> v6.10/6.12 ----
    /// THP pcp lists: 1 (≤ 6.8, 13 lists) or 2 (6.10+, movable apart, 14 lists).
    pub thp_pcp_lists: u8,
    /// ≤ 6.9: the pageblock type is cached in the frame at free time and used at drain
    /// (re-read only when the zone has isolated pageblocks). Off (6.10+): looked up at drain.
    pub pcp_migratetype_cache: bool,
    /// 6.10+: `drain_pages_zone` frees in chunks of `batch << SCALE`, re-taking the pcp
    /// lock each time. Off: one bulk free of the whole count.
    pub chunked_drain: bool,
    /// 6.10+ fallback: claim a pageblock only when at least half of it is free or alike,
    /// else split the fallback block in place. Off (≤ 6.9): move the free pages anyway.
    pub steal_claim_half: bool,
    /// 6.12: watermark checks subtract free highatomic pages, not the whole reserve.
    pub highatomic_free_accounting: bool,

    // ---- beyond mainline ----
    /// Zonelist full-zone cache (2.6.19–4.3): skip zones found full in the last second.
    pub zonelist_cache: bool,
    /// Aaron Lu's RFC: order-0 frees under the zone lock skip buddy merging; merged later
    /// on demand.
    pub merge_skip: bool,
    /// Aaron Lu's RFC: order-0 free lists kept in clusters cut whole by refills.
    pub clustered_refill: bool,
    /// V2 09/10 (never merged): decay only pages that stayed idle (`count_min`).
    pub count_min: bool,

    // ---- memory policy ----
    /// Transparent huge pages: order 9 is cached on the pcp and min_free_kbytes is raised
    /// as khugepaged recommends.
    pub thp: bool,
    /// `vm.min_free_kbytes`; `None`: computed (`isqrt(lowmem_kb * 16)`, clamped).
    pub min_free_kbytes: Option<u64>,
    /// `vm.watermark_scale_factor` in 1/10000 of managed memory (default 10, 1..=3000).
    pub watermark_scale_factor: u32,
    /// `vm.watermark_boost_factor` in 1/10000 of the high watermark (default 15000; 0 off).
    pub watermark_boost_factor: u32,
    /// Interval of the decay tick (`vmstat_update`) for the background ticker, in ms.
    pub tick_interval_ms: u64,

    // ---- safety ----
    // Frees are always checked (one compare-and-swap on the frame's state); the opt-out
    // is `Allocator::free_on_unchecked`, an `unsafe fn`, not a config key.
    /// With a memory-backed allocator, fill freed frames with [`POISON_BYTE`];
    /// `validate()` then checks that free frames were not written.
    pub poison: bool,
}

/// Byte written over freed frames when [`Config::poison`] is on (the kernel's PAGE_POISON).
pub const POISON_BYTE: u8 = 0xaa;

impl Config {
    /// v6.12, the reference behaviour.
    pub const LINUX_6_12: Config = Config {
        preset: Preset::Linux612,
        free_high_prev_order: true,
        free_high_bounded: true,
        refill_scaling: true,
        auto_tune: true,
        below_high: true,
        free_count: true,
        batch_scale_max: 5,
        high_fraction: 0,
        fixed_high: None,
        fixed_batch: None,
        pcp: true,
        thp_pcp_lists: 2,
        pcp_migratetype_cache: false,
        chunked_drain: true,
        steal_claim_half: true,
        highatomic_free_accounting: true,
        zonelist_cache: false,
        merge_skip: false,
        clustered_refill: false,
        count_min: false,
        thp: true,
        min_free_kbytes: None,
        watermark_scale_factor: 10,
        watermark_boost_factor: 15000,
        tick_interval_ms: 1000,
        poison: false,
    };

    /// The config of a named preset.
    pub fn preset(name: &str) -> Result<Config, ConfigError> {
        Ok(name.parse::<Preset>()?.config())
    }

    /// v6.6 (`base`).
    pub fn linux_6_6() -> Config {
        Preset::Base.config()
    }
    /// v6.7/v6.8 (`patch10`).
    pub fn linux_6_7() -> Config {
        Preset::Patch10.config()
    }

    /// Check ranges; every constructor path calls this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.batch_scale_max > 6 {
            return Err(ConfigError::Invalid {
                key: "batch_scale_max",
                why: "must be 0..=6",
            });
        }
        if self.high_fraction != 0 && self.high_fraction < 8 {
            return Err(ConfigError::Invalid {
                key: "high_fraction",
                why: "must be 0 or >= 8",
            });
        }
        if !(1..=2).contains(&self.thp_pcp_lists) {
            return Err(ConfigError::Invalid {
                key: "thp_pcp_lists",
                why: "must be 1 or 2",
            });
        }
        if !(1..=3000).contains(&self.watermark_scale_factor) {
            return Err(ConfigError::Invalid {
                key: "watermark_scale_factor",
                why: "must be 1..=3000",
            });
        }
        if self.fixed_batch == Some(0) {
            return Err(ConfigError::Invalid {
                key: "fixed_batch",
                why: "must be >= 1",
            });
        }
        if self.tick_interval_ms == 0 {
            return Err(ConfigError::Invalid {
                key: "tick_interval_ms",
                why: "must be >= 1",
            });
        }
        Ok(())
    }

    /// Apply one `key=value` override (the keys are [`Config::KEYS`]; switches take
    /// `on`/`off`, optional numbers also `auto`). Ranges are checked by
    /// [`Config::validate`], which parsing a whole config string runs.
    ///
    /// ```
    /// use pagealloc::Config;
    ///
    /// let mut c = Config::linux_6_6();
    /// c.set("high_fraction", "16")?;
    /// c.set("fixed_batch", "auto")?;
    /// assert_eq!((c.high_fraction, c.fixed_batch), (16, None));
    /// c.validate()?;
    /// assert!(c.set("auto_tune", "maybe").is_err());
    /// # Ok::<(), pagealloc::ConfigError>(())
    /// ```
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let key = key.trim();
        let value = value.trim();
        let bad = |why: &'static str| ConfigError::BadValue {
            key: key.into(),
            value: value.into(),
            why,
        };
        let b = || parse_bool(value).ok_or_else(|| bad("expected on/off"));
        let n = || value.parse::<u64>().map_err(|_| bad("expected a number"));
        let opt = || -> Result<Option<u32>, ConfigError> {
            if matches!(value, "none" | "auto" | "off") {
                Ok(None)
            } else {
                value
                    .parse::<u32>()
                    .map(Some)
                    .map_err(|_| bad("expected a number or 'auto'"))
            }
        };
        macro_rules! fits {
            ($v:expr) => {
                $v.try_into().map_err(|_| bad("out of range"))?
            };
        }
        match key {
            "free_high_prev_order" => self.free_high_prev_order = b()?,
            "free_high_bounded" => self.free_high_bounded = b()?,
            "refill_scaling" => self.refill_scaling = b()?,
            "auto_tune" => self.auto_tune = b()?,
            "below_high" => self.below_high = b()?,
            "free_count" => self.free_count = b()?,
            "batch_scale_max" | "scale" => self.batch_scale_max = fits!(n()?),
            "high_fraction" => self.high_fraction = fits!(n()?),
            "fixed_high" => self.fixed_high = opt()?,
            "fixed_batch" => self.fixed_batch = opt()?,
            "pcp" => self.pcp = b()?,
            "thp_pcp_lists" => self.thp_pcp_lists = fits!(n()?),
            "pcp_migratetype_cache" | "mt_cache" => self.pcp_migratetype_cache = b()?,
            "chunked_drain" => self.chunked_drain = b()?,
            "steal_claim_half" => self.steal_claim_half = b()?,
            "highatomic_free_accounting" => self.highatomic_free_accounting = b()?,
            "zonelist_cache" | "zlc" => self.zonelist_cache = b()?,
            "merge_skip" => self.merge_skip = b()?,
            "clustered_refill" => self.clustered_refill = b()?,
            "count_min" => self.count_min = b()?,
            "thp" => self.thp = b()?,
            "min_free_kbytes" => {
                self.min_free_kbytes = opt()?.map(u64::from);
            }
            "watermark_scale_factor" => self.watermark_scale_factor = fits!(n()?),
            "watermark_boost_factor" => self.watermark_boost_factor = fits!(n()?),
            "tick_interval_ms" => self.tick_interval_ms = n()?,
            // Kept so that old config strings still parse: frees are always checked.
            "checked" => {
                if !b()? {
                    return Err(bad(
                        "frees are always checked (the opt-out is the unsafe Allocator::free_on_unchecked)",
                    ));
                }
            }
            "poison" => self.poison = b()?,
            _ => return Err(ConfigError::UnknownKey(key.into())),
        }
        Ok(())
    }

    /// The overridable keys, for error messages and help text.
    pub const KEYS: &'static str = "free_high_prev_order, free_high_bounded, refill_scaling, auto_tune, below_high, free_count, batch_scale_max, high_fraction, fixed_high, fixed_batch, pcp, thp_pcp_lists, pcp_migratetype_cache, chunked_drain, steal_claim_half, highatomic_free_accounting, zonelist_cache, merge_skip, clustered_refill, count_min, thp, min_free_kbytes, watermark_scale_factor, watermark_boost_factor, tick_interval_ms, poison";

    /// The `key=value` pairs in which this config differs from its preset.
    fn diff(&self) -> alloc::vec::Vec<(&'static str, alloc::string::String)> {
        use alloc::string::ToString;
        let p = self.preset.config();
        let mut v = alloc::vec::Vec::new();
        let onoff = |b: bool| if b { "on" } else { "off" }.to_string();
        let optn = |o: Option<u32>| o.map_or("auto".to_string(), |x| x.to_string());
        macro_rules! cmp {
            ($f:ident, $fmt:expr) => {
                if self.$f != p.$f {
                    v.push((stringify!($f), $fmt(self.$f)));
                }
            };
        }
        cmp!(free_high_prev_order, onoff);
        cmp!(free_high_bounded, onoff);
        cmp!(refill_scaling, onoff);
        cmp!(auto_tune, onoff);
        cmp!(below_high, onoff);
        cmp!(free_count, onoff);
        cmp!(batch_scale_max, |x: u8| x.to_string());
        cmp!(high_fraction, |x: u32| x.to_string());
        cmp!(fixed_high, optn);
        cmp!(fixed_batch, optn);
        cmp!(pcp, onoff);
        cmp!(thp_pcp_lists, |x: u8| x.to_string());
        cmp!(pcp_migratetype_cache, onoff);
        cmp!(chunked_drain, onoff);
        cmp!(steal_claim_half, onoff);
        cmp!(highatomic_free_accounting, onoff);
        cmp!(zonelist_cache, onoff);
        cmp!(merge_skip, onoff);
        cmp!(clustered_refill, onoff);
        cmp!(count_min, onoff);
        cmp!(thp, onoff);
        cmp!(min_free_kbytes, |o: Option<u64>| o
            .map_or("auto".to_string(), |x| x.to_string()));
        cmp!(watermark_scale_factor, |x: u32| x.to_string());
        cmp!(watermark_boost_factor, |x: u32| x.to_string());
        cmp!(tick_interval_ms, |x: u64| x.to_string());
        cmp!(poison, onoff);
        v
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "on" | "true" | "yes" => Some(true),
        "0" | "off" | "false" | "no" => Some(false),
        _ => None,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::LINUX_6_12
    }
}

impl FromStr for Config {
    type Err = ConfigError;
    /// `preset[,key=value...]`.
    fn from_str(s: &str) -> Result<Config, ConfigError> {
        let mut parts = s.split(',');
        let mut c = Config::preset(parts.next().unwrap_or(""))?;
        for kv in parts {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| ConfigError::UnknownKey(kv.into()))?;
            c.set(k, v)?;
        }
        c.validate()?;
        Ok(c)
    }
}

impl fmt::Display for Config {
    /// The preset name, then the overrides that differ from it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.preset.name())?;
        for (k, v) in self.diff() {
            write!(f, ",{k}={v}")?;
        }
        Ok(())
    }
}

/// A config string or value that is not acceptable.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ConfigError {
    /// Not a preset name.
    UnknownPreset(alloc::string::String),
    /// Not a config key.
    UnknownKey(alloc::string::String),
    /// A key with a value that does not parse.
    BadValue {
        /// The key.
        key: alloc::string::String,
        /// The value given.
        value: alloc::string::String,
        /// What was expected.
        why: &'static str,
    },
    /// A field out of its range.
    Invalid {
        /// The field.
        key: &'static str,
        /// The rule.
        why: &'static str,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownPreset(p) => {
                write!(f, "unknown config '{p}' (valid: {})", Preset::NAMES)
            }
            ConfigError::UnknownKey(k) => {
                write!(f, "unknown config key '{k}' (valid: {})", Config::KEYS)
            }
            ConfigError::BadValue { key, value, why } => {
                write!(f, "bad value '{value}' for {key}: {why}")
            }
            ConfigError::Invalid { key, why } => write!(f, "{key} {why}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn presets_are_cumulative_and_round_trip() {
        let mut prev: Option<Config> = None;
        for p in Preset::ALL {
            let c = p.config();
            assert_eq!(c.to_string(), p.name());
            assert_eq!(c.to_string().parse::<Config>().unwrap(), c);
            if let Some(prev) = prev {
                assert!(c.free_high_prev_order >= prev.free_high_prev_order);
                assert!(c.auto_tune >= prev.auto_tune);
                assert!(c.free_count >= prev.free_count);
            }
            prev = Some(c);
        }
        assert!(!Config::linux_6_6().auto_tune);
        assert!(Config::linux_6_7().free_count && Config::linux_6_7().pcp_migratetype_cache);
        assert!(!Config::default().pcp_migratetype_cache);
    }

    #[test]
    fn overrides_parse_and_print() {
        let c: Config = "patch7,batch_scale_max=3,fixed_batch=127".parse().unwrap();
        assert_eq!(c.batch_scale_max, 3);
        assert_eq!(c.fixed_batch, Some(127));
        assert_eq!(c.to_string(), "patch7,batch_scale_max=3,fixed_batch=127");
        assert!(matches!(
            "nope".parse::<Config>(),
            Err(ConfigError::UnknownPreset(_))
        ));
        assert!(matches!(
            "base,zzz=1".parse::<Config>(),
            Err(ConfigError::UnknownKey(_))
        ));
        assert!(matches!(
            "base,batch_scale_max=7".parse::<Config>(),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            "base,high_fraction=5".parse::<Config>(),
            Err(ConfigError::Invalid { .. })
        ));
        assert!("base,high_fraction=8".parse::<Config>().is_ok());
        let e = "nope".parse::<Config>().unwrap_err().to_string();
        assert!(e.contains("linux-6.12") && e.contains("patch7"), "{e}");
    }
}
