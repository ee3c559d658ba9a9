/* cli_reset.c — the operators' `reset-offsets` command of cs_app_main (the
 * arguments are parsed in cli.c): turns the options into a cs_broker_reset,
 * asks the app's broker for the plan through its reset_offsets operation
 * (the core knows no Kafka; src/kafka/broker/reset.c answers), and prints it as
 * "TOPIC PARTITION CURRENT -> NEW". A dry run unless --execute.
 *
 * Threads: the thread of cs_app_main, with the app never started: the
 * service's own consumers must not be running while its group is reset.
 *
 * Owns: nothing beyond its arguments and the printed plan. Locks: none. */
/* timegm: _DEFAULT_SOURCE, which the build defines */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "ops/cli.h"
#include "base/error.h"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };
/* Zone offsets: hours and minutes as in "+HH:MM". */
enum { ZONE_HOURS_MAX = 23, ZONE_MINUTES_MAX = 59, MS_PER_S = 1000 };

int cs__cli_parse_i64(const char *text, int64_t *out) {
    if (!text || !*text) return -1;
    const char *digits = text[0] == '-' || text[0] == '+' ? text + 1 : text;
    if (*digits < '0' || *digits > '9') return -1; /* strtoll would skip spaces */
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end || errno) return -1;
    *out = (int64_t)v;
    return 0;
}

/* n decimal digits at p, into *v. */
static int digits(const char *p, int n, int *v) {
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        *v = *v * 10 + (p[i] - '0');
    }
    return 0;
}

int cs__cli_parse_datetime(const char *text, int64_t *ms) {
    if (!text || strlen(text) < 20) return -1; /* YYYY-MM-DDTHH:MM:SS and a zone */
    struct tm tm = {0};
    int y, mo, d, h, mi, s;
    if (digits(text, 4, &y) || text[4] != '-' || digits(text + 5, 2, &mo) || text[7] != '-' ||
        digits(text + 8, 2, &d) || (text[10] != 'T' && text[10] != ' ') || digits(text + 11, 2, &h) ||
        text[13] != ':' || digits(text + 14, 2, &mi) || text[16] != ':' || digits(text + 17, 2, &s))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return -1;
    const char *p = text + 19;
    int frac = 0;
    if (*p == '.') {
        int n = 0, scale = 100;
        for (p++; *p >= '0' && *p <= '9'; p++, n++) {
            frac += scale * (*p - '0');
            scale /= 10;
        }
        if (n == 0) return -1;
    }
    int zone_s = 0;
    if (*p == 'Z' && p[1] == '\0') {
        zone_s = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int zh, zm;
        if (digits(p + 1, 2, &zh) || digits(p + 4, 2, &zm) || zh > ZONE_HOURS_MAX || zm > ZONE_MINUTES_MAX) return -1;
        zone_s = (zh * 60 + zm) * 60 * (*p == '-' ? -1 : 1);
    } else return -1;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    time_t t = timegm(&tm);
    if (t == (time_t)-1) return -1;
    *ms = ((int64_t)t - zone_s) * MS_PER_S + frac;
    return 0;
}

/* "TOPIC" or "TOPIC:P,P,...": scope borrows the topic from a copy in *owned. */
static int parse_scope(const char *text, cs_broker_reset_scope *scope, char **owned, int32_t **parts) {
    *owned = strdup(text);
    *parts = NULL;
    if (!*owned) return -1;
    char *colon = strrchr(*owned, ':');
    scope->topic = *owned;
    scope->partitions = NULL;
    scope->n_partitions = 0;
    if (!colon) return **owned ? 0 : -1;
    *colon = '\0';
    size_t n = 1;
    for (const char *c = colon + 1; *c; c++) n += *c == ',';
    *parts = calloc(n, sizeof **parts);
    if (!*parts || !**owned) return -1;
    char *save = NULL;
    for (char *tok = strtok_r(colon + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        /* plain digits, as --partition takes (cli.c's parser would make a call cycle) */
        int64_t p;
        if (tok[0] < '0' || tok[0] > '9' || cs__cli_parse_i64(tok, &p) != 0 || p > INT32_MAX) return -1;
        (*parts)[scope->n_partitions++] = (int32_t)p;
    }
    scope->partitions = *parts;
    return scope->n_partitions ? 0 : -1;
}

/* The --to-* or --shift-by option as a request; 0, or -1 with a message on stderr. */
static int reset_target(const cs__cli_options *o, const char *prog, cs_broker_reset *req) {
    const char *v = o->reset_value;
    if (!strcmp(o->reset_to, "earliest")) req->to = CS_RESET_EARLIEST;
    else if (!strcmp(o->reset_to, "latest")) req->to = CS_RESET_LATEST;
    else if (!strcmp(o->reset_to, "offset")) {
        req->to = CS_RESET_OFFSET;
        if (cs__cli_parse_i64(v, &req->value) != 0 || req->value < 0) {
            fprintf(stderr, "%s reset-offsets: --to-offset %s is not an offset (0 or more)\n", prog, v);
            return -1;
        }
    } else if (!strcmp(o->reset_to, "datetime")) {
        req->to = CS_RESET_TIME;
        if (cs__cli_parse_datetime(v, &req->value) != 0) {
            fprintf(stderr,
                    "%s reset-offsets: --to-datetime %s is not a time like 2026-12-01T10:00:00Z or "
                    "2026-12-01T12:00:00.250+02:00 (a zone is required)\n",
                    prog, v);
            return -1;
        }
    } else if (!strcmp(o->reset_to, "timestamp")) {
        req->to = CS_RESET_TIME;
        if (cs__cli_parse_i64(v, &req->value) != 0 || req->value < 0) {
            fprintf(stderr, "%s reset-offsets: --to-timestamp %s is not milliseconds since the epoch\n", prog, v);
            return -1;
        }
    } else {
        req->to = CS_RESET_SHIFT;
        if (cs__cli_parse_i64(v, &req->value) != 0) {
            fprintf(stderr, "%s reset-offsets: --shift-by %s is not a number (negative: back)\n", prog, v);
            return -1;
        }
    }
    return 0;
}

static void print_plan(FILE *out, const char *trailer, const cs_broker_reset_row *rows, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char cur[24], next[24];
        snprintf(cur, sizeof cur, "%lld", (long long)rows[i].current);
        snprintf(next, sizeof next, "%lld", (long long)rows[i].next);
        fprintf(out, "%s %d %s -> %s%s%s\n", rows[i].topic, (int)rows[i].partition, rows[i].current < 0 ? "none" : cur,
                rows[i].next < 0 ? "none" : next, rows[i].note[0] ? " " : "", rows[i].note);
    }
    fprintf(out, "%s\n", trailer);
}

int cs__cli_reset_offsets(cs_app *app, const cs__cli_options *o, const char *prog, FILE *out) {
    void *impl = NULL;
    const cs_broker_ops *ops = cs__app_n_brokers(app) ? cs__app_broker(app, 0, &impl) : NULL;
    if (!ops || !ops->reset_offsets) {
        fprintf(stderr, "%s reset-offsets: the app has no Kafka broker\n", prog);
        return EXIT_FAILED;
    }
    cs_broker_reset req = {.group = o->group, .execute = o->execute};
    if (reset_target(o, prog, &req) != 0) return EXIT_USAGE;
    cs_broker_reset_scope *scopes = calloc(o->n_scopes ? o->n_scopes : 1, sizeof *scopes);
    char **owned = calloc(o->n_scopes ? o->n_scopes : 1, sizeof *owned);
    int32_t **parts = calloc(o->n_scopes ? o->n_scopes : 1, sizeof *parts);
    int status = scopes && owned && parts ? EXIT_OK : EXIT_FAILED;
    for (size_t i = 0; status == EXIT_OK && i < o->n_scopes; i++)
        if (parse_scope(o->scopes[i], &scopes[i], &owned[i], &parts[i]) != 0) {
            fprintf(stderr, "%s reset-offsets: --topic %s is not TOPIC or TOPIC:PARTITION[,PARTITION...]\n", prog,
                    o->scopes[i]);
            status = EXIT_USAGE;
        }
    if (status == EXIT_OK) {
        req.scopes = scopes;
        req.n_scopes = o->n_scopes;
        cs_broker_reset_row *rows = NULL;
        size_t n = 0;
        cs_err err = ops->reset_offsets(impl, &req, &rows, &n);
        if (!err)
            print_plan(out, req.execute ? "committed" : "dry run: nothing changed (add --execute to commit this plan)",
                       rows, n);
        else {
            if (n) print_plan(stderr, "not committed", rows, n); /* the plan was made, its commit failed */
            fprintf(stderr, "%s: %s\n", prog, cs_errmsg());
            status = EXIT_FAILED;
        }
        free(rows);
    }
    for (size_t i = 0; owned && parts && i < o->n_scopes; i++) {
        free(owned[i]);
        free(parts[i]);
    }
    free(owned);
    free(parts);
    free(scopes);
    fflush(out);
    return status;
}
