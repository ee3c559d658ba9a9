/* proto_text.h — a .proto text read without protoc: the lexer (blanks and
 * comments, string literals, identifiers) and the walk over its `message`
 * declarations, shared by the registry's Protobuf format
 * (src/schema/proto_index.c: message indexes, imports), the codec's schema
 * format (protobuf_codec.c) and the AsyncAPI document
 * (src/kafka/asyncapi/asyncapi_proto.c: the declaration to mark @RootNode).
 *
 * The text may come from the registry (any producer may have registered it),
 * so nothing in it is trusted: every read stops at the NUL, names and nesting
 * are bounded. Pure functions of their arguments: any thread, no lock.
 *
 * Owns: nothing; declares cs__proto_decl, valid during one visit only and
 * pointing into the caller's text. Locks: none. Threads: any thread. */
#ifndef CS_CODEC_PROTO_TEXT_H
#define CS_CODEC_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cstream/error.h"

/* Longest full name ("package.Outer.Inner") followed; a longer one fails. */
#define CS_PROTO_NAME_MAX 512
/* Deepest nesting of braces followed (messages, enums, options, ...). */
#define CS_PROTO_SCOPE_MAX 256
/* Deepest nesting of messages followed: the Confluent wire format's bound on
 * message indexes (src/schema/wire.h checks that it agrees). */
#define CS_PROTO_MSG_DEPTH_MAX 100

/* The length of the (possibly dotted) identifier at p, 0 if none starts there. */
size_t cs__proto_ident_len(const char *p);

/* Whether the len bytes at p are `word`. */
bool cs__proto_is_word(const char *p, size_t len, const char *word);

/* Past white space and comments: the next token's start (at the NUL when
 * none; an unterminated comment runs to the end). */
const char *cs__proto_skip_blank(const char *p);

/* Past one string literal starting at its quote (escapes honoured); an
 * unterminated one stops at the end of its line, on the newline or the NUL. */
const char *cs__proto_skip_string(const char *p);

/* The next brace or identifier at or after p, blanks, comments, string
 * literals and any other punctuation stepped over: *tok is where it starts,
 * *len its length (1 for a brace; 0 at the end of the text, *tok then at
 * the NUL). Returns where the token after it may start. */
const char *cs__proto_token(const char *p, const char **tok, size_t *len);

/* A `message` declaration the walk met. */
typedef struct cs__proto_decl {
    const char *full_name; /* the package, enclosing messages and its name, dot-joined */
    const int32_t *idx;    /* its index path (n >= 1), as Confluent counts */
    size_t n;
    size_t at; /* byte offset of its `message` keyword in the text */
} cs__proto_decl;

/* Called for each message the text declares, in declaration order (the
 * declaration is valid during the call only). Returns true to stop the walk. */
typedef bool (*cs__proto_visit)(void *arg, const cs__proto_decl *decl);

/* Walks the messages of `text`: those at the top level and inside messages,
 * which are the ones that take message indexes (one inside a group or an
 * option block takes none and is not visited). CS_ERR_DECODE, with the
 * reason, for a text it cannot follow before the visitor stops it: unbalanced
 * braces, nesting past CS_PROTO_SCOPE_MAX braces or CS_PROTO_MSG_DEPTH_MAX
 * messages, a name past CS_PROTO_NAME_MAX. Comments and string literals are
 * skipped; anything else it does not know is stepped over. */
cs_err cs__proto_messages(const char *text, cs__proto_visit visit, void *arg);

#endif
