# SPDX-License-Identifier: Apache-2.0
"""The asyncio API of every kind, on asyncio's own loop (``asyncio.run``, no
plug-in): notifications, mailboxes, defaults and journals as ``async for``,
awaitable sends, the bus going away and coming back, and the refusals that
must happen before anything is written.  Runs with or without PyGObject."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any, Awaitable, Callable, List

import pytest

from conftest import BOUND
from wormhole_py import Journal, GroupDefaults, MessageCenter, listen_async, post_async
from wormhole_py.bus import Bus
from wormhole_py.errors import InvalidInputError

G = "group.com.example.aio"


def run(coroutine: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine(), BOUND))


def test_notifications_async_for_and_hostile_bodies(wenv, address):
    async def main() -> None:
        async with await listen_async("com.example.a", "g/w/", prefix=False) as notes:
            assert notes.connected
            await post_async("com.example.a", 7)
            bus = Bus.connect(address)
            bus.emit("org.wormhole.Notify1", "Posted", "u", (5,))          # first argument not a string
            bus.emit("org.wormhole.Notify1", "Posted", "", ())              # no argument
            bus.emit("org.wormhole.Notify1", "Posted", "sx", ("com.example.a", -3))  # negative: no state
            bus.confirm()
            first = await notes.next(BOUND)
            second = await notes.next(BOUND)
        assert (first.name, first.state, first.reason) == ("com.example.a", 7, "posted")
        assert (second.name, second.state) == ("com.example.a", None)
        assert not notes.active

    run(main)


def test_prefix_and_everything(wenv, address):
    async def main() -> None:
        prefix = await listen_async("g/w/", prefix=True)
        everything = await listen_async(everything=True)
        with prefix, everything:
            await post_async("g/w/x", 1)
            await post_async("other", 2)
            assert (await prefix.next(BOUND)).name == "g/w/x"
            assert [(await everything.next(BOUND)).name for _ in range(2)] == ["g/w/x", "other"]

    run(main)


def test_mailbox_listen_async_posted_cleared_transient_and_stored(wenv, address):
    async def main() -> None:
        async with MessageCenter(G) as hole:
            await hole.send_async("old", {"n": 0})
            async with await hole.listen_async(["clip", "old"], stored=True) as deliveries:
                stored = await deliveries.next(BOUND)
                assert (stored.identifier, stored.reason, stored.message) == ("old", "stored", {"n": 0})
                result = await hole.send_json_async("clip", '{"n": 1.50}')
                assert result.notified and result.error is None
                posted = await deliveries.next(BOUND)
                assert (posted.identifier, posted.text, posted.reason) == ("clip", '{"n": 1.50}', "posted")
                assert posted.sent_at is not None
                await hole.clear_async("clip")
                cleared = await deliveries.next(BOUND)
                assert (cleared.identifier, cleared.text, cleared.reason) == ("clip", None, "cleared")
                await hole.send_transient_async("clip", {"t": 1})
                transient = await deliveries.next(BOUND)
                assert (transient.text, transient.reason) == ('{"t":1}', "transient")

    run(main)


def test_unsignalled_write_is_caught_up_once(wenv, address):
    async def main() -> None:
        hole = MessageCenter(G)
        async with await hole.listen_async(["clip"]) as deliveries:
            hole.send("clip", {"quiet": True}, notify=False)
            caught = await deliveries.next(BOUND)
            assert (caught.reason, caught.message, caught.sent_at) == ("catchUp", {"quiet": True}, None)
            hole.send("clip", {"loud": True})
            assert (await deliveries.next(BOUND)).message == {"loud": True}

    run(main)


def test_directory_wake_while_the_bus_is_down_then_catch_up(wenv, daemon):
    async def main() -> None:
        hole = MessageCenter(G)
        changes: List[Any] = []
        lost = asyncio.Event()
        back = asyncio.Event()

        def on_change(up: bool, reason: Any, changed: int) -> None:
            changes.append((up, changed))
            (back if up else lost).set()

        async with await hole.listen_async(["clip"], on_connection_change=on_change) as deliveries:
            daemon.stop()
            await asyncio.wait_for(lost.wait(), BOUND)
            assert not deliveries.connected
            hole.send("clip", {"n": 1})          # no bus: the directory wakes the listener
            woken = await deliveries.next(BOUND)
            assert (woken.message, woken.reason) == ({"n": 1}, "posted")
            hole.send("clip", {"n": 2}, notify=False)
            assert (await deliveries.next(BOUND)).message == {"n": 2}
            daemon.start()
            await asyncio.wait_for(back.wait(), BOUND)
            assert deliveries.connected
            hole.send("clip", {"n": 3})
            assert (await deliveries.next(BOUND)).message == {"n": 3}
        assert changes[0] == (False, 0) and changes[1][0] is True

    run(main)


def test_defaults_observe_async_and_awaitable_writes(wenv, address):
    async def main() -> None:
        async with GroupDefaults(G) as defaults:
            await defaults.set_async("count", 1)
            async with await defaults.listen_async(["count", "name"]) as changes:
                assert await defaults.set_async("count", 2)
                assert await changes.next(BOUND) == ("count", 2)
                await defaults.set_async("count", 2)     # equal: no change, nothing delivered
                await defaults.set_async("name", "EUR")
                assert await changes.next(BOUND) == ("name", "EUR")
                assert await defaults.increment_async("count", 5) == 7
                assert await changes.next(BOUND) == ("count", 7)
                await defaults.delete_async("name")
                key, value = await changes.next(BOUND)
                assert key == "name" and repr(value) == "MISSING"
            assert defaults.last_post_error is None

    run(main)


def test_journal_listen_async_in_order_with_a_consumer(wenv, address):
    async def main() -> None:
        async with Journal(G, "events") as journal:
            await journal.append_async(['{"n":1}', '{"n":2}'])
            async with await journal.listen_async(start="start", consumer="reader") as records:
                assert [(await records.next(BOUND)).sequence for _ in range(2)] == [1, 2]
                await journal.append_async('{"n":3}')
                third = await records.next(BOUND)
                assert (third.sequence, third.message()) == (3, {"n": 3})
            # The consumer acknowledged 1 and 2 (asked for the next each time); 3 is delivered again.
            async with await journal.listen_async(consumer="reader") as again:
                assert (await again.next(BOUND)).sequence == 3

    run(main)


def test_journal_append_refuses_a_dict(wenv, address):
    journal = Journal(G, "events")
    with pytest.raises(InvalidInputError, match="not a dict"):
        journal.append({"n": 1})  # type: ignore[arg-type]
    assert not any(name.endswith(".seg") for name in os.listdir(journal.path)) if journal.path.exists() else True


def test_callbacks_on_asyncio(wenv, address):
    async def main() -> None:
        got: List[Any] = []
        arrived = asyncio.Event()

        def on_note(note: Any) -> None:
            got.append(note)
            arrived.set()

        async with await listen_async("com.example.cb", callback=on_note):
            await post_async("com.example.cb", 3)
            await asyncio.wait_for(arrived.wait(), BOUND)
        assert got[0].state == 3

    run(main)


def test_without_a_d_bus_library_one_clear_error_and_nothing_written(wenv, tmp_path):
    """A blocking write with the chosen library missing is refused before it writes."""
    script = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def hide(name, *a, **k):\n"
        "    if name.split('.')[0] in ('gi', 'jeepney'): raise ModuleNotFoundError(name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = hide\n"
        "import importlib.util\n"
        "found = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name in ('gi', 'jeepney') else found(name, *a)\n"
        "from wormhole_py import Journal, GroupDefaults, MessageCenter, WormholeError\n"
        "for write in (lambda: GroupDefaults(%r).set('k', 1), lambda: MessageCenter(%r).send('clip', 1),\n"
        "              lambda: Journal(%r, 'events').append('1')):\n"
        "    try:\n"
        "        write()\n"
        "    except WormholeError as error:\n"
        "        print(error.code); print(error)\n" % (G, G, G))
    completed = subprocess.run([sys.executable, "-c", script], env=wenv, capture_output=True, text=True,
                               timeout=BOUND)
    lines = completed.stdout.splitlines()
    assert len(lines) == 6, completed
    for code, message in zip(lines[0::2], lines[1::2]):
        assert code == "transportMissing" and "pip install jeepney" in message, completed
    assert not os.path.exists(os.path.join(wenv["WORMHOLE_CONTAINER_ROOT"], G)), "something was written"


def test_the_cli_without_pygobject_uses_asyncio(wenv, address, py_cli):
    """``WORMHOLE_PY_TRANSPORT=jeepney``: the long-running commands run on asyncio."""
    env = dict(wenv, WORMHOLE_PY_TRANSPORT="jeepney")
    listener = subprocess.Popen(py_cli + ["listen", "--group", G, "clip", "--count", "1"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert listener.stderr is not None and listener.stderr.readline() == b"ready\n"
        subprocess.run(py_cli + ["send", "--group", G, "clip", '{"a":1}'], env=env, check=True, timeout=BOUND)
        out, _ = listener.communicate(timeout=BOUND)
    finally:
        if listener.poll() is None:
            listener.kill()
    assert listener.returncode == 0
    assert json.loads(out.decode())["message"] == {"a": 1}


def _inotify_instances() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink("/proc/self/fd/" + fd) == "anon_inode:inotify"
        except OSError:
            pass  # the descriptor listdir itself used
    return count


def test_one_inotify_instance_per_loop(wenv, address):
    """Every directory watch of a loop shares one inotify instance (the stock
    per-user limit is 128), and it is closed with the last watch."""
    async def main() -> None:
        before = _inotify_instances()
        hole = MessageCenter(G)
        subscriptions = [await hole.listen_async([name]) for name in ("a", "b", "c")]
        subscriptions.append(await GroupDefaults(G).listen_async())
        subscriptions.append(await Journal(G, "events").listen_async())
        assert _inotify_instances() == before + 1
        for subscription in subscriptions:
            subscription.cancel()
        assert _inotify_instances() == before

    run(main)
