/* transaction.c — a Transactional subscription's producer: one Kafka
 * transaction per window, carrying the window's outputs and the consumed
 * positions (with the consumer's group metadata, KIP-447), committed as one.
 *
 * Threads: one thread at a time: the starting thread (cs__txn_start), then
 * the subscription's fetch thread (window close, revoke), or the closing
 * thread once the fetch thread has exited (the close's last window), then
 * the destroying thread. So one transaction at a time and never across a
 * rebalance: the rebalance callback runs on the fetch thread between two
 * windows.
 * librdkafka's blocking transactional calls serve this producer's delivery
 * reports on the calling thread (no other thread polls it).
 *
 * Owns: the cs_txn, its transactional producer and its dead flag. Locks:
 * none (one thread). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/broker.h"
#include "base/error.h"
#include "base/log.h"
#include "kafka/producer/transaction.h"

struct cs_txn {
    rd_kafka_t *rk;
    cs_app *app;
    cs_kafka *k; /* its OAUTHBEARER token provider, if any (oauth.c) */
    char *id;    /* transactional.id */
    char *who;   /* "subscription <name>" for messages */
    bool dead;   /* a fatal error: nothing is ever committed again */
    cs_ratelimit abort_warning;
    cs_txn_output_failed_fn output_failed;
    void *failed_arg;
    bool delivery_failed; /* an output of the open transaction was refused */
};

/* Where an output came from, for its delivery report (the per-message
 * opaque; freed by the report, which always comes, failed or purged). */
typedef struct output_source {
    struct cs_part *part;
    int64_t offset;
    uint32_t attempt;
} output_source;

/* Delivery failures of outputs make the commit fail (abortable); this only
 * says which output and why. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    cs_txn *t = opaque;
    output_source *src = m->_private;
    bool purged = m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT;
    if (m->err && !purged && !t->delivery_failed) {
        /* Only the first refusal is the output's own fault: the records queued
         * behind it fail with it (sequence gap, time-out) and are not counted. */
        CS_LOG_WARN("transactional output not delivered, the window aborts %s transactional_id=%s topic=%s "
                    "source_offset=%lld error=\"%s\"",
                    t->who, t->id, rd_kafka_topic_name(m->rkt), src ? (long long)src->offset : -1LL,
                    rd_kafka_err2str(m->err));
        if (src && src->part && t->output_failed) t->output_failed(t->failed_arg, src->part, src->offset, src->attempt);
        t->delivery_failed = true;
    } else if (m->err && !purged) {
        CS_LOG_DEBUG("transactional output failed after an earlier refusal %s topic=%s error=\"%s\"", t->who,
                     rd_kafka_topic_name(m->rkt), rd_kafka_err2str(m->err));
    }
    free(src);
}

static void report_fatal(cs_txn *t, rd_kafka_resp_err_t code, const char *why) {
    if (t->dead) return;
    t->dead = true;
    bool fenced = code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
                  code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
    cs__app_fatal(t->app, "%s: transactional producer %s %s: %s: %s; nothing more is committed", t->who, t->id,
                  fenced ? "was fenced (another instance with the same instance id took over)" : "failed fatally",
                  rd_kafka_err2name(code), why);
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    cs_txn *t = opaque;
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, why, sizeof why);
        report_fatal(t, orig, why);
        return;
    }
    CS_LOG_DEBUG("transactional producer error %s error=%s reason=\"%s\"", t->who, rd_kafka_err2name(err), reason);
}

static void on_oauth_refresh(rd_kafka_t *rk, const char *config, void *opaque) {
    cs_txn *t = opaque;
    cs__oauth_refresh(t->k, rk, config, t->who);
}

cs_err cs__txn_start(cs_sub *s, cs_app *app, const char *transactional_id, cs_txn_output_failed_fn failed,
                     void *failed_arg, cs_txn **out) {
    cs_txn *t = calloc(1, sizeof *t);
    char who[256];
    snprintf(who, sizeof who, "subscription %s", s->name);
    if (t) {
        t->id = strdup(transactional_id);
        t->who = strdup(who);
        t->app = app;
        t->k = s->k;
        t->output_failed = failed;
        t->failed_arg = failed_arg;
    }
    if (!t || !t->id || !t->who) {
        cs__txn_destroy(t);
        return cs__fail(CS_ERR_NOMEM, "%s: out of memory", who);
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    cs_err err = cs__conf_set(conf, who, "client.id", cs_app_name(app)); /* default; config may override */
    /* message.timeout.ms 10 s (librdkafka: 300 s, capped at the transaction
     * timeout, 60 s; config may override): in librdkafka 2.0.2 an abort after
     * the broker refused an output waits for the records queued behind it
     * (their sequence has a gap) until they time out. They must time out well
     * before the coordinator times the transaction out and bumps the epoch,
     * or the abort itself is fenced (fatal in 2.0.2). */
    if (!err) err = cs__conf_set(conf, who, "message.timeout.ms", "10000");
    /* retry.backoff.ms 20 (librdkafka: 100; config may override): a window's
     * AddOffsetsToTxn sent while the broker still writes the previous
     * transaction's markers is answered CONCURRENT_TRANSACTIONS and retried
     * after retry.backoff.ms (librdkafka uses 20 ms for AddPartitionsToTxn
     * only). At 100 ms that wait was the p99 of the Transactional replies
     * (about 105-110 ms at 10 ms windows under the low-latency profile, 22
     * ms with 20: docs/benchmarks.md, "Latency"). */
    if (!err) err = cs__conf_set(conf, who, "retry.backoff.ms", "20");
    /* connections.max.idle.ms 10 s (librdkafka: 0, never; config may
     * override): librdkafka >= 2.10 stops reconnecting to a broker that left
     * the metadata but keeps it as the group's coordinator (#5511), and a
     * request waiting for that coordinator never times out (#5456). A
     * window's send_offsets_to_transaction then never returns, and the fetch
     * thread that called it never serves the consumer again: seen on 2.14.2
     * after a broker SIGKILL (docs/real-kafka.md, "Known problems"). Any
     * connection changing state makes librdkafka look the coordinator up
     * again; an idle one closing is such a change. */
    if (!err) err = cs__conf_set(conf, who, "connections.max.idle.ms", "10000");
    if (!err) err = cs__profile_apply(s->k, conf, NULL, who, true);
    if (!err) err = cs__conf_apply(conf, "cs_kafka_config", &s->k->config);
    if (!err) err = cs__conf_apply(conf, "cs_kafka_producer_config", &s->k->producer_config);
    /* The operator's file, environment and -X layers reach it as they reach
     * the plain producer (a cluster configured from a file only needs its
     * security settings here too). */
    if (!err) err = cs__ext_apply(conf, s->k, CS_CONF_PRODUCER, NULL, NULL);
    if (!err) err = cs__conf_set(conf, who, "bootstrap.servers", s->k->bootstrap);
    if (!err) err = cs__conf_set(conf, who, "transactional.id", transactional_id);
    char reason[512];
    if (!err) {
        rd_kafka_conf_set_opaque(conf, t);
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
        rd_kafka_conf_set_error_cb(conf, on_error);
        rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
        cs__oauth_conf(s->k, conf, on_oauth_refresh);
        t->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof reason);
        if (!t->rk) {
            rd_kafka_conf_destroy(conf); /* rd_kafka_new takes it only on success */
            err = cs__fail(CS_ERR_KAFKA, "%s: transactional producer could not be created: %s", who, reason);
        } else {
            err = cs__oauth_started(s->k, t->rk, who);
        }
    } else {
        rd_kafka_conf_destroy(conf);
    }
    if (!err) {
        /* Fences an earlier producer with this transactional.id (a zombie of
         * this instance) and aborts what it left open. */
        rd_kafka_error_t *e = rd_kafka_init_transactions(t->rk, 60000);
        if (e) {
            err = cs__fail(CS_ERR_KAFKA, "%s: transactions could not be initialised (transactional.id %s): %s", who,
                           transactional_id, rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
        }
    }
    if (err) {
        cs__txn_destroy(t);
        return err;
    }
    CS_LOG_INFO("transactions ready %s transactional_id=%s", who, transactional_id);
    *out = t;
    return CS_OK;
}

void cs__txn_destroy(cs_txn *t) {
    if (!t) return;
    if (t->rk) rd_kafka_destroy(t->rk);
    free(t->id);
    free(t->who);
    free(t);
}

bool cs__txn_dead(const cs_txn *t) { return t->dead; }

/* Produces one output into the open transaction; a full local queue is
 * waited out (the flush of earlier outputs makes room). */
static rd_kafka_resp_err_t produce(cs_txn *t, const cs_output *o) {
    const cs_record *r = &o->rec;
    output_source *src = malloc(sizeof *src);
    if (!src) return RD_KAFKA_RESP_ERR__FAIL; /* out of memory */
    *src = (output_source){o->source_part, o->source_offset, o->source_attempt};
    for (int waited = 0;; waited += 10) {
        rd_kafka_headers_t *hdrs = cs__headers_new(r->headers, r->n_headers);
        rd_kafka_resp_err_t err = rd_kafka_producev(
            t->rk, RD_KAFKA_V_TOPIC(r->topic),
            RD_KAFKA_V_PARTITION(r->partition < 0 ? RD_KAFKA_PARTITION_UA : r->partition),
            RD_KAFKA_V_KEY(r->key, r->key ? r->key_len : 0),
            RD_KAFKA_V_VALUE((void *)r->value, r->value ? r->value_len : 0), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(src), RD_KAFKA_V_END);
        if (err && hdrs) rd_kafka_headers_destroy(hdrs); /* on success librdkafka owns them */
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && waited < 60000) {
            rd_kafka_poll(t->rk, 10);
            continue;
        }
        if (err) { /* refused before it was queued: its source counts it as a failed attempt */
            if (o->source_part && t->output_failed && !t->delivery_failed)
                t->output_failed(t->failed_arg, o->source_part, o->source_offset, o->source_attempt);
            t->delivery_failed = true;
            free(src);
        }
        return err;
    }
}

/* What to do after a failed call: abort (and read the window again), or stop
 * for good. Consumes e. */
static cs_txn_result after_error(cs_txn *t, const char *step, rd_kafka_error_t *e) {
    if (rd_kafka_error_is_fatal(e)) {
        report_fatal(t, rd_kafka_error_code(e), rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return CS_TXN_FATAL;
    }
    uint64_t skipped = 0;
    if (cs__ratelimit_allow(&t->abort_warning, 2000, &skipped))
        CS_LOG_WARN("transaction aborted, its window is read again %s transactional_id=%s step=%s error=%s "
                    "reason=\"%s\" similar_since_last=%llu",
                    t->who, t->id, step, rd_kafka_err2name(rd_kafka_error_code(e)), rd_kafka_error_string(e),
                    (unsigned long long)skipped);
    rd_kafka_error_destroy(e);
    rd_kafka_error_t *a = rd_kafka_abort_transaction(t->rk, -1);
    for (int i = 0; a && rd_kafka_error_is_retriable(a) && i < 5; i++) {
        rd_kafka_error_destroy(a);
        a = rd_kafka_abort_transaction(t->rk, -1);
    }
    if (a) {
        report_fatal(t, rd_kafka_error_code(a), rd_kafka_error_string(a)); /* cannot even abort: stop */
        rd_kafka_error_destroy(a);
        return CS_TXN_FATAL;
    }
    return CS_TXN_ABORTED;
}

cs_txn_result cs__txn_commit(cs_txn *t, const cs_output *outputs, const rd_kafka_topic_partition_list_t *offsets,
                             rd_kafka_t *consumer) {
    if (t->dead) return CS_TXN_FATAL;
    t->delivery_failed = false;
    rd_kafka_error_t *e = rd_kafka_begin_transaction(t->rk);
    if (e) return after_error(t, "begin", e);
    for (const cs_output *o = outputs; o; o = o->next) {
        rd_kafka_resp_err_t err = produce(t, o);
        if (err) {
            e = rd_kafka_error_new(err, "output to %s: %s", o->rec.topic, rd_kafka_err2str(err));
            return after_error(t, "produce", e);
        }
    }
    if (offsets && offsets->cnt > 0) {
        rd_kafka_consumer_group_metadata_t *group = rd_kafka_consumer_group_metadata(consumer);
        e = rd_kafka_send_offsets_to_transaction(t->rk, offsets, group, -1);
        for (int i = 0; e && rd_kafka_error_is_retriable(e) && i < 5; i++) { /* same offsets, same metadata */
            rd_kafka_error_destroy(e);
            e = rd_kafka_send_offsets_to_transaction(t->rk, offsets, group, -1);
        }
        rd_kafka_consumer_group_metadata_destroy(group);
        if (e) return after_error(t, "send_offsets", e);
    }
    /* Deliver the outputs first, serving their reports here: once one is
     * refused the transaction can only abort, and librdkafka 2.0.2's commit
     * would keep flushing the records queued behind it (their sequence now
     * has a gap) until the transaction times out. */
    for (int64_t until = cs__now_ms() + 30000;
         rd_kafka_outq_len(t->rk) > 0 && !t->delivery_failed && cs__now_ms() < until;)
        rd_kafka_poll(t->rk, 5);
    if (t->delivery_failed)
        return after_error(
            t, "deliver", rd_kafka_error_new(RD_KAFKA_RESP_ERR__FAIL, "an output was refused (see the warning above)"));
    e = rd_kafka_commit_transaction(t->rk, -1);
    for (int i = 0; e && rd_kafka_error_is_retriable(e) && !rd_kafka_error_txn_requires_abort(e) && i < 5; i++) {
        rd_kafka_error_destroy(e); /* resumable: the commit goes on in the background */
        e = rd_kafka_commit_transaction(t->rk, -1);
    }
    if (e) return after_error(t, "commit", e);
    return CS_TXN_COMMITTED;
}
