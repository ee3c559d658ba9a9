/* wire.h — the Confluent wire format's framing around a payload.
 *
 *   byte 0      magic byte, always 0
 *   bytes 1..4  the schema id, a big-endian signed 32-bit integer
 *   Protobuf only: the message indexes, the path from the schema file's
 *               top-level messages to the record's message, as zigzag
 *               varints: the count, then each index; the common path [0]
 *               (the first top-level message) is written as one 0 byte
 *   then        the payload (Avro binary, Protobuf, ...)
 *
 * Pure functions of their arguments: any thread, no allocation, no lock.
 *
 * Owns: nothing; the buffers are the caller's. Locks: none. Threads: any. */
#ifndef CS_SCHEMA_WIRE_H
#define CS_SCHEMA_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cstream/error.h"

#define CS_WIRE_MAGIC 0
#define CS_WIRE_HEADER_LEN 5 /* magic + id */
/* Message nesting deeper than this is refused on read: a bound on what a
 * record can make the decoder do (Protobuf itself nests at most 100). */
#define CS_WIRE_MAX_MSG_INDEXES 100
/* A zigzag varint of a 32-bit value takes at most 5 bytes. */
#define CS_WIRE_VARINT_MAX 5

/* Writes magic + id into out[0..4]. */
void cs__wire_write_header(uint8_t out[CS_WIRE_HEADER_LEN], int32_t id);

/* Reads magic + id from the start of buf. CS_ERR_DECODE (with the reason:
 * too short, or the first byte is not the magic byte) if buf does not start
 * with a wire-format header. */
cs_err cs__wire_read_header(const void *buf, size_t len, int32_t *id);

/* Writes the message indexes (n of them, each >= 0) into out (cap bytes);
 * *written gets the byte count. n == 1 with idx[0] == 0 (and n == 0) is the
 * one byte 0. CS_ERR_ARG for a negative index or n over
 * CS_WIRE_MAX_MSG_INDEXES; CS_ERR_ENCODE if cap is too small. */
cs_err cs__wire_write_msg_indexes(const int32_t *idx, size_t n, uint8_t *out, size_t cap, size_t *written);

/* Reads message indexes from buf (len bytes, what follows the header) into
 * idx (room for cap); *n gets their number (a lone 0 byte reads as [0], so
 * *n >= 1) and *consumed the bytes read. CS_ERR_DECODE (with the reason) for
 * a truncated or overlong varint, a negative count or index, or more than
 * cap or CS_WIRE_MAX_MSG_INDEXES indexes. */
cs_err cs__wire_read_msg_indexes(const void *buf, size_t len, int32_t *idx, size_t cap, size_t *n, size_t *consumed);

#endif
