/* Helpers of libwormhole's C tests (Tests/c.sh runs them): checks, child processes, and a
 * loop that waits on a context's descriptor (poll, never a sleep) and dispatches.
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef WH_TEST_H
#define WH_TEST_H

#include <wormhole.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

extern int wh_test_failures;

/* Fails the current test (counted; the program exits non-zero at the end) with a message. */
#define CHECK(condition, ...)                                                                        \
    do {                                                                                             \
        if (!(condition)) {                                                                          \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #condition);            \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
            wh_test_failures++;                                                                      \
        }                                                                                            \
    } while (0)

/* Checks a call succeeded, printing its error otherwise (and freeing it). */
#define CHECK_OK(call)                                                                               \
    do {                                                                                             \
        wh_error *check_error_ = NULL;                                                               \
        wh_status check_status_ = (call);                                                            \
        if (check_status_ != WH_OK) {                                                                \
            fprintf(stderr, "%s:%d: %s failed: %d %s: %s\n", __FILE__, __LINE__, #call,              \
                    (int)check_status_, check_error_ ? wh_error_name(check_error_) : "?",            \
                    check_error_ ? wh_error_message(check_error_) : "(no error object)");            \
            wh_test_failures++;                                                                      \
        }                                                                                            \
        wh_error_free(check_error_);                                                                 \
    } while (0)

/* The error pointer CHECK_OK's calls pass. */
#define ERR (&check_error_)

/* Checks that a call fails with `expected`, with a message, and (when `value` is not NULL) an
 * error value equal to it. */
void check_refused(const char *what, wh_status status, wh_error *error, wh_status expected, const char *value);

/* Checks that `call` (which passes `&error`) fails with `expected` (see check_refused); the
 * call is made before its error is read. */
#define REFUSED(what, call, expected, value)                                                         \
    do {                                                                                             \
        wh_error *error = NULL;                                                                      \
        wh_status refused_status_ = (call);                                                          \
        check_refused(what, refused_status_, error, expected, value);                                \
    } while (0)

/* Runs a shell command; returns its exit status (or -1). */
int run(const char *format, ...);
/* Runs a shell command and returns its standard output (malloc'd, trailing newline removed). */
char *capture(const char *format, ...);

/* A child that writes "ready" on standard error before its output (`wormholectl listen`,
 * `observe`): started with `sh -c`, its standard output readable through `out`. */
typedef struct child {
    pid_t pid;
    int out;
    int err;
} child;
int start_ready(child *child, int timeout_ms, const char *format, ...);
/* Reads one line of the child's standard output within `timeout_ms` (NULL on timeout or EOF). */
char *child_line(child *child, int timeout_ms);
/* Waits for the child to exit and returns its exit status. */
int child_wait(child *child);

/* Polls the context's descriptor and dispatches until `*flag` is at least `target` or
 * `timeout_ms` passes; returns whether it was reached. */
int pump(wh_context *context, const volatile int *flag, int target, int timeout_ms);
/* Whether the context's descriptor is readable now. */
int readable(wh_context *context);

/* A new context on the test bus (DBUS_SESSION_BUS_ADDRESS) and root (WORMHOLE_CONTAINER_ROOT). */
wh_context *test_context(void);
/* An identifier of this test process: "WHAT-PID". */
void unique_identifier(char *buffer, size_t size, const char *what);
/* Records that a handler ran, and checks it ran on the thread that started the tests. */
void on_handler_thread(void);

/* The Swift tool and the Python package, as shell words (Tests/c.sh sets them). */
const char *swift_tool(void);
const char *python_tool(void);

#endif
