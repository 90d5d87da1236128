#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# LineGrabber in a real browser: installs Debian's chromium if missing, builds the host and
# Lines, starts Lines on a private bus, loads the unpacked extension and the host manifest into
# a temporary profile of headless Chromium, calls the extension's sendLine (what the "Send to
# Lines" menu item's click calls; a headless browser has no menu to click) through the DevTools
# protocol (cdp-send.js, run by node), and checks that Lines shows the line.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v node >/dev/null || { echo "try-in-chromium.sh needs node (apt-get install nodejs) for cdp-send.js" >&2; exit 1; }
if ! command -v chromium >/dev/null; then
    echo "installing chromium (apt-get)..." >&2
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get install -y -q chromium >&2
fi
echo "building the host and Lines..." >&2
swift build --product line-grabber-host >&2
swift build --product lines >&2
bin=$(swift build --show-bin-path)

work=$(mktemp -d)
cleanup() {
    kill "${browser:-}" "${LINES_PID:-}" 2>/dev/null || true
    # Chromium writes its profile until it has exited: wait for it and its output, then clean up.
    wait 2>/dev/null || true
    kill "${daemon:-}" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
{ read -r bus; read -r daemon; } < <(dbus-daemon --config-file=dbus/wormhole-session.conf --fork \
    --print-address=1 --print-pid=1 --address="unix:path=$work/bus")
export WORMHOLE_CONTAINER_ROOT="$work/containers" XDG_RUNTIME_DIR="$work"
export LINES_GROUP=group.com.example.lines LINES_BUS_ADDRESS="$bus"

profile="$work/profile"
manifest=$(Examples/LineGrabber/install-host.sh chromium --user-data-dir "$profile" --host "$bin/line-grabber-host")
echo "host manifest: $manifest" >&2

coproc LINES { "$bin/lines" --bus-address "$bus" 2>&1; }
read -r line <&"${LINES[0]}"
[ "$line" = ready ] || { echo "Lines did not start: $line" >&2; exit 1; }
echo "Lines is running; starting headless Chromium $(chromium --version 2>/dev/null | head -1)" >&2

text="Hello from Chromium, $(date -u +%H:%M:%S)"
extension="$PWD/Examples/LineGrabber/extension"
sandbox=""; [ "$(id -u)" = 0 ] && sandbox=--no-sandbox
# The DevTools endpoint lets cdp-send.js call the extension's sendLine in its service worker, the
# function the "Send to Lines" menu item calls (a headless browser has no menu to click).
mkfifo "$work/chromium.out"
chromium --headless=new $sandbox --user-data-dir="$profile" --no-first-run --disable-gpu \
    --disable-features=DisableLoadExtensionCommandLineSwitch \
    --load-extension="$extension" --disable-extensions-except="$extension" \
    --remote-debugging-port=0 about:blank >"$work/chromium.out" 2>&1 &
browser=$!
exec {chromium_output}<"$work/chromium.out"
devtools=""
while IFS= read -r -t 60 line <&"$chromium_output"; do
    if [[ $line == "DevTools listening on "* ]]; then devtools=${line#DevTools listening on }; break; fi
done
[ -n "$devtools" ] || { echo "FAILED: Chromium did not open its DevTools endpoint" >&2; exit 1; }
cat <&"$chromium_output" > "$work/chromium.log" &
echo "Chromium's DevTools: $devtools; sending \"$text\" from the extension" >&2
reply=$(timeout 60 node --experimental-websocket Examples/LineGrabber/cdp-send.js "$devtools" \
    dgioladdfdbmmghkoldmnbeeipoamoal "$text" "https://example.com/article")
echo "the native host replied to the extension: $reply"

# Lines shows the line (its output is the event; 60 s is only the give-up bound).
while IFS= read -r -t 60 line <&"${LINES[0]}"; do
    echo "Lines printed: $line"
    if [[ $line == *"$text"* ]]; then
        echo "OK: Lines received the line Chromium's extension sent through the native host."
        exit 0
    fi
done
echo "FAILED: Lines did not show the line within 60 s. Chromium's log:" >&2
grep -iE "native|extension|error" "$work/chromium.log" | grep -v dbus | tail -20 >&2 || true
exit 1
