/* config_sources.c — the operator's configuration layers, for deploying a
 * built service without recompiling it (docs/guide.md, "Configuration from a
 * file, the environment and the command line"). Above the code's
 * cs_*_config calls, in this order: a properties file (cs_app_main's
 * --config, else CSTREAM_CONFIG; Java client.properties syntax), the
 * CSTREAM_KAFKA_* variables, cs_app_main's -X flags. Each takes the role
 * prefixes consumer., producer. and subscription.<name>. (variables:
 * CONSUMER_, PRODUCER_, SUBSCRIPTION_<NAME>_), and a value "@/path" (a
 * variable: a _FILE suffix) is read from that file.
 *
 * Owns: the broker's cs_conf_ext (the command line's copies, the entries).
 * Locks: none.
 * Threads: loaded, bound and checked on the configuring or lifecycle thread
 * before anything connects (kafka_start, the commands of cs_app_main,
 * cs_kafka_committed before start); read-only afterwards, any thread.
 * Must never: quote a secret key's value or a value read from a file in a
 * message or a log line; keep half a load (a failed load keeps nothing);
 * exit or abort on bad input. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/log.h"
#include "kafka/kafka_internal.h"

extern char **environ;

#define ENV_PREFIX "CSTREAM_KAFKA_"
#define ENV_SUB_PREFIX "SUBSCRIPTION_"
/* The largest properties or secret file read: far above any client.properties,
 * PEM chain or JAAS line, and a bound on what a wrong path (a log, a device)
 * can make the service read. */
#define SOURCE_FILE_MAX (1024 * 1024)

static void entry_free(cs_conf_entry *e) {
    free(e->source);
    free(e->key);
    free(e->value);
    free(e->secret_path);
    free(e->target);
}

static void entries_clear(cs_conf_ext *x) {
    for (size_t i = 0; i < x->n; i++) entry_free(&x->e[i]);
    free(x->e);
    x->e = NULL;
    x->n = 0;
    x->loaded = x->bound = false;
}

void cs__ext_free(cs_conf_ext *x) {
    entries_clear(x);
    free(x->file);
    for (size_t i = 0; i < x->n_flags; i++) free(x->flags[i]);
    free(x->flags);
    memset(x, 0, sizeof *x);
}

cs_err cs__ext_set_cli(cs_conf_ext *x, const char *file, char *const *flags, size_t n_flags) {
    char *f = file ? strdup(file) : NULL;
    char **fl = calloc(n_flags ? n_flags : 1, sizeof *fl);
    bool oom = (file && !f) || !fl;
    for (size_t i = 0; !oom && i < n_flags; i++) oom = !(fl[i] = strdup(flags[i]));
    if (oom) {
        free(f);
        for (size_t i = 0; fl && i < n_flags; i++) free(fl[i]);
        free(fl);
        return cs__fail(CS_ERR_NOMEM, "--config/-X: out of memory");
    }
    cs__ext_free(x);
    x->file = f;
    x->flags = fl;
    x->n_flags = n_flags;
    return CS_OK;
}

/* ---- files ------------------------------------------------------------------- */

/* The whole file, NUL-terminated, in *out (the caller frees); `what` names it. */
static cs_err slurp(const char *who, const char *what, const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return cs__fail(CS_ERR_CONFIG, "%s: cannot read %s %s: %s", who, what, path, strerror(errno));
    char *buf = malloc(SOURCE_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, SOURCE_FILE_MAX + 1, f) : 0;
    bool failed = buf && ferror(f);
    int e = errno;
    fclose(f);
    if (!buf) return cs__fail(CS_ERR_NOMEM, "%s: out of memory reading %s %s", who, what, path);
    if (failed || n > SOURCE_FILE_MAX) {
        free(buf);
        if (failed) return cs__fail(CS_ERR_CONFIG, "%s: cannot read %s %s: %s", who, what, path, strerror(e));
        return cs__fail(CS_ERR_CONFIG, "%s: %s %s is larger than %d bytes", who, what, path, SOURCE_FILE_MAX);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return CS_OK;
}

/* A file others can read exposes what it holds: said, not refused (a
 * Kubernetes secret volume's files are 0644 unless defaultMode says otherwise). */
static void warn_if_readable(const char *path, const char *what, const char *who) {
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
        CS_LOG_WARN("%s is readable by group or others path=%s mode=%04o source=\"%s\" (chmod 600 it)", what, path,
                    (unsigned)(st.st_mode & 07777), who);
}

/* The value of `key` from the file at path, its trailing newlines stripped. */
static cs_err read_secret(const char *who, const char *key, const char *path, char **out) {
    if (!*path) return cs__fail(CS_ERR_CONFIG, "%s: property %s: the file name after @ is empty", who, key);
    size_t len;
    char *v;
    cs_err err = slurp(who, "value file", path, &v, &len);
    if (err) return err;
    if (strlen(v) != len) {
        free(v);
        return cs__fail(CS_ERR_CONFIG, "%s: property %s: value file %s holds a NUL byte", who, key, path);
    }
    while (len > 0 && (v[len - 1] == '\n' || v[len - 1] == '\r')) v[--len] = '\0';
    if (cs__conf_secret_key(key)) warn_if_readable(path, "secret file", who);
    *out = v;
    return CS_OK;
}

/* ---- entries ------------------------------------------------------------------- */

/* "consumer.", "producer.", "subscription." or none: the role, and the rest. */
static cs_conf_role split_role(const char *name, const char **rest) {
    static const struct {
        const char *prefix;
        cs_conf_role role;
    } roles[] = {{"consumer.", CS_CONF_CONSUMER}, {"producer.", CS_CONF_PRODUCER}, {"subscription.", CS_CONF_SUB}};
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        size_t n = strlen(roles[i].prefix);
        if (!strncmp(name, roles[i].prefix, n)) {
            *rest = name + n;
            return roles[i].role;
        }
    }
    *rest = name;
    return CS_CONF_ALL;
}

/* Adds one entry. `name` carries its role prefix (file, flag form: "consumer.
 * fetch.max.bytes"; env_form: the variable's name after the prefix, already
 * turned into a property name unless it is a subscription's). raw is the
 * value as written: "@path" (not for a variable) reads the file, "@@x" is
 * the literal "@x"; secret_path (a _FILE variable) reads that file instead. */
static cs_err add_entry(cs_conf_ext *x, cs_conf_rank rank, const char *source, cs_conf_role role, const char *rest,
                        bool env_form, const char *raw, const char *secret_path) {
    if (!*rest) return cs__fail(CS_ERR_CONFIG, "%s: the property name is empty", source);
    cs_conf_entry e = {.rank = rank, .role = role, .env_form = env_form};
    cs_err err = CS_OK;
    e.source = strdup(source);
    if (role == CS_CONF_SUB) e.target = strdup(rest);
    else e.key = strdup(rest);
    if (!e.source || (role == CS_CONF_SUB ? !e.target : !e.key))
        err = cs__fail(CS_ERR_NOMEM, "%s: out of memory", source);
    /* For a subscription's entry the key is known only once bound: the
     * target names the file in messages meanwhile. */
    const char *key = e.key ? e.key : rest;
    if (!err && !secret_path && !env_form && raw[0] == '@' && raw[1] != '@') secret_path = raw + 1;
    if (!err && secret_path) {
        e.secret_path = strdup(secret_path);
        if (!e.secret_path) err = cs__fail(CS_ERR_NOMEM, "%s: out of memory", source);
        if (!err) err = read_secret(source, key, secret_path, &e.value);
    } else if (!err) {
        e.value = strdup(!env_form && raw[0] == '@' ? raw + 1 : raw); /* "@@x" -> "@x" */
        if (!e.value) err = cs__fail(CS_ERR_NOMEM, "%s: out of memory", source);
    }
    cs_conf_entry *grown = err ? NULL : realloc(x->e, (x->n + 1) * sizeof *grown);
    if (!err && !grown) err = cs__fail(CS_ERR_NOMEM, "%s: out of memory", source);
    if (err) {
        entry_free(&e);
        return err;
    }
    x->e = grown;
    x->e[x->n++] = e;
    return CS_OK;
}

/* ---- the properties file (Java's client.properties) ---------------------------- */

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\f'; }

/* One logical line (continuations joined, escapes undone) from *p, into out
 * (at least as long as the rest of the text); *lines counts the physical ones. */
static void logical_line(const char **p, char *out, int *lines) {
    const char *s = *p;
    size_t n = 0;
    while (is_space(*s)) s++;
    (*lines)++;
    while (*s && *s != '\n' && *s != '\r') {
        if (*s != '\\') {
            out[n++] = *s++;
            continue;
        }
        s++;
        if (*s == '\n' || *s == '\r' || !*s) { /* a continuation: the next line's indent is dropped */
            if (*s == '\r' && s[1] == '\n') s++;
            if (*s) s++;
            (*lines)++;
            while (is_space(*s)) s++;
            continue;
        }
        char c = *s++;
        out[n++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'f' ? '\f' : c;
    }
    if (*s == '\r' && s[1] == '\n') s++;
    if (*s) s++;
    while (n > 0 && is_space(out[n - 1])) n--;
    out[n] = '\0';
    *p = s;
}

static cs_err load_file(cs_conf_ext *x, const char *path, const char *who) {
    char *text;
    size_t len;
    cs_err err = slurp(who, "config file", path, &text, &len);
    if (err) return err;
    char *line = malloc(len + 1);
    if (!line) {
        free(text);
        return cs__fail(CS_ERR_NOMEM, "config file %s: out of memory", path);
    }
    bool inline_secret = false;
    int lines = 0;
    for (const char *p = text; !err && *p;) {
        int at = lines + 1;
        logical_line(&p, line, &lines);
        char source[1024];
        snprintf(source, sizeof source, "config file %s:%d", path, at);
        if (!line[0] || line[0] == '#' || line[0] == '!') continue;
        /* Java's separators: the first '=' or ':' (no property name has either). */
        size_t k = strcspn(line, "=:");
        if (!line[k]) {
            /* The line is not quoted: it may be half a secret. */
            err = cs__fail(CS_ERR_CONFIG, "%s: expected key=value (a comment starts with # or !)", source);
            break;
        }
        char *value = line + k + 1;
        while (k > 0 && is_space(line[k - 1])) k--;
        line[k] = '\0';
        while (is_space(*value)) value++;
        const char *rest;
        cs_conf_role role = split_role(line, &rest);
        if (!line[0]) err = cs__fail(CS_ERR_CONFIG, "%s: the property name is empty", source);
        if (!err) err = add_entry(x, CS_CONF_FILE, source, role, rest, false, value, NULL);
        if (!err && !x->e[x->n - 1].secret_path) inline_secret = inline_secret || cs__conf_secret_key(rest);
    }
    if (!err && inline_secret) warn_if_readable(path, "config file with a secret in it", path);
    free(line);
    free(text);
    return err;
}

/* ---- the environment ----------------------------------------------------------- */

/* A variable's name (after CSTREAM_KAFKA_ and any role) as a property name:
 * lower case, '_' -> '.', "__" -> '_' (log_level: LOG__LEVEL). */
static void env_to_key(const char *name, char *out, size_t cap) {
    size_t n = 0;
    for (const char *c = name; *c && n + 1 < cap; c++) {
        if (c[0] == '_' && c[1] == '_') out[n++] = '_', c++;
        else if (*c == '_') out[n++] = '.';
        else out[n++] = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    }
    out[n] = '\0';
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static cs_err load_env(cs_conf_ext *x) {
    size_t n = 0, count = 0;
    for (char **e = environ; e && *e; e++) count++;
    char **vars = calloc(count ? count : 1, sizeof *vars);
    if (!vars) return cs__fail(CS_ERR_NOMEM, "environment: out of memory");
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, ENV_PREFIX, strlen(ENV_PREFIX))) vars[n++] = *e;
    qsort(vars, n, sizeof *vars, by_name); /* a stable order: the environment's is not */
    cs_err err = CS_OK;
    for (size_t i = 0; !err && i < n; i++) {
        const char *eq = strchr(vars[i], '=');
        if (!eq || !eq[1]) continue; /* set but empty: unset, as CSTREAM_BROKERS */
        char var[512], name[512], key[512], source[600];
        snprintf(var, sizeof var, "%.*s", (int)(eq - vars[i]), vars[i]);
        snprintf(source, sizeof source, "environment %s", var);
        snprintf(name, sizeof name, "%s", var + strlen(ENV_PREFIX));
        size_t len = strlen(name);
        bool from_file = len > 5 && !strcmp(name + len - 5, "_FILE");
        if (from_file) name[len - 5] = '\0';
        cs_conf_role role = CS_CONF_ALL;
        const char *rest = name;
        if (!strncmp(name, "CONSUMER_", 9)) role = CS_CONF_CONSUMER, rest = name + 9;
        else if (!strncmp(name, "PRODUCER_", 9)) role = CS_CONF_PRODUCER, rest = name + 9;
        else if (!strncmp(name, ENV_SUB_PREFIX, strlen(ENV_SUB_PREFIX)))
            role = CS_CONF_SUB, rest = name + strlen(ENV_SUB_PREFIX);
        if (role != CS_CONF_SUB) {
            env_to_key(rest, key, sizeof key);
            rest = key;
        }
        err = add_entry(x, CS_CONF_ENV, source, role, rest, true, eq + 1, from_file ? eq + 1 : NULL);
    }
    free(vars);
    return err;
}

/* ---- the flags ----------------------------------------------------------------- */

static cs_err load_flags(cs_conf_ext *x) {
    cs_err err = CS_OK;
    for (size_t i = 0; !err && i < x->n_flags; i++) {
        const char *f = x->flags[i], *eq = strchr(f, '=');
        char name[512], source[600];
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - f) : (int)strlen(f), f);
        snprintf(source, sizeof source, "-X %s", name);
        if (!eq) return cs__fail(CS_ERR_CONFIG, "%s: expected -X key=value", source);
        const char *rest;
        cs_conf_role role = split_role(name, &rest);
        err = add_entry(x, CS_CONF_FLAG, source, role, rest, false, eq + 1, NULL);
        /* A literal secret on the command line is in every `ps` listing. */
        if (!err && !x->e[x->n - 1].secret_path && cs__conf_secret_key(rest))
            CS_LOG_WARN("a secret on the command line is visible to every user of the machine (ps) source=\"%s\" "
                        "(pass -X %s=@/path/to/file, or a CSTREAM_KAFKA_..._FILE variable)",
                        source, name);
    }
    return err;
}

/* ---- checks -------------------------------------------------------------------- */

/* The value as messages and `config show` may show it. */
static const char *shown_value(const cs_conf_entry *e, char *buf, size_t cap) {
    if (!e->secret_path) return e->value;
    snprintf(buf, cap, "@%s", e->secret_path);
    return buf;
}

/* Owned keys refused, librdkafka asked; two variables for the same property
 * of the same client (X and X_FILE, or a subscription's two spellings) refused. */
static cs_err check_entry(const cs_conf_ext *x, size_t i) {
    const cs_conf_entry *e = &x->e[i];
    char shown[1100];
    cs_err err = cs__conf_check_shown(e->source, e->key, e->value, shown_value(e, shown, sizeof shown));
    for (size_t j = 0; !err && e->rank == CS_CONF_ENV && j < i; j++) {
        const cs_conf_entry *o = &x->e[j];
        if (o->rank == CS_CONF_ENV && o->role == e->role && o->sub == e->sub && o->key && !strcmp(o->key, e->key))
            err = cs__fail(CS_ERR_CONFIG, "%s and %s both set %s: unset one", o->source, e->source, e->key);
    }
    return err;
}

cs_err cs__ext_load(cs_kafka *k) {
    cs_conf_ext *x = &k->ext;
    if (x->loaded) return CS_OK;
    entries_clear(x);
    const char *env_file = getenv("CSTREAM_CONFIG");
    const char *file = x->file ? x->file : env_file && *env_file ? env_file : NULL;
    cs_err err = file ? load_file(x, file, x->file ? "--config" : "CSTREAM_CONFIG") : CS_OK;
    if (!err) err = load_env(x);
    if (!err) err = load_flags(x);
    for (size_t i = 0; !err && i < x->n; i++)
        if (x->e[i].role != CS_CONF_SUB) err = check_entry(x, i);
    if (err) {
        entries_clear(x);
        return err;
    }
    x->loaded = true;
    return CS_OK;
}

/* A subscription's name as a variable spells it: upper case, every character
 * but letters and digits as '_'. */
static void env_form(const char *name, char *out, size_t cap) {
    size_t n = 0;
    for (const char *c = name; *c && n + 1 < cap; c++) {
        bool alnum = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
        out[n++] = !alnum ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    }
    out[n] = '\0';
}

/* The subscription a target names: the one with the longest name that the
 * target starts with, followed by a separator ('.', or '_' for a variable)
 * and a key; *key_at the key's start. Ambiguous (two subscriptions spelt the
 * same way as variables): CS_ERR_CONFIG. */
static cs_err find_sub(const cs_kafka *k, const cs_conf_entry *e, const cs_sub **out, const char **key_at) {
    size_t best = 0;
    *out = NULL;
    const cs_sub *tie = NULL;
    for (size_t i = 0; i < k->n_subs; i++) {
        char form[1024];
        if (e->env_form) env_form(k->subs[i]->name, form, sizeof form);
        else snprintf(form, sizeof form, "%s", k->subs[i]->name);
        size_t n = strlen(form);
        char sep = e->env_form ? '_' : '.';
        if (n < best || strncmp(e->target, form, n) || e->target[n] != sep || !e->target[n + 1]) continue;
        if (n == best && *out) { /* a variable cannot tell "a.b" from "a-b" */
            tie = k->subs[i];
            continue;
        }
        best = n;
        tie = NULL;
        *out = k->subs[i];
        *key_at = e->target + n + 1;
    }
    if (tie)
        return cs__fail(CS_ERR_CONFIG,
                        "%s: subscriptions %s and %s have the same name as a variable; set this property in the "
                        "config file or with -X (subscription.<name>.<key>)",
                        e->source, (*out)->name, tie->name);
    if (*out) return CS_OK;
    char names[1024] = "";
    for (size_t i = 0; i < k->n_subs; i++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", k->subs[i]->name);
    }
    return cs__fail(CS_ERR_CONFIG, "%s: names no subscription of this service (%s%s) followed by a property", e->source,
                    k->n_subs ? "its subscriptions: " : "it has none", names);
}

cs_err cs__ext_bind(cs_kafka *k) {
    cs_conf_ext *x = &k->ext;
    cs_err err = cs__ext_load(k);
    if (err || x->bound) return err;
    for (size_t i = 0; !err && i < x->n; i++) {
        cs_conf_entry *e = &x->e[i];
        if (e->role != CS_CONF_SUB) continue;
        const char *key_at = NULL;
        err = find_sub(k, e, &e->sub, &key_at);
        char key[512];
        if (!err && e->env_form) env_to_key(key_at, key, sizeof key);
        else if (!err) snprintf(key, sizeof key, "%s", key_at);
        free(e->key);
        e->key = err ? NULL : strdup(key);
        if (!err && !e->key) err = cs__fail(CS_ERR_NOMEM, "%s: out of memory", e->source);
        if (!err) err = check_entry(x, i);
    }
    if (err) {
        entries_clear(x); /* a later load starts again, with what it then finds */
        return err;
    }
    x->bound = true;
    return CS_OK;
}

cs_err cs__ext_apply(rd_kafka_conf_t *conf, const cs_kafka *k, cs_conf_role role, const cs_sub *s, cs_conf_trace *t) {
    const cs_conf_ext *x = &k->ext;
    const cs_conf_role passes[] = {CS_CONF_ALL, role, CS_CONF_SUB};
    for (int rank = CS_CONF_FILE; rank <= CS_CONF_FLAG; rank++) {
        for (size_t p = 0; p < 3; p++) {
            if (p == 1 && role == CS_CONF_ALL) continue;
            for (size_t i = 0; i < x->n; i++) {
                const cs_conf_entry *e = &x->e[i];
                if ((int)e->rank != rank || e->role != passes[p] || !e->key) continue;
                if (e->role == CS_CONF_SUB && (!s || e->sub != s)) continue;
                char shown[1100];
                cs_err err =
                    cs__conf_put(conf, t, e->source, e->source, e->key, e->value, shown_value(e, shown, sizeof shown));
                if (err) return err;
            }
        }
    }
    return CS_OK;
}
