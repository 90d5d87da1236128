#!/usr/bin/env bash
# Fault injection against the built tools (not part of `swift test`: it takes a few minutes).
#
#   Tests/faults.sh [KILLS] [RESTARTS] [SENDERS] [STORM]
#       defaults: 1000 writer kills, 100 bus restarts, 1000 short-lived senders per kind, a
#       600-second restart storm; FAULTS_ONLY="5 6" runs only the stages named.
#
# Uses .build/debug (or $WORMHOLE_BIN) for `wormholectl` and `wormhole-test-peer`, a private
# dbus-daemon from dbus/wormhole-session.conf, and scratch directories under $TMPDIR. Faults:
#   1. writers SIGKILLed at random instants: every read, during writing and after each kill,
#      sees a whole document (0 torn);
#   2. the bus daemon SIGKILLed and restarted under a stream: the listener reconnects and the
#      latest message always arrives (the one stored while the bus was down, then the next one);
#   3. a full disk (a 1 MiB tmpfs; RLIMIT_FSIZE when mounting is not allowed): the send fails
#      with a clear error, the old message stays whole, no temporary file is left;
#   4. a read-only container (the tmpfs remounted read-only; `chattr +i` when mounting is not
#      allowed): the send fails with a clear error, read and listen still work;
#   5. short-lived senders (contract v1.2 §1): SENDERS processes per kind (mailbox, journal,
#      post, defaults, transient) each send once and exit without a flush (`wormhole-test-peer
#      send-once`), while `dbus-monitor` counts what reached the bus: all of them;
#   6. a restart storm (contract v1.2 §4): the bus daemon SIGKILLed and restarted at random
#      0.1-1 s intervals for STORM seconds while 4 loops run `send`, `send --journal`,
#      `defaults write` and `post`: no command takes 15 s or more, and every storing command
#      exits 0.
#   7. damage (Tests/faults-damage.sh, runnable alone): journal segments cut, removed, replaced
#      and flipped are reported and read past; shared-defaults readers never write, writers
#      SIGKILLed keep unknown values, concurrent `defaults increment` lose nothing, the suite
#      limit holds. WORMHOLE_FAULTS_DAMAGE="READS KILLS PROCESSES INCREMENTS" sets its counts.
# Prints one line per check and, last, `N passed, M failed`; exits 1 when anything failed.
set -u

source "$(dirname "$0")/faults-common.sh"
kills=${1:-1000}
restarts=${2:-100}
senders=${3:-1000}
storm=${4:-600}
only=${FAULTS_ONLY:-1 2 3 4 5 6 7}
stage() { [[ " $only " == *" $1 "* ]]; }
require_tools faults.sh

scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-faults-XXXXXX")
daemon_pid=""
mounted=""
cleanup() {
    [[ -n $daemon_pid ]] && kill -9 "$daemon_pid" 2>/dev/null
    jobs -p | xargs -r kill -9 2>/dev/null
    [[ -n $mounted ]] && umount "$mounted" 2>/dev/null
    chattr -R -i "$scratch" 2>/dev/null
    [[ -n ${FAULTS_KEEP:-} ]] || rm -rf "$scratch"
}
trap cleanup EXIT


# ---------------------------------------------------------------------------------------------
# 1. Writers killed mid-write.
if stage 1; then
root=$scratch/kills
mkdir -m 700 "$root"
torn=0
reads=0
started=$(date +%s.%N)
for ((kill = 0; kill < kills; kill++)); do
    exec {out}< <(exec "$peer" write-loop "$root" group.faults k 20000)
    writer=$!
    read -r -u "$out" line  # `ready`: the first document is stored
    # A random instant: 0 to 2 reads while the writer writes, each checked.
    for ((r = 0; r < RANDOM % 3; r++)); do
        "$peer" read-check "$root" group.faults k 2>/dev/null || torn=$((torn + 1))
        reads=$((reads + 1))
    done
    kill -9 "$writer" 2>/dev/null
    wait "$writer" 2>/dev/null
    exec {out}<&-
    "$peer" read-check "$root" group.faults k 2>/dev/null || torn=$((torn + 1))
    reads=$((reads + 1))
done
elapsed=$(echo "$(date +%s.%N) - $started" | bc)
leftovers=$(find "$root" -name '.k.*.tmp' | wc -l)
check "writer kills" $((torn != 0)) "$kills SIGKILLs in ${elapsed%.*} s, $reads reads, $torn torn, $leftovers kills left a temporary file"
fi

# ---------------------------------------------------------------------------------------------
# 2. Bus restarts under a stream.
socket=$scratch/bus
address="unix:path=$socket"
start_daemon() {
    exec {daemon_out}< <(exec dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --nofork \
        --print-address --address="$address" 2>/dev/null)
    daemon_pid=$!
    read -r -u "$daemon_out" _  # the address: it listens
}
stop_daemon() {
    kill -9 "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
    exec {daemon_out}<&-
    daemon_pid=""
}
send() { WORMHOLE_CONTAINER_ROOT=$root "$wormhole" send --group group.faults --bus-address "$address" s "$1" 2>/dev/null; }
# Reads the listener's lines until one carries MESSAGE; fails after 20 s without it.
await_line() {
    local line
    while read -r -t 20 -u "$listen_out" line; do
        # The message, then the line's further keys (reason, sentAt) or its end.
        [[ $line == *"\"message\":$1,"* || $line == *"\"message\":$1}" ]] && return 0
    done
    return 1
}
if stage 2; then
root=$scratch/restarts
mkdir -m 700 "$root"
start_daemon
mkfifo "$scratch/listen.err"
exec {listen_out}< <(exec env WORMHOLE_CONTAINER_ROOT="$root" "$wormhole" listen --group group.faults \
    --bus-address "$address" s 2>"$scratch/listen.err")
listener=$!
exec {listen_err}<"$scratch/listen.err"
read -r -t 20 -u "$listen_err" ready
missed=0
for ((restart = 1; restart <= restarts; restart++)); do
    send "{\"r\":$restart,\"bus\":\"up\"}" || missed=$((missed + 1))
    await_line "{\"r\":$restart,\"bus\":\"up\"}" || { missed=$((missed + 1)); echo "  restart $restart: up message missing"; }
    stop_daemon
    send "{\"r\":$restart,\"bus\":\"down\"}" || missed=$((missed + 1))  # stored; nobody notified
    start_daemon
    # The message stored while the bus was down arrives: through the wormhole directory while the
    # bus is away, or as the catch-up once the listener is back on it.
    await_line "{\"r\":$restart,\"bus\":\"down\"}" || { missed=$((missed + 1)); echo "  restart $restart: catch-up missing"; }
done
alive=$(kill -0 "$listener" 2>/dev/null && echo 0 || echo 1)
check "bus restarts" $((missed != 0 || alive != 0)) \
    "$restarts daemon SIGKILLs and restarts under one listener ($ready), $missed latest messages missed, listener alive: $((1 - alive))"
kill "$listener" 2>/dev/null
wait "$listener" 2>/dev/null
exec {listen_out}<&- {listen_err}<&-
stop_daemon
fi

# ---------------------------------------------------------------------------------------------
# 3. Disk full and 4. read-only container.
if stage 3 || stage 4; then
small=$scratch/small
mkdir -m 700 "$small"
if mount -t tmpfs -o size=1m,mode=0700 tmpfs "$small" 2>/dev/null; then
    mounted=$small
fi
export WORMHOLE_CONTAINER_ROOT=$small
start_daemon
bus_address=$address
"$wormhole" send --group group.faults --bus-address "$bus_address" d '{"old":true}' 2>/dev/null
big=$scratch/big.json
{ printf '"'; head -c 2000000 /dev/zero | tr '\0' 'x'; printf '"'; } >"$big"
if [[ -n $mounted ]]; then
    how="a 1 MiB tmpfs"
    error=$("$wormhole" send --group group.faults --bus-address "$bus_address" d <"$big" 2>&1 >/dev/null)
    status=$?
else
    how="RLIMIT_FSIZE of 1 MiB (mounting is not allowed here)"
    error=$(ulimit -f 1024; trap '' XFSZ; "$wormhole" send --group group.faults --bus-address "$bus_address" d <"$big" 2>&1 >/dev/null)
    status=$?
fi
kept=$("$wormhole" read --group group.faults d 2>&1)
temporaries=$(find "$small" -name '.d.*.tmp' | wc -l)
ok=0
[[ $status != 0 && $kept == '{"old":true}' && $temporaries == 0 ]] || ok=1
[[ $error == *"No space left on device"* || $error == *"File too large"* ]] || ok=1
check "disk full" $ok "$how: send exit $status ('${error:0:160}'), old message still '$kept', $temporaries temporary files left"

directory=$small/group.faults/wormhole
if [[ -n $mounted ]]; then
    how="the tmpfs remounted read-only"
    mount -o remount,ro "$small"
else
    how="chattr +i on the wormhole directory (mounting is not allowed here)"
    chattr +i "$directory"
fi
error=$("$wormhole" send --group group.faults --bus-address "$bus_address" d '{"new":true}' 2>&1 >/dev/null)
status=$?
kept=$("$wormhole" read --group group.faults d 2>&1)
listened=$(timeout 20 "$wormhole" listen --group group.faults --bus-address "$bus_address" d --stored --count 1 --timeout 1 2>/dev/null)
ok=0
[[ $status != 0 && $kept == '{"old":true}' ]] || ok=1
[[ $error == *"Read-only file system"* || $error == *"Operation not permitted"* ]] || ok=1
[[ $listened == '{"identifier":"d","message":{"old":true},"reason":"stored",'* ]] || ok=1
check "read-only container" $ok "$how: send exit $status ('${error:0:160}'), read '$kept', listen --stored '$listened'"
if [[ -n $mounted ]]; then mount -o remount,rw "$small"; else chattr -i "$directory"; fi
stop_daemon
unset WORMHOLE_CONTAINER_ROOT
fi

# ---------------------------------------------------------------------------------------------
# 5. Short-lived senders: each sends once and exits without a flush; dbus-monitor counts.
if stage 5; then
root=$scratch/senders
runtime=$scratch/senders-runtime
mkdir -m 700 "$root" "$runtime"
group=group.faults.exit
start_daemon
monitored=$scratch/monitor.txt
dbus-monitor --address "$address" "type='signal',path='/org/wormhole/Notify1'" >"$monitored" 2>/dev/null &
monitor=$!
# dbus-monitor prints the bus's NameAcquired to it once it is a monitor: it sees what follows.
timeout 20 tail -n +1 -f "$monitored" | grep -q -m 1 NameAcquired
started=$(date +%s.%N)
modes=(release keep return)
for kind in mailbox journal post defaults transient; do
    for ((n = 0; n < senders; n++)); do echo "$kind-$n ${modes[n % 3]}"; done |
        XDG_RUNTIME_DIR=$runtime xargs -P 4 -L 1 sh -c \
            "exec '$peer' send-once $kind '$root' $group \$0 '$address' \$1 >/dev/null 2>>'$scratch/senders.err'"
done
elapsed=$(echo "$(date +%s.%N) - $started" | bc)
# The sentinel: sent after the last sender exited, so whatever they put on the bus is before it.
dbus-send --address="$address" --type=signal /org/wormhole/Notify1 org.wormhole.Notify1.Posted string:sentinel
timeout 20 tail -n +1 -f "$monitored" | grep -q -m 1 '"sentinel"'
kill "$monitor" 2>/dev/null
wait "$monitor" 2>/dev/null
ok=0
summary=""
for kind in mailbox journal post defaults transient; do
    case $kind in
    journal) pattern="string \"$group/wormhole/journal-[0-9]*/journal\"" ;;
    post) pattern="string \"$group/post/post-[0-9]*\"" ;;
    defaults) pattern="string \"$group/Preferences/$group/defaults-[0-9]*\"" ;;
    *) pattern="string \"$group/wormhole/$kind-[0-9]*\"" ;;
    esac
    seen=$(grep -o "$pattern" "$monitored" | sort -u | wc -l)
    summary+="$kind $seen/$senders, "
    ((seen == senders)) || ok=1
done
failures=$(wc -l <"$scratch/senders.err")
((failures == 0)) || ok=1
check "short-lived senders" $ok "${summary}seen on the bus; $((senders * 5)) processes in ${elapsed%.*} s, $failures failed (send-once, 4 at a time)"
stop_daemon
fi

# ---------------------------------------------------------------------------------------------
# 6. Restart storm: the daemon killed and restarted at random 0.1-1 s intervals under 4 loops of
#    one-shot commands; every command is timed.
if stage 6; then
root=$scratch/storm
runtime=$scratch/storm-runtime
mkdir -m 700 "$root" "$runtime"
# The storm runs in a subshell of its own, with its own daemon; TERM ends it and its daemon.
(
    pid=""
    trap '[[ -n $pid ]] && kill -9 $pid 2>/dev/null; exit 0' TERM
    while true; do
        dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --nofork --address="$address" \
            >/dev/null 2>&1 &
        pid=$!
        sleep "0.$((RANDOM % 9 + 1))"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        pid=""
        rm -f "$socket"
    done
) &
storming=$!
# One loop: runs its command until the storm ends, one line per command: seconds and exit status.
loop() {  # loop NAME COMMAND...
    local name=$1 n=0 begin end
    shift
    local deadline=$(($(date +%s) + storm))
    while (($(date +%s) < deadline)); do
        n=$((n + 1))
        begin=$(date +%s%N)
        WORMHOLE_CONTAINER_ROOT=$root XDG_RUNTIME_DIR=$runtime timeout 120 "$@" "$n" >/dev/null 2>>"$scratch/storm-$name.err"
        local status=$?
        end=$(date +%s%N)
        echo "$name $(((end - begin) / 1000000)) $status"
    done
}
loop send "$wormhole" send --group group.faults --bus-address "$address" storm-send >"$scratch/storm-send.txt" &
loops=$!
loop journal "$wormhole" send --journal --group group.faults --bus-address "$address" storm-log >"$scratch/storm-journal.txt" &
loops+=" $!"
loop defaults "$wormhole" defaults write --group group.faults --bus-address "$address" storm-key >"$scratch/storm-defaults.txt" &
loops+=" $!"
loop post "$wormhole" post com.example.faults.storm --bus-address "$address" --state >"$scratch/storm-post.txt" &
loops+=" $!"
for job in $loops; do wait "$job"; done
kill -TERM "$storming" 2>/dev/null
wait "$storming" 2>/dev/null
all=$(cat "$scratch"/storm-*.txt | wc -l)
over=$(cat "$scratch"/storm-*.txt | awk '$2 >= 15000' | wc -l)
slowest=$(cat "$scratch"/storm-*.txt | sort -k2 -n | tail -1)
unstored=$(cat "$scratch"/storm-send.txt "$scratch"/storm-journal.txt "$scratch"/storm-defaults.txt | awk '$3 != 0' | wc -l)
posts_failed=$(awk '$3 != 0' "$scratch/storm-post.txt" | wc -l)
check "restart storm" $((over != 0 || unstored != 0)) \
    "$storm s: $over of $all commands took 15 s or more (slowest: $slowest ms), $unstored storing commands exited non-zero, $posts_failed of $(wc -l <"$scratch/storm-post.txt") posts reported not sent"
fi

# ---------------------------------------------------------------------------------------------
# 7. Damage (self-contained: its own bus and scratch directory).
if stage 7; then
# shellcheck disable=SC2086
while read -r line; do
    case $line in
    "PASS "*) passed=$((passed + 1)); echo "$line" ;;
    "FAIL "*) failed=$((failed + 1)); echo "$line" ;;
    esac
done < <(WORMHOLE_BIN=$bin "$repository/Tests/faults-damage.sh" ${WORMHOLE_FAULTS_DAMAGE:-} 2>&1)
fi

report
