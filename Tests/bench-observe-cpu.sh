#!/usr/bin/env bash
# The CPU one wake costs an observer (issue 36): `wormholectl observe NAME` and `wormhole-floor
# observe ADDRESS NAME` (C, libdbus) side by side on a private dbus-daemon, woken by POSTS posts
# of NAME from `wormhole-floor post-call` (C, the bus alone, 100 µs apart); each observer's CPU
# time (/proc/PID/task/*/schedstat, nanoseconds, every thread) over the posts, divided by the lines it wrote.
#
#   Tests/bench-observe-cpu.sh [BUILD] [POSTS] [RUNS]
#       BUILD: a folder holding `wormholectl` and `wormhole-floor` (default .build/release);
#       POSTS: 20000 by default; RUNS: 3 by default (a line per run, then the median ratio).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-.build/release}
posts=${2:-20000}
runs=${3:-3}
scratch=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$scratch"
}
trap cleanup EXIT
exec 3< <(exec dbus-daemon --config-file=dbus/wormhole-session.conf --nofork --print-address \
    --address="unix:path=$scratch/bus")
pids+=($!)
read -r address <&3
# Nanoseconds on a CPU, every thread of the process.
cpu() { cat /proc/"$1"/task/*/schedstat | awk '{sum += $1} END {print sum}'; }
# Starts an observer whose lines go to a file; its pid in $started once it said "ready".
start() {
    local out=$1
    shift
    mkfifo "$out.err"
    WORMHOLE_DOORBELL=off "$@" >"$out" 2>"$out.err" &
    started=$!
    pids+=("$started")
    local line
    while read -r line; do [ "$line" = ready ] && break; done <"$out.err"
    cat "$out.err" >/dev/null &
}
ratios=()
for run in $(seq 1 "$runs"); do
    name="com.example.observe-cpu.r$run"
    start "$scratch/ours-$run" "$build/wormholectl" observe "$name" --bus-address "$address"
    ours=$started
    start "$scratch/floor-$run" "$build/wormhole-floor" observe "$address" "$name"
    floor=$started
    ours_before=$(cpu "$ours")
    floor_before=$(cpu "$floor")
    "$build/wormhole-floor" post-call "$address" "$name" "$posts" 0 100 >/dev/null
    # Until each has written its line for the last post (tail -f waits on inotify).
    for out in "$scratch/ours-$run" "$scratch/floor-$run"; do
        { timeout 120 tail -n +1 -f "$out" || true; } | grep -q -m 1 "\"state\":$((posts - 1)),"
    done
    ours_ns=$(($(cpu "$ours") - ours_before))
    floor_ns=$(($(cpu "$floor") - floor_before))
    kill "$ours" "$floor"
    ratio=$(python3 -c "print(f'{$ours_ns / $floor_ns:.3f}')")
    ratios+=("$ratio")
    printf 'run %d: wormholectl observe %.2f µs/delivery, wormhole-floor observe %.2f µs/delivery, ratio %s\n' \
        "$run" "$(python3 -c "print($ours_ns / $posts / 1000)")" "$(python3 -c "print($floor_ns / $posts / 1000)")" "$ratio"
done
python3 -c "import statistics, sys; print('median ratio', statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
