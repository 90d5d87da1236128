# SPDX-License-Identifier: Apache-2.0
"""Argument types shared by the command line's modules (``argparse`` ``type=`` callables).

Each refuses a bad value with an :class:`argparse.ArgumentTypeError` that names the value; the
command line turns it into one line and exit 64.
"""

import argparse
import re


def whole_number(text: str, minimum: int = 0) -> int:
    """A decimal integer of at least ``minimum``."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError("must be an integer, not '%s'" % text) from None
    if value < minimum:
        raise argparse.ArgumentTypeError("must be at least %d, not %s" % (minimum, text))
    return value


def count(text: str) -> int:
    """``--count``: an integer of at least 1."""
    return whole_number(text, 1)


def seconds(text: str) -> float:
    """``--timeout`` and other durations: a finite number of seconds, at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds, not '%s'" % text) from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("must be 0 or more seconds, not '%s'" % text)
    return value


_SIZE = re.compile(r"([0-9]+)(g|gib|m|mib|k|kib)?\Z", re.IGNORECASE)


def size(text: str) -> int:
    """``--max-size`` and other sizes: bytes, or a number with K, M or G (KiB, MiB, GiB; ``KiB``,
    ``MiB``, ``GiB`` and lower case too), at least 1."""
    match = _SIZE.match(text)
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError("'%s' is not a size (bytes, or a number with K, M or G)" % text)
    unit = (match.group(2) or "")[:1].lower()
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[unit]


def size_text(value: int) -> str:
    """A size as the option takes it: ``64M``, ``512K``, ``1000``."""
    for unit, bits in (("G", 30), ("M", 20), ("K", 10)):
        if value % (1 << bits) == 0:
            return "%d%s" % (value >> bits, unit)
    return str(value)


# The help of the options several commands share (the Swift tool's words).
COUNT_HELP = ("exit 0 after this many lines of output (posts, messages, changes or signals, as the command "
              "prints them)")
TIMEOUT_HELP = "give up after this many seconds: exit 124 if --count was given, 0 if not"
MAX_SIZE_HELP = ("refuse a message larger than this: bytes, or a number with K, M or G (KiB, MiB, GiB) "
                 "(default: 64M)")
