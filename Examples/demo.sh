#!/usr/bin/env bash
# Wormhole's guided tour, on a private bus (never your own session bus) with a throwaway
# container root: the four scenarios of our users, each as real processes.
#   1. the counter (MMWormhole's example): a "watch" and an "app" process
#   2. Lines and LineGrabber: a terminal app and a browser extension's native host (this script
#      plays the browser, speaking the native-messaging protocol)
#   3. settings and a photo shared by a watch and its app
#   4. a share extension handing files to its host app
# Each step says in one line what you see and why it matters.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
echo "building (release)..." >&2
swift build -c release >&2
bin=$(swift build -c release --show-bin-path)

work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
# A private session bus from dbus/, never the user's own.
# With --fork, dbus-daemon prints its address and pid once it listens, then returns.
{ read -r bus; read -r daemon; } < <(dbus-daemon --config-file=dbus/wormhole-session.conf --fork \
    --print-address=1 --print-pid=1 --address="unix:path=$work/bus")
pids+=("$daemon")
export WORMHOLE_CONTAINER_ROOT="$work/containers" XDG_RUNTIME_DIR="$work"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say() { printf '   -> %s\n' "$*"; }
# Reads lines from file descriptor $1 and prints them until one contains $2 (10 s at most).
show_until() {
    local line
    while read -r -t 10 line <&"$1"; do
        echo "$line"
        [[ $line == *"$2"* ]] && return 0
    done
    echo "demo: no line with '$2' within 10 s" >&2
    exit 1
}

# --- 1. The counter ---------------------------------------------------------------------------
group=group.com.example.counter
step "1. The counter: a watch presses button 1 while the app is not running"
"$bin/counter-watch" --group "$group" --presses 1 --bus-address "$bus"
say "the press waits in the mailbox file, so an app that starts later still gets it"
step "   The app starts, shows the waiting press, then the watch presses 5 more times"
coproc APP { "$bin/counter-app" --group "$group" --presses 5 --bus-address "$bus" 2>&1; }
pids+=("$APP_PID")
read -r line <&"${APP[0]}"   # the app's first line is "ready" once it listens
[ "$line" = ready ] || { echo "app did not start: $line" >&2; exit 1; }
"$bin/counter-watch" --group "$group" --presses 5 --bus-address "$bus" &
cat <&"${APP[0]}"
wait
say "each press crosses processes at once (typically under a millisecond): a D-Bus signal wakes the app, no polling"
step "   When nothing arrives: wormhole doctor checks bus, container, message and listeners"
"$bin/wormhole" doctor --group "$group" button --bus-address "$bus" || true
say "every check names what is wrong and the fix (no app is listening now, so it says so)"

# --- 2. Lines and LineGrabber -----------------------------------------------------------------
export LINES_GROUP=group.com.example.lines LINES_BUS_ADDRESS=$bus
step "2. Lines (a terminal app) and LineGrabber (a browser extension); this script plays the browser"
coproc LINES { "$bin/lines" --bus-address "$bus" 2>&1; }
pids+=("$LINES_PID")
read -r line <&"${LINES[0]}"
[ "$line" = ready ] || { echo "lines did not start: $line" >&2; exit 1; }
# One native-messaging exchange: a 4-byte little-endian length, then the JSON; the reply the same.
browser() {
    local n=${#1}
    printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8 & 255)))\\x00\\x00%s" "$1" \
        | "$bin/line-grabber-host" | tail -c +5
    echo
}
echo 'browser -> host: {"line":"hello from a page","url":"https://example.com/"}'
printf 'host -> browser: '
browser '{"line":"hello from a page","url":"https://example.com/"}'
show_until "${LINES[0]}" "hello from a page"
say "Lines shows the clipped line the moment the extension's host stores it (no \"Load latest\" button)"
echo "thanks, got it" >&"${LINES[1]}"
show_until "${LINES[0]}" "answered"
printf 'browser asks for the answer, host -> browser: '
browser '{"get":"toExtension"}'
say "and the answer typed in Lines goes back to the extension the same way"
eval "exec ${LINES[1]}>&-"
wait "$LINES_PID" || true

# --- 3. Settings and a photo ------------------------------------------------------------------
step "3. A watch sets the currency and the theme and writes a photo; its app shows each at once"
settings=group.com.example.settings
coproc SETTINGS { "$bin/settings-app" --group "$settings" --bus-address "$bus" 2>&1; }
pids+=("$SETTINGS_PID")
read -r line <&"${SETTINGS[0]}" && echo "$line"   # what it found at start
read -r line <&"${SETTINGS[0]}"                   # "ready" once it observes
[ "$line" = ready ] || { echo "settings-app did not start: $line" >&2; exit 1; }
printf 'currency USD\ntheme dark\nphoto 7\n' | "$bin/settings-watch" --group "$settings" --bus-address "$bus" 2>/dev/null | tail -n +2
show_until "${SETTINGS[0]}" "photo 7 from the watch"
say "typed settings in the group's shared defaults, and a 2 MB file renamed into place: never read half-written"
eval "exec ${SETTINGS[1]}>&-"
wait "$SETTINGS_PID" || true

# --- 4. A share extension ---------------------------------------------------------------------
step "4. A share extension: the desktop starts share-handoff with a file; the host app shows it"
share=group.com.example.share
echo "a note from the file manager" > "$work/note.txt"
printf 'PNG?' > "$work/picture.png"
coproc HOST { "$bin/share-host" --group "$share" --bus-address "$bus" --actions messenger,disk,preview 2>&1; }
pids+=("$HOST_PID")
show_until "${HOST[0]}" "ready"
"$bin/share-handoff" --group "$share" --bus-address "$bus" --action disk "$work/note.txt"
show_until "${HOST[0]}" "note.txt"
say "the item is copied into the container and its {type, action, path} appended to a journal; the program exits"
"$bin/share-handoff" --group "$share" --bus-address "$bus" --action buffer "$work/note.txt" || true
say "an action the host app did not enable is refused, with what is enabled and how to change it"
eval "exec ${HOST[1]}>&-"
wait "$HOST_PID" || true
step "   The host app is closed; the user shares a picture"
"$bin/share-handoff" --group "$share" --bus-address "$bus" --action preview "$work/picture.png"
coproc HOST { "$bin/share-host" --group "$share" --bus-address "$bus" 2>&1; }
pids+=("$HOST_PID")
show_until "${HOST[0]}" "picture.png"
say "the journal keeps every share in order, and the host's durable cursor shows each once, even when it was closed"
eval "exec ${HOST[1]}>&-"
wait "$HOST_PID" || true

step "Done. Each example runs by hand too: see docs/examples.md."
