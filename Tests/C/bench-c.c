/* The C side of Tests/bench-c.sh: a notification ping-pong through libwormhole, with every
 * handler dispatched on a GLib main loop (wormhole-glib.h), as a GTK program would run it.
 *
 *   bench-c echo PING PONG        answers each post of PING with a post of PONG carrying the same
 *                                 state; "ready" on standard error once observing; exits on state
 *                                 2^64-1
 *   bench-c ping PING PONG COUNT WARMUP
 *                                 posts PING 0, and each PONG n ends one round trip and posts
 *                                 PING n+1; prints each measured round trip as "NANOSECONDS 1"
 *                                 (the lines of wormhole-bench's _bench-ping), then stops the echo
 *   bench-c idle NAME             observes NAME and waits (the resident-memory figure)
 *
 * The doorbell follows the environment (XDG_RUNTIME_DIR, WORMHOLE_DOORBELL), as for every
 * Wormhole process. SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L
#include <wormhole-glib.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bench {
    wh_context *context;
    const char *ping;
    const char *pong;
    uint64_t next;
    uint64_t total;
    uint64_t warmup;
    uint64_t start;
    uint64_t *samples;
    GMainLoop *loop;
} bench;

static uint64_t now_ns(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return (uint64_t)spec.tv_sec * 1000000000u + (uint64_t)spec.tv_nsec;
}

static void post(bench *b, const char *name, uint64_t state) {
    wh_error *error = NULL;
    if (wh_post_state(b->context, name, state, &error) != WH_OK) {
        fprintf(stderr, "bench-c: post %s: %s\n", name, wh_error_message(error));
        exit(1);
    }
}

static void on_ping(const wh_notification *notification, void *data) {
    bench *b = data;
    uint64_t state = 0;
    if (!wh_notification_state(notification, &state)) return;
    if (state == UINT64_MAX) g_main_loop_quit(b->loop);
    else post(b, b->pong, state);
}

static void on_pong(const wh_notification *notification, void *data) {
    bench *b = data;
    uint64_t state = 0;
    if (!wh_notification_state(notification, &state) || state != b->next) return;
    uint64_t now = now_ns();
    if (state >= b->warmup) b->samples[state - b->warmup] = now - b->start;
    if (++b->next == b->total) {
        g_main_loop_quit(b->loop);
        return;
    }
    b->start = now_ns();
    post(b, b->ping, b->next);
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "ping") == 0 && argc < 6)) {
        fprintf(stderr, "usage: bench-c echo PING PONG | ping PING PONG COUNT WARMUP | idle NAME\n");
        return 64;
    }
    bench b = {0};
    wh_error *error = NULL;
    wh_subscription *subscription = NULL;
    if (wh_context_new(NULL, &b.context, &error) != WH_OK) {
        fprintf(stderr, "bench-c: %s\n", wh_error_message(error));
        return 1;
    }
    b.loop = g_main_loop_new(NULL, FALSE);
    wh_glib_attach(b.context, NULL);
    if (strcmp(argv[1], "idle") == 0) {
        if (wh_observe_name(b.context, argv[2], 0, on_ping, &b, NULL, &subscription, &error) != WH_OK) return 1;
        fprintf(stderr, "ready\n");
        g_main_loop_run(b.loop);
        return 0;
    }
    b.ping = argv[2];
    b.pong = argv[3];
    int echo = strcmp(argv[1], "echo") == 0;
    wh_status status = echo ? wh_observe_name(b.context, b.ping, 0, on_ping, &b, NULL, &subscription, &error)
                            : wh_observe_name(b.context, b.pong, 0, on_pong, &b, NULL, &subscription, &error);
    if (status != WH_OK) {
        fprintf(stderr, "bench-c: observe: %s\n", wh_error_message(error));
        return 1;
    }
    fprintf(stderr, "ready\n");
    if (echo) {
        g_main_loop_run(b.loop);
    } else {
        uint64_t count = strtoull(argv[4], NULL, 10);
        b.warmup = strtoull(argv[5], NULL, 10);
        b.total = count + b.warmup;
        b.samples = calloc(count ? count : 1, sizeof *b.samples);
        b.start = now_ns();
        post(&b, b.ping, 0);
        g_main_loop_run(b.loop);
        post(&b, b.ping, UINT64_MAX);
        for (uint64_t i = 0; i < count; i++) printf("%" PRIu64 " 1\n", b.samples[i]);
        free(b.samples);
    }
    wh_subscription_free(subscription);
    wh_context_flush(b.context, 5000, NULL);
    return 0;
}
