/* test_stop.c — what a graceful stop (and an Auto revoke) promises for the
 * records cstream already holds:
 * - Tracked: a plain CS_RETRY that races the stop is not run again, the
 *   partition hands out nothing more (the records queued behind it stay
 *   queued), nothing past the retried record is committed, and the next owner
 *   reads it first;
 * - Auto: the records handed to the lanes (their positions already stored)
 *   are run before the close, and the positions are committed at the close;
 *   at a revoke they are run before the partition goes, and the positions are
 *   committed then, so that the next owner reads every record exactly once;
 * - several subscriptions drain together: one deadline for all, so the stop
 *   takes one drain_timeout_ms, not one per subscription.
 * librdkafka's Auto timer is set to 10 minutes, so a commit seen here is the
 * revoke's or the close's (the revoke's only on the real broker: the
 * embedded cluster refuses commits while its group is joining). Each test
 * first fills the lane: the handler holds one record while max_open records
 * are handed over (the partition pauses), and lets it go as the stop (or the
 * revoke) sets in. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstest.h"

enum { N = 100, MAX_OPEN = 50, HOLD_MS = 30000 };
/* Auto's stop test: more records than the stop lets it take. */
enum { LONG_N = 1000 };

/* The worker running the held record (written before `entered` is set). */
static pthread_t held_worker;

typedef struct fixture {
    cst_seen *seen;
    cst_seen *first_assignment; /* what ran before the member's second assignment */
    int64_t n;                  /* records per partition */
    int32_t hold_partition;
    int64_t hold_offset;  /* the record the handler holds until `released` opens; -1: none */
    bool retry_held;      /* Tracked: the held record asks for a retry, every time */
    _Atomic bool entered; /* the handler holds the record */
    cst_gate released;
    _Atomic bool timed_out; /* the release never came */
    _Atomic int held_runs;
    _Atomic int64_t first; /* the first offset handled, -1 before */
    _Atomic int revokes;
    _Atomic int assigns;
} fixture;

static void fixture_init(fixture *f, int partitions, int64_t n, int32_t hold_partition, int64_t hold_offset,
                         bool retry_held) {
    memset(f, 0, sizeof *f);
    f->n = n;
    f->seen = cst_seen_new(partitions, n);
    f->first_assignment = cst_seen_new(partitions, n);
    f->hold_partition = hold_partition;
    f->hold_offset = hold_offset;
    f->retry_held = retry_held;
    atomic_store(&f->first, -1);
    cst_gate_init(&f->released);
}

static void fixture_free(fixture *f) {
    cst_seen_free(f->seen);
    cst_seen_free(f->first_assignment);
    cst_gate_destroy(&f->released);
}

static void release(fixture *f) { cst_gate_open(&f->released); }

/* Waits (bounded) for release(); false if it did not come. */
static bool wait_released(fixture *f) { return cst_gate_wait(&f->released, HOLD_MS); }

static cs_outcome handle(cs_delivery *d, void *user) {
    fixture *f = user;
    int32_t p = cs_delivery_partition(d);
    int64_t o = cs_delivery_offset(d);
    int64_t none = -1;
    atomic_compare_exchange_strong(&f->first, &none, o);
    if (p == f->hold_partition && o == f->hold_offset) {
        atomic_fetch_add(&f->held_runs, 1);
        held_worker = pthread_self(); /* read once `entered` is seen (seq_cst) */
        atomic_store(&f->entered, true);
        if (!wait_released(f)) {
            atomic_store(&f->timed_out, true);
            return CS_ACK;
        }
        if (f->retry_held) return CS_RETRY; /* not recorded: it is the next owner's */
    }
    cst_seen_add(f->seen, p, o);
    /* The next assignment's records come after its hook ran (same thread). */
    if (atomic_load(&f->assigns) <= 1) cst_seen_add(f->first_assignment, p, o);
    return CS_ACK;
}

static void on_assign(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)s, (void)topic, (void)partitions, (void)n;
    fixture *f = user;
    atomic_fetch_add(&f->assigns, 1);
}

static void on_revoke(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)s, (void)topic, (void)partitions, (void)n;
    fixture *f = user;
    atomic_fetch_add(&f->revokes, 1);
}

static cs_app *start(const char *topic, const char *group, cs_commit_mode mode, fixture *f, cs_sub **out) {
    cs_app *app = cs_app_new("stop-test", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    cs_sub *s = cs_kafka_subscribe(k, topic, handle, f);
    assert_non_null(s);
    CST_OK(cs_sub_group(s, group));
    CST_OK(cs_sub_commit_mode(s, mode));
    CST_OK(cs_sub_max_open(s, MAX_OPEN));
    if (mode == CS_COMMIT_TRACKED) CST_OK(cs_sub_commit_interval_ms(s, 20));
    else CST_OK(cs_sub_config(s, "auto.commit.interval.ms", "600000")); /* only revoke and close commit */
    CST_OK(cs_sub_on_revoke(s, on_revoke, f));
    CST_OK(cs_sub_on_assign(s, on_assign, f));
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (out) *out = s;
    return app;
}

typedef struct lane_full {
    fixture *f;
    cs_sub *s;
} lane_full;

/* The handler holds its record and the partition paused at max_open: the
 * records behind the held one are in cstream's queue. */
static bool holds_a_full_lane(void *arg) {
    lane_full *w = arg;
    cs_sub_stats st;
    cs_sub_stats_get(w->s, &st);
    return atomic_load(&w->f->entered) && st.pauses >= 1;
}

static void wait_full_lane(fixture *f, cs_sub *s) {
    lane_full w = {f, s};
    if (!cst_wait(holds_a_full_lane, &w, 30000))
        fail_msg("the handler did not hold its record with a full lane within 30 s (entered=%d)",
                 (int)atomic_load(&f->entered));
}

/* Auto's stop test lets its held record go when the graceful stop joins the
 * lane's worker, the one holding it: the drain has marked the pipeline
 * stopping and the fetch thread has stopped by then, so the records queued
 * behind the held one can only be run by the drain (or dropped by a broken
 * one), and none is added meanwhile. pthread_join is wrapped at link time
 * (tests/CMakeLists.txt: -Wl,--wrap=pthread_join); other joins pass through. */
int __real_pthread_join(pthread_t thread, void **ret);
int __wrap_pthread_join(pthread_t thread, void **ret);
static fixture *_Atomic release_at_join; /* armed by the test */

int __wrap_pthread_join(pthread_t thread, void **ret) {
    fixture *f = atomic_load(&release_at_join);
    if (f && pthread_equal(thread, held_worker) && atomic_compare_exchange_strong(&release_at_join, &f, NULL))
        release(f);
    return __real_pthread_join(thread, ret);
}

/* Auto's revoke test lets its held record go when the revoke starts waiting
 * for the partition's records to settle (cs__pipeline_wait_settled, wrapped
 * at link time: -Wl,--wrap=cs__pipeline_wait_settled): the revoke has
 * decided by then whether the records queued behind it still run. */
struct cs_pipeline;
struct cs_part;
size_t __real_cs__pipeline_wait_settled(struct cs_pipeline *p, struct cs_part *part, int64_t deadline_ms);
size_t __wrap_cs__pipeline_wait_settled(struct cs_pipeline *p, struct cs_part *part, int64_t deadline_ms);
static fixture *_Atomic release_at_settle_wait; /* armed by the test */

/* The drains test records the deadline of every wait that ran out with a
 * delivery still open: the stop's drains of its parked records (the close's
 * revokes find those partitions released, nothing open). */
enum { CUTS_MAX = 8 };
static _Atomic bool record_cuts; /* armed by the test */
static _Atomic int n_cuts;
static _Atomic int64_t cut_deadlines[CUTS_MAX];

size_t __wrap_cs__pipeline_wait_settled(struct cs_pipeline *p, struct cs_part *part, int64_t deadline_ms) {
    fixture *f = atomic_exchange(&release_at_settle_wait, NULL);
    if (f) release(f);
    size_t left = __real_cs__pipeline_wait_settled(p, part, deadline_ms);
    if (left && atomic_load(&record_cuts)) {
        int i = atomic_fetch_add(&n_cuts, 1);
        if (i < CUTS_MAX) atomic_store(&cut_deadlines[i], deadline_ms);
    }
    return left;
}

typedef struct stopper {
    cs_app *app;
    cs_err err;
} stopper;

static void *stop_app(void *arg) {
    stopper *st = arg;
    st->err = cs_app_stop(st->app);
    return NULL;
}

/* Releases the held record as the stop begins: the release races the stop
 * (cs_app_stop first stops fetching, then drains), which is what the Tracked
 * test is about. Its held record retries every time it runs: a retry before
 * the stop set in comes back first and runs again, so the last one always
 * meets the stop. */
static void stop_racing_release(cs_app *app, fixture *f) {
    stopper st = {app, CS_OK};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_app, &st), 0);
    release(f);
    pthread_join(t, NULL);
    CST_OK(st.err);
    assert_false(atomic_load(&f->timed_out));
}

static int64_t committed(const char *group, const char *topic, int32_t p) {
    int64_t off;
    CST_OK(cs_test_committed(cst_cluster, group, topic, p, &off));
    return off;
}

typedef struct all_seen {
    fixture *a, *b;
    int32_t p;
    int64_t from;
} all_seen;

static bool seen_from(void *arg) {
    all_seen *w = arg;
    for (int64_t o = w->from; o < w->a->n; o++)
        if (cst_seen_count(w->a->seen, w->p, o) + (w->b ? cst_seen_count(w->b->seen, w->p, o) : 0) == 0) return false;
    return true;
}

/* The next owner (a fresh app in the group) reads [from, n) of partition 0
 * exactly once, starting at `from`, and nothing before it. */
static void next_owner_reads_from(const char *topic, const char *group, cs_commit_mode mode, int64_t n, int64_t from) {
    fixture g;
    fixture_init(&g, 1, n, -1, -1, false);
    cs_app *app = start(topic, group, mode, &g, NULL);
    all_seen w = {&g, NULL, 0, from};
    bool ok = cst_wait(seen_from, &w, 30000);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    if (!ok) fail_msg("the next owner did not read %lld..%lld within 30 s", (long long)from, (long long)n - 1);
    assert_int_equal(atomic_load(&g.first), from);
    for (int64_t o = 0; o < n; o++) {
        int want = o < from ? 0 : 1;
        if (cst_seen_count(g.seen, 0, o) != want)
            fail_msg("the next owner handled @%lld %d times, not %d (it starts at %lld)", (long long)o,
                     cst_seen_count(g.seen, 0, o), want, (long long)from);
    }
    fixture_free(&g);
}

/* ---- Tracked: a plain retry that races the stop ---------------------------------- */

static void tracked_retry_racing_a_stop_goes_to_the_next_owner(void **state) {
    (void)state;
    enum { HELD = 3 };
    char topic[128], group[160];
    cst_fresh("stopretry", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "r", N));
    fixture f;
    fixture_init(&f, 1, N, 0, HELD, true);
    cs_sub *s;
    cs_app *app = start(topic, group, CS_COMMIT_TRACKED, &f, &s);
    wait_full_lane(&f, s);
    /* 0..2 settled and committed before the stop: the position waits at 3. */
    CST_OK(cs_test_wait_committed(cst_cluster, group, topic, 0, HELD, 30000));

    stop_racing_release(app, &f);
    cs_sub_stats st;
    cs_sub_stats_get(s, &st);
    cs_app_destroy(app);

    /* A retry that came before the stop set in ran again (it comes back
     * first); the one that met the stop did not. Either way nothing behind
     * it ran: the partition handed out nothing more. */
    assert_true(atomic_load(&f.held_runs) >= 1);
    assert_true(st.retried >= 1);
    for (int64_t o = 0; o < N; o++) {
        int want = o < HELD ? 1 : 0;
        if (cst_seen_count(f.seen, 0, o) != want)
            fail_msg("@%lld handled %d times before the stop, not %d: records behind a retry met by the stop "
                     "must stay unhandled",
                     (long long)o, cst_seen_count(f.seen, 0, o), want);
    }
    int64_t c = committed(group, topic, 0);
    if (c != HELD)
        fail_msg("committed %lld after the stop, not %d: the position passed the retried record", (long long)c, HELD);
    next_owner_reads_from(topic, group, CS_COMMIT_TRACKED, N, HELD);
    fixture_free(&f);
}

/* ---- Auto: the stop drains the lanes, the close commits ------------------------- */

static void auto_stop_drains_the_lanes_and_commits_at_close(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("stopauto", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce_many(cst_cluster, topic, "r", LONG_N));
    fixture f;
    fixture_init(&f, 1, LONG_N, 0, 0, false);
    cs_sub *s;
    cs_app *app = start(topic, group, CS_COMMIT_AUTO, &f, &s);
    wait_full_lane(&f, s);
    assert_int_equal(committed(group, topic, 0), -1); /* no timer commit */

    atomic_store(&release_at_join, &f);
    CST_OK(cs_app_stop(app));
    cs_app_destroy(app);
    assert_null(atomic_load(&release_at_join)); /* the drain joined the held worker, which let it go */
    assert_false(atomic_load(&f.timed_out));

    /* At least the MAX_OPEN records handed over before the stop were stored;
     * the close committed them, and every one of them ran (none was dropped
     * from the queue); nothing past the committed position ran. */
    int64_t c = committed(group, topic, 0);
    if (c < MAX_OPEN)
        fail_msg("committed %lld after the stop, not at least the %d handed over", (long long)c, MAX_OPEN);
    printf("auto stop: %lld of %d records committed at close\n", (long long)c, LONG_N);
    for (int64_t o = 0; o < LONG_N; o++) {
        int want = o < c ? 1 : 0;
        if (cst_seen_count(f.seen, 0, o) != want)
            fail_msg("@%lld handled %d times, not %d (committed at close: %lld)", (long long)o,
                     cst_seen_count(f.seen, 0, o), want, (long long)c);
    }
    if (c < LONG_N) next_owner_reads_from(topic, group, CS_COMMIT_AUTO, LONG_N, c);
    fixture_free(&f);
}

/* ---- Auto: a revoke drains the partition's lane, then commits ------------------- */

static void auto_revoke_drains_and_commits(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("revokeauto", 2, topic, group, sizeof topic);
    for (int i = 0; i < N; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "r", 1, NULL));
    fixture a, b;
    fixture_init(&a, 2, N, 0, 0, false); /* A holds p0@0 until its revoke waits for it */
    fixture_init(&b, 2, N, -1, -1, false);
    cs_sub *s;
    cs_app *app_a = start(topic, group, CS_COMMIT_AUTO, &a, &s);
    wait_full_lane(&a, s);
    assert_int_equal(committed(group, topic, 0), -1); /* no timer commit */

    /* B joins: A's partitions are revoked while its lane holds MAX_OPEN - 1
     * records behind the held one. */
    atomic_store(&release_at_settle_wait, &a);
    cs_app *app_b = start(topic, group, CS_COMMIT_AUTO, &b, NULL);
    all_seen w = {&a, &b, 0, 0};
    bool ok = cst_wait(seen_from, &w, 60000);
    int revokes = atomic_load(&a.revokes);
    bool timed_out = atomic_load(&a.timed_out);
    /* What A ran, it ran before its revoke's commit: every record exactly
     * once between the two members, none lost from A's queue, none read again
     * by the next owner. */
    int dup = -1, lost = -1;
    for (int64_t o = 0; ok && o < N; o++) {
        int n = cst_seen_count(a.seen, 0, o) + cst_seen_count(b.seen, 0, o);
        if (n > 1 && dup < 0) dup = (int)o;
    }
    for (int64_t o = 0; !ok && o < N; o++)
        if (cst_seen_count(a.seen, 0, o) + cst_seen_count(b.seen, 0, o) == 0 && lost < 0) lost = (int)o;
    CST_OK(cs_app_stop(app_b));
    cs_app_destroy(app_b);
    CST_OK(cs_app_stop(app_a));
    cs_app_destroy(app_a);
    assert_false(timed_out);
    assert_true(revokes >= 1);
    assert_null(atomic_load(&release_at_settle_wait)); /* the revoke waited, and let the record go */
    if (!ok) fail_msg("p0@%d was never handled within 60 s: lost from A's queue at the revoke?", lost);
    /* The embedded cluster (librdkafka 2.0.2's mock) refuses an OffsetCommit
     * while the group is joining (REBALANCE_IN_PROGRESS), where a real broker
     * accepts one of the current generation: there the revoke's commit fails
     * and the next owner reads p0 from the start again. So the commit at the
     * revoke is checked on the real broker only. */
    if (dup >= 0 && !cs_test_cluster_is_embedded(cst_cluster))
        fail_msg("p0@%d handled twice (A %d, B %d): the revoke did not commit what A ran", dup,
                 cst_seen_count(a.seen, 0, dup), cst_seen_count(b.seen, 0, dup));
    /* The records A held at the revoke ran before the partition went (on the
     * embedded cluster, where the revoke's commit fails, a record dropped
     * from A's queue would come back in a later assignment and hide). */
    for (int64_t o = 0; o < MAX_OPEN; o++)
        if (cst_seen_count(a.first_assignment, 0, o) != 1)
            fail_msg("p0@%lld was in A's queue at the revoke, but A ran it %d times before its next assignment",
                     (long long)o, cst_seen_count(a.first_assignment, 0, o));
    fixture_free(&a);
    fixture_free(&b);
}

/* ---- several subscriptions: one drain deadline, not one each ------------------- */

/* A generous drain: the stop's own work (joins, commits, closes) stays well
 * inside it on a loaded machine under sanitizers. */
enum { SUBS = 3, DRAIN_MS = 3000 };

/* Each subscription keeps its first record pending, never settled before the
 * stop: its drain runs to the deadline. */
static cs_outcome park(cs_delivery *d, void *user) {
    cs_delivery *_Atomic *parked = user;
    cs_delivery *none = NULL;
    return atomic_compare_exchange_strong(parked, &none, d) ? CS_PENDING : CS_ACK;
}

static bool all_parked(void *arg) {
    cs_delivery *_Atomic *parked = arg;
    for (int i = 0; i < SUBS; i++)
        if (!atomic_load(&parked[i])) return false;
    return true;
}

static void subscriptions_drain_together_under_one_deadline(void **state) {
    (void)state;
    cs_app *app = cs_app_new("stop-drains", "1.0");
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    cs_delivery *_Atomic parked[SUBS] = {0};
    for (int i = 0; i < SUBS; i++) {
        char topic[128], group[160];
        cst_fresh("stopdrains", 1, topic, group, sizeof topic);
        CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "r", 1, NULL));
        cs_sub *s = cs_kafka_subscribe(k, topic, park, &parked[i]);
        assert_non_null(s);
        CST_OK(cs_sub_group(s, group));
        CST_OK(cs_sub_commit_mode(s, CS_COMMIT_TRACKED));
        CST_OK(cs_sub_drain_timeout_ms(s, DRAIN_MS));
    }
    CST_OK(cs_app_add_kafka(app, k));
    CST_OK(cs_app_start(app));
    if (!cst_wait(all_parked, parked, 30000)) fail_msg("not every subscription parked its record within 30 s");

    atomic_store(&n_cuts, 0);
    atomic_store(&record_cuts, true);
    int64_t t0 = cst_now_ms();
    CST_OK(cs_app_stop(app));
    int64_t elapsed = cst_now_ms() - t0;
    atomic_store(&record_cuts, false);
    for (int i = 0; i < SUBS; i++) assert_int_equal(cs_delivery_settle(parked[i], CS_ACK), CS_ERR_STALE);
    cs_app_destroy(app);

    /* Every drain ran out with its record open, and all of them ran out at
     * one deadline: drains one after another give each its deadline when the
     * previous one has run out, DRAIN_MS later at least. */
    int cuts = atomic_load(&n_cuts);
    if (cuts != SUBS) fail_msg("%d drains ran out with a record open, not %d", cuts, SUBS);
    int64_t lo = atomic_load(&cut_deadlines[0]), hi = lo;
    for (int i = 1; i < SUBS; i++) {
        int64_t d = atomic_load(&cut_deadlines[i]);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    printf("%d subscriptions: stop took %lld ms, drain deadlines %lld ms apart (drain_timeout_ms=%d)\n", SUBS,
           (long long)elapsed, (long long)(hi - lo), DRAIN_MS);
    if (hi - lo >= DRAIN_MS)
        fail_msg("the drain deadlines are %lld ms apart: the subscriptions drained one after another",
                 (long long)(hi - lo));
    /* The stop waited out the drain, and once: one after another take
     * SUBS x DRAIN_MS at least. */
    assert_true(elapsed >= DRAIN_MS);
    if (elapsed >= (SUBS - 1) * DRAIN_MS)
        fail_msg("the stop took %lld ms with %d subscriptions and drain_timeout_ms=%d: a deadline each, not one",
                 (long long)elapsed, SUBS, DRAIN_MS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tracked_retry_racing_a_stop_goes_to_the_next_owner),
        cmocka_unit_test(auto_stop_drains_the_lanes_and_commits_at_close),
        cmocka_unit_test(auto_revoke_drains_and_commits),
        cmocka_unit_test(subscriptions_drain_together_under_one_deadline),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
