# SPDX-License-Identifier: Apache-2.0
"""The shared defaults' value format (contract section 5): a lossless JSON
reader and the property-list codec (internal; :mod:`wormhole_py.defaults`
exports the value types).

The reader records where each value's JSON text starts and ends, so a
suite is rebuilt from the texts of the keys that did not change:
``1e400``, ``-0``, ``1.50`` and 30-digit integers stay exactly as written.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import re
from dataclasses import dataclass
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from typing import Any, Dict, List, Mapping, Optional, Tuple, cast

from . import _contract
from .errors import InvalidInputError

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


def _ws(text: str, pos: int) -> "re.Match[str]":
    """The whitespace at ``pos`` (always matches, maybe empty)."""
    return cast("re.Match[str]", _WS.match(text, pos))
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_LITERALS = (("true", TRUE), ("false", FALSE), ("null", NULL))


class Node:
    """One JSON value of a parsed text: ``kind``, the span ``start:end`` of its
    text (character indices), and ``value``: the decoded string of a string,
    the list of child nodes of an array, the list of ``(key, node)`` pairs of
    an object (duplicates included, in order), ``None`` otherwise."""

    __slots__ = ("end", "kind", "start", "value")

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
        return cast("Tuple[str, int]", _scanstring(text, pos + 1, True))
    except json.JSONDecodeError as error:
        raise _syntax(text, "invalid string (%s)" % error.msg.lower(), error.pos) from None


def parse_json(text: str, max_depth: int = MAX_DEPTH) -> Node:
    """Parse one RFC 8259 JSON text (surrounding whitespace allowed) into nodes.

    Iterative, so nesting up to ``max_depth`` costs no recursion; deeper
    nesting, trailing text, ``NaN`` and every other departure from RFC 8259 is
    a :class:`JSONSyntaxError` naming the byte offset.
    """
    n = len(text)
    ws = _ws
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
                inside = "an object" if top.kind == OBJECT else "an array"
                raise _syntax(text, "unexpected end of the text inside %s" % inside, pos)
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
    pos = _ws(text, pos).end()
    if pos >= len(text) or text[pos] != ":":
        raise _syntax(text, "expected ':' after a key", pos)
    keys.append(key)
    return _ws(text, pos + 1).end()


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
    ws = _ws
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
    return bool(_typed_key(a) == _typed_key(b))


def canonical_json(raw: str) -> str:
    """How ``defaults read`` prints a stored value's text: re-encoded compactly
    when understood, as stored when it is an unknown value."""
    node = parse_json(raw)
    value = _stored_value(raw, node)
    if isinstance(value, UnknownValue):
        return value.json
    return encode_value(value)



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
    return bool(_typed_key(_stored(a)) == _typed_key(_stored(b)))


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
