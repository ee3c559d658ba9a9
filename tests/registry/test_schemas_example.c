/* test_schemas_example.c — the schemas example (examples/schemas) end to end,
 * as its users run it: the `schemas` binary in a child process (`run`,
 * cs_app_main) on the real broker (scripts/kafka) with the real Schema
 * Registry (scripts/registry, basic auth), both through tests/with-registry
 * and tests/with-real-broker. The test writes Avro payment requests in the
 * registry's wire format, waits for the service's group to commit past them
 * (Tracked: only once each reply was delivered), stops it with SIGTERM, reads
 * the receipts topic and decodes every receipt with a registry-backed
 * Protobuf codec of receipt.proto (wire format, schema id from the registry): one receipt per request, none lost, each with the request's
 * account and amount. Topics and group are fresh per run (SCHEMAS_PREFIX). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "cstest.h"
#include "cstream/avro.h"
#include "cstream/protobuf.h"
#include "cstream/registry.h"
#include "receipt.pb-c.h"
#include "service.h"

#define REQUESTS 20
/* Bounded waits: the child's group join plus REQUESTS round trips. */
#define COMMIT_WAIT_MS 60000
#define READ_WAIT_MS 20000

typedef struct receipts {
    const cs_codec *c;
    int per_id[REQUESTS];
    int total, wrong;
} receipts;

static void on_receipt(const rd_kafka_message_t *m, void *arg) {
    receipts *r = arg;
    Receipts__Receipt *rc = calloc(1, sizeof *rc);
    if (r->c->decode(r->c, cs_codec_protobuf_registry_type(r->c), m->payload, m->len, rc) != CS_OK)
        fail_msg("receipt at offset %lld: %s", (long long)m->offset, cs_errmsg());
    char want[32];
    snprintf(want, sizeof want, "acct-%lld", (long long)rc->id);
    r->total++;
    if (rc->id < 0 || rc->id >= REQUESTS || strcmp(rc->account, want) || rc->amount_cents != 100 * rc->id + 1 ||
        strcmp(rc->status, "accepted"))
        r->wrong++;
    else r->per_id[rc->id]++;
    cs_codec_free_value(r->c, cs_codec_protobuf_registry_type(r->c), rc);
    free(rc);
}

static pid_t start_service(const char *prefix) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("SCHEMAS_PREFIX", prefix, 1);
        /* CSTREAM_BROKERS and CSTREAM_REGISTRY_* come from the wrappers. */
        execl(SCHEMAS_BINARY, SCHEMAS_BINARY, "run", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void avro_in_protobuf_out(void **state) {
    (void)state;
    char topic[128], group[160], prefix[160], in[200], out[200], svc_group[200];
    cst_fresh("schemas-example", 1, topic, group, sizeof topic);
    snprintf(prefix, sizeof prefix, "%s.", topic);
    snprintf(in, sizeof in, "%spayments.requests", prefix);
    snprintf(out, sizeof out, "%spayments.receipts", prefix);
    snprintf(svc_group, sizeof svc_group, "%sschemas", prefix);
    CST_OK(cs_test_topic_create(cst_cluster, in, 1));
    CST_OK(cs_test_topic_create(cst_cluster, out, 1));

    cs_registry *reg = cs_registry_new(getenv("CSTREAM_REGISTRY_URL"));
    assert_non_null(reg);
    if (getenv("CSTREAM_REGISTRY_USER"))
        CST_OK(cs_registry_basic_auth(reg, getenv("CSTREAM_REGISTRY_USER"), getenv("CSTREAM_REGISTRY_PASSWORD")));
    cs_registry_subject_opts subject = {.strategy = CS_SUBJECT_TOPIC_NAME, .topic = in};
    cs_codec *avro = NULL, *proto = NULL;
    CST_OK(cs_codec_avro_registry_new(reg, SCHEMAS_REQUEST_SCHEMA, &subject, &avro));
    CST_OK(cs_codec_protobuf_registry_new(reg, &receipts__receipt__descriptor, receipt_proto_text, NULL, &proto));

    pid_t pid = start_service(prefix);
    for (int i = 0; i < REQUESTS; i++) {
        char account[32];
        snprintf(account, sizeof account, "acct-%d", i);
        payment_request req = {.id = i, .account = account, .amount_cents = 100 * i + 1};
        char *buf = NULL;
        size_t len = 0;
        CST_OK(avro->encode(avro, &payment_request_type, &req, &buf, &len));
        CST_OK(cs_test_produce(cst_cluster, in, 0, account, strlen(account), buf, len, NULL));
        free(buf);
    }
    cs_err waited = cs_test_wait_committed(cst_cluster, svc_group, in, 0, REQUESTS, COMMIT_WAIT_MS);
    kill(pid, SIGTERM);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    CST_OK(waited);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    receipts r = {.c = proto};
    assert_true(cst_read_records(out, 1, on_receipt, &r, READ_WAIT_MS) >= REQUESTS);
    assert_int_equal(r.wrong, 0);
    for (int i = 0; i < REQUESTS; i++)
        if (r.per_id[i] < 1) fail_msg("request %d got no receipt (lost)", i);
    /* A clean run under Tracked replies once per request. */
    assert_int_equal(r.total, REQUESTS);
    cs_codec_registry_destroy(proto);
    cs_codec_registry_destroy(avro);
    cs_registry_destroy(reg);
}

int main(void) {
    if (!getenv("CSTREAM_REGISTRY_URL")) {
        fprintf(stderr, "CSTREAM_REGISTRY_URL is not set: run through tests/with-registry\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(avro_in_protobuf_out)};
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
