/* test_lifecycle.c — the app lifecycle: the start-up and shutdown hooks run
 * exactly once and in their place, a failing start-up hook stops the start
 * before any consumer, SIGTERM and SIGINT stop a service run by cs_app_run
 * gracefully (hooks, commit, exit 0), a stop returns while records keep
 * arriving, and a librdkafka fatal error stops the app with its reason instead
 * of hanging. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cstest.h"
#include "cstream/rdkafka.h"

#ifndef LIFECYCLE_CHILD
#error "LIFECYCLE_CHILD must name the lifecycle_child executable"
#endif

extern char **environ;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- in-process fixture ---------------------------------------------------- */

typedef struct fixture {
    cs_app *app;
    cs_sub *sub;
    _Atomic int startups, shutdowns, handled, assigns;
    _Atomic(void *) startup_user, shutdown_user, handler_user, assign_user;
    _Atomic(cs_app *) startup_app, shutdown_app;
    _Atomic bool consumer_at_startup;  /* a consumer ran when the start-up hook did */
    _Atomic bool consumer_at_shutdown; /* a consumer still ran when the shutdown hook did */
    _Atomic int handled_at_startup;
    bool fail_startup;
} fixture;

static cs_err startup_hook(cs_app *app, void *user) {
    fixture *f = user;
    atomic_fetch_add(&f->startups, 1);
    atomic_store(&f->startup_user, user);
    atomic_store(&f->startup_app, app);
    atomic_store(&f->consumer_at_startup, cs_sub_rdkafka_consumer(f->sub) != NULL);
    atomic_store(&f->handled_at_startup, atomic_load(&f->handled));
    if (f->fail_startup) return cs_app_fail(app, "db down (%s)", "connection refused");
    return CS_OK;
}

static void shutdown_hook(cs_app *app, void *user) {
    fixture *f = user;
    atomic_fetch_add(&f->shutdowns, 1);
    atomic_store(&f->shutdown_user, user);
    atomic_store(&f->shutdown_app, app);
    atomic_store(&f->consumer_at_shutdown, cs_sub_rdkafka_consumer(f->sub) != NULL);
}

static cs_outcome handler(cs_delivery *d, void *user) {
    (void)d;
    fixture *f = user;
    atomic_store(&f->handler_user, user);
    atomic_fetch_add(&f->handled, 1);
    return CS_ACK;
}

static void on_assign(cs_sub *s, const char *topic, const int32_t *partitions, size_t n, void *user) {
    (void)s;
    (void)topic;
    (void)partitions;
    (void)n;
    fixture *f = user;
    atomic_store(&f->assign_user, user);
    atomic_fetch_add(&f->assigns, 1);
}

static bool handled_one(void *arg) { return atomic_load(&((fixture *)arg)->handled) >= 1; }
static bool assigned(void *arg) { return atomic_load(&((fixture *)arg)->assigns) >= 1; }

/* An app with both hooks and one subscription on `topic`; not started. */
static void fixture_init(fixture *f, const char *name, const char *topic, const char *group) {
    memset(f, 0, sizeof *f);
    f->app = cs_app_new(name, "1.0");
    assert_non_null(f->app);
    cs_kafka *k = cs_test_kafka_new(cst_cluster);
    assert_non_null(k);
    f->sub = cs_kafka_subscribe(k, topic, handler, f);
    assert_non_null(f->sub);
    CST_OK(cs_sub_group(f->sub, group));
    CST_OK(cs_sub_on_assign(f->sub, on_assign, f));
    CST_OK(cs_app_on_startup(f->app, startup_hook, f));
    CST_OK(cs_app_on_shutdown(f->app, shutdown_hook, f));
    CST_OK(cs_app_add_kafka(f->app, k));
}

static void hooks_run_once_with_their_user_pointers(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("lc-hooks", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    fixture f;
    fixture_init(&f, "lc-hooks", topic, group);

    CST_OK(cs_app_start(f.app));
    assert_int_equal(atomic_load(&f.startups), 1);
    assert_int_equal(atomic_load(&f.shutdowns), 0);
    assert_ptr_equal(atomic_load(&f.startup_user), &f);
    assert_ptr_equal(atomic_load(&f.startup_app), f.app);
    /* The start-up hook runs before the brokers start. */
    assert_false(atomic_load(&f.consumer_at_startup));
    assert_int_equal(atomic_load(&f.handled_at_startup), 0);
    assert_non_null(cs_sub_rdkafka_consumer(f.sub));

    if (!cst_wait(handled_one, &f, 30000)) fail_msg("the record was not handled within 30 s");
    assert_ptr_equal(atomic_load(&f.handler_user), &f);
    assert_true(cst_wait(assigned, &f, 1000));
    assert_ptr_equal(atomic_load(&f.assign_user), &f);
    assert_int_equal(atomic_load(&f.shutdowns), 0);

    CST_OK(cs_app_stop(f.app));
    assert_int_equal(atomic_load(&f.shutdowns), 1);
    assert_ptr_equal(atomic_load(&f.shutdown_user), &f);
    assert_ptr_equal(atomic_load(&f.shutdown_app), f.app);
    /* The shutdown hook runs after every broker closed. */
    assert_false(atomic_load(&f.consumer_at_shutdown));
    assert_null(cs_sub_rdkafka_consumer(f.sub));

    CST_OK(cs_app_stop(f.app)); /* idempotent */
    assert_int_equal(atomic_load(&f.startups), 1);
    assert_int_equal(atomic_load(&f.shutdowns), 1);
    cs_app_destroy(f.app);
    assert_int_equal(atomic_load(&f.startups), 1);
    assert_int_equal(atomic_load(&f.shutdowns), 1);
    assert_int_equal(atomic_load(&f.handled), 1);
}

/* cs_app_destroy stops a running app: the shutdown hook runs, once. */
static void destroy_while_running_runs_shutdown_once(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("lc-destroy", 1, topic, group, sizeof topic);
    fixture f;
    fixture_init(&f, "lc-destroy", topic, group);
    CST_OK(cs_app_start(f.app));
    assert_int_equal(atomic_load(&f.startups), 1);
    cs_app_destroy(f.app);
    assert_int_equal(atomic_load(&f.startups), 1);
    assert_int_equal(atomic_load(&f.shutdowns), 1);
    assert_false(atomic_load(&f.consumer_at_shutdown));
}

static void failing_startup_hook_aborts_the_start(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("lc-hookfail", 1, topic, group, sizeof topic);
    fixture f;
    fixture_init(&f, "lc-hookfail", topic, group);
    f.fail_startup = true;

    cs_err err = cs_app_start(f.app);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", cs_errmsg());
    if (err != CS_ERR_HOOK) fail_msg("cs_app_start -> %s, expected CS_ERR_HOOK: %s", cs_err_name(err), msg);
    if (!strstr(msg, "db down (connection refused)")) fail_msg("the hook's reason is missing: %s", msg);
    assert_int_equal(atomic_load(&f.startups), 1);
    assert_int_equal(atomic_load(&f.shutdowns), 0);
    assert_null(cs_sub_rdkafka_consumer(f.sub)); /* no consumer started */

    CST_OK(cs_app_stop(f.app));
    assert_int_equal(atomic_load(&f.shutdowns), 0);
    assert_null(cs_sub_rdkafka_consumer(f.sub));
    cs_app_destroy(f.app);
    assert_int_equal(atomic_load(&f.startups), 1);
    assert_int_equal(atomic_load(&f.shutdowns), 0);
    assert_int_equal(atomic_load(&f.assigns), 0);
    assert_int_equal(atomic_load(&f.handled), 0);
}

/* ---- stopping from another thread ------------------------------------------- */

typedef struct stopper {
    cs_app *app;
    _Atomic int phase; /* 1: cs_app_wait returned, 2: cs_app_stop returned */
    cs_err wait_err, stop_err;
    char wait_msg[1024], stop_msg[1024];
} stopper;

static void *wait_then_stop(void *arg) {
    stopper *st = arg;
    st->wait_err = cs_app_wait(st->app);
    snprintf(st->wait_msg, sizeof st->wait_msg, "%s", cs_errmsg());
    atomic_store(&st->phase, 1);
    st->stop_err = cs_app_stop(st->app);
    snprintf(st->stop_msg, sizeof st->stop_msg, "%s", cs_errmsg());
    atomic_store(&st->phase, 2);
    return NULL;
}

static bool phase_reached_1(void *arg) { return atomic_load(&((stopper *)arg)->phase) >= 1; }
static bool phase_reached_2(void *arg) { return atomic_load(&((stopper *)arg)->phase) >= 2; }

/* A hang cannot be recovered from inside the process (the app's threads are
 * stuck): report and end the test binary rather than wait for ctest's timeout. */
static void hang(const char *what) {
    fprintf(stderr, "FAILED: %s did not return within 30 s after a librdkafka fatal error\n", what);
    fflush(stderr);
    _exit(1);
}

/* ---- a stop while records keep arriving ------------------------------------- */

typedef struct feeder {
    const char *topic;
    int partitions;
    _Atomic bool stop;
} feeder;

static void *feed(void *arg) {
    feeder *fd = arg;
    for (int i = 0; !atomic_load(&fd->stop); i++) {
        cs_test_produce(cst_cluster, fd->topic, i % fd->partitions, NULL, 0, "v", 1, NULL);
        struct timespec ms = {0, 2000000};
        nanosleep(&ms, NULL);
    }
    return NULL;
}

static void *stop_app(void *arg) {
    stopper *st = arg;
    st->stop_err = cs_app_stop(st->app);
    atomic_store(&st->phase, 2);
    return NULL;
}

static bool handled_many(void *arg) { return atomic_load(&((fixture *)arg)->handled) >= 50; }

/* Records keep arriving in the partitions' (empty) queues while the consumer
 * closes. Each arrival wakes the fetch thread with a yield on the consumer
 * queue; rd_kafka_consumer_close forwards that queue to its own and returned
 * at the first yield, before the group was left, and the destroy that
 * followed never returned. Several rounds, Auto and Tracked. */
static void stop_while_records_arrive(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("lc-feed", 4, topic, group, sizeof topic);
    feeder fd = {.topic = topic, .partitions = 4};
    pthread_t feeder_thread;
    assert_int_equal(pthread_create(&feeder_thread, NULL, feed, &fd), 0);
    for (int round = 0; round < 6; round++) {
        fixture f;
        fixture_init(&f, "lc-feed", topic, group);
        CST_OK(cs_sub_commit_mode(f.sub, round % 2 ? CS_COMMIT_TRACKED : CS_COMMIT_AUTO));
        CST_OK(cs_app_start(f.app));
        if (!cst_wait(handled_many, &f, 30000)) fail_msg("round %d: records were not handled within 30 s", round);
        stopper st = {.app = f.app};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, stop_app, &st), 0);
        if (!cst_wait(phase_reached_2, &st, 30000)) {
            fprintf(stderr, "FAILED: round %d: cs_app_stop did not return within 30 s while records arrived\n", round);
            fflush(stderr);
            _exit(1);
        }
        pthread_join(t, NULL);
        CST_OK(st.stop_err);
        cs_app_destroy(f.app);
    }
    atomic_store(&fd.stop, true);
    pthread_join(feeder_thread, NULL);
}

/* ---- a librdkafka fatal error ------------------------------------------------ */

static void fatal_error_stops_the_app_with_its_reason(void **state) {
    (void)state;
    char topic[128], group[160];
    cst_fresh("lc-fatal", 1, topic, group, sizeof topic);
    CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));
    fixture f;
    fixture_init(&f, "lc-fatal", topic, group);
    CST_OK(cs_app_start(f.app));
    /* Running for real: in the group, the record handled. */
    if (!cst_wait(handled_one, &f, 30000)) fail_msg("the record was not handled within 30 s");

    stopper st = {.app = f.app};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_then_stop, &st), 0);
    rd_kafka_t *rk = cs_sub_rdkafka_consumer(f.sub);
    assert_non_null(rk);
    assert_int_equal(rd_kafka_test_fatal_error(rk, RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID, "injected by test"),
                     RD_KAFKA_RESP_ERR_NO_ERROR);

    if (!cst_wait(phase_reached_1, &st, 15000)) {
        /* Not stopped by the fatal error: stop it by hand so the test can end. */
        fprintf(stderr, "FAILED: cs_app_wait did not return within 15 s of a librdkafka fatal error; "
                        "stopping the app with cs_app_request_stop\n");
        cs_app_request_stop(f.app);
        if (!cst_wait(phase_reached_2, &st, 30000)) hang("cs_app_stop after cs_app_request_stop");
        pthread_join(t, NULL);
        cs_app_destroy(f.app);
        fail_msg("cs_app_wait did not return within 15 s of a librdkafka fatal error (consumer fatal "
                 "errors must stop the app); it returned %s only after cs_app_request_stop",
                 cs_err_name(st.wait_err));
    }
    if (st.wait_err != CS_ERR_FATAL)
        fail_msg("cs_app_wait -> %s, expected CS_ERR_FATAL: %s", cs_err_name(st.wait_err), st.wait_msg);
    if (!strstr(st.wait_msg, "injected by test")) fail_msg("cs_app_wait: the reason is missing: %s", st.wait_msg);
    if (!cst_wait(phase_reached_2, &st, 30000)) hang("cs_app_stop");
    pthread_join(t, NULL);
    if (st.stop_err != CS_ERR_FATAL)
        fail_msg("cs_app_stop -> %s, expected CS_ERR_FATAL: %s", cs_err_name(st.stop_err), st.stop_msg);
    if (!strstr(st.stop_msg, "injected by test")) fail_msg("cs_app_stop: the reason is missing: %s", st.stop_msg);
    /* A stop for a fatal error is still a stop: the shutdown hook ran, once. */
    assert_int_equal(atomic_load(&f.shutdowns), 1);
    assert_null(cs_sub_rdkafka_consumer(f.sub));

    /* Asked again, the app still says why it stopped. */
    cs_err again = cs_app_wait(f.app);
    assert_int_equal(again, CS_ERR_FATAL);
    assert_non_null(strstr(cs_errmsg(), "injected by test"));
    cs_app_destroy(f.app);
    assert_int_equal(atomic_load(&f.shutdowns), 1);
}

/* ---- a service stopped by a signal (child process) ---------------------------- */

enum { SIGNAL_RECORDS = 5 };

typedef struct child {
    pid_t pid;
    int out; /* read end of the child's stdout, -1 at EOF */
    char buf[16384];
    size_t len;
    bool exited;
    int status;
} child;

/* Reads what the child wrote, waiting at most timeout_ms for something. */
static void child_read(child *c, int timeout_ms) {
    if (c->out < 0) return;
    struct pollfd p = {.fd = c->out, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0) return;
    if (c->len + 1 >= sizeof c->buf) fail_msg("child wrote more than %zu bytes:\n%s", sizeof c->buf, c->buf);
    ssize_t n = read(c->out, c->buf + c->len, sizeof c->buf - 1 - c->len);
    if (n > 0) {
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
    } else if (n == 0 || errno != EINTR) {
        close(c->out);
        c->out = -1;
    }
}

/* Complete lines that are `word` or start with "word ". */
static int child_lines(const child *c, const char *word) {
    int n = 0;
    size_t wl = strlen(word);
    for (const char *line = c->buf; *line;) {
        const char *end = strchr(line, '\n');
        if (!end) break;
        if ((size_t)(end - line) >= wl && !strncmp(line, word, wl) && (line[wl] == '\n' || line[wl] == ' ')) n++;
        line = end + 1;
    }
    return n;
}

static void child_kill(child *c) {
    if (c->exited) return;
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &c->status, 0);
    c->exited = true;
}

static void child_close(child *c) {
    child_kill(c);
    if (c->out >= 0) close(c->out);
    c->out = -1;
}

/* Waits until the child printed at least n lines `word`; false if it exited or timed out. */
static bool child_wait_lines(child *c, const char *word, int n, int64_t deadline) {
    while (child_lines(c, word) < n) {
        if (c->out < 0 || now_ms() >= deadline) return false;
        child_read(c, 50);
    }
    return true;
}

/* Waits (bounded) for the child to exit, reading its output meanwhile, then
 * reads the rest of it. False if it did not exit in time. */
static bool child_wait_exit(child *c, int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms;
    while (!c->exited) {
        pid_t r = waitpid(c->pid, &c->status, WNOHANG);
        if (r == c->pid) c->exited = true;
        else if (r < 0 && errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
        else if (now_ms() >= deadline) return false;
        else if (c->out >= 0) child_read(c, 20);
        else usleep(20 * 1000);
    }
    /* Exited: its end of the pipe is closed, so reading reaches EOF. */
    while (c->out >= 0 && now_ms() < deadline + 5000) child_read(c, 100);
    return true;
}

/* Runs lifecycle_child TOPIC GROUP with CSTREAM_BROKERS naming the test
 * cluster, its stdout on a pipe and SIGINT/SIGTERM at their defaults. */
static void child_spawn(child *c, const char *topic, const char *group) {
    memset(c, 0, sizeof *c);
    c->out = -1;
    /* Everything the child needs is built before fork: after it, only
     * async-signal-safe calls until exec. */
    size_t n_env = 0;
    while (environ[n_env]) n_env++;
    char **envp = calloc(n_env + 2, sizeof *envp);
    assert_non_null(envp);
    size_t j = 0;
    for (size_t i = 0; i < n_env; i++)
        if (strncmp(environ[i], "CSTREAM_BROKERS=", 16)) envp[j++] = environ[i];
    char brokers[512];
    snprintf(brokers, sizeof brokers, "CSTREAM_BROKERS=%s", cs_test_cluster_brokers(cst_cluster));
    envp[j++] = brokers;
    envp[j] = NULL;
    char *argv[] = {LIFECYCLE_CHILD, (char *)topic, (char *)group, NULL};
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigset_t none;
    sigemptyset(&none);

    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0) fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        sigaction(SIGTERM, &dfl, NULL);
        sigaction(SIGINT, &dfl, NULL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (dup2(fds[1], STDOUT_FILENO) < 0) _exit(126);
        execve(LIFECYCLE_CHILD, argv, envp);
        _exit(127);
    }
    close(fds[1]);
    free(envp);
    c->pid = pid;
    c->out = fds[0];
}

static void signal_stops_gracefully(int sig) {
    char topic[128], group[160];
    cst_fresh(sig == SIGTERM ? "lc-sigterm" : "lc-sigint", 1, topic, group, sizeof topic);
    for (int i = 0; i < SIGNAL_RECORDS; i++) CST_OK(cs_test_produce(cst_cluster, topic, 0, NULL, 0, "v", 1, NULL));

    child c;
    child_spawn(&c, topic, group);
    int64_t deadline = now_ms() + 60000;
    if (!child_wait_lines(&c, "startup", 1, deadline) || !child_wait_lines(&c, "assigned", 1, deadline) ||
        !child_wait_lines(&c, "handled", SIGNAL_RECORDS, deadline)) {
        child_close(&c);
        fail_msg("the child did not start, get its assignment and handle %d records within 60 s; "
                 "its output:\n%s",
                 SIGNAL_RECORDS, c.buf);
    }
    assert_int_equal(child_lines(&c, "shutdown"), 0);
    int64_t sent = now_ms();
    assert_int_equal(kill(c.pid, sig), 0);
    if (!child_wait_exit(&c, 30000)) {
        child_close(&c);
        fail_msg("the child did not exit within 30 s of %s; killed. Its output:\n%s", strsignal(sig), c.buf);
    }
    fprintf(stderr, "child stopped %lld ms after %s\n", (long long)(now_ms() - sent), strsignal(sig));
    child_close(&c);
    if (!WIFEXITED(c.status))
        fail_msg("the child died of signal %d instead of exiting; its output:\n%s",
                 WIFSIGNALED(c.status) ? WTERMSIG(c.status) : -1, c.buf);
    if (WEXITSTATUS(c.status) != 0) fail_msg("the child exited %d; its output:\n%s", WEXITSTATUS(c.status), c.buf);
    if (child_lines(&c, "shutdown") != 1 || child_lines(&c, "startup") != 1 || child_lines(&c, "exit CS_OK") != 1)
        fail_msg("expected one startup, one shutdown and exit CS_OK; the child's output:\n%s", c.buf);
    if (child_lines(&c, "handled") != SIGNAL_RECORDS)
        fail_msg("expected each record handled once; the child's output:\n%s", c.buf);
    /* The graceful stop committed what was handled (the child's timed commit
     * is off, so only the stop can have). */
    int64_t committed = -1;
    CST_OK(cs_test_committed(cst_cluster, group, topic, 0, &committed));
    assert_int_equal(committed, SIGNAL_RECORDS);
}

static void sigterm_stops_gracefully(void **state) {
    (void)state;
    signal_stops_gracefully(SIGTERM);
}

static void sigint_stops_gracefully(void **state) {
    (void)state;
    signal_stops_gracefully(SIGINT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hooks_run_once_with_their_user_pointers),
        cmocka_unit_test(destroy_while_running_runs_shutdown_once),
        cmocka_unit_test(failing_startup_hook_aborts_the_start),
        cmocka_unit_test(sigterm_stops_gracefully),
        cmocka_unit_test(sigint_stops_gracefully),
        cmocka_unit_test(fatal_error_stops_the_app_with_its_reason),
        cmocka_unit_test(stop_while_records_arrive),
    };
    return cmocka_run_group_tests(tests, cst_cluster_setup, cst_cluster_teardown);
}
