/* main.c — the schemas example as it runs: payment requests in Avro through a
 * Schema Registry in, Protobuf receipts out (service.c), under cs_app_main's
 * command line (run, docs, publish, --brokers, --http ...).
 *
 * The registry: `--registry URL` (taken out of argv before cs_app_main sees
 * it), else CSTREAM_REGISTRY_URL; basic auth from CSTREAM_REGISTRY_USER and
 * CSTREAM_REGISTRY_PASSWORD (what `scripts/registry env` prints).
 * SCHEMAS_PREFIX, if set, is prepended to its topics and group (the
 * end-to-end test runs it on fresh topics). Seeding: seed.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service.h"

/* Removes "--registry URL" (or "--registry=URL") from argv; returns the URL
 * or NULL. argc is updated. */
static const char *take_registry_flag(int *argc, char **argv) {
    const char *url = NULL;
    int out = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp(argv[i], "--registry") && i + 1 < *argc) {
            url = argv[++i];
            continue;
        }
        if (!strncmp(argv[i], "--registry=", strlen("--registry="))) {
            url = argv[i] + strlen("--registry=");
            continue;
        }
        argv[out++] = argv[i];
    }
    argv[out] = NULL;
    *argc = out;
    return url;
}

int main(int argc, char **argv) {
    const char *url = take_registry_flag(&argc, argv);
    if (!url) url = getenv("CSTREAM_REGISTRY_URL");
    if (!url) {
        fprintf(stderr, "schemas: no Schema Registry: pass --registry URL or set CSTREAM_REGISTRY_URL\n");
        return 2;
    }
    const char *prefix = getenv("SCHEMAS_PREFIX");
    schemas_options opt = {.registry_url = url,
                           .registry_user = getenv("CSTREAM_REGISTRY_USER"),
                           .registry_password = getenv("CSTREAM_REGISTRY_PASSWORD"),
                           .prefix = prefix ? prefix : ""};
    static schemas_service svc; /* the handler's user pointer: it outlives cs_app_main */
    if (schemas_service_new(&opt, &svc) != CS_OK) {
        fprintf(stderr, "schemas: %s\n", cs_errmsg());
        return 1;
    }
    int status = cs_app_main(svc.app, argc, argv); /* owns and destroys the app */
    schemas_service_free(&svc);
    return status;
}
