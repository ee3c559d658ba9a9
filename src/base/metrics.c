/* metrics.c — the metrics collector and the Prometheus text format, and the
 * lock-free duration histograms (metrics.h). What goes into /metrics is
 * ops/app_metrics.c's (cs_app_metrics) and each broker's.
 *
 * Owns: a collector's text buffer; a histogram's buckets (atomics). Locks:
 * none. Threads: a collector is one scrape's (the HTTP thread); histograms
 * are recorded from any thread and read from any. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"

const double cs__hist_bounds[CS_HIST_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                 0.1,    0.25,  0.5,    1,     2.5,  5,     10};
/* The same bounds in nanoseconds, so that an observation compares integers. */
static const uint64_t bounds_ns[CS_HIST_BUCKETS] = {
    500000ULL,    1000000ULL,   2500000ULL,   5000000ULL,    10000000ULL,   25000000ULL,   50000000ULL,
    100000000ULL, 250000000ULL, 500000000ULL, 1000000000ULL, 2500000000ULL, 5000000000ULL, 10000000000ULL};

void cs__histogram_observe(cs_histogram *h, uint64_t ns) {
    size_t i = 0;
    while (i < CS_HIST_BUCKETS && ns > bounds_ns[i]) i++;
    atomic_fetch_add_explicit(&h->count[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void cs__histogram_read(const cs_histogram *h, cs_histogram_snap *acc) {
    for (size_t i = 0; i <= CS_HIST_BUCKETS; i++)
        acc->count[i] += atomic_load_explicit(&((cs_histogram *)h)->count[i], memory_order_relaxed);
    acc->sum_ns += atomic_load_explicit(&((cs_histogram *)h)->sum_ns, memory_order_relaxed);
}

typedef struct buf {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void add(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + (size_t)n + 1) cap *= 2;
        char *grown = realloc(b->p, cap);
        if (!grown) {
            b->oom = 1;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
}

/* A label value: backslash, quote and newline escaped. */
static void label(buf *b, const char *v) {
    for (; v && *v; v++) {
        if (*v == '\\') add(b, "\\\\");
        else if (*v == '"') add(b, "\\\"");
        else if (*v == '\n') add(b, "\\n");
        else add(b, "%c", *v);
    }
}

/* ---- the collector ------------------------------------------------------------ */

typedef struct family {
    const char *name, *type, *help; /* string literals of the callers */
} family;

typedef struct sample {
    size_t family;
    char *key; /* the series: name (with its _bucket/_sum/_count suffix) and labels */
    bool is_float;
    int64_t iv;
    double fv;
} sample;

struct cs_metrics {
    family *fam;
    size_t n_fam, cap_fam;
    sample *s;
    size_t n, cap;
    bool oom;
};

static size_t family_of(cs_metrics *m, const char *name, const char *type, const char *help) {
    for (size_t i = 0; i < m->n_fam; i++)
        if (!strcmp(m->fam[i].name, name)) return i;
    if (m->n_fam == m->cap_fam) {
        size_t cap = m->cap_fam ? m->cap_fam * 2 : 32;
        family *grown = realloc(m->fam, cap * sizeof *grown);
        if (!grown) {
            m->oom = true;
            return SIZE_MAX;
        }
        m->fam = grown;
        m->cap_fam = cap;
    }
    m->fam[m->n_fam] = (family){name, type, help};
    return m->n_fam++;
}

/* The series key: name, suffix, then {labels} with `le` (may be NULL) last. */
static char *series_key(const char *name, const char *suffix, const char *const *labels, const char *le) {
    buf b = {0};
    add(&b, "%s%s", name, suffix);
    const char *sep = "{";
    for (size_t i = 0; labels && labels[i]; i += 2) {
        add(&b, "%s%s=\"", sep, labels[i]);
        label(&b, labels[i + 1]);
        add(&b, "\"");
        sep = ",";
    }
    if (le) {
        add(&b, "%sle=\"%s\"", sep, le);
        sep = ",";
    }
    if (*sep == ',') add(&b, "}");
    if (b.oom || !b.p) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* Adds a sample; one with the same key already there is added to. */
static void put(cs_metrics *m, size_t fam, char *key, bool is_float, int64_t iv, double fv) {
    if (fam == SIZE_MAX || !key) {
        free(key);
        m->oom = true;
        return;
    }
    for (size_t i = 0; i < m->n; i++)
        if (m->s[i].family == fam && !strcmp(m->s[i].key, key)) {
            m->s[i].iv += iv;
            m->s[i].fv += fv;
            free(key);
            return;
        }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 128;
        sample *grown = realloc(m->s, cap * sizeof *grown);
        if (!grown) {
            free(key);
            m->oom = true;
            return;
        }
        m->s = grown;
        m->cap = cap;
    }
    m->s[m->n++] = (sample){fam, key, is_float, iv, fv};
}

void cs__metric_int(cs_metrics *m, const char *family, const char *type, const char *help, const char *const *labels,
                    int64_t value) {
    put(m, family_of(m, family, type, help), series_key(family, "", labels, NULL), false, value, 0);
}

void cs__metric_double(cs_metrics *m, const char *family, const char *type, const char *help, const char *const *labels,
                       double value) {
    put(m, family_of(m, family, type, help), series_key(family, "", labels, NULL), true, 0, value);
}

void cs__metric_histogram(cs_metrics *m, const char *family, const char *help, const char *const *labels,
                          const cs_histogram_snap *h) {
    size_t fam = family_of(m, family, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= CS_HIST_BUCKETS; i++) {
        char le[32];
        if (i < CS_HIST_BUCKETS) snprintf(le, sizeof le, "%g", cs__hist_bounds[i]);
        else snprintf(le, sizeof le, "+Inf");
        cumulative += h->count[i];
        put(m, fam, series_key(family, "_bucket", labels, le), false, (int64_t)cumulative, 0);
    }
    put(m, fam, series_key(family, "_sum", labels, NULL), true, 0, (double)h->sum_ns / 1e9);
    /* _count is the +Inf bucket, read once: the two always agree. */
    put(m, fam, series_key(family, "_count", labels, NULL), false, (int64_t)cumulative, 0);
}

static void render(cs_metrics *m, buf *b) {
    for (size_t f = 0; f < m->n_fam; f++) {
        add(b, "# HELP %s %s\n# TYPE %s %s\n", m->fam[f].name, m->fam[f].help, m->fam[f].name, m->fam[f].type);
        for (size_t i = 0; i < m->n; i++) {
            if (m->s[i].family != f) continue;
            if (m->s[i].is_float) add(b, "%s %.9f\n", m->s[i].key, m->s[i].fv);
            else add(b, "%s %lld\n", m->s[i].key, (long long)m->s[i].iv);
        }
    }
}

static void metrics_free(cs_metrics *m) {
    for (size_t i = 0; i < m->n; i++) free(m->s[i].key);
    free(m->s);
    free(m->fam);
}

cs_metrics *cs__metrics_new(void) { return calloc(1, sizeof(cs_metrics)); }

char *cs__metrics_render_free(cs_metrics *m) {
    if (!m) return NULL;
    buf b = {0};
    if (!m->oom) render(m, &b);
    bool oom = m->oom || b.oom || !b.p;
    metrics_free(m);
    free(m);
    if (oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
