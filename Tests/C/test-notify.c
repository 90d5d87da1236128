/* libwormhole's notifications, subscriptions and contexts, across processes against the Swift
 * tool and the Python package. SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "tests.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct heard {
    volatile int count;
    char name[256];
    uint64_t state;
    int has_state;
    int own;
    int64_t coalesced;
    int destroyed;
    wh_subscription *cancel_me; /* cancelled from inside the handler when set */
    wh_context *context;
} heard;

static void on_post(const wh_notification *notification, void *data) {
    heard *h = data;
    on_handler_thread();
    snprintf(h->name, sizeof h->name, "%s", wh_notification_name(notification));
    h->has_state = wh_notification_state(notification, &h->state);
    h->own = wh_notification_is_own_post(notification);
    h->coalesced = wh_notification_coalesced_count(notification);
    CHECK(wh_notification_reason(notification) == WH_REASON_POSTED, "reason %d", (int)wh_notification_reason(notification));
    if (h->context) CHECK(wh_context_dispatch(h->context) == 0, "dispatch inside a handler ran something");
    if (h->cancel_me) {
        wh_subscription_cancel(h->cancel_me);
        CHECK(wh_subscription_is_cancelled(h->cancel_me), "not cancelled after cancel");
        CHECK(h->destroyed == 0, "destroy ran while its handler runs");
    }
    h->count++;
}

static void on_destroy(void *data) { ((heard *)data)->destroyed++; }

static void name_for(char *buffer, size_t size, const char *what) {
    snprintf(buffer, size, "com.example.ctest.%s.%ld", what, (long)getpid());
}

void test_version(void) {
    const char *contract = NULL;
    const char *version = wh_version(&contract);
    CHECK(version && *version >= '0' && *version <= '9', "version '%s'", version ? version : "(null)");
    CHECK(contract && strchr(contract, '.'), "contract '%s'", contract ? contract : "(null)");
    CHECK(wh_version(NULL) == version, "the version string is not static");
}

void test_post_and_observe(void) {
    wh_context *context = test_context();
    char name[200];
    name_for(name, sizeof name, "post");
    heard h = {0};
    h.context = context;
    wh_subscription *subscription = NULL;
    CHECK_OK(wh_observe_name(context, name, 0, on_post, &h, on_destroy, &subscription, ERR));
    CHECK(!readable(context), "the descriptor is readable with nothing waiting");

    /* This process, with and without state. */
    CHECK_OK(wh_post_state(context, name, 42, ERR));
    CHECK(pump(context, &h.count, 1, 10000), "own post not heard");
    CHECK(strcmp(h.name, name) == 0 && h.has_state && h.state == 42 && h.own, "own post: %s %d %llu own=%d", h.name,
          h.has_state, (unsigned long long)h.state, h.own);
    CHECK(!readable(context), "the descriptor stays readable after dispatch");
    CHECK_OK(wh_post(context, name, ERR));
    CHECK(pump(context, &h.count, 2, 10000), "own post without state not heard");

    /* The Swift tool and the Python package post. */
    CHECK(run("%s post '%s' --state 7", swift_tool(), name) == 0, "wormholectl post failed");
    CHECK(pump(context, &h.count, 3, 10000), "the Swift tool's post not heard");
    CHECK(h.has_state && h.state == 7 && !h.own, "Swift post: state %d %llu own %d", h.has_state,
          (unsigned long long)h.state, h.own);
    CHECK(run("%s post '%s' --state 9", python_tool(), name) == 0, "wormhole-py post failed");
    CHECK(pump(context, &h.count, 4, 10000), "the Python package's post not heard");
    CHECK(h.has_state && h.state == 9, "Python post: state %llu", (unsigned long long)h.state);

    /* The Swift tool and the Python package observe this process's post. */
    child swift, python;
    CHECK(start_ready(&swift, 20000, "exec %s observe '%s' --count 1 --timeout 20", swift_tool(), name), "observe not ready");
    CHECK(start_ready(&python, 20000, "exec %s observe '%s' --count 1 --timeout 20", python_tool(), name),
          "wormhole-py observe not ready");
    CHECK_OK(wh_post_state(context, name, 11, ERR));
    char *line = child_line(&swift, 20000);
    CHECK(line && strstr(line, "\"state\":11"), "the Swift tool heard: %s", line ? line : "(nothing)");
    free(line);
    line = child_line(&python, 20000);
    CHECK(line && strstr(line, name) && strstr(line, "11"), "the Python package heard: %s", line ? line : "(nothing)");
    free(line);
    CHECK(child_wait(&swift) == 0, "wormholectl observe failed");
    CHECK(child_wait(&python) == 0, "wormhole-py observe failed");
    CHECK(pump(context, &h.count, 5, 10000), "own post not heard");

    wh_subscription_free(subscription);
    CHECK(h.destroyed == 1, "destroy ran %d times", h.destroyed);
    wh_context_free(context);
}

void test_prefix_state_and_tokens(void) {
    wh_context *context = test_context();
    char prefix[200], name[260];
    name_for(prefix, sizeof prefix, "prefix");
    strcat(prefix, "/");
    snprintf(name, sizeof name, "%sone", prefix);
    heard h = {0};
    wh_subscription *subscription = NULL;
    CHECK_OK(wh_observe_prefix(context, prefix, 0, on_post, &h, NULL, &subscription, ERR));
    wh_check_token *token = NULL;
    CHECK_OK(wh_check_token_new(context, name, &token, ERR));
    CHECK(wh_check_token_check(token) == 1, "the first check is not 1");
    CHECK(wh_check_token_check(token) == 0, "a check without a post is not 0");
    CHECK(run("%s post '%s' --state 5", swift_tool(), name) == 0, "wormholectl post failed");
    CHECK(pump(context, &h.count, 1, 10000), "prefix observer did not hear the Swift tool");
    CHECK(strcmp(h.name, name) == 0, "prefix delivery named %s", h.name);
    CHECK(wh_check_token_check(token) == 1, "the token missed a post");
    uint64_t state = 0;
    int known = -1;
    CHECK_OK(wh_last_state(context, name, &state, &known, ERR));
    CHECK(known == 1 && state == 5, "last state %d %llu", known, (unsigned long long)state);
    wh_check_token_free(token);

    /* A prefix must end in '/'. */
    wh_subscription *bad = NULL;
    REFUSED("prefix without /", wh_observe_prefix(context, "com.example", 0, on_post, NULL, NULL, &bad, &error),
            WH_ERROR_INVALID_NAME, NULL);
    CHECK(bad == NULL, "a refused observe gave a subscription");
    wh_subscription_free(subscription);
    wh_context_free(context);
}

void test_suspend_resume_cancel(void) {
    wh_context *context = test_context();
    char name[200];
    name_for(name, sizeof name, "suspend");
    heard h = {0};
    wh_subscription *subscription = NULL;
    CHECK_OK(wh_observe_name(context, name, 0, on_post, &h, on_destroy, &subscription, ERR));
    CHECK_OK(wh_subscription_suspend(subscription, ERR));
    for (int i = 1; i <= 3; i++) CHECK_OK(wh_post_state(context, name, (uint64_t)i, ERR));
    CHECK_OK(wh_context_flush(context, 5000, ERR));
    /* A marker observer proves the posts went round while the first one held them. */
    heard marker = {0};
    wh_subscription *marker_subscription = NULL;
    char marker_name[220];
    snprintf(marker_name, sizeof marker_name, "%s.marker", name);
    CHECK_OK(wh_observe_name(context, marker_name, 0, on_post, &marker, NULL, &marker_subscription, ERR));
    CHECK_OK(wh_post(context, marker_name, ERR));
    CHECK(pump(context, &marker.count, 1, 10000), "marker not heard");
    CHECK(h.count == 0, "a suspended subscription's handler ran");
    CHECK_OK(wh_subscription_resume(subscription, ERR));
    CHECK(pump(context, &h.count, 1, 10000), "nothing delivered after resume");
    /* What the suspension kept arrives; the last state is the last post's. */
    while (readable(context)) wh_context_dispatch(context);
    CHECK(h.state == 3, "after resume the state is %llu, not 3", (unsigned long long)h.state);

    /* Cancel from inside the handler: no call after it, destroy once, after the handler. */
    h.cancel_me = subscription;
    int before = h.count;
    CHECK_OK(wh_post(context, name, ERR));
    CHECK_OK(wh_post(context, name, ERR));
    CHECK(pump(context, &h.count, before + 1, 10000), "post not heard");
    CHECK_OK(wh_post(context, marker_name, ERR));
    CHECK(pump(context, &marker.count, 2, 10000), "marker not heard");
    CHECK(h.count == before + 1, "the handler ran %d times after cancelling itself", h.count - before - 1);
    CHECK(h.destroyed == 1, "destroy ran %d times", h.destroyed);
    wh_subscription_cancel(subscription);
    CHECK(h.destroyed == 1, "a second cancel ran destroy again");
    wh_subscription_free(subscription);
    CHECK(h.destroyed == 1, "free after cancel ran destroy again");

    /* wh_context_free cancels what is left, with its destroy. */
    heard left = {0};
    wh_subscription *left_subscription = NULL;
    CHECK_OK(wh_observe_name(context, name, 0, on_post, &left, on_destroy, &left_subscription, ERR));
    wh_subscription_free(marker_subscription);
    wh_context_free(context);
    CHECK(left.destroyed == 1, "wh_context_free did not cancel a subscription");
    CHECK(wh_subscription_is_cancelled(left_subscription), "not cancelled after wh_context_free");
    wh_subscription_free(left_subscription);
    CHECK(left.destroyed == 1, "destroy ran again");
}

typedef struct crossing {
    wh_subscription *subscription;
    volatile int cancelled;
} crossing;

static void *cancel_elsewhere(void *data) {
    crossing *c = data;
    wh_subscription_cancel(c->subscription);
    c->cancelled = 1;
    return NULL;
}

void test_cancel_from_another_thread(void) {
    wh_context *context = test_context();
    char name[200];
    name_for(name, sizeof name, "thread");
    heard h = {0};
    crossing c = {0};
    CHECK_OK(wh_observe_name(context, name, 0, on_post, &h, on_destroy, &c.subscription, ERR));
    for (int i = 0; i < 20; i++) CHECK_OK(wh_post_state(context, name, (uint64_t)i, ERR));
    CHECK(pump(context, &h.count, 1, 10000), "nothing heard");
    pthread_t thread;
    pthread_create(&thread, NULL, cancel_elsewhere, &c);
    /* Keep dispatching while the other thread cancels: once it returns, no handler runs. */
    while (!c.cancelled) {
        if (readable(context)) wh_context_dispatch(context);
    }
    int after = h.count;
    pthread_join(thread, NULL);
    while (readable(context)) wh_context_dispatch(context);
    CHECK(h.count == after, "a handler ran after cancel returned on another thread");
    CHECK(h.destroyed == 1, "destroy ran %d times", h.destroyed);
    wh_subscription_free(c.subscription);
    wh_context_free(context);
}

static void on_log(wh_log_level level, const char *component, const char *message, void *data) {
    (void)level;
    (void)message;
    if (component && *component) ((heard *)data)->count++;
}

void test_options_and_flush(void) {
    wh_context_options *options = NULL;
    CHECK_OK(wh_context_options_new(&options, ERR));
    CHECK_OK(wh_context_options_set_bus_address(options, getenv("DBUS_SESSION_BUS_ADDRESS"), ERR));
    CHECK_OK(wh_context_options_set_container_root(options, getenv("WORMHOLE_CONTAINER_ROOT"), ERR));
    CHECK_OK(wh_context_options_set_doorbell(options, 0, ERR));
    heard logged = {0};
    CHECK_OK(wh_context_options_set_log_handler(options, on_log, WH_LOG_TRACE, &logged, on_destroy, ERR));
    REFUSED("bad bus address", wh_context_options_set_bus_address(options, "nonsense", &error),
                  WH_ERROR_INVALID_ADDRESS, NULL);
    REFUSED("bad app ID", wh_context_options_set_app_id(options, "not an app id", &error),
                  WH_ERROR_INVALID_APP_ID, "not an app id");
    REFUSED("relative root", wh_context_options_set_container_root(options, "relative", &error),
                  WH_ERROR_NO_CONTAINER_ROOT, "relative");
    REFUSED("log level", wh_context_options_set_log_handler(options, on_log, 7, NULL, NULL, &error),
                  WH_ERROR_INVALID_ARGUMENT, "7");
    wh_context *context = NULL;
    CHECK_OK(wh_context_new(options, &context, ERR));
    wh_context_options_free(options);
    char name[200];
    name_for(name, sizeof name, "flush");
    CHECK_OK(wh_post(context, name, ERR));
    CHECK_OK(wh_context_flush(context, 5000, ERR));
    REFUSED("negative flush", wh_context_flush(context, -1, &error), WH_ERROR_INVALID_ARGUMENT, "-1");
    wh_context_free(context);
    CHECK(logged.destroyed == 1, "the log handler's destroy ran %d times", logged.destroyed);

    /* A bus that is not there: a clear error, no context. */
    CHECK_OK(wh_context_options_new(&options, ERR));
    CHECK_OK(wh_context_options_set_bus_address(options, "unix:path=/nonexistent/bus", ERR));
    context = NULL;
    REFUSED("absent bus", wh_context_new(options, &context, &error), WH_ERROR_BUS, NULL);
    CHECK(context == NULL, "a failed wh_context_new gave a context");
    wh_context_options_free(options);
}

/* The app ID of a sandboxed app (contract section 8): the process owns <APPID>.Wormhole.c<unique>
 * before it posts, and it is the process's one app ID. Runs last: the app ID stays set. */
void test_app_id(void) {
    wh_context_options *options = NULL;
    CHECK_OK(wh_context_options_new(&options, ERR));
    CHECK_OK(wh_context_options_set_app_id(options, "org.example.CTest", ERR));
    wh_context *context = NULL;
    CHECK_OK(wh_context_new(options, &context, ERR));
    wh_context_options_free(options);
    char name[200];
    name_for(name, sizeof name, "appid");
    CHECK_OK(wh_post(context, name, ERR));
    CHECK_OK(wh_context_flush(context, 5000, ERR));
    char *names = capture("dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus "
                          "org.freedesktop.DBus.ListNames");
    CHECK(names && strstr(names, "\"org.example.CTest.Wormhole.c"), "no org.example.CTest.Wormhole.c… name on the bus");
    free(names);
    CHECK_OK(wh_context_options_new(&options, ERR));
    CHECK_OK(wh_context_options_set_app_id(options, "org.example.Other", ERR));
    wh_context *other = NULL;
    REFUSED("a second app ID", wh_context_new(options, &other, &error), WH_ERROR_INVALID_APP_ID, "org.example.Other");
    CHECK(other == NULL, "a refused context was made");
    wh_context_options_free(options);
    wh_context_free(context);
}

/* The log handler gets the library's lines: a context on a bus of its own hears that bus go
 * ("disconnected from the bus", "bus connection lost…", from the library's own thread). */
static int log_pipe[2];

static void on_log_line(wh_log_level level, const char *component, const char *message, void *data) {
    (void)data;
    char line[512];
    int length = snprintf(line, sizeof line, "%d %s: %s\n", (int)level, component, message);
    if (length > 0) {
        ssize_t written = write(log_pipe[1], line, (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
        (void)written;
    }
}

void test_log_handler(void) {
    char *directory = capture("mktemp -d");
    char *pid_text = capture("dbus-daemon --config-file=\"$WH_TEST_DBUS_CONFIG\" --address=unix:path=%s/bus "
                             "--fork --print-pid 2>/dev/null",
                             directory);
    long pid = pid_text ? strtol(pid_text, NULL, 10) : 0;
    CHECK(pid > 0, "no second dbus-daemon (WH_TEST_DBUS_CONFIG=%s)", getenv("WH_TEST_DBUS_CONFIG"));
    if (pid <= 0) return;
    CHECK(pipe(log_pipe) == 0, "pipe");
    char address[600];
    snprintf(address, sizeof address, "unix:path=%s/bus", directory);
    wh_context_options *options = NULL;
    CHECK_OK(wh_context_options_new(&options, ERR));
    CHECK_OK(wh_context_options_set_bus_address(options, address, ERR));
    CHECK_OK(wh_context_options_set_log_handler(options, on_log_line, WH_LOG_TRACE, NULL, NULL, ERR));
    wh_context *context = NULL;
    CHECK_OK(wh_context_new(options, &context, ERR));
    wh_context_options_free(options);
    char name[200];
    name_for(name, sizeof name, "log");
    CHECK_OK(wh_post(context, name, ERR));
    CHECK_OK(wh_context_flush(context, 5000, ERR));
    kill((pid_t)pid, SIGTERM);
    struct pollfd readable_pipe = {log_pipe[0], POLLIN, 0};
    CHECK(poll(&readable_pipe, 1, 10000) == 1, "no log line within 10 s of the bus going away");
    char lines[2048] = {0};
    ssize_t got = read(log_pipe[0], lines, sizeof lines - 1);
    CHECK(got > 0 && strstr(lines, "wormhole.notify: "), "log lines: %s", got > 0 ? lines : "(none)");
    wh_context_free(context);
    close(log_pipe[0]);
    close(log_pipe[1]);
    run("rm -rf '%s'", directory);
    free(directory);
    free(pid_text);
}
