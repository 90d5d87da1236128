# SPDX-License-Identifier: Apache-2.0
"""JSON validation that keeps the text exactly as written (internal).

Mailbox documents are validated, never re-serialised: numbers such as
``1e400`` or long integers stay as the sender wrote them.  ``compact``
removes insignificant whitespace for one-line output without touching
strings or numbers.
"""

from __future__ import annotations

import json
from typing import Any, Union

from .errors import MessageFormatError

__all__ = ["compact", "dumps", "loads", "validate_document"]

BOM = b"\xef\xbb\xbf"


def _reject_constant(value: str) -> Any:
    raise ValueError("%s is not JSON" % value)


def validate_document(data: Union[bytes, str], what: str = "message", code: str = "invalidJSON") -> str:
    """Check that ``data`` is one RFC 8259 JSON text in UTF-8 without a BOM
    and return it as ``str`` (unchanged).

    :raises MessageFormatError: naming ``what`` and the problem (a BOM,
        invalid UTF-8 with its byte offset, a JSON error with its offset).
    """
    if isinstance(data, str):
        if data.startswith("\ufeff"):
            raise MessageFormatError(code, "%s starts with a byte-order mark, which is refused" % what, what)
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError as error:
            raise MessageFormatError(code, "%s is not valid UTF-8 (a lone surrogate at character %d)"
                                     % (what, error.start), what) from None
        text = data
    else:
        raw = bytes(data)
        if raw.startswith(BOM):
            raise MessageFormatError(code, "%s starts with a byte-order mark (EF BB BF), which is refused" % what, what)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise MessageFormatError(code, "%s is not valid UTF-8 (byte 0x%02X at offset %d)"
                                     % (what, raw[error.start], error.start), what) from None
    try:
        json.loads(text, parse_float=str, parse_int=str, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise MessageFormatError(code, "%s is not a JSON document (%d bytes): %s at byte %d"
                                 % (what, len(raw), error.msg, len(text[:error.pos].encode("utf-8"))),
                                 what) from None
    except ValueError as error:
        raise MessageFormatError(code, "%s is not a JSON document (%d bytes): %s" % (what, len(raw), error),
                                 what) from None
    except RecursionError:
        raise MessageFormatError(code, "%s is nested too deeply to read" % what, what) from None
    return text


_WHITESPACE = frozenset(" \t\r\n")


def compact(text: str) -> str:
    """``text`` (valid JSON) without whitespace outside strings."""
    if not any(ch in text for ch in _WHITESPACE):
        return text
    out = []
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch in _WHITESPACE:
            continue
        else:
            if ch == '"':
                in_string = True
            out.append(ch)
    return "".join(out)


def dumps(value: Any) -> str:
    """Compact JSON of a Python value (no NaN/Infinity; UTF-8, ``/`` unescaped)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise MessageFormatError("encodingFailed", "the value cannot be written as JSON: %s" % error,
                                 repr(value)[:80]) from None


def loads(text: str) -> Any:
    """Decode a validated document into Python values (floats may round;
    use the text to keep numbers exact)."""
    return json.loads(text)
