/* reset.c — the broker's side of the operators' `reset-offsets` command
 * (src/ops/cli_reset.c asks through cs_broker_ops.reset_offsets): finds the
 * group and its partitions, refuses while the group has live members, plans
 * each partition's new position from the cluster's watermarks, timestamp
 * index or committed position, and with `execute` commits the plan.
 *
 * The commit carries attempts metadata that says "clean, no counts"
 * (cs__meta_encode): a restarted Tracked service reads it as a graceful stop
 * with nothing in flight, so the records at the new position start at attempt
 * 1 and none is treated as suspect. That is what an operator's move means:
 * the attempt counts of the old position belonged to other records.
 *
 * Threads: the thread of cs_app_main, with the app not running; it uses a
 * short-lived consumer handle of its own that never joins the group.
 *
 * Owns: the plan it returns, and its one admin request (a group reader,
 * cs__committed_reader, reads the positions). Locks: none. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attempts_meta.h"
#include "base/error.h"
#include "kafka/kafka_internal.h"

/* Each cluster round trip: describe, metadata, committed, watermarks, times, commit. */
enum { RESET_TIMEOUT_MS = 10000 };
/* Members named in the refusal; the count says how many there are in all. */
enum { MEMBERS_NAMED = 3 };

/* ---- which group, which topics ------------------------------------------------------ */

static const char *group_of(const cs_sub *s) { return s->group ? s->group : s->k->default_group; }

static cs_err pick_group(cs_kafka *k, const char *asked, const char **out) {
    if (asked) {
        *out = asked;
        return CS_OK;
    }
    const char *only = NULL;
    bool several = false;
    char names[512] = "";
    for (size_t i = 0; i < k->n_subs; i++) {
        const char *g = group_of(k->subs[i]);
        bool seen = false;
        for (size_t j = 0; g && j < i; j++) seen = seen || (group_of(k->subs[j]) && !strcmp(group_of(k->subs[j]), g));
        if (!g || seen) continue;
        if (only) several = true;
        else only = g;
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", g);
    }
    if (several)
        return cs__fail(CS_ERR_ARG,
                        "reset-offsets: the service reads with several groups (%s): choose one with --group", names);
    if (!only) return cs__fail(CS_ERR_GROUP, "reset-offsets: the service has no consumer group: name one with --group");
    *out = only;
    return CS_OK;
}

/* The partitions to plan, before their positions are known: from the scopes,
 * else every topic the group's subscriptions read; each checked against the
 * cluster's metadata. */
static cs_err add_topic(rd_kafka_topic_partition_list_t *l, const struct rd_kafka_metadata *md, const char *topic,
                        const int32_t *parts, size_t n) {
    const struct rd_kafka_metadata_topic *t = NULL;
    for (int i = 0; i < md->topic_cnt && !t; i++)
        if (!strcmp(md->topics[i].topic, topic) && !md->topics[i].err) t = &md->topics[i];
    if (!t) return cs__fail(CS_ERR_TOPIC, "reset-offsets: topic %s does not exist on the cluster", topic);
    for (size_t p = 0; p < n; p++)
        if (parts[p] < 0 || parts[p] >= t->partition_cnt)
            return cs__fail(CS_ERR_TOPIC, "reset-offsets: topic %s has no partition %d (it has %d)", topic,
                            (int)parts[p], t->partition_cnt);
    if (n) {
        for (size_t p = 0; p < n; p++)
            if (!rd_kafka_topic_partition_list_find(l, topic, parts[p]))
                rd_kafka_topic_partition_list_add(l, topic, parts[p]);
    } else {
        for (int p = 0; p < t->partition_cnt; p++)
            if (!rd_kafka_topic_partition_list_find(l, topic, p)) rd_kafka_topic_partition_list_add(l, topic, p);
    }
    return CS_OK;
}

static cs_err plan_partitions(rd_kafka_t *rk, cs_kafka *k, const cs_broker_reset *req, const char *group,
                              rd_kafka_topic_partition_list_t *l) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, NULL, &md, RESET_TIMEOUT_MS);
    if (err)
        return cs__fail(CS_ERR_KAFKA, "reset-offsets: cannot read the cluster's metadata from %s: %s", k->bootstrap,
                        rd_kafka_err2str(err));
    cs_err result = CS_OK;
    for (size_t i = 0; !result && i < req->n_scopes; i++)
        result = add_topic(l, md, req->scopes[i].topic, req->scopes[i].partitions, req->scopes[i].n_partitions);
    for (size_t i = 0; !result && !req->n_scopes && i < k->n_subs; i++)
        if (group_of(k->subs[i]) && !strcmp(group_of(k->subs[i]), group) && k->subs[i]->pattern)
            result = cs__fail(CS_ERR_ARG,
                              "reset-offsets: subscription %s of group %s is a pattern: name its topics with --topic",
                              k->subs[i]->name, group);
        else if (group_of(k->subs[i]) && !strcmp(group_of(k->subs[i]), group))
            for (size_t t = 0; !result && t < k->subs[i]->n_topics; t++)
                result = add_topic(l, md, k->subs[i]->topics[t], NULL, 0);
    rd_kafka_metadata_destroy(md);
    if (!result && l->cnt == 0)
        result = cs__fail(CS_ERR_ARG,
                          "reset-offsets: no subscription of the service reads with group %s: name the "
                          "topics with --topic",
                          group);
    return result;
}

/* ---- live members ---------------------------------------------------------------------- */

/* Refuses while the group has members. A static member (group.instance.id)
 * that crashed is still a member until its session times out. */
static cs_err refuse_live_members(rd_kafka_t *rk, const char *group) {
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    char why[256];
    rd_kafka_AdminOptions_set_request_timeout(opts, RESET_TIMEOUT_MS, why, sizeof why);
    const char *groups[] = {group};
    rd_kafka_DescribeConsumerGroups(rk, groups, 1, opts, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, RESET_TIMEOUT_MS + 1000);
    cs_err result = CS_OK;
    const rd_kafka_DescribeConsumerGroups_result_t *res = ev ? rd_kafka_event_DescribeConsumerGroups_result(ev) : NULL;
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t **descs =
        res ? rd_kafka_DescribeConsumerGroups_result_groups(res, &n) : NULL;
    if (!ev || rd_kafka_event_error(ev) || n != 1) {
        result = cs__fail(CS_ERR_KAFKA, "reset-offsets: cannot tell whether group %s has live members: %s", group,
                          !ev                        ? "no answer"
                          : rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
                                                     : "no description");
    } else {
        const rd_kafka_error_t *e = rd_kafka_ConsumerGroupDescription_error(descs[0]);
        size_t members = rd_kafka_ConsumerGroupDescription_member_count(descs[0]);
        rd_kafka_consumer_group_state_t state = rd_kafka_ConsumerGroupDescription_state(descs[0]);
        if (e && rd_kafka_error_code(e) != RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) {
            result =
                cs__fail(CS_ERR_KAFKA, "reset-offsets: cannot describe group %s: %s", group, rd_kafka_error_string(e));
        } else if (!e && members > 0) {
            char who[512] = "";
            for (size_t i = 0; i < members && i < MEMBERS_NAMED; i++) {
                const rd_kafka_MemberDescription_t *m = rd_kafka_ConsumerGroupDescription_member(descs[0], i);
                const char *inst = rd_kafka_MemberDescription_group_instance_id(m);
                size_t used = strlen(who);
                snprintf(who + used, sizeof who - used, "%s%s@%s%s%s", i ? ", " : "",
                         rd_kafka_MemberDescription_client_id(m), rd_kafka_MemberDescription_host(m),
                         inst ? " static=" : "", inst ? inst : "");
            }
            /* librdkafka >= 2.12 describes consumer-protocol groups with
             * ConsumerGroupDescribe and says which kind the group is. */
            const char *kind = "";
#if CS_RDKAFKA_HAS_CONSUMER_PROTOCOL
            if (rd_kafka_ConsumerGroupDescription_type(descs[0]) == RD_KAFKA_CONSUMER_GROUP_TYPE_CONSUMER)
                kind = " of the consumer group protocol (KIP-848; the session is the broker's "
                       "group.consumer.session.timeout.ms)";
            else if (rd_kafka_ConsumerGroupDescription_type(descs[0]) == RD_KAFKA_CONSUMER_GROUP_TYPE_CLASSIC)
                kind = " of the classic group protocol";
#endif
            result = cs__fail(CS_ERR_STATE,
                              "reset-offsets: group %s%s has %zu live member(s) (state %s: %s%s): stop every "
                              "instance of the service first. A static member (group.instance.id) that crashed "
                              "counts as live until its session times out (session.timeout.ms)",
                              group, kind, members, rd_kafka_consumer_group_state_name(state), who,
                              members > MEMBERS_NAMED ? ", ..." : "");
        }
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    return result;
}

/* ---- the plan ----------------------------------------------------------------------------- */

/* current + by, saturated at the int64 range (--shift-by takes any number;
 * clamp then brings it into the partition). */
static int64_t shifted(int64_t current, int64_t by) {
    if (by > 0 && current > INT64_MAX - by) return INT64_MAX;
    if (by < 0 && current < INT64_MIN - by) return INT64_MIN;
    return current + by;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi, char *note, size_t size) {
    if (v < lo) {
        snprintf(note, size, "(earliest kept record; %lld is gone)", (long long)v);
        return lo;
    }
    if (v > hi) {
        snprintf(note, size, "(end of the partition; %lld is past it)", (long long)v);
        return hi;
    }
    return v;
}

/* Timestamps to offsets, for every partition at once; an answer of -1 (no
 * record at or after the time) is the end of the partition. */
static cs_err times_to_offsets(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *l, int64_t ms,
                               rd_kafka_topic_partition_list_t **out) {
    rd_kafka_topic_partition_list_t *times = rd_kafka_topic_partition_list_copy(l);
    for (int i = 0; i < times->cnt; i++) times->elems[i].offset = ms;
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(rk, times, RESET_TIMEOUT_MS);
    for (int i = 0; !err && i < times->cnt; i++)
        if (times->elems[i].err) {
            cs__fail(CS_ERR_KAFKA, "reset-offsets: offset of time %lld in %s/%d: %s", (long long)ms,
                     times->elems[i].topic, (int)times->elems[i].partition, rd_kafka_err2str(times->elems[i].err));
            rd_kafka_topic_partition_list_destroy(times);
            return CS_ERR_KAFKA;
        }
    if (err) {
        rd_kafka_topic_partition_list_destroy(times);
        return cs__fail(CS_ERR_KAFKA, "reset-offsets: offsets of time %lld: %s", (long long)ms, rd_kafka_err2str(err));
    }
    *out = times;
    return CS_OK;
}

static cs_err make_plan(rd_kafka_t *rk, const cs_broker_reset *req, const char *group,
                        rd_kafka_topic_partition_list_t *l, cs_broker_reset_row *rows) {
    rd_kafka_topic_partition_list_t *committed = rd_kafka_topic_partition_list_copy(l);
    rd_kafka_resp_err_t err = rd_kafka_committed(rk, committed, RESET_TIMEOUT_MS);
    rd_kafka_topic_partition_list_t *times = NULL;
    cs_err result =
        err ? cs__fail(CS_ERR_KAFKA, "reset-offsets: committed positions of group %s: %s", group, rd_kafka_err2str(err))
            : CS_OK;
    if (!result && req->to == CS_RESET_TIME) result = times_to_offsets(rk, l, req->value, &times);
    for (int i = 0; !result && i < l->cnt; i++) {
        rd_kafka_topic_partition_t *e = &l->elems[i];
        cs_broker_reset_row *r = &rows[i];
        snprintf(r->topic, sizeof r->topic, "%s", e->topic);
        r->partition = e->partition;
        r->current = committed->elems[i].offset >= 0 ? committed->elems[i].offset : -1;
        int64_t lo = 0, hi = 0;
        err = rd_kafka_query_watermark_offsets(rk, e->topic, e->partition, &lo, &hi, RESET_TIMEOUT_MS);
        if (err) {
            result = cs__fail(CS_ERR_KAFKA, "reset-offsets: watermarks of %s/%d: %s", e->topic, (int)e->partition,
                              rd_kafka_err2str(err));
            break;
        }
        switch (req->to) {
        case CS_RESET_EARLIEST: r->next = lo; break;
        case CS_RESET_LATEST: r->next = hi; break;
        case CS_RESET_OFFSET: r->next = clamp(req->value, lo, hi, r->note, sizeof r->note); break;
        case CS_RESET_TIME: r->next = times->elems[i].offset >= 0 ? times->elems[i].offset : hi; break;
        case CS_RESET_SHIFT:
            if (r->current < 0) {
                r->next = -1;
                snprintf(r->note, sizeof r->note, "(unchanged: no committed position to shift)");
            } else r->next = clamp(shifted(r->current, req->value), lo, hi, r->note, sizeof r->note);
            break;
        }
        e->offset = r->next;
    }
    if (times) rd_kafka_topic_partition_list_destroy(times);
    rd_kafka_topic_partition_list_destroy(committed);
    return result;
}

/* Commits the planned positions (partitions left unchanged are left out). */
static cs_err commit_plan(rd_kafka_t *rk, const char *group, const rd_kafka_topic_partition_list_t *l,
                          const cs_broker_reset_row *rows) {
    char meta[CS_META_MAX];
    cs__meta_encode(meta, sizeof meta, true, NULL, NULL, 0); /* clean, no attempt counts */
    rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_new(l->cnt);
    for (int i = 0; i < l->cnt; i++) {
        if (rows[i].next < 0) continue;
        rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(c, rows[i].topic, rows[i].partition);
        e->offset = rows[i].next;
        e->metadata = strdup(meta);
        e->metadata_size = e->metadata ? strlen(meta) : 0;
    }
    rd_kafka_resp_err_t err = c->cnt ? rd_kafka_commit(rk, c, 0) : RD_KAFKA_RESP_ERR_NO_ERROR;
    cs_err result = CS_OK;
    for (int i = 0; !err && i < c->cnt && !result; i++)
        if (c->elems[i].err)
            result = cs__fail(CS_ERR_KAFKA, "reset-offsets: commit of %s/%d to group %s failed: %s", c->elems[i].topic,
                              (int)c->elems[i].partition, group, rd_kafka_err2str(c->elems[i].err));
    if (err)
        result = cs__fail(CS_ERR_KAFKA,
                          "reset-offsets: commit to group %s failed: %s (a member may have joined "
                          "meanwhile; nothing is committed when the group has members)",
                          group, rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(c);
    return result;
}

cs_err cs__kafka_reset_offsets(void *impl, const cs_broker_reset *req, cs_broker_reset_row **rows_out, size_t *n_rows) {
    cs_kafka *k = impl;
    *rows_out = NULL;
    *n_rows = 0;
    if (k->embedded || !k->bootstrap)
        return cs__fail(CS_ERR_STATE, "reset-offsets: the service uses the embedded cluster, whose positions live in "
                                      "its process only: name a cluster with --brokers or CSTREAM_BROKERS");
    const char *group = NULL;
    cs_err err = pick_group(k, req->group, &group);
    if (err) return err;
    rd_kafka_t *rk = cs__committed_reader(k->bootstrap, group, k);
    if (!rk) return CS_ERR_KAFKA;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(16);
    err = refuse_live_members(rk, group);
    if (!err) err = plan_partitions(rk, k, req, group, l);
    cs_broker_reset_row *rows = err ? NULL : calloc((size_t)l->cnt, sizeof *rows);
    if (!err && !rows) err = cs__fail(CS_ERR_NOMEM, "reset-offsets: out of memory");
    if (!err) err = make_plan(rk, req, group, l, rows);
    if (!err) {
        *rows_out = rows;
        *n_rows = (size_t)l->cnt;
        /* Asked again right before the commit: the plan took a few round trips. */
        if (req->execute) err = refuse_live_members(rk, group);
        if (!err && req->execute) err = commit_plan(rk, group, l, rows);
    } else free(rows);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return err;
}
