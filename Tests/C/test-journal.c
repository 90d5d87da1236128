/* libwormhole's journals and transient messages, across processes against the Swift tool and
 * the Python package: order, durable consumers (a cursor stored through the handled record, a
 * busy consumer refused, a crashed reader's batch redelivered), damage reported, bad input.
 * SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "tests.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GROUP "group.com.example.ctest"

typedef struct records {
    volatile int count;
    uint64_t sequences[64];
    char *json[64];
    int redelivered[64];
    wh_status failure; /* the last failure delivered, or WH_OK */
    uint64_t damage_from, damage_to;
    int failures;
    int cancel_at; /* cancels its subscription from the handler at this count (0: never) */
    wh_subscription *subscription;
} records;

static void on_record(const wh_record *record, void *data) {
    records *r = data;
    on_handler_thread();
    const wh_error *error = wh_record_error(record);
    if (error) {
        r->failure = wh_error_code(error);
        r->failures++;
        wh_record_damage(record, &r->damage_from, &r->damage_to);
        CHECK(wh_record_json(record, NULL) == NULL, "a failure carries JSON");
        return;
    }
    int i = r->count;
    if (i < 64) {
        size_t length = 0;
        const char *json = wh_record_json(record, &length);
        CHECK(json && strlen(json) == length, "record %d's JSON", i);
        r->sequences[i] = wh_record_sequence(record);
        r->json[i] = json ? strndup(json, length) : NULL;
        r->redelivered[i] = wh_record_is_redelivery(record);
        CHECK(wh_record_appended_at(record) > 1600000000000000000ull, "appended_at %llu",
              (unsigned long long)wh_record_appended_at(record));
    }
    r->count++;
    if (r->cancel_at && r->count == r->cancel_at) wh_subscription_cancel(r->subscription);
}

static void clear_records(records *r) {
    for (int i = 0; i < 64; i++) free(r->json[i]);
    memset(r, 0, sizeof *r);
}

/* The tests' wormhole: GROUP's default directory. */
static wh_mailbox *open_group(wh_context *context) {
    wh_mailbox *mailbox = NULL;
    CHECK_OK(wh_mailbox_open(context, GROUP, NULL, &mailbox, ERR));
    return mailbox;
}

static uint64_t status_number(wh_journal *journal, const char *field) {
    char *json = NULL;
    CHECK_OK(wh_journal_status(journal, &json, NULL, ERR));
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", field);
    const char *at = json ? strstr(json, key) : NULL;
    uint64_t value = at ? strtoull(at + strlen(key), NULL, 10) : (uint64_t)-1;
    wh_free(json);
    return value;
}

void test_journal(void) {
    wh_context *context = test_context();
    wh_mailbox *mailbox = open_group(context);
    char id[100];
    unique_identifier(id, sizeof id, "events");
    wh_journal *journal = NULL;
    CHECK_OK(wh_journal_open(mailbox, id, 0, &journal, ERR));
    records r = {0};
    wh_subscription *subscription = NULL;
    CHECK_OK(wh_journal_listen(journal, WH_JOURNAL_FROM_BEGINNING, NULL, on_record, &r, NULL, &subscription, ERR));

    uint64_t sequence = 0;
    CHECK_OK(wh_journal_append(journal, "{\"n\":1}", 7, &sequence, ERR));
    CHECK(sequence == 1, "first sequence %llu", (unsigned long long)sequence);
    const char *many[] = {"{\"n\":2}", "{\"n\":3}", "[4]"};
    size_t lengths[] = {7, 7, 3};
    uint64_t first = 0;
    CHECK_OK(wh_journal_append_many(journal, many, lengths, 3, &first, ERR));
    CHECK(first == 2, "append_many's first %llu", (unsigned long long)first);
    CHECK(run("%s send --journal --group %s %s '{\"n\":\"swift\"}'", swift_tool(), GROUP, id) == 0, "swift append");
    CHECK(run("%s send --journal --group %s %s '{\"n\":\"python\"}'", python_tool(), GROUP, id) == 0, "py append");
    CHECK(pump(context, &r.count, 6, 10000), "heard %d of 6 records", r.count);
    for (int i = 0; i < r.count && i < 6; i++) {
        CHECK(r.sequences[i] == (uint64_t)i + 1 && !r.redelivered[i], "record %d is %llu", i,
              (unsigned long long)r.sequences[i]);
    }
    CHECK(r.json[3] && strcmp(r.json[3], "[4]") == 0, "record 4: %s", r.json[3] ? r.json[3] : "(null)");
    CHECK(r.json[4] && strstr(r.json[4], "swift"), "record 5: %s", r.json[4] ? r.json[4] : "(null)");
    CHECK(r.json[5] && strstr(r.json[5], "python"), "record 6: %s", r.json[5] ? r.json[5] : "(null)");
    CHECK(r.failures == 0, "%d failures", r.failures);
    wh_subscription_free(subscription);

    /* The Swift tool and the Python package read C's records in order. */
    char *out = capture("%s listen --journal --from start --group %s %s --count 6 --timeout 20 2>/dev/null | tr -d ' \\n'",
                        swift_tool(), GROUP, id);
    CHECK(out && strstr(out, "\"sequence\":1,\"message\":{\"n\":1}") && strstr(out, "\"sequence\":4,\"message\":[4]"),
          "wormholectl listen --journal: %s", out ? out : "(null)");
    free(out);
    out = capture("%s listen --journal --from start --group %s %s --count 6 --timeout 20 2>/dev/null | tr -d ' \\n'",
                  python_tool(), GROUP, id);
    CHECK(out && strstr(out, "\"sequence\":4"), "wormhole-py listen --journal: %s", out ? out : "(null)");
    free(out);

    CHECK(status_number(journal, "last") == 6, "status last %llu", (unsigned long long)status_number(journal, "last"));
    size_t damaged = 99;
    CHECK_OK(wh_journal_check(journal, &damaged, ERR));
    CHECK(damaged == 0, "%zu damaged ranges in a whole journal", damaged);
    CHECK_OK(wh_journal_flush(journal, 5000, ERR));
    clear_records(&r);
    wh_journal_free(journal);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
}

/* wh-tests --consume-and-crash ID CONSUMER: handles one record and _exits inside the handler, as
 * a reader killed mid-batch (its batch was handed out, none of it acknowledged). */
static void crash_on_record(const wh_record *record, void *data) {
    (void)data;
    (void)record;
    _exit(0);
}

int consume_and_crash(const char *id, const char *consumer) {
    wh_context *context = test_context();
    wh_mailbox *mailbox = NULL;
    wh_journal *journal = NULL;
    wh_subscription *subscription = NULL;
    if (wh_mailbox_open(context, GROUP, NULL, &mailbox, NULL) != WH_OK) return 2;
    if (wh_journal_open(mailbox, id, 0, &journal, NULL) != WH_OK) return 2;
    if (wh_journal_listen(journal, WH_JOURNAL_FROM_BEGINNING, consumer, crash_on_record, NULL, NULL, &subscription,
                          NULL) != WH_OK)
        return 2;
    volatile int never = 0;
    pump(context, &never, 1, 10000);
    return 3; /* no record came */
}

void test_journal_consumers(void) {
    wh_context *context = test_context();
    wh_mailbox *mailbox = open_group(context);
    char id[100];
    unique_identifier(id, sizeof id, "durable");
    wh_journal *journal = NULL;
    CHECK_OK(wh_journal_open(mailbox, id, WH_JOURNAL_FDATASYNC, &journal, ERR));
    for (int n = 1; n <= 5; n++) {
        char json[32];
        int length = snprintf(json, sizeof json, "{\"n\":%d}", n);
        CHECK_OK(wh_journal_append(journal, json, (size_t)length, NULL, ERR));
    }

    /* Cancelled from the handler at the second record: the cursor is stored through it. */
    records r = {0};
    r.cancel_at = 2;
    CHECK_OK(wh_journal_listen(journal, WH_JOURNAL_FROM_BEGINNING, "indexer", on_record, &r, NULL, &r.subscription,
                               ERR));
    CHECK(pump(context, &r.count, 2, 10000), "%d records before the cancel", r.count);
    /* The rest of the batch was read with them: nothing more is queued or delivered. */
    CHECK(wh_context_dispatch(context) == 0 && !readable(context), "deliveries after the cancel");
    CHECK(r.count == 2, "%d records after cancelling at 2", r.count);
    wh_subscription_free(r.subscription);
    clear_records(&r);

    /* The consumer starts after its cursor; a second reader of it is refused. */
    CHECK_OK(wh_journal_listen(journal, WH_JOURNAL_FROM_BEGINNING, "indexer", on_record, &r, NULL, &r.subscription,
                               ERR));
    wh_subscription *second = NULL;
    REFUSED("a busy consumer", wh_journal_listen(journal, 1, "indexer", on_record, &r, NULL, &second, &error),
            WH_ERROR_CONSUMER_BUSY, "indexer");
    CHECK(pump(context, &r.count, 3, 10000), "the consumer resumed with %d records", r.count);
    CHECK(r.sequences[0] == 3 && r.sequences[2] == 5 && !r.redelivered[0], "resumed at %llu",
          (unsigned long long)r.sequences[0]);
    wh_subscription_free(r.subscription);
    clear_records(&r);
    char *status = NULL;
    CHECK_OK(wh_journal_status(journal, &status, NULL, ERR));
    CHECK(status && strstr(status, "\"indexer\":5"), "status: %s", status ? status : "(null)");
    wh_free(status);

    /* A reader that dies inside its handler: its batch comes again, flagged. */
    CHECK(run("/proc/%ld/exe --consume-and-crash %s crasher", (long)getpid(), id) == 0, "the crashing reader");
    CHECK_OK(wh_journal_listen(journal, WH_JOURNAL_FROM_BEGINNING, "crasher", on_record, &r, NULL, &r.subscription,
                               ERR));
    CHECK(pump(context, &r.count, 5, 10000), "redelivered %d records", r.count);
    CHECK(r.sequences[0] == 1 && r.redelivered[0] && r.redelivered[4], "after a crash: %llu, redelivery %d",
          (unsigned long long)r.sequences[0], r.redelivered[0]);
    wh_subscription_free(r.subscription);
    clear_records(&r);

    /* Damage: a flipped byte in the third record is one reported range, and reading goes on. */
    char *segment = capture("grep -l -a '\"n\":3' \"$WORMHOLE_CONTAINER_ROOT\"/%s/wormhole/%s.journal/* | head -1", GROUP,
                            id);
    CHECK(segment && *segment, "no segment holds record 3");
    if (segment && *segment) {
        CHECK(run("sed -i 's/\"n\":3/\"n\":8/' '%s'", segment) == 0, "corrupting %s", segment);
        size_t damaged = 0;
        REFUSED("a damaged journal", wh_journal_check(journal, &damaged, &error), WH_ERROR_JOURNAL_DAMAGED, NULL);
        CHECK(damaged == 1, "%zu damaged ranges", damaged);
        CHECK_OK(wh_journal_listen(journal, WH_JOURNAL_FROM_BEGINNING, NULL, on_record, &r, NULL, &r.subscription,
                                   ERR));
        CHECK(pump(context, &r.count, 4, 10000), "read %d records around the damage", r.count);
        CHECK(r.failure == WH_ERROR_JOURNAL_DAMAGED && r.failures == 1 && r.damage_from == 3 && r.damage_to == 3,
              "damage reported as %d, %d times, %llu..%llu", (int)r.failure, r.failures,
              (unsigned long long)r.damage_from, (unsigned long long)r.damage_to);
        CHECK(r.sequences[1] == 2 && r.sequences[2] == 4, "records around the damage: %llu, %llu",
              (unsigned long long)r.sequences[1], (unsigned long long)r.sequences[2]);
        wh_subscription_free(r.subscription);
        clear_records(&r);
    }
    free(segment);
    wh_journal_free(journal);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
}

typedef struct transients {
    volatile int count;
    char *json[8];
    wh_reason reason[8];
} transients;

static void on_transient(const wh_message *message, void *data) {
    transients *t = data;
    on_handler_thread();
    if (t->count < 8) {
        size_t length = 0;
        const char *json = wh_message_json(message, &length);
        t->json[t->count] = json ? strndup(json, length) : NULL;
        t->reason[t->count] = wh_message_reason(message);
    }
    t->count++;
}

void test_transient(void) {
    wh_context *context = test_context();
    wh_mailbox *mailbox = open_group(context);
    char id[100];
    unique_identifier(id, sizeof id, "clip");
    CHECK_OK(wh_mailbox_send(mailbox, id, "\"stored\"", 8, ERR));
    transients t = {0};
    wh_subscription *subscription = NULL;
    CHECK_OK(wh_mailbox_listen(mailbox, id, 0, on_transient, &t, NULL, &subscription, ERR));
    CHECK_OK(wh_mailbox_send_transient(mailbox, id, "{\"x\": 1}", 8, ERR));
    CHECK(run("%s send --transient --group %s %s '{\"x\":2}'", swift_tool(), GROUP, id) == 0, "swift transient");
    CHECK(run("%s send --transient --group %s %s '{\"x\":3}'", python_tool(), GROUP, id) == 0, "py transient");
    CHECK(pump(context, &t.count, 3, 10000), "heard %d of 3 transient messages", t.count);
    for (int i = 0; i < 3 && i < t.count; i++) {
        char want[16];
        snprintf(want, sizeof want, "{\"x\":%d}", i + 1);
        CHECK(t.json[i] && strcmp(t.json[i], want) == 0 && t.reason[i] == WH_REASON_TRANSIENT,
              "transient %d: %s, reason %d", i, t.json[i] ? t.json[i] : "(null)", (int)t.reason[i]);
    }
    /* The Swift tool hears C's transient message; the stored message is untouched. */
    child swift;
    CHECK(start_ready(&swift, 20000, "exec %s listen --group %s %s --count 1 --timeout 20", swift_tool(), GROUP, id),
          "listen not ready");
    CHECK_OK(wh_mailbox_send_transient(mailbox, id, "[\"c\"]", 5, ERR));
    char *line = child_line(&swift, 20000);
    CHECK(line && strstr(line, "[\"c\"]"), "the Swift tool heard: %s", line ? line : "(nothing)");
    free(line);
    CHECK(child_wait(&swift) == 0, "wormholectl listen failed");
    char *stored = NULL;
    CHECK_OK(wh_mailbox_read(mailbox, id, &stored, NULL, ERR));
    CHECK(stored && strcmp(stored, "\"stored\"") == 0, "stored: %s", stored ? stored : "(null)");
    wh_free(stored);

    /* Over 64 KiB: refused at the call, nothing sent. */
    size_t size = 70000;
    char *big = malloc(size + 1);
    memset(big, 'a', size);
    big[0] = '"';
    big[size - 1] = '"';
    big[size] = 0;
    int before = t.count;
    REFUSED("a large transient", wh_mailbox_send_transient(mailbox, id, big, size, &error),
            WH_ERROR_TRANSIENT_TOO_LARGE, NULL);
    free(big);
    CHECK_OK(wh_mailbox_send_transient(mailbox, id, "0", 1, ERR));
    CHECK(pump(context, &t.count, before + 2, 10000), "after the refusal");
    CHECK(t.count == before + 2, "the refused message arrived (%d)", t.count - before);
    wh_subscription_free(subscription);
    for (int i = 0; i < 8; i++) free(t.json[i]);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
}

typedef struct burst {
    volatile int total; /* handled + dropped */
    int handled;
    int dropped;
    int reports;
    int handled_before_report; /* messages handled before the first report */
} burst;

static void on_burst(const wh_message *message, void *data) {
    burst *b = data;
    const wh_error *error = wh_message_error(message);
    if (error) {
        CHECK(wh_error_code(error) == WH_ERROR_TRANSIENT_DROPPED && wh_message_reason(message) == WH_REASON_TRANSIENT,
              "a burst's failure: %s", wh_error_message(error));
        if (!b->reports++) b->handled_before_report = b->handled;
        b->dropped += atoi(wh_error_message(error)); /* "N transient message(s) of '…' dropped: …" */
    } else {
        b->handled++;
    }
    b->total = b->handled + b->dropped;
}

/* A listener whose app does not dispatch holds at most 1,024 transient messages: the rest are
 * dropped and counted, and the count is delivered. */
void test_transient_bound(void) {
    wh_context *context = test_context();
    wh_mailbox *mailbox = open_group(context);
    char id[100];
    unique_identifier(id, sizeof id, "burst");
    burst b = {0};
    wh_subscription *subscription = NULL;
    CHECK_OK(wh_mailbox_listen(mailbox, id, 0, on_burst, &b, NULL, &subscription, ERR));
    enum { SENT = 2500 };
    for (int i = 0; i < SENT; i++) {
        char json[32];
        int length = snprintf(json, sizeof json, "[%d]", i);
        CHECK_OK(wh_mailbox_send_transient(mailbox, id, json, (size_t)length, ERR));
    }
    CHECK_OK(wh_context_flush(context, 10000, ERR));
    CHECK(pump(context, &b.total, SENT, 20000), "%d handled and %d dropped of %d", b.handled, b.dropped, SENT);
    CHECK(b.reports >= 1 && b.dropped > 0, "%d reports of %d dropped", b.reports, b.dropped);
    CHECK(b.handled_before_report <= 1024, "%d handled before the first report", b.handled_before_report);
    wh_subscription_free(subscription);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
}

void test_journal_bad_input(void) {
    wh_context *context = test_context();
    wh_mailbox *mailbox = open_group(context);
    wh_journal *journal = NULL;
    REFUSED("a bad journal identifier", wh_journal_open(mailbox, "a/b", 0, &journal, &error),
            WH_ERROR_INVALID_IDENTIFIER, "a/b");
    REFUSED("unknown flags", wh_journal_open(mailbox, "j", 0x10, &journal, &error), WH_ERROR_INVALID_ARGUMENT, NULL);
    REFUSED("a NULL mailbox", wh_journal_open(NULL, "j", 0, &journal, &error), WH_ERROR_INVALID_ARGUMENT, NULL);
    char id[100];
    unique_identifier(id, sizeof id, "bad");
    CHECK_OK(wh_journal_open(mailbox, id, 0, &journal, ERR));
    REFUSED("invalid JSON", wh_journal_append(journal, "{nope", 5, NULL, &error), WH_ERROR_INVALID_JSON, NULL);
    REFUSED("invalid UTF-8", wh_journal_append(journal, "\"\xff\"", 3, NULL, &error), WH_ERROR_INVALID_ARGUMENT, NULL);
    REFUSED("NULL JSON", wh_journal_append(journal, NULL, 4, NULL, &error), WH_ERROR_INVALID_ARGUMENT, NULL);
    size_t size = (1 << 20) + 16;
    char *big = malloc(size);
    memset(big, 'a', size);
    big[0] = '"';
    big[size - 1] = '"';
    REFUSED("a record over 1 MiB", wh_journal_append(journal, big, size, NULL, &error), WH_ERROR_RECORD_TOO_LARGE,
            NULL);
    free(big);
    const char *many[] = {"1", "{bad"};
    size_t lengths[] = {1, 4};
    REFUSED("one bad record of two", wh_journal_append_many(journal, many, lengths, 2, NULL, &error),
            WH_ERROR_INVALID_JSON, NULL);
    REFUSED("no records", wh_journal_append_many(journal, many, lengths, 0, NULL, &error), WH_ERROR_INVALID_ARGUMENT,
            NULL);
    CHECK(status_number(journal, "last") == 0, "a refused append was stored");
    wh_subscription *subscription = NULL;
    REFUSED("a bad consumer", wh_journal_listen(journal, 0, "no/slash", on_record, NULL, NULL, &subscription, &error),
            WH_ERROR_INVALID_CONSUMER, NULL);
    REFUSED("a NULL handler", wh_journal_listen(journal, 0, NULL, NULL, NULL, NULL, &subscription, &error),
            WH_ERROR_INVALID_ARGUMENT, NULL);
    REFUSED("a bad transient identifier", wh_mailbox_send_transient(mailbox, "", "1", 1, &error),
            WH_ERROR_INVALID_IDENTIFIER, NULL);
    REFUSED("invalid transient JSON", wh_mailbox_send_transient(mailbox, "t", "[", 1, &error), WH_ERROR_INVALID_JSON,
            NULL);
    wh_journal_free(journal);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
}
