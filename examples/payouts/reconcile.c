/* reconcile.c — takes statement lines in batches of up to 500 and settles
 * each line on its own: an empty line is dropped with a warning, the others
 * are matched in the ledger. Every line gets an outcome: outcomes[] starts as
 * CS_UNSET, and a line left unset would be logged as a handler bug and come
 * back as a retry. Under Tracked a line that asked for a retry would come back
 * alone, with the committed position in front of it. */
#include <inttypes.h>
#include <stdio.h>

#include "service.h"

cs_outcome reconcile(cs_delivery *const *lines, size_t n, cs_outcome *outcomes, void *user) {
    clients *c = user;
    for (size_t i = 0; i < n; i++) {
        const statement_line *line = cs_delivery_decoded(lines[i]);
        if (line->amount_cents == 0) {
            fprintf(stderr, "empty statement line dropped payout_id=%" PRIu64 " offset=%lld\n", line->payout_id,
                    (long long)cs_delivery_offset(lines[i]));
            outcomes[i] = CS_DROP;
            continue;
        }
        ledger_match(&c->ledger, line->payout_id, line->amount_cents);
        outcomes[i] = CS_ACK;
    }
    return CS_EACH;
}
