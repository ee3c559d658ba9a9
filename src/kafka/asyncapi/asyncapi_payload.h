/* asyncapi_payload.h — the payload schemas of the AsyncAPI document's
 * messages, from the codecs' schema functions (asyncapi_payload.c).
 * The thread building the document.
 *
 * Owns: nothing; the schemas it adds belong to the caller's document.
 * Locks: none. Threads: the thread building the document. */
#ifndef CS_KAFKA_ASYNCAPI_PAYLOAD_H
#define CS_KAFKA_ASYNCAPI_PAYLOAD_H

#include <stddef.h>

#include "kafka/asyncapi/asyncapi_tree.h"
#include "cstream/codec.h"

/* Puts the schema of payloads that `codec` decodes as `type` under
 * components/schemas (`schemas`) unless an equal one is there, and writes its
 * key into comp: the type's name for a JSON Schema, the type's and codec's
 * names for other formats ("payout.avro"). When the codec shows no schema,
 * comp is the key the schema would have and nothing is added. Errors
 * (cs_errmsg names the type): a schema that does not parse, CS_ERR_NOMEM. */
cs_err cs__aa_payload_schema(aa_doc *d, aa_node *schemas, const cs_codec *codec, const cs_type *type, char *comp,
                             size_t size);

#endif
