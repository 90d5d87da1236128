/* Sends and returns from main at once, with no flush (the exit drain's test,
 * Tests/faults-c-exit.sh): posts NAME with STATE, or with --mailbox stores {"n":STATE} in
 * GROUP's mailbox ID.
 *
 *   send-and-exit NAME STATE
 *   send-and-exit --mailbox GROUP ID STATE
 *
 * SPDX-License-Identifier: Apache-2.0 */
#include <wormhole.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    wh_context *context = NULL;
    wh_error *error = NULL;
    wh_status status;
    if (wh_context_new(NULL, &context, &error) != WH_OK) {
        fprintf(stderr, "send-and-exit: %s\n", wh_error_message(error));
        return 1;
    }
    if (argc == 5 && strcmp(argv[1], "--mailbox") == 0) {
        wh_mailbox *mailbox = NULL;
        char json[64];
        snprintf(json, sizeof json, "{\"n\":%s}", argv[4]);
        status = wh_mailbox_open(context, argv[2], NULL, &mailbox, &error);
        if (status == WH_OK) status = wh_mailbox_send(mailbox, argv[3], json, strlen(json), &error);
        wh_mailbox_free(mailbox);
    } else if (argc == 3) {
        status = wh_post_state(context, argv[1], strtoull(argv[2], NULL, 10), &error);
    } else {
        fprintf(stderr, "usage: send-and-exit NAME STATE | --mailbox GROUP ID STATE\n");
        return 2;
    }
    if (status != WH_OK) {
        fprintf(stderr, "send-and-exit: %s\n", wh_error_message(error));
        wh_error_free(error);
        return 1;
    }
    wh_context_free(context);
    return 0;
}
