/* broker.h — how a broker (Kafka) plugs into the app lifecycle. The app knows
 * nothing else of it: it starts brokers in order, stops them in reverse. */
#ifndef CS_CORE_BROKER_H
#define CS_CORE_BROKER_H

#include "cstream/app.h"

typedef struct cs_broker_ops {
    const char *kind;
    cs_err (*start)(void *impl, cs_app *app); /* on failure leaves nothing running */
    cs_err (*stop)(void *impl);               /* graceful; idempotent */
    void (*crash)(void *impl);                /* tests: stop without closing or committing */
    void (*destroy)(void *impl);
    int (*idle)(void *impl);                  /* tests: nothing queued or in flight, lag 0 */
} cs_broker_ops;

cs_err cs__app_add_broker(cs_app *app, const cs_broker_ops *ops, void *impl);
/* Any thread: a fatal error stops the app; the first reason is kept. */
void cs__app_fatal(cs_app *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cs__app_started(const cs_app *app);
/* Tests: crash every broker (destroy without closing), skip the shutdown hook. */
void cs__app_crash(cs_app *app);
int cs__app_idle(cs_app *app);

#endif
