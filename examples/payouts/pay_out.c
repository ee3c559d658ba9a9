/* pay_out.c — sends a payout through the bank. Payouts must not be lost, so
 * the subscription is Tracked: when the bank does not answer, the payout comes
 * back (retry) before anything fetched after it, and its offset holds the
 * committed position until it is paid. A paid payout answers with a reply on
 * payouts.done; the payout counts as settled only once that reply is
 * delivered. A payout of 0 is dropped. The bank
 * must accept a repeated payout (by id): after a crash a payout that was paid
 * but not yet committed is paid again. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "service.h"

int payout_parse(const void *value, size_t len, payout *out) {
    char buf[256];
    if (!value || len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, value, len);
    buf[len] = '\0';
    /* {"id":<u64>,"amount_cents":<u64>} — typed JSON decoding comes with the codec. */
    return sscanf(buf, "{\"id\":%" SCNu64 ",\"amount_cents\":%" SCNu64 "}", &out->id, &out->amount_cents) == 2 ? 0 : -1;
}

cs_outcome pay_out(cs_delivery *d, void *user) {
    clients *c = user;
    size_t len = 0;
    const void *value = cs_delivery_value(d, &len);
    payout p;
    if (payout_parse(value, len, &p) != 0) {
        fprintf(stderr, "payout does not decode, dropped topic=%s partition=%d offset=%lld\n", cs_delivery_topic(d),
                (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
        return CS_DROP;
    }
    if (p.amount_cents == 0) return CS_DROP;
    if (bank_pay(&c->bank, p.id, p.amount_cents) != 0) return CS_RETRY; /* the payout comes back */
    /* Paid: the source counts as acked once this reply is delivered. */
    char paid[64];
    int n = snprintf(paid, sizeof paid, "{\"payout_id\":%" PRIu64 "}", p.id);
    if (cs_delivery_reply(d, NULL, 0, paid, (size_t)n) != CS_OK) return CS_RETRY;
    return CS_ACK;
}
