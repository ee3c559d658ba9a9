/* cstest_child.h — child processes for the tests that run a service or a
 * tool (ops_service, node, promtool) as a program of its own: spawn it with
 * a chosen environment and files for stdin, stdout and stderr, wait for its
 * exit with a timeout, and read what it wrote. Part of the cstest library;
 * the helpers fail the running cmocka test on error. */
#ifndef CSTEST_CHILD_H
#define CSTEST_CHILD_H

#include <sys/types.h>

/* How a child is started. Zero fields take the defaults said per field. */
typedef struct cst_child_io {
    /* Prefixes of the parent's environment variables the child does not get
     * ("NAME=" entries that start with one of them), NULL-terminated; NULL
     * drops those starting with CSTREAM_ or OPS_. */
    const char *const *drop_env;
    /* "NAME=VALUE" entries added to what is left, NULL-terminated; may be NULL. */
    const char *const *env;
    /* The child's stdin: this file; NULL, the parent's stdin. */
    const char *in;
    /* If set (in must be set too), first written to `in` (created or
     * truncated, then given `mode`). */
    const char *in_text;
    /* The child's stdout and stderr: these files, created or truncated (both
     * must be set). */
    const char *out, *err;
    /* The mode of the files created: out and err when new (less the umask),
     * in when in_text is written (exactly, by chmod). 0 means 0644. */
    mode_t mode;
} cst_child_io;

/* Starts argv[0] (a path; argv NULL-terminated, argv[0] included) with
 * posix_spawn as `io` says; fails the test if it cannot. The caller owns
 * the child: cst_wait_exit reaps it. Nothing is allocated for the caller. */
pid_t cst_spawn_io(const char *const *argv, const cst_child_io *io);

/* Waits for the child to exit and returns its exit status. Fails the test
 * if it ends by a signal, or if it has not exited within timeout_ms (it is
 * then killed with SIGKILL and reaped first). */
int cst_wait_exit(pid_t pid, int timeout_ms);

/* cst_spawn_io, cst_wait_exit(timeout_ms), then the whole of io->out and
 * io->err into *out and *err (NUL-terminated, malloc'd: the caller frees
 * both; "" for a file that cannot be read). Returns the exit status. */
int cst_run_io(const char *const *argv, const cst_child_io *io, int timeout_ms, char **out, char **err);

#endif
