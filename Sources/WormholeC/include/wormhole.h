/* wormhole.h: libwormhole, Wormhole's C library (docs/c.md).
 *
 * Darwin-style notifications, last-value mailboxes, journals, transient messages and shared
 * defaults between the processes of an app group, on the Linux session bus, with the guarantees
 * of the Swift library it is built from (the wire and storage contract, docs/contract.md). Link
 * with `pkg-config --cflags --libs wormhole-1`.
 *
 * The rules every function follows:
 *
 * - Handles are opaque pointers; no structure is passed by value. Each has its free function.
 * - A function that can fail returns a wh_status (WH_OK is 0) and, when it fails and its
 *   `error` argument is not NULL, stores a new wh_error there (free it with wh_error_free).
 *   On failure nothing was stored or changed, except where a status says otherwise
 *   (WH_ERROR_NOT_SENT: stored, but the notification was not sent).
 * - Strings are UTF-8. Names, identifiers, keys and paths are NUL-terminated; JSON payloads
 *   come with an explicit length. Invalid UTF-8 is refused with an error naming the bytes.
 * - Every buffer the library returns is freed with wh_free. Strings a handler receives belong
 *   to the delivery and are valid until the handler returns.
 *
 * Threads. Every function may be called from any thread, at any time, except
 * wh_context_dispatch, which one thread at a time calls for a context (a second thread calling
 * it for the same context waits for the first), and the wh_context_options_* functions, whose
 * object one thread uses at a time (like any C struct you fill). Handlers run only inside wh_context_dispatch,
 * on the thread that calls it, one at a time per context; never on a thread of the library.
 * Inside a handler every function may be called, wh_subscription_cancel and
 * wh_subscription_free of the running subscription included (the handler is not called again
 * and its destroy function runs after it returns); wh_context_dispatch of the same context
 * returns 0 there, and wh_context_free of the handler's own context is the one call not
 * allowed. wh_subscription_cancel called from another thread while the subscription's handler
 * runs waits for that handler to return.
 *
 * Processes. A context is a view on the process's one Wormhole runtime (one bus connection per
 * bus address, one doorbell endpoint, one serial sequence): any number of contexts share it.
 * Sends are safe at exit: a program that sends and returns from main (or calls exit) does not
 * lose the notification. A forked child may use the library only after exec (the runtime's
 * threads do not survive fork); _exit in the child is fine.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef WORMHOLE_H
#define WORMHOLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes: libwormhole.so.1. */
#define WH_ABI_VERSION 1

/* ------------------------------------------------------------------ statuses and errors */

/* What a call returned. New codes may be added in minor versions: treat any non-zero status
 * you do not know as a failure, and read wh_error_name for the Swift library's code. */
typedef enum wh_status {
    WH_OK = 0,
    WH_ERROR_INVALID_ARGUMENT = 1, /* a NULL handle or pointer, an unknown flag, invalid UTF-8 */
    WH_ERROR_INVALID_NAME = 2,
    WH_ERROR_INVALID_GROUP = 3,
    WH_ERROR_INVALID_IDENTIFIER = 4,
    WH_ERROR_INVALID_DIRECTORY = 5,
    WH_ERROR_INVALID_SUITE = 6,
    WH_ERROR_INVALID_KEY = 7,
    WH_ERROR_INVALID_JSON = 8,
    WH_ERROR_INVALID_VALUE = 9,
    WH_ERROR_INVALID_APP_ID = 10,
    WH_ERROR_INVALID_ADDRESS = 11,
    WH_ERROR_MESSAGE_TOO_LARGE = 12,
    WH_ERROR_SUITE_TOO_LARGE = 13,
    WH_ERROR_TYPE_MISMATCH = 14,
    WH_ERROR_CORRUPT_SUITE = 15,
    WH_ERROR_UNSAFE_PATH = 16,
    WH_ERROR_NO_CONTAINER_ROOT = 17,
    WH_ERROR_IO = 18,
    WH_ERROR_LOCK_TIMEOUT = 19,
    WH_ERROR_BUS = 20,           /* no session bus, the bus refused or went away */
    WH_ERROR_NOT_SENT = 21,      /* stored, but the notification was not sent or not confirmed */
    WH_ERROR_MISMATCH = 22,      /* compare-and-set: the stored value is another one */
    WH_ERROR_TIMED_OUT = 23,     /* a flush did not finish before its deadline */
    WH_ERROR_CLOSED = 24,        /* the context was freed */
    WH_ERROR_DECODING_FAILED = 25,
    WH_ERROR_NO_MESSAGE = 26,
    /* The journal and transient messages. */
    WH_ERROR_RECORD_TOO_LARGE = 27, /* a journal record over 1 MiB: nothing appended */
    WH_ERROR_JOURNAL_CORRUPT = 28,
    WH_ERROR_JOURNAL_DAMAGED = 29,
    WH_ERROR_JOURNAL_GAP = 30,
    WH_ERROR_JOURNAL_VERSION = 31,
    WH_ERROR_INVALID_POSITION = 32,
    WH_ERROR_INVALID_CONSUMER = 33,
    WH_ERROR_INVALID_CURSOR = 34,
    WH_ERROR_CONSUMER_BUSY = 35,
    WH_ERROR_TRANSIENT_TOO_LARGE = 36, /* a transient message over 64 KiB of compact JSON: not sent */
    WH_ERROR_TRANSIENT_DROPPED = 37,   /* a listener's buffer overflowed: transient messages dropped */
    WH_ERROR_ENCODING_FAILED = 38,
    WH_ERROR_QUEUE_FULL = 39, /* flow control: a receiver stopped reading; nothing was sent (retry later) */
    WH_ERROR_OTHER = 99
} wh_status;

/* An error: a code, a message for people, and the bad value when there is one. */
typedef struct wh_error wh_error;

wh_status wh_error_code(const wh_error *error);
/* The Swift library's name of the code ("invalidName", "bus.noSessionBus"). */
const char *wh_error_name(const wh_error *error);
/* The message, for people and logs (its wording may change; switch on the code). */
const char *wh_error_message(const wh_error *error);
/* The value the error is about (the bad name, the key), or NULL. */
const char *wh_error_value(const wh_error *error);
void wh_error_free(wh_error *error);

/* Frees a buffer the library returned (a JSON text). NULL does nothing. */
void wh_free(void *buffer);

/* The library's version ("2.0.0"); when `contract` is not NULL, the contract version it
 * implements (for example "1.4") is stored there. Both strings are static. */
const char *wh_version(const char **contract);

/* ------------------------------------------------------------------ contexts */

typedef struct wh_context wh_context;
typedef struct wh_context_options wh_context_options;
typedef struct wh_subscription wh_subscription;

/* Called for the library's log lines. Any thread may call it (the library's own among them),
 * so it must be thread-safe and must not call libwormhole. `level` is a wh_log_level. */
typedef enum wh_log_level {
    WH_LOG_TRACE = 0,
    WH_LOG_DEBUG = 1,
    WH_LOG_INFO = 2,
    WH_LOG_NOTICE = 3,
    WH_LOG_WARNING = 4,
    WH_LOG_ERROR = 5,
    WH_LOG_CRITICAL = 6
} wh_log_level;
typedef void (*wh_log_handler)(wh_log_level level, const char *component, const char *message, void *user_data);
/* Frees a handler's user data; called once, when nothing will call the handler again. */
typedef void (*wh_destroy_notify)(void *user_data);

wh_status wh_context_options_new(wh_context_options **options, wh_error **error);
void wh_context_options_free(wh_context_options *options);
/* The bus, as a D-Bus address (default: the session bus, DBUS_SESSION_BUS_ADDRESS). */
wh_status wh_context_options_set_bus_address(wh_context_options *options, const char *address, wh_error **error);
/* The app ID of a sandboxed app (contract section 8): before its first post the process owns
 * `<APPID>.Wormhole.c<unique>` so that xdg-dbus-proxy passes its signals. The app ID belongs
 * to the process: /.flatpak-info wins over it, and two contexts naming different ones is an
 * error (WH_ERROR_INVALID_APP_ID). */
wh_status wh_context_options_set_app_id(wh_context_options *options, const char *app_id, wh_error **error);
/* The container root (default: $WORMHOLE_CONTAINER_ROOT, else the contract's default). */
wh_status wh_context_options_set_container_root(wh_context_options *options, const char *path, wh_error **error);
/* Whether posts ring and observers are rung through the doorbell (default 1; 0: the bus only). */
wh_status wh_context_options_set_doorbell(wh_context_options *options, int enabled, wh_error **error);
/* Routes the log lines of this context's objects at `minimum` or above, and the lines of the
 * process's runtime (its loop thread, the doorbell) at info or above, to `handler`. Without a
 * handler, warnings and above go to standard error. Each context made with these options calls
 * `destroy` (may be NULL) when it is freed; the options never call it. */
wh_status wh_context_options_set_log_handler(wh_context_options *options, wh_log_handler handler,
                                             wh_log_level minimum, void *user_data, wh_destroy_notify destroy,
                                             wh_error **error);

/* Creates a context (`options` may be NULL: the defaults). Fails with WH_ERROR_BUS when the bus
 * cannot be reached. */
wh_status wh_context_new(const wh_context_options *options, wh_context **context, wh_error **error);
/* Cancels every subscription made through the context (their destroy functions run), closes
 * its file descriptor and frees it. Mailboxes, journals and defaults opened from it stay usable
 * for everything but listening. The last call on the context: not from one of its handlers,
 * and not while another thread still calls a function with it. */
void wh_context_free(wh_context *context);

/* The file descriptor that is readable while deliveries wait for wh_context_dispatch, and not
 * otherwise (level-triggered: poll it for input; never read or close it). Valid until
 * wh_context_free. */
int wh_context_fd(const wh_context *context);
/* Runs the handlers of the deliveries waiting now, on the calling thread, and returns how many
 * ran (those arriving meanwhile wait for the next call: the fd stays readable). Returns 0 when
 * called from inside a handler of this context, -1 for NULL. */
int wh_context_dispatch(wh_context *context);
/* Waits until what this process sent through the context's bus is on the bus, at most
 * `timeout_ms` milliseconds (WH_ERROR_TIMED_OUT then). Sends are exit-safe without it. */
wh_status wh_context_flush(wh_context *context, int64_t timeout_ms, wh_error **error);

/* ------------------------------------------------------------------ subscriptions */

/* Why a handler is called. */
typedef enum wh_reason {
    WH_REASON_POSTED = 0,   /* a post, a send, a write */
    WH_REASON_CATCH_UP = 1, /* the bus came back: what changed while it was away */
    WH_REASON_STORED = 2,   /* a mailbox's stored message when the listener started */
    WH_REASON_INITIAL = 3,  /* a defaults key's value when the observer started */
    WH_REASON_TRANSIENT = 4 /* a transient message (wh_mailbox_send_transient) */
} wh_reason;

/* Holds deliveries (like notify_suspend): what arrives meanwhile is kept, merged as the Swift
 * Subscription merges it, and no handler call starts until wh_subscription_resume. */
wh_status wh_subscription_suspend(wh_subscription *subscription, wh_error **error);
wh_status wh_subscription_resume(wh_subscription *subscription, wh_error **error);
/* Stops deliveries: no handler call starts after this returns, and the user data's destroy
 * function runs once no call is running. Cancelling twice does nothing. */
void wh_subscription_cancel(wh_subscription *subscription);
int wh_subscription_is_cancelled(const wh_subscription *subscription);
/* Cancels and frees the handle. */
void wh_subscription_free(wh_subscription *subscription);

/* ------------------------------------------------------------------ notifications */

/* One delivered post; valid until the handler returns. */
typedef struct wh_notification wh_notification;
typedef void (*wh_notification_handler)(const wh_notification *notification, void *user_data);

const char *wh_notification_name(const wh_notification *notification);
/* Returns 1 and stores the state when the post carried one, else 0. */
int wh_notification_state(const wh_notification *notification, uint64_t *state);
wh_reason wh_notification_reason(const wh_notification *notification);
/* How many posts this delivery stands for (more than 1 after a burst or a suspension). */
int64_t wh_notification_coalesced_count(const wh_notification *notification);
int wh_notification_is_own_post(const wh_notification *notification);

/* Flags of wh_observe_name and wh_observe_prefix. */
#define WH_OBSERVE_IGNORE_OWN_POSTS 0x1u

/* Posts `name` (1 to 900 bytes; reverse DNS by convention), like notify_post. */
wh_status wh_post(wh_context *context, const char *name, wh_error **error);
/* Posts `name` with a new state, like notify_set_state then notify_post. */
wh_status wh_post_state(wh_context *context, const char *name, uint64_t state, wh_error **error);
/* Calls `handler` for every post of `name` until cancelled; active when this returns. */
wh_status wh_observe_name(wh_context *context, const char *name, uint32_t flags, wh_notification_handler handler,
                          void *user_data, wh_destroy_notify destroy, wh_subscription **subscription,
                          wh_error **error);
/* The same for every name below `prefix`, which ends in '/'. */
wh_status wh_observe_prefix(wh_context *context, const char *prefix, uint32_t flags, wh_notification_handler handler,
                            void *user_data, wh_destroy_notify destroy, wh_subscription **subscription,
                            wh_error **error);
/* The last state posted for `name` on this machine: returns WH_OK and stores 1 in *known and
 * the state in *state when it is known, 0 in *known when not (no shared table). */
wh_status wh_last_state(wh_context *context, const char *name, uint64_t *state, int *known, wh_error **error);

/* A check token (like notify_register_check): wh_check_token_check returns 1 when `name` was
 * posted since the last check (the first check returns 1), else 0. */
typedef struct wh_check_token wh_check_token;
wh_status wh_check_token_new(wh_context *context, const char *name, wh_check_token **token, wh_error **error);
int wh_check_token_check(wh_check_token *token);
void wh_check_token_free(wh_check_token *token);

/* ------------------------------------------------------------------ mailboxes */

/* The wormhole of a group and a directory: one last-value mailbox per identifier. */
typedef struct wh_mailbox wh_mailbox;
/* One delivered message; valid until the handler returns. */
typedef struct wh_message wh_message;
typedef void (*wh_message_handler)(const wh_message *message, void *user_data);

/* Opens the wormhole of `group` in `directory` (NULL: "wormhole"). */
wh_status wh_mailbox_open(wh_context *context, const char *group, const char *directory, wh_mailbox **mailbox,
                          wh_error **error);
void wh_mailbox_free(wh_mailbox *mailbox);
/* Stores one JSON text as the mailbox's message and notifies listeners. WH_ERROR_NOT_SENT: the
 * message is stored, the notification was not sent (listeners see it at their next wake). */
wh_status wh_mailbox_send(wh_mailbox *mailbox, const char *identifier, const char *json, size_t length,
                          wh_error **error);
/* Reads the stored message: *json is a new NUL-terminated buffer (wh_free) of *length bytes, or
 * NULL when the mailbox is empty (WH_OK either way). `length` may be NULL. */
wh_status wh_mailbox_read(wh_mailbox *mailbox, const char *identifier, char **json, size_t *length,
                          wh_error **error);
/* Clears one mailbox (listeners get a delivery with no message), or every one with NULL. */
wh_status wh_mailbox_clear(wh_mailbox *mailbox, const char *identifier, wh_error **error);

/* Flags of the listen functions. */
#define WH_LISTEN_STORED_ON_START 0x1u /* deliver what is stored when the listener starts */
#define WH_LISTEN_EVERY_POST 0x2u      /* deliver every post, even when the message did not change */

/* Calls `handler` for the messages of `identifier` until cancelled. */
wh_status wh_mailbox_listen(wh_mailbox *mailbox, const char *identifier, uint32_t flags, wh_message_handler handler,
                            void *user_data, wh_destroy_notify destroy, wh_subscription **subscription,
                            wh_error **error);
/* The same for every identifier of the wormhole. */
wh_status wh_mailbox_listen_all(wh_mailbox *mailbox, uint32_t flags, wh_message_handler handler, void *user_data,
                                wh_destroy_notify destroy, wh_subscription **subscription, wh_error **error);

/* Sends one JSON text to the listeners of `identifier` running now, in the notification itself
 * (contract section 7): nothing is stored, and the stored message stays as it is. Listeners get
 * it through wh_mailbox_listen as a WH_REASON_TRANSIENT delivery, each on its own and in the
 * order sent. Refused at the call, with nothing sent: WH_ERROR_TRANSIENT_TOO_LARGE over 65,536
 * bytes of compact JSON, WH_ERROR_BUS without a bus (nothing is kept to send later),
 * WH_ERROR_QUEUE_FULL when a receiver that stopped reading filled the transient connection's
 * bounded queue (the call waits at most one second for room). A listener holds at most 1,024
 * transient messages waiting for wh_context_dispatch: newer ones are dropped and counted (the
 * deliveries keep their order), and one delivery with no message and WH_ERROR_TRANSIENT_DROPPED
 * per identifier says how many (its message starts with the count), before the listener's next
 * transient message or after the last waiting one, whichever comes first. */
wh_status wh_mailbox_send_transient(wh_mailbox *mailbox, const char *identifier, const char *json, size_t length,
                                    wh_error **error);

const char *wh_message_identifier(const wh_message *message);
/* The message as JSON text (NUL-terminated; *length bytes when `length` is not NULL), or NULL
 * when there is none: the mailbox was cleared, or it could not be read (wh_message_error). */
const char *wh_message_json(const wh_message *message, size_t *length);
wh_reason wh_message_reason(const wh_message *message);
/* Returns 1 and stores when the sender wrote it (ns since 1970, CLOCK_REALTIME), else 0. */
int wh_message_sent_at(const wh_message *message, uint64_t *nanoseconds);
/* Why there is no message (WH_ERROR_NO_MESSAGE when cleared), or NULL. Owned by the message. */
const wh_error *wh_message_error(const wh_message *message);

/* ------------------------------------------------------------------ journals */

/* A lossless, ordered log of JSON records for one identifier of a mailbox's wormhole (contract
 * section 6): records are numbered from 1 without gaps, across processes. Appends are exit-safe
 * like sends: the record is in the journal when the call returns, and readers are woken before
 * the process exits. */
typedef struct wh_journal wh_journal;
/* One delivered record, or a failure of the reader; valid until the handler returns. */
typedef struct wh_record wh_record;
typedef void (*wh_record_handler)(const wh_record *record, void *user_data);

/* Flags of wh_journal_open. */
#define WH_JOURNAL_FDATASYNC 0x1u /* fdatasync before an append returns (group commit) */

/* Opens the journal `identifier` of the mailbox's wormhole (`<identifier>.journal/` in its
 * directory; created by the first append). The journal stays usable after the mailbox is freed. */
wh_status wh_journal_open(wh_mailbox *mailbox, const char *identifier, uint32_t flags, wh_journal **journal,
                          wh_error **error);
void wh_journal_free(wh_journal *journal);
/* Appends one JSON text as the next record and stores its sequence number in *sequence (may be
 * NULL). WH_ERROR_RECORD_TOO_LARGE over 1 MiB; nothing is appended on failure. */
wh_status wh_journal_append(wh_journal *journal, const char *json, size_t length, uint64_t *sequence,
                            wh_error **error);
/* Appends `count` JSON texts as consecutive records under one lock and one write: all or none.
 * Stores the first one's sequence number in *first (may be NULL). */
wh_status wh_journal_append_many(wh_journal *journal, const char *const *jsons, const size_t *lengths, size_t count,
                                 uint64_t *first, wh_error **error);
/* Waits until the notifications of earlier appends are on the bus, at most `timeout_ms`. */
wh_status wh_journal_flush(wh_journal *journal, int64_t timeout_ms, wh_error **error);

/* Where a listener without a stored cursor starts: `from` of wh_journal_listen. Any other value
 * is a sequence number. */
#define WH_JOURNAL_FROM_END ((uint64_t)0)           /* records appended after the call */
#define WH_JOURNAL_FROM_BEGINNING (~(uint64_t)0)    /* the first record still in the journal */

/* Calls `handler` for every record in order, from `from` or, for a durable consumer (`consumer`
 * not NULL, identifier rules) with a stored cursor, after the last record it handled. The
 * records are read on the thread that dispatches, one batch per dispatch (the descriptor stays
 * readable while more wait), and a durable consumer's cursor is stored through the last record
 * whose handler returned, after each batch: at-least-once across crashes, the batch in flight
 * at a crash coming again with wh_record_is_redelivery set. Cancelling from the handler stores
 * the cursor through the record being handled. A failure is a delivery with wh_record_error set:
 * WH_ERROR_JOURNAL_GAP (records removed by retention before they were read; the error's value is
 * the first available sequence number) and WH_ERROR_JOURNAL_DAMAGED once per range that cannot
 * be read (wh_record_damage gives the range); delivery goes on after it. A second reader of the
 * same consumer is refused: WH_ERROR_CONSUMER_BUSY. */
wh_status wh_journal_listen(wh_journal *journal, uint64_t from, const char *consumer, wh_record_handler handler,
                            void *user_data, wh_destroy_notify destroy, wh_subscription **subscription,
                            wh_error **error);
/* What the journal holds now, as one JSON object (a new buffer, wh_free): "first", "last",
 * "readable", "bytes", "segments", "consumers" (name: acknowledged sequence), "badConsumers",
 * "damaged" (objects with "from", "to", "reason", "file", "detail"). Takes no lock. */
wh_status wh_journal_status(wh_journal *journal, char **json, size_t *length, wh_error **error);
/* Reads every frame: WH_OK when the journal is whole, else WH_ERROR_JOURNAL_DAMAGED naming the
 * ranges (its value: the first damaged file). *damaged (may be NULL) gets the count of ranges. */
wh_status wh_journal_check(wh_journal *journal, size_t *damaged, wh_error **error);

const char *wh_record_identifier(const wh_record *record);
/* The record's sequence number (0 for a failure). */
uint64_t wh_record_sequence(const wh_record *record);
/* The record as JSON text (NUL-terminated; *length bytes), or NULL for a failure. */
const char *wh_record_json(const wh_record *record, size_t *length);
/* When it was appended: ns since 1970 (CLOCK_REALTIME). */
uint64_t wh_record_appended_at(const wh_record *record);
/* 1 when the record was handed out before a crash and may have been handled. */
int wh_record_is_redelivery(const wh_record *record);
/* The failure this delivery reports, or NULL for a record. Owned by the record. */
const wh_error *wh_record_error(const wh_record *record);
/* For a gap or a damaged range: returns 1 and stores its first and last sequence numbers. */
int wh_record_damage(const wh_record *record, uint64_t *from, uint64_t *to);

/* ------------------------------------------------------------------ shared defaults */

/* A group's shared settings suite. Values are JSON text in the suite file's format (contract
 * section 5): 1 is an integer, 1.0 a double, {"$date":…}, {"$data":"<base64>"}, {"$url":…}. */
typedef struct wh_defaults wh_defaults;
/* One delivered change; valid until the handler returns. */
typedef struct wh_change wh_change;
typedef void (*wh_change_handler)(const wh_change *change, void *user_data);

/* Opens the suite `suite` of `group` (NULL: the group's default suite). */
wh_status wh_defaults_open(wh_context *context, const char *group, const char *suite, wh_defaults **defaults,
                           wh_error **error);
void wh_defaults_free(wh_defaults *defaults);
/* Reads `key`'s value as JSON text (a new buffer, wh_free), or NULL when absent; with `key`
 * NULL, the whole suite as one JSON object. Values this version does not know come as stored. */
wh_status wh_defaults_get(wh_defaults *defaults, const char *key, char **json, size_t *length, wh_error **error);
wh_status wh_defaults_set(wh_defaults *defaults, const char *key, const char *json, size_t length, wh_error **error);
wh_status wh_defaults_remove(wh_defaults *defaults, const char *key, wh_error **error);
/* Adds `by` to an integer under the suite's lock (absent counts as 0); stores the new value. */
wh_status wh_defaults_increment(wh_defaults *defaults, const char *key, int64_t by, int64_t *value, wh_error **error);
/* Writes `json` (NULL: removes the key) only if the stored value equals `expected` as a typed
 * value (`expected` NULL: only if the key is absent). Otherwise WH_ERROR_MISMATCH, nothing
 * changes, and when `current` is not NULL the stored value is returned there (NULL if absent). */
wh_status wh_defaults_compare_and_set(wh_defaults *defaults, const char *key, const char *expected,
                                      size_t expected_length, const char *json, size_t length, char **current,
                                      size_t *current_length, wh_error **error);

/* Flags of wh_defaults_observe. */
#define WH_CHANGES_INITIAL 0x1u /* deliver the key's value when the observer starts */
#define WH_CHANGES_IGNORE_OWN_WRITES 0x2u

/* Calls `handler` for every change of `key` (NULL: of every key of the suite). */
wh_status wh_defaults_observe(wh_defaults *defaults, const char *key, uint32_t flags, wh_change_handler handler,
                              void *user_data, wh_destroy_notify destroy, wh_subscription **subscription,
                              wh_error **error);

const char *wh_change_key(const wh_change *change);
/* The new value as JSON text, or NULL when the key was removed. */
const char *wh_change_value(const wh_change *change, size_t *length);
wh_reason wh_change_reason(const wh_change *change);
int wh_change_is_own_write(const wh_change *change);

#ifdef __cplusplus
}
#endif

#endif /* WORMHOLE_H */
