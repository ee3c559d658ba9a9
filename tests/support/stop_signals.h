/* stop_signals.h — for the services the tests run as child processes: block
 * SIGINT and SIGTERM first thing in main, so that a stop signal arriving
 * before cs_app_run waits for it stays pending (instead of killing the
 * process) and then starts the graceful stop. */
#ifndef CST_STOP_SIGNALS_H
#define CST_STOP_SIGNALS_H

#include <signal.h>

static inline void cst_hold_stop_signals(void) {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, NULL);
}

#endif
