#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The doorbell rings nobody else (docs/contract.md section 9), by hand (not part of `swift test`,
# which checks the same with three observers).
#
#   Tests/faults-doorbell.sh [OBSERVERS] [POSTS] [STORM]
#       defaults: 100 observing processes on other names, 1000 posts, a storm of 100000 posts.
#
# Uses .build/debug (or $WORMHOLE_BIN) for `wormhole-test-peer`, a private dbus-daemon from
# dbus/wormhole-session.conf and a scratch $XDG_RUNTIME_DIR under $TMPDIR.
#   OBSERVERS processes (`wormhole-test-peer doorbell-observe`) each observe a name of their own
#   with the doorbell; one more observes the target name. One process posts the target name
#   POSTS times (`doorbell-post`). Checks: every ring the poster sent (at most one per post; a
#   ring that finds the target's queue full is not sent) reached the target; the other processes were woken 0 times meanwhile (the sum of every thread's
#   `voluntary_ctxt_switches` in /proc, before and after); the target delivered every post once;
#   each other process, sent its own sentinel afterwards, reports at most 1 ring received (the
#   sentinel's, which follows its signal).
#   Then a storm: STORM posts of one name as fast as one process can, the observer stopped for
#   2 s meanwhile, so that the rings run far ahead of the signals (which wait in the daemon and
#   the poster's outgoing queue): no post is delivered twice, and the last one is delivered
#   (posts of one name may be coalesced: queued behind a full socket, a newer post replaces an
#   older one, contract section 7).
# Prints one line per check and, last, `N passed, M failed`; exits 1 when anything failed.
set -u

source "$(dirname "$0")/faults-common.sh"
observers=${1:-100}
posts=${2:-1000}
storm=${3:-100000}
require_tools faults-doorbell.sh

scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-doorbell-XXXXXX")
children=()
cleanup() {
    for pid in "${children[@]}"; do kill -9 "$pid" 2>/dev/null; done
    [[ -n ${daemon:-} ]] && kill "$daemon" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT
export XDG_RUNTIME_DIR=$scratch/runtime
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset WORMHOLE_DOORBELL

address=unix:path=$scratch/bus
daemon=$(dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --address="$address" --fork --print-pid)


observe() {  # NAME FILE: a doorbell observer in the background, waited for
    "$peer" doorbell-observe "$address" "$1" >"$2" 2>"$2.err" &
    children+=($!)
}

# Sum of voluntary context switches (each a wake-up from a sleep) of every thread of PIDS.
wakeups() {
    local total=0 pid file value
    for pid in "$@"; do
        for file in /proc/"$pid"/task/*/status; do
            value=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$file" 2>/dev/null)
            total=$((total + ${value:-0}))
        done
    done
    echo "$total"
}

others=()
for ((i = 0; i < observers; i++)); do
    observe "com.example.other.$i" "$scratch/other.$i"
    others+=($!)
done
observe com.example.target "$scratch/target"
target=$!
ready=0
for ((i = 0; i < observers; i++)); do
    await "$scratch/other.$i.err" '^ready' 60 && ready=$((ready + 1))
done
await "$scratch/target.err" '^ready' 60 && ready=$((ready + 1))
check "all $((observers + 1)) observers ready" $((ready == observers + 1 ? 0 : 1)) "$ready ready"

before=$(wakeups "${others[@]}")
target_before=$(wakeups "$target")
states=$(seq 1 "$posts")
rang=$("$peer" doorbell-post "$address" com.example.target $states)
after=$(wakeups "${others[@]}")
target_after=$(wakeups "$target")
# The measure sees wake-ups: the target's own count moved.
check "the target was woken (the measure works)" $((target_after > target_before ? 0 : 1)) \
    "$((target_after - target_before)) voluntary context switches"
sent=${rang#rang sent=}
sent=${sent%% *}
check "the $observers observers of other names were woken 0 times" $((after - before == 0 ? 0 : 1)) \
    "$((after - before)) voluntary context switches across their threads"

"$peer" doorbell-post "$address" com.example.target 18446744073709551615 >/dev/null
wait "$target"
delivered=$(grep -c '^com.example.target ' "$scratch/target")
check "the target delivered every post once" $((delivered == posts ? 0 : 1)) \
    "$delivered deliveries, $(tail -1 "$scratch/target")"
# Every ring the poster sent went to the target (plus the sentinel's): nobody else was rung. A
# ring finding the target's queue full (EAGAIN: it reads slower than 1000 posts arrive) is not
# sent; that post wakes it by the bus.
# (The sentinel's own ring follows its signal, so the target may have ended before reading it.)
received=$(tail -1 "$scratch/target" | sed -n 's/^rings received=\([0-9]*\) refused=0$/\1/p')
check "every ring went to the target" \
    $([[ $sent -ge 1 && $sent -le $posts && -n $received && $received -ge $sent && $received -le $((sent + 1)) ]]; echo $?) \
    "$rang; the target: $(tail -1 "$scratch/target")"

for ((i = 0; i < observers; i++)); do
    "$peer" doorbell-post "$address" "com.example.other.$i" 18446744073709551615 >/dev/null &
done
wait "${others[@]}"
# Rung at most once: by its own sentinel, whose ring follows its signal (the observer may end on
# the signal before reading the ring); never by the target's posts.
ones=$(cat "$scratch"/other.* 2>/dev/null | grep -c '^rings received=[01] refused=0$')
check "each other observer was rung at most once (its own sentinel)" $((ones == observers ? 0 : 1)) "$ones of $observers"

observe com.example.storm "$scratch/storm"
storm_pid=$!
await "$scratch/storm.err" '^ready' 60
# The observer is stopped for 2 s in the middle (SIGSTOP): the bus keeps its signals, and when it
# runs again the new rings reach it at once while tens of thousands of signals are still ahead.
"$peer" doorbell-post "$address" com.example.storm $(seq 1 "$storm") >"$scratch/storm.rang" &
poster=$!
await "$scratch/storm" '^com.example.storm ' 60
kill -STOP "$storm_pid"
sleep 2  # how long the observer stays stopped (a fault, not a wait for an event)
kill -CONT "$storm_pid"
wait "$poster"
rang=$(cat "$scratch/storm.rang")
# The sentinel by the bus alone, queued behind what the daemon still holds for the observer: a
# ring would overtake the signals of posts whose rings found the queue full.
"$peer" doorbell-post "$address" com.example.storm 18446744073709551615 --bus-only >/dev/null
wait "$storm_pid"
lines=$(grep -c '^com.example.storm ' "$scratch/storm")
twice=$(grep '^com.example.storm ' "$scratch/storm" | sort | uniq -d | wc -l)
last=$(grep -c "^com.example.storm $storm\$" "$scratch/storm")
check "a storm of $storm posts: none delivered twice, the last one delivered" \
    $((lines <= storm && twice == 0 && last == 1 ? 0 : 1)) \
    "$lines deliveries, $twice states twice; $rang; $(tail -1 "$scratch/storm")"
report
