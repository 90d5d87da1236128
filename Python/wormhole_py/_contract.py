# SPDX-License-Identifier: Apache-2.0
"""Constants and validation rules of the Wormhole contract (version 1.4).

Everything here is pure Python (no GLib): the FNV-1a bucket interface
(section 1), match-rule quoting, and the name / group / directory /
identifier rules (sections 1 and 2).  Every refusal raises
:class:`~wormhole_py.errors.InvalidInputError` whose message names the bad
value and whose ``code`` is the contract's reason.
"""

from __future__ import annotations

import operator
import threading
import time
import unicodedata
from typing import Optional, SupportsIndex, cast

from .errors import InvalidInputError

CONTRACT_VERSION = "1.4"
OBJECT_PATH = "/org/wormhole/Notify1"
PLAIN_INTERFACE = "org.wormhole.Notify1"
BUCKET_PREFIX = "org.wormhole.Notify1.B"
POSTED = "Posted"
MESSAGE = "Message"

MAX_NAME_BYTES = 900
MAX_RULE_BYTES = 1024
MAX_GROUP_BYTES = 255
MAX_DIRECTORY_BYTES = 255
MAX_IDENTIFIER_BYTES = 200
MAX_STATE = 2**64 - 1
TRANSIENT_LIMIT = 64 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_DIRECTORY = "wormhole"
PREFERENCES_DIRECTORY = "Preferences"
#: A rename onto ``I.json`` with no ``Posted`` within this many seconds is a catch-up (v1.3).
UNSIGNALLED_GRACE_SECONDS = 0.5
#: A temporary file whose flock is free and older than this belongs to a killed writer.
STALE_TEMP_SECONDS = 600
#: Bound of every one-shot command and of a send's wait for the bus (section 4).
ONE_SHOT_BOUND_SECONDS = 15.0
#: How long connecting may take before a one-shot command gives up.
CONNECT_TIMEOUT_SECONDS = 5.0

_ALLOWED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
ALLOWED_DESCRIPTION = "A-Z a-z 0-9 . _ -"


def fnv1a32(data: "bytes | str") -> int:
    """Return the 32-bit FNV-1a hash of ``data`` (a ``str`` is hashed as UTF-8).

    >>> hex(fnv1a32("a"))
    '0xe40c292c'
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    value = 0x811C9DC5
    for byte in data:
        value ^= byte
        value = (value * 0x01000193) & 0xFFFFFFFF
    return value


def bucket_interface(name: str) -> str:
    """Return the bucket interface a Wormhole sender uses for ``name``.

    >>> bucket_interface("com.example.app.refresh")
    'org.wormhole.Notify1.BE6A2'
    """
    return "%s%04X" % (BUCKET_PREFIX, fnv1a32(name) & 0xFFFF)


def quote_rule_value(value: str) -> str:
    """Quote a match-rule value: ``'...'`` with each ``'`` written ``'\\''``."""
    return "'" + value.replace("'", "'\\''") + "'"


def exact_rule(name: str, interface: str, member: str = POSTED) -> str:
    """The match rule for signal ``member`` with ``arg0`` = ``name`` on ``interface``."""
    return "type='signal',interface=%s,member=%s,arg0=%s" % (
        quote_rule_value(interface), quote_rule_value(member), quote_rule_value(name))


def prefix_rule(prefix: str) -> str:
    """The match rule observing every name below ``prefix`` (which ends in ``/``)."""
    return "type='signal',path=%s,member=%s,arg0path=%s" % (
        quote_rule_value(OBJECT_PATH), quote_rule_value(POSTED), quote_rule_value(prefix))


def all_rule() -> str:
    """The match rule observing every ``Posted`` on the bus, whatever its name."""
    return "type='signal',path=%s,member=%s" % (quote_rule_value(OBJECT_PATH), quote_rule_value(POSTED))


def shown(value: object, limit: int = 256) -> str:
    """``value`` in single quotes for an error message, invisible characters escaped."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    text = str(value)
    out = ["'"]
    for index, char in enumerate(text):
        if index == limit:
            out.append("\u2026")
            break
        if char == "\0":
            out.append("\\0")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif char == "\\":
            out.append("\\\\")
        elif char == "'":
            out.append("\\'")
        elif char == " ":
            out.append(" ")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"):
            out.append("\\u{%X}" % ord(char))
        else:
            out.append(char)
    out.append("'")
    return "".join(out)


def _utf8(value: object, kind: str, code: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidInputError(code, "%s %s is not a string" % (kind, shown(repr(value))), value)
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(code, "%s %s is not valid UTF-8 (it holds a lone surrogate)"
                                % (kind, shown(value)), value) from None


def validate_name(name: str) -> str:
    """Check a notification name (section 1) and return it.

    A name is 1 to 900 bytes of UTF-8 without NUL whose exact-name match rule
    (each ``'`` spelled ``'\\''``) fits the daemon's 1024 bytes.
    """
    raw = _utf8(name, "notification name", "invalidName")
    if not raw:
        raise InvalidInputError("invalidName", "notification name is empty (it must be 1 to 900 bytes)", name)
    if len(raw) > MAX_NAME_BYTES:
        raise InvalidInputError(
            "invalidName", "notification name %s\u2026 is %d bytes, longer than the limit of %d"
            % (shown(name[:40]), len(raw), MAX_NAME_BYTES), name)
    if b"\0" in raw:
        raise InvalidInputError("invalidName", "notification name %s contains a NUL byte" % shown(name), name)
    rule_length = len(exact_rule(name, bucket_interface(name)).encode("utf-8"))
    if rule_length > MAX_RULE_BYTES:
        raise InvalidInputError(
            "invalidName", "notification name %s\u2026 cannot be observed: its match rule would be %d bytes, "
            "and the bus daemon accepts at most %d (each ' in a name takes 4 bytes there)"
            % (shown(name[:40]), rule_length, MAX_RULE_BYTES), name)
    return name


def validate_prefix(prefix: str) -> str:
    """Check a prefix for prefix observation: a valid name ending in ``/``."""
    validate_name(prefix)
    if not prefix.endswith("/"):
        raise InvalidInputError("invalidName", "prefix %s does not end in '/'" % shown(prefix), prefix)
    return prefix


def validate_component(value: str, kind: str, code: str, maximum: int) -> str:
    """Check a file-name component (group, directory, identifier, suite): 1 to
    ``maximum`` bytes of ``A-Z a-z 0-9 . _ -``, not starting with ``.``."""
    raw = _utf8(value, kind, code)
    if not raw:
        raise InvalidInputError(code, "%s %s is empty; it must be 1 to %d bytes of %s"
                                % (kind, shown(value), maximum, ALLOWED_DESCRIPTION), value)
    if len(raw) > maximum:
        raise InvalidInputError(code, "%s %s is %d bytes long, over the limit of %d bytes"
                                % (kind, shown(value), len(raw), maximum), value)
    for char in value:
        if char not in _ALLOWED:
            raise InvalidInputError(
                code, "%s %s contains %s (U+%04X), which is not allowed (allowed: %s)"
                % (kind, shown(value), shown(char), ord(char), ALLOWED_DESCRIPTION), value)
    if value.startswith("."):
        raise InvalidInputError(
            code, "%s %s starts with '.', which is not allowed (names starting with '.' are reserved "
            "for hidden, temporary and lock files)" % (kind, shown(value)), value)
    return value


def validate_group(group: str) -> str:
    """Check a group identifier (section 2)."""
    return validate_component(group, "group identifier", "invalidGroup", MAX_GROUP_BYTES)


def validate_directory(directory: str) -> str:
    """Check a wormhole directory name (section 2; ``Preferences`` is reserved, section 5)."""
    validate_component(directory, "directory", "invalidDirectory", MAX_DIRECTORY_BYTES)
    if directory == PREFERENCES_DIRECTORY:
        raise InvalidInputError(
            "invalidDirectory", "directory %s is reserved for shared defaults" % shown(directory), directory)
    return directory


def validate_identifier(identifier: str) -> str:
    """Check a message identifier (section 2: 1 to 200 bytes)."""
    return validate_component(identifier, "identifier", "invalidIdentifier", MAX_IDENTIFIER_BYTES)


def validate_state(state: object) -> Optional[int]:
    """Check a state given to a post: ``None`` or an integer 0 ... 2**64-1.

    Any integer type is accepted (``int``, numpy-like types with
    ``__index__``); ``bool`` and negative or non-integer values are refused.
    """
    if state is None:
        return None
    if isinstance(state, bool) or not hasattr(state, "__index__"):
        raise InvalidInputError("invalidValue", "state %s is not an integer" % shown(repr(state)), state)
    value = operator.index(cast("SupportsIndex", state))
    if value < 0 or value > MAX_STATE:
        raise InvalidInputError("invalidValue", "state must be 0 to 2^64-1, not %s" % shown(str(value)), state)
    return value


def received_state(value: object) -> Optional[int]:
    """Interpret a received ``state`` argument: a non-negative integer of any
    D-Bus integer type, else ``None`` (v1.2: a negative or non-integer state is
    no state; the post is still delivered)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if value < 0 or value > MAX_STATE:
        return None
    return value


def mailbox_name(group: str, directory: str, identifier: str) -> str:
    """The notification name of a mailbox: ``<group>/<directory>/<identifier>``."""
    return "%s/%s/%s" % (group, directory, identifier)


_state_lock = threading.Lock()
_last_state = 0


def write_state() -> int:
    """A state for a write: the wall clock in ns since 1970 (so a listener's
    ``sentAt``), strictly increasing within this process."""
    global _last_state
    with _state_lock:
        now = time.time_ns()
        if now <= _last_state:
            now = _last_state + 1
        _last_state = now
        return now


# -- shared defaults (section 5) ---------------------------------------------------------

def validate_suite(suite: str) -> str:
    """Check a suite name: the identifier rules (1 to 200 bytes of ``A-Z a-z 0-9 . _ -``, no leading ``.``)."""
    return validate_component(suite, "suite", "invalidSuite", MAX_IDENTIFIER_BYTES)


def key_name(group: str, suite: str, key: str) -> str:
    """The notification name of a key: ``<group>/Preferences/<suite>/<key>``."""
    return "%s/%s/%s/%s" % (group, PREFERENCES_DIRECTORY, suite, key)


def validate_key(group: str, suite: str, key: str) -> str:
    """Check a key: 1 or more bytes of UTF-8 without NUL whose notification name is a valid name."""
    if not isinstance(key, str):
        raise InvalidInputError("invalidKey", "key %r is not a string" % (key,), key)
    if key == "":
        raise InvalidInputError("invalidKey", "key '' is empty (a key is 1 or more bytes of UTF-8 without NUL)", key)
    if "\0" in key:
        raise InvalidInputError("invalidKey", "key %s contains a NUL byte" % shown(key), key)
    try:
        validate_name(key_name(group, suite, key))
    except InvalidInputError as error:
        raise InvalidInputError("invalidKey", "key %s is not usable: %s" % (shown(key[:64]), error),
                                key) from None
    return key
