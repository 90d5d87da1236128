"""Shared defaults: the app group's settings suite (contract 1.4, section 5).

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

import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union, cast

from . import _contract
from ._closing import Posting
from ._defaults_feed import Change, ObservingDefaults
from ._deprecated import container_root_keyword, renamed
from ._plist import (
    _INT_MAX,
    _INT_MIN,
    DEFAULT_MAX_BYTES,
    MISSING,
    OBJECT,
    URL,
    Date,
    JSONSyntaxError,
    UnknownValue,
    _byte_offset,
    _decode,
    _same,
    _stored,
    _typed_key,
    _ValueProblem,
    canonical_json,
    decode_json_value,
    decode_utf8,
    describe_type,
    encode_string,
    encode_value,
    object_spans,
    parse_json,
    serialise,
)
from ._suite_file import SuiteFile, _Suite
from ._wire import transport
from .bus import Bus
from .errors import (
    CorruptSuiteError,
    DefaultsError,
    ExpectationFailed,
    InvalidInputError,
    StorageError,
    WormholeError,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MISSING",
    "URL",
    "Change",
    "CorruptSuiteError",
    "Date",
    "DefaultsError",
    "ExpectationFailed",
    "GroupDefaults",
    "SharedDefaults",
    "UnknownValue",
]

#: Containers nested deeper than this are refused (the contract asks for at least 64).
# --------------------------------------------------------------------------
# The suite on disk
# --------------------------------------------------------------------------

PREFERENCES = _contract.PREFERENCES_DIRECTORY
validate_suite = _contract.validate_suite
key_name = _contract.key_name
validate_key = _contract.validate_key


class GroupDefaults(SuiteFile, ObservingDefaults, Posting):
    """The shared defaults suite of an app group (``UserDefaults(suiteName:)``
    across processes, contract section 5); Swift's ``GroupDefaults``
    (``SharedDefaults`` before 2.0, still accepted with a
    :class:`DeprecationWarning`).

    :param group: the application group identifier.
    :param suite: the suite name (default: the group identifier).
    :param container_root: the container root (default: contract section 2);
        ``root=`` is accepted as its deprecated spelling.
    :param bus_address: the bus to post on (default ``DBUS_SESSION_BUS_ADDRESS``).
    :param max_bytes: the suite's size limit for writes (default 4 MiB).
    :param bus: an existing :class:`wormhole_py.bus.Bus` to post on.
    :param post: ``False`` to write without posting (nothing is notified).

    Reads never change the disk.  Every write holds the suite lock around its
    read-modify-rename and posts each changed key afterwards; a bus that
    cannot be reached never fails a write (see :attr:`last_post_error`).
    """

    def __init__(self, group: str, suite: Optional[str] = None, *, container_root: "Optional[os.PathLike[str]]" = None,
                 bus_address: Optional[str] = None, max_bytes: int = DEFAULT_MAX_BYTES, bus: Any = None,
                 post: bool = True, root: "Optional[os.PathLike[str]]" = None) -> None:
        from . import container as _container
        given_root = container_root_keyword(container_root, root, "GroupDefaults")
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
        self.container = _container.container_path(group, None if given_root is None else Path(given_root))
        self.directory = self.container / PREFERENCES
        self.path = self.directory / (suite + ".json")
        self.lock_path = self.directory / (suite + ".json.lock")
        self.changes_path = self.directory / (suite + ".json.changes")
        self.bus_address = bus_address
        self._bus = bus
        self._own_bus = bus is None
        self._async: Any = None
        self._deferred: Optional[List[Tuple[List[str], int]]] = None
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
        repair = "wormholectl defaults repair --group %s" % self.group
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
        return cast("Optional[int]", self._typed(key, int, "an Int", default))

    def double(self, key: str, default: Optional[float] = None) -> Optional[float]:
        """A Double value."""
        return cast("Optional[float]", self._typed(key, float, "a Double", default))

    def boolean(self, key: str, default: Optional[bool] = None) -> Optional[bool]:
        """A Bool value."""
        return cast("Optional[bool]", self._typed(key, bool, "a Bool", default))

    def string(self, key: str, default: Optional[str] = None) -> Optional[str]:
        """A String value."""
        return cast("Optional[str]", self._typed(key, str, "a String", default))

    def data(self, key: str, default: Optional[bytes] = None) -> Optional[bytes]:
        """A Data value."""
        return cast("Optional[bytes]", self._typed(key, bytes, "a Data", default))

    def date(self, key: str, default: Optional[Date] = None) -> Optional[Date]:
        """A Date value."""
        return cast("Optional[Date]", self._typed(key, Date, "a Date", default))

    def url(self, key: str, default: Optional[URL] = None) -> Optional[URL]:
        """A URL value."""
        return cast("Optional[URL]", self._typed(key, URL, "a URL", default))

    def _transaction(self, change: Callable[[Dict[str, str]], Any], growing: bool = True) -> Tuple[Any, List[str], int]:
        """Run ``change`` on the entries under the suite lock; when it changed
        any key's typed value, write, count and (after unlocking) post.

        ``change`` edits the dict in place and returns a result.  Returns
        ``(result, changed keys, generation)``; nothing is written when no key
        changed.
        """
        if self._post_enabled and self._bus is None:
            transport()  # a missing D-Bus library is refused before anything is written
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
                raise DefaultsError("suiteTooLarge", "the suite %s would be %d bytes, over its limit of %d bytes; "
                                    "nothing was written" % (_contract.shown(self.suite), size, self.max_bytes), size)
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
        if self._deferred is not None:
            self._deferred.append((keys, generation))
            return
        try:
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
                raise DefaultsError("typeMismatch", "key %s holds the integer %d; adding %d overflows a signed 64-bit "
                                    "Int; nothing changed" % (_contract.shown(key), current, by), key)
            entries[key] = str(result)
            return result

        result, _, _ = self._transaction(change)
        return int(result)

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


class SharedDefaults(GroupDefaults):
    """Deprecated: :class:`GroupDefaults`, the name Swift uses (2.0).  Works
    as before and warns; it goes in the next release."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        renamed("wormhole_py.SharedDefaults", "GroupDefaults")
        super().__init__(*args, **kwargs)
