/** @file
 * cstream.h — the umbrella header: everything a service needs.
 *
 * Includes every public header except <cstream/testing.h> (the test API) and
 * <cstream/rdkafka.h> (the librdkafka escape hatch), which a service includes
 * itself when it needs them. */
#ifndef CSTREAM_H
#define CSTREAM_H

/** The library version these headers belong to ("major.minor.patch"). */
#define CSTREAM_VERSION "0.1.0"

#include "cstream/app.h"
#include "cstream/avro.h"
#include "cstream/codec.h"
#include "cstream/database.h" /* Database mode: exactly-once into SQLite or PostgreSQL */
#include "cstream/delivery.h"
#include "cstream/error.h"
#include "cstream/kafka.h"
#include "cstream/log.h"
#include "cstream/main.h" /* operations surface: cs_app_main, AsyncAPI, metrics */
#include "cstream/protobuf.h"
#include "cstream/publish.h"
#include "cstream/record.h"
#include "cstream/registry.h" /* Schema Registry connection (Avro/Protobuf codecs) */

#endif
