/* cstest_registry.c — the registry tests' shared helpers (cstest_registry.h
 * says what and which thread). */
#include "cstest_registry.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "cstest.h"
#include "cstream/avro.h"
#include "schema/registry_internal.h"

/* The tests' clients wait longer than a service's (10 s in all): under
 * `make test` the registry's JVM shares 2 cores with four test processes and
 * the broker, and CI once saw a lookup the registry answered later than 10 s.
 * A test about timeouts sets its own (cs__registry_timeouts). */
#define CSTR_CONNECT_TIMEOUT_MS 10000L
#define CSTR_TIMEOUT_MS 60000L

/* The wire format's header: magic byte 0, then the schema id (4 bytes, big-endian). */
#define WIRE_HEADER_LEN 5

const char *cstr_url, *cstr_user, *cstr_password;

/* Set while a test has the registry stopped: a failure there (cmocka jumps
 * out of the test) must not leave it down for the next. */
static bool registry_down;

bool cstr_init(void) {
    cstr_url = getenv("CSTREAM_REGISTRY_URL");
    cstr_user = getenv("CSTREAM_REGISTRY_USER");
    cstr_password = getenv("CSTREAM_REGISTRY_PASSWORD");
    if (cstr_user && !*cstr_user) cstr_user = NULL;
    if (!cstr_url || !*cstr_url) {
        fprintf(stderr, "CSTREAM_REGISTRY_URL is not set: run this test through tests/with-registry "
                        "(scripts/registry start --auth first; make test does both)\n");
        return false;
    }
    return true;
}

cs_registry *cstr_client_as(const char *password) {
    cs_registry *r = cs_registry_new(cstr_url);
    if (!r) fail_msg("cs_registry_new(%s): %s", cstr_url, cs_errmsg());
    if (cs__registry_timeouts(r, CSTR_CONNECT_TIMEOUT_MS, CSTR_TIMEOUT_MS) != CS_OK)
        fail_msg("cs__registry_timeouts: %s", cs_errmsg());
    if (cstr_user && cs_registry_basic_auth(r, cstr_user, password) != CS_OK)
        fail_msg("cs_registry_basic_auth: %s", cs_errmsg());
    return r;
}

cs_registry *cstr_client(void) { return cstr_client_as(cstr_password); }

cs_codec *cstr_avro_codec(cs_registry *r, const char *reader, const char *topic, bool key) {
    cs_registry_subject_opts o = {.strategy = CS_SUBJECT_TOPIC_NAME, .topic = topic, .key = key};
    cs_codec *c = NULL;
    if (cs_codec_avro_registry_new(r, reader, topic ? &o : NULL, &c) != CS_OK)
        fail_msg("cs_codec_avro_registry_new(%s): %s", topic ? topic : "decode only", cs_errmsg());
    return c;
}

static size_t on_body(char *p, size_t size, size_t n, void *u) {
    cstr_body *b = u;
    size_t k = size * n;
    if (!b) return k;
    if (b->len + k >= sizeof b->buf) k = sizeof b->buf - 1 - b->len;
    memcpy(b->buf + b->len, p, k);
    b->len += k;
    b->buf[b->len] = '\0';
    return size * n;
}

long cstr_request(const char *method, const char *path, const char *body, cstr_body *out) {
    char u[512];
    long status = 0;
    CURL *h = curl_easy_init();
    assert_non_null(h);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/vnd.schemaregistry.v1+json");
    if (out) {
        out->len = 0;
        out->buf[0] = '\0';
    }
    snprintf(u, sizeof u, "%s%s", cstr_url, path);
    curl_easy_setopt(h, CURLOPT_URL, u);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (cstr_user) {
        curl_easy_setopt(h, CURLOPT_USERNAME, cstr_user);
        curl_easy_setopt(h, CURLOPT_PASSWORD, cstr_password);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) fail_msg("%s %s: %s", method, u, curl_easy_strerror(rc));
    return status;
}

long cstr_subject_status(const char *subject) {
    char path[512];
    snprintf(path, sizeof path, "/subjects/%s/versions", subject);
    return cstr_request("GET", path, NULL, NULL);
}

void cstr_set_compatibility(const char *subject, const char *level) {
    char path[512], body[64];
    snprintf(path, sizeof path, "/config/%s", subject);
    snprintf(body, sizeof body, "{\"compatibility\":\"%s\"}", level);
    long status = cstr_request("PUT", path, body, NULL);
    if (status != 200) fail_msg("PUT %s%s: HTTP %ld", cstr_url, path, status);
}

static void registry_script(const char *verb) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/scripts/registry %s >/dev/null", CSTREAM_SOURCE_DIR, verb);
    if (system(cmd) != 0) fail_msg("%s failed", cmd);
}

void cstr_stop(void) {
    registry_down = true;
    registry_script("stop");
}

void cstr_restart(void) {
    registry_script("restart");
    registry_down = false;
}

bool cstr_is_down(void) { return registry_down; }

int cstr_up(void **state) {
    (void)state;
    if (registry_down) cstr_restart();
    return 0;
}

void cstr_fresh_topic(const char *prefix, char *topic, size_t cap) {
    char group[160];
    cst_fresh(prefix, 1, topic, group, cap);
}

int32_t cstr_wire_id(const void *payload, size_t len) {
    const unsigned char *b = payload;
    assert_true(len >= WIRE_HEADER_LEN);
    assert_int_equal(b[0], 0);
    return (int32_t)((uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4]);
}

uint64_t cstr_unavailable(cs_registry *r) {
    cs_registry_stats st;
    if (cs_registry_stats_get(r, &st) != CS_OK) fail_msg("cs_registry_stats_get: %s", cs_errmsg());
    return st.unavailable;
}

bool cstr_tried_twice(void *arg) { return cstr_unavailable(arg) >= 2; }

void cstr_tally_add(cstr_tally *t, int64_t id) {
    pthread_mutex_lock(&t->lock);
    if (id >= 0 && id < CSTR_MAX_IDS) t->count[id]++;
    t->total++;
    pthread_mutex_unlock(&t->lock);
}

int cstr_tally_total(cstr_tally *t) {
    pthread_mutex_lock(&t->lock);
    int n = t->total;
    pthread_mutex_unlock(&t->lock);
    return n;
}

void cstr_assert_each_once(cstr_tally *t, int n, const char *what) {
    pthread_mutex_lock(&t->lock);
    int total = t->total, bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (t->count[i] != 1) bad = i;
    int times = bad < 0 ? 1 : t->count[bad];
    pthread_mutex_unlock(&t->lock); /* not held across a failure's longjmp */
    if (bad >= 0) fail_msg("%s %d handled %d times", what, bad, times);
    assert_int_equal(total, n);
}

bool cstr_reached(void *arg) {
    cstr_want *w = arg;
    return cstr_tally_total(w->t) >= w->n;
}
