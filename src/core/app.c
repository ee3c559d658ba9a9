/* app.c — the application lifecycle: hooks, brokers, stop requests, signals.
 *
 * Owns: the cs_app: name, version, hooks, the broker slots (each impl
 * destroyed through its ops in cs_app_destroy) and the fatal reason.
 * Locks: cs_app.lock (a leaf, lock_order.h) around stop_requested, has_fatal
 * and fatal; state is an atomic. Threads: the lifecycle thread; any thread
 * may call cs__app_fatal and cs_app_request_stop, or read state. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/broker.h"
#include "base/error.h"
#include "base/log.h"

/* cs_app_run looks at the stop request at least this often while it waits
 * for a signal (a stop requested from another thread ends the wait no later). */
#define STOP_CHECK_NS (100 * 1000000L)
/* cs_app_new's version when the caller gives none. */
#define DEFAULT_VERSION "0.0.0"
/* The bytes kept of a fatal reason (cs__app_fatal; a longer one is cut). */
#define FATAL_REASON_MAX 1024

typedef struct broker_slot {
    const cs_broker_ops *ops;
    void *impl;
    bool started;
} broker_slot;

typedef enum app_state { APP_NEW, APP_RUNNING, APP_STOPPED } app_state;

struct cs_app {
    char *name, *version;
    cs_startup_fn startup;
    void *startup_user;
    cs_shutdown_fn shutdown;
    void *shutdown_user;
    bool startup_done; /* the shutdown hook runs only after a successful start-up hook */
    broker_slot *brokers;
    size_t n_brokers;
    _Atomic app_state state; /* written by the lifecycle thread, read by cs_app_metrics on any thread */

    pthread_mutex_t lock; /* stop request, fatal reason: a leaf (lock_order.h) */
    pthread_cond_t stop_cv;
    bool stop_requested;
    bool has_fatal;
    char fatal[FATAL_REASON_MAX]; /* first fatal reason: kept in place, a fatal error never needs memory */
    char hook_error[512];
};

cs_app *cs_app_new(const char *name, const char *version) {
    if (!name || !*name) {
        cs__fail(CS_ERR_ARG, "cs_app_new: the app needs a name");
        return NULL;
    }
    cs_app *app = calloc(1, sizeof *app);
    if (app) {
        app->name = strdup(name);
        app->version = strdup(version ? version : DEFAULT_VERSION);
    }
    if (!app || !app->name || !app->version) {
        if (app) {
            free(app->name);
            free(app->version);
            free(app);
        }
        cs__fail(CS_ERR_NOMEM, "cs_app_new(%s): out of memory", name);
        return NULL;
    }
    pthread_mutex_init(&app->lock, NULL);
    pthread_cond_init(&app->stop_cv, NULL);
    return app;
}

const char *cs_app_name(const cs_app *app) { return app->name; }
const char *cs_app_version(const cs_app *app) { return app->version; }
int cs__app_started(const cs_app *app) { return app->state != APP_NEW; }

static cs_err check_configurable(const cs_app *app, const char *what) {
    if (!app) return cs__fail(CS_ERR_ARG, "%s: app is NULL", what);
    if (app->state != APP_NEW) return cs__fail(CS_ERR_STATE, "%s: app %s has already started", what, app->name);
    return CS_OK;
}

cs_err cs_app_on_startup(cs_app *app, cs_startup_fn fn, void *user) {
    cs_err err = check_configurable(app, "cs_app_on_startup");
    if (err) return err;
    app->startup = fn;
    app->startup_user = user;
    return CS_OK;
}

cs_err cs_app_on_shutdown(cs_app *app, cs_shutdown_fn fn, void *user) {
    cs_err err = check_configurable(app, "cs_app_on_shutdown");
    if (err) return err;
    app->shutdown = fn;
    app->shutdown_user = user;
    return CS_OK;
}

cs_err cs__app_add_broker(cs_app *app, const cs_broker_ops *ops, void *impl) {
    cs_err err = check_configurable(app, "cs_app_add_kafka");
    if (err) return err;
    broker_slot *grown = realloc(app->brokers, (app->n_brokers + 1) * sizeof *grown);
    if (!grown) return cs__fail(CS_ERR_NOMEM, "cs_app_add_kafka: out of memory");
    app->brokers = grown;
    app->brokers[app->n_brokers++] = (broker_slot){ops, impl, false};
    return CS_OK;
}

cs_err cs_app_fail(cs_app *app, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(app->hook_error, sizeof app->hook_error, fmt, ap);
    va_end(ap);
    return CS_ERR_HOOK;
}

void cs__app_fatal(cs_app *app, const char *fmt, ...) {
    char reason[FATAL_REASON_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&app->lock);
    bool first = !app->has_fatal;
    if (first) {
        app->has_fatal = true;
        memcpy(app->fatal, reason, sizeof reason);
    }
    app->stop_requested = true;
    pthread_cond_broadcast(&app->stop_cv);
    pthread_mutex_unlock(&app->lock);
    if (first) CS_LOG_ERR("fatal error, stopping app=%s reason=\"%s\"", app->name, reason);
}

void cs_app_request_stop(cs_app *app) {
    pthread_mutex_lock(&app->lock);
    app->stop_requested = true;
    pthread_cond_broadcast(&app->stop_cv);
    pthread_mutex_unlock(&app->lock);
}

static void stop_brokers(cs_app *app) {
    for (size_t i = app->n_brokers; i-- > 0;) {
        broker_slot *b = &app->brokers[i];
        if (!b->started) continue;
        if (b->ops->stop(b->impl) != CS_OK)
            CS_LOG_WARN("broker stop reported a problem app=%s broker=%s reason=\"%s\"", app->name, b->ops->kind,
                        cs_errmsg());
        b->started = false;
    }
}

static void run_shutdown_hook(cs_app *app) {
    if (app->startup_done && app->shutdown) app->shutdown(app, app->shutdown_user);
    app->startup_done = false;
}

/* Bytes of a codec's "not ready" reason kept for the log line. */
#define CODEC_WHY_MAX 1024

/* Start-up check of the subscriptions' codecs (cs_codec.ready): one that
 * depends on something unreachable (a schema registry) does not stop the
 * app; it says so, and the records that need it wait (worker.c). */
static void warn_unready_codecs(cs_app *app) {
    for (size_t k = 0; k < app->n_brokers; k++) {
        broker_slot *b = &app->brokers[k];
        if (!b->ops->n_subs || !b->ops->describe_sub) continue;
        for (size_t i = 0; i < b->ops->n_subs(b->impl); i++) {
            cs_broker_sub_desc d;
            b->ops->describe_sub(b->impl, i, &d);
            char why[CODEC_WHY_MAX] = "";
            if (d.codec && d.codec->ready && !d.codec->ready(d.codec, why, sizeof why))
                CS_LOG_WARN("codec not ready at start, records that need it wait until it is app=%s subscription=%s "
                            "codec=%s reason=\"%s\"",
                            app->name, d.name, d.codec->name, why);
            if (d.key_codec && d.key_codec->ready && !d.key_codec->ready(d.key_codec, why, sizeof why))
                CS_LOG_WARN("key codec not ready at start, records that need it wait until it is app=%s "
                            "subscription=%s codec=%s reason=\"%s\"",
                            app->name, d.name, d.key_codec->name, why);
        }
    }
}

cs_err cs_app_start(cs_app *app) {
    cs_err err = check_configurable(app, "cs_app_start");
    if (err) return err;
    app->state = APP_RUNNING;
    CS_LOG_INFO("starting app=%s version=%s", app->name, app->version);
    if (app->startup) {
        app->hook_error[0] = '\0';
        err = app->startup(app, app->startup_user);
        if (err != CS_OK) {
            app->state = APP_STOPPED;
            return cs__fail(CS_ERR_HOOK, "app %s: start-up hook failed: %s", app->name,
                            app->hook_error[0] ? app->hook_error : cs_err_name(err));
        }
    }
    app->startup_done = true;
    for (size_t i = 0; i < app->n_brokers; i++) {
        broker_slot *b = &app->brokers[i];
        err = b->ops->start(b->impl, app);
        if (err != CS_OK) {
            char reason[2048];
            snprintf(reason, sizeof reason, "%s", cs_errmsg());
            stop_brokers(app);
            run_shutdown_hook(app);
            app->state = APP_STOPPED;
            return cs__fail(err, "%s", reason);
        }
        b->started = true;
    }
    warn_unready_codecs(app);
    return CS_OK;
}

static cs_err fatal_status(cs_app *app) {
    pthread_mutex_lock(&app->lock);
    cs_err err =
        app->has_fatal ? cs__fail(CS_ERR_FATAL, "app %s stopped by a fatal error: %s", app->name, app->fatal) : CS_OK;
    pthread_mutex_unlock(&app->lock);
    return err;
}

cs_err cs_app_wait(cs_app *app) {
    pthread_mutex_lock(&app->lock);
    while (!app->stop_requested) pthread_cond_wait(&app->stop_cv, &app->lock);
    pthread_mutex_unlock(&app->lock);
    return fatal_status(app);
}

cs_err cs_app_stop(cs_app *app) {
    if (!app) return cs__fail(CS_ERR_ARG, "cs_app_stop: app is NULL");
    if (app->state == APP_RUNNING) {
        CS_LOG_INFO("stopping app=%s", app->name);
        cs_app_request_stop(app);
        stop_brokers(app);
        run_shutdown_hook(app);
        app->state = APP_STOPPED;
        CS_LOG_INFO("stopped app=%s", app->name);
    }
    return fatal_status(app);
}

void cs__app_crash(cs_app *app) {
    for (size_t i = app->n_brokers; i-- > 0;) {
        broker_slot *b = &app->brokers[i];
        if (b->started) b->ops->crash(b->impl);
        b->started = false;
    }
    app->startup_done = false; /* a crash runs no hooks */
    app->state = APP_STOPPED;
}

int cs__app_idle(cs_app *app) {
    for (size_t i = 0; i < app->n_brokers; i++)
        if (!app->brokers[i].started || !app->brokers[i].ops->idle(app->brokers[i].impl)) return 0;
    return 1;
}

/* Blocks SIGINT/SIGTERM before any thread starts (threads inherit the mask),
 * then waits for them synchronously: no async signal handler touches state. */
cs_err cs_app_run(cs_app *app) {
    sigset_t stop_signals, old;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, &old);
    cs_err err = cs_app_start(app);
    if (err == CS_OK) {
        for (;;) {
            pthread_mutex_lock(&app->lock);
            bool stop = app->stop_requested;
            pthread_mutex_unlock(&app->lock);
            if (stop) break;
            struct timespec tick = {0, STOP_CHECK_NS};
            int sig = sigtimedwait(&stop_signals, NULL, &tick);
            if (sig > 0) {
                CS_LOG_INFO("signal received, stopping gracefully app=%s signal=%s", app->name,
                            sig == SIGINT ? "SIGINT" : "SIGTERM");
                cs_app_request_stop(app);
            }
        }
        err = cs_app_stop(app);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

void cs_app_destroy(cs_app *app) {
    if (!app) return;
    if (app->state == APP_RUNNING) cs_app_stop(app);
    for (size_t i = 0; i < app->n_brokers; i++) app->brokers[i].ops->destroy(app->brokers[i].impl);
    free(app->brokers);
    pthread_mutex_destroy(&app->lock);
    pthread_cond_destroy(&app->stop_cv);
    free(app->name);
    free(app->version);
    free(app);
}

/* ---- operations surface: the brokers, for cs_app_main (cli.c) ---------------- */
size_t cs__app_n_brokers(const cs_app *app) { return app->n_brokers; }

const cs_broker_ops *cs__app_broker(const cs_app *app, size_t i, void **impl) {
    if (i >= app->n_brokers) return NULL;
    *impl = app->brokers[i].impl;
    return app->brokers[i].ops;
}
