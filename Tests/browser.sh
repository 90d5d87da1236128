#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The LineGrabber browser extension in real browsers, Debian's headless chromium and firefox-esr,
# against the native-messaging host, its manifests and Lines as the examples package
# wormholectl-examples installs them; no Swift toolchain and no Node at test time
# (Tests/browser.py, on the Python standard library: a DevTools client over Chromium's
# --remote-debugging-pipe, a Marionette client for Firefox). Each browser runs in a mount
# namespace where the package's /usr is overlaid on the machine's: nothing is installed on, or
# written to, the machine's /usr and /etc.
#
# Usage: Tests/browser.sh [--no-firefox] [PACKAGE]
#   PACKAGE: the examples package's .deb, a directory holding it (wormholectl-examples_*.deb), or
#   an installed tree laid out as the package lays it out (usr/libexec/wormholectl-examples/...;
#   Examples/LineGrabber/try-in-browsers.sh stages one from a Swift build). Default:
#   $WORMHOLE_DEBS, else .build/debs (where scripts/build-debs.sh writes the packages).
# Needs (Debian): chromium, firefox-esr (not with --no-firefox), python3, dbus-daemon and dpkg
# (dpkg-deb); as a normal user, unprivileged user namespaces (the kernel's default). Runs as root
# (CI) or as a normal user alike. Exit 0 when every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."
options=() package=${WORMHOLE_DEBS:-.build/debs}
for argument in "$@"; do
    case $argument in
        --no-firefox) options+=("$argument") ;;
        -*) echo "browser.sh: unknown option $argument" >&2; exit 64 ;;
        *) package=$argument ;;
    esac
done
tools=(chromium python3 dbus-daemon dpkg-deb)
[ ${#options[@]} -gt 0 ] || tools+=(firefox-esr)
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || { echo "browser.sh: $tool is missing (.ci/install-deps installs it)" >&2; exit 1; }
done
if [ -d "$package" ] && [ -d "$package/usr/libexec/wormholectl-examples" ]; then
    exec timeout 300 python3 Tests/browser.py "${options[@]}" "$package"
fi
if [ -d "$package" ]; then
    debs=("$package"/wormholectl-examples_*.deb)
    [ -e "${debs[0]}" ] || { echo "browser.sh: no wormholectl-examples_*.deb in $package (scripts/build-debs.sh builds it)" >&2; exit 1; }
    [ ${#debs[@]} -eq 1 ] || { echo "browser.sh: more than one examples package in $package: ${debs[*]}" >&2; exit 1; }
    package=${debs[0]}
fi
[ -f "$package" ] || { echo "browser.sh: '$package' is neither a .deb nor a directory" >&2; exit 1; }
root=$(mktemp -d /tmp/wormhole-browser-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$package" "$root"
echo "browser: extracted $(basename "$package")"
timeout 300 python3 Tests/browser.py "${options[@]}" "$root"
