/* wormhole-1.vapi: libwormhole for Vala, written by hand against wormhole.h (docs/c.md, *Vala*):
 * every function of the header, and the GLib adapter's wh_glib_attach.
 *
 *   valac --vapidir=$PREFIX/share/vala/vapi --pkg wormhole-1 --pkg glib-2.0 app.vala
 *
 * (valac reads wormhole-1.deps: the C flags come from pkg-config's wormhole-1.) Every call that
 * can fail returns a Status and fills `out Error? error`; handlers are delegates whose target
 * the library frees (the C destroy function) when the subscription ends. Context.attach_glib
 * dispatches deliveries on a GLib main context (wormhole-glib.h).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
[CCode (cheader_filename = "wormhole.h", lower_case_cprefix = "wh_")]
namespace Wormhole {
    [CCode (cname = "wh_status", cprefix = "WH_", has_type_id = false)]
    public enum Status {
        OK, ERROR_INVALID_ARGUMENT, ERROR_INVALID_NAME, ERROR_INVALID_GROUP, ERROR_INVALID_IDENTIFIER,
        ERROR_INVALID_DIRECTORY, ERROR_INVALID_SUITE, ERROR_INVALID_KEY, ERROR_INVALID_JSON, ERROR_INVALID_VALUE,
        ERROR_INVALID_APP_ID, ERROR_INVALID_ADDRESS, ERROR_MESSAGE_TOO_LARGE, ERROR_SUITE_TOO_LARGE,
        ERROR_TYPE_MISMATCH, ERROR_CORRUPT_SUITE, ERROR_UNSAFE_PATH, ERROR_NO_CONTAINER_ROOT, ERROR_IO,
        ERROR_LOCK_TIMEOUT, ERROR_BUS, ERROR_NOT_SENT, ERROR_MISMATCH, ERROR_TIMED_OUT, ERROR_CLOSED,
        ERROR_DECODING_FAILED, ERROR_NO_MESSAGE, ERROR_RECORD_TOO_LARGE, ERROR_JOURNAL_CORRUPT,
        ERROR_JOURNAL_DAMAGED, ERROR_JOURNAL_GAP, ERROR_JOURNAL_VERSION, ERROR_INVALID_POSITION,
        ERROR_INVALID_CONSUMER, ERROR_INVALID_CURSOR, ERROR_CONSUMER_BUSY, ERROR_TRANSIENT_TOO_LARGE,
        ERROR_TRANSIENT_DROPPED, ERROR_ENCODING_FAILED, ERROR_QUEUE_FULL, ERROR_OTHER
    }

    [CCode (cname = "wh_reason", cprefix = "WH_REASON_", has_type_id = false)]
    public enum Reason { POSTED, CATCH_UP, STORED, INITIAL, TRANSIENT }

    [CCode (cname = "wh_log_level", cprefix = "WH_LOG_", has_type_id = false)]
    public enum LogLevel { TRACE, DEBUG, INFO, NOTICE, WARNING, ERROR, CRITICAL }
    /* Any thread may call it (the library's own among them); it must not call libwormhole. */
    [CCode (cname = "wh_log_handler", has_target = true)]
    public delegate void LogHandler (LogLevel level, string component, string message);

    [CCode (cname = "WH_OBSERVE_IGNORE_OWN_POSTS")]
    public const uint OBSERVE_IGNORE_OWN_POSTS;
    [CCode (cname = "WH_LISTEN_STORED_ON_START")]
    public const uint LISTEN_STORED_ON_START;
    [CCode (cname = "WH_LISTEN_EVERY_POST")]
    public const uint LISTEN_EVERY_POST;
    [CCode (cname = "WH_CHANGES_INITIAL")]
    public const uint CHANGES_INITIAL;
    [CCode (cname = "WH_CHANGES_IGNORE_OWN_WRITES")]
    public const uint CHANGES_IGNORE_OWN_WRITES;
    [CCode (cname = "WH_JOURNAL_FDATASYNC")]
    public const uint JOURNAL_FDATASYNC;
    [CCode (cname = "WH_JOURNAL_FROM_END")]
    public const uint64 JOURNAL_FROM_END;
    [CCode (cname = "WH_JOURNAL_FROM_BEGINNING")]
    public const uint64 JOURNAL_FROM_BEGINNING;

    /* The library's and (out) the contract's versions. */
    public unowned string version (out unowned string contract);
    [CCode (cname = "wh_free")]
    public void free (void *buffer);

    [Compact, CCode (cname = "wh_error", free_function = "wh_error_free")]
    public class Error {
        [CCode (cname = "wh_error_code")]
        public Status code ();
        [CCode (cname = "wh_error_name")]
        public unowned string name ();
        [CCode (cname = "wh_error_message")]
        public unowned string message ();
        [CCode (cname = "wh_error_value")]
        public unowned string? value ();
    }

    [Compact, CCode (cname = "wh_subscription", free_function = "wh_subscription_free")]
    public class Subscription {
        public Status suspend (out Error? error);
        public Status resume (out Error? error);
        public void cancel ();
        public bool is_cancelled ();
    }

    [Compact, CCode (cname = "wh_notification", free_function = "")]
    public class Notification {
        public unowned string name ();
        public bool state (out uint64 state);
        public Reason reason ();
        public int64 coalesced_count ();
        public bool is_own_post ();
    }
    [CCode (cname = "wh_notification_handler", has_target = true)]
    public delegate void NotificationHandler ([CCode (type = "const wh_notification*")] Notification notification);

    /* What a context is made with (one thread's at a time). */
    [Compact, CCode (cname = "wh_context_options", free_function = "wh_context_options_free", lower_case_cprefix = "wh_context_options_")]
    public class Options {
        [CCode (cname = "wh_context_options_new")]
        public static Status make (out Options options, out Error? error);
        public Status set_bus_address (string address, out Error? error);
        public Status set_app_id (string app_id, out Error? error);
        public Status set_container_root (string path, out Error? error);
        public Status set_doorbell (bool enabled, out Error? error);
        public Status set_log_handler ([CCode (delegate_target_pos = 2.1, destroy_notify_pos = 2.2)]
                                       owned LogHandler handler, LogLevel minimum, out Error? error);
    }

    [Compact, CCode (cname = "wh_context", free_function = "wh_context_free")]
    public class Context {
        [CCode (cname = "wh_context_new")]
        public static Status make (Options? options, out Context context, out Error? error);
        /* A context with the default options (the session bus), or null and `error`. */
        public static Context? open (out Error? error) {
            Context context;
            return make (null, out context, out error) == Status.OK ? (owned) context : null;
        }
        public int fd ();
        public int dispatch ();
        public Status flush (int64 timeout_ms, out Error? error);
        /* Dispatches this context's deliveries on `main_context` (null: the thread default). */
        [CCode (cname = "wh_glib_attach", cheader_filename = "wormhole-glib.h")]
        public uint attach_glib (GLib.MainContext? main_context = null);
        [CCode (cname = "wh_post")]
        public Status post (string name, out Error? error);
        [CCode (cname = "wh_post_state")]
        public Status post_state (string name, uint64 state, out Error? error);
        [CCode (cname = "wh_observe_name")]
        public Status observe_name (string name, uint flags, owned NotificationHandler handler,
                                    out Subscription subscription, out Error? error);
        [CCode (cname = "wh_observe_prefix")]
        public Status observe_prefix (string prefix, uint flags, owned NotificationHandler handler,
                                      out Subscription subscription, out Error? error);
        [CCode (cname = "wh_last_state")]
        public Status last_state (string name, out uint64 state, out bool known, out Error? error);
    }

    [Compact, CCode (cname = "wh_check_token", free_function = "wh_check_token_free")]
    public class CheckToken {
        [CCode (cname = "wh_check_token_new")]
        public static Status make (Context context, string name, out CheckToken token, out Error? error);
        public bool check ();
    }

    [Compact, CCode (cname = "wh_message", free_function = "")]
    public class Message {
        public unowned string identifier ();
        public unowned string? json (out size_t length = null);
        public Reason reason ();
        public bool sent_at (out uint64 nanoseconds);
        public unowned Error? error ();
    }
    [CCode (cname = "wh_message_handler", has_target = true)]
    public delegate void MessageHandler ([CCode (type = "const wh_message*")] Message message);

    [Compact, CCode (cname = "wh_mailbox", free_function = "wh_mailbox_free")]
    public class Mailbox {
        [CCode (cname = "wh_mailbox_open")]
        public static Status open (Context context, string group, string? directory, out Mailbox mailbox,
                                   out Error? error);
        public Status send (string identifier, string json, size_t length, out Error? error);
        public Status send_transient (string identifier, string json, size_t length, out Error? error);
        /* `json` is a new buffer (Wormhole.free) or null when the mailbox is empty. */
        public Status read (string identifier, out string? json, out size_t length, out Error? error);
        public Status clear (string? identifier, out Error? error);
        public Status listen (string identifier, uint flags, owned MessageHandler handler,
                              out Subscription subscription, out Error? error);
        public Status listen_all (uint flags, owned MessageHandler handler, out Subscription subscription,
                                  out Error? error);
    }

    [Compact, CCode (cname = "wh_record", free_function = "")]
    public class Record {
        public unowned string identifier ();
        public uint64 sequence ();
        public unowned string? json (out size_t length = null);
        public uint64 appended_at ();
        public bool is_redelivery ();
        public unowned Error? error ();
        public bool damage (out uint64 from, out uint64 to);
    }
    [CCode (cname = "wh_record_handler", has_target = true)]
    public delegate void RecordHandler ([CCode (type = "const wh_record*")] Record record);

    [Compact, CCode (cname = "wh_journal", free_function = "wh_journal_free")]
    public class Journal {
        [CCode (cname = "wh_journal_open")]
        public static Status open (Mailbox mailbox, string identifier, uint flags, out Journal journal,
                                   out Error? error);
        public Status append (string json, size_t length, out uint64 sequence, out Error? error);
        /* All or none; `lengths` has as many entries as `jsons`. */
        public Status append_many ([CCode (array_length = false, type = "const char* const*")] string[] jsons,
                                   [CCode (array_length = false, type = "const size_t*")] size_t[] lengths,
                                   size_t count, out uint64 first, out Error? error);
        public Status flush (int64 timeout_ms, out Error? error);
        public Status listen (uint64 from, string? consumer, owned RecordHandler handler,
                              out Subscription subscription, out Error? error);
        /* `json` is a new buffer (Wormhole.free). */
        public Status status (out string json, out size_t length, out Error? error);
        public Status check (out size_t damaged, out Error? error);
    }

    [Compact, CCode (cname = "wh_change", free_function = "")]
    public class Change {
        public unowned string key ();
        /* The new value as JSON text, or null when the key was removed. */
        public unowned string? value (out size_t length = null);
        public Reason reason ();
        public bool is_own_write ();
    }
    [CCode (cname = "wh_change_handler", has_target = true)]
    public delegate void ChangeHandler ([CCode (type = "const wh_change*")] Change change);

    /* Values are JSON text in the suite file's format (docs/c.md, *Shared defaults' values*). */
    [Compact, CCode (cname = "wh_defaults", free_function = "wh_defaults_free")]
    public class Defaults {
        [CCode (cname = "wh_defaults_open")]
        public static Status open (Context context, string group, string? suite, out Defaults defaults,
                                   out Error? error);
        /* `json` is a new buffer or null when the key is absent; a null key: the whole suite. */
        public Status get (string? key, out string? json, out size_t length, out Error? error);
        public Status set (string key, string json, size_t length, out Error? error);
        public Status remove (string key, out Error? error);
        public Status increment (string key, int64 by, out int64 value, out Error? error);
        public Status compare_and_set (string key, string? expected, size_t expected_length, string? json,
                                       size_t length, out string? current, out size_t current_length,
                                       out Error? error);
        public Status observe (string? key, uint flags, owned ChangeHandler handler, out Subscription subscription,
                               out Error? error);
    }
}
