/* test_fetch.c — the consumer's fetch path (issue #18, docs/fetch-path-design.md
 * part 4), on the embedded cluster and on the real broker:
 *
 * - offset continuity per partition under churn (design test 1): a second
 *   member joins and leaves twice (eager and cooperative-sticky), Tracked
 *   records are retried (at once and after a delay), a Transactional window
 *   aborts and rewinds. Every offset from where a member's assignment starts
 *   up is handed out, none skipped; a record comes again only as a retry, or
 *   from where a new assignment or a rewind starts;
 * - a stuck partition does not stall the others (design test 3): partition 0
 *   retries forever, the other partitions reach their end, then partition 0
 *   continues with no gap;
 * - reassignment after a pause (design test 7): a stuck partition, paused,
 *   revoked and assigned again to the same member, is fetched again;
 * - a partition whose fetch position librdkafka moves back (an offset reset
 *   after a truncated log; here a seek on the handle) is read again from
 *   there, none of it dropped as a repeat;
 * - with the fetch buffer (cs_sub_fetch_buffer_bytes): the
 *   consumer-wide bound (design test 2), the stuck-pause count and the bound
 *   in test 3, no 1 s stall at the bound (design test 4), and the gap counter
 *   of the continuity guard at 0 in test 1.
 *
 * The continuity check reads one log of events in the order they happened:
 * each member's assignment of a partition (the on_assign hook, which runs on
 * the fetch thread before any record of the new assignment is taken) and each
 * handler call (logged on entry; a partition's records run one at a time, in
 * its lane). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

/* ---- the event log and the continuity check ---------------------------------- */

enum { EV_ASSIGN, EV_DELIVER };

typedef struct event {
    int kind, member;
    int32_t partition;
    int64_t offset;
    bool retried; /* EV_DELIVER: the handler asked for this record again */
} event;

typedef struct evlog {
    pthread_mutex_t lock;
    event *ev;
    size_t n, cap;
} evlog;

static void log_init(evlog *l) {
    pthread_mutex_init(&l->lock, NULL);
    l->ev = NULL;
    l->n = l->cap = 0;
}

static void log_free(evlog *l) {
    free(l->ev);
    pthread_mutex_destroy(&l->lock);
}

static void log_add(evlog *l, event e) {
    pthread_mutex_lock(&l->lock);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4096;
        l->ev = realloc(l->ev, l->cap * sizeof *l->ev);
        if (!l->ev) abort();
    }
    l->ev[l->n++] = e;
    pthread_mutex_unlock(&l->lock);
}

enum { MAX_MEMBERS = 4, MAX_PARTS = 64 };

typedef struct continuity {
    long epochs;      /* assignments that handed out records */
    long restarts;    /* epochs that began below what was already handed out: re-reads after a revoke */
    long retries;     /* records handed out again after the handler asked for it */
    long rewinds;     /* re-reads inside an assignment (Transactional aborts) */
    long acked_skips; /* records not handed out again: an earlier owner settled them (the acked set) */
} continuity;

/* Every offset in [from, to) was handed out already. */
static bool handed_out_all(const bool *handled, int64_t from, int64_t to) {
    for (int64_t x = from; x < to; x++)
        if (!handled[x]) return false;
    return true;
}

/* Walks the log. Per (member, partition) assignment: the first record handed
 * out is at or below the first offset nobody was handed yet (no skip across a
 * handover), every later one is the next offset (no skip inside it), and an
 * offset comes again only as a retry the handler asked for or, when
 * allow_rewinds, as a rewind (a new run from there). At the end every offset
 * below ends[p] was handed out. Fails the test naming the first violation. */
static continuity check_continuity(evlog *l, int parts, const int64_t *ends, bool allow_rewinds) {
    continuity r = {0};
    int64_t next[MAX_MEMBERS][MAX_PARTS], prefix[MAX_PARTS] = {0};
    bool *handled[MAX_PARTS], *retry[MAX_MEMBERS][MAX_PARTS];
    assert_true(parts <= MAX_PARTS);
    for (int p = 0; p < parts; p++) {
        handled[p] = calloc((size_t)ends[p] + 1, 1);
        for (int m = 0; m < MAX_MEMBERS; m++) {
            next[m][p] = -1;
            retry[m][p] = calloc((size_t)ends[p] + 1, 1);
        }
    }
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < l->n; i++) {
        event *e = &l->ev[i];
        int m = e->member, p = e->partition;
        assert_true(m >= 0 && m < MAX_MEMBERS && p >= 0 && p < parts);
        if (e->kind == EV_ASSIGN) {
            next[m][p] = -1;
            memset(retry[m][p], 0, (size_t)ends[p] + 1);
            continue;
        }
        int64_t o = e->offset;
        if (o < 0 || o >= ends[p])
            fail_msg("partition %d: offset %lld handed out, the log ends at %lld", p, (long long)o, (long long)ends[p]);
        if (next[m][p] < 0) { /* the first record of this assignment */
            if (o > prefix[p])
                fail_msg("member %d, partition %d: its assignment starts at %lld, but %lld was never handed out "
                         "(skipped at a handover)",
                         m, p, (long long)o, (long long)prefix[p]);
            r.epochs++;
            if (handled[p][o]) r.restarts++;
            next[m][p] = o + 1;
        } else if (o == next[m][p]) {
            next[m][p]++;
        } else if (o > next[m][p] && handed_out_all(handled[p], next[m][p], o)) {
            /* Tracked's acked set (cs_sub_acked_set): records an earlier
             * owner settled above its committed position are handed to no
             * handler again; every one of them was handed out before. */
            r.acked_skips += o - next[m][p];
            next[m][p] = o + 1;
        } else if (o > next[m][p]) {
            fail_msg("member %d, partition %d: %lld handed out after %lld: %lld..%lld skipped (event %zu of %zu)", m, p,
                     (long long)o, (long long)next[m][p] - 1, (long long)next[m][p], (long long)o - 1, i, l->n);
        } else if (retry[m][p][o]) {
            r.retries++;
        } else if (allow_rewinds) {
            r.rewinds++;
            next[m][p] = o + 1;
        } else {
            fail_msg("member %d, partition %d: %lld handed out again in the same assignment, not asked for "
                     "(next was %lld)",
                     m, p, (long long)o, (long long)next[m][p]);
        }
        retry[m][p][o] = e->retried;
        handled[p][o] = true;
        while (prefix[p] < ends[p] && handled[p][prefix[p]]) prefix[p]++;
    }
    pthread_mutex_unlock(&l->lock);
    for (int p = 0; p < parts; p++) {
        if (prefix[p] < ends[p])
            fail_msg("partition %d: %lld was never handed out (end %lld)", p, (long long)prefix[p], (long long)ends[p]);
        free(handled[p]);
        for (int m = 0; m < MAX_MEMBERS; m++) free(retry[m][p]);
    }
    printf("continuity: %ld assignments handed out records, %ld restarted below what was handed out, %ld retries, "
           "%ld rewinds, %ld settled by an earlier owner and not handed out again\n",
           r.epochs, r.restarts, r.retries, r.rewinds, r.acked_skips);
    return r;
}

/* ---- members ---------------------------------------------------------------- */

typedef struct shared {
    evlog log;
    cs_commit_mode mode;
    _Atomic long distinct; /* records handed out for the first time */
    cst_seen *seen;
    int64_t max_offset;
} shared;

typedef struct member {
    shared *sh;
    int id;
    _Atomic int assigns;
    _Atomic long handled;
} member;

static void on_assign(cs_sub *s, const char *topic, const int32_t *parts, size_t n, void *user) {
    (void)s, (void)topic;
    member *m = user;
    for (size_t i = 0; i < n; i++)
        log_add(&m->sh->log, (event){.kind = EV_ASSIGN, .member = m->id, .partition = parts[i]});
    atomic_fetch_add(&m->assigns, 1);
}

/* Tracked: every 97th record asks to come back at once, every 89th after
 * 30 ms, the first time it is handed out (to any member). Everything else is acked. A
 * small pause per record keeps records flowing while members come and go. */
static cs_outcome churn_handler(cs_delivery *d, void *user) {
    member *m = user;
    int32_t p = cs_delivery_partition(d);
    int64_t o = cs_delivery_offset(d);
    bool first = cst_seen_count(m->sh->seen, p, o) == 0;
    cs_outcome out = CS_ACK;
    bool retried = false;
    if (m->sh->mode == CS_COMMIT_TRACKED && first && o % 97 == 5) {
        out = CS_RETRY;
        retried = true;
    } else if (m->sh->mode == CS_COMMIT_TRACKED && first && o % 89 == 7) {
        out = cs_delivery_retry_after(d, 30);
        retried = true;
    }
    log_add(&m->sh->log, (event){.kind = EV_DELIVER, .member = m->id, .partition = p, .offset = o, .retried = retried});
    if (first) atomic_fetch_add(&m->sh->distinct, 1);
    cst_seen_add(m->sh->seen, p, o);
    atomic_fetch_add(&m->handled, 1);
    usleep(1000); /* the handler's work: records flow for seconds, across the changes of members */
    return out;
}

static cs_app *start_member(const char *topic, const char *group, const char *strategy, member *m, cs_sub **out) {
    cs_app *app = cs_app_new("fetch-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, churn_handler, m);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, m->sh->mode));
    CST_OK(cs_sub_workers(s, 3));
    if (m->sh->mode == CS_COMMIT_TRACKED) CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_config(s, "partition.assignment.strategy", strategy));
    CST_OK(cs_sub_on_assign(s, on_assign, m));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (out) *out = s;
    return app;
}

typedef struct progress {
    shared *sh;
    long at_least;
} progress;

static bool reached(void *arg) {
    progress *g = arg;
    return atomic_load(&g->sh->distinct) >= g->at_least;
}

static bool member_assigned(void *arg) {
    member *m = arg;
    return atomic_load(&m->assigns) > 0;
}

static bool member_assigned_and_ran(void *arg) {
    member *m = arg;
    return atomic_load(&m->assigns) > 0 && atomic_load(&m->handled) > 0;
}

static void wait_progress(shared *sh, long at_least, const char *what) {
    progress g = {sh, at_least};
    if (!cst_wait(reached, &g, 120000))
        fail_msg("%s: %ld records handed out, expected %ld within 120 s", what, (long)atomic_load(&sh->distinct),
                 at_least);
}

/* Records are written in five chunks, one before each change of members, so
 * that every change happens while records are still to come. */
enum { CHURN_PARTS = 6, CHURN_CHUNK = 3000, CHURN_CHUNKS = 5 };

typedef struct churn {
    shared *sh;
    const char *topic;
    int chunks;
} churn;

static long produce_chunk(churn *c) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "c%d-", c->chunks++);
    CST_OK(cs_test_produce_many(cst_cluster, c->topic, prefix, CHURN_CHUNK));
    return (long)c->chunks * CHURN_CHUNK;
}

/* The premise of a change of members: records were still to come. */
static void assert_flowing(churn *c, long produced, const char *what) {
    long handed = atomic_load(&c->sh->distinct);
    printf("%s: %ld of %ld records handed out\n", what, handed, produced);
    if (handed >= produced) fail_msg("%s: every record was already handed out; the change did not meet records", what);
}

/* The gap counter of the continuity guard (cstream_fetch_offset_gaps_total,
 * by topic) and cs_sub_stats.gaps: 0 on a topic with no compaction and no
 * transactions. */
static void assert_no_gaps(cs_app *app, cs_sub *s, const char *topic, const char *group) {
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\"", topic, group, topic);
    double gaps = cst_metric(app, "cstream_fetch_offset_gaps_total", labels);
    double repeats = cst_metric(app, "cstream_fetch_offset_repeats_total", labels);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    printf("guard: gaps %.0f (stats %llu), repeats %.0f (stats %llu)\n", gaps, (unsigned long long)st.gaps, repeats,
           (unsigned long long)st.repeats);
    assert_true(gaps == 0); /* the series exists and says 0 */
    assert_int_equal(st.gaps, 0);
}

/* Member A consumes CHURN_PARTS partitions; member B joins, leaves, joins
 * again and leaves again while records flow. */
static void continuity_under_churn(cs_commit_mode mode, const char *strategy) {
    char topic[128], group[160];
    cst_fresh("fetch-churn", CHURN_PARTS, topic, group, sizeof topic);
    const long total = (long)CHURN_CHUNK * CHURN_CHUNKS;
    shared sh = {.mode = mode, .seen = cst_seen_new(CHURN_PARTS, total)};
    log_init(&sh.log);
    churn c = {&sh, topic, 0};
    member a = {.sh = &sh, .id = 0}, b1 = {.sh = &sh, .id = 1}, b2 = {.sh = &sh, .id = 2};
    long produced = produce_chunk(&c);
    cs_sub *sa;
    cs_app *app_a = start_member(topic, group, strategy, &a, &sa);
    wait_progress(&sh, produced / 2, "before the first join");

    produced = produce_chunk(&c);
    assert_flowing(&c, produced, "first join");
    cs_app *app_b = start_member(topic, group, strategy, &b1, NULL);
    /* B stops only once assigned: a cooperative-sticky member destroyed
     * before its first assignment aborts librdkafka 2.0.2 (design part 2).
     * It must also have run a record, but that is waited for only after the
     * next chunk: its partitions may be ones the other member had already
     * read to their end (and committed, Auto, at its revoke), and then only
     * the next chunk gives it something to run. */
    assert_true(cst_wait(member_assigned, &b1, 60000));
    produced = produce_chunk(&c);
    assert_flowing(&c, produced, "first leave");
    assert_true(cst_wait(member_assigned_and_ran, &b1, 60000));
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);

    wait_progress(&sh, produced - CHURN_CHUNK / 2, "after the first leave");
    produced = produce_chunk(&c);
    assert_flowing(&c, produced, "second join");
    app_b = start_member(topic, group, strategy, &b2, NULL);
    assert_true(cst_wait(member_assigned, &b2, 60000)); /* as for b1 */
    produced = produce_chunk(&c);
    assert_flowing(&c, produced, "second leave");
    assert_true(cst_wait(member_assigned_and_ran, &b2, 60000));
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);
    assert_int_equal(produced, total);

    int64_t ends[CHURN_PARTS];
    for (int p = 0; p < CHURN_PARTS; p++) CST_OK(cs_test_end_offset(cst_cluster, topic, p, &ends[p]));
    progress g = {&sh, total};
    if (!cst_wait(reached, &g, 120000)) {
        check_continuity(&sh.log, CHURN_PARTS, ends, false); /* names the first offset skipped, if one was */
        fail_msg("%ld of %ld records handed out within 120 s", (long)atomic_load(&sh.distinct), total);
    }
    for (int p = 0; p < CHURN_PARTS; p++) {
        if (cs_test_wait_committed(cst_cluster, group, topic, p, ends[p], 60000) != CS_OK)
            fail_msg("partition %d not committed to its end %lld: %s", p, (long long)ends[p], cs_errmsg());
    }
    continuity r = check_continuity(&sh.log, CHURN_PARTS, ends, false);
    assert_true(r.epochs > CHURN_PARTS); /* partitions did change hands */
    assert_no_gaps(app_a, sa, topic, group);
    CST_OK(cs_app_stop(app_a));
    cs_app_destroy(app_a);
    log_free(&sh.log);
    cst_seen_free(sh.seen);
}

static void tracked_continuity_eager(void **state) {
    (void)state;
    continuity_under_churn(CS_COMMIT_TRACKED, "range");
}

static void tracked_continuity_cooperative(void **state) {
    (void)state;
    continuity_under_churn(CS_COMMIT_TRACKED, "cooperative-sticky");
}

static void auto_continuity_eager(void **state) {
    (void)state;
    continuity_under_churn(CS_COMMIT_AUTO, "range");
}

/* Skipped on the embedded cluster from 7ab759c until #30: the second member,
 * once assigned, fetched at the committed offsets thousands of times and got
 * every Fetch answered empty (seen 3 times of 3 then, with Auto only). On
 * the audit-tests branch (after f5b7626) it did not come back: 5 runs of 5
 * on the embedded cluster and 2 of 2 on the real broker passed, every offset
 * handed out, guard gaps and repeats 0. The cause was not found (not bisected); the continuity check
 * names the first offset skipped if it returns. */
static void auto_continuity_cooperative(void **state) {
    (void)state;
    continuity_under_churn(CS_COMMIT_AUTO, "cooperative-sticky");
}

/* ---- Transactional: a rewind ------------------------------------------------ */

typedef struct txn {
    evlog log;
    cst_seen *seen;
} txn;

/* Partition 0's offset 40 asks, on its first run, to come back after 3 s; the
 * stall timeout is 500 ms, so its window aborts and the partition rewinds to
 * its committed position: a re-read inside the assignment. */
static cs_outcome txn_handler(cs_delivery *d, void *user) {
    txn *t = user;
    int32_t p = cs_delivery_partition(d);
    int64_t o = cs_delivery_offset(d);
    bool stall = p == 0 && o == 40 && cst_seen_count(t->seen, p, o) == 0;
    log_add(&t->log, (event){.kind = EV_DELIVER, .member = 0, .partition = p, .offset = o, .retried = stall});
    cst_seen_add(t->seen, p, o);
    return stall ? cs_delivery_retry_after(d, 3000) : CS_ACK;
}

static void txn_on_assign(cs_sub *s, const char *topic, const int32_t *parts, size_t n, void *user) {
    (void)s, (void)topic;
    for (size_t i = 0; i < n; i++)
        log_add(&((txn *)user)->log, (event){.kind = EV_ASSIGN, .member = 0, .partition = parts[i]});
}

typedef struct txn_done {
    cs_sub *s;
    txn *t;
    int64_t *ends;
} txn_done;

static bool txn_finished(void *arg) {
    txn_done *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->s, &st);
    /* The stalled record and the one after it ran again after the abort. */
    if (st.aborts < 1 || cst_seen_count(w->t->seen, 0, 40) < 2 || cst_seen_count(w->t->seen, 0, 41) < 2) return false;
    for (int p = 0; p < 2; p++)
        for (int64_t o = 0; o < w->ends[p]; o++)
            if (!cst_seen_count(w->t->seen, p, o)) return false;
    return true;
}

static void transactional_continuity_through_a_rewind(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-txn", 2, topic, group, sizeof topic);
    for (int p = 0; p < 2; p++) cst_produce_sized(topic, p, 300, 1);
    int64_t ends[2] = {300, 300};
    txn t = {.seen = cst_seen_new(2, 300)};
    log_init(&t.log);
    cs_app *app = cs_app_new("fetch-txn", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    CST_OK(cs_kafka_instance_id(k, group));
    cs_sub *s = cs_kafka_subscribe(k, topic, txn_handler, &t);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRANSACTIONAL));
    CST_OK(cs_sub_workers(s, 2));
    CST_OK(cs_sub_stall_timeout_ms(s, 500));
    CST_OK(cs_sub_on_assign(s, txn_on_assign, &t));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    txn_done w = {s, &t, ends};
    if (!cst_wait(txn_finished, &w, 60000))
        fail_msg("no abort, no re-read of 0@40 and 0@41, or not every record handed out, within 60 s");
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    continuity r = check_continuity(&t.log, 2, ends, true);
    printf("aborts %llu, transactions %llu\n", (unsigned long long)st.aborts, (unsigned long long)st.transactions);
    assert_true(r.rewinds >= 1);                   /* the premise: a rewind happened */
    assert_true((uint64_t)r.rewinds <= st.aborts); /* and re-reads come only from rewinds */
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    log_free(&t.log);
    cst_seen_free(t.seen);
}

/* ---- a stuck partition ------------------------------------------------------- */

enum { STUCK_PARTS = 4, STUCK_PER = 3000, VALUE_BYTES = 512 };

typedef struct stuck {
    evlog log;
    cst_seen *seen;
    _Atomic bool held; /* partition 0 asks for a retry, every time */
    _Atomic int assigns;
    int64_t ends[STUCK_PARTS];
} stuck;

static cs_outcome stuck_handler(cs_delivery *d, void *user) {
    stuck *k = user;
    int32_t p = cs_delivery_partition(d);
    int64_t o = cs_delivery_offset(d);
    bool retry = p == 0 && atomic_load(&k->held);
    log_add(&k->log, (event){.kind = EV_DELIVER, .member = 0, .partition = p, .offset = o, .retried = retry});
    cst_seen_add(k->seen, p, o);
    return retry ? cs_delivery_retry_after(d, 200) : CS_ACK;
}

static void stuck_on_assign(cs_sub *s, const char *topic, const int32_t *parts, size_t n, void *user) {
    (void)s, (void)topic;
    stuck *k = user;
    for (size_t i = 0; i < n; i++) log_add(&k->log, (event){.kind = EV_ASSIGN, .member = 0, .partition = parts[i]});
    atomic_fetch_add(&k->assigns, 1);
}

typedef struct parts_done {
    stuck *k;
    int from, to; /* partitions [from, to) */
} parts_done;

/* Every record of the partitions was handed out at least once. */
static bool parts_reached_end(void *arg) {
    parts_done *w = arg;
    for (int p = w->from; p < w->to; p++)
        for (int64_t o = w->k->ends[p]; o-- > 0;)
            if (!cst_seen_count(w->k->seen, p, o)) return false;
    return true;
}

/* `per` records of `bytes` each in each partition. */
static void produce_sized(const char *topic, int parts, int per, size_t bytes, stuck *k) {
    for (int p = 0; p < parts; p++) {
        cst_produce_sized(topic, p, per, bytes);
        CST_OK(cs_test_end_offset(cst_cluster, topic, p, &k->ends[p]));
    }
}

/* A Tracked subscription with a fetch buffer of 1 MiB (3 MiB of records wait
 * behind it) and max_open `max_open` (0: the default): 100 makes a stuck
 * partition's records in flight a small part of the fetch buffer. */
enum { STUCK_BUFFER = 1 << 20 };

static cs_app *start_stuck(const char *topic, const char *group, stuck *k, size_t max_open, cs_sub **out) {
    cs_app *app = cs_app_new("fetch-stuck", "1.0");
    cs_kafka *kf = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(kf, topic, stuck_handler, k);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    CST_OK(cs_sub_workers(s, 2));
    if (max_open) CST_OK(cs_sub_max_open(s, max_open));
    CST_OK(cs_sub_commit_interval_ms(s, 50));
    CST_OK(cs_sub_config(s, "partition.assignment.strategy", "range"));
    CST_OK(cs_sub_on_assign(s, stuck_on_assign, k));
    CST_OK(cs_sub_fetch_buffer_bytes(s, STUCK_BUFFER));
    CST_OK(cs_app_add_kafka(app, kf));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

static void stuck_init(stuck *k, const char *topic, int per, size_t bytes) {
    memset(k, 0, sizeof *k);
    log_init(&k->log);
    atomic_store(&k->held, true);
    produce_sized(topic, STUCK_PARTS, per, bytes, k);
    k->seen = cst_seen_new(STUCK_PARTS, per);
}

static void stuck_free(stuck *k) {
    log_free(&k->log);
    cst_seen_free(k->seen);
}

typedef struct stuck_paused {
    cs_sub *s;
} stuck_paused;

static bool has_stuck_pause(void *arg) {
    cs_sub_stats st;
    cs_sub_stats_get(((stuck_paused *)arg)->s, &st);
    return st.stuck_pauses >= 1;
}

/* The last-resort pause was counted (stats and /metrics), and the store never
 * held more than its bound plus one chunk (64 KiB at most). */
static void assert_stuck_pause_within_bound(cs_app *app, cs_sub *s, const char *topic, const char *group) {
    stuck_paused w = {s};
    if (!cst_wait(has_stuck_pause, &w, 30000)) fail_msg("partition 0 was never paused as stuck within 30 s");
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\",topic=\"%s\"", topic, group, topic);
    double pauses = cst_metric(app, "cstream_partition_stuck_pauses_total", labels);
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\"", topic, group);
    double limit = cst_metric(app, "cstream_fetch_buffer_limit_bytes", labels);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    printf("stuck pauses %llu (metric %.0f), buffer peak %llu, limit %.0f\n", (unsigned long long)st.stuck_pauses,
           pauses, (unsigned long long)st.fetch_buffer_peak, limit);
    assert_true(pauses >= 1);
    assert_true(limit == STUCK_BUFFER);
    assert_true(st.fetch_buffer_peak <= STUCK_BUFFER + (64u << 10));
}

/* Partition 0 is let through: every partition reaches its end, is committed
 * there, and was handed out with no gap; then the app stops. */
static void let_through_and_check(cs_app *app, cs_sub *s, stuck *k, const char *topic, const char *group) {
    atomic_store(&k->held, false);
    parts_done all = {k, 0, STUCK_PARTS};
    if (!cst_wait(parts_reached_end, &all, 60000))
        fail_msg("partition 0 did not reach its end within 60 s once let through");
    for (int p = 0; p < STUCK_PARTS; p++)
        if (cs_test_wait_committed(cst_cluster, group, topic, p, k->ends[p], 60000) != CS_OK)
            fail_msg("partition %d not committed to its end: %s", p, cs_errmsg());
    check_continuity(&k->log, STUCK_PARTS, k->ends, false);
    assert_no_gaps(app, s, topic, group);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    stuck_free(k);
}

/* Design test 3. Partition 0 asks for a retry every time (after 200 ms, so it
 * holds no worker); the other partitions must still reach their end. Then
 * partition 0 is let through and continues with no gap. */
static void stuck_partition_does_not_stall_the_others(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-stuck", STUCK_PARTS, topic, group, sizeof topic);
    stuck k;
    stuck_init(&k, topic, STUCK_PER, VALUE_BYTES);
    cs_sub *s;
    cs_app *app = start_stuck(topic, group, &k, 100, &s);
    parts_done others = {&k, 1, STUCK_PARTS};
    if (!cst_wait(parts_reached_end, &others, 60000))
        fail_msg("partitions 1..%d did not reach their end within 60 s while partition 0 was stuck", STUCK_PARTS - 1);
    assert_int_equal(cst_seen_count(k.seen, 0, STUCK_PER - 1), 0); /* the premise: partition 0 is still held */
    /* and it reached max_open (100): the pipeline paused it, /metrics says so */
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\"", topic, group);
    double pauses = cst_metric(app, "cstream_subscription_pauses_total", labels);
    printf("pauses at max_open: %.0f\n", pauses);
    assert_true(pauses >= 1);
    assert_stuck_pause_within_bound(app, s, topic, group);
    let_through_and_check(app, s, &k, topic, group);
}

/* ---- reassignment after a pause ------------------------------------------------ */

static cs_outcome ack_all(cs_delivery *d, void *user) {
    (void)d, (void)user;
    return CS_ACK;
}

typedef struct assigned_again {
    stuck *k;
    int at_least;
} assigned_again;

static bool assigned_again_n(void *arg) {
    assigned_again *w = arg;
    return atomic_load(&w->k->assigns) >= w->at_least;
}

/* Design test 7. Partition 0 is stuck until it is paused (at max_open today;
 * with the redesign, the last-resort pause of a partition over its share).
 * Then a member of the same group subscribed to another topic joins and
 * leaves: with eager assignment each rebalance revokes partition 0 and
 * assigns it to the same member again. Let through, it must be fetched again
 * to its end: a pause must not survive the reassignment. */
static void stuck_partition_fetched_again_after_reassignment(void **state) {
    (void)state;
    char topic[128], group[160], other[128];
    cst_fresh("fetch-reassign", STUCK_PARTS, topic, group, sizeof topic);
    cst_fresh("fetch-reassign-other", 1, other, NULL, sizeof other);
    stuck k;
    stuck_init(&k, topic, STUCK_PER, VALUE_BYTES);
    cs_sub *s;
    cs_app *app = start_stuck(topic, group, &k, 100, &s);
    parts_done others = {&k, 1, STUCK_PARTS};
    if (!cst_wait(parts_reached_end, &others, 60000))
        fail_msg("partitions 1..%d did not reach their end within 60 s while partition 0 was stuck", STUCK_PARTS - 1);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    assert_true(st.pauses >= 1); /* the premise: partition 0 was paused at max_open */
    assert_stuck_pause_within_bound(app, s, topic, group);
    int assigns = atomic_load(&k.assigns);
    cs_app *app_b = cs_app_new("fetch-other", "1.0");
    cs_kafka *kb = cs_test_kafka_new(cst_cluster);
    cs_sub *sb = cs_kafka_subscribe(kb, other, ack_all, NULL);
    CST_OK(cs_sub_group(sb, group));
    CST_OK(cs_sub_config(sb, "partition.assignment.strategy", "range"));
    CST_OK(cs_app_add_kafka(app_b, kb));
    CST_OK(cs_app_start(app_b));
    assigned_again w = {&k, assigns + 1};
    if (!cst_wait(assigned_again_n, &w, 60000)) fail_msg("the first member was not assigned again within 60 s");
    CST_OK(cs_test_app_wait_idle(app_b, 60000));
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);
    w.at_least = assigns + 2;
    if (!cst_wait(assigned_again_n, &w, 60000)) fail_msg("the first member was not assigned again after the leave");

    atomic_store(&k.held, false);
    parts_done all = {&k, 0, STUCK_PARTS};
    if (!cst_wait(parts_reached_end, &all, 60000))
        fail_msg("partition 0 was not fetched to its end within 60 s after its reassignment");
    for (int p = 0; p < STUCK_PARTS; p++)
        if (cs_test_wait_committed(cst_cluster, group, topic, p, k.ends[p], 60000) != CS_OK)
            fail_msg("partition %d not committed to its end: %s", p, cs_errmsg());
    check_continuity(&k.log, STUCK_PARTS, k.ends, false);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    stuck_free(&k);
}

/* Tracked's default max_open (10,000) and records of 8 KiB: partition 0's
 * records in flight alone could fill the 1 MiB buffer, and records in flight
 * cannot be dropped. They are capped at a quarter of the buffer, partition 0
 * counts as at its limit and is paused as stuck, and the others flow. */
enum { LARGE_PER = 300, LARGE_BYTES = 8192 };

static void stuck_partition_of_large_records_does_not_stall_the_others(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-large", STUCK_PARTS, topic, group, sizeof topic);
    stuck k;
    stuck_init(&k, topic, LARGE_PER, LARGE_BYTES);
    cs_sub *s;
    cs_app *app = start_stuck(topic, group, &k, 0, &s);
    parts_done others = {&k, 1, STUCK_PARTS};
    if (!cst_wait(parts_reached_end, &others, 60000))
        fail_msg("partitions 1..%d did not reach their end within 60 s while partition 0 was stuck", STUCK_PARTS - 1);
    assert_int_equal(cst_seen_count(k.seen, 0, LARGE_PER - 1), 0); /* the premise: partition 0 is still held */
    assert_stuck_pause_within_bound(app, s, topic, group);
    let_through_and_check(app, s, &k, topic, group);
}

/* A Tracked subscription of `topic`, started; a zero option keeps the default. */
typedef struct tracked_opts {
    int workers;
    size_t max_open, buffer;
    const char *rdk_kbytes; /* queued.max.messages.kbytes */
} tracked_opts;

static cs_app *start_tracked(const char *name, const char *topic, const char *group, cs_handler_fn fn, void *user,
                             tracked_opts o, cs_sub **out) {
    cs_app *app = cs_app_new(name, "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    cs_sub *s = cs_kafka_subscribe(k, topic, fn, user);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
    if (o.workers) CST_OK(cs_sub_workers(s, o.workers));
    if (o.max_open) CST_OK(cs_sub_max_open(s, o.max_open));
    if (o.buffer) CST_OK(cs_sub_fetch_buffer_bytes(s, o.buffer));
    if (o.rdk_kbytes) CST_OK(cs_sub_config(s, "queued.max.messages.kbytes", o.rdk_kbytes));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    *out = s;
    return app;
}

/* ---- the consumer-wide bound (design test 2) ----------------------------------- */

enum { BOUND_PARTS = 48, BOUND_PER = 400, BOUND_BUFFER = 4 << 20 };

typedef struct holder {
    pthread_mutex_t lock;
    cs_delivery **held;
    size_t n, cap;
    _Atomic bool release;
    cst_seen *seen;
} holder;

/* Keeps every record open (pending) until released. */
static cs_outcome hold_handler(cs_delivery *d, void *user) {
    holder *h = user;
    cst_seen_add(h->seen, cs_delivery_partition(d), cs_delivery_offset(d));
    pthread_mutex_lock(&h->lock);
    bool keep = !atomic_load(&h->release) && h->n < h->cap;
    if (keep) h->held[h->n++] = d;
    pthread_mutex_unlock(&h->lock);
    return keep ? CS_PENDING : CS_ACK;
}

typedef struct gauge_wait {
    cs_app *app;
    const char *name, *labels;
    double last, value;
    int stable;
} gauge_wait;

/* The gauge has stopped changing: the same non-zero value for ten samples
 * (cst_wait polls every 10 ms; the samples are 100 ms apart). */
static bool gauge_settled(void *arg) {
    gauge_wait *g = arg;
    static int tick;
    if (++tick % 10) return false;
    g->value = cst_metric(g->app, g->name, g->labels);
    g->stable = g->value > 0 && g->value == g->last ? g->stable + 1 : 0;
    g->last = g->value;
    return g->stable >= 10;
}

static bool all_seen(void *arg) {
    holder *h = arg;
    return cst_seen_distinct(h->seen) >= (size_t)BOUND_PARTS * BOUND_PER;
}

/* 48 partitions of 400 records of 512 B (9.4 MiB), a handler that keeps them
 * all open, a fetch buffer of 4 MiB and librdkafka's stage at 1 MiB: what the
 * store holds stops at the bound, for the consumer as a whole. */
static void fetch_buffer_bounds_the_consumer(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-bound", BOUND_PARTS, topic, group, sizeof topic);
    for (int p = 0; p < BOUND_PARTS; p++) cst_produce_sized(topic, p, BOUND_PER, VALUE_BYTES);
    holder h = {.cap = (size_t)BOUND_PARTS * BOUND_PER, .seen = cst_seen_new(BOUND_PARTS, BOUND_PER)};
    h.held = calloc(h.cap, sizeof *h.held);
    pthread_mutex_init(&h.lock, NULL);
    cs_sub *s;
    cs_app *app = start_tracked("fetch-bound", topic, group, hold_handler, &h,
                                (tracked_opts){.workers = 2, .buffer = BOUND_BUFFER, .rdk_kbytes = "1024"}, &s);

    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\"", topic, group);
    gauge_wait g = {.app = app, .name = "cstream_fetch_buffer_bytes", .labels = labels, .last = -1};
    if (!cst_wait(gauge_settled, &g, 60000))
        fail_msg("cstream_fetch_buffer_bytes did not stop growing within 60 s (last %.0f)", g.value);
    double limit = cst_metric(app, "cstream_fetch_buffer_limit_bytes", labels);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    pthread_mutex_lock(&h.lock); /* the handlers count under it */
    size_t held = h.n;
    pthread_mutex_unlock(&h.lock);
    printf("buffer %.0f bytes, limit %.0f, peak %llu, %zu records held\n", g.value, limit,
           (unsigned long long)st.fetch_buffer_peak, held);
    assert_true(limit == BOUND_BUFFER);
    assert_true(g.value <= BOUND_BUFFER + (64 << 10));
    assert_true(st.fetch_buffer_peak <= BOUND_BUFFER + (64u << 10));
    assert_true(held < (size_t)BOUND_PARTS * BOUND_PER); /* the premise: the bound held records back */

    pthread_mutex_lock(&h.lock);
    atomic_store(&h.release, true);
    size_t n = h.n;
    h.n = 0;
    pthread_mutex_unlock(&h.lock);
    for (size_t i = 0; i < n; i++) CST_OK(cs_delivery_settle(h.held[i], CS_ACK));
    if (!cst_wait(all_seen, &h, 120000))
        fail_msg("after the release, %zu of %d records arrived within 120 s", cst_seen_distinct(h.seen),
                 BOUND_PARTS * BOUND_PER);
    CST_OK(cs_test_app_wait_idle(app, 60000));
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    free(h.held);
    pthread_mutex_destroy(&h.lock);
    cst_seen_free(h.seen);
}

/* ---- no 1 s stall at the bound (design test 4) -------------------------------- */

/* The stall: in librdkafka 2.0.2 a broker thread whose partitions all reached
 * the pre-fetch bound drops them from its fetch list and sleeps until its 1 s
 * serve period ends; nothing wakes it when the queue drains
 * (src/kafka/consumer/fetch_wake.c, docs/benchmarks.md). cstream's wake-up seek ends
 * that sleep once the queue drained. Without it the paced handler below runs
 * out of records at every bound: the fetch buffer (1 MiB) and a fetch
 * response behind it (~1 MiB) hold about 1,900 records of 1 KiB, 0.5-0.6 s of
 * handler time, shorter than the sleep. With it the next response arrives
 * while some 900 records (~250 ms) are still buffered.
 *
 * The check counts those run-outs, not time: a handler that sees cstream's
 * take count (cs_test_sub_taken) equal to the records it was handed holds the
 * last record cstream has, and the next one must still come from librdkafka.
 * 4,500 records keep the topic under the embedded cluster's 5 MiB retention. */
enum { STALL_RECORDS = 4500, STALL_VALUE_BYTES = 1024, STALL_BUFFER = 1 << 20 };
/* How often librdkafka's bound must have been reached for the test to mean
 * something. From librdkafka 2.2.0 cstream sets fetch.queue.backoff.ms to
 * 5 ms (consumer_conf.c): the fetchers keep the queue topped up and the
 * bound is seen about once; with librdkafka's 1000 ms it is seen 5 times
 * and the handler runs out 4 times (measured on 2.14.2), which fails below. */
#if RD_KAFKA_VERSION >= 0x020200ff
enum { STALL_BOUNDS_MIN = 1 };
#else
enum { STALL_BOUNDS_MIN = 3 };
#endif

typedef struct pacer {
    cs_sub *_Atomic s; /* set once the app started; records before it are not checked */
    int64_t end;       /* the partition's end offset */
    _Atomic long n;    /* records handled (Tracked, acked: each once) */
    _Atomic long ran_out;
} pacer;

/* Slower than the fetch (0.2 ms a record), so the buffer reaches its bound
 * again and again. */
static cs_outcome paced_handler(cs_delivery *d, void *user) {
    pacer *pc = user;
    long n = atomic_fetch_add(&pc->n, 1) + 1;
    cs_sub *s = atomic_load(&pc->s);
    if (s && cs_delivery_offset(d) + 1 < pc->end && cs_test_sub_taken(s) <= (uint64_t)n)
        atomic_fetch_add(&pc->ran_out, 1);
    usleep(200);
    return CS_ACK;
}

static bool all_paced(void *arg) {
    pacer *pc = arg;
    return atomic_load(&pc->n) >= pc->end;
}

static void no_stall_at_the_bound(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-stall", 1, topic, group, sizeof topic);
    cst_produce_sized(topic, 0, STALL_RECORDS, STALL_VALUE_BYTES);
    pacer pc = {0};
    CST_OK(cs_test_end_offset(cst_cluster, topic, 0, &pc.end));
    assert_int_equal(pc.end, STALL_RECORDS); /* nothing dropped by retention: the log starts at 0 */
    cs_sub *s;
    cs_app *app =
        start_tracked("fetch-stall", topic, group, paced_handler, &pc, (tracked_opts){.buffer = STALL_BUFFER}, &s);
    atomic_store(&pc.s, s);
    /* Not cs_test_app_wait_idle: its watermark queries go through the
     * consumer's handle to the partition's leader every 20 ms, and each one
     * wakes that broker thread; with it, this test passed with the wake-up
     * seek removed. cst_wait only reads the handler's count. */
    if (!cst_wait(all_paced, &pc, 120000))
        fail_msg("%ld of %lld records handled within 120 s", (long)atomic_load(&pc.n), (long long)pc.end);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\"", topic, group);
    double wakeups = cst_metric(app, "cstream_fetch_wakeups_total", labels);
    printf("%ld records, wake-ups %llu (metric %.0f), the handler ran out of records %ld times\n",
           (long)atomic_load(&pc.n), (unsigned long long)st.wakeups, wakeups, (long)atomic_load(&pc.ran_out));
    /* The premise: librdkafka's bound was reached, and its queue drained,
     * several times (the count goes up whether or not the seek wakes). */
    assert_true(st.wakeups >= STALL_BOUNDS_MIN);
    assert_true(wakeups == (double)st.wakeups);
    /* Without the wake-up every bound ends in a run-out (seen: 3 of 3, 4 of
     * 4). On a loaded machine a fetch or broker thread held off the CPU for
     * ~250 ms runs the handler out too: one is allowed, or up to half of the
     * bounds (seen once in CI: 2 under a full `make test`), which a missing
     * wake-up, one run-out per bound, never meets. */
    long ran_out = atomic_load(&pc.ran_out);
    if (ran_out > 1 && (uint64_t)ran_out * 2 > st.wakeups)
        fail_msg("the handler ran out of records %ld times at %llu bounds", ran_out, (unsigned long long)st.wakeups);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
}

/* ---- many partitions, a small buffer ---------------------------------------- */

enum { MANY_PARTS = 64, MANY_PER = 50, MANY_BUFFER = 1 << 20 };

static cs_outcome seen_handler(cs_delivery *d, void *user) {
    cst_seen_add(user, cs_delivery_partition(d), cs_delivery_offset(d));
    return CS_ACK;
}

static bool many_seen(void *arg) { return cst_seen_distinct(arg) >= (size_t)MANY_PARTS * MANY_PER; }

/* 64 partitions and a 1 MiB buffer: the store's chunks are 16 KiB, so the
 * partitions' partly filled open chunks alone fill the budget. Once their
 * records settle, the store must have room again and every record arrive. */
static void open_chunks_do_not_hold_the_buffer(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-many", MANY_PARTS, topic, group, sizeof topic);
    for (int p = 0; p < MANY_PARTS; p++) cst_produce_sized(topic, p, MANY_PER, VALUE_BYTES);
    cst_seen *seen = cst_seen_new(MANY_PARTS, MANY_PER);
    cs_sub *s;
    cs_app *app =
        start_tracked("fetch-many", topic, group, seen_handler, seen, (tracked_opts){.buffer = MANY_BUFFER}, &s);
    if (!cst_wait(many_seen, seen, 60000))
        fail_msg("%zu of %d records arrived within 60 s", cst_seen_distinct(seen), MANY_PARTS * MANY_PER);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(seen);
}

/* ---- slow is not stuck --------------------------------------------------------- */

enum { SLOW_PARTS = 2, SLOW_PER = 2000, SLOW_WATCH = 250, SLOW_MS = 12 };

static cs_outcome slow_handler(cs_delivery *d, void *user) {
    cst_seen_add(user, cs_delivery_partition(d), cs_delivery_offset(d));
    usleep(SLOW_MS * 1000);
    return CS_ACK;
}

static bool slow_watched(void *arg) {
    for (int p = 0; p < SLOW_PARTS; p++)
        for (int64_t o = 0; o < SLOW_WATCH; o++)
            if (!cst_seen_count(arg, p, o)) return false;
    return true;
}

/* Two partitions that settle slowly but steadily (12 ms a record, one worker
 * each) with a full buffer behind them: at max_open (100) the pipeline hands
 * out again only after 50 settled, 600 ms, longer than a stuck partition's
 * 500 ms. Settling is progress: neither is ever paused as stuck. */
static void slow_partitions_are_not_stuck(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-slow", SLOW_PARTS, topic, group, sizeof topic);
    for (int p = 0; p < SLOW_PARTS; p++) cst_produce_sized(topic, p, SLOW_PER, VALUE_BYTES);
    cst_seen *seen = cst_seen_new(SLOW_PARTS, SLOW_PER);
    cs_sub *s;
    cs_app *app = start_tracked("fetch-slow", topic, group, slow_handler, seen,
                                (tracked_opts){.workers = SLOW_PARTS, .max_open = 100, .buffer = 1 << 20}, &s);
    if (!cst_wait(slow_watched, seen, 60000))
        fail_msg("the first %d records of each partition did not arrive within 60 s", SLOW_WATCH);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    printf("buffer peak %llu, stuck pauses %llu, pauses at max_open %llu\n", (unsigned long long)st.fetch_buffer_peak,
           (unsigned long long)st.stuck_pauses, (unsigned long long)st.pauses);
    assert_true(st.fetch_buffer_peak >= (1u << 19)); /* the premise: the buffer was at least half full */
    assert_true(st.pauses >= 2);                     /* and the partitions reached max_open */
    assert_int_equal(st.stuck_pauses, 0);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(seen);
}

/* ---- the lanes hold a bounded number --------------------------------------- */

enum { LANE_RECORDS = 10000, LANE_CAP_PER_WORKER = 4096 };

typedef struct lane_hold {
    cst_gate gate;
    cst_seen *seen;
} lane_hold;

/* The first record blocks its worker until the gate opens. */
static cs_outcome gated_handler(cs_delivery *d, void *user) {
    lane_hold *h = user;
    if (!cst_gate_wait(&h->gate, 60000)) return CS_RETRY;
    cst_seen_add(h->seen, cs_delivery_partition(d), cs_delivery_offset(d));
    return CS_ACK;
}

static bool lane_all_seen(void *arg) { return cst_seen_distinct(((lane_hold *)arg)->seen) >= LANE_RECORDS; }

/* Tracked, one worker, max_open 10,000 (the default) and a worker stuck on
 * the first record: the 10,000 records fit in the fetch buffer, but the lane
 * holds at most 4,096 of them as deliveries waiting to run; the rest wait in
 * the buffer. Then everything runs, in order. */
static void lanes_hold_a_bounded_number(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-lanes", 1, topic, group, sizeof topic);
    cst_produce_sized(topic, 0, LANE_RECORDS, VALUE_BYTES);
    lane_hold h = {.seen = cst_seen_new(1, LANE_RECORDS)};
    cst_gate_init(&h.gate);
    cs_sub *s;
    cs_app *app = start_tracked("fetch-lanes", topic, group, gated_handler, &h, (tracked_opts){.workers = 1}, &s);
    char labels[512];
    snprintf(labels, sizeof labels, "subscription=\"%s\",group=\"%s\"", topic, group);
    gauge_wait w = {.app = app, .name = "cstream_fetch_buffer_records", .labels = labels, .last = -1};
    if (!cst_wait(gauge_settled, &w, 60000))
        fail_msg("cstream_fetch_buffer_records did not settle within 60 s (last %.0f)", w.value);
    double waiting = cst_metric(app, "cstream_lane_waiting_records", labels);
    printf("fetch buffer holds %.0f records, the lane %.0f waiting\n", w.value, waiting);
    assert_true(w.value >= LANE_RECORDS);              /* the premise: every record was fetched */
    assert_true(waiting >= LANE_CAP_PER_WORKER - 256); /* the lane was filled */
    assert_true(waiting <= LANE_CAP_PER_WORKER);
    cst_gate_open(&h.gate);
    if (!cst_wait(lane_all_seen, &h, 60000))
        fail_msg("%zu of %d records ran within 60 s once the worker went on", cst_seen_distinct(h.seen), LANE_RECORDS);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_gate_destroy(&h.gate);
    cst_seen_free(h.seen);
}

/* ---- a log that goes back ---------------------------------------------------- */

enum { BACK_PER = 300, BACK_TO = 100 };

static bool all_read(void *arg) { return cst_seen_distinct(arg) >= BACK_PER; }

static bool read_again(void *arg) {
    for (int64_t o = BACK_TO; o < BACK_PER; o++)
        if (cst_seen_count(arg, 0, o) < 2) return false;
    return true;
}

/* librdkafka moves a partition's fetch position back: after an out-of-range
 * fetch its auto.offset.reset does (a truncated log, or one deleted and
 * created again before the topic was reported gone), here a seek on the
 * handle (cs_sub_rdkafka_consumer) does, which the fetch path cannot tell
 * apart. Records below the position the fetch path had reached may be new
 * ones at old offsets: every one from the new position is handled again,
 * none dropped as a repeat, and nothing before it. */
static void a_log_that_goes_back_is_read_again(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("fetch-back", 1, topic, group, sizeof topic);
    cst_produce_sized(topic, 0, BACK_PER, VALUE_BYTES);
    cst_seen *seen = cst_seen_new(1, BACK_PER);
    cs_sub *s;
    cs_app *app = start_tracked("fetch-back", topic, group, seen_handler, seen, (tracked_opts){0}, &s);
    if (!cst_wait(all_read, seen, 60000))
        fail_msg("%zu of %d records arrived within 60 s", cst_seen_distinct(seen), BACK_PER);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(cs_sub_rdkafka_consumer(s), topic, NULL);
    assert_non_null(rkt);
    rd_kafka_resp_err_t err = rd_kafka_seek(rkt, 0, BACK_TO, 10000);
    rd_kafka_topic_destroy(rkt);
    if (err) fail_msg("seek to %d: %s", BACK_TO, rd_kafka_err2str(err));
    if (!cst_wait(read_again, seen, 60000)) {
        size_t again = 0;
        for (int64_t o = BACK_TO; o < BACK_PER; o++) again += cst_seen_count(seen, 0, o) >= 2;
        fail_msg("%zu of %d records from offset %d were handled again within 60 s", again, BACK_PER - BACK_TO, BACK_TO);
    }
    for (int64_t o = 0; o < BACK_TO; o++) assert_int_equal(cst_seen_count(seen, 0, o), 1);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    cst_seen_free(seen);
}

/* ---- a move back with records in flight ---------------------------------------
 * The same move back, but while the record at MB_HELD is still running and
 * every record up to the end is already taken: the partition must not start
 * over at the new position (MB_TO) and commit past MB_HELD..MB_TO-1, which
 * would settle as stale and never come again (99 of 200 lost before the fix).
 * Tracked and Transactional, one worker and four with lanes by key. */

enum { MB_PER = 200, MB_HELD = 50, MB_TO = 150, MB_KEYS = 7 };

typedef struct move_back {
    cst_gate gate;
    cst_seen *seen;
    _Atomic bool holding; /* the handler of MB_HELD waits at the gate */
} move_back;

static cs_outcome held_handler(cs_delivery *d, void *user) {
    move_back *mb = user;
    if (cs_delivery_offset(d) == MB_HELD && !atomic_exchange(&mb->holding, true)) {
        if (!cst_gate_wait(&mb->gate, 60000)) return CS_RETRY;
    }
    cst_seen_add(mb->seen, cs_delivery_partition(d), cs_delivery_offset(d));
    return CS_ACK;
}

typedef struct taken_all {
    rd_kafka_t *rk;
    const char *topic;
} taken_all;

/* librdkafka's position (the offset after the last record cstream took) is at the end. */
static bool everything_taken(void *arg) {
    taken_all *t = arg;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, t->topic, 0);
    bool all = rd_kafka_position(t->rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR && l->elems[0].offset >= MB_PER;
    rd_kafka_topic_partition_list_destroy(l);
    return all;
}

static bool holding(void *arg) { return atomic_load(&((move_back *)arg)->holding); }
static bool moved_back(void *arg) { return cs_test_sub_moves_back(arg) >= 1; }
static bool mb_all_seen(void *arg) { return cst_seen_distinct(((move_back *)arg)->seen) >= MB_PER; }

static void move_back_in_flight(cs_commit_mode mode, int workers) {
    char topic[128], group[160];
    cst_fresh("fetch-mback", 1, topic, group, sizeof topic);
    for (int i = 0; i < MB_PER; i++) {
        char key[16], value[32];
        int kn = snprintf(key, sizeof key, "k%d", i % MB_KEYS), vn = snprintf(value, sizeof value, "v%d", i);
        CST_OK(cs_test_produce(cst_cluster, topic, 0, key, (size_t)kn, value, (size_t)vn, NULL));
    }
    move_back mb = {.seen = cst_seen_new(1, MB_PER)};
    cst_gate_init(&mb.gate);
    cs_app *app = cs_app_new("fetch-mback", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    if (mode == CS_COMMIT_TRANSACTIONAL) CST_OK(cs_kafka_instance_id(k, group));
    cs_sub *s = cs_kafka_subscribe(k, topic, held_handler, &mb);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, mode));
    CST_OK(cs_sub_workers(s, workers));
    if (workers > 1) CST_OK(cs_sub_lanes(s, CS_LANES_BY_KEY));
    if (mode == CS_COMMIT_TRANSACTIONAL) CST_OK(cs_sub_stall_timeout_ms(s, 120000)); /* the hold is no stall */
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    taken_all t = {cs_sub_rdkafka_consumer(s), topic};
    if (!cst_wait(holding, &mb, 60000)) fail_msg("record %d did not reach its handler within 60 s", MB_HELD);
    if (!cst_wait(everything_taken, &t, 60000)) fail_msg("the %d records were not all taken within 60 s", MB_PER);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(t.rk, topic, NULL);
    assert_non_null(rkt);
    rd_kafka_resp_err_t err = rd_kafka_seek(rkt, 0, MB_TO, 10000);
    rd_kafka_topic_destroy(rkt);
    if (err) fail_msg("seek to %d: %s", MB_TO, rd_kafka_err2str(err));
    if (!cst_wait(moved_back, s, 60000)) fail_msg("the partition was not moved back within 60 s");
    cst_gate_open(&mb.gate);
    /* Tracked: the position reaches the end only once every record below it
     * settled in the current epoch; then any record never handled was lost. */
    bool committed_offsets = mode == CS_COMMIT_TRACKED || !cs_test_cluster_is_embedded(cst_cluster);
    if (committed_offsets) CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, MB_PER, 60000));
    else if (!cst_wait(mb_all_seen, &mb, 60000)) /* the mock does not store transactional offsets */
        fail_msg("%zu of %d records handled within 60 s", cst_seen_distinct(mb.seen), MB_PER);
    CST_OK(cs_app_stop(app));
    size_t lost = 0;
    int64_t first_lost = -1;
    for (int64_t o = 0; o < MB_PER; o++)
        if (cst_seen_count(mb.seen, 0, o) == 0 && lost++ == 0) first_lost = o;
    if (lost) fail_msg("%zu of %d records never handled (the first: %lld)", lost, MB_PER, (long long)first_lost);
    /* Tracked: nothing settled before the held record runs twice, the move
     * went no further back than needed. Transactional goes back to its
     * committed position: the window's settled records lost their outputs. */
    if (mode == CS_COMMIT_TRACKED)
        for (int64_t o = 0; o < MB_HELD; o++) assert_int_equal(cst_seen_count(mb.seen, 0, o), 1);
    cs_app_destroy(app);
    cst_gate_destroy(&mb.gate);
    cst_seen_free(mb.seen);
}

static void move_back_in_flight_tracked(void **state) {
    (void)state;
    move_back_in_flight(CS_COMMIT_TRACKED, 1);
}
static void move_back_in_flight_tracked_lanes_by_key(void **state) {
    (void)state;
    move_back_in_flight(CS_COMMIT_TRACKED, 4);
}
static void move_back_in_flight_transactional(void **state) {
    (void)state;
    move_back_in_flight(CS_COMMIT_TRANSACTIONAL, 1);
}
static void move_back_in_flight_transactional_lanes_by_key(void **state) {
    (void)state;
    move_back_in_flight(CS_COMMIT_TRANSACTIONAL, 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tracked_continuity_eager),
        cmocka_unit_test(tracked_continuity_cooperative),
        cmocka_unit_test(auto_continuity_eager),
        cmocka_unit_test(auto_continuity_cooperative),
        cmocka_unit_test(transactional_continuity_through_a_rewind),
        cmocka_unit_test(stuck_partition_does_not_stall_the_others),
        cmocka_unit_test(stuck_partition_fetched_again_after_reassignment),
        cmocka_unit_test(stuck_partition_of_large_records_does_not_stall_the_others),
        cmocka_unit_test(fetch_buffer_bounds_the_consumer),
        cmocka_unit_test(no_stall_at_the_bound),
        cmocka_unit_test(open_chunks_do_not_hold_the_buffer),
        cmocka_unit_test(slow_partitions_are_not_stuck),
        cmocka_unit_test(lanes_hold_a_bounded_number),
        cmocka_unit_test(a_log_that_goes_back_is_read_again),
        cmocka_unit_test(move_back_in_flight_tracked),
        cmocka_unit_test(move_back_in_flight_tracked_lanes_by_key),
        cmocka_unit_test(move_back_in_flight_transactional),
        cmocka_unit_test(move_back_in_flight_transactional_lanes_by_key),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
