/* service.h — the schemas example: payment requests in Avro through a Schema
 * Registry in, receipts in Protobuf out. main.c runs it with cs_app_main;
 * the end-to-end test (tests/registry/test_schemas_example.c) runs that
 * binary. */
#ifndef SCHEMAS_SERVICE_H
#define SCHEMAS_SERVICE_H

#include <stdint.h>

#include "cstream.h"
#include "cstream/registry.h"

/* The Avro value of the requests topic. The service reads it with
 * SCHEMAS_REQUEST_SCHEMA as its reader schema (whatever version a writer
 * registered is resolved against it); the client writes with it. */
#define SCHEMAS_REQUEST_SCHEMA                                                                                         \
    "{\"type\":\"record\",\"name\":\"PaymentRequest\",\"namespace\":\"payments\",\"fields\":["                         \
    "{\"name\":\"id\",\"type\":\"long\"},"                                                                             \
    "{\"name\":\"account\",\"type\":\"string\"},"                                                                      \
    "{\"name\":\"amount_cents\",\"type\":\"long\"}]}"

typedef struct payment_request {
    int64_t id;
    char *account;
    int64_t amount_cents;
} payment_request;
/* Its field table (service.c). */
extern const cs_type payment_request_type;

/* receipt.proto's text, embedded at build time (cmake/protoc-c.cmake). */
extern const char receipt_proto_text[];

/* What the service needs from its caller. */
typedef struct schemas_options {
    const char *registry_url;      /* the registry's Confluent API base URL */
    const char *registry_user;     /* NULL: no basic auth */
    const char *registry_password; /* with registry_user */
    const char *prefix;            /* prepended to its topics and group ("" for none) */
} schemas_options;

/* The built service: the app (handed to cs_app_main, which destroys it) and
 * what must outlive it (freed by schemas_service_free after cs_app_main). */
typedef struct schemas_service {
    cs_app *app;
    cs_registry *registry;
    cs_codec *requests; /* Avro, registry-backed, decode only */
    cs_codec *receipts; /* Protobuf */
    char requests_topic[200];
    char receipts_topic[200];
    char group[200];
} schemas_service;

/* Builds the app; CS_OK or an error with cs_errmsg(). */
cs_err schemas_service_new(const schemas_options *opt, schemas_service *svc);
/* Frees the codecs and the registry client (after the app is gone). */
void schemas_service_free(schemas_service *svc);

#endif
