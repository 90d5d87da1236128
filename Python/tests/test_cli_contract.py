"""The command-line contract (section 4), black-box, parametrized over BOTH
executables: the Swift ``wormholectl`` (``$WORMHOLE_SWIFT_BIN``) and
``wormhole-py``.  Each case states the exit status, the standard output and
what the first standard-error line must name; both tools must meet the same
expectations.  Then the cross-implementation checks, both ways."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import List

import pytest

from conftest import BOUND, python_cli, run, swift_cli

G = "group.com.example.cli"


@pytest.fixture(params=["swift", "python"])
def tool(request) -> List[str]:
    """The command line under test (the Swift one is skipped, saying why, when it is absent)."""
    if request.param == "swift":
        return [swift_cli(request.getfixturevalue("swift_bin"))]
    return python_cli()


def first_err(completed) -> str:
    lines = completed.err.splitlines()
    return lines[0] if lines else ""


def normalise(line: str) -> str:
    """A delivery line with its send time replaced."""
    return re.sub(r'"sentAt":[0-9]+', '"sentAt":T', line)


# (arguments, stdin, status, stdout, words the first stderr line must hold)
ONE_SHOT = [
    (["send", "--group", G, "x", '{ "a" : 1e400, "n": 123456789012345678901234567890 }'], None, 0, "", []),
    (["send", "--group", G, "x", "{bad"], None, 64, "", ["'x'", "JSON"]),
    (["send", "--group", "bad/g", "x", "1"], None, 64, "", ["'bad/g'"]),
    (["send", "--group", G, ".hidden", "1"], None, 64, "", ["'.hidden'"]),
    (["send", "--group", G, "--directory", "Preferences", "x", "1"], None, 64, "", ["'Preferences'"]),
    (["send", "--group", G, "x"], b"\xef\xbb\xbf[1]", 64, "", ["'x'"]),
    (["send", "--group", G, "x"], b'"\xff"', 64, "", ["'x'"]),
    (["send", "--group", G, "x"], b"", 64, "", ["'x'"]),
    (["send", "--group", G, "x"], b'{"from":"stdin"}\n', 0, "", []),
    (["send", "--group", G, "--transient", "x", "[" + ",".join(["1"] * 33000) + "]"], None, 64, "", ["'x'"]),
    (["send", "--group", G, "x", "1", "2"], None, 64, "", ["'2'"]),
    (["send", "--group", G, "--bogus", "x", "1"], None, 64, "", ["--bogus"]),
    (["read", "--group", G, "nope"], None, 1, "", ["'nope'"]),
    (["read", "--group", G, "a b"], None, 64, "", ["'a b'"]),
    (["clear", "--group", G, "x"], None, 0, "", []),
    (["clear", "--group", G, "--all"], None, 0, "", []),
    (["post", "com.example.app.refresh", "--state", "5"], None, 0, "", []),
    (["post", "com.example.app.refresh"], None, 0, "", []),
    (["post", ""], None, 64, "", ["empty"]),
    (["post", "x" * 901], None, 64, "", ["901 bytes"]),
    (["post", "'" * 250], None, 64, "", ["match rule"]),
    (["post", "a", "--state", "-1"], None, 64, "", ["--state", "'-1'"]),
    (["post", "a", "--state", "18446744073709551616"], None, 64, "", ["'18446744073709551616'"]),
    (["post", "a", "--state", "x"], None, 64, "", ["'x'"]),
    (["observe", "a", "--prefix", "--timeout", "1"], None, 64, "", ["'a'", "/"]),
    (["listen", "--group", G, "x", "--count", "0"], None, 64, "", ["--count", "not 0"]),
    (["listen", "--group", G], None, 64, "", ["--all"]),
    (["listen", "--group", G, "--all", "x"], None, 64, "", ["--all"]),
    (["listen", "--group", "bad/g", "x"], None, 64, "", ["'bad/g'"]),
    (["listen", "--group", G, "--identifiers-from", "/nonexistent/ids"], None, 64, "", ["'/nonexistent/ids'"]),
    # Refused before anything is stored (contract 1.4 section 4), naming the option that raises the limit.
    (["send", "--group", G, "x"], b'"' + b"a" * (65 << 20) + b'"', 1, "", ["'x'", "--max-size"]),
    (["send", "--group", G, "--max-size", "4", "x", '"hello"'], None, 1, "", ["'x'", "--max-size"]),
    (["send", "--group", G, "--max-size", "1K", "x"], b"[" + b"1," * 600 + b"1]", 1, "", ["'x'", "--max-size"]),
    (["send", "--group", G, "--max-size", "4x", "x", "1"], None, 64, "", ["--max-size", "'4x'"]),
    (["send", "--group", G, "--journal", "x"], b'"' + b"a" * (1 << 20) + b'"', 64, "",
     ["journal 'x'", "nothing was appended"]),
    # A mistyped command: the nearest one.
    (["lsit", "--group", G], None, 64, "", ["'lsit'", "'list'"]),
    (["help", "sned"], None, 64, "", ["'sned'", "'send'"]),
    (["defaults", "raed", "--group", G], None, 64, "", ["'raed'", "'read'"]),
]


@pytest.mark.parametrize("arguments,stdin,status,stdout,words", ONE_SHOT,
                         ids=[" ".join(case[0])[:60] for case in ONE_SHOT])
def test_one_shot_lines_and_statuses(tool, wenv, arguments, stdin, status, stdout, words):
    completed = run(tool + arguments, wenv, input=stdin if stdin is not None else b"")
    assert completed.returncode == status, completed.err
    assert completed.out == stdout
    line = first_err(completed)
    if status == 0:
        assert completed.err == ""
    else:
        assert line.startswith("wormhole: "), completed.err
        for word in words:
            assert word in line, line
    if status != 0 and arguments[0] == "send":
        root = Path(wenv["WORMHOLE_CONTAINER_ROOT"])
        assert not [path for path in root.rglob("*") if path.is_file()], "nothing is stored on bad input"


def test_read_prints_the_document_as_stored(tool, wenv):
    document = '{ "a" : 1e400, "n": 123456789012345678901234567890 }'
    assert run(tool + ["send", "--group", G, "x", document], wenv).returncode == 0
    completed = run(tool + ["read", "--group", G, "x"], wenv)
    assert (completed.returncode, completed.out, completed.err) == (0, document + "\n", "")
    (Path(wenv["WORMHOLE_CONTAINER_ROOT"]) / G / "wormhole" / "b.json").write_bytes(b"\xef\xbb\xbf1")
    completed = run(tool + ["read", "--group", G, "b"], wenv)
    assert completed.returncode == 1 and first_err(completed).startswith("wormhole: ") and "'b'" in completed.err


def test_overview_help_and_suggestions(tool, wenv):
    """No arguments: the overview, exit 0; every option of the commands with --count and
    --timeout says what it does; a mistyped identifier, group or directory gets the nearest one."""
    completed = run(tool, wenv)
    assert completed.returncode == 0 and "listen" in completed.out and "64" in completed.out
    for command in (["listen"], ["observe"], ["defaults", "observe"]):
        text = run(tool + command + ["--help"], wenv).out
        assert "124" in text, (command, text)  # --timeout's help
        assert "after this many" in text, (command, text)  # --count's help
    assert "--max-size" in run(tool + ["send", "--help"], wenv).out
    assert "--require-bus" in run(tool + ["listen", "--help"], wenv).out
    assert run(tool + ["send", "--group", G, "alpha", "1"], wenv).returncode == 0
    completed = run(tool + ["read", "--group", G, "alpah"], wenv)
    assert completed.returncode == 1 and "did you mean 'alpha'?" in first_err(completed)
    completed = run(tool + ["read", "--group", G + "x", "alpha"], wenv)
    assert completed.returncode == 1 and "did you mean --group %s?" % G in first_err(completed)
    completed = run(tool + ["list", "--group", G, "--directory", "wormhol"], wenv)
    assert completed.returncode == 1 and "did you mean --directory wormhole?" in first_err(completed)


def test_list(tool, wenv):
    assert run(tool + ["send", "--group", G, "b", "[1,2]"], wenv).returncode == 0
    assert run(tool + ["send", "--group", G, "a", "1"], wenv).returncode == 0
    completed = run(tool + ["list", "--group", G, "--json"], wenv)
    assert completed.returncode == 0 and completed.err == ""
    rows = [json.loads(line) for line in completed.out.splitlines()]
    assert [(row["identifier"], row["bytes"]) for row in rows] == [("a", 1), ("b", 5)]
    assert all(isinstance(row["modifiedAt"], int) for row in rows)
    lines = run(tool + ["list", "--group", G], wenv).out.splitlines()
    assert [line.split()[:3] for line in lines] == [["a", "1", "B"], ["b", "5", "B"]]


def test_identifiers_from_and_require_bus(tool, wenv, background, tmp_path):
    listed = tmp_path / "ids"
    listed.write_text("x\n\n  y\n")
    listener = background(tool + ["listen", "--group", G, "--identifiers-from", str(listed), "--require-bus"], wenv)
    listener.ready()
    run(tool + ["send", "--group", G, "y", "2"], wenv)
    assert normalise(listener.line()) == '{"identifier":"y","message":2,"reason":"posted","sentAt":T}'
    nobus = ["--bus-address", "unix:path=%s" % (tmp_path / "nobus")]
    completed = run(tool + ["listen", "--group", G, "x", "--require-bus", "--timeout", "0.5"] + nobus, wenv)
    assert completed.returncode == 0 and "ready" not in completed.err.splitlines()
    assert "timed out" in completed.err


def test_a_held_lock_exits_75(tool, wenv):
    """A lock held elsewhere past WORMHOLE_LOCK_TIMEOUT: exit 75 naming the lock and its holder."""
    import fcntl
    import os
    assert run(tool + ["defaults", "write", "--group", G, "key", "1"], wenv).returncode == 0
    lock = Path(wenv["WORMHOLE_CONTAINER_ROOT"]) / G / "Preferences" / (G + ".json.lock")
    fd = os.open(str(lock), os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        completed = run(tool + ["defaults", "write", "--group", G, "key", "2"],
                        dict(wenv, WORMHOLE_LOCK_TIMEOUT="0.2"))
    finally:
        os.close(fd)
    assert completed.returncode == 75, completed.err
    assert str(lock) in completed.err and "held by pid %d" % os.getpid() in completed.err
    assert run(tool + ["defaults", "read", "--group", G, "key"], wenv).out == "1\n"


def test_version(tool, wenv):
    completed = run(tool + ["--version"], wenv)
    assert completed.returncode == 0 and "(contract 1." in completed.out


def test_without_a_bus(tool, wenv, tmp_path):
    nobus = ["--bus-address", "unix:path=%s" % (tmp_path / "nobus")]
    completed = run(tool + ["send", "--group", G, "x", "1"] + nobus, wenv)
    assert completed.returncode == 0 and "not notified" in first_err(completed)
    assert run(tool + ["read", "--group", G, "x"], wenv).out == "1\n"
    completed = run(tool + ["clear", "--group", G, "x"] + nobus, wenv)
    assert completed.returncode == 0 and "not notified" in first_err(completed)
    completed = run(tool + ["post", "a.b"] + nobus, wenv)
    assert completed.returncode == 1 and first_err(completed).startswith("wormhole: ")
    completed = run(tool + ["send", "--transient", "--group", G, "x", "1"] + nobus, wenv)
    assert completed.returncode == 1 and "'x'" in first_err(completed)


def test_observe_lines(tool, wenv, background):
    observer = background(tool + ["observe", "com.example.a", "g/w/", "--count", "3"], wenv)
    # nothing before ready (this fails on any other first line)
    assert observer.err_line() == "ready"
    # (A post without --state carries the name's last state: the Swift tool keeps it in a table of its
    # own across processes, which the contract does not describe; so every post here names its state.)
    for arguments in (["com.example.a", "--state", "18446744073709551615"], ["com.example.b"],
                      ["com.example.a", "--state", "0"]):
        assert run(tool + ["post"] + arguments, wenv).returncode == 0
    subprocess.run(["dbus-send", "--session", "--type=signal", "/org/wormhole/Notify1",
                    "org.wormhole.Notify1.Posted", "string:com.example.a"], env=wenv, check=True, timeout=BOUND)
    status, out, err = observer.finish()
    assert status == 0 and err == ""
    assert out.splitlines() == [
        '{"name":"com.example.a","state":18446744073709551615,"reason":"posted"}',
        '{"name":"com.example.a","state":0,"reason":"posted"}',
        '{"name":"com.example.a","state":null,"reason":"posted"}',
    ]


def test_observe_prefix(tool, wenv, background):
    observer = background(tool + ["observe", "g/w/", "--prefix", "--count", "1"], wenv)
    observer.ready()
    run(tool + ["post", "g/x/1"], wenv)
    run(tool + ["post", "g/w/1", "--state", "2"], wenv)
    assert observer.finish()[:2] == (0, '{"name":"g/w/1","state":2,"reason":"posted"}\n')


def test_listen_lines(tool, wenv, background):
    listener = background(tool + ["listen", "--group", G, "x", "--count", "4"], wenv)
    assert listener.err_line() == "ready"
    run(tool + ["send", "--group", G, "x", '{"a": 1.50, "s": "a/b"}'], wenv)
    assert normalise(listener.line()) == \
        '{"identifier":"x","message":{"a":1.50,"s":"a/b"},"reason":"posted","sentAt":T}'
    run(tool + ["clear", "--group", G, "x"], wenv)
    assert normalise(listener.line()) == '{"identifier":"x","message":null,"reason":"cleared","sentAt":T}'
    run(tool + ["send", "--group", G, "--transient", "x", '[1, 2]'], wenv)
    assert normalise(listener.line()) in ('{"identifier":"x","message":[1,2],"reason":"transient","sentAt":null}',
                                          '{"identifier":"x","message":[1,2],"reason":"transient","sentAt":T}')
    run(tool + ["send", "--group", G, "x", "3"], wenv)
    assert normalise(listener.line()) == '{"identifier":"x","message":3,"reason":"posted","sentAt":T}'
    assert listener.wait() == 0


def test_listen_stored_and_all(tool, wenv, background):
    run(tool + ["send", "--group", G, "a", "1"], wenv)
    listener = background(tool + ["listen", "--group", G, "--all", "--stored", "--count", "2"], wenv)
    listener.ready()
    assert listener.line() == '{"identifier":"a","message":1,"reason":"stored","sentAt":null}'
    run(tool + ["send", "--group", G, "b", "2"], wenv)
    assert normalise(listener.line()) == '{"identifier":"b","message":2,"reason":"posted","sentAt":T}'
    assert listener.wait() == 0


def test_timeouts(tool, wenv):
    completed = run(tool + ["listen", "--group", G, "x", "--count", "1", "--timeout", "0.5"], wenv)
    assert completed.returncode == 124
    assert completed.err.splitlines() == ["ready", "wormhole: timed out after 0.5 s before the requested count"]
    completed = run(tool + ["observe", "a.b", "--timeout", "0.2"], wenv)
    assert (completed.returncode, completed.out, completed.err) == (0, "", "ready\n")
    # Without a bus, --timeout ends it with 0, saying why (not silently).
    nobus = ["--bus-address", "unix:path=/nonexistent/bus"]
    completed = run(tool + ["observe", "a.b", "--timeout", "0.5"] + nobus, wenv)
    assert completed.returncode == 0 and completed.out == ""
    assert "before listening started" in completed.err.splitlines()[-1]


@pytest.mark.parametrize("command", [["listen", "--group", G, "x"], ["observe", "a.b"],
                                     ["listen", "--journal", "--group", G, "x"], ["defaults", "observe", "--group", G]],
                         ids=["listen", "observe", "listen-journal", "defaults-observe"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"])
def test_signals_end_long_running_commands(tool, wenv, background, signum, command):
    """Both tools end normally with 128 + the signal (130, 143, 129), after cleaning up."""
    process = background(tool + command, wenv)
    process.ready()
    process.process.send_signal(signum)
    assert process.wait() == 128 + signum


def test_lost_and_back_lines(tool, wenv, daemon, background):
    listener = background(tool + ["listen", "--group", G, "x"], wenv)
    observer = background(tool + ["observe", "a.b"], wenv)
    listener.ready()
    observer.ready()
    daemon.stop()
    assert listener.err_line().startswith("wormhole: lost the bus")
    assert observer.err_line().startswith("wormhole: lost the bus")
    run(tool + ["send", "--group", G, "x", '"away"'], wenv)
    assert normalise(listener.line()) == '{"identifier":"x","message":"away","reason":"posted","sentAt":null}'
    daemon.start()
    assert listener.err_line().startswith("wormhole: back on the bus")
    assert observer.err_line().startswith("wormhole: back on the bus")
    run(tool + ["post", "a.b", "--state", "1"], wenv)
    assert observer.line() == '{"name":"a.b","state":1,"reason":"posted"}'


# -- across implementations ------------------------------------------------------------------------------

def pairs(swift_bin: Path):
    swift = [swift_cli(swift_bin)]
    return [(swift, python_cli()), (python_cli(), swift)]


@pytest.mark.parametrize("direction", [0, 1], ids=["swift-sends-python-listens", "python-sends-swift-listens"])
def test_mailbox_across_implementations(swift_bin, wenv, background, direction):
    sender, listener_tool = pairs(swift_bin)[direction]
    listener = background(listener_tool + ["listen", "--group", G, "x", "--count", "3"], wenv)
    listener.ready()
    run(sender + ["send", "--group", G, "x", '{"n": 1e400}'], wenv)
    assert normalise(listener.line()) == '{"identifier":"x","message":{"n":1e400},"reason":"posted","sentAt":T}'
    run(sender + ["send", "--transient", "--group", G, "x", '"t"'], wenv)
    assert '"reason":"transient"' in listener.line()
    run(sender + ["clear", "--group", G, "x"], wenv)
    assert '"reason":"cleared"' in listener.line()
    assert listener.wait() == 0


@pytest.mark.parametrize("direction", [0, 1], ids=["swift-posts-python-observes", "python-posts-swift-observes"])
def test_notifications_across_implementations(swift_bin, wenv, background, direction):
    poster, observer_tool = pairs(swift_bin)[direction]
    observer = background(observer_tool + ["observe", "com.example.x", "--count", "1"], wenv)
    observer.ready()
    run(poster + ["post", "com.example.x", "--state", "77"], wenv)
    assert observer.finish()[:2] == (0, '{"name":"com.example.x","state":77,"reason":"posted"}\n')


def test_python_library_send_reaches_swift_listener_before_exit(swift_bin, wenv, background):
    """50 processes each send once and exit at once: every post arrives (exit drain)."""
    listener = background([swift_cli(swift_bin), "listen", "--group", G, "--all", "--every-post",
                           "--no-catch-unsignalled", "--count", "50"], wenv)
    listener.ready()
    script = ("import sys; from wormhole_py.messages import MessageCenter; "
              "MessageCenter(%r).send_json('m' + sys.argv[1], sys.argv[1], notify=True)" % G)
    import sys as _sys
    for index in range(50):
        assert run([_sys.executable, "-c", script, str(index)], wenv).returncode == 0
    status, out, _ = listener.finish()
    assert status == 0
    assert sorted(json.loads(line)["identifier"] for line in out.splitlines()) == sorted("m%d" % i for i in range(50))


def test_python_post_without_confirm_is_drained_at_exit(swift_bin, wenv, background):
    observer = background([swift_cli(swift_bin), "observe", "--prefix", "d/", "--count", "20"], wenv)
    observer.ready()
    script = ("import sys; from wormhole_py.bus import Bus; b = Bus.connect(); b.post('d/' + sys.argv[1], 1)")
    import sys as _sys
    for index in range(20):
        run([_sys.executable, "-c", script, str(index)], wenv)
    status, out, _ = observer.finish()
    assert status == 0 and len(out.splitlines()) == 20


@pytest.mark.parametrize("command", [["observe", "a.b"], ["listen", "--group", G, "a"]], ids=["observe", "listen"])
def test_a_closed_output_pipe_ends_with_0(tool, wenv, background, command):
    process = background(tool + command, wenv)
    process.ready()
    process.process.stdout.close()
    if command[0] == "observe":
        run(tool + ["post", "a.b", "--state", "1"], wenv)
    else:
        run(tool + ["send", "--group", G, "a", "1"], wenv)
    assert process.wait() == 0


def test_observe_all(tool, wenv, background):
    observer = background(tool + ["observe", "--all", "--count", "1"], wenv)
    observer.ready()
    run(tool + ["post", "any.name.at.all", "--state", "9"], wenv)
    assert observer.finish()[:2] == (0, '{"name":"any.name.at.all","state":9,"reason":"posted"}\n')


def test_started_without_a_bus(tool, wenv, daemon, background):
    """observe says once that it waits, then `ready` when the bus is there; listen is ready at
    once, listening through the directory, then joins the bus."""
    daemon.stop()
    observer = background(tool + ["observe", "a.b", "--count", "1"], wenv)
    listener = background(tool + ["listen", "--group", G, "x", "--count", "2"], wenv)
    assert observer.err_line().startswith("wormhole: ")
    assert listener.err_line() == "ready"
    assert "wormhole directory" in listener.err_line()
    run(tool + ["send", "--group", G, "x", "1"], wenv)
    assert listener.line() == '{"identifier":"x","message":1,"reason":"posted","sentAt":null}'
    daemon.start()
    assert observer.err_line() == "ready"
    assert listener.err_line().startswith("wormhole: back on the bus")
    run(tool + ["post", "a.b", "--state", "5"], wenv)
    run(tool + ["send", "--group", G, "x", "2"], wenv)
    assert observer.finish()[:2] == (0, '{"name":"a.b","state":5,"reason":"posted"}\n')
    assert normalise(listener.line()) == '{"identifier":"x","message":2,"reason":"posted","sentAt":T}'
    assert listener.wait() == 0
