/* test_asyncapi_proto.c — src/kafka/asyncapi/asyncapi_proto.c alone: finding a
 * message's declaration in a .proto text by its full name (package, nested
 * messages, blocks that are not messages, comments and strings that look like
 * declarations, a field named "message") and marking it @RootNode for
 * AsyncAPI's Protobuf schema parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kafka/asyncapi/asyncapi_proto.h"

static const char NESTED[] = "syntax = \"proto3\";\n"
                             "package shop.v1; // message Decoy {\n"
                             "/* message Decoy2 { */\n"
                             "option java_package = \"message X {\";\n"
                             "enum Kind { A = 0; }\n"
                             "message Order {\n"
                             "  string message = 1;\n"
                             "  oneof route { string iban = 2; }\n"
                             "  map<string, int64> limits = 3;\n"
                             "  message Line { int64 qty = 1; }\n"
                             "  repeated Line lines = 4;\n"
                             "}\n"
                             "message Line { string sku = 1; }\n";

static long offset_of(const char *text, const char *needle) {
    const char *p = strstr(text, needle);
    assert_non_null(p);
    return (long)(p - text);
}

static void finds_messages_by_full_name(void **state) {
    (void)state;
    assert_int_equal(cs__aa_proto_find_message(NESTED, "shop.v1.Order"), offset_of(NESTED, "message Order {"));
    assert_int_equal(cs__aa_proto_find_message(NESTED, "shop.v1.Order.Line"),
                     offset_of(NESTED, "message Line { int64"));
    assert_int_equal(cs__aa_proto_find_message(NESTED, "shop.v1.Line"), offset_of(NESTED, "message Line { string"));
    assert_int_equal(cs__aa_proto_find_message(NESTED, "Order"), -1); /* the package is part of the name */
    assert_int_equal(cs__aa_proto_find_message(NESTED, "shop.v1.Decoy"), -1);
    assert_int_equal(cs__aa_proto_find_message(NESTED, "shop.v1.Decoy2"), -1);
    assert_int_equal(cs__aa_proto_find_message(NESTED, "shop.v1.X"), -1);
    assert_int_equal(cs__aa_proto_find_message(NESTED, "shop.v1.Kind"), -1); /* an enum, not a message */
    const char *no_package = "message A { message B {} }\nmessage C {}";
    assert_int_equal(cs__aa_proto_find_message(no_package, "A.B"), offset_of(no_package, "message B"));
    assert_int_equal(cs__aa_proto_find_message(no_package, "C"), offset_of(no_package, "message C"));
    assert_int_equal(cs__aa_proto_find_message("message A {", "A"), 0); /* unterminated: found all the same */
    assert_int_equal(cs__aa_proto_find_message("", "A"), -1);
}

static void marks_the_root_once(void **state) {
    (void)state;
    char *marked = cs__aa_proto_mark_root(NESTED, "shop.v1.Line");
    assert_non_null(marked);
    assert_int_equal(strlen(marked), strlen(NESTED) + strlen("// " CS_AA_PROTO_ROOT_MARK "\n"));
    assert_non_null(strstr(marked, "}\n// @RootNode\nmessage Line { string sku = 1; }\n"));
    /* Marked already: left as it is. */
    char *again = cs__aa_proto_mark_root(marked, "shop.v1.Order");
    assert_string_equal(again, marked);
    free(again);
    free(marked);
    /* Not declared (a type from an import): left as it is. */
    char *same = cs__aa_proto_mark_root(NESTED, "other.Thing");
    assert_string_equal(same, NESTED);
    free(same);
    /* A message after a closing brace on the same line: the marker gets a
     * line of its own, right above the keyword. */
    char *tight = cs__aa_proto_mark_root("message A {} message B {}", "B");
    assert_string_equal(tight, "message A {} \n// @RootNode\nmessage B {}");
    free(tight);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(finds_messages_by_full_name),
        cmocka_unit_test(marks_the_root_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
