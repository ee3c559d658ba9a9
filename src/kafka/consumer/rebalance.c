/* rebalance.c — assign and revoke (the rebalance callback, on the fetch
 * thread inside rd_kafka_consumer_poll) and the attempt counts read at
 * assign. Subscribed topics that go away and librdkafka's client errors are
 * in consumer_errors.c.
 *
 * Owns: c->group. Locks: none of its own (revoke commits through
 * committer.c). Threads: the fetch thread, or the closing thread running
 * the close's revoke. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/attempts_meta.h"
#include "core/broker.h"
#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"

/* ---- rebalance ------------------------------------------------------------ */

/* A pattern subscription's hook: once per distinct topic of l, in the order
 * they first appear (its topics are not known in advance). */
static void call_hook_by_topic(cs_consumer *c, cs_partitions_fn fn, void *user,
                               const rd_kafka_topic_partition_list_t *l, int32_t *ids) {
    for (int first = 0; first < l->cnt; first++) {
        const char *topic = l->elems[first].topic;
        bool seen = false;
        for (int j = 0; j < first && !seen; j++) seen = !strcmp(l->elems[j].topic, topic);
        if (seen) continue;
        size_t n = 0;
        for (int i = first; i < l->cnt; i++)
            if (!strcmp(l->elems[i].topic, topic)) ids[n++] = l->elems[i].partition;
        fn(c->sub, topic, ids, n, user);
    }
}

static void call_hook(cs_consumer *c, cs_partitions_fn fn, void *user, const rd_kafka_topic_partition_list_t *l) {
    if (!fn || !l || l->cnt == 0) return;
    int32_t *ids = calloc((size_t)l->cnt, sizeof *ids);
    if (!ids) {
        CS_LOG_ERR("out of memory: partition hook not called subscription=%s partitions=%d", c->sub->name, l->cnt);
        return;
    }
    if (c->sub->pattern) {
        call_hook_by_topic(c, fn, user, l, ids);
        free(ids);
        return;
    }
    for (size_t t = 0; t < c->sub->n_topics; t++) {
        size_t n = 0;
        for (int i = 0; i < l->cnt; i++)
            if (!strcmp(l->elems[i].topic, c->sub->topics[t])) ids[n++] = l->elems[i].partition;
        if (n) fn(c->sub, c->sub->topics[t], ids, n, user);
    }
    free(ids);
}

/* The group of the subscription, for log lines. */
static const char *group_of(const cs_consumer *c) { return c->sub->group ? c->sub->group : c->sub->k->default_group; }

/* Database mode asks for the high watermark this many times (5 s each). */
#define DB_WATERMARK_TRIES 6

/* Whether a verified acked set may be used: offsets it says were settled
 * must exist in the log now. A log truncated below them (an unclean leader
 * election, a topic deleted and created again) would have new records at
 * those offsets, and skipping them would lose them. One round trip, only for
 * partitions with a non-empty set. */
static bool set_within_log(cs_consumer *c, const rd_kafka_topic_partition_t *e, uint64_t reach) {
    int64_t low = -1, high = -1;
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(c->rk, e->topic, e->partition, &low, &high, 5000);
    /* Database: records in the set have their writes committed, so ignoring
     * it would write them twice; the high watermark is asked for a while,
     * and the app stops if it never comes. */
    for (int tries = 1; err && c->sub->db && tries < DB_WATERMARK_TRIES; tries++)
        err = rd_kafka_query_watermark_offsets(c->rk, e->topic, e->partition, &low, &high, 5000);
    if (err && c->sub->db) {
        cs__app_fatal(c->app,
                      "%s: the high watermark of %s/%d was not read, and its row's acked set cannot be used without "
                      "it: %s",
                      c->who, e->topic, (int)e->partition, rd_kafka_err2str(err));
        return false;
    }
    if (err) {
        CS_LOG_WARN("acked set ignored, the high watermark was not read: records above the position are read again "
                    "subscription=%s group=%s topic=%s partition=%d error=\"%s\"",
                    c->sub->name, group_of(c), e->topic, (int)e->partition, rd_kafka_err2str(err));
        return false;
    }
    if (high < e->offset || (uint64_t)(high - e->offset) < reach) {
        CS_LOG_WARN("committed metadata ignored (acked set beyond the high watermark): records above the position are "
                    "read again subscription=%s group=%s topic=%s partition=%d committed=%lld reach=%llu high=%lld",
                    c->sub->name, group_of(c), e->topic, (int)e->partition, (long long)e->offset,
                    (unsigned long long)reach, (long long)high);
        return false;
    }
    return true;
}

/* Tracked, at assign: the attempt counts the previous owner committed, and
 * its acked set (cs_sub_acked_set). If it did not leave cleanly (or the group
 * has no position yet), it may have died running one of the first records:
 * those records are "suspect", and each of them has its attempt committed
 * before it runs (see cs__part_set_prior). Metadata that does not verify is
 * ignored with one warning: nothing is skipped, attempts count from zero.
 * Database: the same from the rows claimed in the service's database, whose
 * positions are also where l starts (database_window.c). */
static void load_attempts(cs_consumer *c, rd_kafka_topic_partition_list_t *l) {
    rd_kafka_topic_partition_list_t *committed = rd_kafka_topic_partition_list_copy(l);
    rd_kafka_topic_partition_list_t *running = rd_kafka_topic_partition_list_new(l->cnt);
    /* Database: the positions are the database's, claimed here. */
    rd_kafka_resp_err_t err =
        c->sub->db ? cs__commit_db_claim(c, committed) : rd_kafka_committed(c->rk, committed, 10000);
    bool use_set = c->tracked && !c->transactional && (c->sub->acked_set || c->sub->db);
    uint32_t *runs = use_set ? malloc(CS_ACKED_MAX_RUNS * sizeof *runs) : NULL; /* out of memory: no set */
    for (int i = 0; i < committed->cnt; i++) {
        rd_kafka_topic_partition_t *e = &committed->elems[i];
        cs_part *part = cs__consumer_part(c, e->topic, e->partition);
        if (!part) continue;
        int64_t offs[CS_PRIOR_MAX];
        uint32_t atts[CS_PRIOR_MAX];
        cs_meta_read rd = {
            .offsets = offs, .attempts = atts, .max = CS_PRIOR_MAX, .runs = runs, .max_runs = CS_ACKED_MAX_RUNS};
        bool clean = false;
        if (!err && !e->err && e->offset >= 0) {
            cs_meta_status st = cs__meta_read(e->metadata, e->metadata_size, e->offset, &rd);
            clean = rd.clean;
            /* Database: the row's set is cstream's own; one it cannot read
             * would make it write the records in it a second time. */
            if (c->sub->db && (st == CS_META_FOREIGN || st == CS_META_BAD || !runs))
                cs__app_fatal(c->app,
                              "%s: the settled column of %s/%d in cstream_positions is not usable (%s): set it to '' "
                              "to read every record above next_offset again",
                              c->who, e->topic, (int)e->partition, runs ? rd.why : "out of memory");
            if (st == CS_META_FOREIGN || st == CS_META_BAD)
                CS_LOG_WARN("committed metadata ignored (%s): attempts count from zero and records above the position "
                            "are read again subscription=%s group=%s topic=%s partition=%d committed=%lld",
                            rd.why, c->sub->name, group_of(c), e->topic, (int)e->partition, (long long)e->offset);
        }
        size_t n = rd.n;
        bool has_set = runs && rd.has_set && (rd.n_runs == 0 || set_within_log(c, e, rd.reach));
        if (!has_set) rd.n_runs = 0;
        char meta[CS_META_MAX];
        cs__meta_encode(meta, sizeof meta, clean, offs, atts, n);
        /* Database: a rollback reads the partition again with the set it
         * committed (database_window.c), so the row is kept whole. */
        if (c->sub->db && e->metadata && e->offset >= 0 && e->metadata_size < sizeof meta)
            snprintf(meta, sizeof meta, "%.*s", (int)e->metadata_size, (const char *)e->metadata);
        /* Transactional and Database: only windows commit positions, so there
         * is no running mark and no suspect records (a crash rolls the window
         * back). */
        if (c->transactional || c->sub->db) clean = true;
        cs__part_set_prior(part, e->offset >= 0 ? e->offset : -1, meta, offs, atts, n, !clean);
        if (rd.n_runs > 0 && cs__part_set_acked(part, e->offset, runs, rd.n_runs))
            CS_LOG_INFO("acked set restored: records settled above the position are skipped subscription=%s group=%s "
                        "topic=%s partition=%d committed=%lld reach=%llu",
                        c->sub->name, group_of(c), e->topic, (int)e->partition, (long long)e->offset,
                        (unsigned long long)rd.reach);
        if (!c->transactional && !c->sub->db && clean && e->offset >= 0 && c->sub->max_attempts > 0) {
            /* This owner now runs the partition: say so at once (c=0), or a
             * crash before its first commit would look like a clean leave.
             * With the same acked set: this commit replaces the group's. */
            uint64_t reach;
            if (use_set)
                cs__meta_encode_set(meta, sizeof meta, false, e->offset, offs, atts, n, runs, rd.n_runs, &reach);
            else cs__meta_encode(meta, sizeof meta, false, offs, atts, n);
            rd_kafka_topic_partition_t *r = rd_kafka_topic_partition_list_add(running, e->topic, e->partition);
            r->offset = e->offset;
            r->metadata = strdup(meta);
            /* Out of memory: committed without attempt counts; the position still moves. */
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
    if (c->sub->db && !err) cs__commit_db_start_at(c, l, committed); /* where fetching starts: the rows */
    rd_kafka_topic_partition_list_destroy(committed);
    free(runs);
}

static void assign_partitions(cs_consumer *c, rd_kafka_topic_partition_list_t *l, bool cooperative) {
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = cs__consumer_part(c, l->elems[i].topic, l->elems[i].partition);
        if (part) cs__pipeline_assign(c->pipe, part);
        if (!part || !cs__fetch_open_part(c, part))
            cs__app_fatal(c->app, "%s: out of memory at the assignment of %s/%d", c->who, l->elems[i].topic,
                          (int)l->elems[i].partition);
        cs__topic_available(c, l->elems[i].topic);
        CS_LOG_INFO("partition assigned subscription=%s group=%s topic=%s partition=%d protocol=%s", c->sub->name,
                    group_of(c), l->elems[i].topic, (int)l->elems[i].partition,
                    cs__protocol_label(c->sub->consumer_protocol));
    }
    if (c->tracked) load_attempts(c, l);
    if (!c->sub->db) cs__start_positions_apply(c, l); /* only where the group has no committed offset */
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

void cs__rebalance_assign_fixed(cs_consumer *c) {
    cs_sub *s = c->sub;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)(s->n_topics * s->n_partitions));
    for (size_t t = 0; t < s->n_topics; t++)
        for (size_t i = 0; i < s->n_partitions; i++)
            rd_kafka_topic_partition_list_add(l, s->topics[t], s->partitions[i]);
    /* Eager: rd_kafka_assign; with no group rebalance there is no
     * cooperative protocol to follow, and no revoke until the close. */
    assign_partitions(c, l, false);
    rd_kafka_topic_partition_list_destroy(l);
    atomic_store(&c->group.joined, true);
}

/* The member's epoch under the consumer protocol (its generation under the
 * classic one): above 0 once the coordinator has taken it in; -1 unknown. */
static int32_t member_epoch(rd_kafka_t *rk) {
#if CS_RDKAFKA_HAS_CONSUMER_PROTOCOL
    rd_kafka_consumer_group_metadata_t *md = rd_kafka_consumer_group_metadata(rk);
    int32_t epoch = md ? rd_kafka_consumer_group_metadata_generation_id(md) : -1;
    if (md) rd_kafka_consumer_group_metadata_destroy(md);
    return epoch;
#else
    (void)rk;
    return -1;
#endif
}

/* The member is in its group: ready (/readyz), and a lost session is over. */
static void mark_joined(cs_consumer *c, int partitions) {
    atomic_store(&c->group.joined, true);
    c->group.ever_joined = true;
    c->group.lost_since_ms = 0;
    CS_LOG_DEBUG("group joined subscription=%s partitions=%d", c->sub->name, partitions);
}

/* Under the consumer protocol librdkafka calls the rebalance callback only
 * when the assignment changes (rd_kafka_cgrp_consumer_handle_next_assignment:
 * "Assignment is the same"), so a member whose assignment is empty from the
 * start (more members than partitions) gets no call and would never count
 * as joined: /readyz stayed 503 for it. Its member epoch tells instead:
 * above 0 once the coordinator has taken it in, and above the one it had
 * when its session was lost (librdkafka resets the epoch only after the lost
 * callback's unassign, so the old one can still be read meanwhile; a new
 * join gets a newer group epoch). A member whose first assignment is not
 * empty can count as joined a moment before its assign callback runs.
 * Asked at most every 100 ms while not joined (a request to librdkafka's
 * main thread). */
enum { EMPTY_JOIN_CHECK_MS = 100, JOIN_WARN_MS = 30000 };

/* A broker that does not offer the consumer protocol at all (before Kafka
 * 3.7, or group.coordinator.rebalance.protocols without "consumer") never
 * lets the member in, and librdkafka says so only at debug level ("marking
 * the coordinator dead: ConsumerGroupHeartbeatRequest not supported by
 * broker") while it retries for ever. A broker that answers the request
 * with UNSUPPORTED_VERSION is a clear stop (consumer_errors.c). So one WARN
 * naming the likely causes and the way out, when a consumer that was never
 * in its group is still out JOIN_WARN_MS after it subscribed (a member that
 * was in once and lost its session is the lost-session watchdog's:
 * consumer.c). */
static void warn_not_joined(cs_consumer *c, int64_t now) {
    if (c->group.join_warned || c->group.ever_joined || now - c->group.joining_since_ms < JOIN_WARN_MS) return;
    c->group.join_warned = true;
    CS_LOG_WARN("group %s has not let this member in %lld s after it asked to join under group.protocol=consumer "
                "(KIP-848): the brokers may be unreachable, or older than Kafka 4.0 and not offer that protocol "
                "(librdkafka then retries silently); check the brokers' group.coordinator.rebalance.protocols, "
                "or set group.protocol=classic subscription=%s librdkafka=%s",
                group_of(c), (long long)((now - c->group.joining_since_ms) / 1000), c->sub->name,
                rd_kafka_version_str());
}

void cs__rebalance_joining(cs_consumer *c) {
    c->group.joining_since_ms = cs__now_ms();
    c->group.join_warned = false;
}

void cs__rebalance_restart_lost_clock(cs_consumer *c, int64_t now) { c->group.lost_since_ms = now; }

void cs__rebalance_check_empty_join(cs_consumer *c, int64_t now) {
    if (!CS_RDKAFKA_HAS_CONSUMER_PROTOCOL || !c->sub->consumer_protocol || c->sub->partitions ||
        atomic_load(&c->group.joined) || now < c->group.next_join_check_ms)
        return;
    c->group.next_join_check_ms = now + EMPTY_JOIN_CHECK_MS;
    int32_t epoch = member_epoch(c->rk);
    if (epoch <= c->group.lost_epoch) warn_not_joined(c, now);
    if (epoch <= c->group.lost_epoch || c->fetch.n_parts)
        return; /* not in (again) yet, or an assign callback is its news */
    mark_joined(c, 0);
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
        /* This drain runs inside librdkafka's rebalance callback: nothing
         * polls the consumer until it returns. Past max.poll.interval.ms
         * without a poll, librdkafka makes the member leave its group, and
         * the broker, whose rebalance waits only that long for it, assigns
         * its partitions to the others while its handlers still run them:
         * the commit below would be refused and the records run twice. So
         * cs_app_start refuses a drain_timeout_ms that is not shorter
         * (cs__consumer_check_drain_timeout, consumer_conf.c). */
        int64_t deadline = cs__now_ms() + c->sub->drain_timeout_ms;
        for (int i = 0; i < l->cnt; i++) {
            cs_part *part = cs__consumer_part(c, l->elems[i].topic, l->elems[i].partition);
            size_t left = part ? cs__pipeline_wait_settled(c->pipe, part, deadline) : 0;
            if (left)
                CS_LOG_WARN("revoke: deliveries still open at the drain deadline stay uncommitted "
                            "subscription=%s topic=%s partition=%d open=%zu",
                            c->sub->name, cs__part_topic(part), (int)cs__part_number(part), left);
        }
        if (!c->closing) cs__commit_positions(c, l, true); /* at close, the close committed already */
    } else {
        CS_LOG_WARN("assignment lost: nothing is committed for the lost partitions subscription=%s", c->sub->name);
    }
    if (c->sub->db) cs__commit_db_release(c, l, lost);
    for (int i = 0; i < l->cnt; i++) {
        cs_part *part = cs__consumer_part(c, l->elems[i].topic, l->elems[i].partition);
        if (!part) continue;
        /* Payloads of deliveries still open stay with them: they are copies
         * in the store, which outlives the consumer, and a handler running
         * past the drain deadline still reads its record. */
        cs__pipeline_release_partition(c->pipe, part);
        CS_LOG_INFO("partition released subscription=%s topic=%s partition=%d", c->sub->name, cs__part_topic(part),
                    (int)cs__part_number(part));
    }
}

/* Whether the group rebalances cooperatively. librdkafka 2.0.2 answers NULL
 * once the group handle stops serving requests, as in the revoke that
 * rd_kafka_consumer_close runs (seen with a static member closing while its
 * group rebalanced: strcmp(NULL) crashed the stop); then the protocol of the
 * last rebalance holds. Fetch thread, or the closing thread after it. */
static bool rebalance_cooperative(cs_consumer *c, rd_kafka_t *rk) {
    const char *protocol = rd_kafka_rebalance_protocol(rk);
    if (protocol) c->group.cooperative = !strcmp(protocol, "COOPERATIVE");
    return c->group.cooperative;
}

static void rebalance(cs_consumer *c, rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l) {
    bool cooperative = rebalance_cooperative(c, rk);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        assign_partitions(c, l, cooperative);
        /* Joined, also with nothing assigned (more members than partitions):
         * librdkafka calls this with an empty list then (the classic
         * protocol; see cs__rebalance_check_empty_join for the consumer's). */
        mark_joined(c, l->cnt);
        return;
    }
    bool lost = rd_kafka_assignment_lost(rk);
    if (lost) {
        c->group.lost_since_ms = cs__now_ms();
        if (c->sub->consumer_protocol) c->group.lost_epoch = member_epoch(rk); /* see cs__rebalance_check_empty_join */
    }
    /* An eager revoke starts a rebalance (the member has nothing until the
     * next assign); a lost assignment means the member left the group. A
     * cooperative revoke keeps the rest of the assignment: still joined. */
    if (!cooperative || lost) atomic_store(&c->group.joined, false);
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

void cs__rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *opaque) {
    cs_consumer *c = opaque;
    /* Requests of the application (seeks, pauses) wait for none of it: a
     * revoke's drain may wait for the very handler that made one. */
    cs__control_rebalance_begin(c);
    rebalance(c, rk, err, l);
    cs__control_rebalance_end(c);
}
