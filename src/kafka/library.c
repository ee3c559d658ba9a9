/* library.c — which librdkafka cstream runs on: the version its headers had
 * when cstream was built (RD_KAFKA_VERSION) against the one loaded at run
 * time (rd_kafka_version()), checked when a cs_kafka starts and shown in the
 * start log, /metrics and --version (docs/librdkafka.md).
 *
 * Owns: nothing (constants and pure functions). Locks: none. Threads: any.
 * Must never: refuse a run-time library newer than the headers (librdkafka
 * keeps its ABI within a major version: 2.x built code runs on any later 2.x). */
#include <librdkafka/rdkafka.h>
#include <stdio.h>

#include "base/error.h"
#include "kafka/kafka_internal.h"

/* librdkafka's version integer is 0xMMmmrrpp (pp 0xff for a release). */
static void version_text(int v, char *buf, size_t cap) {
    unsigned u = (unsigned)v;
    int pre = (int)(u & 0xff);
    if (pre == 0xff) snprintf(buf, cap, "%u.%u.%u", (u >> 24) & 0xff, (u >> 16) & 0xff, (u >> 8) & 0xff);
    else snprintf(buf, cap, "%u.%u.%u-pre%d", (u >> 24) & 0xff, (u >> 16) & 0xff, (u >> 8) & 0xff, pre);
}

int cs__rdkafka_built_version(void) { return RD_KAFKA_VERSION; }

void cs__rdkafka_versions(char *built, char *running, size_t cap) {
    version_text(RD_KAFKA_VERSION, built, cap);
    version_text(rd_kafka_version(), running, cap);
}

cs_err cs__rdkafka_check_version(const char *who, int built, int running) {
    /* An older library than the headers may lack functions or behaviour the
     * code was compiled to rely on (the seek unit, epochs, the batch API's
     * fixes): refused rather than run with the floor's bugs unguarded. */
    if (running >= built) return CS_OK;
    char b[32], r[32];
    version_text(built, b, sizeof b);
    version_text(running, r, sizeof r);
    return cs__fail(CS_ERR_UNSUPPORTED,
                    "%s: this process loaded librdkafka %s, older than the librdkafka %s headers cstream was built "
                    "with; run it with librdkafka %s or later (check LD_LIBRARY_PATH and the library path), or "
                    "build cstream against the older headers",
                    who, r, b, b);
}
