#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The public API as a listing (docs/public-api.md, *The committed listing*): everything
# `import Wormhole` exposes, from the compiler's symbol graphs, one line per symbol:
#   module  kind  path.of.names  declaration
# The modules listed are Wormhole (with its extension graphs, `Wormhole@Swift.symbols.json` and
# the like), every other module a library product of Package.swift exports, and whatever
# Sources/Wormhole re-exports with `@_exported` (a whole module, or one type and its members).
# Members of public extensions, protocol requirements, enum cases and the members the compiler
# synthesizes (`!=`, `hashValue`) are symbols like any other.
#   Tests/api.sh            prints the listing
#   Tests/api.sh --count    prints the number of symbols
#   Tests/api.sh --check    compares the listing with docs/api/Wormhole.txt; fails with the diff
#   Tests/api.sh --update   rewrites docs/api/Wormhole.txt (a deliberate public change)
# `swift package dump-symbol-graph` exits 1 on Swift 6.3.1 although it writes every graph, so
# this looks at the files it writes, not at its status.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
    "" | --count | --check | --update) ;;
    *) echo "usage: Tests/api.sh [--count | --check | --update]" >&2; exit 2 ;;
esac
committed=docs/api/Wormhole.txt
log=$(mktemp)
listing=$(mktemp)
manifest=$(mktemp)
trap 'rm -f "$log" "$listing" "$manifest"' EXIT

graphs="$(dirname "$(swift build --show-bin-path)")/symbolgraph"
rm -rf "$graphs"
swift package dump-symbol-graph --minimum-access-level public >"$log" 2>&1 || true
if [ ! -s "$graphs/Wormhole.symbols.json" ]; then
    cat "$log" >&2
    echo "api: swift package dump-symbol-graph wrote no $graphs/Wormhole.symbols.json" >&2
    exit 1
fi
swift package dump-package >"$manifest"

python3 - "$graphs" "$manifest" Sources/Wormhole >"$listing" <<'PY'
import glob, json, os, re, sys

graphs, package_json, sources = sys.argv[1:4]
package = json.load(open(package_json))

# The modules whose whole graph counts: Wormhole and every library product's targets, except
# the C library's (a dynamic product, libwormhole: its surface is the C ABI, listed in
# docs/api/libwormhole.txt and checked by Tests/c.sh, not a Swift API).
whole = {"Wormhole"}
for product in package["products"]:
    if "library" in product["type"] and "dynamic" not in product["type"]["library"]:
        whole.update(product["targets"])

# What Sources/Wormhole re-exports: a whole module, or one declaration (`import struct M.T`).
scoped = {}  # module -> set of top-level names
pattern = re.compile(r"^\s*@_exported\s+(?:public\s+)?import\s+(?:(\w+)\s+)?([\w.]+)", re.M)
for path in sorted(glob.glob(os.path.join(sources, "**", "*.swift"), recursive=True)):
    for kind, name in pattern.findall(open(path, encoding="utf-8").read()):
        module, _, member = name.partition(".")
        if kind and member:
            scoped.setdefault(module, set()).add(member.split(".")[0])
        else:
            whole.add(module)

def text(fragments):
    return re.sub(r"\s+", " ", "".join(f["spelling"] for f in fragments)).strip()

lines = set()
for path in sorted(glob.glob(os.path.join(graphs, "*.symbols.json"))):
    file = os.path.basename(path)[: -len(".symbols.json")]
    module, _, extended = file.partition("@")
    if module not in whole and module not in scoped:
        continue
    graph = json.load(open(path, encoding="utf-8"))
    for symbol in graph["symbols"]:
        names = symbol["pathComponents"]
        if module not in whole and names[0] not in scoped[module]:
            continue
        declaration = text(symbol.get("declarationFragments") or symbol["names"].get("subHeading", []))
        constraints = symbol.get("swiftExtension", {}).get("constraints", [])
        if constraints:
            declaration += " where " + ", ".join(
                c["lhs"] + (": " if c["kind"] != "sameType" else " == ") + c["rhs"] for c in constraints
            )
        label = module + ("@" + extended if extended else "")
        kind = symbol["kind"]["identifier"].removeprefix("swift.")
        # The precise identifier keeps two symbols that print alike (the same synthesized
        # operator from two conformances) as two lines; only its hash is shown.
        lines.add((label, ".".join(names), kind, declaration, symbol["identifier"]["precise"]))

# Two symbols that print alike get a counter instead of their mangled names.
seen = {}
for label, path, kind, declaration, _ in sorted(lines):
    key = (label, kind, path, declaration)
    seen[key] = seen.get(key, 0) + 1
    suffix = "" if seen[key] == 1 else f"  (#{seen[key]})"
    print(f"{label}  {kind}  {path}  {declaration}{suffix}")
PY

count=$(wc -l <"$listing")
case "$mode" in
    "") cat "$listing" ;;
    --count) echo "$count" ;;
    --update)
        mkdir -p "$(dirname "$committed")"
        cp "$listing" "$committed"
        echo "api: $committed rewritten ($count symbols)"
        ;;
    --check)
        if ! diff -u "$committed" "$listing" >"$log"; then
            cat "$log" >&2
            echo "api: the public API differs from $committed (- committed, + now)." >&2
            echo "api: a public change is a deliberate commit: run Tests/api.sh --update and add a CHANGELOG line" >&2
            exit 1
        fi
        echo "api: $count public symbols, as committed in $committed"
        ;;
esac
