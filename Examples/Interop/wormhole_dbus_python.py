#!/usr/bin/python3
"""Wormhole notifications from Python with dbus-python (Debian: apt install python3-dbus python3-gi).

    observe NAME [COUNT]   print "NAME STATE" per post of NAME (STATE is None when none was sent)
    post NAME [STATE]      post NAME as Wormhole does: on the name's bucket interface, state as uint64

The bus is the session bus (DBUS_SESSION_BUS_ADDRESS).
"""
import sys

import dbus
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

PATH = "/org/wormhole/Notify1"
PLAIN = "org.wormhole.Notify1"


def bucket(name):
    """The interface Wormhole posts NAME on: org.wormhole.Notify1.B + %04X of fnv1a32(name) & 0xFFFF."""
    h = 0x811C9DC5
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "%s.B%04X" % (PLAIN, h & 0xFFFF)


def observe(name, count):
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    loop = GLib.MainLoop()
    seen = [0]

    def posted(name, state=None, *extra, **where):
        # No interface in the rule: Wormhole posts on the bucket, hand-typed triggers on PLAIN.
        if where["interface"] not in (PLAIN, bucket(str(name))):
            return
        print(name, None if state is None else int(state), flush=True)
        seen[0] += 1
        if seen[0] == count:
            loop.quit()

    # path + member + arg0, and NO dbus_interface: a rule on PLAIN alone misses Wormhole's posts.
    bus.add_signal_receiver(posted, signal_name="Posted", path=PATH, arg0=name,
                            interface_keyword="interface")
    print("ready", file=sys.stderr, flush=True)  # add_signal_receiver returns once the rule is active
    loop.run()


def post(name, state):
    bus = dbus.SessionBus()
    message = dbus.lowlevel.SignalMessage(PATH, bucket(name), "Posted")
    message.append(name, dbus.UInt64(state), signature="st")  # "st": a plain 5 would go as int32
    bus.send_message(message)
    bus.flush()


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "observe":
        observe(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    elif len(sys.argv) >= 3 and sys.argv[1] == "post":
        post(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    else:
        sys.exit(__doc__)
