/* pagealloc from C: create an allocator over 64 MiB, allocate and use pages of every
 * order, bulk-allocate, show that a double free, a foreign pointer and a wrong order
 * are refused with their documented codes, print counters and the vmstat text, and
 * check that everything is free again at the end.
 *
 * Build (from the repository root, after `cargo build -p pagealloc-ffi --release`):
 *   cc -Icrates/pagealloc-ffi/include crates/pagealloc-ffi/examples/c/example.c \
 *      target/release/libpagealloc_ffi.a -lpthread -ldl -lm -o example && ./example
 * or against the shared library:
 *   cc ... -Ltarget/release -lpagealloc_ffi -o example && LD_LIBRARY_PATH=target/release ./example
 */
#include "pagealloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(expr, want)                                                          \
    do {                                                                           \
        int got_ = (int)(expr);                                                    \
        if (got_ != (want)) {                                                      \
            fprintf(stderr, "%s:%d: %s = %d (%s), want %d (%s)\n", __FILE__,       \
                    __LINE__, #expr, got_, pagealloc_strerror(got_), (want),       \
                    pagealloc_strerror(want));                                     \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

int main(void) {
    int err = 0;

    /* Bad input is an error, not a crash. */
    if (pagealloc_create(64 << 20, "no-such-preset", &err) != NULL || err != PAGEALLOC_EINVAL) {
        fprintf(stderr, "unknown preset accepted\n");
        return 1;
    }
    pagealloc_t *pa = pagealloc_create(64 << 20, "linux-6.12,batch_scale_max=3", &err);
    if (pa == NULL) {
        fprintf(stderr, "pagealloc_create: %s\n", pagealloc_strerror(err));
        return 1;
    }

    /* One block of every order; write to all of it. */
    void *blocks[PAGEALLOC_MAX_ORDER + 1];
    for (unsigned order = 0; order <= PAGEALLOC_MAX_ORDER; order++) {
        CHECK(pagealloc_alloc(pa, order, PAGEALLOC_MOVABLE, &blocks[order]), PAGEALLOC_OK);
        memset(blocks[order], (int)order, (size_t)PAGEALLOC_PAGE_SIZE << order);
    }
    void *p = NULL;
    CHECK(pagealloc_alloc(pa, PAGEALLOC_MAX_ORDER + 1, PAGEALLOC_MOVABLE, &p), PAGEALLOC_EORDER);
    CHECK(pagealloc_alloc(pa, 0, 7, &p), PAGEALLOC_EINVAL);
    CHECK(pagealloc_alloc(pa, 0, PAGEALLOC_UNMOVABLE | PAGEALLOC_ATOMIC, &p), PAGEALLOC_OK);
    CHECK(pagealloc_free(pa, p, 0), PAGEALLOC_OK);

    /* Frees: a wrong order and a foreign pointer are refused and change nothing. */
    CHECK(pagealloc_free(pa, blocks[3], 2), PAGEALLOC_EORDERMISMATCH);
    static char not_ours[2 * 4096];
    void *foreign = (void *)(((uintptr_t)not_ours + 4095) & ~(uintptr_t)4095);
    CHECK(pagealloc_free(pa, foreign, 0), PAGEALLOC_EFOREIGN);
    for (unsigned order = 0; order <= PAGEALLOC_MAX_ORDER; order++)
        CHECK(pagealloc_free(pa, blocks[order], order), PAGEALLOC_OK);

    /* The double free: refused with PAGEALLOC_EDOUBLEFREE. */
    CHECK(pagealloc_free(pa, blocks[0], 0), PAGEALLOC_EDOUBLEFREE);
    printf("double free refused: %s\n", pagealloc_strerror(PAGEALLOC_EDOUBLEFREE));

    /* Bulk: 256 order-0 pages in one call, freed in one call. */
    enum { N = 256 };
    void *many[N];
    intptr_t got = pagealloc_alloc_bulk(pa, 0, PAGEALLOC_MOVABLE, N, many);
    if (got != N) {
        fprintf(stderr, "alloc_bulk: %ld\n", (long)got);
        return 1;
    }
    for (int i = 0; i < N; i++)
        ((volatile char *)many[i])[0] = 1;
    size_t bad = 0;
    CHECK(pagealloc_free_bulk(pa, (void *const *)many, N, 0, &bad), PAGEALLOC_OK);
    /* Freeing the same array again stops at its first entry. */
    CHECK(pagealloc_free_bulk(pa, (void *const *)many, N, 0, &bad), PAGEALLOC_EDOUBLEFREE);
    if (bad != 0) {
        fprintf(stderr, "free_bulk failed_index %zu\n", bad);
        return 1;
    }

    /* Counters and text reports. */
    pagealloc_counters_t c;
    CHECK(pagealloc_counters(pa, &c), PAGEALLOC_OK);
    printf("pgalloc %llu pgfree %llu pcp_refill %llu pcp_pages %llu managed %llu\n",
           (unsigned long long)c.pgalloc, (unsigned long long)c.pgfree,
           (unsigned long long)c.pcp_refill, (unsigned long long)c.pcp_pages,
           (unsigned long long)c.managed_pages);
    if (c.pgalloc != c.pgfree) {
        fprintf(stderr, "pgalloc != pgfree\n");
        return 1;
    }
    intptr_t need = pagealloc_vmstat(pa, NULL, 0);
    char *text = malloc((size_t)need + 1);
    if (text == NULL || pagealloc_vmstat(pa, text, (size_t)need + 1) != need || strstr(text, "pgalloc ") == NULL) {
        fprintf(stderr, "vmstat text\n");
        return 1;
    }
    free(text);
    char small[64];
    need = pagealloc_zoneinfo(pa, small, sizeof small);
    if (need < (intptr_t)sizeof small || strlen(small) != sizeof small - 1) {
        fprintf(stderr, "zoneinfo truncation\n");
        return 1;
    }

    /* Everything back: drain the per-CPU caches, then every page is free. */
    CHECK(pagealloc_drain(pa), PAGEALLOC_OK);
    CHECK(pagealloc_validate(pa), PAGEALLOC_OK);
    CHECK(pagealloc_counters(pa, &c), PAGEALLOC_OK);
    if (c.free_pages != c.managed_pages || c.pcp_pages != 0) {
        fprintf(stderr, "pages lost: %llu free of %llu\n", (unsigned long long)c.free_pages,
                (unsigned long long)c.managed_pages);
        return 1;
    }
    pagealloc_destroy(pa);
    printf("ok\n");
    return 0;
}
