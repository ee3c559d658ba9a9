/* test_defaults.c — the defaults the guide promises are the ones the code
 * uses. src/kafka/defaults.h is the one source: every row of docs/guide.md's
 * settings tables (`| call | default | range |`) is compared with its
 * constants, a fresh cs_kafka and cs_sub are checked to hold them (and the
 * commit mode's max_open and commit interval to resolve to them), and every
 * setter to accept exactly the documented range. A default or range changed
 * in the guide, in the header, or as a literal in kafka.c or subscription.c
 * fails here. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/defaults.h"
#include "kafka/kafka_internal.h"

#define NAME_OF(x) #x
#define NAME(x) NAME_OF(x) /* the macro's expansion as text: CS_START_EARLIEST */

#define GUIDE CSTREAM_SOURCE_DIR "/docs/guide.md"
#define NO_MAX (-1L)

/* One row the guide must have. A numeric default lists its values in the
 * cell's order (a mode's default per mode); any other default is the cell's
 * text without backticks. A range is "min..max" or ">= min". */
typedef struct row {
    const char *call;
    const char *text;
    long values[2];
    int n_values;
    bool ranged;
    long min, max;
} row;

static row rows[] = {
    {"cs_kafka_queue_timeout_ms", NULL, {CS__DEFAULT_QUEUE_TIMEOUT_MS}, 1, true, CS__QUEUE_TIMEOUT_MIN_MS, NO_MAX},
    {"cs_kafka_flush_timeout_ms", NULL, {CS__DEFAULT_FLUSH_TIMEOUT_MS}, 1, true, CS__FLUSH_TIMEOUT_MIN_MS, NO_MAX},
    {"cs_sub_group", "the broker's cs_kafka_default_group", {0}, 0, false, 0, 0},
    {"cs_sub_start_at", NAME(CS__DEFAULT_START), {0}, 0, false, 0, 0},
    {"cs_sub_commit_mode", NAME(CS__DEFAULT_COMMIT), {0}, 0, false, 0, 0},
    {"cs_sub_workers", NULL, {CS__DEFAULT_WORKERS}, 1, true, CS__WORKERS_MIN, CS__WORKERS_MAX},
    {"cs_sub_lanes", NAME(CS__DEFAULT_LANES), {0}, 0, false, 0, 0},
    {"cs_sub_max_open",
     NULL,
     {CS__DEFAULT_MAX_OPEN_AUTO, CS__DEFAULT_MAX_OPEN_TRACKED},
     2,
     true,
     CS__MAX_OPEN_MIN,
     CS__MAX_OPEN_MAX},
    {"cs_sub_fetch_buffer_bytes",
     NULL,
     {CS__DEFAULT_FETCH_BUFFER_BYTES},
     1,
     true,
     CS__FETCH_BUFFER_MIN,
     CS__FETCH_BUFFER_MAX},
    {"cs_sub_commit_interval_ms",
     NULL,
     {CS__DEFAULT_COMMIT_INTERVAL_TRACKED_MS, CS__DEFAULT_COMMIT_INTERVAL_TRANSACTIONAL_MS},
     2,
     true,
     CS__COMMIT_INTERVAL_MIN_MS,
     CS__COMMIT_INTERVAL_MAX_MS},
    {"cs_sub_window_records",
     NULL,
     {CS__DEFAULT_WINDOW_RECORDS},
     1,
     true,
     CS__WINDOW_RECORDS_MIN,
     CS__WINDOW_RECORDS_MAX},
    {"cs_sub_stall_timeout_ms",
     NULL,
     {CS__DEFAULT_STALL_TIMEOUT_MS},
     1,
     true,
     CS__STALL_TIMEOUT_MIN_MS,
     CS__STALL_TIMEOUT_MAX_MS},
    {"cs_sub_drain_timeout_ms",
     NULL,
     {CS__DEFAULT_DRAIN_TIMEOUT_MS},
     1,
     true,
     CS__DRAIN_TIMEOUT_MIN_MS,
     CS__DRAIN_TIMEOUT_MAX_MS},
    {"cs_sub_handler_time_limit_ms",
     NULL,
     {CS__DEFAULT_HANDLER_TIME_LIMIT_MS},
     1,
     true,
     CS__HANDLER_TIME_LIMIT_MIN_MS,
     CS__HANDLER_TIME_LIMIT_MAX_MS},
    {"cs_sub_max_attempts", NULL, {CS__DEFAULT_MAX_ATTEMPTS}, 1, true, CS__MAX_ATTEMPTS_MIN, CS__MAX_ATTEMPTS_MAX},
    {"cs_sub_dead_letter", "none", {0}, 0, false, 0, 0},
    {"cs_sub_decode", "none", {0}, 0, false, 0, 0},
    {"cs_sub_reply", "none", {0}, 0, false, 0, 0},
};
#define N_ROWS (sizeof rows / sizeof rows[0])
static bool seen[N_ROWS]; /* rows found in the guide */

static row *row_named(const char *call) {
    for (size_t i = 0; i < N_ROWS; i++)
        if (!strcmp(rows[i].call, call)) return &rows[i];
    return NULL;
}

/* Copies s without backticks and surrounding blanks. */
static void plain(char *out, size_t size, const char *s, size_t len) {
    while (len && isspace((unsigned char)*s)) s++, len--;
    while (len && isspace((unsigned char)s[len - 1])) len--;
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < size; i++)
        if (s[i] != '`') out[n++] = s[i];
    out[n] = '\0';
}

/* The number at *p, "10,000" included (a comma followed by three digits
 * groups them; "Auto, 10" does not); advances *p past it. */
static long number_at(const char **p) {
    long v = 0;
    const char *s = *p;
    for (;;) {
        while (isdigit((unsigned char)*s)) v = v * 10 + (*s++ - '0');
        if (s[0] == ',' && isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]) &&
            isdigit((unsigned char)s[3]) && !isdigit((unsigned char)s[4]))
            s++;
        else break;
    }
    *p = s;
    return v;
}

static void check_default(const row *r, const char *cell, int line) {
    if (r->text) {
        if (strcmp(cell, r->text))
            fail_msg("docs/guide.md:%d: %s defaults to \"%s\", the code to \"%s\"", line, r->call, cell, r->text);
        return;
    }
    long got[4];
    int n = 0;
    for (const char *p = cell; *p && n < 4;)
        if (isdigit((unsigned char)*p)) got[n++] = number_at(&p);
        else p++;
    if (n != r->n_values)
        fail_msg("docs/guide.md:%d: %s's default \"%s\" has %d numbers, src/kafka/defaults.h has %d", line, r->call,
                 cell, n, r->n_values);
    for (int i = 0; i < n; i++)
        if (got[i] != r->values[i])
            fail_msg("docs/guide.md:%d: %s's default \"%s\": number %d is %ld, src/kafka/defaults.h says %ld", line,
                     r->call, cell, i + 1, got[i], r->values[i]);
}

static void check_range(const row *r, const char *cell, int line) {
    if (!r->ranged) return;
    const char *p = cell;
    long min, max = NO_MAX;
    if (!strncmp(p, ">= ", 3)) {
        p += 3;
        min = number_at(&p);
    } else {
        if (!isdigit((unsigned char)*p)) fail_msg("docs/guide.md:%d: %s has no range in \"%s\"", line, r->call, cell);
        min = number_at(&p);
        if (strncmp(p, "..", 2)) fail_msg("docs/guide.md:%d: %s's range \"%s\" is not min..max", line, r->call, cell);
        p += 2;
        max = number_at(&p);
    }
    if (min != r->min || max != r->max)
        fail_msg("docs/guide.md:%d: %s's range \"%s\" is %ld..%ld, src/kafka/defaults.h says %ld..%ld (-1: none)", line,
                 r->call, cell, min, max, r->min, r->max);
}

/* Splits a table line into its cells (a `\|` inside a cell is not a border). */
static int cells_of(char *line, char *cell[], int cap) {
    int n = 0;
    for (char *border = strchr(line, '|'); border && n < cap;) {
        char *start = border + 1, *end = start;
        while (*end && !(*end == '|' && end[-1] != '\\')) end++;
        if (!*end) break; /* what follows the last border is no cell */
        *end = '\0';
        cell[n++] = start;
        border = end;
    }
    return n;
}

static void guide_tables_match_constants(void **state) {
    (void)state;
    FILE *f = fopen(GUIDE, "r");
    if (!f) fail_msg("cannot open %s", GUIDE);
    char line[1024];
    int lineno = 0, tables = 0;
    bool in_table = false;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strncmp(line, "| call | default | range |", 26)) {
            in_table = true;
            tables++;
            continue;
        }
        if (line[0] != '|') in_table = false;
        if (!in_table || !strncmp(line, "|---", 4)) continue;
        char *cell[4];
        if (cells_of(line, cell, 4) != 3) fail_msg("docs/guide.md:%d: a settings row without 3 cells", lineno);
        char call[128], dflt[256], range[512];
        plain(call, sizeof call, cell[0], strlen(cell[0]));
        plain(dflt, sizeof dflt, cell[1], strlen(cell[1]));
        plain(range, sizeof range, cell[2], strlen(cell[2]));
        row *r = row_named(call);
        if (!r)
            fail_msg("docs/guide.md:%d: %s has a default in the guide but not in tests/unit/test_defaults.c "
                     "(add it, with its constant in src/kafka/defaults.h)",
                     lineno, call);
        if (seen[r - rows]) fail_msg("docs/guide.md:%d: %s has two rows", lineno, call);
        seen[r - rows] = true;
        check_default(r, dflt, lineno);
        check_range(r, range, lineno);
    }
    fclose(f);
    assert_int_equal(tables, 2); /* broker settings, subscription settings */
    for (size_t i = 0; i < N_ROWS; i++)
        if (!seen[i]) fail_msg("docs/guide.md: no row for %s in its settings tables", rows[i].call);
}

static cs_outcome handle(cs_delivery *d, void *user) {
    (void)d, (void)user;
    return CS_ACK;
}

/* What a cs_kafka and a cs_sub hold before the service sets anything, and
 * what the commit mode's defaults resolve to (the values the consumer and
 * the producer are started with). */
static void fresh_objects_hold_defaults(void **state) {
    (void)state;
    cs_kafka *k = cs_kafka_new("127.0.0.1:1"); /* never started: nothing connects */
    assert_non_null(k);
    assert_int_equal(k->queue_timeout_ms, CS__DEFAULT_QUEUE_TIMEOUT_MS);
    assert_int_equal(k->flush_timeout_ms, CS__DEFAULT_FLUSH_TIMEOUT_MS);
    cs_sub *s = cs_kafka_subscribe(k, "t", handle, NULL);
    assert_non_null(s);
    assert_null(s->group);
    assert_int_equal(s->start, CS__DEFAULT_START);
    assert_int_equal(s->mode, CS__DEFAULT_COMMIT);
    assert_int_equal(s->lanes, CS__DEFAULT_LANES);
    assert_int_equal(s->workers, CS__DEFAULT_WORKERS);
    assert_int_equal(s->window_records, CS__DEFAULT_WINDOW_RECORDS);
    assert_int_equal(s->stall_timeout_ms, CS__DEFAULT_STALL_TIMEOUT_MS);
    assert_int_equal(s->drain_timeout_ms, CS__DEFAULT_DRAIN_TIMEOUT_MS);
    assert_int_equal(s->handler_time_limit_ms, CS__DEFAULT_HANDLER_TIME_LIMIT_MS);
    assert_int_equal(s->max_attempts, CS__DEFAULT_MAX_ATTEMPTS);
    assert_int_equal(s->fetch_buffer_bytes, CS__DEFAULT_FETCH_BUFFER_BYTES);
    assert_null(s->dead_letter);
    assert_null(s->codec);
    assert_null(s->reply_topic);

    assert_int_equal(cs__consumer_max_open(s), CS__DEFAULT_MAX_OPEN_AUTO);
    assert_int_equal(cs__consumer_commit_interval_ms(s), CS__DEFAULT_COMMIT_INTERVAL_TRACKED_MS);
    assert_int_equal(cs_sub_commit_mode(s, CS_COMMIT_TRACKED), CS_OK);
    assert_int_equal(cs__consumer_max_open(s), CS__DEFAULT_MAX_OPEN_TRACKED);
    assert_int_equal(cs__consumer_commit_interval_ms(s), CS__DEFAULT_COMMIT_INTERVAL_TRACKED_MS);
    assert_int_equal(cs_sub_commit_mode(s, CS_COMMIT_TRANSACTIONAL), CS_OK);
    assert_int_equal(cs__consumer_max_open(s), CS__DEFAULT_MAX_OPEN_TRACKED);
    assert_int_equal(cs__consumer_commit_interval_ms(s), CS__DEFAULT_COMMIT_INTERVAL_TRANSACTIONAL_MS);
    /* What the service sets wins over the mode's default. */
    assert_int_equal(cs_sub_max_open(s, 7), CS_OK);
    assert_int_equal(cs_sub_commit_interval_ms(s, 9), CS_OK);
    assert_int_equal(cs__consumer_max_open(s), 7);
    assert_int_equal(cs__consumer_commit_interval_ms(s), 9);
    cs_kafka_destroy(k);
}

/* Each ranged setter accepts min and max and refuses one step outside. */
typedef cs_err (*int_setter)(cs_sub *, int);
static void int_range(cs_sub *s, const char *call, int_setter set) {
    const row *r = row_named(call);
    assert_non_null(r);
    if (set(s, (int)r->min - 1) != CS_ERR_ARG) fail_msg("%s accepts %ld, below its range", call, r->min - 1);
    if (set(s, (int)r->min) != CS_OK) fail_msg("%s refuses its minimum %ld: %s", call, r->min, cs_errmsg());
    if (set(s, (int)r->max) != CS_OK) fail_msg("%s refuses its maximum %ld: %s", call, r->max, cs_errmsg());
    if (set(s, (int)r->max + 1) != CS_ERR_ARG) fail_msg("%s accepts %ld, above its range", call, r->max + 1);
}

typedef cs_err (*size_setter)(cs_sub *, size_t);
static void size_range(cs_sub *s, const char *call, size_setter set) {
    const row *r = row_named(call);
    assert_non_null(r);
    assert_true(r->min >= 1); /* so min - 1 is a size */
    if (set(s, (size_t)r->min - 1) != CS_ERR_ARG) fail_msg("%s accepts %ld, below its range", call, r->min - 1);
    if (set(s, (size_t)r->min) != CS_OK) fail_msg("%s refuses its minimum %ld: %s", call, r->min, cs_errmsg());
    if (set(s, (size_t)r->max) != CS_OK) fail_msg("%s refuses its maximum %ld: %s", call, r->max, cs_errmsg());
    if (set(s, (size_t)r->max + 1) != CS_ERR_ARG) fail_msg("%s accepts %ld, above its range", call, r->max + 1);
}

typedef cs_err (*kafka_setter)(cs_kafka *, int);
static void open_range(cs_kafka *k, const char *call, kafka_setter set) {
    const row *r = row_named(call);
    assert_non_null(r);
    assert_int_equal(r->max, NO_MAX);
    if (set(k, (int)r->min - 1) != CS_ERR_ARG) fail_msg("%s accepts %ld, below its range", call, r->min - 1);
    if (set(k, (int)r->min) != CS_OK) fail_msg("%s refuses its minimum %ld: %s", call, r->min, cs_errmsg());
    /* No maximum: the largest int is accepted too. */
    if (set(k, INT_MAX) != CS_OK) fail_msg("%s refuses %d, with no maximum: %s", call, INT_MAX, cs_errmsg());
}

/* cs_sub_reply's queue timeout: ">= 0 ms" in the guide, no maximum. */
static void reply_range(cs_sub *s) {
    int min = CS__REPLY_QUEUE_TIMEOUT_MIN_MS;
    if (cs_sub_reply(s, "replies", min - 1) != CS_ERR_ARG)
        fail_msg("cs_sub_reply accepts %d, below its range", min - 1);
    if (cs_sub_reply(s, "replies", min) != CS_OK) fail_msg("cs_sub_reply refuses its minimum %d: %s", min, cs_errmsg());
    if (cs_sub_reply(s, "replies", INT_MAX) != CS_OK)
        fail_msg("cs_sub_reply refuses %d, with no maximum: %s", INT_MAX, cs_errmsg());
}

static void setters_accept_the_documented_ranges(void **state) {
    (void)state;
    cs_kafka *k = cs_kafka_new("127.0.0.1:1");
    assert_non_null(k);
    cs_sub *s = cs_kafka_subscribe(k, "t", handle, NULL);
    assert_non_null(s);
    open_range(k, "cs_kafka_queue_timeout_ms", cs_kafka_queue_timeout_ms);
    open_range(k, "cs_kafka_flush_timeout_ms", cs_kafka_flush_timeout_ms);
    int_range(s, "cs_sub_workers", cs_sub_workers);
    int_range(s, "cs_sub_commit_interval_ms", cs_sub_commit_interval_ms);
    int_range(s, "cs_sub_stall_timeout_ms", cs_sub_stall_timeout_ms);
    int_range(s, "cs_sub_drain_timeout_ms", cs_sub_drain_timeout_ms);
    int_range(s, "cs_sub_handler_time_limit_ms", cs_sub_handler_time_limit_ms);
    int_range(s, "cs_sub_max_attempts", cs_sub_max_attempts);
    size_range(s, "cs_sub_max_open", cs_sub_max_open);
    size_range(s, "cs_sub_window_records", cs_sub_window_records);
    size_range(s, "cs_sub_fetch_buffer_bytes", cs_sub_fetch_buffer_bytes);
    reply_range(s);
    cs_kafka_destroy(k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(guide_tables_match_constants),
        cmocka_unit_test(fresh_objects_hold_defaults),
        cmocka_unit_test(setters_accept_the_documented_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
