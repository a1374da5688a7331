//! [`BuildError`], why an allocator could not be built, and [`try_boxed`], the build's
//! fallible allocation of its tables: leaf items the zones and the allocator build with.

use crate::config::ConfigError;
use crate::topology::LayoutError;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

/// Why an allocator could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The config is out of range.
    Config(ConfigError),
    /// The layout is inconsistent.
    Layout(LayoutError),
    /// A caller-supplied metadata buffer is too small (needed entries).
    Metadata(usize),
    /// Allocating the allocator's own structures failed (`try_reserve`).
    OutOfMemory {
        /// What was being allocated.
        what: &'static str,
        /// Bytes asked for.
        bytes: usize,
    },
    /// Mapping memory failed.
    #[cfg(feature = "std")]
    Mmap(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => e.fmt(f),
            BuildError::Layout(e) => e.fmt(f),
            BuildError::Metadata(n) => write!(f, "metadata buffer too small: {n} entries needed"),
            BuildError::OutOfMemory { what, bytes } => {
                write!(f, "cannot allocate {bytes} bytes for the {what}")
            }
            #[cfg(feature = "std")]
            BuildError::Mmap(e) => write!(f, "mmap failed: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for BuildError {}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> Self {
        BuildError::Config(e)
    }
}
impl From<LayoutError> for BuildError {
    fn from(e: LayoutError) -> Self {
        BuildError::Layout(e)
    }
}

/// `n` values made by `f(i)` in a boxed slice, or [`BuildError::OutOfMemory`] when the
/// memory for them cannot be had (instead of aborting the process).
pub(crate) fn try_boxed<T>(
    what: &'static str,
    n: usize,
    f: impl FnMut(usize) -> T,
) -> Result<Box<[T]>, BuildError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| BuildError::OutOfMemory {
            what,
            bytes: n.saturating_mul(core::mem::size_of::<T>()),
        })?;
    v.extend((0..n).map(f));
    Ok(v.into_boxed_slice())
}
