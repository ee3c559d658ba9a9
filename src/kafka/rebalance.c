/* rebalance.c — assign and revoke (the rebalance callback, on the fetch
 * thread inside rd_kafka_consumer_poll), the attempt counts read at assign,
 * subscribed topics that go away, and librdkafka's client errors. */
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

/* ---- a subscribed topic that goes away ---------------------------------------
 * A topic deleted under a subscription is bad input from outside the service:
 * librdkafka reports it (a consume error "Subscribed topic not available: T",
 * or "T [p]: desired partition is no longer available" through error_cb), the
 * group rebalances the topic's partitions away, and the subscription keeps
 * consuming its other topics. cstream keeps running: the topic may come back
 * (recreated, or ACLs fixed), and then its partitions are assigned again and
 * read from the start (Kafka deleted the group's offsets with the topic). What
 * it adds is one ERROR line that names the topic, per loss, the
 * cstream_topic_unavailable gauge for alerting, and care that an old topic's
 * positions never land on a new one (mark_topic_partitions). */

bool cs__topic_error(rd_kafka_resp_err_t err) {
    return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
           err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
}

/* The index of the subscribed topic that `text` is about (a topic name, or
 * librdkafka's reason, which starts with the topic name), or -1. */
int cs__subscribed_topic_in(const cs_consumer *c, const char *text, bool exact) {
    for (size_t i = 0; text && i < c->sub->n_topics; i++) {
        const char *t = c->sub->topics[i];
        size_t n = strlen(t);
        if (exact ? !strcmp(text, t) : (!strncmp(text, t, n) && (text[n] == ' ' || text[n] == ':' || !text[n])))
            return (int)i;
    }
    return -1;
}

/* The topic's partitions still assigned to this member: their log may have
 * restarted. librdkafka keeps them in the assignment until the group
 * rebalances, about a second later, and a topic created again before that is
 * read from its start (librdkafka resets the old position, now out of range).
 * Until a record shows whether the log restarted, their positions are not
 * committed: an old topic's position must not land on a new topic. Nothing
 * is discarded yet, since the report may be wrong (a broker briefly missing
 * the topic) and then queued records must still run. Fetch thread (error
 * callbacks run inside its poll). */
static void mark_topic_partitions(cs_consumer *c, const char *topic) {
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (rd_kafka_assignment(c->rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    for (int i = 0; i < assigned->cnt; i++) {
        if (strcmp(assigned->elems[i].topic, topic)) continue;
        cs_part *part = cs__consumer_part(c, topic, assigned->elems[i].partition);
        if (!part) continue;
        atomic_store(&part->log_unknown, true);
    }
    rd_kafka_topic_partition_list_destroy(assigned);
    cs__fetch_mark_old_log(c, topic);
}

/* Dispatch, for a partition whose log may have restarted: a record below the
 * ones already fetched proves it did, so the partition starts over (a new
 * epoch: what is in flight of the old topic becomes stale, its positions mean
 * nothing here; an empty tracker, which would otherwise take the new topic's
 * first offsets for re-deliveries and drop them, as measured before this
 * existed: records 0-4 of a recreated topic lost). A record above them: the
 * same log, nothing to do. Either way commits resume. Under Auto there is no
 * tracker to reset, only the line to log. Fetch thread. */
void cs__settle_log_restart(cs_consumer *c, cs_part *part, const char *topic, int64_t offset) {
    atomic_store(&part->log_unknown, false);
    int64_t next = cs__pipeline_next_offset(c->pipe, topic, part->partition);
    if (next < 0 || offset >= next) return;
    CS_LOG_WARN("partition log restarted (topic deleted and created again): read from its new start "
                "subscription=%s topic=%s partition=%d offset=%lld old_next_offset=%lld",
                c->sub->name, topic, (int)part->partition, (long long)offset, (long long)next);
    if (!c->tracked) return; /* Auto tracks no offsets: nothing to forget */
    /* A new epoch, as a Transactional rewind makes: the old topic's
     * deliveries still running or pending stay on the in-flight list (their
     * settlements are stale; a revoke or the stop waits for them). Releasing
     * them here would free payloads their handlers are reading. */
    cs__pipeline_assign(c->pipe, part);
}

void cs__topic_unavailable(cs_consumer *c, int i, rd_kafka_resp_err_t err, const char *reason) {
    atomic_store(&c->topic_vanished, true);
    if (atomic_exchange(&c->topic_unavailable[i], true)) return; /* said so already */
    atomic_fetch_add(&c->n_unavailable, 1);
    mark_topic_partitions(c, c->sub->topics[i]);
    CS_LOG_ERR("subscribed topic not available (deleted, or not visible to this client): nothing is committed "
               "for it until it is back, the subscription keeps running and consumes it again then "
               "subscription=%s group=%s topic=%s error=%s reason=\"%s\"",
               c->sub->name, c->sub->group ? c->sub->group : c->sub->k->default_group, c->sub->topics[i],
               rd_kafka_err2name(err), reason);
}

/* Fetch thread: a partition of the topic was assigned again, or a record of
 * it arrived (a topic recreated before the group rebalanced stays assigned). */
void cs__topic_available(cs_consumer *c, const char *topic) {
    if (atomic_load_explicit(&c->n_unavailable, memory_order_relaxed) == 0) return;
    int i = cs__subscribed_topic_in(c, topic, true);
    if (i < 0 || !atomic_exchange(&c->topic_unavailable[i], false)) return;
    atomic_fetch_sub(&c->n_unavailable, 1);
    CS_LOG_INFO("subscribed topic available again subscription=%s topic=%s", c->sub->name, topic);
}

/* ---- rebalance ------------------------------------------------------------ */

static void call_hook(cs_consumer *c, cs_partitions_fn fn, void *user, const rd_kafka_topic_partition_list_t *l) {
    if (!fn || !l || l->cnt == 0) return;
    int32_t *ids = calloc((size_t)l->cnt, sizeof *ids);
    if (!ids) return;
    for (size_t t = 0; t < c->sub->n_topics; t++) {
        size_t n = 0;
        for (int i = 0; i < l->cnt; i++)
            if (!strcmp(l->elems[i].topic, c->sub->topics[t])) ids[n++] = l->elems[i].partition;
        if (n) fn(c->sub, c->sub->topics[t], ids, n, user);
    }
    free(ids);
}

/* Tracked, at assign: the attempt counts the previous owner committed. If it
 * did not leave cleanly (or the group has no position yet), it may have died
 * running one of the first records: those records are "suspect", and each of
 * them has its attempt committed before it runs (see cs__part_set_prior). */
static void load_attempts(cs_consumer *c, const rd_kafka_topic_partition_list_t *l) {
    rd_kafka_topic_partition_list_t *committed = rd_kafka_topic_partition_list_copy(l);
    rd_kafka_topic_partition_list_t *running = rd_kafka_topic_partition_list_new(l->cnt);
    rd_kafka_resp_err_t err = rd_kafka_committed(c->rk, committed, 10000);
    for (int i = 0; i < committed->cnt; i++) {
        rd_kafka_topic_partition_t *e = &committed->elems[i];
        cs_part *part = cs__consumer_part(c, e->topic, e->partition);
        if (!part) continue;
        int64_t offs[CS_PRIOR_MAX];
        uint32_t atts[CS_PRIOR_MAX];
        size_t n = 0;
        bool clean = false;
        if (!err && !e->err && e->offset >= 0)
            cs__meta_decode(e->metadata, e->metadata_size, &clean, offs, atts, CS_PRIOR_MAX, &n);
        else
            clean = false; /* no position (or not readable): the first records are suspect */
        char meta[CS_META_MAX];
        cs__meta_encode(meta, sizeof meta, clean, offs, atts, n);
        /* Transactional: only transactions commit positions, so there is no
         * running mark and no suspect records (a crash aborts the window). */
        if (c->transactional) clean = true;
        cs__part_set_prior(part, e->offset >= 0 ? e->offset : -1, meta, offs, atts, n, !clean);
        if (!c->transactional && clean && e->offset >= 0 && c->sub->max_attempts > 0) {
            /* This owner now runs the partition: say so at once (c=0), or a
             * crash before its first commit would look like a clean leave. */
            cs__meta_encode(meta, sizeof meta, false, offs, atts, n);
            rd_kafka_topic_partition_t *r = rd_kafka_topic_partition_list_add(running, e->topic, e->partition);
            r->offset = e->offset;
            r->metadata = strdup(meta);
            r->metadata_size = r->metadata ? strlen(meta) : 0;
        }
        /* Say which of the three it was: a first start is not a crash. */
        if (!clean && !err && !e->err && e->offset < 0)
            CS_LOG_INFO("no committed position yet (the group never committed this partition): attempts of the "
                        "first records are committed before they run subscription=%s topic=%s partition=%d",
                        c->sub->name, e->topic, (int)e->partition);
        else if (!clean && (err || e->err))
            CS_LOG_INFO("committed position not read: attempts of the first records are committed before they run "
                        "subscription=%s topic=%s partition=%d error=\"%s\"",
                        c->sub->name, e->topic, (int)e->partition, rd_kafka_err2str(err ? err : e->err));
        else if (!clean)
            CS_LOG_INFO("previous owner did not stop cleanly: attempts of the first records are committed before "
                        "they run subscription=%s topic=%s partition=%d committed=%lld",
                        c->sub->name, e->topic, (int)e->partition, (long long)e->offset);
    }
    if (err)
        CS_LOG_WARN("attempt counts not read, they restart from zero subscription=%s error=\"%s\"", c->sub->name,
                    rd_kafka_err2str(err));
    if (running->cnt > 0) {
        rd_kafka_resp_err_t cerr;
        pthread_mutex_lock(&c->commit_lock);
        rd_kafka_queue_t *q = cs__commit_enqueue(c, running, &cerr);
        pthread_mutex_unlock(&c->commit_lock);
        if (q) cerr = cs__commit_await(c, q, false);
        if (cerr)
            CS_LOG_WARN("could not mark the partitions as running, a crash before the first commit may not count "
                        "an attempt subscription=%s error=\"%s\"",
                        c->sub->name, rd_kafka_err2str(cerr));
    }
    rd_kafka_topic_partition_list_destroy(running);
    rd_kafka_topic_partition_list_destroy(committed);
}

static void assign_partitions(cs_consumer *c, rd_kafka_topic_partition_list_t *l, bool cooperative) {
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = cs__consumer_part(c, l->elems[i].topic, l->elems[i].partition);
        if (part) cs__pipeline_assign(c->pipe, part);
        if (!part || !cs__fetch_open_part(c, part))
            cs__app_fatal(c->app, "%s: out of memory at the assignment of %s/%d", c->who, l->elems[i].topic,
                          (int)l->elems[i].partition);
        cs__topic_available(c, l->elems[i].topic);
        CS_LOG_INFO("partition assigned subscription=%s group=%s topic=%s partition=%d", c->sub->name,
                    c->sub->group ? c->sub->group : c->sub->k->default_group, l->elems[i].topic,
                    (int)l->elems[i].partition);
    }
    if (c->tracked) load_attempts(c, l);
    if (cooperative) {
        rd_kafka_error_t *e = rd_kafka_incremental_assign(c->rk, l);
        if (e) {
            cs__app_fatal(c->app, "%s: incremental assign failed: %s", c->who, rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
        }
        cs__fetch_wake_kept(c);
    } else {
        rd_kafka_resp_err_t err = rd_kafka_assign(c->rk, l);
        if (err) cs__app_fatal(c->app, "%s: assign failed: %s", c->who, rd_kafka_err2str(err));
    }
    call_hook(c, c->sub->on_assign, c->sub->on_assign_user, l);
}

/* Stop handing out, wait (bounded) for in-flight settlements, commit what is
 * settled, then release. Idempotent: close runs it again on released parts. */
static void revoke_partitions(cs_consumer *c, rd_kafka_topic_partition_list_t *l, bool lost) {
    call_hook(c, c->sub->on_revoke, c->sub->on_revoke_user, l);
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = cs__consumer_part(c, l->elems[i].topic, l->elems[i].partition);
        if (part && c->tracked) cs__pipeline_stop_partition(c->pipe, part);
    }
    if (!lost) {
        int64_t deadline = cs__now_ms() + c->sub->drain_timeout_ms;
        for (int i = 0; i < l->cnt; i++) {
            cs_part *part = cs__consumer_part(c, l->elems[i].topic, l->elems[i].partition);
            size_t left = part ? cs__pipeline_wait_settled(c->pipe, part, deadline) : 0;
            if (left)
                CS_LOG_WARN("revoke: deliveries still open at the drain deadline stay uncommitted "
                            "subscription=%s topic=%s partition=%d open=%zu",
                            c->sub->name, part->topic, (int)part->partition, left);
        }
        if (!c->closing) cs__commit_positions(c, l, true); /* at close, the close committed already */
    } else {
        CS_LOG_WARN("assignment lost: nothing is committed for the lost partitions subscription=%s",
                    c->sub->name);
    }
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = cs__consumer_part(c, l->elems[i].topic, l->elems[i].partition);
        if (!part) continue;
        /* Payloads of deliveries still open stay with them: they are copies
         * in the store, which outlives the consumer, and a handler running
         * past the drain deadline still reads its record. */
        cs__pipeline_release_partition(c->pipe, part);
        CS_LOG_INFO("partition released subscription=%s topic=%s partition=%d", c->sub->name, part->topic,
                    (int)part->partition);
    }
}

/* Whether the group rebalances cooperatively. librdkafka 2.0.2 answers NULL
 * once the group handle stops serving requests, as in the revoke that
 * rd_kafka_consumer_close runs (seen with a static member closing while its
 * group rebalanced: strcmp(NULL) crashed the stop); then the protocol of the
 * last rebalance holds. Fetch thread, or the closing thread after it. */
static bool rebalance_cooperative(cs_consumer *c, rd_kafka_t *rk) {
    const char *protocol = rd_kafka_rebalance_protocol(rk);
    if (protocol) c->cooperative = !strcmp(protocol, "COOPERATIVE");
    return c->cooperative;
}

void cs__rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l,
                         void *opaque) {
    cs_consumer *c = opaque;
    bool cooperative = rebalance_cooperative(c, rk);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        assign_partitions(c, l, cooperative);
        /* Joined, also with nothing assigned (more members than partitions):
         * librdkafka calls this with an empty list then. */
        atomic_store(&c->joined, true);
        CS_LOG_DEBUG("group joined subscription=%s partitions=%d", c->sub->name, l->cnt);
        return;
    }
    bool lost = rd_kafka_assignment_lost(rk);
    /* An eager revoke starts a rebalance (the member has nothing until the
     * next assign); a lost assignment means the member left the group. A
     * cooperative revoke keeps the rest of the assignment: still joined. */
    if (!cooperative || lost) atomic_store(&c->joined, false);
    revoke_partitions(c, l, lost);
    if (cooperative) {
        rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, l);
        if (e) {
            CS_LOG_WARN("unassign failed subscription=%s error=\"%s\"", c->sub->name, rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
        }
    } else {
        rd_kafka_resp_err_t e = rd_kafka_assign(rk, NULL);
        if (e) CS_LOG_WARN("unassign failed subscription=%s error=\"%s\"", c->sub->name, rd_kafka_err2str(e));
    }
    /* After the unassign librdkafka has served the removal
     * (rd_kafka_cgrp_handle_assign_op -> rd_kafka_assignment_serve: fetch
     * stopped, version barrier bumped), so the partitions' records still in
     * recq are outdated and librdkafka drops them when taken. The backlog was
     * never handed out: nothing was stored or tracked for it. */
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = cs__consumer_part(c, l->elems[i].topic, l->elems[i].partition);
        if (part) cs__fetch_forget_part(c, part);
    }
    if (cooperative) cs__fetch_wake_kept(c);
}

/* ---- errors ---------------------------------------------------------------- */

/* Stops the app for the consumer's fatal error `orig`. Fenced (static
 * membership): another consumer joined the group with this one's
 * group.instance.id — a second process with the same instance id — and the
 * broker gave it this member's place and partitions; this one can neither
 * commit nor rejoin (librdkafka 2.0.2 makes it a fatal error), and the close
 * commits nothing (close_after_fatal in consumer.c). */
void cs__consumer_fatal_error(cs_consumer *c, rd_kafka_resp_err_t orig, const char *why) {
    if (orig == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID && c->sub->static_id) {
        cs__app_fatal(c->app,
                      "%s: fenced (FENCED_INSTANCE_ID): another consumer joined group %s with the same "
                      "group.instance.id %s, so another process runs with instance id %s; this consumer stops and "
                      "commits nothing (give every running instance its own instance id); librdkafka: %s",
                      c->who, c->sub->group ? c->sub->group : c->sub->k->default_group, c->sub->static_id,
                      c->sub->k->instance_id, why);
        return;
    }
    cs__app_fatal(c->app, "%s: librdkafka fatal error %s: %s", c->who, rd_kafka_err2name(orig), why);
}

void cs__consumer_on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    cs_consumer *c = opaque;
    int gone = cs__topic_error(err) ? cs__subscribed_topic_in(c, reason, false) : -1;
    if (gone >= 0) {
        cs__topic_unavailable(c, gone, err, reason);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, why, sizeof why);
        cs__consumer_fatal_error(c, orig, why);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) atomic_store(&c->brokers_down, true);
    uint64_t skipped = 0;
    /* Refused credentials or TLS after a good start (a rotated password, a
     * subscription's own sasl.* settings): librdkafka keeps retrying and
     * nothing is fetched meanwhile, so it is an error, not weather. */
    bool refused = err == RD_KAFKA_RESP_ERR__AUTHENTICATION || err == RD_KAFKA_RESP_ERR__SSL;
    if (cs__ratelimit_allow(&c->error_warning, 5000, &skipped))
        cs__log(refused ? CS_LOG_ERROR : CS_LOG_WARN,
                "kafka client error subscription=%s error=%s reason=\"%s\" similar_since_last=%llu", c->sub->name,
                rd_kafka_err2name(err), reason, (unsigned long long)skipped);
}
