/* proto_text.c — the .proto text lexer and the walk over its `message`
 * declarations (proto_text.h says who uses them and what is trusted).
 *
 * Reads just enough of the grammar: comments, string literals, identifiers,
 * `package`, `message NAME {` and braces; every read stops at the NUL, the
 * full name and the nesting are bounded (the text may be a stranger's).
 *
 * Owns: nothing; pure functions. Locks: none. Threads: any thread. */
#include "codec/proto_text.h"

#include <string.h>

#include "base/error.h"

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9') || c == '.'; }
static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

const char *cs__proto_skip_blank(const char *p) {
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

const char *cs__proto_skip_string(const char *p) {
    char quote = *p++;
    while (*p && *p != quote && *p != '\n') p += (p[0] == '\\' && p[1]) ? 2 : 1;
    return *p == quote ? p + 1 : p;
}

size_t cs__proto_ident_len(const char *p) {
    size_t n = 0;
    if (!ident_start(*p)) return 0;
    while (ident_char(p[n])) n++;
    return n;
}

bool cs__proto_is_word(const char *p, size_t len, const char *word) {
    return len == strlen(word) && !strncmp(p, word, len);
}

const char *cs__proto_token(const char *p, const char **tok, size_t *len) {
    for (;;) {
        p = cs__proto_skip_blank(p);
        if (*p == '"' || *p == '\'') {
            p = cs__proto_skip_string(p);
            continue;
        }
        size_t n = *p == '{' || *p == '}' ? 1 : cs__proto_ident_len(p);
        if (n || !*p) {
            *tok = p;
            *len = n;
            return p + n;
        }
        p++; /* other punctuation, a number, ... */
    }
}

/* ---- the walk over the messages ---- */

typedef struct scope {
    bool message;      /* a message's body: `message` declarations in it take indexes */
    size_t name_len;   /* length of the full name before this scope's */
    int32_t n_message; /* messages declared in it so far */
} scope;

typedef struct walker {
    const char *text;
    char name[CS_PROTO_NAME_MAX];
    size_t name_len;
    scope scopes[CS_PROTO_SCOPE_MAX];
    size_t depth; /* scopes[0] is the file */
    int32_t path[CS_PROTO_MSG_DEPTH_MAX];
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

/* A `message NAME {` (keyword: where `message` stands; id, len: NAME): the
 * message's scope opened, its index taken and the walk's visitor told. */
static cs_err enter_message(walker *w, const char *keyword, const char *id, size_t len, cs__proto_visit visit,
                            void *arg, bool *stop) {
    scope *parent = &w->scopes[w->depth];
    size_t parent_name = w->name_len;
    cs_err err = append_name(w, id, len);
    if (err) return err;
    if (!parent->message) { /* e.g. inside a group or an option: no index, as Confluent counts */
        err = open_scope(w, false);
        w->scopes[w->depth].name_len = parent_name;
        return err;
    }
    if (w->n_path >= CS_PROTO_MSG_DEPTH_MAX)
        return cs__fail(CS_ERR_DECODE, ".proto text: message %s nested deeper than %d messages", w->name,
                        CS_PROTO_MSG_DEPTH_MAX);
    w->path[w->n_path++] = parent->n_message++;
    if ((err = open_scope(w, true))) return err;
    w->scopes[w->depth].name_len = parent_name;
    cs__proto_decl decl = {.full_name = w->name, .idx = w->path, .n = w->n_path, .at = (size_t)(keyword - w->text)};
    *stop = visit(arg, &decl);
    return CS_OK;
}

static cs_err close_scope(walker *w, const char *at) {
    if (w->depth == 0)
        return cs__fail(CS_ERR_DECODE, ".proto text: a '}' at byte %zu closes nothing", (size_t)(at - w->text));
    const scope *s = &w->scopes[w->depth--];
    if (s->message) w->n_path--;
    w->name_len = s->name_len;
    w->name[w->name_len] = '\0';
    return CS_OK;
}

cs_err cs__proto_messages(const char *text, cs__proto_visit visit, void *arg) {
    walker w;
    w.text = text;
    w.name_len = 0;
    w.name[0] = '\0';
    w.depth = 0;
    w.n_path = 0;
    w.scopes[0] = (scope){.message = true};
    bool stop = false;
    const char *p = text;
    cs_err err = CS_OK;
    const char *word;
    size_t len;
    while (!err && !stop && (p = cs__proto_token(p, &word, &len), len)) {
        if (*word == '{' || *word == '}') {
            err = *word == '{' ? open_scope(&w, false) : close_scope(&w, word);
            continue;
        }
        if (w.depth == 0 && cs__proto_is_word(word, len, "package")) {
            const char *q = cs__proto_skip_blank(p);
            size_t n = cs__proto_ident_len(q);
            if (n) {
                err = append_name(&w, q, n);
                w.scopes[0].name_len = w.name_len;
                p = q + n;
            }
        } else if (cs__proto_is_word(word, len, "message")) {
            const char *q = cs__proto_skip_blank(p);
            size_t n = cs__proto_ident_len(q);
            const char *brace = n ? cs__proto_skip_blank(q + n) : q;
            if (n && *brace == '{' && !memchr(q, '.', n)) {
                p = brace + 1;
                err = enter_message(&w, word, q, n, visit, arg, &stop);
            }
        }
    }
    if (!err && !stop && w.depth != 0) err = cs__fail(CS_ERR_DECODE, ".proto text: %zu '{' left open", w.depth);
    return err;
}
