//! Host topology read from sysfs: CPUs, NUMA nodes and last-level caches.
//!
//! The sysfs root (normally `/sys/devices/system`) is a parameter so tests
//! can point [`HostTopology::read_from`] at a fixture tree. Files read,
//! relative to the root:
//!
//! - `cpu/possible` (else `cpu/present`, else the `cpu/cpuN` directories):
//!   the CPU ids; `cpu/online`: which of them are online (all, if missing);
//! - `cpu/cpuN/cache/indexM/{level,type,size,shared_cpu_list,shared_cpu_map}`:
//!   the last-level cache of each CPU;
//! - `node/nodeN/{cpulist,distance,meminfo}`: NUMA nodes. Without a `node`
//!   directory (a non-NUMA kernel) there is a single node 0 holding every
//!   CPU, at distance `[10]`, whose memory is `MemTotal` of `/proc/meminfo`.
//!
//! A missing optional file is not an error; a file that exists but cannot be
//! read or parsed is.

use std::borrow::ToOwned;
use std::format;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::string::String;
use std::vec;
use std::vec::Vec;

use core::fmt;

/// Where sysfs keeps the system devices on a real host.
const DEFAULT_ROOT: &str = "/sys/devices/system";
/// Memory fallback for non-NUMA kernels on a real host.
const PROC_MEMINFO: &str = "/proc/meminfo";
/// CPU ids at or above this are rejected as garbage (Linux's `NR_CPUS` tops
/// out at 8192); it also bounds what a hostile range like `0-4294967295`
/// can make us allocate.
const MAX_CPU_ID: usize = 1 << 16;
/// Distance of a node to itself (`LOCAL_DISTANCE` in Linux).
const LOCAL_DISTANCE: u32 = 10;

/// One possible CPU of the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCpu {
    /// Kernel CPU id.
    pub id: usize,
    /// NUMA node the CPU belongs to.
    pub node: usize,
    /// Whether the CPU is online (listed in `cpu/online`).
    pub online: bool,
    /// Size in bytes of the CPU's last-level data or unified cache; 0 if unknown.
    pub llc_bytes: u64,
    /// Number of CPUs sharing that cache (at least 1).
    pub llc_sharers: u32,
    /// Identifier of that cache: the lowest CPU id sharing it (the CPU's own
    /// id if unknown). CPUs with equal `llc_id` share one cache.
    pub llc_id: usize,
}

/// One NUMA node of the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNode {
    /// Kernel node id.
    pub id: usize,
    /// CPUs of this node, ascending.
    pub cpus: Vec<usize>,
    /// The node's `distance` row: its distance to each online node, in node
    /// order (`[10]` on a single-node host). Empty if the file is missing.
    pub distance: Vec<u32>,
    /// Memory of the node in bytes (`MemTotal`); 0 if unknown.
    pub mem_bytes: u64,
}

/// CPUs and NUMA nodes of the host, as sysfs reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTopology {
    /// Every possible CPU, ascending by id.
    pub cpus: Vec<HostCpu>,
    /// Every NUMA node, ascending by id; never empty.
    pub nodes: Vec<HostNode>,
}

/// Why the topology could not be read.
#[derive(Debug)]
pub enum TopologyError {
    /// A file or directory exists (or is required) but could not be read.
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file was read but its contents are not in the expected format.
    Parse {
        /// The file.
        path: PathBuf,
        /// The offending text (trimmed).
        text: String,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Self::Parse { path, text } => write!(f, "cannot parse {}: {text:?}", path.display()),
        }
    }
}

impl std::error::Error for TopologyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Parse { .. } => None,
        }
    }
}

impl HostTopology {
    /// Reads the running host's topology from `/sys/devices/system`
    /// (and `/proc/meminfo` on a non-NUMA kernel).
    pub fn read() -> Result<Self, TopologyError> {
        read_impl(Path::new(DEFAULT_ROOT), Path::new(PROC_MEMINFO))
    }

    /// Reads the topology from a sysfs tree rooted at `root` (the directory
    /// holding `cpu/` and `node/`).
    ///
    /// If `root` is `/sys/devices/system` this is [`HostTopology::read`].
    /// For any other root the non-NUMA memory fallback reads `root/meminfo`
    /// (same format as `/proc/meminfo`) instead of `/proc/meminfo`, so a
    /// fixture never depends on the machine running it.
    pub fn read_from(root: &Path) -> Result<Self, TopologyError> {
        let meminfo = if root == Path::new(DEFAULT_ROOT) {
            PathBuf::from(PROC_MEMINFO)
        } else {
            root.join("meminfo")
        };
        read_impl(root, &meminfo)
    }

    /// The share of its last-level cache one CPU may count on:
    /// `llc_bytes / llc_sharers`, as Linux's
    /// `update_per_cpu_data_slice_size_cpu` computes it. 0 if the CPU or
    /// its cache is unknown.
    pub fn per_cpu_llc_slice_bytes(&self, cpu: usize) -> u64 {
        self.cpus
            .binary_search_by_key(&cpu, |c| c.id)
            .ok()
            .map_or(0, |i| {
                let c = &self.cpus[i];
                c.llc_bytes
                    .checked_div(u64::from(c.llc_sharers))
                    .unwrap_or(0)
            })
    }
}

fn read_impl(root: &Path, proc_meminfo: &Path) -> Result<HostTopology, TopologyError> {
    let cpu_dir = root.join("cpu");

    let mut ids = read_cpulist(&cpu_dir.join("possible"))?.unwrap_or_default();
    if ids.is_empty() {
        ids = read_cpulist(&cpu_dir.join("present"))?.unwrap_or_default();
    }
    if ids.is_empty() {
        ids = numbered_entries(&cpu_dir, "cpu")?;
    }
    if ids.is_empty() {
        return Err(TopologyError::Io {
            path: cpu_dir.join("possible"),
            source: io::Error::new(
                io::ErrorKind::NotFound,
                "no CPUs: no cpu/possible, cpu/present or cpu/cpuN entries",
            ),
        });
    }
    let online = read_cpulist(&cpu_dir.join("online"))?;

    let nodes = read_nodes(root, proc_meminfo, &ids)?;

    let mut cpus = Vec::with_capacity(ids.len());
    for &id in &ids {
        let node = cpu_node(&cpu_dir, id, &nodes)?;
        let (llc_bytes, llc_sharers, llc_id) = read_llc(&cpu_dir, id)?;
        cpus.push(HostCpu {
            id,
            node,
            online: online
                .as_ref()
                .is_none_or(|list| list.binary_search(&id).is_ok()),
            llc_bytes,
            llc_sharers,
            llc_id,
        });
    }
    Ok(HostTopology { cpus, nodes })
}

/// The `node/nodeN` directories, or a single synthetic node 0 holding every
/// CPU when there are none.
fn read_nodes(
    root: &Path,
    proc_meminfo: &Path,
    cpus: &[usize],
) -> Result<Vec<HostNode>, TopologyError> {
    let node_dir = root.join("node");
    let ids = numbered_entries(&node_dir, "node")?;
    if ids.is_empty() {
        return Ok(vec![HostNode {
            id: 0,
            cpus: cpus.to_vec(),
            distance: vec![LOCAL_DISTANCE],
            mem_bytes: read_mem_total(proc_meminfo)?.unwrap_or(0),
        }]);
    }
    let mut nodes = Vec::with_capacity(ids.len());
    for id in ids {
        let dir = node_dir.join(format!("node{id}"));
        let distance_path = dir.join("distance");
        let distance = match read_optional(&distance_path)? {
            None => Vec::new(),
            Some(text) => text
                .split_whitespace()
                .map(|d| d.parse::<u32>().ok())
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| parse_error(&distance_path, &text))?,
        };
        nodes.push(HostNode {
            id,
            cpus: read_cpulist(&dir.join("cpulist"))?.unwrap_or_default(),
            distance,
            mem_bytes: read_mem_total(&dir.join("meminfo"))?.unwrap_or(0),
        });
    }
    Ok(nodes)
}

/// The node of `cpu`: the node whose `cpulist` holds it, else the node named
/// by a `cpu/cpuN/nodeM` link, else the first node.
fn cpu_node(cpu_dir: &Path, cpu: usize, nodes: &[HostNode]) -> Result<usize, TopologyError> {
    if let Some(n) = nodes.iter().find(|n| n.cpus.binary_search(&cpu).is_ok()) {
        return Ok(n.id);
    }
    let links = numbered_entries(&cpu_dir.join(format!("cpu{cpu}")), "node")?;
    Ok(links
        .into_iter()
        .find(|&l| nodes.iter().any(|n| n.id == l))
        .unwrap_or(nodes[0].id))
}

/// `(llc_bytes, llc_sharers, llc_id)` of `cpu`.
///
/// The last-level cache is the `cache/indexN` leaf with the highest `level`
/// whose `type` is `Data` or `Unified` (on a tie, the highest index — Linux
/// takes the last leaf). Without one: `(0, 1, cpu)`.
fn read_llc(cpu_dir: &Path, cpu: usize) -> Result<(u64, u32, usize), TopologyError> {
    let cache = cpu_dir.join(format!("cpu{cpu}")).join("cache");
    let mut best: Option<(u32, PathBuf)> = None;
    for index in numbered_entries(&cache, "index")? {
        let leaf = cache.join(format!("index{index}"));
        let Some(kind) = read_optional(&leaf.join("type"))? else {
            continue;
        };
        if !matches!(kind.trim(), "Data" | "Unified") {
            continue;
        }
        let level_path = leaf.join("level");
        let Some(text) = read_optional(&level_path)? else {
            continue;
        };
        let level: u32 = text
            .trim()
            .parse()
            .map_err(|_| parse_error(&level_path, &text))?;
        // Indices ascend, so `>=` lets the last leaf of a level win.
        if best.as_ref().is_none_or(|(l, _)| level >= *l) {
            best = Some((level, leaf));
        }
    }
    let Some((_, leaf)) = best else {
        return Ok((0, 1, cpu));
    };

    let size_path = leaf.join("size");
    let bytes = match read_optional(&size_path)? {
        None => 0,
        Some(text) => parse_size(&text).ok_or_else(|| parse_error(&size_path, &text))?,
    };

    let list_path = leaf.join("shared_cpu_list");
    let map_path = leaf.join("shared_cpu_map");
    let shared = if let Some(text) = read_optional(&list_path)? {
        Some(parse_cpulist(&text).ok_or_else(|| parse_error(&list_path, &text))?)
    } else if let Some(text) = read_optional(&map_path)? {
        Some(parse_cpumask(&text).ok_or_else(|| parse_error(&map_path, &text))?)
    } else {
        None
    };
    let (sharers, id) = match shared {
        Some(list) if !list.is_empty() => (u32::try_from(list.len()).unwrap_or(u32::MAX), list[0]),
        // An empty or missing list: the cache serves at least this CPU.
        _ => (1, cpu),
    };
    Ok((bytes, sharers, id))
}

/// Reads `path`; `Ok(None)` if it does not exist.
fn read_optional(path: &Path) -> Result<Option<String>, TopologyError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TopologyError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads a cpulist file; `Ok(None)` if it does not exist.
fn read_cpulist(path: &Path) -> Result<Option<Vec<usize>>, TopologyError> {
    match read_optional(path)? {
        None => Ok(None),
        Some(text) => parse_cpulist(&text)
            .map(Some)
            .ok_or_else(|| parse_error(path, &text)),
    }
}

/// Reads `MemTotal` (in bytes) from a meminfo file; `Ok(None)` if it does
/// not exist.
fn read_mem_total(path: &Path) -> Result<Option<u64>, TopologyError> {
    match read_optional(path)? {
        None => Ok(None),
        Some(text) => parse_mem_total(&text)
            .map(Some)
            .ok_or_else(|| parse_error(path, &text)),
    }
}

/// The N of every `<prefix>N` entry of `dir`, ascending; empty if `dir`
/// does not exist.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<usize>, TopologyError> {
    let io_error = |source| TopologyError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(e)),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let name = entry.map_err(io_error)?.file_name();
        let Some(digits) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        if let Some(id) = parse_id(digits) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

fn parse_error(path: &Path, text: &str) -> TopologyError {
    TopologyError::Parse {
        path: path.to_path_buf(),
        text: text.trim().to_owned(),
    }
}

/// A decimal CPU id below [`MAX_CPU_ID`] (digits only, no sign).
fn parse_id(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|&id| id < MAX_CPU_ID)
}

/// Parses Linux cpulist syntax (`bitmap_parselist`): comma-separated ids
/// and ranges, `"0-3,8,10-11"`, with optional `a-b:used/group` strides
/// (`"0-7:2/4"` = 0,1,4,5). Whitespace around the list is ignored; an
/// empty list is valid. Returns the ids ascending and deduplicated.
fn parse_cpulist(text: &str) -> Option<Vec<usize>> {
    let text = text.trim();
    let mut out = Vec::new();
    if text.is_empty() {
        return Some(out);
    }
    for chunk in text.split(',') {
        let (range, stride) = match chunk.split_once(':') {
            Some((range, stride)) => (range, Some(stride)),
            None => (chunk, None),
        };
        let (start, end) = match range.split_once('-') {
            Some((a, b)) => (parse_id(a)?, parse_id(b)?),
            None => {
                let id = parse_id(range)?;
                (id, id)
            }
        };
        if start > end {
            return None;
        }
        let (used, group) = match stride {
            None => (1, 1),
            Some(stride) => {
                let (used, group) = stride.split_once('/')?;
                let (used, group) = (parse_id(used)?, parse_id(group)?);
                if group == 0 || used > group {
                    return None;
                }
                (used, group)
            }
        };
        out.extend((start..=end).filter(|id| (id - start) % group < used));
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Parses a hex cpumask (`shared_cpu_map` style, `"00000000,0000000f"`,
/// most significant group first) into the ascending ids of its set bits.
fn parse_cpumask(text: &str) -> Option<Vec<usize>> {
    let text = text.trim();
    let mut out = Vec::new();
    let mut nibble = 0usize;
    for c in text.chars().rev() {
        if c == ',' {
            continue;
        }
        let value = c.to_digit(16)?;
        for bit in 0..4 {
            if value & (1 << bit) != 0 {
                let id = nibble * 4 + bit;
                if id >= MAX_CPU_ID {
                    return None;
                }
                out.push(id);
            }
        }
        nibble += 1;
    }
    (nibble > 0).then_some(out)
}

/// Parses a cache `size`: decimal bytes with an optional `K`, `M` or `G`
/// suffix (binary multiples, optionally followed by `B` or `iB`):
/// `"32768K"`, `"1024K"`, `"2M"`.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let shift = match suffix.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// `MemTotal` in bytes from `/proc/meminfo` (`"MemTotal: 123 kB"`) or a
/// node's meminfo (`"Node 0 MemTotal: 123 kB"`).
fn parse_mem_total(text: &str) -> Option<u64> {
    const KEY: &str = "MemTotal:";
    let line = text.lines().find(|l| l.contains(KEY))?;
    let rest = &line[line.find(KEY)? + KEY.len()..];
    let mut words = rest.split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match (words.next(), words.next()) {
        (None, None) => Some(value),
        (Some("kB"), None) => value.checked_mul(1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A sysfs-like tree in a unique temporary directory, removed on drop.
    struct Fixture {
        root: PathBuf,
    }

    impl Fixture {
        fn new(name: &str) -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let root = std::env::temp_dir().join(format!(
                "pagealloc-sysfs-{}-{name}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root).unwrap();
            Self { root }
        }

        fn write(&self, rel: &str, contents: &str) {
            let path = self.root.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, contents).unwrap();
        }

        fn cache(
            &self,
            cpu: usize,
            index: usize,
            level: u32,
            kind: &str,
            size: &str,
            shared: &str,
        ) {
            let dir = format!("cpu/cpu{cpu}/cache/index{index}");
            self.write(&format!("{dir}/level"), &format!("{level}\n"));
            self.write(&format!("{dir}/type"), &format!("{kind}\n"));
            self.write(&format!("{dir}/size"), &format!("{size}\n"));
            self.write(&format!("{dir}/shared_cpu_list"), &format!("{shared}\n"));
        }

        fn read(&self) -> Result<HostTopology, TopologyError> {
            HostTopology::read_from(&self.root)
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    /// 2 nodes x 2 CPUs; per CPU a private L1d/L1i/L2, and one 8M L3 for all 4.
    fn two_node_fixture() -> Fixture {
        let f = Fixture::new("two-node");
        f.write("cpu/possible", "0-3\n");
        f.write("cpu/present", "0-3\n");
        f.write("cpu/online", "0-3\n");
        for cpu in 0..4 {
            let me = cpu.to_string();
            f.cache(cpu, 0, 1, "Data", "32K", &me);
            f.cache(cpu, 1, 1, "Instruction", "32K", &me);
            f.cache(cpu, 2, 2, "Unified", "1024K", &me);
            f.cache(cpu, 3, 3, "Unified", "8192K", "0-3");
        }
        f.write("node/online", "0-1\n");
        f.write("node/node0/cpulist", "0-1\n");
        f.write("node/node0/distance", "10 20\n");
        f.write(
            "node/node0/meminfo",
            "Node 0 MemTotal:        1048576 kB\nNode 0 MemFree:          524288 kB\n",
        );
        f.write("node/node1/cpulist", "2-3\n");
        f.write("node/node1/distance", "20 10\n");
        f.write("node/node1/meminfo", "Node 1 MemTotal:        2097152 kB\n");
        f
    }

    #[test]
    fn two_nodes_shared_l3() {
        let f = two_node_fixture();
        let topo = f.read().unwrap();
        assert_eq!(topo.cpus.len(), 4);
        for (i, cpu) in topo.cpus.iter().enumerate() {
            assert_eq!(
                *cpu,
                HostCpu {
                    id: i,
                    node: i / 2,
                    online: true,
                    llc_bytes: 8 << 20,
                    llc_sharers: 4,
                    llc_id: 0,
                }
            );
            assert_eq!(topo.per_cpu_llc_slice_bytes(i), 2 << 20);
        }
        assert_eq!(topo.per_cpu_llc_slice_bytes(4), 0);
        assert_eq!(
            topo.nodes,
            vec![
                HostNode {
                    id: 0,
                    cpus: vec![0, 1],
                    distance: vec![10, 20],
                    mem_bytes: 1 << 30
                },
                HostNode {
                    id: 1,
                    cpus: vec![2, 3],
                    distance: vec![20, 10],
                    mem_bytes: 2 << 30
                },
            ]
        );
    }

    #[test]
    fn shared_cpu_map_and_offline_cpu() {
        let f = two_node_fixture();
        // CPU 3 offline: its cache directory is gone, as Linux removes it.
        f.write("cpu/online", "0-2\n");
        fs::remove_dir_all(f.root.join("cpu/cpu3/cache")).unwrap();
        // CPU 2 only has the hex mask (per-node L3 of 2 CPUs, 2M).
        fs::remove_file(f.root.join("cpu/cpu2/cache/index3/shared_cpu_list")).unwrap();
        f.write(
            "cpu/cpu2/cache/index3/shared_cpu_map",
            "00000000,0000000c\n",
        );
        f.write("cpu/cpu2/cache/index3/size", "2M\n");
        let topo = f.read().unwrap();
        let cpu2 = &topo.cpus[2];
        assert_eq!(
            (cpu2.llc_bytes, cpu2.llc_sharers, cpu2.llc_id),
            (2 << 20, 2, 2)
        );
        assert_eq!(topo.per_cpu_llc_slice_bytes(2), 1 << 20);
        let cpu3 = &topo.cpus[3];
        assert!(!cpu3.online);
        assert_eq!(
            (cpu3.llc_bytes, cpu3.llc_sharers, cpu3.llc_id, cpu3.node),
            (0, 1, 3, 1)
        );
        assert_eq!(topo.per_cpu_llc_slice_bytes(3), 0);
    }

    #[test]
    fn llc_is_highest_data_or_unified_level() {
        let f = Fixture::new("llc-pick");
        f.write("cpu/possible", "0\n");
        f.cache(0, 0, 1, "Data", "48K", "0");
        f.cache(0, 1, 2, "Unified", "2M", "0");
        // A higher-level instruction-only leaf must not be chosen.
        f.cache(0, 2, 3, "Instruction", "64M", "0");
        let topo = f.read().unwrap();
        assert_eq!(topo.cpus[0].llc_bytes, 2 << 20);
        assert_eq!(topo.cpus[0].llc_sharers, 1);
        // Leaves are enumerated by number, not by name order ("index10" > "index2").
        f.cache(0, 10, 3, "Unified", "32768K", "0");
        assert_eq!(f.read().unwrap().cpus[0].llc_bytes, 32 << 20);
    }

    #[test]
    fn non_numa_fallback() {
        let f = Fixture::new("non-numa");
        f.write("cpu/possible", "0-1\n");
        f.write("cpu/online", "0\n");
        let topo = f.read().unwrap();
        assert_eq!(
            topo.nodes,
            vec![HostNode {
                id: 0,
                cpus: vec![0, 1],
                distance: vec![10],
                mem_bytes: 0
            }]
        );
        assert!(topo.cpus[0].online && !topo.cpus[1].online);
        assert!(topo
            .cpus
            .iter()
            .all(|c| c.node == 0 && c.llc_bytes == 0 && c.llc_sharers == 1));
        // The fixture's stand-in for /proc/meminfo.
        f.write("meminfo", "MemTotal:        4096 kB\nMemFree:  1 kB\n");
        assert_eq!(f.read().unwrap().nodes[0].mem_bytes, 4 << 20);
    }

    #[test]
    fn cpu_ids_fall_back_to_present_then_directories() {
        let f = Fixture::new("cpu-ids");
        f.write("cpu/present", "0-2\n");
        assert_eq!(f.read().unwrap().cpus.len(), 3);
        fs::remove_file(f.root.join("cpu/present")).unwrap();
        f.write("cpu/cpu0/uevent", "");
        f.write("cpu/cpu5/uevent", "");
        f.write("cpu/cpufreq/x", "");
        let ids: Vec<usize> = f.read().unwrap().cpus.iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![0, 5]);
        assert!(f.read().unwrap().cpus.iter().all(|c| c.online));
    }

    #[test]
    fn missing_cpus_is_an_error() {
        let f = Fixture::new("empty");
        let err = f.read().unwrap_err();
        assert!(matches!(&err, TopologyError::Io { path, .. } if path.ends_with("cpu/possible")));
        assert!(err.to_string().contains("cpu/possible"));
        assert!(std::error::Error::source(&err).is_some());
    }

    #[test]
    fn unparsable_files_are_errors() {
        for (rel, bad) in [
            ("cpu/possible", "zero\n"),
            ("cpu/online", "0-\n"),
            ("cpu/cpu0/cache/index3/size", "lots\n"),
            ("cpu/cpu0/cache/index3/level", "three\n"),
            ("cpu/cpu0/cache/index3/shared_cpu_list", "3-0\n"),
            ("node/node1/distance", "20 ten\n"),
            ("node/node0/meminfo", "Node 0 MemFree: 1 kB\n"),
            ("node/node1/cpulist", "2,,3\n"),
        ] {
            let f = two_node_fixture();
            f.write(rel, bad);
            match f.read() {
                Err(TopologyError::Parse { path, text }) => {
                    assert!(path.ends_with(rel), "{rel}: {path:?}");
                    assert_eq!(text, bad.trim());
                }
                other => panic!("{rel}: expected a parse error, got {other:?}"),
            }
        }
    }

    #[test]
    fn cpulist_parsing() {
        let ok: &[(&str, &[usize])] = &[
            ("", &[]),
            ("\n", &[]),
            ("0", &[0]),
            ("0\n", &[0]),
            ("0-3,8,10-11", &[0, 1, 2, 3, 8, 10, 11]),
            (" 0-1 \n", &[0, 1]),
            ("3,1,1-2", &[1, 2, 3]),
            ("5-5", &[5]),
            ("0-7:2/4", &[0, 1, 4, 5]),
            ("2-9:1/3", &[2, 5, 8]),
            ("65535", &[65535]),
        ];
        for &(text, want) in ok {
            assert_eq!(parse_cpulist(text).as_deref(), Some(want), "{text:?}");
        }
        for text in [
            "3-1",
            "a",
            "1,,2",
            ",",
            "0,",
            "-1",
            "1-",
            "-",
            "+1",
            "0x1",
            "1 2",
            "0-3:0/0",
            "0-3:5/4",
            "0-3:1",
            "65536",
            "0-4294967295",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_cpulist(text), None, "{text:?}");
        }
    }

    #[test]
    fn cpumask_parsing() {
        assert_eq!(parse_cpumask("3\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpumask("00000000,00000003"), Some(vec![0, 1]));
        assert_eq!(parse_cpumask("00000001,80000000"), Some(vec![31, 32]));
        assert_eq!(parse_cpumask("F0"), Some(vec![4, 5, 6, 7]));
        assert_eq!(parse_cpumask("0"), Some(vec![]));
        assert_eq!(parse_cpumask(""), None);
        assert_eq!(parse_cpumask("xyz"), None);
    }

    #[test]
    fn size_and_meminfo_parsing() {
        assert_eq!(parse_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_size("1024K"), Some(1 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("48KiB"), Some(48 << 10));
        for bad in ["", "K", "12T", "1.5M", "-1K", "99999999999999999999G"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
        assert_eq!(parse_mem_total("MemTotal:  16 kB\n"), Some(16 << 10));
        assert_eq!(parse_mem_total("Node 3 MemTotal: 2 kB\n"), Some(2048));
        assert_eq!(parse_mem_total("MemFree: 2 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: 2 MB\n"), None);
    }

    #[test]
    fn real_sysfs_is_sane() {
        if !Path::new(DEFAULT_ROOT).join("cpu").exists() {
            return; // no sysfs here (not Linux, or a bare container)
        }
        let topo = HostTopology::read().unwrap();
        assert!(!topo.cpus.is_empty());
        assert!(!topo.nodes.is_empty());
        assert!(topo.cpus.iter().any(|c| c.online));
        assert!(topo.cpus.windows(2).all(|w| w[0].id < w[1].id));
        for cpu in &topo.cpus {
            assert!(topo.nodes.iter().any(|n| n.id == cpu.node), "{cpu:?}");
            assert!(cpu.llc_sharers >= 1, "{cpu:?}");
        }
        assert_eq!(
            topo,
            HostTopology::read_from(Path::new(DEFAULT_ROOT)).unwrap()
        );
    }
}
