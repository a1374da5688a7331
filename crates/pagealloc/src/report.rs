//! Text renderings: `/proc/vmstat`-style counters and the `/proc/zoneinfo`-style zones and
//! pagesets.

use crate::allocator::Allocator;
use core::fmt::{self, Write};

/// `/proc/zoneinfo`-style rendering of an allocator (see [`Allocator::zoneinfo`]).
#[derive(Debug)]
pub struct ZoneinfoDisplay<'a>(&'a Allocator);

/// `/proc/vmstat`-style rendering (see [`Allocator::vmstat`]).
#[derive(Debug)]
pub struct VmstatDisplay<'a>(&'a Allocator);

impl Allocator {
    /// The zones and every CPU's pageset, formatted like `/proc/zoneinfo`.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(262_144, 1), Config::default())?;
    /// let text = a.zoneinfo().to_string();
    /// assert!(text.starts_with("Node 0, zone   Normal"));
    /// assert!(text.contains("managed  262144"));
    /// assert!(text.contains("batch:    63"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn zoneinfo(&self) -> ZoneinfoDisplay<'_> {
        ZoneinfoDisplay(self)
    }
    /// The counters, formatted like `/proc/vmstat`, with `nr_free_pages` and `nr_free_pcp`.
    ///
    /// ```
    /// use pagealloc::{Allocator, Config, Gfp, Layout};
    ///
    /// let a = Allocator::new(&Layout::single(16384, 1), Config::default())?;
    /// let _f = a.alloc_on(0, 0, Gfp::USER, None)?;
    /// let text = a.vmstat().to_string();
    /// assert!(text.lines().any(|l| l == "pgalloc 1"));
    /// assert!(text.lines().any(|l| l.starts_with("nr_free_pcp ")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn vmstat(&self) -> VmstatDisplay<'_> {
        VmstatDisplay(self)
    }
}

impl fmt::Display for VmstatDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "nr_free_pages {}", self.0.nr_free_pages())?;
        writeln!(f, "nr_free_pcp {}", self.0.nr_pcp_pages())?;
        write!(f, "{}", self.0.counters())
    }
}

impl fmt::Display for ZoneinfoDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0;
        for zi in 0..a.nr_zones() {
            let z = a.zone_info(zi).expect("zone_info: index in range");
            writeln!(f, "Node {}, zone {:>8}", z.node, z.name)?;
            writeln!(f, "  pages free     {}", z.free)?;
            writeln!(f, "        boost    {}", z.boost)?;
            writeln!(f, "        min      {}", z.wmark[0])?;
            writeln!(f, "        low      {}", z.wmark[1])?;
            writeln!(f, "        high     {}", z.wmark[2])?;
            writeln!(f, "        promo    {}", z.wmark[3])?;
            writeln!(f, "        spanned  {}", z.spanned)?;
            writeln!(f, "        managed  {}", z.managed)?;
            let mut s = alloc::string::String::new();
            for n in z.nr_free {
                let _ = write!(s, " {n}");
            }
            writeln!(f, "        free_area{s}")?;
            writeln!(
                f,
                "        flags    below_high={} reclaim_active={}",
                z.below_high as u8, z.reclaim_active as u8
            )?;
            writeln!(f, "  pagesets")?;
            for cpu in 0..a.nr_cpus() {
                let p = a.pcp_info(cpu, zi).expect("pcp_info: index in range");
                writeln!(f, "    cpu: {cpu}")?;
                writeln!(f, "              count:    {}", p.count)?;
                writeln!(f, "              high:     {}", p.high)?;
                writeln!(f, "              batch:    {}", p.batch)?;
                writeln!(f, "              high_min: {}", p.high_min)?;
                writeln!(f, "              high_max: {}", p.high_max)?;
            }
        }
        Ok(())
    }
}
