/*
 * registry.c — the Schema Registry client: registers schemas and looks them
 * up by id over the Confluent REST API, with a bounded cache in front.
 *
 * Owns: the registry's configuration (URL, credentials, CA file, timeouts),
 * its schema cache (schema_cache.c) and its counters.
 *
 * Threads: configuration, on the thread that sets the service up before any
 * lookup; lookups and registrations, on any thread at once (the workers).
 * Locks: none of its own: counters are atomics; the cache has its own leaf
 * lock. An HTTP request runs with no lock of ours held, on a curl handle of
 * its own (a miss is rare: once per schema id while it stays cached).
 *
 * Must never: make a request for a cached id, hold a lock across a request,
 * turn an unreachable registry into a "not found" (the record would be
 * dead-lettered instead of retried), or trust the body of an answer (it is
 * bounded and parsed as untrusted JSON).
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "base/error.h"
#include "schema/registry_internal.h"

/* A registry on the same network answers in milliseconds; these bound how
 * long a worker waits on a dead one before the record is retried later. */
#define CS_REGISTRY_CONNECT_TIMEOUT_MS 5000L
#define CS_REGISTRY_TIMEOUT_MS 10000L
/* Distinct schemas a service sees are few (one per subject version); 1000
 * keeps every one of a large estate, at a few KiB each. */
#define CS_REGISTRY_CACHE_CAPACITY 1000u
/* Largest answer read: a schema with its references; more is refused. */
#define CS_REGISTRY_MAX_BODY (8u << 20)
#define CS_REGISTRY_CONTENT_TYPE "application/vnd.schemaregistry.v1+json"

struct cs_registry {
    char *url; /* base URL, no trailing '/' */
    char *user, *password;
    char *ca_file;
    long connect_timeout_ms, timeout_ms;
    cs__schema_cache cache; /* made by cs_registry_new */
    _Atomic uint64_t lookups, cache_hits, requests, errors, retryable_errors, registered;
    /* What the last request found (REG_UNKNOWN before the first): set by
     * every exchange, read by cs__registry_check (readiness). */
    _Atomic int health;
};

enum { REG_UNKNOWN = 0, REG_ANSWERS, REG_DOWN };
/* A readiness probe of a registry last seen down is bounded by this, so
 * /readyz (which holds its lock across it) answers within it. */
#define CS_REGISTRY_PROBE_TIMEOUT_MS 1000L

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;
/* curl_global_init is not thread-safe in every libcurl: once per process. */
static void init_curl(void) { curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

cs_registry *cs_registry_new(const char *url) {
    cs_registry *r;
    size_t len;
    if (!url || !*url) {
        cs__fail(CS_ERR_ARG, "schema registry: no URL");
        return NULL;
    }
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        cs__fail(CS_ERR_CONFIG, "schema registry: URL '%s' is not http:// or https://", url);
        return NULL;
    }
    pthread_once(&curl_once, init_curl);
    if (curl_init_result != CURLE_OK) {
        cs__fail(CS_ERR_CONFIG, "schema registry: libcurl failed to initialise: %s",
                 curl_easy_strerror(curl_init_result));
        return NULL;
    }
    r = calloc(1, sizeof *r);
    if (!r || !(r->url = strdup(url))) {
        free(r);
        cs__fail(CS_ERR_NOMEM, "schema registry %s: out of memory", url);
        return NULL;
    }
    len = strlen(r->url);
    while (len > 0 && r->url[len - 1] == '/') r->url[--len] = '\0';
    r->connect_timeout_ms = CS_REGISTRY_CONNECT_TIMEOUT_MS;
    r->timeout_ms = CS_REGISTRY_TIMEOUT_MS;
    if (cs__schema_cache_init(&r->cache, CS_REGISTRY_CACHE_CAPACITY) != CS_OK) {
        free(r->url);
        free(r);
        return NULL;
    }
    return r;
}

void cs_registry_destroy(cs_registry *r) {
    if (!r) return;
    cs__schema_cache_destroy(&r->cache);
    free(r->url);
    free(r->user);
    free(r->password);
    free(r->ca_file);
    free(r);
}

cs_err cs_registry_basic_auth(cs_registry *r, const char *user, const char *password) {
    char *u, *p;
    if (!r) return cs__fail(CS_ERR_ARG, "cs_registry_basic_auth: registry is NULL");
    u = dup_or_null(user);
    p = user ? strdup(password ? password : "") : NULL;
    if ((user && !u) || (user && !p)) {
        free(u);
        free(p);
        return cs__fail(CS_ERR_NOMEM, "schema registry %s: out of memory", r->url);
    }
    free(r->user);
    free(r->password);
    r->user = u;
    r->password = p;
    return CS_OK;
}

cs_err cs_registry_ca_file(cs_registry *r, const char *path) {
    char *p = NULL;
    FILE *f;
    if (!r) return cs__fail(CS_ERR_ARG, "cs_registry_ca_file: registry is NULL");
    if (path) {
        if (!(f = fopen(path, "r")))
            return cs__fail(CS_ERR_CONFIG, "schema registry %s: CA file %s cannot be read", r->url, path);
        fclose(f);
        if (!(p = strdup(path))) return cs__fail(CS_ERR_NOMEM, "schema registry %s: out of memory", r->url);
    }
    free(r->ca_file);
    r->ca_file = p;
    return CS_OK;
}

cs_err cs__registry_timeouts(cs_registry *r, long connect_ms, long total_ms) {
    if (!r || connect_ms <= 0 || total_ms <= 0)
        return cs__fail(CS_ERR_ARG, "schema registry: timeouts must be > 0 ms (connect %ld, total %ld)", connect_ms,
                        total_ms);
    r->connect_timeout_ms = connect_ms;
    r->timeout_ms = total_ms;
    return CS_OK;
}

cs_err cs__registry_cache_capacity(cs_registry *r, size_t capacity) {
    if (!r || capacity == 0) return cs__fail(CS_ERR_ARG, "schema registry: cache capacity must be at least 1");
    if (atomic_load(&r->lookups) || atomic_load(&r->registered) || cs__schema_cache_count(&r->cache))
        return cs__fail(CS_ERR_STATE, "schema registry %s: the cache is already in use", r->url);
    cs__schema_cache_destroy(&r->cache);
    return cs__schema_cache_init(&r->cache, capacity);
}

const char *cs__reg_status_name(cs__reg_status st) {
    switch (st) {
    case CS__REG_OK: return "CS__REG_OK";
    case CS__REG_UNAVAILABLE: return "CS__REG_UNAVAILABLE";
    case CS__REG_NOT_FOUND: return "CS__REG_NOT_FOUND";
    case CS__REG_INCOMPATIBLE: return "CS__REG_INCOMPATIBLE";
    case CS__REG_AUTH: return "CS__REG_AUTH";
    case CS__REG_REJECTED: return "CS__REG_REJECTED";
    case CS__REG_LOCAL: return "CS__REG_LOCAL";
    }
    return "CS__REG_UNKNOWN";
}

int cs__reg_status_retryable(cs__reg_status st) { return st == CS__REG_UNAVAILABLE || st == CS__REG_AUTH; }

void cs__registry_stats_get(cs_registry *r, cs__registry_stats *out) {
    out->lookups = atomic_load(&r->lookups);
    out->cache_hits = atomic_load(&r->cache_hits);
    out->requests = atomic_load(&r->requests);
    out->errors = atomic_load(&r->errors);
    out->retryable_errors = atomic_load(&r->retryable_errors);
    out->registered = atomic_load(&r->registered);
}

size_t cs__registry_cached(cs_registry *r) { return cs__schema_cache_count(&r->cache); }

static cs__reg_status count_failure(cs_registry *r, cs__reg_status st) {
    if (st == CS__REG_OK) return st;
    atomic_fetch_add(&r->errors, 1);
    if (cs__reg_status_retryable(st)) atomic_fetch_add(&r->retryable_errors, 1);
    return st;
}

/* ---- one HTTP exchange ---- */

typedef struct body {
    char *buf;
    size_t len, cap;
    int too_big;
} body;

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    body *b = user;
    size_t n = size * nmemb;
    if (b->len + n + 1 > CS_REGISTRY_MAX_BODY) {
        b->too_big = 1;
        return 0; /* libcurl stops the transfer with CURLE_WRITE_ERROR */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        char *nb;
        while (cap < b->len + n + 1) cap *= 2;
        if (!(nb = realloc(b->buf, cap))) return 0;
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, data, n);
    b->len += n;
    b->buf[b->len] = '\0';
    return n;
}

/* The registry's own reason from an error body ({"error_code":..,"message":..}),
 * or "" when it has none. */
static void error_reason(const body *b, char *out, size_t cap, long *error_code) {
    yajl_val root, msg, code;
    static const char *msg_path[] = {"message", NULL};
    static const char *code_path[] = {"error_code", NULL};
    out[0] = '\0';
    *error_code = 0;
    if (!b->buf || !(root = yajl_tree_parse(b->buf, NULL, 0))) return;
    if ((msg = yajl_tree_get(root, msg_path, yajl_t_string))) snprintf(out, cap, "%s", YAJL_GET_STRING(msg));
    if ((code = yajl_tree_get(root, code_path, yajl_t_number)) && YAJL_IS_INTEGER(code))
        *error_code = (long)YAJL_GET_INTEGER(code);
    yajl_tree_free(root);
}

/* Sends one request; on CS__REG_OK the 2xx body is in *b (caller frees
 * b->buf). `what` names the request in messages ("schema id 7", "subject
 * payouts-value"). */
static cs__reg_status exchange_within(cs_registry *r, const char *path, const char *post, body *b, const char *what,
                                      long bound_ms);

static cs__reg_status exchange(cs_registry *r, const char *path, const char *post, body *b, const char *what) {
    return exchange_within(r, path, post, b, what, 0);
}

/* The same, bounded by bound_ms (0: the configured timeouts) */
static cs__reg_status exchange_within(cs_registry *r, const char *path, const char *post, body *b, const char *what,
                                      long bound_ms) {
    CURL *h;
    CURLcode rc;
    struct curl_slist *hdrs = NULL;
    char url[2048], reason[512];
    long status = 0, error_code;
    cs__reg_status st;

    memset(b, 0, sizeof *b);
    if ((size_t)snprintf(url, sizeof url, "%s%s", r->url, path) >= sizeof url) {
        cs__fail(CS_ERR_ARG, "schema registry %s: %s: URL too long", r->url, what);
        return CS__REG_LOCAL;
    }
    if (!(h = curl_easy_init())) {
        cs__fail(CS_ERR_NOMEM, "schema registry %s: %s: no curl handle", r->url, what);
        return CS__REG_LOCAL;
    }
    hdrs = curl_slist_append(hdrs, "Accept: " CS_REGISTRY_CONTENT_TYPE ", application/json");
    struct curl_slist *all = hdrs && post ? curl_slist_append(hdrs, "Content-Type: " CS_REGISTRY_CONTENT_TYPE) : hdrs;
    if (!all) { /* curl_slist_append returns NULL when out of memory, leaving the list as it was */
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(h);
        cs__fail(CS_ERR_NOMEM, "schema registry %s: %s: out of memory", r->url, what);
        return CS__REG_LOCAL;
    }
    hdrs = all;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* worker threads: no SIGALRM for DNS timeouts */
    long connect_ms = r->connect_timeout_ms, total_ms = r->timeout_ms;
    if (bound_ms > 0 && bound_ms < total_ms) total_ms = bound_ms;
    if (total_ms < connect_ms) connect_ms = total_ms;
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    if (post) curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
    if (r->user) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERNAME, r->user);
        curl_easy_setopt(h, CURLOPT_PASSWORD, r->password);
    }
    if (r->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, r->ca_file);

    atomic_fetch_add(&r->requests, 1);
    rc = curl_easy_perform(h);
    if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);

    int down = rc != CURLE_OK ? !b->too_big : (status >= 500 || status == 429 || status == 401 || status == 403);
    atomic_store(&r->health, down ? REG_DOWN : REG_ANSWERS);
    if (rc != CURLE_OK) {
        if (b->too_big) {
            cs__fail(CS_ERR_DECODE, "schema registry %s: %s: answer larger than %u bytes", r->url, what,
                     CS_REGISTRY_MAX_BODY);
            st = CS__REG_REJECTED;
        } else if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
                   rc == CURLE_SSL_CERTPROBLEM) {
            /* The registry answered but is not trusted: the service's TLS
             * configuration is wrong, not the record (retried like AUTH). */
            cs__fail(CS_ERR_AUTH, "schema registry %s: %s: TLS: %s (trusting %s)", r->url, what, curl_easy_strerror(rc),
                     r->ca_file ? r->ca_file : "the system's CA certificates");
            st = CS__REG_AUTH;
        } else {
            /* No answer at all (refused, reset, timed out): the registry may
             * be back later. */
            cs__fail(CS_ERR_TIMEOUT, "schema registry %s unreachable: %s: %s", r->url, what, curl_easy_strerror(rc));
            st = CS__REG_UNAVAILABLE;
        }
        goto failed;
    }
    if (status >= 200 && status < 300) return CS__REG_OK;

    error_reason(b, reason, sizeof reason, &error_code);
    if (status >= 500 || status == 429) st = CS__REG_UNAVAILABLE;
    else if (status == 404) st = CS__REG_NOT_FOUND;
    else if (status == 409) st = CS__REG_INCOMPATIBLE;
    else if (status == 401 || status == 403) st = CS__REG_AUTH;
    else st = CS__REG_REJECTED;
    cs__fail(st == CS__REG_UNAVAILABLE ? CS_ERR_TIMEOUT
             : st == CS__REG_AUTH      ? CS_ERR_AUTH
                                       : CS_ERR_DECODE,
             "schema registry %s: %s: HTTP %ld%s%.0ld%s%s%s", r->url, what, status, error_code ? ", error_code " : "",
             error_code, *reason ? " (" : "", reason, *reason ? ")" : "");
failed:
    free(b->buf);
    b->buf = NULL;
    return st;
}

/* ---- the API ---- */

static const char *type_name(cs__schema_type t) {
    switch (t) {
    case CS__SCHEMA_AVRO: return "AVRO";
    case CS__SCHEMA_PROTOBUF: return "PROTOBUF";
    case CS__SCHEMA_JSON: return "JSON";
    }
    return "?";
}

static int gen_str(yajl_gen g, const char *s) {
    return yajl_gen_string(g, (const unsigned char *)s, strlen(s)) == yajl_gen_status_ok;
}

/* {"schema": <text>[, "schemaType": <type>][, "references": [{"name", "subject",
 * "version"}, ...]]}; Avro is the API's default and is left implicit, as
 * Confluent's own serializers do. */
static char *register_body(cs__schema_type type, const char *schema, const cs__schema_reference *refs, size_t n_refs) {
    yajl_gen g = yajl_gen_alloc(NULL);
    const unsigned char *out;
    size_t len;
    char *copy = NULL;
    int ok;
    if (!g) return NULL;
    yajl_gen_config(g, yajl_gen_validate_utf8, 1);
    ok = yajl_gen_map_open(g) == yajl_gen_status_ok && gen_str(g, "schema") && gen_str(g, schema);
    if (ok && type != CS__SCHEMA_AVRO) ok = gen_str(g, "schemaType") && gen_str(g, type_name(type));
    if (ok && n_refs) ok = gen_str(g, "references") && yajl_gen_array_open(g) == yajl_gen_status_ok;
    for (size_t i = 0; ok && i < n_refs; i++)
        ok = yajl_gen_map_open(g) == yajl_gen_status_ok && gen_str(g, "name") && gen_str(g, refs[i].name) &&
             gen_str(g, "subject") && gen_str(g, refs[i].subject) && gen_str(g, "version") &&
             yajl_gen_integer(g, refs[i].version) == yajl_gen_status_ok && yajl_gen_map_close(g) == yajl_gen_status_ok;
    if (ok && n_refs) ok = yajl_gen_array_close(g) == yajl_gen_status_ok;
    ok = ok && yajl_gen_map_close(g) == yajl_gen_status_ok && yajl_gen_get_buf(g, &out, &len) == yajl_gen_status_ok;
    if (ok && (copy = malloc(len + 1))) {
        memcpy(copy, out, len);
        copy[len] = '\0';
    }
    yajl_gen_free(g);
    return copy;
}

/* POSTs `post` to `path` and reads the integer `key` of the answer (0..INT32_MAX). */
static cs__reg_status post_for_int(cs_registry *r, const char *path, const char *post, const char *key,
                                   const char *what, int32_t *value) {
    body b;
    const char *key_path[] = {key, NULL};
    cs__reg_status st = exchange(r, path, post, &b, what);
    if (st != CS__REG_OK) return st;
    yajl_val root = yajl_tree_parse(b.buf ? b.buf : "", NULL, 0);
    yajl_val v = root ? yajl_tree_get(root, key_path, yajl_t_number) : NULL;
    if (!v || !YAJL_IS_INTEGER(v) || YAJL_GET_INTEGER(v) < 0 || YAJL_GET_INTEGER(v) > INT32_MAX) {
        cs__fail(CS_ERR_DECODE, "schema registry %s: %s: the answer has no %s: %.200s", r->url, what, key,
                 b.buf ? b.buf : "");
        st = CS__REG_REJECTED;
    } else {
        *value = (int32_t)YAJL_GET_INTEGER(v);
    }
    yajl_tree_free(root);
    free(b.buf);
    return st;
}

cs__reg_status cs__registry_register(cs_registry *r, const char *subject, cs__schema_type type, const char *schema,
                                     int32_t *id) {
    return cs__registry_register_refs(r, subject, type, schema, NULL, 0, id, NULL);
}

cs__reg_status cs__registry_register_refs(cs_registry *r, const char *subject, cs__schema_type type, const char *schema,
                                          const cs__schema_reference *refs, size_t n_refs, int32_t *id,
                                          int32_t *version) {
    char path[1024], what[600], *esc, *post;
    cs__reg_status st;
    cs__schema *s;

    if (!r || !subject || !*subject || !schema || !id || (n_refs && !refs)) {
        cs__fail(CS_ERR_ARG, "schema registry: register needs a registry, a subject, a schema and an id");
        return r ? count_failure(r, CS__REG_LOCAL) : CS__REG_LOCAL;
    }
    snprintf(what, sizeof what, "registering a schema (%s) under subject %s", type_name(type), subject);
    if (!(post = register_body(type, schema, refs, n_refs))) {
        cs__fail(CS_ERR_ENCODE, "schema registry %s: %s: the schema is not UTF-8 (or no memory)", r->url, what);
        return count_failure(r, CS__REG_LOCAL);
    }
    /* A subject is a path segment: '/' or '?' in it must not change the URL. */
    esc = curl_easy_escape(NULL, subject, 0);
    if (!esc || (size_t)snprintf(path, sizeof path, "/subjects/%s/versions", esc) >= sizeof path) {
        curl_free(esc);
        free(post);
        cs__fail(CS_ERR_ARG, "schema registry %s: %s: subject too long", r->url, what);
        return count_failure(r, CS__REG_LOCAL);
    }
    curl_free(esc);
    st = post_for_int(r, path, post, "id", what, id);
    if (st == CS__REG_OK && version) {
        /* The register answer has only the id; a reference names a version,
         * which the subject lookup (POST /subjects/{subject}) answers. */
        path[strlen(path) - strlen("/versions")] = '\0';
        snprintf(what, sizeof what, "looking up the version of a schema (%s) under subject %s", type_name(type),
                 subject);
        st = post_for_int(r, path, post, "version", what, version);
    }
    free(post);
    if (st != CS__REG_OK) return count_failure(r, st);
    atomic_fetch_add(&r->registered, 1);
    /* The id now names this schema for good: cache it, so a consumer in the
     * same process reading what we publish makes no request. */
    if ((s = cs__schema_new(*id, type, schema, strlen(schema)))) cs__schema_release(cs__schema_cache_put(&r->cache, s));
    return CS__REG_OK;
}

static int parse_type(yajl_val root, cs__schema_type *type) {
    static const char *type_path[] = {"schemaType", NULL};
    yajl_val t = yajl_tree_get(root, type_path, yajl_t_string);
    const char *name = t ? YAJL_GET_STRING(t) : "AVRO";
    if (!strcmp(name, "AVRO")) *type = CS__SCHEMA_AVRO;
    else if (!strcmp(name, "PROTOBUF")) *type = CS__SCHEMA_PROTOBUF;
    else if (!strcmp(name, "JSON")) *type = CS__SCHEMA_JSON;
    else return 0;
    return 1;
}

cs__reg_status cs__registry_schema(cs_registry *r, int32_t id, const cs__schema **out) {
    char path[64], what[64];
    body b;
    yajl_val root, v;
    static const char *schema_path[] = {"schema", NULL};
    const char *text;
    cs__schema_type type;
    cs__schema *s;
    const cs__schema *hit;
    cs__reg_status st;

    if (!r || !out) {
        cs__fail(CS_ERR_ARG, "schema registry: a lookup needs a registry and an out pointer");
        return CS__REG_LOCAL;
    }
    *out = NULL;
    atomic_fetch_add_explicit(&r->lookups, 1, memory_order_relaxed);
    if ((hit = cs__schema_cache_get(&r->cache, id))) {
        atomic_fetch_add_explicit(&r->cache_hits, 1, memory_order_relaxed);
        *out = hit;
        return CS__REG_OK;
    }
    snprintf(what, sizeof what, "schema id %d", id);
    if (id < 0) {
        /* The wire format's id is signed; the registry never hands out one
         * below 0, so there is nothing to ask. */
        cs__fail(CS_ERR_DECODE, "schema registry %s: %s: no registry assigns negative ids", r->url, what);
        return count_failure(r, CS__REG_NOT_FOUND);
    }
    snprintf(path, sizeof path, "/schemas/ids/%d", id);
    if ((st = exchange(r, path, NULL, &b, what)) != CS__REG_OK) return count_failure(r, st);

    root = yajl_tree_parse(b.buf ? b.buf : "", NULL, 0);
    v = root ? yajl_tree_get(root, schema_path, yajl_t_string) : NULL;
    text = v ? YAJL_GET_STRING(v) : NULL;
    if (!text || !parse_type(root, &type)) {
        cs__fail(CS_ERR_DECODE, "schema registry %s: %s: the answer has no schema or an unknown schemaType: %.200s",
                 r->url, what, b.buf ? b.buf : "");
        yajl_tree_free(root);
        free(b.buf);
        return count_failure(r, CS__REG_REJECTED);
    }
    s = cs__schema_new(id, type, text, strlen(text));
    yajl_tree_free(root);
    free(b.buf);
    if (!s) {
        cs__fail(CS_ERR_NOMEM, "schema registry %s: %s: out of memory", r->url, what);
        return count_failure(r, CS__REG_LOCAL);
    }
    *out = cs__schema_cache_put(&r->cache, s);
    return CS__REG_OK;
}

/* ---- public read-outs ---- */

cs_err cs_registry_stats_get(cs_registry *r, cs_registry_stats *out) {
    if (!r || !out) return cs__fail(CS_ERR_ARG, "cs_registry_stats_get: registry and out are required");
    cs__registry_stats s;
    cs__registry_stats_get(r, &s);
    *out = (cs_registry_stats){.lookups = s.lookups,
                               .cache_hits = s.cache_hits,
                               .requests = s.requests,
                               .errors = s.errors,
                               .unavailable = s.retryable_errors,
                               .registered = s.registered};
    return CS_OK;
}

const char *cs_registry_url(const cs_registry *r) { return r->url; }

int cs__registry_check(cs_registry *r, char *why, size_t cap) {
    if (atomic_load(&r->health) == REG_ANSWERS) return 1;
    body b;
    cs__reg_status st =
        exchange_within(r, "/subjects", NULL, &b, "probe (GET /subjects)", CS_REGISTRY_PROBE_TIMEOUT_MS);
    if (st == CS__REG_OK) {
        free(b.buf);
        return 1;
    }
    count_failure(r, st);
    if (cap) snprintf(why, cap, "%s", cs_errmsg());
    return 0;
}

cs_err cs_registry_ping(cs_registry *r) {
    body b;
    if (!r) return cs__fail(CS_ERR_ARG, "cs_registry_ping: registry is NULL");
    cs__reg_status st = exchange(r, "/subjects", NULL, &b, "ping (GET /subjects)");
    if (st == CS__REG_OK) {
        free(b.buf);
        return CS_OK;
    }
    count_failure(r, st);
    char why[1024];
    snprintf(why, sizeof why, "%s", cs_errmsg());
    return cs__fail(CS_ERR_UNAVAILABLE, "%s", why);
}
