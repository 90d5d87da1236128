# SPDX-License-Identifier: Apache-2.0
"""Pure rules of the contract: FNV-1a buckets, names, components, states,
JSON validation that keeps the text, and the container's safety checks."""

from __future__ import annotations

import fcntl
import os
import re
import stat

import pytest

from wormhole_py import _json
from wormhole_py._contract import (
    bucket_interface, exact_rule, fnv1a32, received_state, validate_directory, validate_group,
    validate_identifier, validate_name, validate_prefix, validate_state,
)
from wormhole_py.container import atomic_write, container_root, ensure_directory, read_file, remove_stale_temps
from wormhole_py.errors import InvalidInputError, MessageFormatError, TooLargeError, UnsafePathError


def test_fnv_and_bucket_vectors():
    assert fnv1a32("a") == 0xE40C292C
    assert fnv1a32("foobar") == 0xBF9CF968
    assert bucket_interface("com.example.app.refresh") == "org.wormhole.Notify1.BE6A2"
    assert bucket_interface("group.com.example.lines/wormhole/clip") == "org.wormhole.Notify1.B5F31"


def test_match_rule_escapes_quotes_and_keeps_backslashes():
    assert exact_rule("it's", "org.wormhole.Notify1") == \
        "type='signal',interface='org.wormhole.Notify1',member='Posted',arg0='it'\\''s'"
    assert exact_rule("a\\b", "x") .endswith("arg0='a\\b'")


@pytest.mark.parametrize("name", ["a", "com.example.app.refresh", "x" * 900, "it's", "back\\slash", "é" * 450])
def test_valid_names(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name,words", [
    ("", "empty"), ("x" * 901, "901 bytes"), ("a\0b", "NUL"), ("'" * 250, "match rule"), ("é" * 451, "902 bytes"),
])
def test_invalid_names_are_refused_naming_them(name, words):
    with pytest.raises(InvalidInputError) as caught:
        validate_name(name)
    assert caught.value.code == "invalidName"
    assert words in str(caught.value)
    assert caught.value.value == name


def test_prefix_must_end_in_slash():
    assert validate_prefix("g/wormhole/") == "g/wormhole/"
    with pytest.raises(InvalidInputError, match="'g/wormhole'"):
        validate_prefix("g/wormhole")


@pytest.mark.parametrize("check,code,limit", [
    (validate_group, "invalidGroup", 255), (validate_directory, "invalidDirectory", 255),
    (validate_identifier, "invalidIdentifier", 200),
])
def test_components(check, code, limit):
    assert check("KH3G9PXA68.com.carlynorama.lines"[:limit]) is not None
    check("a" * limit)
    for bad in ["", "a" * (limit + 1), ".hidden", "a/b", "sp ace", "quo'te", "é", "a\0b"]:
        with pytest.raises(InvalidInputError) as caught:
            check(bad)
        assert caught.value.code == code
        assert caught.value.value == bad
        if bad:
            assert repr(bad)[1:-1].replace("\\x00", "\\0")[:3] in str(caught.value) or bad[:3] in str(caught.value)


def test_preferences_directory_is_reserved():
    with pytest.raises(InvalidInputError, match="Preferences"):
        validate_directory("Preferences")


def test_states_posted_and_received():
    assert validate_state(None) is None
    assert validate_state(0) == 0
    assert validate_state(2**64 - 1) == 2**64 - 1
    for bad in (-1, 2**64, 1.5, "3", True):
        with pytest.raises(InvalidInputError):
            validate_state(bad)
    assert received_state(5) == 5
    assert received_state(-5) is None
    assert received_state(1.0) is None
    assert received_state("5") is None


def test_json_is_validated_and_kept_as_written():
    for text in ['1e400', '{"a": 123456789012345678901234567890}', '  [1, 2.50]\n', '"\\u00e9"', 'null']:
        assert _json.validate_document(text.encode()) == text
    assert _json.compact('{ "a b" : [1, 2.50 ], "c":"x \\" y" }') == '{"a b":[1,2.50],"c":"x \\" y"}'
    for bad, words in [(b"\xef\xbb\xbf{}", "byte-order mark"), (b'"\xff"', "not valid UTF-8"), (b"{bad", "byte 1"),
                       (b"NaN", "NaN"), (b"", "0 bytes"), (b"1 2", "Extra data"), (b"[" * 100000, "nested too deeply")]:
        with pytest.raises(MessageFormatError, match=words):
            _json.validate_document(bad)


def test_container_root_order(monkeypatch):
    assert str(container_root({"WORMHOLE_CONTAINER_ROOT": "/r", "HOME": "/h"})) == "/r"
    assert str(container_root({"XDG_DATA_HOME": "/x", "HOME": "/h"})) == "/x/group-containers"
    assert str(container_root({"HOME": "/h"})) == "/h/.local/share/group-containers"
    with pytest.raises(InvalidInputError):
        container_root({})


def test_directories_are_0700_and_unsafe_ones_refused(tmp_path):
    path = tmp_path / "root" / "group"
    ensure_directory(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        ensure_directory(link)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(UnsafePathError, match="writable by group or others"):
        ensure_directory(open_dir)


def test_atomic_write_uses_a_locked_temporary_and_renames(tmp_path):
    ensure_directory(tmp_path / "d")
    final = atomic_write(tmp_path / "d", "clip.json", b'{"a":1}', stem="clip")
    assert final.read_bytes() == b'{"a":1}'
    assert stat.S_IMODE(os.stat(final).st_mode) == 0o600
    assert os.listdir(tmp_path / "d") == ["clip.json"]
    # The temporary's name follows the v1.2 pattern.
    from wormhole_py.container import temp_name
    assert re.fullmatch(r"\.clip\.%d-[0-9a-f]{16}\.tmp" % os.getpid(), temp_name("clip"))


def test_read_file_refuses_symlinks_and_oversize(tmp_path):
    ensure_directory(tmp_path / "d")
    target = tmp_path / "d" / "a.json"
    target.write_bytes(b"[1]")
    os.chmod(target, 0o600)
    (tmp_path / "d" / "b.json").symlink_to(target)
    with pytest.raises(UnsafePathError):
        read_file(tmp_path / "d" / "b.json")
    with pytest.raises(TooLargeError):
        read_file(target, max_bytes=2)
    assert read_file(tmp_path / "d" / "none.json") is None


def test_stale_temporaries_only_when_unlocked_and_old(tmp_path):
    ensure_directory(tmp_path / "d")
    old = tmp_path / "d" / ".x.1-aa.tmp"
    held = tmp_path / "d" / ".y.1-bb.tmp"
    young = tmp_path / "d" / ".z.1-cc.tmp"
    for path in (old, held, young):
        path.write_bytes(b"{")
    for path in (old, held):
        os.utime(path, (1, 1))
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert remove_stale_temps(tmp_path / "d") == 1
    finally:
        os.close(fd)
    assert not old.exists() and held.exists() and young.exists()


def test_the_package_under_test_is_the_installed_one_when_asked():
    """Tests/python.sh runs the installed package (WORMHOLE_PY_INSTALLED=1), not the source tree."""
    import wormhole_py
    from conftest import INSTALLED, PYTHON_DIR
    if not INSTALLED:
        pytest.skip("running from the source tree")
    assert not os.path.realpath(wormhole_py.__file__).startswith(str(PYTHON_DIR) + os.sep)
