/* cstest_skip.h — skips that ctest sees (tests/support/cstest_skip.c). Every
 * test binary links it; cstest.h includes it. */
#ifndef CSTEST_SKIP_H
#define CSTEST_SKIP_H

/* The exit status of a test binary none of whose tests failed but some
 * skipped: every ctest entry declares it as SKIP_RETURN_CODE
 * (tests/CMakeLists.txt), so ctest reports the entry as skipped, not passed. */
#define CST_SKIPPED 77

/* Skips the running test for the reason given (printf format: name what the
 * test needs that this run lacks). The reason is printed and listed at the end
 * of `make test`. A bare cmocka skip() fails the test instead. */
#define cst_skip(...)                                                                                                  \
    do {                                                                                                               \
        cst_skip_reason_(__func__, __VA_ARGS__);                                                                       \
        skip();                                                                                                        \
    } while (0)
void cst_skip_reason_(const char *test, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
