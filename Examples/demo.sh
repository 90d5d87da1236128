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
# The debug build, the one the README's tour and docs/examples.md use too.
echo "demo: building the examples and the wormholectl tool (swift build: the first run compiles everything, about 4 minutes on 2 cores; later runs take seconds)" >&2
swift build >&2
bin=$(swift build --show-bin-path)

work=$(mktemp -d)
pids=()
# However the demo ends (an error, Ctrl-C): every process it started is killed and waited for
# (so none is left running, and none writes into the folder while it is removed), then the folder goes.
cleanup() {
    trap - EXIT INT TERM
    if ((${#pids[@]})); then kill "${pids[@]}" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A private session bus from dbus/, never the user's own; a child of this script, so that it can
# be waited for. It prints its address once it listens.
mkfifo "$work/address"
dbus-daemon --config-file=dbus/wormhole-session.conf --nofork --print-address=1 --address="unix:path=$work/bus" \
    >"$work/address" &
pids+=($!)
read -r bus <"$work/address" || { echo "demo: dbus-daemon did not start" >&2; exit 1; }
export WORMHOLE_CONTAINER_ROOT="$work/containers" XDG_RUNTIME_DIR="$work"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say() { printf '   -> %s\n' "$*"; }
# Reads lines from file descriptor $1 (the output of the example $3) and prints them until one
# contains $2: an example's lines are events, waited for as such. The end of its output (it
# exited) fails the demo at once; 60 s without a line only guards against a hang.
show_until() {
    local line status
    while true; do
        status=0
        IFS= read -r -t 60 line <&"$1" || status=$?
        if ((status > 128)); then echo "demo: $3 printed no line with '$2' within 60 s" >&2; exit 1; fi
        if ((status != 0)); then echo "demo: $3 exited before printing a line with '$2'" >&2; exit 1; fi
        if [[ $line == *"$2"* ]]; then
            [ "$2" = ready ] || echo "$line"
            return 0
        fi
        echo "$line"
    done
}
# Waits for the line "ready" (written once the example listens), printing the lines before it.
until_ready() { show_until "$1" ready "$2"; }

# --- 1. The counter ---------------------------------------------------------------------------
group=group.com.example.counter
step "1. The counter: a watch presses button 1 while the app is not running"
"$bin/counter-watch" --group "$group" --presses 1 --bus-address "$bus"
say "the press waits in the mailbox file, so an app that starts later still gets it"
step "   The app starts, shows the waiting press, then the watch presses 5 more times"
coproc APP { exec "$bin/counter-app" --group "$group" --presses 5 --bus-address "$bus" 2>&1; }
app=$APP_PID   # saved (as for each coprocess): bash unsets APP_PID once the coprocess ends
pids+=("$app")
until_ready "${APP[0]}" counter-app   # what it found in the mailbox may come before "ready"
"$bin/counter-watch" --group "$group" --presses 5 --bus-address "$bus" &
pids+=($!)
watch=$!
cat <&"${APP[0]}"
wait "$watch"
wait "$app" 2>/dev/null || true
say "each press crosses processes at once (typically under a millisecond): a D-Bus signal wakes the app, no polling"
step "   When nothing arrives: wormholectl doctor checks bus, container, message and listeners"
"$bin/wormholectl" doctor --group "$group" button --bus-address "$bus" || true
say "every check names what is wrong and the fix (no app is listening now, so it says so)"

# --- 2. Lines and LineGrabber -----------------------------------------------------------------
export LINES_GROUP=group.com.example.lines LINES_BUS_ADDRESS=$bus
step "2. Lines (a terminal app) and LineGrabber (a browser extension); this script plays the browser"
coproc LINES { exec "$bin/lines" --bus-address "$bus" 2>&1; }
lines_pid=$LINES_PID
pids+=("$lines_pid")
until_ready "${LINES[0]}" lines
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
show_until "${LINES[0]}" "hello from a page" lines
say "Lines shows the clipped line the moment the extension's host stores it (no \"Load latest\" button)"
echo "thanks, got it" >&"${LINES[1]}"
show_until "${LINES[0]}" "answered" lines
printf 'browser asks for the answer, host -> browser: '
browser '{"get":"toExtension"}'
say "and the answer typed in Lines goes back to the extension the same way"
eval "exec ${LINES[1]}>&-"
wait "$lines_pid" 2>/dev/null || true

# --- 3. Settings and a photo ------------------------------------------------------------------
step "3. A watch sets the currency and the theme and writes a photo; its app shows each at once"
settings=group.com.example.settings
coproc SETTINGS { exec "$bin/settings-app" --group "$settings" --bus-address "$bus" 2>&1; }
settings_pid=$SETTINGS_PID
pids+=("$settings_pid")
until_ready "${SETTINGS[0]}" settings-app   # after what it found at start
printf 'currency USD\ntheme dark\nphoto 7\n' | "$bin/settings-watch" --group "$settings" --bus-address "$bus" 2>/dev/null | tail -n +2
show_until "${SETTINGS[0]}" "photo 7 from the watch" settings-app
say "typed settings in the group's shared defaults, and a 2 MB file renamed into place: never read half-written"
eval "exec ${SETTINGS[1]}>&-"
wait "$settings_pid" 2>/dev/null || true

# --- 4. A share extension ---------------------------------------------------------------------
step "4. A share extension: the desktop starts share-handoff with a file; the host app shows it"
share=group.com.example.share
echo "a note from the file manager" > "$work/note.txt"
printf 'PNG?' > "$work/picture.png"
coproc HOST { exec "$bin/share-host" --group "$share" --bus-address "$bus" --actions messenger,disk,preview 2>&1; }
host=$HOST_PID
pids+=("$host")
until_ready "${HOST[0]}" share-host
"$bin/share-handoff" --group "$share" --bus-address "$bus" --action disk "$work/note.txt"
show_until "${HOST[0]}" "note.txt" share-host
say "the item is copied into the container and its {type, action, path} appended to a journal; the program exits"
"$bin/share-handoff" --group "$share" --bus-address "$bus" --action buffer "$work/note.txt" || true
say "an action the host app did not enable is refused, with what is enabled and how to change it"
eval "exec ${HOST[1]}>&-"
wait "$host" 2>/dev/null || true
step "   The host app is closed; the user shares a picture"
"$bin/share-handoff" --group "$share" --bus-address "$bus" --action preview "$work/picture.png"
coproc HOST { exec "$bin/share-host" --group "$share" --bus-address "$bus" 2>&1; }
host=$HOST_PID
pids+=("$host")
show_until "${HOST[0]}" "picture.png" share-host
say "the journal keeps every share in order, and the host's durable cursor shows each once, even when it was closed"
eval "exec ${HOST[1]}>&-"
wait "$host" 2>/dev/null || true

step "Done. Each example runs by hand too: see docs/examples.md."
