"""Argument types shared by the command line's modules (``argparse`` ``type=`` callables).

Each refuses a bad value with an :class:`argparse.ArgumentTypeError` that names the value; the
command line turns it into one line and exit 64.
"""

import argparse


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
