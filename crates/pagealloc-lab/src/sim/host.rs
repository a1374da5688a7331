//! `--machine host`: the machine this process runs on, as a simulator [`Machine`].
//!
//! # Design
//! What the kernel shows about the hardware is read, nothing is guessed:
//! - CPUs, their NUMA nodes and their last-level caches (size, which CPUs share each
//!   one) from sysfs, by the core's [`HostTopology`] (the reader the twin uses); each
//!   LLC is one of the simulator's "sockets" (LLC domains), numbered by the lowest CPU
//!   sharing it, so a CPU's LLC domain and its node come from the real sharing, not from
//!   an even split;
//! - the zones (kinds, spans, managed pages) from `/proc/zoneinfo` through the twin's
//!   [`crate::twin::layout::build`], so watermarks, `batch`, `high_min` and `high_max`
//!   are the kernel's to the page (`--mem-scale s` divides every span and hole by `s`);
//! - the L1 data cache and the L2 per core, and how many CPUs share a core (hardware
//!   threads: the CPUs listed in the L1D's `shared_cpu_list`), from
//!   `/sys/devices/system/cpu/cpu0/cache/index*` ([`read_private_caches`]);
//! - the core clock from `cpufreq/cpuinfo_max_freq`, else `/proc/cpuinfo`'s `cpu MHz`
//!   (a guest's TSC rate), rounded to 100 MHz so that a run replays;
//! - the CPU model (`vendor_id`, `cpu family`, `model`, `model name` of `/proc/cpuinfo`).
//!
//! What sysfs does not show (load-to-use latencies of each level, a core-to-core
//! transfer, DRAM, streaming parallelism) is taken from published figures for the CPU's
//! microarchitecture ([`published_latencies`], the source named per family); a family
//! without figures takes the `desktop-8` machine's, and the machine's description says
//! which. Published, not measured here, so that a seed replays exactly on every run;
//! `tests/sim_host.rs` times a pointer chase on this machine and checks the figures
//! against it.
//!
//! The cost model (fast-path instructions, trip costs, hand-offs) is the calibrated
//! Ice Lake model with its instruction costs scaled by the clock ratio, and the lock
//! hand-offs set to two core-to-core transfers (the lock's line and the zone's); it is
//! provisional until the simulator is calibrated on this machine against the kernel.
//!
//! The description is read once per process ([`Machine::host`] caches it).

use std::path::Path;
use std::sync::OnceLock;

use pagealloc::os::sysfs::HostTopology;

use super::machine::{
    CacheSpec, CostModel, HostShape, Machine, MachineError, DESKTOP_CACHES, ICX_CACHES, ICX_COST,
    SKX_CACHES, SPR_CACHES,
};
use crate::twin::{host as twin_host, layout as twin_layout, TwinError};

/// Where sysfs keeps the CPUs.
const SYS_CPU: &str = "/sys/devices/system/cpu";

/// Private caches of CPU 0 as sysfs lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrivateCaches {
    /// L1 data cache, bytes.
    pub l1d_bytes: u64,
    /// L2 (data or unified), bytes.
    pub l2_bytes: u64,
    /// CPUs sharing the L1D: hardware threads per core.
    pub threads_per_core: u32,
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

/// `32K`, `1024K`, `32M` or a plain byte count.
fn parse_size(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// How many CPUs a `shared_cpu_list` (`0-1,4`) names.
fn count_cpu_list(s: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in s.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                b.checked_sub(a)? + 1
            }
            None => {
                part.parse::<u32>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// Reads CPU 0's L1D and L2 from `root/cpu0/cache/index*` (`root`: normally
/// `/sys/devices/system/cpu`).
///
/// # Errors
/// A message naming what is missing (no L1D or L2 leaf, a size that does not parse).
pub fn read_private_caches(root: &Path) -> Result<PrivateCaches, String> {
    let dir = root.join("cpu0/cache");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (mut l1, mut l2) = (None, None);
    for e in entries.flatten() {
        let p = e.path();
        let (Some(level), Some(kind), Some(size)) = (
            read_trim(&p.join("level")),
            read_trim(&p.join("type")),
            read_trim(&p.join("size")),
        ) else {
            continue;
        };
        if kind == "Instruction" {
            continue;
        }
        let bytes = parse_size(&size).ok_or_else(|| format!("{}/size: {size:?}", p.display()))?;
        match level.as_str() {
            "1" => {
                let sharers = read_trim(&p.join("shared_cpu_list"))
                    .and_then(|s| count_cpu_list(&s))
                    .unwrap_or(1);
                l1 = Some((bytes, sharers));
            }
            "2" => l2 = Some(bytes),
            _ => {}
        }
    }
    let (l1d_bytes, threads_per_core) =
        l1.ok_or_else(|| format!("{}: no level-1 data cache listed", dir.display()))?;
    let l2_bytes = l2.ok_or_else(|| format!("{}: no level-2 cache listed", dir.display()))?;
    Ok(PrivateCaches {
        l1d_bytes,
        l2_bytes,
        threads_per_core,
    })
}

/// The CPU as `/proc/cpuinfo` names it (first processor).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuModel {
    /// `vendor_id`: `GenuineIntel`, `AuthenticAMD`…
    pub vendor: String,
    /// `cpu family`.
    pub family: u32,
    /// `model`.
    pub model: u32,
    /// `model name`.
    pub name: String,
    /// `cpu MHz` (the current clock, or a guest's TSC rate).
    pub mhz: Option<f64>,
}

impl CpuModel {
    /// Parses the first processor of a `/proc/cpuinfo` text.
    pub fn parse(text: &str) -> CpuModel {
        let mut m = CpuModel::default();
        for line in text.lines() {
            if line.trim().is_empty() && !m.vendor.is_empty() {
                break;
            }
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let v = v.trim();
            match k.trim() {
                "vendor_id" => m.vendor = v.to_owned(),
                "cpu family" => m.family = v.parse().unwrap_or(0),
                "model" => m.model = v.parse().unwrap_or(0),
                "model name" => m.name = v.to_owned(),
                "cpu MHz" => m.mhz = v.parse().ok(),
                _ => {}
            }
        }
        m
    }
}

/// The core clock, GHz: `cpufreq/cpuinfo_max_freq` (kHz) when the kernel has cpufreq,
/// else `/proc/cpuinfo`'s `cpu MHz`, rounded to 0.1 GHz either way (a run must replay);
/// 2.0 when neither is readable.
fn core_ghz(m: &CpuModel) -> f64 {
    let khz = read_trim(
        Path::new(SYS_CPU)
            .join("cpu0/cpufreq/cpuinfo_max_freq")
            .as_path(),
    )
    .and_then(|s| s.parse::<f64>().ok());
    let ghz = khz.map(|k| k / 1e6).or(m.mhz.map(|m| m / 1e3));
    ghz.filter(|g| g.is_finite() && *g > 0.1)
        .map_or(2.0, |g| (g * 10.0).round() / 10.0)
}

/// The published latencies for a CPU clocked at `ghz`: a [`CacheSpec`] whose cycle counts
/// and ns are the microarchitecture's (its sizes and clock are replaced by the host's;
/// an LLC published in cycles is converted at `ghz`), and the source.
pub fn published_latencies(m: &CpuModel, ghz: f64) -> (CacheSpec, &'static str) {
    match (m.vendor.as_str(), m.family, m.model) {
        // Zen 4 (Genoa, Bergamo, Raphael, Phoenix: family 19h models 10h-1Fh, 60h-7Fh,
        // A0h-AFh): L1D 4 cycles and L2 14 cycles load-to-use, L3 about 50 cycles
        // (AMD's Software Optimization Guide for the Zen 4 microarchitecture, pub.
        // 57647); a line modified in another core of the same CCX about 20 ns and in
        // another CCD about 80 ns, DRAM about 100 ns unloaded on a one-socket Genoa
        // (core-to-core and pointer-chase figures published for Genoa by Chips and
        // Cheese); 24 L1D miss buffers, 64 outstanding L2 misses per core (the same
        // guide).
        ("AuthenticAMD", 0x19, 0x10..=0x1f | 0x60..=0x7f | 0xa0..=0xaf) => (
            CacheSpec {
                l1_cycles: 4.0,
                l2_cycles: 14.0,
                llc_ns: 50.0 / ghz,
                peer_ns: 20.0,
                remote_cache_ns: 80.0,
                dram_local_ns: 100.0,
                dram_remote_ns: 140.0,
                mlp: 24.0,
                fill_buffers: 24,
                l2_misses: 64,
                ..DESKTOP_CACHES
            },
            "published figures for AMD Zen 4 (family 19h): AMD's Zen 4 optimization guide (L1D 4, L2 14, L3 ~50 cycles), Chips and Cheese's Genoa measurements (core-to-core 20/80 ns, DRAM 100 ns)",
        ),
        // Intel server cores the simulator already describes.
        ("GenuineIntel", 6, 0x8f | 0xcf) => (
            SPR_CACHES,
            "published figures for Sapphire/Emerald Rapids (the spr-2s-224 machine's)",
        ),
        ("GenuineIntel", 6, 0x6a | 0x6c) => (
            ICX_CACHES,
            "published figures for Ice Lake-SP (the icx-2s-128 machine's)",
        ),
        ("GenuineIntel", 6, 0x55) => (
            SKX_CACHES,
            "published figures for Skylake-SP/Cascade Lake (the skx-2s-112 machine's)",
        ),
        _ => (
            DESKTOP_CACHES,
            "no published figures for this CPU in the simulator: the desktop-8 machine's latencies",
        ),
    }
}

/// Reads this machine. See the module docs.
///
/// # Errors
/// A one-line reason: sysfs or `/proc/zoneinfo` not readable, a zone pagealloc has no
/// kind for, no L1D/L2 listed.
pub fn read_host() -> Result<Machine, String> {
    read_host_managed(None)
}

/// Sets each populated zone's `managed` pages of `zi` to `managed` (numbered as
/// [`crate::sim::start::zone_managed`] numbers them, each at most the zone's span);
/// `zi` stays as read when the counts of zones differ or a figure is 0.
fn set_managed(zi: &mut pagealloc::os::zoneinfo::KernelZoneinfo, managed: &[u64]) {
    let idx: Vec<usize> = zi
        .nodes()
        .into_iter()
        .flat_map(|n| {
            zi.zones
                .iter()
                .enumerate()
                .filter(move |(_, z)| z.node == n && z.populated())
                .map(|(i, _)| i)
        })
        .collect();
    if idx.len() != managed.len() || managed.contains(&0) {
        return;
    }
    for (&i, &m) in idx.iter().zip(managed) {
        let z = &mut zi.zones[i];
        z.managed = m.min(z.spanned);
    }
}

/// [`read_host`] with each zone's `managed` pages as given (`None`: as read now).
fn read_host_managed(managed: Option<&[u64]>) -> Result<Machine, String> {
    let topo = HostTopology::read().map_err(|e| format!("{e} (the CPU topology)"))?;
    let mut zi = twin_host::read_zoneinfo(Path::new(pagealloc::os::zoneinfo::PROC_ZONEINFO))
        .map_err(twin_message)?;
    if let Some(m) = managed {
        set_managed(&mut zi, m);
    }
    let vm = twin_layout::VmSysctls::read().map_err(twin_message)?;
    let descs = twin_layout::HostCpuDesc::from_topology(&topo);
    let mut layout = twin_layout::build(&zi, &vm, &descs)
        .map_err(twin_message)?
        .layout;
    // The simulator models the hardware: a CPU offline now is a CPU of the machine.
    for c in &mut layout.cpus {
        c.online = true;
    }
    let private = read_private_caches(Path::new(SYS_CPU))?;
    let cpu = CpuModel::parse(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default());
    let ghz = core_ghz(&cpu);
    let (published, source) = published_latencies(&cpu, ghz);
    // The LLC domains, numbered in order of their lowest CPU.
    let mut llcs: Vec<usize> = topo.cpus.iter().map(|c| c.llc_id).collect();
    llcs.sort_unstable();
    llcs.dedup();
    let node_ids: Vec<usize> = topo.nodes.iter().map(|n| n.id).collect();
    let cpus: Vec<(u32, u32)> = (0..layout.cpus.len())
        .map(|id| {
            let c = topo.cpus.iter().find(|c| c.id == id);
            let llc = c.map_or(0, |c| llcs.binary_search(&c.llc_id).unwrap_or(0));
            let node = c.map_or(0, |c| {
                node_ids.iter().position(|&n| n == c.node).unwrap_or(0)
            });
            (llc as u32, node as u32)
        })
        .collect();
    let llc_bytes = topo.cpus.iter().map(|c| c.llc_bytes).max().unwrap_or(0);
    let caches = CacheSpec {
        ghz,
        threads_per_core: private.threads_per_core.max(1),
        l1_bytes: private.l1d_bytes,
        l2_bytes: private.l2_bytes,
        // L1 and L2 hits are counted in cycles of the host's clock ([`CacheSpec::l1_ns`]).
        ..published
    };
    let mem: u64 = layout
        .zones()
        .map(|(_, z)| z.pages - z.holes.iter().map(|h| h.1 - h.0).sum::<u64>())
        .sum::<u64>()
        * pagealloc::PAGE_SIZE as u64;
    let n = cpus.len() as u32;
    let sockets = llcs.len().max(1) as u32;
    let nodes = layout.nodes.len() as u32;
    let description = format!(
        "this machine: {} ({} family {:#x} model {:#x}), {n} CPUs, {sockets} LLC domain(s) of {} MiB, {nodes} node(s), {} MiB managed, L1D {} KiB, L2 {} KiB per core, {} thread(s) per core, {ghz:.1} GHz; latencies: {source}",
        if cpu.name.is_empty() { "unknown CPU" } else { &cpu.name },
        cpu.vendor,
        cpu.family,
        cpu.model,
        llc_bytes >> 20,
        mem >> 20,
        private.l1d_bytes >> 10,
        private.l2_bytes >> 10,
        caches.threads_per_core,
    );
    let cost = host_cost(&caches);
    let shape = HostShape {
        cpus,
        layout,
        cpu_model: format!("{} ({} {}/{})", cpu.name, cpu.vendor, cpu.family, cpu.model),
        latency_source: source,
    };
    Ok(Machine {
        name: "host",
        // Leaked once per process: `Machine::host` caches the machine.
        description: Box::leak(description.into_boxed_str()),
        cpus: n,
        sockets,
        nodes,
        mem_bytes: mem,
        llc_per_socket: llc_bytes,
        cost,
        caches,
        host: Some(Box::leak(Box::new(shape))),
    })
}

/// The host's cost model: Ice Lake's calibrated model, its instruction costs
/// (`alloc_fast_ns`, `free_fast_ns`, `zone_check_ns`, the trips' fixed costs, per-line
/// cost) scaled by Ice Lake's clock over the host's, each lock hand-off two core-to-core
/// transfers (the lock's line and the zone's) within an LLC domain or across two. The
/// trips' fixed costs are this project's guest's own measurement
/// ([`super::machine::LIVE_TRIP_NS`]), which Ice Lake takes at the clocks' ratio.
pub fn host_cost(c: &CacheSpec) -> CostModel {
    let k = ICX_CACHES.ghz / c.ghz;
    CostModel {
        alloc_fast_ns: ICX_COST.alloc_fast_ns * k,
        free_fast_ns: ICX_COST.free_fast_ns * k,
        zone_check_ns: ICX_COST.zone_check_ns * k,
        refill_trip_ns: ICX_COST.refill_trip_ns * k,
        drain_trip_ns: ICX_COST.drain_trip_ns * k,
        locked_line_ns: ICX_COST.locked_line_ns * k,
        handoff_socket_ns: 2.0 * c.peer_ns,
        handoff_remote_ns: 2.0 * c.remote_cache_ns,
        ..ICX_COST
    }
}

fn twin_message(e: TwinError) -> String {
    match e {
        TwinError::Unsupported(m)
        | TwinError::Denied(m)
        | TwinError::Usage(m)
        | TwinError::Failed(m) => m,
    }
}

/// The host machine, read on first use and kept for the process.
///
/// # Errors
/// [`MachineError::Host`] with the reason it could not be read.
pub fn host() -> Result<Machine, MachineError> {
    static HOST: OnceLock<Result<Machine, String>> = OnceLock::new();
    HOST.get_or_init(read_host)
        .clone()
        .map_err(MachineError::Host)
}

/// The host machine with each zone's `managed` pages as a recording's start showed them
/// ([`crate::sim::start::StartState::zone_managed`]; empty, or another count of zones
/// than this host has: the host as it is now). A host's managed memory grows for hours
/// after a boot with `deferred_init=lazy`, and a zone's watermarks and free memory
/// follow it: a saved run replays as it ran only with its own. One machine per distinct
/// `managed` is kept for the process.
///
/// # Errors
/// As [`host`].
pub fn host_managed(managed: &[u64]) -> Result<Machine, MachineError> {
    type Kept = Vec<(Vec<u64>, Machine)>;
    static KEPT: std::sync::Mutex<Kept> = std::sync::Mutex::new(Vec::new());
    let live = host()?;
    if managed.is_empty() {
        return Ok(live);
    }
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, m)) = kept.iter().find(|(k, _)| k == managed) {
        return Ok(m.clone());
    }
    let m = read_host_managed(Some(managed)).map_err(MachineError::Host)?;
    kept.push((managed.to_vec(), m.clone()));
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_cpu_lists_parse() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("x"), None);
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-1"), Some(2));
        assert_eq!(count_cpu_list("0,56"), Some(2));
        assert_eq!(count_cpu_list("0-3,8-11"), Some(8));
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn cpuinfo_picks_the_first_processor_and_its_figures() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                    model name\t: AMD EPYC\ncpu MHz\t\t: 2596.134\n\nprocessor\t: 1\n\
                    vendor_id\t: GenuineIntel\n";
        let m = CpuModel::parse(text);
        assert_eq!(
            (m.vendor.as_str(), m.family, m.model),
            ("AuthenticAMD", 25, 17)
        );
        assert_eq!(m.name, "AMD EPYC");
        assert_eq!(m.mhz, Some(2596.134));
        assert!(published_latencies(&m, 2.6).1.contains("Zen 4"));
        let spr = CpuModel {
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 0x8f,
            ..CpuModel::default()
        };
        assert_eq!(published_latencies(&spr, 2.0).0, SPR_CACHES);
        assert!(published_latencies(&CpuModel::default(), 2.0)
            .1
            .contains("desktop-8"));
    }
}
