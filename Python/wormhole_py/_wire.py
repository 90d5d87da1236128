# SPDX-License-Identifier: Apache-2.0
"""Which D-Bus library carries the package's connections (internal).

Two transports implement the same small interface (emit a signal, call the
bus, receive signals, learn that the connection closed):

* ``gio``: PyGObject's ``Gio.DBusConnection`` (Debian's ``python3-gi``);
  its callbacks run in a GLib main context, which GTK applications iterate.
* ``jeepney``: jeepney, a pure-Python D-Bus library from the Python
  registry (Debian's ``python3-jeepney``); blocking sends and asyncio.

Blocking sends and the command line use ``gio`` when PyGObject imports and
``jeepney`` otherwise; ``WORMHOLE_PY_TRANSPORT=gio|jeepney`` chooses.  The
asyncio API always runs on jeepney, the GLib callback API always on Gio.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable, Tuple

from .errors import BusError

__all__ = ["CallFailed", "SignalHandler", "has", "require", "transport"]

#: ``(interface, member, signature, body)``
SignalHandler = Callable[[str, str, str, Tuple[Any, ...]], None]

_INSTALL = {
    "gio": "PyGObject (Debian: apt-get install python3-gi gir1.2-glib-2.0)",
    "jeepney": "jeepney (pip install jeepney; Debian: apt-get install python3-jeepney)",
}
_MODULE = {"gio": "gi", "jeepney": "jeepney"}


class CallFailed(Exception):
    """A call the bus did not answer (``timed_out``) or answered with an error."""

    def __init__(self, timed_out: bool, message: str) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def has(name: str) -> bool:
    """Whether transport ``name``'s library is importable."""
    return importlib.util.find_spec(_MODULE[name]) is not None


def require(name: str, what: str) -> None:
    """Raise the one clear error when ``name``'s library is missing.

    :raises BusError: (``transportMissing``) naming what to install.
    """
    if not has(name):
        raise BusError("transportMissing", "%s needs %s, which is not installed in %s"
                       % (what, _INSTALL[name], _interpreter()), name)


def transport() -> str:
    """The transport of blocking sends and the command line: ``WORMHOLE_PY_TRANSPORT``
    if set, else ``gio`` when PyGObject imports, else ``jeepney``.

    :raises BusError: (``transportMissing``) neither library is installed, or
        the chosen one is not.
    """
    chosen = os.environ.get("WORMHOLE_PY_TRANSPORT", "")
    if chosen:
        if chosen not in _MODULE:
            raise BusError("transportMissing", "WORMHOLE_PY_TRANSPORT=%s is not a transport: use gio or jeepney"
                           % chosen, chosen)
        require(chosen, "WORMHOLE_PY_TRANSPORT=%s" % chosen)
        return chosen
    for name in ("gio", "jeepney"):
        if has(name):
            return name
    raise BusError("transportMissing", "wormhole_py reaches D-Bus through jeepney or PyGObject, and %s has "
                   "neither: pip install jeepney (or apt-get install python3-jeepney, or python3-gi "
                   "gir1.2-glib-2.0 for GLib main-loop callbacks)" % _interpreter(), "")


def _interpreter() -> str:
    import sys
    return "this Python (%s)" % sys.executable
