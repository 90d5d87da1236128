#!/usr/bin/env bash
# Wormhole's demo: MMWormhole's counter example as two processes on a private bus.
# A "watch" stores {"buttonNumber": N} under `button`; an "app" in another process
# wakes at once and shows each number with the time it took to cross.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
echo "building (release)..." >&2
swift build -c release >&2
bin=$(swift build -c release --show-bin-path)

work=$(mktemp -d)
cleanup() { kill "${daemon:-}" "${app:-}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
# A private session bus from dbus/, never the user's own.
# With --fork, dbus-daemon prints its address and pid once it listens, then returns.
{ read -r bus; read -r daemon; } < <(dbus-daemon --config-file=dbus/wormhole-session.conf --fork \
    --print-address=1 --print-pid=1 --address="unix:path=$work/bus")
export WORMHOLE_CONTAINER_ROOT="$work/containers" XDG_RUNTIME_DIR="$work"
group=group.com.example.counter

echo "== the watch presses button 1 while the app is not running (the message waits in the mailbox)"
"$bin/counter-watch" --group "$group" --presses 1 --bus-address "$bus"
echo "== the app starts, reads the mailbox, and listens; the watch presses 5 more times"
coproc APP { "$bin/counter-app" --group "$group" --presses 5 --bus-address "$bus" 2>&1; }
app=$APP_PID
read -r line <&"${APP[0]}"   # the app's first line is "ready" once it listens
[ "$line" = ready ] || { echo "app did not start: $line" >&2; exit 1; }
"$bin/counter-watch" --group "$group" --presses 5 --bus-address "$bus" &
cat <&"${APP[0]}"
wait
echo "== stored in $WORMHOLE_CONTAINER_ROOT/$group/wormhole/button.json:"
"$bin/wormhole" read --group "$group" button --bus-address "$bus"

echo "== wormhole doctor: the checks to run when nothing arrives (no app is listening now)"
"$bin/wormhole" doctor --group "$group" button --bus-address "$bus" || true

echo "== scenario 3: the watch sets the currency and the theme and writes a photo; the app shows each at once"
settings=group.com.example.settings
coproc SETTINGS { "$bin/settings-app" --group "$settings" --bus-address "$bus" 2>&1; }
app=$SETTINGS_PID
read -r line <&"${SETTINGS[0]}" && echo "$line"   # what it found at start
read -r line <&"${SETTINGS[0]}"                   # "ready" once it observes
[ "$line" = ready ] || { echo "settings-app did not start: $line" >&2; exit 1; }
printf 'currency USD\ntheme dark\nphoto 7\n' | "$bin/settings-watch" --group "$settings" --bus-address "$bus" 2>/dev/null | tail -n +2
while read -r -t 10 line <&"${SETTINGS[0]}"; do
    echo "$line"
    [[ $line == *"photo 7 from the watch"* ]] && break
done
