/* client.c — schemas_client, the other side of the schemas example: publishes
 * N payment requests in Avro with a typed publish (cs_publish_encoded over a
 * registry-backed codec writing SCHEMAS_REQUEST_SCHEMA, which it registers under
 * "<requests topic>-value" on its first publish), then reads the receipts
 * topic with a Protobuf subscription and prints each receipt, until it has
 * seen one per request or a minute passed.
 *
 *     schemas_client [N]      (default 3)
 *
 * Brokers from CSTREAM_BROKERS, the registry from CSTREAM_REGISTRY_URL (and
 * _USER / _PASSWORD), topics with SCHEMAS_PREFIX, as the service.
 * Threads: main publishes and waits; the receipts handler runs on a worker. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstream/avro.h"
#include "cstream/protobuf.h"
#include "receipt.pb-c.h"
#include "service.h"

#define DEFAULT_REQUESTS 3
#define WAIT_RECEIPTS_MS 60000
#define POLL_MS 50

static atomic_int receipts_seen;

static cs_outcome on_receipt(cs_delivery *d, void *user) {
    (void)user;
    const Receipts__Receipt *r = cs_delivery_decoded(d);
    printf("receipt id=%lld account=%s amount_cents=%lld status=%s\n", (long long)r->id, r->account,
           (long long)r->amount_cents, r->status);
    fflush(stdout);
    atomic_fetch_add(&receipts_seen, 1);
    return CS_ACK;
}

static int run(int n, const char *prefix, cs_codec *requests, cs_codec *receipts) {
    char in[200], out[200], group[200];
    snprintf(in, sizeof in, "%spayments.requests", prefix);
    snprintf(out, sizeof out, "%spayments.receipts", prefix);
    snprintf(group, sizeof group, "%sschemas-client-%ld", prefix, (long)time(NULL));
    cs_app *app = cs_app_new("schemas_client", "0.1.0");
    cs_kafka *k = cs_kafka_new(getenv("CSTREAM_BROKERS"));
    cs_sub *s = k ? cs_kafka_subscribe(k, out, on_receipt, NULL) : NULL;
    if (!app || !s || cs_sub_group(s, group) || cs_sub_decode(s, receipts, cs_codec_protobuf_registry_type(receipts)) ||
        cs_kafka_topic(k, in, 1) || cs_kafka_topic(k, out, 1) || cs_app_add_kafka(app, k) || cs_app_start(app)) {
        fprintf(stderr, "schemas_client: %s\n", cs_errmsg());
        cs_app_destroy(app);
        return 1;
    }
    int status = 0;
    for (int i = 0; i < n && !status; i++) {
        char account[32];
        snprintf(account, sizeof account, "acct-%d", i % 4);
        payment_request req = {.id = i, .account = account, .amount_cents = 1000 + i};
        cs_published where;
        if (cs_publish_encoded(k, in, account, strlen(account), requests, &payment_request_type, &req, &where) !=
            CS_OK) {
            fprintf(stderr, "schemas_client: %s\n", cs_errmsg());
            status = 1;
        } else printf("request id=%d partition=%d offset=%lld\n", i, (int)where.partition, (long long)where.offset);
    }
    for (int waited = 0; !status && atomic_load(&receipts_seen) < n && waited < WAIT_RECEIPTS_MS; waited += POLL_MS)
        nanosleep(&(struct timespec){0, POLL_MS * 1000000L}, NULL);
    if (!status && atomic_load(&receipts_seen) < n) {
        fprintf(stderr, "schemas_client: %d of %d receipts after %d ms\n", atomic_load(&receipts_seen), n,
                WAIT_RECEIPTS_MS);
        status = 1;
    }
    cs_app_stop(app);
    cs_app_destroy(app);
    return status;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : DEFAULT_REQUESTS;
    const char *url = getenv("CSTREAM_REGISTRY_URL");
    const char *prefix = getenv("SCHEMAS_PREFIX") ? getenv("SCHEMAS_PREFIX") : "";
    if (!url || n <= 0) {
        fprintf(stderr, "usage: CSTREAM_REGISTRY_URL=... schemas_client [N > 0]\n");
        return 2;
    }
    char topic[200];
    snprintf(topic, sizeof topic, "%spayments.requests", prefix);
    cs_registry *reg = cs_registry_new(url);
    if (reg && getenv("CSTREAM_REGISTRY_USER"))
        cs_registry_basic_auth(reg, getenv("CSTREAM_REGISTRY_USER"), getenv("CSTREAM_REGISTRY_PASSWORD"));
    cs_registry_subject_opts subject = {.strategy = CS_SUBJECT_TOPIC_NAME, .topic = topic};
    cs_codec *requests = NULL, *receipts = NULL;
    if (!reg || cs_codec_avro_registry_new(reg, SCHEMAS_REQUEST_SCHEMA, &subject, &requests) ||
        cs_codec_protobuf_registry_new(reg, &receipts__receipt__descriptor, receipt_proto_text, NULL, &receipts)) {
        fprintf(stderr, "schemas_client: %s\n", cs_errmsg());
        return 1;
    }
    int status = run(n, prefix, requests, receipts);
    cs_codec_registry_destroy(receipts);
    cs_codec_registry_destroy(requests);
    cs_registry_destroy(reg);
    return status;
}
