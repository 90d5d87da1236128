#!/usr/bin/env bash
# The exit drain through libwormhole: a C program that sends and returns from main at once (no
# flush; Tests/C/send-and-exit.c) is run COUNT times (default 1,000), and every post and every
# mailbox message must be heard by the Swift tool listening (contract section 1: sends are safe
# at exit). Run by Tests/c.sh with a smaller COUNT; run it by hand for the full figure:
#
#   Tests/faults-c-exit.sh [COUNT]
#
# Needs SEND_AND_EXIT (the built sender), WORMHOLE (the Swift tool), and a bus in
# DBUS_SESSION_BUS_ADDRESS (Tests/c.sh gives all three; by hand, without a bus, it starts a
# private dbus-daemon, and without the others it builds them: scripts/libwormhole.sh --debug).
set -euo pipefail
repository=$(cd "$(dirname "$0")/.." && pwd)
count=${1:-1000}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-c-exit.XXXXXX")
daemon=""
cleanup() {
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; fi
    rm -rf "$scratch"
}
trap cleanup EXIT
if [ -z "${SEND_AND_EXIT:-}" ]; then
    "$repository/scripts/libwormhole.sh" --debug --prefix "$scratch/prefix" >/dev/null
    cc -o "$scratch/send-and-exit" "$repository/Tests/C/send-and-exit.c" \
        $(PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig" pkg-config --cflags --libs wormhole-1) \
        -Wl,-rpath,"$scratch/prefix/lib"
    SEND_AND_EXIT=$scratch/send-and-exit
fi
wormhole=${WORMHOLE:-$repository/.build/debug/wormholectl}
if [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ]; then
    dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --address="unix:path=$scratch/bus" \
        --nofork --print-address >"$scratch/address" 2>/dev/null &
    daemon=$!
    grep -q -m1 '^unix:' < <(timeout 10 tail -n +1 -F "$scratch/address" 2>/dev/null)
    export DBUS_SESSION_BUS_ADDRESS="unix:path=$scratch/bus"
fi
export WORMHOLE_CONTAINER_ROOT=${WORMHOLE_CONTAINER_ROOT:-$scratch/root}
name="com.example.cexit.$$"
group=group.com.example.cexit
failed=0

# Posts: `observe --count COUNT` hears each sender's post once.
"$wormhole" observe "$name" --count "$count" --timeout 600 >"$scratch/posts" 2>"$scratch/observe.err" &
observer=$!
grep -q -m1 '^ready$' < <(timeout 20 tail -n +1 -F "$scratch/observe.err" 2>/dev/null)
for ((i = 1; i <= count; i++)); do "$SEND_AND_EXIT" "$name" "$i"; done
wait "$observer" || true
heard=$(sort -u "$scratch/posts" | grep -c '"state":' || true)
echo "exit drain, posts: $heard of $count heard"
[ "$heard" -eq "$count" ] || failed=1

# Mailbox messages: `listen --every-post --count COUNT` hears each sender's post once (two
# posts read before the second file lands show the second message twice: still two lines).
"$wormhole" listen --group "$group" drain --every-post --count "$count" --timeout 600 >"$scratch/messages" 2>"$scratch/listen.err" &
listener=$!
grep -q -m1 '^ready$' < <(timeout 20 tail -n +1 -F "$scratch/listen.err" 2>/dev/null)
for ((i = 1; i <= count; i++)); do "$SEND_AND_EXIT" --mailbox "$group" drain "$i"; done
wait "$listener" || true
heard=$(grep -c '"identifier":"drain"' "$scratch/messages" || true)
echo "exit drain, mailbox messages: $heard of $count heard"
[ "$heard" -eq "$count" ] || failed=1
exit "$failed"
