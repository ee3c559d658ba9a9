/* protobuf_internal.h — what protobuf_codec.c and protobuf_diagnose.c share.
 * Nothing here is public. */
#ifndef CS_CODEC_PROTOBUF_INTERNAL_H
#define CS_CODEC_PROTOBUF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Deepest nesting of messages the diagnosis follows (the top level counts as 1). */
#define CS__PROTOBUF_DIAG_MAX_DEPTH 64

/* Why protobuf-c could not unpack `data` as a `desc`: reads the wire format
 * itself (tags, wire types against the descriptor, lengths, nested messages,
 * packed arrays, required fields) and writes the first fault it finds into
 * why ("field \"items[1].name\" (1): length 40 runs past the end at byte 7 of 12").
 * False, with why untouched, when it finds none. Runs only after a failed
 * unpack: it may allocate (a counter per field) and is not fast. */
bool cs__protobuf_diagnose(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, char *why,
                           size_t size);

#endif
