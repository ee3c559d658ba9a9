/* fuzz_schema_wire.c — what cstream reads from the front of a record in the
 * Schema Registry wire format (src/schema/wire.c): the header (magic byte,
 * schema id), then Protobuf's message indexes.
 *
 * Any bytes may come from a topic. Checked: nothing is read past the input
 * (ASan); a header that reads back is 5 bytes starting with 0 and rewrites
 * to the same bytes; indexes that read back consume no more than the input,
 * are all >= 0, and rewrite to bytes that read back to the same path (the
 * writer's form is canonical: [0] as the lone 0 byte, shortest varints). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schema/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t id, idx[CS_WIRE_MAX_MSG_INDEXES], back[CS_WIRE_MAX_MSG_INDEXES];
    size_t n, used, w, n2, used2;
    uint8_t hdr[CS_WIRE_HEADER_LEN], out[CS_WIRE_MAX_MSG_INDEXES * CS_WIRE_VARINT_MAX + CS_WIRE_VARINT_MAX];

    if (cs__wire_read_header(data, size, &id) == CS_OK) {
        if (size < CS_WIRE_HEADER_LEN || data[0] != 0) abort();
        cs__wire_write_header(hdr, id);
        if (memcmp(hdr, data, CS_WIRE_HEADER_LEN) != 0) abort();
    }
    /* The indexes as they would follow a header: the whole input. */
    if (cs__wire_read_msg_indexes(data, size, idx, CS_WIRE_MAX_MSG_INDEXES, &n, &used) != CS_OK) return 0;
    if (used == 0 || used > size || n == 0 || n > CS_WIRE_MAX_MSG_INDEXES) abort();
    for (size_t i = 0; i < n; i++)
        if (idx[i] < 0) abort();
    if (cs__wire_write_msg_indexes(idx, n, out, sizeof out, &w) != CS_OK) abort();
    if (cs__wire_read_msg_indexes(out, w, back, CS_WIRE_MAX_MSG_INDEXES, &n2, &used2) != CS_OK) abort();
    if (n2 != n || used2 != w || memcmp(idx, back, n * sizeof *idx) != 0) abort();
    return 0;
}
