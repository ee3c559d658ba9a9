/** @file
 * cstream/main.h — the operations surface: one command line for every service,
 * and what it serves (AsyncAPI document, Prometheus metrics, health).
 *
 *     int main(int argc, char **argv) {
 *         cs_app *app = build_my_service();
 *         return cs_app_main(app, argc, argv);
 *     }
 *
 * Commands (`SERVICE --help` prints the same):
 *
 *     run (default)   runs the app until SIGINT/SIGTERM (cs_app_run semantics)
 *       --brokers LIST        bootstrap servers (else CSTREAM_BROKERS, else what
 *                             the code gave cs_kafka_new, else the embedded cluster)
 *       --log-level L         error|warn|info|debug (else CSTREAM_LOG_LEVEL)
 *       --log-format F        text|json (else CSTREAM_LOG_FORMAT)
 *       --http ADDR:PORT      serves /metrics, /healthz, /readyz (else CSTREAM_HTTP)
 *     docs [--yaml]   prints the service's AsyncAPI 3.0 document
 *     publish TOPIC [--key K] [--header k=v]... [--lines] [--partition N]
 *                     sends stdin as one record (--lines: one per line) and
 *                     prints "partition=P offset=O" per record from its delivery report
 *     config show     prints each Kafka client's effective configuration
 *                     (every subscription's consumer, the producer), each
 *                     value with its source, secrets masked
 *     --help, --version
 *
 * Kafka client properties (run, publish, reset-offsets, config show):
 *       --config FILE         a Java client.properties file (else CSTREAM_CONFIG)
 *       -X KEY=VALUE          one property, repeatable (kcat's -X)
 *     with CSTREAM_KAFKA_KEY variables between them: cstream's defaults <
 *     the code < the file < the variables < -X. Keys may start with
 *     consumer., producer. or subscription.NAME.; a value @/path (a variable:
 *     a _FILE suffix) is read from that file. See docs/guide.md,
 *     "Configuration from a file, the environment and the command line".
 *
 * Flags beat the environment, the environment beats the code. A wrong flag
 * prints the usage on stderr and returns 2.
 *
 * cs_app_main takes ownership of the app (it destroys it) and returns the
 * process exit status: 0 on success, 1 when the app or a command failed,
 * 2 on a usage error. It never calls exit(). */
#ifndef CSTREAM_MAIN_H
#define CSTREAM_MAIN_H

#include "cstream/export.h"

#include "cstream/app.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Runs the command line of a service (see above) on a configured app, and
 * destroys the app.
 *
 * Call it from main, with the app configured and not started; it is the
 * app's lifecycle thread (`run` has cs_app_run's signal handling).
 * @param app the app, not started (the caller must not use it afterwards).
 *        NULL (cs_app_new failed) prints cs_errmsg() on stderr and returns 1.
 * @param argc main's argc.
 * @param argv main's argv (read only).
 * @return the process exit status: 0 on success, 1 when the app or a command
 *         failed, 2 on a usage error. */
CS_API int cs_app_main(cs_app *app, int argc, char **argv);

/** The app's AsyncAPI 3.0 document (JSON, or YAML when yaml != 0): a channel per
 * topic, a receive operation per subscribed topic, send operations for reply
 * and dead-letter topics and for declared topics nothing in the app consumes,
 * payload schemas from the subscriptions' field tables (cs_sub_decode), Kafka
 * bindings (group id, client id, topic, partitions). Callable before start.
 * The caller frees *out with free().
 *
 * Reads the app's configuration: from the configuring thread. A codec whose
 * schema call fails makes it return that error; cs_errmsg() says why.
 * @param app the app.
 * @param yaml 0 for JSON, else YAML.
 * @param out receives the document (NUL-terminated); NULL on failure.
 * @retval CS_OK *out holds the document.
 * @retval CS_ERR_ARG app or out is NULL, or the schema a subscription's codec
 *         wrote does not parse.
 * @retval CS_ERR_STATE no broker of the app writes a document (the app has
 *         no cs_kafka).
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_app_asyncapi(cs_app *app, int yaml, char **out);

/** The app's counters in the Prometheus text format (version 0.0.4): one series
 * per subscription and counter of cs_sub_stats, labelled subscription and
 * group, plus cstream_up. The caller frees *out with free(). Any thread, at any
 * time until cs_app_destroy, a start or stop in progress included: it reads
 * counters and takes short locks, none of which a start or stop holds across
 * a blocking call, so it never waits for a consumer to close.
 * @param app the app.
 * @param out receives the text (NUL-terminated).
 * @retval CS_OK *out holds the text.
 * @retval CS_ERR_ARG app or out is NULL.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_app_metrics(cs_app *app, char **out);

#ifdef __cplusplus
}
#endif
#endif
