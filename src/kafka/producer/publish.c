/* publish.c — what goes out through the broker's producer on a service's
 * behalf: cs_publish and cs_publish_async, a subscription's replies and dead
 * letters (the pipeline's hooks), and Transactional outputs' dead letters and
 * topic check.
 *
 * Threads: any thread publishes; the pipeline's hooks run on workers or
 * settling threads. Each holds the producer's read lock (cs_kafka.producer_lock)
 * only while it queues, so the stop cannot retire the producer under it.
 *
 * Owns: nothing: it queues on the broker's producer. Locks:
 * cs_kafka.producer_lock (its read side; src/lock_order.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "core/delivery_internal.h"
#include "base/error.h"
#include "base/log.h"
#include "kafka/kafka_internal.h"

static cs_err check_record(const cs_kafka *k, const cs_record *rec, const char *what) {
    if (!k || !rec || !rec->topic || !*rec->topic)
        return cs__fail(CS_ERR_ARG, "%s: broker, record and topic are required", what);
    for (size_t i = 0; i < rec->n_headers; i++)
        if (!rec->headers[i].name) return cs__fail(CS_ERR_ARG, "%s(%s): header %zu has no name", what, rec->topic, i);
    return CS_OK;
}

cs_err cs_publish(cs_kafka *k, const cs_record *rec, cs_published *out) {
    cs_err err = check_record(k, rec, "cs_publish");
    if (err) return err;
    cs_publish_wait *w = NULL;
    pthread_rwlock_rdlock(&k->producer_lock);
    err = k->producer ? cs__publish_start(k->producer, rec, &w)
                      : cs__fail(CS_ERR_STATE, "cs_publish(%s): the app is not running", rec->topic);
    pthread_rwlock_unlock(&k->producer_lock);
    return err ? err : cs__publish_finish(w, rec->topic, out);
}

cs_err cs_publish_async(cs_kafka *k, const cs_record *rec, cs_publish_fn done, void *opaque) {
    cs_err err = check_record(k, rec, "cs_publish_async");
    if (err) return err;
    if (!done) return cs__fail(CS_ERR_ARG, "cs_publish_async(%s): completion callback is NULL", rec->topic);
    pthread_rwlock_rdlock(&k->producer_lock);
    err = k->producer ? cs__producer_publish_async(k->producer, rec, done, opaque)
                      : cs__fail(CS_ERR_STATE, "cs_publish_async(%s): the app is not running", rec->topic);
    pthread_rwlock_unlock(&k->producer_lock);
    return err;
}

int cs__publish_reply(void *arg, cs_delivery *d, bool gate, const void *key, size_t key_len, const void *value,
                      size_t value_len) {
    cs_sub *s = arg;
    cs_kafka *k = s->k;
    cs_record r = {.topic = s->reply_topic,
                   .partition = -1,
                   .key = key,
                   .key_len = key_len,
                   .value = value,
                   .value_len = value_len,
                   .parent = d}; /* the reply carries d's traceparent */
    pthread_rwlock_rdlock(&k->producer_lock);
    cs_err err = k->producer ? cs__producer_reply(k->producer, &r, gate ? d : NULL, s->reply_queue_timeout_ms)
                             : cs__fail(CS_ERR_STATE, "reply to %s: the producer is closed", s->reply_topic);
    pthread_rwlock_unlock(&k->producer_lock);
    if (err)
        CS_LOG_WARN("reply not queued subscription=%s topic=%s source_topic=%s partition=%d offset=%lld "
                    "reason=\"%s\"" CS_TRACE_FMT,
                    s->name, s->reply_topic, d->topic, (int)d->partition, (long long)d->offset, cs_errmsg(),
                    CS_TRACE_ARGS(d));
    return err ? -1 : 0;
}

/* The dead-letter record of d: the original key, value and headers plus the
 * provenance headers documented in cstream/kafka.h (cs__dead_letter_headers).
 * `h` has room for cs_delivery_header_count(d) + CS_DLQ_HEADERS entries;
 * `nums` holds the numbers' text. */
static cs_record dead_letter_record(cs_sub *s, cs_delivery *d, const char *reason, cs_header *h, size_t cap,
                                    cs_dlq_numbers *nums) {
    size_t n = cs__dead_letter_headers(d, s->group ? s->group : s->k->default_group, reason, h, cap, nums);
    cs_record r = {.topic = s->dead_letter, .partition = -1, .headers = h, .n_headers = n};
    r.key = cs_delivery_key(d, &r.key_len);
    r.value = cs_delivery_value(d, &r.value_len);
    return r;
}

int cs__publish_dead_letter(void *arg, cs_delivery *d, const char *reason) {
    cs_sub *s = arg;
    cs_kafka *k = s->k;
    size_t cap = cs_delivery_header_count(d) + CS_DLQ_HEADERS;
    cs_header *h = calloc(cap, sizeof *h);
    if (!h) return -1;
    cs_dlq_numbers nums;
    cs_record r = dead_letter_record(s, d, reason, h, cap, &nums);
    pthread_rwlock_rdlock(&k->producer_lock);
    /* Its report logs the WARN line, once the cluster accepted it. */
    cs_err err = k->producer ? cs__producer_dead_letter(k->producer, &r, d, k->queue_timeout_ms, s, reason)
                             : cs__fail(CS_ERR_STATE, "dead letter to %s: the producer is closed", s->dead_letter);
    pthread_rwlock_unlock(&k->producer_lock);
    free(h);
    if (err)
        CS_LOG_WARN("dead-letter record not queued, its source stays open subscription=%s topic=%s "
                    "source_topic=%s partition=%d offset=%lld reason=\"%s\"" CS_TRACE_FMT,
                    s->name, s->dead_letter, d->topic, (int)d->partition, (long long)d->offset, cs_errmsg(),
                    CS_TRACE_ARGS(d));
    return err ? -1 : 0;
}

cs_output *cs__publish_dead_letter_output(void *arg, cs_delivery *d, const char *reason) {
    cs_sub *s = arg;
    size_t cap = cs_delivery_header_count(d) + CS_DLQ_HEADERS;
    cs_header *h = calloc(cap, sizeof *h);
    if (!h) return NULL;
    cs_dlq_numbers nums;
    cs_record r = dead_letter_record(s, d, reason, h, cap, &nums);
    cs_output *o = cs__output_new(&r, cs__inherited_traceparent(&r), cs_delivery_offset(d));
    free(h);
    /* Staged, not sent: the window's transaction writes it if it commits, and
     * an aborted window stages it again (docs/retries.md). */
    if (o) cs__dead_letter_log(&s->dead_letter_log, CS_DLQ_STAGED, s->name, s->dead_letter, d, reason);
    return o;
}

bool cs__publish_output_topic_ok(void *arg, const char *topic) {
    cs_sub *s = arg;
    if (s->reply_topic && !strcmp(topic, s->reply_topic)) return true;
    if (s->dead_letter && !strcmp(topic, s->dead_letter)) return true;
    for (size_t i = 0; i < s->k->n_topics; i++)
        if (!strcmp(topic, s->k->topics[i].name)) return true;
    cs__fail(CS_ERR_ARG,
             "cs_delivery_publish(%s): topic not declared with cs_kafka_topic (outputs of subscription %s may go "
             "only to declared topics, checked at start-up)",
             topic, s->name);
    return false;
}
