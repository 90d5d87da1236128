#!/usr/bin/env bash
# The C GTK 4 Lines window (Examples/Lines/c/lines-window.c) under Xvfb, or with --qt the C++
# Qt 6 one (Examples/Lines/qt/lines-qt.cpp, QT_QPA_PLATFORM=offscreen), built against an
# installed libwormhole: a clip stored before it starts is shown (reason "stored"), and a clip
# sent with the Swift `wormholectl send` while it runs appears in it ("posted"), checked by the
# lines it reports, on a private dbus-daemon.
#
#   Tests/lines-c.sh [--qt] [PREFIX]
#
# PREFIX is where scripts/libwormhole.sh installed the library (Tests/c.sh passes its own);
# without one, the debug build is installed into a temporary prefix. Needs (Debian):
# libgtk-4-dev, libjson-glib-dev, xvfb (xvfb-run) (--qt: qt6-base-dev), dbus-daemon, and the Swift tool in
# WORMHOLE_SWIFT_BIN (default: <repo>/.build/debug).
set -euo pipefail
repository=$(cd "$(dirname "$0")/.." && pwd)
bin=${WORMHOLE_SWIFT_BIN:-$repository/.build/debug}
qt=0
if [ "${1:-}" = --qt ]; then qt=1; shift; fi
for tool in xvfb-run dbus-daemon pkg-config cc; do
    command -v "$tool" >/dev/null || { echo "Tests/lines-c.sh: $tool is not installed" >&2; exit 2; }
done
[ -x "$bin/wormholectl" ] || { echo "Tests/lines-c.sh: no wormhole in $bin" >&2; exit 2; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-lines-c.XXXXXX")
window="" daemon=""
cleanup() {
    [ -z "$window" ] || kill "$window" 2>/dev/null || true
    [ -z "$daemon" ] || kill "$daemon" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$scratch"
}
trap cleanup EXIT
prefix=${1:-}
if [ -z "$prefix" ]; then
    prefix=$scratch/prefix
    "$repository/scripts/libwormhole.sh" --debug --no-build --prefix "$prefix" >/dev/null
fi
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
if ((qt)); then
    # shellcheck disable=SC2046
    c++ -std=c++17 -fPIC -Wall -Wextra -Werror -o "$scratch/lines-window" "$repository/Examples/Lines/qt/lines-qt.cpp" \
        $(pkg-config --cflags --libs wormhole-1 Qt6Widgets) -Wl,-rpath,"$prefix/lib"
    start=(env QT_QPA_PLATFORM=offscreen)
    name="C++ Qt 6"
else
    # shellcheck disable=SC2046
    cc -std=c99 -Wall -Wextra -Werror -o "$scratch/lines-window" "$repository/Examples/Lines/c/lines-window.c" \
        $(pkg-config --cflags --libs wormhole-1 gtk4 json-glib-1.0) -Wl,-rpath,"$prefix/lib"
    start=(xvfb-run -a -s "-screen 0 560x320x24")
    name="C GTK 4"
fi

dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --address="unix:path=$scratch/bus" --nofork \
    --print-address >"$scratch/address" 2>/dev/null &
daemon=$!
grep -q -m1 '^unix:' < <(timeout 10 tail -n +1 -F "$scratch/address" 2>/dev/null)
export DBUS_SESSION_BUS_ADDRESS="unix:path=$scratch/bus" WORMHOLE_CONTAINER_ROOT="$scratch/root"
export GSK_RENDERER=cairo GTK_A11Y=none NO_AT_BRIDGE=1
group=group.com.example.lines
send() { "$bin/wormholectl" send --group "$group" --directory lines toShell "$1" >/dev/null; }
send '{"id":"1","text":"stored before the window","url":"https://example.org/a"}'
timeout 120 "${start[@]}" "$scratch/lines-window" --report >"$scratch/report" 2>"$scratch/err" &
window=$!
grep -q -m1 '^ready$' < <(timeout 60 tail -n +1 -F "$scratch/err" 2>/dev/null) ||
    { cat "$scratch/err" >&2; echo "Tests/lines-c.sh: the window never said ready" >&2; exit 1; }
grep -q -m1 'stored before the window' < <(timeout 30 tail -n +1 -F "$scratch/report" 2>/dev/null) ||
    { echo "Tests/lines-c.sh: the stored clip was not shown" >&2; exit 1; }
send '{"id":"2","text":"Grüße aus C","url":""}'
grep -q -m1 'Grüße aus C' < <(timeout 30 tail -n +1 -F "$scratch/report" 2>/dev/null) ||
    { echo "Tests/lines-c.sh: the sent clip was not shown" >&2; cat "$scratch/report" "$scratch/err" >&2; exit 1; }
expected='{"text":"stored before the window","url":"https://example.org/a","reason":"stored"}
{"text":"Grüße aus C","url":null,"reason":"posted"}'
# Compared as JSON values (the Qt window's objects come with their keys sorted).
python3 -c 'import json, sys
a, b = (list(map(json.loads, t.strip().splitlines())) for t in (open(sys.argv[1]).read(), sys.argv[2]))
sys.exit(a != b)' "$scratch/report" "$expected" ||
    { echo "Tests/lines-c.sh: the window reported:" >&2; cat "$scratch/report" >&2; exit 1; }
echo "Tests/lines-c.sh: the $name Lines window showed the stored clip and the sent one"
