/* cli.h — the argument parser behind cs_app_main, on its own so that it can be
 * tested and fuzzed without running an app. Pure: it reads argv, writes
 * messages to the streams it is given, and keeps pointers into argv. */
#ifndef CS_CORE_CLI_H
#define CS_CORE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cstream/app.h"

typedef struct cs__cli_options {
    const char *command; /* "run", "docs" or "publish" */
    const char *brokers, *log_level, *log_format, *http;
    bool yaml, lines;
    const char *topic, *key, *partition;
    const char **headers; /* "NAME=VALUE", each with an '='; free() the array (cs__cli_options_free) */
    size_t n_headers;
} cs__cli_options;

/* 0: parsed; 1: --help or --version answered (on out); 2: usage error (on err).
 * *o is filled from argv; release it with cs__cli_options_free whatever the result. */
int cs__cli_parse(int argc, char **argv, const char *prog, const cs_app *app, cs__cli_options *o, FILE *out, FILE *err);
void cs__cli_options_free(cs__cli_options *o);

/* --partition: a decimal partition number 0..INT32_MAX, nothing else. 0 or -1. */
int cs__cli_partition(const char *text, int32_t *out);

#endif
