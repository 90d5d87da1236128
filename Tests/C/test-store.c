/* libwormhole's mailboxes and shared defaults, across processes against the Swift tool and the
 * Python package, and bad input. SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "tests.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GROUP "group.com.example.ctest"

typedef struct inbox {
    volatile int count;
    char identifier[256];
    char *json; /* the last message, or NULL */
    wh_reason reason;
    wh_status error;
    int has_sent_at;
} inbox;

static void on_message(const wh_message *message, void *data) {
    inbox *box = data;
    on_handler_thread();
    snprintf(box->identifier, sizeof box->identifier, "%s", wh_message_identifier(message));
    free(box->json);
    size_t length = 0;
    const char *json = wh_message_json(message, &length);
    box->json = json ? strndup(json, length) : NULL;
    if (json) CHECK(strlen(json) == length, "length %zu for %zu bytes", length, strlen(json));
    box->reason = wh_message_reason(message);
    const wh_error *error = wh_message_error(message);
    box->error = error ? wh_error_code(error) : WH_OK;
    uint64_t sent = 0;
    box->has_sent_at = wh_message_sent_at(message, &sent);
    box->count++;
}

void test_mailboxes(void) {
    wh_context *context = test_context();
    wh_mailbox *mailbox = NULL;
    CHECK_OK(wh_mailbox_open(context, GROUP, NULL, &mailbox, ERR));
    char id[100];
    unique_identifier(id, sizeof id, "box");
    inbox box = {0};
    wh_subscription *subscription = NULL;
    CHECK_OK(wh_mailbox_listen(mailbox, id, 0, on_message, &box, NULL, &subscription, ERR));

    /* C to C, the Swift tool and the Python package. */
    const char *json = "{\"n\":1,\"text\":\"h\\u00e9\"}";
    CHECK_OK(wh_mailbox_send(mailbox, id, json, strlen(json), ERR));
    CHECK(pump(context, &box.count, 1, 10000), "own send not heard");
    CHECK(box.json && strcmp(box.json, json) == 0 && box.reason == WH_REASON_POSTED && box.has_sent_at,
          "own send: %s reason %d", box.json ? box.json : "(null)", (int)box.reason);
    char *read = capture("%s read --group %s %s", swift_tool(), GROUP, id);
    CHECK(read && strcmp(read, json) == 0, "wormholectl read: %s", read ? read : "(null)");
    free(read);
    read = capture("%s read --group %s %s", python_tool(), GROUP, id);
    CHECK(read && strstr(read, "\"n\""), "wormhole-py read: %s", read ? read : "(null)");
    free(read);
    CHECK(run("%s send --group %s %s '{\"from\":\"swift\"}'", swift_tool(), GROUP, id) == 0, "wormholectl send failed");
    CHECK(pump(context, &box.count, 2, 10000), "the Swift tool's send not heard");
    CHECK(box.json && strstr(box.json, "swift"), "Swift send: %s", box.json ? box.json : "(null)");
    CHECK(run("%s send --group %s %s '{\"from\":\"python\"}'", python_tool(), GROUP, id) == 0, "wormhole-py send failed");
    CHECK(pump(context, &box.count, 3, 10000), "the Python package's send not heard");
    CHECK(box.json && strstr(box.json, "python"), "Python send: %s", box.json ? box.json : "(null)");

    /* The Swift tool and the Python package listen to a send from C. */
    child swift, python;
    CHECK(start_ready(&swift, 20000, "exec %s listen --group %s %s --count 1 --timeout 20", swift_tool(), GROUP, id),
          "listen not ready");
    CHECK(start_ready(&python, 20000, "exec %s listen --group %s %s --count 1 --timeout 20", python_tool(), GROUP, id),
          "wormhole-py listen not ready");
    CHECK_OK(wh_mailbox_send(mailbox, id, "[1,2,3]", 7, ERR));
    char *line = child_line(&swift, 20000);
    CHECK(line && strstr(line, "[1,2,3]"), "the Swift tool heard: %s", line ? line : "(nothing)");
    free(line);
    line = child_line(&python, 20000);
    CHECK(line && strstr(line, "[1"), "the Python package heard: %s", line ? line : "(nothing)");
    free(line);
    CHECK(child_wait(&swift) == 0, "wormholectl listen failed");
    CHECK(child_wait(&python) == 0, "wormhole-py listen failed");
    CHECK(pump(context, &box.count, 4, 10000), "own send not heard");

    /* Read and clear: the listener hears a delivery with no message. */
    char *stored = NULL;
    size_t length = 0;
    CHECK_OK(wh_mailbox_read(mailbox, id, &stored, &length, ERR));
    CHECK(stored && length == 7 && strcmp(stored, "[1,2,3]") == 0, "read %s", stored ? stored : "(null)");
    wh_free(stored);
    CHECK_OK(wh_mailbox_clear(mailbox, id, ERR));
    CHECK(pump(context, &box.count, 5, 10000), "clear not heard");
    CHECK(box.json == NULL && box.error == WH_ERROR_NO_MESSAGE, "clear delivered %s, error %d",
          box.json ? box.json : "(null)", (int)box.error);
    stored = (char *)1;
    CHECK_OK(wh_mailbox_read(mailbox, id, &stored, NULL, ERR));
    CHECK(stored == NULL, "an empty mailbox read as something");
    wh_subscription_free(subscription);

    /* Every identifier, with the stored message on start. */
    char other[100];
    unique_identifier(other, sizeof other, "other");
    CHECK_OK(wh_mailbox_send(mailbox, other, "\"kept\"", 6, ERR));
    inbox all = {0};
    CHECK_OK(wh_mailbox_listen_all(mailbox, WH_LISTEN_STORED_ON_START, on_message, &all, NULL, &subscription, ERR));
    CHECK(pump(context, &all.count, 1, 10000), "stored message not delivered on start");
    CHECK(all.reason == WH_REASON_STORED, "stored delivery's reason %d", (int)all.reason);
    int before = all.count;
    CHECK(run("%s send --group %s %s '\"any\"'", swift_tool(), GROUP, id) == 0, "wormholectl send failed");
    CHECK(pump(context, &all.count, before + 1, 10000), "listen_all did not hear the Swift tool");
    CHECK(strcmp(all.identifier, id) == 0, "listen_all heard %s", all.identifier);
    wh_subscription_free(subscription);
    CHECK_OK(wh_mailbox_clear(mailbox, NULL, ERR));
    free(box.json);
    free(all.json);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
}

typedef struct changes {
    volatile int count;
    char key[256];
    char *value;
    wh_reason reason;
    int own;
} changes;

static void on_change(const wh_change *change, void *data) {
    changes *c = data;
    on_handler_thread();
    snprintf(c->key, sizeof c->key, "%s", wh_change_key(change));
    free(c->value);
    size_t length = 0;
    const char *value = wh_change_value(change, &length);
    c->value = value ? strndup(value, length) : NULL;
    c->reason = wh_change_reason(change);
    c->own = wh_change_is_own_write(change);
    c->count++;
}

void test_defaults(void) {
    wh_context *context = test_context();
    wh_defaults *defaults = NULL;
    char suite[100];
    unique_identifier(suite, sizeof suite, "suite");
    CHECK_OK(wh_defaults_open(context, GROUP, suite, &defaults, ERR));
    changes seen = {0}, every = {0};
    wh_subscription *one = NULL, *all = NULL;
    CHECK_OK(wh_defaults_observe(defaults, "volume", WH_CHANGES_INITIAL, on_change, &seen, NULL, &one, ERR));
    CHECK_OK(wh_defaults_observe(defaults, NULL, 0, on_change, &every, NULL, &all, ERR));

    /* The key's value when the observer starts: absent. */
    CHECK(pump(context, &seen.count, 1, 10000), "no initial delivery");
    CHECK(seen.reason == WH_REASON_INITIAL && seen.value == NULL, "initial delivery: reason %d value %s",
          (int)seen.reason, seen.value ? seen.value : "(null)");

    /* Typed values as JSON text with the contract's tags. */
    CHECK_OK(wh_defaults_set(defaults, "volume", "1.5", 3, ERR));
    CHECK(pump(context, &seen.count, 2, 10000), "own write not heard");
    CHECK(seen.value && strcmp(seen.value, "1.5") == 0 && seen.own, "change %s own %d", seen.value ? seen.value : "(null)",
          seen.own);
    const char *date = "{\"$date\":1700000000.5}";
    CHECK_OK(wh_defaults_set(defaults, "when", date, strlen(date), ERR));
    char *value = NULL;
    size_t length = 0;
    CHECK_OK(wh_defaults_get(defaults, "when", &value, &length, ERR));
    CHECK(value && strcmp(value, date) == 0 && length == strlen(date), "date read back as %s", value ? value : "(null)");
    wh_free(value);
    char *swift = capture("%s defaults read --group %s --suite %s volume", swift_tool(), GROUP, suite);
    CHECK(swift && strcmp(swift, "1.5") == 0, "wormholectl defaults read: %s", swift ? swift : "(null)");
    free(swift);

    /* Writes from the Swift tool and the Python package reach the observer and the reader. */
    CHECK(run("%s defaults write --group %s --suite %s volume 3", swift_tool(), GROUP, suite) == 0, "defaults write");
    CHECK(pump(context, &seen.count, 3, 10000), "the Swift tool's write not heard");
    CHECK(seen.value && strcmp(seen.value, "3") == 0 && !seen.own, "Swift write: %s", seen.value ? seen.value : "(null)");
    CHECK(run("%s defaults write --group %s --suite %s volume 4", python_tool(), GROUP, suite) == 0, "py defaults write");
    CHECK(pump(context, &seen.count, 4, 10000), "the Python package's write not heard");
    CHECK(seen.value && strcmp(seen.value, "4") == 0, "Python write: %s", seen.value ? seen.value : "(null)");
    char *python = capture("%s defaults read --group %s --suite %s when", python_tool(), GROUP, suite);
    CHECK(python && strstr(python, "$date"), "wormhole-py defaults read: %s", python ? python : "(null)");
    free(python);

    /* Increment and compare-and-set. */
    int64_t counter = 0;
    CHECK_OK(wh_defaults_increment(defaults, "count", 2, &counter, ERR));
    CHECK_OK(wh_defaults_increment(defaults, "count", -5, &counter, ERR));
    CHECK(counter == -3, "counter %lld", (long long)counter);
    REFUSED("increment a date", wh_defaults_increment(defaults, "when", 1, &counter, &error),
                  WH_ERROR_TYPE_MISMATCH, NULL);
    char *current = NULL;
    size_t current_length = 0;
    wh_error *error = NULL;
    wh_status status = wh_defaults_compare_and_set(defaults, "volume", "4.0", 3, "5", 1, &current, &current_length, &error);
    CHECK(current && strcmp(current, "4") == 0, "mismatch gave the current value %s", current ? current : "(null)");
    check_refused("compare-and-set with 4.0 against 4", status, error, WH_ERROR_MISMATCH, "volume");
    wh_free(current);
    CHECK_OK(wh_defaults_compare_and_set(defaults, "volume", "4", 1, "5", 1, NULL, NULL, ERR));
    CHECK_OK(wh_defaults_compare_and_set(defaults, "fresh", NULL, 0, "true", 4, NULL, NULL, ERR));
    REFUSED("expect absent", wh_defaults_compare_and_set(defaults, "fresh", NULL, 0, "false", 5, NULL, NULL, &error),
            WH_ERROR_MISMATCH, "fresh");
    CHECK_OK(wh_defaults_remove(defaults, "fresh", ERR));
    value = (char *)1;
    CHECK_OK(wh_defaults_get(defaults, "fresh", &value, NULL, ERR));
    CHECK(value == NULL, "a removed key read as something");
    CHECK_OK(wh_defaults_get(defaults, NULL, &value, NULL, ERR));
    CHECK(value && strstr(value, "\"count\":-3") && strstr(value, "\"volume\":5"), "suite %s", value ? value : "(null)");
    wh_free(value);
    CHECK(pump(context, &every.count, 6, 10000), "the suite's observer heard %d changes", every.count);

    wh_subscription_free(one);
    wh_subscription_free(all);
    free(seen.value);
    free(every.value);
    wh_defaults_free(defaults);
    wh_context_free(context);
}

/* Bad input: a clear error naming the value, and nothing stored. */
void test_bad_input(void) {
    wh_context *context = test_context();
    wh_mailbox *mailbox = NULL;
    wh_defaults *defaults = NULL;
    wh_subscription *subscription = NULL;
    char long_name[1000];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;

    REFUSED("NULL context", wh_post(NULL, "a.b", &error), WH_ERROR_INVALID_ARGUMENT, NULL);
    REFUSED("NULL name", wh_post(context, NULL, &error), WH_ERROR_INVALID_ARGUMENT, NULL);
    REFUSED("empty name", wh_post(context, "", &error), WH_ERROR_INVALID_NAME, NULL);
    REFUSED("long name", wh_post(context, long_name, &error), WH_ERROR_INVALID_NAME, NULL);
    REFUSED("invalid UTF-8 name", wh_post(context, "caf\xc3", &error), WH_ERROR_INVALID_ARGUMENT, "63 61 66 c3");
    REFUSED("unknown flag", wh_observe_name(context, "a.b", 0x80, NULL, NULL, NULL, &subscription, &error),
                  WH_ERROR_INVALID_ARGUMENT, "0x80");
    CHECK(wh_post(context, "a.b", NULL) == WH_OK, "a NULL error pointer is not allowed");
    CHECK(wh_post(NULL, "a.b", NULL) == WH_ERROR_INVALID_ARGUMENT, "NULL context without an error pointer");

    REFUSED("bad group", wh_mailbox_open(context, "../etc", NULL, &mailbox, &error), WH_ERROR_INVALID_GROUP,
                  "../etc");
    REFUSED("reserved directory", wh_mailbox_open(context, GROUP, "Preferences", &mailbox, &error),
                  WH_ERROR_INVALID_DIRECTORY, NULL);
    CHECK_OK(wh_mailbox_open(context, GROUP, "bad-input", &mailbox, ERR));
    REFUSED("bad identifier", wh_mailbox_send(mailbox, "a/b", "1", 1, &error), WH_ERROR_INVALID_IDENTIFIER,
                  "a/b");
    REFUSED("invalid JSON", wh_mailbox_send(mailbox, "box", "{\"a\":", 5, &error), WH_ERROR_INVALID_JSON,
                  NULL);
    REFUSED("invalid UTF-8 JSON", wh_mailbox_send(mailbox, "box", "\"\xff\"", 3, &error),
                  WH_ERROR_INVALID_ARGUMENT, NULL);
    REFUSED("NUL inside JSON", wh_mailbox_send(mailbox, "box", "\"a\0b\"", 5, &error), WH_ERROR_INVALID_JSON,
                  NULL);
    REFUSED("NULL JSON", wh_mailbox_send(mailbox, "box", NULL, 3, &error), WH_ERROR_INVALID_ARGUMENT, NULL);
    /* A message over the default reader's limit (64 MiB): refused before anything is stored. */
    size_t oversize = (64u << 20) + 2;
    char *large = malloc(oversize);
    memset(large, 'x', oversize);
    large[0] = '"';
    large[oversize - 1] = '"';
    REFUSED("oversize message", wh_mailbox_send(mailbox, "box", large, oversize, &error), WH_ERROR_MESSAGE_TOO_LARGE,
            NULL);
    free(large);
    char *stored = (char *)1;
    CHECK_OK(wh_mailbox_read(mailbox, "box", &stored, NULL, ERR));
    CHECK(stored == NULL, "a refused send stored something");
    char *listing = capture("ls -A \"$WORMHOLE_CONTAINER_ROOT/" GROUP "/bad-input\" 2>/dev/null");
    CHECK(listing && *listing == 0, "refused sends left files: %s", listing ? listing : "(null)");
    free(listing);

    CHECK_OK(wh_defaults_open(context, GROUP, "bad-input", &defaults, ERR));
    REFUSED("null value", wh_defaults_set(defaults, "k", "null", 4, &error), WH_ERROR_INVALID_VALUE, "k");
    REFUSED("unknown tag", wh_defaults_set(defaults, "k", "{\"$what\":1}", 11, &error), WH_ERROR_INVALID_VALUE,
                  "k");
    REFUSED("empty key", wh_defaults_set(defaults, "", "1", 1, &error), WH_ERROR_INVALID_KEY, NULL);
    /* A value over the suite's limit (4 MiB): refused, and the suite stays as it was. */
    size_t big = 5u << 20;
    char *huge = malloc(big);
    memset(huge, 'x', big);
    huge[0] = '"';
    huge[big - 1] = '"';
    REFUSED("oversize value", wh_defaults_set(defaults, "k", huge, big, &error), WH_ERROR_SUITE_TOO_LARGE,
                  NULL);
    free(huge);
    char *value = (char *)1;
    CHECK_OK(wh_defaults_get(defaults, "k", &value, NULL, ERR));
    CHECK(value == NULL, "a refused write stored something");
    REFUSED("bad suite", wh_defaults_open(context, GROUP, "a b", &defaults, &error), WH_ERROR_INVALID_SUITE,
                  "a b");
    wh_defaults_free(defaults);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
}
