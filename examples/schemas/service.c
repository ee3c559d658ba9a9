/* service.c — the schemas example's app: one Tracked subscription reading
 * payment requests written in Avro with a Schema Registry (the Confluent wire
 * format, cs_codec_avro_registry_new), replying to each with a Receipt in
 * Protobuf (the message protoc-c generated from receipt.proto).
 *
 * Threads: the handler runs on the subscription's workers; everything else
 * here runs once, on main's thread, before cs_app_main and after it. */
#include <stdio.h>
#include <string.h>

#include "cstream/avro.h"
#include "cstream/protobuf.h"
#include "receipt.pb-c.h"
#include "service.h"

const cs_field payment_request_fields[] = {
    CS_FIELD_I64(payment_request, id, CS_REQUIRED),
    CS_FIELD_STRING(payment_request, account, CS_REQUIRED),
    CS_FIELD_I64(payment_request, amount_cents, CS_REQUIRED),
};
CS_TYPE(payment_request_type, payment_request, payment_request_fields);

/* What a receipt says: a negative amount is refused, and gets a receipt too. */
#define RECEIPT_STATUS_OK "accepted"
#define RECEIPT_STATUS_REFUSED "refused"
/* Reply queue timeout: how long a reply may wait for room in the producer. */
#define REPLY_QUEUE_TIMEOUT_MS 5000
/* A receipt that does not encode for a reason of ours (not an outage) is
 * tried again after this long, so that a bug is not a busy loop; no
 * max_attempts is set here, so none is given up. */
#define ENCODE_BUG_RETRY_MS 1000

static cs_outcome on_request(cs_delivery *d, void *user) {
    const schemas_service *svc = user;
    const payment_request *req = cs_delivery_decoded(d);
    Receipts__Receipt r = RECEIPTS__RECEIPT__INIT;
    r.id = req->id;
    r.account = req->account;
    r.amount_cents = req->amount_cents;
    r.status = req->amount_cents >= 0 ? RECEIPT_STATUS_OK : RECEIPT_STATUS_REFUSED;
    /* A receipt that cannot be encoded now (the registry is down): a plain
     * retry waits in place with a back-off and takes no attempt, and nothing
     * behind it in its lane overtakes it. One that does not encode at all (a
     * bug of ours, not the record's) comes back after a pause. */
    cs_err err = cs_delivery_reply_encoded(d, svc->receipts, cs_codec_protobuf_registry_type(svc->receipts), &r);
    if (err == CS_ERR_UNAVAILABLE) return CS_RETRY;
    if (err != CS_OK) {
        cs_delivery_set_reason(d, "receipt does not encode: %s", cs_errmsg());
        return cs_delivery_retry_after(d, ENCODE_BUG_RETRY_MS);
    }
    return CS_ACK;
}

/* The codec of the receipts: Protobuf in the Confluent wire format, its
 * schema registered under "<receipts topic>-value" on the first reply. */
static cs_err receipts_codec(schemas_service *svc) {
    cs_registry_subject_opts subject = {.strategy = CS_SUBJECT_TOPIC_NAME, .topic = svc->receipts_topic};
    return cs_codec_protobuf_registry_new(svc->registry, &receipts__receipt__descriptor, receipt_proto_text, &subject,
                                          &svc->receipts);
}

cs_err schemas_service_new(const schemas_options *opt, schemas_service *svc) {
    memset(svc, 0, sizeof *svc);
    const char *prefix = opt->prefix ? opt->prefix : "";
    snprintf(svc->requests_topic, sizeof svc->requests_topic, "%spayments.requests", prefix);
    snprintf(svc->receipts_topic, sizeof svc->receipts_topic, "%spayments.receipts", prefix);
    snprintf(svc->group, sizeof svc->group, "%sschemas", prefix);
    cs_err err;
    if (!(svc->registry = cs_registry_new(opt->registry_url))) return CS_ERR_ARG; /* cs_errmsg() says why */
    if (opt->registry_user && (err = cs_registry_basic_auth(svc->registry, opt->registry_user, opt->registry_password)))
        goto fail;
    /* Decode only: the schema id in each record names its writer schema. */
    if ((err = cs_codec_avro_registry_new(svc->registry, SCHEMAS_REQUEST_SCHEMA, NULL, &svc->requests))) goto fail;
    if ((err = receipts_codec(svc))) goto fail;

    svc->app = cs_app_new("schemas", "0.1.0");
    cs_kafka *k = cs_kafka_new(NULL); /* --brokers / CSTREAM_BROKERS, else the embedded cluster */
    if (!svc->app || !k) {
        err = CS_ERR_NOMEM;
        cs_kafka_destroy(k);
        goto fail;
    }
    cs_sub *s;
    if ((err = cs_kafka_default_group(k, svc->group)) || (err = cs_kafka_topic(k, svc->requests_topic, 1)) ||
        (err = cs_kafka_topic(k, svc->receipts_topic, 1)) ||
        !(s = cs_kafka_subscribe(k, svc->requests_topic, on_request, svc)) ||
        (err = cs_sub_commit_mode(s, CS_COMMIT_TRACKED)) ||
        (err = cs_sub_decode(s, svc->requests, &payment_request_type)) ||
        (err = cs_sub_reply(s, svc->receipts_topic, REPLY_QUEUE_TIMEOUT_MS))) {
        if (!err) err = CS_ERR_ARG; /* cs_kafka_subscribe said why in cs_errmsg() */
        cs_kafka_destroy(k);
        goto fail;
    }
    if ((err = cs_app_add_kafka(svc->app, k))) {
        cs_kafka_destroy(k);
        goto fail;
    }
    return CS_OK;
fail:
    cs_app_destroy(svc->app);
    svc->app = NULL;
    schemas_service_free(svc);
    return err;
}

void schemas_service_free(schemas_service *svc) {
    cs_codec_registry_destroy(svc->receipts);
    cs_codec_registry_destroy(svc->requests);
    cs_registry_destroy(svc->registry);
    svc->receipts = NULL;
    svc->requests = NULL;
    svc->registry = NULL;
}
