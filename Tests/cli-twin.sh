#!/bin/sh
# The Swift command-line suites of contract section 4 (tagged `contractCLI`:
# Tests/WormholeTestSupport/Tags.swift) run against the Python package's `wormhole-py` instead of
# the Swift `wormholectl` (`WORMHOLE_TEST_CLI`; docs/testing.md), so that the two tools stay twins.
#
#   Tests/cli-twin.sh [swift test arguments]
#
# Needs the debug build with its tests (`swift build --build-tests`, which Tests/run.sh makes) and
# Debian's python3 with python3-venv and python3-gi; installs the package from Python/ into a
# throwaway venv (pip fetches jeepney from the Python registry).
#
# The suites are the ones tagged `.tags(.contractCLI)` in Tests/WormholeCLITests. A test in them
# that checks what only the Swift tool does carries `.swiftToolOnly("reason")`: skipped here with
# its reason, which `grep -rn swiftToolOnly Tests/WormholeCLITests` lists (the run prints each one
# too). About 50 seconds on the shared 2-core machine (33 tests run, 16 skipped).
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
work=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-cli-twin.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM HUP

/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$repo/Python"
cli="$work/venv/bin/wormhole-py"

# The tagged suites: the type declared after each `@Suite(… .tags(.contractCLI) …)`.
suites=$(awk '/^@Suite\(.*\.tags\(\.contractCLI\)/ { tagged = 1; next }
              tagged && /^(struct|final class|class|enum) / { sub(/^(final class|struct|class|enum) /, ""); sub(/[^A-Za-z0-9_].*/, ""); print; tagged = 0 }' \
    Tests/WormholeCLITests/*.swift | sort | paste -sd'|' -)
if [ -z "$suites" ]; then
    echo "cli-twin.sh: no suite in Tests/WormholeCLITests is tagged .contractCLI" >&2
    exit 1
fi
echo "== Swift CLI suites against wormhole-py: $suites"
echo "   excluded (each with its reason): $(grep -c 'swiftToolOnly(' Tests/WormholeCLITests/*.swift | awk -F: '{ n += $2 } END { print n }') tests, grep -rn swiftToolOnly Tests/WormholeCLITests"
WORMHOLE_TEST_CLI=$cli swift test --skip-build --filter "WormholeCLITests\\.($suites)" "$@"
