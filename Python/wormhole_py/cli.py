"""``wormhole-py``: the Wormhole command line (contract section 4) in Python.

Same commands, lines and exit statuses as the Swift ``wormholectl`` tool:
0 success; 1 failure (bus unreachable for ``post``/``send --transient``, no
message); 64 bad input (the first line on standard error names the bad
value, a usage line follows; nothing is written or posted; groups,
directories and identifiers are refused before any bus connection); 124
when ``--timeout`` passes before ``--count`` deliveries; 128+N when ended
by signal N (SIGINT 130, SIGTERM 143, SIGHUP 129).  ``doctor`` and
``monitor`` are in the Swift tool only (exit 64).
"""

from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
from typing import Any, Callable, List, NoReturn, Optional

from . import __version__, _args, _cli_suggest, _json
from ._contract import (
    CONTRACT_VERSION,
    DEFAULT_DIRECTORY,
    MAX_STATE,
    TRANSIENT_LIMIT,
    shown,
    validate_directory,
    validate_group,
    validate_identifier,
    validate_name,
    validate_prefix,
)
from .errors import BusError, InvalidInputError, NotSentError, WormholeError

EX_OK = 0
EX_FAIL = 1
EX_USAGE = 64
EX_TIMEOUT = 124

__all__ = ["build_parser", "main"]


class UsageError(Exception):
    """Bad input found after parsing: exit 64 (or ``status``) with this line first."""

    def __init__(self, message: str, status: int = 64) -> None:
        super().__init__(message)
        self.status = status


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes exit 64 with the line naming the
    bad value first (``wormhole: …``), then the usage."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument ") and ": --" in message:
            message = message[message.index(": --") + 2:]  # the type's own line names the option
        elif message.startswith("unrecognized arguments: "):
            extra = message[len("unrecognized arguments: "):].split(" ")[0]
            message = ("unknown option %s" if extra.startswith("-") else "unexpected argument %s") % shown(extra)
        sys.stderr.write("wormhole: %s\n" % message)
        sys.stderr.write(self.format_usage())
        sys.stderr.flush()
        sys.exit(EX_USAGE)


# -- output -----------------------------------------------------------------------------------

def err(line: str) -> None:
    """Write ``wormhole: line`` on standard error."""
    sys.stderr.write("wormhole: %s\n" % line)
    sys.stderr.flush()


def ready() -> None:
    """The readiness line."""
    sys.stderr.write("ready\n")
    sys.stderr.flush()


class _PipeClosed(Exception):
    pass


def out(line: str) -> None:
    """Write one line on standard output, flushed; a closed pipe raises
    :class:`_PipeClosed` (the command then exits 0 quietly)."""
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except OSError:
            pass
        raise _PipeClosed() from None


def seconds_text(value: float) -> str:
    """A duration as the Swift tool prints it (``0.5``, ``1.0``)."""
    return repr(float(value))


# -- argument types -------------------------------------------------------------------------------

count_arg = _args.count
timeout_arg = _args.seconds


def state_arg(text: str) -> int:
    """``--state``: an integer 0 ... 2^64-1."""
    try:
        value = int(text, 10)
    except ValueError:
        value = None
    if value is None or value > MAX_STATE:
        raise argparse.ArgumentTypeError("--state must be an integer from 0 to 2^64-1, not '%s'" % text)
    if value < 0:
        raise argparse.ArgumentTypeError("--state must be 0 or more, not '%s'" % text)
    return value


# -- signals and the main loop ------------------------------------------------------------------------

class Runner:
    """The event loop of a long-running command: a GLib main loop with the
    ``gio`` transport, an asyncio loop with ``jeepney``
    (:func:`wormhole_py._wire.transport`).  SIGINT, SIGTERM and SIGHUP end
    it with 128+N, ``--timeout`` with 0 or 124, a closed output pipe with 0."""

    def __init__(self, count: Optional[int], timeout: Optional[float]) -> None:
        from ._wire import transport
        self.count = count
        self.timeout = timeout
        self.delivered = 0
        self.status = EX_OK
        self.started = False
        self.signal: Optional[int] = None
        self._stopped = False
        self._cleanup: List[Callable[[], None]] = []
        self.gio = transport() == "gio"
        if self.gio:
            from gi.repository import GLib

            from ._reactor import GLibReactor
            self.GLib = GLib
            context = GLib.MainContext.default()
            self.loop: Any = GLib.MainLoop.new(context, False)
            self.reactor: Any = GLibReactor(context)
            sources = [GLib.unix_signal_add(GLib.PRIORITY_HIGH, signum, self._on_signal, signum)
                       for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]

            def remove_sources() -> None:
                for source in sources:
                    if context.find_source_by_id(source) is not None:
                        GLib.source_remove(source)

            self._cleanup.append(remove_sources)
        else:
            import asyncio

            from ._reactor import AsyncioReactor
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            self.reactor = AsyncioReactor(self.loop)
            self._done = self.loop.create_future()
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self.loop.add_signal_handler(signum, self._on_signal, signum)
        self._deadline: Optional[float] = None
        if timeout is not None:
            import time
            self._deadline = time.monotonic() + timeout
            timer = self.reactor.call_later(timeout, self._on_timeout)
            self._cleanup.append(timer.cancel)

    def check_deadline(self) -> None:
        """After a connect that blocked: when ``--timeout`` passed meanwhile, end now (the timer
        has not run yet), so that nothing is printed after the time is up."""
        import time
        if self._deadline is not None and not self._stopped and time.monotonic() >= self._deadline:
            self._on_timeout()

    def subscribe(self, feed: Any, callback: Callable[[Any], None], on_error: Optional[Callable[[Any], None]],
                  on_connection_change: Optional[Callable[[bool, Optional[str], int], None]],
                  address: Optional[str], connect_timeout: float) -> Any:
        """Start the library's subscription for ``feed`` on this loop (the bus
        not required: without it, the kind's directory wakes it)."""
        from ._subscription import Subscription
        subscription = Subscription(self.reactor, feed, callback, on_error, on_connection_change)
        if self.gio:
            return subscription.start(address, False, connect_timeout)
        return self.loop.run_until_complete(subscription.start_async(address, False, connect_timeout))

    def _on_signal(self, signum: int) -> bool:
        self.signal = signum
        self.stop(128 + signum)
        return False

    def _on_timeout(self) -> None:
        if self._stopped:
            return
        if self.count is not None:
            if self.started:
                err("timed out after %s s before the requested count" % seconds_text(self.timeout or 0))
            else:
                err("timed out after %s s before listening started (the bus did not answer in time)"
                    % seconds_text(self.timeout or 0))
            self.stop(EX_TIMEOUT)
        else:
            if not self.started:
                # Said as the Swift tool says it: the command ends 0, but not silently.
                err("timed out after %s s before listening started (the bus did not answer in time)"
                    % seconds_text(self.timeout or 0))
            self.stop(EX_OK)

    def stop(self, status: int) -> None:
        """End the loop with ``status`` (the first stop wins)."""
        if self._stopped:
            return
        self._stopped = True
        self.status = status
        if self.gio:
            self.loop.quit()
        elif not self._done.done():
            self._done.set_result(None)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped

    def emit(self, line: str) -> None:
        """Print one delivery; stop after ``count``."""
        if self._stopped:
            return
        try:
            out(line)
        except _PipeClosed:
            self.stop(EX_OK)
            return
        self.delivered += 1
        if self.count is not None and self.delivered >= self.count:
            self.stop(EX_OK)

    def run(self) -> int:
        """Run until stopped; returns the exit status."""
        if not self._stopped:
            if self.gio:
                self.loop.run()
            else:
                self.loop.run_until_complete(self._done)
        return self.status

    def end(self) -> None:
        """After cleaning up: close the loop; a command ended by a signal
        exits with 128 + its number (130, 143, 129), as the Swift tool
        does: a normal end."""
        for cleanup in self._cleanup:
            cleanup()
        if not self.gio:
            import asyncio
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self.loop.remove_signal_handler(signum)
            # Let the cancelled readers finish (they close their sockets) before the loop goes.
            pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()
        if self.signal is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.exit(128 + self.signal)


# -- commands -------------------------------------------------------------------------------------------

def _read_document(args: argparse.Namespace) -> bytes:
    """The message (argument or standard input), refused over ``--max-size`` before anything is
    stored and, for standard input, without reading more than the limit and one byte."""
    limit: int = args.max_size
    if args.json is not None:
        text: str = args.json
        data = text.encode("utf-8", "surrogateescape").strip(b" \t\r\n")
        if len(data) > limit:
            raise UsageError("message %s is %d bytes, over the limit of %d bytes; raise the wormhole's maximum "
                             "message size (--max-size of the wormholectl tool) to pass it"
                             % (shown(args.identifier), len(data), limit), EX_FAIL)
        return data
    stdin = sys.stdin.buffer
    try:
        info = os.fstat(stdin.fileno())
    except (OSError, ValueError):
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise UsageError("message for %s on standard input is %d bytes, over the limit of %d bytes (raise it with "
                         "--max-size)" % (shown(args.identifier), info.st_size, limit), EX_FAIL)
    data = stdin.read(limit + 1)
    if len(data) > limit:
        raise UsageError("message for %s on standard input is more than %d bytes, over the limit of %d bytes (raise "
                         "it with --max-size)" % (shown(args.identifier), limit, limit), EX_FAIL)
    return data.strip(b" \t\r\n")  # JSON white space around the document is not stored, as the Swift tool does


def _wormhole(args: argparse.Namespace) -> Any:
    from ._contract import DEFAULT_MAX_MESSAGE_BYTES
    from .messages import MessageCenter
    return MessageCenter(args.group, args.directory, address=args.bus_address,
                         max_bytes=getattr(args, "max_size", DEFAULT_MAX_MESSAGE_BYTES))


def _validate_place(args: argparse.Namespace, identifiers: List[str]) -> None:
    validate_group(args.group)
    validate_directory(args.directory)
    for identifier in identifiers:
        validate_identifier(identifier)


def cmd_send(args: argparse.Namespace) -> int:
    """``send --group G [--directory D] ID [JSON]`` (also ``--journal``, ``--transient``)."""
    if args.journal and args.transient:
        raise UsageError("give --journal or --transient, not both")
    _validate_place(args, [args.identifier])
    if args.journal:
        from ._cli_journal import send_journal
        return send_journal(args.group, args.directory, args.identifier, args.json, bus_address=args.bus_address)
    data = _read_document(args)
    text = _json.validate_document(data, "message for %s" % shown(args.identifier), "invalidJSON")
    hole = _wormhole(args)
    if args.transient:
        compact = _json.compact(text)
        size = len(compact.encode("utf-8"))
        if size > TRANSIENT_LIMIT:
            raise UsageError("transient message for %s is %d bytes of compact JSON; the limit is %d bytes (64 KiB): "
                             "send it without --transient, which stores it" % (shown(args.identifier), size,
                                                                                TRANSIENT_LIMIT))
        try:
            hole.send_transient_json(args.identifier, compact)
        except NotSentError as error:
            err("cannot send transient message for %s: %s (a transient message is not stored, so nothing will be "
                "delivered)" % (shown(args.identifier), error))
            return EX_FAIL
        return EX_OK
    result = hole.send_json(args.identifier, text)
    if not result.notified:
        err("warning: message stored, but listeners were not notified on the bus (listeners without a bus see the "
            "file): %s" % result.error)
    return EX_OK


def cmd_read(args: argparse.Namespace) -> int:
    """``read --group G [--directory D] ID``: the stored document, as stored."""
    _validate_place(args, [args.identifier])
    from ._cli_suggest import absence
    from .errors import NoMessageError
    hole = _wormhole(args)
    try:
        text = hole.read_json(args.identifier)
    except NoMessageError:
        # Which part is missing, and the nearest name that exists: most "no message" reports are a typo.
        why = absence(hole, args.identifier)
        raise UsageError("no message is stored for %s in %s%s" % (shown(args.identifier), hole.path,
                                                                  ": " + why if why else ""), EX_FAIL) from None
    try:
        out(text[:-1] if text.endswith("\n") else text)  # one line, not two
    except _PipeClosed:
        pass
    return EX_OK


def cmd_clear(args: argparse.Namespace) -> int:
    """``clear --group G [--directory D] (ID | --all)``."""
    if args.all == (args.identifier is not None):
        raise UsageError("give an identifier or --all (not both)")
    _validate_place(args, [args.identifier] if args.identifier else [])
    hole = _wormhole(args)
    result = hole.clear_all() if args.all else hole.clear(args.identifier)
    if not result.notified:
        err("warning: cleared, but listeners were not notified on the bus (listeners without a bus see the file): %s"
            % result.error)
    return EX_OK


def cmd_post(args: argparse.Namespace) -> int:
    """``post NAME [--state N]``: exit 0 once the bus took it, else 1."""
    validate_name(args.name)
    from .bus import Bus
    try:
        bus = Bus.connect(args.bus_address)
    except BusError as error:
        err(str(error))
        return EX_FAIL
    try:
        bus.post(args.name, args.state)
        bus.confirm()
    except NotSentError as error:
        err("notification %s was not sent: %s" % (shown(args.name), error))
        return EX_FAIL
    return EX_OK


def _address_text(address: Optional[str]) -> str:
    from .bus import resolve_address
    try:
        return shown(resolve_address(address))
    except WormholeError:
        return "''"


def _connect_bound(timeout: Optional[float]) -> float:
    """Connecting gives up after 5 s, or sooner when ``--timeout`` is shorter."""
    from ._contract import CONNECT_TIMEOUT_SECONDS
    return CONNECT_TIMEOUT_SECONDS if timeout is None else max(0.001, min(CONNECT_TIMEOUT_SECONDS, timeout))


def cmd_observe(args: argparse.Namespace) -> int:
    """``observe NAME... | --all [--prefix] [--count N] [--timeout S]``."""
    if args.all == bool(args.names):
        raise UsageError("give names or --all (not both)")
    if args.all and args.prefix:
        raise UsageError("--all takes no names and no --prefix")
    for name in args.names:
        if args.prefix:
            if not name.endswith("/"):
                raise UsageError("prefix %s must end with '/'" % shown(name))
            validate_prefix(name)
        else:
            validate_name(name)
    from .notify import NotificationFeed
    runner = Runner(args.count, args.timeout)
    address = _address_text(args.bus_address)

    def on_note(note: Any) -> None:
        if note.reason != "posted":
            return
        state = "null" if note.state is None else str(note.state)
        runner.emit('{"name":%s,"state":%s,"reason":"posted"}' % (_json.dumps(note.name), state))

    def on_connection(up: bool, reason: Optional[str], _changed: int) -> None:
        if up and not runner.started:
            runner.started = True
            ready()
        elif up:
            err("back on the bus at %s; posts made while it was away were missed" % address)
        else:
            err("lost the bus at %s; waiting for it to come back" % address)

    feed = NotificationFeed(args.names, prefix=args.prefix, everything=args.all)
    subscription = runner.subscribe(feed, on_note, None, on_connection, args.bus_address,
                                    _connect_bound(args.timeout))
    runner.check_deadline()
    if subscription.connected and not runner.stopped:
        runner.started = True
        ready()
    elif not runner.stopped:
        err("%s; still trying: `ready` follows once the bus is back" % (subscription.bus_error or "no bus"))
    try:
        return runner.run()
    finally:
        subscription.cancel()
        runner.end()


def _identifier_list(path: str) -> List[str]:
    """The identifiers listed in ``path`` (``-``: standard input), one per line; blank lines are
    skipped."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as file:
                data = file.read()
    except OSError:
        raise UsageError("cannot read the identifier list %s" % shown(path)) from None
    lines = data.decode("utf-8", "replace").splitlines()
    return [line.strip(" \t") for line in lines if line.strip(" \t")]


def cmd_listen(args: argparse.Namespace) -> int:
    """``listen --group G [--directory D] ID... | --all [--stored] [--every-post]
    [--no-catch-unsignalled] [--count N] [--timeout S]`` (``--journal``: the journal)."""
    if args.identifiers_from is not None:
        args.identifiers = list(args.identifiers) + _identifier_list(args.identifiers_from)
    if args.all == bool(args.identifiers):
        raise UsageError("give identifiers or --all (not both)")
    _validate_place(args, list(args.identifiers))
    if args.journal:
        if args.all or len(args.identifiers) != 1:
            raise UsageError("listen --journal takes exactly one identifier")
        from ._cli_journal import listen_journal, parse_from
        start = parse_from(args.start) if args.start is not None else "end"
        return listen_journal(args.group, args.directory, args.identifiers[0], consumer=args.consumer, start=start,
                              count=args.count, timeout=args.timeout, bus_address=args.bus_address)
    if args.consumer is not None or args.start is not None:
        raise UsageError("--consumer and --from need --journal")
    from .messages import Delivery, DeliveryError, MailboxFeed
    runner = Runner(args.count, args.timeout)
    hole = _wormhole(args)
    address = _address_text(args.bus_address)
    queued: List[Delivery] = []
    started = [False]

    def on_delivery(delivery: Delivery) -> None:
        if not started[0]:
            queued.append(delivery)
            return
        runner.emit(delivery.line())

    def on_error(failure: DeliveryError) -> None:
        err("%s: %s" % (failure.identifier, failure.error))

    waiting = [False]

    def begin() -> None:
        runner.started = True
        ready()
        started[0] = True
        for delivery in queued:
            runner.emit(delivery.line())
        del queued[:]

    def on_connection(up: bool, reason: Optional[str], changed: int) -> None:
        if up and waiting[0]:
            waiting[0] = False
            begin()
        elif up:
            err("back on the bus at %s; caught up (%d message%s changed while it was away)"
                % (address, changed, "" if changed == 1 else "s"))
        else:
            err("lost the bus at %s; listening through the wormhole directory until it is back" % address)

    feed = MailboxFeed(hole, None if args.all else list(args.identifiers), args.stored,
                       not args.no_catch_unsignalled, args.every_post)
    hole._prepare()
    listener = runner.subscribe(feed, on_delivery, on_error, on_connection, args.bus_address,
                                _connect_bound(args.timeout))
    runner.check_deadline()
    if args.require_bus and not listener.connected:
        # --require-bus: `ready` waits for the bus (one line says so), instead of listening through
        # the wormhole directory; what arrives meanwhile is printed after it.
        waiting[0] = True
        if not runner.stopped:
            err("%s; still trying: `ready` follows once the bus is back" % (listener.bus_error or "no bus"))
    elif not runner.stopped:  # (--timeout may have passed while it connected: then not ready)
        begin()
        if listener.bus_error is not None:
            err("%s; listening through the wormhole directory (inotify) until the bus can be reached"
                % listener.bus_error)
    try:
        return runner.run()
    finally:
        listener.cancel()
        runner.end()


def cmd_swift_only(args: argparse.Namespace) -> int:
    """``doctor`` and ``monitor`` live in the Swift tool."""
    err("'%s' is in the Swift tool only: run 'wormholectl %s' (wormhole-py does not implement it)"
        % (args.command, args.command))
    return EX_USAGE


# -- the parser -------------------------------------------------------------------------------------------

def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bus-address", dest="bus_address", default=None, metavar="ADDRESS",
                        help="the D-Bus address (default: DBUS_SESSION_BUS_ADDRESS)")
    parser.add_argument("--log-level", dest="log_level", default=None, metavar="LEVEL",
                        help="accepted for compatibility with the Swift tool")


def _place(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", required=True, help="the app group identifier")
    parser.add_argument("--directory", default=DEFAULT_DIRECTORY, help="the wormhole directory (default: wormhole)")


IDENTIFIER_HELP = "the message identifier (1 to 200 bytes of A-Z a-z 0-9 . _ -)"


def _max_size(parser: argparse.ArgumentParser) -> None:
    from ._contract import DEFAULT_MAX_MESSAGE_BYTES
    parser.add_argument("--max-size", dest="max_size", type=_args.size, default=DEFAULT_MAX_MESSAGE_BYTES,
                        metavar="SIZE", help=_args.MAX_SIZE_HELP)


def build_parser() -> Parser:
    """The ``wormhole-py`` argument parser."""
    parser = Parser(prog="wormhole-py", description="Wormhole app-group messaging and Darwin-style notifications "
                    "over D-Bus (contract %s), in Python: the Swift tool's commands of contract section 4, with its "
                    "lines and exit statuses." % CONTRACT_VERSION,
                    epilog="Exit status: 0 success; 1 failure (bus unreachable or not answering, no message); 64 bad "
                    "input (the first line on standard error names the bad value; nothing is written or posted); 75 "
                    "a lock held elsewhere; 124 when --timeout passed before --count deliveries; 128+N when ended by "
                    "signal N (SIGINT 130, SIGTERM 143, SIGHUP 129). Environment: DBUS_SESSION_BUS_ADDRESS (the bus, "
                    "unless --bus-address); WORMHOLE_CONTAINER_ROOT, else XDG_DATA_HOME/group-containers, else "
                    "HOME/.local/share/group-containers (the group containers); WORMHOLE_APP_ID, FLATPAK_ID.")
    parser.add_argument("--version", action="version",
                        version="wormhole-py %s (contract %s)" % (__version__, CONTRACT_VERSION))
    commands = parser.add_subparsers(dest="command", metavar="<command>", parser_class=Parser)
    commands.required = True

    send = commands.add_parser("send", help="store a message and notify listeners")
    send.add_argument("identifier", help=IDENTIFIER_HELP)
    send.add_argument("json", nargs="?", default=None, help="the JSON message (default: read standard input)")
    send.add_argument("--journal", action="store_true", help="append to the identifier's journal instead")
    send.add_argument("--transient", action="store_true", help="send in the signal only (never stored; <= 64 KiB)")
    _place(send)
    _common(send)
    _max_size(send)
    send.set_defaults(func=cmd_send)

    read = commands.add_parser("read", help="print the stored message")
    read.add_argument("identifier", help=IDENTIFIER_HELP)
    _place(read)
    _common(read)
    _max_size(read)
    read.set_defaults(func=cmd_read)

    listen = commands.add_parser("listen", help="print one JSON line per delivery")
    listen.add_argument("identifiers", nargs="*", help="the message identifiers to listen to")
    listen.add_argument("--identifiers-from", dest="identifiers_from", default=None, metavar="FILE",
                        help="also listen to the identifiers in this file, one per line ('-': standard input)")
    listen.add_argument("--all", action="store_true", help="every mailbox of the wormhole")
    listen.add_argument("--stored", action="store_true", help="print the stored messages after ready")
    listen.add_argument("--every-post", dest="every_post", action="store_true", help="print on every post")
    listen.add_argument("--require-bus", dest="require_bus", action="store_true",
                        help="without a bus, wait for it before printing ready, instead of listening through the "
                        "wormhole directory")
    listen.add_argument("--no-catch-unsignalled", dest="no_catch_unsignalled", action="store_true",
                        help="do not watch the directory for renames that no post follows")
    listen.add_argument("--journal", action="store_true", help="listen to the identifier's journal")
    listen.add_argument("--consumer", default=None, help="(--journal) a durable consumer name")
    listen.add_argument("--from", dest="start", default=None, help="(--journal) start|end|SEQ")
    listen.add_argument("--count", type=count_arg, default=None, help=_args.COUNT_HELP)
    listen.add_argument("--timeout", type=timeout_arg, default=None, help=_args.TIMEOUT_HELP)
    _place(listen)
    _common(listen)
    _max_size(listen)
    listen.set_defaults(func=cmd_listen)

    clear = commands.add_parser("clear", help="empty a mailbox (or --all) and notify")
    clear.add_argument("identifier", nargs="?", default=None, help=IDENTIFIER_HELP)
    clear.add_argument("--all", action="store_true", help="remove every message of the wormhole")
    _place(clear)
    _common(clear)
    clear.set_defaults(func=cmd_clear)

    post = commands.add_parser("post", help="post one notification")
    post.add_argument("name", help="the notification name (1 to 900 bytes of UTF-8)")
    post.add_argument("--state", type=state_arg, default=None, metavar="N",
                      help="a 64-bit state to carry (like notify_set_state)")
    _common(post)
    post.set_defaults(func=cmd_post)

    observe = commands.add_parser("observe", help="print one JSON line per post")
    observe.add_argument("names", nargs="*", help="the names to observe (with --prefix: prefixes ending in '/')")
    observe.add_argument("--all", action="store_true", help="every post on the bus")
    observe.add_argument("--prefix", action="store_true", help="each NAME is a prefix ending in '/'")
    observe.add_argument("--count", type=count_arg, default=None, help=_args.COUNT_HELP)
    observe.add_argument("--timeout", type=timeout_arg, default=None, help=_args.TIMEOUT_HELP)
    _common(observe)
    observe.set_defaults(func=cmd_observe)

    listing = commands.add_parser("list", help="list the identifiers with a stored message, with their sizes and ages",
                                  description="One line per identifier, sorted: identifier, size in bytes, age. With "
                                  "--json, one JSON object per line instead: {\"identifier\":\"ID\",\"bytes\":N,"
                                  "\"modifiedAt\":T} (T in ns since 1970). A group container or directory that does "
                                  "not exist is an error that says which, and suggests the nearest existing one.")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    _place(listing)
    _common(listing)
    listing.set_defaults(func=_cli_suggest.cmd_list)

    try:
        from . import _cli_defaults
        _cli_defaults.register(commands)
    except ImportError:  # part of the package built separately
        pass
    try:
        from . import _cli_journal
        _cli_journal.register(commands)
    except ImportError:
        pass

    for name in ("doctor", "monitor"):
        swift_only = commands.add_parser(name, help="in the Swift tool only", add_help=False)
        swift_only.add_argument("rest", nargs=argparse.REMAINDER)
        swift_only.set_defaults(func=cmd_swift_only)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in ("doctor", "monitor"):
        return cmd_swift_only(argparse.Namespace(command=arguments[0]))
    # `--state -1` is the option's value (refused as negative), not an option.
    for index, value in enumerate(arguments[:-1]):
        if value in ("--state", "--timeout", "--count", "--by") and arguments[index + 1].startswith("-"):
            arguments[index] = "%s=%s" % (value, arguments[index + 1])
            del arguments[index + 1]
            break
    parser = build_parser()
    if not arguments:
        # The overview, as the Swift tool prints it with no arguments: not a mistake.
        parser.print_help()
        return EX_OK
    path = arguments[1:] if arguments[0] == "help" else arguments
    unknown = _cli_suggest.unknown_command(parser, path)
    if unknown is not None:
        err(unknown)
        return EX_USAGE
    if arguments[0] == "help":
        arguments = [*path, "--help"]
    args = parser.parse_args(arguments)
    try:
        status: int = args.func(args)
        return status
    except UsageError as error:
        err(str(error))
        return error.status
    except InvalidInputError as error:
        err(str(error))
        return EX_USAGE
    except WormholeError as error:
        if error.code in ("invalidJSON", "transientTooLarge", "encodingFailed"):
            err(str(error))
            return EX_USAGE
        if error.code == "lockTimeout":
            err(str(error))
            return 75  # EX_TEMPFAIL: another process holds the lock; trying again later may work
        err(str(error))
        return EX_FAIL
    except KeyboardInterrupt:
        # A normal end with 128 + SIGINT, as the Swift tool's.
        sys.stdout.flush()
        return 128 + signal.SIGINT


def run() -> None:
    """The console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
