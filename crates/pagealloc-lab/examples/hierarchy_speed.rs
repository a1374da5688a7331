//! How fast the simulator's cache hierarchy classifies accesses: the simulator's budget
//! is ≥ 5 M page operations per second per core, each reporting a few metadata lines
//! and (a fault) one page touch.
//!
//! ```text
//! cargo run --release -p pagealloc-lab --example hierarchy_speed
//! ```
//! On spr-2s-224 (the 112 CPUs of socket 0, 512 GiB of frames), every CPU cycles
//! through its own 4096 frames (a pcp list and the pages it faults) with one metadata
//! line per frame (a dense key range) and a few shared lines (zone and list heads, in
//! the hash map). Prints the median over 5 rounds, in thread CPU time (this machine is
//! shared), of ns per single-line access, per 4 KiB page touch, and per page operation
//! as the simulator charges one (pcp head, two metadata lines, the page zeroed).

use std::hint::black_box;

use pagealloc_lab::sim::hierarchy::{Hierarchy, Span};
use pagealloc_lab::sim::Machine;

/// CPU time of this thread, ns.
fn cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: 1. `t` is a valid, writable timespec owned by this frame; 2. the clock id
    // is a constant every Linux supports. No lock is involved.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

const META: u64 = 1 << 56;
const WORKING_SET: u64 = 4096;
const N: u64 = 4_000_000;

fn main() {
    let m = Machine::by_name("spr-2s-224").expect("a built-in machine");
    let frames = m.mem_bytes / 4096;
    let mut h = Hierarchy::new(&m, frames).with_dense_lines(META, frames);
    let cpus = u64::from(m.cpus_per_socket());
    let frame = |cpu: u64, i: u64| (cpu << 20) | (i / cpus % WORKING_SET);
    let (mut line_ns, mut page_ns, mut op_ns) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..6 {
        let t = cpu_ns();
        for i in 0..N {
            let cpu = i % cpus;
            let key = if i % 4 == 3 {
                // A shared line: a zone's free-area head or a counter.
                (3 << 56) | ((i >> 2) % 16)
            } else {
                META | frame(cpu, i)
            };
            black_box(h.access(cpu as usize, key, 0, i & 1 == 0));
        }
        let l = (cpu_ns() - t) as f64 / N as f64;
        let t = cpu_ns();
        for i in 0..N {
            let cpu = i % cpus;
            let span = Span {
                page: frame(cpu, i),
                bytes: 4096,
                node: 0,
            };
            black_box(h.touch(cpu as usize, span, true));
        }
        let p = (cpu_ns() - t) as f64 / N as f64;
        // A page operation as the simulator charges it: the pcp list head, the page's
        // and its list neighbour's metadata lines, then the page zeroed.
        let t = cpu_ns();
        for i in 0..N / 4 {
            let cpu = i % cpus;
            let f = frame(cpu, i);
            let c = cpu as usize;
            black_box(h.access(c, (5 << 56) | cpu, 0, true));
            black_box(h.access(c, META | f, 0, true));
            black_box(h.access(c, META | (f + 1), 0, true));
            let span = Span {
                page: f,
                bytes: 4096,
                node: 0,
            };
            black_box(h.touch(c, span, true));
        }
        let o = (cpu_ns() - t) as f64 / (N / 4) as f64;
        // Round 0 warms the tables up (first touches fault their memory in).
        if round > 0 {
            line_ns.push(l);
            page_ns.push(p);
            op_ns.push(o);
        }
    }
    let (l, p, o) = (median(line_ns), median(page_ns), median(op_ns));
    println!(
        "{}: {cpus} CPUs of socket 0, {WORKING_SET} frames each",
        m.name
    );
    println!("single-line access: {l:.1} ns (median of 5 rounds of {N}, thread CPU time)");
    println!("4 KiB page touch:   {p:.1} ns");
    println!(
        "page operation (3 lines + 1 page): {o:.1} ns = {:.1} M page ops/s per core for \
         the hierarchy alone",
        1e3 / o
    );
    let c = h.counters();
    println!(
        "{} line accesses, {} page-data lines, cache miss {:.1} %",
        c.line_accesses(),
        c.data_accesses(),
        c.cache_miss_pct()
    );
}
