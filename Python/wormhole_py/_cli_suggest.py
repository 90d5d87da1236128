"""What the command line suggests after a mistake, as the Swift tool does: the nearest command for
a mistyped one, the nearest group, directory or identifier for a wormhole with nothing stored
there, and ``list`` (the stored identifiers with their sizes and ages)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any, List, Optional, Sequence

from . import _json

__all__ = ["absence", "cmd_list", "edit_distance", "nearest", "unknown_command"]


def edit_distance(a: str, b: str) -> int:
    """The Levenshtein distance between two strings, in code points."""
    if not a or not b:
        return max(len(a), len(b))
    previous = list(range(len(b) + 1))
    for i, left in enumerate(a, 1):
        current = [i]
        for j, right in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (left != right)))
        previous = current
    return previous[-1]


def nearest(word: str, candidates: Sequence[str]) -> Optional[str]:
    """The candidate nearest to ``word`` when it is near enough to be a typo of it (at most 2 edits,
    or a third of the word's length for long words); the first in sorted order on a tie."""
    limit = max(2, len(word) // 3)
    best: Optional[str] = None
    best_distance = limit + 1
    for candidate in sorted(candidates):
        if candidate == word:
            continue
        distance = edit_distance(word, candidate)
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best


def _entries(path: Path) -> List[str]:
    try:
        return [name for name in os.listdir(path) if not name.startswith(".")]
    except OSError:
        return []


def absence(hole: Any, identifier: Optional[str] = None) -> Optional[str]:
    """Why the wormhole ``hole`` has nothing to show: the first part of its path that is missing
    (container, then directory) with the nearest existing group or directory; or, for
    ``identifier``, the nearest stored identifier.  ``None`` when the directory exists and no
    identifier was asked for."""
    container = hole.root / hole.group
    if not os.path.lexists(container):
        text = ("the group container %s does not exist (nothing was ever stored for group '%s' under %s)"
                % (container, hole.group, hole.root))
        near = nearest(hole.group, _entries(hole.root))
        return text + ("; did you mean --group %s?" % near if near else "")
    if not os.path.lexists(hole.path):
        text = ("the directory %s does not exist (nothing was ever stored in directory '%s')"
                % (hole.path, hole.directory))
        near = nearest(hole.directory, [name for name in _entries(container) if name != "Preferences"])
        return text + ("; did you mean --directory %s?" % near if near else "")
    if identifier is None:
        return None
    stored: List[str] = hole.identifiers()
    near = nearest(identifier, stored)
    if near:
        return "did you mean '%s'?" % near
    if not stored:
        return "the wormhole holds no messages"
    which = "" if hole.directory == "wormhole" else " --directory %s" % hole.directory
    count = "1 identifier is" if len(stored) == 1 else "%d identifiers are" % len(stored)
    return "%s stored: wormholectl list --group %s%s" % (count, hole.group, which)


def _age(seconds: float) -> str:
    """A short age: ``12 s``, ``5 min``, ``3 h``, ``2 d`` (a file from the future is ``0 s``)."""
    whole = int(max(0.0, seconds))
    if whole < 120:
        return "%d s" % whole
    if whole < 7200:
        return "%d min" % (whole // 60)
    if whole < 172800:
        return "%d h" % (whole // 3600)
    return "%d d" % (whole // 86400)


def cmd_list(args: argparse.Namespace) -> int:
    """``list --group G [--directory D] [--json]``: one line per stored identifier, sorted."""
    from .cli import UsageError, _validate_place, _wormhole, out
    _validate_place(args, [])
    hole = _wormhole(args)
    missing = absence(hole)
    if missing is not None:
        raise UsageError(missing, 1)
    rows = []
    for identifier in hole.identifiers():
        try:
            info = os.lstat(hole.path / (identifier + ".json"))
        except OSError:  # removed since the listing: not shown
            continue
        rows.append((identifier, info.st_size, max(0, info.st_mtime_ns)))
    if args.json:
        for identifier, size, modified in rows:
            out('{"identifier":%s,"bytes":%d,"modifiedAt":%d}' % (_json.dumps(identifier), size, modified))
        return 0
    width = max((len(row[0]) for row in rows), default=0)
    size_width = max((len(str(row[1])) for row in rows), default=0)
    now = time.time()
    for identifier, size, modified in rows:
        out("%s  %s B  %s" % (identifier.ljust(width), str(size).rjust(size_width), _age(now - modified / 1e9)))
    return 0


def unknown_command(parser: argparse.ArgumentParser, path: Sequence[str], walked: str = "wormhole-py") -> Optional[str]:
    """The error for the first of ``path`` (command names, as after ``wormhole-py``) that is not a
    command, with the nearest command; ``None`` when every name is one (or an option is reached)."""
    for name in path:
        if name.startswith("-"):
            return None
        actions = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        if not actions:
            return None
        choices = actions[0].choices
        if name not in choices:
            names = list(choices)
            near = nearest(name, names)
            hint = " Did you mean '%s'?" % near if near else ""
            return ("'%s' has no command '%s'.%s Commands: %s.\n  See '%s --help' for more information."
                    % (walked, name, hint, ", ".join(names), walked))
        parser = choices[name]
        walked += " " + name
    return None
