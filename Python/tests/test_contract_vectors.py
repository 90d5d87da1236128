# SPDX-License-Identifier: Apache-2.0
"""The contract as data (``contract/`` at the repository's root): the constants, the one table of
error codes and the test vectors that the Swift and GJS suites read too."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest

from conftest import REPO
import wormhole_py
from wormhole_py import _contract, _json
from wormhole_py.errors import InvalidInputError, MessageFormatError, WormholeError

CONTRACT = REPO / "contract"


def load(relative: str) -> Dict[str, Any]:
    with open(CONTRACT / relative, encoding="utf-8") as handle:
        value = json.load(handle)
    assert isinstance(value, dict), relative
    return value


def text_of(vector: Dict[str, Any], key: str) -> str:
    """A vector's text: ``key`` itself, or ``build`` (each string repeated its count)."""
    if key in vector:
        return str(vector[key])
    return "".join(piece * count for piece, count in vector["build"])


ERRORS = load("errors.json")["codes"]
CODES = {row["code"] for row in ERRORS}
FORMER = {name for row in ERRORS for name in row.get("formerly", {}).get("python", [])}


def test_constants_are_the_contracts():
    constants = load("constants.json")
    limits = constants["limits"]
    assert _contract.CONTRACT_VERSION == constants["contractVersion"] == wormhole_py.CONTRACT_VERSION
    assert _contract.OBJECT_PATH == constants["objectPath"]
    assert _contract.PLAIN_INTERFACE == constants["plainInterface"]
    assert _contract.BUCKET_PREFIX == constants["bucketInterfacePrefix"]
    assert {_contract.POSTED, _contract.MESSAGE} == set(constants["signals"])
    assert _contract.DEFAULT_DIRECTORY == constants["defaultDirectory"]
    assert _contract.PREFERENCES_DIRECTORY == constants["preferencesDirectory"]
    assert _contract.MAX_NAME_BYTES == limits["nameBytes"]
    assert _contract.MAX_RULE_BYTES == limits["matchRuleBytes"]
    assert _contract.MAX_GROUP_BYTES == limits["groupBytes"]
    assert _contract.MAX_DIRECTORY_BYTES == limits["directoryBytes"]
    assert _contract.MAX_IDENTIFIER_BYTES == limits["identifierBytes"]
    assert _contract.MAX_STATE == int(limits["maxState"])
    assert _contract.TRANSIENT_LIMIT == limits["transientMessageBytes"]
    assert _contract.DEFAULT_MAX_MESSAGE_BYTES == limits["defaultMaxMessageBytes"]
    assert _contract.UNSIGNALLED_GRACE_SECONDS == constants["seconds"]["unsignalledRenameGrace"]
    assert _contract.STALE_TEMP_SECONDS == constants["seconds"]["staleTemporary"]
    assert _contract.ONE_SHOT_BOUND_SECONDS == constants["seconds"]["oneShotBound"]


@pytest.mark.parametrize("vector", load("vectors/fnv.json")["vectors"], ids=lambda v: repr(v["input"]))
def test_fnv(vector):
    assert "%08x" % _contract.fnv1a32(vector["input"]) == vector["fnv1a32"]


@pytest.mark.parametrize("vector", load("vectors/names.json")["valid"], ids=lambda v: text_of(v, "name")[:30])
def test_valid_names(vector):
    name = text_of(vector, "name")
    assert _contract.validate_name(name) == name
    assert _contract.bucket_interface(name) == vector["bucket"]
    assert [_contract.exact_rule(name, vector["bucket"]), _contract.exact_rule(name, _contract.PLAIN_INTERFACE)] \
        == vector["exactRules"]


@pytest.mark.parametrize("vector", load("vectors/names.json")["invalid"], ids=lambda v: v["reason"])
def test_invalid_names(vector):
    if "utf8Hex" in vector:
        # A str cannot hold bytes that are not UTF-8: what this package is given is a lone
        # surrogate, the form Python decodes such bytes into (surrogateescape).
        name = bytes.fromhex(vector["utf8Hex"]).decode("utf-8", "surrogateescape")
    else:
        name = text_of(vector, "name")
    with pytest.raises(InvalidInputError) as caught:
        _contract.validate_name(name)
    assert caught.value.code == load("vectors/names.json")["errorCode"]
    if "messageContains" in vector:
        assert vector["messageContains"] in str(caught.value)


@pytest.mark.parametrize("vector", load("vectors/names.json")["prefixes"], ids=lambda v: v["prefix"])
def test_prefixes(vector):
    if vector["valid"]:
        assert _contract.validate_prefix(vector["prefix"]) == vector["prefix"]
        assert _contract.prefix_rule(vector["prefix"]) == vector["rule"]
    else:
        with pytest.raises(InvalidInputError) as caught:
            _contract.validate_prefix(vector["prefix"])
        assert caught.value.code == "invalidName"
        assert vector["messageContains"] in str(caught.value)


CHECKS = {"group": _contract.validate_group, "directory": _contract.validate_directory,
          "identifier": _contract.validate_identifier}
COMPONENTS = [(kind, entry, vector, valid) for kind, entry in load("vectors/components.json")["kinds"].items()
              for valid in (True, False) for vector in entry["valid" if valid else "invalid"]]


@pytest.mark.parametrize("kind,entry,vector,valid", COMPONENTS,
                         ids=["%s-%s-%d" % (c[0], "valid" if c[3] else "invalid", i) for i, c in enumerate(COMPONENTS)])
def test_components(kind, entry, vector, valid):
    value = text_of(vector, "value")
    assert CHECKS[kind].__name__.endswith(kind)
    if valid:
        assert CHECKS[kind](value) == value
        return
    with pytest.raises(InvalidInputError) as caught:
        CHECKS[kind](value)
    assert caught.value.code == entry["errorCode"]
    if "messageContains" in vector:
        assert vector["messageContains"] in str(caught.value)


JSON = load("vectors/json.json")


@pytest.mark.parametrize("text", JSON["kept"])
def test_json_kept_byte_for_byte(text):
    assert _json.validate_document(text.encode("utf-8")) == text


@pytest.mark.parametrize("pair", JSON["compact"])
def test_json_compact(pair):
    assert _json.compact(pair[0]) == pair[1]


@pytest.mark.parametrize("vector", JSON["refused"], ids=lambda v: v["reason"])
def test_json_refused(vector):
    data = bytes.fromhex(vector["hex"]) if "hex" in vector else vector["text"].encode("utf-8")
    with pytest.raises(MessageFormatError) as caught:
        _json.validate_document(data)
    assert caught.value.code == JSON["errorCode"]
    if "messageContains" in vector:
        assert vector["messageContains"] in str(caught.value)


def test_every_code_the_package_raises_is_in_the_table():
    """Every code is given as a string literal: the first argument of an error's constructor
    (or of ``super().__init__``), or the default of a ``code`` parameter.  A former name
    (errors.json's ``formerly``) is outside the table too."""
    package = Path(_contract.__file__).parent
    found = set()
    literals = set()
    for source in package.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        literals.update(re.findall(r"\"([a-z][A-Za-z]+)\"", text))
        found.update(re.findall(r"(?:Error|error|Failed|__init__)\(\s*\"([a-z][A-Za-z]+)\"", text))
        found.update(re.findall(r"code: str = \"([a-z][A-Za-z]+)\"", text))
    assert len(found) >= 15, found
    assert found - CODES == set(), "codes outside contract/errors.json"
    assert literals & FORMER == set(), "a former name (errors.json's formerly) is still written in the package"
    assert issubclass(InvalidInputError, WormholeError)


SUITES = load("vectors/suites.json")


def typed(value: Any) -> List[Any]:
    """A value read from a suite, in the vectors' [type, value] form."""
    import base64
    import math

    from wormhole_py.defaults import URL, Date, UnknownValue
    if isinstance(value, UnknownValue):
        return ["unknown"]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["integer", str(value)]
    if isinstance(value, float):
        if math.isnan(value):
            return ["double", "nan"]
        if math.isinf(value):
            return ["double", "inf" if value > 0 else "-inf"]
        return ["double", value]
    if isinstance(value, str):
        return ["string", value]
    if isinstance(value, Date):
        return ["date", value.seconds]
    if isinstance(value, bytes):
        return ["data", base64.b64encode(value).decode("ascii")]
    if isinstance(value, URL):
        return ["url", value.string]
    if isinstance(value, list):
        return ["array", [typed(item) for item in value]]
    if isinstance(value, dict):
        return ["dictionary", {key: typed(item) for key, item in value.items()}]
    raise AssertionError("unexpected %r" % (value,))


def suite_at(tmp_path: Path, data: bytes) -> Any:
    from wormhole_py.defaults import GroupDefaults
    preferences = tmp_path / "group.vectors" / "Preferences"
    preferences.mkdir(parents=True, mode=0o700)
    (tmp_path / "group.vectors").chmod(0o700)
    target = preferences / "group.vectors.json"
    target.write_bytes(data)
    target.chmod(0o600)
    return GroupDefaults("group.vectors", container_root=str(tmp_path))


@pytest.mark.parametrize("vector", SUITES["readable"], ids=lambda v: v["text"][:24])
def test_suites_read_as_typed(tmp_path, vector):
    values = suite_at(tmp_path, vector["text"].encode("utf-8")).values()
    assert {key: typed(value) for key, value in values.items()} == vector["values"]


@pytest.mark.parametrize("vector", SUITES["corrupt"], ids=lambda v: v["reason"])
def test_corrupt_suites_name_the_offset(tmp_path, vector):
    data = bytes.fromhex(vector["hex"]) if "hex" in vector else vector["text"].encode("utf-8")
    with pytest.raises(WormholeError) as caught:
        suite_at(tmp_path, data).values()
    assert caught.value.code == SUITES["errorCode"]
    assert "byte %d" % vector["offset"] in str(caught.value) or getattr(caught.value, "offset", None) == vector["offset"]


JOURNALS = load("vectors/journals.json")


def journal_at(tmp_path: Path, files: Dict[str, str]) -> Any:
    from wormhole_py.journal import Journal
    directory = tmp_path / "group.vectors" / "wormhole" / "events.journal"
    directory.mkdir(parents=True)
    for path in (tmp_path / "group.vectors", directory.parent, directory):
        path.chmod(0o700)
    for name, hexbytes in files.items():
        (directory / name).write_bytes(bytes.fromhex(hexbytes))
        (directory / name).chmod(0o600)
    return Journal("group.vectors", "events", container_root=str(tmp_path), post=False)


@pytest.mark.parametrize("case", JOURNALS["cases"], ids=lambda c: c["name"])
def test_journals_read_in_order_with_every_range_reported(tmp_path, case):
    from wormhole_py.journal import Gap
    journal = journal_at(tmp_path, case["files"])
    events: List[Any] = []
    reader = journal.reader(start=1)
    while True:
        batch = reader.read()
        if not batch:
            break
        for item in batch:
            if isinstance(item, Gap):
                events.append(["gap", item.first, item.last] if item.reason == "retention"
                              else ["damaged", item.first, item.last, item.reason, item.file])
            else:
                events.append(["record", item.sequence, item.text])
    assert events == case["read"]
    damaged = [[gap["from"], gap["to"], gap["reason"], gap["file"]] for gap in journal.stat()["damaged"]]
    assert damaged == case["damaged"]


CONTAINERS = load("vectors/containers.json")


def changed_container(tmp_path: Path, case: Dict[str, Any]) -> Path:
    """A container root holding group.vectors/wormhole/inbox.json, with the case's change made."""
    import os
    root = tmp_path / "root"
    directory = root / "group.vectors" / "wormhole"
    directory.mkdir(parents=True)
    for path in (root, root / "group.vectors", directory):
        path.chmod(0o700)
    (directory / "inbox.json").write_bytes(b'{"n":1}')
    (directory / "inbox.json").chmod(0o600)
    part = {"container": root / "group.vectors", "directory": directory, "file": directory / "inbox.json"}[case["path"]]
    if case["change"] == "mode":
        part.chmod(int(case["mode"], 8))
    elif case["change"] == "symlink":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        os.rename(part, elsewhere / part.name)
        part.symlink_to(elsewhere / part.name)
    elif case["change"] == "owner":
        if os.geteuid() != 0:
            pytest.skip("only root can give a file to another user")
        os.chown(part, 65534, 65534)
    else:
        raise AssertionError(case["change"])
    return root


@pytest.mark.parametrize("case", CONTAINERS["cases"], ids=lambda c: c["name"])
def test_unsafe_containers_are_refused(tmp_path, case):
    from wormhole_py.messages import MessageCenter
    root = changed_container(tmp_path, case)
    wormhole = MessageCenter("group.vectors", container_root=str(root))
    if not case["refused"]:
        assert wormhole.read_json("inbox") == '{"n":1}'
        return
    with pytest.raises(WormholeError) as caught:
        wormhole.read_json("inbox")
    assert caught.value.code == CONTAINERS["errorCode"]


@pytest.mark.parametrize("vector", load("vectors/corpus-components.json")["cases"], ids=lambda v: v["hex"][:16])
def test_corpus_components(vector):
    data = bytes.fromhex(vector["hex"])
    try:
        text: Any = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    for kind, check in CHECKS.items():
        try:
            valid = text is not None and check(text) == text
        except InvalidInputError:
            valid = False
        assert valid == vector[kind], kind


CORPUS_JSON = load("vectors/corpus-json.json")


def test_corpus_json():
    assert len(CORPUS_JSON["kept"]) + len(CORPUS_JSON["refused"]) >= 200
    for hexbytes in CORPUS_JSON["kept"]:
        data = bytes.fromhex(hexbytes)
        assert _json.validate_document(data).encode("utf-8") == data
    for hexbytes in CORPUS_JSON["refused"]:
        with pytest.raises(MessageFormatError) as caught:
            _json.validate_document(bytes.fromhex(hexbytes))
        assert caught.value.code == CORPUS_JSON["errorCode"]
