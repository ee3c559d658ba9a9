/* broker.h — how a broker (Kafka) plugs into the app lifecycle. The app knows
 * nothing else of it: it starts brokers in order, stops them in reverse.
 *
 * Owns: declares cs_broker_ops and the operations surface's types; app.c keeps
 * each broker's ops and impl and destroys the impl through ops->destroy.
 * Locks: none here (app.c's cs_app.lock guards the stop request and the fatal
 * reason). Threads: each op says its thread; cs__app_fatal runs on any. */
#ifndef CS_CORE_BROKER_H
#define CS_CORE_BROKER_H

#include "cstream/app.h"

/* ---- operations surface (cs_app_main, /metrics, /readyz, AsyncAPI) ---------- */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "cstream/codec.h"
#include "cstream/record.h"

/* What the operations surface knows of one subscription. Strings and arrays
 * are borrowed from the broker (valid until it is destroyed). */
typedef struct cs_broker_sub_desc {
    const char *name; /* topics joined by ',' */
    char *const *topics;
    size_t n_topics;
    const char *group;         /* its group, else the broker's default group (may be NULL) */
    const char *reply_topic;   /* NULL: none */
    const char *dead_letter;   /* NULL: none */
    const cs_codec *codec;     /* the subscription's codec, or NULL */
    const cs_codec *key_codec; /* the codec of its keys, or NULL */
    const cs_type *type;
    int tracked;       /* CS_COMMIT_TRACKED, CS_COMMIT_TRANSACTIONAL or CS_COMMIT_DATABASE */
    int transactional; /* CS_COMMIT_TRANSACTIONAL */
    int database;      /* CS_COMMIT_DATABASE */
    int batch;         /* a batch handler */
    int workers;
    int max_attempts;
    int pattern;                /* topics[0] is a regular expression over topic names, not a name */
    const char *group_protocol; /* "classic" or "consumer" (KIP-848); NULL: the broker has no groups */
} cs_broker_sub_desc;

/* A subscription's counters as the core keeps them: the pipeline fills them
 * (cs__pipeline_stats), the broker reports them (sub_counters below) and its
 * public stats begin with them; /metrics writes one counter family per
 * member. All monotonic. X(member) once per member, in this order. */
/* clang-format does not settle on one layout for this list. */
// clang-format off
#define CS__BROKER_SUB_COUNTERS(X) \
    X(delivered) X(acked) X(dropped) X(retried) X(retry_unsupported) X(stale) X(slow_handlers) X(commits) \
    X(commit_failures) X(pauses) X(decode_failures) X(dead_lettered) X(exhausted) X(transactions) X(aborts) \
    X(outputs) X(skipped_settled) X(metadata_truncated) X(db_fenced)
// clang-format on
typedef struct cs_broker_sub_counters {
#define CS__COUNTER_MEMBER(m) uint64_t m;
    CS__BROKER_SUB_COUNTERS(CS__COUNTER_MEMBER)
#undef CS__COUNTER_MEMBER
} cs_broker_sub_counters;
/* reset-offsets (cli_reset.c asks, the broker answers): where a group's
 * committed positions go. */
typedef enum cs_broker_reset_to {
    CS_RESET_EARLIEST, /* the oldest record still kept */
    CS_RESET_LATEST,   /* the end: only records written from now on */
    CS_RESET_OFFSET,   /* `value`, kept inside [earliest, end] */
    CS_RESET_TIME,     /* the first record with a timestamp >= `value` (ms since the epoch), else the end */
    CS_RESET_SHIFT     /* the committed position + `value` (negative: back), kept inside [earliest, end] */
} cs_broker_reset_to;

/* One --topic: a topic, all of its partitions (n_partitions 0) or some. */
typedef struct cs_broker_reset_scope {
    const char *topic;
    const int32_t *partitions;
    size_t n_partitions;
} cs_broker_reset_scope;

typedef struct cs_broker_reset {
    const char *group; /* NULL: the service's only group */
    const cs_broker_reset_scope *scopes;
    size_t n_scopes; /* 0: every topic the group's subscriptions read */
    cs_broker_reset_to to;
    int64_t value;
    int execute; /* 0: a dry run, nothing is written */
} cs_broker_reset;

/* One line of the plan. */
#define CS_BROKER_RESET_NOTE 96
typedef struct cs_broker_reset_row {
    char topic[256]; /* Kafka's names are at most 249 characters */
    int32_t partition;
    int64_t current;                 /* the committed position, -1: none */
    int64_t next;                    /* where it goes; == current when unchanged */
    char note[CS_BROKER_RESET_NOTE]; /* why it is not the asked position, or "" */
} cs_broker_reset_row;
/* ---- end operations surface ---------------------------------------------------- */

typedef struct cs_metrics cs_metrics; /* metrics.h */

typedef struct cs_broker_ops {
    const char *kind;
    cs_err (*start)(void *impl, cs_app *app); /* on failure leaves nothing running */
    cs_err (*stop)(void *impl);               /* graceful; idempotent */
    void (*crash)(void *impl);                /* tests: stop without closing or committing */
    void (*destroy)(void *impl);
    int (*idle)(void *impl); /* tests: nothing queued or in flight, lag 0 */

    /* ---- operations surface: optional (NULL: this broker has none) ---------- */
    /* Before start: replaces the bootstrap servers (NULL or "": the embedded cluster). */
    cs_err (*set_bootstrap)(void *impl, const char *servers);
    /* Before start: the operator's client properties from the command line,
     * copied: `file` (--config; NULL: the broker's own default, if any) and
     * `props` ("key=value" each, -X, in order). The broker reads, checks and
     * applies them above the code's configuration when it starts (and for
     * the commands that connect); their names and values are the broker's
     * business, the core only carries them. */
    cs_err (*set_external)(void *impl, const char *file, char *const *props, size_t n_props);
    /* The calling thread, with the app not running: writes the effective
     * configuration of each of the broker's clients to `out`, each value
     * with where it came from, secrets masked (`config show`). */
    cs_err (*show_config)(void *impl, cs_app *app, FILE *out);
    const char *(*bootstrap)(void *impl); /* NULL before start on the embedded cluster */
    size_t (*n_topics)(void *impl);       /* the topics the service declared */
    const char *(*topic)(void *impl, size_t i, int *partitions);
    size_t (*n_subs)(void *impl);
    void (*describe_sub)(void *impl, size_t i, cs_broker_sub_desc *out);
    /* Any thread while the app exists (/metrics): subscription i's counters,
     * read under short locks only (after a stop, the final ones). */
    void (*sub_counters)(void *impl, size_t i, cs_broker_sub_counters *out);
    /* While running: every subscription joined its group (its rebalance is
     * done, an empty assignment included) and its brokers answer. */
    int (*ready)(void *impl);
    /* While running, under the same exclusion as `ready`: how many assigned
     * partitions the application paused on purpose (a paused service is
     * ready; /readyz says how many). */
    uint64_t (*paused)(void *impl);
    /* A new broker with the same client properties (and, on the embedded
     * cluster, the declared topics) but no subscriptions, on `servers` (NULL:
     * this broker's), added to `tool`, which owns it from then on. For
     * one-shot tools such as `publish`. Returns it, or NULL with the reason in
     * cs_errmsg and nothing added. */
    void *(*add_publisher)(void *impl, cs_app *tool, const char *servers);
    /* While `tool` runs: publishes rec through what add_publisher returned
     * (cstream/record.h's record and result). */
    cs_err (*publish)(void *publisher, const cs_record *rec, cs_published *out);
    /* Any thread: the client library and its version, for --version
     * ("librdkafka 2.14.2"), into buf (cap bytes). */
    void (*library)(void *impl, char *buf, size_t cap);
    /* The HTTP thread, while the app runs: adds the broker's samples to /metrics
     * (metrics.h). Atomics and short locks only, never a network round trip. */
    void (*metrics)(void *impl, cs_metrics *m);
    /* The calling thread, with the app not running: plans (and with
     * req->execute, commits) a reset of a group's committed positions. Refused
     * (CS_ERR_STATE) while the group has live members. *rows (the caller
     * frees it) holds the plan, also when the commit then failed. */
    cs_err (*reset_offsets)(void *impl, const cs_broker_reset *req, cs_broker_reset_row **rows, size_t *n_rows);
    /* Before or while the app runs: the app's AsyncAPI document (JSON, or YAML
     * when yaml != 0; the caller frees *out), with the bindings of this
     * broker's protocol. Not per broker: it describes every broker of the app,
     * and cs_app_asyncapi asks the first broker that has the op. app and out
     * are not NULL; errors as cs_app_asyncapi's. */
    cs_err (*asyncapi)(cs_app *app, int yaml, char **out);
} cs_broker_ops;

cs_err cs__app_add_broker(cs_app *app, const cs_broker_ops *ops, void *impl);
/* Any thread: a fatal error stops the app; the first reason is kept. */
void cs__app_fatal(cs_app *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cs__app_started(const cs_app *app);
/* Tests: crash every broker (destroy without closing), skip the shutdown hook. */
void cs__app_crash(cs_app *app);
int cs__app_idle(cs_app *app);

/* ---- operations surface: the app's brokers, for cs_app_main (app.c) ---------- */
size_t cs__app_n_brokers(const cs_app *app);
const cs_broker_ops *cs__app_broker(const cs_app *app, size_t i, void **impl);

#endif
