//! pagealloc's [`Layout`] and [`Config`] built from what the kernel shows about itself.
//!
//! # Design
//! Each populated zone of `/proc/zoneinfo` becomes a [`ZoneLayout`] of the same kind
//! spanning `[start_pfn, start_pfn + spanned)`; the frames the kernel does not manage
//! (holes and early reservations: `spanned - managed`) become one hole at the end of the
//! span, so `managed` — the input of every sizing formula (`zone_batchsize`,
//! `zone_highsize`, the watermarks) — is the kernel's to the page. Where the holes really
//! are does not change any sizing. Nodes are kept in id order; each CPU sits on its
//! sysfs node with its share of the last-level cache as
//! `update_per_cpu_data_slice_size_cpu` computes it (for `PCPF_FREE_HIGH_BATCH`).
//!
//! The config is `linux-6.12` with the kernel's `vm.min_free_kbytes`,
//! `vm.watermark_scale_factor` and `vm.percpu_pagelist_high_fraction`, and THP as
//! `/sys/kernel/mm/transparent_hugepage/enabled` says (it decides whether order 9 is
//! cached on the pagesets).

use std::io;
use std::path::Path;

use pagealloc::os::sysfs::HostTopology;
use pagealloc::os::zoneinfo::{KernelZoneinfo, ZoneinfoError};
use pagealloc::{Config, CpuLayout, Layout, NodeLayout, ZoneKind, ZoneLayout};
use serde::{Deserialize, Serialize};

use super::TwinError;

/// The `vm` sysctls that size zones and pagesets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmSysctls {
    /// `vm.min_free_kbytes`.
    pub min_free_kbytes: u64,
    /// `vm.watermark_scale_factor` (1/10000 of managed pages).
    pub watermark_scale_factor: u32,
    /// `vm.percpu_pagelist_high_fraction` (0: auto-tuning).
    pub percpu_pagelist_high_fraction: u32,
    /// Transparent huge pages not `[never]`.
    pub thp: bool,
}

fn read_num(path: &str) -> Result<u64, TwinError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            TwinError::Unsupported(format!("cannot read {path}: {e}"))
        } else {
            TwinError::Denied(format!("cannot read {path}: {e}"))
        }
    })?;
    text.trim()
        .parse()
        .map_err(|_| TwinError::Unsupported(format!("cannot parse {path}: {:?}", text.trim())))
}

impl VmSysctls {
    /// Reads `/proc/sys/vm` and the THP switch of this machine.
    ///
    /// # Errors
    /// A file that cannot be read or parsed.
    pub fn read() -> Result<VmSysctls, TwinError> {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| !s.contains("[never]"));
        Ok(VmSysctls {
            min_free_kbytes: read_num("/proc/sys/vm/min_free_kbytes")?,
            watermark_scale_factor: read_num("/proc/sys/vm/watermark_scale_factor")? as u32,
            percpu_pagelist_high_fraction: read_num("/proc/sys/vm/percpu_pagelist_high_fraction")?
                as u32,
            thp,
        })
    }
}

/// One CPU as the layout needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCpuDesc {
    /// Kernel CPU id.
    pub cpu: usize,
    /// Its node id.
    pub node: usize,
    /// Its share of the last-level cache, bytes.
    pub llc_slice_bytes: u64,
    /// Online.
    pub online: bool,
}

impl HostCpuDesc {
    /// Every possible CPU of a topology.
    pub fn from_topology(t: &HostTopology) -> Vec<HostCpuDesc> {
        t.cpus
            .iter()
            .map(|c| HostCpuDesc {
                cpu: c.id,
                node: c.node,
                llc_slice_bytes: t.per_cpu_llc_slice_bytes(c.id),
                online: c.online,
            })
            .collect()
    }
}

/// A layout and config mirroring the kernel's zones.
#[derive(Clone, Debug)]
pub struct BuiltLayout {
    /// The layout; node `i` is the `i`-th node id of zoneinfo, CPU `c` is kernel CPU `c`.
    pub layout: Layout,
    /// `linux-6.12` with the host's sysctls ([`BuiltLayout::with_config`] swaps the
    /// preset).
    pub config: Config,
    /// Per allocator zone index: (kernel node id, zone name).
    pub zones: Vec<(usize, String)>,
}

impl BuiltLayout {
    /// `base` (a preset and its switches) with the host's sysctls of this layout's
    /// config in place of `base`'s.
    ///
    /// # Errors
    /// [`TwinError::Unsupported`] when the result does not validate.
    pub fn with_config(mut self, base: Config) -> Result<BuiltLayout, TwinError> {
        let c = &self.config;
        let config = Config {
            min_free_kbytes: c.min_free_kbytes,
            watermark_scale_factor: c.watermark_scale_factor,
            high_fraction: c.high_fraction,
            thp: c.thp,
            ..base
        };
        config
            .validate()
            .map_err(|e| TwinError::Unsupported(format!("the host's vm sysctls: {e}")))?;
        self.config = config;
        Ok(self)
    }

    /// The allocator's index of the kernel's zone `name` on node `node`.
    pub fn zone_index(&self, node: usize, name: &str) -> Option<usize> {
        self.zones.iter().position(|(n, z)| *n == node && z == name)
    }
}

fn kind(name: &str) -> Option<ZoneKind> {
    Some(match name {
        "DMA" => ZoneKind::Dma,
        "DMA32" => ZoneKind::Dma32,
        "Normal" => ZoneKind::Normal,
        "Movable" => ZoneKind::Movable,
        _ => return None,
    })
}

/// Builds the layout and config.
///
/// # Errors
/// [`TwinError::Unsupported`] for a populated zone pagealloc has no kind for (HighMem,
/// Device), a zone without `start_pfn`, or a layout pagealloc refuses.
pub fn build(
    zi: &KernelZoneinfo,
    vm: &VmSysctls,
    cpus: &[HostCpuDesc],
) -> Result<BuiltLayout, TwinError> {
    let node_ids = zi.nodes();
    let mut layout = Layout {
        nodes: Vec::new(),
        cpus: Vec::new(),
    };
    let mut zones = Vec::new();
    for &n in &node_ids {
        let mut nl = NodeLayout {
            zones: Vec::new(),
            distance: Vec::new(),
        };
        for z in zi.populated().filter(|z| z.node == n) {
            let k = kind(&z.name).ok_or_else(|| {
                TwinError::Unsupported(format!(
                    "node {n} zone {} has pages but pagealloc has no such zone kind",
                    z.name
                ))
            })?;
            let start = z.start_pfn.ok_or_else(|| {
                TwinError::Unsupported(format!("node {n} zone {} shows no start_pfn", z.name))
            })?;
            if z.managed > z.spanned {
                return Err(TwinError::Unsupported(format!(
                    "node {n} zone {}: managed {} > spanned {}",
                    z.name, z.managed, z.spanned
                )));
            }
            let mut zl = ZoneLayout::new(k, start, z.spanned);
            if z.managed < z.spanned {
                zl.holes.push((start + z.managed, start + z.spanned));
            }
            nl.zones.push(zl);
            zones.push((n, z.name.clone()));
        }
        layout.nodes.push(nl);
    }
    let ncpus = cpus.iter().map(|c| c.cpu + 1).max().unwrap_or(0).max(
        zi.zones
            .iter()
            .flat_map(|z| &z.pagesets)
            .map(|p| p.cpu + 1)
            .max()
            .unwrap_or(0),
    );
    for id in 0..ncpus {
        let c = cpus.iter().find(|c| c.cpu == id);
        layout.cpus.push(CpuLayout {
            node: c
                .and_then(|c| node_ids.iter().position(|&n| n == c.node))
                .unwrap_or(0),
            llc_slice_bytes: c.map_or(0, |c| c.llc_slice_bytes),
            online: c.is_some_and(|c| c.online),
        });
    }
    layout
        .validate()
        .map_err(|e| TwinError::Unsupported(format!("{e} (from zoneinfo)")))?;
    let config = Config {
        min_free_kbytes: Some(vm.min_free_kbytes),
        watermark_scale_factor: vm.watermark_scale_factor,
        high_fraction: vm.percpu_pagelist_high_fraction,
        thp: vm.thp,
        ..Config::default()
    };
    config
        .validate()
        .map_err(|e| TwinError::Unsupported(format!("the host's vm sysctls: {e}")))?;
    Ok(BuiltLayout {
        layout,
        config,
        zones,
    })
}

/// [`build`] from a recorded zoneinfo file (a snapshot of this or another machine).
///
/// # Errors
/// As [`build`], and a file that cannot be read.
pub fn build_from_file(
    path: &Path,
    vm: &VmSysctls,
    cpus: &[HostCpuDesc],
) -> Result<BuiltLayout, TwinError> {
    let zi = read_zoneinfo(path)?;
    build(&zi, vm, cpus)
}

/// Reads and parses a zoneinfo file with the twin's error kinds.
///
/// # Errors
/// [`TwinError::Denied`] for a file that exists but cannot be read,
/// [`TwinError::Unsupported`] for a missing or unparsable one.
pub fn read_zoneinfo(path: &Path) -> Result<KernelZoneinfo, TwinError> {
    KernelZoneinfo::read_from(path).map_err(|e| match &e {
        ZoneinfoError::Io { source, .. } if source.kind() != io::ErrorKind::NotFound => {
            TwinError::Denied(e.to_string())
        }
        _ => TwinError::Unsupported(e.to_string()),
    })
}
