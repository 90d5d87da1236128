#!/usr/bin/env bash
# The doorbell changes when an observer delivers, never what (contract §1 v1.3, §9), by hand:
#
#   Tests/faults-order.sh [POSTS] [RESTART_POSTS] [RESTARTS]
#       defaults: 50000 posts, 1000 posts across 20 bus restarts.
#
# Uses .build/release (or $WORMHOLE_BIN) for `wormholectl` and `wormhole-test-peer`, a private
# dbus-daemon from dbus/wormhole-session.conf and a scratch $XDG_RUNTIME_DIR (a desktop session's
# configuration: the doorbell is on; WORMHOLE_DOORBELL=off runs the same checks without it).
# 1. Order: a library poster (`wormhole-test-peer post-sequence`) posts one name POSTS times,
#    20 us apart, with the states 1..POSTS, to `wormholectl observe`; the observer is stopped
#    (SIGSTOP) for 2 s in the middle. Checks: every state delivered, none out of order (a state
#    lower than the one before), none twice.
# 2. Restarts: the same poster posts RESTART_POSTS times, 5 ms apart, to a library observer
#    (`wormhole-test-peer doorbell-observe --events`) while the bus daemon is killed and started
#    again RESTARTS times. Checks: no state the poster reported as not sent was delivered; none
#    out of order or twice; exactly one catch-up after each reconnect of the observer's connection
#    (and none elsewhere), as many reconnects as restarts.
# Prints one line per check and, last, `N passed, M failed`; exits 1 when anything failed.
set -u
WORMHOLE_BIN=${WORMHOLE_BIN:-$(cd "$(dirname "$0")/.." && pwd)/.build/release}
export WORMHOLE_BIN
source "$(dirname "$0")/faults-common.sh"
posts=${1:-50000}
restart_posts=${2:-1000}
restarts=${3:-20}
require_tools faults-order.sh
wormhole=$WORMHOLE_BIN/wormholectl
[[ -x $wormhole ]] || { echo "faults-order.sh: $wormhole is not built (swift build -c release)" >&2; exit 2; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-order-XXXXXX")
children=()
daemon=""
cleanup() {
    for pid in "${children[@]}"; do kill -9 "$pid" 2>/dev/null; done
    [[ -n $daemon ]] && kill "$daemon" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT
export XDG_RUNTIME_DIR=$scratch/runtime
mkdir -m 700 "$XDG_RUNTIME_DIR"
address=unix:path=$scratch/bus
start_daemon

# The states an observer printed, one per line, in order (its posted deliveries only).
states() { grep -o '"state":[0-9]*' "$1" | cut -d: -f2; }
# How many times the sequence goes back (a state not above the one before it).
backwards() { states "$1" | awk 'NR > 1 && $1 <= last { n++ } { last = $1 } END { print n + 0 }'; }
twice() { states "$1" | sort -n | uniq -d | wc -l; }

# 1. Order, with the observer stopped in the middle.
"$wormhole" observe com.example.order --bus-address "$address" >"$scratch/order.out" 2>"$scratch/order.err" &
observer=$!
children+=("$observer")
await "$scratch/order.err" '^ready' 60
"$peer" post-sequence "$address" com.example.order "$posts" 20 >"$scratch/order.posted" &
poster=$!
children+=("$poster")
await "$scratch/order.out" '"state"' 60
kill -STOP "$observer"
sleep 2  # how long the observer stays stopped (a fault, not a wait for an event)
kill -CONT "$observer"
wait "$poster"
# Every post is delivered: wait for the last one (bounded), then stop the observer.
await "$scratch/order.out" "\"state\":$posts[,}]" 120
kill -INT "$observer"
wait "$observer" 2>/dev/null
delivered=$(states "$scratch/order.out" | wc -l)
# A queued signal replaced by the next post's while the daemon was behind (contract §7) is stood
# for by that one: every post arrives but at most those.
replaced=$(sed -n 's/^replaced //p' "$scratch/order.posted")
check "order: $posts posts, observer stopped 2 s: all delivered but the ${replaced:-?} replaced" \
    $((delivered >= posts - ${replaced:-0} ? 0 : 1)) \
    "$delivered delivered; poster: $(tail -2 "$scratch/order.posted" | tr '\n' ' ')"
check "order: none out of order" $(($(backwards "$scratch/order.out") == 0 ? 0 : 1)) \
    "$(backwards "$scratch/order.out") went back"
check "order: none twice" $(($(twice "$scratch/order.out") == 0 ? 0 : 1)) "$(twice "$scratch/order.out") twice"

# 2. Restarts while posting: a library observer (`doorbell-observe --events`, which also writes its
#    connection's losses and returns and each catch-up) and the library poster.
"$peer" doorbell-observe "$address" com.example.restart --events >"$scratch/restart.out" 2>"$scratch/restart.err" &
observer=$!
children+=("$observer")
await "$scratch/restart.err" '^ready' 60
"$peer" post-sequence "$address" com.example.restart "$restart_posts" 5000 >"$scratch/restart.posted" &
poster=$!
children+=("$poster")
for ((i = 1; i <= restarts; i++)); do
    await "$scratch/restart.out" '^com.example.restart ' 60
    kill "$daemon"
    wait "$daemon" 2>/dev/null  # gone, its socket file removed: a new daemon on the same address
    start_daemon
    grep -m"$i" -c '^reconnected' < <(timeout 60 tail -n +1 -F "$scratch/restart.out" 2>/dev/null) >"$scratch/count"
done
wait "$poster"
# The last post, then the sentinel by the bus alone (it ends the observer with its counters).
await "$scratch/restart.out" "^com.example.restart $restart_posts\$" 60
"$peer" doorbell-post "$address" com.example.restart 18446744073709551615 --bus-only >/dev/null
wait "$observer" 2>/dev/null
posted_states() { grep '^com.example.restart [0-9]' "$1" | cut -d' ' -f2; }
notsent=$(grep -c '^notsent ' "$scratch/restart.posted")
leaked=0
while read -r _ state; do
    grep -qx "com.example.restart $state" "$scratch/restart.out" && leaked=$((leaked + 1))
done < <(grep '^notsent ' "$scratch/restart.posted")
check "restarts: no post reported not sent was delivered" $((leaked == 0 ? 0 : 1)) \
    "$leaked of $notsent not-sent posts delivered; poster: $(tail -1 "$scratch/restart.posted")"
back=$(posted_states "$scratch/restart.out" | awk 'NR > 1 && $1 <= last { n++ } { last = $1 } END { print n + 0 }')
dup=$(posted_states "$scratch/restart.out" | sort -n | uniq -d | wc -l)
check "restarts: none out of order, none twice" $((back == 0 && dup == 0 ? 0 : 1)) "$back went back, $dup twice"
reconnects=$(grep -c '^reconnected' "$scratch/restart.out")
catchups=$(grep -c '^catchUp ' "$scratch/restart.out")
# Exactly one catch-up and one reconnect between each loss and the next (the center's catch-up
# may be written before the peer's own `reconnected` line), none before the first loss.
misplaced=$(awk '/^disconnected/ { if (n++ && (c != 1 || r != 1)) bad++; c = 0; r = 0; next }
    /^catchUp/ { if (!n) bad++; c++ } /^reconnected/ { r++ }
    END { if (n && (c != 1 || r != 1)) bad++; print bad + 0 }' "$scratch/restart.out")
check "restarts: exactly one catch-up per reconnect ($restarts restarts)" \
    $((catchups == reconnects && reconnects == restarts && misplaced == 0 ? 0 : 1)) \
    "$catchups catch-ups, $reconnects reconnects, $misplaced misplaced"
report
