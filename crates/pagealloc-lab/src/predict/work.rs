//! The programs' work outside the allocator per operation, measured on this machine's
//! kernel: what the simulated workloads compute beside their allocations and frees
//! (their `*_work_ns` and protocol parameters) when `predict` runs them.
//!
//! # Source
//! CPU time per operation of the programs run without the recorder (`pagealloc
//! predict-program`, the task's own `CLOCK_*_CPUTIME_ID` over its window) at one CPU:
//! in each of four or five batches of 3-5 runs the run of least CPU time (other
//! processes only add to it), and the median of those (load average 8-14 on the 2-vCPU
//! AMD EPYC KVM guest, 6.18, 2026-11-27; this guest exposes no PMU, so cycles and
//! instructions are not available), less what the simulator already charges for the same operation on
//! `host` with the term at 0 (its cost model's `fault_ns`, the allocator, the page's
//! zeroing or the copies through the cache hierarchy, the system calls). The two-CPU
//! runs are the check (docs/sim-cost-model.md §12, docs/predict.md).

/// Per 4 KiB fault: kernel 1.85 µs per page of page_fault1 (fault and unmap) less the
/// simulator's 1.223 µs less the unmap's work below. The three constants here are
/// measured alike (docs/sim-cost-model.md §12): `predict-program W --cpus 1` without
/// the recorder at `SCHED_FIFO` priority 1 (as `predict` times them), 25 batches of 5
/// runs back to back (2026-11-27 15:16-15:24 UTC, load average 4.1-8.7, other helpers
/// building), each batch's least CPU time, the median batch (batches 1.68-2.18, middle
/// half 1.78-1.91 µs).
pub const FAULT_WORK_NS: u32 = 405;
/// Per page unmapped: kernel 0.278 µs per page of one `munmap` of 256 MiB
/// (parallel_free; batches 0.208-0.381, middle half 0.258-0.289) less the simulator's
/// 0.056 µs (the frees).
pub const UNMAP_WORK_NS: u32 = 222;
/// Per THP fault: kernel 0.247 µs per base page of thp_mix at one CPU (126 µs per
/// 2 MiB, mostly its zeroing: ~17 GB/s here; batches 0.168-0.373, middle half
/// 0.220-0.273) less the simulator's 34.3 µs less the unmap.
pub const THP_FAULT_WORK_NS: u32 = 92_000;
/// AF_UNIX, per 64 KiB message and side: kernel 12.7 µs per message at one CPU (both
/// ends, half each; batches 11.5-14.6) less the simulator's 6.07 µs with no protocol
/// work.
pub const UNIX_PROTOCOL_NS: u32 = 3_300;
/// AF_UNIX on one CPU: messages the writer queues before the woken reader preempts it
/// (the kernel switched 0.91-0.95 times per message: two hand-overs per two messages).
pub const UNIX_TURN_MESSAGES: u32 = 2;
/// TCP over loopback, per 16 KiB write, writer side: the kernel's writer took 28 % of
/// the 8.25 µs per write at one CPU (batches 7.5-10.0; the receive path runs mostly in
/// the reader's context), less half the simulator's 1.80 µs with no protocol work.
pub const TCP_SEND_PROTOCOL_NS: u32 = 1_410;
/// The same, reader side: 72 % of 8.25 µs less half of 1.80 µs.
pub const TCP_RECV_PROTOCOL_NS: u32 = 5_040;

/// TCP over loopback with the ends on two CPUs: share of the reader's protocol work
/// (`TCP_RECV_PROTOCOL_NS`) the writer's CPU does instead, %. Two pairs of CPU-clock
/// profiles (`perf record -e cpu-clock -F 20000 -g`, per thread, 200 000 writes, load
/// 8-10) of the two-CPU stream against the one-CPU one, each category's share of the
/// thread's samples times the run's CPU per write, the writer: its own transmits
/// (`tcp_write_xmit` in `tcp_sendmsg`) 0.25 → 0.93 and 0.27 → 1.30 µs, the ACKs from
/// its backlog (`__release_sock`) 0 → 0.32 and 0 → 0.61, its softirq's receive of its
/// segments (`tcp_v4_rcv` under `net_rx_action`, not the deferred frees) 0.01 → 0.28
/// and 0.02 → 0.45: 1.27 and 2.07 µs more, 25 % and 41 % of the reader's 5.04 µs; their
/// mean. On one CPU the reader's ACK pushes the queued segments in its own softirq
/// (`__tcp_push_pending_frames`: 0.96-1.23 µs of the reader's).
pub const TCP_RECV_ON_SENDER_PCT: u32 = 33;
/// A stream's copy when its ends run on two CPUs, per KiB, beyond what the simulator's
/// `host` hierarchy charges (it streams another core's lines about as fast as its own
/// L2). A CPU-clock profile of the two-CPU AF_UNIX stream (`perf record -e cpu-clock
/// -F 4000`, load 13; the guest has no PMU) against the one-CPU one, each symbol's share
/// times the untraced CPU per write (31.0 and 13.35 µs): the writer's
/// `_copy_from_iter` 7.5 against 1.8 µs per 64 KiB write, 5.7 µs more: 89 ns per KiB
/// copied (the simulator copies the 60 KiB in page blocks; the head's 4 KiB go to slab
/// memory, not modelled). Two threads copying through a
/// 4 MiB ring of buffers on the two vCPUs (one line moves between them in 165 ns one
/// way) showed the same term, 2-11 µs per 64 KiB with the load.
pub const CROSS_COPY_IN_NS_PER_KIB: u32 = 89;
/// The reader's `_copy_to_iter`, the same way: 3.7 against 1.7 µs per write.
pub const CROSS_COPY_OUT_NS_PER_KIB: u32 = 31;
/// A wakeup across the vCPUs, the waker's CPU (`try_to_wake_up` and the IPI, which in
/// this KVM guest exits to the hypervisor): the writer's `_raw_spin_unlock_irqrestore`
/// in the same profiles, 5.0 µs per write at two CPUs, with 0.43 sleeps per write
/// (`sched_switch`, traced runs); the same local wakeup at one CPU costs 0.9 µs. Two
/// threads passing a byte through two pipes across the vCPUs used 21-28 µs of CPU each
/// per round trip (a wakeup sent, a sleep and wakeup taken).
pub const WAKE_NS: u32 = 11_000;
/// The sleeper's switches out and back in (the cost model's `switch_ns`): the tasks'
/// `finish_task_switch` at two CPUs, 2.9 µs per write at 0.43 sleeps.
pub const SWITCH_NS: u32 = 6_700;
/// From the wakeup to the woken reader running: `sched_waking` to its `sched_switch`
/// in the two-CPU streams, medians of five traced runs 12-17 µs.
pub const WAKEUP_NS: u32 = 14_000;
/// TCP over loopback: the send buffer the writer fills before it sleeps, bytes, given
/// to the simulated stream as its receive buffer (its window is half of it). The live
/// writer slept once per 230-270 writes of 16 KiB at two CPUs (0.004 per write,
/// `sched_switch` with a sleeping state): about `tcp_wmem`'s 4 MiB ceiling, to which
/// the kernel grows a busy socket's buffer, not the 208 KiB default of SCTP.
pub const TCP_BUFFER_BYTES: u32 = 8 << 20;
/// TCP on one CPU: messages (of two 16 KiB writes) the writer queues before the reader
/// runs: the kernel switched 0.02 times per write, a hand-over each way per 100 writes.
pub const TCP_TURN_MESSAGES: u32 = 50;
