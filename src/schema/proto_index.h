/* proto_index.h — what the registry's Protobuf format needs to know of a
 * .proto text, read without protoc: where each message sits among the file's
 * messages (the message indexes of the Confluent wire format) and which files
 * it imports (its schema references).
 *
 * The indexes count `message` declarations only, in the order the text
 * declares them, at the top level and inside messages, as Confluent's
 * serializers and deserializers count them: enums, services, map entries and
 * groups take no index. Payments.Payout declared second in its file is [1];
 * Outer.Inner, the first message inside the first message, is [0, 0].
 *
 * Pure functions of their arguments: any thread, no lock.
 *
 * Owns: nothing; the text and the index array are the caller's. Locks: none.
 * Threads: any thread. */
#ifndef CS_SCHEMA_PROTO_INDEX_H
#define CS_SCHEMA_PROTO_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/proto_text.h"
#include "cstream/error.h"

/* The index path of the message named `full_name` in `text` (idx: room for
 * cap). CS_ERR_ARG naming it when the text declares no such message; the
 * errors of cs__proto_messages (src/codec/proto_text.h, the walk this is
 * built on). */
cs_err cs__schema_proto_index_of(const char *text, const char *full_name, int32_t *idx, size_t cap, size_t *n);

/* Called for each `import "name";` (also `import public` / `import weak`)
 * with the imported file's name (len bytes, not NUL-terminated). Returns
 * true to stop. */
typedef bool (*cs__proto_import_visit)(void *arg, const char *name, size_t len);

/* Walks the imports of `text` (top-level statements only). */
void cs__schema_proto_imports(const char *text, cs__proto_import_visit visit, void *arg);

#endif
