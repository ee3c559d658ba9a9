/* test_registry.c — the Schema Registry client (src/schema/registry.c)
 * against the real registry scripts/registry starts (Apicurio Registry's
 * Confluent API), through tests/with-registry:
 *
 *   - a registered schema comes back by its id, from a fresh client with one
 *     HTTP request and then from the cache with none (the client's counters
 *     count the requests); the client that registered it needs none at all;
 *   - a Protobuf schema keeps its schemaType;
 *   - an id the registry does not know is CS__REG_NOT_FOUND (404, 40403),
 *     permanent: the one failure a record may be dead-lettered for;
 *   - a registry that does not answer (nothing listening on the port) and one
 *     that answers 503 are CS__REG_UNAVAILABLE, retryable, never NOT_FOUND;
 *   - the real registry stopped mid-run (scripts/registry stop, then
 *     restart): a cached id is still served with no request, an uncached one
 *     is CS__REG_UNAVAILABLE until it is back, then found;
 *   - basic auth: the right password works, a wrong one and none are
 *     CS__REG_AUTH naming HTTP 401 (fails, never skips, when the registry
 *     was started without --auth);
 *   - TLS (the registry's second port): trusting the CA that signed its
 *     certificate works; trusting another CA is CS__REG_AUTH naming TLS and
 *     the CA file;
 *   - a schema the subject's BACKWARD compatibility refuses is
 *     CS__REG_INCOMPATIBLE naming HTTP 409;
 *   - threads looking up one cached id make no request.
 *
 * Subjects carry this run's pid and time: the registry outlives one run.
 * The outage test stops and restarts the registry it runs against. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "schema/registry_internal.h"
#include "cstest_registry.h"

static char run_id[64];

static const char AVRO_V1[] = "{\"type\":\"record\",\"name\":\"Payout\",\"namespace\":\"bank\","
                              "\"fields\":[{\"name\":\"amount\",\"type\":\"long\"}]}";
/* Renames the only field and gives it no default: not BACKWARD compatible. */
static const char AVRO_BAD_V2[] = "{\"type\":\"record\",\"name\":\"Payout\",\"namespace\":\"bank\","
                                  "\"fields\":[{\"name\":\"cents\",\"type\":\"string\"}]}";
/* Adds a field with a default: BACKWARD compatible. */
static const char AVRO_GOOD_V2[] = "{\"type\":\"record\",\"name\":\"Payout\",\"namespace\":\"bank\","
                                   "\"fields\":[{\"name\":\"amount\",\"type\":\"long\"},"
                                   "{\"name\":\"note\",\"type\":\"string\",\"default\":\"\"}]}";
static const char PROTO[] = "syntax = \"proto3\";\npackage bank;\nmessage Payout {\n  int64 amount = 1;\n}\n";

static void subject(char *buf, size_t cap, const char *what) { snprintf(buf, cap, "%s-%s-value", what, run_id); }

static void expect(cs__reg_status got, cs__reg_status want) {
    if (got != want)
        fail_msg("expected %s, got %s: %s", cs__reg_status_name(want), cs__reg_status_name(got), cs_errmsg());
}

static int32_t register_ok(cs_registry *r, const char *subj, cs__schema_type type, const char *schema) {
    int32_t id = -1;
    expect(cs__registry_register(r, subj, type, schema, &id), CS__REG_OK);
    assert_true(id >= 0);
    return id;
}

static void registered_schema_comes_back_by_id_then_from_cache(void **state) {
    (void)state;
    char subj[128];
    cs__registry_stats st;
    const cs__schema *s;
    subject(subj, sizeof subj, "lookup");
    cs_registry *w = cstr_client();
    int32_t id = register_ok(w, subj, CS__SCHEMA_AVRO, AVRO_V1);
    /* Registering the same schema again gives the same id. */
    assert_int_equal(register_ok(w, subj, CS__SCHEMA_AVRO, AVRO_V1), id);
    /* The client that registered it has it cached: no GET. */
    expect(cs__registry_schema(w, id, &s), CS__REG_OK);
    cs__schema_release(s);
    cs__registry_stats_get(w, &st);
    assert_int_equal(st.requests, 2); /* the two POSTs */
    assert_int_equal(st.cache_hits, 1);
    cs_registry_destroy(w);

    cs_registry *r = cstr_client();
    expect(cs__registry_schema(r, id, &s), CS__REG_OK);
    assert_int_equal(s->id, id);
    assert_int_equal(s->type, CS__SCHEMA_AVRO);
    assert_string_equal(s->text, AVRO_V1);
    cs__schema_release(s);
    for (int i = 0; i < 5; i++) {
        expect(cs__registry_schema(r, id, &s), CS__REG_OK);
        assert_string_equal(s->text, AVRO_V1);
        cs__schema_release(s);
    }
    cs__registry_stats_get(r, &st);
    assert_int_equal(st.lookups, 6);
    assert_int_equal(st.requests, 1);
    assert_int_equal(st.cache_hits, 5);
    assert_int_equal(st.errors, 0);
    assert_int_equal(cs__registry_cached(r), 1);
    cs_registry_destroy(r);
}

static void protobuf_keeps_its_schema_type(void **state) {
    (void)state;
    char subj[128];
    const cs__schema *s;
    subject(subj, sizeof subj, "proto");
    cs_registry *w = cstr_client();
    int32_t id = register_ok(w, subj, CS__SCHEMA_PROTOBUF, PROTO);
    cs_registry_destroy(w);
    cs_registry *r = cstr_client();
    expect(cs__registry_schema(r, id, &s), CS__REG_OK);
    assert_int_equal(s->type, CS__SCHEMA_PROTOBUF);
    assert_non_null(strstr(s->text, "message Payout"));
    cs__schema_release(s);
    cs_registry_destroy(r);
}

static void unknown_id_is_permanent(void **state) {
    (void)state;
    const cs__schema *s = (const cs__schema *)1;
    cs__registry_stats st;
    cs_registry *r = cstr_client();
    cs__reg_status got = cs__registry_schema(r, INT32_MAX - 7, &s);
    expect(got, CS__REG_NOT_FOUND);
    assert_false(cs__reg_status_retryable(got));
    assert_null(s);
    if (!strstr(cs_errmsg(), "HTTP 404") || !strstr(cs_errmsg(), "40403") || !strstr(cs_errmsg(), cstr_url))
        fail_msg("the message should name the registry, HTTP 404 and error_code 40403: %s", cs_errmsg());
    cs__registry_stats_get(r, &st);
    assert_int_equal(st.errors, 1);
    assert_int_equal(st.retryable_errors, 0);
    /* Not cached: asked again, asked the registry again. */
    expect(cs__registry_schema(r, INT32_MAX - 7, &s), CS__REG_NOT_FOUND);
    cs__registry_stats_get(r, &st);
    assert_int_equal(st.requests, 2);
    cs_registry_destroy(r);
}

/* A port on 127.0.0.1 nobody listens on: bound, then closed. */
static int dead_port(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void unreachable_registry_is_transient(void **state) {
    (void)state;
    char dead[128];
    const cs__schema *s;
    int32_t id;
    cs__registry_stats st;
    snprintf(dead, sizeof dead, "http://127.0.0.1:%d/apis/ccompat/v7", dead_port());
    cs_registry *r = cs_registry_new(dead);
    assert_non_null(r);
    assert_int_equal(cs__registry_timeouts(r, 2000, 4000), CS_OK);
    cs__reg_status got = cs__registry_schema(r, 1, &s);
    expect(got, CS__REG_UNAVAILABLE);
    assert_true(cs__reg_status_retryable(got));
    if (!strstr(cs_errmsg(), "unreachable") || !strstr(cs_errmsg(), dead))
        fail_msg("the message should say the registry %s is unreachable: %s", dead, cs_errmsg());
    expect(cs__registry_register(r, "x-value", CS__SCHEMA_AVRO, AVRO_V1, &id), CS__REG_UNAVAILABLE);
    cs__registry_stats_get(r, &st);
    assert_int_equal(st.errors, 2);
    assert_int_equal(st.retryable_errors, 2);
    cs_registry_destroy(r);
}

/* A stand-in that answers every request with one status line: only to see
 * how the client classes a 5xx, which the real registry cannot be made to
 * send on demand. Serves `n` connections, then stops. */
typedef struct responder {
    int fd, n;
    const char *reply;
} responder;

static void *respond(void *arg) {
    responder *p = arg;
    for (int i = 0; i < p->n; i++) {
        char buf[4096];
        int c = accept(p->fd, NULL, NULL);
        if (c < 0) break;
        (void)!read(c, buf, sizeof buf); /* the request; its content does not matter */
        (void)!write(c, p->reply, strlen(p->reply));
        close(c);
    }
    return NULL;
}

static void server_error_is_transient(void **state) {
    (void)state;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    responder p = {.n = 1,
                   .reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                            "Content-Length: 46\r\nConnection: close\r\n\r\n"
                            "{\"error_code\":50003,\"message\":\"store is down\"}"};
    pthread_t t;
    char u[128];
    const cs__schema *s;
    p.fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(bind(p.fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(p.fd, 4), 0);
    assert_int_equal(getsockname(p.fd, (struct sockaddr *)&a, &len), 0);
    assert_int_equal(pthread_create(&t, NULL, respond, &p), 0);
    snprintf(u, sizeof u, "http://127.0.0.1:%d", ntohs(a.sin_port));
    cs_registry *r = cs_registry_new(u);
    cs__reg_status got = cs__registry_schema(r, 3, &s);
    pthread_join(t, NULL);
    close(p.fd);
    expect(got, CS__REG_UNAVAILABLE);
    if (!strstr(cs_errmsg(), "HTTP 503") || !strstr(cs_errmsg(), "store is down"))
        fail_msg("the message should carry HTTP 503 and the registry's reason: %s", cs_errmsg());
    cs_registry_destroy(r);
}

static void basic_auth_right_and_wrong(void **state) {
    (void)state;
    char subj[128];
    int32_t id;
    const cs__schema *s;
    if (!cstr_user)
        fail_msg("CSTREAM_REGISTRY_USER is not set: this test needs a registry with basic auth "
                 "(scripts/registry stop; scripts/registry start --auth)");
    subject(subj, sizeof subj, "auth");
    cs_registry *good = cstr_client();
    id = register_ok(good, subj, CS__SCHEMA_AVRO, AVRO_V1);
    cs_registry_destroy(good);

    cs_registry *wrong = cs_registry_new(cstr_url);
    assert_int_equal(cs_registry_basic_auth(wrong, cstr_user, "not-the-password"), CS_OK);
    cs__reg_status got = cs__registry_schema(wrong, id, &s);
    expect(got, CS__REG_AUTH);
    assert_true(cs__reg_status_retryable(got)); /* the service's fault, not the record's */
    assert_non_null(strstr(cs_errmsg(), "HTTP 401"));
    assert_null(strstr(cs_errmsg(), "not-the-password"));
    expect(cs__registry_register(wrong, subj, CS__SCHEMA_AVRO, AVRO_V1, &id), CS__REG_AUTH);
    cs_registry_destroy(wrong);

    cs_registry *none = cs_registry_new(cstr_url);
    expect(cs__registry_schema(none, id, &s), CS__REG_AUTH);
    /* Turned on later, before use, it works. */
    assert_int_equal(cs_registry_basic_auth(none, cstr_user, cstr_password), CS_OK);
    expect(cs__registry_schema(none, id, &s), CS__REG_OK);
    cs__schema_release(s);
    cs_registry_destroy(none);
}

static void tls_with_the_right_ca_and_a_wrong_one(void **state) {
    (void)state;
    const char *tls_url = getenv("CSTREAM_REGISTRY_TLS_URL"), *ca = getenv("CSTREAM_REGISTRY_CA"),
               *wrong_ca = getenv("CSTREAM_REGISTRY_WRONG_CA");
    char subj[128];
    int32_t id;
    const cs__schema *s;
    if (!tls_url || !ca || !wrong_ca)
        fail_msg("CSTREAM_REGISTRY_TLS_URL, _CA and _WRONG_CA are not set: run through tests/with-registry "
                 "(a registry started by an older scripts/registry has no TLS port: restart it)");
    subject(subj, sizeof subj, "tls");
    cs_registry *r = cs_registry_new(tls_url);
    assert_non_null(r);
    if (cstr_user) assert_int_equal(cs_registry_basic_auth(r, cstr_user, cstr_password), CS_OK);
    assert_int_equal(cs_registry_ca_file(r, ca), CS_OK);
    id = register_ok(r, subj, CS__SCHEMA_AVRO, AVRO_V1);
    cs_registry_destroy(r);

    cs_registry *wrong = cs_registry_new(tls_url);
    if (cstr_user) assert_int_equal(cs_registry_basic_auth(wrong, cstr_user, cstr_password), CS_OK);
    assert_int_equal(cs_registry_ca_file(wrong, wrong_ca), CS_OK);
    cs__reg_status got = cs__registry_schema(wrong, id, &s);
    expect(got, CS__REG_AUTH);
    assert_true(cs__reg_status_retryable(got));
    if (!strstr(cs_errmsg(), "TLS") || !strstr(cs_errmsg(), wrong_ca))
        fail_msg("the message should name TLS and the CA file %s: %s", wrong_ca, cs_errmsg());
    /* Back to the right CA: the same client now gets it. */
    assert_int_equal(cs_registry_ca_file(wrong, ca), CS_OK);
    expect(cs__registry_schema(wrong, id, &s), CS__REG_OK);
    assert_string_equal(s->text, AVRO_V1);
    cs__schema_release(s);
    cs_registry_destroy(wrong);
}

static void incompatible_schema_is_refused_with_409(void **state) {
    (void)state;
    char subj[128];
    int32_t id = -1;
    subject(subj, sizeof subj, "compat");
    cs_registry *r = cstr_client();
    int32_t v1 = register_ok(r, subj, CS__SCHEMA_AVRO, AVRO_V1);
    cstr_set_compatibility(subj, "BACKWARD");
    cs__reg_status got = cs__registry_register(r, subj, CS__SCHEMA_AVRO, AVRO_BAD_V2, &id);
    expect(got, CS__REG_INCOMPATIBLE);
    assert_false(cs__reg_status_retryable(got));
    assert_int_equal(id, -1);
    if (!strstr(cs_errmsg(), "HTTP 409") || !strstr(cs_errmsg(), subj))
        fail_msg("the message should name the subject and HTTP 409: %s", cs_errmsg());
    /* A compatible v2 is taken, with an id of its own. */
    int32_t v2 = register_ok(r, subj, CS__SCHEMA_AVRO, AVRO_GOOD_V2);
    assert_int_not_equal(v2, v1);
    cs_registry_destroy(r);
}

/* The real registry stopped in the middle of the run, then back on the same
 * port with its schemas (scripts/registry restart): what was cached is still
 * served with no request, what was not is UNAVAILABLE (retry, never
 * dead-letter) while it is down, and found once it is back. */
static void registry_outage_is_transient_and_the_cache_still_serves(void **state) {
    (void)state;
    char subj_a[128], subj_b[128];
    const cs__schema *s;
    cs__registry_stats before, after;
    subject(subj_a, sizeof subj_a, "outage-a");
    subject(subj_b, sizeof subj_b, "outage-b");
    cs_registry *w = cstr_client();
    int32_t a = register_ok(w, subj_a, CS__SCHEMA_AVRO, AVRO_V1);
    int32_t b = register_ok(w, subj_b, CS__SCHEMA_PROTOBUF, PROTO);
    cs_registry_destroy(w);

    cs_registry *r = cstr_client();
    assert_int_equal(cs__registry_timeouts(r, 2000, 4000), CS_OK);
    expect(cs__registry_schema(r, a, &s), CS__REG_OK);
    cs__schema_release(s);

    cstr_stop();
    cs__registry_stats_get(r, &before);
    expect(cs__registry_schema(r, a, &s), CS__REG_OK); /* cached: the registry is not needed */
    assert_string_equal(s->text, AVRO_V1);
    cs__schema_release(s);
    cs__reg_status got = cs__registry_schema(r, b, &s);
    cs__registry_stats_get(r, &after);
    /* Bring it back before asserting, so a failure leaves the suite a registry. */
    cstr_restart();
    expect(got, CS__REG_UNAVAILABLE);
    assert_true(cs__reg_status_retryable(got));
    assert_int_equal(after.requests - before.requests, 1); /* only the miss asked */
    assert_int_equal(after.cache_hits - before.cache_hits, 1);
    assert_int_equal(after.retryable_errors - before.retryable_errors, 1);

    expect(cs__registry_schema(r, b, &s), CS__REG_OK);
    assert_int_equal(s->type, CS__SCHEMA_PROTOBUF);
    cs__schema_release(s);
    cs_registry_destroy(r);
}

#define LOOKUP_THREADS 4
#define LOOKUPS_PER_THREAD 50000
typedef struct hot {
    cs_registry *r;
    int32_t id;
} hot;

static void *look_up(void *arg) {
    hot *h = arg;
    for (int i = 0; i < LOOKUPS_PER_THREAD; i++) {
        const cs__schema *s;
        if (cs__registry_schema(h->r, h->id, &s) != CS__REG_OK || s->id != h->id) return (void *)1;
        cs__schema_release(s);
    }
    return NULL;
}

static void threads_hit_the_cache_without_requests(void **state) {
    (void)state;
    char subj[128];
    const cs__schema *s;
    cs__registry_stats st;
    pthread_t t[LOOKUP_THREADS];
    void *bad;
    subject(subj, sizeof subj, "hot");
    cs_registry *w = cstr_client();
    hot h = {.id = register_ok(w, subj, CS__SCHEMA_AVRO, AVRO_V1)};
    cs_registry_destroy(w);
    h.r = cstr_client();
    expect(cs__registry_schema(h.r, h.id, &s), CS__REG_OK); /* the one miss */
    cs__schema_release(s);
    for (int i = 0; i < LOOKUP_THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, look_up, &h), 0);
    for (int i = 0; i < LOOKUP_THREADS; i++) {
        pthread_join(t[i], &bad);
        assert_null(bad);
    }
    cs__registry_stats_get(h.r, &st);
    assert_int_equal(st.requests, 1);
    assert_int_equal(st.cache_hits, LOOKUP_THREADS * LOOKUPS_PER_THREAD);
    cs_registry_destroy(h.r);
}

static void bad_configuration_is_refused(void **state) {
    (void)state;
    assert_null(cs_registry_new(NULL));
    assert_null(cs_registry_new("ftp://127.0.0.1/x"));
    assert_non_null(strstr(cs_errmsg(), "ftp://127.0.0.1/x"));
    cs_registry *r = cs_registry_new("https://127.0.0.1:1/");
    assert_non_null(r);
    assert_int_equal(cs_registry_ca_file(r, "/nonexistent/ca.pem"), CS_ERR_CONFIG);
    assert_non_null(strstr(cs_errmsg(), "/nonexistent/ca.pem"));
    assert_int_equal(cs_registry_basic_auth(NULL, "u", "p"), CS_ERR_ARG);
    cs_registry_destroy(r);
    cs_registry_destroy(NULL);
}

int main(void) {
    if (!cstr_init()) return 1;
    snprintf(run_id, sizeof run_id, "cstest-%ld-%ld", (long)getpid(), (long)time(NULL));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registered_schema_comes_back_by_id_then_from_cache),
        cmocka_unit_test(protobuf_keeps_its_schema_type),
        cmocka_unit_test(unknown_id_is_permanent),
        cmocka_unit_test(unreachable_registry_is_transient),
        cmocka_unit_test(server_error_is_transient),
        cmocka_unit_test(basic_auth_right_and_wrong),
        cmocka_unit_test(tls_with_the_right_ca_and_a_wrong_one),
        cmocka_unit_test(incompatible_schema_is_refused_with_409),
        cmocka_unit_test(threads_hit_the_cache_without_requests),
        cmocka_unit_test(bad_configuration_is_refused),
        /* Last: it stops and restarts the registry. */
        cmocka_unit_test(registry_outage_is_transient_and_the_cache_still_serves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
