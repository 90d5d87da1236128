"""Shared defaults: the app group's settings suite (contract 1.3, section 5).

The suite of group ``G`` named ``S`` (by default the group identifier itself)
is the file ``<root>/G/Preferences/S.json``: one UTF-8 JSON object mapping each
key to its value in the property-list format of ``docs/shared-defaults.md``::

    Int 42 · Double 1.5, 1e-05, {"$double":"nan"|"inf"|"-inf"} · Bool true ·
    String "EUR" · Date {"$date":1700000000.5} · Data {"$data":"AAE="} ·
    URL {"$url":"file:///tmp/a%20b"} · arrays · dictionaries (an object whose
    only key starts with "$" is written {"$dict":{...}})

In Python these are ``int``, ``float``, ``bool``, ``str``, :class:`Date`,
``bytes``, :class:`URL`, ``list`` and ``dict``; a value this module does not
understand (an unknown ``$`` tag, an integer beyond 64 bits) is an
:class:`UnknownValue` that keeps its JSON text.

Nothing is re-serialised that was not changed: the suite is parsed by a small
tokenizer that records where each value's JSON text starts and ends, and a
write rebuilds the file from those texts, so ``1e400``, ``-0``, ``1.50`` and
30-digit integers written by anyone stay exactly as written while other keys
change.

A writer (every method that changes the suite) follows the contract's steps:
``flock(LOCK_EX)`` on ``S.json.lock``; read and parse ``S.json``; write the new
suite to ``.S.json.<pid>-<hex>.tmp`` (mode 0600, its own ``flock`` held) and set
its modification time strictly later than the old file's (the *generation*);
rename it onto ``S.json``; add 1 to the change counter ``S.json.changes``
(8 bytes, unsigned little-endian, v1.3); release the lock; post
``<G>/Preferences/S/<key>`` for each changed key with the generation as state,
then make one call the bus answers.  Readers never write.
"""

from __future__ import annotations

import base64
import datetime as _dt
import errno
import fcntl
import json
import os
import re
import struct
import time
from dataclasses import dataclass
from json.decoder import scanstring as _scanstring
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from .errors import InvalidInputError, StorageError, UnsafePathError, WormholeError
from . import _contract

__all__ = [
    "SharedDefaults", "Date", "URL", "UnknownValue", "CorruptSuiteError", "DefaultsError",
    "ExpectationFailed", "JSONSyntaxError", "parse_json", "Node", "decode_json_value",
    "encode_value", "canonical_json", "typed_equal", "MAX_DEPTH", "DEFAULT_MAX_BYTES", "MISSING",
]

#: Containers nested deeper than this are refused (the contract asks for at least 64).
MAX_DEPTH = 512
#: The default size limit of a suite (v1.2): 4 MiB of JSON.
DEFAULT_MAX_BYTES = 4 * 1024 * 1024

_INT_MIN = -(2 ** 63)
_INT_MAX = 2 ** 63 - 1


class _Missing:
    """The type of :data:`MISSING`: "no expectation given"."""

    def __repr__(self) -> str:
        return "MISSING"


#: Marker for an absent argument or an absent key.
MISSING: Any = _Missing()


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class DefaultsError(WormholeError):
    """A shared-defaults operation failed (codes ``typeMismatch``, ``overflow``,
    ``tooLarge``, ``noValue``)."""


class CorruptSuiteError(DefaultsError):
    """The suite file is not one JSON object (code ``corruptSuite``).

    ``path`` is the file, ``offset`` the byte offset of the problem, ``reason``
    what was wrong there.  Readers and writers refuse; only :meth:`SharedDefaults.repair`
    moves the file aside.
    """

    def __init__(self, message: str, path: str, offset: int, reason: str, size: int) -> None:
        super().__init__("corruptSuite", message, path)
        self.path = path
        self.offset = offset
        self.reason = reason
        self.size = size


class ExpectationFailed(DefaultsError):
    """A compare-and-set write found another value (code ``expectationFailed``).

    ``stored`` is the stored value's JSON text as ``defaults read`` prints it,
    or ``None`` when the key is absent.
    """

    def __init__(self, message: str, key: str, stored: Optional[str]) -> None:
        super().__init__("expectationFailed", message, key)
        self.key = key
        self.stored = stored


class JSONSyntaxError(ValueError):
    """A text is not one RFC 8259 JSON document; ``offset`` is a byte offset."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__("%s at byte %d" % (reason, offset))
        self.reason = reason
        self.offset = offset


class _ValueProblem(Exception):
    """A JSON value that is not a property-list value (``pos`` is a character index)."""

    def __init__(self, reason: str, pos: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pos = pos


# --------------------------------------------------------------------------
# The value types
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Date:
    """A point in time: seconds since 1970-01-01 UTC (``{"$date":S}``).

    Kept as a float, so sub-microsecond precision survives a round trip
    (``datetime`` would cut it to microseconds).
    """

    seconds: float

    @classmethod
    def from_datetime(cls, value: _dt.datetime) -> "Date":
        """The date of ``value`` (a naive ``datetime`` is taken as local time)."""
        return cls(value.timestamp())

    def to_datetime(self) -> _dt.datetime:
        """This date as an aware UTC ``datetime`` (microsecond precision)."""
        return _dt.datetime.fromtimestamp(self.seconds, tz=_dt.timezone.utc)


_URL_VALID = re.compile(r"(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=])*\Z")
_URL_UNSAFE = re.compile(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]+")


def normalise_url(text: str) -> str:
    """``text`` as Foundation's ``URL(string:)`` stores it: unchanged when it
    is a valid URL string; else every character a URL may not hold, ``%``
    included, percent-encoded as UTF-8 (``ä`` -> ``%C3%A4``, space -> ``%20``,
    ``%zz`` -> ``%25zz``, and then ``%20`` -> ``%2520`` too)."""
    if _URL_VALID.match(text):
        return text
    return _URL_UNSAFE.sub(lambda m: "".join("%%%02X" % b for b in m.group(0).encode("utf-8", "surrogatepass")),
                           text)


@dataclass(frozen=True)
class URL:
    """A URL (``{"$url":"…"}``; a non-empty string, usually absolute), kept percent-encoded: characters
    a URL may not hold are encoded when it is made (see :func:`normalise_url`)."""

    string: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "string", normalise_url(self.string))

    def __str__(self) -> str:
        return self.string


@dataclass(frozen=True)
class UnknownValue:
    """A stored value this version does not understand, kept as its JSON text.

    Typed getters report it as a type mismatch; writers keep it byte for byte;
    writing it back stores the same text.
    """

    json: str


# --------------------------------------------------------------------------
# A JSON tokenizer that keeps each value's text
# --------------------------------------------------------------------------

OBJECT, ARRAY, STRING, NUMBER, TRUE, FALSE, NULL = "object", "array", "string", "number", "true", "false", "null"

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_LITERALS = (("true", TRUE), ("false", FALSE), ("null", NULL))


class Node:
    """One JSON value of a parsed text: ``kind``, the span ``start:end`` of its
    text (character indices), and ``value``: the decoded string of a string,
    the list of child nodes of an array, the list of ``(key, node)`` pairs of
    an object (duplicates included, in order), ``None`` otherwise."""

    __slots__ = ("kind", "start", "end", "value")

    def __init__(self, kind: str, start: int, end: int, value: Any) -> None:
        self.kind = kind
        self.start = start
        self.end = end
        self.value = value

    def text(self, source: str) -> str:
        """The value's JSON text in ``source``, exactly as written."""
        return source[self.start:self.end]


def _byte_offset(text: str, pos: int) -> int:
    return len(text[:pos].encode("utf-8", "surrogatepass"))


def _syntax(text: str, reason: str, pos: int) -> JSONSyntaxError:
    return JSONSyntaxError(reason, _byte_offset(text, pos))


def _string_at(text: str, pos: int) -> Tuple[str, int]:
    try:
        return _scanstring(text, pos + 1, True)
    except json.JSONDecodeError as error:
        raise _syntax(text, "invalid string (%s)" % error.msg.lower(), error.pos) from None


def parse_json(text: str, max_depth: int = MAX_DEPTH) -> Node:
    """Parse one RFC 8259 JSON text (surrounding whitespace allowed) into nodes.

    Iterative, so nesting up to ``max_depth`` costs no recursion; deeper
    nesting, trailing text, ``NaN`` and every other departure from RFC 8259 is
    a :class:`JSONSyntaxError` naming the byte offset.
    """
    n = len(text)
    ws = _WS.match
    pos = ws(text, 0).end()
    stack: List[Node] = []
    keys: List[str] = []
    while True:
        # One value starts at pos.
        if pos >= n:
            raise _syntax(text, "unexpected end of the text where a JSON value was expected", pos)
        c = text[pos]
        done: Node
        if c == "{" or c == "[":
            if len(stack) >= max_depth:
                raise _syntax(text, "nested deeper than %d levels" % max_depth, pos + 1)
            node = Node(OBJECT if c == "{" else ARRAY, pos, -1, [])
            close = "}" if c == "{" else "]"
            pos = ws(text, pos + 1).end()
            if pos < n and text[pos] == close:
                node.end = pos + 1
                pos += 1
                done = node
            else:
                stack.append(node)
                if c == "{":
                    pos = _key(text, pos, keys)
                continue
        elif c == '"':
            value, end = _string_at(text, pos)
            done = Node(STRING, pos, end, value)
            pos = end
        elif c == "-" or "0" <= c <= "9":
            match = _NUMBER.match(text, pos)
            if match is None:
                raise _syntax(text, "invalid number", pos)
            done = Node(NUMBER, pos, match.end(), None)
            pos = match.end()
        else:
            for word, kind in _LITERALS:
                if text.startswith(word, pos):
                    done = Node(kind, pos, pos + len(word), None)
                    pos += len(word)
                    break
            else:
                raise _syntax(text, "not a JSON value", pos)
        # Attach it to its container; close every container that ends here.
        while True:
            if not stack:
                pos = ws(text, pos).end()
                if pos != n:
                    raise _syntax(text, "unexpected text after the JSON value", pos)
                return done
            top = stack[-1]
            if top.kind == OBJECT:
                top.value.append((keys.pop(), done))
            else:
                top.value.append(done)
            pos = ws(text, pos).end()
            if pos >= n:
                raise _syntax(text, "unexpected end of the text inside %s" % ("an object" if top.kind == OBJECT else "an array"), pos)
            c = text[pos]
            if c == ",":
                pos = ws(text, pos + 1).end()
                if top.kind == OBJECT:
                    pos = _key(text, pos, keys)
                break
            close = "}" if top.kind == OBJECT else "]"
            if c != close:
                raise _syntax(text, "expected ',' or '%s'" % close, pos)
            top.end = pos + 1
            pos += 1
            stack.pop()
            done = top


def _key(text: str, pos: int, keys: List[str]) -> int:
    """Parse ``"key" :`` at ``pos``; push the key; return the position of the value."""
    if pos >= len(text) or text[pos] != '"':
        raise _syntax(text, "expected a string key", pos)
    key, pos = _string_at(text, pos)
    pos = _WS.match(text, pos).end()
    if pos >= len(text) or text[pos] != ":":
        raise _syntax(text, "expected ':' after a key", pos)
    keys.append(key)
    return _WS.match(text, pos + 1).end()


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


_FAST = json.JSONDecoder(parse_constant=_refuse_constant)


def object_spans(text: str, max_depth: int = MAX_DEPTH) -> Dict[str, str]:
    """The members of a JSON text that must be one object: key -> the value's
    text exactly as written (the last of duplicate keys wins).

    A fast path for whole suites: the C scanner of :mod:`json` finds where each
    top-level value ends; anything it refuses, and any value with enough
    brackets to nest past ``max_depth``, is checked again by
    :func:`parse_json`, whose error (with its byte offset) is raised.
    """
    try:
        entries = _fast_spans(text, max_depth)
    except (ValueError, RecursionError):
        entries = None
    if entries is None:
        root = parse_json(text, max_depth)
        if root.kind != OBJECT:
            raise JSONSyntaxError("the suite is not a JSON object", _byte_offset(text, root.start))
        entries = {key: text[node.start:node.end] for key, node in root.value}
    return entries


def _fast_spans(text: str, max_depth: int) -> Optional[Dict[str, str]]:
    ws = _WS.match
    n = len(text)
    pos = ws(text, 0).end()
    if pos >= n or text[pos] != "{":
        return None
    pos = ws(text, pos + 1).end()
    entries: Dict[str, str] = {}
    if pos < n and text[pos] == "}":
        return entries if ws(text, pos + 1).end() == n else None
    scan = _FAST.raw_decode
    while True:
        if pos >= n or text[pos] != '"':
            return None
        key, pos = _scanstring(text, pos + 1, True)
        pos = ws(text, pos).end()
        if pos >= n or text[pos] != ":":
            return None
        start = ws(text, pos + 1).end()
        _, end = scan(text, start)
        value = text[start:end]
        if value.count("[") + value.count("{") >= max_depth - 1:
            parse_json(value, max_depth - 1)  # the exact depth rule (the object itself is one level)
        entries[key] = value
        pos = ws(text, end).end()
        if pos >= n:
            return None
        if text[pos] == ",":
            pos = ws(text, pos + 1).end()
            continue
        if text[pos] == "}" and ws(text, pos + 1).end() == n:
            return entries
        return None


def decode_utf8(data: bytes) -> str:
    """Decode bytes that must be UTF-8 without a byte-order mark (else :class:`JSONSyntaxError`)."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise JSONSyntaxError("a byte-order mark (UTF-8 JSON has none)", 0)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JSONSyntaxError("invalid UTF-8", error.start) from None


# --------------------------------------------------------------------------
# Property-list values <-> JSON
# --------------------------------------------------------------------------

_B64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def _decode(text: str, node: Node) -> Any:
    """The property-list value of ``node``; raises :class:`_ValueProblem`."""
    kind = node.kind
    if kind == STRING:
        return node.value
    if kind == NUMBER:
        raw = text[node.start:node.end]
        if "." in raw or "e" in raw or "E" in raw:
            return float(raw)
        number = int(raw) if len(raw) <= 21 else _INT_MAX + 1  # (int() of thousands of digits is refused)
        if number < _INT_MIN or number > _INT_MAX:
            raise _ValueProblem("the integer %s does not fit a signed 64-bit Int (write it as %s.0 for a Double)"
                                % (raw, raw), node.start)
        return number
    if kind == TRUE:
        return True
    if kind == FALSE:
        return False
    if kind == NULL:
        raise _ValueProblem("null is not a property-list value (remove the key instead)", node.start)
    if kind == ARRAY:
        return [_decode(text, child) for child in node.value]
    members = node.value
    if len(members) == 1 and members[0][0].startswith("$"):
        return _decode_tag(text, node, members[0][0], members[0][1])
    result: Dict[str, Any] = {}
    for key, child in members:
        result[key] = _decode(text, child)
    return result


def _decode_tag(text: str, node: Node, tag: str, child: Node) -> Any:
    if tag == "$double":
        if child.kind == STRING and child.value in ("nan", "inf", "-inf"):
            return float(child.value)
        if child.kind == NUMBER:
            return float(text[child.start:child.end])
        raise _ValueProblem('$double needs "nan", "inf", "-inf" or a number', node.start)
    if tag == "$date":
        if child.kind == NUMBER:
            seconds = float(text[child.start:child.end])
            if seconds == seconds and abs(seconds) != float("inf"):
                return Date(seconds)
        raise _ValueProblem("$date needs a finite number of seconds since 1970", child.start)
    if tag == "$data":
        if child.kind == STRING and _B64.fullmatch(child.value):
            return base64.b64decode(child.value)
        raise _ValueProblem("$data needs a base64 string", node.start)
    if tag == "$url":
        if child.kind == STRING and child.value:
            return URL(child.value)
        raise _ValueProblem("$url needs a URL string", node.start)
    if tag == "$dict":
        if child.kind == OBJECT:
            return {key: _decode(text, grandchild) for key, grandchild in child.value}
        raise _ValueProblem("$dict needs an object", node.start)
    raise _ValueProblem("unknown tag '%s' (a dictionary whose only key starts with '$' is written "
                        "{\"$dict\":{\u2026}})" % tag, node.start)


def decode_json_value(text: str) -> Any:
    """Decode one JSON text given as a value to store (strict: an unknown tag,
    ``null`` or a 65-bit integer is an error).

    Raises :class:`InvalidInputError` (``invalidValue``) naming the problem and
    its byte offset.
    """
    try:
        node = parse_json(text)
        return _decode(text, node)
    except JSONSyntaxError as error:
        raise InvalidInputError("invalidValue", str(error), text) from None
    except _ValueProblem as problem:
        raise InvalidInputError("invalidValue", "%s at byte %d" % (problem.reason, _byte_offset(text, problem.pos)),
                                text) from None


def _stored_value(text: str, node: Node) -> Any:
    """The value of a stored key: decoded, or an :class:`UnknownValue` keeping its text."""
    try:
        return _decode(text, node)
    except _ValueProblem:
        return UnknownValue(text[node.start:node.end])


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _escape(match: "re.Match[str]") -> str:
    char = match.group(0)
    return _ESCAPES.get(char) or "\\u%04x" % ord(char)


def encode_string(value: str) -> str:
    """A JSON string as Wormhole writes it: UTF-8 kept, ``"`` ``\\`` and control
    characters escaped (``\\n \\r \\t``, others ``\\u00XX``), ``/`` not escaped."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError("invalidValue", "string %s holds a lone surrogate, which UTF-8 cannot carry"
                                % _contract.shown(value), value) from None
    return '"' + _NEEDS_ESCAPE.sub(_escape, value) + '"'


def _encode_double(value: float) -> str:
    if value != value:
        return '{"$double":"nan"}'
    if value == float("inf"):
        return '{"$double":"inf"}'
    if value == float("-inf"):
        return '{"$double":"-inf"}'
    return repr(value)


def encode_value(value: Any, _depth: int = 1) -> str:
    """The canonical JSON text of a property-list value (compact, keys sorted).

    Raises :class:`InvalidInputError` (``invalidValue``) for anything that is
    not a property-list value, naming its type.
    """
    if _depth > MAX_DEPTH:
        raise InvalidInputError("invalidValue", "value nested deeper than %d levels" % MAX_DEPTH)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value < _INT_MIN or value > _INT_MAX:
            raise InvalidInputError("invalidValue", "integer %d does not fit a signed 64-bit Int" % value, value)
        return str(int(value))
    if isinstance(value, float):
        return _encode_double(value)
    if isinstance(value, str):
        return encode_string(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return '{"$data":"%s"}' % base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, _dt.datetime):
        value = Date.from_datetime(value)
    if isinstance(value, Date):
        seconds = float(value.seconds)
        if seconds != seconds or abs(seconds) == float("inf"):
            raise InvalidInputError("invalidValue", "a Date needs a finite number of seconds, not %r" % seconds, value)
        return '{"$date":%s}' % repr(seconds)
    if isinstance(value, URL):
        if not value.string:
            raise InvalidInputError("invalidValue", "a URL needs a non-empty string", value)
        return '{"$url":%s}' % encode_string(value.string)
    if isinstance(value, UnknownValue):
        return value.json
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(encode_value(item, _depth + 1) for item in value) + "]"
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise InvalidInputError("invalidValue", "dictionary key %r is not a string" % (key,), key)
        body = "{" + ",".join(encode_string(key) + ":" + encode_value(value[key], _depth + 1)
                              for key in sorted(value)) + "}"
        if len(value) == 1 and next(iter(value)).startswith("$"):
            return '{"$dict":' + body + "}"
        return body
    if value is None:
        raise InvalidInputError("invalidValue", "None is not a property-list value (remove the key instead)")
    raise InvalidInputError("invalidValue", "a %s is not a property-list value" % type(value).__name__, value)


def _typed_key(value: Any) -> Any:
    """A hashable key such that two values are equal as typed values (an Int
    never equals a Double) exactly when their keys are equal."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("d", "nan" if value != value else value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ("x", bytes(value))
    if isinstance(value, _dt.datetime):
        return ("t", Date.from_datetime(value).seconds)
    if isinstance(value, Date):
        return ("t", float(value.seconds))
    if isinstance(value, URL):
        return ("u", value.string)
    if isinstance(value, UnknownValue):
        return ("?", value.json)
    if isinstance(value, (list, tuple)):
        return ("a", tuple(_typed_key(item) for item in value))
    if isinstance(value, Mapping):
        return ("o", tuple(sorted((key, _typed_key(item)) for key, item in value.items())))
    return ("!", repr(value))


def typed_equal(a: Any, b: Any) -> bool:
    """Whether two property-list values are equal as typed values (v1.2)."""
    return _typed_key(a) == _typed_key(b)


def canonical_json(raw: str) -> str:
    """How ``defaults read`` prints a stored value's text: re-encoded compactly
    when understood, as stored when it is an unknown value."""
    node = parse_json(raw)
    value = _stored_value(raw, node)
    if isinstance(value, UnknownValue):
        return value.json
    return encode_value(value)


# --------------------------------------------------------------------------
# The suite on disk
# --------------------------------------------------------------------------

PREFERENCES = _contract.PREFERENCES_DIRECTORY


def validate_suite(suite: str) -> str:
    """Check a suite name: the identifier rules (1 to 200 bytes of ``A-Z a-z 0-9 . _ -``, no leading ``.``)."""
    return _contract.validate_component(suite, "suite", "invalidSuite", _contract.MAX_IDENTIFIER_BYTES)


def key_name(group: str, suite: str, key: str) -> str:
    """The notification name of a key: ``<group>/Preferences/<suite>/<key>``."""
    return "%s/%s/%s/%s" % (group, PREFERENCES, suite, key)


def validate_key(group: str, suite: str, key: str) -> str:
    """Check a key: 1 or more bytes of UTF-8 without NUL whose notification name is a valid name."""
    if not isinstance(key, str):
        raise InvalidInputError("invalidKey", "key %r is not a string" % (key,), key)
    if key == "":
        raise InvalidInputError("invalidKey", "key '' is empty (a key is 1 or more bytes of UTF-8 without NUL)", key)
    if "\0" in key:
        raise InvalidInputError("invalidKey", "key %s contains a NUL byte" % _contract.shown(key), key)
    try:
        _contract.validate_name(key_name(group, suite, key))
    except InvalidInputError as error:
        raise InvalidInputError("invalidKey", "key %s is not usable: %s" % (_contract.shown(key[:64]), error),
                                key) from None
    return key


class _Suite:
    """One parsed version of the suite file: key -> the value's JSON text."""

    __slots__ = ("entries", "text", "mtime_ns", "size", "exists")

    def __init__(self, entries: Dict[str, str], text: str, mtime_ns: int, size: int, exists: bool) -> None:
        self.entries = entries
        self.text = text
        self.mtime_ns = mtime_ns
        self.size = size
        self.exists = exists


def serialise(entries: Mapping[str, str]) -> str:
    """The suite file's text for ``entries`` (key -> JSON text): one member
    per line, keys sorted, each value's text as given."""
    if not entries:
        return "{}\n"
    return "{\n" + ",\n".join(encode_string(key) + ":" + entries[key] for key in sorted(entries)) + "\n}\n"


def _stored(raw: Optional[str]) -> Any:
    """The value of a stored JSON text, :data:`MISSING` for ``None``."""
    if raw is None:
        return MISSING
    return _stored_value(raw, parse_json(raw))


def _same(a: Optional[str], b: Optional[str]) -> bool:
    """Whether two stored texts (``None``: absent) hold equal typed values."""
    if a is None or b is None:
        return a is b
    if a == b:
        return True
    return _typed_key(_stored(a)) == _typed_key(_stored(b))


def describe_type(value: Any) -> str:
    """The property-list type of a value in words, for error messages."""
    if isinstance(value, bool):
        return "a Bool"
    if isinstance(value, int):
        return "an Int"
    if isinstance(value, float):
        return "a Double"
    if isinstance(value, str):
        return "a String"
    if isinstance(value, (bytes, bytearray)):
        return "a Data"
    if isinstance(value, Date):
        return "a Date"
    if isinstance(value, URL):
        return "a URL"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a dictionary"
    return "an unknown value"


Change = Tuple[str, Any]
"""An observed change: ``(key, value)``, the value :data:`MISSING` when removed."""


class SharedDefaults:
    """The shared defaults suite of an app group (``UserDefaults(suiteName:)``
    across processes, contract section 5).

    :param group: the application group identifier.
    :param suite: the suite name (default: the group identifier).
    :param container_root: the container root (default: contract section 2).
    :param bus_address: the bus to post on (default ``DBUS_SESSION_BUS_ADDRESS``).
    :param max_bytes: the suite's size limit for writes (default 4 MiB).
    :param bus: an existing :class:`wormhole_py.bus.Bus` to post on.
    :param post: ``False`` to write without posting (nothing is notified).

    Reads never change the disk.  Every write holds the suite lock around its
    read-modify-rename and posts each changed key afterwards; a bus that
    cannot be reached never fails a write (see :attr:`last_post_error`).
    """

    def __init__(self, group: str, suite: Optional[str] = None, *, container_root: Optional[os.PathLike] = None,
                 bus_address: Optional[str] = None, max_bytes: int = DEFAULT_MAX_BYTES, bus: Any = None,
                 post: bool = True) -> None:
        from . import container as _container
        _contract.validate_group(group)
        if suite is None:
            if len(group.encode("utf-8")) > _contract.MAX_IDENTIFIER_BYTES:
                raise InvalidInputError(
                    "invalidSuite", "group identifier %s is longer than 200 bytes, so it has no default suite: "
                    "name one with --suite" % _contract.shown(group), group)
            suite = group
        validate_suite(suite)
        if not isinstance(max_bytes, int) or max_bytes <= 0:
            raise InvalidInputError("invalidValue", "max_bytes %r is not a positive number of bytes" % (max_bytes,),
                                    max_bytes)
        self.group = group
        self.suite = suite
        self.max_bytes = max_bytes
        self.container = _container.container_path(group, container_root)
        self.directory = self.container / PREFERENCES
        self.path = self.directory / (suite + ".json")
        self.lock_path = self.directory / (suite + ".json.lock")
        self.changes_path = self.directory / (suite + ".json.changes")
        self.bus_address = bus_address
        self._bus = bus
        self._post_enabled = post
        #: The error of the last post that did not go out (``None`` when it did).
        self.last_post_error: Optional[WormholeError] = None
        self._cache: Optional[_Suite] = None
        self._cache_key: Optional[Tuple[int, int, int, int]] = None

    # -- names -------------------------------------------------------------

    def name_for(self, key: str) -> str:
        """The notification name of ``key``."""
        return key_name(self.group, self.suite, key)

    @property
    def prefix(self) -> str:
        """The prefix observing every key of the suite: ``<group>/Preferences/<suite>/``."""
        return "%s/%s/%s/" % (self.group, PREFERENCES, self.suite)

    def validate_key(self, key: str) -> str:
        """Check ``key`` (see :func:`validate_key`) and return it."""
        return validate_key(self.group, self.suite, key)

    # -- reading -----------------------------------------------------------

    def _read(self) -> _Suite:
        """Read and parse the suite file (no lock; the rename makes it atomic).
        An unchanged file (same inode, size, modification time) is served from
        the cache."""
        from . import container as _container
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return _Suite({}, "", 0, 0, False)
        except OSError as error:
            raise StorageError("io", "cannot inspect suite file %s: %s" % (_contract.shown(str(self.path)),
                                                                           error.strerror), str(self.path)) from None
        key = (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)
        if self._cache is not None and self._cache_key == key:
            return self._cache
        for parent in (self.container, self.directory):
            try:
                _container.check_safe(parent, os.lstat(parent), "directory")
            except FileNotFoundError:
                return _Suite({}, "", 0, 0, False)
        data = _container.read_file(self.path, max_bytes=None)
        if data is None:
            return _Suite({}, "", 0, 0, False)
        suite = self._parse(data, st.st_mtime_ns)
        try:
            again = os.lstat(self.path)
            if (again.st_ino, again.st_dev, again.st_size, again.st_mtime_ns) == key:
                self._cache, self._cache_key = suite, key
        except OSError:
            pass
        return suite

    def _parse(self, data: bytes, mtime_ns: int, writing: bool = False) -> _Suite:
        try:
            text = decode_utf8(data)
            entries = object_spans(text)
        except JSONSyntaxError as error:
            raise self._corrupt(error, len(data), writing) from None
        return _Suite(entries, text, mtime_ns, len(data), True)

    def _corrupt(self, error: JSONSyntaxError, size: int, writing: bool) -> CorruptSuiteError:
        repair = "wormhole defaults repair --group %s" % self.group
        if self.suite != self.group:
            repair += " --suite %s" % self.suite
        message = ("suite file '%s' (%d bytes) is not one JSON object: %s at byte %d; %s. Fix it by hand, or run "
                   "'%s' to move it aside and start an empty suite"
                   % (self.path, size, error.reason, error.offset,
                      "nothing was written" if writing else "it was left as it is", repair))
        return CorruptSuiteError(message, str(self.path), error.offset, error.reason, size)

    def raw(self, key: str) -> Optional[str]:
        """The stored JSON text of ``key`` exactly as in the file, ``None`` when absent."""
        return self._read().entries.get(key)

    def json(self, key: str) -> Optional[str]:
        """``key``'s value as ``defaults read KEY`` prints it (compact; an
        unknown value as stored), ``None`` when absent."""
        raw = self.raw(key)
        return None if raw is None else canonical_json(raw)

    def dump_json(self) -> str:
        """The whole suite as ``defaults read`` prints it: one compact object, keys sorted."""
        entries = self._read().entries
        return "{" + ",".join(encode_string(key) + ":" + canonical_json(entries[key])
                              for key in sorted(entries)) + "}"

    def keys(self) -> List[str]:
        """The suite's keys, sorted."""
        return sorted(self._read().entries)

    def get(self, key: str, default: Any = None) -> Any:
        """``key``'s value (an :class:`UnknownValue` when not understood), ``default`` when absent."""
        raw = self.raw(key)
        if raw is None:
            return default
        return _stored(raw)

    def __getitem__(self, key: str) -> Any:
        raw = self.raw(key)
        if raw is None:
            raise KeyError(key)
        return _stored(raw)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.raw(key) is not None

    def values(self) -> Dict[str, Any]:
        """Every key's value (the ``dictionaryRepresentation``)."""
        entries = self._read().entries
        return {key: _stored(entries[key]) for key in sorted(entries)}

    def _typed(self, key: str, kind: Union[type, Tuple[type, ...]], what: str, default: Any) -> Any:
        raw = self.raw(key)
        if raw is None:
            return default
        value = _stored(raw)
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            value = None
        if not isinstance(value, kind):
            raise DefaultsError("typeMismatch", "key %s holds %s, not %s" % (_contract.shown(key), describe_type(value),
                                                                            what), key)
        return value

    def integer(self, key: str, default: Optional[int] = None) -> Optional[int]:
        """An Int value (a Double, Bool or anything else is a ``typeMismatch``)."""
        return self._typed(key, int, "an Int", default)

    def double(self, key: str, default: Optional[float] = None) -> Optional[float]:
        """A Double value."""
        return self._typed(key, float, "a Double", default)

    def boolean(self, key: str, default: Optional[bool] = None) -> Optional[bool]:
        """A Bool value."""
        return self._typed(key, bool, "a Bool", default)

    def string(self, key: str, default: Optional[str] = None) -> Optional[str]:
        """A String value."""
        return self._typed(key, str, "a String", default)

    def data(self, key: str, default: Optional[bytes] = None) -> Optional[bytes]:
        """A Data value."""
        return self._typed(key, bytes, "a Data", default)

    def date(self, key: str, default: Optional[Date] = None) -> Optional[Date]:
        """A Date value."""
        return self._typed(key, Date, "a Date", default)

    def url(self, key: str, default: Optional[URL] = None) -> Optional[URL]:
        """A URL value."""
        return self._typed(key, URL, "a URL", default)

    def change_count(self) -> Optional[int]:
        """The suite's v1.3 change counter, ``None`` when there is none yet."""
        try:
            with open(self.changes_path, "rb") as handle:
                data = handle.read(8)
        except FileNotFoundError:
            return None
        if len(data) < 8:
            return 0
        return struct.unpack("<Q", data)[0]

    def generation(self) -> int:
        """The suite file's modification time in ns (0 when absent): the generation of the last write."""
        try:
            return os.lstat(self.path).st_mtime_ns
        except FileNotFoundError:
            return 0

    # -- writing -------------------------------------------------------------

    def _open_lock(self) -> int:
        from . import container as _container
        _container.ensure_directory(self.container)
        _container.ensure_directory(self.directory)
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UnsafePathError("unsafePath", "lock file %s is a symbolic link; it is not followed"
                                      % _contract.shown(str(self.lock_path)), str(self.lock_path)) from None
            raise StorageError("io", "cannot open the suite lock %s: %s"
                               % (_contract.shown(str(self.lock_path)), error.strerror), str(self.lock_path)) from None
        try:
            _container.check_safe(self.lock_path, os.fstat(fd), "lock file")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_lock_directory(self) -> None:
        """Create (0700) and check the container and its ``Preferences`` directory."""
        from . import container as _container
        _container.ensure_directory(self.container)
        _container.ensure_directory(self.directory)

    def _read_locked(self) -> _Suite:
        from . import container as _container
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return _Suite({}, "", 0, 0, False)
        data = _container.read_file(self.path, max_bytes=None)
        if data is None:
            return _Suite({}, "", 0, 0, False)
        return self._parse(data, st.st_mtime_ns, writing=True)

    def _replace_file(self, text: str, old_mtime_ns: int) -> int:
        """Write ``text`` to a temporary file (its flock held), give it a
        modification time strictly later than ``old_mtime_ns``, rename it onto
        the suite; return the new generation (ns)."""
        from . import container as _container
        data = text.encode("utf-8")
        tmp = self.directory / _container.temp_name(self.suite + ".json")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o600)
        except OSError as error:
            raise StorageError("io", "cannot create %s: %s" % (_contract.shown(str(tmp)), error.strerror),
                               str(tmp)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            generation = max(time.time_ns(), old_mtime_ns + 1)
            os.utime(fd, ns=(generation, generation))
            generation = os.fstat(fd).st_mtime_ns
            if generation <= old_mtime_ns:  # a file system with coarse times: step past it
                generation = old_mtime_ns + 1
                os.utime(fd, ns=(generation, generation))
            os.rename(tmp, self.path)
        except BaseException as error:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            os.close(fd)
            if isinstance(error, OSError) and not isinstance(error, WormholeError):
                raise StorageError("io", "cannot write suite file %s: %s"
                                   % (_contract.shown(str(self.path)), error.strerror), str(self.path)) from None
            raise
        os.close(fd)
        return generation

    def _count_change(self) -> None:
        """Add 1 (wrapping) to the change counter, creating it with 8 zero bytes (v1.3). Under the lock."""
        try:
            fd = os.open(self.changes_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise StorageError("io", "cannot open the change counter %s: %s"
                               % (_contract.shown(str(self.changes_path)), error.strerror),
                               str(self.changes_path)) from None
        try:
            data = os.pread(fd, 8, 0)
            count = struct.unpack("<Q", data)[0] if len(data) == 8 else 0
            os.pwrite(fd, struct.pack("<Q", (count + 1) & 0xFFFFFFFFFFFFFFFF), 0)
        finally:
            os.close(fd)

    def _transaction(self, change: Callable[[Dict[str, str]], Any], growing: bool = True) -> Tuple[Any, List[str], int]:
        """Run ``change`` on the entries under the suite lock; when it changed
        any key's typed value, write, count and (after unlocking) post.

        ``change`` edits the dict in place and returns a result.  Returns
        ``(result, changed keys, generation)``; nothing is written when no key
        changed.
        """
        fd = self._open_lock()
        try:
            current = self._read_locked()
            entries = dict(current.entries)
            result = change(entries)
            changed = [key for key in sorted(set(entries) | set(current.entries))
                       if not _same(current.entries.get(key), entries.get(key))]
            if not changed:
                return result, [], current.mtime_ns
            # Unchanged typed values keep their stored text.
            for key in list(entries):
                if key not in changed and key in current.entries:
                    entries[key] = current.entries[key]
            text = serialise(entries)
            size = len(text.encode("utf-8"))
            if growing and size > self.max_bytes and any(key in entries for key in changed):
                raise DefaultsError("tooLarge", "the suite %s would be %d bytes, over its limit of %d bytes; nothing "
                                    "was written" % (_contract.shown(self.suite), size, self.max_bytes), size)
            generation = self._replace_file(text, current.mtime_ns)
            self._count_change()
        finally:
            os.close(fd)  # releases the flock
        self._post(changed, generation)
        return result, changed, generation

    def _post(self, keys: List[str], generation: int) -> None:
        self.last_post_error = None
        if not self._post_enabled or not keys:
            return
        try:
            from .bus import Bus
            if self._bus is None:
                self._bus = Bus.connect(self.bus_address)
            for key in keys:
                self._bus.post(self.name_for(key), generation)
            self._bus.confirm()
        except WormholeError as error:
            self.last_post_error = error

    def write_json(self, key: str, text: str, *, expect: Any = MISSING, expect_absent: bool = False) -> bool:
        """Store the JSON text ``text`` (the file format above) as ``key``'s value.

        ``expect`` (a JSON text) / ``expect_absent`` make it a compare-and-set:
        :class:`ExpectationFailed` when the stored value differs.  Returns
        whether the suite changed.
        """
        self.validate_key(key)
        value = decode_json_value(text)
        expected = decode_json_value(expect) if expect is not MISSING else MISSING
        return self.set(key, value, expect=expected, expect_absent=expect_absent)

    def set(self, key: str, value: Any, *, expect: Any = MISSING, expect_absent: bool = False) -> bool:
        """Store ``value`` (a property-list value; ``None`` removes the key).

        With ``expect`` the write happens only if the stored value equals it as a
        typed value; with ``expect_absent`` only if the key is absent;
        otherwise :class:`ExpectationFailed` and nothing changes.  Returns
        whether the suite changed (an equal value writes and posts nothing).
        """
        self.validate_key(key)
        if value is None:
            if expect is not MISSING or expect_absent:
                raise InvalidInputError("invalidValue", "a compare-and-set needs a value to store, not None")
            return self.delete(key)
        text = encode_value(value)
        if expect is not MISSING:
            expected_key = _typed_key(expect)

        def change(entries: Dict[str, str]) -> None:
            stored = entries.get(key)
            if expect_absent and stored is not None:
                raise ExpectationFailed("key %s holds another value than the one expected (above); nothing was "
                                        "written" % _contract.shown(key), key, canonical_json(stored))
            if expect is not MISSING:
                if stored is None:
                    raise ExpectationFailed("key %s has no value, not the one expected; nothing was written"
                                            % _contract.shown(key), key, None)
                if _typed_key(_stored(stored)) != expected_key:
                    raise ExpectationFailed("key %s holds another value than the one expected (above); nothing was "
                                            "written" % _contract.shown(key), key, canonical_json(stored))
            entries[key] = text

        _, changed, _ = self._transaction(change)
        return bool(changed)

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def delete(self, key: str) -> bool:
        """Remove ``key`` (always allowed, whatever the size limit). Returns whether it was there."""
        self.validate_key(key)

        def change(entries: Dict[str, str]) -> None:
            entries.pop(key, None)

        _, changed, _ = self._transaction(change, growing=False)
        return bool(changed)

    def __delitem__(self, key: str) -> None:
        self.delete(key)

    def increment(self, key: str, by: int = 1) -> int:
        """Add ``by`` to the Int value of ``key`` under the suite lock (absent
        counts as 0) and return the new value.  A value that is not an Int, or
        a result outside 64 bits, raises :class:`DefaultsError` and nothing changes."""
        self.validate_key(key)
        if isinstance(by, bool) or not isinstance(by, int) or not _INT_MIN <= by <= _INT_MAX:
            raise InvalidInputError("invalidValue", "increment %r is not a 64-bit integer" % (by,), by)

        def change(entries: Dict[str, str]) -> int:
            stored = entries.get(key)
            current = 0
            if stored is not None:
                value = _stored(stored)
                if isinstance(value, bool) or not isinstance(value, int):
                    raise DefaultsError("typeMismatch", "key %s holds %s %s, not an integer; nothing changed"
                                        % (_contract.shown(key), describe_type(value), canonical_json(stored)), key)
                current = value
            result = current + by
            if not _INT_MIN <= result <= _INT_MAX:
                raise DefaultsError("overflow", "key %s holds the integer %d; adding %d overflows a signed 64-bit Int; "
                                    "nothing changed" % (_contract.shown(key), current, by), key)
            entries[key] = str(result)
            return result

        result, _, _ = self._transaction(change)
        return result

    def load_json(self, text: str, *, replace: bool = False) -> List[str]:
        """Write every key of the JSON object ``text`` in one atomic write (one
        rename, one post per changed key); ``replace`` also removes the keys it
        does not name.  Returns the changed keys."""
        try:
            root = parse_json(text)
        except JSONSyntaxError as error:
            raise InvalidInputError("invalidValue", "standard input is not JSON: %s" % error, text) from None
        if root.kind != OBJECT:
            raise InvalidInputError("invalidValue", "standard input is %s %s, not a JSON object"
                                    % ("an" if root.kind[0] in "aeiou" else "a", root.kind), text)
        values: Dict[str, Any] = {}
        for key, node in root.value:
            self.validate_key(key)
            try:
                values[key] = _decode(text, node)
            except _ValueProblem as problem:
                raise InvalidInputError("invalidValue", "value for key %s is not a property-list value in JSON: %s at "
                                        "byte %d" % (_contract.shown(key), problem.reason,
                                                     _byte_offset(text, problem.pos)), key) from None
        return self.load(values, replace=replace)

    def load(self, values: Mapping[str, Any], *, replace: bool = False) -> List[str]:
        """Write every key of ``values`` in one atomic write; ``replace`` also
        removes the keys it does not name.  Returns the changed keys."""
        texts: Dict[str, str] = {}
        for key, value in values.items():
            self.validate_key(key)
            if value is None:
                raise InvalidInputError("invalidValue", "value for key %s is None, which is not a property-list value "
                                        "(remove the key instead)" % _contract.shown(key), key)
            texts[key] = encode_value(value)

        def change(entries: Dict[str, str]) -> None:
            if replace:
                for key in list(entries):
                    if key not in texts:
                        del entries[key]
            entries.update(texts)

        _, changed, _ = self._transaction(change)
        return changed

    def repair(self) -> Optional[str]:
        """Move a suite file that is not one JSON object aside to
        ``<suite>.json.corrupt-<n>`` (never deleted) and start an empty suite.

        On a suite that reads, or none, nothing changes and ``None`` is
        returned; else the path it was moved to.
        """
        if not self.directory.exists():
            return None
        fd = self._open_lock()
        try:
            try:
                self._read_locked()
                return None
            except CorruptSuiteError:
                pass
            n = 1
            while True:
                target = self.directory / ("%s.json.corrupt-%d" % (self.suite, n))
                try:
                    os.link(self.path, target)
                    break
                except FileExistsError:
                    n += 1
            os.unlink(self.path)
            self._count_change()
            self._cache = None
            return str(target)
        finally:
            os.close(fd)

    # -- observing -------------------------------------------------------------

    def observe(self, keys: Optional[Iterable[str]], handler: Callable[[str, Any], None],
                center: Any = None) -> "DefaultsObserver":
        """Call ``handler(key, value)`` (value :data:`MISSING` when removed)
        for every change of ``keys`` (every key of the suite when ``None``).

        Built on :class:`wormhole_py.notify.NotificationCenter` (``center``,
        or a new one on this suite's bus): the handler runs in the center's
        main context when it is iterated; after a reconnect every observed
        key that changed meanwhile is delivered once.  Active when this returns.
        """
        return DefaultsObserver(self, None if keys is None else list(keys), handler, center)


class DefaultsObserver:
    """Delivers changes of a suite's keys, woken by their ``Posted`` signals
    (filtered by the bus daemon: two exact rules per key, or one ``arg0path``
    rule for the whole suite).  A burst of writes may arrive as one change
    carrying the latest value; a value equal to the one last delivered is not
    delivered again.  Made by :meth:`SharedDefaults.observe`; :meth:`cancel`
    stops it."""

    def __init__(self, defaults: SharedDefaults, keys: Optional[List[str]], handler: Callable[[str, Any], None],
                 center: Any) -> None:
        from .notify import NotificationCenter
        self.defaults = defaults
        self.handler = handler
        self.keys = keys
        names: Dict[str, str] = {}
        if keys is not None:
            for key in keys:
                defaults.validate_key(key)
                names[defaults.name_for(key)] = key
        self._own_center = center is None
        self.center = center if center is not None else NotificationCenter(defaults.bus_address)
        self._last: Dict[str, Any] = {}
        snapshot = defaults._read().entries
        for key in (keys if keys is not None else list(snapshot)):
            self._last[key] = _typed_key(_stored(snapshot.get(key)))
        self._observers = []
        if keys is None:
            self._observers.append(self.center.observe(defaults.prefix, self._on_post, prefix=True))
        else:
            for name in names:
                self._observers.append(self.center.observe(name, self._on_post))
        self._names = names

    def _on_post(self, notification: Any) -> None:
        if notification.reason == "catchUp":
            self._catch_up()
            return
        name = notification.name
        if self.keys is not None:
            key = self._names.get(name)
        else:
            key = name[len(self.defaults.prefix):] if name.startswith(self.defaults.prefix) else None
        if key:
            self._deliver(key)

    def _catch_up(self) -> None:
        try:
            entries = self.defaults._read().entries
        except WormholeError as error:
            self.on_error("", error)
            return
        keys = self.keys if self.keys is not None else sorted(set(entries) | set(self._last))
        for key in keys:
            self._deliver(key, entries.get(key))

    def _deliver(self, key: str, raw: Any = MISSING) -> None:
        if raw is MISSING:
            try:
                raw = self.defaults.raw(key)
            except WormholeError as error:
                self.on_error(key, error)
                return
        value = _stored(raw)
        typed = _typed_key(value)
        if self._last.get(key, _typed_key(MISSING)) == typed:
            return
        self._last[key] = typed
        self.handler(key, value)

    def on_error(self, key: str, error: WormholeError) -> None:
        """Called when the suite cannot be read for a change; by default one line on standard error."""
        import sys
        sys.stderr.write("wormhole: %s\n" % error)
        sys.stderr.flush()

    def cancel(self) -> None:
        """Stop delivering and remove the match rules (idempotent)."""
        for observer in self._observers:
            observer.cancel()
        self._observers = []
        if self._own_center:
            self.center.close()
            self._own_center = False
