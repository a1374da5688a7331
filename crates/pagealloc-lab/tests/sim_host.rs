//! `--machine host`: this machine as the simulator sees it, checked against what sysfs
//! and `/proc/zoneinfo` say, run through the simulator and the command line, and its
//! published DRAM latency against a pointer chase timed here. Each test skips, saying
//! so, on a machine without sysfs cache leaves or `/proc/zoneinfo`.

use std::path::Path;
use std::process::Command;

use pagealloc::os::sysfs::HostTopology;
use pagealloc::os::zoneinfo::{KernelZoneinfo, PROC_ZONEINFO};
use pagealloc_lab::sim::{self, Machine, SimOptions};
use pagealloc_lab::workload::{self, Scale};

/// This thread's CPU time, ns (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: 1. `t` is a writable timespec owned by this frame; 2. the clock id is a
    // constant the kernel knows. No lock: the call reads this thread's own clock.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Whether this machine shows what `host` reads; prints why not.
fn readable(test: &str) -> bool {
    let need = [
        "/sys/devices/system/cpu/cpu0/cache/index0/size",
        PROC_ZONEINFO,
    ];
    match need.iter().find(|p| !Path::new(p).exists()) {
        None => true,
        Some(p) => {
            eprintln!("{test}: skipped: {p} is not readable here (no sysfs or procfs)");
            false
        }
    }
}

fn sysfs_size(index: u32) -> Option<(String, String, u64)> {
    let d = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
    let r = |f: &str| std::fs::read_to_string(format!("{d}/{f}")).ok();
    let size = r("size")?;
    let s = size.trim();
    let bytes = s.trim_end_matches('K').parse::<u64>().ok()? << 10;
    Some((r("level")?.trim().into(), r("type")?.trim().into(), bytes))
}

/// The machine's CPUs, caches, LLC domains and zones are this machine's.
#[test]
fn host_is_this_machine() {
    if !readable("host_is_this_machine") {
        return;
    }
    let m = Machine::by_name("host").expect("host reads");
    println!("{}", m.description);
    let topo = HostTopology::read().unwrap();
    assert_eq!(m.name, "host");
    assert_eq!(m.cpus as usize, topo.cpus.len());
    assert_eq!(m.nodes as usize, topo.nodes.len());
    let llcs: std::collections::BTreeSet<usize> = topo.cpus.iter().map(|c| c.llc_id).collect();
    assert_eq!(m.sockets as usize, llcs.len());
    assert_eq!(m.llc_per_socket, topo.cpus[0].llc_bytes);
    for c in &topo.cpus {
        let same = topo.cpus.iter().filter(|d| d.llc_id == c.llc_id);
        for d in same {
            assert_eq!(m.socket_of(c.id as u32), m.socket_of(d.id as u32));
        }
    }
    let leaves: Vec<_> = (0..8).filter_map(sysfs_size).collect();
    let l1 = leaves
        .iter()
        .find(|(l, t, _)| l == "1" && t == "Data")
        .unwrap();
    let l2 = leaves.iter().find(|(l, _, _)| l == "2").unwrap();
    assert_eq!(m.caches.l1_bytes, l1.2);
    assert_eq!(m.caches.l2_bytes, l2.2);
    // The zones: every populated zone of zoneinfo, managed pages to the page.
    let zi = KernelZoneinfo::read_from(Path::new(PROC_ZONEINFO)).unwrap();
    let l = m.layout(1).unwrap();
    let ours: Vec<u64> = l
        .zones()
        .map(|(_, z)| z.pages - z.holes.iter().map(|h| h.1 - h.0).sum::<u64>())
        .collect();
    let theirs: Vec<u64> = zi.populated().map(|z| z.managed).collect();
    assert_eq!(ours, theirs, "managed pages per zone");
    assert_eq!(m.mem_bytes, theirs.iter().sum::<u64>() * 4096);
    // Scaling divides the spans; a scale that leaves a node under 64 MiB is refused.
    let half = m.layout(2).unwrap();
    let managed = |l: &pagealloc::Layout| -> u64 {
        l.zones()
            .map(|(_, z)| z.pages - z.holes.iter().map(|h| h.1 - h.0).sum::<u64>())
            .sum()
    };
    let (full, halved) = (managed(&l), managed(&half));
    assert!(
        halved.abs_diff(full / 2) <= 4 * l.nodes.len() as u64,
        "{full} / 2 vs {halved}"
    );
    assert!(m.layout(1 << 20).is_err());
    assert!(m.pages_per_node(0).is_err());
}

/// `sim` runs on `host`: deterministic, its zones the kernel's (DMA, DMA32, Normal…
/// each with its own lock), and the CLI's `list` and `sim --machine host` know it.
#[test]
fn simulator_runs_on_host() {
    if !readable("simulator_runs_on_host") {
        return;
    }
    let m = Machine::by_name("host").unwrap();
    let cpus = m.cpus.min(2);
    let w = workload::build(
        "page_fault1",
        Scale::Full,
        &[
            ("pages_per_loop".into(), "256".into()),
            ("loops".into(), "2".into()),
        ],
    )
    .unwrap();
    let mut o = SimOptions::new(m.clone(), "linux-6.12".parse().unwrap());
    o.cpus = Some(cpus);
    o.mem_scale = 8;
    let a = sim::run(&*w, &o).unwrap();
    let b = sim::run(&*w, &o).unwrap();
    assert_eq!(a.machine.as_deref(), Some("host"));
    assert!(a.trace_hash.is_some());
    assert_eq!(a.trace_hash, b.trace_hash, "host replays");
    assert!(a.score.unwrap() > 0.0);
    let list = Command::new(env!("CARGO_BIN_EXE_pagealloc"))
        .arg("list")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("host ") && text.contains("this machine"),
        "{text}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_pagealloc"))
        .args([
            "sim",
            "page_fault1",
            "--machine",
            "host",
            "--json",
            "--mem-scale",
            "8",
        ])
        .args(["--cpus", &cpus.to_string()])
        .args(["-p", "pages_per_loop=256", "-p", "loops=2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(row["machine"], "host");
    assert_eq!(
        row["trace_hash"].as_str(),
        a.trace_hash.as_deref(),
        "the CLI's run is the library's"
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_pagealloc"))
        .args([
            "sim",
            "page_fault1",
            "--machine",
            "host",
            "--cpus",
            "100000",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// The DRAM latency `host` takes from published figures, against a pointer chase timed
/// here: a random cyclic permutation of 64-byte lines over 256 MiB (8× any LLC this
/// lab models; every step a dependent load that misses the caches) on 2 MiB pages
/// where THP allows, the fastest of
/// three rounds of 2^20 steps, timed on this thread's CPU clock (the time it ran, not
/// the time other processes of a busy host took from it). The chase also pays what a
/// busy host's other processes take of the memory system, and any TLB misses left, so
/// it may read up to 2.5× the figure; below half of it, the figure would be wrong.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: timing")]
fn published_dram_latency_is_near_a_pointer_chase() {
    if !readable("published_dram_latency_is_near_a_pointer_chase") {
        return;
    }
    let m = Machine::by_name("host").unwrap();
    const LINES: usize = (256 << 20) / 64;
    // next[i] (in units of 8 u64 = one line) follows a random cycle (Sattolo's shuffle,
    // with a fixed xorshift stream).
    let mut order: Vec<usize> = (0..LINES).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..LINES).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % i as u64) as usize;
        order.swap(i, j);
    }
    let mut next = vec![0u64; LINES * 8];
    // 2 MiB pages where THP allows (`madvise` mode): the chase then measures the
    // memory, not 4 KiB page walks (which in a guest are two-dimensional).
    let (start, len) = (next.as_ptr() as usize, LINES * 64);
    let lo = start.next_multiple_of(2 << 20);
    let hi = (start + len) / (2 << 20) * (2 << 20);
    // SAFETY: 1. `[lo, hi)` lies inside `next`'s allocation, owned by this frame;
    // 2. MADV_HUGEPAGE changes only the page size the kernel backs the range with, not
    // its contents. No lock: the vector is this thread's. A refusal is harmless.
    let _ = unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    for w in 0..LINES {
        next[order[w] * 8] = (order[(w + 1) % LINES] * 8) as u64;
    }
    let steps = 1 << 20;
    let mut best = f64::MAX;
    let mut p = 0usize;
    for _ in 0..3 {
        let t0 = thread_cpu_ns();
        for _ in 0..steps {
            p = next[p] as usize;
        }
        best = best.min(thread_cpu_ns().saturating_sub(t0) as f64 / steps as f64);
    }
    std::hint::black_box(p);
    println!(
        "pointer chase over 256 MiB: {best:.1} ns per load; host's DRAM figure {:.1} ns ({})",
        m.caches.dram_local_ns, m.description
    );
    assert!(
        best > 0.5 * m.caches.dram_local_ns && best < 2.5 * m.caches.dram_local_ns,
        "chase {best:.1} ns vs figure {:.1} ns",
        m.caches.dram_local_ns
    );
}

/// A saved run's zones replay with their own managed memory (`StartState::zone_managed`,
/// `sim::host::host_managed`): this host's memory grows for hours after a boot with
/// `deferred_init=lazy`, and a zone's watermarks follow its managed pages.
#[test]
fn a_runs_managed_pages_set_the_host_zones() {
    if !readable("a_runs_managed_pages_set_the_host_zones") {
        return;
    }
    use pagealloc_lab::sim::host::host_managed;
    let managed = |m: &Machine| -> Vec<u64> {
        let h = m.host.expect("host shape");
        h.layout
            .nodes
            .iter()
            .flat_map(|n| &n.zones)
            .map(|z| z.pages - z.holes.iter().map(|h| h.1 - h.0).sum::<u64>())
            .collect()
    };
    let live = Machine::by_name("host").unwrap();
    let now = managed(&live);
    let fewer: Vec<u64> = now.iter().map(|&m| (m - m / 4).max(1)).collect();
    let then = host_managed(&fewer).unwrap();
    assert_eq!(managed(&then), fewer);
    let gone: u64 = now.iter().zip(&fewer).map(|(a, b)| a - b).sum();
    assert_eq!(live.mem_bytes - then.mem_bytes, gone * 4096);
    // The same figures again: the same machine; none: the host as read.
    assert_eq!(managed(&host_managed(&fewer).unwrap()), fewer);
    assert_eq!(managed(&host_managed(&now).unwrap()), now);
    assert_eq!(host_managed(&[]).unwrap().mem_bytes, live.mem_bytes);
}
