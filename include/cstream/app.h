/** @file
 * cstream/app.h — the application: name, version, hooks, lifecycle.
 *
 * An app owns its brokers (cs_app_add_kafka, in cstream/kafka.h). Lifecycle:
 *
 *     cs_app_start  runs the start-up hook, then starts every broker (topics are
 *                   checked, consumers join their groups, fetch loops run);
 *     cs_app_wait   blocks until a stop is requested (cs_app_request_stop, a
 *                   signal under cs_app_run, or a librdkafka fatal error);
 *     cs_app_stop   graceful stop: stop fetching, drain handlers, flush, commit,
 *                   close, then the shutdown hook;
 *     cs_app_run    all three, with SIGINT/SIGTERM starting the graceful stop.
 *
 * Configuration calls fail with CS_ERR_STATE once the app has started.
 *
 * Threads: configure on one thread, before cs_app_start; drive the lifecycle
 * (start, wait, stop, run, destroy) from one thread, the lifecycle thread.
 * Only cs_app_request_stop (and the calls documented as "any thread") may come
 * from other threads, handlers and hooks included. An app runs once: after it
 * stopped, or after a failed start, build a new one. */
#ifndef CSTREAM_APP_H
#define CSTREAM_APP_H

#include "cstream/export.h"

#include "cstream/error.h"
#include "cstream/log.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The application (opaque): created by cs_app_new, freed by cs_app_destroy. */
typedef struct cs_app cs_app;
/** A Kafka broker (opaque), see <cstream/kafka.h>: created by cs_kafka_new,
 * owned by the app once added with cs_app_add_kafka. */
typedef struct cs_kafka cs_kafka;

/** Builds the state the handlers use (open clients, ...). A non-OK return
 * aborts the start: cs_app_start returns CS_ERR_HOOK with the hook's message
 * (set it with cs_app_fail).
 *
 * Runs on the thread that calls cs_app_start (or cs_app_run), before any broker
 * starts: the producer is not running yet, so cs_publish returns CS_ERR_STATE
 * here.
 * @param app the app being started.
 * @param user the pointer given to cs_app_on_startup.
 * @return CS_OK to go on with the start, anything else to abort it. */
typedef cs_err (*cs_startup_fn)(cs_app *app, void *user);
/** Frees what the start-up hook built. Runs once, after every broker closed,
 * and only if the start-up hook succeeded (or there is none).
 *
 * Runs on the thread that stops the app (cs_app_stop, cs_app_run or
 * cs_app_destroy), also when cs_app_start fails after the start-up hook
 * succeeded. A simulated crash (cs_test_app_crash) does not run it.
 * @param app the app being stopped.
 * @param user the pointer given to cs_app_on_shutdown. */
typedef void (*cs_shutdown_fn)(cs_app *app, void *user);

/** NULL (with cs_errmsg) if name is empty. The name becomes client.id and
 * prefixes log lines.
 *
 * Both strings are copied. The caller owns the app and frees it with
 * cs_app_destroy (or hands it to cs_app_main, which destroys it).
 * @param name the service's name; must not be NULL or empty.
 * @param version the service's version; NULL means "0.0.0".
 * @return the new app, or NULL: CS_ERR_ARG in cs_errmsg() for an empty name,
 *         or out of memory. */
CS_API cs_app *cs_app_new(const char *name, const char *version);
/** Stops the app gracefully if it runs, then frees it and every broker it owns.
 *
 * Every subscription of those brokers, and every pointer taken from them,
 * goes with it. From the lifecycle thread; never from a handler or a
 * partition hook, because the stop joins those threads.
 * @param app the app; NULL does nothing. */
CS_API void cs_app_destroy(cs_app *app);

/** The app's name.
 *
 * Any thread.
 * @param app the app.
 * @return the app's copy of the name given to cs_app_new: owned by the app,
 *         valid until cs_app_destroy. */
CS_API const char *cs_app_name(const cs_app *app);
/** The app's version.
 *
 * Any thread.
 * @param app the app.
 * @return the app's copy of the version given to cs_app_new ("0.0.0" for
 *         NULL): owned by the app, valid until cs_app_destroy. */
CS_API const char *cs_app_version(const cs_app *app);

/** Sets the start-up hook (it replaces an earlier one; NULL removes it).
 *
 * Configuring thread, before cs_app_start.
 * @param app the app.
 * @param fn the hook, see cs_startup_fn.
 * @param user passed to fn; cstream never reads or frees it.
 * @retval CS_OK the hook is set.
 * @retval CS_ERR_ARG app is NULL.
 * @retval CS_ERR_STATE the app has already started. */
CS_API cs_err cs_app_on_startup(cs_app *app, cs_startup_fn fn, void *user);
/** Sets the shutdown hook (it replaces an earlier one; NULL removes it).
 *
 * Configuring thread, before cs_app_start.
 * @param app the app.
 * @param fn the hook, see cs_shutdown_fn.
 * @param user passed to fn; cstream never reads or frees it.
 * @retval CS_OK the hook is set.
 * @retval CS_ERR_ARG app is NULL.
 * @retval CS_ERR_STATE the app has already started. */
CS_API cs_err cs_app_on_shutdown(cs_app *app, cs_shutdown_fn fn, void *user);
/** Starts the app: runs the start-up hook, then starts every broker in the
 * order added (see the lifecycle above and docs/guide.md, "Lifecycle").
 *
 * If any step fails, everything already started is stopped, the shutdown
 * hook runs if the start-up hook had succeeded, and the error comes back; the
 * app cannot be started again. Returns once everything runs (it does not wait
 * for partitions to be assigned). From the lifecycle thread.
 *
 * Besides the codes below, a broker that fails to start returns its own
 * error, e.g. CS_ERR_GROUP (a subscription without a group), CS_ERR_TOPIC (a
 * topic missing), CS_ERR_CONFIG (a drain timeout not shorter than the
 * consumer's max.poll.interval.ms, see cs_sub_drain_timeout_ms), CS_ERR_AUTH,
 * CS_ERR_KAFKA or CS_ERR_NOMEM; cs_errmsg() says why.
 * @param app the app.
 * @retval CS_OK the app runs: call cs_app_wait, then cs_app_stop.
 * @retval CS_ERR_ARG app is NULL.
 * @retval CS_ERR_STATE the app has already started (or ran).
 * @retval CS_ERR_HOOK the start-up hook failed (its cs_app_fail message is in
 *         cs_errmsg()). */
CS_API cs_err cs_app_start(cs_app *app);
/** Blocks until a stop is requested. Returns CS_ERR_FATAL (with the reason) if
 * a fatal error requested it, else CS_OK.
 *
 * Has no timeout. From the lifecycle thread, after cs_app_start.
 * @param app the app.
 * @retval CS_OK a stop was requested (cs_app_request_stop).
 * @retval CS_ERR_FATAL a librdkafka fatal error (or running out of memory while
 *         handing out a record) requested the stop; cs_errmsg() has the first
 *         reason. */
CS_API cs_err cs_app_wait(cs_app *app);
/** Any thread, any time, idempotent; does not block.
 *
 * Asks for the graceful stop: cs_app_wait returns, and cs_app_run stops the
 * app (within its 100 ms tick). Handlers and hooks call this, never cs_app_stop.
 * It takes a mutex, so it is not async-signal-safe.
 * @param app the app (not NULL). */
CS_API void cs_app_request_stop(cs_app *app);
/** Graceful stop. Idempotent. Returns the fatal error that stopped the app, if any.
 *
 * Stops the brokers in reverse order (stop fetching and drain, flush the
 * producer, commit and close), then runs the shutdown hook; see
 * docs/guide.md, "Lifecycle". From the lifecycle thread; never from a handler
 * or a partition hook, because the stop joins those threads (use
 * cs_app_request_stop there).
 * @param app the app.
 * @retval CS_OK the app stopped (or was not running).
 * @retval CS_ERR_FATAL a fatal error stopped the app; cs_errmsg() has the reason.
 * @retval CS_ERR_ARG app is NULL. */
CS_API cs_err cs_app_stop(cs_app *app);
/** start + wait for SIGINT/SIGTERM or another stop request + stop. A signal
 * that arrives before cs_app_run blocks them has its default action (the
 * process ends); block SIGINT and SIGTERM first thing in main to close that
 * window: cs_app_run then picks up a pending one.
 *
 * SIGINT and SIGTERM are blocked in the calling thread before anything
 * starts (the threads cstream creates inherit the mask) and waited for
 * synchronously; no signal handler is installed, and the old mask is restored
 * on return. From the lifecycle thread, normally main's.
 * @param app the app.
 * @return CS_OK after a graceful stop; else what cs_app_start returned when the
 *         start failed, or CS_ERR_FATAL when a fatal error stopped the app
 *         (cs_errmsg() says why). */
CS_API cs_err cs_app_run(cs_app *app);

/** For hooks: records a failure reason (printf-style) and returns CS_ERR_HOOK.
 *
 * The start-up hook returns its result; cs_app_start then fails with the
 * reason (at most 511 bytes, longer ones are cut) in cs_errmsg(). Call it from
 * the start-up hook, on the thread that starts the app.
 * @param app the app the hook belongs to (not NULL).
 * @param fmt printf format of the reason.
 * @param ... its arguments.
 * @return CS_ERR_HOOK, always. */
CS_API cs_err cs_app_fail(cs_app *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
