/* cstream/app.h — the application: name, version, hooks, lifecycle.
 *
 * An app owns its brokers (cs_app_add_kafka). Lifecycle:
 *   cs_app_start  runs the start-up hook, then starts every broker (topics are
 *                 checked, consumers join their groups, fetch loops run);
 *   cs_app_wait   blocks until a stop is requested (cs_app_request_stop, a
 *                 signal under cs_app_run, or a librdkafka fatal error);
 *   cs_app_stop   graceful stop: stop fetching, drain handlers, flush, commit,
 *                 close, then the shutdown hook;
 *   cs_app_run    all three, with SIGINT/SIGTERM starting the graceful stop.
 * Configuration calls fail with CS_ERR_STATE once the app has started. */
#ifndef CSTREAM_APP_H
#define CSTREAM_APP_H

#include "cstream/export.h"

#include "cstream/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cs_app cs_app;
typedef struct cs_kafka cs_kafka;

/* Builds the state the handlers use (open clients, ...). A non-OK return
 * aborts the start: cs_app_start returns CS_ERR_HOOK with the hook's message
 * (set it with cs_app_fail). */
typedef cs_err (*cs_startup_fn)(cs_app *app, void *user);
/* Frees what the start-up hook built. Runs once, after every broker closed,
 * and only if the start-up hook succeeded. */
typedef void (*cs_shutdown_fn)(cs_app *app, void *user);

/* NULL (with cs_errmsg) if name is empty. The name becomes client.id and
 * prefixes log lines. */
CS_API cs_app *cs_app_new(const char *name, const char *version);
/* Stops the app gracefully if it runs, then frees it and every broker it owns. */
CS_API void cs_app_destroy(cs_app *app);

CS_API const char *cs_app_name(const cs_app *app);
CS_API const char *cs_app_version(const cs_app *app);

CS_API cs_err cs_app_on_startup(cs_app *app, cs_startup_fn fn, void *user);
CS_API cs_err cs_app_on_shutdown(cs_app *app, cs_shutdown_fn fn, void *user);
/* The app takes ownership of k (do not destroy it yourself). */
CS_API cs_err cs_app_add_kafka(cs_app *app, cs_kafka *k);

CS_API cs_err cs_app_start(cs_app *app);
/* Blocks until a stop is requested. Returns CS_ERR_FATAL (with the reason) if
 * a fatal error requested it, else CS_OK. */
CS_API cs_err cs_app_wait(cs_app *app);
/* Any thread, any time, idempotent; does not block. */
CS_API void cs_app_request_stop(cs_app *app);
/* Graceful stop. Idempotent. Returns the fatal error that stopped the app, if any. */
CS_API cs_err cs_app_stop(cs_app *app);
/* start + wait for SIGINT/SIGTERM or another stop request + stop. A signal
 * that arrives before cs_app_run blocks them has its default action (the
 * process ends); block SIGINT and SIGTERM first thing in main to close that
 * window: cs_app_run then picks up a pending one. */
CS_API cs_err cs_app_run(cs_app *app);

/* For hooks: records a failure reason (printf-style) and returns CS_ERR_HOOK. */
CS_API cs_err cs_app_fail(cs_app *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef enum cs_log_level { CS_LOG_ERROR, CS_LOG_WARN, CS_LOG_INFO, CS_LOG_DEBUG } cs_log_level;
/* Process-wide log threshold (default INFO, or CSTREAM_LOG_LEVEL=error|warn|info|debug). */
CS_API void cs_log_set_level(cs_log_level level);

#ifdef __cplusplus
}
#endif
#endif
