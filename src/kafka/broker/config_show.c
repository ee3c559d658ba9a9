/* config_show.c — `config show` (cs_app_main): the effective configuration
 * of each client of a broker (every subscription's consumer, the producer),
 * each value with the layer that set it last: what an operator runs when a
 * deployment misbehaves. The configurations are built exactly as the start
 * builds them (consumer_conf.c, producer.c), on scratch librdkafka confs that
 * nothing connects with.
 * Threads: the calling thread, with the app not running.
 * Must never: print a secret key's value (config.c masks it in the trace) or
 * a value read from a file (shown as @path); start or connect anything.
 *
 * Owns: the scratch configurations it builds (destroyed before it returns).
 * Locks: none. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kafka/kafka_internal.h"

/* Keys in name order: easier to scan and to compare between two runs. */
static int by_key(const void *a, const void *b, const cs_kvlist *l) {
    return strcmp(l->keys[*(const size_t *)a], l->keys[*(const size_t *)b]);
}

static void print_trace(FILE *out, const cs_conf_trace *t) {
    size_t n = t->values.n;
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return;
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = 1; i < n; i++) /* insertion sort: a few dozen keys */
        for (size_t j = i; j > 0 && by_key(&order[j - 1], &order[j], &t->values) > 0; j--) {
            size_t tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    for (size_t o = 0; o < n; o++) {
        size_t i = order[o];
        const char *key = t->values.keys[i];
        const char *source = "?";
        for (size_t s = 0; s < t->sources.n; s++)
            if (!strcmp(t->sources.keys[s], key)) source = t->sources.values[s];
        char line[2048];
        snprintf(line, sizeof line, "%s=%s", key, t->values.values[i]);
        fprintf(out, "%-56s # %s\n", line, source);
    }
    free(order);
}

cs_err cs__kafka_show_config(void *impl, cs_app *app, FILE *out) {
    cs_kafka *k = impl;
    cs_err err = cs__ext_bind(k);
    /* As the start would: the instance id names the static members. */
    const char *env = getenv("CSTREAM_INSTANCE_ID");
    if (!err && !k->instance_id && env && *env)
        err = cs__conf_replace_string(&k->instance_id, env, "CSTREAM_INSTANCE_ID");
    if (err) return err;
    fprintf(out,
            "# %s: each Kafka client's configuration and where each value comes from, lowest first:\n"
            "#   default (cstream's), profile NAME (cs_kafka_profile), code (the service's cs_*_config\n"
            "#   calls), config file FILE:LINE,\n"
            "#   environment VARIABLE, -X KEY; cstream: set by cstream, not configurable.\n"
            "# librdkafka's own defaults apply to every property not listed. Secrets are shown as [redacted],\n"
            "# values read from a file as @FILE.\n",
            cs_app_name(app));
    for (size_t i = 0; !err && i < k->n_subs; i++) {
        cs_sub *s = k->subs[i];
        const char *group = s->group ? s->group : k->default_group;
        char who[600];
        snprintf(who, sizeof who, "subscription %s", s->name);
        cs_conf_trace t = {0};
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        err = cs__consumer_conf_layers(s, app, who, conf, &t);
        rd_kafka_conf_destroy(conf);
        if (!err) {
            fprintf(out, "\n# consumer of subscription %s (group %s)\n", s->name, group ? group : "none");
            print_trace(out, &t);
        }
        cs__conf_trace_free(&t);
    }
    if (!err) {
        cs_conf_trace t = {0};
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        err = cs__producer_conf_layers(k, app, conf, &t);
        rd_kafka_conf_destroy(conf);
        if (!err && !k->bootstrap)
            err = cs__kvlist_set(&t.values, "bootstrap.servers", "(the embedded cluster, once it runs)");
        if (!err && !k->bootstrap) err = cs__kvlist_set(&t.sources, "bootstrap.servers", "cstream");
        if (!err) {
            fprintf(out, "\n# producer (cs_publish, replies, dead letters)\n");
            print_trace(out, &t);
        }
        cs__conf_trace_free(&t);
    }
    return fflush(out) == 0 || err ? err : cs__fail(CS_ERR_STATE, "config show: cannot write the output");
}
