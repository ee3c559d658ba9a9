/* consumer_errors.c — what librdkafka reports to a consumer that is not a
 * record: subscribed topics that go away (and a log that restarted), client
 * errors (error_cb), error records, fatal errors, and the out-of-memory stop
 * of the fetch path. It calls only fetch_parts.c of the consumer's files.
 *
 * Owns: c->errors, c->rejoin. Locks: none. Threads: the fetch thread (error
 * callbacks run inside its poll), or the closing thread after the fetch thread
 * exited; cs__errors_init and cs__errors_free, the consumer's start and
 * destroy; cs__errors_broker_answered, /readyz's thread (cs__consumer_ready). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "base/error.h"
#include "kafka/consumer/consumer_internal.h"

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

/* Where the topic of an error comes from. librdkafka names it in a field
 * wherever its API carries one: an error record (a consume error, and a
 * partition's error taken from recq: rd_kafka_consume_cb makes every op a
 * message) has m->rkt and m->partition, and cstream reads those. error_cb is
 * the exception: librdkafka 2.0.2's rd_kafka_poll_cb (rdkafka.c) hands a
 * partition's RD_KAFKA_OP_ERR to error_cb as (err, errstr) and drops the
 * partition the op carries (rko_rktp), although rd_kafka_toppar_enq_error
 * formats its errstr as "T [p]: reason (error)". rd_kafka_event_topic_partition
 * would give it, but only to an event-API poll, and the consumer queue is
 * served by rd_kafka_consumer_poll for its rebalance callback. So for error_cb,
 * and only there, the topic is read from the start of the reason
 * (cs__topic_of_reason). Check again when moving past 2.0.2. */

/* The topic name librdkafka's error_cb reason starts with (followed by ' ',
 * ':' or " ["), into buf; false if there is none or it does not fit. The
 * fallback described above: error_cb only. */
bool cs__topic_of_reason(const char *reason, char *buf, size_t size) {
    size_t n = reason ? strcspn(reason, " :[") : 0;
    if (n == 0 || n >= size) return false;
    memcpy(buf, reason, n);
    buf[n] = '\0';
    return true;
}

bool cs__topic_error(rd_kafka_resp_err_t err) {
    return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
           err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
}

/* The index of the subscribed topic named `topic`, or -1. A pattern
 * subscription has one entry, its pattern: index 0 for every topic it
 * matches, so its per-topic counters stay one series. */
int cs__subscribed_topic_in(const cs_consumer *c, const char *topic) {
    if (!topic) return -1;
    if (c->sub->pattern) return cs__sub_has_topic(c->sub, topic) ? 0 : -1;
    for (size_t i = 0; i < c->sub->n_topics; i++)
        if (!strcmp(topic, c->sub->topics[i])) return (int)i;
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
        cs__part_mark_log_unknown(part);
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
void cs__errors_log_restart(cs_consumer *c, cs_part *part, const char *topic, int64_t offset) {
    cs__part_clear_log_unknown(part);
    int64_t next = cs__part_next_offset(part);
    if (next < 0 || offset >= next) return;
    CS_LOG_WARN("partition log restarted (topic deleted and created again): read from its new start "
                "subscription=%s topic=%s partition=%d offset=%lld old_next_offset=%lld",
                c->sub->name, topic, (int)cs__part_number(part), (long long)offset, (long long)next);
    if (!c->tracked) return; /* Auto tracks no offsets: nothing to forget */
    /* A new epoch, as a Transactional rewind makes: the old topic's
     * deliveries still running or pending stay on the in-flight list (their
     * settlements are stale; a revoke or the stop waits for them). Releasing
     * them here would free payloads their handlers are reading. */
    cs__pipeline_renew_epoch(c->pipe, part);
}

/* A topic a pattern subscription matched went away: normal for a pattern
 * (the topic stops matching, the group revokes its partitions), so no ERROR
 * and no gauge; its partitions still assigned get the same care as a
 * subscribed topic's (mark_topic_partitions). */
static void pattern_topic_gone(cs_consumer *c, const char *topic, rd_kafka_resp_err_t err, const char *reason) {
    atomic_store(&c->errors.topic_vanished, true);
    mark_topic_partitions(c, topic);
    uint64_t skipped = 0;
    if (cs__ratelimit_allow(&c->error_warning, 5000, &skipped))
        CS_LOG_INFO("topic matched by the pattern not available (deleted): its partitions are revoked "
                    "subscription=%s topic=%s error=%s reason=\"%s\" similar_since_last=%llu",
                    c->sub->name, topic, rd_kafka_err2name(err), reason, (unsigned long long)skipped);
}

void cs__topic_unavailable(cs_consumer *c, int i, rd_kafka_resp_err_t err, const char *source, const char *reason) {
    atomic_store(&c->errors.topic_vanished, true);
    if (atomic_exchange(&c->errors.topic_unavailable[i], true)) return; /* said so already */
    atomic_fetch_add(&c->errors.n_unavailable, 1);
    mark_topic_partitions(c, c->sub->topics[i]);
    if (c->sub->allow_missing && !atomic_load(&c->errors.topic_seen[i])) {
        /* Allowed to be missing and never assigned yet: a topic still to come. */
        CS_LOG_INFO("subscribed topic does not exist yet: the subscription consumes it once it appears "
                    "subscription=%s group=%s topic=%s error=%s source=%s",
                    c->sub->name, c->sub->group ? c->sub->group : c->sub->k->default_group, c->sub->topics[i],
                    rd_kafka_err2name(err), source);
        return;
    }
    CS_LOG_ERR("subscribed topic not available (deleted, or not visible to this client): nothing is committed "
               "for it until it is back, the subscription keeps running and consumes it again then "
               "subscription=%s group=%s topic=%s error=%s source=%s reason=\"%s\"",
               c->sub->name, c->sub->group ? c->sub->group : c->sub->k->default_group, c->sub->topics[i],
               rd_kafka_err2name(err), source, reason);
}

/* Fetch thread: a partition of the topic was assigned again, or a record of
 * it arrived (a topic recreated before the group rebalanced stays assigned). */
void cs__topic_available(cs_consumer *c, const char *topic) {
    if (c->sub->pattern) return; /* no per-topic availability: topics come and go */
    if (c->sub->allow_missing) {
        int seen = cs__subscribed_topic_in(c, topic);
        if (seen >= 0) atomic_store(&c->errors.topic_seen[seen], true);
    }
    if (atomic_load_explicit(&c->errors.n_unavailable, memory_order_relaxed) == 0) return;
    int i = cs__subscribed_topic_in(c, topic);
    if (i < 0 || !atomic_exchange(&c->errors.topic_unavailable[i], false)) return;
    atomic_fetch_sub(&c->errors.n_unavailable, 1);
    CS_LOG_INFO("subscribed topic available again subscription=%s topic=%s", c->sub->name, topic);
}

/* ---- errors ---------------------------------------------------------------- */

/* A join refused with UNRELEASED_INSTANCE_ID under the consumer group
 * protocol: whether the fetch thread should create the consumer again and
 * retry (consumer.c, rejoin) rather than stop: until the bound that the
 * first retry reads from the broker (consumer.c, rejoin_bound) has passed
 * since the first refusal. */
bool cs__consumer_rejoin_later(cs_consumer *c) {
    if (!c->rejoin_conf || atomic_load(&c->group.joined) || !c->sub->consumer_protocol) return false;
    int64_t now = cs__now_ms();
    if (!c->rejoin.first_ms) c->rejoin.first_ms = now;
    if (c->rejoin_bound_ms && now - c->rejoin.first_ms >= c->rejoin_bound_ms) return false;
    cs__rejoin_ask(c, false);
    return true;
}

void cs__rejoin_ask(cs_consumer *c, bool stalled) {
    atomic_fetch_add(&c->rejoin.count, 1);
    c->rejoin.wanted = true;
    if (stalled) c->rejoin.stalled = true;
}

bool cs__rejoin_take(cs_consumer *c) {
    bool stalled = c->rejoin.stalled;
    c->rejoin.wanted = c->rejoin.stalled = false;
    return stalled;
}

/* ---- the topic flags ------------------------------------------------------- */

cs_err cs__errors_init(cs_consumer *c, const cs_sub *s) {
    c->errors.topic_unavailable = calloc(s->n_topics, sizeof *c->errors.topic_unavailable);
    if (s->allow_missing) c->errors.topic_seen = calloc(s->n_topics, sizeof *c->errors.topic_seen);
    if (!c->errors.topic_unavailable || (s->allow_missing && !c->errors.topic_seen))
        return cs__fail(CS_ERR_NOMEM, "subscription %s: out of memory", s->name);
    /* A pattern's topics may be deleted at any time, without the error that
     * marks a subscribed topic gone: destroy the handle as after a loss
     * (destroy_handle), bounded, in case one of them was. */
    if (s->pattern) atomic_store(&c->errors.topic_vanished, true);
    return CS_OK;
}

void cs__errors_free(cs_consumer *c) {
    free(c->errors.topic_unavailable);
    free(c->errors.topic_seen);
}

void cs__errors_broker_answered(cs_consumer *c) { atomic_store(&c->errors.brokers_down, false); }

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
#if CS_RDKAFKA_HAS_CONSUMER_PROTOCOL
    /* Under the consumer protocol (KIP-848) a static member that joins while
     * the broker still holds a member with its group.instance.id gets
     * UNRELEASED_INSTANCE_ID, which librdkafka makes fatal. After a crash
     * (SIGKILL) the holder is the dead process itself, until the broker's
     * group.consumer.session.timeout.ms (45 s by default) expires it; a second
     * live process keeps it for ever. cstream creates the consumer again
     * and retries, with a backoff, for a bounded time
     * (cs__consumer_rejoin_later, consumer.c); past the bound the holder is
     * taken for a live process and the app stops, committing nothing
     * (nothing was assigned yet). */
    if (orig == RD_KAFKA_RESP_ERR_UNRELEASED_INSTANCE_ID && c->sub->static_id && cs__consumer_rejoin_later(c)) return;
    if (orig == RD_KAFKA_RESP_ERR_UNRELEASED_INSTANCE_ID && c->sub->static_id) {
        cs__app_fatal(c->app,
                      "%s: refused at join (UNRELEASED_INSTANCE_ID): group %s still holds a member with "
                      "group.instance.id %s, either this instance's previous process that crashed (the broker "
                      "releases it when group.consumer.session.timeout.ms, 45 s by default, expires: restart "
                      "after that) or another live process with instance id %s (give every running instance its "
                      "own); this consumer stops and commits nothing (refusals retried before: %llu, for %lld ms); "
                      "librdkafka: %s",
                      c->who, c->sub->group ? c->sub->group : c->sub->k->default_group, c->sub->static_id,
                      c->sub->k->instance_id, (unsigned long long)atomic_load(&c->rejoin.count),
                      (long long)(c->rejoin.first_ms ? cs__now_ms() - c->rejoin.first_ms : 0), why);
        return;
    }
    /* A broker that knows ConsumerGroupHeartbeat but does not serve the
     * consumer protocol (Kafka 3.7-3.9 where it is not enabled, or a 4.x
     * broker whose group.coordinator.rebalance.protocols leaves it out)
     * answers UNSUPPORTED_VERSION, which librdkafka makes fatal. A broker
     * without the API at all is not answered: librdkafka keeps looking for
     * a coordinator and the consumer never joins (docs/guide.md). */
    if (c->sub->consumer_protocol &&
        (orig == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION || orig == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE) &&
        strstr(why, "ConsumerGroupHeartbeat")) {
        cs__app_fatal(c->app,
                      "%s: the broker refused the consumer group protocol (group.protocol=consumer, KIP-848) for "
                      "group %s with %s: it needs Kafka 4.0 or later with the consumer protocol in "
                      "group.coordinator.rebalance.protocols (this client: librdkafka %s, which has it); ask for "
                      "group.protocol=classic or upgrade the broker; librdkafka: %s",
                      c->who, c->sub->group ? c->sub->group : c->sub->k->default_group, rd_kafka_err2name(orig),
                      rd_kafka_version_str(), why);
        return;
    }
#endif
    cs__app_fatal(c->app, "%s: librdkafka fatal error %s: %s", c->who, rd_kafka_err2name(orig), why);
}

void cs__consumer_on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    cs_consumer *c = opaque;
    char topic[CS_TOPIC_NAME_MAX + 1]; /* error_cb has no topic field in librdkafka 2.0.2: see above */
    int gone = cs__topic_error(err) && cs__topic_of_reason(reason, topic, sizeof topic)
                   ? cs__subscribed_topic_in(c, topic)
                   : -1;
    if (gone >= 0 && c->sub->pattern) {
        pattern_topic_gone(c, topic, err, reason);
        return;
    }
    if (gone >= 0) {
        cs__topic_unavailable(c, gone, err, "error_cb", reason);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, why, sizeof why);
        cs__consumer_fatal_error(c, orig, why);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) atomic_store(&c->errors.brokers_down, true);
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

/* A consumer's fatal error arrives as an error record (librdkafka 2.0.2 does
 * not send it to error_cb for high-level consumers). */
static bool report_if_fatal(cs_consumer *c) {
    char why[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(c->rk, why, sizeof why);
    if (!orig) return false;
    cs__consumer_fatal_error(c, orig, why);
    return true;
}

void cs__consumer_on_record_error(cs_consumer *c, const rd_kafka_message_t *m) {
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return;
    if (m->err == RD_KAFKA_RESP_ERR__FATAL && report_if_fatal(c)) return;
    /* The topic and partition are fields of the error record (m->rkt is a
     * light-weight topic for a subscribed topic's error): no reason parsing. */
    const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL;
    int gone = cs__topic_error(m->err) ? cs__subscribed_topic_in(c, topic) : -1;
    if (gone >= 0 && c->sub->pattern) {
        pattern_topic_gone(c, topic, m->err, rd_kafka_message_errstr(m));
        return;
    }
    if (gone >= 0) {
        cs__topic_unavailable(c, gone, m->err, "error_record", rd_kafka_message_errstr(m));
        return;
    }
    if (!topic) topic = "-";
    uint64_t skipped = 0;
    if (cs__ratelimit_allow(&c->error_warning, 5000, &skipped))
        CS_LOG_WARN("consume error subscription=%s topic=%s partition=%d offset=%lld error=%s reason=\"%s\"",
                    c->sub->name, topic, (int)m->partition, (long long)m->offset, rd_kafka_err2name(m->err),
                    rd_kafka_message_errstr(m));
}

/* The record at topic/partition@offset was not handed out: stop the app, and
 * hand out nothing more, so that no later record can be settled and commit a
 * position past it (it is read again after the restart). */
void cs__fetch_out_of_memory(cs_consumer *c, const char *topic, int32_t partition, int64_t offset, const char *what) {
    c->errors.out_of_memory = true;
    cs__app_fatal(c->app, "%s: out of memory %s at %s/%d@%lld; nothing after it is handed out or committed", c->who,
                  what, topic, (int)partition, (long long)offset);
}
