/* protobuf_internal.h — what protobuf_codec.c and protobuf_wire.c share.
 * Nothing here is public.
 *
 * Owns: nothing; pure functions over the caller's descriptor and payload (what
 * they allocate is freed before they return). Locks: none. Threads: any. */
#ifndef CS_CODEC_PROTOBUF_INTERNAL_H
#define CS_CODEC_PROTOBUF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "cstream/protobuf.h"

/* Why protobuf-c could not unpack `data` as a `desc`: reads the wire format
 * itself (tags, wire types against the descriptor, lengths, nested messages,
 * packed arrays, required fields) and writes the first fault it finds into
 * why ("field \"items[1].name\" (1): length 40 runs past the end at byte 7 of 12").
 * False, with why untouched, when it finds none. Runs only after a failed
 * unpack: it may allocate (a counter per field) and is not fast. */
bool cs__protobuf_diagnose(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, char *why,
                           size_t size);

/* Whether `data` as a `desc` nests at most CS_PROTOBUF_MAX_DEPTH messages
 * deep; when not, writes where into why. Reads only what it must (message
 * fields' lengths), allocates nothing, and takes a payload it cannot read for
 * fine: unpack refuses that one, and cs__protobuf_diagnose says why. */
bool cs__protobuf_nesting_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, char *why,
                             size_t size);

/* Whether messages of `desc` can nest deeper than CS_PROTOBUF_MAX_DEPTH: a
 * type that contains itself, or a chain of types that long. Also true when
 * it cannot tell (out of memory), so that the caller checks every payload. */
bool cs__protobuf_can_nest_too_deep(const ProtobufCMessageDescriptor *desc);

#endif
