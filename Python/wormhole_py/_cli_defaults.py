"""``wormhole-py defaults read|write|delete|increment|load|repair|observe``.

The same lines and exit statuses as the Swift tool's ``wormholectl defaults``:
0 success; 1 failure (no such key, a suite that does not parse, a value that
is not an integer, a suite over its limit); 3 a compare-and-set that found
another value (the stored value on standard error first); 64 bad input, the
first line on standard error naming the bad value; 124 when ``observe``'s
``--timeout`` passed before ``--count`` changes.

:func:`register` adds the ``defaults`` command to the package CLI's
subparsers; :func:`main` runs it alone (``python3 -m wormhole_py._cli_defaults``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, List, Optional

from . import _args, _contract
from .errors import InvalidInputError, WormholeError

EX_USAGE = 64
EX_EXPECT = 3
EX_TIMEOUT = 124

__all__ = ["EX_USAGE", "main", "parse_size", "register"]


class UsageError(Exception):
    """A bad argument: exit 64 with this message as the first line."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes exit 64 with ``wormhole: …`` first."""

    def error(self, message: str) -> "None":  # type: ignore[override]
        sys.stderr.write("wormhole: %s\n" % message)
        sys.stderr.write(self.format_usage())
        sys.exit(EX_USAGE)


def _fail(message: str, status: int = 1) -> int:
    sys.stderr.write("wormhole: %s\n" % message)
    sys.stderr.flush()
    return status


parse_size = _args.size


def _integer(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError("'%s' is not an integer" % text) from None
    if not -(2 ** 63) <= value < 2 ** 63:
        raise argparse.ArgumentTypeError("'%s' does not fit a signed 64-bit integer" % text)
    return value


_positive_count = _args.count
_seconds = _args.seconds


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", required=True, help="The application group identifier.")
    parser.add_argument("--suite", help="The suite (default: the group identifier).")
    parser.add_argument("--bus-address", dest="bus_address", default=None,
                        help="The D-Bus address to use (default: DBUS_SESSION_BUS_ADDRESS).")
    parser.add_argument("--log-level", dest="log_level", default=None, help="Accepted for compatibility.")


def register(subparsers: Any) -> Any:
    """Add ``defaults`` and its subcommands to ``subparsers``; each leaf
    sets ``func`` to a handler ``func(args) -> int`` (the exit status)."""
    defaults = subparsers.add_parser("defaults", help="Read, write and observe the app group's shared defaults suite.",
                                     description="Values are JSON in the suite file's format: 1 is an Int, 1.0 a "
                                     "Double, {\"$date\":SECONDS}, {\"$data\":\"BASE64\"} and {\"$url\":\"URL\"} tag "
                                     "the other types.")
    commands = defaults.add_subparsers(dest="defaults_command", metavar="<subcommand>")
    commands.required = True

    read = commands.add_parser("read", help="Print a value as one line of compact JSON (the whole suite without KEY).")
    read.add_argument("key", nargs="?", help="the key to print (default: the whole suite as one JSON object)")
    read.add_argument("--keys", action="store_true", help="Print the suite's keys, one JSON string per line.")
    _common(read)
    read.set_defaults(func=cmd_read)

    write = commands.add_parser("write", help="Store a JSON value for a key and notify observers.")
    write.add_argument("key", help="the key to write")
    write.add_argument("json", nargs="?", help="the JSON value (default: read standard input)")
    write.add_argument("--expect", default=None, help="Write only if the stored value equals this JSON value.")
    write.add_argument("--expect-absent", dest="expect_absent", action="store_true",
                       help="Write only if the key has no value.")
    write.add_argument("--max-bytes", dest="max_bytes", type=parse_size, default=None,
                       help="Refuse a write that leaves the suite larger than this (default 4M).")
    _common(write)
    write.set_defaults(func=cmd_write)

    delete = commands.add_parser("delete", help="Remove a key and notify observers.")
    delete.add_argument("key", help="the key to remove")
    _common(delete)
    delete.set_defaults(func=cmd_delete)

    increment = commands.add_parser("increment", help="Add N (default 1) to an integer under the suite's lock and "
                                    "print the new value.")
    increment.add_argument("key", help="the key holding an integer (absent: 0)")
    increment.add_argument("--by", type=_integer, default=1, help="The amount to add (may be negative: --by -3).")
    increment.add_argument("--max-bytes", dest="max_bytes", type=parse_size, default=None,
                           help="refuse a suite larger than this: bytes, or a number with K, M or G")
    _common(increment)
    increment.set_defaults(func=cmd_increment)

    load = commands.add_parser("load", help="Write every key of one JSON object read on standard input in one "
                               "atomic write.")
    load.add_argument("--replace", action="store_true", help="Also remove every key the object does not name.")
    load.add_argument("--max-bytes", dest="max_bytes", type=parse_size, default=None,
                           help="refuse a suite larger than this: bytes, or a number with K, M or G")
    _common(load)
    load.set_defaults(func=cmd_load)

    repair = commands.add_parser("repair", help="Move a suite file that is not one JSON object aside and start an "
                                 "empty suite.")
    _common(repair)
    repair.set_defaults(func=cmd_repair)

    observe = commands.add_parser("observe", help="Print one JSON line per change of the keys.")
    observe.add_argument("keys", nargs="*", help="the keys to observe (default: every key)")
    observe.add_argument("--count", type=_positive_count, default=None, help=_args.COUNT_HELP)
    observe.add_argument("--timeout", type=_seconds, default=None, help=_args.TIMEOUT_HELP)
    _common(observe)
    observe.set_defaults(func=cmd_observe)
    return defaults


# --------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------


def _open(args: argparse.Namespace, post: bool = True) -> Any:
    from .defaults import DEFAULT_MAX_BYTES, GroupDefaults
    max_bytes = getattr(args, "max_bytes", None) or DEFAULT_MAX_BYTES
    return GroupDefaults(args.group, args.suite, bus_address=args.bus_address, max_bytes=max_bytes, post=post)


def _guard(body: Callable[[], int]) -> int:
    """Run a handler body, turning errors into the documented statuses."""
    from .defaults import ExpectationFailed
    try:
        return body()
    except ExpectationFailed as error:
        sys.stdout.flush()
        sys.stderr.write((error.stored if error.stored is not None else "null") + "\n")
        return _fail(str(error), EX_EXPECT)
    except UsageError as error:
        return _fail(str(error), EX_USAGE)
    except InvalidInputError as error:
        return _fail(str(error), EX_USAGE)
    except WormholeError as error:
        # 75 (EX_TEMPFAIL): another process holds the lock; trying again later may work.
        return _fail(str(error), 75 if error.code == "lockTimeout" else 1)
    except BrokenPipeError:
        _quiet_stdout()
        return 0


def _timed_out(count: Optional[int], timeout: float) -> None:
    if count:
        sys.stderr.write("wormhole: timed out after %.1f s before the requested count\n" % timeout)
        sys.stderr.flush()


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except OSError:
        pass


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _validate(args: argparse.Namespace, keys: List[str]) -> Any:
    """Validate group, suite and keys before anything is touched."""
    defaults = _open(args)
    for key in keys:
        if key == "":
            raise UsageError("key '' is empty; a key is 1 or more bytes of UTF-8")
        defaults.validate_key(key)
    return defaults


def _value_text(args: argparse.Namespace) -> str:
    if args.json is not None:
        text: str = args.json
        return text
    data = sys.stdin.buffer.read()
    from ._plist import JSONSyntaxError, decode_utf8
    try:
        return decode_utf8(data)
    except JSONSyntaxError as error:
        raise UsageError("value for key %s is not a property-list value in JSON: %s"
                         % (_contract.shown(args.key), error)) from None


def _decode(key: str, text: str, what: str = "value for key") -> Any:
    from ._plist import decode_json_value
    try:
        return decode_json_value(text)
    except InvalidInputError as error:
        message = "%s %s is not a property-list value in JSON: %s" % (what, _contract.shown(key), error)
        stripped = text.strip()
        if stripped and not stripped.startswith(("{", "[", '"', "-")) and not stripped[:1].isdigit() \
                and stripped not in ("true", "false"):
            message += "; to store the string %s, quote it for the shell: '\"%s\"'" % (stripped, stripped)
        raise UsageError(message) from None


def _warn_post(defaults: Any, what: str = "value stored") -> None:
    if defaults.last_post_error is not None:
        sys.stderr.write("wormhole: warning: %s, but observers were not notified: %s\n"
                         % (what, defaults.last_post_error))


def cmd_read(args: argparse.Namespace) -> int:
    """``defaults read``: one compact JSON line; exit 1 when the key is absent."""
    def body() -> int:
        if args.keys and args.key is not None:
            raise UsageError("--keys lists every key; give no KEY with it")
        defaults = _validate(args, [args.key] if args.key is not None else [])
        if args.keys:
            from ._plist import encode_string
            for key in defaults.keys():
                _print(encode_string(key))
            return 0
        if args.key is None:
            _print(defaults.dump_json())
            return 0
        text = defaults.json(args.key)
        if text is None:
            return _fail("no value for key %s in suite %s (%s)" % (_contract.shown(args.key),
                                                                  _contract.shown(defaults.suite), defaults.path))
        _print(text)
        return 0
    return _guard(body)


def cmd_write(args: argparse.Namespace) -> int:
    """``defaults write KEY [JSON] [--expect JSON | --expect-absent]``."""
    from ._plist import MISSING

    def body() -> int:
        if args.expect is not None and args.expect_absent:
            raise UsageError("--expect and --expect-absent cannot be used together")
        defaults = _validate(args, [args.key])
        value = _decode(args.key, _value_text(args))
        expected = _decode(args.key, args.expect, "expected value for key") if args.expect is not None else MISSING
        defaults.set(args.key, value, expect=expected, expect_absent=args.expect_absent)
        _warn_post(defaults)
        return 0
    return _guard(body)


def cmd_delete(args: argparse.Namespace) -> int:
    """``defaults delete KEY``: exit 0 whether or not it had a value."""
    def body() -> int:
        defaults = _validate(args, [args.key])
        defaults.delete(args.key)
        _warn_post(defaults, "key removed")
        return 0
    return _guard(body)


def cmd_increment(args: argparse.Namespace) -> int:
    """``defaults increment KEY [--by N]``: prints the new value."""
    def body() -> int:
        defaults = _validate(args, [args.key])
        value = defaults.increment(args.key, args.by)
        _print(str(value))
        _warn_post(defaults)
        return 0
    return _guard(body)


def cmd_load(args: argparse.Namespace) -> int:
    """``defaults load [--replace]``: one JSON object on standard input, one atomic write."""
    from ._plist import OBJECT, JSONSyntaxError, _ValueProblem, decode_utf8, parse_json
    from ._plist import _decode as decode_node

    def body() -> int:
        defaults = _validate(args, [])
        data = sys.stdin.buffer.read()
        try:
            text = decode_utf8(data)
            root = parse_json(text)
        except JSONSyntaxError as error:
            raise UsageError("the input is not one JSON object of values: %s" % error) from None
        if root.kind != OBJECT:
            raise UsageError("the input is not one JSON object of values: the input is not a JSON object at byte 0")
        values = {}
        for key, node in root.value:
            if key == "":
                raise UsageError("key '' is empty; a key is 1 or more bytes of UTF-8")
            defaults.validate_key(key)
            if node.kind == "null":
                raise UsageError("value for key %s (null) is refused: null is not a storable value (use 'wormhole-py "
                                 "defaults delete')" % _contract.shown(key))
            try:
                values[key] = decode_node(text, node)
            except _ValueProblem as problem:
                raise UsageError("value for key %s is not a property-list value in JSON: %s"
                                 % (_contract.shown(key), problem.reason)) from None
        defaults.load(values, replace=args.replace)
        _warn_post(defaults, "suite stored")
        return 0
    return _guard(body)


def cmd_repair(args: argparse.Namespace) -> int:
    """``defaults repair``: move a suite that does not parse aside; print where."""
    def body() -> int:
        from ._plist import encode_string
        defaults = _validate(args, [])
        moved = defaults.repair()
        if moved is not None:
            _print('{"movedTo":%s}' % encode_string(moved))
            sys.stderr.write("wormhole: '%s' was not one JSON object; moved aside to '%s'\n" % (defaults.path, moved))
        return 0
    return _guard(body)


def cmd_observe(args: argparse.Namespace) -> int:
    """``defaults observe [KEY...] [--count N] [--timeout S]``: ``ready`` on
    standard error, then one line per change."""
    def body() -> int:
        defaults = _validate(args, list(args.keys))
        from ._defaults_feed import DefaultsFeed
        from ._plist import MISSING, encode_string, encode_value
        from .cli import Runner, _connect_bound
        runner = Runner(args.count, args.timeout)

        def on_change(change: Any) -> None:
            key, value = change
            if value is MISSING:
                runner.emit('{"key":%s,"value":null,"removed":true}' % encode_string(key))
            else:
                runner.emit('{"key":%s,"value":%s}' % (encode_string(key), encode_value(value)))

        def on_error(failure: Any) -> None:
            sys.stderr.write("wormhole: %s\n" % failure.error)
            sys.stderr.flush()

        def on_connection(up: bool, reason: Optional[str], _changed: int) -> None:
            if up:
                sys.stderr.write("wormhole: back on the bus; changes made meanwhile were delivered\n")
            else:
                sys.stderr.write("wormhole: lost the bus (%s); waiting for it to come back\n"
                                 % (reason or "disconnected"))
            sys.stderr.flush()

        feed = DefaultsFeed(defaults, list(args.keys) or None)
        subscription = runner.subscribe(feed, on_change, on_error, on_connection, args.bus_address,
                                        _connect_bound(args.timeout))
        runner.started = True
        sys.stderr.write("ready\n")
        sys.stderr.flush()
        if subscription.bus_error is not None:
            sys.stderr.write("wormhole: %s; listening through the Preferences directory (inotify) until the bus can "
                             "be reached\n" % subscription.bus_error)
            sys.stderr.flush()
        try:
            return runner.run()
        finally:
            subscription.cancel()
            runner.end()
    return _guard(body)


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``defaults …`` alone: ``python3 -m wormhole_py._cli_defaults read --group G``."""
    parser = _Parser(prog="wormhole-py")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>")
    subparsers.required = True
    register(subparsers)
    arguments = ["defaults", *(sys.argv[1:] if argv is None else argv)]
    args = parser.parse_args(arguments)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
