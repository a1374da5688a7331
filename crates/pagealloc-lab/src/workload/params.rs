//! Workload parameters: declared once, expanded into the struct, its defaults, its
//! full-scale values, the `key=value` setter and the listing for reports.
//!
//! # Design
//! Each workload declares its parameters with [`define_params!`]: one line per field
//! with the laptop default (the [`Default`]: about 1–3 s of real allocation work on a
//! 2-core machine) and the full-scale value (the spec's scale, for the simulator). The
//! macro writes both into the field's docs, so the defaults are stated exactly once.

use std::fmt;
use std::str::FromStr;

/// Parameter overrides as [`by_name`](super::by_name) takes them, from string pairs
/// (`&[("loops", "2")]`).
pub fn overrides(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A workload's parameter set.
pub trait Params: Clone + fmt::Debug + Default {
    /// Parameter names, in declaration order.
    const KEYS: &'static [&'static str];

    /// The values for the simulator at the spec's scale.
    fn full_scale() -> Self;

    /// Sets parameter `key` from its textual `value` (underscores allowed: `32_768`).
    ///
    /// # Errors
    /// [`ParamError::UnknownKey`] or [`ParamError::BadValue`].
    fn set(&mut self, key: &str, value: &str) -> Result<(), ParamError>;

    /// `(key, value)` pairs in declaration order.
    fn list(&self) -> Vec<(&'static str, String)>;
}

/// Why [`Params::set`] refused a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamError {
    /// No parameter of that name.
    UnknownKey,
    /// The value does not parse as the parameter's type; the parser's message.
    BadValue(String),
}

/// Frames of 4 KiB a page-count parameter may name: 2^25 (128 GiB), above every
/// full-scale value (`zonelist_hog`'s 23.6 M); each frame costs the executors a slot.
const MAX_PAGES: f64 = (1u64 << 25) as f64;
/// Longest time one parameter may charge per event, ns: one second.
const MAX_NS: f64 = 1e9;
/// Longest time a per-KiB parameter may charge, ns: one millisecond per KiB (a 1 GiB
/// message at most 1 000 s).
const MAX_NS_PER_KIB: f64 = 1e6;
/// Most repetitions (loops, rounds, messages, chunks, attempts, retries).
const MAX_COUNT: f64 = 1e8;
/// Most tasks, threads, pairs or CPUs a workload may ask for: the layouts' 8192 CPUs.
const MAX_CPUS: f64 = 8192.0;
/// Most bytes of one buffer, message or chunk: 1 GiB.
const MAX_BYTES: f64 = (1u64 << 30) as f64;

/// The upper bound of every workload parameter (`-p KEY=VALUE`), by name, with its
/// unit: one table for all workloads (a name means the same in each). The lower bound
/// is 0 (the workloads refuse 0 where it cannot run); a value above its bound is refused
/// with [`ParamError::BadValue`]. `pagealloc list` prints the table.
pub const PARAM_BOUNDS: &[(&str, f64, &str)] = &[
    ("attempt_cpus", MAX_CPUS, "CPUs"),
    ("attempt_order", 10.0, "order"),
    ("attempts", MAX_COUNT, "attempts"),
    ("backoff_ns", MAX_NS, "ns"),
    ("batch_pages", MAX_PAGES, "pages"),
    ("break_pages_per_cpu", MAX_PAGES, "pages"),
    ("chunk_bytes", MAX_BYTES, "bytes"),
    ("chunks", MAX_COUNT, "chunks"),
    ("compute_ns_per_page", MAX_NS, "ns"),
    ("create_ns", MAX_NS, "ns"),
    ("cross_copy_in_ns_per_kib", MAX_NS_PER_KIB, "ns per KiB"),
    ("cross_copy_out_ns_per_kib", MAX_NS_PER_KIB, "ns per KiB"),
    ("cross_recv_ns", MAX_NS, "ns"),
    ("cross_send_ns", MAX_NS, "ns"),
    ("exit_jitter_ns", MAX_NS, "ns"),
    ("exit_shift", MAX_CPUS, "CPUs"),
    ("fault_shared_lines", 1000.0, "lines"),
    ("fault_work_ns", MAX_NS, "ns"),
    ("gather_pages", 1.0, "(0 or 1)"),
    ("fill_pages", MAX_PAGES, "pages"),
    ("fragment_order", 10.0, "order"),
    ("frag_bytes", MAX_BYTES, "bytes"),
    ("head_bytes", MAX_BYTES, "bytes"),
    ("inbox_batches", MAX_COUNT, "batches"),
    ("interval_ns", MAX_NS, "ns"),
    ("line_transfer_ns", 1e6, "ns"),
    ("loops", MAX_COUNT, "loops"),
    ("lru_held_base", 30.0, "pages"),
    ("lru_held_thp", 30.0, "pages"),
    ("lru_tail", 30.0, "pages"),
    ("max_pages", MAX_PAGES, "pages"),
    ("median_pages", MAX_PAGES, "pages"),
    ("message_bytes", MAX_BYTES, "bytes"),
    ("messages", MAX_COUNT, "messages"),
    ("min_pages", MAX_PAGES, "pages"),
    ("order", 10.0, "order"),
    ("pages", MAX_PAGES, "pages"),
    ("pages_per_loop", MAX_PAGES, "pages"),
    ("pagetable_per_mille", 1000.0, "‰"),
    ("packet_chunks", 64.0, "chunks"),
    ("pairs", MAX_CPUS, "pairs"),
    ("path_mtu_bytes", MAX_BYTES, "bytes"),
    ("pte_tables", 1.0, "(0 or 1)"),
    ("purgers", MAX_CPUS, "threads"),
    ("rcvbuf_bytes", MAX_BYTES, "bytes"),
    ("recv_arrival_pct", 100.0, "%"),
    ("recv_on_sender_pct", 100.0, "%"),
    ("recv_protocol_ns", MAX_NS, "ns"),
    ("region_pages", MAX_PAGES, "pages"),
    ("release_percent", 100.0, "%"),
    ("retries", MAX_COUNT, "retries"),
    ("retry_backoff_ns", MAX_NS, "ns"),
    ("rounds", MAX_COUNT, "rounds"),
    ("rss_pages", MAX_PAGES, "pages"),
    ("send_protocol_ns", MAX_NS, "ns"),
    ("second_packet_chunks", 64.0, "chunks"),
    ("sender_free_pct", 100.0, "%"),
    ("sigma", 10.0, "(log-normal shape)"),
    ("skb_frag_bytes", MAX_BYTES, "bytes"),
    ("skb_overhead_bytes", MAX_BYTES, "bytes"),
    ("slab_blocks_max", MAX_COUNT, "blocks"),
    ("slab_every_writes", MAX_COUNT, "writes"),
    ("sndbuf_bytes", MAX_BYTES, "bytes"),
    ("stack_order", 10.0, "order"),
    ("shared_lines", 1000.0, "lines"),
    ("shared_switch_ns", MAX_NS, "ns"),
    ("syscall_ns", MAX_NS, "ns"),
    ("table_free_lag", 1000.0, "loops"),
    ("tasks", MAX_CPUS, "tasks"),
    ("thp_cpus", MAX_CPUS, "CPUs"),
    ("thp_fault_work_ns", MAX_NS, "ns"),
    ("threads", MAX_CPUS, "threads"),
    ("total_pages", MAX_PAGES, "pages"),
    ("turn_messages", MAX_COUNT, "messages"),
    ("unmap_work_ns", MAX_NS, "ns"),
    ("unmovable_per_mille", 1000.0, "‰"),
    ("vmap_stack", 1.0, "(true/false)"),
    ("wake_jitter_ns", MAX_NS, "ns"),
    ("work_ns", MAX_NS, "ns"),
];

/// The bound of parameter `key` from [`PARAM_BOUNDS`]: `(max, unit)`.
pub fn param_bound(key: &str) -> Option<(f64, &'static str)> {
    PARAM_BOUNDS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, m, u)| (m, u))
}

/// A parameter value as a number, for its bound.
pub(crate) trait Bounded {
    /// The value as `f64` (`true` is 1).
    fn as_f64(&self) -> f64;
}

macro_rules! bounded_as {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            fn as_f64(&self) -> f64 {
                *self as f64
            }
        }
    )*};
}
bounded_as!(u8, u16, u32, u64, usize, f64);

impl Bounded for bool {
    fn as_f64(&self) -> f64 {
        f64::from(u8::from(*self))
    }
}

/// Parses a parameter value, ignoring `_` digit separators, and checks it against the
/// bound of `key` ([`PARAM_BOUNDS`]; a key without one is refused, so that a new parameter
/// cannot go unbounded).
pub(crate) fn parse_value<T>(key: &str, value: &str) -> Result<T, ParamError>
where
    T: FromStr + Bounded,
    T::Err: fmt::Display,
{
    let cleaned: String = value.trim().chars().filter(|&c| c != '_').collect();
    let v: T = cleaned
        .parse()
        .map_err(|e: T::Err| ParamError::BadValue(e.to_string()))?;
    let (max, unit) = param_bound(key)
        .ok_or_else(|| ParamError::BadValue(format!("parameter `{key}` has no bound")))?;
    let x = v.as_f64();
    if !(0.0..=max).contains(&x) {
        return Err(ParamError::BadValue(format!("must be 0..={max} {unit}")));
    }
    Ok(v)
}

/// Declares a parameter struct: `field: type = laptop_default, full full_scale_value;`.
macro_rules! define_params {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty = $laptop:expr, full $full:expr;
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!(
                    "Default `", stringify!($laptop),
                    "`; full scale `", stringify!($full), "`."
                )]
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $($field: $laptop,)* }
            }
        }

        impl $crate::workload::Params for $name {
            const KEYS: &'static [&'static str] = &[$(stringify!($field)),*];

            fn full_scale() -> Self {
                Self { $($field: $full,)* }
            }

            fn set(
                &mut self,
                key: &str,
                value: &str,
            ) -> Result<(), $crate::workload::ParamError> {
                match key {
                    $(stringify!($field) => {
                        self.$field = $crate::workload::params::parse_value(key, value)?;
                    })*
                    _ => return Err($crate::workload::ParamError::UnknownKey),
                }
                Ok(())
            }

            fn list(&self) -> Vec<(&'static str, String)> {
                vec![$((stringify!($field), self.$field.to_string())),*]
            }
        }
    };
}

pub(crate) use define_params;

#[cfg(test)]
#[allow(unreachable_pub)] // the macro declares `pub` structs
mod tests {
    use super::*;

    define_params! {
        /// Test parameters.
        pub struct TestParams {
            /// A count.
            loops: u32 = 3, full 30;
            /// A shape.
            sigma: f64 = 0.5, full 1.0;
        }
    }

    #[test]
    fn set_list_and_scale() {
        let mut p = TestParams::default();
        p.set("loops", "1_000").unwrap();
        p.set("sigma", "2.5").unwrap();
        assert_eq!(
            p.list(),
            vec![("loops", "1000".into()), ("sigma", "2.5".into())]
        );
        assert_eq!(p.set("nope", "1"), Err(ParamError::UnknownKey));
        assert!(matches!(p.set("loops", "-1"), Err(ParamError::BadValue(_))));
        for bad in ["nan", "inf", "-0.5", "10.5", "1e300"] {
            assert!(
                matches!(p.set("sigma", bad), Err(ParamError::BadValue(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            p.set("loops", "100000001"),
            Err(ParamError::BadValue(_))
        ));
        p.set("loops", "100000000").unwrap();
        assert_eq!(TestParams::full_scale().loops, 30);
        assert_eq!(TestParams::KEYS, &["loops", "sigma"]);
    }
}
