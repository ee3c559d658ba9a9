/* testing.c — the test API (cstream/testing.h): a cluster to test against,
 * topics, publishing, committed positions, idle and crash for apps.
 *
 * Owns: the cs_test_cluster (its embedded cluster and its producer).
 * Locks: `lock` (a leaf) around its producer; a subscription's stats_lock
 * (level 2) to read its consumer's counters. Threads: any; a
 * cs_test_cluster may be used from several threads at once. */
#define _POSIX_C_SOURCE 200809L
#include "cstream/testing.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/broker.h"
#include "base/error.h"
#include "base/log.h"
#include "kafka/kafka_internal.h"

#include <librdkafka/rdkafka_mock.h>

struct cs_test_cluster {
    cs_embedded *embedded; /* NULL when CSTREAM_BROKERS names the cluster */
    char *brokers;
    /* Serialises the test producer; held across a synchronous produce (a
     * blocking poll): tests only, a leaf (src/lock_order.h). */
    pthread_mutex_t lock;
    rd_kafka_t *producer;
};

typedef struct produce_result {
    rd_kafka_resp_err_t err;
    int64_t offset;
    bool done;
} produce_result;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    _Atomic int *failures = opaque;
    produce_result *r = m->_private;
    if (r) {
        r->err = m->err;
        r->offset = m->offset;
        r->done = true;
    } else if (m->err) {
        atomic_fetch_add(failures, 1);
    }
}

static _Atomic int bulk_failures;

/* brokers > 0: always the embedded cluster with that many brokers; 0: the
 * cluster CSTREAM_BROKERS names, else an embedded one with one broker. */
static cs_err cluster_new(int brokers, cs_test_cluster **out) {
    cs_test_cluster *c = calloc(1, sizeof *c);
    if (!c) return cs__fail(CS_ERR_NOMEM, "test cluster: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    const char *env = getenv("CSTREAM_BROKERS");
    if (env && *env && brokers == 0) {
        c->brokers = strdup(env);
    } else {
        cs_err err = cs__embedded_new(brokers > 0 ? brokers : 1, &c->embedded);
        if (err) {
            pthread_mutex_destroy(&c->lock);
            free(c);
            return err;
        }
        c->brokers = strdup(cs__embedded_bootstraps(c->embedded));
#if CS_RDKAFKA_HAS_CONSUMER_PROTOCOL
        /* Under the consumer protocol the session timing is the broker's:
         * the same 6 s session and 500 ms heartbeat cs_test_kafka_new gives
         * classic members, so a crashed member's partitions move on as soon
         * under both protocols. */
        rd_kafka_mock_set_group_consumer_session_timeout_ms(cs__embedded_mock(c->embedded), 6000);
        rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(cs__embedded_mock(c->embedded), 500);
#endif
    }
    if (!c->brokers) {
        cs_test_cluster_destroy(c);
        return cs__fail(CS_ERR_NOMEM, "test cluster: out of memory");
    }
    char reason[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", c->brokers, NULL, 0);
    rd_kafka_conf_set(conf, "client.id", "cstream-test", NULL, 0);
    rd_kafka_conf_set(conf, "linger.ms", "1", NULL, 0);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, &bulk_failures);
    rd_kafka_conf_set_log_cb(conf, cs__rdkafka_log);
    c->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof reason);
    if (!c->producer) {
        rd_kafka_conf_destroy(conf);
        cs_test_cluster_destroy(c);
        return cs__fail(CS_ERR_KAFKA, "test cluster: producer could not be created: %s", reason);
    }
    *out = c;
    return CS_OK;
}

cs_err cs_test_cluster_new(cs_test_cluster **out) { return cluster_new(0, out); }

cs_err cs_test_cluster_new_embedded(int brokers, cs_test_cluster **out) {
    if (brokers < 1) return cs__fail(CS_ERR_ARG, "cs_test_cluster_new_embedded: %d brokers", brokers);
    return cluster_new(brokers, out);
}

void cs_test_cluster_destroy(cs_test_cluster *c) {
    if (!c) return;
    if (c->producer) {
        rd_kafka_flush(c->producer, 5000);
        rd_kafka_destroy(c->producer);
    }
    cs__embedded_destroy(c->embedded);
    pthread_mutex_destroy(&c->lock);
    free(c->brokers);
    free(c);
}

const char *cs_test_cluster_brokers(const cs_test_cluster *c) { return c->brokers; }
int cs_test_cluster_is_embedded(const cs_test_cluster *c) { return c->embedded != NULL; }

cs_err cs_test_cluster_set_down(cs_test_cluster *c, int down) {
    if (!c->embedded)
        return cs__fail(CS_ERR_UNSUPPORTED,
                        "cs_test_cluster_set_down: only the embedded cluster can be taken down here");
    return cs__embedded_set_down(c->embedded, down != 0);
}

cs_err cs_test_topic_set_error(cs_test_cluster *c, const char *topic, int kafka_error) {
    if (!c->embedded)
        return cs__fail(CS_ERR_UNSUPPORTED, "cs_test_topic_set_error: only the embedded cluster injects errors here");
    return cs__embedded_topic_error(c->embedded, topic, kafka_error);
}

/* ---- fault injection (embedded cluster only) ---- */

static cs_err mock_of(cs_test_cluster *c, const char *what, rd_kafka_mock_cluster_t **mc) {
    if (!c || !c->embedded) return cs__fail(CS_ERR_UNSUPPORTED, "%s: only the embedded cluster injects faults", what);
    *mc = cs__embedded_mock(c->embedded);
    return CS_OK;
}

cs_err cs_test_cluster_push_request_errors(cs_test_cluster *c, int api_key, size_t n, const int *errors) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_cluster_push_request_errors", &mc);
    if (err) return err;
    if (api_key < 0 || api_key > INT16_MAX || (n && !errors))
        return cs__fail(CS_ERR_ARG, "cs_test_cluster_push_request_errors: api key %d, %zu errors", api_key, n);
    rd_kafka_resp_err_t *codes = calloc(n ? n : 1, sizeof *codes);
    if (!codes) return cs__fail(CS_ERR_NOMEM, "cs_test_cluster_push_request_errors: out of memory");
    for (size_t i = 0; i < n; i++) codes[i] = (rd_kafka_resp_err_t)errors[i];
    rd_kafka_mock_push_request_errors_array(mc, (int16_t)api_key, n, codes);
    free(codes);
    return CS_OK;
}

cs_err cs_test_cluster_clear_request_errors(cs_test_cluster *c, int api_key) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_cluster_clear_request_errors", &mc);
    if (err) return err;
    rd_kafka_mock_clear_request_errors(mc, (int16_t)api_key);
    return CS_OK;
}

static cs_err mock_result(rd_kafka_resp_err_t e, const char *what, const char *target) {
    if (e) return cs__fail(CS_ERR_KAFKA, "%s(%s): %s", what, target, rd_kafka_err2str(e));
    return CS_OK;
}

cs_err cs_test_cluster_withdraw_api(cs_test_cluster *c, int api_key) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_cluster_withdraw_api", &mc);
    if (err) return err;
    if (api_key < 0 || api_key > INT16_MAX)
        return cs__fail(CS_ERR_ARG, "cs_test_cluster_withdraw_api: api key %d", api_key);
    char id[16];
    snprintf(id, sizeof id, "api key %d", api_key);
    return mock_result(rd_kafka_mock_set_apiversion(mc, (int16_t)api_key, -1, -1), "cs_test_cluster_withdraw_api", id);
}

cs_err cs_test_broker_push_request_errors(cs_test_cluster *c, int broker, int api_key, size_t n, const int *errors) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_broker_push_request_errors", &mc);
    if (err) return err;
    if (api_key < 0 || api_key > INT16_MAX || (n && !errors))
        return cs__fail(CS_ERR_ARG, "cs_test_broker_push_request_errors: api key %d, %zu errors", api_key, n);
    char id[16];
    snprintf(id, sizeof id, "broker %d", broker);
    /* 2.0.2 takes (error, rtt) pairs as varargs only: one call per error. */
    for (size_t i = 0; i < n; i++) {
        err = mock_result(rd_kafka_mock_broker_push_request_error_rtts(mc, broker, (int16_t)api_key, 1,
                                                                       (rd_kafka_resp_err_t)errors[i], 0),
                          "cs_test_broker_push_request_errors", id);
        if (err) return err;
    }
    return CS_OK;
}

cs_err cs_test_broker_request_errors_left(cs_test_cluster *c, int broker, int api_key, size_t *left) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_broker_request_errors_left", &mc);
    if (err) return err;
    if (api_key < 0 || api_key > INT16_MAX || !left)
        return cs__fail(CS_ERR_ARG, "cs_test_broker_request_errors_left: api key %d", api_key);
    char id[16];
    snprintf(id, sizeof id, "broker %d", broker);
    *left = 0; /* the mock leaves it alone when the broker has no stack for api_key */
    return mock_result(rd_kafka_mock_broker_error_stack_cnt(mc, broker, (int16_t)api_key, left),
                       "cs_test_broker_request_errors_left", id);
}

cs_err cs_test_broker_set_down(cs_test_cluster *c, int broker, int down) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_broker_set_down", &mc);
    if (err) return err;
    char id[16];
    snprintf(id, sizeof id, "broker %d", broker);
    return mock_result(down ? rd_kafka_mock_broker_set_down(mc, broker) : rd_kafka_mock_broker_set_up(mc, broker),
                       "cs_test_broker_set_down", id);
}

cs_err cs_test_broker_set_rtt(cs_test_cluster *c, int broker, int rtt_ms) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_broker_set_rtt", &mc);
    if (err) return err;
    char id[16];
    snprintf(id, sizeof id, "broker %d", broker);
    return mock_result(rd_kafka_mock_broker_set_rtt(mc, broker, rtt_ms), "cs_test_broker_set_rtt", id);
}

cs_err cs_test_partition_set_leader(cs_test_cluster *c, const char *topic, int32_t partition, int broker) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_partition_set_leader", &mc);
    if (err) return err;
    return mock_result(rd_kafka_mock_partition_set_leader(mc, topic, partition, broker), "cs_test_partition_set_leader",
                       topic);
}

cs_err cs_test_group_set_coordinator(cs_test_cluster *c, const char *group, int broker) {
    rd_kafka_mock_cluster_t *mc = NULL;
    cs_err err = mock_of(c, "cs_test_group_set_coordinator", &mc);
    if (err) return err;
    return mock_result(rd_kafka_mock_coordinator_set(mc, "group", group, broker), "cs_test_group_set_coordinator",
                       group);
}

cs_kafka *cs_test_kafka_new(const cs_test_cluster *c) {
    cs_kafka *k = cs_kafka_new(c->brokers);
    if (!k) return NULL;
    k->mock = c->embedded != NULL;
    /* The session timing is the classic protocol's only: under the consumer
     * protocol the broker owns it (group.consumer.session.timeout.ms) and
     * librdkafka refuses both keys, so they are classic defaults. */
    if (cs__kafka_classic_default(k, "session.timeout.ms", "6000") || cs_kafka_config(k, "fetch.wait.max.ms", "10") ||
        cs_kafka_config(k, "auto.commit.interval.ms", "100") ||
        cs__kafka_classic_default(k, "heartbeat.interval.ms", "500")) {
        cs_kafka_destroy(k);
        return NULL;
    }
    return k;
}

void cs_test_unique_name(char *buf, size_t size, const char *prefix) {
    static _Atomic unsigned counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, size, "%s-%d-%u-%lx", prefix, (int)getpid(), atomic_fetch_add(&counter, 1),
             (unsigned long)(ts.tv_nsec ^ ts.tv_sec) & 0xffffff);
}

/* Admin API for real clusters (the embedded one has no CreateTopics). */
/* A queue and options for one admin request of type op (10 s broker-side timeout). */
static rd_kafka_AdminOptions_t *admin_options(cs_test_cluster *c, rd_kafka_admin_op_t op, rd_kafka_queue_t **q) {
    *q = rd_kafka_queue_new(c->producer);
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(c->producer, op);
    rd_kafka_AdminOptions_set_operation_timeout(opt, 10000, NULL, 0);
    return opt;
}

/* The one topic result of a CreateTopics, CreatePartitions or DeleteTopics answer. */
static const rd_kafka_topic_result_t *admin_topic_result(rd_kafka_event_t *ev) {
    size_t n = 0;
    const rd_kafka_topic_result_t **res = NULL;
    switch (rd_kafka_event_type(ev)) {
    case RD_KAFKA_EVENT_CREATETOPICS_RESULT:
        res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        break;
    case RD_KAFKA_EVENT_CREATEPARTITIONS_RESULT:
        res = rd_kafka_CreatePartitions_result_topics(rd_kafka_event_CreatePartitions_result(ev), &n);
        break;
    case RD_KAFKA_EVENT_DELETETOPICS_RESULT:
        res = rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
        break;
    default: break;
    }
    return n == 1 ? res[0] : NULL;
}

/* Waits (30 s) for the answer to the admin request `what` about topic on q,
 * then releases q and opt. `tolerated`: a topic error that counts as done. */
static cs_err admin_answer(cs_test_cluster *c, rd_kafka_queue_t *q, rd_kafka_AdminOptions_t *opt, const char *what,
                           const char *topic, rd_kafka_resp_err_t tolerated) {
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    cs_err err = CS_OK;
    if (!ev) {
        err = cs__fail(CS_ERR_TIMEOUT, "%s %s: no answer from %s", what, topic, c->brokers);
    } else if (rd_kafka_event_error(ev)) {
        err = cs__fail(CS_ERR_TOPIC, "%s %s: %s", what, topic, rd_kafka_event_error_string(ev));
    } else {
        const rd_kafka_topic_result_t *r = admin_topic_result(ev);
        rd_kafka_resp_err_t e = r ? rd_kafka_topic_result_error(r) : RD_KAFKA_RESP_ERR_NO_ERROR;
        if (e && e != tolerated)
            err = cs__fail(CS_ERR_TOPIC, "%s %s: %s", what, topic, rd_kafka_topic_result_error_string(r));
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    return err;
}

static cs_err create_with_admin(cs_test_cluster *c, const char *topic, int partitions) {
    char reason[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, 1, reason, sizeof reason);
    if (!nt) return cs__fail(CS_ERR_TOPIC, "create topic %s: %s", topic, reason);
    rd_kafka_queue_t *q;
    rd_kafka_AdminOptions_t *opt = admin_options(c, RD_KAFKA_ADMIN_OP_CREATETOPICS, &q);
    rd_kafka_CreateTopics(c->producer, &nt, 1, opt, q);
    cs_err err = admin_answer(c, q, opt, "create topic", topic, RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS);
    rd_kafka_NewTopic_destroy(nt);
    return err;
}

/* Waits (bounded) until the cluster's metadata shows `topic` with at least
 * `partitions` partitions (gone: absent), asking with a fresh request each
 * time; the answer also updates the test producer's view of the topic, so a
 * record produced next to a new partition is accepted. */
static bool topic_shows(cs_test_cluster *c, const char *topic, int partitions, bool gone) {
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(c->producer, 1, NULL, &md, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR) return false;
    bool ok = gone;
    for (int t = 0; t < md->topic_cnt; t++)
        if (!strcmp(md->topics[t].topic, topic) && md->topics[t].err == RD_KAFKA_RESP_ERR_NO_ERROR)
            ok = !gone && md->topics[t].partition_cnt >= partitions;
    rd_kafka_metadata_destroy(md);
    return ok;
}

static cs_err wait_topic_shows(cs_test_cluster *c, const char *topic, int partitions, bool gone, const char *what) {
    for (int i = 0; i < 150; i++) {
        if (topic_shows(c, topic, partitions, gone)) return CS_OK;
        usleep(100 * 1000);
    }
    return cs__fail(CS_ERR_TIMEOUT, "%s %s: not visible in metadata after 15 s", what, topic);
}

cs_err cs_test_topic_add_partitions(cs_test_cluster *c, const char *topic, int partitions) {
    if (c->embedded)
        return cs__fail(CS_ERR_UNSUPPORTED,
                        "cs_test_topic_add_partitions(%s): librdkafka 2.0.2's embedded cluster "
                        "has no CreatePartitions",
                        topic);
    char reason[512];
    rd_kafka_NewPartitions_t *np = rd_kafka_NewPartitions_new(topic, (size_t)partitions, reason, sizeof reason);
    if (!np) return cs__fail(CS_ERR_ARG, "cs_test_topic_add_partitions(%s): %s", topic, reason);
    rd_kafka_queue_t *q;
    rd_kafka_AdminOptions_t *opt = admin_options(c, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS, &q);
    rd_kafka_CreatePartitions(c->producer, &np, 1, opt, q);
    cs_err err = admin_answer(c, q, opt, "cs_test_topic_add_partitions", topic, RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_NewPartitions_destroy(np);
    return err ? err : wait_topic_shows(c, topic, partitions, false, "cs_test_topic_add_partitions");
}

cs_err cs_test_topic_delete(cs_test_cluster *c, const char *topic) {
    if (c->embedded)
        return cs__fail(CS_ERR_UNSUPPORTED,
                        "cs_test_topic_delete(%s): librdkafka 2.0.2's embedded cluster has no "
                        "DeleteTopics",
                        topic);
    rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(topic);
    rd_kafka_queue_t *q;
    rd_kafka_AdminOptions_t *opt = admin_options(c, RD_KAFKA_ADMIN_OP_DELETETOPICS, &q);
    rd_kafka_DeleteTopics(c->producer, &dt, 1, opt, q);
    cs_err err = admin_answer(c, q, opt, "cs_test_topic_delete", topic, RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_DeleteTopic_destroy(dt);
    return err ? err : wait_topic_shows(c, topic, 0, true, "cs_test_topic_delete");
}

cs_err cs_test_topic_create(cs_test_cluster *c, const char *topic, int partitions) {
    if (c->embedded) return cs__embedded_topic(c->embedded, topic, partitions);
    cs_err err = create_with_admin(c, topic, partitions);
    if (err) return err;
    /* Wait until the metadata shows it, so a consumer started next finds it. */
    char *names[1] = {(char *)topic};
    for (int i = 0; i < 100; i++) {
        if (cs__topics_exist(c->producer, c->brokers, names, 1) == CS_OK) return CS_OK;
        usleep(100 * 1000);
    }
    return cs__fail(CS_ERR_TIMEOUT, "create topic %s: not visible in metadata after 10 s", topic);
}

cs_err cs_test_produce(cs_test_cluster *c, const char *topic, int32_t partition, const void *key, size_t key_len,
                       const void *value, size_t value_len, int64_t *offset_out) {
    produce_result r = {0};
    pthread_mutex_lock(&c->lock);
    rd_kafka_resp_err_t err = rd_kafka_producev(
        c->producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
        RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_VALUE((void *)value, value_len),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&r), RD_KAFKA_V_END);
    if (!err) {
        while (!r.done) rd_kafka_poll(c->producer, 100);
        err = r.err;
    }
    pthread_mutex_unlock(&c->lock);
    if (err) return cs__fail(CS_ERR_KAFKA, "produce to %s: %s", topic, rd_kafka_err2str(err));
    if (offset_out) *offset_out = r.offset;
    return CS_OK;
}

cs_err cs_test_produce_many(cs_test_cluster *c, const char *topic, const char *prefix, int count) {
    char key[32], value[256];
    pthread_mutex_lock(&c->lock);
    atomic_store(&bulk_failures, 0);
    for (int i = 0; i < count; i++) {
        int kl = snprintf(key, sizeof key, "%d", i);
        int vl = snprintf(value, sizeof value, "%s%d", prefix, i);
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(c->producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, (size_t)kl),
                                        RD_KAFKA_V_VALUE(value, (size_t)vl), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                        RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(c->producer, 10);
        if (err) {
            pthread_mutex_unlock(&c->lock);
            return cs__fail(CS_ERR_KAFKA, "produce to %s: %s", topic, rd_kafka_err2str(err));
        }
    }
    rd_kafka_resp_err_t ferr = rd_kafka_flush(c->producer, 30000);
    int failures = atomic_load(&bulk_failures);
    pthread_mutex_unlock(&c->lock);
    if (ferr || failures)
        return cs__fail(CS_ERR_KAFKA, "produce to %s: %d records failed, flush: %s", topic, failures,
                        rd_kafka_err2str(ferr));
    return CS_OK;
}

cs_err cs_test_end_offset(cs_test_cluster *c, const char *topic, int32_t partition, int64_t *end) {
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(c->producer, topic, partition, &lo, &hi, 10000);
    if (err) return cs__fail(CS_ERR_KAFKA, "end offset of %s/%d: %s", topic, (int)partition, rd_kafka_err2str(err));
    *end = hi;
    return CS_OK;
}

cs_err cs_test_committed(cs_test_cluster *c, const char *group, const char *topic, int32_t partition, int64_t *offset) {
    rd_kafka_t *rk = cs__committed_reader(c->brokers, group, NULL);
    if (!rk) return CS_ERR_KAFKA;
    cs_err err = cs__read_committed(rk, group, topic, partition, offset);
    rd_kafka_destroy(rk);
    return err;
}

cs_err cs_test_wait_committed(cs_test_cluster *c, const char *group, const char *topic, int32_t partition,
                              int64_t at_least, int timeout_ms) {
    rd_kafka_t *rk = cs__committed_reader(c->brokers, group, NULL);
    if (!rk) return CS_ERR_KAFKA;
    int64_t deadline = cs__now_ms() + timeout_ms, off = -1;
    cs_err err = CS_OK;
    while ((err = cs__read_committed(rk, group, topic, partition, &off)) == CS_OK && off < at_least &&
           cs__now_ms() < deadline)
        usleep(20 * 1000);
    rd_kafka_destroy(rk);
    if (err) return err;
    if (off < at_least)
        return cs__fail(CS_ERR_TIMEOUT, "group %s %s/%d: committed %lld, expected >= %lld within %d ms", group, topic,
                        (int)partition, (long long)off, (long long)at_least, timeout_ms);
    return CS_OK;
}

cs_err cs_test_app_wait_idle(cs_app *app, int timeout_ms) {
    int64_t deadline = cs__now_ms() + timeout_ms;
    while (!cs__app_idle(app)) {
        if (cs__now_ms() >= deadline)
            return cs__fail(CS_ERR_TIMEOUT, "app %s not idle within %d ms", cs_app_name(app), timeout_ms);
        usleep(20 * 1000);
    }
    return CS_OK;
}

/* One of the running consumer's counters (0 while none runs), read under
 * the subscription's stats lock, which keeps the consumer from going away. */
static uint64_t consumer_counter(const cs_sub *s, uint64_t (*counter)(cs_consumer *)) {
    cs_sub *m = (cs_sub *)s; /* the lock is not part of the value */
    pthread_mutex_lock(&m->stats_lock);
    uint64_t v = s->consumer ? counter(s->consumer) : 0;
    pthread_mutex_unlock(&m->stats_lock);
    return v;
}

uint64_t cs_test_sub_commit_ticks(const cs_sub *s) { return consumer_counter(s, cs__consumer_commit_ticks); }
uint64_t cs_test_sub_sheds(const cs_sub *s) { return consumer_counter(s, cs__consumer_sheds); }
uint64_t cs_test_sub_moves_back(const cs_sub *s) { return consumer_counter(s, cs__consumer_moves_back); }
uint64_t cs_test_sub_taken(const cs_sub *s) { return consumer_counter(s, cs__consumer_taken); }

cs_err cs_test_sub_fail_refetches(cs_sub *s, unsigned n) {
    if (!s) return cs__fail(CS_ERR_ARG, "cs_test_sub_fail_refetches: subscription is NULL");
    pthread_mutex_lock(&s->stats_lock);
    cs_consumer *c = s->consumer;
    if (c) cs__consumer_fail_refetches(c, n);
    pthread_mutex_unlock(&s->stats_lock);
    if (!c) return cs__fail(CS_ERR_STATE, "cs_test_sub_fail_refetches(%s): the subscription is not running", s->name);
    return CS_OK;
}

void cs_test_app_crash(cs_app *app) {
    cs__app_crash(app);
    cs_app_destroy(app);
}
