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

/// Parses a parameter value, ignoring `_` digit separators.
pub(crate) fn parse_value<T>(value: &str) -> Result<T, ParamError>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    let cleaned: String = value.trim().chars().filter(|&c| c != '_').collect();
    cleaned
        .parse()
        .map_err(|e: T::Err| ParamError::BadValue(e.to_string()))
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
                        self.$field = $crate::workload::params::parse_value(value)?;
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
            count: u32 = 3, full 30;
            /// A shape.
            sigma: f64 = 0.5, full 1.0;
        }
    }

    #[test]
    fn set_list_and_scale() {
        let mut p = TestParams::default();
        p.set("count", "1_000").unwrap();
        p.set("sigma", "2.5").unwrap();
        assert_eq!(
            p.list(),
            vec![("count", "1000".into()), ("sigma", "2.5".into())]
        );
        assert_eq!(p.set("nope", "1"), Err(ParamError::UnknownKey));
        assert!(matches!(p.set("count", "-1"), Err(ParamError::BadValue(_))));
        assert_eq!(TestParams::full_scale().count, 30);
        assert_eq!(TestParams::KEYS, &["count", "sigma"]);
    }
}
