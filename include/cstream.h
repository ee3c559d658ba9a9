/* cstream.h — the umbrella header: everything a service needs. */
#ifndef CSTREAM_H
#define CSTREAM_H

#define CSTREAM_VERSION "0.1.0"

#include "cstream/app.h"
#include "cstream/codec.h"
#include "cstream/delivery.h"
#include "cstream/error.h"
#include "cstream/kafka.h"
#include "cstream/main.h" /* operations surface: cs_app_main, AsyncAPI, metrics */
#include "cstream/publish.h"

#endif
