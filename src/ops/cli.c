/* cli.c — cs_app_main: the command line every service shares (run, docs,
 * publish, reset-offsets (its run is in cli_reset.c), config show, --help,
 * --version; see cstream/main.h; --config and -X reach the brokers as
 * opaque key=value strings), under `run --http` the routes of the operations server
 * (/metrics, /healthz, /readyz), and cs_app_asyncapi, which `docs` prints (the
 * broker writes the document).
 *
 * Threads: the calling thread drives the lifecycle; a signal thread turns
 * SIGINT/SIGTERM into a stop request; the HTTP thread answers requests. The
 * HTTP thread reads subscriptions only under `ops.lock` while `ops.running`,
 * and the lifecycle thread clears `running` under that lock before it stops
 * the app, so no request ever reads a consumer that is being closed.
 * Never calls exit(): it returns the process status.
 *
 * Owns: the ops state of one cs_app_main run (which subscriptions the
 * routes read, whether the app runs). Locks: that state's `lock` (a leaf),
 * so that no route reads the subscriptions once the app stops. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "ops/cli.h"
#include "cstream/main.h"
#include "cstream/record.h"
#include "base/error.h"
#include "ops/http.h"
#include "base/log.h"

#ifndef CSTREAM_VERSION
#define CSTREAM_VERSION "0.1.0"
#endif

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };
/* The signal thread looks at its `done` flag at least this often. */
#define SIGNAL_CHECK_NS (100 * 1000000L)

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s [run] [--brokers LIST] [--log-level error|warn|info|debug] [--log-format text|json]\n"
            "          [--http ADDR:PORT]\n"
            "       %s docs [--yaml] [--brokers LIST]\n"
            "       %s publish TOPIC [--key K] [--header NAME=VALUE]... [--partition N] [--lines]\n"
            "          [--brokers LIST] [--log-level L] [--log-format F]\n"
            "       %s reset-offsets (--to-earliest | --to-latest | --to-offset N | --to-datetime TIME |\n"
            "          --to-timestamp MS | --shift-by N) [--group G] [--topic T[:P,P...]]... [--execute]\n"
            "          [--brokers LIST]\n"
            "       %s config show [--config FILE] [-X KEY=VALUE]... [--brokers LIST]\n"
            "       %s --help | --version\n"
            "\n"
            "commands:\n"
            "  run       run the service until SIGINT or SIGTERM (the default)\n"
            "  docs      print the service's AsyncAPI 3.0 document (JSON; --yaml for YAML)\n"
            "  publish   send stdin to TOPIC as one record (--lines: one record per line) and print\n"
            "            partition=P offset=O from each delivery report\n"
            "  reset-offsets  move a group's committed positions (the service's group unless --group;\n"
            "            every topic it reads unless --topic). A dry run by default: prints\n"
            "            TOPIC PARTITION CURRENT -> NEW; --execute commits it. Refused while the group\n"
            "            has live members (a crashed static member counts until its session expires).\n"
            "            TIME: 2026-12-01T10:00:00Z (or +02:00), MS: milliseconds since the epoch\n"
            "  config show  print each Kafka client's effective configuration (every subscription's\n"
            "            consumer, the producer), each value with where it comes from, secrets masked\n"
            "\n"
            "options (flags beat the environment, the environment beats the code):\n"
            "  --brokers LIST     bootstrap servers (CSTREAM_BROKERS; none: the embedded cluster)\n"
            "  --log-level L      error|warn|info|debug (CSTREAM_LOG_LEVEL)\n"
            "  --log-format F     text|json (CSTREAM_LOG_FORMAT)\n"
            "  --http ADDR:PORT   serve /metrics, /healthz and /readyz (CSTREAM_HTTP)\n"
            "\n"
            "Kafka client properties (run, publish, reset-offsets, config show), lowest to highest:\n"
            "  cstream's defaults < the service's code < a properties file < CSTREAM_KAFKA_* < -X.\n"
            "  --config FILE      a Java client.properties file: key=value lines, # and ! comments\n"
            "                     (CSTREAM_CONFIG; for a service without this command line too)\n"
            "  -X KEY=VALUE       one property, repeatable: -X security.protocol=SASL_SSL\n"
            "  CSTREAM_KAFKA_KEY  one property per variable: _ is ., __ is _ (CSTREAM_KAFKA_SASL_MECHANISMS)\n"
            "  A key may start with consumer. or producer. (variables: CONSUMER_, PRODUCER_) for those\n"
            "  clients only, or subscription.NAME. for one subscription's consumer (variables:\n"
            "  SUBSCRIPTION_NAME_, NAME upper case with every other character as _). Secrets from files:\n"
            "  KEY=@/path/to/file in the file or -X (@@ for a literal @), CSTREAM_KAFKA_KEY_FILE=/path;\n"
            "  the file's trailing newline is dropped. Keys cstream owns (group.id, bootstrap.servers,\n"
            "  enable.auto.commit, ...) are refused.\n",
            prog, prog, prog, prog, prog, prog);
}

/* ---- arguments ------------------------------------------------------------------ */

typedef cs__cli_options options;

/* "--name value" or "--name=value": the value, advancing *i; NULL if not this flag. */
static const char *flag_value(int argc, char **argv, int *i, const char *name, bool *missing) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n)) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n]) return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

static bool append(const char ***list, size_t *n, const char *v) {
    const char **grown = realloc(*list, (*n + 1) * sizeof *grown);
    if (!grown) return false;
    *list = grown;
    grown[(*n)++] = v;
    return true;
}

/* "-X KEY=VALUE" or "-XKEY=VALUE" (kcat's spellings): the value, advancing *i. */
static const char *property_flag(int argc, char **argv, int *i, bool *missing) {
    if (strncmp(argv[*i], "-X", 2)) return NULL;
    if (argv[*i][2]) return argv[*i] + 2;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

/* reset-offsets' --to-* and --shift-by: true if argv[*i] is one (then
 * o->reset_to is set, or NULL when one was given before). */
static bool reset_target(int argc, char **argv, int *i, cs__cli_options *o, bool *missing) {
    static const char *const bare[] = {"earliest", "latest"};
    static const char *const valued[][2] = {{"--to-offset", "offset"},
                                            {"--to-datetime", "datetime"},
                                            {"--to-timestamp", "timestamp"},
                                            {"--shift-by", "shift"}};
    const char *to = NULL, *v = NULL;
    for (size_t b = 0; b < 2; b++) {
        char flag[32];
        snprintf(flag, sizeof flag, "--to-%s", bare[b]);
        if (!strcmp(argv[*i], flag)) to = bare[b];
    }
    for (size_t k = 0; !to && k < 4; k++)
        if ((v = flag_value(argc, argv, i, valued[k][0], missing))) to = valued[k][1];
    if (!to) return false;
    o->reset_to = o->reset_to ? NULL : to;
    o->reset_value = v;
    return true;
}

int cs__cli_parse(int argc, char **argv, const char *prog, const cs_app *app, options *o, FILE *out, FILE *err) {
    int i = 1;
    o->command = "run";
    if (argc > 1 && argv[1][0] != '-') {
        o->command = argv[1];
        i = 2;
        if (!strcmp(o->command, "config")) {
            if (argc < 3 || strcmp(argv[2], "show")) {
                fprintf(err, "%s: config takes an action: config show\n", prog);
                usage(err, prog);
                return 2;
            }
            i = 3;
        } else if (strcmp(o->command, "run") && strcmp(o->command, "docs") && strcmp(o->command, "publish") &&
                   strcmp(o->command, "reset-offsets")) {
            fprintf(err, "%s: unknown command \"%s\"\n", prog, o->command);
            usage(err, prog);
            return 2;
        }
    }
    bool publish = !strcmp(o->command, "publish"), docs = !strcmp(o->command, "docs");
    bool reset = !strcmp(o->command, "reset-offsets"), config = !strcmp(o->command, "config");
    for (; i < argc; i++) {
        const char *a = argv[i], *v;
        bool missing = false;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(out, prog);
            return 1;
        }
        if (!strcmp(a, "--version")) {
            fprintf(out, "%s %s (cstream %s", cs_app_name(app), cs_app_version(app), CSTREAM_VERSION);
            for (size_t k = 0; k < cs__app_n_brokers(app); k++) {
                void *impl;
                const cs_broker_ops *ops = cs__app_broker(app, k, &impl);
                char lib[128];
                if (!ops->library) continue;
                ops->library(impl, lib, sizeof lib);
                fprintf(out, ", %s", lib);
            }
            fprintf(out, ")\n");
            return 1;
        }
        if ((v = flag_value(argc, argv, &i, "--brokers", &missing))) o->brokers = v;
        else if (!docs && (v = flag_value(argc, argv, &i, "--config", &missing))) o->config_file = v;
        else if (!docs && (v = property_flag(argc, argv, &i, &missing))) {
            if (!strchr(v, '=') || v[0] == '=') {
                fprintf(err, "%s: -X %s: expected KEY=VALUE\n", prog, v);
                return 2;
            }
            if (!append(&o->props, &o->n_props, v)) {
                fprintf(err, "%s: out of memory\n", prog);
                return 2;
            }
        } else if (!docs && (v = flag_value(argc, argv, &i, "--log-level", &missing))) o->log_level = v;
        else if (!docs && (v = flag_value(argc, argv, &i, "--log-format", &missing))) o->log_format = v;
        else if (!docs && !publish && !reset && !config && (v = flag_value(argc, argv, &i, "--http", &missing)))
            o->http = v;
        else if (reset && (v = flag_value(argc, argv, &i, "--group", &missing))) o->group = v;
        else if (reset && !strcmp(a, "--execute")) o->execute = true;
        else if (reset && reset_target(argc, argv, &i, o, &missing)) {
            if (o->reset_to == NULL) { /* a second one */
                fprintf(err, "%s: reset-offsets takes one --to-* or --shift-by, %s is a second\n", prog, a);
                return 2;
            }
        } else if (reset && (v = flag_value(argc, argv, &i, "--topic", &missing))) {
            if (!append(&o->scopes, &o->n_scopes, v)) {
                fprintf(err, "%s: out of memory\n", prog);
                return 2;
            }
        } else if (docs && !strcmp(a, "--yaml")) o->yaml = true;
        else if (publish && !strcmp(a, "--lines")) o->lines = true;
        else if (publish && (v = flag_value(argc, argv, &i, "--key", &missing))) o->key = v;
        else if (publish && (v = flag_value(argc, argv, &i, "--partition", &missing))) o->partition = v;
        else if (publish && (v = flag_value(argc, argv, &i, "--header", &missing))) {
            if (!strchr(v, '=')) {
                fprintf(err, "%s: --header %s: expected NAME=VALUE\n", prog, v);
                return 2;
            }
            if (!append(&o->headers, &o->n_headers, v)) {
                fprintf(err, "%s: out of memory\n", prog);
                return 2;
            }
        } else if (publish && a[0] != '-' && !o->topic) o->topic = a;
        else {
            if (missing) fprintf(err, "%s: %s needs a value\n", prog, a);
            else
                fprintf(err, "%s: unknown %s \"%s\" for %s\n", prog, a[0] == '-' ? "option" : "argument", a,
                        o->command);
            usage(err, prog);
            return 2;
        }
        if (missing) {
            fprintf(err, "%s: %s needs a value\n", prog, a);
            usage(err, prog);
            return 2;
        }
    }
    if (publish && !o->topic) {
        fprintf(err, "%s: publish needs a TOPIC\n", prog);
        usage(err, prog);
        return 2;
    }
    if (reset && !o->reset_to) {
        fprintf(err,
                "%s: reset-offsets needs where to: --to-earliest, --to-latest, --to-offset N, --to-datetime "
                "TIME, --to-timestamp MS or --shift-by N\n",
                prog);
        usage(err, prog);
        return 2;
    }
    return 0;
}

void cs__cli_options_free(options *o) {
    free(o->props);
    o->props = NULL;
    o->n_props = 0;
    free(o->headers);
    o->headers = NULL;
    o->n_headers = 0;
    free(o->scopes);
    o->scopes = NULL;
    o->n_scopes = 0;
}

int cs__cli_partition(const char *text, int32_t *out) {
    /* strtol alone would take " 7", "+7" and "-0"; a partition is plain digits */
    if (!text || text[0] < '0' || text[0] > '9') return -1;
    char *end;
    errno = 0;
    long p = strtol(text, &end, 10);
    if (*end || errno || p < 0 || p > INT32_MAX) return -1;
    *out = (int32_t)p;
    return 0;
}

static const char *flag_or_env(const char *flag, const char *env) {
    if (flag) return flag;
    const char *v = getenv(env);
    return v && *v ? v : NULL;
}

/* Log level and format: flag, else environment, else what the code set. */
static int apply_logging(const options *o, const char *prog) {
    const char *level = flag_or_env(o->log_level, "CSTREAM_LOG_LEVEL");
    if (level) {
        int l = cs__log_level_parse(level);
        if (l < 0) {
            fprintf(stderr, "%s: log level \"%s\" is not one of error|warn|info|debug\n", prog, level);
            return 2;
        }
        cs_log_set_level((cs_log_level)l);
    }
    const char *format = flag_or_env(o->log_format, "CSTREAM_LOG_FORMAT");
    if (format) {
        int f = cs__log_format_parse(format);
        if (f < 0) {
            fprintf(stderr, "%s: log format \"%s\" is not one of text|json\n", prog, format);
            return 2;
        }
        cs_log_set_format((cs_log_format)f);
    }
    return 0;
}

/* Brokers: flag, else CSTREAM_BROKERS, else what the code gave the broker. */
static int apply_brokers(cs_app *app, const options *o, const char *prog) {
    const char *servers = flag_or_env(o->brokers, "CSTREAM_BROKERS");
    if (!servers) return 0;
    for (size_t i = 0; i < cs__app_n_brokers(app); i++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(app, i, &impl);
        if (ops->set_bootstrap && ops->set_bootstrap(impl, servers) != CS_OK) {
            fprintf(stderr, "%s: %s\n", prog, cs_errmsg());
            return 1;
        }
    }
    return 0;
}

/* --config and -X, to every broker (it reads, checks and applies them; the
 * core does not know what a property is). */
static int apply_external(cs_app *app, const options *o, const char *prog) {
    if (!o->config_file && !o->n_props) return 0;
    for (size_t i = 0; i < cs__app_n_brokers(app); i++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(app, i, &impl);
        if (ops->set_external && ops->set_external(impl, o->config_file, (char *const *)o->props, o->n_props)) {
            fprintf(stderr, "%s: %s\n", prog, cs_errmsg());
            return 1;
        }
    }
    return 0;
}

/* ---- config show ---------------------------------------------------------------------- */

static int cmd_config_show(cs_app *app, const char *prog) {
    for (size_t i = 0; i < cs__app_n_brokers(app); i++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(app, i, &impl);
        if (ops->show_config && ops->show_config(impl, app, stdout) != CS_OK) {
            fprintf(stderr, "%s config show: %s\n", prog, cs_errmsg());
            return EXIT_FAILED;
        }
    }
    return EXIT_OK;
}

/* ---- run ----------------------------------------------------------------------------- */

/* Bytes of a "not ready" reason /readyz shows (a codec's, e.g. the schema
 * registry's URL and what failed). */
#define READYZ_WHY_MAX 512

typedef struct ops_state {
    cs_app *app;
    /* Lock order: level 1, the outermost (lock_order.h): a route reads the
     * subscriptions under it, and their locks come after. Held across
     * /readyz's broker probe (at most 1 s per subscription, after "all brokers
     * down"), so the stop's flip of `running` may wait that long. */
    pthread_mutex_t lock;
    bool running; /* started and not stopping: subscriptions may be read */
    _Atomic bool done;
    sigset_t signals;
} ops_state;

/* The subscriptions' codecs (cs_codec.ready): a schema registry that does
 * not answer makes the service not ready; why names it. */
static int codecs_ready(const cs_broker_ops *ops, void *impl, char *why, size_t cap) {
    if (!ops->n_subs || !ops->describe_sub) return 1;
    for (size_t i = 0; i < ops->n_subs(impl); i++) {
        cs_broker_sub_desc d;
        ops->describe_sub(impl, i, &d);
        if (d.codec && d.codec->ready && !d.codec->ready(d.codec, why, cap)) return 0;
        if (d.key_codec && d.key_codec->ready && !d.key_codec->ready(d.key_codec, why, cap)) return 0;
    }
    return 1;
}

static int all_ready(ops_state *s, char *why, size_t cap) {
    if (!s->running) return 0;
    for (size_t i = 0; i < cs__app_n_brokers(s->app); i++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(s->app, i, &impl);
        if (ops->ready && !ops->ready(impl)) return 0;
        if (!codecs_ready(ops, impl, why, cap)) return 0;
    }
    return 1;
}

static uint64_t all_paused(ops_state *s) {
    uint64_t n = 0;
    for (size_t i = 0; i < cs__app_n_brokers(s->app); i++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(s->app, i, &impl);
        if (ops->paused) n += ops->paused(impl);
    }
    return n;
}

static int route(void *ctx, const char *path, char **body, const char **type) {
    ops_state *s = ctx;
    if (!strcmp(path, "/healthz") || !strcmp(path, "/livez")) {
        *body = strdup("ok\n");
        return 200;
    }
    if (!strcmp(path, "/readyz")) {
        char why[READYZ_WHY_MAX] = "";
        pthread_mutex_lock(&s->lock);
        int ready = all_ready(s, why, sizeof why);
        uint64_t paused = ready ? all_paused(s) : 0;
        pthread_mutex_unlock(&s->lock);
        char text[READYZ_WHY_MAX + 48];
        snprintf(text, sizeof text, "%s%s%s\n", ready ? "ready" : "not ready", *why ? ": " : "", ready ? "" : why);
        /* Paused on purpose is healthy: ready, and said so. */
        if (ready && paused)
            snprintf(text, sizeof text, "ready, paused partitions: %llu\n", (unsigned long long)paused);
        *body = strdup(text);
        return ready ? 200 : 503;
    }
    if (!strcmp(path, "/metrics")) {
        pthread_mutex_lock(&s->lock);
        cs_err err = s->running ? cs_app_metrics(s->app, body) : CS_ERR_STATE;
        pthread_mutex_unlock(&s->lock);
        *type = "text/plain; version=0.0.4; charset=utf-8";
        if (err) {
            *body = strdup(err == CS_ERR_STATE ? "the app is not running\n" : "metrics failed\n");
            return 503;
        }
        return 200;
    }
    *body = strdup("not found (try /metrics, /healthz, /readyz)\n");
    return 404;
}

/* Turns SIGINT/SIGTERM (blocked in every thread) into a stop request. */
static void *signal_thread(void *arg) {
    ops_state *s = arg;
    while (!atomic_load(&s->done)) {
        struct timespec tick = {0, SIGNAL_CHECK_NS};
        int sig = sigtimedwait(&s->signals, NULL, &tick);
        if (sig > 0) {
            CS_LOG_INFO("signal received, stopping gracefully app=%s signal=%s", cs_app_name(s->app),
                        sig == SIGINT ? "SIGINT" : "SIGTERM");
            cs_app_request_stop(s->app);
        }
    }
    return NULL;
}

static int cmd_run(cs_app *app, const options *o, const char *prog) {
    ops_state s = {.app = app};
    pthread_mutex_init(&s.lock, NULL);
    sigemptyset(&s.signals);
    sigaddset(&s.signals, SIGINT);
    sigaddset(&s.signals, SIGTERM);
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &s.signals, &old); /* before any thread starts: they inherit it */

    int status = EXIT_OK;
    cs_http *http = NULL;
    const char *addr = flag_or_env(o->http, "CSTREAM_HTTP");
    if (addr) {
        int port = 0;
        if (cs__http_start(addr, route, &s, &http, &port) != CS_OK) {
            fprintf(stderr, "%s: %s\n", prog, cs_errmsg());
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            pthread_mutex_destroy(&s.lock);
            return EXIT_FAILED;
        }
        CS_LOG_INFO("http listening app=%s addr=%s port=%d paths=/metrics,/healthz,/readyz", cs_app_name(app), addr,
                    port);
    }
    pthread_t sig_thread;
    bool sig_started = pthread_create(&sig_thread, NULL, signal_thread, &s) == 0;
    if (cs_app_start(app) != CS_OK) {
        fprintf(stderr, "%s: %s\n", prog, cs_errmsg());
        status = EXIT_FAILED;
    } else {
        pthread_mutex_lock(&s.lock);
        s.running = true;
        pthread_mutex_unlock(&s.lock);
        cs_err err = cs_app_wait(app);
        pthread_mutex_lock(&s.lock);
        s.running = false; /* from here on no request reads the subscriptions */
        pthread_mutex_unlock(&s.lock);
        cs_err stop_err = cs_app_stop(app);
        if (err == CS_OK) err = stop_err;
        if (err) {
            fprintf(stderr, "%s: %s\n", prog, cs_errmsg());
            status = EXIT_FAILED;
        }
    }
    atomic_store(&s.done, true);
    if (sig_started) pthread_join(sig_thread, NULL);
    cs__http_stop(http);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_destroy(&s.lock);
    return status;
}

/* ---- docs ------------------------------------------------------------------------------ */

/* The document is the broker's to write (it knows its protocol's bindings):
 * the core asks the first broker that has the op. */
cs_err cs_app_asyncapi(cs_app *app, int yaml, char **out) {
    if (!app || !out) return cs__fail(CS_ERR_ARG, "cs_app_asyncapi: app and out are required");
    *out = NULL;
    for (size_t b = 0; b < cs__app_n_brokers(app); b++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(app, b, &impl);
        if (ops->asyncapi) return ops->asyncapi(app, yaml, out);
    }
    return cs__fail(CS_ERR_STATE,
                    "cs_app_asyncapi(%s): no broker of the app writes an AsyncAPI document (add one "
                    "with cs_app_add_kafka)",
                    cs_app_name(app));
}

static int cmd_docs(cs_app *app, const options *o, const char *prog) {
    char *doc = NULL;
    if (cs_app_asyncapi(app, o->yaml, &doc) != CS_OK) {
        fprintf(stderr, "%s docs: %s\n", prog, cs_errmsg());
        return EXIT_FAILED;
    }
    fputs(doc, stdout);
    free(doc);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
}

/* ---- publish ------------------------------------------------------------------------------ */

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                return NULL;
            }
            buf = grown;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int publish_one(const cs_broker_ops *ops, void *publisher, cs_record *r, const char *prog) {
    cs_published where;
    if (ops->publish(publisher, r, &where) != CS_OK) {
        fprintf(stderr, "%s publish: %s\n", prog, cs_errmsg());
        return EXIT_FAILED;
    }
    printf("partition=%d offset=%lld\n", (int)where.partition, (long long)where.offset);
    fflush(stdout);
    return EXIT_OK;
}

static int cmd_publish(cs_app *app, const options *o, const char *prog) {
    void *impl = NULL;
    const cs_broker_ops *ops = cs__app_n_brokers(app) ? cs__app_broker(app, 0, &impl) : NULL;
    if (!ops || !ops->add_publisher || !ops->publish) {
        fprintf(stderr, "%s publish: the app has no Kafka broker\n", prog);
        return EXIT_FAILED;
    }
    int32_t partition = -1;
    if (o->partition) {
        if (cs__cli_partition(o->partition, &partition) != 0) {
            fprintf(stderr, "%s publish: --partition %s is not a partition number\n", prog, o->partition);
            return EXIT_USAGE;
        }
    }
    size_t len = 0;
    char *input = read_all(stdin, &len);
    if (!input) {
        fprintf(stderr, "%s publish: cannot read stdin: %s\n", prog, strerror(errno));
        return EXIT_FAILED;
    }
    cs_header *headers = calloc(o->n_headers ? o->n_headers : 1, sizeof *headers);
    char **names = calloc(o->n_headers ? o->n_headers : 1, sizeof *names);
    bool oom = !headers || !names;
    for (size_t i = 0; !oom && i < o->n_headers; i++) {
        const char *eq = strchr(o->headers[i], '=');
        names[i] = strndup(o->headers[i], (size_t)(eq - o->headers[i]));
        oom = !names[i];
        headers[i] = (cs_header){names[i], eq + 1, strlen(eq + 1)};
    }
    if (oom) cs__fail(CS_ERR_NOMEM, "publish %s: out of memory copying the headers", o->topic);
    /* A broker of its own: the same client properties and declared topics,
     * no subscriptions (publishing must not join the service's groups). */
    cs_app *tool = oom ? NULL : cs_app_new(cs_app_name(app), cs_app_version(app));
    void *k = tool ? ops->add_publisher(impl, tool, flag_or_env(o->brokers, "CSTREAM_BROKERS")) : NULL;
    int status = EXIT_FAILED;
    bool added = k != NULL; /* the app owns it once added */
    if (!added) {
        fprintf(stderr, "%s publish: %s\n", prog, cs_errmsg());
    } else if (cs_app_start(tool) != CS_OK) {
        fprintf(stderr, "%s publish: %s\n", prog, cs_errmsg());
    } else {
        cs_record r = {.topic = o->topic,
                       .partition = partition,
                       .key = o->key,
                       .key_len = o->key ? strlen(o->key) : 0,
                       .headers = headers,
                       .n_headers = o->n_headers};
        status = EXIT_OK;
        if (!o->lines) {
            r.value = input;
            r.value_len = len;
            status = publish_one(ops, k, &r, prog);
        } else {
            for (char *line = input; status == EXIT_OK && line < input + len;) {
                char *nl = memchr(line, '\n', (size_t)(input + len - line));
                size_t ll = nl ? (size_t)(nl - line) : (size_t)(input + len - line);
                if (ll && line[ll - 1] == '\r') ll--;
                r.value = line;
                r.value_len = ll;
                status = publish_one(ops, k, &r, prog);
                line = nl ? nl + 1 : input + len;
            }
        }
        if (cs_app_stop(tool) != CS_OK && status == EXIT_OK) status = EXIT_FAILED;
    }
    cs_app_destroy(tool);
    for (size_t i = 0; names && i < o->n_headers; i++) free(names[i]);
    free(names);
    free(headers);
    free(input);
    return status;
}

/* ---- main ------------------------------------------------------------------------------------ */

int cs_app_main(cs_app *app, int argc, char **argv) {
    const char *prog = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
    prog = prog ? prog + 1 : (argc > 0 && argv[0] ? argv[0] : "service");
    if (!app) {
        fprintf(stderr, "%s: %s\n", prog, cs_errmsg());
        return EXIT_FAILED;
    }
    options o = {0};
    int status = cs__cli_parse(argc, argv, prog, app, &o, stdout, stderr);
    if (status == 1) status = EXIT_OK; /* --help, --version */
    else if (status == 0) {
        bool docs = !strcmp(o.command, "docs");
        status = docs ? 0 : apply_logging(&o, prog);
        if (!status) status = apply_brokers(app, &o, prog);
        if (!status) status = apply_external(app, &o, prog);
        if (!status) {
            if (docs) status = cmd_docs(app, &o, prog);
            else if (!strcmp(o.command, "config")) status = cmd_config_show(app, prog);
            else if (!strcmp(o.command, "publish")) status = cmd_publish(app, &o, prog);
            else if (!strcmp(o.command, "reset-offsets")) status = cs__cli_reset_offsets(app, &o, prog, stdout);
            else status = cmd_run(app, &o, prog);
        }
    }
    cs__cli_options_free(&o);
    cs_app_destroy(app);
    return status;
}
