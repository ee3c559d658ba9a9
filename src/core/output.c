/* output.c — copies of handler outputs (see output.h).
 *
 * Owns: the outputs it allocates until a list takes them; the list's owner
 * frees them (cs__output_list_free). Locks: none. Threads: any. */
#include "core/output.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace.h"

/* Appends n bytes of src at *at; returns where they went (NULL for NULL src). */
static const void *put(char **at, const void *src, size_t n) {
    if (!src) return NULL;
    void *dst = *at;
    if (n) memcpy(dst, src, n);
    *at += n;
    return dst;
}

cs_output *cs__output_new(const cs_record *r, const char *traceparent, int64_t source_offset) {
    /* The parent is resolved now (traceparent is the caller's reading of it):
     * the output outlives its delivery. */
    size_t n_headers = r->n_headers + (traceparent ? 1 : 0);
    size_t topic_len = strlen(r->topic) + 1;
    size_t bytes = topic_len + (r->key ? r->key_len : 0) + (r->value ? r->value_len : 0);
    for (size_t i = 0; i < r->n_headers; i++)
        bytes += strlen(r->headers[i].name) + 1 + (r->headers[i].value ? r->headers[i].len : 0);
    if (traceparent) bytes += sizeof CS_TRACEPARENT_HEADER + CS_TRACEPARENT_LEN;
    size_t head = sizeof(cs_output) + n_headers * sizeof(cs_header);
    head = (head + alignof(max_align_t) - 1) / alignof(max_align_t) * alignof(max_align_t);
    cs_output *o = malloc(head + bytes);
    if (!o) return NULL;
    cs_header *h = (cs_header *)(o + 1);
    char *at = (char *)o + head;
    o->next = NULL;
    o->source_offset = source_offset;
    o->source_attempt = 0;
    o->source_part = NULL;
    o->rec = *r;
    o->rec.topic = put(&at, r->topic, topic_len);
    o->rec.key = put(&at, r->key, r->key ? r->key_len : 0);
    o->rec.value = put(&at, r->value, r->value ? r->value_len : 0);
    o->rec.headers = n_headers ? h : NULL;
    o->rec.n_headers = n_headers;
    o->rec.parent = NULL;
    for (size_t i = 0; i < r->n_headers; i++) {
        h[i].name = put(&at, r->headers[i].name, strlen(r->headers[i].name) + 1);
        h[i].value = put(&at, r->headers[i].value, r->headers[i].value ? r->headers[i].len : 0);
        h[i].len = r->headers[i].value ? r->headers[i].len : 0;
    }
    if (traceparent) {
        h[r->n_headers].name = put(&at, CS_TRACEPARENT_HEADER, sizeof CS_TRACEPARENT_HEADER);
        h[r->n_headers].value = put(&at, traceparent, CS_TRACEPARENT_LEN);
        h[r->n_headers].len = CS_TRACEPARENT_LEN;
    }
    return o;
}

void cs__output_list_free(cs_output_list *l) {
    cs_output *o, *after;
    CS_STAILQ_FOREACH_SAFE(o, l, next, after) free(o);
    CS_STAILQ_INIT(l);
}
