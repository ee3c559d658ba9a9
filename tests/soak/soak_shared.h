/* soak_shared.h — the memory soak_driver and soak_service share (a file both
 * map MAP_SHARED): the service's counters and one bit per record id, set when
 * the record is acked. The driver creates and sizes the file; the counters and
 * the bitmap survive the service, so a crash cannot hide a lost record. */
#ifndef SOAK_SHARED_H
#define SOAK_SHARED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct soak_shared {
    uint64_t records;                /* ids are 0 .. records-1 (written by the driver) */
    atomic_uint_fast64_t distinct;   /* ids acked at least once */
    atomic_uint_fast64_t duplicates; /* acks of an id already acked */
    atomic_uint_fast64_t retries;    /* first attempts answered with retry (1%) */
    atomic_uint_fast64_t foreign;    /* records that carried no id of ours */
    atomic_uint_fast64_t heap_bytes; /* the service's live malloc'd bytes (mallinfo2), every 250 ms */
    _Atomic uint64_t seen[];         /* bit id%64 of word id/64: acked */
} soak_shared;

static inline uint64_t soak_shared_words(uint64_t records) { return (records + 63) / 64; }

static inline size_t soak_shared_size(uint64_t records) {
    return sizeof(soak_shared) + (size_t)soak_shared_words(records) * sizeof(uint64_t);
}

#endif
