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
    uint64_t fail_every;                         /* 0: never fails */
    bool (*should_fail)(struct flaky *, void *); /* overrides fail_every when set */
    void *should_fail_arg;
} flaky;

typedef struct counters_store {
    flaky flaky;
    uint64_t counted; /* page views stored (under flaky.lock) */
} counters_store;

typedef struct bank {
    flaky flaky;
    uint64_t paid;     /* payouts paid (under flaky.lock); a repeated id is paid once */
    uint8_t *paid_ids; /* paid_ids[id] != 0 once paid; ids below BANK_MAX_IDS */
} bank;
#define BANK_MAX_IDS 1000000

typedef struct ledger {
    pthread_mutex_t lock;
    uint64_t matched;
    uint64_t cents;
} ledger;

typedef struct clients {
    counters_store counters;
    bank bank;
    ledger ledger;
} clients;

/* The service's start-up and shutdown hooks build and free the clients. */
void clients_open(clients *c, uint64_t counters_fail_every, uint64_t bank_fail_every);
void clients_close(clients *c);

/* 0 on success, -1 when the store "does not answer". */
int counters_increment(counters_store *s, const char *page);
uint64_t counters_counted(counters_store *s);
/* 0 when paid (or already paid: the bank is idempotent by id), -1 when it does not answer. */
int bank_pay(bank *b, uint64_t id, uint64_t amount_cents);
uint64_t bank_paid(bank *b);
void ledger_match(ledger *l, uint64_t payout_id, uint64_t amount_cents);
uint64_t ledger_matched(ledger *l);

#endif
