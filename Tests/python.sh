#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Tests of the Python package (Python/, distribution wormhole-dbus, import name wormhole_py):
# installs it into throwaway venvs and runs its pytest suite against private dbus-daemons,
# under each D-Bus transport and on the oldest and newest Python the machine has:
#
#   1. lint: `ruff check` and `mypy --strict` of the package (newest Python; no finding allowed);
#   2. gio: Debian's /usr/bin/python3 in a venv with --system-site-packages (python3-gi, pytest),
#      the GLib callback API included, twice: with a throwaway XDG_RUNTIME_DIR (a desktop session)
#      and without one;
#   3. jeepney: the oldest and the newest Python 3.9+ found (pyenv's 3.9 and 3.13 on this machine
#      kind, else /usr/bin/python3), each in a venv WITHOUT system site packages (no PyGObject), the
#      oldest with a runtime directory and the newest without one.
#
#   Tests/python.sh [pytest arguments]
#
# Fetches from the Python registry with pip: jeepney (the package's one dependency), and for the
# venvs without system site packages pytest, mypy and ruff.  Needs (Debian): python3 python3-venv
# python3-gi python3-pytest gir1.2-glib-2.0 dbus-daemon (dbus-bin) and, for the cross-implementation
# checks, the Swift tools in $WORMHOLE_SWIFT_BIN (default: .build/debug; the tests that need them
# are skipped, saying why, when they are missing).  PYTHONS="/path/python ..." overrides step 3's
# interpreters.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
: "${WORMHOLE_SWIFT_BIN:=$repo/.build/debug}"
case $WORMHOLE_SWIFT_BIN in /*) ;; *) WORMHOLE_SWIFT_BIN=$repo/$WORMHOLE_SWIFT_BIN ;; esac
export WORMHOLE_SWIFT_BIN

system=/usr/bin/python3
if ! "$system" -c 'import gi' 2>/dev/null; then
    echo "python.sh: $system has no 'gi' (apt-get install python3-gi gir1.2-glib-2.0)" >&2
    exit 1
fi

# The oldest and newest Python 3.9+ here (each once).
if [ -z "${PYTHONS:-}" ]; then
    found=$(for candidate in "$HOME"/.pyenv/versions/3.*/bin/python3 /usr/local/bin/python3.* /usr/bin/python3.*; do
        [ -x "$candidate" ] || continue
        version=$("$candidate" -c 'import sys; print("%d %d" % sys.version_info[:2]) if sys.version_info >= (3, 9) else None' 2>/dev/null) || continue
        [ "$version" = None ] || [ -z "$version" ] || echo "$version $candidate"
    done | sort -n -k1,1 -k2,2 -u)
    oldest=$(echo "$found" | head -n 1 | cut -d' ' -f3)
    newest=$(echo "$found" | tail -n 1 | cut -d' ' -f3)
    [ -n "$oldest" ] || oldest=$system
    [ -n "$newest" ] || newest=$system
    PYTHONS="$oldest"
    [ "$newest" = "$oldest" ] || PYTHONS="$oldest $newest"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-py-tests.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM HUP
runtime="$work/runtime"
mkdir -m 0700 "$runtime"
status=0
PYTEST_ARGS="$*"

venv() {  # venv NAME PYTHON [--system-site-packages]: a venv with the package installed (not the sources)
    "$2" -m venv ${3:-} "$work/$1"
    "$work/$1/bin/python" -m pip install --quiet --disable-pip-version-check "$repo/Python"
}

run_suite() {  # run_suite LABEL VENV ENV...
    label=$1 python=$work/$2/bin/python
    shift 2
    echo "== python tests: $label ($("$python" -c 'import sys; print(sys.version.split()[0])'))"
    set +e
    (cd "$work" && env "$@" WORMHOLE_PY_INSTALLED=1 "$python" -m pytest -p no:cacheprovider -q \
        "$repo/Python/tests" ${PYTEST_ARGS})
    rc=$?
    set -e
    case $rc in
        0) ;;
        5) echo "python.sh: pytest collected no tests ($label)" >&2; status=1 ;;
        *) status=1 ;;
    esac
}

desktop="XDG_RUNTIME_DIR=$runtime"
bare="-u XDG_RUNTIME_DIR WORMHOLE_TEST_NO_RUNTIME_DIR=1"

# 1. lint, on the newest Python
newest=${PYTHONS##* }
venv lint "$newest"
"$work/lint/bin/python" -m pip install --quiet --disable-pip-version-check mypy ruff
echo "== python lint: ruff, mypy --strict"
(cd "$repo/Python" && "$work/lint/bin/python" -m ruff check --no-cache wormhole_py) || status=1
(cd "$repo/Python" && "$work/lint/bin/python" -m mypy --no-incremental --cache-dir=/dev/null wormhole_py) || status=1

# 2. gio (PyGObject from Debian)
venv gio "$system" --system-site-packages
if ! "$work/gio/bin/python" -c 'import pytest' 2>/dev/null; then
    echo "python.sh: no pytest (apt-get install python3-pytest)" >&2
    exit 1
fi
run_suite "gio, desktop session (XDG_RUNTIME_DIR)" gio $desktop
run_suite "gio, no XDG_RUNTIME_DIR" gio $bare

# 3. jeepney (no PyGObject), oldest and newest Python
n=0
for python in $PYTHONS; do
    n=$((n + 1))
    venv "jeepney$n" "$python"
    "$work/jeepney$n/bin/python" -m pip install --quiet --disable-pip-version-check pytest
    if "$work/jeepney$n/bin/python" -c 'import gi' 2>/dev/null; then
        echo "python.sh: $python sees PyGObject in a venv without system site packages" >&2
        status=1
    fi
    if [ $n = 1 ]; then
        run_suite "jeepney, desktop session (XDG_RUNTIME_DIR)" "jeepney$n" $desktop
    else
        run_suite "jeepney, no XDG_RUNTIME_DIR" "jeepney$n" $bare
    fi
done
exit $status
