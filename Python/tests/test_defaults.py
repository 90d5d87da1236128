"""Shared defaults (contract section 5): the file format, values kept as
written, the suite lock, generation and change counter, the command line, and
interoperation with the Swift ``wormholectl defaults`` both ways."""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import BOUND, PYTHON, Background, py_defaults, read_line, run, swift_cli

from wormhole_py import defaults as wd  # noqa: E402
from wormhole_py import _plist as wp  # noqa: E402
from wormhole_py.errors import InvalidInputError  # noqa: E402

G = "group.com.example.defaults"


def suite_file(environment, group=G, suite=None):
    return Path(environment["WORMHOLE_CONTAINER_ROOT"]) / group / "Preferences" / ((suite or group) + ".json")


def counter(environment, group=G):
    data = Path(str(suite_file(environment, group)) + ".changes").read_bytes()
    assert len(data) == 8
    return struct.unpack("<Q", data)[0]


# --------------------------------------------------------------------------
# Pure logic
# --------------------------------------------------------------------------


def test_tokenizer_keeps_spans_and_names_offsets():
    text = '{"a": 1e400, "b":[1, {"c": -0}], "d":"é\\n", "a": 1.50}'
    node = wp.parse_json(text)
    assert node.kind == wp.OBJECT
    spans = [(key, child.text(text)) for key, child in node.value]
    assert spans == [("a", "1e400"), ("b", '[1, {"c": -0}]'), ("d", '"é\\n"'), ("a", "1.50")]
    for bad, offset in (("[1,]", 3), ('{"a" 1}', 5), ("NaN", 0), ("1 2", 2), ('"é', 0), ("01", 1), ("", 0)):
        with pytest.raises(wp.JSONSyntaxError) as caught:
            wp.parse_json(bad)
        assert caught.value.offset == offset, (bad, caught.value)
    # Byte offsets, not character offsets.
    with pytest.raises(wp.JSONSyntaxError) as caught:
        wp.parse_json('["é", x]')
    assert caught.value.offset == 7
    wp.parse_json("[" * 512 + "]" * 512)
    with pytest.raises(wp.JSONSyntaxError) as caught:
        wp.parse_json("[" * 513 + "]" * 513)
    assert caught.value.offset == 513 and "512" in caught.value.reason


def test_values_round_trip_with_their_types():
    values = [0, -1, 2 ** 63 - 1, -(2 ** 63), 1.0, 0.25, 1e-05, 1e16, -0.0, float("inf"), float("-inf"), True,
              False, "EUR", "a/b\u00e9\u0001\"\\\t\b", wd.Date(1700000000.5), wd.Date(-1.25), b"\x00\x01", b"",
              wd.URL("file:///tmp/a%20b"), [1, "two", wd.Date(0.0)], {"a": 1}, {"$date": 5}, {"$dict": 1}, {}, []]
    for value in values:
        text = wp.encode_value(value)
        back = wp.decode_json_value(text)
        assert wp.typed_equal(back, value), (value, text, back)
        assert type(back) is type(value) or isinstance(value, tuple), (value, back)
    nan = wp.decode_json_value(wp.encode_value(float("nan")))
    assert nan != nan
    assert wp.encode_value(1e16) == "1e+16" and wp.encode_value(1e15) == "1000000000000000.0"
    assert wp.encode_value({"$x": 1}) == '{"$dict":{"$x":1}}'
    assert wp.encode_value("\b\f\u007f\u2028") == '"\\u0008\\u000c\u007f\u2028"'
    assert not wp.typed_equal(1, 1.0) and not wp.typed_equal(True, 1) and not wp.typed_equal("1", 1)
    assert wp.typed_equal({"a": [1, 2.0]}, {"a": [1, 2.0]})


def test_values_that_are_refused_name_the_problem():
    for text, words in (("null", "null is not a property-list value"), ("[null]", "at byte 1"),
                        ('{"$foo":1}', "unknown tag '$foo'"), ('{"$date":"x"}', "$date needs"),
                        ('{"$data":"A"}', "$data needs"), ('{"$url":""}', "$url needs"),
                        ('{"$double":"foo"}', "$double needs"), ("9223372036854775808", "does not fit"),
                        ('{"$date":1e400}', "$date needs a finite")):
        with pytest.raises(InvalidInputError) as caught:
            wp.decode_json_value(text)
        assert words in str(caught.value), (text, str(caught.value))
    for value in (None, object(), 2 ** 64, {1: 2}, float, wd.Date(float("nan"))):
        with pytest.raises(InvalidInputError):
            wp.encode_value(value)


# --------------------------------------------------------------------------
# The suite on disk
# --------------------------------------------------------------------------


def test_unknown_values_and_numbers_are_kept_exactly(env):
    path = suite_file(env)
    path.parent.mkdir(parents=True, mode=0o700)
    os.chmod(path.parent.parent, 0o700)
    original = ('{"big":1e400, "long":123456789012345678901234567890,"z":-0,"f":1.50,'
                '"unk":{"$foo": [1, 2]},"dup":1,"dup":2}')
    path.write_text(original)
    defaults = wd.GroupDefaults(G, post=False)
    assert defaults.get("big") == float("inf")
    assert defaults.json("big") == '{"$double":"inf"}'
    assert defaults.get("long") == wd.UnknownValue("123456789012345678901234567890")
    assert defaults.get("unk") == wd.UnknownValue('{"$foo": [1, 2]}')
    assert defaults.get("dup") == 2 and defaults.get("z") == 0
    with pytest.raises(wd.DefaultsError):
        defaults.integer("long")
    assert path.read_text() == original  # reading never writes
    defaults.set("k", "v")
    text = path.read_text()
    assert text == ('{\n"big":1e400,\n"dup":2,\n"f":1.50,\n"k":"v",\n"long":123456789012345678901234567890,\n'
                    '"unk":{"$foo": [1, 2]},\n"z":-0\n}\n')
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # Writing an equal typed value keeps the text and writes nothing.
    before = os.stat(path).st_mtime_ns
    assert defaults.set("f", 1.5) is False and defaults.set("z", 0) is False
    assert os.stat(path).st_mtime_ns == before and "1.50" in path.read_text()
    # An Int never equals a Double: 1.5 -> 2 is a change, 0 -> 0.0 too.
    assert defaults.set("z", 0.0) is True
    assert '"z":0.0' in path.read_text()


def test_generation_and_change_counter(env):
    defaults = wd.GroupDefaults(G, post=False)
    generations = []
    for value in range(5):
        defaults.set("n", value)
        generations.append(defaults.generation())
    assert generations == sorted(set(generations))
    assert counter(env) == 5
    defaults.set("n", 4)  # equal: nothing written or counted
    assert counter(env) == 5
    defaults.delete("n")
    defaults.delete("n")
    assert counter(env) == 6
    assert suite_file(env).read_text() == "{}\n"
    for name in (".json", ".json.lock", ".json.changes"):
        mode = os.stat(str(suite_file(env))[:-5] + name).st_mode
        assert stat.S_IMODE(mode) == 0o600, name
    assert stat.S_IMODE(os.stat(suite_file(env).parent).st_mode) == 0o700


def test_increment_expect_and_load(env):
    defaults = wd.GroupDefaults(G, post=False)
    assert defaults.increment("n") == 1 and defaults.increment("n", -3) == -2
    defaults.set("f", 1.0)
    with pytest.raises(wd.DefaultsError) as caught:
        defaults.increment("f")
    assert "holds a Double 1.0, not an integer" in str(caught.value)
    defaults.set("max", 2 ** 63 - 1)
    with pytest.raises(wd.DefaultsError) as caught:
        defaults.increment("max")
    assert caught.value.code == "typeMismatch"
    with pytest.raises(wd.ExpectationFailed) as caught:
        defaults.set("n", 5, expect=-1)
    assert caught.value.stored == "-2"
    with pytest.raises(wd.ExpectationFailed):
        defaults.set("n", 5, expect=-2.0)
    assert defaults.set("n", 5, expect=-2) is True
    with pytest.raises(wd.ExpectationFailed):
        defaults.set("n", 6, expect_absent=True)
    assert defaults.set("fresh", 6, expect_absent=True)
    changed = defaults.load({"a": 1, "n": 5, "b": [wd.Date(1.0)]})
    assert changed == ["a", "b"]
    assert defaults.load({"a": 1}, replace=True) == ["b", "f", "fresh", "max", "n"]
    assert defaults.values() == {"a": 1}
    assert defaults.load({}, replace=True) == ["a"] and defaults.values() == {}


def test_size_limit_refuses_and_keeps_the_suite(env):
    defaults = wd.GroupDefaults(G, post=False, max_bytes=64)
    defaults.set("a", "x" * 20)
    before = suite_file(env).read_bytes()
    with pytest.raises(wd.DefaultsError) as caught:
        defaults.set("b", "y" * 60)
    assert caught.value.code == "suiteTooLarge" and "over its limit of 64 bytes" in str(caught.value)
    assert suite_file(env).read_bytes() == before
    small = wd.GroupDefaults(G, post=False, max_bytes=10)
    assert small.delete("a") is True  # removing is always allowed


def test_corrupt_suite_is_refused_until_repaired(env):
    path = suite_file(env)
    wd.GroupDefaults(G, post=False).set("a", 1)
    path.write_bytes(b'{"a":1,')
    defaults = wd.GroupDefaults(G, post=False)
    with pytest.raises(wd.CorruptSuiteError) as caught:
        defaults.get("a")
    assert caught.value.offset == 7 and str(path) in str(caught.value) and "defaults repair" in str(caught.value)
    with pytest.raises(wd.CorruptSuiteError) as caught:
        defaults.set("b", 2)
    assert "nothing was written" in str(caught.value)
    assert path.read_bytes() == b'{"a":1,'
    for bad in (b"\xef\xbb\xbf{}", b'{"a":"\xff"}', b"[]", b"[" * 600):
        path.write_bytes(bad)
        with pytest.raises(wd.CorruptSuiteError):
            wd.GroupDefaults(G, post=False).values()
    path.write_text('{"x":' + "[" * 600 + "]" * 600 + "}")
    with pytest.raises(wd.CorruptSuiteError) as caught:
        wd.GroupDefaults(G, post=False).values()
    assert caught.value.offset == 517 and "nested deeper than 512 levels" in str(caught.value)  # as Swift says
    path.write_text('{"x":' + "[" * 511 + "]" * 511 + ', "n": 1' + "0" * 5000 + "}")
    assert wd.GroupDefaults(G, post=False).get("n") == wd.UnknownValue("1" + "0" * 5000)
    path.write_bytes(b"[" * 600)
    moved = defaults.repair()
    assert moved == str(path) + ".corrupt-1" and Path(moved).read_bytes() == b"[" * 600
    assert not path.exists() and defaults.repair() is None
    defaults.set("a", 2)
    assert defaults.repair() is None and defaults.get("a") == 2


def test_key_and_name_rules():
    defaults = wd.GroupDefaults(G, post=False)
    for key in ("", "a\0b", "x" * 900, "'" * 240):
        with pytest.raises(InvalidInputError):
            defaults.validate_key(key)
    defaults.validate_key("with.dots/slash and 'quote'")
    with pytest.raises(InvalidInputError):
        wd.GroupDefaults("bad group")
    with pytest.raises(InvalidInputError):
        wd.GroupDefaults(G, ".hidden")
    with pytest.raises(InvalidInputError):
        wd.GroupDefaults("g" * 201)  # no default suite
    wd.GroupDefaults("g" * 201, "named")


# --------------------------------------------------------------------------
# Command line, and the Swift tool beside it
# --------------------------------------------------------------------------

COMMANDS = [
    ("write", "a", "1e400"), ("write", "b", "1.50"), ("write", "c", '{"b":1,"a":{"$date":1}}'),
    ("write", "d", '"a/b\\u00e9\\u0001\\"\\\\\\t\\b"'), ("write", "e", '{"$dict":{"$date":5}}'),
    ("write", "f", '{"$data":"AAE="}'), ("write", "g", '[1,{"x":[]},true,false,-0.0]'),
    ("read",), ("read", "a"), ("read", "zz"), ("read", "--keys"), ("increment", "n"), ("increment", "n", "--by", "-3"),
    ("increment", "b"), ("write", "n", "5", "--expect", "4"), ("write", "n", "5", "--expect=-2"),
    ("write", "n", "6", "--expect-absent"), ("write", "new", "6", "--expect-absent"),
    ("write", "new2", "6", "--expect", "1"), ("write", "k", "null"), ("write", "k", '{"$foo":1}'),
    ("write", "k", "[" * 600 + "]" * 600), ("write", "k", '{"$date":"x"}'), ("delete", "b"), ("delete", "nokey"),
    ("write", "big", '"' + "x" * 200 + '"', "--max-bytes", "50"),
    ("write", "u", '{"$url":"http://x/\u00e4 b<c>%zz%20"}'), ("read", "u"), ("write", "t", '{"$date":1e20}'),
    ("write", "t2", '[{"$date":-0.5},{"$double":"-inf"},{"$double":2}]'), ("write", "e2", '{"$dict":{"a":1}}'),
    ("write", "bad", '{"$url":""}'), ("write", "rel", '{"$url":"a b"}'), ("write", "bad", '{"$dict":5}'), ("write", "bad", '{"$data":"A"}'),
    ("write", "num", "9223372036854775808"), ("read",),
]


def test_cli_lines_and_statuses_match_the_swift_tool(env, swift):
    for group, tool in (("group.py", py_defaults), ("group.swift", lambda *a: [swift_cli(swift), "defaults", *a])):
        results = []
        for command in COMMANDS:
            completed = run(tool(*command, "--group", group), env)
            first_error = completed.err.splitlines()[0] if completed.err else ""
            results.append((command, completed.returncode, completed.out,
                            first_error if completed.returncode == 3 else None))
        if group == "group.py":
            python_results = results
        else:
            swift_results = results
    for mine, theirs in zip(python_results, swift_results):
        assert mine == theirs
    python_file = suite_file(env, "group.py").read_text()
    swift_file = suite_file(env, "group.swift").read_text()
    assert python_file == swift_file
    assert counter(env, "group.py") == counter(env, "group.swift")


def test_cli_bad_input_exits_64_naming_the_value(env):
    for command, words in ((("read", "--group", "bad group"), "'bad group'"),
                           (("write", "k", "tru", "--group", G), "quote it for the shell"),
                           (("write", "", "1", "--group", G), "key ''"),
                           (("write", "k", "1", "--max-bytes", "5Q", "--group", G), "'5Q'"),
                           (("increment", "k", "--by", "x", "--group", G), "'x'"),
                           (("read", "--suite", ".x", "--group", G), "'.x'"),
                           (("read", "k", "--keys", "--group", G), "--keys")):
        completed = run(py_defaults(*command), env)
        assert completed.returncode == 64, (command, completed.err)
        assert words in completed.err.splitlines()[0], (command, completed.err)
    assert not (Path(env["WORMHOLE_CONTAINER_ROOT"]) / G).exists()
    completed = run(py_defaults("load", "--group", G), env, input=b"[1]")
    assert completed.returncode == 64
    completed = run(py_defaults("load", "--group", G), env, input=b'{"a":null}')
    assert completed.returncode == 64 and "'a'" in completed.err


def test_keep_1e400_across_both_writers(env, swift):
    assert run(py_defaults("write", "first", "1", "--group", G), env).returncode == 0
    path = suite_file(env)
    path.write_text(path.read_text().replace('"first":1', '"first":1e400'))
    assert run(py_defaults("write", "py", '"p"', "--group", G), env).returncode == 0
    assert '"first":1e400' in path.read_text()
    assert run([swift_cli(swift), "defaults", "write", "sw", '"s"', "--group", G], env).returncode == 0
    assert '"first":1e400' in path.read_text()
    assert run(py_defaults("write", "py2", "2", "--group", G), env).returncode == 0
    text = path.read_text()
    assert '"first":1e400' in text and '"sw":"s"' in text and '"py2":2' in text
    swift_read = run([swift_cli(swift), "defaults", "read", "--group", G], env)
    python_read = run(py_defaults("read", "--group", G), env)
    assert swift_read.out == python_read.out == '{"first":{"$double":"inf"},"py":"p","py2":2,"sw":"s"}\n'


def test_corrupt_suite_cli_both_tools(env, swift):
    path = suite_file(env)
    run(py_defaults("write", "a", "1", "--group", G), env)
    path.write_text("[1")
    for tool in (py_defaults, lambda *a: [swift_cli(swift), "defaults", *a]):
        read = run(tool("read", "--group", G), env)
        write = run(tool("write", "a", "2", "--group", G), env)
        assert read.returncode == 1 and write.returncode == 1
        assert str(path) in read.err and "defaults repair" in write.err
        assert path.read_text() == "[1"
    repaired = run(py_defaults("repair", "--group", G), env)
    assert repaired.returncode == 0
    assert json.loads(repaired.out) == {"movedTo": str(path) + ".corrupt-1"}
    assert run([swift_cli(swift), "defaults", "read", "--group", G], env).out == "{}\n"


def test_python_write_wakes_swift_observer_and_back(env, swift):
    observer = Background([swift_cli(swift), "defaults", "observe", "k", "gone", "--count", "2",
                           "--timeout", "30", "--group", G], env)
    try:
        observer.ready()
        defaults = wd.GroupDefaults(G)
        defaults.set("other", 1)  # not observed: filtered by the daemon
        defaults.set("k", {"x": [1.5]})
        assert defaults.last_post_error is None
        assert json.loads(observer.line()) == {"key": "k", "value": {"x": [1.5]}}
        defaults.set("gone", 1)
        status, out, _ = observer.finish()
        assert status == 0 and json.loads(out) == {"key": "gone", "value": 1}
    finally:
        observer.kill()
    listener = Background(py_defaults("observe", "--count", "2", "--timeout", "30", "--group", G), env)
    try:
        listener.ready()
        assert run([swift_cli(swift), "defaults", "write", "s", '"v"', "--group", G], env).returncode == 0
        assert json.loads(listener.line()) == {"key": "s", "value": "v"}
        assert run([swift_cli(swift), "defaults", "delete", "k", "--group", G], env).returncode == 0
        status, out, _ = listener.finish()
        assert status == 0 and json.loads(out) == {"key": "k", "value": None, "removed": True}
    finally:
        listener.kill()


def test_observe_timeout_statuses(env):
    completed = run(py_defaults("observe", "k", "--timeout", "0.2", "--group", G), env)
    assert completed.returncode == 0 and completed.err == "ready\n"
    completed = run(py_defaults("observe", "k", "--count", "1", "--timeout", "0.2", "--group", G), env)
    assert completed.returncode == 124 and completed.err.startswith("ready\n")


def test_in_process_observer(env):
    pytest.importorskip("gi", reason="PyGObject is not installed: the GLib callback API is not tested here")
    from gi.repository import GLib
    context = GLib.MainContext.new()
    context.push_thread_default()
    seen = []
    try:
        from wormhole_py.notify import DarwinNotificationCenter
        center = DarwinNotificationCenter(env["DBUS_SESSION_BUS_ADDRESS"], context)
        defaults = wd.GroupDefaults(G)
        observer = defaults.listen(["a.b"], lambda key, value: seen.append((key, value)), center)
        run(py_defaults("write", "a.b", "7", "--group", G), env)
        timer = GLib.timeout_source_new(int(BOUND * 1000))
        expired = []
        timer.set_callback(lambda *_: expired.append(True) or False)
        timer.attach(context)
        while not seen and not expired:
            context.iteration(True)
        timer.destroy()
        observer.cancel()
        center.close()
    finally:
        context.pop_thread_default()
    assert seen == [("a.b", 7)]


def test_concurrent_increments_lose_nothing(env, swift):
    """A reduced count of the fault script (Python/bench/increment_fault.py)."""
    processes = []
    per = 25
    script = ("import sys\nfrom wormhole_py.defaults import GroupDefaults\n"
              "d = GroupDefaults(%r, post=False)\nfor _ in range(%d): d.increment('n')\n" % (G, per))
    for _ in range(4):
        processes.append(subprocess.Popen([PYTHON, "-c", script], env=env))
    shell = "for i in $(seq %d); do %s defaults increment n --group %s >/dev/null || exit 1; done" % (
        per, swift_cli(swift), G)
    for _ in range(4):
        processes.append(subprocess.Popen(["sh", "-c", shell], env=env))
    for process in processes:
        assert process.wait(timeout=300) == 0
    assert wd.GroupDefaults(G, post=False).get("n") == 8 * per
    assert counter(env) == 8 * per


def test_observe_without_a_bus_wakes_through_the_directory(env, swift, tmp_path):
    nobus = "unix:path=%s" % (tmp_path / "no-bus-here")
    observer = Background(py_defaults("observe", "k", "--count", "1", "--timeout", "30", "--bus-address", nobus,
                                      "--group", G), env)
    try:
        observer.ready()
        assert "listening through the Preferences directory" in read_line(observer.process.stderr)
        written = run([swift_cli(swift), "defaults", "write", "k", "[1.5]", "--bus-address", nobus,
                       "--group", G], env)
        assert written.returncode == 0 and "not notified" in written.err
        status, out, _ = observer.finish()
        assert status == 0 and json.loads(out) == {"key": "k", "value": [1.5]}
    finally:
        observer.kill()
