#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Lints the GJS module, its tests and benchmarks offline: Debian's eslint (6.4) with Debian's
# espree (9.x), which parses ES2022 modules (top-level await, BigInt, optional chaining), and
# GJS/.eslintrc.json: GNOME Shell's GJS and Shell rules that eslint 6.4 has (docs/gjs.md, *Lint*).
# Needs: eslint (Debian: eslint). No network.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
command -v eslint >/dev/null || { echo "Tests/gjs-lint.sh: eslint is not installed (Debian: apt-get install eslint)" >&2; exit 2; }
# Debian's eslint loads its parts from /usr/share/nodejs, which Debian's Node.js searches by itself and
# a Node.js installed from elsewhere does not.
NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
export NODE_PATH
cd "$repo/GJS"
eslint --no-eslintrc -c .eslintrc.json --max-warnings 0 -f unix .
# The Lines extension vendors the module through two links (docs/gjs.md, *Vendoring*).
for link in wormhole.js wormhole; do
    target=$(readlink -f "$repo/Examples/Lines/shell-extension/$link") || target=
    [ "$target" = "$repo/GJS/$link" ] || {
        echo "Tests/gjs-lint.sh: Examples/Lines/shell-extension/$link does not lead to GJS/$link" >&2
        exit 1
    }
done
echo "GJS lint: no finding in $(find . -name '*.js' | wc -l) files"
