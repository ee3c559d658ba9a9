/* asyncapi_proto.h — a .proto text made readable to AsyncAPI's Protobuf
 * schema parser (asyncapi_proto.c). Pure functions: any thread.
 *
 * Owns: nothing; the caller frees what cs__aa_proto_mark_root returns.
 * Locks: none. Threads: any thread. */
#ifndef CS_KAFKA_ASYNCAPI_PROTO_H
#define CS_KAFKA_ASYNCAPI_PROTO_H

#include <stddef.h>

/* The marker AsyncAPI's Protobuf schema parser looks for in a message's
 * leading comment when a file has several top-level candidates for the payload. */
#define CS_AA_PROTO_ROOT_MARK "@RootNode"

/* Where in `text` the declaration of message `full_name` ("pkg.Outer.Inner")
 * starts (the offset of its `message` keyword), or -1 if the text declares no
 * such message. */
long cs__aa_proto_find_message(const char *text, const char *full_name);

/* A malloc'ed copy of `text` in which message `full_name` is the payload
 * AsyncAPI's parser picks: a `// @RootNode` line goes in front of its
 * declaration, unless the text marks a message already or does not declare
 * this one (then the copy is unchanged). NULL when out of memory. */
char *cs__aa_proto_mark_root(const char *text, const char *full_name);

#endif
