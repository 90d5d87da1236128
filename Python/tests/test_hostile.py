# SPDX-License-Identifier: Apache-2.0
"""The hostile-inputs table: what wormhole_py does with each, against what the
contract asks (docs/python.md carries the same table)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("gi", reason="PyGObject is not installed: the GLib callback API is not tested here")
from gi.repository import GLib  # noqa: E402

from conftest import python_cli, run, swift_cli, wait_for
from wormhole_py import bucket_interface
from wormhole_py.bus import Bus
from wormhole_py.container import atomic_write
from wormhole_py.errors import InvalidInputError, MessageFormatError, TooLargeError
from wormhole_py.messages import MessageCenter
from wormhole_py.notify import DarwinNotificationCenter

G = "group.com.example.hostile"


@pytest.mark.parametrize("data,code", [
    (b"\xef\xbb\xbf{}", "decodingFailed"),           # a BOM: refused (§3 v1.1)
    (b'{"a":"\xed\xa0\x80"}', "decodingFailed"),    # UTF-8 of a surrogate: invalid UTF-8
    (b"\xfe\xff\x00[", "decodingFailed"),            # UTF-16: another encoding
])
def test_stored_files_that_are_not_utf8_json_are_errors_for_the_reader(wenv, address, context, data, code):
    hole = MessageCenter(G, address=address)
    atomic_write(hole._prepare(), "x.json", data, stem="x")
    with pytest.raises(MessageFormatError) as caught:
        hole.read("x")
    assert caught.value.code == code
    errors = []
    hole.listen(["x"], lambda d: pytest.fail("delivered %r" % (d,)), errors.append)
    Bus.connect(address).post(hole.name("x"))
    wait_for(context, lambda: errors)
    completed = run(python_cli() + ["read", "--group", G, "x"], wenv)
    assert completed.returncode == 1 and "'x'" in completed.err.splitlines()[0]


def test_over_size_file_is_refused_without_reading_it(wenv, address, context):
    hole = MessageCenter(G, address=address)
    path = hole._prepare() / "big.json"
    with open(path, "wb") as handle:  # sparse: 64 MiB + 1 byte
        handle.truncate(64 * 1024 * 1024 + 1)
    os.chmod(path, 0o600)
    with pytest.raises(TooLargeError):
        hole.read("big")
    errors = []
    hole.listen(["big"], lambda d: pytest.fail("delivered"), errors.append)
    Bus.connect(address).post(hole.name("big"))
    wait_for(context, lambda: errors)
    assert errors[0].error.code == "messageTooLarge"


def test_over_size_argument_for_send_is_refused_before_storing(wenv, address):
    completed = run(python_cli() + ["send", "--group", G, "--transient", "x"], wenv,
                    input=b'"' + b"a" * 70000 + b'"')
    assert completed.returncode == 64 and "'x'" in completed.err.splitlines()[0]


@pytest.mark.parametrize("body", [
    GLib.Variant("(u)", (1,)), GLib.Variant("(ay)", (b"abc",)), GLib.Variant("(o)", ("/x",)),
    GLib.Variant("(v)", (GLib.Variant("s", "x"),)), GLib.Variant("()", ()),
], ids=["uint32", "bytes", "object-path", "variant", "empty"])
def test_posted_whose_first_argument_is_not_a_string_is_dropped(wenv, address, context, body):
    center = DarwinNotificationCenter(address)
    got = []
    center.listen_all(got.append)
    bus = Bus.connect(address)
    bus.connection.emit_signal(None, "/org/wormhole/Notify1", "org.wormhole.Notify1", "Posted", body)
    bus.post("after")
    bus.confirm()
    wait_for(context, lambda: got)
    assert [n.name for n in got] == ["after"]


def test_negative_state_is_no_state_and_still_delivered(wenv, address, context):
    center = DarwinNotificationCenter(address)
    got = []
    center.listen("n", got.append)
    bus = Bus.connect(address)
    bus.connection.emit_signal(None, "/org/wormhole/Notify1", bucket_interface("n"), "Posted",
                               GLib.Variant("(sx)", ("n", -(2**63))))
    bus.confirm()
    wait_for(context, lambda: got)
    assert got[0].state is None
    with pytest.raises(InvalidInputError):
        center.post("n", state=-1)


@pytest.mark.parametrize("name", ["it's", "a'b'c", "back\\slash", "\\'", "quote\"d", "x" * 900, "'" * 200,
                                  "sp ace/ü/✓"], ids=["quote", "quotes", "backslash", "both", "dquote", "900B",
                                                      "200quotes", "unicode"])
def test_hostile_names_post_and_observe_across_both_tools(wenv, address, context, swift_bin, name):
    center = DarwinNotificationCenter(address)
    got = []
    center.listen(name, got.append)
    center.listen("other", got.append)
    completed = run([swift_cli(swift_bin), "post", name, "--state", "3"], wenv)
    assert completed.returncode == 0, completed.err
    run(python_cli() + ["post", name, "--state", "4"], wenv)
    wait_for(context, lambda: len(got) >= 2)
    assert [(n.name, n.state) for n in got] == [(name, 3), (name, 4)]


@pytest.mark.parametrize("name,words", [("x" * 901, "901 bytes"), ("'" * 250, "match rule"), ("a\0b", "NUL"),
                                        ("", "empty")], ids=["901B", "250quotes", "NUL", "empty"])
def test_invalid_names_refused_by_post_and_observe(wenv, address, name, words):
    center = DarwinNotificationCenter(address)
    for call in (lambda: center.post(name), lambda: center.listen(name, print)):
        with pytest.raises(InvalidInputError, match=words):
            call()
    if "\0" not in name:
        for command in (["post", name], ["observe", name, "--timeout", "1"]):
            completed = run(python_cli() + command, wenv)
            assert completed.returncode == 64 and words in completed.err.splitlines()[0]
