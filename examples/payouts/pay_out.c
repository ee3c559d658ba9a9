/* pay_out.c — sends a payout through the bank. Payouts must not be lost, so
 * the subscription is Tracked: when the bank does not answer, the payout comes
 * back (retry) before anything fetched after it, and its offset holds the
 * committed position until it is paid. A paid payout answers with a Paid reply
 * on payouts.done; the payout counts as settled only once that reply is
 * delivered. A payout of 0 is dropped. The bank must accept a repeated payout
 * (by id): after a crash a payout that was paid but not yet committed is paid
 * again. */
#include "service.h"

cs_outcome pay_out(cs_delivery *d, void *user) {
    clients *c = user;
    const payout *p = cs_delivery_decoded(d);
    if (p->amount_cents == 0) return CS_DROP;
    if (p->amount_cents > BANK_LIMIT_CENTS) { /* refused every time: after 5 attempts, the dead-letter topic */
        cs_delivery_set_reason(d, "amount %llu above the bank's limit", (unsigned long long)p->amount_cents);
        return CS_RETRY;
    }
    if (bank_pay(&c->bank, p->id, p->amount_cents) != 0) {
        cs_delivery_set_reason(d, "bank unavailable");
        return CS_RETRY; /* the payout comes back */
    }
    paid done = {.payout_id = p->id};
    if (cs_delivery_reply_encoded(d, &cs_codec_json, &paid_type, &done) != CS_OK) return CS_RETRY;
    return CS_ACK;
}
