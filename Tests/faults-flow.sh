#!/usr/bin/env bash
# Flow control toward slow receivers (contract v1.2 section 7), by hand or from CI with small
# counts (not part of `swift test`).
#
#   Tests/faults-flow.sh [MESSAGES] [SIZE] [POSTS] [STOP]
#       defaults: 40000 transient messages of 61440 bytes (60 KiB); a storm of 1000000 posts
#       while the observers are stopped for STOP=5 seconds. FLOW_ONLY="1" or "2" runs one stage.
#
# Uses .build/debug (or $WORMHOLE_BIN) for `wormholectl` and `wormhole-test-peer`, and scratch
# directories under $TMPDIR.
#   1. On dbus-daemon (dbus/wormhole-session.conf, its 1 GB limits): one process sends MESSAGES
#      transient messages of SIZE bytes to a listener stopped with SIGSTOP, and a mailbox
#      message after every 100 of them to a healthy listener (`wormhole-test-peer
#      flood-transient`). Checks: no single send call over 2 s, the sender's peak RSS at most
#      200 MB, the healthy listener received the last mailbox message while the other was
#      still stopped, and the stopped listener, continued, receives the last accepted message.
#   2. On dbus-broker (skipped when it is not installed): POSTS posts of one name
#      (`wormhole-test-peer post-storm`) while an observer and a mailbox listener of that
#      name's mailbox are stopped for STOP seconds, then continued. Checks: an observer the
#      broker cut off is back on the bus within 1 s of seeing the cut-off (its `lost the bus`
#      line; how long after SIGCONT that came is printed), and delivers the next post, and no
#      post twice (the doorbell's rings run ahead of the signals here); the mailbox listener
#      delivers the latest stored message.
# Prints one line per check and, last, `N passed, M failed`; exits 1 when anything failed.
set -u

source "$(dirname "$0")/faults-common.sh"
messages=${1:-40000}
size=${2:-61440}
posts=${3:-1000000}
stop_seconds=${4:-5}
only=${FLOW_ONLY:-1 2}
stage() { [[ " $only " == *" $1 "* ]]; }
require_tools faults-flow.sh

scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-flow-XXXXXX")
children=()
cleanup() {
    for pid in "${children[@]}"; do kill -CONT "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null; done
    [[ -n ${FLOW_KEEP:-} ]] || rm -rf "$scratch"
}
trap cleanup EXIT
export XDG_RUNTIME_DIR=$scratch/runtime WORMHOLE_CONTAINER_ROOT=$scratch/root
mkdir -m 700 "$XDG_RUNTIME_DIR" "$WORMHOLE_CONTAINER_ROOT"

# A `ready`-printing command in the background: of its stdout only the values of "seq", "n" and
# "state" go to FILE, one a line (a listener of 60 KiB messages would write gigabytes), its
# stderr, timestamped, to FILE.err; waits for `ready`. Sets `started` to its pid.
start_ready() {  # FILE COMMAND...
    local file=$1
    shift
    "$@" > >(grep --line-buffered -oE '"(seq|n|state)":[^,}]*' >"$file") \
        2> >(while IFS= read -r line; do echo "$(date +%s.%N) $line"; done >"$file.err") &
    started=$!
    children+=("$started")
    await "$file.err" ' ready' 20 || { echo "  $* did not print ready: $(cat "$file.err")"; return 1; }
}
seconds_between() { echo "$2 - $1" | bc; }

# ---------------------------------------------------------------------------------------------
# 1. Transient messages toward a stopped listener, on dbus-daemon.
if stage 1; then
address="unix:path=$scratch/daemon-bus"
exec {daemon_out}< <(exec dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --nofork \
    --print-address --address="$address" 2>/dev/null)
children+=($!)
read -r -u "$daemon_out" _  # the address: it listens
group=group.flow
start_ready "$scratch/stopped.out" "$wormhole" listen --group "$group" --bus-address "$address" slow || true
stopped=$started
start_ready "$scratch/healthy.out" "$wormhole" listen --group "$group" --bus-address "$address" healthy || true
healthy=$started
kill -STOP "$stopped"
# The sender stays alive (reading its standard input) until the stopped listener was continued:
# what it accepted drains meanwhile.
mkfifo "$scratch/sender.in"
"$peer" flood-transient "$WORMHOLE_CONTAINER_ROOT" "$group" slow "$messages" "$size" "$address" healthy 100 \
    <"$scratch/sender.in" >"$scratch/sender.out" &
sender=$!
children+=("$sender")
exec {sender_in}>"$scratch/sender.in"
await "$scratch/sender.out" 'accepted=' 7200
result=$(cat "$scratch/sender.out")
echo "  sender: $result"
value() { grep -oE "(^| )$1=[-0-9]+" <<<"$result" | cut -d= -f2; }
accepted=$(value accepted)
last=$(value last)
slowest=$(value slowest_ms)
rss=$(value peak_rss_kb)
mailbox_last=$(value mailbox_last)
check "slowest transient send" $((${slowest:-99999} > 2000)) "${slowest:-?} ms (at most 2000), $accepted accepted, $(value refused) refused (counted $(value counted))"
check "sender peak RSS" $((${rss:-999999999} > 200 * 1024)) "$((${rss:-0} / 1024)) MB (at most 200)"
await "$scratch/healthy.out" "^\"seq\":$mailbox_last\$" 20
check "mailbox posts reach a healthy listener while the other is stopped" $? "last mailbox message {\"seq\":$mailbox_last}"
kill -CONT "$stopped"
continued=$(date +%s.%N)
await "$scratch/stopped.out" "^\"seq\":$last\$" 600
status=$?
check "the stopped listener, continued, receives the last accepted message" $status \
    "seq $last after $(seconds_between "$continued" "$(date +%s.%N)") s"
exec {sender_in}>&-
wait "$sender"
kill "$stopped" "$healthy" 2>/dev/null
fi

# ---------------------------------------------------------------------------------------------
# 2. A post storm toward stopped observers, on dbus-broker.
if stage 2; then
if ! command -v dbus-broker-launch >/dev/null; then
    echo "SKIP broker storm: dbus-broker-launch is not installed"
else
socket=$scratch/broker-bus
address="unix:path=$socket"
# dbus-broker-launch takes its listening socket from systemd's protocol (LISTEN_FDS, fd 3).
# dbus-broker-launch logs to the journal: a datagram socket of ours, read into broker.log,
# stands in for it at /run/systemd/journal/socket (a private /run in a mount namespace).
mkdir "$scratch/journal"
journal='
import socket, sys
sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sink.bind(sys.argv[1])
print("bound", flush=True)
with open(sys.argv[2], "ab", buffering=0) as log:
    while True:
        log.write(sink.recv(65536).replace(b"\n", b" ") + b"\n")
'
exec {journal_out}< <(exec python3 -c "$journal" "$scratch/journal/socket" "$scratch/broker.log")
children+=($!)
read -r -u "$journal_out" _
# It takes its listening socket from systemd's protocol (LISTEN_FDS, fd 3), and connects to the
# bus it serves (DBUS_SESSION_BUS_ADDRESS) as its controller.
launch='
import os, socket, sys
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(256)
print("listening", flush=True)
os.dup2(listener.fileno(), 3)
os.set_inheritable(3, True)  # dup2 onto itself (the socket may be fd 3) keeps close-on-exec
os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
os.execvp("dbus-broker-launch", ["dbus-broker-launch", "--scope", "user", "--config-file", sys.argv[2]])
'
exec {broker_out}< <(exec env DBUS_SESSION_BUS_ADDRESS="$address" unshare --mount --propagation private sh -c '
    mount -t tmpfs -o mode=0755 wormhole-run /run && mkdir /run/systemd && ln -s "$1" /run/systemd/journal &&
    exec python3 -c "$2" "$3" "$4"' sh "$scratch/journal" "$launch" "$socket" "$repository/dbus/wormhole-session.conf" \
    2>>"$scratch/broker.log")
children+=($!)
read -r -u "$broker_out" _  # listening: clients wait in its backlog until the broker runs
group=group.storm
name=$group/post/storm
start_ready "$scratch/observer.out" "$wormhole" observe --bus-address "$address" "$name" || true
observer=$started
start_ready "$scratch/mailbox.out" "$wormhole" listen --group "$group" --bus-address "$address" inbox || true
mailbox=$started
kill -STOP "$observer" "$mailbox"
"$peer" post-storm "$WORMHOLE_CONTAINER_ROOT" "$group" "$name" inbox "$posts" "$address" >"$scratch/storm.out" &
storm=$!
sleep "$stop_seconds"  # the scenario: the observers stay stopped this long
kill -CONT "$observer" "$mailbox"
continued=$(date +%s.%N)
wait "$storm"
echo "  storm: $(cat "$scratch/storm.out") (the observers were continued after ${stop_seconds} s)"
echo "  broker: $(grep -c 'being disconnected' "$scratch/broker.log") connection(s) cut off for want of resources"
# The observer first prints what it read before (it may be many lines behind): the next post
# goes once it printed the storm's last one, or is back on the bus after the broker cut it off.
grep -q -m1 -E -- "^\"state\":$posts\$|back on the bus" \
    < <(timeout 600 tail -q -n +1 -F "$scratch/observer.out" "$scratch/observer.out.err" 2>/dev/null)
"$wormhole" post --bus-address "$address" "$name" --state 4242424242 >/dev/null
await "$scratch/observer.out" '^"state":4242424242$' 20
check "the observer delivers the next post" $? "$(grep -c . "$scratch/observer.out") lines"
# Whichever way each post woke it (the bus, or the doorbell beside it: its rings arrive at once
# while the bus still holds the signals of the stop), no post is delivered twice.
twice=$(grep '^"state":' "$scratch/observer.out" | sort | uniq -d | wc -l)
check "the observer delivered no post twice" $((twice == 0 ? 0 : 1)) "$twice states twice"
if grep -q 'lost the bus' "$scratch/observer.out.err"; then
    await "$scratch/observer.out.err" 'back on the bus' 10
    lost=$(grep -m1 'lost the bus' "$scratch/observer.out.err" | cut -d' ' -f1)
    back=$(grep -m1 'back on the bus' "$scratch/observer.out.err" | cut -d' ' -f1)
    took=$(seconds_between "$lost" "${back:-0}")
    # The cut-off is seen once the observer has read what the broker sent before it: measured
    # from there (and from SIGCONT, for the record).
    check "the observer the broker cut off is back on the bus within 1 s" \
        $(( $(echo "${back:-0} > 0 && $took <= 1" | bc) == 0 )) \
        "${took} s after it saw the cut-off ($(seconds_between "$continued" "$lost") s after SIGCONT)"
else
    echo "  the broker did not cut the observer off"
fi
await "$scratch/mailbox.out" '^"n":"last"$' 20
check "the mailbox listener delivers the latest stored message" $? "$(grep -c . "$scratch/mailbox.out") lines"
fi
fi

report
