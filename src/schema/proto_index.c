/* proto_index.c — reads a .proto text for the message index of one message
 * and for its imports (proto_index.h says what counts), on the shared lexer
 * and message walk of src/codec/proto_text.c.
 *
 * The text comes from the user (encode) or from the registry (decode; any
 * producer may have registered it), so nothing is trusted: every read stops
 * at the NUL, names and nesting are bounded.
 *
 * Owns: nothing; pure functions. Locks: none. Threads: any thread. */
#include "schema/proto_index.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "schema/wire.h"

_Static_assert(CS_PROTO_MSG_DEPTH_MAX <= CS_WIRE_MAX_MSG_INDEXES,
               "the .proto walk follows no more nested messages than the wire format has indexes for");

typedef struct find {
    const char *want;
    int32_t *idx;
    size_t cap, n;
    bool found, too_deep;
} find;

static bool find_visit(void *arg, const cs__proto_decl *d) {
    find *f = arg;
    if (strcmp(d->full_name, f->want)) return false;
    f->found = true;
    if (d->n > f->cap) {
        f->too_deep = true;
        return true;
    }
    memcpy(f->idx, d->idx, d->n * sizeof *d->idx);
    f->n = d->n;
    return true;
}

cs_err cs__schema_proto_index_of(const char *text, const char *full_name, int32_t *idx, size_t cap, size_t *n) {
    find f = {.want = full_name, .idx = idx, .cap = cap};
    *n = 0;
    cs_err err = cs__proto_messages(text, find_visit, &f);
    if (err) return err;
    if (!f.found) return cs__fail(CS_ERR_ARG, ".proto text: it declares no message %s", full_name);
    if (f.too_deep) return cs__fail(CS_ERR_ARG, ".proto text: message %s is nested deeper than %zu", full_name, cap);
    *n = f.n;
    return CS_OK;
}

void cs__schema_proto_imports(const char *text, cs__proto_import_visit visit, void *arg) {
    size_t depth = 0;
    const char *p = text, *word;
    size_t len;
    while ((p = cs__proto_token(p, &word, &len), len)) {
        if (*word == '{' || *word == '}') {
            if (*word == '{') depth++;
            else if (depth) depth--;
            continue;
        }
        if (depth || !cs__proto_is_word(word, len, "import")) continue;
        const char *q = cs__proto_skip_blank(p);
        size_t n = cs__proto_ident_len(q);
        if (cs__proto_is_word(q, n, "public") || cs__proto_is_word(q, n, "weak")) q = cs__proto_skip_blank(q + n);
        if (*q != '"' && *q != '\'') continue;
        const char *end = cs__proto_skip_string(q);
        if (end - q < 2 || end[-1] != *q) continue; /* unterminated */
        p = end;
        if (visit(arg, q + 1, (size_t)(end - q - 2))) return;
    }
}
