#!/usr/bin/env bash
# Wormhole's test command: installs what is missing, builds everything (no warnings
# allowed in our own code) and runs the whole suite. The tests of a suite share one private
# dbus-daemon from dbus/wormhole-session.conf (a test that stops its bus has one of its own;
# see Tests/WormholeTestSupport/TestBus.swift); the user's session bus is never used. It needs
# no raised kernel limit. Every dbus-daemon takes one inotify instance from a per-user limit
# (fs.inotify.max_user_instances, 128 by default), as does every listening Wormhole process.
# Unbounded, the suites ran about 80 daemons at once and the run held 109-120 instances at its
# peak; with at most WORMHOLE_TEST_WIDTH tests at a time (default 16) it holds about 18, and
# takes as long on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift build --build-tests 2>&1 | tee "$log"
# A warning inside a macro's expansion (`#expect(try …)`) is reported as `macro expansion …`,
# with the project's file in the note that follows.
if grep -E '^(/[^:]*/)?(Sources|Tests|Examples)/[^:]*:[0-9]+:[0-9]+: warning:|^macro expansion [^:]*:[0-9]+:[0-9]+: warning:' "$log" | grep -v '/.build' | grep -q .; then
    echo "error: the build has warnings in the project's own code (listed above)" >&2
    exit 1
fi
# The tests run in a process group of their own (`set -m`): every process they start is in it
# unless it leaves it, so whatever a test left running is killed when the run ends, however it
# ends (Ctrl-C included), and named, so that the leak gets fixed.
set -m
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${WORMHOLE_TEST_WIDTH:-16}" swift test --skip-build "$@" &
tests=$!
set +m
leftovers() {
    local left
    left=$(pgrep -g "$tests" -a || true)
    [ -z "$left" ] && return 0
    printf 'run.sh: the tests left these running; killed:\n%s\n' "$left" >&2
    kill -KILL -- "-$tests" 2>/dev/null || true
}
trap 'leftovers; rm -f "$log"' EXIT
trap 'exit 130' INT TERM
status=0
wait "$tests" || status=$?
exit "$status"
