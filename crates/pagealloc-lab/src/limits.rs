//! The numeric bounds of the lab's inputs, and the `clap` value parsers that apply them,
//! so that a command line is refused with one line and exit status 2 before anything
//! runs, and the library entry points (`stress::run`, …) refuse the same values.
//!
//! The bounds are those of a laptop-to-server lab, not of the allocator alone:
//! - threads and CPUs of a run on real threads: 1..=[`MAX_THREADS`] (each thread has its
//!   own pageset, sampling buffers and latency histograms);
//! - memory: from [`MIN_MIB`] up to what an allocator can manage (fewer than 2^32 − 2
//!   frames of 4 KiB: [`MAX_MIB`]);
//! - durations: finite, from 0 up to [`MAX_SECONDS`];
//! - repetitions of a row (`--runs`, `--seeds`): 1..=[`MAX_RUNS`] (each keeps its
//!   samples and, on threads, takes a whole run's time).

use crate::units::MemSize;

/// Most threads (or CPUs) of a run on real threads.
pub const MAX_THREADS: u64 = 1024;
/// Least memory of an allocator, MiB.
pub const MIN_MIB: u64 = 4;
/// Most memory of an allocator, MiB: (2^32 − 3) frames of 4 KiB, rounded down.
pub const MAX_MIB: u64 = ((1u64 << 32) - 3) / 256;
/// Longest duration, seconds (a bit over three years).
pub const MAX_SECONDS: f64 = 1e8;

/// Most repetitions of a row (`--runs` on threads, `--seeds` in the simulator).
pub const MAX_RUNS: u64 = 1000;

/// `n` as a thread or CPU count: 1..=[`MAX_THREADS`].
///
/// # Errors
/// The rule, as one line.
pub fn check_threads(n: u64) -> Result<(), String> {
    if (1..=MAX_THREADS).contains(&n) {
        Ok(())
    } else {
        Err(format!("must be 1..={MAX_THREADS}, not {n}"))
    }
}

/// `m` as the memory of an allocator: [`MIN_MIB`] MiB ..= [`MAX_MIB`] MiB.
///
/// # Errors
/// The rule, as one line.
pub fn check_memory(m: MemSize) -> Result<(), String> {
    if (MemSize::mib(MIN_MIB)..=MemSize::mib(MAX_MIB)).contains(&m) {
        Ok(())
    } else {
        Err(format!(
            "must be {}..={} (fewer than 2^32-2 frames of 4 KiB), not {m}",
            MemSize::mib(MIN_MIB),
            MemSize::mib(MAX_MIB)
        ))
    }
}

/// `s` as a duration in seconds: finite, 0..=[`MAX_SECONDS`].
///
/// # Errors
/// The rule, as one line.
pub fn check_seconds(s: f64) -> Result<(), String> {
    if s.is_finite() && (0.0..=MAX_SECONDS).contains(&s) {
        Ok(())
    } else {
        Err(format!(
            "must be a finite number of seconds, 0..={MAX_SECONDS}, not {s}"
        ))
    }
}

fn number<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("expected {what}, not `{s}`"))
}

/// `clap` value parser: a thread count (1..=[`MAX_THREADS`]).
///
/// # Errors
/// The rule, as one line.
pub fn threads(s: &str) -> Result<usize, String> {
    let n: u64 = number(s, "a whole number")?;
    check_threads(n)?;
    Ok(n as usize)
}

/// `clap` value parser: a CPU count (1..=[`MAX_THREADS`]).
///
/// # Errors
/// The rule, as one line.
pub fn cpus(s: &str) -> Result<u32, String> {
    let n: u64 = number(s, "a whole number")?;
    check_threads(n)?;
    Ok(n as u32)
}

/// `n` as a number of repetitions of a row: 1..=[`MAX_RUNS`].
///
/// # Errors
/// The rule, as one line.
pub fn check_runs(n: u64) -> Result<(), String> {
    if (1..=MAX_RUNS).contains(&n) {
        Ok(())
    } else {
        Err(format!("must be 1..={MAX_RUNS}, not {n}"))
    }
}

/// `clap` value parser: repetitions of a row (1..=[`MAX_RUNS`]).
///
/// # Errors
/// The rule, as one line.
pub fn runs(s: &str) -> Result<u32, String> {
    let n: u64 = number(s, "a whole number")?;
    check_runs(n)?;
    Ok(n as u32)
}

/// `clap` value parser: memory with a unit ([`MemSize`]), within [`check_memory`].
///
/// # Errors
/// The rule, as one line.
pub fn memory(s: &str) -> Result<MemSize, String> {
    let m: MemSize = s
        .parse()
        .map_err(|e: crate::units::SizeError| e.to_string())?;
    check_memory(m)?;
    Ok(m)
}

/// `clap` value parser: seconds (finite, 0..=[`MAX_SECONDS`]).
///
/// # Errors
/// The rule, as one line.
pub fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = number(s, "a number of seconds")?;
    check_seconds(v)?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_refuse_what_the_issue_lists() {
        for bad in ["0", "100000", "-1", "x", "1.5", ""] {
            assert!(threads(bad).is_err() && cpus(bad).is_err(), "{bad}");
        }
        assert_eq!(threads("1024"), Ok(1024));
        for bad in [
            "0MiB",
            "3MiB",
            "99999999MiB",
            "-5MiB",
            "1e30GiB",
            "nanGiB",
            "infGiB",
            "17TiB",
            "64",
        ] {
            assert!(memory(bad).is_err(), "{bad}");
        }
        assert_eq!(memory("64MiB"), Ok(MemSize::mib(64)));
        assert_eq!(memory("0.5GiB"), Ok(MemSize::mib(512)));
        assert_eq!(memory(&format!("{MAX_MIB}MiB")), Ok(MemSize::mib(MAX_MIB)));
        for bad in ["-1", "nan", "inf", "-inf", "1e300", "x"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds("0"), Ok(0.0));
        assert_eq!(seconds("2.5"), Ok(2.5));
        for bad in ["0", "1001", "99999999999999999999", "-3", "2.5", "x"] {
            assert!(runs(bad).is_err(), "{bad}");
        }
        assert_eq!(runs("1000"), Ok(1000));
    }
}
