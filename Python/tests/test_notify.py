# SPDX-License-Identifier: Apache-2.0
"""Notifications in process (contract section 1): post/observe on both
interfaces, prefixes, integer states, hostile signals dropped, the blocking
iterator's refusal, and the catch-up after the bus comes back."""

from __future__ import annotations

import json
import subprocess

import pytest

pytest.importorskip("gi", reason="PyGObject is not installed: the GLib callback API is not tested here")
from gi.repository import GLib  # noqa: E402

from conftest import BOUND, run, swift_cli, wait_for
from wormhole_py import bucket_interface
from wormhole_py.bus import Bus
from wormhole_py.errors import ContextBusyError, InvalidInputError
from wormhole_py.notify import DarwinNotificationCenter, notifications

NAME = "com.example.app.refresh"


def raw_emit(address: str, interface: str, body: GLib.Variant, member: str = "Posted") -> None:
    """Emit a signal as a foreign program would, then make one answered call."""
    bus = Bus.connect(address)
    bus.connection.emit_signal(None, "/org/wormhole/Notify1", interface, member, body)
    bus.confirm()
    bus.close()


def test_post_and_observe_exact_name(wenv, address, context):
    center = DarwinNotificationCenter(address)
    got = []
    center.listen(NAME, got.append)
    center.post(NAME, state=42)
    center.post("com.example.other", state=1)
    center.post(NAME)  # carries the last state
    wait_for(context, lambda: len(got) >= 2)
    assert [(n.name, n.state, n.reason) for n in got] == [(NAME, 42, "posted"), (NAME, 42, "posted")]
    center.close()


def test_a_post_without_a_state_carries_the_state_the_center_knows(wenv, address, context, swift_bin, background):
    """docs/contract.md, proposed for the next version: the last state this center posted or
    received for the name, else 0; seen by the Swift tool in another process."""
    observer = background([swift_cli(swift_bin), "observe", NAME, "--count", "6", "--timeout", "20"], wenv)
    observer.ready()
    center = DarwinNotificationCenter(address)
    got = []
    center.listen(NAME, got.append)
    assert center.post(NAME) == 0                      # knows no state of the name
    assert center.post(NAME, state=7) == 7
    assert center.post(NAME) == 7                      # the state is the name's
    assert run([swift_cli(swift_bin), "post", NAME, "--state", "9"], wenv).returncode == 0
    wait_for(context, lambda: [n.state for n in got][-1:] == [9], what="the Swift post")
    assert center.post(NAME) == 9                      # received from another process
    fresh = DarwinNotificationCenter(address)
    assert fresh.post(NAME) == 0                       # a new center knows none
    status, out, _ = observer.finish()
    assert status == 0
    assert [json.loads(line)["state"] for line in out.splitlines()] == [0, 7, 7, 9, 9, 0]
    center.close()
    fresh.close()


def test_plain_interface_and_signals_without_state(wenv, address, context):
    center = DarwinNotificationCenter(address)
    got = []
    center.listen(NAME, got.append)
    raw_emit(address, "org.wormhole.Notify1", GLib.Variant("(s)", (NAME,)))
    wait_for(context, lambda: got)
    assert got[0].state is None and got[0].name == NAME
    center.close()


@pytest.mark.parametrize("body,state", [
    (GLib.Variant("(si)", (NAME, -5)), None),        # negative: no state, still delivered
    (GLib.Variant("(si)", (NAME, 5)), 5),            # int32, as dbus-python sends
    (GLib.Variant("(sy)", (NAME, 7)), 7),
    (GLib.Variant("(sx)", (NAME, -1)), None),
    (GLib.Variant("(sd)", (NAME, 1.5)), None),       # not an integer
    (GLib.Variant("(sts)", (NAME, 9, "extra")), 9),  # further arguments ignored
])
def test_any_non_negative_integer_state(wenv, address, context, body, state):
    center = DarwinNotificationCenter(address)
    got = []
    center.listen(NAME, got.append)
    raw_emit(address, bucket_interface(NAME), body)
    wait_for(context, lambda: got)
    assert got[0].state == state
    center.close()


def test_non_string_first_argument_is_dropped(wenv, address, context):
    center = DarwinNotificationCenter(address)
    got = []
    center.listen_all(got.append)
    raw_emit(address, "org.wormhole.Notify1", GLib.Variant("(u)", (5,)))
    raw_emit(address, "org.wormhole.Notify1", GLib.Variant("()", ()))
    raw_emit(address, "org.wormhole.Notify1", GLib.Variant("(s)", ("after",)))
    wait_for(context, lambda: got)
    assert [n.name for n in got] == ["after"]
    center.close()


def test_prefix_observation(wenv, address, context):
    center = DarwinNotificationCenter(address)
    got = []
    center.listen("g/wormhole/", got.append, prefix=True)
    center.post("g/other/x")
    center.post("g/wormhole/a", state=1)
    center.post("g/wormhole/b/journal", state=2)
    wait_for(context, lambda: len(got) >= 2)
    assert [(n.name, n.state) for n in got] == [("g/wormhole/a", 1), ("g/wormhole/b/journal", 2)]
    with pytest.raises(InvalidInputError):
        center.listen("g/wormhole", got.append, prefix=True)
    center.close()


def test_cancel_stops_delivery(wenv, address, context):
    center = DarwinNotificationCenter(address)
    got, other = [], []
    observer = center.listen(NAME, got.append)
    center.listen("z.z", other.append)
    observer.cancel()
    center.post(NAME)
    center.post("z.z")
    wait_for(context, lambda: other)
    assert got == []
    center.close()


def test_callbacks_run_in_the_subscribing_threads_context(wenv, address, context):
    import threading
    center = DarwinNotificationCenter(address)
    threads = []
    center.listen(NAME, lambda note: threads.append(threading.current_thread()))
    center.post(NAME)
    wait_for(context, lambda: threads)
    assert threads == [threading.current_thread()]
    center.close()


def test_blocking_iterator_and_its_refusal(wenv, address):
    with notifications(NAME, address=address, timeout=BOUND) as stream:
        # dbus-send --address does not register (Hello) and its signal is dropped: use --session.
        subprocess.run(["dbus-send", "--session", "--type=signal", "/org/wormhole/Notify1",
                        "org.wormhole.Notify1.Posted", "string:" + NAME], check=True, timeout=BOUND, env=wenv)
        note = next(stream)
        assert (note.name, note.state) == (NAME, None)
        # Inside a main-loop callback the iterator refuses to block.
        loop_context = GLib.MainContext.new()
        loop_context.push_thread_default()
        errors = []
        try:
            def inside() -> bool:
                try:
                    stream.queue.get(0.1)
                except ContextBusyError as error:
                    errors.append(error)
                return False
            source = GLib.idle_source_new()
            source.set_callback(lambda *_: inside())
            source.attach(loop_context)
            wait_for(loop_context, lambda: errors)
        finally:
            loop_context.pop_thread_default()
        assert errors[0].code == "contextBusy"


def test_catch_up_once_after_the_bus_comes_back(wenv, daemon, context):
    center = DarwinNotificationCenter(daemon.address)
    got, changes = [], []
    center.listen(NAME, got.append)
    center.on_connection_change(lambda up, reason: changes.append(up))
    daemon.stop()
    wait_for(context, lambda: changes == [False], what="lost the bus")
    daemon.start()
    wait_for(context, lambda: changes == [False, True] and got, what="back on the bus")
    assert [(n.name, n.reason) for n in got] == [(NAME, "catchUp")]
    center.post(NAME, state=3)
    wait_for(context, lambda: len(got) == 2)
    assert (got[1].reason, got[1].state) == ("posted", 3)
    center.close()


def test_a_worker_threads_context_gets_its_own_callbacks(wenv, address, context):
    """A center made in a worker thread (its own thread-default context) calls back in that
    thread, while the main thread's context sees nothing of it."""
    import threading
    result = {}

    def worker() -> None:
        ctx = GLib.MainContext.new()
        ctx.push_thread_default()
        try:
            center = DarwinNotificationCenter(address)
            got = []
            center.listen(NAME, lambda note: got.append(threading.current_thread()))
            result["ready"] = True
            ready_event.set()
            wait_for(ctx, lambda: got, what="the worker's delivery")
            result["thread"] = got[0]
            center.close()
        finally:
            ctx.pop_thread_default()

    ready_event = threading.Event()
    thread = threading.Thread(target=worker)
    thread.start()
    assert ready_event.wait(BOUND)
    main_center = DarwinNotificationCenter(address)
    seen = []
    main_center.listen(NAME, seen.append)
    main_center.post(NAME)
    wait_for(context, lambda: seen)
    thread.join(BOUND)
    assert result["thread"] is thread
    main_center.close()
