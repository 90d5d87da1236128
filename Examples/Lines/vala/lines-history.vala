/* The Lines clip history in Vala through libwormhole (wormhole-1.vapi): the journal "history"
 * of the Lines wormhole (group group.com.example.lines or $LINES_GROUP, directory "lines") keeps
 * every clip in order, where the mailbox "toShell" keeps the last.
 *
 *   lines-history append TEXT             appends {"text": TEXT} and prints its sequence number
 *   lines-history follow [CONSUMER]       prints "SEQUENCE JSON" for every record from the first,
 *                                         on a GLib main loop; with a durable consumer name, from
 *                                         after the last record that consumer printed
 *
 * "ready" goes to standard error once it follows. Build:
 *
 *   valac --pkg wormhole-1 lines-history.vala
 *
 * SPDX-License-Identifier: Apache-2.0
 */
int fail (string what, Wormhole.Error? error) {
    stderr.printf ("lines-history: %s: %s\n", what, error != null ? error.message () : "?");
    return 1;
}

int main (string[] args) {
    if (args.length < 2 || (args[1] == "append" && args.length != 3)) {
        stderr.printf ("usage: lines-history append TEXT | follow [CONSUMER]\n");
        return 64;
    }
    Wormhole.Error? error;
    var context = Wormhole.Context.open (out error);
    if (context == null) return fail ("cannot reach the bus", error);
    var group = Environment.get_variable ("LINES_GROUP") ?? "group.com.example.lines";
    Wormhole.Mailbox mailbox;
    if (Wormhole.Mailbox.open (context, group, "lines", out mailbox, out error) != Wormhole.Status.OK)
        return fail ("cannot open the wormhole", error);
    Wormhole.Journal journal;
    if (Wormhole.Journal.open (mailbox, "history", 0, out journal, out error) != Wormhole.Status.OK)
        return fail ("cannot open the journal", error);

    if (args[1] == "append") {
        var builder = new StringBuilder ("{\"text\":\"");
        foreach (var c in args[2].to_utf8 ()) {
            if (c == '"' || c == '\\') builder.append_c ('\\');
            if ((uchar) c < 0x20) builder.append_printf ("\\u%04x", c);
            else builder.append_c (c);
        }
        builder.append ("\"}");
        uint64 sequence;
        if (journal.append (builder.str, builder.len, out sequence, out error) != Wormhole.Status.OK)
            return fail ("cannot append", error);
        stdout.printf ("%" + uint64.FORMAT + "\n", sequence);
        return 0; // appends are exit-safe: the readers are woken before the process exits
    }

    var loop = new MainLoop ();
    context.attach_glib ();
    Wormhole.Subscription subscription;
    string? consumer = args.length > 2 ? args[2] : null;
    var status = journal.listen (Wormhole.JOURNAL_FROM_BEGINNING, consumer, (record) => {
        unowned Wormhole.Error? failure = record.error ();
        if (failure != null) {
            stderr.printf ("lines-history: %s\n", failure.message ());
            return;
        }
        stdout.printf ("%" + uint64.FORMAT + " %s%s\n", record.sequence (), record.json (),
                       record.is_redelivery () ? " (again)" : "");
        stdout.flush ();
    }, out subscription, out error);
    if (status != Wormhole.Status.OK) return fail ("cannot follow", error);
    stderr.printf ("ready\n");
    Unix.signal_add (ProcessSignal.TERM, () => { loop.quit (); return Source.REMOVE; });
    loop.run ();
    return 0;
}
