#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The shape of the Swift sources (issue 31, docs/architecture.md *Files*): the lines of every
file under Sources/, and of every type with its extensions (a nested type counts toward the
type it is nested in; an extension of `A.B` toward `A.B`).

    scripts/shape.py                 report the files and types over the limits
    scripts/shape.py --check         fail when a file or type is over its limit and not in the
                                     allowance (scripts/shape-allowance.txt), or over its
                                     allowed size there; say when an allowance can shrink

The allowance lists what is over today, each with the size it may not grow past: it only ever
shrinks, and an empty allowance is the goal.
"""
import os
import re
import sys

FILE_LIMIT = 450
TYPE_LIMIT = 600
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ALLOWANCE = os.path.join(ROOT, "scripts", "shape-allowance.txt")

DECLARATION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|open|final|indirect)\s+)*"
    r"(class|struct|enum|actor|protocol|extension)\s+([A-Za-z_][\w.]*)")


def swift_files():
    for directory, _, names in os.walk(os.path.join(ROOT, "Sources")):
        for name in sorted(names):
            if name.endswith(".swift"):
                yield os.path.join(directory, name)


def measure():
    files, types = {}, {}
    for path in swift_files():
        lines = open(path, encoding="utf-8").read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        relative = os.path.relpath(path, ROOT)
        files[relative] = len(lines)
        # A top-level declaration runs from its doc comment to the `}` in column 0 that closes it.
        start = None
        comment_start = None
        name = None
        for index, line in enumerate(lines):
            if name is None:
                if line.startswith("///") or line.startswith("@"):
                    if comment_start is None:
                        comment_start = index
                    continue
                match = DECLARATION.match(line)
                if match:
                    name = match.group(2)
                    start = comment_start if comment_start is not None else index
                    if line.rstrip().endswith("}") and line.count("{") == line.count("}"):
                        types[name] = types.get(name, 0) + index - start + 1
                        name = None
                comment_start = None
            elif line.startswith("}"):
                types[name] = types.get(name, 0) + index - start + 1
                name = None
    return files, types


def read_allowance():
    allowance = {}
    if os.path.exists(ALLOWANCE):
        for line in open(ALLOWANCE, encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                kind, name, size = line.split()
                allowance[(kind, name)] = int(size)
    return allowance


def main():
    check = "--check" in sys.argv[1:]
    files, types = measure()
    over = [("file", name, size) for name, size in sorted(files.items()) if size > FILE_LIMIT]
    over += [("type", name, size) for name, size in sorted(types.items()) if size > TYPE_LIMIT]
    if not check:
        for kind, name, size in over:
            print(f"{kind} {name} {size}")
        print(f"shape: {sum(1 for o in over if o[0] == 'file')} files over {FILE_LIMIT} lines, "
              f"{sum(1 for o in over if o[0] == 'type')} types over {TYPE_LIMIT} (largest file "
              f"{max(files.values())}, largest type {max(types.values())})")
        return 0
    allowance = read_allowance()
    failures, shrinkable = [], []
    for kind, name, size in over:
        allowed = allowance.get((kind, name))
        if allowed is None:
            failures.append(f"{kind} {name} has {size} lines, over the limit of "
                            f"{FILE_LIMIT if kind == 'file' else TYPE_LIMIT}: split it into parts that "
                            "are types of their own")
        elif size > allowed:
            failures.append(f"{kind} {name} grew to {size} lines (allowed {allowed} while it is split)")
        elif size < allowed:
            shrinkable.append(f"{kind} {name} {size}")
    current = {(kind, name) for kind, name, _ in over}
    for (kind, name), allowed in sorted(allowance.items()):
        if (kind, name) not in current:
            shrinkable.append(f"{kind} {name}: under the limit now, remove it from the allowance")
    for line in shrinkable:
        print(f"shape: the allowance can shrink: {line}", file=sys.stderr)
    for line in failures:
        print(f"shape: {line}", file=sys.stderr)
    if failures:
        return 1
    print(f"shape: {len(over)} files and types over the limits, all within the allowance "
          f"({len(allowance)} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
