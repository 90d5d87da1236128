/* libwormhole's C tests: every function of wormhole.h, across processes against the Swift
 * tool and the Python package, on the private bus and container root Tests/c.sh gives.
 *
 *   wh-tests [TEST...]      (default: all; prints one line per test)
 *   wh-tests --consume-and-crash ID CONSUMER   (a reader test-journal.c starts)
 *
 * SPDX-License-Identifier: Apache-2.0 */
#include "tests.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    void (*run)(void);
} tests[] = {
    {"version", test_version},
    {"post-and-observe", test_post_and_observe},
    {"prefix-state-and-tokens", test_prefix_state_and_tokens},
    {"suspend-resume-cancel", test_suspend_resume_cancel},
    {"cancel-from-another-thread", test_cancel_from_another_thread},
    {"options-and-flush", test_options_and_flush},
    {"mailboxes", test_mailboxes},
    {"defaults", test_defaults},
    {"bad-input", test_bad_input},
    {"log-handler", test_log_handler},
    {"app-id", test_app_id},
    {"journal", test_journal},
    {"journal-consumers", test_journal_consumers},
    {"transient", test_transient},
    {"transient-bound", test_transient_bound},
    {"journal-bad-input", test_journal_bad_input},
};

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--consume-and-crash") == 0) return consume_and_crash(argv[2], argv[3]);
    int ran = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int chosen = argc < 2;
        for (int a = 1; a < argc; a++) chosen |= strcmp(argv[a], tests[i].name) == 0;
        if (!chosen) continue;
        int before = wh_test_failures;
        tests[i].run();
        ran++;
        int bad = wh_test_failures != before;
        failed += bad;
        printf("%s %s\n", bad ? "FAIL" : "ok  ", tests[i].name);
        fflush(stdout);
    }
    printf("%d tests, %d failed\n", ran, failed);
    return ran == 0 || failed ? 1 : 0;
}
