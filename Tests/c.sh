#!/usr/bin/env bash
# libwormhole's checks (docs/c.md), as CI runs them after the builds of Tests/run.sh:
#
#   Tests/c.sh [--release] [--no-asan] [--only-machine]
#   Tests/c.sh --update [--release]    rewrites docs/api/libwormhole.txt from the library (a
#                                      deliberate ABI change; commit it with a CHANGELOG line)
#
# 1. installs the library with scripts/libwormhole.sh into a temporary prefix (from the debug
#    build, or the release build with --release; nothing is built here) and builds everything
#    below against the installed header and .pc, never the build tree;
# 2. the exported symbols (`nm -D --defined-only`) must be docs/api/libwormhole.txt exactly,
#    the SONAME libwormhole.so.1, and the library must need nothing beyond libdbus-1 and the
#    C/C++ runtime;
# 3. wormhole.h compiles cleanly as C99 (`gcc -std=c99 -Wall -Wextra -pedantic -Werror`) and
#    C++17 (`g++ -std=c++17 …`), and wormhole-glib.h with GLib;
# 4. the C tests (Tests/C), the exit drain (Tests/faults-c-exit.sh, WH_EXIT_SENDS times,
#    default 50) and a journal written from C read back in order by the Swift tool and a C
#    reader (Tests/faults-c-journal.sh, WH_JOURNAL_RECORDS records, default 2,000) run
#    against the Swift tool and the Python package on a private bus, in the
#    configurations of Tests/run.sh: this machine's without a runtime directory (the doorbell
#    off) and, as root, a throwaway desktop user with one (the doorbell on). The C programs are
#    built with AddressSanitizer and LeakSanitizer (--no-asan: without); the library is not
#    instrumented, and Tests/C/lsan.supp says why each suppression is there;
# 5. the C GTK 4 Lines window (Examples/Lines/c) under Xvfb and the C++ Qt 6 one
#    (Examples/Lines/qt, offscreen) (Tests/lines-c.sh);
# 6. the Vala and Rust examples, built with valac (wormhole-1.vapi) and rustc alone, and their
#    behaviour across processes (Tests/bindings.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
repository=$PWD
configuration=--debug
build=debug
asan=1
only_machine=0
update=0
while (($#)); do
    case "$1" in
    --release) configuration=""; build=release ;;
    --no-asan) asan=0 ;;
    --only-machine) only_machine=1 ;;
    --update) update=1 ;;
    *) echo "c.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
fail() { echo "c.sh: $*" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-c.XXXXXX")
chmod 755 "$work"
made_user=""
cleanup() {
    local status=$?
    if [ -n "$made_user" ]; then
        pkill -KILL -u "$made_user" 2>/dev/null || true
        userdel "$made_user" 2>/dev/null || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT

# 1. Install, as a user of the library would find it.
prefix=$work/prefix
# shellcheck disable=SC2086
scripts/libwormhole.sh --no-build $configuration --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
library=$prefix/lib/libwormhole.so.1
# Staged as a distribution package does it: /usr, a multiarch libdir, under a DESTDIR.
stage=$work/stage
# shellcheck disable=SC2086
scripts/libwormhole.sh --no-build $configuration --prefix /usr --libdir /usr/lib/x86_64-linux-gnu --destdir "$stage" \
    >/dev/null
for file in usr/lib/x86_64-linux-gnu/libwormhole.so.1 usr/lib/x86_64-linux-gnu/libwormhole.so \
    usr/include/wormhole-1/wormhole.h usr/include/wormhole-1/wormhole-glib.h usr/include/wormhole-1/wormhole-qt.h \
    usr/share/vala/vapi/wormhole-1.vapi usr/share/vala/vapi/wormhole-1.deps usr/lib/x86_64-linux-gnu/pkgconfig/wormhole-1.pc; do
    [ -e "$stage/$file" ] || fail "a staged install has no /$file"
done
grep -qx 'libdir=/usr/lib/x86_64-linux-gnu' "$stage/usr/lib/x86_64-linux-gnu/pkgconfig/wormhole-1.pc" ||
    fail "the staged wormhole-1.pc does not name its libdir"
[ "$(find "$stage" -mindepth 1 -maxdepth 1)" = "$stage/usr" ] || fail "the staged install wrote outside its prefix"

# 2. The ABI: exported functions, SONAME, dependencies.
nm -D --defined-only "$library" | awk '$2 ~ /^[A-Z]$/ && $2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort \
    >"$work/exported.txt"
if ((update)); then
    cp "$work/exported.txt" docs/api/libwormhole.txt
    echo "c.sh: docs/api/libwormhole.txt now lists $(wc -l <"$work/exported.txt") functions"
    exit 0
fi
if ! diff -u docs/api/libwormhole.txt "$work/exported.txt"; then
    fail "the exported functions differ from docs/api/libwormhole.txt (above; a deliberate ABI change updates it)"
fi
readelf -d "$library" | grep -q 'SONAME.*\[libwormhole.so.1\]' || fail "the SONAME is not libwormhole.so.1"
readelf -d "$library" | grep -q 'NODELETE' || fail "the library is not linked with -z nodelete"
needed=$(readelf -d "$library" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | grep -v -E \
    '^(libdbus-1\.so\.3|libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$' || true)
[ -z "$needed" ] || fail "the library needs more than libdbus-1 and the C/C++ runtime: $needed"
echo "c.sh: $(wc -l <"$work/exported.txt") exported functions as listed, SONAME libwormhole.so.1, nodelete," \
    "$(stat -c %s "$library") bytes stripped"

# 3. The headers, strictly.
cflags=$(pkg-config --cflags wormhole-1)
libs=$(pkg-config --libs wormhole-1)
rpath=-Wl,-rpath,$prefix/lib
printf '#include <wormhole.h>\nint main(void) { return wh_version(0) == 0; }\n' >"$work/header.c"
# shellcheck disable=SC2086
gcc -std=c99 -Wall -Wextra -pedantic -Werror $cflags -o "$work/header-c" "$work/header.c" $libs $rpath
cp "$work/header.c" "$work/header.cpp"
# shellcheck disable=SC2086
g++ -std=c++17 -Wall -Wextra -pedantic -Werror $cflags -o "$work/header-cpp" "$work/header.cpp" $libs $rpath
"$work/header-c" && "$work/header-cpp" || fail "a program linked against the installed library does not run"
printf '#include <wormhole-glib.h>\nguint attach(wh_context *c) { return wh_glib_attach(c, NULL); }\n' >"$work/glib.c"
# shellcheck disable=SC2086
gcc -std=c99 -Wall -Wextra -pedantic -Werror $cflags $(pkg-config --cflags glib-2.0) -c -o "$work/glib.o" "$work/glib.c"
cp "$work/glib.c" "$work/glib.cpp"
# shellcheck disable=SC2086
g++ -std=c++17 -Wall -Wextra -Werror $cflags $(pkg-config --cflags glib-2.0) -c -o "$work/glib-cpp.o" "$work/glib.cpp"
printf '#include <wormhole-qt.h>\nQSocketNotifier *attach(wh_context *c) { return wh_qt_attach(c); }\n' >"$work/qt.cpp"
# shellcheck disable=SC2046
g++ -std=c++17 -fPIC -Wall -Wextra -pedantic -Werror $cflags $(pkg-config --cflags Qt6Core) -c -o "$work/qt.o" "$work/qt.cpp"
echo "c.sh: wormhole.h is clean C99 and C++17, wormhole-glib.h compiles with GLib, wormhole-qt.h with Qt 6"

# 4. The tests, with AddressSanitizer and LeakSanitizer in the C programs.
sanitize=()
if ((asan)); then sanitize=(-fsanitize=address -fno-omit-frame-pointer); fi
mkdir -p "$work/bin"
# shellcheck disable=SC2086
gcc -std=c99 -Wall -Wextra -Werror -g "${sanitize[@]}" $cflags -o "$work/bin/wh-tests" Tests/C/tests.c Tests/C/wh-test.c \
    Tests/C/test-notify.c Tests/C/test-store.c Tests/C/test-journal.c $libs -lpthread $rpath
# shellcheck disable=SC2086
gcc -std=c99 -Wall -Wextra -Werror -g "${sanitize[@]}" $cflags -o "$work/bin/send-and-exit" Tests/C/send-and-exit.c $libs $rpath
# shellcheck disable=SC2086
gcc -std=c99 -Wall -Wextra -Werror -g "${sanitize[@]}" $cflags -o "$work/bin/journal-c" Tests/C/journal-c.c $libs $rpath
# The README's C listener, as written (its block follows `<!-- c-listener -->`).
awk '/<!-- c-listener -->/ { found = 1; next } found && /^```c/ { inside = 1; next } inside && /^```/ { exit }
    inside { print }' README.md >"$work/listener.c"
[ -s "$work/listener.c" ] || fail "README.md has no C block after <!-- c-listener -->"
# shellcheck disable=SC2086
gcc -std=c99 -Wall -Werror $cflags $(pkg-config --cflags glib-2.0) -o "$work/bin/readme-listener" "$work/listener.c" \
    $libs $(pkg-config --libs glib-2.0) $rpath
swift_bin=$(swift build -c "$build" --show-bin-path)
[ -x "$swift_bin/wormholectl" ] || fail "$swift_bin/wormholectl is not built (Tests/run.sh builds it)"
cp "$swift_bin/wormholectl" "$work/bin/"
cp -r Python "$work/python"
cp Tests/C/lsan.supp "$work/"
cp -r dbus "$work/dbus"
mkdir -p "$work/Tests" && cp Tests/faults-c-exit.sh Tests/faults-c-journal.sh "$work/Tests/"

# One configuration: a private bus, a fresh container root, the tests and the exit drain.
cat >"$work/configuration.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
work=$1
label=$2
scratch=$(mktemp -d "/tmp/wormhole-c-$label.XXXXXX")
dbus-daemon --config-file="$work/dbus/wormhole-session.conf" --address="unix:path=$scratch/bus" --nofork \
    --print-address >"$scratch/address" 2>/dev/null &
daemon=$!
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$scratch"' EXIT
grep -q -m1 '^unix:' < <(timeout 10 tail -n +1 -F "$scratch/address" 2>/dev/null)
export DBUS_SESSION_BUS_ADDRESS="unix:path=$scratch/bus"
export WORMHOLE_CONTAINER_ROOT="$scratch/root"
export WH_TEST_SWIFT="$work/bin/wormholectl"
export WH_TEST_PYTHON="/usr/bin/python3 -m wormhole_py"
export WH_TEST_DBUS_CONFIG="$work/dbus/wormhole-session.conf"
export PYTHONPATH="$work/python" PYTHONDONTWRITEBYTECODE=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=23
export LSAN_OPTIONS="suppressions=$work/lsan.supp:print_suppressions=0"
echo "c.sh: $label: doorbell $([ -n "${XDG_RUNTIME_DIR:-}" ] && echo on || echo off)"
"$work/bin/wh-tests"
SEND_AND_EXIT="$work/bin/send-and-exit" WORMHOLE="$work/bin/wormholectl" \
    bash "$work/Tests/faults-c-exit.sh" "${WH_EXIT_SENDS:-50}"
JOURNAL_C="$work/bin/journal-c" WORMHOLE_SWIFT_BIN="$work/bin" \
    bash "$work/Tests/faults-c-journal.sh" "${WH_JOURNAL_RECORDS:-2000}" 0
# The README's listener hears the tour's send. It says nothing when it listens, so the send is
# repeated until its line comes (each wait ends at the line, or after a second).
stdbuf -oL "$work/bin/readme-listener" >"$scratch/listener.out" &
listener=$!
heard=0
for _ in $(seq 30); do
    "$work/bin/wormholectl" send --group group.com.example.tour button '{"buttonNumber":10}'
    if grep -q -m1 -F 'button {"buttonNumber":10}' < <(timeout 1 tail -n +1 -F "$scratch/listener.out" 2>/dev/null); then
        heard=1
        break
    fi
done
kill "$listener"
wait "$listener" 2>/dev/null || true
[ "$heard" = 1 ] || { echo "c.sh: $label: the README's C listener printed: $(cat "$scratch/listener.out")" >&2; exit 1; }
echo "the README's C listener printed: $(head -1 "$scratch/listener.out")"
EOF
chmod 755 "$work/configuration.sh"
chmod -R a+rX "$work"

env -u XDG_RUNTIME_DIR bash "$work/configuration.sh" "$work" machine
if ((!only_machine)) && [ "$(id -u)" -eq 0 ]; then
    made_user="wormhole-c$$"
    useradd --create-home --home-dir "$work/home" --shell /bin/sh --user-group "$made_user"
    mkdir -m 700 "$work/runtime"
    chown "$made_user:" "$work/runtime"
    setpriv --reuid="$made_user" --regid="$made_user" --init-groups --reset-env \
        env HOME="$work/home" USER="$made_user" PATH="$PATH" XDG_RUNTIME_DIR="$work/runtime" \
        WH_EXIT_SENDS="${WH_EXIT_SENDS:-50}" WH_JOURNAL_RECORDS="${WH_JOURNAL_RECORDS:-2000}" bash "$work/configuration.sh" "$work" desktop
fi

# 5. The GTK example.
Tests/lines-c.sh "$prefix"
Tests/lines-c.sh --qt "$prefix"
# 6. Vala and Rust.
Tests/bindings.sh "$prefix"
echo "c.sh: all passed"
