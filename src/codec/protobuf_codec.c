/* protobuf_codec.c — Protobuf behind the cs_codec interface, on protobuf-c:
 * decode into the message struct protoc-c generated (held in the caller's
 * buffer, as cs_codec's decode wants), encode from it, and free what decode
 * allocated. The wire framing of a schema registry (magic byte, schema id,
 * message indexes) belongs to the registry client.
 *
 * Owns: the codec, its cs_type and its copy of the .proto text; all are
 * immutable after cs_codec_protobuf_new, so the functions run on any worker
 * thread at once. Locks: none. Threads: cs_codec_protobuf_new and
 * cs_codec_protobuf_destroy on the caller's thread; the rest on any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cstream/protobuf.h"
#include "codec/proto_text.h"
#include "codec/protobuf_internal.h"

#define CS_PROTOBUF_NAME "protobuf"
#define CS_PROTOBUF_CONTENT_TYPE "application/x-protobuf"
#define WHY_MAX 512  /* bytes of a decode failure's reason */
#define PATH_LEN 256 /* longest field path named by an encode failure */

typedef struct protobuf_impl {
    const ProtobufCMessageDescriptor *desc;
    cs_type type;       /* named after the message, its size the generated struct's */
    char *proto;        /* the .proto text, or NULL */
    bool check_nesting; /* the type can nest deeper than CS_PROTOBUF_MAX_DEPTH: check each payload first */
} protobuf_impl;

static cs_err protobuf_decode(const cs_codec *c, const cs_type *type, const void *data, size_t len, void *out);

/* The codec's state, or NULL when c is not a Protobuf codec (its decode is another's). */
static const protobuf_impl *impl_of(const cs_codec *c) {
    return c != NULL && c->decode == protobuf_decode ? c->impl : NULL;
}

/* ---- decode into the caller's buffer ---- */

/* protobuf-c allocates the top-level message itself; this allocator hands it
 * the caller's buffer instead (the first request of the message's size), so
 * the decoded value is the generated struct in place. Everything else is
 * malloc'ed, and freeing skips the buffer. */
typedef struct in_place {
    void *out;
    size_t size;
    bool given;
} in_place;

static void *in_place_alloc(void *data, size_t size) {
    in_place *ip = data;
    if (!ip->given && size == ip->size) {
        ip->given = true;
        return ip->out;
    }
    return malloc(size);
}

static void in_place_free(void *data, void *p) {
    const in_place *ip = data;
    if (p != ip->out) free(p);
}

static cs_err check_type(const protobuf_impl *impl, const cs_type *type, const char *what) {
    if (type == NULL || type->size != impl->desc->sizeof_message)
        return cs__fail(CS_ERR_ARG, "protobuf %s: type %s%s%s is not message %s; pass cs_codec_protobuf_type(codec)",
                        what, type && type->name ? "\"" : "", type && type->name ? type->name : "NULL",
                        type && type->name ? "\"" : "", impl->desc->name);
    return CS_OK;
}

static const void *member_at(const ProtobufCMessage *m, unsigned offset) { return (const char *)m + offset; }

/* Whether m or a message in it kept an unknown field numbered 0. protobuf-c
 * 1.4 checks only the first byte of a tag, so it takes a field 0 whose tag
 * is written in two bytes (0x80 0x00) as unknown and keeps it; encoding it
 * again would write a tag of 0x00, which nothing reads. Protobuf has no field
 * 0, so such a payload is refused. The walk follows the tree unpack built. */
static bool holds_field_zero(const ProtobufCMessage *m) {
    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        if (m->unknown_fields[i].tag == 0) return true;
    const ProtobufCMessageDescriptor *desc = m->descriptor;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        const void *p;
        memcpy(&p, member_at(m, f->offset), sizeof p);
        if (p == NULL) continue;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which;
            memcpy(&which, member_at(m, f->quantifier_offset), sizeof which);
            if (which != f->id) continue; /* the union holds another member */
        }
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            if (holds_field_zero(p)) return true;
            continue;
        }
        size_t n;
        memcpy(&n, member_at(m, f->quantifier_offset), sizeof n);
        for (size_t k = 0; k < n; k++)
            if (holds_field_zero(((const ProtobufCMessage *const *)p)[k])) return true;
    }
    return false;
}

static cs_err protobuf_decode(const cs_codec *c, const cs_type *type, const void *data, size_t len, void *out) {
    const protobuf_impl *impl = impl_of(c);
    if (impl == NULL || out == NULL) return cs__fail(CS_ERR_ARG, "protobuf decode: codec and out must not be NULL");
    cs_err err = check_type(impl, type, "decode");
    if (err) return err;
    const ProtobufCMessageDescriptor *desc = impl->desc;
    memset(out, 0, desc->sizeof_message);
    if (data == NULL) return cs__fail(CS_ERR_DECODE, "message %s: payload is null (tombstone)", desc->name);
    char why[WHY_MAX];
    if (impl->check_nesting && !cs__protobuf_nesting_ok(desc, data, len, why, sizeof why))
        return cs__fail(CS_ERR_DECODE, "message %s: %s", desc->name, why); /* before protobuf-c recurses that deep */
    in_place ip = {.out = out, .size = desc->sizeof_message};
    ProtobufCAllocator a = {.alloc = in_place_alloc, .free = in_place_free, .allocator_data = &ip};
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &a, len, data);
    if (m != NULL && m != out) {
        /* protobuf-c took the buffer for something other than the top-level
         * message (not what 1.4 does): start again on plain malloc and copy
         * the top level in. */
        protobuf_c_message_free_unpacked(m, &a);
        m = protobuf_c_message_unpack(desc, NULL, len, data);
        if (m != NULL) {
            memcpy(out, m, desc->sizeof_message);
            free(m); /* the shell only: its parts now belong to out (the default allocator is malloc) */
            m = out;
        }
    }
    if (m != NULL && holds_field_zero(m)) {
        protobuf_c_message_free_unpacked(m, &a);
        m = NULL;
    }
    if (m == NULL) {
        memset(out, 0, desc->sizeof_message);
        if (cs__protobuf_diagnose(desc, data, len, why, sizeof why))
            return cs__fail(CS_ERR_DECODE, "message %s: %s", desc->name, why);
        /* The wire format reads well, so unpack failed on something else:
         * memory, most likely, or a check of protobuf-c's own. */
        return cs__fail(CS_ERR_DECODE, "message %s: protobuf-c could not unpack the %zu-byte payload", desc->name, len);
    }
    return CS_OK;
}

static void protobuf_free_value(const cs_codec *c, const cs_type *type, void *value) {
    const protobuf_impl *impl = impl_of(c);
    (void)type;
    if (impl == NULL || value == NULL) return;
    ProtobufCMessage *m = value;
    if (m->descriptor == NULL) return; /* zeroed: a failed decode, or freed already */
    in_place ip = {.out = value, .size = impl->desc->sizeof_message, .given = true};
    ProtobufCAllocator a = {.alloc = in_place_alloc, .free = in_place_free, .allocator_data = &ip};
    protobuf_c_message_free_unpacked(m, &a);
    memset(value, 0, impl->desc->sizeof_message);
}

/* ---- encode ---- */

/* Whether field f holds a value in m (oneof members: only the chosen one). */
static bool field_chosen(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
    if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) return true;
    uint32_t which;
    memcpy(&which, member_at(m, f->quantifier_offset), sizeof which);
    return which == f->id;
}

/* Finds a required string, bytes or message that is NULL, and names it;
 * nested messages too. */
static cs_err check_encodable(const ProtobufCMessage *m, const char *prefix, unsigned depth) {
    const ProtobufCMessageDescriptor *desc = m->descriptor;
    char path[PATH_LEN];
    if (depth > CS_PROTOBUF_MAX_DEPTH)
        return cs__fail(CS_ERR_ENCODE, "field \"%s\": nested deeper than %d messages", prefix, CS_PROTOBUF_MAX_DEPTH);
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", f->name);
        if (!field_chosen(m, f)) continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n;
            memcpy(&n, member_at(m, f->quantifier_offset), sizeof n);
            const void *items;
            memcpy(&items, member_at(m, f->offset), sizeof items);
            if (n > 0 && items == NULL) return cs__fail(CS_ERR_ENCODE, "field \"%s\": %zu items but no array", path, n);
            for (size_t k = 0; f->type == PROTOBUF_C_TYPE_MESSAGE && k < n; k++) {
                const ProtobufCMessage *sub = ((const ProtobufCMessage *const *)items)[k];
                char item[PATH_LEN + 24]; /* + "[index]" */
                snprintf(item, sizeof item, "%s[%zu]", path, k);
                if (sub == NULL) return cs__fail(CS_ERR_ENCODE, "field \"%s\": NULL item", item);
                cs_err err = check_encodable(sub, item, depth + 1);
                if (err) return err;
            }
            continue;
        }
        if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
            const void *p;
            memcpy(&p, member_at(m, f->offset), sizeof p);
            if (p == NULL && f->label == PROTOBUF_C_LABEL_REQUIRED)
                return cs__fail(CS_ERR_ENCODE, "field \"%s\": missing (required)", path);
            if (p != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                cs_err err = check_encodable(p, path, depth + 1);
                if (err) return err;
            }
        } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
            ProtobufCBinaryData b;
            memcpy(&b, member_at(m, f->offset), sizeof b);
            if (b.len > 0 && b.data == NULL)
                return cs__fail(CS_ERR_ENCODE, "field \"%s\": %zu bytes but no data", path, b.len);
        }
    }
    return CS_OK;
}

static cs_err protobuf_encode(const cs_codec *c, const cs_type *type, const void *value, char **out, size_t *len) {
    const protobuf_impl *impl = impl_of(c);
    if (out != NULL) *out = NULL;
    if (len != NULL) *len = 0;
    if (impl == NULL || value == NULL || out == NULL)
        return cs__fail(CS_ERR_ARG, "protobuf encode: codec, value and out must not be NULL");
    cs_err err = check_type(impl, type, "encode");
    if (err) return err;
    const ProtobufCMessage *m = value;
    if (m->descriptor != impl->desc)
        return cs__fail(CS_ERR_ARG, "protobuf encode: the value is %s%s, the codec encodes %s",
                        m->descriptor ? "a " : "not initialised with its _INIT",
                        m->descriptor ? m->descriptor->name : "", impl->desc->name);
    err = check_encodable(m, "", 1);
    if (err) {
        char why[WHY_MAX]; /* copied: cs__fail writes the buffer cs_errmsg() returns */
        snprintf(why, sizeof why, "%s", cs_errmsg());
        return cs__fail(err, "message %s: %s", impl->desc->name, why);
    }
    if (!protobuf_c_message_check(m))
        return cs__fail(CS_ERR_ENCODE, "message %s: protobuf-c's check refuses the value", impl->desc->name);
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n + 1); /* + 1: a NUL after, as the JSON codec leaves, and never malloc(0) */
    if (buf == NULL) return cs__fail(CS_ERR_NOMEM, "message %s: out of memory encoding %zu bytes", impl->desc->name, n);
    size_t written = protobuf_c_message_pack(m, buf);
    if (written != n) {
        free(buf);
        return cs__fail(CS_ERR_ENCODE, "message %s: protobuf-c wrote %zu bytes, %zu expected", impl->desc->name,
                        written, n);
    }
    buf[n] = '\0';
    *out = (char *)buf;
    if (len != NULL) *len = n;
    return CS_OK;
}

/* ---- the schema: the .proto text ---- */

/* The AsyncAPI schemaFormat of a .proto text: Protobuf 3 when its first
 * statement is `syntax = "proto3"` or an `edition` (editions followed
 * proto3); Protobuf 2 when it says "proto2" or has no syntax statement, which
 * Protobuf reads as proto2. */
static const char *proto_schema_format(const char *text) {
    const char *p = cs__proto_skip_blank(text);
    if (!strncmp(p, "edition", strlen("edition"))) return CS_SCHEMA_FORMAT_PROTOBUF3;
    if (strncmp(p, "syntax", strlen("syntax"))) return CS_SCHEMA_FORMAT_PROTOBUF2;
    p = cs__proto_skip_blank(p + strlen("syntax"));
    if (*p != '=') return CS_SCHEMA_FORMAT_PROTOBUF2;
    p = cs__proto_skip_blank(p + 1);
    bool quoted = *p == '"' || *p == '\'';
    return quoted && !strncmp(p + 1, "proto3", strlen("proto3")) ? CS_SCHEMA_FORMAT_PROTOBUF3
                                                                 : CS_SCHEMA_FORMAT_PROTOBUF2;
}

/* The .proto text given to cs_codec_protobuf_new (set only when one was). */
static cs_err protobuf_schema(const cs_codec *c, const cs_type *type, char **out) {
    const protobuf_impl *impl = impl_of(c);
    if (out != NULL) *out = NULL;
    if (impl == NULL || out == NULL) return cs__fail(CS_ERR_ARG, "protobuf schema: codec and out must not be NULL");
    cs_err err = check_type(impl, type, "schema");
    if (err) return err;
    if (impl->proto == NULL)
        return cs__fail(CS_ERR_ARG, "message %s: the codec was given no .proto text", impl->desc->name);
    *out = strdup(impl->proto);
    return *out ? CS_OK : cs__fail(CS_ERR_NOMEM, "message %s: out of memory copying the .proto text", impl->desc->name);
}

/* ---- the codec ---- */

void cs_codec_protobuf_destroy(cs_codec *codec) {
    if (codec == NULL) return;
    protobuf_impl *impl = codec->impl;
    if (impl != NULL) free(impl->proto);
    free(impl);
    free(codec);
}

cs_err cs_codec_protobuf_new(const struct ProtobufCMessageDescriptor *desc, const char *proto_text, cs_codec **out) {
    if (out == NULL) return cs__fail(CS_ERR_ARG, "cs_codec_protobuf_new: out must not be NULL");
    *out = NULL;
    if (desc == NULL) return cs__fail(CS_ERR_ARG, "cs_codec_protobuf_new: the message descriptor must not be NULL");
    if (desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC || desc->name == NULL || desc->sizeof_message == 0)
        return cs__fail(CS_ERR_ARG, "cs_codec_protobuf_new: not a protobuf-c message descriptor (wrong magic)");
    cs_codec *c = calloc(1, sizeof *c);
    protobuf_impl *impl = calloc(1, sizeof *impl);
    char *proto = proto_text ? strdup(proto_text) : NULL;
    if (c == NULL || impl == NULL || (proto_text && proto == NULL)) {
        free(c);
        free(impl);
        free(proto);
        return cs__fail(CS_ERR_NOMEM, "out of memory making a Protobuf codec for %s", desc->name);
    }
    impl->desc = desc;
    impl->proto = proto;
    impl->check_nesting = cs__protobuf_can_nest_too_deep(desc);
    impl->type = (cs_type){.name = desc->name, .size = desc->sizeof_message, .fields = NULL, .n_fields = 0};
    c->name = CS_PROTOBUF_NAME;
    c->content_type = CS_PROTOBUF_CONTENT_TYPE;
    c->decode = protobuf_decode;
    c->encode = protobuf_encode;
    /* Without the .proto text there is no schema to show (AsyncAPI leaves it out). */
    c->schema = proto ? protobuf_schema : NULL;
    c->schema_format = proto ? proto_schema_format(proto) : NULL;
    c->free_value = protobuf_free_value;
    c->impl = impl;
    *out = c;
    return CS_OK;
}

const cs_type *cs_codec_protobuf_type(const cs_codec *codec) {
    const protobuf_impl *impl = impl_of(codec);
    return impl ? &impl->type : NULL;
}

const char *cs_codec_protobuf_proto(const cs_codec *codec) {
    const protobuf_impl *impl = impl_of(codec);
    return impl ? impl->proto : NULL;
}

const struct ProtobufCMessageDescriptor *cs_codec_protobuf_descriptor(const cs_codec *codec) {
    const protobuf_impl *impl = impl_of(codec);
    return impl ? impl->desc : NULL;
}
