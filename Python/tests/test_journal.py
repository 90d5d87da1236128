# SPDX-License-Identifier: Apache-2.0
"""The journal (contract section 6, docs/journal-format.md): the byte format
and its test vector, appending across processes and implementations, damage
reported (never silent), torn tails repaired, durable consumers, retention."""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import BOUND, PYTHON, Background, py_journal, read_line, run, swift_cli

from wormhole_py import journal as wj  # noqa: E402
from wormhole_py import _journal_format as wf  # noqa: E402
from wormhole_py._crc32c import crc32c  # noqa: E402
from wormhole_py.errors import InvalidInputError  # noqa: E402

G = "group.com.example.journal"
ID = "log"


def journal_dir(environment, group=G, identifier=ID):
    return Path(environment["WORMHOLE_CONTAINER_ROOT"]) / group / "wormhole" / (identifier + ".journal")


def swift_cmd(swift, *arguments):
    return [swift_cli(swift), *arguments]


def stat_of(command, environment):
    completed = run(command, environment)
    return completed.returncode, json.loads(completed.out) if completed.out else None, completed.err


def test_crc32c_vectors():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_segment_test_vector():
    time_ns = 1_700_000_000_000_000_000
    data = (wf._header(1) + wf._build_frame(7, 1, time_ns, b'{"n":1}') + wf._build_frame(5, 2, time_ns + 1, b'"two"')
            + wf._build_frame(wf.SEAL, 3, time_ns + 2, b""))
    expected = bytes.fromhex(
        "57484a4c01000000 0100000000000000"
        "07000000 0100000000000000 00002a36fe9c9717 7b226e223a317d 3e8b0e26"
        "05000000 0200000000000000 01002a36fe9c9717 2274776f22 ee069f3d"
        "ffffffff 0300000000000000 02002a36fe9c9717 2acd5f96".replace(" ", ""))
    assert data == expected


def test_append_and_read_in_process(env):
    journal = wj.Journal(G, ID, post=False)
    assert journal.stat() == {"identifier": ID, "first": 1, "last": 0, "records": 0, "bytes": 0, "segments": 0,
                              "consumers": {}, "damaged": []}
    assert not journal.path.exists()  # reading never creates
    assert journal.append('{"a": 1e400}') == 1
    assert journal.append(["1", "2", '"x"']) == 4
    reader = journal.reader("start")
    records = reader.read()
    assert [(r.sequence, r.text) for r in records] == [(1, '{"a": 1e400}'), (2, "1"), (3, "2"), (4, '"x"')]
    assert reader.read() == []
    journal.append("5")
    assert [r.sequence for r in reader.read()] == [5]
    assert stat.S_IMODE(os.stat(journal.path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(journal.path / wf.segment_name(1)).st_mode) == 0o600
    with pytest.raises(InvalidInputError):
        journal.append("not json")
    with pytest.raises(wj.JournalError) as caught:
        journal.append('"' + "x" * (1 << 20) + '"')
    assert caught.value.code == "recordTooLarge"
    assert wf.compact_json('{ "a" : [1, "b c"] }') == '{"a":[1,"b c"]}'


def test_python_appends_swift_reads(env, swift):
    for document in ('{"a": 1e400}', "123456789012345678901234567890", '"two"'):
        assert run(py_journal("send", ID, document, "--group", G), env).returncode == 0
    for tool in (py_journal("stat", ID, "--group", G), swift_cmd(swift, "journal", "stat", ID, "--group", G),
                 swift_cmd(swift, "journal", "check", ID, "--group", G)):
        status, out, _ = stat_of(tool, env)
        assert status == 0
        assert out == {"identifier": ID, "first": 1, "last": 3, "records": 3, "bytes": out["bytes"], "segments": 1,
                       "consumers": {}, "damaged": []}
    completed = run(swift_cmd(swift, "listen", "--journal", ID, "--from", "start", "--count", "3", "--timeout", "20",
                              "--group", G), env)
    assert completed.returncode == 0
    assert completed.out.splitlines() == [
        '{"identifier":"log","sequence":1,"message":{"a":1e400}}',
        '{"identifier":"log","sequence":2,"message":123456789012345678901234567890}',
        '{"identifier":"log","sequence":3,"message":"two"}']


def test_swift_appends_python_reads_and_numbers_on(env, swift):
    for document in ("1", '{"b": [1, 2]}'):
        assert run(swift_cmd(swift, "send", "--journal", ID, document, "--group", G), env).returncode == 0
    assert run(py_journal("send", ID, "3", "--group", G), env).returncode == 0
    assert run(swift_cmd(swift, "send", "--journal", ID, "4", "--group", G), env).returncode == 0
    completed = run(py_journal("listen", ID, "--from", "start", "--count", "4", "--timeout", "20", "--group", G), env)
    assert completed.returncode == 0 and completed.err == "ready\n"
    assert [json.loads(line)["sequence"] for line in completed.out.splitlines()] == [1, 2, 3, 4]
    assert json.loads(completed.out.splitlines()[1])["message"] == {"b": [1, 2]}
    assert stat_of(py_journal("stat", ID, "--group", G), env)[1] == \
        stat_of(swift_cmd(swift, "journal", "stat", ID, "--group", G), env)[1]


def test_listen_is_woken_by_either_appender(env, swift):
    listener = Background(py_journal("listen", ID, "--count", "2", "--timeout", "30", "--group", G), env)
    try:
        listener.ready()
        assert run(swift_cmd(swift, "send", "--journal", ID, '"from swift"', "--group", G), env).returncode == 0
        assert json.loads(listener.line()) == {"identifier": ID, "sequence": 1, "message": "from swift"}
        swift_listener = Background(swift_cmd(swift, "listen", "--journal", ID, "--count", "1", "--timeout", "30",
                                              "--group", G), env)
        try:
            swift_listener.ready()
            assert run(py_journal("send", ID, '"from python"', "--group", G), env).returncode == 0
            status, out, _ = swift_listener.finish()
            assert status == 0 and json.loads(out) == {"identifier": ID, "sequence": 2, "message": "from python"}
        finally:
            swift_listener.kill()
        status, out, _ = listener.finish()
        assert status == 0 and json.loads(out)["sequence"] == 2
    finally:
        listener.kill()


def _corrupt(environment, offset):
    segment = journal_dir(environment) / wf.segment_name(1)
    data = bytearray(segment.read_bytes())
    data[offset] ^= 0x55
    segment.write_bytes(bytes(data))


def test_corrupt_journal_is_reported_by_both(env, swift):
    journal = wj.Journal(G, ID, post=False)
    for number in range(1, 6):
        journal.append(str(number))
    # Frames are 25 bytes each (1-byte payloads) after the 16-byte header: damage record 2's payload.
    _corrupt(env, 16 + 25 + 20)
    expected_range = {"from": 2, "to": 2, "file": wf.segment_name(1), "reason": "checksum"}
    mine = run(py_journal("check", ID, "--group", G), env)
    theirs = run(swift_cmd(swift, "journal", "check", ID, "--group", G), env)
    assert mine.returncode == theirs.returncode == 1
    for completed in (mine, theirs):
        out = json.loads(completed.out)
        assert [{k: d[k] for k in expected_range} for d in out["damaged"]] == [expected_range]
        assert out["records"] == 4 and out["last"] == 5
        assert "records 2..2 of journal 'log'" in completed.err
    assert json.loads(mine.out) == json.loads(theirs.out)
    listened = run(py_journal("listen", ID, "--from", "start", "--count", "4", "--timeout", "20", "--group", G), env)
    assert listened.returncode == 0
    assert [json.loads(line)["sequence"] for line in listened.out.splitlines()] == [1, 3, 4, 5]
    assert "wormhole: records 2..2 of journal 'log' cannot be read (checksum)" in listened.err
    # Damage followed by data in the last segment refuses appends, in both tools.
    assert run(py_journal("send", ID, "6", "--group", G), env).returncode == 1
    assert run(swift_cmd(swift, "send", "--journal", ID, "6", "--group", G), env).returncode == 1
    # Swift damage reading of a Python-damaged journal, as listen sees it.
    swift_listen = run(swift_cmd(swift, "listen", "--journal", ID, "--from", "start", "--count", "4", "--timeout",
                                 "20", "--group", G), env)
    assert swift_listen.out == listened.out


def test_torn_tail_is_repaired_not_damage(env, swift):
    journal = wj.Journal(G, ID, post=False)
    journal.append(["1", "2"])
    segment = journal.path / wf.segment_name(1)
    whole = segment.read_bytes()
    frame = wf._build_frame(3, 3, 0, b'"x"')
    segment.write_bytes(whole + frame[:10])  # an appender killed mid-write
    for command in (py_journal("check", ID, "--group", G), swift_cmd(swift, "journal", "check", ID, "--group", G)):
        status, out, _ = stat_of(command, env)
        assert status == 0 and out["damaged"] == [] and out["last"] == 2
    other = wj.Journal(G, ID, post=False)  # a fresh appender builds its view from the directory
    assert other.append("3") == 3
    assert segment.read_bytes()[:len(whole)] == whole
    status, out, _ = stat_of(swift_cmd(swift, "journal", "check", ID, "--group", G), env)
    assert status == 0 and out["records"] == 3


def test_missing_and_foreign_segments_and_retention(env, swift):
    journal = wj.Journal(G, ID, post=False, segment_size=64)
    for number in range(1, 9):
        journal.append(str(number))
    names = sorted(p.name for p in journal.path.glob("*.seg"))
    assert len(names) > 3
    status, whole, _ = stat_of(swift_cmd(swift, "journal", "check", ID, "--group", G), env)
    assert status == 0 and whole["records"] == 8 and whole["segments"] == len(names)
    assert json.loads(run(py_journal("stat", ID, "--group", G), env).out) == whole
    completed = run(swift_cmd(swift, "listen", "--journal", ID, "--from", "start", "--count", "8", "--timeout", "20",
                              "--group", G), env)
    assert [json.loads(line)["sequence"] for line in completed.out.splitlines()] == list(range(1, 9))
    # A missing segment between present ones is damage; reported the same by both.
    middle = journal.path / names[1]
    saved = middle.read_bytes()
    middle.unlink()
    mine = run(py_journal("check", ID, "--group", G), env)
    theirs = run(swift_cmd(swift, "journal", "check", ID, "--group", G), env)
    assert mine.returncode == theirs.returncode == 1
    strip = lambda out: [{k: d[k] for k in ("from", "to", "file", "reason")} for d in json.loads(out)["damaged"]]
    assert strip(mine.out) == strip(theirs.out) and strip(mine.out)[0]["reason"] == "missing"
    # A directory holding a segment's name is foreign.
    middle.mkdir()
    mine = run(py_journal("check", ID, "--group", G), env)
    theirs = run(swift_cmd(swift, "journal", "check", ID, "--group", G), env)
    assert strip(mine.out) == strip(theirs.out) and strip(mine.out)[0]["reason"] == "foreign"
    middle.rmdir()
    middle.write_bytes(saved)
    # Retention: trim removes whole old segments, never the last; a reader from 1 is told.
    trimmed = run(py_journal("trim", ID, "--max-records", "2", "--group", G), env)
    out = json.loads(trimmed.out)
    assert trimmed.returncode == 0 and out["removed"] and out["damaged"] == [] and out["segments"] >= 1
    assert run(swift_cmd(swift, "journal", "check", ID, "--group", G), env).returncode == 0
    listened = run(py_journal("listen", ID, "--from", "1", "--count", "1", "--timeout", "20", "--group", G), env)
    assert "were removed by retention" in listened.err
    assert json.loads(listened.out)["sequence"] == out["first"]


def test_durable_consumer(env, swift):
    journal = wj.Journal(G, ID, post=False)
    journal.append(["1", "2", "3"])
    first = run(py_journal("listen", ID, "--consumer", "c1", "--from", "start", "--count", "2", "--timeout", "20",
                           "--group", G), env)
    assert [json.loads(line)["sequence"] for line in first.out.splitlines()] == [1, 2]
    cursor = journal.path / "c1.cursor"
    assert json.loads(cursor.read_text()) == {"format": 1, "acknowledged": 2, "delivering": 2}
    assert json.loads(run(swift_cmd(swift, "journal", "stat", ID, "--group", G), env).out)["consumers"] == {"c1": 2}
    # The stored cursor wins over --from; Swift's listen picks it up too.
    second = run(swift_cmd(swift, "listen", "--journal", ID, "--consumer", "c1", "--from", "end", "--count", "1",
                           "--timeout", "20", "--group", G), env)
    assert json.loads(second.out)["sequence"] == 3
    busy_holder = Background(py_journal("listen", ID, "--consumer", "c2", "--timeout", "30", "--group", G), env)
    try:
        busy_holder.ready()
        busy = run(py_journal("listen", ID, "--consumer", "c2", "--timeout", "5", "--group", G), env)
        assert busy.returncode == 1 and "c2" in busy.err
    finally:
        busy_holder.kill()
    # A bad cursor is that consumer's problem alone.
    (journal.path / "bad.cursor").write_text("garbage")
    out = json.loads(run(py_journal("stat", ID, "--group", G), env).out)
    assert "bad" in out["badConsumers"] and "does not parse" in out["badConsumers"]["bad"]
    assert out["consumers"]["c1"] == 3 and "bad" not in out["consumers"]
    (journal.path / "bad.cursor").unlink()
    # A stored number is never given to another record: append after the highest cursor.
    journal.write_cursor("ahead", wf.Cursor(0, 9))
    assert wj.Journal(G, ID, post=False).append("10") == 10
    mine = json.loads(run(py_journal("stat", ID, "--group", G), env).out)
    theirs = json.loads(run(swift_cmd(swift, "journal", "stat", ID, "--group", G), env).out)
    assert mine["damaged"][0]["from"] == 4 and mine["damaged"][0]["to"] == 9
    assert mine["damaged"][0]["reason"] == theirs["damaged"][0]["reason"] == "truncated"


def test_journal_cli_bad_input(env):
    for command in (py_journal("stat", "bad id", "--group", G), py_journal("stat", ID, "--group", "bad group"),
                    py_journal("check", ID, "--directory", "Preferences", "--group", G),
                    py_journal("trim", ID, "--max-records", "x", "--group", G),
                    py_journal("listen", ID, "--from", "sometime", "--group", G),
                    py_journal("send", ID, "{", "--group", G)):
        completed = run(command, env)
        assert completed.returncode == 64, (command, completed.err)
        assert completed.err.startswith("wormhole: ")
    assert not (Path(env["WORMHOLE_CONTAINER_ROOT"]) / G).exists()


def test_concurrent_appenders_number_without_gaps(env, swift):
    script = ("from wormhole_py.journal import Journal\nj = Journal(%r, %r, post=False)\n"
              "for i in range(20): j.append('[%%d]' %% i)\n" % (G, ID))
    processes = [subprocess.Popen([PYTHON, "-c", script], env=env) for _ in range(3)]
    shell = "for i in $(seq 10); do %s send --journal %s $i --group %s || exit 1; done" % (swift_cli(swift), ID, G)
    processes += [subprocess.Popen(["sh", "-c", shell], env=env, stderr=subprocess.DEVNULL) for _ in range(2)]
    for process in processes:
        assert process.wait(timeout=300) == 0
    records = wj.Journal(G, ID, post=False).reader("start").read()
    assert [r.sequence for r in records] == list(range(1, 81))
    status, out, _ = stat_of(swift_cmd(swift, "journal", "check", ID, "--group", G), env)
    assert status == 0 and out["records"] == 80


def test_listen_without_a_bus_wakes_through_the_directory(env, tmp_path):
    nobus = "unix:path=%s" % (tmp_path / "no-bus-here")
    listener = Background(py_journal("listen", ID, "--count", "1", "--timeout", "30", "--bus-address", nobus,
                                     "--group", G), env)
    try:
        listener.ready()
        assert "listening through the journal directory" in read_line(listener.process.stderr)
        sent = run(py_journal("send", ID, '"quiet"', "--bus-address", nobus, "--group", G), env)
        assert sent.returncode == 0 and "the notification was not sent" in sent.err
        status, out, _ = listener.finish()
        assert status == 0 and json.loads(out) == {"identifier": ID, "sequence": 1, "message": "quiet"}
    finally:
        listener.kill()


def test_durable_appends_record_the_synced_position(env, swift):
    journal = wj.Journal(G, ID, post=False, durable=True, segment_size=80)
    for number in range(4):
        journal.append(str(number))
    data = (journal.path / "sync.lock").read_bytes()
    assert len(data) == 20
    first, offset = struct.unpack_from("<QQ", data)
    assert struct.unpack_from("<I", data, 16)[0] == crc32c(data[:16])
    assert (journal.path / wf.segment_name(first)).stat().st_size == offset
    assert run(swift_cmd(swift, "journal", "check", ID, "--group", G), env).returncode == 0
    assert run(swift_cmd(swift, "send", "--journal", ID, "4", "--group", G), env).returncode == 0
    assert [r.sequence for r in journal.reader("start").read()] == [1, 2, 3, 4, 5]


def test_library_listener_in_a_glib_context_with_a_consumer(env, context):
    """``Journal.listen`` (GLib): records in order from the start, new ones as
    they are appended, the consumer's cursor acknowledged per batch; the
    handle is a context manager."""
    from conftest import wait_for
    journal = wj.Journal(G, ID)
    journal.append(['{"n":1}', '{"n":2}'])
    got = []
    with journal.listen(got.append, start="start", consumer="glib", context=context) as subscription:
        assert subscription.connected
        wait_for(context, lambda: len(got) == 2, what="the stored records")
        journal.append('{"n":3}')
        wait_for(context, lambda: len(got) == 3, what="the appended record")
    assert [record.sequence for record in got] == [1, 2, 3]
    assert not subscription.active
    assert journal.read_cursor("glib") == wf.Cursor(3, 3)
    with pytest.raises(InvalidInputError, match="not a dict"):
        journal.append({"n": 4})  # type: ignore[arg-type]
