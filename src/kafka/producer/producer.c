/* producer.c — the broker's producer: blocking and asynchronous publishes,
 * and replies that gate their source record.
 *
 * Delivery reports are served by a dedicated thread (report_main), never by a
 * publishing thread: a blocking publish waits on its own completion, and a
 * full local queue is waited out, at most the queue timeout, on the `space`
 * condition that every delivery report signals. RD_KAFKA_MSG_F_BLOCK is not
 * used: it has no timeout and deadlocks on the thread that serves reports.
 *
 * Owns: the cs_producer, its librdkafka handle, its delivery-report thread
 * and the completions of blocking publishes. Locks: `lock`, for the space
 * condition (a leaf, taken under the broker's producer read lock), and a
 * blocking publish's own `lock`, for its completion (a leaf; src/lock_order.h);
 * neither is held across a call into librdkafka. Threads: any thread publishes
 * (publish.c); delivery reports, errors and statistics on the report thread
 * (and on the lifecycle thread inside flush and close); start, flush and
 * close on the app's lifecycle thread (kafka.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "core/delivery_internal.h"
#include "base/error.h"
#include "base/log.h"
#include "core/output.h"
#include "core/pipeline.h"
#include "core/trace.h"
#include "kafka/kafka_internal.h"

struct cs_producer {
    rd_kafka_t *rk;
    cs_app *app;
    cs_kafka *k; /* its OAUTHBEARER token provider, if any (oauth.c) */
    pthread_t reporter;
    _Atomic bool stop;
    pthread_mutex_t lock;
    pthread_cond_t space; /* a delivery report freed queue space */
    int queue_timeout_ms;
    cs_ratelimit reply_warning;
    cs_ratelimit refused_warning; /* authentication or TLS refused */
    cs_publish_stats *stats;      /* the broker's: it outlives the producer */
    cs_client_stats *rdk_stats;   /* the broker's too: librdkafka's statistics, for /metrics */
};

/* What a delivery report completes; the per-message opaque. */
typedef enum outgoing_kind { OUT_WAIT, OUT_CALLBACK, OUT_REPLY_GATED, OUT_REPLY_FREE, OUT_DEAD_LETTER } outgoing_kind;
typedef struct outgoing {
    outgoing_kind kind;
    uint64_t enqueued_ns; /* first enqueue attempt (monotonic), for the publish latency */
    /* OUT_WAIT: the publisher waits on the outgoing's own lock (a leaf) and
     * condition, so that it never touches the producer once its record was
     * reported. */
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool done;
    rd_kafka_resp_err_t err;
    int32_t partition;
    int64_t offset;
    /* OUT_CALLBACK */
    cs_publish_fn fn;
    void *opaque;
    /* OUT_REPLY_GATED: the source record, settled by the report */
    cs_delivery *source;
    /* OUT_DEAD_LETTER: whose line the report logs once the cluster accepted
     * it (the sub outlives the producer's reports: it is freed at
     * cs_kafka_destroy, after the stop closed the producer), and the reason */
    cs_sub *dl_sub;
    char *dl_reason;
    /* replies and dead letters: the source's trace id, for log lines (it may be gone by then) */
    char trace_id[CS_TRACE_ID_LEN + 1];
} outgoing;

/* " trace_id=<id>" for a log line, or "". */
#define OUT_TRACE_ARGS(o) ((o)->trace_id[0] ? " trace_id=" : ""), (o)->trace_id

static cs_publish_kind metric_kind(outgoing_kind k) {
    switch (k) {
    case OUT_WAIT: return CS_PUB_PUBLISH;
    case OUT_CALLBACK: return CS_PUB_ASYNC;
    case OUT_DEAD_LETTER: return CS_PUB_DEAD_LETTER;
    default: return CS_PUB_REPLY;
    }
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    cs_producer *p = opaque;
    outgoing *o = m->_private;
    if (o) { /* before o is handed back: a blocking publisher frees it as soon as it is done */
        cs_publish_kind k = metric_kind(o->kind);
        cs__histogram_observe(&p->stats->latency[k], cs__mono_ns() - o->enqueued_ns);
        if (m->err) atomic_fetch_add_explicit(&p->stats->errors[k], 1, memory_order_relaxed);
    }
    if (o && o->kind == OUT_WAIT) {
        pthread_mutex_lock(&o->lock);
        o->err = m->err;
        o->partition = m->partition;
        o->offset = m->offset;
        o->done = true;
        pthread_cond_signal(&o->cv);
        pthread_mutex_unlock(&o->lock); /* the publisher may free o from here on */
    } else if (o && o->kind == OUT_CALLBACK) {
        cs_published where = {m->partition, m->offset};
        if (m->err)
            cs__fail(CS_ERR_KAFKA, "publish to %s: delivery failed: %s", rd_kafka_topic_name(m->rkt),
                     rd_kafka_err2str(m->err));
        o->fn(m->err ? NULL : &where, m->err ? CS_ERR_KAFKA : CS_OK, o->opaque);
        free(o);
    } else if (o && o->kind == OUT_DEAD_LETTER) {
        if (m->err)
            CS_LOG_WARN("dead-letter record not accepted, its source stays open topic=%s error=\"%s\"%s%s",
                        rd_kafka_topic_name(m->rkt), rd_kafka_err2str(m->err), OUT_TRACE_ARGS(o));
        /* Logged here, not when queued: only now is the line true (a record
         * not accepted is retried and would log again); before the settle,
         * which may free the source. */
        if (!m->err && o->dl_sub)
            cs__dead_letter_log(&o->dl_sub->dead_letter_log, CS_DLQ_SENT, o->dl_sub->name, o->dl_sub->dead_letter,
                                o->source, o->dl_reason);
        cs__delivery_dead_letter_done(o->source, m->err == RD_KAFKA_RESP_ERR_NO_ERROR);
        free(o->dl_reason);
        free(o);
    } else if (o) {
        if (m->err) {
            uint64_t skipped = 0;
            if (cs__ratelimit_allow(&p->reply_warning, 2000, &skipped))
                CS_LOG_WARN("reply not delivered%s topic=%s error=\"%s\" similar_since_last=%llu%s%s",
                            o->kind == OUT_REPLY_GATED ? ", its source record comes back" : "",
                            rd_kafka_topic_name(m->rkt), rd_kafka_err2str(m->err), (unsigned long long)skipped,
                            OUT_TRACE_ARGS(o));
        }
        if (o->kind == OUT_REPLY_GATED) cs__delivery_reply_done(o->source, m->err == RD_KAFKA_RESP_ERR_NO_ERROR);
        free(o);
    }
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->space);
    pthread_mutex_unlock(&p->lock);
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    cs_producer *p = opaque;
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, why, sizeof why);
        cs__app_fatal(p->app, "producer: librdkafka fatal error %s: %s", rd_kafka_err2name(orig), why);
        return;
    }
    /* Refused credentials or TLS: nothing gets delivered until it is fixed
     * (the consumer's twin logs it too); other client errors are transient
     * and their records' delivery reports tell the rest. */
    uint64_t skipped = 0;
    if ((err == RD_KAFKA_RESP_ERR__AUTHENTICATION || err == RD_KAFKA_RESP_ERR__SSL) &&
        cs__ratelimit_allow(&p->refused_warning, 5000, &skipped)) {
        CS_LOG_ERR("producer refused by the cluster error=%s reason=\"%s\" similar_since_last=%llu",
                   rd_kafka_err2name(err), reason, (unsigned long long)skipped);
        return;
    }
    CS_LOG_DEBUG("producer error error=%s reason=\"%s\"", rd_kafka_err2name(err), reason);
}

/* librdkafka's statistics (on the report thread, which polls): the queue
 * depth and the brokers' round trips for /metrics (client_stats.c). */
static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
    (void)rk;
    (void)len;
    cs_producer *p = opaque;
    return cs__client_stats_from_json(p->rdk_stats, json);
}

/* A token for OAUTHBEARER (librdkafka's background thread, oauth.c). */
static void on_oauth_refresh(rd_kafka_t *rk, const char *config, void *opaque) {
    cs_producer *p = opaque;
    cs__oauth_refresh(p->k, rk, config, "producer");
}

static void *report_main(void *arg) {
    cs_producer *p = arg;
    while (!atomic_load(&p->stop)) rd_kafka_poll(p->rk, 100);
    return NULL;
}

/* cstream's default, the code's properties for every client and for the
 * producer, the operator's layers (config_sources.c), the servers. */
cs_err cs__producer_conf_layers(const cs_kafka *k, cs_app *app, rd_kafka_conf_t *conf, cs_conf_trace *t) {
    cs_err err = cs__conf_put(conf, t, "producer", "default", "client.id", cs_app_name(app), NULL); /* overridable */
    /* The queue depth and the brokers' round trips of /metrics come from the
     * statistics (client_stats.c); config may override the interval (0: none). */
    if (!err) err = cs__conf_put(conf, t, "producer", "default", "statistics.interval.ms", CS_STATS_INTERVAL_MS, NULL);
    if (!err) err = cs__profile_apply(k, conf, t, "producer", true);
    if (!err) err = cs__conf_apply_traced(conf, "cs_kafka_config", &k->config, "code cs_kafka_config", t);
    if (!err)
        err = cs__conf_apply_traced(conf, "cs_kafka_producer_config", &k->producer_config,
                                    "code cs_kafka_producer_config", t);
    if (!err) err = cs__ext_apply(conf, k, CS_CONF_PRODUCER, NULL, t);
    if (!err && k->bootstrap)
        err = cs__conf_put(conf, t, "producer", "cstream", "bootstrap.servers", k->bootstrap, NULL);
    return err;
}

cs_err cs__producer_start(cs_kafka *k, cs_app *app, cs_producer **out) {
    cs_producer *p = calloc(1, sizeof *p);
    if (!p) return cs__fail(CS_ERR_NOMEM, "producer: out of memory");
    p->queue_timeout_ms = k->queue_timeout_ms;
    p->app = app;
    p->stats = &k->pub_stats;
    p->rdk_stats = &k->producer_stats;
    p->k = k;
    pthread_mutex_init(&p->lock, NULL);
    cs__cond_init_monotonic(&p->space); /* timed: the queue timeout */
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    cs_err err = cs__producer_conf_layers(k, app, conf, NULL);
    char reason[512];
    if (!err) {
        rd_kafka_conf_set_opaque(conf, p);
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
        rd_kafka_conf_set_error_cb(conf, on_error);
        rd_kafka_conf_set_stats_cb(conf, on_stats);
        cs__oauth_conf(k, conf, on_oauth_refresh);
        rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
        p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof reason);
        if (!p->rk) err = cs__fail(CS_ERR_KAFKA, "producer could not be created: %s", reason);
        else err = cs__oauth_started(k, p->rk, "producer");
    }
    if (!err && pthread_create(&p->reporter, NULL, report_main, p) != 0)
        err = cs__fail(CS_ERR_NOMEM, "producer: delivery report thread could not start");
    if (err) {
        if (p->rk) rd_kafka_destroy(p->rk);
        else rd_kafka_conf_destroy(conf);
        free(p);
        return err;
    }
    *out = p;
    return CS_OK;
}

size_t cs__producer_flush(cs_producer *p, int timeout_ms) {
    rd_kafka_flush(p->rk, timeout_ms);
    return (size_t)rd_kafka_outq_len(p->rk);
}

/* Purges what is left (their reports say so: gated sources come back), then
 * destroys. */
void cs__producer_close(cs_producer *p) {
    if (rd_kafka_outq_len(p->rk) > 0) {
        rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(p->rk, 1000); /* serves the purged records' reports */
    }
    atomic_store(&p->stop, true);
    pthread_join(p->reporter, NULL);
    rd_kafka_poll(p->rk, 0);
    rd_kafka_destroy(p->rk);
    cs__client_stats_clear(p->rdk_stats); /* a closed producer has no queue and no brokers */
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->space);
    free(p);
}

rd_kafka_headers_t *cs__headers_new(const cs_header *h, size_t n) {
    if (!n) return NULL;
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_header_add(hdrs, h[i].name, -1, h[i].value, h[i].value ? (ssize_t)h[i].len : 0);
    return hdrs;
}

static rd_kafka_resp_err_t produce_once(cs_producer *p, const cs_record *r, outgoing *o) {
    rd_kafka_headers_t *hdrs = cs__headers_new(r->headers, r->n_headers);
    const char *traceparent = cs__inherited_traceparent(r);
    if (traceparent) {
        if (!hdrs) hdrs = rd_kafka_headers_new(1);
        rd_kafka_header_add(hdrs, CS_TRACEPARENT_HEADER, -1, traceparent, CS_TRACEPARENT_LEN);
    }
    rd_kafka_resp_err_t err = rd_kafka_producev(
        p->rk, RD_KAFKA_V_TOPIC(r->topic),
        RD_KAFKA_V_PARTITION(r->partition < 0 ? RD_KAFKA_PARTITION_UA : r->partition),
        RD_KAFKA_V_KEY(r->key, r->key ? r->key_len : 0),
        RD_KAFKA_V_VALUE((void *)r->value, r->value ? r->value_len : 0), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(o), RD_KAFKA_V_END);
    if (err && hdrs) rd_kafka_headers_destroy(hdrs); /* on success librdkafka owns them */
    return err;
}

static cs_err produce_waiting(cs_producer *p, const cs_record *r, outgoing *o, int queue_timeout_ms);
/* Enqueues (see produce_waiting); a record the producer refuses counts as a
 * publish error of its kind, like one whose report says it failed. */
static cs_err enqueue(cs_producer *p, const cs_record *r, outgoing *o, int queue_timeout_ms) {
    o->enqueued_ns = cs__mono_ns();
    cs_err err = produce_waiting(p, r, o, queue_timeout_ms);
    if (err) atomic_fetch_add_explicit(&p->stats->errors[metric_kind(o->kind)], 1, memory_order_relaxed);
    return err;
}

/* Enqueues, waiting for queue space at most queue_timeout_ms. */
static cs_err produce_waiting(cs_producer *p, const cs_record *r, outgoing *o, int queue_timeout_ms) {
    struct timespec deadline; /* monotonic: a clock step neither stretches nor cuts the queue timeout */
    cs__deadline_after(&deadline, queue_timeout_ms);
    rd_kafka_resp_err_t err;
    while ((err = produce_once(p, r, o)) == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        pthread_mutex_lock(&p->lock);
        int w = pthread_cond_timedwait(&p->space, &p->lock, &deadline);
        pthread_mutex_unlock(&p->lock);
        if (w != 0 && (err = produce_once(p, r, o)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            return cs__fail(CS_ERR_TIMEOUT, "publish to %s: local queue still full after queue_timeout %d ms", r->topic,
                            queue_timeout_ms);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) break;
    }
    if (err) return cs__fail(CS_ERR_KAFKA, "publish to %s: %s", r->topic, rd_kafka_err2str(err));
    return CS_OK;
}

cs_err cs__publish_start(cs_producer *p, const cs_record *r, cs_publish_wait **out) {
    outgoing *o = calloc(1, sizeof *o);
    if (!o) return cs__fail(CS_ERR_NOMEM, "publish to %s: out of memory", r->topic);
    o->kind = OUT_WAIT;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cv, NULL);
    cs_err err = enqueue(p, r, o, p->queue_timeout_ms);
    if (err) {
        pthread_mutex_destroy(&o->lock);
        pthread_cond_destroy(&o->cv);
        free(o);
        return err;
    }
    *out = (cs_publish_wait *)o;
    return CS_OK;
}

cs_err cs__publish_finish(cs_publish_wait *w, const char *topic, cs_published *out) {
    outgoing *o = (outgoing *)w;
    pthread_mutex_lock(&o->lock);
    while (!o->done) pthread_cond_wait(&o->cv, &o->lock);
    pthread_mutex_unlock(&o->lock);
    rd_kafka_resp_err_t err = o->err;
    if (!err && out) {
        out->partition = o->partition;
        out->offset = o->offset;
    }
    pthread_mutex_destroy(&o->lock);
    pthread_cond_destroy(&o->cv);
    free(o);
    if (err) return cs__fail(CS_ERR_KAFKA, "publish to %s: delivery failed: %s", topic, rd_kafka_err2str(err));
    return CS_OK;
}

cs_err cs__producer_publish_async(cs_producer *p, const cs_record *r, cs_publish_fn fn, void *opaque) {
    outgoing *o = calloc(1, sizeof *o);
    if (!o) return cs__fail(CS_ERR_NOMEM, "publish to %s: out of memory", r->topic);
    o->kind = OUT_CALLBACK;
    o->fn = fn;
    o->opaque = opaque;
    cs_err err = enqueue(p, r, o, p->queue_timeout_ms);
    if (err) free(o);
    return err;
}

static void copy_trace_id(outgoing *o, const cs_delivery *d) {
    const char *tp = d ? cs_delivery_traceparent(d) : NULL;
    if (tp) {
        memcpy(o->trace_id, tp + 3, CS_TRACE_ID_LEN);
        o->trace_id[CS_TRACE_ID_LEN] = '\0';
    }
}

cs_err cs__producer_reply(cs_producer *p, const cs_record *r, cs_delivery *gated_source, int queue_timeout_ms) {
    outgoing *o = calloc(1, sizeof *o);
    if (!o) return cs__fail(CS_ERR_NOMEM, "reply to %s: out of memory", r->topic);
    o->kind = gated_source ? OUT_REPLY_GATED : OUT_REPLY_FREE;
    o->source = gated_source;
    copy_trace_id(o, r->parent);
    cs_err err = enqueue(p, r, o, queue_timeout_ms);
    if (err) free(o);
    return err;
}

cs_err cs__producer_dead_letter(cs_producer *p, const cs_record *r, cs_delivery *source, int queue_timeout_ms,
                                cs_sub *sub, const char *reason) {
    outgoing *o = calloc(1, sizeof *o);
    char *why = sub ? strdup(reason ? reason : "") : NULL;
    if (!o || (sub && !why)) {
        free(o);
        free(why);
        return cs__fail(CS_ERR_NOMEM, "dead letter to %s: out of memory", r->topic);
    }
    o->kind = OUT_DEAD_LETTER;
    o->source = source;
    o->dl_sub = sub;
    o->dl_reason = why;
    copy_trace_id(o, source);
    cs_err err = enqueue(p, r, o, queue_timeout_ms);
    if (err) {
        free(o->dl_reason);
        free(o);
    }
    return err;
}
