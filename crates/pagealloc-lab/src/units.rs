//! Memory sizes with units, as every command's `--memory` takes them: `512MiB`, `2GiB`,
//! `1.5GiB`, `4096KiB`, `64M` (binary units; `B`, `K`/`KiB`, `M`/`MiB`, `G`/`GiB`,
//! `T`/`TiB`, case-insensitive, a space allowed before the unit). A number needs its unit:
//! `--memory 512` is refused rather than guessed.

use std::fmt;
use std::str::FromStr;

/// A size in bytes, parsed from and printed with a binary unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemSize(pub u64);

/// A size that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad size `{0}`: expected a number and a unit, e.g. 512MiB, 2GiB, 1.5GiB")]
pub struct SizeError(pub String);

const UNITS: [(&str, u32); 5] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)];

impl MemSize {
    /// `mib` MiB.
    pub const fn mib(mib: u64) -> Self {
        MemSize(mib << 20)
    }

    /// Bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// Whole 4 KiB pages (rounded down).
    pub const fn pages(self) -> u64 {
        self.0 / crate::workload::PAGE_SIZE
    }
}

impl FromStr for MemSize {
    type Err = SizeError;

    fn from_str(s: &str) -> Result<Self, SizeError> {
        let bad = || SizeError(s.to_owned());
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, unit) = t.split_at(split);
        let shift = match unit.trim().to_ascii_lowercase().as_str() {
            "b" => 0,
            "k" | "kib" => 10,
            "m" | "mib" => 20,
            "g" | "gib" => 30,
            "t" | "tib" => 40,
            _ => return Err(bad()),
        };
        let v: f64 = num.parse().map_err(|_| bad())?;
        let bytes = v * (1u64 << shift) as f64;
        if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
            return Err(bad());
        }
        Ok(MemSize(bytes as u64))
    }
}

impl fmt::Display for MemSize {
    /// The largest unit that divides the size exactly: `512MiB`, `2GiB`, `1536MiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (unit, shift) = UNITS
            .iter()
            .copied()
            .find(|&(_, sh)| self.0 != 0 && self.0 % (1u64 << sh) == 0)
            .unwrap_or(("B", 0));
        write!(f, "{}{unit}", self.0 >> shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units_and_print_back() {
        for (s, bytes) in [
            ("512MiB", 512 << 20),
            ("2GiB", 2 << 30),
            ("1.5GiB", 3 << 29),
            ("4096 KiB", 4 << 20),
            ("64m", 64 << 20),
            ("1T", 1 << 40),
        ] {
            assert_eq!(s.parse::<MemSize>(), Ok(MemSize(bytes)), "{s}");
        }
        assert_eq!(MemSize(3 << 29).to_string(), "1536MiB");
        assert_eq!(MemSize::mib(2048).to_string(), "2GiB");
        assert_eq!("2GiB".parse::<MemSize>().unwrap().pages(), 1 << 19);
        for bad in ["512", "", "MiB", "-1GiB", "1 parsec", "0MiB", "1..5GiB"] {
            assert!(bad.parse::<MemSize>().is_err(), "{bad}");
        }
    }
}
