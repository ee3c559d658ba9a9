/* fake_source.h — a record source without a broker, for unit tests that drive
 * the real pipeline: records have no headers and nothing to release. Include
 * once per test file (the definitions are static). */
#ifndef CSTEST_FAKE_SOURCE_H
#define CSTEST_FAKE_SOURCE_H

#include <stddef.h>

#include "core/source.h"

static void fake_release(void *msg) { (void)msg; }
static size_t fake_header_count(void *msg) {
    (void)msg;
    return 0;
}
static int fake_header_at(void *msg, size_t idx, const char **name, const void **value, size_t *len) {
    (void)msg, (void)idx, (void)name, (void)value, (void)len;
    return -1;
}
static const cs_source_ops fake_source = {fake_release, fake_header_count, fake_header_at};
/* What a delivery's msg points at (never read). */
static int fake_msg;

#endif
