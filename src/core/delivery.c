/* delivery.c — the public accessors of cs_delivery and its release (and its
 * discard: a delivery that will not run leaves its partition's held count).
 * Accessors read fields the fetch thread wrote before the hand-over (the lane
 * lock orders them), so they need no lock. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delivery_internal.h"
#include "error.h"
#include "partition_internal.h"
#include "pipeline_internal.h"

const char *cs_delivery_topic(const cs_delivery *d) { return d->topic; }
int32_t cs_delivery_partition(const cs_delivery *d) { return d->partition; }
int64_t cs_delivery_offset(const cs_delivery *d) { return d->offset; }
int64_t cs_delivery_timestamp(const cs_delivery *d) { return d->timestamp; }
int cs_delivery_attempt(const cs_delivery *d) { return d->attempt; }
const char *cs_delivery_traceparent(const cs_delivery *d) { return d && d->traceparent[0] ? d->traceparent : NULL; }

const char *cs__inherited_traceparent(const cs_record *r) {
    const char *tp = r->parent ? cs_delivery_traceparent(r->parent) : NULL;
    for (size_t i = 0; tp && i < r->n_headers; i++)
        if (!strcmp(r->headers[i].name, CS_TRACEPARENT_HEADER)) return NULL;
    return tp;
}

/* The last traceparent header wins, like cs_delivery_header_get; an invalid
 * one means no trace context (a valid earlier one is not used instead). */
void cs__delivery_read_trace(cs_delivery *d) {
    d->traceparent[0] = d->trace_id[0] = '\0';
    if (!d->msg) return;
    size_t n = d->part->ops->header_count(d->msg);
    for (size_t i = n; i-- > 0;) {
        const char *name = NULL;
        const void *v = NULL;
        size_t len = 0;
        if (d->part->ops->header_at(d->msg, i, &name, &v, &len) != 0 || !name || strcmp(name, CS_TRACEPARENT_HEADER))
            continue;
        if (cs__traceparent_valid(v, len)) {
            memcpy(d->traceparent, v, CS_TRACEPARENT_LEN);
            d->traceparent[CS_TRACEPARENT_LEN] = '\0';
            memcpy(d->trace_id, d->traceparent + 3, CS_TRACE_ID_LEN);
            d->trace_id[CS_TRACE_ID_LEN] = '\0';
        }
        return;
    }
}

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

cs_delivery *cs__delivery_alloc(cs_part *part) {
    cs_delivery *d = cs__delivery_pool_take(part->spares);
    if (!d && !(d = calloc(1, sizeof(cs_delivery)))) return NULL;
    /* Filled here, where the partition's fields are known, rather than by the
     * source: the source sees the partition only through partition.h. */
    d->topic = part->topic;
    d->partition = part->partition;
    return d;
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

void cs__delivery_add_output(cs_delivery *d, cs_output *o) {
    if (!d->outputs_tail) d->outputs_tail = &d->outputs;
    *d->outputs_tail = o;
    d->outputs_tail = &o->next;
}

const void *cs_delivery_decoded(const cs_delivery *d) { return d->decoded; }

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

cs_err cs_delivery_reply_encoded(cs_delivery *d, const cs_codec *codec, const cs_type *type, const void *value) {
    if (!d || !codec || !type || !value) return cs__fail(CS_ERR_ARG, "cs_delivery_reply_encoded: missing argument");
    char *buf = NULL;
    size_t len = 0;
    cs_err err = codec->encode(codec, type, value, &buf, &len);
    if (err) return err;
    err = cs_delivery_reply(d, NULL, 0, buf, len);
    free(buf);
    return err;
}

cs_err cs__delivery_decode(cs_delivery *d, const cs_codec *codec, const cs_type *type) {
    if (d->decoded) return CS_OK; /* decoded on an earlier attempt */
    void *out = type->size <= sizeof d->decoded_inline ? (void *)d->decoded_inline.bytes : malloc(type->size);
    if (!out)
        return cs__fail(CS_ERR_NOMEM, "decode %s/%d@%lld: out of memory", d->topic, (int)d->partition,
                        (long long)d->offset);
    cs_err err = codec->decode(codec, type, d->value, d->value ? d->value_len : 0, out);
    if (err) {
        if (out != d->decoded_inline.bytes) free(out);
        return err;
    }
    d->decoded = out;
    d->decoded_type = type;
    return CS_OK;
}

void cs__delivery_free(cs_delivery *d) {
    if (d->decoded) {
        cs_value_free(d->decoded_type, d->decoded);
        if (d->decoded != d->decoded_inline.bytes) free(d->decoded);
    }
    free(d->reply_buf);
    free(d->reason);
    cs__output_free_all(d->outputs);
    if (d->msg) d->part->ops->release(d->msg);
    /* Read part before the put: once d is a spare, the fetch thread may take
     * it. The partition's reference keeps the pool alive across the put. */
    cs_part *part = d->part;
    if (!cs__delivery_pool_put(part->spares, d)) free(d);
    cs__part_unref(part);
}

/* A delivery that will not run (revoked, stale, crashed, past the drain deadline). */
void cs__discard(cs_delivery *d) {
    cs_part *part = d->part;
    pthread_mutex_lock(&part->lock);
    if (d->epoch == part->epoch && part->held > 0 && --part->held == 0) cs__signal_drained(part);
    pthread_mutex_unlock(&part->lock);
    cs__delivery_free(d);
}
