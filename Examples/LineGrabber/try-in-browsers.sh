#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# LineGrabber in a real browser, from a Swift build: builds the host and Lines, lays them out with
# the extension and the Chromium manifest as the examples package installs them
# (/usr/libexec/wormholectl-examples, /usr/share/wormholectl-examples/linegrabber) in a temporary
# tree, and runs Tests/browser.sh on it: headless Chromium loads the unpacked extension, its
# "Send to Lines" action goes through native messaging to the host, and Lines shows the line;
# then the same in headless Firefox ESR. Needs Debian's chromium and firefox-esr (.ci/install-deps
# installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build --product line-grabber-host >&2
swift build --product lines >&2
bin=$(swift build --show-bin-path)
tree=$(mktemp -d /tmp/linegrabber-tree.XXXXXX)
trap 'rm -rf "$tree"' EXIT
Examples/LineGrabber/lay-out.sh "$tree" "$bin"
Tests/browser.sh "$@" "$tree"
