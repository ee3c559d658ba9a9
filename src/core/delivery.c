/* delivery.c — cstream/delivery.h, the public face of cs_delivery: its
 * accessors, the reply and reason a handler sets, an output it publishes
 * (cs_delivery_publish, Transactional), a retry's delay, and
 * cs_delivery_settle, which hands the outcome to settle.c. Its life inside
 * the pipeline (alloc, decode, free, discard) is delivery_life.c's; the
 * decoded value and key are read here.
 *
 * Owns: what a handler sets on its delivery (reply, reason, retry delay).
 * Threads: whoever holds the delivery. Accessors read fields the fetch thread
 * wrote before the hand-over (the lane lock orders them), so they need no
 * lock. Locks: cs_delivery_publish reads the pipeline's configuration under
 * the partition lock (a read: partition.c writes the partition). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/delivery_internal.h"
#include "base/error.h"
#include "core/partition_internal.h"
#include "core/pipeline_internal.h"

/* Bytes of a codec's message kept when a typed output adds its topic. */
#define ENCODE_WHY_MAX 1024

const char *cs_delivery_topic(const cs_delivery *d) { return d->topic; }
int32_t cs_delivery_partition(const cs_delivery *d) { return d->partition; }
int64_t cs_delivery_offset(const cs_delivery *d) { return d->offset; }
int64_t cs_delivery_timestamp(const cs_delivery *d) { return d->timestamp; }
int cs_delivery_attempt(const cs_delivery *d) { return d->attempt; }
const char *cs_delivery_traceparent(const cs_delivery *d) { return d && d->traceparent[0] ? d->traceparent : NULL; }

const void *cs_delivery_key(const cs_delivery *d, size_t *len) {
    if (len) *len = d->key ? d->key_len : 0;
    return d->key;
}

const void *cs_delivery_value(const cs_delivery *d, size_t *len) {
    if (len) *len = d->value ? d->value_len : 0;
    return d->value;
}

size_t cs_delivery_header_count(const cs_delivery *d) { return d->msg ? d->part->ops->header_count(d->msg) : 0; }

cs_err cs_delivery_header(const cs_delivery *d, size_t idx, const char **name, const void **value, size_t *len) {
    const char *n = NULL;
    const void *v = NULL;
    size_t l = 0;
    if (!d->msg || d->part->ops->header_at(d->msg, idx, &n, &v, &l) != 0)
        return cs__fail(CS_ERR_ARG, "header %zu: record %s/%d@%lld has %zu headers", idx, d->topic, (int)d->partition,
                        (long long)d->offset, cs_delivery_header_count(d));
    if (name) *name = n;
    if (value) *value = v;
    if (len) *len = v ? l : 0;
    return CS_OK;
}

cs_err cs_delivery_header_get(const cs_delivery *d, const char *name, const void **value, size_t *len) {
    size_t n = cs_delivery_header_count(d);
    for (size_t i = n; i-- > 0;) {
        const char *hn;
        const void *v;
        size_t l;
        if (cs_delivery_header(d, i, &hn, &v, &l) == CS_OK && hn && name && !strcmp(hn, name)) {
            if (value) *value = v;
            if (len) *len = l;
            return CS_OK;
        }
    }
    return cs__fail(CS_ERR_ARG, "header %s: not on record %s/%d@%lld", name ? name : "(null)", d->topic,
                    (int)d->partition, (long long)d->offset);
}

cs_err cs_delivery_reply(cs_delivery *d, const void *key, size_t key_len, const void *value, size_t value_len) {
    if (!d) return cs__fail(CS_ERR_ARG, "cs_delivery_reply: delivery is NULL");
    size_t kl = key ? key_len : 0, vl = value ? value_len : 0;
    char *buf = malloc(kl + vl + 1);
    if (!buf)
        return cs__fail(CS_ERR_NOMEM, "cs_delivery_reply %s/%d@%lld: out of memory", d->topic, (int)d->partition,
                        (long long)d->offset);
    if (kl) memcpy(buf, key, kl);
    if (vl) memcpy(buf + kl, value, vl);
    free(d->reply_buf);
    d->reply_buf = buf;
    d->reply_key_len = kl;
    d->reply_value_len = vl;
    d->reply_key_null = !key;
    d->reply_value_null = !value;
    return CS_OK;
}

const void *cs_delivery_decoded(const cs_delivery *d) { return d->decoded; }
const void *cs_delivery_decoded_key(const cs_delivery *d) { return d ? d->decoded_key : NULL; }

cs_err cs_delivery_set_reason(cs_delivery *d, const char *fmt, ...) {
    if (!d || !fmt) return cs__fail(CS_ERR_ARG, "cs_delivery_set_reason: missing argument");
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *copy = strdup(buf);
    if (!copy) return cs__fail(CS_ERR_NOMEM, "cs_delivery_set_reason: out of memory");
    free(d->reason);
    d->reason = copy;
    return CS_OK;
}

const char *cs_delivery_reason(const cs_delivery *d) { return d->reason; }

/* The codec's encode for one of d's outputs; a registry that cannot be
 * reached marks the run, so that a retry of it is free (settle.c). */
static cs_err encode_for(cs_delivery *d, const cs_codec *codec, const cs_type *type, const void *value, char **buf,
                         size_t *len) {
    cs_err err = codec->encode(codec, type, value, buf, len);
    if (err == CS_ERR_UNAVAILABLE) d->encode_unavailable = true;
    return err;
}

cs_err cs_delivery_reply_encoded(cs_delivery *d, const cs_codec *codec, const cs_type *type, const void *value) {
    if (!d || !codec || !type || !value) return cs__fail(CS_ERR_ARG, "cs_delivery_reply_encoded: missing argument");
    char *buf = NULL;
    size_t len = 0;
    cs_err err = encode_for(d, codec, type, value, &buf, &len);
    if (err) return err;
    err = cs_delivery_reply(d, NULL, 0, buf, len);
    free(buf);
    return err;
}

cs_err cs_delivery_publish_encoded(cs_delivery *d, const char *topic, const void *key, size_t key_len,
                                   const cs_codec *codec, const cs_type *type, const void *value) {
    if (!d || !topic || !codec || !type || !value)
        return cs__fail(CS_ERR_ARG, "cs_delivery_publish_encoded: delivery, topic, codec, type and value are required");
    char *buf = NULL;
    size_t len = 0;
    cs_err err = encode_for(d, codec, type, value, &buf, &len);
    if (err) {
        char why[ENCODE_WHY_MAX];
        snprintf(why, sizeof why, "%s", cs_errmsg());
        free(buf);
        return cs__fail(err,
                        "cs_delivery_publish_encoded(%s): value of type %s does not encode with the %s codec, "
                        "nothing staged: %s",
                        topic, type->name, codec->name ? codec->name : "(unnamed)", why);
    }
    cs_record rec = {.topic = topic, .partition = -1, .key = key, .key_len = key_len, .value = buf, .value_len = len};
    err = cs_delivery_publish(d, &rec);
    free(buf);
    return err;
}

cs_outcome cs_delivery_retry_after(cs_delivery *d, int delay_ms) {
    d->retry_at_ms = cs__now_ms() + (delay_ms > 0 ? delay_ms : 0);
    return CS_RETRY;
}

cs_err cs_delivery_settle(cs_delivery *d, cs_outcome outcome) {
    if (!d) return cs__fail(CS_ERR_ARG, "cs_delivery_settle: delivery is NULL");
    if (outcome != CS_ACK && outcome != CS_DROP && outcome != CS_RETRY)
        return cs__fail(CS_ERR_ARG, "cs_delivery_settle %s/%d@%lld: outcome must be ack, drop or retry", d->topic,
                        (int)d->partition, (long long)d->offset);
    return cs__settle_or_reply(d, outcome);
}

cs_err cs_delivery_publish(cs_delivery *d, const cs_record *rec) {
    if (!d || !rec || !rec->topic || !*rec->topic)
        return cs__fail(CS_ERR_ARG, "cs_delivery_publish: delivery, record and topic are required");
    for (size_t i = 0; i < rec->n_headers; i++)
        if (!rec->headers[i].name)
            return cs__fail(CS_ERR_ARG, "cs_delivery_publish(%s): header %zu has no name", rec->topic, i);
    cs_part *part = d->part;
    pthread_mutex_lock(&part->lock);
    cs_pipeline *p = part->pipe;
    bool transactional = p && p->cfg.transactional;
    bool (*topic_ok)(void *, const char *) = transactional ? p->cfg.output_topic_ok : NULL;
    void *topic_arg = transactional ? p->cfg.output_topic_arg : NULL;
    pthread_mutex_unlock(&part->lock);
    if (!transactional)
        return cs__fail(CS_ERR_STATE,
                        "cs_delivery_publish(%s): record %s/%d@%lld is not on a Transactional subscription (or it "
                        "closed); use cs_publish or cs_publish_async",
                        rec->topic, d->topic, (int)d->partition, (long long)d->offset);
    if (topic_ok && !topic_ok(topic_arg, rec->topic)) return CS_ERR_ARG;
    cs_record copy = *rec;
    if (!copy.parent) copy.parent = d; /* an output of d follows from d's trace */
    cs_output *out = cs__output_new(&copy, cs__inherited_traceparent(&copy), d->offset);
    if (!out) return cs__fail(CS_ERR_NOMEM, "cs_delivery_publish(%s): out of memory", rec->topic);
    out->source_attempt = (uint32_t)cs__counted_attempts(d);
    cs__delivery_add_output(d, out);
    return CS_OK;
}

const cs_run_store *cs__delivery_run_store(cs_delivery *d) {
    cs_part *part = d->part;
    pthread_mutex_lock(&part->lock);
    cs_pipeline *p = part->pipe;
    /* Assigned too: a partition being revoked, or fenced (Database), takes
     * no more writes; its record stays open and is read again. */
    bool current = p && d->epoch == part->epoch && part->assigned && !atomic_load(&p->crashed);
    const cs_run_store *rs = current ? p->cfg.store : NULL;
    pthread_mutex_unlock(&part->lock);
    return rs;
}
