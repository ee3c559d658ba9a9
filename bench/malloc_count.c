/* bench/malloc_count.c — LD_PRELOAD shim that counts heap allocations.
 *
 * Every malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign and
 * valloc call in the process (all threads) increments one atomic counter, then
 * goes to glibc's own allocator (__libc_* entry points, so no dlsym bootstrap).
 * A program reads the counter through bench_malloc_count(), found with
 * dlsym(RTLD_DEFAULT, "bench_malloc_count"); when the process exits the total is
 * written to the file named by BENCH_MALLOC_COUNT_OUT, if set (for peers that
 * cannot read it themselves). Cost: one relaxed atomic add per allocation.
 *
 * Backtrace mode, to find out *which* allocations a program makes: with
 * BENCH_MALLOC_BT=FILE (and BENCH_MALLOC_BT_EVERY=K, default 97) every K-th
 * allocation writes its call stack (backtrace_symbols_fd, raw addresses when
 * there is no symbol) to FILE, one "--" line between stacks. A sample of 1 in
 * K keeps the cost bounded; a prime K avoids locking onto a periodic pattern.
 * Aggregate with bench/malloc_bt.py. A thread-local guard stops recursion:
 * backtrace() itself allocates the first time it runs (it loads libgcc_s). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);

static _Atomic uint64_t n_allocs;

uint64_t bench_malloc_count(void) { return atomic_load_explicit(&n_allocs, memory_order_relaxed); }

static int bt_fd = -1; /* set once by bt_init, before any thread starts */
static uint64_t bt_every = 97;
static _Thread_local int in_bt;
static atomic_flag bt_lock = ATOMIC_FLAG_INIT; /* one stack at a time in FILE */

__attribute__((constructor)) static void bt_init(void) {
    const char *path = getenv("BENCH_MALLOC_BT");
    const char *every = getenv("BENCH_MALLOC_BT_EVERY");
    if (every && atoll(every) > 0) bt_every = (uint64_t)atoll(every);
    bt_fd = path && *path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644) : -1;
}

static void count(void) {
    uint64_t n = atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    if (bt_fd < 0 || in_bt || n % bt_every) return;
    in_bt = 1;
    {
        void *frames[24];
        int depth = backtrace(frames, 24);
        /* backtrace_symbols_fd writes line by line: hold the lock so stacks
         * of two threads do not interleave */
        while (atomic_flag_test_and_set_explicit(&bt_lock, memory_order_acquire)) {}
        backtrace_symbols_fd(frames, depth, bt_fd);
        (void)!write(bt_fd, "--\n", 3);
        atomic_flag_clear_explicit(&bt_lock, memory_order_release);
    }
    in_bt = 0;
}

#define COUNT() count()

void *malloc(size_t n) {
    COUNT();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    COUNT();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    COUNT();
    return __libc_realloc(p, n);
}
void *memalign(size_t al, size_t n) {
    COUNT();
    return __libc_memalign(al, n);
}
void *aligned_alloc(size_t al, size_t n) {
    COUNT();
    return __libc_memalign(al, n);
}
void *valloc(size_t n) {
    COUNT();
    return __libc_valloc(n);
}
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
