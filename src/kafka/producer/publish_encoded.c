/* publish_encoded.c — typed publishes: cs_publish_encoded, its asynchronous
 * twin and the typed-key variant encode a struct with a codec, then hand the
 * bytes to cs_publish / cs_publish_async (publish.c). Encoding comes first
 * and a failure returns before anything is queued, so a value whose schema
 * the registry refuses, or that cannot be encoded while the registry is
 * down, is never published.
 *
 * Owns: nothing beyond one call: the encoded bytes are freed before it
 * returns (librdkafka copied them). Threads: any thread, as cs_publish; the
 * codec's encode is thread-safe by contract (cstream/codec.h), and a
 * registry-backed codec may make its one registration request here, so the
 * call can block for the registry client's request timeout on its first use.
 * Locks: none here (cs_publish takes the producer's). */
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "cstream/publish.h"

/* Bytes of the codec's message kept when this file adds the topic to it. */
#define ENCODE_WHY_MAX 1024

/* One encoded part of a record: the key or the value. */
typedef struct encoded {
    char *buf;
    size_t len;
} encoded;

/* Encodes `value` as the record's `part` ("key" or "value"); on failure the
 * message names the call, the topic, the part, the type and the codec, then
 * gives the codec's own words (the field, or the subject the registry
 * refused). The error code is the codec's: CS_ERR_ENCODE, CS_ERR_UNAVAILABLE,
 * CS_ERR_ARG or CS_ERR_NOMEM. */
static cs_err encode_part(const char *call, const char *topic, const char *part, const cs_codec *codec,
                          const cs_type *type, const void *value, encoded *out) {
    out->buf = NULL;
    out->len = 0;
    if (!codec || !type || !value)
        return cs__fail(CS_ERR_ARG, "%s(%s): the %s's codec, type and value are required", call, topic, part);
    cs_err err = codec->encode(codec, type, value, &out->buf, &out->len);
    if (err == CS_OK) return CS_OK;
    char why[ENCODE_WHY_MAX];
    snprintf(why, sizeof why, "%s", cs_errmsg());
    free(out->buf);
    out->buf = NULL;
    return cs__fail(err, "%s(%s): %s of type %s does not encode with the %s codec, nothing published: %s", call, topic,
                    part, type->name, codec->name ? codec->name : "(unnamed)", why);
}

static cs_err check_topic(const char *call, cs_kafka *k, const char *topic) {
    if (!k || !topic || !*topic) return cs__fail(CS_ERR_ARG, "%s: broker and topic are required", call);
    return CS_OK;
}

cs_err cs_publish_encoded(cs_kafka *k, const char *topic, const void *key, size_t key_len, const cs_codec *codec,
                          const cs_type *type, const void *value, cs_published *out) {
    static const char call[] = "cs_publish_encoded";
    cs_err err = check_topic(call, k, topic);
    encoded v;
    if (err || (err = encode_part(call, topic, "value", codec, type, value, &v))) return err;
    cs_record rec = {
        .topic = topic, .partition = -1, .key = key, .key_len = key_len, .value = v.buf, .value_len = v.len};
    err = cs_publish(k, &rec, out);
    free(v.buf);
    return err;
}

cs_err cs_publish_encoded_async(cs_kafka *k, const char *topic, const void *key, size_t key_len, const cs_codec *codec,
                                const cs_type *type, const void *value, cs_publish_fn done, void *opaque) {
    static const char call[] = "cs_publish_encoded_async";
    cs_err err = check_topic(call, k, topic);
    if (err) return err;
    if (!done) return cs__fail(CS_ERR_ARG, "%s(%s): completion callback is NULL", call, topic);
    encoded v;
    if ((err = encode_part(call, topic, "value", codec, type, value, &v))) return err;
    cs_record rec = {
        .topic = topic, .partition = -1, .key = key, .key_len = key_len, .value = v.buf, .value_len = v.len};
    err = cs_publish_async(k, &rec, done, opaque);
    free(v.buf);
    return err;
}

cs_err cs_publish_encoded_with_key(cs_kafka *k, const char *topic, const cs_codec *key_codec, const cs_type *key_type,
                                   const void *key, const cs_codec *codec, const cs_type *type, const void *value,
                                   cs_published *out) {
    static const char call[] = "cs_publish_encoded_with_key";
    cs_err err = check_topic(call, k, topic);
    encoded kb, v;
    if (err || (err = encode_part(call, topic, "key", key_codec, key_type, key, &kb))) return err;
    if ((err = encode_part(call, topic, "value", codec, type, value, &v))) {
        free(kb.buf);
        return err;
    }
    cs_record rec = {
        .topic = topic, .partition = -1, .key = kb.buf, .key_len = kb.len, .value = v.buf, .value_len = v.len};
    err = cs_publish(k, &rec, out);
    free(kb.buf);
    free(v.buf);
    return err;
}
