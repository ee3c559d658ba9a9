/* cstest_registry.h — what the tests against the real Schema Registry share
 * (tests/registry): where it is and who may use it (the environment
 * tests/with-registry sets), clients with its basic auth, raw requests as
 * the tests' user (what an operator would do), stopping and restarting it
 * through scripts/registry, the wire format's schema id, and a per-id tally
 * of what handlers saw. Failures are cmocka failures of the calling test.
 * The tally is thread-safe (handlers add from the workers); the rest is
 * called from the test's thread. */
#ifndef CSTEST_REGISTRY_H
#define CSTEST_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cstream/codec.h"
#include "cstream/registry.h"

/* Where the registry is and the tests' user (NULL: no auth); set by cstr_init. */
extern const char *cstr_url, *cstr_user, *cstr_password;

/* Reads CSTREAM_REGISTRY_URL, _USER and _PASSWORD; false (said on stderr)
 * when no registry is given: the test was not run through tests/with-registry. */
bool cstr_init(void);

/* A fresh client (nothing cached) as the tests' user, or with another
 * password, with longer timeouts than a service's (a loaded registry). */
cs_registry *cstr_client(void);
cs_registry *cstr_client_as(const char *password);

/* An Avro registry codec: with a topic it encodes under the TopicNameStrategy
 * subject of its key or value, without one it only decodes. */
cs_codec *cstr_avro_codec(cs_registry *r, const char *reader, const char *topic, bool key);

/* Room for a response's body (cut to fit). */
typedef struct cstr_body {
    char buf[8192];
    size_t len;
} cstr_body;

/* One request to {url}{path} as the tests' user; the HTTP status. `body`:
 * the request's JSON (NULL: none); `out`: the response's body (NULL: dropped). */
long cstr_request(const char *method, const char *path, const char *body, cstr_body *out);

/* 200 when the subject has a schema, 404 when it has none. */
long cstr_subject_status(const char *subject);

/* PUT /config/{subject}: its compatibility level; fails the test unless 200. */
void cstr_set_compatibility(const char *subject, const char *level);

/* scripts/registry stop, restart: the registry down then back on its port
 * with its schemas. cstr_up is a cmocka setup (and a last call in main) that
 * restarts it when a failed test left it stopped. */
void cstr_stop(void);
void cstr_restart(void);
int cstr_up(void **state);
bool cstr_is_down(void);

/* A fresh topic of one partition beside a test's own (cst_fresh's name;
 * topic: room for cap bytes). */
void cstr_fresh_topic(const char *prefix, char *topic, size_t cap);

/* The schema id of a payload in the registry's wire format (fails the test
 * when it is not in that format). */
int32_t cstr_wire_id(const void *payload, size_t len);

/* The client's count of requests the registry did not answer; cstr_tried_twice
 * (for cst_wait, arg: the cs_registry) once it is 2 or more. */
uint64_t cstr_unavailable(cs_registry *r);
bool cstr_tried_twice(void *arg);

/* What handlers saw: a count per record id (0..CSTR_MAX_IDS-1) and in all. */
#define CSTR_MAX_IDS 64
typedef struct cstr_tally {
    pthread_mutex_t lock;
    int count[CSTR_MAX_IDS];
    int total;
} cstr_tally;
#define CSTR_TALLY_INIT                                                                                                \
    { .lock = PTHREAD_MUTEX_INITIALIZER }

void cstr_tally_add(cstr_tally *t, int64_t id);
int cstr_tally_total(cstr_tally *t);
/* Each id 0..n-1 seen once and nothing else; `what` names the records. */
void cstr_assert_each_once(cstr_tally *t, int n, const char *what);

/* For cst_wait: the tally has reached n records. */
typedef struct cstr_want {
    cstr_tally *t;
    int n;
} cstr_want;
bool cstr_reached(void *arg);

#endif
