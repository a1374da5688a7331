//! The programs' work outside the allocator per operation, measured on this machine's
//! kernel: what the simulated workloads compute beside their allocations and frees
//! (their `*_work_ns` and protocol parameters) when `predict` runs them.
//!
//! # Source
//! CPU time per operation of the programs run without the recorder (`pagealloc
//! predict-program`, the task's own `CLOCK_*_CPUTIME_ID` over its window) at one CPU:
//! in batches of runs the run of least CPU time (other processes only add to it), and
//! the median of those (each constant says when and at what load: the 2-vCPU AMD EPYC
//! KVM guest, 6.18, 2026-11-27; this guest exposes no PMU, so cycles and instructions
//! are not available), less what the simulator already charges for the same operation on
//! `host` with the term at 0 (its cost model's `fault_ns`, the allocator, the page's
//! zeroing or the copies through the cache hierarchy, the system calls). The two-CPU
//! runs are the check (docs/sim-cost-model.md §12, docs/predict.md).

/// Per 4 KiB fault: kernel 1.906 µs per page of page_fault1 (fault and unmap) at one CPU
/// less the simulator's 1.223 µs less the unmap's work below. The kernel's own CPU per
/// page moves by ±10 % between sessions with the host (the vCPUs' placement, other
/// tenants' memory traffic), so this and the unmap's constant are centred on the
/// median of five sessions' one-CPU figures, each measured as `predict` times them
/// (`predict-program W --cpus 1` without the recorder at `SCHED_FIFO` priority 1,
/// runs of least CPU time; docs/sim-cost-model.md §12), 2026-11-27 UTC:
/// page_fault1 1.850 (15:16-15:24, load 4.1-8.7, 25 batches of 5), 1.930 (19:27, load
/// 1.5-1.8, `predict --runs 7`), 1.926 (20:56, load 1.0-1.4, the same), 1.869 (21:01-21:04,
/// load 2.7-5.6, 24 triples' least), 1.906 (21:05-21:09, load 6.3-8.0, 61 runs).
pub const FAULT_WORK_NS: u32 = 444;
/// Per page unmapped: kernel 0.295 µs per page of one `munmap` of 256 MiB (parallel_free
/// at one CPU, the median of the same five sessions: 0.278, 0.324, 0.305, 0.295, 0.287)
/// less the simulator's 0.056 µs (the frees). Where it goes (`perf record -e cpu-clock
/// -F 20000 -g` around 8 runs, 21:00 UTC, load 1.4-2.7; the profiler adds ~20 %): of
/// 364 ns per page, `folios_put_refs` 208 (the LRU removal under the memcg's `lru_lock`
/// with interrupts off 104, `free_unref_folios` 68, the memcg uncharge 35), the PTE
/// walk, rmap and their statistics 156; `flush_tlb_mm_range` 0.2 and no IPI: each task
/// is its own process, so no TLB shootdown (docs/sim-cost-model.md §12).
pub const UNMAP_WORK_NS: u32 = 239;
/// Lines each batch of an unmap's frees (31 folios) shares with another CPU unmapping
/// in the same memory cgroup at the same time (`parallel_free`'s `shared_lines`): the
/// memcg's `lru_lock` and LRU lists and counts, its page counters and statistics,
/// each found in the other CPU's cache. Fitted through the origin to the excess of
/// two overlapped `munmap`s of 256 MiB over one alone against the line time measured
/// beside them (a ping-pong of one line between the vCPUs), two sessions: 200
/// alternated rounds (2026-11-27 18:09-18:22 UTC, load 4.3-10.7; docs/predict.md):
/// +13.1 ns per page (median of 61 rounds) at 41.8 ns a line, +43.7 (139 rounds) at
/// 162.4 ns; 122 runs each measured right after the ping-pong (21:05-21:09, load
/// 6.3-8.0): -3 (37 runs) at 30 ns, +45 (24) at 160 ns. Slope 0.270 ns per page per
/// ns of line: 8.4 lines a batch; 8 give +10.8 / +41.9 and +7.7 / +41.3.
pub const UNMAP_SHARED_LINES: u32 = 8;
/// Lines each batch of 31 faults (an LRU add) finds in the other CPU's cache while two
/// CPUs fault and unmap in the same memory cgroup (`page_fault1`'s
/// `fault_shared_lines`): the excess of page_fault1 (16 × 16 MiB) at two CPUs over one
/// against the line time, fitted through the origin as above less the unmap's 8 lines:
/// 180 alternated rounds to 18:52 UTC: +0 ns per fault at 41.8 ns a line, +78 at 162.4;
/// 121 runs after the ping-pong, 21:05-21:09: -15 (36 runs) at 30, +141 (24) at 159.
/// Slope 0.638 ns per fault per ns of line, 19.8 lines per 31 faults, 8 of them the
/// unmap's. What grows at two CPUs in a cpu-clock profile (21:05 UTC, load 6.4): the
/// struct pages `__rmqueue_pcplist` unlinks (its `list_del` 4 % of a fault at one CPU,
/// 11 % at two); the LRU add's `lru_lock` section stays at 6 %.
pub const FAULT_SHARED_LINES: u32 = 12;
/// One line's move between the two vCPUs when `predict` did not measure it
/// ([`super::line::line_transfer_ns`]): the ping-pong while the host runs them on
/// one L3 (38-48 ns, median 41.8, in 61 rounds of 200; 122-170 apart, median 162.4).
pub const LINE_TRANSFER_NS: u32 = 42;
/// Per THP fault: kernel 0.247 µs per base page of thp_mix at one CPU (126 µs per
/// 2 MiB; batches 0.168-0.373, middle half 0.220-0.273) less the simulator's 34.3 µs
/// less the unmap. 84-88 % of a THP fault is `clear_page_erms` under
/// `folio_zero_user` (cpu-clock profiles), and what a clear costs follows how long ago
/// the block was last written: thp_mix reuses its eight blocks from the order-9
/// pageset every ~1 ms, and a THP fault on a block freed 0.1 ms before costs 55 µs, 1 ms
/// before 104, 3 ms or more 200 (`SCHED_FIFO`, 20 faults each, 2026-11-27 21:01 UTC),
/// user-space 4 KiB `rep stosb` over a resident 2 MiB buffer 24 → 75 µs over the same
/// gaps: the host's other tenants evict the lines within milliseconds. `predict`
/// measures that on the host beside its runs and takes the fault's work from it
/// ([`super::clear::thp_fault_work_ns`]); this evening's median stands in where no
/// probe was measured (sessions saved before it, `predict::simulate`).
pub const THP_FAULT_WORK_NS: u32 = 92_000;
/// thp_mix's timing batches per batch the other faulting programs take (`predict`'s
/// `max(K, 3)`): its batch of least CPU spreads the widest within a minute (25 batches
/// back to back at `SCHED_FIFO`, 21:02-21:04 UTC, load 4.9-5.3: 0.175-0.322 µs per
/// page, median 0.221), and the median of 7 such batches lies within ±11.8 % of theirs
/// nine times in ten (resampled), of 21 within ±3.2 %. Between minutes the kernel moves
/// more (two-minute medians 0.175-0.345 in 12 minutes at load 7-9): not averaged away.
pub const THP_TIMING_BATCH_FACTOR: u32 = 3;
/// AF_UNIX, per 64 KiB message and side: kernel 12.25 µs per message at one CPU on a
/// quiet machine (both ends, half each; the least-CPU runs of four sessions, load
/// 1.2-3.0, 15:05-15:13 UTC: 13.0, 11.7, 10.6, 12.8), less the simulator's 6.06 µs
/// with no protocol work. (At load 8-14 the same method gave 3 300: every kernel cost
/// was higher.)
pub const UNIX_PROTOCOL_NS: u32 = 3_100;
/// AF_UNIX on one CPU: messages the writer queues before the woken reader preempts it
/// (the kernel switched 0.85-0.93 times per message: two hand-overs per two messages).
pub const UNIX_TURN_MESSAGES: u32 = 2;
/// TCP over loopback, per 16 KiB write, writer side: the quiet kernel's writer took
/// 1.63-1.64 of the 6.70-6.88 µs per write at one CPU (the least-CPU runs of the four
/// sessions, median 6.74; the receive path runs in the reader's context), less half
/// the simulator's 1.47 µs with no protocol work.
pub const TCP_SEND_PROTOCOL_NS: u32 = 910;
/// The same, reader side: 5.06-5.24 µs (median 5.10) less half of 1.47 µs.
pub const TCP_RECV_PROTOCOL_NS: u32 = 4_370;

/// TCP over loopback with the ends on two CPUs: share of the reader's protocol work
/// (`TCP_RECV_PROTOCOL_NS`) the writer's CPU always does instead, %: the transmits.
/// A segment is processed where it arrives when its socket's owner does not hold the
/// socket, else from the owner's backlog (`tcp_v4_rcv`, `tcp_add_backlog`,
/// `__release_sock`); the writer holds its socket nearly always (it slept 0.003 times
/// per write), so the reader's ACKs wait in its backlog and the transmits they release
/// (`tcp_rcv_established` → `tcp_data_snd_check` → `tcp_write_xmit`) run on the writer's
/// CPU, with its own pushes; on one CPU they ran in the reader's context. Per-call-path
/// cpu-clock profiles (`perf record -e cpu-clock -F 2000 -g -- pagealloc
/// predict-program tcp_stream --cpus N --count 65536 --extra 16384`, per thread, three
/// two-CPU runs and one one-CPU run, 2026-11-27 23:28 UTC, load 1.4-1.7): the writer's
/// transmits (`__release_sock` and `tcp_write_xmit` not under `tcp_v4_rcv`) 2.44-2.55 µs
/// of 6.16-6.45 per write at two CPUs against 0.16 of 2.05 at one; the reader's ACKs
/// with their transmits in its softirq fell from 1.58 to 0.01-1.10. The profiler adds
/// about a fifth (one CPU: 8.17 µs per write under it, 6.74 without), so the writer
/// gained 1.9 µs (44 %) by the profile; by the quiet kernel's CPU per write without a
/// profiler (the least-CPU two-CPU runs of four sessions: writer 6.02, reader 2.90 µs
/// against 1.64 / 5.10 at one CPU, less the copy in's +1.28 µs and the wakes at 0.21
/// sleeps per write, 1.18 µs on the writer and 0.77 on the reader) the writer gained
/// 1.92 µs (44 %) and the reader lost 2.97 (68 %): their mean, 55 %. The data segments
/// the writer's CPU processed at arrival in those profiles (0.52-0.69 µs per write at
/// 0.03-0.05 reader sleeps) were its wakeups of the reader ([`TCP_RECV_ARRIVAL_PCT`]),
/// which the wakes taken out above hold: nothing else moves.
pub const TCP_RECV_ON_SENDER_PCT: u32 = 55;
/// TCP over loopback with the ends on two CPUs: share of the reader's protocol work done
/// where a data segment arrives, %: `tcp_v4_rcv` → `tcp_rcv_established` →
/// `tcp_data_queue` on the writer's CPU (its transmit's `NET_RX` softirq) when the
/// reader does not own its socket (asleep in `sk_wait_data`), on the reader's from the
/// backlog when it does (netperf's `recv_arrival_pct`). What the writer's CPU does there
/// is the reader's wakeup: by call path (`perf record -e cpu-clock -F 4000 -g --
/// pagealloc predict-program tcp_stream --cpus 2 --count 65536 --extra 16384`, each
/// path's share of the writer's samples times its CPU per write, over the reader's
/// sleeps in the same run), the data segments' work on the writer's CPU outside
/// `sock_def_readable` and the `try_to_wake_up` under it (the ACK, transmit and backlog
/// paths apart) was 0.00-0.04 µs per reader sleep in four runs at 0.09-0.21 sleeps per
/// write (2026-11-28 08:35 UTC, load 1.5-1.7) and 0.07-0.38 in four at 08:34 (load
/// 2.4-3.1), 0.10-0.16 in three at 08:49 (load 10.6), against the wake path's 4.8-6.9,
/// 7.8-10.6 and 10.9-15.9 µs ([`TCP_WAKE_NS`]). The data's receive stays on the
/// reader's CPU (its backlog, and its own softirq, where its ACK releases the writer's
/// queued segments): 0.
pub const TCP_RECV_ARRIVAL_PCT: u32 = 0;
/// A stream's copy when its ends run on two CPUs, per KiB the simulator's `host`
/// hierarchy serves from the other CPU's cache (its `Charge::crossed`: lines the other
/// core's L2 or the LLC it evicted them to still holds; the engine charges the term on
/// those alone), beyond the hierarchy's own charge (it streams another core's lines
/// about as fast as its own L2). CPU-clock profiles of the two-CPU streams against the
/// one-CPU ones on a quiet machine (`perf record -e cpu-clock -F 4000 -g -- pagealloc
/// predict-program W --cpus N`, load 1.8, 15:13 UTC; the guest has no PMU), each
/// symbol's share of its thread's samples times the thread's CPU per write in a run
/// without perf: the writer's `_copy_from_iter` 1.78 → 6.68 µs per 64 KiB AF_UNIX write
/// and 0.75 → 2.09 µs per 16 KiB TCP write (+1.34). (At load 13 the AF_UNIX profile gave
/// +89 ns per KiB copied.) TCP from the kernel's start states (`predict tcp_stream
/// --cpus 2 --save`, then `--from`, 2026-11-28 03:51 UTC, 3 runs): the
/// hierarchy charges the writer's copy 0.541 µs per write against 0.479 at one CPU and
/// serves 246 of its 256 block lines from the reader's cache, in every run: (1.34 −
/// 0.06) / 15.4 KiB = 83. One line moves between the two vCPUs in ~40 ns one way while
/// the host runs them on one L3 and ~160 apart (a ping-pong, [`crate::predict`]'s
/// `line_transfer_ns` note); the profile's placement was not recorded. TCP's term;
/// AF_UNIX's is [`UNIX_CROSS_COPY_IN_NS_PER_KIB`].
pub const CROSS_COPY_IN_NS_PER_KIB: u32 = 83;
/// The AF_UNIX writer's copy with the ends on two CPUs, per KiB served from the
/// reader's cache, the same way: the kernel's `_copy_from_iter` at two CPUs is its one-CPU
/// cost + 4.90 µs per 64 KiB write (the quiet profiles above: 1.78 → 6.68); the
/// simulator's one-CPU copy is 1.58 µs, so its two-CPU copy should cost 6.48. From the
/// kernel's start states (`predict unix_stream --cpus 2 --save`, then `--from`; 6 runs of
/// 2026-11-28 03:44 and 03:51 UTC) the hierarchy charges it 2.8-5.0 µs per write: the
/// writer's refills take blocks the reader's drains (the oldest of its deep pageset)
/// and the start left on the free lists, some still in the LLC from the reader's copy
/// (258-744 of the 960 lines cross), the rest cold from DRAM, which the kernel pays in
/// its profile too. The runs' (6.48 − charge) over their crossing KiB: 79-89, pooled
/// 81. The simulated fragments are 60 KiB; the head's 4 KiB go to slab memory, not
/// modelled.
pub const UNIX_CROSS_COPY_IN_NS_PER_KIB: u32 = 81;
/// The AF_UNIX reader's `_copy_to_iter`, per KiB served from the writer's cache: 1.19 →
/// 1.96 µs per write (+0.77) less the hierarchy's own excess (1.60 → 1.88 µs: all 960
/// lines the writer's core modified, from its L2, in every start state), over 60 KiB: 8
/// (at load 13 the profile gave 31 per KiB before it). It follows where the host places
/// the vCPUs: 1.67 → 8.3-8.5 µs per write in profiles at 23:46 UTC (load 5.8), where the
/// reader, now as slow as its writer, slept 0.12-0.19 times per write against 0.3-0.7 in
/// runs where it kept up (docs/predict.md): the constant stays the quiet figure.
pub const CROSS_COPY_OUT_NS_PER_KIB: u32 = 8;
/// AF_UNIX with the ends on two CPUs, the writer's side: its work per 64 KiB write on
/// memory the reader's CPU freed last, beyond what the simulator's allocator and
/// hierarchy charge for it (lmbench's `cross_send_ns`, `StreamShape::cross_ns`): its page
/// allocation (the refills' zone-lock section, interrupts off: the samples land on
/// `_raw_spin_unlock_irqrestore` under `__rmqueue_pcplist`), memcg charge, `__alloc_skb`
/// and the rest of `unix_stream_sendmsg`, two CPUs less one. Per-call-path cpu-clock
/// profiles (`perf record -e cpu-clock -F 4000 -g -- pagealloc predict-program
/// unix_stream --cpus N --pages 0 --count 65536 --extra 65536`; each path's share of its
/// thread's samples times the profiled run's own CPU per write, less the session's
/// one-CPU median, times the session's untraced / profiled one-CPU CPU, 0.86-0.88), 25
/// two-CPU and 25 one-CPU runs in each of three sessions of 2026-11-28: 06:06, 06:09,
/// 06:14 UTC (load 1.0-2.4). The pair runs in two states for tens of seconds at a time,
/// the slow one beside other processes on the vCPUs (docs/predict.md): the fast one,
/// where `predict`'s quiet sessions find the kernel (16.3-17.6 µs per write at
/// 06:16-06:23), in 16 runs under 23.5 µs profiled: +0.58, +0.66,
/// +0.66 µs (session medians), 0.66 pooled; the slow one (over 27) +1.6 (three
/// sessions at 24-30 µs, 05:20-05:27: +1.44-1.50). The simulator's refills at two
/// CPUs add 0.2 µs per write (their zone-lock holds from the kernel's start states,
/// 0.244 trips of 61 pages): 0.66 − 0.2. No term at one CPU: the ends share a pageset.
pub const UNIX_CROSS_SEND_NS: u32 = 450;
/// The same, the reader's side, on memory the writer's CPU took: its page frees (the
/// drains' zone-lock section under `free_frozen_page_commit`), memcg uncharge,
/// `consume_skb`'s slab frees and the rest of its read path, in the same runs: fast
/// state +0.63, +1.01, +0.98 (session medians), 0.71 pooled; slow +1.9 (05:20-05:27:
/// 2.03-2.56); less the simulator's drains' 0.2.
pub const UNIX_CROSS_RECV_NS: u32 = 500;
/// The TCP reader's `_copy_to_iter`, the same way: 1.17 → 0.48 µs per write, cheaper at
/// two CPUs (at one the reader copies 8 MiB of queued writes that have left the L2 by
/// then): no term.
pub const TCP_CROSS_COPY_OUT_NS_PER_KIB: u32 = 0;
/// A wakeup across the vCPUs, the waker's CPU (`try_to_wake_up` and the IPI, which in
/// this KVM guest exits to the hypervisor): the writer's `_raw_spin_unlock_irqrestore`
/// (where the samples of the interrupts-off section land: the guest's CPU clock samples
/// on a timer) in the same quiet profiles, +1.95 µs per AF_UNIX write at 0.344 reader
/// sleeps per write and +1.14 µs per TCP write at 0.207 (the runs without perf the
/// CPU was taken from): 5.7 and 5.5 µs per wakeup. (At load 13: 11 µs.)
pub const WAKE_NS: u32 = 5_600;
/// The TCP writer's wakeup of its reader across the vCPUs (`predict`'s tcp_stream; the
/// others take [`WAKE_NS`]): the writer's `sock_def_readable` and the `try_to_wake_up`
/// under it (the data segment's `tcp_data_queue` in its `NET_RX` softirq) per reader
/// sleep, by call path in the runs of [`TCP_RECV_ARRIVAL_PCT`], against AF_UNIX's
/// writer's same path (`unix_stream_sendmsg` → `sock_def_readable`) per its reader's
/// sleep in runs alternated with them (`predict-program unix_stream --cpus 2 --count
/// 16384 --extra 65536`): TCP 4.8, 6.7, 6.9, 6.3 µs against AF_UNIX 7.0, 8.7, 7.8, 9.8
/// (08:35 UTC, load 1.5-1.7; medians 6.5 / 8.3) and 10.6, 9.3, 7.8, 10.4 against 10.6,
/// 13.5, 11.7, 11.4 (08:34, load 2.4-3.1; 9.9 / 11.6). Either grows with the load,
/// and their ratio towards 1 (08:49, load 10.6, three pairs: 13.1, 10.9, 15.9 against
/// 16.0, 13.5, 12.0, 0.97); on the quiet machine, where [`WAKE_NS`] was measured,
/// TCP's path is 0.79 and 0.85 of AF_UNIX's: 0.82 of it. (By the previous profiles'
/// path shares times the untraced runs' CPU, 05:34 UTC, load 2.2: 4.3-4.4 µs per
/// sleep.)
pub const TCP_WAKE_NS: u32 = 4_600;
/// TCP's [`WAKEUP_NS`]: the same interval from the waker's `try_to_wake_up` until the
/// reader runs, the waker's own [`TCP_WAKE_NS`] inside it.
pub const TCP_WAKEUP_NS: u32 = 15_000 - TCP_WAKE_NS;
/// The sleeper's switches out and back in (the cost model's `switch_ns`): the readers'
/// `finish_task_switch` in the same profiles, +1.12 µs per AF_UNIX write at 0.344
/// sleeps and +0.83 µs per TCP write at 0.207: 3.3 and 4.0 µs. (At load 13: 6.7 µs.)
pub const SWITCH_NS: u32 = 3_650;
/// From the end of the waker's `wake_ns` to the woken reader running (the engine
/// starts the sleeper's wait once the waker has paid `wake_ns`). Measured from
/// `sched_waking` to the reader's `sched_switch` in (`perf record -k CLOCK_MONOTONIC -e
/// sched:sched_waking -e sched:sched_switch -C 0,1 -- pagealloc predict-program W
/// --cpus 2`, only these two events): 2026-11-27 18:08 UTC, load 2.4-3.1, AF_UNIX five
/// runs' medians 13.9, 15.0, 15.5, 17.7, 18.4 µs (tenth percentiles 13.4-14.0); 18:12,
/// load 4.7, TCP 13.8, 13.9, 14.0, 14.0, 14.5 µs (13.0-13.9); at 15:18, load 6, 16 and
/// 14. That interval begins where the waker's `try_to_wake_up` begins, and the waker's
/// cost (`WAKE_NS`: its interrupts-off section, the IPI's exit to the hypervisor) runs
/// inside it: the reader's vCPU is kicked during the waker's exit, not after it. This
/// guest's idle driver is `haltpoll` with `guest_halt_poll_ns` 0 (the kernel command
/// line; the poll state's usage is 0), so the idle reader has halted and does not
/// spin: every wakeup pays the whole interval. 15 000 less `WAKE_NS`.
pub const WAKEUP_NS: u32 = 15_000 - WAKE_NS;
/// AF_UNIX with the ends on two CPUs, the waker's cost per wakeup in the state
/// `predict`'s quiet sessions find the kernel in (the fast one: the reader's vCPU halted
/// while it sleeps). The shared [`WAKE_NS`], [`SWITCH_NS`] and [`WAKEUP_NS`] were
/// measured under a profiler or the recorder, whose tasks keep the reader's CPU busy:
/// `try_to_wake_up` then activates the reader on that CPU itself and sends a
/// reschedule IPI, and the reader's CPU clock counts the IPI's delay (`wakeup_preempt`
/// skips the next clock update: beside other tasks on CPU 1, 08:36-08:40 UTC
/// 2026-11-28, load 2-2.7, 17 runs, the reader's CPU clock read 11.2-15.3 µs per write
/// against 5.8-13.2 on CPU by its `sched_switch` events (tracefs), 9.5-19.7 µs more per
/// sleep, median 12.5, as long as its wakeup to running there). An idle CPU
/// takes the wakeup from its wake list. The cpu-clock profiles by call path of
/// [`UNIX_CROSS_SEND_NS`] (16 fast runs, 06:06-06:16 UTC) give the wake path 1.4 µs
/// per write beyond one CPU at 0.40 reader sleeps per write: 3.5 µs per wakeup
/// (the slow runs' 2.3 at 0.39: 5.9, the shared constant's state).
pub const UNIX_WAKE_NS: u32 = 3_500;
/// The same, the reader's switches per sleep: `finish_task_switch` and the rest, 0.9 µs
/// per write beyond one CPU at 0.40 sleeps in the fast runs (slow: 1.6 at 0.39, 4.1).
pub const UNIX_SWITCH_NS: u32 = 2_250;
/// The same, from the end of the waker's [`UNIX_WAKE_NS`] to the woken reader running:
/// 6.5 µs from `try_to_wake_up` in all. The untraced runs' own counters (the runs
/// `predict` times) give the reader's time off its CPU per sleep, from the queue found
/// empty to running again: (2 × window − CPU) / sleeps per write, the writer never
/// idle (0.002-0.007 sleeps per write): 5.5, 6.6, 6.6, 7.7 and 8.9 µs in five quiet
/// sessions (2026-11-28 03:44, 03:51, 03:54, 08:25 and 08:35 UTC, load 1.5-2.3;
/// reader sleeps 0.54-0.63 per write), median 6.6; it holds the wait for the writer's
/// next skb too (the simulator's reader waits 1-2 µs for it). The shared 15 µs
/// ([`WAKEUP_NS`]) is longer than the whole of it: `perf record` of the two sched
/// events keeps no switch from the idle task into the reader (08:33 UTC: 2 713 reader
/// wakeups, its switches out to `swapper/1`, none back), so it measured only wakeups
/// onto a busy CPU (11-17 µs again at 08:36-08:40 beside other tasks, by tracefs).
pub const UNIX_WAKEUP_NS: u32 = 6_500 - UNIX_WAKE_NS;

/// The wakeup costs `predict` gives the simulator for stream program `workload` on two
/// CPUs (`wake_ns`, `switch_ns`, `wakeup_ns`): AF_UNIX's own; TCP's writer wakes its
/// reader from its softirq, on a shorter path ([`TCP_WAKE_NS`]); the shared ones else.
pub fn stream_wakeups(workload: &str) -> (u32, u32, u32) {
    match workload {
        "unix_stream" => (UNIX_WAKE_NS, UNIX_SWITCH_NS, UNIX_WAKEUP_NS),
        "tcp_stream" => (TCP_WAKE_NS, SWITCH_NS, TCP_WAKEUP_NS),
        _ => (WAKE_NS, SWITCH_NS, WAKEUP_NS),
    }
}
/// TCP over loopback: the data in flight when the writer sleeps, bytes, given to the
/// simulated stream as its receive buffer (its window is half of it): the writer's send
/// buffer, unacknowledged or unsent (`sk_wmem_queued` up to `sk_sndbuf`), and the
/// reader's receive queue, acknowledged but not read (up to `sk_rcvbuf`), whose
/// fragments stay allocated. `ss -tmi` of the live sockets every 0.1 s through 655 360
/// writes (2026-11-28 03:12 UTC, load 8.8): the writer's `tb` 4 194 304 (`tcp_wmem`'s
/// ceiling; `w` up to 4.26 MB), the reader's `rb` 867 242 at one CPU (`r` up to
/// 865 039), 2 397 409 at two; the receive buffer is the kernel's per-run tuning
/// (`tcp_rcv_space_adjust`), the one-CPU figure kept. 154 fragments of 32 KiB, woken at
/// 102; the live writer's peak unfreed fragments in the traced runs 152-233 (`predict
/// --save`, 02:28-02:55 UTC, 17 runs at one CPU, 14 of them 152-171), 132-237 at two.
/// At two CPUs the live writer slept once per 230-270 writes (0.004 per write). On one
/// CPU (`turn_messages` 0) the woken writer preempts the reader (`workload/shared_cpu.rs`):
/// it slept 0.010-0.011 times per write, the reader never (0.0096 simulated).
pub const TCP_BUFFER_BYTES: u32 = 2 * (4_194_304 + 867_242);
/// TCP with the ends on two CPUs: share of the order-3 fragments freed on the writer's
/// CPU, %. The reader queues a consumed skb on its allocating CPU's deferred-free list
/// (`skb_attempt_defer_free`, which the writer's `NET_RX` softirq empties after each
/// transmit) and frees it itself only when that list is full: while other processes
/// hold the writer's CPU. The writer's CPU refills one order-3 block for each the reader
/// frees (`perf record -e kmem:mm_page_free --filter 'order == 3' -e
/// kmem:mm_page_alloc_zone_locked -C 0,1`, 65 536 writes, 2026-11-28: the reader freed
/// 102, 117 and 269 of 32 768 at 08:35 UTC, load 1.5, the writer's CPU refilling 84,
/// 168 and 308 order-3 pages; 3 751-13 797 beside a build on the writer's CPU at 08:33,
/// load 4.6, refilling as many). Six quiet `predict` sessions' refill trips per write
/// (02:20-08:24 UTC, load 1.3-2.7: 4.4e-4-9.8e-4, median 8.2e-4, of 56 pages: 7 blocks
/// a trip, 0.5 blocks per write) give the reader 0.6-1.4 % (median 1.1): 99.
pub const TCP_SENDER_FREE_PCT: u32 = 99;
/// TCP with the ends on two CPUs: writes per new order-1 slab page of the skb caches
/// (`allocate_slab` under `tcp_stream_alloc_skb` on the writer's CPU, `discard_slab`
/// mostly on the reader's: a `perf record -e kmem:mm_page_alloc -g` of 131 072 writes).
/// The quiet kernel took 1.16e-3, 3.48e-3, 2.75e-3 and under 1e-4 per write in four
/// sessions (the slabs' state decides), none at one CPU: the median, 1.96e-3, one per
/// 512 writes.
pub const TCP_SLAB_EVERY_WRITES: u32 = 512;
