#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs LineGrabber's native-messaging host manifest for one browser, pointing at the built
# line-grabber-host. Usage:
#
#   Examples/LineGrabber/install-host.sh chromium|chrome|firefox [--user-data-dir DIR] [--host PATH]
#
# Chromium and Chrome look for host manifests in <user data dir>/NativeMessagingHosts
# (~/.config/chromium, ~/.config/google-chrome); Firefox in ~/.mozilla/native-messaging-hosts.
# The browser starts the host with the user's environment: LINES_GROUP picks the group
# (default group.com.example.lines), LINES_BUS_ADDRESS a bus other than the session bus.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
browser=${1:?usage: install-host.sh chromium|chrome|firefox [--user-data-dir DIR] [--host PATH]}
shift
data="" host=""
while [ $# -gt 0 ]; do
    case $1 in
        --user-data-dir) data=$2; shift 2 ;;
        --host) host=$2; shift 2 ;;
        *) echo "install-host.sh: unknown option $1" >&2; exit 64 ;;
    esac
done
if [ -z "$host" ]; then
    (cd "$here/../.." && swift build --product line-grabber-host >&2)
    host="$(cd "$here/../.." && swift build --show-bin-path)/line-grabber-host"
fi
case $browser in
    chromium) template=chromium; directory="${data:-$HOME/.config/chromium}/NativeMessagingHosts" ;;
    chrome) template=chromium; directory="${data:-$HOME/.config/google-chrome}/NativeMessagingHosts" ;;
    firefox) template=firefox; directory="$HOME/.mozilla/native-messaging-hosts" ;;
    *) echo "install-host.sh: browser must be chromium, chrome or firefox, not '$browser'" >&2; exit 64 ;;
esac
mkdir -p "$directory"
sed "s|@HOST_PATH@|$host|" "$here/hosts/$template.json.in" > "$directory/com.example.linegrabber.json"
echo "$directory/com.example.linegrabber.json"
