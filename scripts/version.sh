#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's version, from its one place: `WormholeVersion.package` in
# Sources/Wormhole/Version.swift (the tool's `--version`, libwormhole's pkg-config file and the
# Debian packages take it from there).
#
#   scripts/version.sh                 prints it
#   scripts/version.sh --check [TOOL]  fails, naming each, when a copy disagrees: the Python
#                                      package (Python/pyproject.toml, wormhole_py.__version__),
#                                      the GJS module's VERSION, and TOOL's `--version` line
#                                      when TOOL (a built or installed tool) is given
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^ *package static let package = "\(.*\)"$/\1/p' Sources/Wormhole/Version.swift)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "version.sh: no X.Y.Z version in Sources/Wormhole/Version.swift" >&2; exit 1; }
if [ "${1:-}" != --check ]; then
    echo "$version"
    exit 0
fi
bad=0
differs() { echo "version.sh: $1 says '$2', Sources/Wormhole/Version.swift '$version'" >&2; bad=1; }
python=$(sed -n 's/^version = "\(.*\)"$/\1/p' Python/pyproject.toml)
[ "$python" = "$version" ] || differs Python/pyproject.toml "$python"
python=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' Python/wormhole_py/__init__.py)
[ "$python" = "$version" ] || differs "Python/wormhole_py/__init__.py (__version__)" "$python"
gjs=$(sed -n "s/^export const VERSION = '\(.*\)';$/\1/p" GJS/wormhole/names.js)
[ "$gjs" = "$version" ] || differs "GJS/wormhole/names.js (VERSION)" "$gjs"
if [ -n "${2:-}" ]; then
    line=$("$2" --version)
    [[ $line == *" $version (contract "* ]] || differs "$2 --version" "$line"
fi
((bad == 0)) || exit 1
echo "version.sh: $version everywhere"
