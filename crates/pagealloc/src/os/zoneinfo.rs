//! The kernel's own view of its zones and per-CPU pagesets: a parser for
//! `/proc/zoneinfo`.
//!
//! # Design
//! Only the fields the allocator's sizing depends on are kept: per zone the node, the
//! name, the free pages, the watermarks (`min`, `low`, `high` and `boost`), `spanned`,
//! `present`, `managed` and `start_pfn`; per CPU of a populated zone the pageset
//! (`count`, `high`, `batch`, and since Linux 6.7 `high_min` and `high_max`). The
//! per-node and per-zone vm statistics are skipped. The text is parsed line by line as
//! the kernel's `zoneinfo_show_print` writes it; a zone without pagesets (an unpopulated
//! one: Movable or Device with 0 managed pages) is kept with an empty pageset list.
//!
//! A line that belongs to a known field but does not hold a number is an error naming
//! the line, so a caller can say "cannot parse /proc/zoneinfo line N" instead of
//! silently comparing against zeros.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::string::{String, ToString};
use std::vec::Vec;

/// Where the running kernel shows its zones.
pub const PROC_ZONEINFO: &str = "/proc/zoneinfo";

/// One CPU's pageset of one zone, as `/proc/zoneinfo` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct KernelPageset {
    /// The CPU.
    pub cpu: usize,
    /// Pages on the CPU's lists (`pcp->count`).
    pub count: i64,
    /// The current limit (`pcp->high`).
    pub high: i64,
    /// Refill and drain chunk (`pcp->batch`).
    pub batch: i64,
    /// Lower bound of `high` (Linux 6.7+; `None` on older kernels).
    pub high_min: Option<i64>,
    /// Upper bound of `high` (Linux 6.7+; `None` on older kernels).
    pub high_max: Option<i64>,
}

/// One zone of one node.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KernelZone {
    /// The node.
    pub node: usize,
    /// The zone's name (`DMA`, `DMA32`, `Normal`, `Movable`, `Device`, …).
    pub name: String,
    /// Free pages in the buddy lists (`pages free`).
    pub free: u64,
    /// Watermark boost.
    pub boost: u64,
    /// The min watermark as printed (boost included).
    pub min: u64,
    /// The low watermark as printed (boost included).
    pub low: u64,
    /// The high watermark as printed (boost included).
    pub high: u64,
    /// Frames spanned, holes included.
    pub spanned: u64,
    /// Frames present (spanned minus holes).
    pub present: u64,
    /// Frames managed by the page allocator (present minus early reservations).
    pub managed: u64,
    /// First frame of the span (`None` for an unpopulated zone, which prints none).
    pub start_pfn: Option<u64>,
    /// Pagesets, one per possible CPU, in the order printed.
    pub pagesets: Vec<KernelPageset>,
}

impl KernelZone {
    /// Has pages (the kernel prints pagesets only for these).
    pub fn populated(&self) -> bool {
        self.managed > 0
    }

    /// The pageset of `cpu`.
    pub fn pageset(&self, cpu: usize) -> Option<&KernelPageset> {
        self.pagesets.iter().find(|p| p.cpu == cpu)
    }

    /// Pages on all CPUs' lists.
    pub fn pcp_pages(&self) -> i64 {
        self.pagesets.iter().map(|p| p.count).sum()
    }
}

/// All zones of `/proc/zoneinfo`, in the order printed (node by node, lowest zone first).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KernelZoneinfo {
    /// The zones.
    pub zones: Vec<KernelZone>,
}

/// Why `/proc/zoneinfo` could not be used.
#[derive(Debug)]
pub enum ZoneinfoError {
    /// The file could not be read (missing: not Linux; permission denied: a sandbox).
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A line of a known field holds something else than expected.
    Parse {
        /// 1-based line number.
        line: usize,
        /// The line, trimmed.
        text: String,
    },
    /// No zone header (`Node N, zone NAME`) was found.
    NoZones,
}

impl fmt::Display for ZoneinfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Self::Parse { line, text } => write!(f, "cannot parse zoneinfo line {line}: {text:?}"),
            Self::NoZones => write!(f, "no `Node N, zone NAME` header in zoneinfo"),
        }
    }
}

impl std::error::Error for ZoneinfoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl KernelZoneinfo {
    /// Reads and parses the running kernel's `/proc/zoneinfo`.
    pub fn read() -> Result<Self, ZoneinfoError> {
        Self::read_from(Path::new(PROC_ZONEINFO))
    }

    /// Reads and parses a zoneinfo file (a recorded snapshot, say).
    pub fn read_from(path: &Path) -> Result<Self, ZoneinfoError> {
        let text = fs::read_to_string(path).map_err(|source| ZoneinfoError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses the text of a zoneinfo file.
    pub fn parse(text: &str) -> Result<Self, ZoneinfoError> {
        let mut zones: Vec<KernelZone> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let bad = || ZoneinfoError::Parse {
                line: i + 1,
                text: line.trim().to_string(),
            };
            let w: Vec<&str> = line.split_whitespace().collect();
            if let ["Node", n, "zone", name] = w.as_slice() {
                let node = n.trim_end_matches(',').parse().map_err(|_| bad())?;
                zones.push(KernelZone {
                    node,
                    name: name.to_string(),
                    ..KernelZone::default()
                });
                continue;
            }
            // Fields before the first zone header (none in practice) are ignored.
            let Some(z) = zones.last_mut() else { continue };
            let num = |v: &str| v.parse::<i64>().map_err(|_| bad());
            let unum = |v: &str| v.parse::<u64>().map_err(|_| bad());
            match w.as_slice() {
                ["pages", "free", v] => z.free = unum(v)?,
                ["boost", v] => z.boost = unum(v)?,
                ["min", v] => z.min = unum(v)?,
                ["low", v] => z.low = unum(v)?,
                ["high", v] => z.high = unum(v)?,
                ["spanned", v] => z.spanned = unum(v)?,
                ["present", v] => z.present = unum(v)?,
                ["managed", v] => z.managed = unum(v)?,
                ["start_pfn:", v] => z.start_pfn = Some(unum(v)?),
                ["cpu:", v] => z.pagesets.push(KernelPageset {
                    cpu: v.parse().map_err(|_| bad())?,
                    ..KernelPageset::default()
                }),
                [field @ ("count:" | "high:" | "batch:" | "high_min:" | "high_max:"), v] => {
                    let p = z.pagesets.last_mut().ok_or_else(bad)?;
                    let v = num(v)?;
                    match *field {
                        "count:" => p.count = v,
                        "high:" => p.high = v,
                        "batch:" => p.batch = v,
                        "high_min:" => p.high_min = Some(v),
                        _ => p.high_max = Some(v),
                    }
                }
                _ => {}
            }
        }
        if zones.is_empty() {
            return Err(ZoneinfoError::NoZones);
        }
        Ok(KernelZoneinfo { zones })
    }

    /// Every populated zone's pagesets show `high_min` and `high_max`: a kernel with
    /// PCP high auto-tuning (Linux 6.7 or later).
    pub fn has_high_bounds(&self) -> bool {
        let mut sets = self.zones.iter().flat_map(|z| &z.pagesets).peekable();
        sets.peek().is_some() && sets.all(|p| p.high_min.is_some() && p.high_max.is_some())
    }

    /// The populated zones.
    pub fn populated(&self) -> impl Iterator<Item = &KernelZone> {
        self.zones.iter().filter(|z| z.populated())
    }

    /// The zone named `name` on `node`.
    pub fn zone(&self, node: usize, name: &str) -> Option<&KernelZone> {
        self.zones.iter().find(|z| z.node == node && z.name == name)
    }

    /// The node ids, ascending, without repeats.
    pub fn nodes(&self) -> Vec<usize> {
        let mut n: Vec<usize> = self.zones.iter().map(|z| z.node).collect();
        n.sort_unstable();
        n.dedup();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    const TWO: &str = "\
Node 0, zone   Normal
  pages free     100
        boost    0
        min      10
        low      12
        high     14
        spanned  2048
        present  2000
        managed  1900
  pagesets
    cpu: 0
              count:    5
              high:     20
              batch:    1
              high_min: 7
              high_max: 240
  vm stats threshold: 4
    cpu: 1
              count:    0
              high:     0
              batch:    1
              high_min: 7
              high_max: 240
  node_unreclaimable:  0
  start_pfn:           4096
Node 0, zone  Movable
  pages free     0
        managed  0
";

    #[test]
    fn parses_zones_and_pagesets() {
        let z = KernelZoneinfo::parse(TWO).unwrap();
        assert_eq!(z.zones.len(), 2);
        let n = &z.zones[0];
        assert_eq!((n.node, n.name.as_str(), n.free), (0, "Normal", 100));
        assert_eq!((n.min, n.low, n.high), (10, 12, 14));
        assert_eq!((n.spanned, n.present, n.managed), (2048, 2000, 1900));
        assert_eq!(n.start_pfn, Some(4096));
        assert_eq!(n.pagesets.len(), 2);
        assert_eq!(n.pageset(0).unwrap().count, 5);
        assert_eq!(n.pageset(1).unwrap().high_max, Some(240));
        assert_eq!(n.pcp_pages(), 5);
        assert!(z.has_high_bounds());
        assert_eq!(z.populated().count(), 1);
        assert_eq!(z.nodes(), [0]);
    }

    #[test]
    fn older_kernels_have_no_bounds() {
        let old: String = TWO
            .lines()
            .filter(|l| !l.contains("high_m"))
            .map(|l| format!("{l}\n"))
            .collect();
        let z = KernelZoneinfo::parse(&old).unwrap();
        assert!(!z.has_high_bounds());
        assert_eq!(z.zones[0].pageset(0).unwrap().high_min, None);
    }

    #[test]
    fn bad_numbers_and_empty_text_are_errors() {
        let bad = TWO.replace("count:    5", "count:    five");
        match KernelZoneinfo::parse(&bad) {
            Err(ZoneinfoError::Parse { line, text }) => {
                assert_eq!(line, 12);
                assert_eq!(text, "count:    five");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            KernelZoneinfo::parse("hello\n"),
            Err(ZoneinfoError::NoZones)
        ));
        assert!(
            KernelZoneinfo::read_from(Path::new("/nonexistent/zoneinfo"))
                .unwrap_err()
                .to_string()
                .starts_with("cannot read /nonexistent/zoneinfo")
        );
    }
}
