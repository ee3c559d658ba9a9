/* payloads.h — the payouts service's messages as C structs, each with the
 * field table that decodes and encodes it as JSON. */
#ifndef PAYOUTS_PAYLOADS_H
#define PAYOUTS_PAYLOADS_H

#include <cstream.h>
#include <stdint.h>

typedef struct payout {
    uint64_t id;
    uint64_t amount_cents;
} payout;

typedef struct paid {
    uint64_t payout_id;
} paid;

typedef struct page_view {
    char *page;
} page_view;

typedef struct statement_line {
    uint64_t payout_id;
    uint64_t amount_cents;
} statement_line;

extern const cs_type payout_type, paid_type, page_view_type, statement_line_type;

#endif
