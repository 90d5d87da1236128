#!/bin/sh
# The GJS module's tests: GJS test programs (gjs -m) against a private dbus-daemon started from
# dbus/wormhole-session.conf (by the programs themselves) and the Swift `wormholectl` tool, both
# ways; each program runs twice, the Swift side without XDG_RUNTIME_DIR and with a throwaway
# 0700 one (a desktop session's configuration).
# Needs: gjs (Debian: gjs), dbus-daemon (dbus-daemon), dbus-send (dbus-bin), flock (util-linux: the
# journal's durable consumers), and the Swift tools (`wormholectl`, `wormhole-test-peer`) in
# WORMHOLE_SWIFT_BIN (default: <repo>/.build/debug). The lint is Tests/gjs-lint.sh.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
export WORMHOLE_SWIFT_BIN="${WORMHOLE_SWIFT_BIN:-$repo/.build/debug}"
for tool in gjs dbus-daemon dbus-send flock; do
    command -v "$tool" >/dev/null || { echo "Tests/gjs.sh: $tool is not installed" >&2; exit 2; }
done
for tool in wormholectl wormhole-test-peer; do
    [ -x "$WORMHOLE_SWIFT_BIN/$tool" ] || {
        echo "Tests/gjs.sh: no $tool in WORMHOLE_SWIFT_BIN=$WORMHOLE_SWIFT_BIN (build it or set the variable)" >&2
        exit 2
    }
done
# Never the user's session bus: the programs use their private bus's address only.
unset DBUS_SESSION_BUS_ADDRESS
status=0
for program in "$repo"/GJS/tests/test-*.js; do
    for runtime in set unset; do
        echo "# $(basename "$program") (XDG_RUNTIME_DIR $runtime)"
        GJS_TEST_RUNTIME=$runtime timeout 600 gjs -m "$program" || status=1
    done
done
exit $status
