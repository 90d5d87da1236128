#!/usr/bin/env bash
# libwormhole from Vala and Rust (docs/c.md, *Vala*, *Rust*): the examples are built against an
# installed library (its header, .pc and wormhole-1.vapi, never the build tree) and their
# behaviour is checked across processes against the Swift tool, on a private dbus-daemon:
#
# - Tests/C/vapi-test.vala calls each group of wormhole-1.vapi (options with a log handler,
#   notifications, last state, check tokens, shared defaults, mailboxes with suspension, transient
#   messages, journals) and checks what comes back;
# - Examples/Lines/vala/lines-history.vala (valac, GLib main loop): its append is read back in
#   order by `wormholectl listen --journal`; it follows records the Swift tool appended, and with a
#   durable consumer a second run prints only what came after the first;
# - Examples/Lines/rust/lines_clips.rs (rustc alone, hand-written extern "C"): prints the stored
#   clip, then a clip the Swift tool sends, and exits.
#
#   Tests/bindings.sh [PREFIX]
#
# PREFIX as for Tests/lines-c.sh (Tests/c.sh passes its own). Needs (Debian): valac, rustc.
set -euo pipefail
repository=$(cd "$(dirname "$0")/.." && pwd)
bin=${WORMHOLE_SWIFT_BIN:-$repository/.build/debug}
for tool in valac rustc dbus-daemon pkg-config; do
    command -v "$tool" >/dev/null || { echo "Tests/bindings.sh: $tool is not installed" >&2; exit 2; }
done
[ -x "$bin/wormholectl" ] || { echo "Tests/bindings.sh: no wormhole in $bin" >&2; exit 2; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-bindings.XXXXXX")
daemon="" follower=""
cleanup() {
    [ -z "$follower" ] || kill "$follower" 2>/dev/null || true
    [ -z "$daemon" ] || kill "$daemon" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "Tests/bindings.sh: $*" >&2; exit 1; }
prefix=${1:-}
if [ -z "$prefix" ]; then
    prefix=$scratch/prefix
    "$repository/scripts/libwormhole.sh" --debug --no-build --prefix "$prefix" >/dev/null
fi
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
libdir=$(pkg-config --variable=libdir wormhole-1)
# Vala's C is generated: its const-qualifier warnings are valac's, so the C compiler is quiet.
valac --vapidir="$prefix/share/vala/vapi" --pkg wormhole-1 -X -w -X "-Wl,-rpath,$libdir" \
    -d "$scratch" -o lines-history "$repository/Examples/Lines/vala/lines-history.vala"
valac --vapidir="$prefix/share/vala/vapi" --pkg wormhole-1 -X -w -X "-Wl,-rpath,$libdir" \
    -d "$scratch" -o vapi-test "$repository/Tests/C/vapi-test.vala"
rustc --edition 2018 -O -o "$scratch/lines-clips" "$repository/Examples/Lines/rust/lines_clips.rs" \
    -L "$libdir" -l wormhole -C "link-args=-Wl,-rpath,$libdir"

dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --address="unix:path=$scratch/bus" --nofork \
    --print-address >"$scratch/address" 2>/dev/null &
daemon=$!
grep -q -m1 '^unix:' < <(timeout 10 tail -n +1 -F "$scratch/address" 2>/dev/null)
export DBUS_SESSION_BUS_ADDRESS="unix:path=$scratch/bus" WORMHOLE_CONTAINER_ROOT="$scratch/root"
group=group.com.example.lines
w() { "$bin/wormholectl" "$@" --group "$group" --directory lines; }
# waits_for FILE TEXT: until FILE has a line with TEXT (30 s at most).
waits_for() { grep -q -m1 -F "$2" < <(timeout 30 tail -n +1 -F "$1" 2>/dev/null); }

# Vala: every group of the binding (Tests/C/vapi-test.vala), then the example's journal.
out=$("$scratch/vapi-test") || fail "the .vapi's test: $out"

w send --journal history '{"text":"one"}'
w send --journal history '{"text":"two"}'
[ "$("$scratch/lines-history" append 'from "Vala"')" = 3 ] || fail "the Vala append was not record 3"
w listen --journal history --from start --count 3 --timeout 20 2>/dev/null >"$scratch/swift.out"
grep -q '"sequence":3,"message":{"text":"from \\"Vala\\""}' "$scratch/swift.out" ||
    fail "wormholectl listen --journal read: $(cat "$scratch/swift.out")"
follow() {  # follow CONSUMER OUT UNTIL: runs the follower until OUT has UNTIL, then stops it
    "$scratch/lines-history" follow "$1" >"$2" 2>"$2.err" &
    follower=$!
    waits_for "$2.err" ready || fail "the Vala follower never said ready: $(cat "$2.err")"
    waits_for "$2" "$3" || fail "the Vala follower printed: $(cat "$2" "$2.err")"
    kill -TERM "$follower"
    wait "$follower" || fail "the Vala follower exited with $?"
    follower=""
}
follow indexer "$scratch/vala1.out" '3 {"text":"from \"Vala\""}'
[ "$(cut -d' ' -f1 "$scratch/vala1.out" | tr '\n' ' ')" = "1 2 3 " ] || fail "Vala followed: $(cat "$scratch/vala1.out")"
w send --journal history '{"text":"four"}'
follow indexer "$scratch/vala2.out" '4 {"text":"four"}'
[ "$(cat "$scratch/vala2.out")" = '4 {"text":"four"}' ] || fail "the durable consumer printed: $(cat "$scratch/vala2.out")"
echo "Tests/bindings.sh: the .vapi's test passed; Vala appended record 3 (read by the Swift tool) and followed 1-3, then only 4 as a consumer"

# Rust: the mailbox.
w send toShell '{"text":"stored before"}'
"$scratch/lines-clips" 2 >"$scratch/rust.out" 2>"$scratch/rust.err" &
rust=$!
waits_for "$scratch/rust.err" ready || fail "the Rust example never said ready: $(cat "$scratch/rust.err")"
waits_for "$scratch/rust.out" 'stored before' || fail "the Rust example printed: $(cat "$scratch/rust.out")"
w send toShell '{"text":"from Swift"}'
timeout 30 tail --pid="$rust" -f /dev/null || fail "the Rust example did not exit after two clips"
wait "$rust" || fail "the Rust example exited with $?"
expected='stored {"text":"stored before"}
posted {"text":"from Swift"}'
[ "$(cat "$scratch/rust.out")" = "$expected" ] || fail "the Rust example printed: $(cat "$scratch/rust.out")"
echo "Tests/bindings.sh: Rust printed the stored clip and the sent one"
