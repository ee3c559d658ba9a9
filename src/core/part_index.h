/* part_index.h — the pipeline's partitions by (topic, partition): an
 * open-addressing hash table, so that finding a partition costs the same
 * with 4 partitions or 4,000. The registry (pipeline.c) looked them up with
 * a scan of every partition ever seen, and the commit tick, the revoke and
 * the readings look up every assigned partition: O(P^2) per tick.
 *
 * Entries are never removed: the registry keeps a partition for the life of
 * its subscription (partition.h). The table borrows each entry's topic and
 * value; both must outlive it (a partition's own copy of its topic does).
 *
 * Owner: whoever embeds the cs_part_index; a zeroed one is empty and valid.
 * Threads: none of its own; the owner says who may call (pipeline.c: only
 * the fetch thread adds, under parts_lock; the fetch thread finds without
 * it, other threads find under it). Never calls out. Unit test: tests/unit/test_part_index.c.
 *
 * Owns: declares cs_part_index; its owner frees the slots with
 * cs__part_index_free (not the topics or values). Locks: none of its own. */
#ifndef CS_CORE_PART_INDEX_H
#define CS_CORE_PART_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cs_part_slot {
    const char *topic; /* borrowed; NULL: the slot is free */
    int32_t partition;
    uint64_t hash; /* of (topic, partition): most mismatches cost no strcmp */
    void *value;   /* borrowed: the table never reads or frees it */
} cs_part_slot;

typedef struct cs_part_index {
    cs_part_slot *slots; /* cap slots, a power of two, at most half of them used */
    size_t n, cap;
} cs_part_index;

/* The value stored for (topic, partition), or NULL. O(1) on average. */
void *cs__part_index_find(const cs_part_index *ix, const char *topic, int32_t partition);
/* Stores value under (topic, partition), which must not be in the table yet.
 * Returns false when the table cannot grow (out of memory); the table is
 * then unchanged. */
bool cs__part_index_add(cs_part_index *ix, const char *topic, int32_t partition, void *value);
/* Entries stored. */
size_t cs__part_index_count(const cs_part_index *ix);
/* Frees the slots (not what they point to); the index is empty and valid again. */
void cs__part_index_free(cs_part_index *ix);

#endif
