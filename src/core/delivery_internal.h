/* delivery_internal.h — the record in flight through the core.
 * A delivery belongs to exactly one place at a time: a lane's queue (lane
 * lock), a worker running its handler, or the partition's in-flight list
 * (partition lock) while its handler runs or keeps it pending.
 *
 * Owns: declares cs_delivery; a delivery owns its reason, reply buffer,
 * decoded value and key and outputs, which cs__delivery_free frees (then
 * frees d or keeps it as a pool spare). Locks: none of its own; the place
 * that holds it guards it. Threads: made on the fetch thread, run on a
 * worker, settled on any thread. */
#ifndef CS_CORE_DELIVERY_INTERNAL_H
#define CS_CORE_DELIVERY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/list.h"
#include "cstream/codec.h"
#include "cstream/delivery.h"
#include "core/output.h"
#include "core/partition.h"
#include "core/run_store.h"
#include "core/trace.h"

struct cs_delivery {
    /* record, filled by the source; key/value/headers borrowed from msg */
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp;
    const void *key, *value;
    size_t key_len, value_len;
    void *msg; /* the source's record; NULL once released */

    /* where it stands */
    cs_part *part;
    uint64_t epoch; /* part->epoch when fetched */
    uint64_t seq;   /* tracker sequence number (Tracked) */
    int attempt;    /* handler runs so far */
    /* Runs that ended in a retry after an encode of this delivery found its
     * schema registry unavailable (CS_ERR_UNAVAILABLE): the record was not at
     * fault, so they take nothing from max_attempts (cs__counted_attempts). */
    int free_runs;
    int outage_runs;         /* such runs in a row, for the back-off */
    bool outage_wait;        /* back off in place before the next run */
    bool encode_unavailable; /* this run: an encode answered CS_ERR_UNAVAILABLE */
    int lane;
    bool alone;          /* a retried record: it runs in a batch of its own */
    int64_t retry_at_ms; /* cs_delivery_retry_after: when it may run again (0: at once) */
    char *reason;        /* cs_delivery_set_reason, for this attempt */
    bool decode_failed;  /* counted in decode_failures already */
    int decode_waits;    /* decodes in a row that said "try later" (CS_ERR_UNAVAILABLE), for the back-off */
    cs_delivery *next; /* its lane's queue (cs_delivery_queue), a run or chain of the caller's, or the spares' stack */
    CS_LIST_LINK(cs_delivery) in_flight; /* its partition's in-flight list */
    bool listed; /* on its partition's in-flight list (which may hold older epochs after a rewind) */

    /* the decoded value (the subscription's codec); small values live in decoded_inline */
    void *decoded;
    const cs_type *decoded_type;
    const cs_codec *decoded_codec; /* frees it (cs_codec_free_value) */
    /* the decoded key (the subscription's key codec), always malloc'ed: keys
     * are decoded only when asked for, so no delivery carries room for one */
    void *decoded_key;
    const cs_type *decoded_key_type;
    const cs_codec *decoded_key_codec;

    /* the handler's reply (cs_delivery_reply), published when acked */
    char *reply_buf; /* key bytes then value bytes */
    size_t reply_key_len, reply_value_len;
    bool reply_key_null, reply_value_null;

    /* Database: this record's writes were kept and its reply settles it
     * later (the window waits for that); or its run was refused the
     * database's writes because it went pending (its ack counts as a retry). */
    const cs_run_store *store_await;
    uint64_t store_gen; /* the window's generation store_await was taken in */
    bool store_refused;

    /* Transactional: this attempt's outputs (cs_delivery_publish, and the
     * reply and dead-letter record once settled), in the order produced */
    cs_output_list outputs;

    /* From here on a reused delivery is not zeroed (CS_DELIVERY_ZEROED):
     * cs__delivery_read_trace writes both strings before anything reads
     * them, and decoded_inline is read only once `decoded` points at it. */
    /* its valid `traceparent` header, copied at fetch (empty: none), and the
     * trace id in it, for log lines (see trace.h) */
    char traceparent[CS_TRACEPARENT_LEN + 1];
    char trace_id[CS_TRACE_ID_LEN + 1];
    union {
        max_align_t align;
        unsigned char bytes[64];
    } decoded_inline;
};

/* Deliveries in order, linked through `next` (a lane's queue, a run bound
 * for one lane); all zeroes is empty. */
typedef CS_STAILQ(cs_delivery) cs_delivery_queue;

/* The bytes of a delivery a spare must have zeroed to start as calloc'd. */
#define CS_DELIVERY_ZEROED offsetof(cs_delivery, traceparent)

/* Transactional: appends o to d's outputs (d's owner calls it). */
void cs__delivery_add_output(cs_delivery *d, cs_output *o);

/* The store d's run may write into (Database mode), if d is current and its
 * partition assigned; else NULL. */
const cs_run_store *cs__delivery_run_store(cs_delivery *d);

/* Reads d's traceparent header (d->part and d->msg set); called once at fetch. */
void cs__delivery_read_trace(cs_delivery *d);

/* The traceparent a record inherits from its parent delivery (cs_record
 * .parent), unless it sets its own header; NULL if none. Any thread. */
const char *cs__inherited_traceparent(const cs_record *r);

/* A log line about d ends with CS_TRACE_FMT, given CS_TRACE_ARGS(d): " trace_id=<32 hex>", or nothing. */
#define CS_TRACE_FMT "%s%s"
#define CS_TRACE_ARGS(d) ((d)->trace_id[0] ? " trace_id=" : ""), (d)->trace_id

/* The runs that count against max_attempts: all but the free ones. */
static inline int cs__counted_attempts(const cs_delivery *d) { return d->attempt - d->free_runs; }

/* Decodes d's value once (kept across attempts); on failure cs_errmsg() names the field. */
cs_err cs__delivery_decode(cs_delivery *d, const cs_codec *codec, const cs_type *type);

/* Decodes d's key once (kept across attempts), like cs__delivery_decode; a
 * null key is the codec's to refuse (a payload that is null). */
cs_err cs__delivery_decode_key(cs_delivery *d, const cs_codec *codec, const cs_type *type);

/* Producer side: the dead-letter record of d was accepted (ok) or not. */
void cs__delivery_dead_letter_done(cs_delivery *d, bool ok);

/* Producer side: the reply of a gated delivery was delivered (ok) or not. */
void cs__delivery_reply_done(cs_delivery *d, bool ok);

/* Releases the record (if still held), drops the partition reference, and
 * frees d or keeps it as a spare for the pipeline's next record. */
void cs__delivery_free(cs_delivery *d);

#endif
