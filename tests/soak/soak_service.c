/* soak_service.c — the Tracked service `make soak` runs for millions of
 * records while soak_driver samples its memory and restarts the broker under it.
 *
 * Each record's value starts with its id in decimal. The handler asks for a
 * retry on the first attempt of every record whose id ends in 07 (1% of them),
 * and acks everything else. Every ack sets the id's bit in a bitmap that lives
 * in a file shared with the driver (MAP_SHARED), so the driver counts lost and
 * duplicated records without asking this process anything, even if it dies.
 *
 * usage: soak_service TOPIC GROUP SHARED_FILE WORKERS
 * CSTREAM_BROKERS names the cluster; SIGTERM stops it gracefully. */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstream.h>

#include "../support/stop_signals.h"

#include "soak_shared.h"

static soak_shared *shared;

static cs_outcome handle(cs_delivery *d, void *user) {
    (void)user;
    size_t len = 0;
    const char *value = cs_delivery_value(d, &len);
    char digits[24];
    size_t n = len < sizeof digits - 1 ? len : sizeof digits - 1;
    memcpy(digits, value ? value : "", value ? n : 0);
    digits[value ? n : 0] = '\0';
    char *end = NULL;
    unsigned long long id = strtoull(digits, &end, 10);
    if (end == digits || id >= shared->records) {
        /* Not one of ours: counted, so the driver reports it, and settled so
         * it cannot hold the committed position back. */
        atomic_fetch_add(&shared->foreign, 1);
        return CS_DROP;
    }
    if (id % 100 == 7 && cs_delivery_attempt(d) == 1) {
        atomic_fetch_add(&shared->retries, 1);
        return CS_RETRY;
    }
    uint64_t bit = UINT64_C(1) << (id % 64);
    uint64_t before = atomic_fetch_or(&shared->seen[id / 64], bit);
    if (before & bit) atomic_fetch_add(&shared->duplicates, 1);
    else atomic_fetch_add(&shared->distinct, 1);
    return CS_ACK;
}

/* The resident set keeps the allocator's high-water marks (glibc does not
 * hand freed arena memory back), so it steps up after bursts and never comes
 * down. The bytes malloc holds for live allocations do come down: they are
 * what shows a leak. Less the fetch buffer's peak: the buffer keeps the chunks
 * it once needed for reuse, up to its budget (src/core/store.c), so its
 * malloc'd bytes step up to wherever the biggest burst so far took them and
 * stay there. That is bounded and not a leak, and counted in the floor it
 * made the verdict depend on when the burst came (before or after the early
 * floor's window). A leak of chunks would fill the buffer and stop the
 * records, which fails the soak another way. */
static atomic_bool reporting = true; /* cleared before the subscription is destroyed */

static void *report_heap(void *arg) {
    cs_sub *s = arg;
    while (atomic_load(&reporting)) {
        struct mallinfo2 mi = mallinfo2();
        uint64_t heap = (uint64_t)(mi.uordblks + mi.hblkhd);
        cs_sub_stats st = {0};
        cs_sub_stats_get(s, &st);
        heap = heap > st.fetch_buffer_peak ? heap - st.fetch_buffer_peak : 0;
        atomic_store(&shared->heap_bytes, heap);
        struct timespec nap = {0, 250 * 1000000L};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

static soak_shared *map_shared(const char *path) {
    int fd = open(path, O_RDWR);
    if (fd < 0) {
        perror(path);
        return NULL;
    }
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(soak_shared))
        p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        fprintf(stderr, "soak_service: cannot map %s\n", path);
        return NULL;
    }
    soak_shared *s = p;
    /* Touch every page of the bitmap now, so the resident set does not grow
     * by the bitmap's size as the ids go by and blur the curve we watch. */
    volatile uint64_t sink = 0;
    for (uint64_t i = 0; i < soak_shared_words(s->records); i += 512) sink += atomic_load(&s->seen[i]);
    (void)sink;
    return s;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s TOPIC GROUP SHARED_FILE WORKERS\n", argv[0]);
        return 2;
    }
    cst_hold_stop_signals();
    shared = map_shared(argv[3]);
    if (!shared) return 2;
    cs_log_set_level(CS_LOG_WARN);
    cs_app *app = cs_app_new("soak", "1.0");
    cs_kafka *k = cs_kafka_new(NULL);
    cs_sub *s = cs_kafka_subscribe(k, argv[1], handle, NULL);
    cs_err err = s ? CS_OK : CS_ERR_ARG;
    if (!err) err = cs_sub_group(s, argv[2]);
    if (!err) err = cs_sub_commit_mode(s, CS_COMMIT_TRACKED);
    if (!err) err = cs_sub_workers(s, atoi(argv[4]));
    if (!err) err = cs_app_add_kafka(app, k);
    pthread_t heap_reporter;
    bool reporter = !err && pthread_create(&heap_reporter, NULL, report_heap, s) == 0;
    if (!err) err = cs_app_run(app);
    if (err) fprintf(stderr, "soak_service: %s\n", cs_errmsg());
    atomic_store(&reporting, false);
    if (reporter) pthread_join(heap_reporter, NULL);
    cs_app_destroy(app);
    return err ? 1 : 0;
}
