"""``wormhole-py journal stat|check|trim``, and the journal halves of
``send --journal`` and ``listen --journal`` (called by the package CLI).

Lines and exit statuses follow the Swift tool's: ``stat`` and ``trim`` print
one JSON object (``identifier first last records bytes segments consumers
[badConsumers] damaged``, ``trim`` adds ``removed``); ``check`` prints the
same object, one line per damaged range on standard error, and exits 0 when
whole, 1 when damaged, 2 on other errors; bad arguments exit 64 with the bad
value named on the first line.

``listen --journal`` writes ``ready`` on standard error once its match rules
are active, then ``{"identifier":"ID","sequence":N,"message":<the record>}``
per record in order, and one line on standard error per range it cannot
deliver (``wormhole: records A..B …``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Union

from . import _args, _contract
from .errors import InvalidInputError, WormholeError

EX_USAGE = 64
EX_TIMEOUT = 124

__all__ = ["listen_journal", "main", "parse_from", "register", "send_journal"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes exit 64 with ``wormhole: …`` first."""

    def error(self, message: str) -> "None":  # type: ignore[override]
        sys.stderr.write("wormhole: %s\n" % message)
        sys.stderr.write(self.format_usage())
        sys.exit(EX_USAGE)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _err(line: str) -> None:
    sys.stderr.write("wormhole: %s\n" % line)
    sys.stderr.flush()


_count = _args.whole_number
_seconds = _args.seconds


def parse_from(text: str) -> Union[str, int]:
    """A ``--from`` argument: ``start``, ``end`` or a sequence number (1 or more)."""
    if text in ("start", "end"):
        return text
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError("'%s' is not start, end or a sequence number" % text) from None
    if value < 1 or value > 2 ** 64 - 2:
        raise argparse.ArgumentTypeError("sequence number '%s' must be 1 to 2^64-2" % text)
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("identifier", help="The message identifier.")
    parser.add_argument("--group", required=True, help="The application group identifier.")
    parser.add_argument("--directory", default=_contract.DEFAULT_DIRECTORY,
                        help="The wormhole directory inside the group container (default: wormhole).")
    parser.add_argument("--bus-address", dest="bus_address", default=None,
                        help="The D-Bus address to use (default: DBUS_SESSION_BUS_ADDRESS).")
    parser.add_argument("--log-level", dest="log_level", default=None, help="Accepted for compatibility.")


def register(subparsers: Any) -> Any:
    """Add ``journal stat|check|trim`` to ``subparsers``; each leaf sets
    ``func`` to a handler ``func(args) -> int`` (the exit status)."""
    journal = subparsers.add_parser("journal", help="Inspect and trim an identifier's journal.")
    commands = journal.add_subparsers(dest="journal_command", metavar="<subcommand>")
    commands.required = True
    stat = commands.add_parser("stat", help="Print one JSON object: first, last, records, bytes, segments and each "
                               "consumer's cursor.")
    _common(stat)
    stat.set_defaults(func=cmd_stat)
    check = commands.add_parser("check", help="Read every frame; print the damaged ranges; exit 0 when whole, 1 "
                                "when damaged.")
    _common(check)
    check.set_defaults(func=cmd_check)
    trim = commands.add_parser("trim", help="Remove whole segments, oldest first (never the last), by the limits "
                               "given.")
    _common(trim)
    from ._cli_defaults import parse_size
    trim.add_argument("--max-bytes", dest="max_bytes", type=parse_size, default=None,
                      help="Keep at most this many bytes: bytes, or a number with K, M or G.")
    trim.add_argument("--max-age", dest="max_age", type=_seconds, default=None,
                      help="Remove segments whose newest record is older than this many seconds.")
    trim.add_argument("--max-records", dest="max_records", type=_count, default=None,
                      help="Keep at most this many records.")
    trim.set_defaults(func=cmd_trim)
    return journal


def _journal(args: argparse.Namespace, **options: Any) -> Any:
    from .journal import Journal
    return Journal(args.group, args.identifier, args.directory, bus_address=args.bus_address, **options)


def cmd_stat(args: argparse.Namespace) -> int:
    """``journal stat``: one JSON object; exit 0 (1 on errors)."""
    try:
        journal = _journal(args)
        _print(_dumps(journal.stat()))
        return 0
    except InvalidInputError as error:
        _err(str(error))
        return EX_USAGE
    except WormholeError as error:
        _err(str(error))
        return 1
    except OSError as error:
        _err("cannot read the journal: %s" % error)
        return 1


def cmd_check(args: argparse.Namespace) -> int:
    """``journal check``: the stat object, a line per damaged range; 0 whole, 1 damaged, 2 errors."""
    try:
        journal = _journal(args)
        out = journal.stat()
    except InvalidInputError as error:
        _err(str(error))
        return EX_USAGE
    except (WormholeError, OSError) as error:
        _err(str(error))
        return 2
    _print(_dumps(out))
    for gap in out["damaged"]:
        detail = (" (%s)" % gap["detail"]) if gap.get("detail") else ""
        _err("records %d..%d of journal '%s': %s, file %s%s"
             % (gap["from"], gap["to"], args.identifier, gap["reason"], gap["file"], detail))
    if out["damaged"]:
        _err("journal '%s' has %d damaged range(s)" % (args.identifier, len(out["damaged"])))
        return 1
    return 0


def cmd_trim(args: argparse.Namespace) -> int:
    """``journal trim``: remove whole old segments; print the status with ``removed``."""
    try:
        journal = _journal(args)
        removed = journal.trim(args.max_bytes, args.max_age, args.max_records)
        out = journal.stat()
        out["removed"] = removed
        _print(_dumps(out))
        return 0
    except InvalidInputError as error:
        _err(str(error))
        return EX_USAGE
    except (WormholeError, OSError) as error:
        _err(str(error))
        return 1


# --------------------------------------------------------------------------
# send --journal / listen --journal
# --------------------------------------------------------------------------


def send_journal(group: str, directory: str, identifier: str, document: Optional[str],
                 bus_address: Optional[str] = None) -> int:
    """``send --journal``: append one record (the JSON argument, or standard
    input when ``None``); exit 0 once appended (a line says so when the post
    did not go out), 64 for bad input, 1 when it cannot be appended."""
    from ._plist import JSONSyntaxError, decode_utf8, parse_json
    from .journal import Journal
    try:
        journal = Journal(group, identifier, directory, bus_address=bus_address)
    except InvalidInputError as error:
        _err(str(error))
        return EX_USAGE
    if document is None:
        data = sys.stdin.buffer.read()
    else:
        data = document.encode("utf-8", "surrogatepass")
    data = data.strip(b" \t\r\n")  # JSON white space around the value is not part of the record
    try:
        parse_json(decode_utf8(data))
    except JSONSyntaxError as error:
        _err("the message for %s is not JSON: %s" % (_contract.shown(identifier), error))
        return EX_USAGE
    from ._journal_format import MAX_RECORD
    if len(data) > MAX_RECORD:
        # Refused before anything is stored, as the Swift tool does (contract 1.4 section 4).
        _err("record for journal %s is %d bytes, over the maximum record size of %d bytes; nothing was appended"
             % (_contract.shown(identifier), len(data), MAX_RECORD))
        return EX_USAGE
    try:
        journal.append(data)
    except InvalidInputError as error:
        _err(str(error))
        return EX_USAGE
    except (WormholeError, OSError) as error:
        _err(str(error))
        return 1
    if journal.last_post_error is not None:
        _err("warning: record appended, but the notification was not sent: %s" % journal.last_post_error)
    return 0


def _gap_line(identifier: str, gap: Any, path: str) -> str:
    if gap.reason == "retention":
        return ("records %d..%d of journal '%s' were removed by retention; going on at record %d"
                % (gap.first, gap.last, identifier, gap.last + 1))
    what = {
        "checksum": "a frame of segment file '%s' has a bad checksum" % os.path.join(path, gap.file),
        "truncated": "segment file '%s' is truncated" % os.path.join(path, gap.file),
        "missing": "segment file '%s' is missing" % os.path.join(path, gap.file),
        "foreign": "segment file '%s' is not a segment Wormhole wrote" % os.path.join(path, gap.file),
    }.get(gap.reason, "segment file '%s'" % os.path.join(path, gap.file))
    detail = (" (%s)" % gap.detail) if gap.detail else ""
    return ("records %d..%d of journal '%s' cannot be read (%s): %s%s; going on at the next readable record "
            "(see docs/journal-format.md, 'Damage')" % (gap.first, gap.last, identifier, gap.reason, what, detail))


def listen_journal(group: str, directory: str, identifier: str, consumer: Optional[str] = None,
                   start: Union[str, int] = "end", count: Optional[int] = None, timeout: Optional[float] = None,
                   bus_address: Optional[str] = None) -> int:
    """``listen --journal``: ``ready``, then one line per record in order.

    Exit 0 after ``count`` records (or at the timeout without a count), 124
    at the timeout with a count, 1 when the consumer is in use or the bus
    cannot be reached, 64 for bad input.  A closed output pipe exits 0.
    """
    from ._journal_format import Gap, JournalError, compact_json, validate_consumer
    from .journal import Journal
    try:
        journal = Journal(group, identifier, directory, bus_address=bus_address)
        if consumer is not None:
            validate_consumer(consumer)
        if isinstance(start, str) and start not in ("start", "end"):
            start = parse_from(start)
    except (InvalidInputError, argparse.ArgumentTypeError) as error:
        _err(str(error))
        return EX_USAGE
    from ._journal_reader import JournalFeed
    from .cli import Runner, _connect_bound
    try:
        feed = JournalFeed(journal.reader(start, consumer))
    except JournalError as error:
        _err(str(error))
        return 1
    except WormholeError as error:
        _err(str(error))
        return EX_USAGE if isinstance(error, InvalidInputError) else 1
    runner = Runner(count, timeout)
    holder: Dict[str, Any] = {}

    def on_item(item: Any) -> None:
        if isinstance(item, Gap):
            _err(_gap_line(identifier, item, str(journal.path)))
            return
        runner.emit('{"identifier":%s,"sequence":%d,"message":%s}'
                    % (_dumps(identifier), item.sequence, compact_json(item.text)))
        if runner.stopped and "subscription" in holder:
            holder["subscription"].cancel()

    def on_error(failure: Any) -> None:
        _err(str(failure.error))

    def on_connection(up: bool, reason: Optional[str], _changed: int) -> None:
        if up:
            sys.stderr.write("wormhole: back on the bus; records appended meanwhile were delivered\n")
        else:
            sys.stderr.write("wormhole: lost the bus (%s); listening through the journal directory until it "
                             "is back\n" % (reason or "disconnected"))
        sys.stderr.flush()

    feed.hold()  # records already there are delivered after `ready`
    try:
        subscription = runner.subscribe(feed, on_item, on_error, on_connection, bus_address, _connect_bound(timeout))
    except BaseException:
        feed.close()
        raise
    holder["subscription"] = subscription
    runner.started = True
    sys.stderr.write("ready\n")
    sys.stderr.flush()
    if subscription.bus_error is not None:
        _err("%s; listening through the journal directory (inotify) until the bus can be reached"
             % subscription.bus_error)
    feed.release()
    try:
        return runner.run()
    finally:
        subscription.cancel()
        runner.end()


def main(argv: Optional[List[str]] = None) -> int:
    """Run alone: ``python3 -m wormhole_py._cli_journal stat ID --group G``;
    also ``send ID [JSON] --group G`` and ``listen ID --group G [--consumer C]
    [--from F] [--count N] [--timeout S]`` for tests without the package CLI."""
    parser = _Parser(prog="wormhole-py")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>")
    subparsers.required = True
    register(subparsers)
    send = subparsers.add_parser("send")
    send.add_argument("identifier")
    send.add_argument("json", nargs="?")
    send.add_argument("--group", required=True)
    send.add_argument("--directory", default=_contract.DEFAULT_DIRECTORY)
    send.add_argument("--bus-address", dest="bus_address")
    listen = subparsers.add_parser("listen")
    listen.add_argument("identifier")
    listen.add_argument("--group", required=True)
    listen.add_argument("--directory", default=_contract.DEFAULT_DIRECTORY)
    listen.add_argument("--consumer")
    listen.add_argument("--from", dest="start", type=parse_from, default="end")
    from ._cli_defaults import _positive_count
    from ._cli_defaults import _seconds as seconds
    listen.add_argument("--count", type=_positive_count)
    listen.add_argument("--timeout", type=seconds)
    listen.add_argument("--bus-address", dest="bus_address")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["stat"], ["check"], ["trim"]):
        argv = ["journal", *argv]
    args = parser.parse_args(argv)
    if args.command == "send":
        return send_journal(args.group, args.directory, args.identifier, args.json, args.bus_address)
    if args.command == "listen":
        return listen_journal(args.group, args.directory, args.identifier, args.consumer, args.start, args.count,
                              args.timeout, args.bus_address)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
