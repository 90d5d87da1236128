# SPDX-License-Identifier: Apache-2.0
"""One vocabulary (2.0): the Swift names are this package's names; the 0.2
names still work for one release and raise a DeprecationWarning each."""

from __future__ import annotations

import asyncio
import warnings

import pytest

import wormhole_py
from wormhole_py import defaults, journal, messages, notify

G = "group.com.example.lines"


def test_the_swift_names_are_the_package_names():
    assert wormhole_py.MessageCenter is messages.MessageCenter
    assert wormhole_py.GroupDefaults is defaults.GroupDefaults
    assert wormhole_py.DarwinNotificationCenter is notify.DarwinNotificationCenter
    assert wormhole_py.Journal is journal.Journal
    assert wormhole_py.listen_async is notify.listen_async
    for cls in (messages.MessageCenter, journal.Journal):
        assert hasattr(cls, "listen") and hasattr(cls, "listen_async")
    assert hasattr(defaults.GroupDefaults, "listen") and hasattr(defaults.GroupDefaults, "listen_async")
    assert hasattr(notify.DarwinNotificationCenter, "listen") and hasattr(notify.DarwinNotificationCenter, "listen_all")


def test_new_names_raise_no_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert messages.MessageCenter(G, container_root=tmp_path).root == tmp_path
        assert defaults.GroupDefaults(G, container_root=tmp_path, post=False).container == tmp_path / G
        assert journal.Journal(G, "log", container_root=tmp_path, post=False).container == tmp_path / G


@pytest.mark.parametrize("make,new", [
    (lambda root: wormhole_py.Wormhole(G, container_root=root), "MessageCenter"),
    (lambda root: wormhole_py.SharedDefaults(G, container_root=root, post=False), "GroupDefaults"),
    (lambda root: messages.MessageCenter(G, root=root), "MessageCenter(container_root=...)"),
    (lambda root: defaults.GroupDefaults(G, root=root, post=False), "GroupDefaults(container_root=...)"),
    (lambda root: journal.Journal(G, "log", root=root, post=False), "Journal(container_root=...)"),
])
def test_old_names_work_and_warn(tmp_path, make, new):
    with pytest.warns(DeprecationWarning, match=r"deprecated; use %s" % new.replace("(", r"\(").replace(")", r"\)")) \
            as caught:
        made = make(tmp_path)
    assert caught[0].filename == __file__, "the warning points at the caller's line"
    assert isinstance(made, (messages.MessageCenter, defaults.GroupDefaults, journal.Journal))
    assert str(tmp_path) in str(getattr(made, "root", getattr(made, "container", "")))


def test_old_root_keyword_and_new_one_together_are_refused(tmp_path):
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="container_root= and root="):
        messages.MessageCenter(G, container_root=tmp_path, root=tmp_path)


def test_old_verbs_listen(wenv, address, context, tmp_path):
    from conftest import wait_for
    with pytest.warns(DeprecationWarning, match="use DarwinNotificationCenter"):
        center = wormhole_py.NotificationCenter(address, context)
    got = []
    with pytest.warns(DeprecationWarning, match="DarwinNotificationCenter.listen"):
        center.observe("com.example.old", got.append)
    with pytest.warns(DeprecationWarning, match="DarwinNotificationCenter.listen_all"):
        center.observe_all(got.append)
    center.post("com.example.old", state=3)
    wait_for(context, lambda: len(got) == 2, what="both deprecated observers")
    assert [note.state for note in got] == [3, 3]
    suite = defaults.GroupDefaults(G, container_root=tmp_path, bus_address=address)
    changes = []
    with pytest.warns(DeprecationWarning, match="GroupDefaults.listen"):
        suite.observe(["k"], lambda key, value: changes.append((key, value)), context=context)
    suite.set("k", 1)
    wait_for(context, lambda: changes == [("k", 1)], what="the deprecated defaults observer")
    center.close()
    suite.close()


def test_old_async_verb(wenv, address):
    pytest.importorskip("jeepney")

    async def main() -> None:
        with pytest.warns(DeprecationWarning, match="use listen_async"):
            subscription = await wormhole_py.observe_async("com.example.old", address=address)
        subscription.cancel()
    asyncio.run(main())
