#!/usr/bin/env bash
# Resident memory of idle listeners (issue 23, item 3): an idle `wormholectl observe NAME`, an idle
# `wormholectl listen ID`, a small library listener (the `counter-app` example) and LISTENERS idle
# `wormholectl listen` processes together, each measured once it has written `ready` (its match
# rules are active), on a private dbus-daemon from dbus/wormhole-session.conf.
#
#   Tests/memory.sh [LISTENERS]      LISTENERS: 100 by default
#
# Uses .build/release (or $WORMHOLE_BIN): build it first with `swift build -c release`.
# Per process: VmRSS from /proc/PID/status (what `ps` shows; it counts every shared page in
# full) and Pss from /proc/PID/smaps_rollup (shared pages divided among the processes mapping
# them: the fair share, and what sums to the machine's cost). Also says whether the process maps
# libFoundation.so, libFoundationInternationalization.so or the ICU data library
# (lib_FoundationICU.so), and how many threads it runs. Every process it starts is stopped on
# exit, however the script ends.
set -euo pipefail
repository=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${WORMHOLE_BIN:-$repository/.build/release}
listeners=${1:-100}
[[ $listeners =~ ^[0-9]+$ ]] || { echo "memory.sh: LISTENERS must be a number, not '$listeners'" >&2; exit 2; }
for tool in wormholectl counter-app; do
    [[ -x $bin/$tool ]] || { echo "memory.sh: $bin/$tool is not built (swift build -c release)" >&2; exit 2; }
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-memory.XXXXXX")
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The bus: dbus-daemon prints its address once it listens.
exec {daemon_out}< <(exec dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --nofork \
    --print-address --address="unix:path=$scratch/bus" 2>/dev/null)
pids+=($!)
read -r -t 20 -u "$daemon_out" address || { echo "memory.sh: dbus-daemon did not start" >&2; exit 1; }
export WORMHOLE_CONTAINER_ROOT=$scratch/containers
mkdir -m 0700 "$WORMHOLE_CONTAINER_ROOT"
group=group.org.wormhole.memory

# start NAME COMMAND...: starts COMMAND in the background with its standard error on a FIFO and
# waits for its `ready` line (no sleep: the read returns when the line is written). The FIFO
# stays open for reading, so later lines on standard error never hit a closed pipe. Sets
# `started` to the process id.
start() {
    local name=$1 fifo=$scratch/$1.err line fd
    shift
    mkfifo "$fifo"
    "$@" >/dev/null 2>"$fifo" &
    started=$!
    pids+=("$started")
    exec {fd}<"$fifo"
    while read -r -t 30 -u "$fd" line; do
        [[ $line == ready ]] && return 0
    done
    echo "memory.sh: $name did not become ready (last line: '${line:-}')" >&2
    exit 1
}

# The figures of one process, in KiB: "RSS PSS".
usage() {
    local rss pss
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status")
    pss=$(awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup")
    echo "$rss $pss"
}

mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

describe() {  # describe LABEL PID
    local figures rss pss threads foundation
    figures=$(usage "$2")
    rss=${figures% *}
    pss=${figures#* }
    threads=$(awk '/^Threads:/ { print $2 }' "/proc/$2/status")
    foundation=$({ grep -oE 'lib(Foundation|FoundationInternationalization|_FoundationICU)\.so' "/proc/$2/maps" || true; } |
        sort -u | tr '\n' ' ')
    printf '%-26s RSS %10s  Pss %10s  threads %s  Foundation/ICU mapped: %s\n' \
        "$1" "$(mib "$rss")" "$(mib "$pss")" "$threads" "${foundation:-none}"
}

start observe "$bin/wormholectl" observe --bus-address "$address" memory.observe
describe "wormholectl observe NAME" "$started"
start listen "$bin/wormholectl" listen --bus-address "$address" --group "$group" memory.listen
describe "wormholectl listen ID" "$started"
start counter-app "$bin/counter-app" --bus-address "$address" --group "$group"
describe "counter-app (library)" "$started"

# LISTENERS listeners, each on its own identifier, all idle at once.
many=()
for i in $(seq 1 "$listeners"); do
    start "listen-$i" "$bin/wormholectl" listen --bus-address "$address" --group "$group" "memory.listener-$i"
    many+=("$started")
done
rss_total=0
pss_total=0
for pid in "${many[@]}"; do
    figures=$(usage "$pid")
    rss_total=$((rss_total + ${figures% *}))
    pss_total=$((pss_total + ${figures#* }))
done
printf '%-26s RSS %10s  Pss %10s  (sums over the processes)\n' \
    "$listeners x wormholectl listen" "$(mib "$rss_total")" "$(mib "$pss_total")"
