/* delivery_life.c — a delivery's life inside the pipeline, apart from its
 * public face (delivery.c): made for a record (cs__delivery_alloc, its trace
 * context read once at fetch), its value and key decoded for its handler, given the outputs of
 * its attempt (Transactional), then released to the pipeline's spares or
 * discarded when it will not run. On its own so that settle.c, lanes.c and
 * worker.c use it without calling back into the public calls that use them.
 *
 * Owns: a delivery's decoded value and key and its outputs, until it is
 * freed. Locks: none (a discard's held count is partition.c's:
 * cs__part_unhold). Threads: the fetch thread makes it; whoever holds it (a
 * worker, a pending handler's thread, a delivery report) decodes, adds
 * outputs and frees it. */
#include <stdlib.h>
#include <string.h>

#include "core/delivery_internal.h"
#include "base/error.h"
#include "core/partition_internal.h"
#include "core/pipeline_internal.h"

const char *cs__inherited_traceparent(const cs_record *r) {
    const char *tp = r->parent && r->parent->traceparent[0] ? r->parent->traceparent : NULL;
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

cs_delivery *cs__delivery_alloc(cs_part *part) {
    cs_delivery *d = cs__delivery_pool_take(part->spares);
    if (!d && !(d = calloc(1, sizeof(cs_delivery)))) return NULL;
    /* Filled here, where the partition's fields are known, rather than by the
     * source: the source sees the partition only through partition.h. */
    d->topic = part->topic;
    d->partition = part->partition;
    return d;
}

void cs__delivery_add_output(cs_delivery *d, cs_output *o) { CS_STAILQ_INSERT_TAIL(&d->outputs, o, next); }

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
    d->decoded_codec = codec;
    return CS_OK;
}

cs_err cs__delivery_decode_key(cs_delivery *d, const cs_codec *codec, const cs_type *type) {
    if (d->decoded_key) return CS_OK; /* decoded on an earlier attempt */
    void *out = malloc(type->size);
    if (!out)
        return cs__fail(CS_ERR_NOMEM, "decode key %s/%d@%lld: out of memory", d->topic, (int)d->partition,
                        (long long)d->offset);
    cs_err err = codec->decode(codec, type, d->key, d->key ? d->key_len : 0, out);
    if (err) {
        free(out);
        return err;
    }
    d->decoded_key = out;
    d->decoded_key_type = type;
    d->decoded_key_codec = codec;
    return CS_OK;
}

void cs__delivery_free(cs_delivery *d) {
    if (d->decoded) {
        cs_codec_free_value(d->decoded_codec, d->decoded_type, d->decoded);
        if (d->decoded != d->decoded_inline.bytes) free(d->decoded);
    }
    if (d->decoded_key) {
        cs_codec_free_value(d->decoded_key_codec, d->decoded_key_type, d->decoded_key);
        free(d->decoded_key);
    }
    free(d->reply_buf);
    free(d->reason);
    cs__output_list_free(&d->outputs);
    if (d->msg) d->part->ops->release(d->msg);
    /* Read part before the put: once d is a spare, the fetch thread may take
     * it. The partition's reference keeps the pool alive across the put. */
    cs_part *part = d->part;
    if (!cs__delivery_pool_put(part->spares, d)) free(d);
    cs__part_unref(part);
}

/* A delivery that will not run (revoked, stale, crashed, past the drain deadline). */
void cs__discard(cs_delivery *d) {
    cs__part_unhold(d->part, d);
    cs__delivery_free(d);
}
