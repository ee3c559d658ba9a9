/* test_asyncapi_schemas.c — the AsyncAPI document (cs_app_asyncapi) of an app
 * whose subscriptions decode Avro and Protobuf, checked by the AsyncAPI
 * project's parser with its Avro and Protobuf schema parsers (node
 * tests/asyncapi/validate.mjs; fails if node is missing):
 *   - the Avro subscription's payload is a Multi Format Schema Object with
 *     schemaFormat application/vnd.apache.avro;version=1.9.0 and the Avro
 *     schema as a JSON object; the Protobuf one has the .proto text as a
 *     string (version=2 for payments.proto), its message marked @RootNode;
 *     the parser turns both into AsyncAPI schemas with the records' fields
 *     (which it only does if it parsed them); JSON and YAML;
 *   - a dead-letter topic carries the subscription's typed message;
 *   - the same type under JSON, Avro and two different Avro schemas gets one
 *     component per schema;
 *   - a broken Avro schema (from a codec of its own, as a registry-backed one
 *     would be) and a broken .proto text make the parser reject the document:
 *     the schema parsers really read the schemas.
 * No cluster: the document is written from the configuration alone. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "cstest.h"
#include "cstream/avro.h"
#include "cstream/protobuf.h"
#include "payments.pb-c.h"

#ifndef ASYNCAPI_VALIDATE
#error "ASYNCAPI_VALIDATE must name tests/asyncapi/validate.mjs"
#endif
#ifndef NODE_EXE
#define NODE_EXE "node"
#endif

extern char **environ;
extern const char payments_proto_text[]; /* tests/proto/payments.proto, embedded at build time */

/* Never contacted: the document needs no cluster. */
#define UNUSED_SERVERS "127.0.0.1:9"

typedef struct payout {
    int64_t id;
    int64_t amount_cents;
    char *memo;
} payout;

static const cs_field payout_fields[] = {
    CS_FIELD_I64(payout, id, CS_REQUIRED),
    CS_FIELD_I64(payout, amount_cents, CS_REQUIRED),
    CS_FIELD_STRING(payout, memo, CS_OPTIONAL),
};
static CS_TYPE(payout_type, payout, payout_fields);

static const char AVRO_V1[] = "{\"type\":\"record\",\"name\":\"payout\",\"namespace\":\"payments\",\"fields\":["
                              "{\"name\":\"id\",\"type\":\"long\"},"
                              "{\"name\":\"amount_cents\",\"type\":\"long\"},"
                              "{\"name\":\"memo\",\"type\":[\"null\",\"string\"],\"default\":null}]}";
/* v2: a field more, with its default; a different schema of the same type. */
static const char AVRO_V2[] = "{\"type\":\"record\",\"name\":\"payout\",\"namespace\":\"payments\",\"fields\":["
                              "{\"name\":\"id\",\"type\":\"long\"},"
                              "{\"name\":\"amount_cents\",\"type\":\"long\"},"
                              "{\"name\":\"memo\",\"type\":[\"null\",\"string\"],\"default\":null},"
                              "{\"name\":\"currency\",\"type\":\"string\",\"default\":\"EUR\"}]}";

static char tmpdir[] = "/tmp/cs-asyncapi-XXXXXX";

static cs_outcome ack(cs_delivery *d, void *user) {
    (void)d, (void)user;
    return CS_ACK;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Runs validate.mjs on `text` (written to tmpdir/name); returns node's exit
 * status, its output in *out (the caller frees). */
static int validate(const char *name, const char *text, const char *expect, char **out) {
    char file[300], log[300];
    snprintf(file, sizeof file, "%s/%s", tmpdir, name);
    snprintf(log, sizeof log, "%s/%s.log", tmpdir, name);
    write_file(file, text);
    if (access(NODE_EXE, X_OK)) fail_msg("node (%s) is missing: the AsyncAPI check cannot run", NODE_EXE);
    const char *argv[] = {NODE_EXE, ASYNCAPI_VALIDATE, file, expect, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, NODE_EXE, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) fail_msg("posix_spawn %s: %s", NODE_EXE, strerror(rc));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid); /* the test's ctest timeout bounds it */
    *out = cst_slurp(log);
    assert_non_null(*out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void expect_valid(const char *name, const char *text, const char *expect) {
    char *out;
    int status = validate(name, text, expect, &out);
    if (status != 0 || !strstr(out, "VALID"))
        fail_msg("the AsyncAPI parser rejected %s (exit %d):\n%s", name, status, out);
    free(out);
}

static void expect_invalid(const char *name, const char *text, const char *why) {
    char *out;
    int status = validate(name, text, NULL, &out);
    if (status == 0 || !strstr(out, why))
        fail_msg("the AsyncAPI parser should have rejected %s for \"%s\" (exit %d):\n%s", name, why, status, out);
    free(out);
}

static const char *string_at(yajl_val doc, const char **path) {
    yajl_val v = yajl_tree_get(doc, path, yajl_t_string);
    return v ? YAJL_GET_STRING(v) : NULL;
}

/* An app of one broker; subscriptions added by the test. */
static cs_app *app_new(cs_kafka **k) {
    cs_app *app = cs_app_new("payments-svc", "2.0.0");
    *k = cs_kafka_new(UNUSED_SERVERS);
    assert_non_null(app);
    assert_non_null(*k);
    CST_OK(cs_kafka_default_group(*k, "payments-svc"));
    CST_OK(cs_app_add_kafka(app, *k));
    return app;
}

static cs_sub *subscribe(cs_kafka *k, const char *topic, const cs_codec *codec, const cs_type *type) {
    cs_sub *s = cs_kafka_subscribe(k, topic, ack, NULL);
    assert_non_null(s);
    CST_OK(cs_sub_decode(s, codec, type));
    return s;
}

static void avro_and_protobuf_payloads_parse(void **state) {
    (void)state;
    cs_codec *avro, *avro2, *pb;
    CST_OK(cs_codec_avro_new(AVRO_V1, NULL, &avro));
    CST_OK(cs_codec_avro_new(AVRO_V2, NULL, &avro2));
    CST_OK(cs_codec_protobuf_new(&payments__payout__descriptor, payments_proto_text, &pb));
    assert_string_equal(avro->schema_format, CS_SCHEMA_FORMAT_AVRO);
    assert_string_equal(pb->schema_format, CS_SCHEMA_FORMAT_PROTOBUF2); /* payments.proto is proto2 */
    cs_kafka *k;
    cs_app *app = app_new(&k);
    cs_sub *s = subscribe(k, "payouts.avro", avro, &payout_type);
    CST_OK(cs_sub_dead_letter(s, "payouts.avro.dlq"));
    subscribe(k, "payouts.avro.v2", avro2, &payout_type);
    subscribe(k, "payouts.json", &cs_codec_json, &payout_type);
    subscribe(k, "payouts.pb", pb, cs_codec_protobuf_type(pb));

    char *json;
    CST_OK(cs_app_asyncapi(app, 0, &json));
    char why[256];
    yajl_val doc = yajl_tree_parse(json, why, sizeof why);
    if (!doc) fail_msg("the document is not JSON: %s", why);
    const char *avro_format[] = {"components", "schemas", "payout.avro", "schemaFormat", NULL};
    assert_string_equal(string_at(doc, avro_format), CS_SCHEMA_FORMAT_AVRO);
    const char *avro_name[] = {"components", "schemas", "payout.avro", "schema", "name", NULL};
    assert_string_equal(string_at(doc, avro_name), "payout"); /* a JSON object, not a string */
    const char *avro2_field[] = {"components", "schemas", "payout.avro-2", "schema", "fields", NULL};
    yajl_val fields2 = yajl_tree_get(doc, avro2_field, yajl_t_array);
    assert_non_null(fields2);
    assert_int_equal(fields2->u.array.len, 4); /* v2's own schema, not v1's */
    const char *json_title[] = {"components", "schemas", "payout", "title", NULL};
    assert_string_equal(string_at(doc, json_title), "payout"); /* the JSON Schema, as before */
    const char *pb_format[] = {"components", "schemas", "payments.Payout.protobuf", "schemaFormat", NULL};
    assert_string_equal(string_at(doc, pb_format), CS_SCHEMA_FORMAT_PROTOBUF2);
    const char *pb_schema[] = {"components", "schemas", "payments.Payout.protobuf", "schema", NULL};
    const char *proto = string_at(doc, pb_schema);
    assert_non_null(proto);
    assert_non_null(strstr(proto, "// @RootNode\nmessage Payout {"));
    assert_null(strstr(proto, "// @RootNode\nmessage Tree {"));
    const char *pb_type[] = {"components", "messages", "payments.Payout.protobuf", "contentType", NULL};
    assert_string_equal(string_at(doc, pb_type), "application/x-protobuf");
    const char *dlq_msg[] = {"channels", "payouts.avro.dlq", "messages", "payout.avro", "$ref", NULL};
    assert_string_equal(string_at(doc, dlq_msg), "#/components/messages/payout.avro");
    yajl_tree_free(doc);

    const char *expect =
        "{\"receive\":{\"payouts.avro\":[\"id\",\"amount_cents\",\"memo\"],"
        "\"payouts.avro.v2\":[\"id\",\"amount_cents\",\"memo\",\"currency\"],"
        "\"payouts.json\":[\"id\",\"amount_cents\",\"memo\"],"
        "\"payouts.pb\":[\"id\",\"amount_cents\",\"currency\",\"payee\",\"limits\",\"route\",\"scalars\"]},"
        "\"send\":[\"payouts.avro.dlq\"],"
        "\"formats\":{\"payouts.avro\":\"" CS_SCHEMA_FORMAT_AVRO "\",\"payouts.pb\":\"" CS_SCHEMA_FORMAT_PROTOBUF2
        "\"}}";
    expect_valid("schemas.json", json, expect);
    free(json);
    char *yaml;
    CST_OK(cs_app_asyncapi(app, 1, &yaml));
    expect_valid("schemas.yaml", yaml, expect);
    free(yaml);
    cs_app_destroy(app);
    cs_codec_avro_destroy(avro);
    cs_codec_avro_destroy(avro2);
    cs_codec_protobuf_destroy(pb);
}

/* A registry-backed codec names its schema language as the plain Avro codec
 * does, so the document carries its schema too. Its schema is the reader's:
 * no request is made (nothing listens at the registry's address). */
static void registry_codec_has_the_avro_schema_format(void **state) {
    (void)state;
    cs_registry *reg = cs_registry_new("http://127.0.0.1:9");
    assert_non_null(reg);
    cs_codec *c;
    CST_OK(cs_codec_avro_registry_new(reg, AVRO_V1, NULL, &c));
    assert_non_null(c->schema_format);
    assert_string_equal(c->schema_format, CS_SCHEMA_FORMAT_AVRO);
    char *text = NULL;
    CST_OK(c->schema(c, &payout_type, &text));
    assert_non_null(strstr(text, "\"payout\""));
    free(text);
    cs_codec_registry_destroy(c);
    cs_registry_destroy(reg);
}

/* A codec of its own that shows an Avro schema avro-c would refuse: the
 * format-neutral path a registry-backed codec takes. */
static cs_err bad_avro_schema(const cs_codec *c, const cs_type *type, char **out) {
    (void)c, (void)type;
    *out = strdup("{\"type\":\"record\",\"name\":\"payout\",\"fields\":[{\"name\":\"id\",\"type\":\"no_such_type\"}]}");
    return *out ? CS_OK : CS_ERR_NOMEM;
}

static void broken_avro_schema_is_rejected(void **state) {
    (void)state;
    cs_codec bad = cs_codec_json; /* decode and encode as JSON; only the schema matters here */
    bad.name = "avro-of-its-own";
    bad.schema = bad_avro_schema;
    bad.schema_format = CS_SCHEMA_FORMAT_AVRO;
    cs_kafka *k;
    cs_app *app = app_new(&k);
    subscribe(k, "payouts.avro", &bad, &payout_type);
    char *json;
    CST_OK(cs_app_asyncapi(app, 0, &json));
    assert_non_null(strstr(json, "no_such_type"));
    expect_invalid("bad-avro.json", json, "no_such_type");
    free(json);
    cs_app_destroy(app);
}

static void broken_proto_text_is_rejected(void **state) {
    (void)state;
    /* protobuf-c cannot check .proto text: the codec takes it as given. */
    cs_codec *pb;
    CST_OK(cs_codec_protobuf_new(&payments__payout__descriptor,
                                 "syntax = \"proto3\";\npackage payments;\nmessage Payout {\n  uint64 id = ;\n}\n",
                                 &pb));
    assert_string_equal(pb->schema_format, CS_SCHEMA_FORMAT_PROTOBUF3);
    cs_kafka *k;
    cs_app *app = app_new(&k);
    subscribe(k, "payouts.pb", pb, cs_codec_protobuf_type(pb));
    char *json;
    CST_OK(cs_app_asyncapi(app, 0, &json));
    expect_invalid("bad-proto.json", json, "illegal");
    free(json);
    cs_app_destroy(app);
    cs_codec_protobuf_destroy(pb);
}

static int setup(void **state) {
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int teardown(void **state) {
    (void)state;
    return nftw(tmpdir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(avro_and_protobuf_payloads_parse),
        cmocka_unit_test(registry_codec_has_the_avro_schema_format),
        cmocka_unit_test(broken_avro_schema_is_rejected),
        cmocka_unit_test(broken_proto_text_is_rejected),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
