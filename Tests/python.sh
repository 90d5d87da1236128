#!/bin/sh
# Tests of the Python package (Python/, import name wormhole_py): builds it into a
# throwaway venv that sees Debian's python3-gi, then runs its pytest suite (parts A and B)
# against private dbus-daemons, twice: with a throwaway XDG_RUNTIME_DIR (a desktop
# session) and without one.
#
#   Tests/python.sh [pytest arguments]
#
# Needs (Debian): python3 python3-venv python3-gi python3-pytest python3-setuptools
# gir1.2-glib-2.0 dbus-daemon (dbus-bin) and, for the cross-implementation checks,
# the Swift tools in $WORMHOLE_SWIFT_BIN (default: .build/debug; the tests that need
# them are skipped, saying why, when they are missing).  Works offline.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
: "${WORMHOLE_SWIFT_BIN:=$repo/.build/debug}"
case $WORMHOLE_SWIFT_BIN in /*) ;; *) WORMHOLE_SWIFT_BIN=$repo/$WORMHOLE_SWIFT_BIN ;; esac
export WORMHOLE_SWIFT_BIN

python=${PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=$(command -v python3)
if ! "$python" -c 'import gi' 2>/dev/null; then
    echo "python.sh: $python has no 'gi' (apt-get install python3-gi gir1.2-glib-2.0)" >&2
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-py-tests.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM HUP
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps --no-index ./Python
# The installed package, not the source tree, is what the tests import and run.
if ! "$work/venv/bin/python" -c 'import pytest' 2>/dev/null; then
    echo "python.sh: no pytest (apt-get install python3-pytest)" >&2
    exit 1
fi

status=0
run_suite() {
    label=$1
    shift
    echo "== python tests: $label"
    set +e
    (cd "$work" && "$@" "$work/venv/bin/python" -m pytest -p no:cacheprovider -q "$repo/Python/tests" ${PYTEST_ARGS:-})
    rc=$?
    set -e
    case $rc in
        0) ;;
        5) echo "python.sh: pytest collected no tests ($label)" >&2; status=1 ;;
        *) status=1 ;;
    esac
}

runtime="$work/runtime"
mkdir -m 0700 "$runtime"
PYTEST_ARGS="$*"
run_suite "desktop session (XDG_RUNTIME_DIR=$runtime)" env XDG_RUNTIME_DIR="$runtime" WORMHOLE_PY_INSTALLED=1
run_suite "no XDG_RUNTIME_DIR" env -u XDG_RUNTIME_DIR WORMHOLE_TEST_NO_RUNTIME_DIR=1 WORMHOLE_PY_INSTALLED=1
exit $status
