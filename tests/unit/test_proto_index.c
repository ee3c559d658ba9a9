/* test_proto_index.c — the message indexes of a .proto text's messages and
 * its imports (src/schema/proto_index.c, on the shared walk of
 * src/codec/proto_text.c, whose declaration offsets are checked too), which the registry-backed Protobuf
 * codec writes after the schema id and reads back: only `message`
 * declarations count, in declaration order, nested ones under their parent;
 * comments, strings, enums, services, options and map fields take no index;
 * the package prefixes every full name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "schema/proto_index.h"
#include "cstream/error.h"

static const char SHOP[] = "// message Fake { } in a comment takes no index\n"
                           "syntax = \"proto3\";\n"
                           "package shop.v1;\n"
                           "import \"common/money.proto\";\n"
                           "import public 'other.proto';\n"
                           "option java_package = \"message Nope {\";\n"
                           "enum Status { NEW = 0; message = 1; }\n"
                           "/* message Hidden {} */\n"
                           "message Order {\n"
                           "  uint64 id = 1;\n"
                           "  string message = 2 [(opt) = { message: 1 }];\n"
                           "  map<string, Line> lines = 3;\n"
                           "  enum Kind { A = 0; }\n"
                           "  message Line { string sku = 1; }\n"
                           "  oneof pay { string iban = 4; }\n"
                           "}\n"
                           "service Orders { rpc Get (Order) returns (Order) { option deprecated = true; } }\n"
                           "message Refund {\n"
                           "  message Reason { string text = 1; message Deep {} }\n"
                           "  message Audit { string who = 1; }\n"
                           "}\n"
                           "message Receipt {}\n";

static void expect_path(const char *text, const char *name, const int32_t *want, size_t n) {
    int32_t idx[8];
    size_t got = 99;
    if (cs__schema_proto_index_of(text, name, idx, 8, &got) != CS_OK) fail_msg("%s: %s", name, cs_errmsg());
    assert_int_equal(got, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(idx[i], want[i]);
}

static void top_level_and_nested_messages(void **state) {
    (void)state;
    expect_path(SHOP, "shop.v1.Order", (int32_t[]){0}, 1);
    expect_path(SHOP, "shop.v1.Order.Line", (int32_t[]){0, 0}, 2);
    expect_path(SHOP, "shop.v1.Refund", (int32_t[]){1}, 1);
    expect_path(SHOP, "shop.v1.Refund.Reason", (int32_t[]){1, 0}, 2);
    expect_path(SHOP, "shop.v1.Refund.Reason.Deep", (int32_t[]){1, 0, 0}, 3);
    expect_path(SHOP, "shop.v1.Refund.Audit", (int32_t[]){1, 1}, 2);
    expect_path(SHOP, "shop.v1.Receipt", (int32_t[]){2}, 1);
}

static void no_package_names_the_message_alone(void **state) {
    (void)state;
    static const char text[] =
        "syntax = \"proto2\";\nmessage A { optional int32 x = 1; }\nmessage B { message C {} }\n";
    expect_path(text, "B.C", (int32_t[]){1, 0}, 2);
    int32_t idx[4];
    size_t n;
    assert_int_equal(cs__schema_proto_index_of(text, "pkg.B", idx, 4, &n), CS_ERR_ARG);
}

static void what_is_not_declared_is_named(void **state) {
    (void)state;
    int32_t idx[4];
    size_t n = 7;
    assert_int_equal(cs__schema_proto_index_of(SHOP, "shop.v1.Fake", idx, 4, &n), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "shop.v1.Fake"));
    assert_int_equal(n, 0);
    assert_int_equal(cs__schema_proto_index_of(SHOP, "shop.v1.Hidden", idx, 4, &n), CS_ERR_ARG);
    assert_int_equal(cs__schema_proto_index_of(SHOP, "shop.v1.Nope", idx, 4, &n), CS_ERR_ARG);
    /* Deeper than the caller's room. */
    assert_int_equal(cs__schema_proto_index_of(SHOP, "shop.v1.Refund.Reason.Deep", idx, 2, &n), CS_ERR_ARG);
}

static void unbalanced_braces_are_refused(void **state) {
    (void)state;
    int32_t idx[4];
    size_t n;
    assert_int_equal(cs__schema_proto_index_of("message A { message B {}", "A.B", idx, 4, &n),
                     CS_OK); /* found before the end */
    assert_int_equal(cs__schema_proto_index_of("message A { ", "X", idx, 4, &n), CS_ERR_DECODE);
    assert_non_null(strstr(cs_errmsg(), "left open"));
    assert_int_equal(cs__schema_proto_index_of("message A {} }", "X", idx, 4, &n), CS_ERR_DECODE);
    assert_non_null(strstr(cs_errmsg(), "closes nothing"));
}

typedef struct listing {
    char names[8][64];
    size_t at[8]; /* each declaration's offset */
    size_t n;
} listing;

static bool list_visit(void *arg, const cs__proto_decl *d) {
    listing *l = arg;
    l->at[l->n] = d->at;
    snprintf(l->names[l->n++], sizeof l->names[0], "%s", d->full_name);
    return l->n == 8;
}

static void every_message_in_order(void **state) {
    (void)state;
    listing l = {0};
    assert_int_equal(cs__proto_messages(SHOP, list_visit, &l), CS_OK);
    static const char *const want[] = {"shop.v1.Order",         "shop.v1.Order.Line",         "shop.v1.Refund",
                                       "shop.v1.Refund.Reason", "shop.v1.Refund.Reason.Deep", "shop.v1.Refund.Audit",
                                       "shop.v1.Receipt"};
    assert_int_equal(l.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < l.n; i++) assert_string_equal(l.names[i], want[i]);
    /* Where each `message` keyword stands (what the AsyncAPI @RootNode mark goes in front of). */
    assert_int_equal(l.at[0], strstr(SHOP, "message Order {") - SHOP);
    assert_int_equal(l.at[1], strstr(SHOP, "message Line {") - SHOP);
    assert_int_equal(l.at[6], strstr(SHOP, "message Receipt {}") - SHOP);
}

static bool import_visit(void *arg, const char *name, size_t len) {
    listing *l = arg;
    snprintf(l->names[l->n++], sizeof l->names[0], "%.*s", (int)len, name);
    return false;
}

static void imports_are_listed(void **state) {
    (void)state;
    listing l = {0};
    cs__schema_proto_imports(SHOP, import_visit, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.names[0], "common/money.proto");
    assert_string_equal(l.names[1], "other.proto");
}

/* The shared lexer's tokens: braces and identifiers only, whatever stands
 * between them (comments, strings, numbers, other punctuation). */
static void tokens_are_braces_and_identifiers(void **state) {
    (void)state;
    static const char text[] = "a /* { */ 'x{' = 1; {b.c // }\n} \"open";
    static const char *const want[] = {"a", "{", "b.c", "}"};
    const char *p = text, *tok;
    size_t len, n = 0;
    while ((p = cs__proto_token(p, &tok, &len), len)) {
        assert_true(n < sizeof want / sizeof want[0]);
        assert_int_equal(len, strlen(want[n]));
        assert_memory_equal(tok, want[n], len);
        n++;
    }
    assert_int_equal(n, sizeof want / sizeof want[0]);
    assert_int_equal(*tok, '\0');
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(top_level_and_nested_messages),
        cmocka_unit_test(no_package_names_the_message_alone),
        cmocka_unit_test(what_is_not_declared_is_named),
        cmocka_unit_test(unbalanced_braces_are_refused),
        cmocka_unit_test(every_message_in_order),
        cmocka_unit_test(imports_are_listed),
        cmocka_unit_test(tokens_are_braces_and_identifiers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
