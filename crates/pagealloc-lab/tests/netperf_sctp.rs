//! netperf SCTP_STREAM's blocks as a real kernel allocates them (Debian's 6.1 in a VM,
//! scripts/sctp_vm.sh, docs/sim-cost-model.md §10): per 10 KB message one order-2 chunk
//! the sender's CPU allocates and mostly frees itself (once a SACK covers it), and per
//! packet of bundled chunks one larger block the sender's CPU allocates and the
//! receiver frees. Shown through the dry run's per-CPU counts and the simulator's own
//! counters.

use pagealloc::Config;
use pagealloc_lab::sim::{self, Machine, SimOptions};
use pagealloc_lab::workload::overrides as kv;
use pagealloc_lab::workload::{self, DryRun, OpCounts, Scale};

/// One pair, 800 messages of 10 KB in packets of 4 chunks, 75 % of the chunks freed
/// by the sender's CPU.
fn packets() -> Vec<(String, String)> {
    kv(&[
        ("pairs", "1"),
        ("messages", "800"),
        ("packet_chunks", "4"),
        ("sender_free_pct", "75"),
    ])
}

#[test]
fn sctp_chunks_go_back_to_the_sender_and_packets_stay_with_the_receiver() {
    let w = workload::build("netperf", Scale::Laptop, &packets()).unwrap();
    let d = DryRun::new(2, 1).run(&*w).unwrap();
    let (s, r) = (&d.per_cpu[0], &d.per_cpu[1]);
    // The sender allocates a chunk per message and a packet per 4.
    assert_eq!(s.allocs[2], 800);
    assert_eq!(s.allocs[4], 200);
    assert_eq!(r.allocs.iter().sum::<u64>(), 0);
    // 150 of the 200 packets' chunks come back to the sender; the receiver frees the
    // other 50 packets' chunks and every packet.
    assert_eq!(s.frees[2], 600);
    assert_eq!(r.frees[2], 200);
    assert_eq!(r.frees[4], 200);
    assert_eq!(s.frees[4], 0);
    // Every message copied in and out once, counted once.
    assert_eq!(w.work_units(&OpCounts::sum(&d.per_cpu)), 800.0);
}

/// Two packets per simulated message, of 4 and 3 chunks: half the packets order 4 and
/// half order 3, as the kernel's were with both ends on one CPU.
#[test]
fn sctp_two_packets_of_4_and_3_chunks() {
    let p = kv(&[
        ("pairs", "1"),
        ("messages", "700"),
        ("packet_chunks", "4"),
        ("second_packet_chunks", "3"),
        ("sender_free_pct", "100"),
    ]);
    let w = workload::build("netperf", Scale::Laptop, &p).unwrap();
    let d = DryRun::new(2, 1).run(&*w).unwrap();
    let (s, r) = (&d.per_cpu[0], &d.per_cpu[1]);
    assert_eq!((s.allocs[2], s.allocs[3], s.allocs[4]), (700, 100, 100));
    assert_eq!((s.frees[2], s.frees[3], s.frees[4]), (700, 0, 0));
    assert_eq!((r.frees[2], r.frees[3], r.frees[4]), (0, 100, 100));
    assert_eq!(w.work_units(&OpCounts::sum(&d.per_cpu)), 700.0);
}

#[test]
fn sctp_packets_through_the_simulators_counters() {
    let mut p = packets();
    p.retain(|(k, _)| k != "pairs");
    p.extend(kv(&[("pairs", "4")]));
    let w = workload::build("netperf", Scale::Laptop, &p).unwrap();
    let mut o = SimOptions::new(
        Machine::by_name("desktop-8").unwrap(),
        "linux-6.12".parse::<Config>().unwrap(),
    );
    o.seed = 1;
    let r = sim::run(&*w, &o).unwrap();
    assert_eq!(r.extra["alloc_blocks_o2"], 4.0 * 800.0);
    assert_eq!(r.extra["alloc_blocks_o4"], 4.0 * 200.0);
    let messages = r.score.unwrap() * r.extra["elapsed_s"];
    assert!((messages - 3200.0).abs() < 1.0, "{messages}");
    // Order 4 is above the pagesets' orders: every packet takes the zone lock twice.
    let one = workload::build(
        "netperf",
        Scale::Laptop,
        &kv(&[("pairs", "4"), ("messages", "800")]),
    )
    .unwrap();
    let r1 = sim::run(&*one, &o).unwrap();
    assert_eq!(r1.extra["alloc_blocks_o2"], 4.0 * 800.0);
    assert!(!r1.extra.contains_key("alloc_blocks_o4"));
}

/// Full scale carries the VM's figures: packets of 4 chunks, 89 % of the chunks freed
/// by the sender, and SCTP's per-message work on each side (docs/sim-cost-model.md §10).
#[test]
fn full_scale_netperf_is_the_measured_sctp() {
    let full = workload::build("netperf", Scale::Full, &[]).unwrap();
    let params = full.params();
    let get = |k: &str| {
        params
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{k}"))
    };
    assert_eq!(get("packet_chunks"), "4");
    assert_eq!(get("second_packet_chunks"), "3");
    assert_eq!(get("sender_free_pct"), "89");
    assert_eq!(get("frag_bytes"), "0");
    // TCP's live 1.41 / 5.04 µs × the VM's SCTP/TCP ratios, 1.81 and 2.02.
    assert_eq!(get("send_protocol_ns"), "2560");
    assert_eq!(get("recv_protocol_ns"), "10160");
}

/// The full scale's work per message on each side, through the simulator's per-CPU
/// compute: the sender's CPU charges its system call and SCTP's send side per message,
/// the receiver's its system call and SCTP's receive side; the copy's cross-CPU
/// surcharge (16 ns/KiB) goes with the copy, on the lines the other CPU's cache served
/// only (at most 160 ns per 10 KiB message); and the blocks per message are the VM's
/// model (one order-2 chunk, one order-4 and one order-3 packet per 7).
#[test]
fn full_scale_sctp_work_per_side_through_the_simulator() {
    let run = |cross: &str| {
        let w = workload::build(
            "netperf",
            Scale::Full,
            &kv(&[
                ("pairs", "1"),
                ("messages", "1400"),
                ("cross_copy_in_ns_per_kib", cross),
            ]),
        )
        .unwrap();
        let mut o = SimOptions::new(
            Machine::by_name("desktop-8").unwrap(),
            "linux-6.12".parse::<Config>().unwrap(),
        );
        o.seed = 1;
        o.cpus = Some(2);
        sim::run(&*w, &o).unwrap()
    };
    let r = run("16");
    let per_msg = |cpu: u32| r.extra[&format!("compute_s_cpu{cpu}")] * 1e9 / 1400.0;
    assert!(
        (per_msg(0) - (200.0 + 2560.0)).abs() < 0.5,
        "{}",
        per_msg(0)
    );
    let surcharge = (r.extra["cpu_time_s"] - run("0").extra["cpu_time_s"]) * 1e9 / 1400.0;
    assert!(surcharge > 0.0 && surcharge <= 160.5, "{surcharge}");
    assert!(
        (per_msg(1) - (200.0 + 10_160.0)).abs() < 0.5,
        "{}",
        per_msg(1)
    );
    assert_eq!(r.extra["alloc_blocks_o2"], 1400.0);
    assert_eq!(r.extra["alloc_blocks_o3"], 200.0);
    assert_eq!(r.extra["alloc_blocks_o4"], 200.0);
}
