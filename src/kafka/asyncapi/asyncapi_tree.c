/* asyncapi_tree.c — the AsyncAPI document's tree of JSON values and its two
 * writers, JSON and block-style YAML (asyncapi_tree.h). Knows nothing of
 * AsyncAPI beyond the characters a component key may hold.
 * The thread building one document; no shared state.
 *
 * Owns: the nodes it makes (freed with cs__aa_free) and, until handed to the
 * caller, the text a writer builds. Locks: none. Threads: the thread building
 * the document. */
#define _POSIX_C_SOURCE 200809L
#include "kafka/asyncapi/asyncapi_tree.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OUT_FIRST_CAP 4096 /* bytes the writer's buffer starts with; doubled as needed */
#define STRF_MAX 1024      /* longest formatted string (names and summaries, never schemas) */

aa_node *cs__aa_new(aa_doc *d, aa_kind kind, const char *text) {
    aa_node *n = calloc(1, sizeof *n);
    if (n && text) n->text = strdup(text);
    if (!n || (text && !n->text)) {
        d->oom = true;
        free(n);
        return NULL;
    }
    n->kind = kind;
    return n;
}

void cs__aa_free(aa_node *n) {
    while (n) {
        aa_node *next = n->next;
        cs__aa_free(n->first);
        free(n->key);
        free(n->text);
        free(n);
        n = next;
    }
}

aa_node *cs__aa_add(aa_doc *d, aa_node *parent, const char *key, aa_node *child) {
    if (!parent || !child) {
        cs__aa_free(child);
        return NULL;
    }
    if (key && !(child->key = strdup(key))) {
        d->oom = true;
        cs__aa_free(child);
        return NULL;
    }
    if (parent->last) parent->last->next = child;
    else parent->first = child;
    parent->last = child;
    return child;
}

aa_node *cs__aa_obj(aa_doc *d, aa_node *parent, const char *key) {
    return cs__aa_add(d, parent, key, cs__aa_new(d, AA_OBJ, NULL));
}

aa_node *cs__aa_arr(aa_doc *d, aa_node *parent, const char *key) {
    return cs__aa_add(d, parent, key, cs__aa_new(d, AA_ARR, NULL));
}

aa_node *cs__aa_str(aa_doc *d, aa_node *parent, const char *key, const char *value) {
    return cs__aa_add(d, parent, key, cs__aa_new(d, AA_STR, value ? value : ""));
}

aa_node *cs__aa_strf(aa_doc *d, aa_node *parent, const char *key, const char *fmt, ...) {
    char buf[STRF_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cs__aa_str(d, parent, key, buf);
}

aa_node *cs__aa_num(aa_doc *d, aa_node *parent, const char *key, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return cs__aa_add(d, parent, key, cs__aa_new(d, AA_NUM, buf));
}

aa_node *cs__aa_member(const aa_node *o, const char *key) {
    for (aa_node *c = o ? o->first : NULL; c; c = c->next)
        if (c->key && !strcmp(c->key, key)) return c;
    return NULL;
}

static bool same_text(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

bool cs__aa_equal(const aa_node *a, const aa_node *b) {
    if (a->kind != b->kind || !same_text(a->text, b->text)) return false;
    const aa_node *x = a->first, *y = b->first;
    for (; x && y; x = x->next, y = y->next)
        if (!same_text(x->key, y->key) || !cs__aa_equal(x, y)) return false;
    return !x && !y;
}

void cs__aa_component_name(char *out, size_t size, const char *name) {
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
                  c == '_';
        out[i] = ok ? c : '_';
    }
    out[i] = '\0';
}

/* ---- writers ------------------------------------------------------------------- */

typedef struct out {
    char *p;
    size_t n, cap;
    bool oom;
} out;

static void put(out *o, const char *s, size_t len) {
    if (o->oom) return;
    if (o->n + len + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : OUT_FIRST_CAP;
        while (cap < o->n + len + 1) cap *= 2;
        char *grown = realloc(o->p, cap);
        if (!grown) {
            o->oom = true;
            return;
        }
        o->p = grown;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, len);
    o->n += len;
    o->p[o->n] = '\0';
}
static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }
static void indent(out *o, int depth) {
    for (int i = 0; i < depth; i++) put(o, "  ", 2);
}

/* A JSON string literal; also a valid YAML double-quoted scalar. */
static void quoted(out *o, const char *s) {
    put(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            put(o, esc, 2);
        } else if (*p == '\n') {
            puts_(o, "\\n"); /* .proto texts are many lines: keep them readable */
        } else if (*p < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            puts_(o, esc);
        } else {
            put(o, (const char *)p, 1);
        }
    }
    put(o, "\"", 1);
}

static void scalar(out *o, const aa_node *n) {
    switch (n->kind) {
    case AA_STR: quoted(o, n->text); break;
    case AA_NUM: puts_(o, n->text); break;
    case AA_TRUE: puts_(o, "true"); break;
    case AA_FALSE: puts_(o, "false"); break;
    default: puts_(o, "null"); break;
    }
}

static void write_json(out *o, const aa_node *n, int depth) {
    if (n->kind != AA_OBJ && n->kind != AA_ARR) {
        scalar(o, n);
        return;
    }
    bool is_obj = n->kind == AA_OBJ;
    if (!n->first) {
        puts_(o, is_obj ? "{}" : "[]");
        return;
    }
    puts_(o, is_obj ? "{\n" : "[\n");
    for (const aa_node *c = n->first; c; c = c->next) {
        indent(o, depth + 1);
        if (is_obj) {
            quoted(o, c->key);
            puts_(o, ": ");
        }
        write_json(o, c, depth + 1);
        puts_(o, c->next ? ",\n" : "\n");
    }
    indent(o, depth);
    puts_(o, is_obj ? "}" : "]");
}

static bool is_empty_container(const aa_node *n) { return (n->kind == AA_OBJ || n->kind == AA_ARR) && !n->first; }

/* Block-style YAML: keys and strings always double-quoted, so no value is
 * ever read as another type ("on", "1.0", "null"). */
static void write_yaml(out *o, const aa_node *n, int depth) {
    for (const aa_node *c = n->first; c; c = c->next) {
        indent(o, depth);
        if (n->kind == AA_OBJ) {
            quoted(o, c->key);
            puts_(o, ":");
        } else {
            puts_(o, "-");
        }
        if (is_empty_container(c)) {
            puts_(o, c->kind == AA_OBJ ? " {}\n" : " []\n");
        } else if (c->kind == AA_OBJ || c->kind == AA_ARR) {
            puts_(o, "\n");
            write_yaml(o, c, depth + 1);
        } else {
            puts_(o, " ");
            scalar(o, c);
            puts_(o, "\n");
        }
    }
}

char *cs__aa_write(const aa_node *root, bool yaml) {
    out o = {0};
    if (yaml) {
        write_yaml(&o, root, 0);
    } else {
        write_json(&o, root, 0);
        puts_(&o, "\n");
    }
    if (o.oom || !o.p) {
        free(o.p);
        return NULL;
    }
    return o.p;
}
