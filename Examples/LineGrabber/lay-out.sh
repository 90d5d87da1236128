#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Lays LineGrabber out under ROOT as the examples package installs it (docs/install.md, *The
# examples package*): the native-messaging host and Lines in /usr/libexec/wormholectl-examples,
# the extension and one host manifest per browser (naming the host's installed path) in
# /usr/share/wormholectl-examples/linegrabber. The one place that layout is written:
# scripts/build-debs.sh packs it, try-in-browsers.sh tries it in real browsers.
#
#   Examples/LineGrabber/lay-out.sh ROOT BIN [--strip]
#       BIN: the folder holding line-grabber-host and lines (a Swift build's bin path);
#       --strip: strip the two executables as dh_strip strips one (for the package).
set -euo pipefail
here=$(dirname "$0")
root=${1:?usage: lay-out.sh ROOT BIN [--strip]}
bin=${2:?usage: lay-out.sh ROOT BIN [--strip]}
libexec=/usr/libexec/wormholectl-examples
share=/usr/share/wormholectl-examples/linegrabber
for executable in line-grabber-host lines; do
    install -D -m 755 "$bin/$executable" "$root$libexec/$executable"
    if [ "${3:-}" = --strip ]; then
        strip --remove-section=.comment --remove-section=.note "$root$libexec/$executable"
    fi
done
install -D -m 644 -t "$root$share/extension" "$here"/extension/*
for browser in chromium firefox; do
    install -d "$root$share/$browser"
    sed "s|@HOST_PATH@|$libexec/line-grabber-host|" "$here/hosts/$browser.json.in" \
        >"$root$share/$browser/com.example.linegrabber.json"
done
