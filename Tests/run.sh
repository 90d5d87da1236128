#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Wormhole's test command: installs what is missing, builds everything (no warnings allowed in
# our own code) and runs the whole suite, in the configuration of the machine it is started on,
# or in another one a user runs (docs/testing.md, *Configurations*):
#
#   Tests/run.sh                  this machine's configuration: with $XDG_RUNTIME_DIR (a desktop
#                                 session) the doorbell is on, without it (root over SSH, CI) off
#   Tests/run.sh --desktop        as a desktop user: a normal user (as root, a throwaway one made
#                                 with useradd and removed at the end) with a runtime directory
#                                 of its own, so the doorbell is on
#   Tests/run.sh --no-session     without a runtime directory (the doorbell off), whoever runs it
#   Tests/run.sh --release        the executables the tests start (wormholectl, wormhole-test-peer,
#                                 the examples) from the release build the packages hold
#                                 (scripts/release-build.sh: the Swift runtime linked in; the test
#                                 peer, which no package holds, with the runtime shared)
#
# --release combines with the others; anything else is passed to `swift test` (`--filter NAME`).
# Every run gets a throwaway runtime directory (0700, removed at the end) in place of the
# runner's, and the runner's own `$XDG_RUNTIME_DIR/wormhole` is compared before and after: no
# test touches it, nor the runner's session bus (every bus test starts its own dbus-daemon from
# dbus/wormhole-session.conf; see Tests/WormholeTestSupport/TestBus.swift).
#
# No kernel limit needs raising. Every dbus-daemon takes one inotify instance from a per-user
# limit (fs.inotify.max_user_instances, 128 by default), as does every listening Wormhole
# process; with at most WORMHOLE_TEST_WIDTH tests at a time (default 16) a run holds about 18.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=machine
release=0
passed=()
while (($#)); do
    case "$1" in
    --desktop) mode=desktop ;;
    --no-session) mode=no-session ;;
    --release) release=1 ;;
    -h | --help)
        sed -n '3,21p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) passed+=("$1") ;;
    esac
    shift
done
.ci/install-deps
scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-run.XXXXXX")
chmod 755 "$scratch"
log="$scratch/build.log"
made_user=""
tests=""
cleanup() {
    local status=$?
    if [ -n "$tests" ]; then
        local left
        left=$(pgrep -g "$tests" -a 2>/dev/null || true)
        if [ -n "$left" ]; then
            # The tests run in a process group of their own (`set -m`): whatever a test left
            # running is killed, however the run ends (Ctrl-C included), and named, to get fixed.
            printf 'run.sh: the tests left these running; killed:\n%s\n' "$left" >&2
            kill -KILL -- "-$tests" 2>/dev/null || true
        fi
    fi
    if [ -n "$made_user" ]; then
        pkill -KILL -u "$made_user" 2>/dev/null || true
        userdel "$made_user" 2>/dev/null || true
    fi
    rm -rf "$scratch"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

swift build --build-tests 2>&1 | tee "$log"
# A warning inside a macro's expansion (`#expect(try …)`) is reported as `macro expansion …`,
# with the project's file in the note that follows.
if grep -E '^(/[^:]*/)?(Sources|Tests|Examples)/[^:]*:[0-9]+:[0-9]+: warning:|^macro expansion [^:]*:[0-9]+:[0-9]+: warning:' "$log" | grep -v '/.build' | grep -q .; then
    echo "error: the build has warnings in the project's own code (listed above)" >&2
    exit 1
fi
products=()
if ((release)); then
    # The products a user installs, linked as the packages link them (the Swift runtime in each
    # executable: scripts/build-debs.sh packs this build); the test bundle stays the debug build
    # and starts these.
    scripts/release-build.sh 2>&1 | tee "$log" | grep -E 'error|warning:|Compiling|Build complete' | tail -3
    # The test peer is no product anyone installs: it stands in for other apps, one of them an
    # app that kept its settings with Foundation's own UserDefaults (DefaultsImportTests), which
    # swift-corelibs-foundation linked in statically cannot do: storing an array traps (SIGILL in
    # __CFTypeCollectionRetain; `wormhole-test-peer foundation-write-suite S` built with
    # --static-swift-stdlib, Swift 6.3.1). So it is built as such an app is, Swift runtime shared.
    swift build -c release --product wormhole-test-peer 2>&1 | tee -a "$log" | grep -E 'error|warning:|complete!' | tail -1
    products=(WORMHOLE_TEST_PRODUCTS="$PWD/.build/release")
fi

# The runner's own runtime directory, as it is before the run (compared after it).
runner_runtime="${XDG_RUNTIME_DIR:-}"
snapshot() {
    [ -n "$runner_runtime" ] && [ -d "$runner_runtime/wormhole" ] || return 0
    find "$runner_runtime/wormhole" -printf '%P %y %s %T@\n' 2>/dev/null | sort
}
before=$(snapshot)

runtime="$scratch/runtime"
environment=(env -u XDG_RUNTIME_DIR)
case "$mode" in
machine)
    # A desktop session has a runtime directory: the run gets a throwaway one instead.
    if [ -n "$runner_runtime" ]; then
        mkdir -m 700 "$runtime"
        environment=(env XDG_RUNTIME_DIR="$runtime")
    fi
    ;;
no-session) ;;
desktop)
    uid=$(id -u)
    if [ "$uid" -eq 0 ]; then
        # A normal user of its own: no privileges, a home of its own, removed at the end.
        made_user="wormhole-t$$"
        useradd --create-home --home-dir "$scratch/home" --shell /bin/sh --user-group "$made_user"
        # What root built, run by the user from a copy of the checkout it owns (root's checkout
        # may be where the user cannot read, and a few tests write beside the products): the
        # sources, the test bundle and the executables, at the same paths relative to the copy.
        copy="$scratch/repository"
        mkdir "$copy"
        tar --exclude=./.build -cf - . | tar -xf - -C "$copy"
        bins=("$(swift build --show-bin-path)")
        if ((release)); then bins+=("$(swift build -c release --show-bin-path)"); fi
        for directory in "${bins[@]}"; do
            relative=${directory#"$PWD"/}
            mkdir -p "$copy/$relative"
            find "$directory" -maxdepth 1 -type f -perm -u+x -exec cp -a {} "$copy/$relative/" \;
            name=$(basename "$relative")
            [ -e "$copy/.build/$name" ] || ln -s "${relative#.build/}" "$copy/.build/$name"
        done
        chown -R "$made_user:" "$copy" "$scratch/home"
        bundle="$copy/${bins[0]#"$PWD"/}/WormholePackageTests.xctest"
        if ((release)); then products=(WORMHOLE_TEST_PRODUCTS="$copy/.build/release"); fi
        products+=(WORMHOLE_TEST_REPOSITORY="$copy")
    fi
    mkdir -m 700 "$runtime"
    if [ -n "$made_user" ]; then chown "$made_user:" "$runtime"; fi
    environment=(env XDG_RUNTIME_DIR="$runtime")
    ;;
esac

width="${WORMHOLE_TEST_WIDTH:-16}"
set -m
if [ "$mode" = desktop ] && [ -n "$made_user" ]; then
    # The test bundle itself, as `swift test` runs it: the user needs no toolchain state of its
    # own, and no access to root's package checkouts.
    setpriv --reuid="$made_user" --regid="$made_user" --init-groups --reset-env \
        env HOME="$scratch/home" USER="$made_user" LOGNAME="$made_user" PATH="$PATH" TMPDIR=/tmp \
        XDG_RUNTIME_DIR="$runtime" SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$width" "${products[@]}" \
        "$bundle" --testing-library swift-testing "${passed[@]}" </dev/null &
else
    "${environment[@]}" "${products[@]}" SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$width" \
        swift test --skip-build "${passed[@]}" &
fi
tests=$!
set +m
status=0
wait "$tests" || status=$?

after=$(snapshot)
if [ "$before" != "$after" ]; then
    echo "run.sh: the tests changed the runner's own $runner_runtime/wormhole:" >&2
    diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") >&2 || true
    status=1
fi
exit "$status"
