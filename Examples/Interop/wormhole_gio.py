#!/usr/bin/python3
"""Wormhole notifications from Python with GLib's GDBus (Debian: apt install python3-gi).

    observe NAME [COUNT]   print "NAME STATE" per post of NAME
    post NAME [STATE]      post NAME as Wormhole does (bucket interface, state as uint64)

The bus is the session bus (DBUS_SESSION_BUS_ADDRESS).
"""
import sys

from gi.repository import Gio, GLib

PATH = "/org/wormhole/Notify1"
PLAIN = "org.wormhole.Notify1"


def bucket(name):
    """The interface Wormhole posts NAME on: org.wormhole.Notify1.B + %04X of fnv1a32(name) & 0xFFFF."""
    h = 0x811C9DC5
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "%s.B%04X" % (PLAIN, h & 0xFFFF)


def observe(name, count):
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    loop = GLib.MainLoop()
    seen = [0]

    def posted(connection, sender, path, interface, member, parameters):
        if interface not in (PLAIN, bucket(name)):
            return
        values = parameters.unpack()
        print(values[0], values[1] if len(values) > 1 and isinstance(values[1], int) else None, flush=True)
        seen[0] += 1
        if seen[0] == count:
            loop.quit()

    # interface_name=None: match path + member + arg0 only, so bucket posts arrive too.
    bus.signal_subscribe(None, None, "Posted", PATH, name, Gio.DBusSignalFlags.NONE, posted)
    # signal_subscribe does not wait for the bus: one round trip makes sure the rule is active.
    bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId",
                  None, None, Gio.DBusCallFlags.NONE, -1, None)
    print("ready", file=sys.stderr, flush=True)
    loop.run()


def post(name, state):
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    bus.emit_signal(None, PATH, bucket(name), "Posted", GLib.Variant("(st)", (name, state)))
    bus.flush_sync(None)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "observe":
        observe(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    elif len(sys.argv) >= 3 and sys.argv[1] == "post":
        post(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    else:
        sys.exit(__doc__)
