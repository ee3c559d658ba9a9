/* asyncapi.c — the app's AsyncAPI 3.0 document with its Kafka bindings
 * (cs__kafka_asyncapi, the broker's asyncapi op behind cs_app_asyncapi and the
 * `docs` command), built as a small tree from what the brokers describe (broker.h's describe ops) and
 * written as JSON or YAML. Payload schemas come from the codecs' schema
 * function (JSON Schema for the JSON codec), parsed back with yajl so the same
 * tree writes both formats; their $defs and "#" references are hoisted into
 * components/schemas, so references resolve inside the AsyncAPI document.
 * Any thread, before or while the app runs (configuration is read-only then).
 * Never touches a running consumer. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "../core/broker.h"
#include "../core/error.h"
#include "kafka_internal.h"

#define KAFKA_BINDING_VERSION "0.5.0"

/* ---- the document tree -------------------------------------------------------- */

typedef enum node_kind { N_OBJ, N_ARR, N_STR, N_NUM, N_TRUE, N_FALSE, N_NULL } node_kind;

typedef struct node {
    node_kind kind;
    char *key;  /* member name inside an object */
    char *text; /* N_STR: the string, N_NUM: the number as written */
    struct node *first, *last, *next;
} node;

typedef struct doc {
    bool oom;
} doc;

static node *node_new(doc *d, node_kind kind, const char *text) {
    node *n = calloc(1, sizeof *n);
    if (n && text) n->text = strdup(text);
    if (!n || (text && !n->text)) {
        d->oom = true;
        if (n) free(n);
        return NULL;
    }
    n->kind = kind;
    return n;
}

static void node_free(node *n) {
    while (n) {
        node *next = n->next;
        node_free(n->first);
        free(n->key);
        free(n->text);
        free(n);
        n = next;
    }
}

/* Appends child under parent (with `key` when parent is an object); returns child. */
static node *add(doc *d, node *parent, const char *key, node *child) {
    if (!parent || !child) {
        node_free(child);
        return NULL;
    }
    if (key && !(child->key = strdup(key))) {
        d->oom = true;
        node_free(child);
        return NULL;
    }
    if (parent->last) parent->last->next = child;
    else parent->first = child;
    parent->last = child;
    return child;
}

static node *obj(doc *d, node *parent, const char *key) { return add(d, parent, key, node_new(d, N_OBJ, NULL)); }
static node *arr(doc *d, node *parent, const char *key) { return add(d, parent, key, node_new(d, N_ARR, NULL)); }
static node *str(doc *d, node *parent, const char *key, const char *value) {
    return add(d, parent, key, node_new(d, N_STR, value ? value : ""));
}
static node *strf(doc *d, node *parent, const char *key, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static node *strf(doc *d, node *parent, const char *key, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return str(d, parent, key, buf);
}
static node *num(doc *d, node *parent, const char *key, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return add(d, parent, key, node_new(d, N_NUM, buf));
}

static node *member(node *o, const char *key) {
    for (node *c = o ? o->first : NULL; c; c = c->next)
        if (c->key && !strcmp(c->key, key)) return c;
    return NULL;
}

/* ---- writers ------------------------------------------------------------------- */

typedef struct out {
    char *p;
    size_t n, cap;
    bool oom;
} out;

static void put(out *o, const char *s, size_t len) {
    if (o->oom) return;
    if (o->n + len + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + len + 1) cap *= 2;
        char *grown = realloc(o->p, cap);
        if (!grown) {
            o->oom = true;
            return;
        }
        o->p = grown;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, len);
    o->n += len;
    o->p[o->n] = '\0';
}
static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }
static void indent(out *o, int depth) {
    for (int i = 0; i < depth; i++) put(o, "  ", 2);
}

/* A JSON string literal; also a valid YAML double-quoted scalar. */
static void quoted(out *o, const char *s) {
    put(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            put(o, esc, 2);
        } else if (*p < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            puts_(o, esc);
        } else {
            put(o, (const char *)p, 1);
        }
    }
    put(o, "\"", 1);
}

static void scalar(out *o, const node *n) {
    switch (n->kind) {
    case N_STR: quoted(o, n->text); break;
    case N_NUM: puts_(o, n->text); break;
    case N_TRUE: puts_(o, "true"); break;
    case N_FALSE: puts_(o, "false"); break;
    default: puts_(o, "null"); break;
    }
}

static void write_json(out *o, const node *n, int depth) {
    if (n->kind != N_OBJ && n->kind != N_ARR) {
        scalar(o, n);
        return;
    }
    bool is_obj = n->kind == N_OBJ;
    if (!n->first) {
        puts_(o, is_obj ? "{}" : "[]");
        return;
    }
    puts_(o, is_obj ? "{\n" : "[\n");
    for (const node *c = n->first; c; c = c->next) {
        indent(o, depth + 1);
        if (is_obj) {
            quoted(o, c->key);
            puts_(o, ": ");
        }
        write_json(o, c, depth + 1);
        puts_(o, c->next ? ",\n" : "\n");
    }
    indent(o, depth);
    puts_(o, is_obj ? "}" : "]");
}

static bool is_empty_container(const node *n) { return (n->kind == N_OBJ || n->kind == N_ARR) && !n->first; }

/* Block-style YAML: keys and strings always double-quoted, so no value is
 * ever read as another type ("on", "1.0", "null"). */
static void write_yaml(out *o, const node *n, int depth) {
    for (const node *c = n->first; c; c = c->next) {
        indent(o, depth);
        if (n->kind == N_OBJ) {
            quoted(o, c->key);
            puts_(o, ":");
        } else {
            puts_(o, "-");
        }
        if (is_empty_container(c)) {
            puts_(o, c->kind == N_OBJ ? " {}\n" : " []\n");
        } else if (c->kind == N_OBJ || c->kind == N_ARR) {
            puts_(o, "\n");
            write_yaml(o, c, depth + 1);
        } else {
            puts_(o, " ");
            scalar(o, c);
            puts_(o, "\n");
        }
    }
}

/* ---- payload schemas -------------------------------------------------------------- */

/* A component name: the characters AsyncAPI allows in component keys. */
static void component_name(char *outbuf, size_t size, const char *name) {
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
                  c == '_';
        outbuf[i] = ok ? c : '_';
    }
    outbuf[i] = '\0';
}

/* The name behind "#/$defs/<escaped>" (URI fragment and JSON pointer escapes undone). */
static void unescape_def(char *outbuf, size_t size, const char *esc) {
    size_t j = 0;
    for (size_t i = 0; esc[i] && j + 1 < size; i++) {
        char c = esc[i];
        if (c == '%' && esc[i + 1] && esc[i + 2]) {
            char hex[3] = {esc[i + 1], esc[i + 2], 0};
            c = (char)strtol(hex, NULL, 16);
            i += 2;
        }
        if (c == '~' && (esc[i + 1] == '0' || esc[i + 1] == '1')) {
            c = esc[i + 1] == '0' ? '~' : '/';
            i++;
        }
        outbuf[j++] = c;
    }
    outbuf[j] = '\0';
}

/* Copies a parsed JSON Schema into the tree, rewriting references: "#" to the
 * root's component, "#/$defs/X" to X's component; leaves out $schema and $defs
 * (the caller hoists $defs). */
static node *from_yajl(doc *d, yajl_val v, const char *root_ref) {
    if (YAJL_IS_OBJECT(v)) {
        node *n = node_new(d, N_OBJ, NULL);
        for (size_t i = 0; n && i < v->u.object.len; i++) {
            const char *k = v->u.object.keys[i];
            yajl_val m = v->u.object.values[i];
            if (!strcmp(k, "$schema") || !strcmp(k, "$defs")) continue;
            if (!strcmp(k, "$ref") && YAJL_IS_STRING(m)) {
                const char *ref = YAJL_GET_STRING(m);
                if (!strcmp(ref, "#")) {
                    str(d, n, k, root_ref);
                    continue;
                }
                if (!strncmp(ref, "#/$defs/", 8)) {
                    char name[256], comp[256];
                    unescape_def(name, sizeof name, ref + 8);
                    component_name(comp, sizeof comp, name);
                    strf(d, n, k, "#/components/schemas/%s", comp);
                    continue;
                }
            }
            add(d, n, k, from_yajl(d, m, root_ref));
        }
        return n;
    }
    if (YAJL_IS_ARRAY(v)) {
        node *n = node_new(d, N_ARR, NULL);
        for (size_t i = 0; n && i < v->u.array.len; i++) add(d, n, NULL, from_yajl(d, v->u.array.values[i], root_ref));
        return n;
    }
    if (YAJL_IS_STRING(v)) return node_new(d, N_STR, YAJL_GET_STRING(v));
    if (YAJL_IS_NUMBER(v)) return node_new(d, N_NUM, YAJL_GET_NUMBER(v));
    if (YAJL_IS_TRUE(v)) return node_new(d, N_TRUE, NULL);
    if (YAJL_IS_FALSE(v)) return node_new(d, N_FALSE, NULL);
    return node_new(d, N_NULL, NULL);
}

/* Puts the schema of `type` (and its $defs) under components/schemas unless it
 * is there; writes its component name into comp. */
static cs_err add_schema(doc *d, node *schemas, const cs_codec *codec, const cs_type *type, char *comp, size_t size) {
    component_name(comp, size, type->name);
    if (member(schemas, comp)) return CS_OK; /* same type in another subscription (or a same-named one) */
    if (!codec->schema) return CS_OK;
    char *text = NULL;
    cs_err err = codec->schema(codec, type, &text);
    if (err) return err;
    char why[256];
    yajl_val root = yajl_tree_parse(text, why, sizeof why);
    free(text);
    if (!root) return cs__fail(CS_ERR_ARG, "AsyncAPI: the schema of %s does not parse: %s", type->name, why);
    char root_ref[300];
    snprintf(root_ref, sizeof root_ref, "#/components/schemas/%s", comp);
    add(d, schemas, comp, from_yajl(d, root, root_ref));
    const char *defs_path[] = {"$defs", NULL};
    yajl_val defs = yajl_tree_get(root, defs_path, yajl_t_object);
    for (size_t i = 0; defs && i < defs->u.object.len; i++) {
        char def_comp[256];
        component_name(def_comp, sizeof def_comp, defs->u.object.keys[i]);
        if (!member(schemas, def_comp)) add(d, schemas, def_comp, from_yajl(d, defs->u.object.values[i], root_ref));
    }
    yajl_tree_free(root);
    return CS_OK;
}

/* ---- the document ------------------------------------------------------------------- */

static void channel_id(char *outbuf, size_t size, const char *topic) { component_name(outbuf, size, topic); }

/* A pattern subscription's channel: the topics matching the regular
 * expression, which are not known when the document is written. AsyncAPI 3
 * reads an absent address as "unknown"; the Kafka binding names no topic; the
 * pattern itself is in the description and in x-cstream-topic-pattern. */
static node *pattern_channel(doc *d, node *channels, const char *pattern) {
    char id[256];
    channel_id(id, sizeof id, pattern);
    node *c = member(channels, id);
    if (c) return c;
    c = obj(d, channels, id);
    strf(d, c, "description", "Every topic whose name matches the regular expression %s (a pattern subscription).",
         pattern);
    str(d, c, "x-cstream-topic-pattern", pattern);
    obj(d, c, "messages");
    str(d, obj(d, obj(d, c, "bindings"), "kafka"), "bindingVersion", KAFKA_BINDING_VERSION);
    return c;
}

/* The channel of a topic, created on first use with one message `msg_id`. */
static node *channel(doc *d, node *channels, const char *topic, int partitions) {
    char id[256];
    channel_id(id, sizeof id, topic);
    node *c = member(channels, id);
    if (c) {
        node *kb = member(member(member(c, "bindings"), "kafka"), "partitions");
        if (!kb && partitions > 0) num(d, member(member(c, "bindings"), "kafka"), "partitions", partitions);
        return c;
    }
    c = obj(d, channels, id);
    str(d, c, "address", topic);
    obj(d, c, "messages");
    node *k = obj(d, obj(d, c, "bindings"), "kafka");
    str(d, k, "topic", topic);
    if (partitions > 0) num(d, k, "partitions", partitions);
    str(d, k, "bindingVersion", KAFKA_BINDING_VERSION);
    return c;
}

/* Adds message `msg` (a component) to the channel unless there; returns its id in the channel. */
static void channel_message(doc *d, node *chan, const char *msg) {
    node *msgs = member(chan, "messages");
    if (member(msgs, msg)) return;
    strf(d, obj(d, msgs, msg), "$ref", "#/components/messages/%s", msg);
}

static node *operation(doc *d, node *ops, const char *id, const char *action, const char *topic, const char *msg,
                       const char *summary) {
    char cid[256];
    channel_id(cid, sizeof cid, topic);
    node *op = obj(d, ops, id);
    str(d, op, "action", action);
    strf(d, obj(d, op, "channel"), "$ref", "#/channels/%s", cid);
    if (summary) str(d, op, "summary", summary);
    strf(d, obj(d, arr(d, op, "messages"), NULL), "$ref", "#/channels/%s/messages/%s", cid, msg);
    return op;
}

static void kafka_op_bindings(doc *d, node *op, const char *group, const char *client_id) {
    node *k = obj(d, obj(d, op, "bindings"), "kafka");
    if (group) {
        node *g = obj(d, k, "groupId");
        str(d, g, "type", "string");
        str(d, arr(d, g, "enum"), NULL, group);
    }
    node *c = obj(d, k, "clientId");
    str(d, c, "type", "string");
    str(d, arr(d, c, "enum"), NULL, client_id);
    str(d, k, "bindingVersion", KAFKA_BINDING_VERSION);
}

/* The untyped message: bytes we know nothing about (replies, publishers). */
static const char *raw_message(doc *d, node *messages) {
    if (!member(messages, "record")) {
        node *m = obj(d, messages, "record");
        str(d, m, "name", "record");
        str(d, m, "title", "Kafka record");
        str(d, m, "summary", "A record whose payload type the service does not declare.");
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

static cs_err build(cs_app *app, doc *d, node *root) {
    const char *name = cs_app_name(app);
    str(d, root, "asyncapi", "3.0.0");
    node *info = obj(d, root, "info");
    str(d, info, "title", name);
    str(d, info, "version", cs_app_version(app));
    str(d, info, "description", "Generated by cstream from the service's subscriptions, replies and declared topics.");
    str(d, root, "defaultContentType", "application/json");
    node *servers = obj(d, root, "servers");
    node *channels = obj(d, root, "channels");
    node *ops = obj(d, root, "operations");
    node *components = obj(d, root, "components");
    node *messages = obj(d, components, "messages");
    node *schemas = obj(d, components, "schemas");

    for (size_t b = 0; b < cs__app_n_brokers(app); b++) {
        void *impl;
        const cs_broker_ops *bops = cs__app_broker(app, b, &impl);
        if (!bops->n_subs || !bops->describe_sub) continue; /* a broker without the describe ops */
        const char *boot = bops->bootstrap ? bops->bootstrap(impl) : NULL;
        char server_id[32];
        snprintf(server_id, sizeof server_id, b ? "kafka%zu" : "kafka", b);
        node *srv = obj(d, servers, server_id);
        char host[512];
        snprintf(host, sizeof host, "%s", boot ? boot : "localhost:9092");
        char *comma = strchr(host, ',');
        if (comma) *comma = '\0'; /* AsyncAPI's host is one host[:port] */
        str(d, srv, "host", host);
        str(d, srv, "protocol", "kafka");
        str(d, srv, "description",
            boot ? "Bootstrap servers the service was configured with."
                 : "The embedded cluster (in-process); run with --brokers or CSTREAM_BROKERS for a real one.");

        for (size_t i = 0; i < bops->n_subs(impl); i++) {
            cs_broker_sub_desc s;
            bops->describe_sub(impl, i, &s);
            /* The message consumed: typed when the subscription decodes. */
            const char *msg = NULL;
            char comp[256];
            if (s.codec && s.type) {
                cs_err err = add_schema(d, schemas, s.codec, s.type, comp, sizeof comp);
                if (err) return err;
                if (!member(messages, comp)) {
                    node *m = obj(d, messages, comp);
                    str(d, m, "name", s.type->name);
                    str(d, m, "title", s.type->name);
                    if (s.codec->content_type) str(d, m, "contentType", s.codec->content_type);
                    if (member(schemas, comp)) strf(d, obj(d, m, "payload"), "$ref", "#/components/schemas/%s", comp);
                }
                msg = comp;
            } else {
                msg = raw_message(d, messages);
            }
            for (size_t t = 0; t < s.n_topics; t++) {
                node *chan = s.pattern
                                 ? pattern_channel(d, channels, s.topics[t])
                                 : channel(d, channels, s.topics[t], declared_partitions(bops, impl, s.topics[t]));
                channel_message(d, chan, msg);
                char id[300], cid[256], summary[512];
                channel_id(cid, sizeof cid, s.topics[t]);
                snprintf(id, sizeof id, "receive.%s", cid);
                snprintf(summary, sizeof summary, "%s handler, %s commits, %d worker%s%s", s.batch ? "Batch" : "Record",
                         s.transactional ? "transactional (exactly-once)"
                         : s.tracked     ? "tracked (at-least-once)"
                                         : "auto",
                         s.workers, s.workers == 1 ? "" : "s", s.max_attempts ? ", bounded attempts" : "");
                node *op = operation(d, ops, id, "receive", s.topics[t], msg, summary);
                kafka_op_bindings(d, op, s.group, name);
            }
            const char *sent[2] = {s.reply_topic, s.dead_letter};
            const char *what[2] = {"Replies of %s (published when a record is acked).",
                                   "Dead letters of %s: the original record plus cstream.dlq.* provenance headers."};
            for (int j = 0; j < 2; j++) {
                if (!sent[j]) continue;
                /* A dead letter keeps the original payload; a reply's type is not declared. */
                const char *smsg = j == 1 ? msg : raw_message(d, messages);
                node *chan = channel(d, channels, sent[j], declared_partitions(bops, impl, sent[j]));
                channel_message(d, chan, smsg);
                char id[300], cid[256], summary[512];
                channel_id(cid, sizeof cid, sent[j]);
                snprintf(id, sizeof id, "send.%s", cid);
                snprintf(summary, sizeof summary, what[j], s.name);
                if (!member(ops, id))
                    kafka_op_bindings(d, operation(d, ops, id, "send", sent[j], smsg, summary), NULL, name);
            }
        }
        /* Declared topics nothing here consumes, replies to or dead-letters to:
         * the service publishes there (cs_publish). */
        for (size_t i = 0; bops->n_topics && i < bops->n_topics(impl); i++) {
            int partitions = 0;
            const char *topic = bops->topic(impl, i, &partitions);
            node *chan = channel(d, channels, topic, partitions);
            if (topic_consumed(app, topic) || topic_sent(app, topic)) continue;
            const char *rmsg = raw_message(d, messages);
            channel_message(d, chan, rmsg);
            char id[300], cid[256];
            channel_id(cid, sizeof cid, topic);
            snprintf(id, sizeof id, "send.%s", cid);
            if (!member(ops, id))
                kafka_op_bindings(
                    d, operation(d, ops, id, "send", topic, rmsg, "Declared topic the service publishes to."), NULL,
                    name);
        }
    }
    return CS_OK;
}

cs_err cs__kafka_asyncapi(cs_app *app, int yaml, char **result) {
    *result = NULL;
    doc d = {0};
    node *root = node_new(&d, N_OBJ, NULL);
    cs_err err = root ? build(app, &d, root) : CS_ERR_NOMEM;
    out o = {0};
    if (!err && !d.oom) {
        if (yaml) write_yaml(&o, root, 0);
        else {
            write_json(&o, root, 0);
            puts_(&o, "\n");
        }
    }
    node_free(root);
    if (err) {
        free(o.p);
        return err;
    }
    if (d.oom || o.oom || !o.p) {
        free(o.p);
        return cs__fail(CS_ERR_NOMEM, "cs_app_asyncapi: out of memory");
    }
    *result = o.p;
    return CS_OK;
}
