/* asyncapi_tree.h — the AsyncAPI document as a small tree of JSON values,
 * built by asyncapi.c and asyncapi_payload.c and written as JSON or YAML
 * (asyncapi_tree.c). A builder call on a NULL parent, or one that runs out of
 * memory, does nothing and marks the document (aa_doc.oom), so a build reads
 * as a list of additions and checks once at the end.
 * One document per call of cs__aa_document: its thread only, no lock.
 *
 * Owns: declares aa_node and aa_doc; the builder owns the tree and frees it
 * with cs__aa_free, the caller frees cs__aa_write's text. Locks: none.
 * Threads: the thread building the document. */
#ifndef CS_KAFKA_ASYNCAPI_TREE_H
#define CS_KAFKA_ASYNCAPI_TREE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum aa_kind { AA_OBJ, AA_ARR, AA_STR, AA_NUM, AA_TRUE, AA_FALSE, AA_NULL } aa_kind;

typedef struct aa_node {
    aa_kind kind;
    char *key;  /* member name inside an object */
    char *text; /* AA_STR: the string, AA_NUM: the number as written */
    struct aa_node *first, *last, *next;
} aa_node;

typedef struct aa_doc {
    bool oom;
} aa_doc;

/* A detached node (text copied; NULL for containers and literals); NULL when out of memory. */
aa_node *cs__aa_new(aa_doc *d, aa_kind kind, const char *text);
/* Frees n, its children and its next siblings. NULL: nothing. */
void cs__aa_free(aa_node *n);
/* Appends child under parent (as member `key` when parent is an object) and
 * returns it; frees child and returns NULL when parent is NULL. */
aa_node *cs__aa_add(aa_doc *d, aa_node *parent, const char *key, aa_node *child);
aa_node *cs__aa_obj(aa_doc *d, aa_node *parent, const char *key);
aa_node *cs__aa_arr(aa_doc *d, aa_node *parent, const char *key);
/* A string member or item (NULL value: ""). */
aa_node *cs__aa_str(aa_doc *d, aa_node *parent, const char *key, const char *value);
aa_node *cs__aa_strf(aa_doc *d, aa_node *parent, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
aa_node *cs__aa_num(aa_doc *d, aa_node *parent, const char *key, long long v);
/* Object o's member `key`, or NULL (also when o is NULL). */
aa_node *cs__aa_member(const aa_node *o, const char *key);
/* Whether two values are equal (member names and order included). */
bool cs__aa_equal(const aa_node *a, const aa_node *b);

/* A component key or channel id from a name: characters AsyncAPI does not
 * allow in component keys become '_'. */
void cs__aa_component_name(char *out, size_t size, const char *name);

/* The document as text (malloc'ed, NUL-terminated): JSON, or block-style YAML
 * with every key and string double-quoted. NULL when out of memory. */
char *cs__aa_write(const aa_node *root, bool yaml);

#endif
