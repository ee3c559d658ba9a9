/* asyncapi_proto.c — finds a message's declaration in a .proto text and marks
 * it as the payload for AsyncAPI's Protobuf schema parser
 * (@asyncapi/protobuf-schema-parser). That parser takes as the payload the
 * one message no other message of the file uses; a file with several such
 * messages (payments.proto has Payout and Tree) fails to parse unless one of
 * them carries @RootNode in its leading comment. cstream knows which message
 * a codec decodes, so it marks that one; a comment changes nothing of what
 * the schema means.
 *
 * Finds the declaration on the .proto walk the registry's Protobuf format
 * uses too (src/codec/proto_text.c), with its bounds: a text it cannot follow
 * (or follows only past its bounds) is left as it is, and the AsyncAPI parser
 * then says what it thinks of it.
 * Pure functions of their arguments: any thread.
 *
 * Owns: nothing; the marked copy is the caller's to free. Locks: none.
 * Threads: any thread. */
#include "kafka/asyncapi/asyncapi_proto.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/proto_text.h"

static const char ROOT_LINE[] = "// " CS_AA_PROTO_ROOT_MARK "\n";

typedef struct find {
    const char *want;
    long at;
} find;

static bool find_visit(void *arg, const cs__proto_decl *d) {
    find *f = arg;
    if (strcmp(d->full_name, f->want)) return false;
    f->at = (long)d->at;
    return true;
}

long cs__aa_proto_find_message(const char *text, const char *full_name) {
    find f = {.want = full_name, .at = -1};
    /* A text the walk refuses (its error message is not this caller's
     * concern) declares nothing it can point at. */
    if (cs__proto_messages(text, find_visit, &f) != CS_OK) return -1;
    return f.at;
}

/* Whether only blanks stand between the start of text[at]'s line and it. */
static bool starts_line(const char *text, long at) {
    while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t')) at--;
    return at == 0 || text[at - 1] == '\n';
}

char *cs__aa_proto_mark_root(const char *text, const char *full_name) {
    long at = strstr(text, CS_AA_PROTO_ROOT_MARK) ? -1 : cs__aa_proto_find_message(text, full_name);
    /* The marker must be the whole line right above the `message` keyword's:
     * the parser reads the comment on the line before a declaration as its
     * comment (one on the line of something else may be taken as that's). */
    const char *before = at >= 0 && !starts_line(text, at) ? "\n" : "";
    size_t len = strlen(text), extra = at < 0 ? 0 : strlen(before) + strlen(ROOT_LINE);
    char *out = malloc(len + extra + 1);
    if (!out) return NULL;
    if (at < 0) {
        memcpy(out, text, len + 1);
        return out;
    }
    memcpy(out, text, (size_t)at);
    snprintf(out + at, extra + 1, "%s%s", before, ROOT_LINE);
    memcpy(out + at + extra, text + at, len - (size_t)at + 1);
    return out;
}
