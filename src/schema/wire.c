/*
 * wire.c — writes and reads the Confluent wire format's framing: magic byte,
 * schema id, and Protobuf's message indexes (wire.h has the layout).
 *
 * Owns: nothing; pure functions over caller buffers. Locks: none.
 * Threads: any thread.
 *
 * Must never: read past `len` (the bytes come from a record anybody may have
 * produced), accept a varint longer than a 32-bit value needs, or allocate.
 */
#include "schema/wire.h"

#include "base/error.h"

void cs__wire_write_header(uint8_t out[CS_WIRE_HEADER_LEN], int32_t id) {
    uint32_t u = (uint32_t)id;
    out[0] = CS_WIRE_MAGIC;
    out[1] = (uint8_t)(u >> 24);
    out[2] = (uint8_t)(u >> 16);
    out[3] = (uint8_t)(u >> 8);
    out[4] = (uint8_t)u;
}

cs_err cs__wire_read_header(const void *buf, size_t len, int32_t *id) {
    const uint8_t *b = buf;
    if (len < CS_WIRE_HEADER_LEN || !b)
        return cs__fail(CS_ERR_DECODE, "not in the schema registry wire format: %zu bytes, the header alone is %d", len,
                        CS_WIRE_HEADER_LEN);
    if (b[0] != CS_WIRE_MAGIC)
        return cs__fail(CS_ERR_DECODE,
                        "not in the schema registry wire format: first byte is 0x%02x, not the magic byte 0x00", b[0]);
    *id = (int32_t)((uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | (uint32_t)b[4]);
    return CS_OK;
}

static uint32_t zigzag(int32_t v) { return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31); }
static int32_t unzigzag(uint32_t u) { return (int32_t)(u >> 1) ^ -(int32_t)(u & 1); }

/* One zigzag varint; false if it does not fit in cap. */
static int put_varint(int32_t v, uint8_t *out, size_t cap, size_t *at) {
    uint32_t u = zigzag(v);
    do {
        if (*at >= cap) return 0;
        out[(*at)++] = (uint8_t)((u & 0x7f) | (u > 0x7f ? 0x80 : 0));
        u >>= 7;
    } while (u);
    return 1;
}

cs_err cs__wire_write_msg_indexes(const int32_t *idx, size_t n, uint8_t *out, size_t cap, size_t *written) {
    size_t at = 0, i;
    *written = 0;
    if (n > CS_WIRE_MAX_MSG_INDEXES)
        return cs__fail(CS_ERR_ARG, "protobuf message indexes: %zu levels, at most %d", n, CS_WIRE_MAX_MSG_INDEXES);
    for (i = 0; i < n; i++)
        if (idx[i] < 0) return cs__fail(CS_ERR_ARG, "protobuf message indexes: index %zu is negative (%d)", i, idx[i]);
    /* The spec's shortcut for the first top-level message, by far the most
     * common: a count of 0 stands for the path [0]. */
    if (n == 0 || (n == 1 && idx[0] == 0)) {
        if (cap < 1) return cs__fail(CS_ERR_ENCODE, "protobuf message indexes: no room in a %zu-byte buffer", cap);
        out[0] = 0;
        *written = 1;
        return CS_OK;
    }
    if (!put_varint((int32_t)n, out, cap, &at)) goto full;
    for (i = 0; i < n; i++)
        if (!put_varint(idx[i], out, cap, &at)) goto full;
    *written = at;
    return CS_OK;
full:
    return cs__fail(CS_ERR_ENCODE, "protobuf message indexes: %zu levels do not fit in %zu bytes", n, cap);
}

/* One zigzag varint from b[*at..len). */
static cs_err get_varint(const uint8_t *b, size_t len, size_t *at, int32_t *v, const char *what) {
    uint32_t u = 0;
    int shift;
    for (shift = 0; shift < 7 * CS_WIRE_VARINT_MAX; shift += 7) {
        uint8_t byte;
        if (*at >= len) return cs__fail(CS_ERR_DECODE, "protobuf message indexes: the record ends inside %s", what);
        byte = b[(*at)++];
        /* The fifth byte may carry only the top 4 bits of 32. */
        if (shift == 28 && (byte & 0xf0))
            return cs__fail(CS_ERR_DECODE, "protobuf message indexes: %s is a varint longer than 32 bits", what);
        u |= (uint32_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *v = unzigzag(u);
            return CS_OK;
        }
    }
    return cs__fail(CS_ERR_DECODE, "protobuf message indexes: %s is a varint longer than 32 bits", what);
}

cs_err cs__wire_read_msg_indexes(const void *buf, size_t len, int32_t *idx, size_t cap, size_t *n, size_t *consumed) {
    const uint8_t *b = buf;
    size_t at = 0, i;
    int32_t count;
    cs_err err;
    *n = 0;
    *consumed = 0;
    if ((err = get_varint(b, len, &at, &count, "the count"))) return err;
    if (count < 0) return cs__fail(CS_ERR_DECODE, "protobuf message indexes: negative count %d", count);
    if (count == 0) {
        if (cap < 1) return cs__fail(CS_ERR_DECODE, "protobuf message indexes: no room for the path [0]");
        idx[0] = 0;
        *n = 1;
        *consumed = at;
        return CS_OK;
    }
    if ((size_t)count > cap || count > CS_WIRE_MAX_MSG_INDEXES)
        return cs__fail(CS_ERR_DECODE, "protobuf message indexes: %d levels, at most %zu", count,
                        cap < CS_WIRE_MAX_MSG_INDEXES ? cap : (size_t)CS_WIRE_MAX_MSG_INDEXES);
    for (i = 0; i < (size_t)count; i++) {
        if ((err = get_varint(b, len, &at, &idx[i], "an index"))) return err;
        if (idx[i] < 0)
            return cs__fail(CS_ERR_DECODE, "protobuf message indexes: index %zu is negative (%d)", i, idx[i]);
    }
    *n = (size_t)count;
    *consumed = at;
    return CS_OK;
}
