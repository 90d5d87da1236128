#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The documentation's code, built and run as a newcomer would (CI runs this; a snippet that stops
# building or a tour step that stops working fails it).
#
# 1. Every Swift block of README.md, docs/*.md and the DocC catalogs
#    (Sources/*/*.docc/*.md) that imports Wormhole becomes an executable target of a scratch
#    package (.build/snippets) that depends on this checkout by path, and the package is built
#    (no warning allowed in a snippet). A Swift block that does not import Wormhole must be
#    marked `<!-- fragment -->` on the line before it (a Package.swift excerpt, a few lines of
#    API); any other fails the run. `<!-- snippet: NAME -->` names a block's target.
# 2. The README's tour runs across processes on a private dbus-daemon with a fresh container
#    root: the block named `tour` listens in one process, and each line of the shell blocks
#    marked `<!-- session -->` runs in order in this shell, from the checkout (the tour's
#    `../tour/.build/debug/tour` is the scratch package's binary). A line ending in
#    `# terminal 1 prints: TEXT` waits (30 s at most) for the listener to print TEXT.
# 3. The Python package's command line on a container root that does not exist yet, against the tool.
# 4. One version: `wormholectl --version`, and every `from: "X.Y.Z"` in README.md, docs/ and the
#    DocC catalogs, say the version of Sources/Wormhole/Version.swift.
#
# Uses the debug build of the checkout's tools (builds it if missing); the scratch package has
# its own build folder, kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pkg=${SNIPPETS_PACKAGE:-$root/.build/snippets}
fail() { echo "snippets: $*" >&2; exit 1; }

# --- 1. Extract and build ---------------------------------------------------------------------
mkdir -p "$pkg"
python3 - "$root" "$pkg" <<'EOF'
import glob, os, re, shutil, sys
root, pkg = sys.argv[1], sys.argv[2]
files = ["README.md"] + sorted(glob.glob("docs/*.md")) + sorted(glob.glob("Sources/*/*.docc/*.md"))
targets, fragments, errors = [], [], []
for path in files:
    lines = open(os.path.join(root, path), encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```swift":
            start = i + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            body = "\n".join(lines[start:end]) + "\n"
            marker = next((l.strip() for l in reversed(lines[:i]) if l.strip()), "")
            where = "%s:%d" % (path, i + 1)
            named = re.fullmatch(r"<!-- snippet: ([A-Za-z][A-Za-z0-9_-]*) -->", marker)
            if marker == "<!-- fragment -->":
                fragments.append(where)
            elif re.search(r"^import Wormhole$", body, re.M):
                name = named.group(1) if named else "s_" + re.sub(r"[^A-Za-z0-9]", "_", "%s_%d" % (path, i + 1))
                targets.append((name, where, body))
            else:
                errors.append(where)
            i = end
        i += 1
if errors:
    sys.exit("snippets: a Swift block neither imports Wormhole nor is marked <!-- fragment -->: " + ", ".join(errors))
identity = os.path.basename(root.rstrip("/")).lower()
sources = os.path.join(pkg, "Sources")
shutil.rmtree(sources, ignore_errors=True)
for name, where, body in targets:
    os.makedirs(os.path.join(sources, name))
    with open(os.path.join(sources, name, "main.swift"), "w") as f:
        f.write("// %s\n%s" % (where, body))
manifest = """// swift-tools-version: 6.0
// Written by Tests/snippets.sh: one executable per Swift block of the documentation.
import PackageDescription

let package = Package(
    name: "snippets",
    dependencies: [.package(path: %s)],
    targets: [
%s
    ]
)
""" % ('"%s"' % root, ",\n".join(
    '        .executableTarget(name: "%s", dependencies: [%s])' % (n, ", ".join(
        '.product(name: "%s", package: "%s")' % (product, identity) for product in ("Wormhole",)))
    for n, _, _ in targets))
old = open(os.path.join(pkg, "Package.swift")).read() if os.path.exists(os.path.join(pkg, "Package.swift")) else None
if old != manifest:
    open(os.path.join(pkg, "Package.swift"), "w").write(manifest)
with open(os.path.join(pkg, "blocks.txt"), "w") as f:
    for name, where, _ in targets:
        f.write("%s %s\n" % (name, where))
print("snippets: %d Swift blocks import Wormhole, %d marked as fragments (%s)" % (
    len(targets), len(fragments), ", ".join(fragments) or "none"))
EOF
start=$SECONDS
log=$pkg/build.log
if ! swift build --package-path "$pkg" >"$log" 2>&1; then
    grep -E 'error:' -A3 "$log" >&2 || cat "$log" >&2
    fail "the documentation's Swift blocks do not build (the first line of each file names its block: $pkg/Sources/*/main.swift)"
fi
if grep -E "^$pkg/Sources/[^:]*:[0-9]+:[0-9]+: warning:" "$log" >&2; then
    fail "a documentation snippet builds with warnings (above)"
fi
echo "snippets: built $(wc -l <"$pkg/blocks.txt") blocks in $((SECONDS - start)) s"

# --- 2. The tour, across processes on a private bus -------------------------------------------
[ -x .build/debug/wormholectl ] || swift build --product wormholectl >/dev/null
tour=$pkg/.build/debug/tour
[ -x "$tour" ] || fail "README.md has no Swift block marked <!-- snippet: tour -->"
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkfifo "$work/address" "$work/tour"
dbus-daemon --config-file=dbus/wormhole-session.conf --nofork --print-address \
    --address="unix:path=$work/bus" >"$work/address" 2>"$work/daemon.log" &
pids+=($!)
read -r address <"$work/address" || fail "dbus-daemon did not start: $(cat "$work/daemon.log")"
export DBUS_SESSION_BUS_ADDRESS=$address WORMHOLE_CONTAINER_ROOT=$work/containers
unset XDG_DATA_HOME

stdbuf -oL "$tour" listen >"$work/tour" 2>&1 &
pids+=($!)
exec 4<"$work/tour"
heard=()
# Reads the listener's lines until one contains $1 (30 s at most for each line).
expect_line() {
    local line
    while IFS= read -r -t 30 line <&4; do
        heard+=("$line")
        [[ $line == *"$1"* ]] && return 0
    done
    fail "terminal 1 did not print '$1' (it printed: ${heard[*]:-nothing})"
}
expect_line listening

session=$(python3 Tests/doc-blocks.py README.md session --commands) || fail "README.md has no shell block marked <!-- session -->"
steps=0
while IFS= read -r command; do
    run=${command//..\/tour\/.build\/debug\/tour/$tour}
    echo "\$ $command"
    eval "$run" || fail "the README's command failed: $command"
    if [[ $command =~ \#\ terminal\ 1\ prints:\ (.*)$ ]]; then
        expect_line "${BASH_REMATCH[1]}"
        echo "  terminal 1: ${heard[-1]}"
    fi
    steps=$((steps + 1))
done <<<"$session"
echo "snippets: the tour ran: $steps commands from README.md across processes, terminal 1 printed ${#heard[@]} lines"

# --- 3. The Python package's command line on a fresh container root -------------------------
export WORMHOLE_CONTAINER_ROOT=$work/fresh/containers PATH=$root/.build/debug:$PATH
py() { PYTHONPATH="$root/Python" /usr/bin/python3 -m wormhole_py "$@"; }
group=group.com.example.recipes
exec 5< <(wormholectl defaults observe --group "$group" currency --count 1 --timeout 30 2>&1)
IFS= read -r -t 30 ready <&5 && [ "$ready" = ready ] || fail "defaults observe did not start: $ready"
py defaults write --group "$group" currency '"EUR"'
IFS= read -r -t 30 change <&5 || fail "the Python defaults write woke nobody"
[[ $change == '{"key":"currency","value":"EUR"'* ]] || fail "defaults observe printed $change"
[ "$(wormholectl defaults read --group "$group" currency)" = '"EUR"' ] || fail "wormholectl defaults read does not see Python's value"
py defaults write --group "$group" ratio 1.0
[ "$(wormholectl defaults read --group "$group" ratio)" = '1.0' ] || fail "a Python float is not read as a Double"
wormholectl defaults write --group "$group" launches 41
py defaults write --group "$group" launches 42
[ "$(py defaults read --group "$group" launches)" = 42 ] || fail "Python does not read the suite"
# A value another program wrote, which neither tool changes, is kept exactly as written by both.
suite=$WORMHOLE_CONTAINER_ROOT/$group/Preferences/$group.json
sed -i '1s/^{/{"big":1e400,/' "$suite"
wormholectl defaults write --group "$group" other 1
py defaults write --group "$group" other 2
grep -q '"big":1e400' "$suite" || fail "1e400 was not kept as written: $(cat "$suite")"
[ "$(stat -c %a "$WORMHOLE_CONTAINER_ROOT/$group")" = 700 ] || fail "the Python package made the container without mode 0700"
echo "snippets: the Python package's command line works on a fresh container under WORMHOLE_CONTAINER_ROOT"

# --- 4. One version ---------------------------------------------------------------------------
version=$(scripts/version.sh) || fail "no package version in Sources/Wormhole/Version.swift"
wormholectl --version | grep -q "^wormholectl $version " || fail "wormholectl --version says $(wormholectl --version), not $version"
others=$(grep -rnoE 'from: "[0-9]+\.[0-9]+\.[0-9]+"' README.md docs Sources/*/*.docc | grep -v "from: \"$version\"" || true)
[ -z "$others" ] || fail "a version other than $version in the documentation: $others"
grep -q "^## \[$version\]" CHANGELOG.md || fail "CHANGELOG.md has no section for $version"
echo "snippets: version $version everywhere (Version.swift, wormholectl --version, README.md, DocC, CHANGELOG.md)"
