/* The C tests (Tests/c.sh). SPDX-License-Identifier: Apache-2.0 */
#ifndef WH_TESTS_H
#define WH_TESTS_H
#include "wh-test.h"

void test_version(void);
void test_post_and_observe(void);
void test_prefix_state_and_tokens(void);
void test_suspend_resume_cancel(void);
void test_cancel_from_another_thread(void);
void test_options_and_flush(void);
void test_mailboxes(void);
void test_defaults(void);
void test_bad_input(void);
void test_log_handler(void);
void test_app_id(void);
void test_journal(void);
void test_journal_consumers(void);
void test_transient(void);
void test_transient_bound(void);
void test_journal_bad_input(void);
int consume_and_crash(const char *id, const char *consumer);
#endif
