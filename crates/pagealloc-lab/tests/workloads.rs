//! Every workload's op stream, checked against its definition in the spec with the dry
//! run: counts, conservation, balance of sends and barriers, determinism, and the
//! registry's errors.

use pagealloc_lab::workload::overrides as kv;
use pagealloc_lab::workload::{
    build, by_name, dry_run, names, CpuScript, DryRun, DryRunStats, MigrateKind, Op, OpResult, Rng,
    Scale, ScoreKind, Slot, TraceEntry, Workload, WorkloadError,
};

fn workload(name: &str, overrides: &[(&str, &str)]) -> Box<dyn Workload> {
    by_name(name, &kv(overrides)).unwrap_or_else(|e| panic!("{e}"))
}

/// Small parameters for each workload, so every one dry-runs in milliseconds.
fn small(name: &str) -> Vec<(&'static str, &'static str)> {
    match name {
        "page_fault1" | "batch_sweep" => vec![("pages_per_loop", "64"), ("loops", "3")],
        "page_fault1_thp" => vec![("pages_per_loop", "2048"), ("loops", "3")],
        "kbuild" => vec![
            ("tasks", "20"),
            ("median_pages", "64"),
            ("min_pages", "16"),
            ("max_pages", "256"),
            ("chunks", "4"),
        ],
        "netperf" => vec![("messages", "50")],
        "lmbench" => vec![("chunks", "30")],
        "bulk" => vec![("pages", "100"), ("rounds", "5")],
        "high_order_stress" => vec![("fill_pages", "1000"), ("attempts", "10")],
        "thp_mix" => vec![
            ("pages_per_loop", "1024"),
            ("loops", "2"),
            ("break_pages_per_cpu", "100"),
        ],
        "parallel_free" => vec![("region_pages", "4096")],
        "zonelist_hog" => vec![("total_pages", "1000")],
        "purger" => vec![("batch_pages", "16"), ("rounds", "3")],
        "mass_exit" => vec![("rss_pages", "64")],
        other => panic!("no small parameters for {other}"),
    }
}

fn traced(w: &dyn Workload, cpus: u32, seed: u64) -> (DryRunStats, Vec<Vec<TraceEntry>>) {
    let mut stats = DryRun::new(cpus, seed).trace(true).run(w).unwrap();
    let trace = stats.trace.take().unwrap();
    (stats, trace)
}

#[test]
fn page_fault1_counts_and_order() {
    let (n, loops) = (64u64, 3u64);
    let w = workload("page_fault1", &small("page_fault1"));
    let (stats, trace) = traced(&*w, 3, 1);
    for c in &stats.per_cpu {
        assert_eq!(c.allocs[0], n * loops);
        assert_eq!(c.frees[0], n * loops);
        assert_eq!(c.touches, n * loops);
        assert_eq!(c.alloc_ops(), n * loops);
        assert_eq!((c.sends, c.recvs, c.barriers, c.exits), (0, 0, 0, 0));
    }
    // One loop: alloc/touch pairs into slots 0..n, then frees of 0..n in order.
    let ops: Vec<Op> = trace[0].iter().map(|e| e.op).collect();
    for i in 0..n as usize {
        assert_eq!(
            ops[2 * i],
            Op::Alloc {
                slot: i as Slot,
                order: 0,
                kind: MigrateKind::Movable
            }
        );
        assert_eq!(ops[2 * i + 1], Op::Touch { slot: i as Slot });
        assert_eq!(ops[2 * n as usize + i], Op::Free { slot: i as Slot });
    }
    assert_eq!(w.work_units(&stats.total), (3 * n * loops) as f64);
    assert_eq!(w.score_kind(), ScoreKind::Rate);
}

#[test]
fn page_fault1_thp_and_batch_sweep() {
    let w = workload("page_fault1_thp", &small("page_fault1_thp"));
    let stats = dry_run(&*w, 2, 1);
    for c in &stats.per_cpu {
        assert_eq!(c.allocs[9], 4 * 3);
        assert_eq!(c.alloc_ops(), 4 * 3);
        assert_eq!(c.touched_pages, 2048 * 3);
    }
    let sweep = workload("batch_sweep", &small("batch_sweep"));
    assert_eq!(sweep.name(), "batch_sweep");
    let pf1 = workload("page_fault1", &small("page_fault1"));
    assert_eq!(
        dry_run(&*sweep, 2, 5).trace_hash,
        dry_run(&*pf1, 2, 5).trace_hash
    );
    // The order is a parameter too; the region must be whole blocks.
    assert!(matches!(
        by_name(
            "page_fault1",
            &kv(&[("order", "9"), ("pages_per_loop", "100")])
        ),
        Err(WorkloadError::InvalidParam { .. })
    ));
}

/// Without `CONFIG_VMAP_STACK` the stack is one order-2 block, freed right after the
/// page directory: every exit then frees two order 1–3 blocks in a row.
#[test]
fn kbuild_order2_stack_follows_the_pgd_at_exit() {
    let mut p = small("kbuild");
    p.push(("vmap_stack", "false"));
    p.push(("slab_blocks_max", "0"));
    let w = workload("kbuild", &p);
    let (stats, trace) = traced(&*w, 2, 5);
    assert_eq!(stats.total.allocs[2], 20);
    assert_eq!(stats.total.allocs[1], 20);
    for cpu in &trace {
        let mut task_start = 0;
        for (i, e) in cpu.iter().enumerate() {
            if e.op != Op::Exit {
                continue;
            }
            let task = &cpu[task_start..i];
            assert!(matches!(
                task[0].op,
                Op::Alloc {
                    slot: 1,
                    order: 2,
                    ..
                }
            ));
            assert!(matches!(
                task[1].op,
                Op::Alloc {
                    slot: 0,
                    order: 1,
                    ..
                }
            ));
            let n = task.len();
            assert_eq!(task[n - 2].op, Op::Free { slot: 0 });
            assert_eq!(task[n - 2].block_order, Some(1));
            assert_eq!(task[n - 1].op, Op::Free { slot: 1 });
            assert_eq!(task[n - 1].block_order, Some(2));
            assert_eq!(task[n - 3].block_order, Some(0));
            task_start = i + 1;
        }
    }
}

#[test]
fn kbuild_tasks_fork_fault_and_exit_flood_pgd_stack_then_slab_burst() {
    let w = workload("kbuild", &small("kbuild"));
    let (stats, trace) = traced(&*w, 4, 3);
    let t = &stats.total;
    let tasks = 20;
    // A vmalloc'ed 16 KiB kernel stack: four order-0 pages per task.
    let stack_pages = 4 * tasks;
    assert_eq!(t.exits, tasks);
    assert_eq!(w.work_units(t), tasks as f64);
    assert_eq!(w.score_kind(), ScoreKind::InverseMakespan);
    // Order 1: page directories and slab blocks; orders 2–3: slab blocks.
    let slab = t.allocs[1] + t.allocs[2] + t.allocs[3] - tasks;
    assert!(slab <= tasks * 8, "{slab} slab blocks");
    assert_eq!(t.alloc_ops() - t.allocs[0] - tasks, slab);
    let anon = t.allocs[0] - stack_pages;
    assert!((tasks * 16..=tasks * 256).contains(&anon), "{anon}");
    assert_eq!(t.touches, anon);
    assert_eq!(t.compute_ns, anon * 1_000);
    for k in 0..=3 {
        assert_eq!(t.frees[k], t.allocs[k], "order {k}");
    }
    let mut bursts = 0;
    for cpu in &trace {
        let mut task_start = 0;
        for (i, e) in cpu.iter().enumerate() {
            if e.op != Op::Exit {
                continue;
            }
            let task = &cpu[task_start..i];
            // fork: the kernel stack (slots 1..5, order-0 unmovable), then the page
            // directory (slot 0, order 1).
            for (k, e) in task[..4].iter().enumerate() {
                assert_eq!(
                    e.op,
                    Op::Alloc {
                        slot: 1 + k as u32,
                        order: 0,
                        kind: MigrateKind::Unmovable
                    }
                );
            }
            assert_eq!(
                task[4].op,
                Op::Alloc {
                    slot: 0,
                    order: 1,
                    kind: MigrateKind::Unmovable
                }
            );
            // exit: the trailing run of order 1–3 frees is the slab burst (slots 5..13);
            // before it the stack's pages, before them the page directory alone, and
            // before it the order-0 flood of the address space.
            let burst = task
                .iter()
                .rev()
                .take_while(|e| {
                    matches!(e.op, Op::Free { .. }) && matches!(e.block_order, Some(1..=3))
                })
                .count();
            let rest = &task[..task.len() - burst];
            assert!(task[task.len() - burst..]
                .iter()
                .all(|e| matches!(e.op, Op::Free { slot } if (5..13).contains(&slot))));
            bursts += usize::from(burst > 1);
            let n = rest.len();
            for (k, e) in rest[n - 4..].iter().enumerate() {
                assert_eq!(e.op, Op::Free { slot: 1 + k as u32 });
                assert_eq!(e.block_order, Some(0));
            }
            assert_eq!(rest[n - 5].op, Op::Free { slot: 0 });
            assert_eq!(rest[n - 5].block_order, Some(1));
            let flood = rest[..n - 5]
                .iter()
                .rev()
                .take_while(|e| matches!(e.op, Op::Free { .. }) && e.block_order == Some(0))
                .count();
            assert!(flood >= 16, "exit flood of {flood} pages");
            // No block is freed before the exit.
            assert!(rest[..n - 5 - flood]
                .iter()
                .all(|e| !matches!(e.op, Op::Free { .. })));
            task_start = i + 1;
        }
    }
    assert!(
        bursts > 0,
        "some tasks free two or more slab blocks together"
    );
    // Tasks are spread over the CPUs by the shared queue.
    assert!(stats.per_cpu.iter().filter(|c| c.exits > 0).count() >= 2);
}

#[test]
fn netperf_pairs_messages() {
    let w = workload("netperf", &small("netperf"));
    let stats = dry_run(&*w, 5, 1);
    for pair in 0..2 {
        let (tx, rx) = (&stats.per_cpu[2 * pair], &stats.per_cpu[2 * pair + 1]);
        // One order-2 block per message (kmalloc_large of the skb's linear buffer), no
        // head page; the 10 KB copied in on the sender and out on the receiver.
        assert_eq!((tx.allocs[2], tx.alloc_ops()), (50, 50));
        assert_eq!((tx.sends, tx.free_ops(), tx.touches), (50, 0, 0));
        assert_eq!((tx.copies, tx.copied_bytes), (50, 50 * 10_240));
        assert_eq!((rx.recvs, rx.frees[2], rx.alloc_ops()), (50, 50, 0));
        assert_eq!((rx.copies, rx.copied_bytes), (50, 50 * 10_240));
        // A system call and the protocol's work on each side.
        assert_eq!(tx.compute_ns, 50 * (200 + 1_400));
        assert_eq!(rx.compute_ns, 50 * (200 + 600));
    }
    assert_eq!(stats.per_cpu[4], Default::default(), "odd CPU idles");
    assert_eq!(w.work_units(&stats.total), 100.0);
    assert!(stats.peak_inbox <= w.inbox_capacity());
    // SCTP's receive window: rcvbuf / 2 = 106 496 bytes hold 10 messages; a blocked
    // sender is woken by the window update after 64 KiB (7 messages) were read.
    assert_eq!((w.inbox_capacity(), w.inbox_resume()), (10, 3));
    let small_buf = by_name("netperf", &kv(&[("rcvbuf_bytes", "65536")])).unwrap();
    // A 32 KiB window holds 3 messages; the update needs 64 KiB: it waits for all 3.
    assert_eq!(
        (small_buf.inbox_capacity(), small_buf.inbox_resume()),
        (3, 0)
    );
    assert!(matches!(
        by_name("netperf", &kv(&[("pairs", "3")]))
            .unwrap()
            .scripts(4),
        Err(WorkloadError::TooFewCpus {
            need: 6,
            have: 4,
            ..
        })
    ));
}

/// A 64 KiB chunk is what the live kernel (6.18) allocated per 64 KiB AF_UNIX write
/// (tests/data/traces/bw_unix.trace): one block each of orders 3, 2, 1 and 0 on the
/// writer's CPU, all freed by the reader; the skb's head (a page) is slab memory.
#[test]
fn lmbench_chunks_are_orders_3_2_1_0() {
    let w = workload("lmbench", &small("lmbench"));
    let stats = dry_run(&*w, 2, 1);
    let (tx, rx) = (&stats.per_cpu[0], &stats.per_cpu[1]);
    for o in 0..4 {
        assert_eq!((tx.allocs[o], rx.frees[o]), (30, 30), "order {o}");
        assert_eq!((rx.allocs[o], tx.frees[o]), (0, 0), "order {o}");
    }
    assert_eq!((tx.allocs[4], tx.sends, rx.recvs), (0, 120, 120));
    // The fragments carry the chunk less its head: 15 pages.
    assert_eq!(tx.copied_bytes, 30 * 61_440);
    assert_eq!(rx.copied_bytes, 30 * 61_440);
    assert_eq!(w.work_units(&stats.total), (30 * 65_536) as f64);
    assert!(stats.peak_inbox <= 4 * 4);
    // 4 chunks of 64 KiB + skb overhead fit under the 208 KiB send buffer; a sleeping
    // writer is woken at a quarter of it, which no chunk fits under: an empty queue.
    assert_eq!((w.inbox_capacity(), w.inbox_resume()), (16, 0));
    let big = by_name("lmbench", &kv(&[("sndbuf_bytes", "1048576")])).unwrap();
    assert_eq!((big.inbox_capacity(), big.inbox_resume()), (4 * 16, 4 * 3));
    // The old shape (two order-3 blocks, all in fragments) is still a parameter away.
    let old = by_name("lmbench", &kv(&[("head_bytes", "0"), ("chunks", "30")])).unwrap();
    let st = dry_run(&*old, 2, 1);
    assert_eq!((st.per_cpu[0].allocs[3], st.per_cpu[0].allocs[0]), (60, 0));
}

#[test]
fn bulk_rounds() {
    let w = workload("bulk", &small("bulk"));
    let stats = dry_run(&*w, 3, 1);
    for c in &stats.per_cpu {
        assert_eq!((c.allocs[0], c.frees[0], c.touches), (500, 500, 0));
    }
    assert_eq!(stats.peak_live_pages, 300);
}

#[test]
fn high_order_stress_counts_successes() {
    let w = workload("high_order_stress", &small("high_order_stress"));
    let stats = dry_run(&*w, 2, 1);
    let t = &stats.total;
    assert_eq!(t.allocs[0], 1000);
    assert_eq!(t.frees[0], 1000);
    assert_eq!(t.barriers, 2 * 3);
    let m = &stats.measured;
    assert_eq!((m.allocs[9], m.alloc_failures[9], m.allocs[0]), (10, 0, 0));
    assert_eq!(m.compute_ns, 10 * 1_000_000);
    assert_eq!(w.work_units(m), 100.0);
    assert_eq!(w.score_kind(), ScoreKind::Absolute);
    // Released pages are freed before barrier 1 (not measured); the rest after.
    let released = t.frees[0] - m.frees[0];
    assert!(
        (300..700).contains(&released),
        "{released} of 1000 released"
    );

    // With memory for the fill and three order-9 blocks only, 3 of 10 succeed.
    let limited = DryRun::new(2, 1)
        .capacity_pages(1000 + 3 * 512)
        .run(&*w)
        .unwrap();
    let m = &limited.measured;
    assert_eq!((m.allocs[9], m.alloc_failures[9]), (3, 7));
    assert_eq!(w.work_units(m), 30.0);
}

#[test]
fn thp_mix_groups_and_prelude() {
    let w = workload("thp_mix", &small("thp_mix"));
    let stats = dry_run(&*w, 4, 1);
    let groups = w.groups(4);
    assert_eq!(groups[0].name, "thp");
    assert_eq!(groups[0].cpus, vec![0, 1]);
    assert_eq!(groups[1].cpus, vec![2, 3]);
    for &cpu in &groups[0].cpus {
        let m = &stats.measured_per_cpu[cpu as usize];
        assert_eq!((m.allocs[9], m.allocs[0]), (2 * 2, 0));
        assert_eq!(stats.per_cpu[cpu as usize].allocs[0], 100, "prelude");
    }
    for &cpu in &groups[1].cpus {
        assert_eq!(stats.measured_per_cpu[cpu as usize].allocs[0], 2 * 1024);
    }
    let thp = stats.measured_per_cpu[..2].iter().collect::<Vec<_>>();
    assert_eq!(
        w.work_units(&pagealloc_lab::workload::OpCounts::sum(thp)),
        (2 * 2 * 1024) as f64
    );

    // The prelude stops at the first failure and the run goes on.
    let w = workload(
        "thp_mix",
        &[
            ("pages_per_loop", "1024"),
            ("loops", "2"),
            ("break_pages_per_cpu", "2000"),
        ],
    );
    let limited = DryRun::new(4, 1).capacity_pages(5000).run(&*w).unwrap();
    assert!(limited.total.alloc_failures[0] > 0);
    assert_eq!(limited.measured.failed_allocs(), 0);
    assert_eq!(limited.measured.allocated_pages(), 4 * 2 * 1024);
}

#[test]
fn parallel_free_one_task_frees_in_the_window() {
    let w = workload("parallel_free", &small("parallel_free"));
    let stats = dry_run(&*w, 3, 1);
    assert_eq!(stats.per_cpu[0].allocs[0], 4096);
    assert_eq!(stats.per_cpu[0].exits, 1);
    assert_eq!(stats.measured_per_cpu[0].frees[0], 4096);
    assert_eq!(stats.measured_per_cpu[0].alloc_ops(), 0);
    for c in &stats.per_cpu[1..] {
        assert_eq!((c.barriers, c.alloc_ops()), (1, 0));
    }
    assert_eq!(w.work_units(&stats.measured), 4096.0);
}

#[test]
fn zonelist_hog_shares_and_failure() {
    let w = workload("zonelist_hog", &[("threads", "3"), ("total_pages", "1000")]);
    let stats = dry_run(&*w, 4, 1);
    let allocs: Vec<u64> = stats.per_cpu.iter().map(|c| c.allocs[0]).collect();
    assert_eq!(allocs, vec![334, 333, 333, 0]);
    assert_eq!(stats.total.touches, 1000);
    assert_eq!(stats.total.exits, 3);

    // 600 pages for 1000 wanted: threads back off, retry, give up, free, exit. (Without
    // the staggered start, so every compute is a backoff.)
    let w = workload(
        "zonelist_hog",
        &[
            ("threads", "3"),
            ("total_pages", "1000"),
            ("create_ns", "0"),
            ("wake_jitter_ns", "0"),
        ],
    );
    let limited = DryRun::new(4, 1).capacity_pages(600).run(&*w).unwrap();
    let t = &limited.total;
    assert!(t.alloc_failures[0] > 0);
    assert!(limited.peak_live_pages <= 600);
    assert_eq!(t.compute_ns % 10_000, 0);
    assert_eq!(t.exits, 3);
    assert!(t.allocs[0] < 1000);
}

/// The hog's threads start as `pthread_create` makes them: thread k computes
/// `(k + 1) × create_ns` plus a seeded jitter below `wake_jitter_ns` before its first
/// fault; the seed picks the jitter and a seed replays exactly.
#[test]
fn zonelist_hog_threads_start_staggered_and_jittered() {
    let p = [
        ("threads", "3"),
        ("total_pages", "300"),
        ("create_ns", "9000"),
        ("wake_jitter_ns", "170000"),
    ];
    let w = workload("zonelist_hog", &p);
    let starts = |seed: u64| -> Vec<u64> {
        let (_, trace) = traced(&*w, 4, seed);
        assert!(trace[3]
            .iter()
            .all(|e| e.op == Op::Done || e.op == Op::Exit));
        trace[..3]
            .iter()
            .enumerate()
            .map(|(k, t)| match t[0].op {
                Op::Compute { ns } => {
                    let created = (k as u64 + 1) * 9000;
                    assert!((created..created + 170_000).contains(&ns), "{k}: {ns}");
                    ns
                }
                other => panic!("thread {k} starts with {other:?}"),
            })
            .collect()
    };
    let (a, b, c) = (starts(1), starts(1), starts(2));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(dry_run(&*w, 4, 1).trace_hash, dry_run(&*w, 4, 2).trace_hash);
    assert_eq!(dry_run(&*w, 4, 1).trace_hash, dry_run(&*w, 4, 1).trace_hash);

    // Without jitter the seed changes nothing and the stagger is exact.
    let mut q = p;
    q[3] = ("wake_jitter_ns", "0");
    let w = workload("zonelist_hog", &q);
    let (_, trace) = traced(&*w, 4, 1);
    for (k, t) in trace[..3].iter().enumerate() {
        assert_eq!(
            t[0].op,
            Op::Compute {
                ns: (k as u64 + 1) * 9000
            }
        );
    }
    assert_eq!(dry_run(&*w, 4, 1).trace_hash, dry_run(&*w, 4, 2).trace_hash);
}

#[test]
fn every_workload_is_deterministic_and_conserves_blocks() {
    for &name in names() {
        let w = workload(name, &small(name));
        for cpus in [2, 3] {
            // dry_run itself asserts conservation and balance.
            let a = dry_run(&*w, cpus, 42);
            let b = dry_run(&*w, cpus, 42);
            assert_eq!(a.trace_hash, b.trace_hash, "{name}");
            assert_eq!(a.per_cpu, b.per_cpu, "{name}");
            assert_eq!(a.total.allocs, a.total.frees, "{name}");
            assert_eq!(a.total.sends, a.total.recvs, "{name}");
            assert!(a.total.alloc_ops() > 0, "{name}");
            let barriers: Vec<u64> = a.per_cpu.iter().map(|c| c.barriers).collect();
            assert!(barriers.iter().all(|&b| b == barriers[0]), "{name}");
        }
    }
    // The seed matters where the workload draws randomness.
    let w = workload("kbuild", &small("kbuild"));
    assert_ne!(dry_run(&*w, 2, 1).trace_hash, dry_run(&*w, 2, 2).trace_hash);
}

#[test]
fn every_workload_builds_at_both_scales() {
    for &name in names() {
        for scale in [Scale::Laptop, Scale::Full] {
            let w = build(name, scale, &[]).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(w.name(), name);
            assert!(!w.params().is_empty());
            assert!(!w.score_unit().is_empty());
        }
    }
    let full = build("netperf", Scale::Full, &[]).unwrap();
    assert!(full.params().contains(&("pairs", "64".to_owned())));
    let scripts = full.scripts(128).unwrap();
    assert_eq!(scripts.len(), 128);
}

#[test]
fn registry_errors_name_the_valid_choices() {
    let err = by_name("nope", &[]).unwrap_err();
    assert!(matches!(err, WorkloadError::UnknownWorkload { .. }));
    let msg = err.to_string();
    for &name in names() {
        assert!(msg.contains(name), "{msg}");
    }

    let err = by_name("bulk", &kv(&[("page", "1")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown parameter `page` for workload bulk; valid: pages, rounds"
    );

    let err = by_name("bulk", &kv(&[("pages", "many")])).unwrap_err();
    assert!(matches!(err, WorkloadError::InvalidParam { ref key, .. } if key == "pages"));
    assert!(err
        .to_string()
        .starts_with("invalid value `many` for bulk.pages"));

    let err = by_name("bulk", &kv(&[("rounds", "0")])).unwrap_err();
    assert!(matches!(err, WorkloadError::InvalidParam { .. }), "{err}");
    assert!(by_name("high_order_stress", &kv(&[("attempt_order", "11")])).is_err());
    assert!(by_name("kbuild", &kv(&[("min_pages", "9"), ("max_pages", "8")])).is_err());
    assert!(by_name("bulk", &kv(&[("pages", "1_000")])).is_ok());
}

/// A script that allocates and never frees.
#[derive(Debug)]
struct Leaky(bool);

impl CpuScript for Leaky {
    fn slot_count(&self) -> Slot {
        1
    }

    fn next(&mut self, _last: OpResult, _rng: &mut dyn Rng) -> Op {
        if std::mem::replace(&mut self.0, true) {
            return Op::Done;
        }
        Op::Alloc {
            slot: 0,
            order: 0,
            kind: MigrateKind::Movable,
        }
    }
}

#[derive(Debug)]
struct LeakyWorkload;

impl Workload for LeakyWorkload {
    fn name(&self) -> &'static str {
        "leaky"
    }
    fn params(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    fn scripts(&self, cpus: u32) -> Result<Vec<Box<dyn CpuScript>>, WorkloadError> {
        Ok((0..cpus)
            .map(|_| Box::new(Leaky(false)) as Box<dyn CpuScript>)
            .collect())
    }
    fn score_kind(&self) -> ScoreKind {
        ScoreKind::Rate
    }
    fn score_unit(&self) -> &'static str {
        "pages/s"
    }
    fn work_units(&self, counts: &pagealloc_lab::workload::OpCounts) -> f64 {
        counts.allocated_pages() as f64
    }
}

#[test]
#[should_panic(expected = "done with a block in slot")]
fn dry_run_catches_a_leak() {
    dry_run(&LeakyWorkload, 1, 0);
}

/// `pte_tables=1`: one order-0 page-table page per 2 MiB of the region before its
/// faults (one per THP), freed after the unmap, as the live kernel allocates them; the
/// work is still the pages faulted.
#[test]
fn page_tables_one_per_2_mib() {
    let kv = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(k, x)| ((*k).to_owned(), (*x).to_owned()))
            .collect()
    };
    let w = pagealloc_lab::workload::by_name(
        "page_fault1",
        &kv(&[
            ("pages_per_loop", "1024"),
            ("loops", "2"),
            ("pte_tables", "1"),
        ]),
    )
    .unwrap();
    let d = DryRun::new(1, 1).run(&*w).unwrap();
    assert_eq!(d.per_cpu[0].allocs[0], 2 * 1024 + 2 * 2);
    assert_eq!(d.per_cpu[0].frees[0], 2 * 1024 + 2 * 2);
    assert_eq!(w.work_units(&d.per_cpu[0]), 2048.0);
    let thp = pagealloc_lab::workload::by_name(
        "thp_mix",
        &kv(&[
            ("pages_per_loop", "1024"),
            ("loops", "1"),
            ("thp_cpus", "1"),
            ("break_pages_per_cpu", "16"),
            ("pte_tables", "1"),
        ]),
    )
    .unwrap();
    let d = DryRun::new(1, 1).run(&*thp).unwrap();
    assert_eq!(d.measured_per_cpu[0].allocs[9], 2);
    assert_eq!(d.measured_per_cpu[0].allocs[0], 2);
    assert_eq!(thp.work_units(&d.measured_per_cpu[0]), 1024.0);
}
