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
//! | `linux-6.18` | fallbacks claim before they steal, refills remember the fallback mode, free_high after `batch + high_min / 2` freed, decay drains in batches, `ALLOC_NOFRAGMENT` | v6.15–6.18.y (and 5.0) |
//! | `fast` | `linux-6.12` + merge skipping, clustered refills, refills cut as runs, spliced drains, THP refills below high, order-0 ownership bitmap and rings, untimed zone-lock holds (not bit-exact; merges on demand) | none |
//!
//! A config string is a preset name optionally followed by `,key=value` overrides, e.g.
//! `patch7,batch_scale_max=3,fixed_batch=127`; [`Config`]'s `Display` prints the same form.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::str::FromStr;

/// `concat!` of the groups with `", "` between them.
macro_rules! join {
    ([$($first:tt)*] $([$($rest:tt)*])*) => {
        concat!($($first)* $(, ", ", $($rest)*)*)
    };
}

/// The presets, declared once: variant, name, aliases, the step of the series whose
/// switches it has (`level`), and `key=value` overrides applied on top (a preset that is
/// not a step of the series, such as a tuned variant of `linux-6.12`, is one row here).
macro_rules! presets {
    ($( $(#[doc = $doc:expr])* $v:ident = $name:literal [$($alias:literal),*] level $level:ident overrides $over:literal; )*) => {
        /// The named ablation steps. See the module docs.
        ///
        /// ```
        /// use pagealloc::Preset;
        ///
        /// let names: Vec<&str> = Preset::SERIES.iter().map(|p| p.name()).collect();
        /// assert_eq!(names.first(), Some(&"base"));
        /// assert_eq!(names.last(), Some(&"linux-6.18"));
        /// // `fast` is not a kernel: in ALL, not in the series.
        /// assert!(Preset::ALL.contains(&Preset::Fast) && !Preset::SERIES.contains(&Preset::Fast));
        /// assert!(Preset::Fast.config().merge_skip && !Preset::Linux612.config().merge_skip);
        /// // Kernel versions are accepted as aliases.
        /// assert_eq!("linux-6.8".parse::<Preset>()?, Preset::Patch10);
        /// assert!(!Preset::Base.config().auto_tune && Preset::Patch7.config().auto_tune);
        /// # Ok::<(), pagealloc::ConfigError>(())
        /// ```
        #[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
        pub enum Preset {
            $( $(#[doc = $doc])* $v, )*
        }

        impl Preset {
            /// All presets: the series in order, then the ones that are not a kernel.
            pub const ALL: [Preset; [$(stringify!($v)),*].len()] = [$(Preset::$v),*];
            /// The preset's name.
            pub const fn name(self) -> &'static str {
                match self { $( Preset::$v => $name, )* }
            }
            /// Names accepted by [`Preset::from_str`], including the aliases.
            pub const NAMES: &'static str = join!($([$name $(, " = ", $alias)*])*);
            /// The step of the series whose switches this preset has.
            const fn level(self) -> Preset {
                match self { $( Preset::$v => Preset::$level, )* }
            }
            /// `key=value` overrides on top of the series step.
            const fn overrides(self) -> &'static str {
                match self { $( Preset::$v => $over, )* }
            }
        }

        impl FromStr for Preset {
            type Err = ConfigError;
            fn from_str(s: &str) -> Result<Self, ConfigError> {
                match s.trim() {
                    $( $name $(| $alias)* => Ok(Preset::$v), )*
                    other => Err(ConfigError::UnknownPreset(other.into())),
                }
            }
        }
    };
}

presets! {
    /// v6.6, before the series.
    Base = "base" ["linux-6.6", "6.6"] level Base overrides "";
    /// + no drain at process exit.
    Patch1 = "patch1" [] level Patch1 overrides "";
    /// + bounded free_high drain, FREE_HIGH_BATCH.
    Patch3 = "patch3" [] level Patch3 overrides "";
    /// + scaled order-0 refill.
    Patch5 = "patch5" [] level Patch5 overrides "";
    /// + auto-tuned high and decay.
    Patch7 = "patch7" [] level Patch7 overrides "";
    /// + BELOW_HIGH.
    Patch9 = "patch9" [] level Patch9 overrides "";
    /// + free_count (= v6.7/v6.8).
    Patch10 = "patch10" ["linux-6.7", "linux-6.8", "6.7", "6.8"] level Patch10 overrides "";
    /// v6.12, the reference behaviour and the default.
    Linux612 = "linux-6.12" ["6.12", "default"] level Linux612 overrides "";
    /// v6.18 as its stable series ships it (6.18.7 and later): the PCP and zone-lock
    /// decisions changed after 6.12 (docs/mechanisms.md §11).
    Linux618 = "linux-6.18" ["6.18"] level Linux618 overrides "";
    /// Not a kernel: `linux-6.12` with Aaron Lu's zone-lock mechanisms for users who want
    /// speed rather than 6.12's exact behaviour. Order-0 frees under the zone lock skip
    /// buddy merging and order-0 refills cut whole clusters, so a refill or drain touches
    /// about one frame's metadata per cluster instead of per page, and drains splice
    /// their order-0 frames onto the free lists in runs; high-order requests merge the
    /// skipped frames on demand (the slow path's compaction step). THP refills take up to
    /// half the room below `high` instead of two blocks (`thp_refill_high`), THP frees
    /// drain the pageset down to half of `high` instead of 4 blocks (`thp_drain_high`),
    /// THP drains splice the huge pages they return onto the order-9 lists unmerged and
    /// THP refills cut theirs off in one step (`thp_merge_skip`; order-10 requests merge
    /// them on demand), refills take the blocks they need from one block's front as one run
    /// (`refill_runs`), order-0 ownership is a bit per frame and the order-0 pageset
    /// lists are rings, so order-0 frees and pops write no frame metadata (`own_bitmap`),
    /// and zone-lock holds are not timed (`lock_stat=off`: two clock reads less per trip).
    /// docs/performance.md has the figures.
    Fast = "fast" [] level Linux612 overrides "merge_skip=on,clustered_refill=on,splice_drain=on,thp_refill_high=on,thp_drain_high=on,thp_merge_skip=on,refill_runs=on,own_bitmap=on,lock_stat=off";
}

impl Preset {
    /// The presets that model a kernel (the series, `base` to `linux-6.18`), in order;
    /// [`Preset::ALL`] adds the ones that do not (`fast`).
    pub const SERIES: [Preset; 9] = [
        Preset::Base,
        Preset::Patch1,
        Preset::Patch3,
        Preset::Patch5,
        Preset::Patch7,
        Preset::Patch9,
        Preset::Patch10,
        Preset::Linux612,
        Preset::Linux618,
    ];
}

impl Preset {
    /// The configuration of this preset: [`Config::LINUX_6_12`] with every key that came
    /// later in the series than the preset's step set to its earlier value and every key
    /// that came after 6.12 up to the step set to its later value, then the preset's
    /// overrides.
    pub fn config(self) -> Config {
        let mut c = Config {
            preset: self,
            ..Config::LINUX_6_12
        };
        c.rewind_to(self.level());
        c.advance_to(self.level());
        for kv in self.overrides().split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').expect("preset overrides are key=value");
            c.set(k, v)
                .expect("preset overrides are valid keys and values");
        }
        c
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How THP blocks are kept on a pageset (`NR_PCP_THP`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum ThpPcpLists {
    /// ≤ 6.8: one THP list for every migratetype (13 lists). Config value `1`.
    One = 1,
    /// 6.10+: movable THP blocks on a list of their own (14 lists). Config value `2`.
    Two = 2,
}

/// A config value: how it parses from and prints to a config string.
trait Value: Sized + PartialEq {
    fn parse(s: &str) -> Result<Self, &'static str>;
    fn show(&self) -> String;
}

impl Value for bool {
    fn parse(s: &str) -> Result<Self, &'static str> {
        match s {
            "1" | "on" | "true" | "yes" => Ok(true),
            "0" | "off" | "false" | "no" => Ok(false),
            _ => Err("expected on/off"),
        }
    }
    fn show(&self) -> String {
        if *self { "on" } else { "off" }.into()
    }
}

macro_rules! number_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn parse(s: &str) -> Result<Self, &'static str> {
                let n: u64 = s.parse().map_err(|_| "expected a number")?;
                n.try_into().map_err(|_| "out of range")
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
        impl Value for Option<$t> {
            fn parse(s: &str) -> Result<Self, &'static str> {
                if matches!(s, "none" | "auto" | "off") {
                    return Ok(None);
                }
                <$t as Value>::parse(s)
                    .map(Some)
                    .map_err(|_| "expected a number or 'auto'")
            }
            fn show(&self) -> String {
                self.map_or("auto".into(), |x| x.to_string())
            }
        }
    )*};
}
number_value!(u8, u32, u64);

impl Value for ThpPcpLists {
    fn parse(s: &str) -> Result<Self, &'static str> {
        match s {
            "1" => Ok(ThpPcpLists::One),
            "2" => Ok(ThpPcpLists::Two),
            _ => Err("expected 1 or 2"),
        }
    }
    fn show(&self) -> String {
        (*self as u8).to_string()
    }
}

/// Bound rules of the table: each returns the rule's text when the value breaks it.
type Rule<T> = fn(&T) -> Result<(), &'static str>;

fn any<T>(_: &T) -> Result<(), &'static str> {
    Ok(())
}

/// `vm.percpu_pagelist_high_fraction`'s bound (`MIN_PERCPU_PAGELIST_HIGH_FRACTION` = 8,
/// an `int`): the one rule for the config key and [`Allocator::set_high_fraction`].
///
/// [`Allocator::set_high_fraction`]: crate::Allocator::set_high_fraction
pub(crate) fn high_fraction_rule(v: &u32) -> Result<(), &'static str> {
    if *v == 0 || (8..=i32::MAX as u32).contains(v) {
        Ok(())
    } else {
        Err("must be 0 or 8..=2147483647")
    }
}

/// `fixed_batch`: 1..=65535. The kernel's `zone_batchsize` never exceeds 63; the bound
/// keeps `batch << CONFIG_PCP_BATCH_SCALE_MAX` and the drain sizes far inside `i32`, and
/// allocator construction also refuses a batch above a quarter of a zone.
pub(crate) const MAX_FIXED_BATCH: u32 = 65535;
/// `fixed_high`: at most 2^28 pages (1 TiB) per pageset; `high` is an `int` that is
/// raised by batches, and no kernel sizing comes near (managed/8 per CPU at most).
pub(crate) const MAX_FIXED_HIGH: u32 = 1 << 28;

/// The configuration keys, declared once. Each row: documentation, field, type, value in
/// `linux-6.12` (the default); optionally the value of the presets before the step that
/// introduced the current one (`before STEP = value`), or, for a key that came after
/// 6.12, its value from the step that introduced it on (`from STEP = value`); extra names
/// accepted by [`Config::set`]; and the bound [`Config::validate`] checks.
macro_rules! config_table {
    ($(
        $(#[doc = $doc:expr])*
        $field:ident : $ty:ty = $default:expr
            $(, before $step:ident = $older:expr)?
            $(, from $fstep:ident = $newer:expr)?
            $(, alias $($alias:literal)|+)?
            , bound $rule:expr;
    )*) => {
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
            $( $(#[doc = $doc])* pub $field: $ty, )*
            /// A user's PCP policy ([`crate::policy`]): the decisions of refills, drains,
            /// free_high and the decay tick, and the sizing of `high`. `None`: the
            /// kernel's, called directly. Set in code ([`Config::with_policy`]); printed
            /// as `,policy=NAME`, which a config string cannot set.
            pub policy: Option<crate::policy::Policy>,
        }

        impl Config {
            /// v6.12, the reference behaviour.
            pub const LINUX_6_12: Config = Config {
                preset: Preset::Linux612,
                $( $field: $default, )*
                policy: None,
            };

            /// The overridable keys, for error messages and help text.
            pub const KEYS: &'static str = join!($([stringify!($field)])*);

            /// Set every key introduced after `step` of the series to its earlier value.
            fn rewind_to(&mut self, step: Preset) {
                $( $(
                    if (step as u8) < (Preset::$step as u8) {
                        self.$field = $older;
                    }
                )? )*
            }

            /// Set every key introduced after 6.12, at `step` or before it, to its later value.
            fn advance_to(&mut self, step: Preset) {
                $( $(
                    if (step as u8) >= (Preset::$fstep as u8) {
                        self.$field = $newer;
                    }
                )? )*
            }

            /// Check every key against its bound; every constructor path calls this.
            pub fn validate(&self) -> Result<(), ConfigError> {
                $(
                    let rule: Rule<$ty> = $rule;
                    rule(&self.$field).map_err(|why| ConfigError::Invalid {
                        key: stringify!($field),
                        why,
                    })?;
                )*
                Ok(())
            }

            /// Parse and store one key's value (no bound check).
            fn set_key(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
                let bad = |why: &'static str| ConfigError::BadValue {
                    key: key.into(),
                    value: value.into(),
                    why,
                };
                match key {
                    $( stringify!($field) $($(| $alias)+)? => {
                        self.$field = <$ty as Value>::parse(value).map_err(bad)?;
                    } )*
                    _ => return Err(ConfigError::UnknownKey(key.into())),
                }
                Ok(())
            }

            /// The `key=value` pairs in which this config differs from its preset.
            fn diff(&self) -> Vec<(&'static str, String)> {
                let p = self.preset.config();
                let mut v = Vec::new();
                $(
                    if self.$field != p.$field {
                        v.push((stringify!($field), Value::show(&self.$field)));
                    }
                )*
                v
            }
        }
    };
}

config_table! {
    // ---- the Linux PCP series ----
    /// V3 1/9: free_high needs the previous free on the pcp to be order 1–3 too, so the
    /// single order-1 page-directory free at process exit no longer drains the pcp.
    free_high_prev_order: bool = true, before Patch1 = false, bound any;
    /// V3 3/9: a free_high drain frees at most `batch << SCALE` pages and lowers `high`
    /// by as much; with a large per-CPU cache slice (FREE_HIGH_BATCH) one batch is kept.
    free_high_bounded: bool = true, before Patch3 = false, bound any;
    /// V3 4/9 + 5/9: order-0 refills grow as `batch << alloc_factor` (alloc_factor ≤
    /// SCALE) and free_factor is capped at SCALE.
    refill_scaling: bool = true, before Patch5 = false, bound any;
    /// V3 7/9: `high` auto-tuned between high_min and high_max, with a decay of 1/8 per
    /// tick. Off: `high_min == high_max` (the fixed high of v6.6).
    auto_tune: bool = true, before Patch7 = false, bound any;
    /// V3 8/9: ZONE_BELOW_HIGH, detected on the allocation path; while set, refills stop
    /// raising `high` and frees cut it. Off: only RECLAIM_ACTIVE cuts `high`.
    below_high: bool = true, before Patch9 = false, bound any;
    /// V3 9/9: `free_count` (pages freed recently) replaces `free_factor` in the free_high
    /// test and drain sizing.
    free_count: bool = true, before Patch10 = false, bound any;
    /// `CONFIG_PCP_BATCH_SCALE_MAX`: cap on the batch scale factor, 0..=6 (default 5).
    batch_scale_max: u8 = 5, alias "scale", bound |v| {
        if *v <= 6 { Ok(()) } else { Err("must be 0..=6") }
    };
    /// `vm.percpu_pagelist_high_fraction`: 0 (auto-tuning between the low-watermark share
    /// and managed/8), or 8..=2^31-1 (high = managed/fraction per CPU, tuning off).
    high_fraction: u32 = 0, bound high_fraction_rule;
    /// Fixed `high` in pages for every pcp (high_min = high_max), overriding the sizing;
    /// for the batch sweep. `None`: computed. At most 2^28.
    fixed_high: Option<u32> = None, bound |v| match v {
        Some(h) if *h > MAX_FIXED_HIGH => Err("must be at most 268435456 (2^28) or auto"),
        _ => Ok(()),
    };
    /// Fixed `batch` in pages for every pcp, overriding `zone_batchsize`. `None`:
    /// computed. 1..=65535, and at most a quarter of every zone's managed pages.
    fixed_batch: Option<u32> = None, bound |v| match v {
        Some(b) if !(1..=MAX_FIXED_BATCH).contains(b) => Err("must be 1..=65535 or auto"),
        _ => Ok(()),
    };
    /// Per-CPU pagesets at all. Off: every order goes to the zone (the boot pageset).
    pcp: bool = true, bound any;

    // ---- v6.7/6.8 -> v6.10/6.12 ----
    /// THP pcp lists: `1` (≤ 6.8, 13 lists) or `2` (6.10+, movable apart, 14 lists).
    thp_pcp_lists: ThpPcpLists = ThpPcpLists::Two, before Linux612 = ThpPcpLists::One, bound any;
    /// ≤ 6.9: the pageblock type is cached in the frame at free time and used at drain
    /// (re-read only when the zone has isolated pageblocks). Off (6.10+): looked up at drain.
    pcp_migratetype_cache: bool = false, before Linux612 = true, alias "mt_cache", bound any;
    /// 6.10+: `drain_pages_zone` frees in chunks of `batch << SCALE`, re-taking the pcp
    /// lock each time. Off: one bulk free of the whole count.
    chunked_drain: bool = true, before Linux612 = false, bound any;
    /// 6.10+ fallback: claim a pageblock only when at least half of it is free or alike,
    /// else split the fallback block in place. Off (≤ 6.9): move the free pages anyway.
    steal_claim_half: bool = true, before Linux612 = false, bound any;
    /// 6.12: watermark checks subtract free highatomic pages, not the whole reserve.
    highatomic_free_accounting: bool = true, before Linux612 = false, bound any;

    // ---- v6.12 -> v6.18.y (docs/mechanisms.md §11) ----
    /// 6.15, c2f6ea38fc1b "mm: page_alloc: don't steal single pages from biggest buddy":
    /// a fallback first tries to claim a whole pageblock at every order from the largest
    /// down (`__rmqueue_claim`, `try_to_claim_block`), and only when none can be claimed
    /// takes one block of the smallest order from another type (`__rmqueue_steal`). Why:
    /// 6.12 split the largest fallback block when its pageblock could not be claimed,
    /// breaking up the contiguity that claiming is meant to keep. Off: 6.12's
    /// `__rmqueue_fallback` (largest block, claim or split it in place).
    fallback_claim_first: bool = false, from Linux618 = true, bound any;
    /// 6.15, 2c847f27c3 "mm: page_alloc: speed up fallbacks in rmqueue_bulk()": with
    /// `fallback_claim_first`, a refill (`rmqueue_bulk`) remembers in which mode its last
    /// block was found (`enum rmqueue_mode`: own type, claim, steal) and starts the next
    /// `__rmqueue` there: after a steal it neither looks at its own lists nor tries to
    /// claim again until the refill ends. Why: the fallback searches ran once per block
    /// under the zone lock. Off: every block of a refill starts at its own type's lists.
    rmqueue_mode: bool = false, from Linux618 = true, bound any;
    /// 6.16, c544a952ba61 "mm: pcp: increase pcp->free_count threshold to trigger
    /// free_high": free_high needs `free_count >= batch + high_min / 2` (with
    /// `free_count`), not `>= batch`. Why: a CPU that frees order 1–3 blocks a little at a
    /// time (network receive) drained its pageset on every burst and refilled it on the
    /// next; a few hundred pages more before the drain keep them (Nikhil Dhama's
    /// measurements). Off: `free_count >= batch`.
    free_high_min_count: bool = false, from Linux618 = true, bound any;
    /// 6.18.7 (stable; mainline 6.19), fc4b909c368f "mm/page_alloc: batch page freeing in
    /// decay_pcp_high": the decay tick returns its excess in chunks of `batch` pages,
    /// each its own `free_pcppages_bulk` (one zone-lock trip), with the pcp lock dropped
    /// between chunks. Why: `count - high` after a decay step can be thousands of pages,
    /// one zone-lock hold long enough to starve the CPUs waiting for it. Off: one drain
    /// of the whole excess.
    decay_batched: bool = false, from Linux618 = true, bound any;
    /// 5.0, 6bb154504f8b "mm, page_alloc: spread allocations across zones before
    /// introducing fragmentation" (`alloc_flags_nofragment`, `ALLOC_NOFRAGMENT`): an
    /// allocation whose preferred zone is Normal, on a node with DMA32, first walks the
    /// zonelist forbidding fallbacks below a pageblock (`__rmqueue_claim`'s `min_order`,
    /// no `__rmqueue_steal`), so that a Normal zone that would have to mix types is passed
    /// over for DMA32; only if no zone can serve does it walk again without. Why: mixing
    /// types in pageblocks fragments memory for good, while DMA32 usually has room. In
    /// every kernel since 5.0; on in `linux-6.18` only, which `trace replay` checks
    /// against this kernel (the earlier presets keep their pinned results).
    nofragment: bool = false, from Linux618 = true, bound any;

    // ---- beyond mainline ----
    /// Zonelist full-zone cache (2.6.20–4.3): skip zones found full in the last second.
    zonelist_cache: bool = false, alias "zlc", bound any;
    /// Aaron Lu's RFC: order-0 frees under the zone lock skip buddy merging; merged later
    /// on demand.
    merge_skip: bool = false, bound any;
    /// Aaron Lu's RFC: order-0 free lists kept in clusters cut whole by refills.
    clustered_refill: bool = false, bound any;
    /// With `merge_skip`: a drain (`free_pcppages_bulk`) walks the order-0 frames it will
    /// return before taking the zone lock, then moves each run of one migratetype onto its
    /// free list in one splice instead of page by page (the pre-walk after Lu's 4.18
    /// "do not hold lock when picking pages to free"; the splice is ours). Same lists,
    /// order and counts as the page-by-page moves; fewer metadata lines under the lock.
    splice_drain: bool = false, bound any;
    /// Johannes Weiner's RFC "mm: page_alloc: pcp buddy allocator" (April 2026, never
    /// merged): pagesets claim whole pageblocks and split them outside the zone lock,
    /// frees go to the pageblock's owner CPU, drains merge the owner's blocks under the
    /// pageset lock, refills run four phases (docs/mechanisms.md A.15). Linked pagesets
    /// only (refused with `own_bitmap`, `clustered_refill`); off in every preset.
    pcp_buddy: bool = false, bound any;
    /// V2 09/10 (never merged): decay only pages that stayed idle (`count_min`).
    count_min: bool = false, bound any;
    /// A THP refill (`rmqueue_bulk` of pageblock-order blocks) takes up to half of the
    /// room left below `high`, `((high - count) / 2) >> order` blocks, when that is more
    /// than the kernel's `max(batch >> order, 2)` (2 blocks with the default batch): a
    /// CPU allocating huge pages makes one zone trip per several blocks, and the pageset
    /// never holds more than `high` allows. Ours, not the kernel's.
    thp_refill_high: bool = false, bound any;
    /// A drain that a free of a pageblock-order block sets off (`free_pcppages_bulk` from
    /// `free_unref_page_commit`) returns, from that THP list, down to half of `high`,
    /// `count - high / 2` pages, when that is more than the kernel's `nr_pcp_free`
    /// (`batch << SCALE` pages, 4 blocks with the default batch): a CPU freeing huge
    /// pages makes one zone trip per many blocks, the mirror of `thp_refill_high`. Ours,
    /// not the kernel's.
    thp_drain_high: bool = false, bound any;
    /// With `merge_skip`: a pageset drain puts the pageblock-order blocks it returns on
    /// their free lists without merging them with their buddies (marked merge-skipped, as
    /// `merge_skip` does order-0 frames); an order-10 request that finds no block merges
    /// them on demand in the slow path. A THP drain and the refill after it then move
    /// order-9 blocks without building and splitting order-10 ones. The blocks move in
    /// runs: a drain (`free_pcppages_bulk`) cuts the blocks it returns off the THP list's
    /// tail and puts each run of one type on the head of that type's order-9 list in one
    /// splice, with one free-area and counter update per run; a refill (`rmqueue_bulk`)
    /// cuts up to its count of blocks off the head of its type's order-9 list
    /// (`list_cut_position`) and appends them to the THP list. The blocks, their order on
    /// every list and the counts are those of the kernel's block-by-block loops over
    /// unmerged blocks; each block's metadata is written once, with no neighbour's.
    /// Ours, not the kernel's; on in `fast` (docs/performance.md, "The order-9 put side").
    thp_merge_skip: bool = false, bound any;
    /// A refill (`rmqueue_bulk`) takes the blocks it still needs from the smallest block
    /// of its type as one run cut from that block's front, and lists the rest of the block
    /// as the pieces the kernel's steps would leave (`Buddy::take_run`), where the
    /// kernel's `__rmqueue_smallest` takes one block per step, `expand`ing the block into
    /// the free lists and taking each piece back off: the same blocks in the same order and
    /// the same counts, with one list operation per piece left instead of two per block
    /// taken (a refill that splits a block keeps all of it, not just both halves). Ours,
    /// not the kernel's (the free-area accesses differ).
    refill_runs: bool = false, bound any;
    /// In a long run of frees, a drain that a free sets off (`free_pcppages_bulk` from
    /// `free_unref_page_commit`, not a free_high one) takes its order-0 frames from the
    /// heads of the pageset lists, the ones freed last, instead of the tails. The run is
    /// the kernel's own state: `free_count` at its ceiling `batch << SCALE` (frees raise
    /// it, every pageset allocation halves it), when `nr_pcp_free` drains `free_count`
    /// pages. The kernel drains the tail to keep the cache-hot pages for the next
    /// allocation; in a run of frees that allocation is far off, and the frames freed
    /// last are the ones whose metadata lines are still cached, where the tail's were
    /// pushed up to `high` frees earlier. Higher orders, decay and CPU drains keep the
    /// tail, and so do the order-0 rings of `own_bitmap` (so it is off in `fast`,
    /// whose order-0 lists are rings). Ours, not the kernel's (different
    /// frames reach the zone); docs/mechanisms.md A.12.
    drain_newest: bool = false, bound any;
    /// Order-0 frees that write no frame metadata: the ownership of allocated order-0
    /// blocks is a bit per frame in a dense bitmap per zone (set by every order-0
    /// allocation, cleared by the free that wins the block), the order-0 pageset lists
    /// are rings of indices (the others stay linked), and a frame freed to a ring keeps
    /// its metadata as the allocation left it (`Allocated`, order 0) until a drain moves
    /// it to the buddy lists and writes it there, its line prefetched ahead. A pageset
    /// free of a random frame then misses on no per-frame line (64 KiB of bitmap for
    /// 2 GiB against 8 MiB of metadata). Every bad free is still refused, with the same
    /// errors. Ours, not the kernel's; on in `fast`; docs/mechanisms.md A.13.
    own_bitmap: bool = false, bound any;

    // ---- instrumentation ----
    /// Zone-lock statistics in the spirit of `CONFIG_LOCK_STAT`: every zone-lock hold is
    /// timed (`zone_lock_hold_ns`, `zone_lock_max_hold_ns`), two clock reads per trip.
    /// Off: an uncontended acquisition reads no clock and holds are not timed (both
    /// counters stay 0); trips, contention and the wait of a contended acquisition are
    /// counted either way. Not a kernel mechanism: the allocator's behaviour and the
    /// accesses it reports do not depend on it.
    lock_stat: bool = true, bound any;

    // ---- memory policy ----
    /// Transparent huge pages: order 9 is cached on the pcp and min_free_kbytes is raised
    /// as khugepaged recommends.
    thp: bool = true, bound any;
    /// `vm.min_free_kbytes` (an `int` ≥ 0 in the kernel); `None`: computed
    /// (`isqrt(lowmem_kb * 16)`, clamped).
    min_free_kbytes: Option<u64> = None, bound |v| match v {
        Some(k) if *k > i32::MAX as u64 => Err("must be 0..=2147483647 or auto"),
        _ => Ok(()),
    };
    /// `vm.watermark_scale_factor` in 1/10000 of managed memory (default 10, 1..=3000).
    watermark_scale_factor: u32 = 10, bound |v| {
        if (1..=3000).contains(v) { Ok(()) } else { Err("must be 1..=3000") }
    };
    /// `vm.watermark_boost_factor` in 1/10000 of the high watermark (default 15000; 0 off;
    /// an `int` ≥ 0 in the kernel).
    watermark_boost_factor: u32 = 15000, bound |v| {
        if *v <= i32::MAX as u32 { Ok(()) } else { Err("must be 0..=2147483647") }
    };
    /// Interval of the decay tick (`vmstat_update`) for the background ticker, in ms
    /// (1 ms to one day).
    tick_interval_ms: u64 = 1000, bound |v| {
        if (1..=86_400_000).contains(v) { Ok(()) } else { Err("must be 1..=86400000 (one day)") }
    };

    // ---- safety ----
    // Frees are always checked (one compare-and-swap on the frame's state); the opt-out
    // is `Allocator::free_on_unchecked`, an `unsafe fn`, not a config key.
    /// With a memory-backed allocator, fill freed frames with [`POISON_BYTE`] and check
    /// the poison when a block is handed out again (as `debug_pagealloc` does; damage is
    /// counted in `poison_damaged` and reported by `validate()`), and in `validate()`.
    poison: bool = false, bound any;
}

/// Keys that were switches and are no longer, with what became of each: a config string
/// that names one is refused with this reason (docs/performance.md, "Which switches earn
/// their place").
const REMOVED: &[(&str, &str)] = &[
    (
        "refill_pairs",
        "refill_runs does its work (the same blocks, one list operation per piece left)",
    ),
    (
        "drain_pairs",
        "no preset ran it (thp_merge_skip's spliced THP drains, on in fast, exclude it); the kernel's drain frees each block",
    ),
    (
        "thp_splice",
        "thp_merge_skip moves its blocks so (the same blocks, lists and counts, in runs)",
    ),
    (
        "drain_prefetch",
        "in fast it reached only orders 1-3, +25 instructions per pair and no benchmark row",
    ),
    (
        "array_pcp",
        "rings for every list cost more than the linked lists they copied (own_bitmap keeps order-0 rings)",
    ),
];

/// Byte written over freed frames when [`Config::poison`] is on (the kernel's PAGE_POISON).
pub const POISON_BYTE: u8 = 0xaa;

impl Config {
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
        let (key, value) = (key.trim(), value.trim());
        // Kept so that old config strings still parse: frees are always checked.
        if key == "checked" {
            return match <bool as Value>::parse(value) {
                Ok(true) => Ok(()),
                _ => Err(ConfigError::BadValue {
                    key: key.into(),
                    value: value.into(),
                    why: "frees are always checked (the opt-out is the unsafe Allocator::free_on_unchecked)",
                }),
            };
        }
        if let Some((_, why)) = REMOVED.iter().find(|(k, _)| *k == key) {
            return Err(ConfigError::Removed {
                key: key.into(),
                why,
            });
        }
        if key == "policy" {
            return Err(ConfigError::BadValue {
                key: key.into(),
                value: value.into(),
                why: "a policy is set in code (Config::with_policy), not in a config string",
            });
        }
        self.set_key(key, value)
    }

    /// This config with a user's PCP policy ([`crate::policy`]).
    pub fn with_policy(self, policy: crate::policy::Policy) -> Config {
        Config {
            policy: Some(policy),
            ..self
        }
    }
}

impl crate::tune::Tune {
    /// The tuning switches of a config.
    pub fn from_config(c: &Config) -> crate::tune::Tune {
        crate::tune::Tune {
            scale: c.batch_scale_max,
            prev_order: c.free_high_prev_order,
            bounded: c.free_high_bounded,
            refill_scaling: c.refill_scaling,
            auto_tune: c.auto_tune,
            below_high: c.below_high,
            free_count: c.free_count,
            count_min: c.count_min,
            free_high_min: c.free_high_min_count,
        }
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
            let Some((k, v)) = kv.split_once('=') else {
                // A known key without its value says so, not "unknown key".
                return Err(match c.clone().set(kv, "") {
                    Err(ConfigError::UnknownKey(k)) => ConfigError::UnknownKey(k),
                    _ => ConfigError::BadValue {
                        key: kv.trim().into(),
                        value: kv.into(),
                        why: "missing `=value` (key=value)",
                    },
                });
            };
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
        if let Some(p) = &self.policy {
            write!(f, ",policy={}", p.name())?;
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
    /// A key that was a switch and is no longer one.
    Removed {
        /// The key.
        key: alloc::string::String,
        /// What became of it.
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
            ConfigError::Removed { key, why } => {
                write!(f, "config key '{key}' was removed: {why}")
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
    use alloc::format;
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
        // A known key without `=value` says what is missing.
        let e = "base,poison".parse::<Config>().unwrap_err();
        assert!(e.to_string().contains("missing `=value`"), "{e}");
        assert!(matches!(
            "base,zzz".parse::<Config>(),
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
        // A removed key says so, on one line, with what became of it; none is a key.
        for (key, _) in REMOVED {
            let e = format!("fast,{key}=on").parse::<Config>().unwrap_err();
            assert!(matches!(e, ConfigError::Removed { .. }), "{e}");
            let e = e.to_string();
            assert!(e.contains("was removed") && !e.contains('\n'), "{e}");
            assert!(!Config::KEYS.split(", ").any(|k| k == *key), "{key}");
        }
        let e = "nope".parse::<Config>().unwrap_err().to_string();
        assert!(e.contains("linux-6.12") && e.contains("patch7"), "{e}");
    }
}
