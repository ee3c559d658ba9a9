/* asyncapi.c — the app's AsyncAPI 3.0 document with its Kafka bindings
 * (cs__aa_document, the broker's asyncapi op behind cs_app_asyncapi and the
 * `docs` command): servers, channels, operations and messages from what the
 * brokers describe (broker.h's describe ops), built as a tree
 * (asyncapi_tree.c) and written as JSON or YAML. The messages' payload
 * schemas come from the codecs (asyncapi_payload.c).
 * Any thread, before or while the app runs (configuration is read-only then).
 * Never touches a running consumer.
 *
 * Owns: for one call, the document's tree (freed before it returns) and the
 * text, handed to the caller (*result). Locks: none. Threads: the caller's
 * (cs_app_asyncapi's). */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/broker.h"
#include "base/error.h"
#include "kafka/asyncapi/asyncapi_payload.h"
#include "kafka/asyncapi/asyncapi_tree.h"
#include "kafka/kafka_internal.h"

#define KAFKA_BINDING_VERSION "0.5.0"

/* ---- the document ------------------------------------------------------------------- */

static void channel_id(char *outbuf, size_t size, const char *topic) { cs__aa_component_name(outbuf, size, topic); }

/* A pattern subscription's channel: the topics matching the regular
 * expression, which are not known when the document is written. AsyncAPI 3
 * reads an absent address as "unknown"; the Kafka binding names no topic; the
 * pattern itself is in the description and in x-cstream-topic-pattern. */
static aa_node *pattern_channel(aa_doc *d, aa_node *channels, const char *pattern) {
    char id[256];
    channel_id(id, sizeof id, pattern);
    aa_node *c = cs__aa_member(channels, id);
    if (c) return c;
    c = cs__aa_obj(d, channels, id);
    cs__aa_strf(d, c, "description",
                "Every topic whose name matches the regular expression %s (a pattern subscription).", pattern);
    cs__aa_str(d, c, "x-cstream-topic-pattern", pattern);
    cs__aa_obj(d, c, "messages");
    cs__aa_str(d, cs__aa_obj(d, cs__aa_obj(d, c, "bindings"), "kafka"), "bindingVersion", KAFKA_BINDING_VERSION);
    return c;
}

/* The channel of a topic, created on first use with one message `msg_id`. */
static aa_node *channel(aa_doc *d, aa_node *channels, const char *topic, int partitions) {
    char id[256];
    channel_id(id, sizeof id, topic);
    aa_node *c = cs__aa_member(channels, id);
    if (c) {
        aa_node *kb = cs__aa_member(cs__aa_member(cs__aa_member(c, "bindings"), "kafka"), "partitions");
        if (!kb && partitions > 0)
            cs__aa_num(d, cs__aa_member(cs__aa_member(c, "bindings"), "kafka"), "partitions", partitions);
        return c;
    }
    c = cs__aa_obj(d, channels, id);
    cs__aa_str(d, c, "address", topic);
    cs__aa_obj(d, c, "messages");
    aa_node *k = cs__aa_obj(d, cs__aa_obj(d, c, "bindings"), "kafka");
    cs__aa_str(d, k, "topic", topic);
    if (partitions > 0) cs__aa_num(d, k, "partitions", partitions);
    cs__aa_str(d, k, "bindingVersion", KAFKA_BINDING_VERSION);
    return c;
}

/* Adds message `msg` (a component) to the channel unless there; returns its id in the channel. */
static void channel_message(aa_doc *d, aa_node *chan, const char *msg) {
    aa_node *msgs = cs__aa_member(chan, "messages");
    if (cs__aa_member(msgs, msg)) return;
    cs__aa_strf(d, cs__aa_obj(d, msgs, msg), "$ref", "#/components/messages/%s", msg);
}

static aa_node *operation(aa_doc *d, aa_node *ops, const char *id, const char *action, const char *topic,
                          const char *msg, const char *summary) {
    char cid[256];
    channel_id(cid, sizeof cid, topic);
    aa_node *op = cs__aa_obj(d, ops, id);
    cs__aa_str(d, op, "action", action);
    cs__aa_strf(d, cs__aa_obj(d, op, "channel"), "$ref", "#/channels/%s", cid);
    if (summary) cs__aa_str(d, op, "summary", summary);
    cs__aa_strf(d, cs__aa_obj(d, cs__aa_arr(d, op, "messages"), NULL), "$ref", "#/channels/%s/messages/%s", cid, msg);
    return op;
}

/* The Kafka binding of an operation; `protocol` (receive operations of a
 * group) is the group protocol, in an x- field since the binding has none. */
static void kafka_op_bindings(aa_doc *d, aa_node *op, const char *group, const char *client_id, const char *protocol) {
    aa_node *k = cs__aa_obj(d, cs__aa_obj(d, op, "bindings"), "kafka");
    if (protocol) cs__aa_str(d, op, "x-cstream-group-protocol", protocol);
    if (group) {
        aa_node *g = cs__aa_obj(d, k, "groupId");
        cs__aa_str(d, g, "type", "string");
        cs__aa_str(d, cs__aa_arr(d, g, "enum"), NULL, group);
    }
    aa_node *c = cs__aa_obj(d, k, "clientId");
    cs__aa_str(d, c, "type", "string");
    cs__aa_str(d, cs__aa_arr(d, c, "enum"), NULL, client_id);
    cs__aa_str(d, k, "bindingVersion", KAFKA_BINDING_VERSION);
}

/* The untyped message: bytes we know nothing about (replies, publishers). */
static const char *raw_message(aa_doc *d, aa_node *messages) {
    if (!cs__aa_member(messages, "record")) {
        aa_node *m = cs__aa_obj(d, messages, "record");
        cs__aa_str(d, m, "name", "record");
        cs__aa_str(d, m, "title", "Kafka record");
        cs__aa_str(d, m, "summary", "A record whose payload type the service does not declare.");
    }
    return "record";
}

static bool topic_consumed(const cs_app *app, const char *topic) {
    for (size_t b = 0; b < cs__app_n_brokers(app); b++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(app, b, &impl);
        if (!ops->n_subs) continue;
        for (size_t i = 0; i < ops->n_subs(impl); i++) {
            cs_broker_sub_desc s;
            ops->describe_sub(impl, i, &s);
            for (size_t t = 0; t < s.n_topics; t++)
                if (!strcmp(s.topics[t], topic)) return true;
        }
    }
    return false;
}

static bool topic_sent(const cs_app *app, const char *topic) {
    for (size_t b = 0; b < cs__app_n_brokers(app); b++) {
        void *impl;
        const cs_broker_ops *ops = cs__app_broker(app, b, &impl);
        if (!ops->n_subs) continue;
        for (size_t i = 0; i < ops->n_subs(impl); i++) {
            cs_broker_sub_desc s;
            ops->describe_sub(impl, i, &s);
            if ((s.reply_topic && !strcmp(s.reply_topic, topic)) || (s.dead_letter && !strcmp(s.dead_letter, topic)))
                return true;
        }
    }
    return false;
}

static int declared_partitions(const cs_broker_ops *ops, void *impl, const char *topic) {
    for (size_t i = 0; ops->n_topics && i < ops->n_topics(impl); i++) {
        int p = 0;
        if (!strcmp(ops->topic(impl, i, &p), topic)) return p;
    }
    return 0;
}

static cs_err build(cs_app *app, aa_doc *d, aa_node *root) {
    const char *name = cs_app_name(app);
    cs__aa_str(d, root, "asyncapi", "3.0.0");
    aa_node *info = cs__aa_obj(d, root, "info");
    cs__aa_str(d, info, "title", name);
    cs__aa_str(d, info, "version", cs_app_version(app));
    cs__aa_str(d, info, "description",
               "Generated by cstream from the service's subscriptions, replies and declared topics.");
    cs__aa_str(d, root, "defaultContentType", "application/json");
    aa_node *servers = cs__aa_obj(d, root, "servers");
    aa_node *channels = cs__aa_obj(d, root, "channels");
    aa_node *ops = cs__aa_obj(d, root, "operations");
    aa_node *components = cs__aa_obj(d, root, "components");
    aa_node *messages = cs__aa_obj(d, components, "messages");
    aa_node *schemas = cs__aa_obj(d, components, "schemas");

    for (size_t b = 0; b < cs__app_n_brokers(app); b++) {
        void *impl;
        const cs_broker_ops *bops = cs__app_broker(app, b, &impl);
        if (!bops->n_subs || !bops->describe_sub) continue; /* a broker without the describe ops */
        const char *boot = bops->bootstrap ? bops->bootstrap(impl) : NULL;
        char server_id[32];
        snprintf(server_id, sizeof server_id, b ? "kafka%zu" : "kafka", b);
        aa_node *srv = cs__aa_obj(d, servers, server_id);
        char host[512];
        snprintf(host, sizeof host, "%s", boot ? boot : "localhost:9092");
        char *comma = strchr(host, ',');
        if (comma) *comma = '\0'; /* AsyncAPI's host is one host[:port] */
        cs__aa_str(d, srv, "host", host);
        cs__aa_str(d, srv, "protocol", "kafka");
        cs__aa_str(d, srv, "description",
                   boot ? "Bootstrap servers the service was configured with."
                        : "The embedded cluster (in-process); run with --brokers or CSTREAM_BROKERS for a real one.");

        for (size_t i = 0; i < bops->n_subs(impl); i++) {
            cs_broker_sub_desc s;
            bops->describe_sub(impl, i, &s);
            /* The message consumed: typed when the subscription decodes. */
            const char *msg = NULL;
            char comp[256];
            if (s.codec && s.type) {
                cs_err err = cs__aa_payload_schema(d, schemas, s.codec, s.type, comp, sizeof comp);
                if (err) return err;
                if (!cs__aa_member(messages, comp)) {
                    aa_node *m = cs__aa_obj(d, messages, comp);
                    cs__aa_str(d, m, "name", s.type->name);
                    cs__aa_str(d, m, "title", s.type->name);
                    if (s.codec->content_type) cs__aa_str(d, m, "contentType", s.codec->content_type);
                    if (cs__aa_member(schemas, comp))
                        cs__aa_strf(d, cs__aa_obj(d, m, "payload"), "$ref", "#/components/schemas/%s", comp);
                }
                msg = comp;
            } else {
                msg = raw_message(d, messages);
            }
            for (size_t t = 0; t < s.n_topics; t++) {
                aa_node *chan = s.pattern
                                    ? pattern_channel(d, channels, s.topics[t])
                                    : channel(d, channels, s.topics[t], declared_partitions(bops, impl, s.topics[t]));
                channel_message(d, chan, msg);
                char id[600], cid[256], summary[512];
                channel_id(cid, sizeof cid, s.topics[t]);
                snprintf(id, sizeof id, "receive.%s", cid);
                if (cs__aa_member(ops, id)) { /* another subscription reads the topic too: its group tells them apart */
                    char gid[256];
                    channel_id(gid, sizeof gid, s.group ? s.group : s.name);
                    snprintf(id, sizeof id, "receive.%s.%s", cid, gid);
                }
                snprintf(summary, sizeof summary, "%s handler, %s commits, %d worker%s%s", s.batch ? "Batch" : "Record",
                         s.transactional ? "transactional (exactly-once)"
                         : s.database    ? "database (exactly-once into its database)"
                         : s.tracked     ? "tracked (at-least-once)"
                                         : "auto",
                         s.workers, s.workers == 1 ? "" : "s", s.max_attempts ? ", bounded attempts" : "");
                aa_node *op = operation(d, ops, id, "receive", s.topics[t], msg, summary);
                kafka_op_bindings(d, op, s.group, name, s.group_protocol);
            }
            const char *sent[2] = {s.reply_topic, s.dead_letter};
            const char *what[2] = {"Replies of %s (published when a record is acked).",
                                   "Dead letters of %s: the original record plus cstream.dlq.* provenance headers."};
            for (int j = 0; j < 2; j++) {
                if (!sent[j]) continue;
                /* A dead letter keeps the original payload; a reply's type is not declared. */
                const char *smsg = j == 1 ? msg : raw_message(d, messages);
                aa_node *chan = channel(d, channels, sent[j], declared_partitions(bops, impl, sent[j]));
                channel_message(d, chan, smsg);
                char id[300], cid[256], summary[512];
                channel_id(cid, sizeof cid, sent[j]);
                snprintf(id, sizeof id, "send.%s", cid);
                snprintf(summary, sizeof summary, what[j], s.name);
                if (!cs__aa_member(ops, id))
                    kafka_op_bindings(d, operation(d, ops, id, "send", sent[j], smsg, summary), NULL, name, NULL);
            }
        }
        /* Declared topics nothing here consumes, replies to or dead-letters to:
         * the service publishes there (cs_publish). */
        for (size_t i = 0; bops->n_topics && i < bops->n_topics(impl); i++) {
            int partitions = 0;
            const char *topic = bops->topic(impl, i, &partitions);
            aa_node *chan = channel(d, channels, topic, partitions);
            if (topic_consumed(app, topic) || topic_sent(app, topic)) continue;
            const char *rmsg = raw_message(d, messages);
            channel_message(d, chan, rmsg);
            char id[300], cid[256];
            channel_id(cid, sizeof cid, topic);
            snprintf(id, sizeof id, "send.%s", cid);
            if (!cs__aa_member(ops, id))
                kafka_op_bindings(
                    d, operation(d, ops, id, "send", topic, rmsg, "Declared topic the service publishes to."), NULL,
                    name, NULL);
        }
    }
    return CS_OK;
}

cs_err cs__aa_document(cs_app *app, int yaml, char **result) {
    *result = NULL;
    aa_doc d = {0};
    aa_node *root = cs__aa_new(&d, AA_OBJ, NULL);
    cs_err err = root ? build(app, &d, root) : CS_ERR_NOMEM;
    char *text = !err && !d.oom ? cs__aa_write(root, yaml != 0) : NULL;
    cs__aa_free(root);
    if (err) return err == CS_ERR_NOMEM ? cs__fail(err, "cs_app_asyncapi: out of memory") : err;
    if (!text) return cs__fail(CS_ERR_NOMEM, "cs_app_asyncapi: out of memory");
    *result = text;
    return CS_OK;
}
