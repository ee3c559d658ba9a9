/* asyncapi_proto.c — finds a message's declaration in a .proto text and marks
 * it as the payload for AsyncAPI's Protobuf schema parser
 * (@asyncapi/protobuf-schema-parser). That parser takes as the payload the
 * one message no other message of the file uses; a file with several such
 * messages (payments.proto has Payout and Tree) fails to parse unless one of
 * them carries @RootNode in its leading comment. cstream knows which message
 * a codec decodes, so it marks that one; a comment changes nothing of what
 * the schema means.
 *
 * Reads just enough of the .proto grammar: comments, string literals,
 * identifiers, `package`, `message` and braces. A text it cannot follow is
 * left as it is (the AsyncAPI parser then says what it thinks of it).
 * Pure functions of their arguments: any thread. */
#include "asyncapi_proto.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 512 /* longest full name followed; a longer one is not found */
#define SCOPE_MAX 64     /* deepest nesting of braces followed */

static const char ROOT_LINE[] = "// " CS_AA_PROTO_ROOT_MARK "\n";

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9') || c == '.'; }

/* Past white space, comments and string literals: the next token's start. */
static const char *skip_blank(const char *p) {
    for (;;) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') {
            p++;
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n') p++;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            p = end ? end + 2 : p + strlen(p);
        } else {
            return p;
        }
    }
}

/* Past one string literal starting at its quote (escapes honoured). */
static const char *skip_string(const char *p) {
    char quote = *p++;
    while (*p && *p != quote && *p != '\n') p += (p[0] == '\\' && p[1]) ? 2 : 1;
    return *p == quote ? p + 1 : p;
}

/* Whether `path` (the package and enclosing messages, dot-joined) plus
 * `name` is `want`. */
static bool full_name_is(const char *path, const char *name, size_t len, const char *want) {
    size_t plen = strlen(path);
    if (plen) {
        if (strncmp(want, path, plen) || want[plen] != '.') return false;
        want += plen + 1;
    }
    return strlen(want) == len && !strncmp(want, name, len);
}

long cs__aa_proto_find_message(const char *text, const char *full_name) {
    char path[NAME_MAX_LEN] = ""; /* the package, then the enclosing messages */
    size_t outer[SCOPE_MAX];      /* strlen(path) outside each open brace */
    int depth = 0;
    enum { NONE, AFTER_MESSAGE, AFTER_PACKAGE } want = NONE;
    const char *keyword = NULL, *name = NULL; /* the pending `message <name>` */
    size_t name_len = 0;
    for (const char *p = skip_blank(text); *p; p = skip_blank(p)) {
        if (*p == '"' || *p == '\'') {
            p = skip_string(p);
            want = NONE;
        } else if (ident_start(*p)) {
            const char *start = p;
            while (ident_char(*p)) p++;
            size_t len = (size_t)(p - start);
            if (want == AFTER_MESSAGE) {
                name = start;
                name_len = len;
                want = NONE;
            } else if (want == AFTER_PACKAGE) {
                if (len >= sizeof path) return -1;
                memcpy(path, start, len);
                path[len] = '\0';
                want = NONE;
            } else if (len == strlen("message") && !strncmp(start, "message", len)) {
                keyword = start;
                name = NULL;
                want = AFTER_MESSAGE;
            } else {
                want = depth == 0 && len == strlen("package") && !strncmp(start, "package", len) ? AFTER_PACKAGE : NONE;
            }
        } else if (*p == '{') {
            if (name && full_name_is(path, name, name_len, full_name)) return (long)(keyword - text);
            if (depth == SCOPE_MAX) return -1;
            size_t plen = strlen(path);
            outer[depth++] = plen;
            if (name) { /* a message's block: its name joins the path */
                if (plen + 1 + name_len >= sizeof path) return -1;
                if (plen) path[plen++] = '.';
                memcpy(path + plen, name, name_len);
                path[plen + name_len] = '\0';
            }
            name = NULL;
            want = NONE;
            p++;
        } else {
            if (*p == '}' && depth > 0) path[outer[--depth]] = '\0';
            name = NULL;
            want = NONE;
            p++;
        }
    }
    return -1;
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
