/* topics.c — does a topic exist? Asked of the cluster's metadata for all
 * topics (asking for one topic by name could auto-create it on some brokers).
 * Also the start-up check's reading of that metadata, which is the first time
 * an app talks to the cluster: a refused SASL login or a failed TLS handshake
 * ends it at once with an error naming the broker and the settings involved,
 * instead of a metadata timeout that says nothing about why.
 *
 * Owns: nothing (a metadata reply, freed before it returns). Locks: none.
 * Threads: the thread that starts the app; cs__topics_exist also the test
 * API's caller (testing.c). */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "kafka/kafka_internal.h"

static cs_err check_names(const struct rd_kafka_metadata *md, const char *who, char *const *topics, size_t n) {
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (int t = 0; t < md->topic_cnt && !found; t++)
            found = !strcmp(md->topics[t].topic, topics[i]) && md->topics[t].err == RD_KAFKA_RESP_ERR_NO_ERROR;
        if (!found)
            return cs__fail(CS_ERR_TOPIC,
                            "topic %s does not exist on %s: create it first (on the embedded cluster, declare it "
                            "with cs_kafka_topic(); a subscription may start before its topics exist with "
                            "cs_sub_allow_missing_topics())",
                            topics[i], who);
    }
    return CS_OK;
}

cs_err cs__topics_exist(rd_kafka_t *rk, const char *who, char *const *topics, size_t n) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, NULL, &md, 10000);
    if (err) return cs__fail(CS_ERR_KAFKA, "cannot read cluster metadata from %s: %s", who, rd_kafka_err2str(err));
    cs_err result = check_names(md, who, topics, n);
    rd_kafka_metadata_destroy(md);
    return result;
}

/* Manual assignment (cs_sub_partitions): each topic has each partition. */
cs_err cs__partitions_exist(rd_kafka_t *rk, const char *who, char *const *topics, size_t n_topics,
                            const int32_t *partitions, size_t n) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, NULL, &md, 10000);
    if (err) return cs__fail(CS_ERR_KAFKA, "cannot read cluster metadata from %s: %s", who, rd_kafka_err2str(err));
    cs_err result = check_names(md, who, topics, n_topics);
    for (size_t i = 0; !result && i < n_topics; i++) {
        int count = 0;
        for (int t = 0; t < md->topic_cnt; t++)
            if (!strcmp(md->topics[t].topic, topics[i])) count = md->topics[t].partition_cnt;
        for (size_t p = 0; !result && p < n; p++)
            if (partitions[p] >= count)
                result = cs__fail(CS_ERR_TOPIC,
                                  "%s: topic %s has no partition %d (it has %d, numbered 0 to %d): fix "
                                  "cs_sub_partitions()",
                                  who, topics[i], (int)partitions[p], count, count - 1);
    }
    rd_kafka_metadata_destroy(md);
    return result;
}

/* ---- the start-up check ------------------------------------------------------ */

/* Authentication and TLS failures are configuration, not weather: librdkafka
 * would retry them forever, with the same answer each time. */
static bool refused(int err) { return err == RD_KAFKA_RESP_ERR__AUTHENTICATION || err == RD_KAFKA_RESP_ERR__SSL; }

/* error_cb of the check's client; called from rd_kafka_poll on the checking thread. */
static void watch_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    (void)rk;
    cs_conn_watch *w = opaque;
    if (refused(err)) {
        if (!w->refused) {
            w->refused = err;
            snprintf(w->refused_why, sizeof w->refused_why, "%s", reason);
        }
        return;
    }
    snprintf(w->last_why, sizeof w->last_why, "%s: %s", rd_kafka_err2name(err), reason);
}

void cs__conn_watch_install(rd_kafka_conf_t *conf, cs_conn_watch *w) {
    memset(w, 0, sizeof *w);
    rd_kafka_conf_set_opaque(conf, w);
    rd_kafka_conf_set_error_cb(conf, watch_error);
}

/* A property of the client as librdkafka sees it (its default if not set),
 * for error messages. Only ever called with keys that hold no secret. */
static const char *conf_value(rd_kafka_t *rk, const char *key, char *buf, size_t size) {
    size_t len = size;
    if (rd_kafka_conf_get(rd_kafka_conf(rk), key, buf, &len) != RD_KAFKA_CONF_OK || !*buf)
        snprintf(buf, size, "(not set)");
    return buf;
}

/* librdkafka before 2.6.1 repeats the client nonce in its final SCRAM
 * message; Apache Kafka 4.0 and later refuse that whatever the password
 * (confluentinc/librdkafka#4895). The broker's answer is the same as for a
 * wrong password, so the message says so rather than send the user hunting
 * for a typo. */
static void scram_hint(const char *mechanism, char *buf, size_t size) {
    buf[0] = '\0';
    if (strncmp(mechanism, "SCRAM", 5) != 0 || rd_kafka_version() >= 0x02060100) return;
    snprintf(buf, size,
             "; if the password is right: this process runs librdkafka %s, whose SCRAM login Apache Kafka 4.0 "
             "and later refuse whatever the password (fixed in librdkafka 2.6.1, confluentinc/librdkafka#4895); "
             "use sasl.mechanisms=PLAIN over SASL_SSL, or librdkafka 2.6.1 or later",
             rd_kafka_version_str());
}

static cs_err refused_error(rd_kafka_t *rk, const char *who, const cs_conn_watch *w) {
    char protocol[64], mechanism[64], user[256], ca[1024], hint[512];
    conf_value(rk, "security.protocol", protocol, sizeof protocol);
    if (w->refused == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
        conf_value(rk, "sasl.mechanisms", mechanism, sizeof mechanism);
        scram_hint(mechanism, hint, sizeof hint);
        return cs__fail(CS_ERR_AUTH,
                        "authentication to %s failed: security.protocol=%s sasl.mechanisms=%s sasl.username=%s: "
                        "%s (check sasl.username and sasl.password; the password is never shown%s)",
                        who, protocol, mechanism, conf_value(rk, "sasl.username", user, sizeof user), w->refused_why,
                        hint);
    }
    return cs__fail(CS_ERR_AUTH,
                    "TLS handshake with %s failed: security.protocol=%s ssl.ca.location=%s: %s (check that "
                    "ssl.ca.location holds the CA that signed the brokers' certificates)",
                    who, protocol, conf_value(rk, "ssl.ca.location", ca, sizeof ca), w->refused_why);
}

cs_err cs__topics_start_check(rd_kafka_t *rk, const char *who, cs_conn_watch *w, char *const *topics, size_t n,
                              int timeout_ms) {
    /* rd_kafka_metadata blocks and error_cb only runs from rd_kafka_poll, so
     * the wait is cut into rounds with a poll between them. The rounds double
     * from 100 ms: short ones catch a refusal soon after it happens, and the
     * last ones are seconds long, so a slow cluster still gets to answer (a
     * round that runs out abandons its request; the next one asks again). */
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
    int64_t deadline = cs__now_ms() + timeout_ms;
    int round = 100;
    for (;;) {
        int64_t left = deadline - cs__now_ms();
        if (left <= 0) break;
        err = rd_kafka_metadata(rk, 1, NULL, &md, (int)(left < round ? left : round));
        rd_kafka_poll(rk, 0);
        if (!err) break;
        if (w->refused) return refused_error(rk, who, w);
        round *= 2;
    }
    if (err)
        return cs__fail(CS_ERR_KAFKA, "cannot read cluster metadata from %s within %d ms: %s%s%s", who, timeout_ms,
                        rd_kafka_err2str(err), w->last_why[0] ? "; last client error: " : "", w->last_why);
    cs_err result = check_names(md, who, topics, n);
    rd_kafka_metadata_destroy(md);
    return result;
}
