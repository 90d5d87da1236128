#!/usr/bin/env bash
# Compares two `wormholectl bench --json` runs row by row:
#
#   Tests/bench-compare.sh A.json B.json
#
# Prints the two machines when they differ (cores, CPU, kernel, Swift, bus daemon), then one line
# per row id found in either run: A's value, B's value, the change in per cent, and the goal's
# PASS/MISS in each run (rows with a goal only in one run, or in one run only, say so). A change
# is marked "better" or "worse" by the row's direction (latencies and ratios lower is better,
# rates higher, a figure by its goal). Exit status: 0; 1 when B misses a goal A met; 2 on a bad
# argument or a file that is not a bench run. Needs python3 (the test suite's interop tests need
# it too).
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: Tests/bench-compare.sh A.json B.json (two wormholectl bench --json files)" >&2
    exit 2
fi
for file in "$1" "$2"; do
    [ -r "$file" ] || { echo "bench-compare: cannot read '$file'" >&2; exit 2; }
done
exec python3 - "$1" "$2" <<'PYTHON'
import json
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as error:
        print(f"bench-compare: '{path}' is not a JSON file: {error}", file=sys.stderr)
        sys.exit(2)
    if not isinstance(document, dict) or not isinstance(document.get("rows"), list):
        print(f"bench-compare: '{path}' is not a wormholectl bench --json file (no \"rows\" list)", file=sys.stderr)
        sys.exit(2)
    rows = {}
    for row in document["rows"]:
        key = row.get("id") or f"{row.get('suite')}-{row.get('label')}"
        rows[key] = row
    return document, rows


def lower_is_better(row):
    kind = row.get("kind")
    if kind in ("latency",):
        return True
    if kind == "rate":
        return False
    if row.get("atLeast") is not None:
        return not row["atLeast"]
    unit = row.get("unit") or ""
    return not unit.endswith("/s")


def number(value):
    if value is None:
        return "-"
    if abs(value) >= 1000 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.3f}"


(path_a, path_b) = sys.argv[1:3]
document_a, rows_a = load(path_a)
document_b, rows_b = load(path_b)
machine_a = document_a.get("machine") or {}
machine_b = document_b.get("machine") or {}
for key in ("cores", "cpu", "memoryMiB", "kernel", "system", "swift", "busDaemon", "wormhole"):
    if machine_a.get(key) != machine_b.get(key):
        print(f"machine {key}: A {machine_a.get(key, 'unknown')} | B {machine_b.get(key, 'unknown')}")

width = max([len(key) for key in list(rows_a) + list(rows_b)] + [10])
print(f"{'row':<{width}} {'A':>12} {'B':>12} {'change':<15} goal A -> B")
regressions = 0
for key in list(rows_a) + [key for key in rows_b if key not in rows_a]:
    a, b = rows_a.get(key), rows_b.get(key)
    if a is None or b is None:
        present = b if a is None else a
        side = "B" if a is None else "A"
        print(f"{key:<{width}} {number(present.get('value')) if a else '-':>12} "
              f"{number(present.get('value')) if b else '-':>12} {'':<15} only in {side}")
        continue
    value_a, value_b = a.get("value"), b.get("value")
    change = ""
    if isinstance(value_a, (int, float)) and isinstance(value_b, (int, float)) and value_a != 0:
        percent = (value_b - value_a) / abs(value_a) * 100
        change = f"{percent:+.1f}%"
        if abs(percent) >= 0.05:
            better = (percent < 0) == lower_is_better(b)
            change += " better" if better else " worse"
    status_a, status_b = a.get("status") or "-", b.get("status") or "-"
    if status_a == "PASS" and status_b == "MISS":
        regressions += 1
    unit = b.get("unit") or ""
    print(f"{key:<{width}} {number(value_a):>12} {number(value_b):>12} {change:<15} {status_a} -> {status_b}"
          + (f"  ({unit})" if unit else ""))
if regressions:
    print(f"{regressions} goal(s) met in A and missed in B")
    sys.exit(1)
PYTHON
