#!/usr/bin/env bash
# `wormholectl listen` as people stop it and as its bus goes, by hand (issue figures; the suite
# checks the same with small counts):
#
#   Tests/faults-listen.sh [KILLS] [STOPS] [NAMES] [READY_RUNS]
#       defaults: 20 bus kills, 20 stops per signal, 10000 names, 5 time-to-ready runs.
#
# Uses $WORMHOLE_BIN (default .build/release) for `wormholectl`, a private dbus-daemon from
# dbus/wormhole-session.conf and scratch runtime directories (the doorbell on, as in a desktop
# session). Checks:
# 1. the lost and back lines: KILLS bus kills (each daemon killed and a new one started on the
#    same address), one `lost the bus` and one `back on the bus` line for each;
# 2. stopped the usual way: `listen` on NAMES names stopped STOPS times with each of SIGINT,
#    SIGTERM and SIGHUP: the conventional status (128 + the signal) and 0 files left in the runtime
#    directory's doorbell directory;
# 3. time to `ready` for `listen` on NAMES names with the doorbell against WORMHOLE_DOORBELL=off, on
#    tmpfs (/dev/shm) and on the file system of $TMPDIR (ext4 here), READY_RUNS alternating runs
#    each: the medians and their ratio (printed, not judged: a figure, not a test).
# Prints one line per check and, last, `N passed, M failed`; exits 1 when anything failed.
set -u
WORMHOLE_BIN=${WORMHOLE_BIN:-$(cd "$(dirname "$0")/.." && pwd)/.build/release}
export WORMHOLE_BIN
source "$(dirname "$0")/faults-common.sh"
kills=${1:-20}
stops=${2:-20}
names=${3:-10000}
ready_runs=${4:-5}
require_tools faults-listen.sh

scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-listen-XXXXXX")
shm=$(mktemp -d /dev/shm/wormhole-listen-XXXXXX)
children=()
daemon=""
cleanup() {
    for pid in "${children[@]}"; do kill -9 "$pid" 2>/dev/null; done
    [[ -n $daemon ]] && kill "$daemon" 2>/dev/null
    rm -rf "$scratch" "$shm"
}
trap cleanup EXIT
address=unix:path=$scratch/bus
export WORMHOLE_CONTAINER_ROOT=$scratch/root

# await_count FILE PATTERN N SECONDS: whether FILE has N lines matching PATTERN within SECONDS.
await_count() {
    # (Counted into a file: GNU grep's -m with its output on /dev/null reads on to the end.)
    grep -m"$3" -c -E -- "$2" < <(timeout "$4" tail -n +1 -F "$1" 2>/dev/null) >"$scratch/count"
    (($(grep -c -E -- "$2" "$1") >= $3))
}
runtime() {  # a fresh 0700 runtime directory under $1
    local dir
    dir=$(mktemp -d "$1/runtime-XXXXXX")
    chmod 700 "$dir"
    echo "$dir"
}
start_daemon

# 1. Lost and back lines across bus kills.
export XDG_RUNTIME_DIR
XDG_RUNTIME_DIR=$(runtime "$scratch")
"$wormhole" listen --group group.faults.listen inbox --bus-address "$address" >/dev/null 2>"$scratch/kills.err" &
listener=$!
children+=("$listener")
await "$scratch/kills.err" '^ready' 60
for ((i = 1; i <= kills; i++)); do
    kill "$daemon"
    wait "$daemon" 2>/dev/null
    await_count "$scratch/kills.err" 'lost the bus' "$i" 30
    start_daemon
    await_count "$scratch/kills.err" 'back on the bus' "$i" 60
done
kill -INT "$listener"
wait "$listener" 2>/dev/null
lost=$(grep -c 'lost the bus' "$scratch/kills.err")
back=$(grep -c 'back on the bus' "$scratch/kills.err")
check "$kills bus kills: a lost and a back line for each ($WORMHOLE_BIN)" $((lost == kills && back == kills ? 0 : 1)) \
    "$lost lost, $back back"

# 2. Stopped with SIGINT, SIGTERM, SIGHUP: the status, and nothing left behind.
seq -f "n%.0f" 1 "$names" >"$scratch/names"
for signal in INT TERM HUP; do
    number=$(kill -l "$signal")
    statuses=0
    left=0
    for ((i = 0; i < stops; i++)); do
        XDG_RUNTIME_DIR=$(runtime "$scratch")
        "$wormhole" listen --group group.faults.listen --identifiers-from "$scratch/names" --bus-address "$address" \
            >/dev/null 2>"$scratch/stop.err" &
        listener=$!
        await "$scratch/stop.err" '^ready' 120
        kill -"$signal" "$listener"
        wait "$listener"
        status=$?
        ((status == 128 + number)) || statuses=$((statuses + 1))
        left=$((left + $(find "$XDG_RUNTIME_DIR/wormhole/doorbell" -mindepth 1 2>/dev/null | wc -l)))
        rm -rf "$XDG_RUNTIME_DIR"
    done
    check "listen on $names names stopped $stops times with SIG$signal: status $((128 + number)), 0 files left" \
        $((statuses == 0 && left == 0 ? 0 : 1)) "$statuses other statuses, $left files left"
done

# 3. Time to ready, with and without the doorbell, on tmpfs and on $TMPDIR's file system.
ready_ms() {  # DIR DOORBELL: milliseconds from start to `ready` of listen on NAMES names
    # A fresh daemon each time: one that a listener of 10,000 names just left is still removing
    # its 20,000 match rules for seconds, and the next listener waits behind that.
    kill "$daemon"
    wait "$daemon" 2>/dev/null
    start_daemon
    XDG_RUNTIME_DIR=$(runtime "$1")
    local start end line fifo=$scratch/ready.fifo
    rm -f "$fifo"
    mkfifo "$fifo"
    start=$(date +%s%N)
    WORMHOLE_DOORBELL=$2 "$wormhole" listen --group group.faults.listen --identifiers-from "$scratch/names" \
        --bus-address "$address" >/dev/null 2>"$fifo" &
    listener=$!
    # Read straight from its standard error (a file followed by tail can lag by its polling).
    exec 3<"$fifo"
    while IFS= read -r -t 120 line <&3 && [[ $line != ready ]]; do :; done
    end=$(date +%s%N)
    kill -INT "$listener"
    cat <&3 >/dev/null
    exec 3<&-
    wait "$listener" 2>/dev/null
    rm -rf "$XDG_RUNTIME_DIR"
    echo $(((end - start) / 1000000))
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for place in "$shm" "$scratch"; do
    fs=$(stat -f -c %T "$place")
    on=()
    off=()
    for ((i = 0; i < ready_runs; i++)); do
        on+=("$(ready_ms "$place" on)")
        off+=("$(ready_ms "$place" off)")
    done
    m_on=$(printf '%s\n' "${on[@]}" | median)
    m_off=$(printf '%s\n' "${off[@]}" | median)
    echo "time to ready, listen on $names names, runtime directory on $fs: doorbell ${on[*]} ms (median $m_on), off ${off[*]} ms (median $m_off), ratio $(awk -v a="$m_on" -v b="$m_off" 'BEGIN { printf "%.2f", a / b }')"
done
report
