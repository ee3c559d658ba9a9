/* protobuf_wire.c — reading the Protobuf wire format without protobuf-c, for
 * what protobuf-c does not do:
 *   - the reason a payload did not decode: protobuf-c's unpack returns NULL
 *     and says nothing, and a dead-letter record or a log line needs one.
 *     After a failed unpack the codec walks the payload, checking what
 *     protobuf-c checks (tags, wire types against the descriptor, varints,
 *     lengths, nested messages, packed arrays, required fields), and names
 *     the first fault by field path and byte. Never on the hot path;
 *   - a bound on nesting: protobuf-c recurses once per nested message with no
 *     limit, so before it reads a payload of a type that contains itself the
 *     codec checks the payload nests at most CS_PROTOBUF_MAX_DEPTH deep
 *     (per record for such types only; it allocates nothing);
 *   - whether a type can nest that deep at all, once per codec.
 *
 * Owns: nothing past a call. Locks: none. Threads: any; pure functions of
 * their arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/protobuf_internal.h"

#define VARINT_MAX_BYTES 10 /* a 64-bit varint takes at most 10 bytes of 7 bits */
#define PATH_MAX_LEN 256    /* longest field path kept */

enum wire {
    WIRE_VARINT = 0,
    WIRE_FIXED64 = 1,
    WIRE_LENGTH = 2,
    WIRE_GROUP_START = 3,
    WIRE_GROUP_END = 4,
    WIRE_FIXED32 = 5
};

typedef struct walk {
    const uint8_t *base; /* the whole payload, for byte positions */
    size_t total;
    char *why;
    size_t size;
} walk;

/* Reads a varint at *pos (below end); false if it is cut short or too long. */
static bool read_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *v) {
    uint64_t out = 0;
    for (unsigned i = 0; i < VARINT_MAX_BYTES; i++) {
        if (*pos >= end) return false;
        uint8_t b = p[(*pos)++];
        out |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = out;
            return true;
        }
    }
    return false;
}

static int expected_wire(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return WIRE_FIXED32;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return WIRE_FIXED64;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return WIRE_LENGTH;
    default: return WIRE_VARINT;
    }
}

static const char *wire_name(int w) {
    static const char *const names[] = {"varint", "64-bit", "length-delimited", "group start", "group end", "32-bit"};
    return w >= 0 && w <= WIRE_FIXED32 ? names[w] : "invalid";
}

/* Writes the fault: the field by path and number (0: the message at path
 * itself), what is wrong, and where. Always false, to be returned. */
static bool fault(walk *w, const char *path, unsigned number, const char *what, size_t at) {
    if (number == 0)
        snprintf(w->why, w->size, "in \"%s\": %s at byte %zu of %zu", path[0] ? path : "(top)", what, at, w->total);
    else snprintf(w->why, w->size, "field \"%s\" (%u): %s at byte %zu of %zu", path, number, what, at, w->total);
    return false;
}

/* Checks a packed array's bytes [start, end) for elements of type t. */
static bool packed_ok(walk *w, ProtobufCType t, size_t start, size_t end, const char *path, unsigned number) {
    int ew = expected_wire(t);
    size_t n = end - start;
    if (ew == WIRE_FIXED32 && n % 4) return fault(w, path, number, "packed 32-bit values cut short", start);
    if (ew == WIRE_FIXED64 && n % 8) return fault(w, path, number, "packed 64-bit values cut short", start);
    if (ew != WIRE_VARINT) return true;
    for (size_t pos = start; pos < end;) {
        uint64_t v;
        size_t at = pos;
        if (!read_varint(w->base, end, &pos, &v))
            return fault(w, path, number, "packed varint cut short or over 10 bytes", at);
    }
    return true;
}

static bool message_ok(walk *w, const ProtobufCMessageDescriptor *desc, size_t start, size_t end, const char *prefix,
                       unsigned depth);

/* Checks one length-delimited field's contents [start, end). */
static bool length_ok(walk *w, const ProtobufCFieldDescriptor *f, size_t start, size_t end, const char *path,
                      unsigned depth) {
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        if (depth + 1 > CS_PROTOBUF_MAX_DEPTH) return fault(w, path, f->id, "nested too deep to check", start);
        return message_ok(w, f->descriptor, start, end, path, depth + 1);
    }
    if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_BYTES)
        return packed_ok(w, f->type, start, end, path, f->id);
    return true;
}

static bool message_ok(walk *w, const ProtobufCMessageDescriptor *desc, size_t start, size_t end, const char *prefix,
                       unsigned depth) {
    size_t *seen = calloc(desc->n_fields ? desc->n_fields : 1, sizeof *seen); /* occurrences per field */
    bool ok = true;
    char path[PATH_MAX_LEN];
    for (size_t pos = start; ok && pos < end;) {
        size_t at = pos;
        uint64_t key;
        if (!read_varint(w->base, end, &pos, &key)) {
            ok = fault(w, prefix, 0, "a field's tag is cut short or over 10 bytes", at);
            break;
        }
        unsigned number = (unsigned)(key >> 3);
        int wt = (int)(key & 7);
        const ProtobufCFieldDescriptor *f =
            key >> 3 > UINT32_MAX ? NULL : protobuf_c_message_descriptor_get_field(desc, number);
        size_t idx = f ? (size_t)(f - desc->fields) : 0;
        if (f && f->label == PROTOBUF_C_LABEL_REPEATED && f->type == PROTOBUF_C_TYPE_MESSAGE)
            snprintf(path, sizeof path, "%s%s%s[%zu]", prefix, prefix[0] ? "." : "", f->name, seen ? seen[idx] : 0);
        else snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", f ? f->name : "?");
        if (f && seen) seen[idx]++;
        if (number == 0) {
            ok = fault(w, path, number, "field number 0 is not allowed", at);
            break;
        }
        if (wt == WIRE_GROUP_START || wt == WIRE_GROUP_END || wt > WIRE_FIXED32) {
            ok = fault(w, path, number, wt > WIRE_FIXED32 ? "invalid wire type" : "groups are not supported", at);
            break;
        }
        if (f) {
            int ew = expected_wire(f->type);
            bool packable = f->label == PROTOBUF_C_LABEL_REPEATED && ew != WIRE_LENGTH;
            if (wt != ew && !(packable && wt == WIRE_LENGTH)) {
                char what[96];
                snprintf(what, sizeof what, "sent as %s, its type wants %s", wire_name(wt), wire_name(ew));
                ok = fault(w, path, number, what, at);
                break;
            }
        }
        uint64_t v;
        size_t value_at = pos;
        switch (wt) {
        case WIRE_VARINT:
            if (!read_varint(w->base, end, &pos, &v))
                ok = fault(w, path, number, "varint cut short or over 10 bytes", value_at);
            break;
        case WIRE_FIXED64:
        case WIRE_FIXED32: {
            size_t need = wt == WIRE_FIXED64 ? 8 : 4;
            if (end - pos < need)
                ok = fault(w, path, number, wt == WIRE_FIXED64 ? "64-bit value cut short" : "32-bit value cut short",
                           value_at);
            else pos += need;
            break;
        }
        default: /* WIRE_LENGTH */
            if (!read_varint(w->base, end, &pos, &v)) {
                ok = fault(w, path, number, "length cut short or over 10 bytes", value_at);
            } else if (v > end - pos) {
                char what[96];
                snprintf(what, sizeof what, "length %llu runs past the end", (unsigned long long)v);
                ok = fault(w, path, number, what, value_at);
            } else {
                if (f) ok = length_ok(w, f, pos, pos + (size_t)v, path, depth);
                pos += (size_t)v;
            }
        }
    }
    for (size_t i = 0; ok && seen && i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REQUIRED && seen[i] == 0) {
            snprintf(w->why, w->size, "field \"%s%s%s\" (%u): missing (required)", prefix, prefix[0] ? "." : "",
                     f->name, f->id);
            ok = false;
        }
    }
    free(seen);
    return ok;
}

bool cs__protobuf_diagnose(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, char *why,
                           size_t size) {
    walk w = {.base = data, .total = len, .why = why, .size = size};
    return !message_ok(&w, desc, 0, len, "", 1);
}

/* ---- nesting ---- */

/* Skips the value of wire type wt at *pos; false if it cannot (cut short, a group, a bad type). */
static bool skip_value(const uint8_t *p, size_t end, size_t *pos, int wt) {
    uint64_t v;
    switch (wt) {
    case WIRE_VARINT: return read_varint(p, end, pos, &v);
    case WIRE_FIXED64:
    case WIRE_FIXED32: {
        size_t need = wt == WIRE_FIXED64 ? 8 : 4;
        if (end - *pos < need) return false;
        *pos += need;
        return true;
    }
    case WIRE_LENGTH:
        if (!read_varint(p, end, pos, &v) || v > end - *pos) return false;
        *pos += (size_t)v;
        return true;
    default: return false;
    }
}

/* The depth of [start, end) as a desc at `depth`: CS_PROTOBUF_MAX_DEPTH + 1
 * as soon as it passes the limit (with *at the byte where), else at most the
 * limit. Recursion is bounded by the limit. */
static unsigned nesting(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t start, size_t end,
                        unsigned depth, size_t *at, const char **field) {
    if (depth > CS_PROTOBUF_MAX_DEPTH) {
        *at = start;
        return depth;
    }
    for (size_t pos = start; pos < end;) {
        uint64_t key, len;
        if (!read_varint(p, end, &pos, &key)) return depth; /* unreadable: unpack refuses it */
        const ProtobufCFieldDescriptor *f =
            key >> 3 > UINT32_MAX ? NULL : protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3));
        int wt = (int)(key & 7);
        if (f == NULL || f->type != PROTOBUF_C_TYPE_MESSAGE || wt != WIRE_LENGTH) {
            if (!skip_value(p, end, &pos, wt)) return depth;
            continue;
        }
        if (!read_varint(p, end, &pos, &len) || len > end - pos) return depth;
        unsigned d = nesting(f->descriptor, p, pos, pos + (size_t)len, depth + 1, at, field);
        if (d > CS_PROTOBUF_MAX_DEPTH) {
            if (*field == NULL) *field = f->name;
            return d;
        }
        pos += (size_t)len;
    }
    return depth;
}

bool cs__protobuf_nesting_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, char *why,
                             size_t size) {
    size_t at = 0;
    const char *field = NULL; /* the innermost message field on the way down */
    if (nesting(desc, data, 0, len, 1, &at, &field) <= CS_PROTOBUF_MAX_DEPTH) return true;
    snprintf(why, size, "nested deeper than %d messages (field \"%s\" at byte %zu of %zu)", CS_PROTOBUF_MAX_DEPTH,
             field ? field : "?", at, len);
    return false;
}

/* ---- how deep a type can nest ---- */

#define DEPTH_UNKNOWN 0u    /* not computed yet */
#define DEPTH_ON_PATH (~0u) /* being computed: met again, the type contains itself */

typedef struct type_depth {
    const ProtobufCMessageDescriptor *desc;
    unsigned depth;
} type_depth;

typedef struct depth_memo {
    type_depth *items;
    size_t n, cap;
    bool failed; /* out of memory */
} depth_memo;

static type_depth *memo_slot(depth_memo *m, const ProtobufCMessageDescriptor *desc) {
    for (size_t i = 0; i < m->n; i++)
        if (m->items[i].desc == desc) return &m->items[i];
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        type_depth *items = realloc(m->items, cap * sizeof *items);
        if (items == NULL) {
            m->failed = true;
            return NULL;
        }
        m->items = items;
        m->cap = cap;
    }
    m->items[m->n] = (type_depth){desc, DEPTH_UNKNOWN};
    return &m->items[m->n++];
}

/* The deepest nesting of desc (1: no message fields), capped at
 * CS_PROTOBUF_MAX_DEPTH + 1, which a cycle also gives. Each type is computed
 * once; the recursion follows distinct types, so it is bounded by their number
 * and by the cap. */
static unsigned type_nesting(depth_memo *m, const ProtobufCMessageDescriptor *desc, unsigned on_path) {
    type_depth *slot = memo_slot(m, desc);
    if (slot == NULL) return 0;
    if (slot->depth == DEPTH_ON_PATH) return CS_PROTOBUF_MAX_DEPTH + 1;
    if (slot->depth != DEPTH_UNKNOWN) return slot->depth;
    if (on_path > CS_PROTOBUF_MAX_DEPTH) return CS_PROTOBUF_MAX_DEPTH + 1;
    slot->depth = DEPTH_ON_PATH;
    size_t index = (size_t)(slot - m->items); /* the array may move while the fields are computed */
    unsigned deepest = 1;
    for (unsigned i = 0; i < desc->n_fields && deepest <= CS_PROTOBUF_MAX_DEPTH; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        unsigned d = type_nesting(m, f->descriptor, on_path + 1);
        if (m->failed) return 0;
        if (d + 1 > deepest) deepest = d + 1 > CS_PROTOBUF_MAX_DEPTH + 1 ? CS_PROTOBUF_MAX_DEPTH + 1 : d + 1;
    }
    m->items[index].depth = deepest;
    return deepest;
}

bool cs__protobuf_can_nest_too_deep(const ProtobufCMessageDescriptor *desc) {
    depth_memo m = {0};
    unsigned d = type_nesting(&m, desc, 1);
    bool failed = m.failed;
    free(m.items);
    return failed || d > CS_PROTOBUF_MAX_DEPTH;
}
