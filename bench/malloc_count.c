/* bench/malloc_count.c — LD_PRELOAD shim that counts heap allocations.
 *
 * Every malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign and
 * valloc call in the process (all threads) increments one atomic counter, then
 * goes to glibc's own allocator (__libc_* entry points, so no dlsym bootstrap).
 * A program reads the counter through bench_malloc_count(), found with
 * dlsym(RTLD_DEFAULT, "bench_malloc_count"); when the process exits the total is
 * written to the file named by BENCH_MALLOC_COUNT_OUT, if set (for peers that
 * cannot read it themselves). Cost: one relaxed atomic add per allocation. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);

static _Atomic uint64_t n_allocs;

uint64_t bench_malloc_count(void) { return atomic_load_explicit(&n_allocs, memory_order_relaxed); }

#define COUNT() atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed)

void *malloc(size_t n) { COUNT(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { COUNT(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { COUNT(); return __libc_realloc(p, n); }
void *memalign(size_t al, size_t n) { COUNT(); return __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { COUNT(); return __libc_memalign(al, n); }
void *valloc(size_t n) { COUNT(); return __libc_valloc(n); }
int posix_memalign(void **out, size_t al, size_t n) {
    COUNT();
    void *p = __libc_memalign(al, n);
    if (!p && n) return ENOMEM;
    *out = p;
    return 0;
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("BENCH_MALLOC_COUNT_OUT");
    if (!path || !*path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "%llu\n", (unsigned long long)bench_malloc_count());
    fclose(f);
}
