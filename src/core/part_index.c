/* part_index.c — the pipeline's partitions by (topic, partition)
 * (part_index.h): open addressing with linear probing, kept at most half
 * full so that a probe ends after about two slots.
 *
 * Owns: the slots (not the partitions). Locks: none of its own. Threads: as
 * part_index.h says: the pipeline's only writer, or a reader under parts_lock. */
#include "core/part_index.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Slots of the first table: a subscription usually has a few partitions,
 * and 16 slots hold 8 of them before the first growth. */
#define FIRST_CAP 16

static uint64_t hash_of(const char *topic, int32_t partition) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over the topic's bytes, then the partition's */
    for (const unsigned char *c = (const unsigned char *)topic; *c; c++) h = (h ^ *c) * 1099511628211ULL;
    uint32_t p = (uint32_t)partition;
    for (int i = 0; i < 4; i++) h = (h ^ ((p >> (8 * i)) & 0xff)) * 1099511628211ULL;
    return h;
}

/* The slot holding (topic, partition), or the free slot where it would go. */
static cs_part_slot *probe(cs_part_slot *slots, size_t cap, uint64_t hash, const char *topic, int32_t partition) {
    size_t mask = cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        cs_part_slot *s = &slots[i];
        if (!s->topic) return s;
        if (s->hash == hash && s->partition == partition && !strcmp(s->topic, topic)) return s;
    }
}

void *cs__part_index_find(const cs_part_index *ix, const char *topic, int32_t partition) {
    if (ix->n == 0) return NULL;
    cs_part_slot *s = probe(ix->slots, ix->cap, hash_of(topic, partition), topic, partition);
    return s->topic ? s->value : NULL;
}

/* Moves every entry into a table of cap slots; false (nothing changed) when
 * out of memory. */
static bool rehash(cs_part_index *ix, size_t cap) {
    cs_part_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < ix->cap; i++) {
        cs_part_slot *s = &ix->slots[i];
        if (s->topic) *probe(slots, cap, s->hash, s->topic, s->partition) = *s;
    }
    free(ix->slots);
    ix->slots = slots;
    ix->cap = cap;
    return true;
}

bool cs__part_index_add(cs_part_index *ix, const char *topic, int32_t partition, void *value) {
    /* At most half full: with linear probing, a lookup then inspects about
     * 1.5 slots when it finds its entry and 2.5 when it does not (Knuth). */
    if ((ix->n + 1) * 2 > ix->cap && !rehash(ix, ix->cap ? ix->cap * 2 : FIRST_CAP)) return false;
    uint64_t hash = hash_of(topic, partition);
    cs_part_slot *s = probe(ix->slots, ix->cap, hash, topic, partition);
    assert(!s->topic); /* the registry adds a partition once */
    *s = (cs_part_slot){.topic = topic, .partition = partition, .hash = hash, .value = value};
    ix->n++;
    return true;
}

size_t cs__part_index_count(const cs_part_index *ix) { return ix->n; }

void cs__part_index_free(cs_part_index *ix) {
    free(ix->slots);
    *ix = (cs_part_index){0};
}
