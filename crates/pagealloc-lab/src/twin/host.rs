//! What the twin reads from the host: `/proc/zoneinfo`, the `vm` sysctls, the CPU
//! topology and which CPUs this process may use.

use std::path::Path;

use pagealloc::Config;

use pagealloc::os::sysfs::HostTopology;
use pagealloc::os::zoneinfo::{KernelZoneinfo, PROC_ZONEINFO};

pub use super::layout::read_zoneinfo;
use super::layout::{HostCpuDesc, VmSysctls};
use super::{TwinError, TwinWorkload};

/// The host as the twin needs it.
#[derive(Clone, Debug)]
pub struct Host {
    /// `uname -r`.
    pub release: String,
    /// `/proc/zoneinfo` now.
    pub zoneinfo: KernelZoneinfo,
    /// `/proc/sys/vm`.
    pub vm: VmSysctls,
    /// CPUs with their node and cache slice.
    pub cpus: Vec<HostCpuDesc>,
}

impl Host {
    /// Reads everything, or says in one line why not.
    ///
    /// # Errors
    /// [`TwinError::Unsupported`] for a kernel older than 6.7 or a zoneinfo that does
    /// not parse; [`TwinError::Denied`] for a file that cannot be read.
    pub fn read() -> Result<Host, TwinError> {
        let zoneinfo = read_zoneinfo(Path::new(PROC_ZONEINFO))?;
        let release = kernel_release();
        check_auto_tuning(&zoneinfo, &release)?;
        let vm = VmSysctls::read()?;
        let topo = HostTopology::read()
            .map_err(|e| TwinError::Denied(format!("{e} (the CPU topology)")))?;
        Ok(Host {
            release,
            zoneinfo,
            vm,
            cpus: HostCpuDesc::from_topology(&topo),
        })
    }
}

/// Refuses a kernel without PCP high auto-tuning.
///
/// # Errors
/// [`TwinError::Unsupported`], naming the release.
pub fn check_auto_tuning(z: &KernelZoneinfo, release: &str) -> Result<(), TwinError> {
    if z.has_high_bounds() {
        Ok(())
    } else {
        Err(TwinError::Unsupported(format!(
            "kernel {release} shows no high_min/high_max in /proc/zoneinfo \
             (PCP high auto-tuning came with Linux 6.7): nothing to compare against"
        )))
    }
}

/// The config that models a kernel release (`uname -r`), and why; `None` when no preset
/// fits (older than 6.7: no PCP high auto-tuning) or the release does not parse. The
/// switches after 6.12 are docs/mechanisms.md §11's:
///
/// | release | config |
/// |---|---|
/// | 6.7 – 6.9 | `patch10` |
/// | 6.10 – 6.14 | `linux-6.12` |
/// | 6.15 | `linux-6.18` without the 6.16 free_high threshold and the batched decay |
/// | 6.16, 6.17, 6.18.0 – 6.18.6 | `linux-6.18` without the batched decay |
/// | 6.18.7 and later 6.18.y | `linux-6.18` |
/// | 6.19 and later | `linux-6.18` (the closest; later changes are not modelled) |
///
/// ```
/// use pagealloc_lab::twin::host::config_for_release;
///
/// let (c, _) = config_for_release("6.18.44-fc-v657").unwrap();
/// assert_eq!(c.to_string(), "linux-6.18");
/// let (c, _) = config_for_release("6.18.3").unwrap();
/// assert_eq!(c.to_string(), "linux-6.18,decay_batched=off");
/// assert_eq!(config_for_release("6.11.0-19-generic").unwrap().0.to_string(), "linux-6.12");
/// assert_eq!(config_for_release("6.8.0").unwrap().0.to_string(), "patch10");
/// assert!(config_for_release("6.6.30").is_none() && config_for_release("5.15.0").is_none());
/// assert!(config_for_release("unknown").is_none());
/// ```
pub fn config_for_release(release: &str) -> Option<(Config, &'static str)> {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    let major = it.next()??;
    let minor = it.next()??;
    let sub = it.next().flatten().unwrap_or(0);
    let v = (major, minor);
    let (name, why) = if v < (6, 7) {
        return None;
    } else if v < (6, 10) {
        ("patch10", "6.7-6.9: PCP high auto-tuning (the V3 series)")
    } else if v < (6, 15) {
        (
            "linux-6.12",
            "6.10-6.14: no PCP decision changed after 6.12 before 6.15",
        )
    } else if v == (6, 15) {
        (
            "linux-6.18,free_high_min_count=off,decay_batched=off",
            "6.15: claim-first fallbacks and refill modes, not yet the 6.16 free_high threshold",
        )
    } else if v < (6, 18) || (v == (6, 18) && sub < 7) {
        (
            "linux-6.18,decay_batched=off",
            "6.16-6.18.6: the batched decay came with 6.18.7",
        )
    } else if v == (6, 18) {
        (
            "linux-6.18",
            "6.18.7 and later: every switch of docs/mechanisms.md section 11",
        )
    } else {
        (
            "linux-6.18",
            "later than 6.18: the closest preset (changes after 6.18 are not modelled)",
        )
    };
    Some((name.parse().expect("the table's configs parse"), why))
}

/// `uname -r`, or "unknown".
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// CPUs this process may run on (`sched_getaffinity`), ascending.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: 1. a zeroed `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: 1. pid 0 is the calling thread; 2. `set` is a writable cpu_set_t of the
    // size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: 1. `c` is below CPU_SETSIZE; 2. `set` was filled by the kernel.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// CPUs this machine has (online or not: `sysconf(_SC_NPROCESSORS_CONF)`), at least 1.
pub fn configured_cpus() -> usize {
    // SAFETY: 1. `sysconf` reads a system value; no memory is passed.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// Pages of physical memory this machine has (`sysconf(_SC_PHYS_PAGES)`), at least 1.
pub fn physical_pages() -> u64 {
    // SAFETY: 1. as in `configured_cpus`.
    let n = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    u64::try_from(n).unwrap_or(1).max(1)
}

/// The CPUs of the run: `requested`, or every allowed CPU; for `xcpu` an even number
/// (pairs of allocating and freeing CPUs).
///
/// # Errors
/// [`TwinError::Usage`] for a CPU outside this process's affinity mask;
/// [`TwinError::Usage`] for a repeated CPU or too few for `xcpu`.
pub fn choose_cpus(requested: &[usize], w: TwinWorkload) -> Result<Vec<usize>, TwinError> {
    let allowed = allowed_cpus();
    let mut cpus = if requested.is_empty() {
        allowed.clone()
    } else {
        requested.to_vec()
    };
    let mut seen = cpus.clone();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != cpus.len() {
        return Err(TwinError::Usage(format!("--cpus repeats a CPU: {cpus:?}")));
    }
    if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
        return Err(TwinError::Usage(format!(
            "cannot pin to CPU {c}: this process may only run on {allowed:?}"
        )));
    }
    if cpus.is_empty() {
        return Err(TwinError::Denied(
            "sched_getaffinity failed: cannot tell which CPUs to pin to".into(),
        ));
    }
    if w == TwinWorkload::Xcpu {
        if cpus.len() < 2 {
            return Err(TwinError::Usage(
                "xcpu needs at least 2 CPUs (one allocates, the other frees)".into(),
            ));
        }
        cpus.truncate(cpus.len() / 2 * 2);
    }
    Ok(cpus)
}
