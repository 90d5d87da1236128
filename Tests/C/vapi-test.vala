/* wormhole-1.vapi against the library (Tests/bindings.sh): each group of the binding is called
 * once the way its C function documents, on a private bus, and what comes back is checked, so a
 * wrong parameter order or ownership in the .vapi fails here (or under valac). Prints "ok" and
 * exits 0, or names each failed check and exits 1.
 * SPDX-License-Identifier: Apache-2.0 */
int failures = 0;

void check (bool condition, string what) {
    if (!condition) {
        stderr.printf ("vapi-test: check failed: %s\n", what);
        failures++;
    }
}

void ok (Wormhole.Status status, Wormhole.Error? error, string what) {
    check (status == Wormhole.Status.OK, "%s: %s".printf (what, error != null ? error.message () : status.to_string ()));
}

MainLoop? waiting_loop;
SourceFunc? waiting_for;

/* Runs the default main context (the wormhole source dispatches there) until `done` says so;
 * handlers call progressed (). At most 10 s: a bound on a failure, not a wait. */
void run_until (owned SourceFunc done, string what) {
    if (done ()) return;
    var loop = new MainLoop ();
    var timed_out = false;
    var bound = Timeout.add_seconds (10, () => { timed_out = true; loop.quit (); return Source.REMOVE; });
    waiting_loop = loop;
    waiting_for = (owned) done;
    loop.run ();
    waiting_loop = null;
    waiting_for = null;
    if (!timed_out) Source.remove (bound);
    check (!timed_out, "%s within 10 s".printf (what));
}

void progressed () {
    if (waiting_loop != null && waiting_for ()) waiting_loop.quit ();
}

int main () {
    unowned string contract;
    check (Wormhole.version (out contract).length > 0 && contract.has_prefix ("1."), "version");
    Wormhole.Error? error = null;
    Wormhole.Options options;
    ok (Wormhole.Options.make (out options, out error), error, "options");
    ok (options.set_bus_address (Environment.get_variable ("DBUS_SESSION_BUS_ADDRESS"), out error), error, "bus");
    ok (options.set_container_root (Environment.get_variable ("WORMHOLE_CONTAINER_ROOT"), out error), error, "root");
    ok (options.set_doorbell (true, out error), error, "doorbell");
    var lines = 0;
    ok (options.set_log_handler ((level, component, message) => { AtomicInt.inc (ref lines); },
                                 Wormhole.LogLevel.TRACE, out error), error, "log handler");
    check (options.set_bus_address ("nonsense", out error) == Wormhole.Status.ERROR_INVALID_ADDRESS,
           "a bad bus address refused");
    Wormhole.Context context;
    ok (Wormhole.Context.make (options, out context, out error), error, "context");
    context.attach_glib ();
    var name = "org.example.vapi.%d".printf ((int) Random.next_int ());

    // Notifications, last state, check tokens.
    Wormhole.CheckToken token;
    ok (Wormhole.CheckToken.make (context, name, out token, out error), error, "check token");
    check (token.check (), "the first check");
    uint64 heard = 0;
    Wormhole.Subscription observer;
    ok (context.observe_name (name, 0, (notification) => {
        uint64 state;
        if (notification.state (out state)) heard = state;
        progressed ();
    }, out observer, out error), error, "observe");
    ok (context.post_state (name, 42, out error), error, "post");
    run_until (() => heard == 42, "the post");
    uint64 last;
    bool known;
    ok (context.last_state (name, out last, out known, out error), error, "last state");
    check (!known || last == 42, "last state %s".printf (last.to_string ()));

    // Shared defaults.
    Wormhole.Defaults defaults;
    ok (Wormhole.Defaults.open (context, "group.com.example.vapi", null, out defaults, out error), error, "defaults");
    string? changed = null;
    Wormhole.Subscription changes;
    ok (defaults.observe ("volume", 0, (change) => { changed = change.value (); progressed (); }, out changes,
                          out error), error, "observe defaults");
    ok (defaults.set ("volume", "3", 1, out error), error, "set");
    int64 value;
    ok (defaults.increment ("volume", 2, out value, out error), error, "increment");
    check (value == 5, "incremented to %s".printf (value.to_string ()));
    string? current;
    size_t current_length;
    check (defaults.compare_and_set ("volume", "4", 1, "9", 1, out current, out current_length, out error)
           == Wormhole.Status.ERROR_MISMATCH && current == "5", "compare-and-set refused, current 5");
    ok (defaults.compare_and_set ("volume", "5", 1, "6", 1, out current, out current_length, out error), error,
        "compare-and-set");
    string? json;
    size_t length;
    ok (defaults.get ("volume", out json, out length, out error), error, "get");
    check (json == "6" && length == 1, "volume is %s".printf (json ?? "(null)"));
    run_until (() => changed == "6", "the defaults change");
    ok (defaults.remove ("volume", out error), error, "remove");

    // Mailboxes, transient messages, suspension.
    Wormhole.Mailbox mailbox;
    ok (Wormhole.Mailbox.open (context, "group.com.example.vapi", null, out mailbox, out error), error, "mailbox");
    var messages = new GenericArray<string> ();
    Wormhole.Subscription listener;
    ok (mailbox.listen_all (0, (message) => {
        messages.add ("%s %s".printf (message.reason ().to_string (), message.json () ?? "-"));
        progressed ();
    }, out listener, out error), error, "listen_all");
    ok (listener.suspend (out error), error, "suspend");
    ok (mailbox.send ("box", "[1]", 3, out error), error, "send");
    ok (mailbox.send_transient ("box", "[2]", 3, out error), error, "send_transient");
    ok (listener.resume (out error), error, "resume");
    run_until (() => messages.length >= 2, "the messages");
    check (messages.length >= 2 && "[2]" in messages[messages.length - 1], "messages: %s".printf (
        string.joinv (", ", messages.data)));
    ok (mailbox.read ("box", out json, out length, out error), error, "read");
    check (json == "[1]", "read %s".printf (json ?? "(null)"));
    ok (mailbox.clear (null, out error), error, "clear");
    listener.cancel ();
    check (listener.is_cancelled (), "cancelled");

    // Journals.
    Wormhole.Journal journal;
    ok (Wormhole.Journal.open (mailbox, "vapi", Wormhole.JOURNAL_FDATASYNC, out journal, out error), error, "journal");
    string[] records = { "{\"n\":1}", "{\"n\":2}" };
    size_t[] lengths = { 7, 7 };
    uint64 first;
    ok (journal.append_many (records, lengths, 2, out first, out error), error, "append_many");
    check (first == 1, "first %s".printf (first.to_string ()));
    ok (journal.status (out json, out length, out error), error, "status");
    check (json != null && "\"last\":2" in json, "status %s".printf (json ?? "(null)"));
    size_t damaged;
    ok (journal.check (out damaged, out error), error, "check");
    ok (journal.flush (5000, out error), error, "journal flush");
    ok (context.flush (5000, out error), error, "flush");
    check (AtomicInt.get (ref lines) >= 0, "log lines");
    if (failures == 0) print ("ok\n");
    return failures == 0 ? 0 : 1;
}
