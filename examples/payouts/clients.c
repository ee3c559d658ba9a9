/* clients.c — in-memory stand-ins for the service's clients, thread-safe. */
#include "clients.h"

#include <stdlib.h>
#include <string.h>

static void flaky_init(flaky *f, uint64_t fail_every) {
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    f->fail_every = fail_every;
}

/* Called with f->lock held. */
static bool flaky_fails(flaky *f) {
    f->calls++;
    if (f->should_fail) return f->should_fail(f, f->should_fail_arg);
    return f->fail_every && f->calls % f->fail_every == 0;
}

void clients_open(clients *c, uint64_t counters_fail_every, uint64_t bank_fail_every) {
    memset(c, 0, sizeof *c);
    flaky_init(&c->counters.flaky, counters_fail_every);
    flaky_init(&c->bank.flaky, bank_fail_every);
    c->bank.paid_ids = calloc(BANK_MAX_IDS, 1);
    pthread_mutex_init(&c->ledger.lock, NULL);
}

void clients_close(clients *c) {
    pthread_mutex_destroy(&c->counters.flaky.lock);
    pthread_mutex_destroy(&c->bank.flaky.lock);
    free(c->bank.paid_ids);
    c->bank.paid_ids = NULL;
    pthread_mutex_destroy(&c->ledger.lock);
}

void ledger_match(ledger *l, uint64_t payout_id, uint64_t amount_cents) {
    (void)payout_id;
    pthread_mutex_lock(&l->lock);
    l->matched++;
    l->cents += amount_cents;
    pthread_mutex_unlock(&l->lock);
}

uint64_t ledger_matched(ledger *l) {
    pthread_mutex_lock(&l->lock);
    uint64_t n = l->matched;
    pthread_mutex_unlock(&l->lock);
    return n;
}

int bank_pay(bank *b, uint64_t id, uint64_t amount_cents) {
    (void)amount_cents;
    pthread_mutex_lock(&b->flaky.lock);
    bool fail = flaky_fails(&b->flaky);
    if (!fail && id < BANK_MAX_IDS && b->paid_ids && !b->paid_ids[id]) {
        b->paid_ids[id] = 1;
        b->paid++;
    }
    pthread_mutex_unlock(&b->flaky.lock);
    return fail ? -1 : 0;
}

uint64_t bank_paid(bank *b) {
    pthread_mutex_lock(&b->flaky.lock);
    uint64_t n = b->paid;
    pthread_mutex_unlock(&b->flaky.lock);
    return n;
}

int counters_increment(counters_store *s, const char *page) {
    (void)page;
    pthread_mutex_lock(&s->flaky.lock);
    bool fail = flaky_fails(&s->flaky);
    if (!fail) s->counted++;
    pthread_mutex_unlock(&s->flaky.lock);
    return fail ? -1 : 0;
}

uint64_t counters_counted(counters_store *s) {
    pthread_mutex_lock(&s->flaky.lock);
    uint64_t n = s->counted;
    pthread_mutex_unlock(&s->flaky.lock);
    return n;
}
