/* test_schema_format.c — the Confluent wire format's framing (src/schema/wire.c)
 * and the subject name strategies (src/schema/subject.c), alone:
 *
 *   - the header is magic 0 + a big-endian id, read back exactly; a record
 *     too short or without the magic byte is refused, naming the byte;
 *   - Protobuf message indexes are zigzag varints (count, then each index),
 *     with the path [0] as the single byte 0, byte for byte as the spec
 *     writes them; truncated, overlong, negative or too deep lists are
 *     refused; a round trip over many paths gives the path back;
 *   - TopicName, RecordName and TopicRecordName give Confluent's subjects
 *     for keys and values, and refuse what they lack. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "schema/registry_internal.h"
#include "schema/wire.h"

static void header_is_magic_and_big_endian_id(void **state) {
    (void)state;
    uint8_t h[CS_WIRE_HEADER_LEN];
    int32_t id = 0;
    cs__wire_write_header(h, 0x01020304);
    const uint8_t want[] = {0x00, 0x01, 0x02, 0x03, 0x04};
    assert_memory_equal(h, want, sizeof want);
    assert_int_equal(cs__wire_read_header(h, sizeof h, &id), CS_OK);
    assert_int_equal(id, 0x01020304);
    cs__wire_write_header(h, INT32_MAX);
    assert_int_equal(cs__wire_read_header(h, sizeof h, &id), CS_OK);
    assert_int_equal(id, INT32_MAX);
    cs__wire_write_header(h, -2); /* signed on the wire: read back as written */
    assert_int_equal(cs__wire_read_header(h, sizeof h, &id), CS_OK);
    assert_int_equal(id, -2);
}

static void header_refuses_what_is_not_wire_format(void **state) {
    (void)state;
    int32_t id = 77;
    const char json[] = "{\"a\":1}";
    assert_int_equal(cs__wire_read_header(json, strlen(json), &id), CS_ERR_DECODE);
    assert_non_null(strstr(cs_errmsg(), "0x7b"));
    assert_int_equal(id, 77);
    const uint8_t short_rec[] = {0, 0, 0, 1};
    assert_int_equal(cs__wire_read_header(short_rec, sizeof short_rec, &id), CS_ERR_DECODE);
    assert_non_null(strstr(cs_errmsg(), "4 bytes"));
    assert_int_equal(cs__wire_read_header(NULL, 0, &id), CS_ERR_DECODE);
}

static void write_indexes(const int32_t *idx, size_t n, const uint8_t *want, size_t want_len) {
    uint8_t out[64];
    size_t w = 99;
    assert_int_equal(cs__wire_write_msg_indexes(idx, n, out, sizeof out, &w), CS_OK);
    assert_int_equal(w, want_len);
    assert_memory_equal(out, want, want_len);
}

static void indexes_are_zigzag_varints_with_the_zero_shortcut(void **state) {
    (void)state;
    const int32_t first[] = {0};
    write_indexes(first, 1, (const uint8_t[]){0x00}, 1);
    write_indexes(NULL, 0, (const uint8_t[]){0x00}, 1);
    const int32_t second[] = {1}; /* count 1 -> 2, index 1 -> 2 */
    write_indexes(second, 1, (const uint8_t[]){0x02, 0x02}, 2);
    const int32_t nested[] = {0, 2}; /* count 2 -> 4, 0 -> 0, 2 -> 4 */
    write_indexes(nested, 2, (const uint8_t[]){0x04, 0x00, 0x04}, 3);
    const int32_t big[] = {300}; /* 300 -> 600 = 0b100_1011000 -> 0xd8 0x04 */
    write_indexes(big, 1, (const uint8_t[]){0x02, 0xd8, 0x04}, 3);
    const int32_t max[] = {INT32_MAX}; /* zigzag 0xfffffffe: five bytes */
    write_indexes(max, 1, (const uint8_t[]){0x02, 0xfe, 0xff, 0xff, 0xff, 0x0f}, 6);
}

static void indexes_refused_on_write(void **state) {
    (void)state;
    uint8_t out[2];
    size_t w;
    const int32_t neg[] = {1, -1};
    assert_int_equal(cs__wire_write_msg_indexes(neg, 2, out, sizeof out, &w), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "index 1 is negative"));
    const int32_t three[] = {1, 2, 3};
    assert_int_equal(cs__wire_write_msg_indexes(three, 3, out, sizeof out, &w), CS_ERR_ENCODE);
    assert_int_equal(w, 0);
    int32_t deep[CS_WIRE_MAX_MSG_INDEXES + 1] = {0};
    assert_int_equal(cs__wire_write_msg_indexes(deep, CS_WIRE_MAX_MSG_INDEXES + 1, out, sizeof out, &w), CS_ERR_ARG);
}

static void read_indexes_fails(const uint8_t *buf, size_t len, const char *why) {
    int32_t idx[8];
    size_t n = 99, used = 99;
    assert_int_equal(cs__wire_read_msg_indexes(buf, len, idx, 8, &n, &used), CS_ERR_DECODE);
    if (!strstr(cs_errmsg(), why)) fail_msg("expected '%s' in: %s", why, cs_errmsg());
    assert_int_equal(n, 0);
    assert_int_equal(used, 0);
}

static void indexes_read_back_and_refuse_bad_input(void **state) {
    (void)state;
    int32_t idx[8];
    size_t n, used;
    const uint8_t zero[] = {0x00, 0xaa}; /* 0xaa: the payload after it */
    assert_int_equal(cs__wire_read_msg_indexes(zero, sizeof zero, idx, 8, &n, &used), CS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(idx[0], 0);
    assert_int_equal(used, 1);
    const uint8_t nested[] = {0x04, 0x00, 0x04, 0xaa};
    assert_int_equal(cs__wire_read_msg_indexes(nested, sizeof nested, idx, 8, &n, &used), CS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 2);
    assert_int_equal(used, 3);

    read_indexes_fails(NULL, 0, "ends inside the count");
    read_indexes_fails((const uint8_t[]){0x04, 0x00}, 2, "ends inside an index");
    read_indexes_fails((const uint8_t[]){0x02, 0x80}, 2, "ends inside an index");
    read_indexes_fails((const uint8_t[]){0x01}, 1, "negative count");
    read_indexes_fails((const uint8_t[]){0x02, 0x03}, 2, "index 0 is negative");
    read_indexes_fails((const uint8_t[]){0x02, 0xff, 0xff, 0xff, 0xff, 0x1f}, 6, "longer than 32 bits");
    read_indexes_fails((const uint8_t[]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 6, "longer than 32 bits");
    read_indexes_fails((const uint8_t[]){0x12}, 1, "9 levels, at most 8"); /* count 9 > cap 8 */
}

/* Every path of up to 5 levels over a few index values, written then read. */
static void indexes_round_trip(void **state) {
    (void)state;
    const int32_t values[] = {0, 1, 63, 64, 127, 128, 8191, 8192, 1 << 20, INT32_MAX};
    unsigned seed = (unsigned)time(NULL);
    print_message("seed %u\n", seed);
    srand(seed);
    for (int round = 0; round < 2000; round++) {
        int32_t path[5], back[5];
        size_t n = (size_t)(rand() % 5) + 1, got, used, w;
        uint8_t buf[64];
        for (size_t i = 0; i < n; i++) path[i] = values[rand() % 10];
        assert_int_equal(cs__wire_write_msg_indexes(path, n, buf, sizeof buf, &w), CS_OK);
        buf[w] = 0xee; /* payload follows: must not be read */
        assert_int_equal(cs__wire_read_msg_indexes(buf, w + 1, back, 5, &got, &used), CS_OK);
        assert_int_equal(used, w);
        assert_int_equal(got, n);
        assert_memory_equal(back, path, n * sizeof *path);
    }
}

static void subject_strategies(void **state) {
    (void)state;
    char s[64];
    assert_int_equal(cs__registry_subject(CS__SUBJECT_TOPIC_NAME, "payouts", NULL, 0, s, sizeof s), CS_OK);
    assert_string_equal(s, "payouts-value");
    assert_int_equal(cs__registry_subject(CS__SUBJECT_TOPIC_NAME, "payouts", "x.Y", 1, s, sizeof s), CS_OK);
    assert_string_equal(s, "payouts-key");
    assert_int_equal(cs__registry_subject(CS__SUBJECT_RECORD_NAME, NULL, "bank.Payout", 0, s, sizeof s), CS_OK);
    assert_string_equal(s, "bank.Payout");
    assert_int_equal(cs__registry_subject(CS__SUBJECT_RECORD_NAME, "payouts", "bank.Id", 1, s, sizeof s), CS_OK);
    assert_string_equal(s, "bank.Id");
    assert_int_equal(cs__registry_subject(CS__SUBJECT_TOPIC_RECORD_NAME, "payouts", "bank.Payout", 0, s, sizeof s),
                     CS_OK);
    assert_string_equal(s, "payouts-bank.Payout");

    assert_int_equal(cs__registry_subject(CS__SUBJECT_RECORD_NAME, "payouts", NULL, 0, s, sizeof s), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "RecordName strategy needs the record"));
    assert_int_equal(cs__registry_subject(CS__SUBJECT_TOPIC_RECORD_NAME, "", "a.B", 0, s, sizeof s), CS_ERR_ARG);
    assert_non_null(strstr(cs_errmsg(), "TopicRecordName strategy needs the topic"));
    assert_int_equal(cs__registry_subject(CS__SUBJECT_TOPIC_NAME, "payouts", NULL, 0, s, 8), CS_ERR_ARG);
    assert_string_equal(s, "");
    assert_int_equal(cs__registry_subject((cs__subject_strategy)9, "t", "r", 0, s, sizeof s), CS_ERR_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_is_magic_and_big_endian_id),
        cmocka_unit_test(header_refuses_what_is_not_wire_format),
        cmocka_unit_test(indexes_are_zigzag_varints_with_the_zero_shortcut),
        cmocka_unit_test(indexes_refused_on_write),
        cmocka_unit_test(indexes_read_back_and_refuse_bad_input),
        cmocka_unit_test(indexes_round_trip),
        cmocka_unit_test(subject_strategies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
