# SPDX-License-Identifier: Apache-2.0
"""Mailboxes and transient messages in process (contract sections 3 and 7):
exact storage, reads, clears, listeners (posted / stored / cleared /
catchUp / transient), the directory watch without a bus, and the v1.3
catch-up of a rename no post follows."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import threading
from typing import Any, Dict

import pytest

from conftest import wait_for
from wormhole_py.bus import Bus
from wormhole_py.container import atomic_write
from wormhole_py.errors import InvalidInputError, MessageFormatError, NoMessageError, NotSentError, TooLargeError
from wormhole_py.messages import MessageCenter

G = "group.com.example.lines"


def test_send_stores_exactly_and_read_returns_it(wenv, address):
    hole = MessageCenter(G, address=address)
    result = hole.send_json("clip", '{"n": 1e400, "big": 123456789012345678901234567890}')
    assert result.notified and result.error is None
    path = hole.path / "clip.json"
    assert path.read_bytes() == b'{"n": 1e400, "big": 123456789012345678901234567890}'
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(hole.path).st_mode) == 0o700
    assert hole.read_json("clip") == '{"n": 1e400, "big": 123456789012345678901234567890}'
    hole.send("clip", {"text": "héllo/x"})
    assert path.read_bytes() == '{"text":"héllo/x"}'.encode()
    assert hole.read("clip") == {"text": "héllo/x"}
    assert [name for name in os.listdir(hole.path)] == ["clip.json"]
    hole.close()


@pytest.mark.parametrize("document,words", [
    (b"\xef\xbb\xbf{}", "byte-order mark"), (b'"\xc3\x28"', "not valid UTF-8"), (b"{1}", "not a JSON document"),
    (b"Infinity", "not a JSON document"),
])
def test_bad_documents_are_refused_and_nothing_is_stored(wenv, address, document, words):
    hole = MessageCenter(G, address=address)
    with pytest.raises(MessageFormatError, match=words):
        hole.send_json("clip", document)
    assert not (hole.path / "clip.json").exists()


def test_bad_identifiers_are_refused_before_anything(wenv):
    with pytest.raises(InvalidInputError, match="'a/b'"):
        MessageCenter("a/b")
    hole = MessageCenter(G, address="unix:path=/nonexistent/bus")
    with pytest.raises(InvalidInputError, match="'..'"):
        hole.send("..", 1)
    assert not hole.root.exists()


def test_send_without_a_bus_stores_and_reports(wenv, tmp_path):
    hole = MessageCenter(G, address="unix:path=%s" % (tmp_path / "nobus"))
    result = hole.send("clip", [1])
    assert not result.notified and result.error is not None
    assert hole.read("clip") == [1]


@pytest.mark.parametrize("flavour", ["blocking", "asyncio"])
def test_send_connects_before_it_stores(wenv, tmp_path, flavour):
    """The sender is connected before the rename, so the post follows the rename at once (a
    listener delivers a rename with no Posted within 0.5 s as a catch-up, contract v1.3): while
    the bus has not answered the sender's handshake, nothing is stored; once the connection
    fails, the message is stored and the result says it was not notified."""
    if flavour == "asyncio":
        pytest.importorskip("jeepney")
    path = tmp_path / "silent-bus"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(20)
    hole = MessageCenter(G, address="unix:path=%s" % path)
    outcome: Dict[str, Any] = {}

    def send() -> None:
        if flavour == "asyncio":
            outcome["result"] = asyncio.run(hole.send_async("clip", [1], timeout=30))
        else:
            outcome["result"] = hole.send("clip", [1], timeout=30)

    sender = threading.Thread(target=send)
    sender.start()
    peer, _ = server.accept()
    peer.settimeout(20)
    assert peer.recv(1) == b"\0"  # the handshake began; the bus has not answered
    assert not (hole.path / "clip.json").exists()
    peer.close()
    server.close()
    sender.join(20)
    assert not sender.is_alive()
    result = outcome["result"]
    assert not result.notified and result.error is not None
    assert hole.read("clip") == [1]


def test_read_refuses_missing_and_oversize(wenv, address):
    hole = MessageCenter(G, address=address, max_bytes=4)
    with pytest.raises(NoMessageError, match="'clip'"):
        hole.read("clip")
    hole.send_json("clip", "[1, 2, 3]")
    with pytest.raises(TooLargeError):
        hole.read("clip")


def test_listener_delivers_posted_cleared_and_skips_repeats(wenv, address, context):
    hole = MessageCenter(G, address=address)
    got, errors = [], []
    listener = hole.listen(["clip"], got.append, errors.append)
    hole.send_json("clip", '{"a": 1.50}')
    wait_for(context, lambda: got)
    assert (got[0].identifier, got[0].text, got[0].reason) == ("clip", '{"a": 1.50}', "posted")
    assert got[0].sent_at is not None
    assert got[0].line().startswith('{"identifier":"clip","message":{"a":1.50},"reason":"posted","sentAt":')
    hole.clear("clip")
    wait_for(context, lambda: len(got) == 2)
    assert (got[1].text, got[1].reason) == (None, "cleared")
    assert got[1].line() == '{"identifier":"clip","message":null,"reason":"cleared","sentAt":%d}' % got[1].sent_at
    # A post that finds the same bytes (or the mailbox still empty) delivers nothing.
    Bus.connect(address).post(hole.name("clip"))
    hole.send("clip", 2)
    wait_for(context, lambda: len(got) == 3)
    assert got[2].text == "2"
    assert errors == []
    listener.cancel()


def test_listener_reports_undecodable_files_and_goes_on(wenv, address, context):
    hole = MessageCenter(G, address=address)
    got, errors = [], []
    hole.listen(["clip"], got.append, errors.append)
    atomic_write(hole.path, "clip.json", b"\xef\xbb\xbf[1]", stem="clip")
    Bus.connect(address).post(hole.name("clip"))
    wait_for(context, lambda: errors)
    assert "byte-order mark" in str(errors[0].error)
    hole.send("clip", [2])
    wait_for(context, lambda: got)
    assert got[0].text == "[2]"


def test_listen_all_stored_and_further_slashes_ignored(wenv, address, context):
    hole = MessageCenter(G, address=address)
    hole.send("a", 1)
    got = []
    hole.listen(None, got.append, stored=True)
    assert [(d.identifier, d.reason) for d in got] == [("a", "stored")]
    Bus.connect(address).post(hole.name("b") + "/journal", 5)
    hole.send("b", 2)
    wait_for(context, lambda: len(got) == 2)
    assert (got[1].identifier, got[1].text) == ("b", "2")


def test_transient_messages(wenv, address, context):
    hole = MessageCenter(G, address=address)
    got, errors = [], []
    hole.listen(["clip"], got.append, errors.append)
    hole.send_transient("clip", {"t": [1, 2]})
    wait_for(context, lambda: got)
    assert (got[0].text, got[0].reason) == ('{"t":[1,2]}', "transient")
    assert not (hole.path / "clip.json").exists()
    with pytest.raises(TooLargeError):
        hole.send_transient("clip", "x" * 70000)
    # Malformed ones are reported, never a crash.
    bus = Bus.connect(address)
    bus.emit("org.wormhole.Notify1", "Message", "ss", (hole.name("clip"), "{not json"))
    bus.emit("org.wormhole.Notify1", "Message", "su", (hole.name("clip"), 5))
    bus.confirm()
    wait_for(context, lambda: len(errors) == 2)
    assert [e.error.code for e in errors] == ["transientDropped", "transientDropped"]


def test_transient_without_a_bus_is_not_sent(wenv, tmp_path):
    hole = MessageCenter(G, address="unix:path=%s" % (tmp_path / "nobus"))
    with pytest.raises(NotSentError):
        hole.send_transient("clip", 1)


def test_unsignalled_rename_is_caught_up_once(wenv, address, context):
    hole = MessageCenter(G, address=address)
    got = []
    hole.listen(["clip"], got.append)
    # A sender that died between its rename and its post.
    atomic_write(hole.path, "clip.json", b'{"orphan":true}', stem="clip")
    wait_for(context, lambda: got, what="the unsignalled catch-up")
    assert (got[0].text, got[0].reason, got[0].sent_at) == ('{"orphan":true}', "catchUp", None)
    # The late post does not deliver it twice.
    done = []
    hole.listen(["other"], done.append)
    bus = Bus.connect(address)
    bus.post(hole.name("clip"), 7)
    hole.send("other", 1)
    wait_for(context, lambda: done)
    assert len(got) == 1


def test_directory_wake_without_a_bus_then_catch_up(wenv, daemon, context):
    hole = MessageCenter(G, address=daemon.address)
    got, changes = [], []
    hole.listen(["clip"], got.append,
                on_connection_change=lambda up, reason, changed: changes.append((up, changed)))
    daemon.stop()
    wait_for(context, lambda: changes == [(False, 0)], what="lost the bus")
    other = MessageCenter(G, address=daemon.address)
    assert not other.send("clip", "while away").notified
    wait_for(context, lambda: got, what="the directory wake")
    assert (got[0].text, got[0].reason, got[0].sent_at) == ('"while away"', "posted", None)
    # Changed with the watch not yet looking: delivered as a catch-up when the bus is back.
    atomic_write(hole.path, "clip.json", b'"second"', stem="clip")
    daemon.start()
    wait_for(context, lambda: len(changes) == 2, what="back on the bus")
    texts = [d.text for d in got]
    assert texts[-1] == '"second"' and texts.count('"second"') == 1
    assert changes[1][0] is True


def test_listener_starts_without_any_bus(wenv, tmp_path, context, monkeypatch):
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS")
    hole = MessageCenter(G)
    got = []
    listener = hole.listen(["clip"], got.append)
    assert listener.bus_error is not None and listener.bus_error.code == "noSessionBus"
    assert not hole.send("clip", 5).notified
    wait_for(context, lambda: got)
    assert got[0].text == "5"


def test_a_bus_that_does_not_answer_then_does(wenv, daemon, context):
    """A stopped daemon (accepts, never answers): the listener starts on the directory,
    then joins the bus when the daemon answers again, and catches up."""
    import signal as _signal
    hole = MessageCenter(G, address=daemon.address)
    daemon.process.send_signal(_signal.SIGSTOP)
    try:
        got, changes = [], []
        listener = hole.listen(["clip"], got.append, connect_timeout=0.5,
                               on_connection_change=lambda up, reason, changed: changes.append(up))
        assert listener.bus_error is not None and listener.bus_error.code == "timedOut"
        atomic_write(hole.path, "clip.json", b"1", stem="clip")
        wait_for(context, lambda: got, what="the directory wake")
    finally:
        daemon.process.send_signal(_signal.SIGCONT)
    wait_for(context, lambda: changes == [True], what="joining the bus")
    assert listener.connected
    hole.send("clip", 2)
    wait_for(context, lambda: len(got) == 2)
    assert (got[1].text, got[1].reason) == ("2", "posted")


def test_swift_burst_coalesces_to_the_latest_and_transients_all_arrive(wenv, address, context, swift_bin):
    """wormhole-test-peer sends 200 messages in a burst: the last delivery carries the latest
    (section 3); its 50 transient messages all arrive, in order."""
    import subprocess
    from conftest import BOUND
    hole = MessageCenter(G, address=address)
    got = []
    hole.listen(["burst"], got.append)
    peer = str(swift_bin / "wormhole-test-peer")
    root = wenv["WORMHOLE_CONTAINER_ROOT"]
    subprocess.run([peer, "send-many", root, G, "burst", "200", address], check=True, timeout=BOUND, env=wenv)
    wait_for(context, lambda: got and got[-1].message == {"n": 199}, what="the latest message")
    assert all(d.reason == "posted" for d in got)
    numbers = [d.message["n"] for d in got]
    assert numbers == sorted(numbers)
    got.clear()
    subprocess.run([peer, "send-transient-many", root, G, "burst", "50", address], check=True, timeout=BOUND,
                   env=wenv)
    wait_for(context, lambda: len(got) == 50, what="50 transient messages")
    assert [d.message["n"] for d in got] == list(range(50))
    assert {d.reason for d in got} == {"transient"}
