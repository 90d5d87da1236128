#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the code blocks of a Markdown file that are marked for a check.

    Tests/doc-blocks.py FILE MARKER [--commands]

A block is marked when the line before its opening fence is `<!-- MARKER -->`; every such
block's lines are printed in order (Tests/install.sh: `install`, Tests/snippets.sh: `session`,
Tests/debian-root.sh: `session`, `python-listener`, `gjs-listener`). With --commands, blank
lines and lines that are only a comment are left out (each remaining line is one command).
Exits 1, saying so, when the file has no block with that marker.
"""
import sys


def blocks(path: str, marker: str, commands: bool) -> list[str]:
    lines = open(path, encoding="utf-8").read().split("\n")
    out: list[str] = []
    inside = False
    for i, line in enumerate(lines):
        if not inside and line.strip().startswith("```") and i > 0 and lines[i - 1].strip() == "<!-- %s -->" % marker:
            inside = True
        elif inside and line.strip() == "```":
            inside = False
        elif inside and not (commands and (not line.strip() or line.lstrip().startswith("#"))):
            out.append(line)
    return out


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--commands"]
    if len(arguments) != 2:
        sys.exit("usage: doc-blocks.py FILE MARKER [--commands]")
    found = blocks(arguments[0], arguments[1], "--commands" in sys.argv)
    if not found:
        sys.exit("doc-blocks: %s has no block marked <!-- %s -->" % (arguments[0], arguments[1]))
    print("\n".join(found))
