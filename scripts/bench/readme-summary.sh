#!/usr/bin/env bash
# Writes README.md's performance summary from a `wormholectl bench --json` run:
#
#   .build/release/wormholectl bench --suite journal,cli --json bench.json
#   scripts/bench/readme-summary.sh bench.json [README.md]
#
# Replaces the lines between `<!-- bench-summary:begin -->` and `<!-- bench-summary:end -->`
# with the machine, the command's suites, and one table line per suite: goals met (the goals of
# the bench's printed summary), and each goal missed with its measured value and its goal. Everything else in the file is left as it
# is. Exit 2 on a bad argument, a file that is not a bench run, or a README without the markers.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: scripts/bench/readme-summary.sh BENCH.json [README.md]" >&2
    exit 2
fi
readme=${2:-$(dirname "$0")/../../README.md}
[ -r "$1" ] || { echo "readme-summary: cannot read '$1'" >&2; exit 2; }
[ -w "$readme" ] || { echo "readme-summary: cannot write '$readme'" >&2; exit 2; }
exec python3 - "$1" "$readme" <<'PYTHON'
import json
import sys
import textwrap

(run_path, readme_path) = sys.argv[1:3]
begin, end = "<!-- bench-summary:begin -->", "<!-- bench-summary:end -->"
try:
    with open(run_path, encoding="utf-8") as handle:
        run = json.load(handle)
    rows = run["rows"]
except (OSError, ValueError, KeyError, TypeError) as error:
    print(f"readme-summary: '{run_path}' is not a wormholectl bench --json file: {error}", file=sys.stderr)
    sys.exit(2)
with open(readme_path, encoding="utf-8") as handle:
    text = handle.read()
if begin not in text or end not in text or text.index(begin) > text.index(end):
    print(f"readme-summary: '{readme_path}' has no {begin} ... {end} block", file=sys.stderr)
    sys.exit(2)


def number(value):
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == int(value):
        return f"{value:.0f}"
    return f"{value:.2f}"


def measured(row):
    value = row["ratio"] if row.get("kind") == "latency" else row.get("value")
    unit = "×" if row.get("kind") in ("latency", "goal") else (" " + row["unit"] if row.get("unit") not in (None, "count") else "")
    return value, unit


machine = run.get("machine") or {}
context = run.get("context") or {}
suites = []
for row in rows:
    if row.get("suite") not in suites:
        suites.append(row.get("suite"))
heading = (
    f"Goals of one `wormholectl bench --suite {context.get('suites', ','.join(suites))} --json` run"
    + (f" ({context['date']})" if context.get("date") else "")
    + f" on {machine.get('cores', '?')} cores ({machine.get('cpu', 'unknown CPU')}), Linux {machine.get('kernel', '?')},"
    + f" {machine.get('system', 'unknown system')}, {machine.get('swift', 'Swift ?')},"
    + f" {machine.get('busDaemon', 'unknown bus daemon')}:"
)
lines = [begin] + textwrap.wrap(heading, width=96, break_on_hyphens=False) + [
    "",
    "| suite | goals met | missed: measured (goal) |",
    "| --- | --- | --- |",
]
for suite in suites:
    # The summary's goals (as the bench prints them): goal and figure rows; a latency row's own
    # target repeats a goal of its suite.
    judged = [row for row in rows if row.get("suite") == suite and row.get("kind") in ("goal", "figure")
              and row.get("status") in ("PASS", "MISS")]
    if not judged:
        continue
    missed = []
    for row in judged:
        if row["status"] != "MISS":
            continue
        value, unit = measured(row)
        comparison = "≥" if row.get("atLeast") else "≤"
        missed.append(f"{row['label']}: {number(value)}{unit} ({comparison} {number(row['target'])}{unit})")
    met = sum(1 for row in judged if row["status"] == "PASS")
    lines.append(f"| {suite} | {met} of {len(judged)} | {'; '.join(missed) if missed else '–'} |")
lines.append(end)
start, stop = text.index(begin), text.index(end) + len(end)
with open(readme_path, "w", encoding="utf-8") as handle:
    handle.write(text[:start] + "\n".join(lines) + text[stop:])
table = [line for line in lines if line.startswith("| ") and not line.startswith(("| suite", "| ---"))]
print(f"readme-summary: {readme_path}: {len(table)} suites from {run_path}")
PYTHON
