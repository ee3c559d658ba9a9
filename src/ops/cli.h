/* cli.h — the argument parser behind cs_app_main, on its own so that it can be
 * tested and fuzzed without running an app. Pure: it reads argv, writes
 * messages to the streams it is given, and keeps pointers into argv.
 *
 * Owns: declares cs__cli_options; the caller owns it (its strings point into
 * argv) and frees its arrays with cs__cli_options_free. Locks: none.
 * Threads: the caller's (cs_app_main's thread, or a test's). */
#ifndef CS_CORE_CLI_H
#define CS_CORE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cstream/app.h"

typedef struct cs__cli_options {
    const char *command; /* "run", "docs", "publish", "reset-offsets" or "config" (its only action: show) */
    const char *brokers, *log_level, *log_format, *http;
    /* --config FILE and every -X KEY=VALUE ("KEY=VALUE", each with an '=';
     * free() the array): the broker's client properties (set_external). */
    const char *config_file;
    const char **props;
    size_t n_props;
    bool yaml, lines;
    const char *topic, *key, *partition;
    const char **headers; /* "NAME=VALUE", each with an '='; free() the array (cs__cli_options_free) */
    size_t n_headers;
    /* reset-offsets: --group, the one --to-* or --shift-by given ("earliest",
     * "latest", "offset", "datetime", "timestamp", "shift") and its value,
     * the --topic scopes ("TOPIC" or "TOPIC:P,P..."; free() the array) */
    const char *group, *reset_to, *reset_value;
    const char **scopes;
    size_t n_scopes;
    bool execute;
} cs__cli_options;

/* 0: parsed; 1: --help or --version answered (on out); 2: usage error (on err).
 * *o is filled from argv; release it with cs__cli_options_free whatever the result. */
int cs__cli_parse(int argc, char **argv, const char *prog, const cs_app *app, cs__cli_options *o, FILE *out, FILE *err);
void cs__cli_options_free(cs__cli_options *o);

/* --partition: a decimal partition number 0..INT32_MAX, nothing else. 0 or -1. */
int cs__cli_partition(const char *text, int32_t *out);

/* ---- reset-offsets (cli_reset.c) ---- */

/* --to-datetime: "YYYY-MM-DDTHH:MM:SS[.fff]" then "Z" or "+HH:MM" / "-HH:MM"
 * (a zone is required: a reset by local time is a trap), as milliseconds
 * since the epoch. 0 or -1. */
int cs__cli_parse_datetime(const char *text, int64_t *ms);
/* A signed decimal number (an offset, a shift, a timestamp), nothing else. 0 or -1. */
int cs__cli_parse_i64(const char *text, int64_t *out);
/* The command: plans, prints the plan on out, commits it with --execute.
 * Returns the process status (0, 1 failed, 2 usage). */
int cs__cli_reset_offsets(cs_app *app, const cs__cli_options *o, const char *prog, FILE *out);

#endif
