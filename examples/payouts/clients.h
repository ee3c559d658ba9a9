/* clients.h — the payouts service's outside world: an analytics counters
 * store that fails now and then. Tests replace the failure pattern. */
#ifndef PAYOUTS_CLIENTS_H
#define PAYOUTS_CLIENTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A call fails when should_fail says so (default: every `fail_every`-th call). */
typedef struct flaky {
    pthread_mutex_t lock;
    uint64_t calls;
    uint64_t fail_every;                       /* 0: never fails */
    bool (*should_fail)(struct flaky *, void *); /* overrides fail_every when set */
    void *should_fail_arg;
} flaky;

typedef struct counters_store {
    flaky flaky;
    uint64_t counted; /* page views stored (under flaky.lock) */
} counters_store;

typedef struct clients {
    counters_store counters;
} clients;

/* The service's start-up and shutdown hooks build and free the clients. */
void clients_open(clients *c, uint64_t counters_fail_every);
void clients_close(clients *c);

/* 0 on success, -1 when the store "does not answer". */
int counters_increment(counters_store *s, const char *page);
uint64_t counters_counted(counters_store *s);

#endif
