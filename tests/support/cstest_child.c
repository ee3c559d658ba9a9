/* cstest_child.c — see cstest_child.h. */
#define _POSIX_C_SOURCE 200809L
#include "cstest_child.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "cstest.h"

extern char **environ;

static const char *const default_drop[] = {"CSTREAM_", "OPS_", NULL};

static bool dropped(const char *var, const char *const *drop) {
    for (size_t i = 0; drop[i]; i++)
        if (!strncmp(var, drop[i], strlen(drop[i]))) return true;
    return false;
}

pid_t cst_spawn_io(const char *const *argv, const cst_child_io *io) {
    mode_t mode = io->mode ? io->mode : 0644;
    assert_non_null(io->out);
    assert_non_null(io->err);
    if (io->in_text) {
        assert_non_null(io->in);
        FILE *f = fopen(io->in, "w");
        assert_non_null(f);
        fputs(io->in_text, f);
        fclose(f);
        assert_int_equal(chmod(io->in, mode), 0);
    }
    const char *const *drop = io->drop_env ? io->drop_env : default_drop;
    size_t n = 0, extra = 0;
    while (environ[n]) n++;
    while (io->env && io->env[extra]) extra++;
    const char **envp = calloc(n + extra + 1, sizeof *envp);
    assert_non_null(envp);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (!dropped(environ[i], drop)) envp[j++] = environ[i];
    for (size_t i = 0; i < extra; i++) envp[j++] = io->env[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (io->in) posix_spawn_file_actions_addopen(&fa, 0, io->in, O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, io->out, O_WRONLY | O_CREAT | O_TRUNC, mode);
    posix_spawn_file_actions_addopen(&fa, 2, io->err, O_WRONLY | O_CREAT | O_TRUNC, mode);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, (char *const *)envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    if (rc) fail_msg("posix_spawn %s: %s", argv[0], strerror(rc));
    return pid;
}

int cst_wait_exit(pid_t pid, int timeout_ms) {
    int64_t deadline = cst_now_ms() + timeout_ms;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            if (!WIFEXITED(status)) fail_msg("child %d did not exit normally (status %d)", (int)pid, status);
            return WEXITSTATUS(status);
        }
        if (cst_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("child %d did not exit within %d ms", (int)pid, timeout_ms);
        }
        struct timespec tick = {0, 20 * 1000000L};
        nanosleep(&tick, NULL);
    }
}

int cst_run_io(const char *const *argv, const cst_child_io *io, int timeout_ms, char **out, char **err) {
    int status = cst_wait_exit(cst_spawn_io(argv, io), timeout_ms);
    *out = cst_slurp(io->out);
    *err = cst_slurp(io->err);
    return status;
}
