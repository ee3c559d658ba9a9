/* arena.c — yajl's memory, taken from a buffer on the caller's stack.
 *
 * Owns: nothing beyond one call: a parser or generator handle allocates its
 * state (handle, lexer, state stack, string buffer: ~0.5 KiB, 2.5 KiB once a
 * string has escapes) here instead of with 4-6 mallocs per record. Blocks
 * that do not fit go to malloc, so a long escaped string still works.
 *
 * Threads: an arena belongs to the one call that declared its buffer.
 * Must never: hand out a block that is not aligned for any type, or free a
 * pointer it did not allocate.
 * Locks: none. */
#include "codec/codec_internal.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN (_Alignof(max_align_t))
#define NO_BLOCK ((size_t)-1)

/* Each block is a header (its size, rounded up to ARENA_ALIGN) followed by the data. */
typedef union block_header {
    size_t size;
    max_align_t align;
} block_header;

static size_t round_up(size_t n) { return (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1); }

static bool arena_owns(const cs__codec_arena *a, const void *p) {
    uintptr_t u = (uintptr_t)p, lo = (uintptr_t)a->mem;
    return u >= lo && u < lo + a->cap;
}

static block_header *header_of(void *p) { return (block_header *)((unsigned char *)p - sizeof(block_header)); }

static void *arena_malloc(void *ctx, size_t size) {
    cs__codec_arena *a = ctx;
    size_t need = sizeof(block_header) + round_up(size);
    if (size <= a->cap && need <= a->cap - a->used) {
        block_header *h = (block_header *)(a->mem + a->used);
        h->size = size;
        a->last = a->used;
        a->used += need;
        return h + 1;
    }
    return malloc(size);
}

static void arena_free(void *ctx, void *p) {
    cs__codec_arena *a = ctx;
    if (p == NULL) return;
    if (!arena_owns(a, p)) {
        free(p);
        return;
    }
    /* Only the most recent block gives its space back; the rest is reclaimed
     * when the call returns. */
    if (a->last != NO_BLOCK && (unsigned char *)header_of(p) == a->mem + a->last) {
        a->used = a->last;
        a->last = NO_BLOCK;
    }
}

static void *arena_realloc(void *ctx, void *p, size_t size) {
    cs__codec_arena *a = ctx;
    if (p == NULL) return arena_malloc(a, size);
    if (!arena_owns(a, p)) return realloc(p, size);

    block_header *h = header_of(p);
    size_t at = (size_t)((unsigned char *)h - a->mem);
    if (at == a->last && size <= a->cap && sizeof(block_header) + round_up(size) <= a->cap - at) {
        h->size = size; /* the last block grows or shrinks in place */
        a->used = at + sizeof(block_header) + round_up(size);
        return p;
    }
    size_t old = h->size;
    void *moved = arena_malloc(a, size);
    if (moved == NULL) return NULL;
    memcpy(moved, p, old < size ? old : size);
    arena_free(a, p);
    return moved;
}

void cs__codec_arena_init(cs__codec_arena *a, void *mem, size_t cap, yajl_alloc_funcs *funcs) {
    a->mem = mem;
    a->cap = cap;
    a->used = 0;
    a->last = NO_BLOCK;
    funcs->malloc = arena_malloc;
    funcs->realloc = arena_realloc;
    funcs->free = arena_free;
    funcs->ctx = a;
}
