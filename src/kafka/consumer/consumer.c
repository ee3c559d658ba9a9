/* consumer.c — one subscription's librdkafka consumer: its start, the fetch
 * thread's loop, the rejoin of a static member refused at join under the
 * consumer group protocol, stop, close, crash and destroy, and readiness. The top of
 * the consumer's files: its configuration is in consumer_conf.c, its stats
 * and /metrics in consumer_metrics.c, the fetch path in fetch_*.c, errors in
 * consumer_errors.c, rebalances in rebalance.c, commits in committer.c; the
 * consumer's state and its threads are described in consumer_internal.h.
 *
 * Owns: cs_consumer's top-level fields (its sub-structs are their
 * owners'). Locks: wake_lock around the handle's swap at a rejoin (level 7,
 * src/lock_order.h). Threads: the app's starting and stopping thread, the
 * fetch thread (fetch_main), any thread for cs__consumer_ready. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "base/error.h"
#include "database/db.h"
#include "kafka/consumer/consumer_internal.h"

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
/* The fetch loop's longest wait for events: the stop flag and the commit tick
 * are looked at least this often, whatever wakes it. */
enum { POLL_MAX_WAIT_MS = 100 };
/* serve_pending_events takes at most this many events at once, so a steady
 * stream of events cannot hold its caller in the loop. */
enum { PENDING_EVENTS_MAX = 64 };
/* cs__consumer_idle's watermark query (tests only: cs_test_app_wait_idle). */
enum { WATERMARK_TIMEOUT_MS = 2000 };

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
    if (!atomic_load(&c->errors.topic_vanished)) {
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

static cs_err subscribe(cs_consumer *c);

/* ---- rejoin after UNRELEASED_INSTANCE_ID ----------------------------------------
 * Under the consumer protocol (KIP-848) a static member whose join finds its
 * group.instance.id still held by another member is refused with
 * UNRELEASED_INSTANCE_ID, which librdkafka makes fatal: the handle is dead.
 * After a SIGKILL the holder is this instance's own previous process, which
 * the broker keeps until its group.consumer.session.timeout.ms expires (45 s
 * by default and by minimum; measured on Kafka 4.4.0: the id was free about
 * 60 s after the kill). So the fetch thread destroys the dead handle and
 * creates one from the same configuration, with a doubling backoff, until it
 * joins. A second live process with the same instance id holds the id for as
 * long as it runs: that is told apart by time only, the bound (rejoin_bound:
 * twice the broker's session timeout), after
 * which the refusal is fatal as before (with the count and the time in the
 * message). Only before the first assignment: nothing is in flight, no
 * partition is open, and /readyz reads no handle while not joined. */
enum { REJOIN_BACKOFF_FIRST_MS = 250, REJOIN_BACKOFF_MAX_MS = 4000 };
/* The decision to retry (cs__consumer_rejoin_later) is consumer_errors.c's,
 * where the refusal arrives; its bound is set here at the first retry. */

/* The bound when the broker's session timeout cannot be read: twice the
 * broker's default (45 s). */
#define REJOIN_BOUND_FALLBACK_MS ((int64_t)90000)
enum { SESSION_READ_TIMEOUT_MS = 5000 };

/* The broker's group.consumer.session.timeout.ms, read with DescribeConfigs
 * on the first broker the metadata names (it needs DESCRIBE_CONFIGS on the
 * cluster where ACLs are on); 0 if it cannot be read. A per-group override
 * (Kafka 4's group configs) is not read: librdkafka has no group resource
 * for DescribeConfigs. */
static int64_t broker_consumer_session_ms(rd_kafka_t *rk) {
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(rk, 0, NULL, &md, SESSION_READ_TIMEOUT_MS) || !md || md->broker_cnt < 1) {
        if (md) rd_kafka_metadata_destroy(md);
        return 0;
    }
    char id[16];
    snprintf(id, sizeof id, "%d", (int)md->brokers[0].id);
    rd_kafka_metadata_destroy(md);
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    char why[256];
    rd_kafka_AdminOptions_set_request_timeout(opts, SESSION_READ_TIMEOUT_MS, why, sizeof why);
    rd_kafka_DescribeConfigs(rk, &res, 1, opts, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, SESSION_READ_TIMEOUT_MS + 1000);
    const rd_kafka_DescribeConfigs_result_t *r = ev ? rd_kafka_event_DescribeConfigs_result(ev) : NULL;
    size_t n = 0;
    const rd_kafka_ConfigResource_t **rs = r ? rd_kafka_DescribeConfigs_result_resources(r, &n) : NULL;
    int64_t ms = 0;
    if (n == 1 && !rd_kafka_ConfigResource_error(rs[0])) {
        size_t m = 0;
        const rd_kafka_ConfigEntry_t **es = rd_kafka_ConfigResource_configs(rs[0], &m);
        for (size_t i = 0; i < m; i++) {
            const char *value = rd_kafka_ConfigEntry_value(es[i]);
            if (value && !strcmp(rd_kafka_ConfigEntry_name(es[i]), "group.consumer.session.timeout.ms"))
                ms = strtoll(value, NULL, 10);
        }
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(res);
    return ms > 0 ? ms : 0;
}

/* At the first retry: how long to keep retrying, twice the broker's session
 * timeout (measured on Kafka 4.4.0: the id was free 1.3 session timeouts
 * after a kill), and the one WARN line that says so. */
static void rejoin_bound(cs_consumer *c, rd_kafka_t *rk) {
    int64_t session = broker_consumer_session_ms(rk);
    c->rejoin_bound_ms = session ? 2 * session : REJOIN_BOUND_FALLBACK_MS;
    char source[160];
    if (session)
        snprintf(source, sizeof source, "twice the broker's group.consumer.session.timeout.ms=%lld",
                 (long long)session);
    else snprintf(source, sizeof source, "the broker's session timeout could not be read");
    CS_LOG_WARN("join refused: the group still holds this instance's group.instance.id (UNRELEASED_INSTANCE_ID), "
                "most likely for its previous process until the broker's group.consumer.session.timeout.ms "
                "expires; creating the consumer again and retrying with backoff, for at most %lld ms (%s), then "
                "stopping (another live process with this instance id) subscription=%s group.instance.id=%s",
                (long long)c->rejoin_bound_ms, source, c->sub->name, c->sub->static_id);
}

/* ---- a group that does not come back --------------------------------------------
 * librdkafka 2.0.2 can lose its group session after a broker SIGKILL and then
 * never find the coordinator again (a request stuck on the dead broker,
 * #4970, fixed in 2.10): the member has no id and no assignment for minutes
 * (seen in CI: over 3 minutes, while the other brokers served). So when the
 * session was lost long ago (group_stalled) and the member holds no
 * partition, the fetch thread creates the consumer again, as for a
 * refused static member (rejoin below): nothing is assigned, so nothing is
 * in flight. */
enum { STALL_REJOIN_MIN_MS = 20000, STALL_REJOIN_MAX_MS = 60000, STALL_REJOIN_ANY_MS = 120000 };

/* How long a lost session may stay lost: twice the session timeout the
 * member asked for (classic: a session that came back would have done so by
 * then), within 20 to 60 s; 60 s under the consumer protocol, whose session
 * is the broker's, and for a static member, which gets no member id until
 * its JoinGroup completes (that can wait for slow members). Read once, at
 * start. */
static int64_t stall_rejoin_ms(const cs_sub *s, rd_kafka_conf_t *conf) {
    char v[32];
    size_t n = sizeof v;
    if (s->consumer_protocol || s->static_id ||
        rd_kafka_conf_get(conf, "session.timeout.ms", v, &n) != RD_KAFKA_CONF_OK)
        return STALL_REJOIN_MAX_MS;
    int64_t ms = 2 * strtoll(v, NULL, 10);
    return ms < STALL_REJOIN_MIN_MS ? STALL_REJOIN_MIN_MS : ms > STALL_REJOIN_MAX_MS ? STALL_REJOIN_MAX_MS : ms;
}

/* Without a member id after stall_rejoin_ms; with one (a JoinGroup may wait
 * for slow members, up to their max.poll.interval.ms) only after
 * STALL_REJOIN_ANY_MS: recreating a member that holds no partition costs
 * the group one more rebalance, never a record. */
static bool group_stalled(cs_consumer *c, int64_t now) {
    if (!c->group.lost_since_ms || now - c->group.lost_since_ms < c->stall_rejoin_ms || !c->rejoin_conf ||
        c->fetch.n_parts)
        return false;
    char *id = rd_kafka_memberid(c->rk);
    bool none = !id || !*id;
    if (id) rd_kafka_mem_free(c->rk, id);
    if (!none && now - c->group.lost_since_ms < STALL_REJOIN_ANY_MS) return false;
    CS_LOG_WARN("group session lost %lld ms ago and not back (%s, no partition): librdkafka may be stuck looking "
                "for the coordinator (2.0.2 can be, #4970); creating the consumer again subscription=%s "
                "librdkafka=%s",
                (long long)(now - c->group.lost_since_ms), none ? "no member id" : "still joining", c->sub->name,
                rd_kafka_version_str());
    cs__rebalance_restart_lost_clock(c, now);
    return true;
}

/* Waits ms, or less if the app stops meanwhile: false then. */
static bool rejoin_backoff(cs_consumer *c, int ms) {
    for (int64_t until = cs__now_ms() + ms; cs__now_ms() < until;) {
        if (atomic_load(&c->stop)) return false;
        struct timespec step = {0, 20 * 1000 * 1000};
        nanosleep(&step, NULL);
    }
    return !atomic_load(&c->stop);
}

/* Replaces the dead handle by a new one that subscribes again; false (the
 * refusal is then fatal, or the app stops) if the app stops meanwhile or the
 * new handle cannot be made. The old handle's queues go first: the record
 * queue's callback is disabled before wake_lock is taken, since that callback
 * takes wake_lock. */
static bool rejoin(cs_consumer *c) {
    bool stalled = cs__rejoin_take(c); /* a group that did not come back: waited enough already */
    uint64_t n = atomic_load(&c->rejoin.count);
    int backoff = REJOIN_BACKOFF_FIRST_MS;
    for (uint64_t i = 1; i < n && backoff < REJOIN_BACKOFF_MAX_MS; i++) backoff *= 2;
    if (backoff > REJOIN_BACKOFF_MAX_MS) backoff = REJOIN_BACKOFF_MAX_MS;
    if (!stalled && !rejoin_backoff(c, backoff)) return false;
    rd_kafka_conf_t *conf = rd_kafka_conf_dup(c->rejoin_conf);
    char reason[512];
    rd_kafka_t *rk = conf ? rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof reason) : NULL;
    if (!rk) {
        if (conf) rd_kafka_conf_destroy(conf);
        CS_LOG_ERR("rejoin: consumer could not be created again subscription=%s reason=\"%s\"", c->sub->name,
                   conf ? reason : "out of memory");
        return false;
    }
    rd_kafka_poll_set_consumer(rk);
    if (!stalled && !c->rejoin_bound_ms) rejoin_bound(c, rk);
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(rk);
    rd_kafka_queue_t *recq = cs__fetch_recq_new(c, rk);
    if (!recq) {
        rd_kafka_queue_destroy(queue);
        rd_kafka_destroy(rk);
        return false;
    }
    rd_kafka_queue_cb_event_enable(c->take.recq, NULL, NULL); /* waits out a callback in progress */
    pthread_mutex_lock(&c->wake_lock);
    rd_kafka_t *old_rk = c->rk;
    rd_kafka_queue_t *old_queue = c->queue, *old_recq = cs__fetch_recq_replace(c, recq);
    c->rk = rk;
    c->queue = queue;
    pthread_mutex_unlock(&c->wake_lock);
    rd_kafka_queue_destroy(old_recq);
    rd_kafka_queue_destroy(old_queue);
    /* Fatal: neither a close nor a commit works; nothing was assigned. */
    rd_kafka_destroy_flags(old_rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    cs_err err = subscribe(c);
    if (err) CS_LOG_ERR("rejoin: %s", cs_errmsg());
    CS_LOG_DEBUG("rejoin: consumer created again subscription=%s refusals=%llu backoff_ms=%d", c->sub->name,
                 (unsigned long long)n, backoff);
    return !err;
}

/* ---- the fetch thread ---------------------------------------------------------
 * Its loop: the application's requests (fetch_control.c), the commit tick, handing out (fetch_handout.c), taking
 * (fetch_take.c), the stuck check (fetch_stuck.c), then librdkafka's events,
 * whose rebalance callback (rebalance.c) and error callback
 * (consumer_errors.c) run inside its poll. */

static void *fetch_main(void *arg) {
    cs_consumer *c = arg;
    cs__control_on_fetch_thread(c);
    int interval = c->interval_ms;
    bool fatal = false;
    if (c->sub->partitions) cs__rebalance_assign_fixed(c); /* manual assignment, on this thread as a rebalance */
    c->next_commit_ms = cs__now_ms() + interval;
    for (;;) {
        while (!atomic_load(&c->stop) && !fatal && !c->rejoin.wanted) {
            int64_t now = cs__now_ms();
            if (atomic_load(&c->fetch.resume_wanted)) cs__fetch_resume_drained(c);
            cs__control_apply(c); /* the application's seeks and pauses */
            bool window_full = (c->transactional || c->sub->db) &&
                               cs__pipeline_settled(c->pipe) >= c->sub->window_records &&
                               now >= c->next_commit_ms - interval; /* not during an abort backoff */
            if (now >= c->next_commit_ms || window_full) {
                cs__commit_positions(c, NULL, false);
                cs__pipeline_check_slow(c->pipe);
                c->next_commit_ms = now + interval + c->commit.abort_backoff_ms;
            }
            /* After an out-of-memory stop nothing more is handed out or taken. */
            bool more = c->errors.out_of_memory ? false : cs__fetch_hand_out(c, now);
            size_t taken = c->errors.out_of_memory ? 0 : cs__fetch_take_records(c);
            if (!c->errors.out_of_memory) cs__fetch_stuck_check(c, now);
            cs__rebalance_check_empty_join(c, now);
            if (group_stalled(c, now)) {
                cs__rejoin_ask(c, true);
                break;
            }
            fatal = c->take.fatal;
            /* Events (rebalances, commit results, errors). The poll waits only when
         * there was nothing to take or hand out; records arriving in the empty
         * recq, a store fallen under its resume mark and settlements that bring
         * a full partition down to half of max_open cut the wait short
         * (rd_kafka_queue_yield). */
            int64_t wait = taken || more ? 0 : c->next_commit_ms - now;
            if (fatal) break;
            rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, (int)(wait < 0                  ? 0
                                                                        : wait > POLL_MAX_WAIT_MS ? POLL_MAX_WAIT_MS
                                                                                                  : wait));
            if (m) {
                /* The consumer queue carries no records: errors only. */
                if (m->err) cs__consumer_on_record_error(c, m);
                rd_kafka_message_destroy(m);
                fatal = rd_kafka_fatal_error(c->rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR;
            }
        }
        /* A refused join to retry (above): on a new handle, the loop again. */
        if (!c->rejoin.wanted || atomic_load(&c->stop)) break;
        if (!rejoin(c)) {
            /* A stop asked for during the backoff is a stop like any other:
             * nothing was assigned, nothing is lost. */
            if (!atomic_load(&c->stop))
                cs__app_fatal(c->app,
                              "%s: could not create the consumer again to rejoin its group (see the lines "
                              "above)",
                              c->who);
            break;
        }
        fatal = false;
    }
    return NULL; /* after a fatal error the app is stopping; nothing more to fetch */
}

/* ---- lifecycle -------------------------------------------------------------- */

static void free_counters(cs_consumer *c) {
    cs__errors_free(c);
    free(c->topic_gaps);
    free(c->topic_repeats);
    free(c->topic_stuck);
    cs__client_stats_destroy(&c->rdk_stats);
}

static void consumer_free_flags(cs_consumer *c, int flags) {
    cs__txn_destroy(c->txn); /* the consumer has closed (or crashed): nothing commits any more */
    cs__fetch_close_all(c);  /* the topic handles and the record queue go before the handle */
    cs__fetch_take_close(c);
    if (c->queue) rd_kafka_queue_destroy(c->queue);
    c->queue = NULL;
    /* c is the abandoned handle's opaque: keep it, and the pipeline its
     * callbacks reach, for any callback the handle still makes. */
    if (c->rk && !destroy_handle(c, flags)) return;
    cs__pipeline_destroy(c->pipe);
    if (c->rejoin_conf) rd_kafka_conf_destroy(c->rejoin_conf);
    pthread_mutex_destroy(&c->commit_lock);
    pthread_mutex_destroy(&c->wake_lock);
    cs__control_destroy(c);
    free_counters(c);
    free(c);
}

static void consumer_free(cs_consumer *c) { consumer_free_flags(c, 0); }

static cs_err subscribe(cs_consumer *c) {
    cs__rebalance_joining(c);
    cs_sub *s = c->sub;
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new((int)s->n_topics);
    for (size_t i = 0; i < s->n_topics; i++)
        rd_kafka_topic_partition_list_add(topics, s->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t rerr = rd_kafka_subscribe(c->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (rerr) return cs__fail(CS_ERR_KAFKA, "subscription %s: subscribe failed: %s", s->name, rd_kafka_err2str(rerr));
    return CS_OK;
}

/* The benchmarks' switch for stop-the-world window commits (bench/cs_bench.c,
 * bench/cs_latency.c; docs/transactions.md): "1" turns it on. */
#define TXN_BARRIER_ENV "CSTREAM_TXN_BARRIER"

static bool txn_barrier_requested(void) {
    const char *v = getenv(TXN_BARRIER_ENV);
    return v && !strcmp(v, "1");
}

cs_err cs__consumer_start(cs_sub *s, cs_app *app, cs_consumer **out) {
    if (s->mode == CS_COMMIT_DATABASE && !s->db)
        return cs__fail(CS_ERR_ARG, "subscription %s: commit mode database needs its database (cs_sub_commit_database)",
                        s->name);
    cs_consumer *c = calloc(1, sizeof *c);
    if (!c) return cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
    c->sub = s;
    c->app = app;
    cs__client_stats_init(&c->rdk_stats); /* before any failure: free_counters destroys it */
    c->topic_gaps = calloc(s->n_topics, sizeof *c->topic_gaps);
    c->topic_repeats = calloc(s->n_topics, sizeof *c->topic_repeats);
    c->topic_stuck = calloc(s->n_topics, sizeof *c->topic_stuck);
    if (!c->topic_gaps || !c->topic_repeats || !c->topic_stuck || cs__errors_init(c, s) != CS_OK) {
        free_counters(c);
        free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
    }
    c->tracked = s->mode != CS_COMMIT_AUTO;
    c->transactional = s->mode == CS_COMMIT_TRANSACTIONAL;
    c->interval_ms = cs__consumer_commit_interval_ms(s);
    pthread_mutex_init(&c->commit_lock, NULL);
    pthread_mutex_init(&c->wake_lock, NULL);
    cs__control_init(c);
    snprintf(c->who, sizeof c->who, "subscription %s", s->name);

    rd_kafka_conf_t *conf = NULL;
    cs_err err = cs__consumer_build_conf(s, app, c, &conf);
    if (err) {
        free_counters(c);
        free(c);
        return err;
    }
    /* A static member under the consumer protocol may have to create its
     * consumer again (rejoin, above): the same configuration, kept. */
    if (!s->partitions) c->rejoin_conf = rd_kafka_conf_dup(conf); /* a group member: see rejoin */
    c->stall_rejoin_ms = stall_rejoin_ms(s, conf);
    char reason[512];
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof reason);
    if (!c->rk) {
        if (c->rejoin_conf) rd_kafka_conf_destroy(c->rejoin_conf);
        rd_kafka_conf_destroy(conf);
        free_counters(c);
        free(c);
        return cs__fail(CS_ERR_KAFKA, "subscription %s: consumer could not be created: %s", s->name, reason);
    }
    err = cs__oauth_started(s->k, c->rk, c->who);
    if (err) {
        consumer_free(c);
        return err;
    }
    rd_kafka_poll_set_consumer(c->rk);
    c->queue = rd_kafka_queue_get_consumer(c->rk);
    if (!cs__fetch_init(c, s->fetch_buffer_bytes)) {
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

    /* Also refuses seeks and pauses (fetch_control.c: a handler waiting for
     * the fetch thread at the gate would never be served). */
    c->window_barrier = c->transactional && txn_barrier_requested();
    cs_pipeline_config pc = {
        .name = s->name,
        .handler = s->handler,
        .batch_handler = s->batch_handler,
        .max_batch = s->max_batch,
        .codec = s->codec,
        .type = s->type,
        .key_codec = s->key_codec,
        .key_type = s->key_type,
        .user = s->user,
        .tracked = c->tracked,
        .lanes_by_key = s->lanes == CS_LANES_BY_KEY,
        .workers = s->workers,
        /* Auto keeps its queue small (it is Auto's loss window); under Tracked
         * the cap only bounds memory: a full partition is not served until it
         * drains to half, its records wait in the fetch buffer (fetch_handout.c). */
        .max_open = cs__consumer_max_open(s),
        .handler_time_limit_ms = s->handler_time_limit_ms,
        .wake = cs__fetch_wake,
        .wake_arg = c,
        .send_reply = s->reply_topic && !c->transactional ? cs__publish_reply : NULL,
        .reply_arg = s,
        .max_attempts = s->max_attempts,
        .send_dead_letter = s->dead_letter && !c->transactional ? cs__publish_dead_letter : NULL,
        .dead_letter_arg = s,
        .transactional = c->transactional,
        .reply_topic = s->reply_topic,
        .make_dead_letter = s->dead_letter && c->transactional ? cs__publish_dead_letter_output : NULL,
        .make_dead_letter_arg = s,
        .output_topic_ok = cs__publish_output_topic_ok,
        .output_topic_arg = s,
        .window_records = c->transactional || s->db ? s->window_records : 0,
        /* Measurement switch (bench/): stop-the-world window commits, to
         * compare with the default where handlers keep running meanwhile.
         * Read here, once per subscription start; workers test the bool. */
        .window_barrier = c->window_barrier,
        /* Database: always, or a crash would handle again records whose writes committed. */
        .acked_set = c->tracked && !c->transactional && (s->acked_set || s->db),
        /* Transactional: plain commits would pass uncommitted outputs.
         * Database: positions are the database's (no suspect records). */
        .precommit = c->transactional || s->db ? NULL : cs__commit_precommit,
        .store = s->db ? cs__db_run_store(s->db) : NULL,
        .precommit_arg = c,
    };
    c->pipe = cs__pipeline_new(&pc);
    if (!c->pipe) {
        consumer_free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: could not start its workers", s->name);
    }
    /* Manual assignment: no subscribe; the fetch thread assigns the fixed
     * partitions first thing, through the rebalance path (rebalance.c). */
    if (s->partitions)
        err = cs__partitions_exist(c->rk, c->who, s->topics, s->n_topics, s->partitions, s->n_partitions);
    else err = subscribe(c);
    if (err) {
        consumer_free(c);
        return err;
    }
    if (pthread_create(&c->thread, NULL, fetch_main, c) != 0) {
        consumer_free(c);
        return cs__fail(CS_ERR_NOMEM, "subscription %s: could not start its fetch thread", s->name);
    }
    c->thread_started = true;
    CS_LOG_INFO("%s subscription=%s group=%s commit=%s workers=%d group.instance.id=%s",
                s->partitions ? "partitions assigned manually, no group rebalance" : "subscribed", s->name,
                s->group ? s->group : s->k->default_group,
                c->transactional ? "transactional"
                : s->db          ? "database"
                : c->tracked     ? "tracked"
                                 : "auto",
                s->workers, s->static_id ? s->static_id : "-");
    *out = c;
    return CS_OK;
}

/* Asks the fetch thread to stop (it leaves its poll at once); no wait. */
static void tell_fetch_thread(cs_consumer *c) {
    pthread_mutex_lock(&c->wake_lock);
    atomic_store(&c->stop, true);
    if (c->queue) rd_kafka_queue_yield(c->queue);
    pthread_mutex_unlock(&c->wake_lock);
}

static void join_fetch_thread(cs_consumer *c) {
    tell_fetch_thread(c);
    if (c->thread_started) pthread_join(c->thread, NULL);
    c->thread_started = false;
    cs__control_close(c); /* nobody applies requests any more */
}

void cs__consumer_tell_stop(cs_consumer *c) { tell_fetch_thread(c); }

void cs__consumer_stop_fetching(cs_consumer *c) { join_fetch_thread(c); }

void cs__consumer_drain_begin(cs_consumer *c, int64_t from_ms) {
    /* After a fatal error (fenced, above all) nothing this consumer handles
     * can be committed any more: the next owner reads those records again.
     * Running the queued ones would only duplicate its work (a fenced
     * instance ran up to the drain timeout's worth), so only the handlers
     * already running finish. */
    if (rd_kafka_fatal_error(c->rk, NULL, 0))
        for (size_t i = 0; i < c->fetch.n_parts; i++) cs__pipeline_stop_partition(c->pipe, c->fetch.parts[i].part);
    cs__pipeline_drain_begin(c->pipe, from_ms + c->sub->drain_timeout_ms);
}

void cs__consumer_drain_wait(cs_consumer *c) {
    size_t left = cs__pipeline_drain_wait(c->pipe);
    if (left)
        CS_LOG_WARN("shutdown: deliveries still pending at the drain deadline stay uncommitted subscription=%s "
                    "pending=%zu drain_timeout_ms=%d",
                    c->sub->name, left, c->sub->drain_timeout_ms);
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
    if (c->sub->db) cs__commit_db_close(c);
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
    for (int i = 0; i < PENDING_EVENTS_MAX; i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 0);
        if (!m) return;
        if (m->err) cs__consumer_on_record_error(c, m);
        rd_kafka_message_destroy(m); /* records never come here: they are forwarded to recq (fetch_parts.c) */
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
    if (c->sub->db) cs__commit_db_close(c);
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
    if (c->sub->db) cs__commit_db_close(c); /* a crash loses the open window */
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
        assigned->elems[i].offset =
            cs__pipeline_next_offset(c->pipe, assigned->elems[i].topic, assigned->elems[i].partition);
    for (int i = 0; idle && i < assigned->cnt; i++) {
        rd_kafka_topic_partition_t *e = &assigned->elems[i];
        int64_t lo = 0, hi = 0;
        if (rd_kafka_query_watermark_offsets(c->rk, e->topic, e->partition, &lo, &hi, WATERMARK_TIMEOUT_MS)) {
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
    if (!atomic_load(&c->group.joined) || rd_kafka_fatal_error(c->rk, NULL, 0)) return 0;
    if (!atomic_load(&c->errors.brokers_down)) return 1;
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(c->rk, 0, NULL, &md, probe_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    rd_kafka_metadata_destroy(md);
    cs__errors_broker_answered(c);
    return 1;
}

uint64_t cs__consumer_commit_ticks(cs_consumer *c) {
    return atomic_load_explicit(&c->commit.ticks, memory_order_relaxed);
}

uint64_t cs__consumer_sheds(cs_consumer *c) { return atomic_load_explicit(&c->take.sheds, memory_order_relaxed); }
uint64_t cs__consumer_taken(cs_consumer *c) { return atomic_load_explicit(&c->take.stored, memory_order_relaxed); }

uint64_t cs__consumer_moves_back(cs_consumer *c) {
    return atomic_load_explicit(&c->control.moves_back, memory_order_relaxed);
}

rd_kafka_t *cs__consumer_handle(cs_consumer *c) { return c->rk; }
