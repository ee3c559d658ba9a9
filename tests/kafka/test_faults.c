/* test_faults.c — a Tracked service under the faults librdkafka 2.0.2's mock
 * cluster can inject: failing Fetch, OffsetCommit, Produce and JoinGroup
 * requests, brokers going down and up (shorter and longer than the session
 * timeout), a group coordinator and partition leaders moving, slow brokers,
 * and a topic whose metadata says it does not exist.
 *
 * Each test runs the service on a 3-broker embedded cluster, injects the fault
 * while records flow, and asserts that the service recovers by itself: every
 * record is handled at least once (0 lost), the committed position reaches
 * the end of every partition (a failed commit is retried, never skipped), and
 * failed commits are reported in commit_failures. Duplicates are allowed (a
 * record handled again after a fault is the Tracked contract) and printed.
 *
 * Each test also shows that its fault took effect, or its recovery proves
 * nothing: injected errors are pushed onto the broker that must receive the
 * requests (leaders and the group coordinator are placed, not left to the
 * mock's random choice) and must all have been met; the rebalance hooks count
 * revokes and assigns (the 8 s outage evicts the member, the 2 s one does
 * not); a probe (a "no error" answer pushed like an error) shows that the
 * member heartbeats to a moved coordinator, and fetches from moved leaders;
 * records produced to slow brokers take at least the delay to be acknowledged.
 * Waits are for conditions with generous timeouts; the only sleeps hold a
 * fault in place for a while, and the only duration asserted is that lower
 * bound (a slow machine can only make it longer).
 * Embedded cluster only (tests/CMakeLists.txt): the faults are the mock's. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/main.h"

enum { BROKERS = 3, PARTS = 4, MAXOFF = 2048, WAIT_MS = 90000 };
/* The broker that coordinates every service group here (service_init). */
enum { COORDINATOR = 1 };

/* Kafka error codes (the protocol's numbers; librdkafka's names in comments). */
enum {
    UNKNOWN_TOPIC_OR_PART = 3,
    NOT_LEADER = 6, /* NOT_LEADER_FOR_PARTITION */
    REQUEST_TIMED_OUT = 7,
    MSG_SIZE_TOO_LARGE = 10,
    OFFSET_METADATA_TOO_LARGE = 12,
    COORDINATOR_LOAD_IN_PROGRESS = 14,
    COORDINATOR_NOT_AVAILABLE = 15,
    NOT_COORDINATOR = 16,
    NOT_ENOUGH_REPLICAS = 19,
    REBALANCE_IN_PROGRESS = 27,
    TRANSPORT = -195, /* librdkafka's _TRANSPORT: the mock drops the connection */
};

/* Kafka API keys. */
enum {
    API_PRODUCE = 0,
    API_FETCH = 1,
    API_OFFSET_COMMIT = 8,
    API_JOIN_GROUP = 11,
    API_HEARTBEAT = 12,
    API_SYNC_GROUP = 14
};

typedef struct service {
    char topic[128], group[160], replies[160];
    _Atomic int assigns, revokes; /* hook calls with partitions of the topic */
    cst_seen *seen;               /* source records handled */
    cst_seen *replied;            /* replies read back from the reply topic */
    int64_t end[PARTS];           /* records produced per partition */
    cs_app *app, *reader;
    cs_sub *sub;
} service;

static cs_outcome handle(cs_delivery *d, void *user) {
    service *s = user;
    cst_seen_add(s->seen, cs_delivery_partition(d), cs_delivery_offset(d));
    if (s->replies[0]) {
        /* the reply names its source, so the reader can tell which ones arrived */
        char key[48];
        int n = snprintf(key, sizeof key, "%d:%lld", (int)cs_delivery_partition(d), (long long)cs_delivery_offset(d));
        if (cs_delivery_reply(d, key, (size_t)n, "done", 4) != CS_OK) return CS_RETRY;
    }
    return CS_ACK;
}

static cs_outcome read_reply(cs_delivery *d, void *user) {
    service *s = user;
    size_t len;
    const char *key = cs_delivery_key(d, &len);
    char buf[48];
    if (!key || len >= sizeof buf) return CS_ACK;
    memcpy(buf, key, len);
    buf[len] = '\0';
    int p;
    long long o;
    if (sscanf(buf, "%d:%lld", &p, &o) == 2) cst_seen_add(s->replied, p, o);
    return CS_ACK;
}

static void count_assign(cs_sub *sub, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)sub, (void)topic, (void)partitions, (void)n;
    atomic_fetch_add(&((service *)user)->assigns, 1);
}

static void count_revoke(cs_sub *sub, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)sub, (void)topic, (void)partitions, (void)n;
    atomic_fetch_add(&((service *)user)->revokes, 1);
}

/* Partition p of topic led by broker first + p % count. */
static void place_leaders(const char *topic, int first, int count) {
    for (int p = 0; p < PARTS; p++) CST_OK(cs_test_partition_set_leader(cst_cluster, topic, p, first + p % count));
}

/* The coordinator of the service's group is COORDINATOR, and partition p of its
 * topic is led by broker 1 + p % 3 (1 leads 0 and 3): the tests know which
 * broker receives which request. */
static void service_init(service *s, const char *name, bool with_replies) {
    memset(s, 0, sizeof *s);
    cst_fresh(name, PARTS, s->topic, s->group, sizeof s->topic);
    s->seen = cst_seen_new(PARTS, MAXOFF);
    s->replied = cst_seen_new(PARTS, MAXOFF);
    place_leaders(s->topic, 1, BROKERS);
    CST_OK(cs_test_group_set_coordinator(cst_cluster, s->group, COORDINATOR));
    if (with_replies) {
        snprintf(s->replies, sizeof s->replies, "%s.replies", s->topic);
        CST_OK(cs_test_topic_create(cst_cluster, s->replies, PARTS));
        place_leaders(s->replies, 1, BROKERS);
    }
}

static void service_start(service *s) {
    s->app = cs_app_new("faults-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    s->sub = cs_kafka_subscribe(k, s->topic, handle, s);
    assert_non_null(s->sub);
    CST_OK(cs_sub_group(s->sub, s->group));
    CST_OK(cs_sub_commit_mode(s->sub, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s->sub, 2));
    CST_OK(cs_sub_commit_interval_ms(s->sub, 50));
    /* Back within half a second of a broker's return: librdkafka's reconnect
     * backoff grows towards 10 s by default, which stretched a 2 s outage past
     * the 6 s session timeout (seen: the member was evicted). */
    CST_OK(cs_kafka_config(k, "reconnect.backoff.max.ms", "500"));
    CST_OK(cs_sub_on_assign(s->sub, count_assign, s));
    CST_OK(cs_sub_on_revoke(s->sub, count_revoke, s));
    if (s->replies[0]) CST_OK(cs_sub_reply(s->sub, s->replies, 5000));
    CST_OK(cs_app_add_kafka(s->app, k));
    CST_OK(cs_app_start(s->app));
    if (s->replies[0]) {
        s->reader = cs_app_new("faults-reader", "1.0");
        cs_kafka *rk = cs_test_kafka_new(cst_cluster);
        char group[200];
        snprintf(group, sizeof group, "%s-reader", s->group);
        cs_sub *r = cs_kafka_subscribe(rk, s->replies, read_reply, s);
        assert_non_null(r);
        CST_OK(cs_sub_group(r, group));
        CST_OK(cs_sub_start_at(r, CS_START_EARLIEST));
        CST_OK(cs_app_add_kafka(s->reader, rk));
        CST_OK(cs_app_start(s->reader));
    }
}

/* Produces n records over the partitions, one at a time (each waits for its
 * delivery report). Returns the shortest time one took, in ms. */
static int64_t produce(service *s, int n) {
    int64_t shortest = INT64_MAX;
    for (int i = 0; i < n; i++) {
        int32_t p = i % PARTS;
        int64_t off, start = cst_now_ms();
        CST_OK(cs_test_produce(cst_cluster, s->topic, p, NULL, 0, "payout", 6, &off));
        int64_t took = cst_now_ms() - start;
        if (took < shortest) shortest = took;
        assert_true(off < MAXOFF);
        if (off + 1 > s->end[p]) s->end[p] = off + 1;
    }
    return shortest;
}

static bool all_in(cst_seen *seen, const int64_t *end) {
    for (int p = 0; p < PARTS; p++)
        for (int64_t o = 0; o < end[p]; o++)
            if (cst_seen_count(seen, p, o) == 0) return false;
    return true;
}

static bool all_handled(void *arg) {
    service *s = arg;
    return all_in(s->seen, s->end);
}

static bool all_replied(void *arg) {
    service *s = arg;
    return all_in(s->replied, s->end);
}

/* 0 lost: every record produced so far handled (and replied to, with replies),
 * and the committed position at the end of every partition. */
static void expect_recovered(service *s, const char *fault) {
    if (!cst_wait(all_handled, s, WAIT_MS)) {
        for (int p = 0; p < PARTS; p++)
            for (int64_t o = 0; o < s->end[p]; o++)
                if (cst_seen_count(s->seen, p, o) == 0)
                    print_error("%s: %d/%lld never handled\n", fault, p, (long long)o);
        fail_msg("%s: records lost (never handled) after %d s", fault, WAIT_MS / 1000);
    }
    if (s->replies[0] && !cst_wait(all_replied, s, WAIT_MS))
        fail_msg("%s: a handled record's reply never arrived", fault);
    for (int p = 0; p < PARTS; p++) {
        cs_err err = cs_test_wait_committed(cst_cluster, s->group, s->topic, p, s->end[p], WAIT_MS);
        if (err) {
            int64_t c = -1;
            cs_test_committed(cst_cluster, s->group, s->topic, p, &c);
            fail_msg("%s: partition %d committed %lld, end %lld: a commit was skipped", fault, p, (long long)c,
                     (long long)s->end[p]);
        }
    }
}

static void service_stop(service *s, const char *fault) {
    cs_sub_stats st;
    cs_sub_stats_get(s->sub, &st);
    size_t produced = 0;
    for (int p = 0; p < PARTS; p++) produced += (size_t)s->end[p];
    printf("%s: produced %zu, handled %zu (%zu distinct), commits %llu, commit failures %llu, retried %llu, "
           "assigns %d, revokes %d\n",
           fault, produced, cst_seen_total(s->seen), cst_seen_distinct(s->seen), (unsigned long long)st.commits,
           (unsigned long long)st.commit_failures, (unsigned long long)st.retried, atomic_load(&s->assigns),
           atomic_load(&s->revokes));
    if (s->reader) {
        CST_OK(cs_app_stop(s->reader));
        cs_app_destroy(s->reader);
    }
    CST_OK(cs_app_stop(s->app));
    cs_app_destroy(s->app);
    cst_seen_free(s->seen);
    cst_seen_free(s->replied);
}

static uint64_t commit_failures(service *s) {
    cs_sub_stats st;
    cs_sub_stats_get(s->sub, &st);
    return st.commit_failures;
}

static bool has_commit_failures(void *arg) { return commit_failures(arg) > 0; }

/* Pushes errors onto the requests of api_key that broker receives. */
static void push_errors(int broker, int api_key, size_t n, const int *errors) {
    CST_OK(cs_test_broker_push_request_errors(cst_cluster, broker, api_key, n, errors));
}

/* Every error pushed onto broker for api_key was met by a request: the fault
 * took effect. Called once the service recovered, which needed requests to
 * that broker to succeed again, so none may be left. */
static void expect_errors_met(int broker, int api_key, const char *fault) {
    size_t left = 0;
    CST_OK(cs_test_broker_request_errors_left(cst_cluster, broker, api_key, &left));
    if (left) fail_msg("%s: %zu injected errors for API %d never reached broker %d", fault, left, api_key, broker);
}

typedef struct errors_at {
    int broker, api_key;
} errors_at;

static bool errors_met(void *arg) {
    errors_at *e = arg;
    size_t left = 1;
    return cs_test_broker_request_errors_left(cst_cluster, e->broker, e->api_key, &left) == CS_OK && left == 0;
}

/* The same for requests that nothing in the test waits for (heartbeats):
 * waits for them, bounded. */
static void wait_errors_met(int broker, int api_key, const char *fault) {
    errors_at e = {broker, api_key};
    if (!cst_wait(errors_met, &e, WAIT_MS))
        fail_msg("%s: injected errors for API %d never reached broker %d within %d s", fault, api_key, broker,
                 WAIT_MS / 1000);
}

/* The first half flows normally (the service is assigned and committing), the
 * fault is injected, the second half is produced into it. */
static void warm_up(service *s) {
    service_start(s);
    produce(s, 100);
    expect_recovered(s, "warm-up");
}

/* ---- failing requests ---- */

static void fetch_errors(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-fetch", false);
    warm_up(&s);
    const int errors[] = {NOT_LEADER, REQUEST_TIMED_OUT, TRANSPORT, UNKNOWN_TOPIC_OR_PART, NOT_LEADER, TRANSPORT};
    /* onto broker 1, leader of partitions 0 and 3: their records come only
     * once it answers a fetch again */
    push_errors(1, API_FETCH, 6, errors);
    produce(&s, 200);
    expect_recovered(&s, "fetch errors");
    expect_errors_met(1, API_FETCH, "fetch errors");
    service_stop(&s, "fetch errors");
}

/* Commits fail after the records are settled: the failed position must be
 * sent again, and each failure counted. */
static void offset_commit_errors(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-commit", false);
    warm_up(&s);
    /* errors librdkafka hands back to the application (it retries none of them itself) */
    const int errors[] = {OFFSET_METADATA_TOO_LARGE, OFFSET_METADATA_TOO_LARGE, REQUEST_TIMED_OUT,
                          OFFSET_METADATA_TOO_LARGE, OFFSET_METADATA_TOO_LARGE};
    push_errors(COORDINATOR, API_OFFSET_COMMIT, 5, errors);
    produce(&s, 200);
    if (!cst_wait(has_commit_failures, &s, WAIT_MS)) fail_msg("commit errors: no failed commit was reported");
    expect_recovered(&s, "commit errors");
    expect_errors_met(COORDINATOR, API_OFFSET_COMMIT, "commit errors");
    service_stop(&s, "commit errors");
}

/* Coordinator errors and dropped connections on commits: librdkafka finds the
 * coordinator again and retries the commit itself, so an older commit can be
 * applied after a newer one. This caught cstream taking the newer one as
 * committed while the group held the older position (fixed in
 * cs__part_commit_done); several rounds make the reordering likely. */
static void offset_commit_coordinator_errors(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-commit-coord", false);
    warm_up(&s);
    const int errors[] = {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, TRANSPORT, COORDINATOR_LOAD_IN_PROGRESS,
                          REQUEST_TIMED_OUT};
    for (int round = 0; round < 4; round++) {
        push_errors(COORDINATOR, API_OFFSET_COMMIT, 5, errors);
        produce(&s, 100);
        expect_recovered(&s, "commit coordinator errors");
        expect_errors_met(COORDINATOR, API_OFFSET_COMMIT, "commit coordinator errors");
    }
    service_stop(&s, "commit coordinator errors");
}

/* Replies fail to publish: retriable errors are retried by librdkafka, a
 * permanent one fails the delivery report and the source record is retried,
 * so every source ends up with its reply before it is committed. */
static void produce_errors(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-produce", true);
    /* The input on brokers 2 and 3, the replies on broker 1: only the
     * service's replies meet the errors pushed onto broker 1, and every one
     * produced after the push does. */
    place_leaders(s.topic, 2, 2);
    place_leaders(s.replies, 1, 1);
    warm_up(&s);
    if (!cst_wait(all_replied, &s, WAIT_MS)) fail_msg("warm-up: replies missing");
    const int errors[] = {MSG_SIZE_TOO_LARGE,  NOT_LEADER,        TRANSPORT,
                          NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, MSG_SIZE_TOO_LARGE};
    push_errors(1, API_PRODUCE, 6, errors);
    produce(&s, 200);
    expect_recovered(&s, "produce errors");
    expect_errors_met(1, API_PRODUCE, "produce errors");
    cs_sub_stats st;
    cs_sub_stats_get(s.sub, &st);
    /* MSG_SIZE_TOO_LARGE is permanent: some reply failed and its source came back */
    assert_true(st.retried > 0);
    service_stop(&s, "produce errors");
}

/* The group join fails several times before the service is ever assigned. */
static void join_group_errors(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-join", false);
    produce(&s, 100);
    const int join[] = {COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, TRANSPORT, COORDINATOR_NOT_AVAILABLE};
    const int sync[] = {REBALANCE_IN_PROGRESS, TRANSPORT};
    push_errors(COORDINATOR, API_JOIN_GROUP, 4, join);
    push_errors(COORDINATOR, API_SYNC_GROUP, 2, sync);
    service_start(&s);
    expect_recovered(&s, "join errors");
    /* Assigned, so a join and a sync succeeded after every error was met. */
    expect_errors_met(COORDINATOR, API_JOIN_GROUP, "join errors");
    expect_errors_met(COORDINATOR, API_SYNC_GROUP, "sync errors");
    assert_true(atomic_load(&s.assigns) >= 1);
    produce(&s, 100);
    expect_recovered(&s, "join errors, after");
    service_stop(&s, "join errors");
}

/* ---- brokers ---- */

static void all_brokers(int down) {
    for (int b = 1; b <= BROKERS; b++) CST_OK(cs_test_broker_set_down(cst_cluster, b, down));
}

/* An outage shorter than the session timeout (6 s): the member keeps its
 * partitions. The sleep only holds the outage; nothing is timed. */
static void brokers_down_briefly(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-down", false);
    warm_up(&s);
    int assigns = atomic_load(&s.assigns), revokes = atomic_load(&s.revokes);
    all_brokers(1);
    usleep(2000 * 1000);
    all_brokers(0);
    produce(&s, 200);
    expect_recovered(&s, "brokers down 2 s");
    /* The member was not evicted: no revoke, no new assignment. */
    assert_int_equal(atomic_load(&s.revokes), revokes);
    assert_int_equal(atomic_load(&s.assigns), assigns);
    service_stop(&s, "brokers down 2 s");
}

/* An outage longer than the session timeout: the group drops the member, the
 * service joins again by itself and carries on from the committed positions. */
static void brokers_down_past_session_timeout(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-down-long", false);
    warm_up(&s);
    int assigns = atomic_load(&s.assigns), revokes = atomic_load(&s.revokes);
    all_brokers(1);
    usleep(8000 * 1000);
    all_brokers(0);
    produce(&s, 200);
    expect_recovered(&s, "brokers down 8 s");
    /* Evicted: its partitions were revoked (lost), and it was assigned again. */
    if (atomic_load(&s.revokes) <= revokes || atomic_load(&s.assigns) <= assigns)
        fail_msg("brokers down 8 s: revokes %d -> %d, assigns %d -> %d: the member was not evicted", revokes,
                 atomic_load(&s.revokes), assigns, atomic_load(&s.assigns));
    service_stop(&s, "brokers down 8 s");
}

/* An outage that outlasts the watchdog for a lost session (src/kafka/
 * consumer.c, group_stalled: twice the session, 20 s here, without a member id): the fetch thread
 * creates the consumer again (counted in rejoins), and once the brokers are
 * back the service carries on: nothing lost. The watchdog is there for
 * librdkafka 2.0.2 staying stuck after a broker SIGKILL (#4970), which only a
 * real cluster brings out; here an outage that lasts until it fires shows
 * that it does and that the recreated consumer joins and resumes. */
static bool recreated(void *arg) {
    cs_sub_stats st;
    cs_sub_stats_get(((service *)arg)->sub, &st);
    return st.rejoins >= 1;
}

static void lost_session_not_back_recreates_the_consumer(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-stalled", false);
    warm_up(&s);
    all_brokers(1);
    /* The outage lasts until the watchdog has fired: the session (6 s) plus
     * the watchdog's 20 s (twice the session, at least 20 s), bounded at
     * twice that. */
    bool fired = cst_wait(recreated, &s, 52000);
    all_brokers(0);
    if (!fired) fail_msg("brokers down: the consumer was not created again within 52 s");
    produce(&s, 200);
    expect_recovered(&s, "brokers down until the consumer was created again");
    service_stop(&s, "brokers down until the consumer was created again");
}

/* The group's coordinator moves to another broker, twice: the member finds
 * the new one by itself, and commits and fetching go on. */
static void coordinator_moves(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-coord", false); /* coordinator: broker 1 (COORDINATOR) */
    warm_up(&s);
    /* A probe on the new coordinator: a "no error" answer its first heartbeat
     * meets. The old one answers heartbeats NOT_COORDINATOR, so the member
     * finds the new one (2.0.2's mock accepts an OffsetCommit on any broker:
     * commits alone would not show the move). */
    const int probe[] = {0};
    push_errors(2, API_HEARTBEAT, 1, probe);
    CST_OK(cs_test_group_set_coordinator(cst_cluster, s.group, 2));
    produce(&s, 100);
    expect_recovered(&s, "coordinator moved to 2");
    wait_errors_met(2, API_HEARTBEAT, "coordinator moved to 2");
    push_errors(3, API_HEARTBEAT, 1, probe);
    CST_OK(cs_test_group_set_coordinator(cst_cluster, s.group, 3));
    produce(&s, 100);
    expect_recovered(&s, "coordinator moved to 3");
    wait_errors_met(3, API_HEARTBEAT, "coordinator moved to 3");
    service_stop(&s, "coordinator moves");
}

/* Partition leaders move, twice, each time onto brokers that led none of the
 * topic's partitions: the consumer follows them by itself. A probe (a "no
 * error" answer pushed like an error) on each new leader shows it: librdkafka
 * sends a Fetch only to the broker it takes for a partition's leader, so the
 * idle brokers receive none until the consumer follows the move. Every record
 * produced after a move is handled, and 2.0.2's mock answers a Fetch from any
 * broker but the leader (or a follower, none here) NOT_LEADER_FOR_PARTITION
 * (rd_kafka_mock_handle_Fetch), so those records came through a Fetch to a
 * new leader: its probe was met before expect_recovered returns. Without the
 * move the records are handled all the same, from the old leaders; only the
 * probes tell the two apart. */
static void leaders_move(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-leader", false);
    place_leaders(s.topic, 1, 2); /* 1 leads 0 and 2, 2 leads 1 and 3; 3 leads nothing */
    warm_up(&s);
    const int probe[] = {0};
    push_errors(3, API_FETCH, 1, probe);
    place_leaders(s.topic, 3, 1); /* all on 3 */
    produce(&s, 100);
    expect_recovered(&s, "leaders moved to 3");
    expect_errors_met(3, API_FETCH, "leaders moved to 3");
    push_errors(1, API_FETCH, 1, probe);
    push_errors(2, API_FETCH, 1, probe);
    place_leaders(s.topic, 1, 2); /* back on 1 and 2, idle since the first move */
    produce(&s, 100);
    expect_recovered(&s, "leaders moved back to 1 and 2");
    expect_errors_met(1, API_FETCH, "leaders moved back to 1 and 2");
    expect_errors_met(2, API_FETCH, "leaders moved back to 1 and 2");
    service_stop(&s, "leaders move");
}

enum { RTT_MS = 300 };

/* Every response RTT_MS late: fetches and commits slow down, nothing is lost
 * or left uncommitted. The delay took effect: the mock holds back each
 * response of a broker, to any client, until RTT_MS after it was made
 * (rd_kafka_mock_connection_write_out), so each record the test produces
 * (to partitions led by all three brokers) waits at least RTT_MS for its
 * delivery report, as the service's fetches and commits wait for theirs. A
 * lower bound only: a slow machine makes it longer, never shorter. */
enum { SLOW_RECORDS = 24 };

static void slow_brokers(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-rtt", false);
    warm_up(&s);
    for (int b = 1; b <= BROKERS; b++) CST_OK(cs_test_broker_set_rtt(cst_cluster, b, RTT_MS));
    /* 24: each of the 4 partitions 6 times; each produce waits for its report (at
     * least RTT_MS): the slow phase costs seconds, not a minute. */
    int64_t shortest = produce(&s, SLOW_RECORDS);
    if (shortest < RTT_MS)
        fail_msg("rtt %d ms: a record was acknowledged after %lld ms: the brokers were not slow", RTT_MS,
                 (long long)shortest);
    printf("rtt %d ms: the quickest of %d records was acknowledged after %lld ms\n", RTT_MS, SLOW_RECORDS,
           (long long)shortest);
    expect_recovered(&s, "rtt 300 ms");
    for (int b = 1; b <= BROKERS; b++) CST_OK(cs_test_broker_set_rtt(cst_cluster, b, 0));
    produce(&s, 100);
    expect_recovered(&s, "rtt back to 0");
    service_stop(&s, "slow brokers");
}

/* ---- a topic that goes away ---- */

typedef struct topic_gauge {
    service *s;
    int want;
} topic_gauge;

/* cstream_topic_unavailable of the service's topic reads want. */
static bool topic_gauge_is(void *arg) {
    topic_gauge *g = arg;
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\"", g->s->topic, g->s->group,
             g->s->topic);
    double v;
    return cst_metric_value(g->s->app, "cstream_topic_unavailable", labels, &v) && (int)v == g->want;
}

/* The metadata of the subscribed topic answers UNKNOWN_TOPIC_OR_PARTITION, as
 * for a deleted topic (the mock cannot delete one; tests/real/test_bad_inputs.c
 * deletes it on the real broker): the topic is reported unavailable, its
 * partitions go, and when it answers again they come back and every record is
 * handled and committed. The stop is bounded although librdkafka 2.0.2 may not
 * finish destroying the consumer (src/kafka/consumer/consumer.c, destroy_handle). */
static void topic_reported_deleted(void **state) {
    (void)state;
    service s;
    service_init(&s, "faults-topic", false);
    warm_up(&s);
    cst_capture cap;
    cst_capture_start(&cap);
    CST_OK(cs_test_topic_set_error(cst_cluster, s.topic, UNKNOWN_TOPIC_OR_PART));
    topic_gauge gone = {&s, 1}, back = {&s, 0};
    bool reported = cst_wait(topic_gauge_is, &gone, WAIT_MS);
    char *log = cst_capture_stop(&cap);
    fputs(log, stderr);
    if (!reported) fail_msg("topic %s never reported unavailable", s.topic);
    /* The structured path: librdkafka's error record names the topic in a
     * field (m->rkt), and cstream took it from there, not from the reason's
     * text (consumer_errors.c); its ERROR line names the topic. */
    /* librdkafka reports either UNKNOWN_TOPIC_OR_PART or, once the topic
     * left its metadata, _UNKNOWN_PARTITION: both as error records. */
    char want[256];
    snprintf(want, sizeof want, "topic=%s error=", s.topic);
    const char *line = strstr(log, "subscribed topic not available");
    const char *end = line ? strchr(line, '\n') : NULL;
    const char *topic = line ? strstr(line, want) : NULL, *source = line ? strstr(line, " source=error_record ") : NULL;
    if (!topic || !source || (end && (topic > end || source > end)))
        fail_msg("no ERROR line 'subscribed topic not available ... %s... source=error_record' in the log", want);
    free(log);
    CST_OK(cs_test_topic_set_error(cst_cluster, s.topic, 0));
    produce(&s, 100);
    expect_recovered(&s, "topic reported deleted");
    if (!cst_wait(topic_gauge_is, &back, WAIT_MS)) fail_msg("topic %s never reported available again", s.topic);
    service_stop(&s, "topic reported deleted");
}

static int setup(void **state) {
    (void)state;
    if (cs_test_cluster_new_embedded(BROKERS, &cst_cluster) != CS_OK) {
        fprintf(stderr, "fault cluster: %s\n", cs_errmsg());
        return -1;
    }
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fetch_errors),
        cmocka_unit_test(offset_commit_errors),
        cmocka_unit_test(offset_commit_coordinator_errors),
        cmocka_unit_test(produce_errors),
        cmocka_unit_test(join_group_errors),
        cmocka_unit_test(brokers_down_briefly),
        cmocka_unit_test(brokers_down_past_session_timeout),
        cmocka_unit_test(lost_session_not_back_recreates_the_consumer),
        cmocka_unit_test(coordinator_moves),
        cmocka_unit_test(leaders_move),
        cmocka_unit_test(slow_brokers),
        cmocka_unit_test(topic_reported_deleted),
    };
    /* CS_FAULT_TEST=<name or pattern>: run only the matching tests (cmocka's filter) */
    if (getenv("CS_FAULT_TEST")) cmocka_set_test_filter(getenv("CS_FAULT_TEST"));
    return cmocka_run_group_tests(tests, setup, cst_cluster_teardown);
}
