#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The user's part of Tests/debian-root.sh, run inside the fresh Debian root as a normal user with
# its own XDG_RUNTIME_DIR, from a directory holding README.md, docs/gjs.md and doc-blocks.py:
# the installed packages as a user meets them. WORMHOLE_VERSION is the packages' version.
set -euo pipefail
cd "$(dirname "$0")"
fail() { echo "debian-root (user): $*" >&2; exit 1; }
version=${WORMHOLE_VERSION:?}
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# No Swift: no toolchain on PATH, no Swift runtime library anywhere in the root.
! command -v swift >/dev/null || fail "a Swift toolchain is visible: $(command -v swift)"
swift_libraries=$(find / -xdev \( -name 'libswiftCore.so*' -o -name 'libFoundationEssentials.so*' \) 2>/dev/null || true)
[ -z "$swift_libraries" ] || fail "Swift's runtime is in the root: $swift_libraries"

# The two wormholes side by side: Debian's magic-wormhole keeps `wormhole`.
magic=$(wormhole --version 2>&1) || fail "magic-wormhole's wormhole --version failed: $magic"
[[ $magic == "magic-wormhole "* ]] || fail "wormhole --version is not magic-wormhole's: $magic"
ours=$(wormholectl --version)
[[ $ours == *" $version (contract "* ]] || fail "wormholectl --version says '$ours', not $version"
echo "debian-root: $(command -v wormhole): $magic; $(command -v wormholectl): $ours"

# A private bus from the packaged configuration, in the user's runtime directory.
[ "$(stat -c %a "$XDG_RUNTIME_DIR")" = 700 ] || fail "XDG_RUNTIME_DIR is not 0700"
dbus-daemon --config-file=/usr/share/wormhole/wormhole-session.conf --fork --print-address=1 --print-pid=1 \
    --address="unix:path=$XDG_RUNTIME_DIR/bus" >"$work/daemon"
{ read -r DBUS_SESSION_BUS_ADDRESS; read -r daemon; } <"$work/daemon"
pids+=("$daemon")
export DBUS_SESSION_BUS_ADDRESS
unset WORMHOLE_CONTAINER_ROOT XDG_DATA_HOME

# Reads lines of a listener's output (file descriptor $1) until one contains $2 (30 s at most
# for each line).
expect_line() {
    local line heard=()
    while IFS= read -r -t 30 line <&"$1"; do
        heard+=("$line")
        [[ $line == *"$2"* ]] && return 0
    done
    fail "$3 did not print '$2' (it printed: ${heard[*]:-nothing})"
}

# Terminal 1 of README's tour: the installed tool stands in for the Swift listener, and beside
# it README's Python listener on the system's python3 (announcing itself once its
# subscription is active, as the Swift listener prints `listening`).
mkfifo "$work/tool" "$work/tool.err" "$work/python"
wormholectl listen --group group.com.example.tour button >"$work/tool" 2>"$work/tool.err" &
pids+=($!)
exec 5<"$work/tool" 6<"$work/tool.err"
expect_line 6 ready "wormholectl listen"
python3 doc-blocks.py README.md python-listener >"$work/listener.py"
cat >"$work/announce.py" <<'EOF'
import runpy, sys
import wormhole_py

listen_async = wormhole_py.MessageCenter.listen_async

async def announced(self, *arguments, **options):
    subscription = await listen_async(self, *arguments, **options)
    print("listening", flush=True)
    return subscription

wormhole_py.MessageCenter.listen_async = announced
runpy.run_path(sys.argv[1], run_name="__main__")
EOF
/usr/bin/python3 -u "$work/announce.py" "$work/listener.py" >"$work/python" 2>&1 &
pids+=($!)
exec 7<"$work/python"
expect_line 7 listening "README's Python listener"

# README's shell blocks (<!-- session -->), as a user with the packages runs them: no build,
# the installed tool, the system's python3; the Swift tour's `send N` is the tool's send.
steps=0
while IFS= read -r command; do
    case "$command" in
    "swift build"* | "export PATH="*) continue ;;
    esac
    run=$command
    if [[ $run =~ ^\.\./tour/\.build/debug/tour\ send\ ([0-9]+) ]]; then
        run="wormholectl send --group group.com.example.tour button '{\"buttonNumber\":${BASH_REMATCH[1]}}'"
    fi
    run=${run/#PYTHONPATH=Python /}
    echo "\$ $run"
    eval "$run" || fail "README's command failed: $command"
    if [[ $command =~ \#\ terminal\ 1\ prints:\ button\ ([0-9]+) ]]; then
        expect_line 5 "\"buttonNumber\":${BASH_REMATCH[1]}" "wormholectl listen"
        expect_line 7 "button ${BASH_REMATCH[1]}" "README's Python listener"
    fi
    steps=$((steps + 1))
done < <(python3 doc-blocks.py README.md session --commands)
echo "debian-root: README's tour: $steps commands, heard by wormholectl listen and the Python listener"

# docs/gjs.md's first program, importing the installed module: a stored message at start, then
# one sent while it listens.
module=/usr/share/gjs-1.0/wormhole-dbus/wormhole.js
python3 doc-blocks.py docs/gjs.md gjs-listener | sed "s|from './wormhole.js'|from 'file://$module'|" >"$work/watch.js"
grep -q "file://$module" "$work/watch.js" || fail "docs/gjs.md's first program does not import ./wormhole.js"
wormholectl send --group group.com.example.lines --directory lines toShell '{"id":"1","text":"stored"}'
mkfifo "$work/gjs"
gjs -m "$work/watch.js" >"$work/gjs" 2>&1 &
pids+=($!)
exec 8<"$work/gjs"
expect_line 8 'stored {"id":"1","text":"stored"}' "the GJS listener"
wormholectl send --group group.com.example.lines --directory lines toShell '{"id":"2","text":"hello"}'
expect_line 8 'posted {"id":"2","text":"hello"}' "the GJS listener"
echo "debian-root: docs/gjs.md's listener imports $module and hears wormholectl"

# The Python package where the system's python3 finds it, and its command.
where=$(/usr/bin/python3 -c 'import wormhole_py; print(wormhole_py.__file__, wormhole_py.__version__)')
[ "$where" = "/usr/lib/python3/dist-packages/wormhole_py/__init__.py $version" ] || fail "python3 imports $where"
[[ $(wormhole-py --version) == "wormhole-py $version (contract "* ]] || fail "wormhole-py --version: $(wormhole-py --version)"

# The man page, the bash completion, doctor.
[ "$(man -w wormholectl)" = /usr/share/man/man1/wormholectl.1.gz ] || fail "man -w wormholectl: $(man -w wormholectl 2>&1)"
page=$(MANPAGER=cat MANWIDTH=80 man wormholectl 2>&1) || fail "man wormholectl failed: $page"
grep -q "^SYNOPSIS" <<<"$page" && grep -q "wormholectl" <<<"$page" || fail "man wormholectl shows no page of the tool: $page"
completion=$(bash -c 'source /usr/share/bash-completion/bash_completion
    __load_completion wormholectl || exit 1
    COMP_WORDS=(wormholectl se); COMP_CWORD=1; COMP_LINE="wormholectl se"; COMP_POINT=${#COMP_LINE}
    function=$(complete -p wormholectl | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
    "$function" wormholectl se wormholectl
    printf "%s\n" "${COMPREPLY[@]}"')
grep -qx send <<<"$completion" || fail "bash completes 'wormholectl se' to: ${completion:-nothing}"
wormholectl doctor --group group.com.example.tour button >"$work/doctor" 2>&1 || { cat "$work/doctor" >&2; fail "wormholectl doctor failed"; }

# libwormhole where the dynamic linker and pkg-config find it; the examples package's files.
/sbin/ldconfig -p | grep -q 'libwormhole.so.1 ' || fail "ldconfig does not know libwormhole.so.1"
if command -v pkg-config >/dev/null; then
    [ "$(pkg-config --modversion wormhole-1)" = "$version" ] || fail "pkg-config --modversion wormhole-1: $(pkg-config --modversion wormhole-1)"
fi
manifest=/usr/share/wormholectl-examples/linegrabber/chromium/com.example.linegrabber.json
host=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["path"])' "$manifest")
[ -x "$host" ] || fail "the manifest's host $host is not an executable"
! ldd "$host" | grep -q 'not found' || fail "the host lacks a library: $(ldd "$host")"
echo "debian-root: python3 imports wormhole_py $version, man, bash completion, doctor, libwormhole, examples: all there"
