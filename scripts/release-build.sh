#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The release build users install, as the Debian packages hold it: every executable product and
# libwormhole (the `wormhole-c` product), each linked with the Swift runtime in it
# (`--static-swift-stdlib`: no Swift library to install beside it; docs/install.md).
#
#   scripts/release-build.sh [PRODUCT...]     (default: every executable product and wormhole-c
#                                              but wormhole-test-peer, which nobody installs)
#
# One `swift build --product` per product, because SwiftPM cannot build the whole package so:
# the tests' support target imports Testing, which the static runtime does not include. After
# the first product the others mostly link. Tests/run.sh --release, scripts/build-debs.sh and
# scripts/libwormhole.sh use it, so that they share one build in .build/release.
set -euo pipefail
cd "$(dirname "$0")/.."
products=("$@")
if ((${#products[@]} == 0)); then
    mapfile -t products < <(swift package describe --type json | python3 -c '
import json, sys
for product in json.load(sys.stdin)["products"]:
    if product["name"] == "wormhole-test-peer":
        continue  # a test tool, built without the flag by Tests/run.sh --release (see there)
    if "executable" in product["type"] or product["name"] == "wormhole-c":
        print(product["name"])')
fi
((${#products[@]})) || { echo "release-build: no products found" >&2; exit 1; }
for product in "${products[@]}"; do
    swift build -c release --static-swift-stdlib --product "$product"
done
