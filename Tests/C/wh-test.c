/* Helpers of libwormhole's C tests. SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "wh-test.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int wh_test_failures;
static pthread_t main_thread;
static int main_thread_set;

void check_refused(const char *what, wh_status status, wh_error *error, wh_status expected, const char *value) {
    CHECK(status == expected, "%s: status %d, expected %d (%s)", what, (int)status, (int)expected,
          error ? wh_error_message(error) : "no error");
    CHECK(error != NULL, "%s: no error object", what);
    if (error) {
        CHECK(wh_error_code(error) == status, "%s: error code %d differs from status %d", what,
              (int)wh_error_code(error), (int)status);
        CHECK(wh_error_message(error) && *wh_error_message(error), "%s: empty message", what);
        CHECK(wh_error_name(error) && *wh_error_name(error), "%s: empty name", what);
        if (value)
            CHECK(wh_error_value(error) && strcmp(wh_error_value(error), value) == 0,
                  "%s: error value '%s', expected '%s'", what, wh_error_value(error) ? wh_error_value(error) : "(null)",
                  value);
    }
    wh_error_free(error);
}

static char *format_command(const char *format, va_list arguments) {
    char *command = NULL;
    if (vasprintf(&command, format, arguments) < 0) abort();
    return command;
}

int run(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    char *command = format_command(format, arguments);
    va_end(arguments);
    int status = system(command);
    free(command);
    return status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

char *capture(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    char *command = format_command(format, arguments);
    va_end(arguments);
    FILE *pipe = popen(command, "r");
    free(command);
    if (!pipe) return NULL;
    size_t size = 0, used = 0;
    char *text = NULL;
    char chunk[4096];
    size_t count;
    while ((count = fread(chunk, 1, sizeof chunk, pipe)) > 0) {
        if (used + count + 1 > size) {
            size = (used + count + 1) * 2;
            text = realloc(text, size);
        }
        memcpy(text + used, chunk, count);
        used += count;
    }
    pclose(pipe);
    if (!text) return strdup("");
    text[used] = 0;
    while (used > 0 && text[used - 1] == '\n') text[--used] = 0;
    return text;
}

/* Reads one line from `fd` within `timeout_ms`, one byte at a time (children's lines are short). */
static char *read_line(int fd, int timeout_ms) {
    size_t size = 256, used = 0;
    char *line = malloc(size);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        struct pollfd poll_fd = {fd, POLLIN, 0};
        if (elapsed >= timeout_ms || poll(&poll_fd, 1, (int)(timeout_ms - elapsed)) <= 0) break;
        char byte;
        ssize_t count = read(fd, &byte, 1);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) break;
        if (byte == '\n') {
            line[used] = 0;
            return line;
        }
        if (used + 2 > size) line = realloc(line, size *= 2);
        line[used++] = byte;
    }
    free(line);
    return NULL;
}

int start_ready(child *child, int timeout_ms, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    char *command = format_command(format, arguments);
    va_end(arguments);
    int out[2], err[2];
    if (pipe(out) || pipe(err)) abort();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]);
        close(err[0]);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    free(command);
    close(out[1]);
    close(err[1]);
    child->pid = pid;
    child->out = out[0];
    child->err = err[0];
    for (;;) {
        char *line = read_line(child->err, timeout_ms);
        if (!line) return 0;
        int ready = strcmp(line, "ready") == 0;
        if (!ready) fprintf(stderr, "child: %s\n", line);
        free(line);
        if (ready) return 1;
    }
}

char *child_line(child *child, int timeout_ms) { return read_line(child->out, timeout_ms); }

int child_wait(child *child) {
    int status = 0;
    while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(child->out);
    close(child->err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int pump(wh_context *context, const volatile int *flag, int target, int timeout_ms) {
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (*flag < target) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (elapsed >= timeout_ms) return 0;
        struct pollfd poll_fd = {wh_context_fd(context), POLLIN, 0};
        if (poll(&poll_fd, 1, (int)(timeout_ms - elapsed)) > 0) wh_context_dispatch(context);
    }
    return 1;
}

int readable(wh_context *context) {
    struct pollfd poll_fd = {wh_context_fd(context), POLLIN, 0};
    return poll(&poll_fd, 1, 0) > 0;
}

wh_context *test_context(void) {
    if (!main_thread_set) {
        main_thread = pthread_self();
        main_thread_set = 1;
    }
    wh_context *context = NULL;
    wh_error *error = NULL;
    if (wh_context_new(NULL, &context, &error) != WH_OK) {
        fprintf(stderr, "wh_context_new: %s\n", wh_error_message(error));
        exit(2);
    }
    return context;
}

void on_handler_thread(void) {
    CHECK(main_thread_set && pthread_equal(pthread_self(), main_thread), "a handler ran on another thread");
}

const char *swift_tool(void) {
    const char *tool = getenv("WH_TEST_SWIFT");
    return tool ? tool : "wormholectl";
}

const char *python_tool(void) {
    const char *tool = getenv("WH_TEST_PYTHON");
    return tool ? tool : "python3 -m wormhole_py";
}

void unique_identifier(char *buffer, size_t size, const char *what) {
    snprintf(buffer, size, "%s-%ld", what, (long)getpid());
}
