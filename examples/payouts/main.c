/* main.c — the payouts demo: runs the service on the embedded cluster (or
 * CSTREAM_BROKERS), seeds page views, lets the handlers work with a counters
 * store that fails now and then, and prints what happened. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service.h"

enum { VIEWS = 2000, PAYOUTS = 500 };

static void fast_timings(cs_kafka *k) {
    /* The embedded cluster answers an empty fetch only after fetch.wait.max.ms. */
    cs_kafka_config(k, "fetch.wait.max.ms", "10");
    cs_kafka_config(k, "auto.commit.interval.ms", "200");
    cs_kafka_producer_config(k, "enable.idempotence", "true");
    cs_kafka_producer_config(k, "linger.ms", "0"); /* the demo publishes one record at a time */
}

int main(void) {
    clients cl;
    payouts_options opt = {.clients = &cl, .counters_fail_every = 50, .bank_fail_every = 20, .tune = fast_timings};
    payouts_service svc;
    if (payouts_service_new(&opt, &svc) != CS_OK || cs_app_start(svc.app) != CS_OK) {
        fprintf(stderr, "payouts: %s\n", cs_errmsg());
        return 1;
    }
    printf("payouts: seeding %d page views on %s\n", VIEWS, cs_kafka_bootstrap(svc.kafka));
    static const char *pages[] = {"/home", "/pricing", "/docs", "/signup"};
    for (int i = 0; i < VIEWS; i++) {
        char key[16];
        int kl = snprintf(key, sizeof key, "visitor-%d", i % 97);
        cs_record r = {.topic = TOPIC_PAGE_VIEWS, .partition = -1, .key = key, .key_len = (size_t)kl,
                       .value = pages[i % 4]};
        r.value_len = strlen(pages[i % 4]);
        if (cs_publish(svc.kafka, &r, NULL) != CS_OK) {
            fprintf(stderr, "payouts: %s\n", cs_errmsg());
            break;
        }
    }
    printf("payouts: seeding %d payouts (every 50th is of 0 cents)\n", PAYOUTS);
    for (int i = 1; i <= PAYOUTS; i++) {
        char value[96], key[24];
        int vl = snprintf(value, sizeof value, "{\"id\":%d,\"amount_cents\":%d}", i, i % 50 == 0 ? 0 : 100 * i);
        int kl = snprintf(key, sizeof key, "%d", i);
        cs_record r = {.topic = TOPIC_PAYOUTS, .partition = -1, .key = key, .key_len = (size_t)kl, .value = value,
                       .value_len = (size_t)vl};
        if (cs_publish(svc.kafka, &r, NULL) != CS_OK) {
            fprintf(stderr, "payouts: %s\n", cs_errmsg());
            break;
        }
    }
    /* Every view is handled once (counted, or lost to a store failure); every
     * payout is settled (paid or dropped), retried as often as the bank fails. */
    cs_sub_stats st, pst;
    for (int waited = 0; waited < 60000; waited += 50) {
        cs_sub_stats_get(svc.count_view, &st);
        cs_sub_stats_get(svc.pay_out, &pst);
        if (st.delivered >= VIEWS && pst.acked + pst.dropped >= PAYOUTS) break;
        usleep(50 * 1000);
    }
    cs_app_stop(svc.app);
    cs_sub_stats_get(svc.count_view, &st);
    cs_sub_stats_get(svc.pay_out, &pst);
    printf("\npay_out (group payouts, commit tracked, 4 workers)\n");
    printf("  paid:             %llu\n", (unsigned long long)pst.acked);
    printf("  dropped (0 cts):  %llu\n", (unsigned long long)pst.dropped);
    printf("  retried (bank):   %llu (each came back and was paid)\n", (unsigned long long)pst.retried);
    printf("  commits:          %llu\n", (unsigned long long)pst.commits);
    printf("  committed positions of group payouts:\n");
    for (int p = 0; p < 4; p++) {
        int64_t off = -1;
        if (cs_kafka_committed(svc.kafka, "payouts", TOPIC_PAYOUTS, p, &off) == CS_OK)
            printf("    %s/%d: %lld\n", TOPIC_PAYOUTS, p, (long long)off);
    }
    printf("\ncount_view (group analytics, commit auto)\n");
    printf("  handled:          %llu\n", (unsigned long long)st.delivered);
    printf("  counted:          %llu\n", (unsigned long long)st.acked);
    printf("  lost to failures: %llu (retry is unsupported under auto)\n", (unsigned long long)st.retry_unsupported);
    printf("  committed positions of group analytics:\n");
    for (int p = 0; p < 4; p++) {
        int64_t off = -1;
        if (cs_kafka_committed(svc.kafka, "analytics", TOPIC_PAGE_VIEWS, p, &off) == CS_OK)
            printf("    %s/%d: %lld\n", TOPIC_PAGE_VIEWS, p, (long long)off);
        else
            printf("    %s/%d: %s\n", TOPIC_PAGE_VIEWS, p, cs_errmsg());
    }
    int ok = st.delivered == VIEWS && st.acked + st.retry_unsupported == VIEWS && pst.acked + pst.dropped == PAYOUTS;
    cs_app_destroy(svc.app);
    return ok ? 0 : 1;
}
