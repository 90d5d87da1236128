#!/usr/bin/env bash
# libwormhole's figures (docs/c.md, *Performance*), in one run on a private dbus-daemon, rows
# alternating round by round so that a busy machine hits each alike:
#
#   Tests/bench-c.sh [ROUNDS] [ROUND_TRIPS]      (default 5 rounds of 2,000 round trips per row)
#
# Observers, against the same pinger (wormhole-floor's, raw libdbus; the bus only):
#   floor       wormhole-floor's C observer answers (the C bus pair, the floor)
#   swift-queue a Swift observer with its handler on a DeliveryQueue queue answers
#               (`wormhole-bench _bench-echo --delivery serial`)
#   c-glib      a C observer through libwormhole, dispatched on a GLib main loop, answers
#               (Tests/C/bench-c.c)
#   c-qt        the same on a Qt 6 event loop (wormhole-qt.h; `Examples/Lines/qt/lines-qt --echo`)
# Doorbell on (a runtime directory of the run's own, as in a desktop session):
#   swift-swift `_bench-ping` and `_bench-echo` (handlers on the I/O thread, as `wormholectl bench`'s
#               doorbell row)
#   swift-swift-queue  the same with the echo's handler on a queue (one hop, as the C echo's
#               to its main loop)
#   c-c         two libwormhole programs on GLib main loops
# Then the resident memory of an idle C observer against an idle `wormholectl observe`
# (/proc/PID/smaps_rollup) and the stripped library's size.
#
# Uses the release build (.build/release: wormhole, wormhole-bench, wormhole-floor and the
# library; `swift build -c release`).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
count=${2:-2000}
warmup=200
bin=$PWD/.build/release
for tool in wormholectl wormhole-bench wormhole-floor libwormhole-c.so; do
    [ -e "$bin/$tool" ] || { echo "bench-c: $bin/$tool is not built (swift build -c release)" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-bench-c.XXXXXX")
daemon=""
cleanup() {
    [ -z "$daemon" ] || kill "$daemon" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
scripts/libwormhole.sh --no-build --prefix "$work/prefix" >/dev/null
export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -O2 -std=c99 -Wall -Wextra -Werror -o "$work/bench-c" Tests/C/bench-c.c \
    $(pkg-config --cflags --libs wormhole-1 glib-2.0) -Wl,-rpath,"$work/prefix/lib"
# shellcheck disable=SC2046
c++ -O2 -std=c++17 -fPIC -o "$work/lines-qt" Examples/Lines/qt/lines-qt.cpp \
    $(pkg-config --cflags --libs wormhole-1 Qt6Widgets) -Wl,-rpath,"$work/prefix/lib"
dbus-daemon --config-file=dbus/wormhole-session.conf --address="unix:path=$work/bus" --nofork --print-address \
    >"$work/address" 2>/dev/null &
daemon=$!
grep -q -m1 '^unix:' < <(timeout 10 tail -n +1 -F "$work/address" 2>/dev/null)
address="unix:path=$work/bus"
export DBUS_SESSION_BUS_ADDRESS=$address
mkdir -m 700 "$work/runtime"
export XDG_RUNTIME_DIR=$work/runtime

bucket() {  # the contract's bucket interface of a name
    python3 -c 'import sys
h = 0x811C9DC5
for b in sys.argv[1].encode(): h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
print("org.wormhole.Notify1.B%04X" % (h & 0xFFFF))' "$1"
}

# run_pair ROW ECHO... -- PING...: starts the echo, waits for its "ready", runs the pinger into
# $work/ROW.samples (appending), waits for the echo.
run_pair() {
    local row=$1
    shift
    local echo=() ping=()
    while [ "$1" != -- ]; do echo+=("$1"); shift; done
    shift
    ping=("$@")
    # A file of its own per pair: the echo's "ready" must not be read from an earlier one.
    local said=$work/$row.$round.echo
    : >"$said"
    "${echo[@]}" 2>"$said" >/dev/null &
    local echo_pid=$!
    grep -q -m1 'ready' < <(timeout 30 tail -n +1 -F "$said" 2>/dev/null) ||
        { echo "bench-c: $row: the echo never said ready" >&2; cat "$said" >&2; exit 1; }
    "${ping[@]}" >>"$work/$row.samples" 2>"$work/ping.err" || { cat "$work/ping.err" >&2; exit 1; }
    wait "$echo_pid" || true
}

for round in $(seq "$rounds"); do
    echo "bench-c: round $round of $rounds" >&2
    tag="$$.$round"
    ping=org.wormhole.cbench.$tag.ping pong=org.wormhole.cbench.$tag.pong
    floor=("$bin/wormhole-floor")
    common=("$address" /org/wormhole/Notify1 "$(bucket "$ping")" "$ping" "$(bucket "$pong")" "$pong")
    off=(env WORMHOLE_DOORBELL=off)
    run_pair floor "${floor[@]}" echo "${common[@]}" -- "${floor[@]}" ping "${common[@]}" "$count" "$warmup"
    run_pair swift-queue "${off[@]}" "$bin/wormhole-bench" _bench-echo --ping "$ping" --pong "$pong" --delivery serial \
        --wake bus-only --bus-address "$address" -- "${floor[@]}" ping "${common[@]}" "$count" "$warmup"
    run_pair c-glib "${off[@]}" "$work/bench-c" echo "$ping" "$pong" -- "${floor[@]}" ping "${common[@]}" "$count" "$warmup"
    run_pair c-qt "${off[@]}" QT_QPA_PLATFORM=offscreen "$work/lines-qt" --echo "$ping" "$pong" -- "${floor[@]}" ping \
        "${common[@]}" "$count" "$warmup"
    run_pair swift-swift "$bin/wormhole-bench" _bench-echo --ping "$ping" --pong "$pong" --delivery io-thread \
        --wake doorbell --bus-address "$address" -- "$bin/wormhole-bench" _bench-ping --ping "$ping" --pong "$pong" \
        --count "$count" --warmup "$warmup" --wake doorbell --bus-address "$address"
    run_pair swift-swift-queue "$bin/wormhole-bench" _bench-echo --ping "$ping" --pong "$pong" --delivery serial \
        --wake doorbell --bus-address "$address" -- "$bin/wormhole-bench" _bench-ping --ping "$ping" --pong "$pong" \
        --count "$count" --warmup "$warmup" --wake doorbell --bus-address "$address"
    run_pair c-c "$work/bench-c" echo "$ping" "$pong" -- "$work/bench-c" ping "$ping" "$pong" "$count" "$warmup"
done

# Idle resident memory: one observer of each kind, waiting.
rss() { awk '/^Rss:/ { rss = $2 } /^Pss:/ { pss = $2 } END { printf "%.1f MB resident (%.1f MB proportional)", rss / 1024, pss / 1024 }' "/proc/$1/smaps_rollup"; }
"$work/bench-c" idle org.wormhole.cbench.idle 2>"$work/idle-c.err" &
idle_c=$!
"$bin/wormholectl" observe org.wormhole.cbench.idle 2>"$work/idle-swift.err" >/dev/null &
idle_swift=$!
grep -q -m1 ready < <(timeout 30 tail -n +1 -F "$work/idle-c.err" 2>/dev/null)
grep -q -m1 ready < <(timeout 30 tail -n +1 -F "$work/idle-swift.err" 2>/dev/null)
memory_c=$(rss "$idle_c")
memory_swift=$(rss "$idle_swift")
kill "$idle_c" "$idle_swift"
wait "$idle_c" "$idle_swift" 2>/dev/null || true

python3 - "$work" "$rounds" "$count" <<'PY'
import statistics, sys
work, rounds, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def samples(row):
    values = []
    for line in open(f"{work}/{row}.samples"):
        fields = line.split()
        if fields:
            values += [int(fields[0])] * (int(fields[1]) if len(fields) > 1 else 1)
    values.sort()
    return values
def pct(values, p):
    return values[min(len(values) - 1, int(len(values) * p / 100))] / 1000
rows = {row: samples(row) for row in ["floor", "swift-queue", "c-glib", "c-qt", "swift-swift", "swift-swift-queue", "c-c"]}
print(f"bench-c: {rounds} rounds of {count} round trips per row, rows alternating; round trips in us")
print("| row | n | p50 | p99 |")
print("| --- | --- | --- | --- |")
for row, values in rows.items():
    print(f"| {row} | {len(values)} | {pct(values, 50):.1f} | {pct(values, 99):.1f} |")
def ratio(a, b, p):
    return pct(rows[a], p) / pct(rows[b], p)
print()
for p in (50, 99):
    print(f"C observer on GLib / Swift observer on a queue, p{p}: {ratio('c-glib', 'swift-queue', p):.2f}x (goal <= 1.10x)")
    print(f"C observer on GLib / wormhole-floor's C observer, p{p}: {ratio('c-glib', 'floor', p):.2f}x")
    print(f"C++ observer on Qt / C observer on GLib, p{p}: {ratio('c-qt', 'c-glib', p):.2f}x (goal <= 1.10x)")
for p in (50, 99):
    cc, ss = ratio('c-c', 'floor', p), ratio('swift-swift', 'floor', p)
    sq = ratio('swift-swift-queue', 'floor', p)
    print(f"doorbell on, p{p}: C->C / C bus pair {cc:.2f}x, Swift->Swift / C bus pair {ss:.2f}x: "
          f"{cc / ss:.2f} of the Swift ratio (goal <= 1.10); with the Swift echo on a queue {sq:.2f}x: {cc / sq:.2f}")
PY
echo "idle C observer (libwormhole, GLib loop): $memory_c"
echo "idle wormholectl observe: $memory_swift"
echo "libwormhole.so.1, stripped: $(stat -c %s "$work/prefix/lib/libwormhole.so.1") bytes"
