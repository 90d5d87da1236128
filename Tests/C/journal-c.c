/* The C side of Tests/faults-c-journal.sh: appends records to a journal and reads them back.
 *
 *   journal-c append GROUP ID COUNT   appends COUNT records {"p":PID,"i":I,"pad":"x…"} of about
 *                                     100 bytes (I from 0), one call each, frees its handles and
 *                                     returns from main with no flush (appends are exit-safe);
 *                                     prints "APPENDS_PER_SECOND"
 *   journal-c read GROUP ID COUNT     reads the journal from its first record until COUNT
 *                                     records came (at most 120 s), on a poll(2) loop that
 *                                     dispatches; prints "read N lost L out-of-order O" (lost:
 *                                     COUNT - N; out of order: a sequence number that is not the
 *                                     previous + 1, or an I that is not the previous + 1)
 *
 * SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L
#include <wormhole.h>

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return (uint64_t)spec.tv_sec * 1000000000u + (uint64_t)spec.tv_nsec;
}

static int fail(const char *what, wh_error *error) {
    fprintf(stderr, "journal-c: %s: %s\n", what, error ? wh_error_message(error) : "?");
    wh_error_free(error);
    return 1;
}

typedef struct reader {
    uint64_t count;
    uint64_t read;
    uint64_t last_sequence;
    long long last_i;
    uint64_t out_of_order;
    uint64_t failures;
} reader;

static void on_record(const wh_record *record, void *data) {
    reader *r = data;
    if (wh_record_error(record)) {
        fprintf(stderr, "journal-c: %s\n", wh_error_message(wh_record_error(record)));
        r->failures++;
        return;
    }
    uint64_t sequence = wh_record_sequence(record);
    const char *json = wh_record_json(record, NULL);
    const char *at = strstr(json, "\"i\":");
    long long i = at ? strtoll(at + 4, NULL, 10) : -1;
    if (sequence != r->last_sequence + 1 || i != r->last_i + 1) r->out_of_order++;
    r->last_sequence = sequence;
    r->last_i = i;
    r->read++;
}

int main(int argc, char **argv) {
    if (argc != 5 || (strcmp(argv[1], "append") != 0 && strcmp(argv[1], "read") != 0)) {
        fprintf(stderr, "usage: journal-c append|read GROUP ID COUNT\n");
        return 64;
    }
    uint64_t count = strtoull(argv[4], NULL, 10);
    wh_error *error = NULL;
    wh_context *context = NULL;
    wh_mailbox *mailbox = NULL;
    wh_journal *journal = NULL;
    if (wh_context_new(NULL, &context, &error) != WH_OK) return fail("context", error);
    if (wh_mailbox_open(context, argv[2], NULL, &mailbox, &error) != WH_OK) return fail("mailbox", error);
    if (wh_journal_open(mailbox, argv[3], 0, &journal, &error) != WH_OK) return fail("journal", error);
    if (strcmp(argv[1], "append") == 0) {
        /* The records made before the clock starts, as the Swift bench's JSON-document rows. */
        char **records = malloc(count * sizeof *records);
        size_t *lengths = malloc(count * sizeof *lengths);
        for (uint64_t i = 0; i < count; i++) {
            char buffer[160];
            int length = snprintf(buffer, sizeof buffer, "{\"p\":%ld,\"i\":%" PRIu64 ",\"pad\":\"%s\"}", (long)getpid(),
                                  i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
            records[i] = strdup(buffer);
            lengths[i] = (size_t)length;
        }
        uint64_t start = now_ns();
        for (uint64_t i = 0; i < count; i++) {
            if (wh_journal_append(journal, records[i], lengths[i], NULL, &error) != WH_OK) return fail("append", error);
        }
        uint64_t elapsed = now_ns() - start;
        printf("%.0f\n", (double)count * 1e9 / (double)(elapsed ? elapsed : 1));
        for (uint64_t i = 0; i < count; i++) free(records[i]);
        free(records);
        free(lengths);
        wh_journal_free(journal);
        wh_mailbox_free(mailbox);
        wh_context_free(context); /* no flush: the appends' notifications are exit-safe */
        return 0;
    }
    reader r = {.count = count, .last_i = -1};
    wh_subscription *subscription = NULL;
    if (wh_journal_listen(journal, WH_JOURNAL_FROM_BEGINNING, NULL, on_record, &r, NULL, &subscription, &error) !=
        WH_OK)
        return fail("listen", error);
    uint64_t deadline = now_ns() + 120000000000ull;
    struct pollfd descriptor = {.fd = wh_context_fd(context), .events = POLLIN};
    while (r.read < count && now_ns() < deadline) {
        if (poll(&descriptor, 1, 1000) > 0) wh_context_dispatch(context);
    }
    printf("read %" PRIu64 " lost %" PRIu64 " out-of-order %" PRIu64 "\n", r.read, count - r.read, r.out_of_order);
    wh_subscription_free(subscription);
    wh_journal_free(journal);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
    return r.read == count && r.out_of_order == 0 && r.failures == 0 ? 0 : 1;
}
