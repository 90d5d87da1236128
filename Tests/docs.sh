#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the DocC documentation of the Wormhole and WormholeDBus modules with swift-docc-plugin
# and fails on any warning (a broken symbol link, an undocumented parameter, an ambiguous
# reference). The archives land in .build/plugins/Swift-DocC/outputs/.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
if ! swift package generate-documentation --target WormholeDBus --target Wormhole >"$log" 2>&1; then
    cat "$log" >&2
    echo "docs: swift package generate-documentation failed" >&2
    exit 1
fi
warnings=$(grep -c 'warning:' "$log" || true)
if [ "$warnings" -ne 0 ]; then
    grep -A4 'warning:' "$log" >&2
    echo "docs: $warnings warning(s)" >&2
    exit 1
fi
echo "docs: Wormhole and WormholeDBus built with 0 warnings in $((SECONDS - start)) s"
