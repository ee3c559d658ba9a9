/* proto_index.c — reads a .proto text for the message indexes of its
 * messages and for its imports (proto_index.h says what counts).
 *
 * Reads just enough of the grammar: comments, string literals, identifiers,
 * `package`, `message NAME {`, `import`, `;` and braces. The text comes from
 * the user (encode) or from the registry (decode; any producer may have
 * registered it), so nothing is trusted: every read stops at the NUL, names
 * and nesting are bounded.
 *
 * Owns nothing; pure functions. Any thread. */
#include "proto_index.h"

#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "wire.h"

/* Deepest nesting of braces followed (messages, enums, options, ...). */
#define CS_PROTO_SCOPE_MAX 256

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9') || c == '.'; }
static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Past white space and comments: the next token's start. */
static const char *skip_blank(const char *p) {
    for (;;) {
        if (is_space(*p)) {
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

static size_t ident_len(const char *p) {
    size_t n = 0;
    if (!ident_start(*p)) return 0;
    while (ident_char(p[n])) n++;
    return n;
}

static bool is_word(const char *p, size_t len, const char *word) {
    return len == strlen(word) && !strncmp(p, word, len);
}

typedef struct scope {
    bool message;      /* a message's body: `message` declarations in it take indexes */
    size_t name_len;   /* length of the full name before this scope's */
    int32_t n_message; /* messages declared in it so far */
} scope;

typedef struct walker {
    char name[CS_PROTO_NAME_MAX];
    size_t name_len;
    scope scopes[CS_PROTO_SCOPE_MAX];
    size_t depth; /* scopes[0] is the file */
    int32_t path[CS_WIRE_MAX_MSG_INDEXES];
    size_t n_path; /* message scopes open */
} walker;

/* Appends ".part" (or "part" to an empty name). */
static cs_err append_name(walker *w, const char *part, size_t len) {
    size_t need = w->name_len + (w->name_len ? 1 : 0) + len;
    if (need >= sizeof w->name)
        return cs__fail(CS_ERR_DECODE, ".proto text: the name %.*s... is longer than %d bytes", (int)len, part,
                        CS_PROTO_NAME_MAX - 1);
    if (w->name_len) w->name[w->name_len++] = '.';
    memcpy(w->name + w->name_len, part, len);
    w->name_len += len;
    w->name[w->name_len] = '\0';
    return CS_OK;
}

static cs_err open_scope(walker *w, bool message) {
    if (w->depth + 1 >= CS_PROTO_SCOPE_MAX)
        return cs__fail(CS_ERR_DECODE, ".proto text: braces nested deeper than %d", CS_PROTO_SCOPE_MAX);
    w->scopes[++w->depth] = (scope){.message = message, .name_len = w->name_len};
    return CS_OK;
}

/* A `message NAME {` (id, len: NAME): the message's scope opened, its index
 * taken and the walk's visitor told. */
static cs_err enter_message(walker *w, const char *id, size_t len, cs__proto_visit visit, void *arg, bool *stop) {
    scope *parent = &w->scopes[w->depth];
    size_t parent_name = w->name_len;
    cs_err err = append_name(w, id, len);
    if (err) return err;
    if (!parent->message) { /* e.g. inside a group or an option: no index, as Confluent counts */
        err = open_scope(w, false);
        w->scopes[w->depth].name_len = parent_name;
        return err;
    }
    if (w->n_path >= CS_WIRE_MAX_MSG_INDEXES)
        return cs__fail(CS_ERR_DECODE, ".proto text: message %s nested deeper than %d messages", w->name,
                        CS_WIRE_MAX_MSG_INDEXES);
    w->path[w->n_path++] = parent->n_message++;
    if ((err = open_scope(w, true))) return err;
    w->scopes[w->depth].name_len = parent_name;
    *stop = visit(arg, w->name, w->path, w->n_path);
    return CS_OK;
}

static cs_err close_scope(walker *w, const char *text, const char *at) {
    if (w->depth == 0)
        return cs__fail(CS_ERR_DECODE, ".proto text: a '}' at byte %zu closes nothing", (size_t)(at - text));
    const scope *s = &w->scopes[w->depth--];
    if (s->message) w->n_path--;
    w->name_len = s->name_len;
    w->name[w->name_len] = '\0';
    return CS_OK;
}

cs_err cs__proto_messages(const char *text, cs__proto_visit visit, void *arg) {
    walker w;
    w.name_len = 0;
    w.name[0] = '\0';
    w.depth = 0;
    w.n_path = 0;
    w.scopes[0] = (scope){.message = true};
    bool stop = false;
    const char *p = text;
    cs_err err = CS_OK;
    while (!err && !stop && *(p = skip_blank(p))) {
        if (*p == '"' || *p == '\'') {
            p = skip_string(p);
            continue;
        }
        if (*p == '{' || *p == '}') {
            err = *p == '{' ? open_scope(&w, false) : close_scope(&w, text, p);
            p++;
            continue;
        }
        size_t len = ident_len(p);
        if (!len) {
            p++;
            continue;
        }
        const char *word = p;
        p += len;
        if (w.depth == 0 && is_word(word, len, "package")) {
            const char *q = skip_blank(p);
            size_t n = ident_len(q);
            if (n) {
                err = append_name(&w, q, n);
                w.scopes[0].name_len = w.name_len;
                p = q + n;
            }
        } else if (is_word(word, len, "message")) {
            const char *q = skip_blank(p);
            size_t n = ident_len(q);
            const char *brace = n ? skip_blank(q + n) : q;
            if (n && *brace == '{' && !memchr(q, '.', n)) {
                p = brace + 1;
                err = enter_message(&w, q, n, visit, arg, &stop);
            }
        }
    }
    if (!err && !stop && w.depth != 0) err = cs__fail(CS_ERR_DECODE, ".proto text: %zu '{' left open", w.depth);
    return err;
}

typedef struct find {
    const char *want;
    int32_t *idx;
    size_t cap, n;
    bool found, too_deep;
} find;

static bool find_visit(void *arg, const char *full_name, const int32_t *idx, size_t n) {
    find *f = arg;
    if (strcmp(full_name, f->want)) return false;
    f->found = true;
    if (n > f->cap) {
        f->too_deep = true;
        return true;
    }
    memcpy(f->idx, idx, n * sizeof *idx);
    f->n = n;
    return true;
}

cs_err cs__proto_index_of(const char *text, const char *full_name, int32_t *idx, size_t cap, size_t *n) {
    find f = {.want = full_name, .idx = idx, .cap = cap};
    *n = 0;
    cs_err err = cs__proto_messages(text, find_visit, &f);
    if (err) return err;
    if (!f.found) return cs__fail(CS_ERR_ARG, ".proto text: it declares no message %s", full_name);
    if (f.too_deep) return cs__fail(CS_ERR_ARG, ".proto text: message %s is nested deeper than %zu", full_name, cap);
    *n = f.n;
    return CS_OK;
}

void cs__proto_imports(const char *text, cs__proto_import_visit visit, void *arg) {
    size_t depth = 0;
    const char *p = text;
    while (*(p = skip_blank(p))) {
        if (*p == '"' || *p == '\'') {
            p = skip_string(p);
            continue;
        }
        if (*p == '{' || *p == '}') {
            if (*p == '{') depth++;
            else if (depth) depth--;
            p++;
            continue;
        }
        size_t len = ident_len(p);
        if (!len) {
            p++;
            continue;
        }
        const char *word = p;
        p += len;
        if (depth || !is_word(word, len, "import")) continue;
        const char *q = skip_blank(p);
        size_t n = ident_len(q);
        if (is_word(q, n, "public") || is_word(q, n, "weak")) q = skip_blank(q + n);
        if (*q != '"' && *q != '\'') continue;
        const char *end = skip_string(q);
        if (end - q < 2 || end[-1] != *q) continue; /* unterminated */
        p = end;
        if (visit(arg, q + 1, (size_t)(end - q - 2))) return;
    }
}
