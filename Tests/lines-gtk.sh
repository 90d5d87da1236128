#!/bin/sh
# The Lines GTK 4 window (Examples/Lines/gtk/lines_window.py) under Xvfb: a clip sent with the
# Swift `wormholectl send` appears in it (checked by the lines it reports, not by a picture), on a
# private dbus-daemon started by the tests from dbus/wormhole-session.conf.
# Needs (Debian): python3-gi, gir1.2-gtk-4.0, python3-pytest, xvfb (xvfb-run), imagemagick
# (import, for the one screenshot), dbus-daemon, and
# the Swift tools in WORMHOLE_SWIFT_BIN (default: <repo>/.build/debug). With <repo>/Python present
# (the wormhole_py package) the window is also tested through its listener.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
export WORMHOLE_SWIFT_BIN="${WORMHOLE_SWIFT_BIN:-$repo/.build/debug}"
python=/usr/bin/python3   # Debian's python3-gi lives there, not in a pyenv or venv python
for tool in xvfb-run dbus-daemon "$python"; do
    command -v "$tool" >/dev/null || { echo "Tests/lines-gtk.sh: $tool is not installed" >&2; exit 2; }
done
[ -x "$WORMHOLE_SWIFT_BIN/wormholectl" ] || {
    echo "Tests/lines-gtk.sh: no wormhole in WORMHOLE_SWIFT_BIN=$WORMHOLE_SWIFT_BIN" >&2
    exit 2
}
if [ -d "$repo/Python/wormhole_py" ]; then
    export PYTHONPATH="$repo/Python${PYTHONPATH:+:$PYTHONPATH}"
fi
unset DBUS_SESSION_BUS_ADDRESS
export GSK_RENDERER=cairo GTK_A11Y=none NO_AT_BRIDGE=1 PYTHONDONTWRITEBYTECODE=1
exec timeout 600 xvfb-run -a -s "-screen 0 560x320x24" "$python" -m pytest -q -p no:cacheprovider "$repo/Examples/Lines/gtk" "$@"
