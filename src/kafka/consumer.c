/* consumer.c — one subscription's librdkafka consumer: its configuration,
 * start, stop, close, crash and destroy, readiness and /metrics. The fetch
 * path is in fetch.c, rebalances in rebalance.c, commits in committer.c; the
 * consumer's state and its threads are described in consumer_internal.h. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/broker.h"
#include "../core/error.h"
#include "consumer_internal.h"

/* The largest queued.max.messages.kbytes librdkafka 2.0.2 accepts. */
#define RDK_QUEUED_KBYTES_MAX ((size_t)2097151)
/* The fewest records the pre-fetch bound allows by default: below it a small
 * fetch buffer would make librdkafka fetch a few records at a time. */
#define RDK_QUEUED_MESSAGES_FLOOR ((size_t)1000)

/* ---- lifecycle -------------------------------------------------------------- */

/* A numeric property as librdkafka holds it (0 if unreadable). */
static size_t conf_size(rd_kafka_conf_t *conf, const char *key) {
    char buf[64];
    size_t n = sizeof buf;
    if (rd_kafka_conf_get(conf, key, buf, &n) != RD_KAFKA_CONF_OK) return 0;
    return (size_t)strtoull(buf, NULL, 10);
}

/* ---- static membership (KIP-345) ----------------------------------------------
 * With an instance id, every consumer joins its group as a static member: the
 * broker keeps its partitions for it across a restart (a SIGKILL included)
 * until session.timeout.ms expires, and a member that rejoins with the same
 * group.instance.id before that gets them back without a rebalance. The id
 * must be stable across restarts and unique per consumer handle, and follows
 * Kafka's rule for it (JoinGroupRequest.validateGroupInstanceId: only
 * [A-Za-z0-9._-], at most 249 characters), which the Java clients enforce
 * (the 4.1.1 broker itself accepted others): so the operator's Java tools
 * can name it. */
enum { STATIC_ID_MAX = 249 };

static uint64_t fnv1a(const char *p) {
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* "<app>.<group>.<subscription>.<instance id>" (the transactional.id's
 * parts), other characters replaced by '_'; at most 241 characters (room for
 * the suffix): a longer one keeps its first 224 and adds a hash of the whole. */
static void static_base(const cs_sub *s, cs_app *app, const char *group, char *out, size_t size) {
    char full[2048];
    snprintf(full, sizeof full, "%s.%s.%s.%s", cs_app_name(app), group, s->name, s->k->instance_id);
    for (char *p = full; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '_' || *p == '-'))
            *p = '_';
    if (strlen(full) <= STATIC_ID_MAX - 8) { /* room for a ".<n>" suffix */
        snprintf(out, size, "%s", full);
        return;
    }
    snprintf(out, size, "%.224s.%016llx", full, (unsigned long long)fnv1a(full));
}

/* The consumer's group.instance.id, stored on s: the base, or the base and
 * ".2", ".3", ... when a subscription started before it in this broker got the
 * same one (two subscriptions of one group on the same topics). Subscriptions
 * start in declaration order, so the suffix is stable across restarts. */
static cs_err static_member_id(cs_sub *s, cs_app *app, const char *group) {
    free(s->static_id);
    s->static_id = NULL;
    /* librdkafka 2.0.2's mock reads group.instance.id and ignores it, but a
     * static member sends no LeaveGroup even there: a graceful stop would
     * leave its partitions unassigned until the session timeout, for nothing
     * in return. On the mock the consumers stay dynamic members. */
    if (!s->k->instance_id || s->k->embedded || s->k->mock) return CS_OK;
    char base[STATIC_ID_MAX + 1], id[STATIC_ID_MAX + 16];
    static_base(s, app, group, base, sizeof base);
    snprintf(id, sizeof id, "%s", base);
    for (int n = 2;; n++) {
        bool taken = false;
        for (size_t i = 0; i < s->k->n_subs && s->k->subs[i] != s; i++)
            taken = taken || (s->k->subs[i]->static_id && !strcmp(s->k->subs[i]->static_id, id));
        if (!taken) break;
        snprintf(id, sizeof id, "%s.%d", base, n);
    }
    s->static_id = strdup(id);
    return s->static_id ? CS_OK : cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
}

static cs_err build_conf(cs_sub *s, cs_app *app, cs_consumer *c, rd_kafka_conf_t **out) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *group = s->group ? s->group : s->k->default_group;
    bool auto_mode = s->mode == CS_COMMIT_AUTO;
    cs_err err = cs__conf_set(conf, c->who, "client.id", cs_app_name(app)); /* default; config may override */
    /* Every partition's records go to one queue (fetch.c), so librdkafka's
     * pre-fetch bound is one bound for the whole consumer: a small second
     * stage in front of cstream's store, a quarter of its budget by default;
     * config may override it (docs/guide.md: the fetch buffer). */
    size_t quarter_kb = s->fetch_buffer_bytes / 4 / 1024;
    if (quarter_kb < 1) quarter_kb = 1;
    if (quarter_kb > RDK_QUEUED_KBYTES_MAX) quarter_kb = RDK_QUEUED_KBYTES_MAX; /* a buffer over 8 GiB */
    char kbytes[32];
    snprintf(kbytes, sizeof kbytes, "%zu", quarter_kb);
    if (!err) err = cs__conf_set(conf, c->who, "queued.max.messages.kbytes", kbytes);
    /* Its bound in records too, one per KiB of that byte bound (records of
     * 1 KiB and up meet the byte bound first): on 2.0.2 the byte bound alone
     * let librdkafka hold 45-57 MiB against 8 MiB in bursts, the count bound
     * held it (docs/benchmarks.md, finding 2). Config may override it. */
    size_t min_messages = quarter_kb < RDK_QUEUED_MESSAGES_FLOOR ? RDK_QUEUED_MESSAGES_FLOOR : quarter_kb;
    char messages[32];
    snprintf(messages, sizeof messages, "%zu", min_messages);
    if (!err) err = cs__conf_set(conf, c->who, "queued.min.messages", messages);
    /* Default; config may override. librdkafka's 5 minutes is how long a
     * subscription would take to notice partitions added to its topics (and
     * to be assigned them); 30 s costs one small Metadata request per consumer
     * every 30 s instead of every 300 s. See docs/real-kafka.md "Bad inputs". */
    if (!err) err = cs__conf_set(conf, c->who, "topic.metadata.refresh.interval.ms", CS_METADATA_REFRESH_MS);
    if (!err) err = cs__conf_apply(conf, c->who, &s->k->config);
    if (!err) err = cs__conf_apply(conf, c->who, &s->config);
    if (!err) err = cs__conf_set(conf, c->who, "bootstrap.servers", s->k->bootstrap);
    if (!err) err = cs__conf_set(conf, c->who, "group.id", group);
    if (!err) err = static_member_id(s, app, group);
    if (!err && s->static_id) err = cs__conf_set(conf, c->who, "group.instance.id", s->static_id);
    if (!err) err = cs__conf_set(conf, c->who, "enable.auto.commit", auto_mode ? "true" : "false");
    /* Auto too: the fetch thread stores the offset of the last record it
     * hands out (fetch.c), never of records waiting in the store. */
    if (!err) err = cs__conf_set(conf, c->who, "enable.auto.offset.store", "false");
    if (!err) err = cs__conf_set(conf, c->who, "auto.offset.reset", s->start == CS_START_LATEST ? "latest" : "earliest");
    if (!err) err = cs__conf_set(conf, c->who, "enable.partition.eof", "false");
    /* Transactional: a new owner must not read a position an older owner's
     * transaction is still committing; librdkafka 2.0.2 asks the broker for
     * stable offsets (KIP-447) only for read_committed consumers. */
    if (!err && s->mode == CS_COMMIT_TRANSACTIONAL) err = cs__conf_set(conf, c->who, "isolation.level", "read_committed");
    if (err) {
        rd_kafka_conf_destroy(conf);
        return err;
    }
    c->rdk_bound_bytes = conf_size(conf, "queued.max.messages.kbytes") * 1024;
    c->rdk_bound_records = conf_size(conf, "queued.min.messages");
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_conf_set_rebalance_cb(conf, cs__rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, cs__commit_on_offset_commit);
    rd_kafka_conf_set_error_cb(conf, cs__consumer_on_error);
    rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
    *out = conf;
    return CS_OK;
}

/* ---- destroying the handle ----------------------------------------------------
 * librdkafka 2.0.2 never finishes rd_kafka_destroy() of a consumer after a
 * partition it consumed was removed from the cluster (its topic deleted): a
 * circular reference keeps the partition, and the broker thread waits for it
 * forever (fixed in librdkafka 2.1.0, #4187, "A reference count issue was
 * blocking the consumer from closing"). The close itself completes, so the
 * positions are committed by then; only the destroy hangs. After a topic
 * vanished, the destroy therefore runs on a helper thread, and the stop waits
 * for it at most DESTROY_WAIT_MS: past that, the handle is left behind (its
 * threads idle at about 1% of a core until the process exits) and said so,
 * rather than hanging the service's stop forever. */
enum { DESTROY_WAIT_MS = 3000 };

typedef struct destroyer {
    rd_kafka_t *rk;
    int flags;
    pthread_mutex_t lock; /* a leaf (src/lock_order.h) */
    pthread_cond_t done_cv;
    bool done;
    int refs; /* the helper and the waiter: the last one frees */
} destroyer;

static void destroyer_release(destroyer *d) {
    pthread_mutex_lock(&d->lock);
    bool last = --d->refs == 0;
    pthread_mutex_unlock(&d->lock);
    if (!last) return;
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->done_cv);
    free(d);
}

static void *destroy_main(void *arg) {
    destroyer *d = arg;
    rd_kafka_destroy_flags(d->rk, d->flags);
    pthread_mutex_lock(&d->lock);
    d->done = true;
    pthread_cond_signal(&d->done_cv);
    pthread_mutex_unlock(&d->lock);
    destroyer_release(d);
    return NULL;
}

/* Destroys c->rk; false if it was left behind (then c, its opaque, must stay
 * allocated: the abandoned handle may still call back with it). */
static bool destroy_handle(cs_consumer *c, int flags) {
    if (!atomic_load(&c->topic_vanished)) {
        rd_kafka_destroy_flags(c->rk, flags);
        return true;
    }
    destroyer *d = calloc(1, sizeof *d);
    pthread_t helper;
    if (d) {
        *d = (destroyer){.rk = c->rk, .flags = flags, .refs = 2};
        pthread_mutex_init(&d->lock, NULL);
        cs__cond_init_monotonic(&d->done_cv); /* timed: DESTROY_WAIT_MS */
    }
    if (!d || pthread_create(&helper, NULL, destroy_main, d) != 0) {
        if (d) {
            d->refs = 1;
            destroyer_release(d);
        }
        CS_LOG_ERR("consumer handle left behind: no thread to destroy it subscription=%s", c->sub->name);
        return false;
    }
    pthread_detach(helper);
    struct timespec until;
    cs__deadline_after(&until, DESTROY_WAIT_MS);
    pthread_mutex_lock(&d->lock);
    while (!d->done && pthread_cond_timedwait(&d->done_cv, &d->lock, &until) == 0) {}
    bool done = d->done;
    pthread_mutex_unlock(&d->lock);
    destroyer_release(d);
    if (!done)
        CS_LOG_ERR("consumer handle left behind: librdkafka %s does not finish destroying a consumer after one of "
                   "its topics was deleted (fixed in librdkafka 2.1.0); its positions were committed at close, its "
                   "threads stay until the process exits subscription=%s waited_ms=%d",
                   rd_kafka_version_str(), c->sub->name, DESTROY_WAIT_MS);
    return done;
}

static void free_counters(cs_consumer *c) {
    free(c->topic_unavailable);
    free(c->topic_gaps);
    free(c->topic_repeats);
    free(c->topic_stuck);
}

static void consumer_free_flags(cs_consumer *c, int flags) {
    cs__txn_destroy(c->txn); /* the consumer has closed (or crashed): nothing commits any more */
    cs__fetch_close_all(c); /* the record queue and topic handles go before the handle */
    if (c->queue) rd_kafka_queue_destroy(c->queue);
    c->queue = NULL;
    /* c is the abandoned handle's opaque: keep it, and the pipeline its
     * callbacks reach, for any callback the handle still makes. */
    if (c->rk && !destroy_handle(c, flags)) return;
    cs__pipeline_destroy(c->pipe);
    pthread_mutex_destroy(&c->commit_lock);
    pthread_mutex_destroy(&c->wake_lock);
    free_counters(c);
    free(c);
}

static void consumer_free(cs_consumer *c) { consumer_free_flags(c, 0); }

cs_err cs__consumer_start(cs_sub *s, cs_app *app, cs_consumer **out) {
    cs_consumer *c = calloc(1, sizeof *c);
    if (!c) return cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
    c->sub = s;
    c->app = app;
    c->topic_unavailable = calloc(s->n_topics, sizeof *c->topic_unavailable);
    c->topic_gaps = calloc(s->n_topics, sizeof *c->topic_gaps);
    c->topic_repeats = calloc(s->n_topics, sizeof *c->topic_repeats);
    c->topic_stuck = calloc(s->n_topics, sizeof *c->topic_stuck);
    if (!c->topic_unavailable || !c->topic_gaps || !c->topic_repeats || !c->topic_stuck) {
        free_counters(c);
        free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
    }
    c->tracked = s->mode != CS_COMMIT_AUTO;
    c->transactional = s->mode == CS_COMMIT_TRANSACTIONAL;
    c->interval_ms = cs__sub_commit_interval_ms(s);
    pthread_mutex_init(&c->commit_lock, NULL);
    pthread_mutex_init(&c->wake_lock, NULL);
    snprintf(c->who, sizeof c->who, "subscription %s", s->name);

    rd_kafka_conf_t *conf = NULL;
    cs_err err = build_conf(s, app, c, &conf);
    if (err) {
        free_counters(c);
        free(c);
        return err;
    }
    char reason[512];
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof reason);
    if (!c->rk) {
        rd_kafka_conf_destroy(conf);
        free_counters(c);
        free(c);
        return cs__fail(CS_ERR_KAFKA, "subscription %s: consumer could not be created: %s", s->name, reason);
    }
    rd_kafka_poll_set_consumer(c->rk);
    c->queue = rd_kafka_queue_get_consumer(c->rk);
    if (!cs__fetch_init(c, s->fetch_buffer_bytes, c->rdk_bound_bytes, c->rdk_bound_records)) {
        consumer_free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory for its fetch buffer", s->name);
    }
    if (c->transactional) {
        const char *group = s->group ? s->group : s->k->default_group;
        char id[1024];
        snprintf(id, sizeof id, "%s.%s.%s.%s", cs_app_name(app), group, s->name, s->k->instance_id);
        err = cs__txn_start(s, app, id, cs__commit_output_failed, c, &c->txn);
        if (err) {
            consumer_free(c);
            return err;
        }
    }

    cs_pipeline_config pc = {
        .name = s->name,
        .handler = s->handler,
        .batch_handler = s->batch_handler,
        .max_batch = s->max_batch,
        .codec = s->codec,
        .type = s->type,
        .user = s->user,
        .tracked = c->tracked,
        .lanes_by_key = s->lanes == CS_LANES_BY_KEY,
        .workers = s->workers,
        /* Auto keeps its queue small (it is Auto's loss window); under Tracked
         * the cap only bounds memory: a full partition is not served until it
         * drains to half, its records wait in the fetch buffer (fetch.c). */
        .max_open = cs__sub_max_open(s),
        .handler_time_limit_ms = s->handler_time_limit_ms,
        .wake = cs__fetch_wake,
        .wake_arg = c,
        .send_reply = s->reply_topic && !c->transactional ? cs__kafka_send_reply : NULL,
        .reply_arg = s,
        .max_attempts = s->max_attempts,
        .send_dead_letter = s->dead_letter && !c->transactional ? cs__kafka_send_dead_letter : NULL,
        .dead_letter_arg = s,
        .transactional = c->transactional,
        .reply_topic = s->reply_topic,
        .make_dead_letter = s->dead_letter && c->transactional ? cs__kafka_dead_letter_output : NULL,
        .make_dead_letter_arg = s,
        .output_topic_ok = cs__kafka_output_topic_ok,
        .output_topic_arg = s,
        .window_records = c->transactional ? s->window_records : 0,
        /* Measurement switch (bench/): stop-the-world window commits, to
         * compare with the default where handlers keep running meanwhile. */
        .window_barrier = c->transactional && getenv("CSTREAM_TXN_BARRIER") && !strcmp(getenv("CSTREAM_TXN_BARRIER"), "1"),
        .precommit = c->transactional ? NULL : cs__commit_precommit, /* plain commits would pass uncommitted outputs */
        .precommit_arg = c,
    };
    c->pipe = cs__pipeline_new(&pc);
    if (!c->pipe) {
        consumer_free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: could not start its workers", s->name);
    }
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new((int)s->n_topics);
    for (size_t i = 0; i < s->n_topics; i++)
        rd_kafka_topic_partition_list_add(topics, s->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t rerr = rd_kafka_subscribe(c->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (rerr) {
        consumer_free(c);
        return cs__fail(CS_ERR_KAFKA, "subscription %s: subscribe failed: %s", s->name, rd_kafka_err2str(rerr));
    }
    if (pthread_create(&c->thread, NULL, cs__fetch_main, c) != 0) {
        consumer_free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: could not start its fetch thread", s->name);
    }
    c->thread_started = true;
    CS_LOG_INFO("subscribed subscription=%s group=%s commit=%s workers=%d group.instance.id=%s", s->name,
                s->group ? s->group : s->k->default_group,
                c->transactional ? "transactional" : c->tracked ? "tracked" : "auto", s->workers,
                s->static_id ? s->static_id : "-");
    *out = c;
    return CS_OK;
}

static void join_fetch_thread(cs_consumer *c) {
    pthread_mutex_lock(&c->wake_lock);
    atomic_store(&c->stop, true);
    if (c->queue) rd_kafka_queue_yield(c->queue);
    pthread_mutex_unlock(&c->wake_lock);
    if (c->thread_started) pthread_join(c->thread, NULL);
    c->thread_started = false;
}

void cs__consumer_stop_fetching(cs_consumer *c) {
    join_fetch_thread(c);
    /* After a fatal error (fenced, above all) nothing this consumer handles
     * can be committed any more: the next owner reads those records again.
     * Running the queued ones would only duplicate its work (a fenced
     * instance ran up to the drain timeout's worth), so only the handlers
     * already running finish. */
    if (rd_kafka_fatal_error(c->rk, NULL, 0))
        for (size_t i = 0; i < c->n_parts; i++) cs__pipeline_stop_partition(c->pipe, c->parts[i].part);
    size_t left = cs__pipeline_drain(c->pipe, cs__now_ms() + c->sub->drain_timeout_ms);
    if (left)
        CS_LOG_WARN("shutdown: deliveries still pending at the drain deadline stay uncommitted subscription=%s "
                    "pending=%zu",
                    c->sub->name, left);
}

/* Releases every assigned partition. Payloads of deliveries still open stay
 * with them (copies in the store, which outlives the consumer). */
static void release_assigned(cs_consumer *c) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    for (int i = 0; i < assigned->cnt; i++) {
        cs_part *part = cs__consumer_part(c, assigned->elems[i].topic, assigned->elems[i].partition);
        if (part) cs__pipeline_release_partition(c->pipe, part);
    }
    rd_kafka_topic_partition_list_destroy(assigned);
}

/* After a fatal error librdkafka can neither commit nor close the consumer
 * (close fails and a plain destroy then never returns): release everything
 * without committing; cs__consumer_destroy then destroys without closing. */
static void close_after_fatal(cs_consumer *c) {
    c->closed_after_fatal = true;
    release_assigned(c);
    CS_LOG_WARN("consumer closed after a fatal error: nothing committed subscription=%s", c->sub->name);
}

/* A static member, before its close: serves the events that arrived while
 * nothing polled (the fetch thread stopped before the drain), a revoke above
 * all, while librdkafka's group handle still answers. Left for
 * rd_kafka_consumer_close, such a revoke could meet a group handle that
 * terminates meanwhile (a static member sends no LeaveGroup, so it
 * terminates at once): librdkafka 2.0.2 then drops the unassign request the
 * callback makes and rd_kafka_assign waits forever (seen once in 8 runs of
 * real.only.exactly_once's rebalance test; librdkafka #4884, #4041). */
static void serve_pending_events(cs_consumer *c) {
    for (int i = 0; i < 64; i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 0);
        if (!m) return;
        if (m->err) cs__fetch_on_error_event(c, m);
        rd_kafka_message_destroy(m); /* records never come here: they are forwarded to recq (fetch.c) */
    }
}

void cs__consumer_close(cs_consumer *c) {
    if (rd_kafka_fatal_error(c->rk, NULL, 0)) {
        close_after_fatal(c);
        return;
    }
    if (c->sub->static_id) serve_pending_events(c); /* before `closing`: such a revoke commits as usual */
    c->closing = true;
    cs__commit_positions(c, NULL, true);
    release_assigned(c);
    rd_kafka_resp_err_t err = rd_kafka_consumer_close(c->rk);
    if (err) CS_LOG_WARN("consumer close subscription=%s error=\"%s\"", c->sub->name, rd_kafka_err2str(err));
}

void cs__consumer_destroy(cs_consumer *c) {
    consumer_free_flags(c, c->closed_after_fatal ? RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE : 0);
}

void cs__consumer_crash(cs_consumer *c) {
    join_fetch_thread(c);
    cs__pipeline_crash(c->pipe);
    release_assigned(c);
    consumer_free_flags(c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

/* Idle: an assignment, nothing queued or in flight, and every assigned
 * partition consumed up to its high watermark. Any thread (tests). */
/* "Consumed" is what cstream dispatched (not librdkafka's position, which
 * moves when poll returns a record the fetch thread has not handed out yet);
 * the busy count is read last, so that a record dispatched after its offset
 * was read is still seen as busy. */
int cs__consumer_idle(cs_consumer *c) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    int idle = assigned->cnt > 0;
    for (int i = 0; idle && i < assigned->cnt; i++)
        assigned->elems[i].offset = cs__pipeline_next_offset(c->pipe, assigned->elems[i].topic, assigned->elems[i].partition);
    for (int i = 0; idle && i < assigned->cnt; i++) {
        rd_kafka_topic_partition_t *e = &assigned->elems[i];
        int64_t lo = 0, hi = 0;
        if (rd_kafka_query_watermark_offsets(c->rk, e->topic, e->partition, &lo, &hi, 2000)) {
            idle = 0;
            break;
        }
        if (hi == lo) continue; /* empty partition */
        if (e->offset < 0) {    /* nothing consumed in this session: use the committed position */
            rd_kafka_topic_partition_list_t *one = rd_kafka_topic_partition_list_new(1);
            rd_kafka_topic_partition_list_add(one, e->topic, e->partition);
            if (rd_kafka_committed(c->rk, one, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) e->offset = one->elems[0].offset;
            rd_kafka_topic_partition_list_destroy(one);
        }
        if (e->offset < hi) idle = 0;
    }
    rd_kafka_topic_partition_list_destroy(assigned);
    return idle && cs__pipeline_busy(c->pipe) == 0;
}

/* Ready: joined its group (the rebalance is done, even with an empty
 * assignment), no fatal error, and a broker answers. After librdkafka said all
 * brokers are down, each call probes with a metadata request (at most
 * probe_ms) until one answers. Any thread (the HTTP thread). */
int cs__consumer_ready(cs_consumer *c, int probe_ms) {
    if (!atomic_load(&c->joined) || rd_kafka_fatal_error(c->rk, NULL, 0)) return 0;
    if (!atomic_load(&c->brokers_down)) return 1;
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(c->rk, 0, NULL, &md, probe_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    rd_kafka_metadata_destroy(md);
    atomic_store(&c->brokers_down, false);
    return 1;
}

static uint64_t sum_topics(const cs_consumer *c, _Atomic uint64_t *counters) {
    uint64_t n = 0;
    for (size_t i = 0; i < c->sub->n_topics; i++) n += atomic_load_explicit(&counters[i], memory_order_relaxed);
    return n;
}

void cs__consumer_stats(cs_consumer *c, cs_sub_stats *out) {
    cs__sub_stats_of_pipeline(c->pipe, out);
    out->fetch_buffer_peak = c->store ? cs__store_peak(c->store) : c->final_peak;
    out->stuck_pauses = sum_topics(c, c->topic_stuck);
    out->wakeups = atomic_load_explicit(&c->wakeups, memory_order_relaxed);
    out->gaps = sum_topics(c, c->topic_gaps);
    out->repeats = sum_topics(c, c->topic_repeats);
}

uint64_t cs__consumer_commit_ticks(cs_consumer *c) {
    return atomic_load_explicit(&c->commit_ticks, memory_order_relaxed);
}

rd_kafka_t *cs__consumer_handle(cs_consumer *c) { return c->rk; }

/* ---- /metrics -------------------------------------------------------------- */

/* 1 while librdkafka reports the subscribed topic unavailable (deleted, or
 * not visible to this client), else 0: one series per subscribed topic, so an
 * alert can fire on `== 1`. */
static void topic_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group) {
    for (size_t i = 0; i < c->sub->n_topics; i++) {
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", c->sub->topics[i], NULL};
        cs__metric_int(m, "cstream_topic_unavailable", "gauge",
                       "1 while the subscribed topic is reported unavailable (deleted, or not visible to this "
                       "client); its partitions are not consumed until it comes back.",
                       l, atomic_load(&c->topic_unavailable[i]) ? 1 : 0);
    }
}

/* The fetch buffer (docs/fetch-path-design.md 3.8). */
static void fetch_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group) {
    const char *labels[] = {"subscription", sub, "group", group ? group : "", NULL};
    cs_store *st = c->store;
    cs__metric_int(m, "cstream_fetch_buffer_bytes", "gauge",
                   "Bytes the fetch buffer holds: records fetched and not yet settled (whole chunks).", labels,
                   st ? (int64_t)cs__store_used(st) : 0);
    cs__metric_int(m, "cstream_fetch_buffer_records", "gauge", "Records the fetch buffer holds.", labels,
                   st ? (int64_t)cs__store_records(st) : 0);
    cs__metric_int(m, "cstream_fetch_buffer_limit_bytes", "gauge",
                   "The fetch buffer's bound (cs_sub_fetch_buffer_bytes).", labels,
                   (int64_t)c->sub->fetch_buffer_bytes);
    cs__metric_int(m, "cstream_lane_waiting_records", "gauge",
                   "Records handed out and waiting in the lanes for a worker (at most 4,096 per worker; the "
                   "rest wait in the fetch buffer).",
                   labels, (int64_t)cs__pipeline_lanes_waiting(c->pipe));
    cs__metric_int(m, "cstream_fetch_wakeups_total", "counter",
                   "Wake-ups of librdkafka's fetchers after its pre-fetch queue reached its bound.", labels,
                   (int64_t)atomic_load_explicit(&c->wakeups, memory_order_relaxed));
    for (size_t i = 0; i < c->sub->n_topics; i++) {
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", c->sub->topics[i], NULL};
        cs__metric_int(m, "cstream_partition_stuck_pauses_total", "counter",
                       "Partitions of the topic paused because their records stopped settling and held more than "
                       "their share of the fetch buffer.",
                       l, (int64_t)atomic_load_explicit(&c->topic_stuck[i], memory_order_relaxed));
        cs__metric_int(m, "cstream_fetch_offset_gaps_total", "counter",
                       "Fetched offsets that skipped ahead of the next expected one (compaction, transaction "
                       "markers, aborted records).",
                       l, (int64_t)atomic_load_explicit(&c->topic_gaps[i], memory_order_relaxed));
        cs__metric_int(m, "cstream_fetch_offset_repeats_total", "counter",
                       "Fetched offsets already taken, dropped.", l,
                       (int64_t)atomic_load_explicit(&c->topic_repeats[i], memory_order_relaxed));
    }
}

typedef struct part_list {
    cs_part_metrics *v;
    size_t n, cap;
} part_list;

static void collect_part(void *arg, const cs_part_metrics *m) {
    part_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        cs_part_metrics *grown = realloc(l->v, cap * sizeof *grown);
        if (!grown) return; /* out of memory: this scrape leaves the partition out */
        l->v = grown;
        l->cap = cap;
    }
    l->v[l->n++] = *m;
}

/* Called with the subscription's stats lock held, so the consumer (its
 * handle and pipeline) cannot be freed meanwhile; it may be closing (the
 * stop holds no lock across the close). Never waits on the network:
 * the high watermark is librdkafka's cached value from its last fetch
 * response (rd_kafka_get_watermark_offsets, not the querying variant), and
 * the committed position is what the last commit this member made reported
 * (cs__part_commit_done), so a scrape costs no round trip to the broker. */
void cs__consumer_metrics(cs_consumer *c, cs_metrics *m, const char *sub, const char *group) {
    const char *labels[] = {"subscription", sub, "group", group ? group : "", NULL};
    cs__metric_int(m, "cstream_inflight_records", "gauge",
                   "Records cstream holds for the subscription: queued, running, or pending settlement.", labels,
                   (int64_t)cs__pipeline_busy(c->pipe));
    cs_histogram_snap h = {0};
    cs__pipeline_handler_durations(c->pipe, &h);
    cs__metric_histogram(m, "cstream_handler_duration_seconds",
                         "Handler run time (one observation per call; a batch handler call is one).", labels, &h);

    fetch_metrics(c, m, sub, group);
    topic_metrics(c, m, sub, group);
    part_list parts = {0};
    cs__pipeline_each_part(c->pipe, collect_part, &parts);
    /* Records and dead letters by topic: the partitions of a topic add up
     * (the collector sums series with equal labels). */
    static const char *const outcomes[] = {"ack", "drop", "retry", "retry_unsupported", "stale"};
    for (size_t i = 0; i < parts.n; i++) {
        const cs_part_metrics *p = &parts.v[i];
        const uint64_t by_outcome[] = {p->acked, p->dropped, p->retried, p->retry_unsupported, p->stale};
        for (size_t o = 0; o < sizeof outcomes / sizeof outcomes[0]; o++) {
            const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", p->topic,
                               "outcome", outcomes[o], NULL};
            cs__metric_int(m, "cstream_records_total", "counter",
                           "Settlements of records by topic and outcome (a retry counts each time; a record given "
                           "up at max_attempts ends as a drop).",
                           l, (int64_t)by_outcome[o]);
        }
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", p->topic, NULL};
        cs__metric_int(m, "cstream_dead_letters_total", "counter",
                       "Records of the topic the dead-letter topic accepted.", l, (int64_t)p->dead_lettered);
    }
    for (size_t i = 0; i < parts.n; i++) {
        const cs_part_metrics *p = &parts.v[i];
        if (!p->assigned) continue; /* a revoked partition's numbers belong to its new owner */
        char partition[16];
        snprintf(partition, sizeof partition, "%d", (int)p->partition);
        const char *l[] = {"subscription", sub, "group", group ? group : "", "topic", p->topic,
                           "partition", partition, NULL};
        if (p->committed < 0) continue; /* nothing committed by this member yet */
        cs__metric_int(m, "cstream_committed_offset", "gauge",
                       "Position this member last committed for the partition (the next offset to read).", l,
                       p->committed);
        int64_t low = -1, high = -1;
        if (rd_kafka_get_watermark_offsets(c->rk, p->topic, p->partition, &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            high >= 0)
            cs__metric_int(m, "cstream_lag_records", "gauge",
                           "High watermark (from the last fetch) minus the committed position.", l,
                           high > p->committed ? high - p->committed : 0);
    }
    free(parts.v);
}

