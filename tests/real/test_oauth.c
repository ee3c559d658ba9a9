/* test_oauth.c — cs_kafka_oauthbearer_token_cb on the real broker's
 * OAUTHBEARER listener (`scripts/kafka oauth`: SASL_PLAINTEXT with Kafka's
 * unsecured validator, which accepts unsigned JWTs with a `sub` and an
 * unexpired `exp`). The provider mints such tokens itself, each valid for
 * TOKEN_LIFETIME_MS only:
 *   - records published with cs_publish over the listener are handled by a
 *     Tracked subscription over it: both clients got their first token from
 *     the provider;
 *   - the provider is called again before the tokens expire (librdkafka
 *     refreshes at 80 % of the lifetime), and once the first tokens have
 *     expired, records published then are still handled: consumption goes
 *     on across the refresh, and cs_kafka_committed reads the final
 *     positions back over the listener (its short-lived reader gets a token
 *     too);
 *   - a provider that fails: the start fails with an authentication error
 *     (no token, no connection) and the provider's reason is logged.
 *
 * The listener comes from tests/with-real-broker (CSTREAM_OAUTH_BROKERS, what
 * `scripts/kafka oauth` prints). A broker started before scripts/kafka had
 * that listener has none: the tests skip, saying so. Topics are created over
 * the PLAINTEXT listener (cst_cluster). */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstest.h"

enum { TOKEN_LIFETIME_MS = 5000, RECORDS = 20, WAIT_MS = 60000 };

static const char *oauth_brokers(void) {
    const char *v = getenv("CSTREAM_OAUTH_BROKERS");
    return v && *v ? v : NULL;
}

#define NEED_LISTENER()                                                                                                \
    do {                                                                                                               \
        if (!oauth_brokers())                                                                                          \
            cst_skip("CSTREAM_OAUTH_BROKERS is unset: `scripts/kafka oauth` does not answer (the running broker was "  \
                     "started before scripts/kafka had the OAUTHBEARER listener: scripts/kafka restart adds it); "     \
                     "run through tests/with-real-broker");                                                            \
    } while (0)

static int64_t epoch_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* base64url without padding (RFC 7515 2). */
static void b64url(const char *in, char *out) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t n = strlen(in), o = 0;
    const unsigned char *s = (const unsigned char *)in;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        if (i + 1 < n) out[o++] = tab[v >> 6 & 63];
        if (i + 2 < n) out[o++] = tab[v & 63];
    }
    out[o] = '\0';
}

typedef struct provider {
    _Atomic int calls;
    _Atomic int64_t first_expiry_ms; /* of the first token handed out */
    bool fail;
    /* The token handed out last: the provider's storage, valid until its next
     * call (cs_oauth_token borrows it); one client at a time may call, so
     * each call gets its own slot, and a slot is reused only many calls later. */
    char tokens[64][512];
} provider;

static cs_err mint(cs_kafka *k, const char *config, cs_oauth_token *out, char *reason, size_t reason_size, void *user) {
    (void)k, (void)config;
    provider *p = user;
    int n = atomic_fetch_add(&p->calls, 1);
    if (p->fail) {
        snprintf(reason, reason_size, "token service unreachable (test)");
        return CS_ERR_AUTH;
    }
    int64_t now = epoch_ms(), expires = now + TOKEN_LIFETIME_MS;
    int64_t none = 0;
    atomic_compare_exchange_strong(&p->first_expiry_ms, &none, expires);
    char header[64], payload[160], h64[128], p64[256];
    snprintf(header, sizeof header, "{\"alg\":\"none\"}");
    /* exp and iat in seconds (JWT NumericDate); exp rounded down, so the
     * broker's view of the expiry is never later than the client's. */
    snprintf(payload, sizeof payload, "{\"sub\":\"cstream-test\",\"iat\":%lld,\"exp\":%lld}", (long long)(now / 1000),
             (long long)(expires / 1000));
    b64url(header, h64);
    b64url(payload, p64);
    char *slot = p->tokens[n % 64];
    snprintf(slot, sizeof p->tokens[0], "%s.%s.", h64, p64);
    out->value = slot;
    out->expires_ms = expires / 1000 * 1000;
    out->principal = "cstream-test";
    return CS_OK;
}

typedef struct fixture {
    cs_app *app;
    cs_kafka *k;
    char topic[128], group[160];
    _Atomic int handled;
    provider prov;
} fixture;

static cs_outcome handler(cs_delivery *d, void *user) {
    (void)d;
    atomic_fetch_add(&((fixture *)user)->handled, 1);
    return CS_ACK;
}

static cs_err start(fixture *f, const char *prefix) {
    cst_fresh(prefix, 1, f->topic, f->group, sizeof f->topic);
    f->app = cs_app_new(prefix, "1.0");
    assert_non_null(f->app);
    f->k = cs_kafka_new(oauth_brokers());
    assert_non_null(f->k);
    CST_OK(cs_kafka_config(f->k, "security.protocol", "SASL_PLAINTEXT"));
    CST_OK(cs_kafka_config(f->k, "sasl.mechanisms", "OAUTHBEARER"));
    CST_OK(cs_kafka_oauthbearer_token_cb(f->k, mint, &f->prov));
    cs_sub *s = cs_kafka_subscribe(f->k, f->topic, handler, f);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, f->group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_config(s, "session.timeout.ms", "6000"));
    CST_OK(cs_app_add_kafka(f->app, f->k));
    return cs_app_start(f->app);
}

static void publish(fixture *f, int n) {
    for (int i = 0; i < n; i++) {
        cs_record r = {.topic = f->topic, .partition = 0, .value = "v", .value_len = 1};
        CST_OK(cs_publish(f->k, &r, NULL));
    }
}

typedef struct want {
    fixture *f;
    int handled, calls;
    int64_t after_ms; /* epoch */
} want;
static bool reached(void *arg) {
    want *w = arg;
    return atomic_load(&w->f->handled) >= w->handled && atomic_load(&w->f->prov.calls) >= w->calls &&
           epoch_ms() >= w->after_ms;
}

static void test_tokens_refresh_and_consumption_goes_on(void **state) {
    (void)state;
    NEED_LISTENER();
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    CST_OK(start(f, "oauth"));
    assert_true(atomic_load(&f->prov.calls) >= 1); /* the start authenticated with a minted token */
    publish(f, RECORDS);
    want first = {f, RECORDS, 2, 0}; /* the consumer's token and the producer's */
    if (!cst_wait(reached, &first, WAIT_MS))
        fail_msg("handled %d of %d records, provider called %d times", atomic_load(&f->handled), RECORDS,
                 atomic_load(&f->prov.calls));
    int calls = atomic_load(&f->prov.calls);
    /* Past the first token's expiry, both clients refreshed (at 80 %). */
    want refreshed = {f, RECORDS, calls + 2, atomic_load(&f->prov.first_expiry_ms) + 1000};
    if (!cst_wait(reached, &refreshed, WAIT_MS))
        fail_msg("the provider was called %d times in all (%d before the tokens expired): no refresh",
                 atomic_load(&f->prov.calls), calls);
    publish(f, RECORDS);
    want second = {f, 2 * RECORDS, 0, 0};
    if (!cst_wait(reached, &second, WAIT_MS))
        fail_msg("after the first tokens expired, %d of %d more records were handled",
                 atomic_load(&f->handled) - RECORDS, RECORDS);
    CST_OK(cs_app_stop(f->app));
    /* The positions, read back over the listener with a token too (the group reader). */
    int64_t committed = -1;
    CST_OK(cs_kafka_committed(f->k, f->group, f->topic, 0, &committed));
    assert_int_equal(committed, 2 * RECORDS);
    cs_app_destroy(f->app);
    free(f);
}

static void test_failing_provider_fails_the_start(void **state) {
    (void)state;
    NEED_LISTENER();
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->prov.fail = true;
    cs_err err = start(f, "oauthfail");
    if (err != CS_ERR_AUTH) fail_msg("start: %s (%s), expected CS_ERR_AUTH", cs_err_name(err), cs_errmsg());
    assert_true(atomic_load(&f->prov.calls) >= 1);
    cs_app_destroy(f->app);
    free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_refresh_and_consumption_goes_on),
        cmocka_unit_test(test_failing_provider_fails_the_start),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
