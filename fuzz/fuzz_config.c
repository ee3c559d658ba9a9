/* fuzz_config.c — configuration that comes from outside the code: client
 * properties (cs__conf_check and the property lists, src/kafka/config.c, as
 * cs_kafka_config and friends use them) and the command line of cs_app_main
 * (cs__cli_parse and cs__cli_partition, src/ops/cli.c), neither of which
 * needs a running app.
 *
 * Input byte 0 picks the mode:
 *   even: "key\0value" — the check must not crash on any key or value; a
 *         rejection names the key; an accepted pair also applies to a real
 *         librdkafka conf, and the property list keeps the last value.
 *   odd:  NUL-separated arguments after argv[0] — the parser answers 0, 1 or
 *         2, and what it accepts is consistent (a known command, a topic for
 *         publish, every --header and -X with an '=', values that are argv strings).
 * plugin.library.paths is left out: librdkafka loads the plugin while the
 * property is set, so fuzzing it would dlopen arbitrary paths. */
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cli.h"
#include "kafka/kafka_internal.h"
#include "base/log.h"

#define MAX_ARGS 24

static FILE *devnull;
static cs_app *app;

static void check(bool ok) {
    if (!ok) abort(); /* a broken property is a finding */
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    devnull = fopen("/dev/null", "w");
    app = cs_app_new("svc", "1.2.3");
    cs_log_set_level(CS_LOG_ERROR);
    return devnull && app ? 0 : -1;
}

static void property(const char *key, const char *value) {
    if (strstr(key, "plugin.library.paths")) return;
    cs_err err = cs__conf_check("fuzz", key, value);
    if (err) {
        check(err == CS_ERR_ARG || err == CS_ERR_CONFIG || err == CS_ERR_UNSUPPORTED);
        /* the reason names the key (short keys: long ones may be cut at the message size) */
        if (*key && strlen(key) + strlen(value) < 256) check(strstr(cs_errmsg(), key) != NULL);
        return;
    }
    cs_kvlist l = {0};
    check(cs__kvlist_set(&l, key, "placeholder") == CS_OK);
    check(cs__kvlist_set(&l, key, value) == CS_OK); /* the same key again: replaced, not added */
    check(l.n == 1 && !strcmp(l.values[0], value));
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    check(cs__conf_apply(conf, "fuzz", &l) == CS_OK); /* what the check accepted applies for real */
    rd_kafka_conf_destroy(conf);
    cs__kvlist_free(&l);
    check(l.n == 0 && l.keys == NULL);
}

static bool is_arg(char *const *argv, int argc, const char *s) {
    for (int i = 0; i < argc; i++)
        if (s >= argv[i] && s <= argv[i] + strlen(argv[i])) return true;
    return false;
}

static void command_line(char *text, size_t len) {
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = "svc";
    for (size_t i = 0; i < len && argc < MAX_ARGS;) {
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    argv[argc] = NULL;
    cs__cli_options o = {0};
    int rc = cs__cli_parse(argc, argv, "svc", app, &o, devnull, devnull);
    check(rc == 0 || rc == 1 || rc == 2);
    if (rc == 0) {
        bool run = !strcmp(o.command, "run"), docs = !strcmp(o.command, "docs"),
             publish = !strcmp(o.command, "publish");
        bool reset = !strcmp(o.command, "reset-offsets"), config = !strcmp(o.command, "config");
        check(run || docs || publish || reset || config);
        /* -X KEY=VALUE: every one has a name and an '='; docs takes none. */
        for (size_t i = 0; i < o.n_props; i++) check(o.props[i][0] != '=' && strchr(o.props[i], '='));
        check(!docs || (!o.n_props && !o.config_file));
        check(!o.config_file || is_arg(argv, argc, o.config_file));
        check(!publish || (o.topic && is_arg(argv, argc, o.topic)));
        check(publish || (!o.topic && !o.key && !o.partition && !o.n_headers && !o.lines));
        check(!docs || (!o.log_level && !o.log_format && !o.http));
        for (size_t i = 0; i < o.n_headers; i++) check(strchr(o.headers[i], '=') && is_arg(argv, argc, o.headers[i]));
        const char *values[] = {o.brokers, o.log_level, o.log_format, o.http, o.key, o.partition};
        for (size_t i = 0; i < sizeof values / sizeof *values; i++) check(!values[i] || is_arg(argv, argc, values[i]));
        if (o.log_level) check(cs__log_level_parse(o.log_level) >= -1);
        if (o.log_format) check(cs__log_format_parse(o.log_format) >= -1);
        if (o.partition) {
            int32_t p = -1;
            if (cs__cli_partition(o.partition, &p) == 0) check(p >= 0 && strtoll(o.partition, NULL, 10) == p);
        }
    }
    cs__cli_options_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* the rest as NUL-terminated strings, in an exact-size heap copy */
    size_t len = size - 1;
    char *text = malloc(len + 1);
    if (len) memcpy(text, data + 1, len);
    text[len] = '\0';
    if (data[0] & 1) {
        command_line(text, len);
    } else {
        size_t key_len = strlen(text);
        property(text, key_len < len ? text + key_len + 1 : "");
    }
    free(text);
    return 0;
}
