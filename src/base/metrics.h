/* metrics.h — what /metrics is built from.
 *
 * Histograms: fixed buckets, one atomic per bucket, written on the hot path
 * (a handler run, a delivery report) with no lock; each writer owns its
 * histogram (a lane, a publish kind), and the reader adds them up.
 *
 * The collector (cs_metrics): brokers add samples while cs_app_metrics
 * (ops/app_metrics.c) runs (on the HTTP thread); it groups them by family, so that every family's
 * HELP and TYPE come once with all its series, and adds up samples with the
 * same name and labels (two brokers of one app). Collecting must only read
 * atomics or take short locks: never a call that waits on the network.
 *
 * Owns: declares cs_histogram (each writer embeds its own) and cs_metrics
 * (made by cs__metrics_new, freed by cs__metrics_render_free; the caller frees
 * the returned text). Locks: none; histogram buckets are atomics. Threads: a
 * histogram is written and read on any thread; a collector is one scrape's. */
#ifndef CS_BASE_METRICS_H
#define CS_BASE_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

/* Upper bounds of the duration buckets, in seconds: 0.5 ms to 10 s. */
#define CS_HIST_BUCKETS 14
extern const double cs__hist_bounds[CS_HIST_BUCKETS];

typedef struct cs_histogram {
    _Atomic uint64_t count[CS_HIST_BUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf */
    _Atomic uint64_t sum_ns;
} cs_histogram;

/* A reading, possibly the sum of several histograms. */
typedef struct cs_histogram_snap {
    uint64_t count[CS_HIST_BUCKETS + 1];
    uint64_t sum_ns;
} cs_histogram_snap;

#include "base/clock.h" /* cs__mono_ns: durations on the monotonic clock */
void cs__histogram_observe(cs_histogram *h, uint64_t ns);
/* Adds h's reading to *acc. */
void cs__histogram_read(const cs_histogram *h, cs_histogram_snap *acc);

typedef struct cs_metrics cs_metrics;
/* `labels`: NULL-terminated name, value pairs (values escaped here). `type`:
 * "counter" or "gauge". */
void cs__metric_int(cs_metrics *m, const char *family, const char *type, const char *help, const char *const *labels,
                    int64_t value);
/* A gauge with a fractional value (seconds). */
void cs__metric_double(cs_metrics *m, const char *family, const char *type, const char *help, const char *const *labels,
                       double value);
void cs__metric_histogram(cs_metrics *m, const char *family, const char *help, const char *const *labels,
                          const cs_histogram_snap *h);
/* An empty collector (NULL: out of memory). */
cs_metrics *cs__metrics_new(void);
/* The text of everything collected, in the Prometheus format (the caller
 * frees it), and m freed; NULL if memory ran out on the way. */
char *cs__metrics_render_free(cs_metrics *m);

#endif
