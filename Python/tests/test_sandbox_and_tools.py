# SPDX-License-Identifier: Apache-2.0
"""Sandboxed participants (contract section 8) and the commands wormhole-py
hands to part B's modules (``send --journal``, ``listen --journal``,
``defaults``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import BOUND, run, wait_for
from wormhole_py import bus as bus_module
from wormhole_py.bus import Bus, app_id
from wormhole_py.errors import InvalidInputError
from wormhole_py.messages import MessageCenter

APP = "org.example.Lines"
G = "group.com.example.sandbox"


def test_app_id_order(tmp_path, monkeypatch):
    monkeypatch.delenv("WORMHOLE_APP_ID", raising=False)
    monkeypatch.delenv("FLATPAK_ID", raising=False)
    info = tmp_path / "flatpak-info"
    assert app_id({}, str(info)) is None
    assert app_id({"FLATPAK_ID": "org.example.B"}, str(info)) == "org.example.B"
    assert app_id({"FLATPAK_ID": "org.example.B", "WORMHOLE_APP_ID": "org.example.A"}, str(info)) == "org.example.A"
    bus_module.set_app_id("org.example.Set")
    try:
        assert app_id({"WORMHOLE_APP_ID": "org.example.A"}, str(info)) == "org.example.Set"
        info.write_text("[Application]\nname=org.example.Flatpak\nruntime=x\n")
        assert app_id({"WORMHOLE_APP_ID": "org.example.A"}, str(info)) == "org.example.Flatpak"
    finally:
        bus_module.set_app_id(None)
    with pytest.raises(InvalidInputError) as caught:
        app_id({"WORMHOLE_APP_ID": "nodots"}, str(tmp_path / "none"))
    assert caught.value.code == "invalidAppID" and "'nodots'" in str(caught.value)


def test_sender_owns_its_name_before_posting(wenv, address, monkeypatch):
    monkeypatch.setenv("WORMHOLE_APP_ID", APP)
    sender = Bus.connect(address)
    sender.post("com.example.x")
    sender.confirm()
    expected = "%s.Wormhole.c%s" % (APP, sender.unique_name.lstrip(":").replace(".", "_"))
    checker = Bus.connect(address)
    owner = checker.wire.call("GetNameOwner", "s", (expected,), 5.0)[0]
    assert owner == sender.unique_name


def test_sandboxed_listener_behind_the_proxy_hears_named_senders_only(wenv, address, context, tmp_path,
                                                                     monkeypatch):
    if shutil.which("xdg-dbus-proxy") is None:
        pytest.skip("xdg-dbus-proxy is not installed (apt-get install xdg-dbus-proxy)")
    socket = str(tmp_path / "proxy")
    ready_r, ready_w = os.pipe()
    proxy = subprocess.Popen(["xdg-dbus-proxy", address, socket, "--fd=%d" % ready_w, "--filter",
                              "--own=%s" % APP, "--own=%s.*" % APP], pass_fds=[ready_w])
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1), "xdg-dbus-proxy did not start"
        hole = MessageCenter(G, address="unix:path=" + socket)
        got = []
        hole.listen(["clip"], got.append)
        outside = MessageCenter(G, address=address)
        monkeypatch.delenv("WORMHOLE_APP_ID", raising=False)
        assert outside.send("clip", "anonymous").notified      # dropped by the proxy's filter
        named = MessageCenter(G, address=address)
        monkeypatch.setenv("WORMHOLE_APP_ID", APP)
        assert named.send("clip", "named").notified
        wait_for(context, lambda: got)
        assert [d.text for d in got if d.reason == "posted"][:1] == ['"named"']
        assert got[0].sent_at is not None
    finally:
        os.close(ready_r)
        proxy.terminate()
        proxy.wait(BOUND)


def test_journal_commands_through_wormhole_py(wenv, background, py_cli):
    listener = background(py_cli + ["listen", "--journal", "--group", G, "log", "--from", "start", "--count", "2"],
                          wenv)
    listener.ready()
    for value in ('{"n": 1e400}', "2"):
        completed = run(py_cli + ["send", "--journal", "--group", G, "log", value], wenv)
        assert completed.returncode == 0, completed.err
    assert json.loads(listener.line())["sequence"] == 1
    assert json.loads(listener.line())["sequence"] == 2
    assert listener.wait() == 0
    stat = run(py_cli + ["journal", "stat", "--group", G, "log"], wenv)
    assert stat.returncode == 0 and json.loads(stat.out)["last"] == 2


def test_defaults_commands_through_wormhole_py(wenv, py_cli):
    assert run(py_cli + ["defaults", "write", "--group", G, "k", "42"], wenv).returncode == 0
    completed = run(py_cli + ["defaults", "read", "--group", G, "k"], wenv)
    assert (completed.returncode, completed.out) == (0, "42\n")
    completed = run(py_cli + ["defaults", "read", "--group", "bad/g", "k"], wenv)
    assert completed.returncode == 64 and "'bad/g'" in completed.err.splitlines()[0]


def test_doctor_and_monitor_are_in_the_swift_tool(wenv, py_cli):
    for command in ("doctor", "monitor"):
        completed = run(py_cli + [command, "--json"], wenv)
        assert completed.returncode == 64
        assert completed.err.count("\n") == 1 and "Swift tool" in completed.err


def test_python_dash_m_and_version(wenv):
    import sys
    completed = run([sys.executable, "-m", "wormhole_py", "--version"], wenv)
    assert completed.returncode == 0 and completed.out.strip().endswith("(contract 1.4)")
