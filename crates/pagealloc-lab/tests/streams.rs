//! The stream workloads' flow control (netperf, lmbench): a blocked `Send` or `Recv`
//! sleeps, its wait is idle time, a wakeup costs what the executor charges, and the
//! socket buffer decides who waits. Shown through the rows' own columns (idle %, zone
//! lock %, CPU time, score), in the simulator and on real threads.

use pagealloc::Config;
use pagealloc_lab::sim::{self, Machine, SimOptions};
use pagealloc_lab::workload::overrides as kv;
use pagealloc_lab::workload::{self, Scale};
use pagealloc_lab::Row;

mod common;
use common::{predict_opts, predicted};

/// `name` with `params` on desktop-8 (4 pairs: the zone lock is far from saturated, so
/// the pairs' own flow decides their pace), linux-6.12, seed 1, with `cost` overrides.
fn desktop(name: &str, params: &[(&str, &str)], cost: &str) -> Row {
    let mut p = vec![("pairs", "4")];
    p.extend_from_slice(params);
    let w = workload::build(name, Scale::Laptop, &kv(&p)).unwrap();
    let machine = Machine::by_name("desktop-8").unwrap();
    let mut cm = machine.cost;
    cm.apply(cost).unwrap();
    let mut o = SimOptions::new(machine, "linux-6.12".parse::<Config>().unwrap());
    o.seed = 1;
    o.cost = Some(cm);
    sim::run(&*w, &o).unwrap_or_else(|e| panic!("{name} {params:?} {cost}: {e}"))
}

/// `w` on two unpinned threads of the real allocator (no latency, no sampling, 16 Ki
/// frames).
fn on_two_threads(w: &dyn pagealloc_lab::workload::Workload) -> Row {
    pagealloc_lab::exec::run_named(
        w,
        "pagealloc",
        &Config::default(),
        &pagealloc_lab::exec::ExecOptions {
            latency: false,
            sample_ms: 0,
            pin: false,
            ..pagealloc_lab::exec::ExecOptions::new(2)
        },
        Some(1 << 14),
    )
    .expect("threads run it")
    .row()
}

fn idle(r: &Row) -> f64 {
    r.extra["idle_pct"]
}

fn lock(r: &Row) -> f64 {
    r.zone_lock_pct.expect("pagealloc has a zone-lock column")
}

/// CPU time per unit of work (message or byte), ns.
fn cpu_per_unit(r: &Row) -> f64 {
    r.extra["cpu_time_s"] * 1e9 / (r.score.unwrap() * r.extra["elapsed_s"])
}

/// A socket buffer of one message (20 KiB: a 10 KiB window) makes the sender wait for
/// every message to be read and the receiver for every message to be written: the pair
/// idles more, takes the zone lock less often per second (a smaller share of its CPU
/// time waits for it) and moves fewer messages.
#[test]
fn netperf_a_smaller_socket_buffer_idles_more() {
    let n = [("messages", "1500")];
    let big = desktop("netperf", &n, "");
    let small = desktop("netperf", &[n[0], ("rcvbuf_bytes", "20480")], "");
    println!(
        "netperf rcvbuf 208 KiB: idle {:.1} %, lock {:.2} %, {:.0} msg/s; 20 KiB: idle {:.1} %, lock {:.2} %, {:.0} msg/s",
        idle(&big),
        lock(&big),
        big.score.unwrap(),
        idle(&small),
        lock(&small),
        small.score.unwrap()
    );
    assert!(
        idle(&small) > idle(&big) + 15.0,
        "{} vs {}",
        idle(&small),
        idle(&big)
    );
    assert!(
        lock(&small) < lock(&big),
        "{} vs {}",
        lock(&small),
        lock(&big)
    );
    assert!(small.score.unwrap() < 0.8 * big.score.unwrap());
}

/// lmbench: the default 208 KiB send buffer holds four 64 KiB chunks, and a sleeping
/// writer is woken only once a quarter of it is free of chunks, i.e. the queue is
/// empty: writer and reader take turns. A 1 MiB buffer (16 chunks, woken at 3 left)
/// keeps both busy: less idle, a larger zone-lock share, more bytes per second.
#[test]
fn lmbench_the_default_socket_buffer_makes_the_pair_take_turns() {
    let n = [("chunks", "300")];
    let default = desktop("lmbench", &n, "");
    let big = desktop("lmbench", &[n[0], ("sndbuf_bytes", "1048576")], "");
    println!(
        "lmbench sndbuf 208 KiB: idle {:.1} %, lock {:.2} %, {:.3e} B/s; 1 MiB: idle {:.1} %, lock {:.2} %, {:.3e} B/s",
        idle(&default),
        lock(&default),
        default.score.unwrap(),
        idle(&big),
        lock(&big),
        big.score.unwrap()
    );
    assert!(
        idle(&default) > idle(&big) + 8.0,
        "{} vs {}",
        idle(&default),
        idle(&big)
    );
    assert!(lock(&default) < lock(&big));
    assert!(default.score.unwrap() < big.score.unwrap());
}

/// Each sleep costs the sleeper a wakeup's latency (idle) and a context switch (CPU
/// time), and the waker the wakeup: with the one-message buffer every message sleeps,
/// so turning the costs off raises the score and lowers CPU time and idle % per message.
#[test]
fn wakeups_cost_idle_time_and_cpu_time() {
    let n = [("messages", "1500"), ("rcvbuf_bytes", "20480")];
    let charged = desktop("netperf", &n, "");
    let free = desktop("netperf", &n, "wake_ns=0,wakeup_ns=0,switch_ns=0");
    println!(
        "netperf 1-message buffer, wakeups charged: {:.0} ns CPU/msg, idle {:.1} %, {:.0} msg/s; free: {:.0} ns, {:.1} %, {:.0} msg/s",
        cpu_per_unit(&charged),
        idle(&charged),
        charged.score.unwrap(),
        cpu_per_unit(&free),
        idle(&free),
        free.score.unwrap()
    );
    assert!(charged.score.unwrap() < free.score.unwrap());
    assert!(idle(&charged) > idle(&free));
    // At least one switch (500 ns on desktop-8) per message more CPU time.
    assert!(cpu_per_unit(&charged) > cpu_per_unit(&free) + 400.0);
}

/// On real threads a blocked `Recv` sleeps on a condition variable: a receiver whose
/// sender works 200 µs per message spends that time off the CPU, so about half of the
/// pair's time is idle (spinning, it would be none).
#[test]
fn a_sleeping_receiver_is_idle_on_threads() {
    let w = workload::by_name(
        "netperf",
        &kv(&[
            ("pairs", "1"),
            ("messages", "200"),
            ("send_protocol_ns", "200000"),
        ]),
    )
    .unwrap();
    let r = on_two_threads(&*w);
    println!("threads, 200 µs sender: idle {:.1} %", idle(&r));
    assert!(idle(&r) > 35.0, "idle {:.1} %", idle(&r));
}

/// TCP over loopback (`frag_bytes` = 32 KiB, as the live kernel allocates a TCP stream:
/// one order-3 page fragment per 32 KiB): 16 KiB writes allocate one order-3 block per
/// two writes and nothing else, and the score still counts writes; SCTP (the default)
/// allocates one order-2 block per 10 KB message.
#[test]
fn netperf_tcp_allocates_one_order3_fragment_per_32_kib() {
    let tcp = desktop(
        "netperf",
        &[
            ("messages", "1000"),
            ("message_bytes", "16384"),
            ("frag_bytes", "32768"),
        ],
        "",
    );
    assert_eq!(tcp.extra["alloc_blocks_o3"], 4.0 * 500.0);
    assert!(!tcp.extra.contains_key("alloc_blocks_o2"));
    let writes = tcp.score.unwrap() * tcp.extra["elapsed_s"];
    assert!((writes - 4000.0).abs() < 1.0, "{writes}");
    let sctp = desktop("netperf", &[("messages", "1000")], "");
    assert_eq!(sctp.extra["alloc_blocks_o2"], 4000.0);
    assert!(!sctp.extra.contains_key("alloc_blocks_o3"));
}

/// TCP's fragments freed on the sender's CPU (`sender_free_pct`): the receiver hands
/// back that share of the blocks after copying them out and the sender frees them, in
/// the dry run (every op, no time) and in the simulator, on real threads too; every
/// message is still copied in and out once and counted once.
#[test]
fn netperf_sender_frees_its_share_of_the_fragments() {
    use pagealloc_lab::workload::DryRun;
    let p = kv(&[
        ("pairs", "1"),
        ("messages", "800"),
        ("message_bytes", "16384"),
        ("frag_bytes", "32768"),
        ("sender_free_pct", "75"),
    ]);
    let w = workload::build("netperf", Scale::Laptop, &p).unwrap();
    let d = DryRun::new(2, 1).run(&*w).unwrap();
    // 400 fragments: 300 freed by the sender (CPU 0), 100 by the receiver.
    assert_eq!(d.per_cpu[0].frees[3], 300);
    assert_eq!(d.per_cpu[1].frees[3], 100);
    assert_eq!(d.per_cpu[0].allocs[3], 400);
    assert_eq!(
        w.work_units(&pagealloc_lab::workload::OpCounts::sum(&d.per_cpu)),
        800.0
    );
    let r = desktop(
        "netperf",
        &[
            ("messages", "800"),
            ("message_bytes", "16384"),
            ("frag_bytes", "32768"),
            ("sender_free_pct", "75"),
        ],
        "",
    );
    assert_eq!(r.extra["free_blocks_o3"], 4.0 * 400.0);
    let writes = r.score.unwrap() * r.extra["elapsed_s"];
    assert!((writes - 3200.0).abs() < 1.0, "{writes}");
    let t = on_two_threads(&*w);
    assert_eq!(t.extra["pgalloc"], t.extra["pgfree"]);
    assert_eq!(t.extra["pgalloc"], 400.0 * 8.0);
}

/// lmbench with `params` on desktop-8's first `cpus` CPUs (one pair), linux-6.12, seed 1.
fn one_pair(cpus: u32, params: &[(&str, &str)]) -> Row {
    let mut p = vec![("pairs", "1"), ("chunks", "400")];
    p.extend_from_slice(params);
    let w = workload::build("lmbench", Scale::Laptop, &kv(&p)).unwrap();
    let mut o = SimOptions::new(
        Machine::by_name("desktop-8").unwrap(),
        "linux-6.12".parse::<Config>().unwrap(),
    );
    o.seed = 1;
    o.cpus = Some(cpus);
    sim::run(&*w, &o).unwrap_or_else(|e| panic!("lmbench {cpus} {params:?}: {e}"))
}

/// With the ends on two CPUs, the copies cost what the lines' moves between the cores
/// cost beyond the hierarchy's charge, on the lines it serves from the other core's
/// cache: the reader copies out lines the writer has just written, every one from the
/// writer's cache, so each 64 KiB chunk's CPU time rises by 64 × the copy-out term; the
/// writer's copy into refilled blocks crosses only for the lines the reader's cache
/// still holds, so the copy-in term adds at most 64 × its rate, and the pair moves fewer
/// bytes per second. With both ends on one CPU nothing moves between cores: the terms
/// cost nothing and the run is the same.
#[test]
fn cross_cpu_copies_cost_per_kib_only_across_cpus() {
    let cpu_per_chunk = |r: &Row| r.extra["cpu_time_s"] * 1e9 / 400.0;
    let out = [("cross_copy_out_ns_per_kib", "50")];
    let terms = [("cross_copy_in_ns_per_kib", "100"), out[0]];
    let two = one_pair(2, &[]);
    let two_out = one_pair(2, &out);
    let two_x = one_pair(2, &terms);
    let extra_out = cpu_per_chunk(&two_out) - cpu_per_chunk(&two);
    let extra_in = cpu_per_chunk(&two_x) - cpu_per_chunk(&two_out);
    println!(
        "lmbench 1 pair on 2 CPUs: {:.0} ns CPU per chunk; the copy-out term +{extra_out:.0} \
         (64 × 50 = 3 200 expected), the copy-in term +{extra_in:.0} (at most 64 × 100)",
        cpu_per_chunk(&two),
    );
    assert!((extra_out - 3_200.0).abs() < 0.05 * 3_200.0, "{extra_out}");
    assert!(
        extra_in > 0.5 * 6_400.0 && extra_in < 1.02 * 6_400.0,
        "{extra_in}"
    );
    assert!(two_x.score.unwrap() < two.score.unwrap());
    let one = one_pair(1, &[]);
    let one_x = one_pair(1, &terms);
    assert_eq!(one.extra["cpu_time_s"], one_x.extra["cpu_time_s"]);
    assert_eq!(one.trace_hash, one_x.trace_hash);
}

/// TCP over loopback on two CPUs: the reader hands the fragments back to the writer's
/// CPU, which frees what has come back after each write without waiting (the deferred
/// free list its softirq empties). The writer, faster than the reader, sleeps only when
/// the 4 MiB buffer is full (the live writer: 0.003-0.004 sleeps per write), not once
/// every ten writes waiting for a fragment to come back (0.093 when it took them back
/// blocking), and so pays fewer wakeups and switches: 9.4 µs of CPU per write (the
/// quiet kernel's least of seven per session: 8.2-9.8).
#[test]
fn tcp_writer_frees_returned_fragments_without_waiting() {
    let f = predicted("tcp_stream", 2);
    println!(
        "tcp_stream 2 CPUs: {:.2} µs CPU/write, idle {:.1} %, sleeps/write writer {:.4} reader {:.4}, order-3 freed {:.3}/write",
        f.cpu_us_per_op, f.idle_pct, f.sleeps_per_op[0], f.sleeps_per_op[1], f.free_per_op[3]
    );
    assert!(f.sleeps_per_op[0] < 0.02, "{:?}", f.sleeps_per_op);
    // Woken at two thirds of the buffer (`sk_stream_write_space`), it sleeps at most once
    // per third of it: 43 messages of 2 writes.
    assert!(f.sleeps_per_op[0] <= 1.0 / 86.0, "{:?}", f.sleeps_per_op);
    assert!(f.cpu_us_per_op < 11.0, "{}", f.cpu_us_per_op);
    assert!(
        (f.free_per_op[3] - 0.5).abs() < 1e-9,
        "{}",
        f.free_per_op[3]
    );
}

/// Every fragment handed back and a socket buffer of one or two messages: the writer
/// waits on the reader's full inbox while the reader hands blocks back to the writer's
/// inbox. Neither may wait on the other forever: the simulator reports a deadlock as
/// an error, and the threads executor is given a deadline.
#[test]
fn tcp_hand_back_never_deadlocks() {
    for rcvbuf in ["1", "65536", "131072", "212992"] {
        let p = [
            ("messages", "600"),
            ("message_bytes", "16384"),
            ("frag_bytes", "32768"),
            ("sender_free_pct", "100"),
            ("rcvbuf_bytes", rcvbuf),
        ];
        let r = desktop("netperf", &p, "");
        assert_eq!(r.extra["free_blocks_o3"], 4.0 * 300.0, "rcvbuf {rcvbuf}");
        let mut q = vec![("pairs", "1")];
        q.extend_from_slice(&p);
        let w = workload::build("netperf", Scale::Laptop, &kv(&q)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            let t = on_two_threads(&*w);
            let _ = tx.send(t);
        });
        let t = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("rcvbuf {rcvbuf}: the threads stalled"));
        h.join().unwrap();
        assert_eq!(t.extra["pgalloc"], t.extra["pgfree"]);
        assert_eq!(t.extra["pgalloc"], 300.0 * 8.0);
    }
}

/// AF_UNIX sends a 64 KiB write as two skbs (`UNIX_SKB_FRAGS_SZ`: 32 KiB of fragments
/// each, the order-3 block in the first, orders 2, 1, 0 in the second) and wakes the
/// reader for each: a reader faster than its writer sleeps twice per write, where one
/// skb per write lets it sleep once. Counted by the simulator's own wakeups.
#[test]
fn lmbench_two_skbs_per_write_wake_the_reader_twice() {
    let slow_writer = [("send_protocol_ns", "40000"), ("recv_protocol_ns", "0")];
    let sleeps = |skb: &str| {
        let mut p = slow_writer.to_vec();
        p.push(("skb_frag_bytes", skb));
        let r = one_pair(2, &p);
        (
            r.extra.get("sleeps_cpu0").copied().unwrap_or(0.0) / 400.0,
            r.extra.get("sleeps_cpu1").copied().unwrap_or(0.0) / 400.0,
        )
    };
    let (w1, r1) = sleeps("0");
    let (w2, r2) = sleeps("32768");
    println!(
        "sleeps per write, writer / reader: one skb {w1:.3} / {r1:.3}, two skbs {w2:.3} / {r2:.3}"
    );
    assert!((r1 - 1.0).abs() < 0.02, "{r1}");
    assert!((r2 - 2.0).abs() < 0.02, "{r2}");
    assert!(w1 < 0.01 && w2 < 0.01, "{w1} {w2}");
}

/// TCP over loopback with the ends on two CPUs: the writer's CPU does
/// `recv_on_sender_pct` of the receive protocol's work (it transmits its segments
/// itself and its softirq receives them). The dry run counts every op: that share of
/// the reader's `Compute` moves to the writer's CPU, exactly, and the sum stays. In the
/// simulator the same move shows in the CPUs' `Compute` (`compute_s_cpu{N}`), and the
/// reader, the slower end, keeps up better: more writes per second, and the writer
/// waits less for it (less idle).
/// With both ends on one CPU nothing moves: the run is the same.
#[test]
fn tcp_receive_work_moves_to_the_writer_only_across_cpus() {
    use pagealloc_lab::workload::DryRun;
    let params = |pct: &'static str| {
        vec![
            ("pairs", "1"),
            ("messages", "800"),
            ("message_bytes", "16384"),
            ("frag_bytes", "32768"),
            ("sender_free_pct", "100"),
            ("send_protocol_ns", "1410"),
            ("recv_protocol_ns", "5040"),
            ("recv_on_sender_pct", pct),
        ]
    };
    let build = |pct| workload::build("netperf", Scale::Laptop, &kv(&params(pct))).unwrap();
    let (w0, w25) = (build("0"), build("25"));
    let (d0, d25) = (
        DryRun::new(2, 1).run(&*w0).unwrap(),
        DryRun::new(2, 1).run(&*w25).unwrap(),
    );
    // 800 writes × 5 040 ns × 25 % = 1 008 000 ns move from CPU 1 to CPU 0.
    let moved = 800 * 5_040 / 4;
    assert_eq!(d25.per_cpu[0].compute_ns, d0.per_cpu[0].compute_ns + moved);
    assert_eq!(d25.per_cpu[1].compute_ns + moved, d0.per_cpu[1].compute_ns);
    let run = |pct, cpus| {
        let w = build(pct);
        let mut o = SimOptions::new(
            Machine::by_name("desktop-8").unwrap(),
            "linux-6.12".parse::<Config>().unwrap(),
        );
        o.seed = 1;
        o.cpus = Some(cpus);
        sim::run(&*w, &o).unwrap_or_else(|e| panic!("netperf {pct}% {cpus}: {e}"))
    };
    let (s0, s25) = (run("0", 2), run("25", 2));
    let c = |r: &Row, cpu: u32| r.extra[&format!("compute_s_cpu{cpu}")];
    println!(
        "tcp 2 CPUs, Compute writer / reader µs per write: {:.2} / {:.2} → {:.2} / {:.2}; writes/s {:.0} → {:.0}; idle {:.1} → {:.1} %",
        c(&s0, 0) * 1e6 / 800.0,
        c(&s0, 1) * 1e6 / 800.0,
        c(&s25, 0) * 1e6 / 800.0,
        c(&s25, 1) * 1e6 / 800.0,
        s0.score.unwrap(),
        s25.score.unwrap(),
        idle(&s0),
        idle(&s25)
    );
    let ns = |x: f64| (x * 1e9).round() as i64;
    assert_eq!(ns(c(&s25, 0)) - ns(c(&s0, 0)), moved as i64);
    assert_eq!(ns(c(&s0, 1)) - ns(c(&s25, 1)), moved as i64);
    assert!(s25.score.unwrap() > s0.score.unwrap());
    assert!(idle(&s25) < idle(&s0));
    // `predict` sets the measured share (55 %): the writer is now the slower end, and
    // the reader sleeps as the quiet kernel's does (0.05-0.24 times per write), not
    // never.
    let f = predicted("tcp_stream", 2);
    assert!(
        (0.03..0.3).contains(&f.sleeps_per_op[1]),
        "{:?}",
        f.sleeps_per_op
    );
    let (o0, o25) = (run("0", 1), run("25", 1));
    assert_eq!(o0.trace_hash, o25.trace_hash);
    assert_eq!(o0.extra["cpu_time_s"], o25.extra["cpu_time_s"]);
    assert_eq!(c(&o0, 0), c(&o25, 0));
}

/// TCP `netperf` (one pair of 16 KiB writes, 32 KiB fragments) with `params` on
/// desktop-8's first `cpus` CPUs, linux-6.12, seed 1.
fn tcp_pair(cpus: u32, params: &[(&str, &str)]) -> Row {
    let mut p = vec![
        ("pairs", "1"),
        ("messages", "8000"),
        ("message_bytes", "16384"),
        ("frag_bytes", "32768"),
    ];
    p.extend_from_slice(params);
    let w = workload::build("netperf", Scale::Laptop, &kv(&p)).unwrap();
    let mut o = SimOptions::new(
        Machine::by_name("desktop-8").unwrap(),
        "linux-6.12".parse::<Config>().unwrap(),
    );
    o.seed = 1;
    o.cpus = Some(cpus);
    sim::run(&*w, &o).unwrap_or_else(|e| panic!("netperf {cpus} {params:?}: {e}"))
}

/// TCP's small blocks and the writer's refills, as the live two-CPU stream has them
/// (docs/predict.md): the writer's CPU takes a new order-1 slab page of the skb caches
/// now and then (`slab_every_writes`) and the reader's CPU gives it back; and the
/// fragments the reader frees itself (100 − `sender_free_pct` %) leave the writer's
/// pageset, which refills. On one CPU the slab objects are freed where they were taken:
/// no slab page. Counted by the allocator: order-1 blocks allocated and freed, refill
/// trips.
#[test]
fn tcp_slab_pages_and_reader_frees_refill_the_writers_pageset() {
    let all_back = tcp_pair(2, &[("sender_free_pct", "100")]);
    let some_kept = tcp_pair(
        2,
        &[("sender_free_pct", "96"), ("slab_every_writes", "512")],
    );
    let e = |r: &Row, k: &str| r.extra.get(k).copied().unwrap_or(0.0);
    println!(
        "tcp 2 CPUs, 8000 writes: order-1 blocks {} / {}, refill trips {} → {} ({} → {} pages)",
        e(&some_kept, "alloc_blocks_o1"),
        e(&some_kept, "free_blocks_o1"),
        e(&all_back, "pcp_refill"),
        e(&some_kept, "pcp_refill"),
        e(&all_back, "pcp_refill_pages"),
        e(&some_kept, "pcp_refill_pages"),
    );
    // One slab page per 256 messages of two writes: 4 000 messages, 15 pages.
    assert_eq!(e(&all_back, "alloc_blocks_o1"), 0.0);
    assert_eq!(e(&some_kept, "alloc_blocks_o1"), 15.0);
    assert_eq!(e(&some_kept, "free_blocks_o1"), 15.0);
    assert_eq!(e(&some_kept, "free_blocks_o3"), 4_000.0);
    // 4 % of 4 000 fragments freed on the reader's CPU: the writer's pageset refills.
    assert!(
        e(&some_kept, "pcp_refill") > e(&all_back, "pcp_refill") + 10.0,
        "{} {}",
        e(&some_kept, "pcp_refill"),
        e(&all_back, "pcp_refill")
    );
    let one = tcp_pair(
        1,
        &[("sender_free_pct", "96"), ("slab_every_writes", "512")],
    );
    assert_eq!(e(&one, "alloc_blocks_o1"), 0.0);
    assert_eq!(e(&one, "free_blocks_o3"), 4_000.0);
    // `predict`'s two-CPU stream carries the measured rates, its one-CPU stream none.
    let f2 = predicted("tcp_stream", 2);
    assert!(
        (f2.alloc_per_op[1] - 1.0 / 512.0).abs() < 1e-9,
        "{:?}",
        f2.alloc_per_op
    );
    assert_eq!(f2.alloc_per_op[1], f2.free_per_op[1]);
    // The reader's 1 %: 82 of 8 192 fragments, 12 trips of 7 blocks per 16 384 writes.
    assert!(f2.refills_per_op > 5e-4, "{}", f2.refills_per_op);
    assert_eq!(predicted("tcp_stream", 1).alloc_per_op[1], 0.0);
}

/// TCP's rule of where a segment's receive work runs (`recv_arrival_pct`): where it
/// arrives, on the writer's CPU, when the reader is asleep waiting for data; from the
/// socket's backlog, on the reader's CPU, when the reader is inside its receive. A
/// reader slower than its writer (more receive work than the writer's send work) is
/// always inside its receive: it never sleeps and does the arrival work itself. A faster
/// one sleeps for every write, and its writer does that work: the CPUs' `Compute`
/// (`compute_s_cpu{N}`) and the reader's sleeps (`sleeps_cpu1`) show it. Without the
/// rule (`recv_arrival_pct` 0) the work stays on the reader either way; with both ends
/// on one CPU nothing moves.
#[test]
fn tcp_receive_work_runs_where_the_reader_is() {
    let writes = 8000.0;
    // Per write: `send_ns` on the writer; 4 µs of receive work, all arriving (`pct`).
    let pair = |cpus, send_ns: &'static str, pct: &'static str| {
        tcp_pair(
            cpus,
            &[
                ("sender_free_pct", "100"),
                ("send_protocol_ns", send_ns),
                ("recv_protocol_ns", "4000"),
                ("recv_arrival_pct", pct),
            ],
        )
    };
    let c = |r: &Row, cpu: u32| r.extra[&format!("compute_s_cpu{cpu}")] * 1e9 / writes;
    let sleeps = |r: &Row| r.extra.get("sleeps_cpu1").copied().unwrap_or(0.0) / writes;
    // Per write `Compute` besides the protocol work: the system call (200 ns); a
    // message carries two writes (32 KiB fragments).
    let (lagging, lagging0) = (pair(2, "500", "100"), pair(2, "500", "0"));
    let (keeping_up, keeping_up0) = (pair(2, "12000", "100"), pair(2, "12000", "0"));
    println!(
        "reader lagging: sleeps/write {:.3}, Compute writer / reader {:.0} / {:.0} ns per write (rule off {:.0} / {:.0}); \
         keeping up: sleeps/write {:.3}, {:.0} / {:.0} (rule off {:.0} / {:.0})",
        sleeps(&lagging),
        c(&lagging, 0),
        c(&lagging, 1),
        c(&lagging0, 0),
        c(&lagging0, 1),
        sleeps(&keeping_up),
        c(&keeping_up, 0),
        c(&keeping_up, 1),
        c(&keeping_up0, 0),
        c(&keeping_up0, 1),
    );
    // Lagging: no sleeps, and the reader does the whole receive work (as without the
    // rule).
    assert!(sleeps(&lagging) < 0.01, "{}", sleeps(&lagging));
    assert!(c(&lagging, 1) > 4_000.0, "{}", c(&lagging, 1));
    assert!(c(&lagging, 0) < 1_000.0, "{}", c(&lagging, 0));
    // Keeping up: a sleep per message (two writes) at least, and the writer does the
    // receive work of nearly every message; the reader does only its system call.
    assert!(sleeps(&keeping_up) > 0.45, "{}", sleeps(&keeping_up));
    assert!(
        c(&keeping_up, 0) > 12_000.0 + 3_600.0,
        "{}",
        c(&keeping_up, 0)
    );
    assert!(c(&keeping_up, 1) < 700.0, "{}", c(&keeping_up, 1));
    // Without the rule the keeping-up reader does it all.
    assert!(c(&keeping_up0, 1) > 4_000.0, "{}", c(&keeping_up0, 1));
    // The work is moved, never made or lost: the two CPUs' sum is the rule-off sum.
    for (on, off) in [(&lagging, &lagging0), (&keeping_up, &keeping_up0)] {
        let sum = |r: &Row| c(r, 0) + c(r, 1);
        assert!((sum(on) - sum(off)).abs() < 1.0, "{} {}", sum(on), sum(off));
    }
    // Both ends on one CPU: the rule changes nothing.
    let (one, one0) = (pair(1, "12000", "100"), pair(1, "12000", "0"));
    assert_eq!(one.trace_hash, one0.trace_hash);
    // On threads, with real sleeps, the stream runs to its end as well.
    let w = workload::build(
        "netperf",
        Scale::Laptop,
        &kv(&[
            ("pairs", "1"),
            ("messages", "2000"),
            ("message_bytes", "16384"),
            ("frag_bytes", "32768"),
            ("sender_free_pct", "96"),
            ("recv_arrival_pct", "100"),
        ]),
    )
    .unwrap();
    assert!(on_two_threads(&*w).score.unwrap() > 0.0);
}

/// TCP with both ends on one CPU (`turn_messages` 0): the writer fills its buffer and
/// sleeps; the reader runs until the write-space rule wakes the writer at two thirds
/// (`sk_stream_write_space`), and the woken writer preempts it, so the reader never
/// empties the queue. 4 000 messages through a 128-message buffer woken at 85: a first
/// fill of 128, then a hand-over each way per 43 messages (counted as the hand-overs'
/// `Compute`: 1 ms each here), not per 128. `predict`'s one-CPU stream keeps its send
/// buffer and the reader's receive queue in flight (154 fragments), as the live writer
/// does (152-233 at its peak): from an empty pageset it refills their pages, not 50's.
#[test]
fn tcp_one_cpu_writer_preempts_the_reader_at_the_write_space_wakeup() {
    let pair = |switch_ns: &'static str| {
        tcp_pair(
            1,
            &[("rcvbuf_bytes", "8388608"), ("shared_switch_ns", switch_ns)],
        )
    };
    let handovers =
        (pair("1000000").extra["cpu_time_s"] - pair("0").extra["cpu_time_s"]) * 1e9 / 1e6;
    let expected = 2.0 * (4_000.0 - 128.0) / 43.0;
    println!("tcp 1 CPU: {handovers:.1} hand-overs ({expected:.1} expected; 62 if the reader emptied the buffer)");
    assert!((handovers - expected).abs() < 3.0, "{handovers}");
    let f = predicted("tcp_stream", 1);
    let refill_pages = f.refills_per_op * f.pages_per_refill * 16_384.0;
    println!("predict tcp_stream 1 CPU: {refill_pages:.0} pages refilled");
    assert!(refill_pages > 150.0 * 8.0, "{refill_pages}");
}

/// `predict`'s tcp_stream (netperf with the program's size and the measured work,
/// `predict::sim_workload`) on `host`'s first two CPUs from the simulator's own start,
/// its writer paying `wake_ns` per wakeup and its reader running `wakeup_ns` later.
fn tcp_on_host(wake_ns: u32, wakeup_ns: u32) -> Row {
    use pagealloc_lab::predict::{self, work};
    let size = predict::default_size("tcp_stream").unwrap();
    let (wl, ov) = predict::sim_workload("tcp_stream", 2, size).unwrap();
    let w = workload::build(wl, Scale::Full, &ov).unwrap();
    let machine = sim::host::host_managed(&[]).unwrap();
    let mut cm = machine.cost;
    let switch_ns = work::SWITCH_NS;
    cm.apply(&format!(
        "wake_ns={wake_ns},switch_ns={switch_ns},wakeup_ns={wakeup_ns}"
    ))
    .unwrap();
    let mut o = SimOptions::new(machine, "linux-6.18".parse::<Config>().unwrap());
    o.cost = Some(cm);
    o.cpus = Some(2);
    sim::run(&*w, &o).unwrap_or_else(|e| panic!("tcp_stream {wake_ns}: {}", e.error))
}

/// TCP's writer wakes its reader from its softirq (`tcp_data_queue` →
/// `sock_def_readable`), 0.82 of AF_UNIX's wake path per sleep in profiles alternated
/// between the two (predict/work.rs, `TCP_WAKE_NS`): `predict` charges TCP's writer
/// `TCP_WAKE_NS` per wakeup inside the same 15 µs until the reader runs, and the
/// other streams `WAKE_NS`. And the writer's CPU does no receive work that follows
/// the reader's sleeps (`TCP_RECV_ARRIVAL_PCT` 0: beyond its wake path the writer's
/// CPU spent 0.00-0.38 µs per reader sleep on the data segments): a reader woken later
/// sleeps less and its writer's `Compute` stays the same, while with the data's receive
/// at arrival on the writer's CPU (15 %) it follows the sleeps.
#[test]
fn tcp_writer_pays_its_own_wake_path_per_reader_sleep() {
    use pagealloc_lab::predict::{self, work};
    assert_eq!(work::TCP_WAKE_NS + work::TCP_WAKEUP_NS, 15_000);
    let opts = predict_opts("tcp_stream", 2);
    let by_predict =
        predict::simulate_row(&opts, "linux-6.18", &Default::default(), Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
    let tcp = tcp_on_host(work::TCP_WAKE_NS, work::TCP_WAKEUP_NS);
    let unix_wake = tcp_on_host(work::WAKE_NS, work::WAKEUP_NS);
    let late = tcp_on_host(work::TCP_WAKE_NS, 3 * work::TCP_WAKEUP_NS);
    let us = |r: &Row, k: &str| r.extra.get(k).copied().unwrap_or(0.0) * 1e6 / 16_384.0;
    let (busy, sleeps) = (
        |r: &Row| us(r, "busy_s_cpu0"),
        |r: &Row| us(r, "sleeps_cpu1") / 1e6,
    );
    println!(
        "tcp_stream 2 CPUs, writer µs/write {:.3} (AF_UNIX's wake {:.3}); reader sleeps/write {:.3} → {:.3} woken later, writer Compute {:.4} → {:.4}",
        busy(&tcp),
        busy(&unix_wake),
        sleeps(&tcp),
        sleeps(&late),
        us(&tcp, "compute_s_cpu0"),
        us(&late, "compute_s_cpu0")
    );
    assert_eq!(by_predict.trace_hash, tcp.trace_hash);
    assert_eq!(by_predict.extra["cpu_time_s"], tcp.extra["cpu_time_s"]);
    // AF_UNIX's wake path would cost TCP's writer more.
    assert!(busy(&tcp) < busy(&unix_wake));
    // The reader woken later: fewer sleeps, the writer's `Compute` unchanged.
    assert!(sleeps(&late) < 0.8 * sleeps(&tcp));
    assert_eq!(tcp.extra["compute_s_cpu0"], late.extra["compute_s_cpu0"]);
}

/// TCP's reader frees a consumed fragment itself only when the writer CPU's deferred
/// list is full (`skb_attempt_defer_free`), which the quiet kernel's did for 0.3-1.4 %
/// of them (`TCP_SENDER_FREE_PCT` 99): the writer's CPU refills what the reader frees
/// there, one order-3 block for each, 4.4e-4-9.8e-4 trips of 56 pages per write in six
/// quiet `predict` sessions (2026-11-28 02:20-08:24 UTC), and the reader's pageset rises
/// by them (262-664 pages), where the simulator's reader freeing 4 % refilled 2.1e-3 and
/// rose 1 854-1 972.
#[test]
fn tcp_reader_frees_a_hundredth_of_the_fragments_across_cpus() {
    let f = predicted("tcp_stream", 2);
    println!(
        "tcp_stream 2 CPUs: refill trips/write {:.2e} of {:.1} pages, pageset rise {:.0}",
        f.refills_per_op, f.pages_per_refill, f.pcp_peak
    );
    assert!(f.refills_per_op < 1.2e-3, "{}", f.refills_per_op);
    assert!(f.pcp_peak < 1_200.0, "{}", f.pcp_peak);
}
