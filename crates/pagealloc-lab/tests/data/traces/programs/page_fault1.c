/* will-it-scale page_fault1, as its tests/page_fault1.c does it: each process maps
 * a private anonymous region, writes one byte per page (a fault each), unmaps it, in a
 * loop. Here: NPROC processes pinned one per CPU, MiB per region, LOOPS loops. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
	int nproc = argc > 1 ? atoi(argv[1]) : 2;
	size_t mib = argc > 2 ? strtoul(argv[2], 0, 10) : 32;
	int loops = argc > 3 ? atoi(argv[3]) : 4;
	size_t len = mib << 20, pg = 4096;
	for (int p = 0; p < nproc; p++) {
		if (fork() == 0) {
			cpu_set_t s;
			CPU_ZERO(&s);
			CPU_SET(p, &s);
			sched_setaffinity(0, sizeof s, &s);
			for (int l = 0; l < loops; l++) {
				char *c = mmap(0, len, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				if (c == MAP_FAILED) { perror("mmap"); _exit(1); }
				madvise(c, len, MADV_NOHUGEPAGE);
				for (size_t i = 0; i < len; i += pg)
					c[i] = 0;
				munmap(c, len);
			}
			_exit(0);
		}
	}
	int st, rc = 0;
	while (wait(&st) > 0)
		rc |= !WIFEXITED(st) || WEXITSTATUS(st);
	return rc;
}
