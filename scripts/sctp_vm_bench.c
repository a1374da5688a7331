/*
 * A stream of fixed-size messages over loopback, netperf SCTP_STREAM's / TCP_STREAM's
 * method: the sender send()s MSG-byte messages in a loop on a connected one-to-one
 * socket, the receiver recv()s them. Run by scripts/sctp_vm.sh inside a QEMU VM (not
 * by CI). Build: gcc -O2 -static -o stream_bench sctp_vm_bench.c
 *
 * usage: stream_bench sctp|tcp MSG_BYTES MESSAGES SENDER_CPU RECEIVER_CPU PORT
 *
 * Prints one line: protocol, message bytes, messages, CPUs, each end's CPU time per
 * message (CLOCK_PROCESS_CPUTIME_ID, taken from the connection's start to the last
 * byte; it includes the softirq work done in the task's context), the wall time per
 * message, each CPU's busy time per message from /proc/stat (user + nice + system +
 * irq + softirq: it includes softirq work done in ksoftirqd or on interrupt), and the
 * receiver's recv() calls per message. The sender's and receiver's pids are printed
 * first (a tracer filters on them).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef IPPROTO_SCTP
#define IPPROTO_SCTP 132
#endif

struct result {
	double cpu_ns;
	double wall_ns;
	unsigned long long calls;
};

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		die("sched_setaffinity");
}

static double now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Busy jiffies of each of the first two CPUs (user nice system idle iowait irq softirq). */
static void cpu_busy(unsigned long long busy[2])
{
	FILE *f = fopen("/proc/stat", "r");
	char line[512];
	busy[0] = busy[1] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		int cpu;
		unsigned long long u, n, s, i, w, q, sq;
		if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu", &cpu, &u, &n, &s,
			   &i, &w, &q, &sq) == 8 &&
		    cpu >= 0 && cpu < 2)
			busy[cpu] = u + n + s + q + sq;
	}
	fclose(f);
}

static int make_socket(int sctp)
{
	int fd = socket(AF_INET, SOCK_STREAM, sctp ? IPPROTO_SCTP : IPPROTO_TCP);
	if (fd < 0)
		die("socket");
	return fd;
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: %s sctp|tcp MSG_BYTES MESSAGES SENDER_CPU RECEIVER_CPU PORT\n",
			argv[0]);
		return 2;
	}
	int sctp = strcmp(argv[1], "sctp") == 0;
	if (!sctp && strcmp(argv[1], "tcp") != 0) {
		fprintf(stderr, "protocol must be sctp or tcp\n");
		return 2;
	}
	long msg = atol(argv[2]);
	long long messages = atoll(argv[3]);
	int scpu = atoi(argv[4]), rcpu = atoi(argv[5]), port = atoi(argv[6]);
	if (msg <= 0 || msg > (1 << 20) || messages <= 0) {
		fprintf(stderr, "MSG_BYTES must be 1..1048576 and MESSAGES above 0\n");
		return 2;
	}
	long long total = (long long)msg * messages;
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(port) };
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	int lfd = make_socket(sctp);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		die("bind");
	if (listen(lfd, 1) != 0)
		die("listen");

	/* The receiver's result comes back through a pipe. */
	int res_pipe[2];
	if (pipe(res_pipe) != 0)
		die("pipe");
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		pin(rcpu);
		close(res_pipe[0]);
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept");
		char *buf = malloc(msg);
		struct result r = { 0 };
		double c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);
		long long got = 0;
		while (got < total) {
			ssize_t n = recv(fd, buf, msg, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				die("recv");
			got += n;
			r.calls++;
		}
		r.cpu_ns = now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
		r.wall_ns = now_ns(CLOCK_MONOTONIC) - w0;
		if (write(res_pipe[1], &r, sizeof(r)) != sizeof(r))
			die("write");
		close(fd);
		_exit(0);
	}
	close(res_pipe[1]);
	close(lfd);
	pin(scpu);
	printf("pids sender %d receiver %d\n", (int)getpid(), (int)child);
	fflush(stdout);
	int fd = make_socket(sctp);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		die("connect");
	char *buf = malloc(msg);
	memset(buf, 'x', msg);
	unsigned long long b0[2], b1[2];
	cpu_busy(b0);
	double c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);
	for (long long i = 0; i < messages; i++) {
		long off = 0;
		while (off < msg) {
			ssize_t n = send(fd, buf + off, msg - off, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				die("send");
			off += n;
		}
	}
	double scpu_ns = now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
	struct result r;
	if (read(res_pipe[0], &r, sizeof(r)) != sizeof(r))
		die("read");
	double wall = now_ns(CLOCK_MONOTONIC) - w0;
	cpu_busy(b1);
	waitpid(child, NULL, 0);
	close(fd);
	long hz = sysconf(_SC_CLK_TCK);
	double per = (double)messages;
	printf("result proto=%s msg=%ld messages=%lld scpu=%d rcpu=%d send_cpu_ns=%.0f "
	       "recv_cpu_ns=%.0f wall_ns=%.0f cpu0_busy_ns=%.0f cpu1_busy_ns=%.0f "
	       "recv_calls=%.3f\n",
	       argv[1], msg, messages, scpu, rcpu, scpu_ns / per, r.cpu_ns / per, wall / per,
	       (double)(b1[0] - b0[0]) * 1e9 / hz / per, (double)(b1[1] - b0[1]) * 1e9 / hz / per,
	       (double)r.calls / per);
	return 0;
}
