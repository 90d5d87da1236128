#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs share-handoff as a desktop "Open With…" entry for the user:
# ~/.local/share/applications/share-handoff.desktop, pointing at the built share-handoff.
#
#   Examples/ShareHandoff/install-desktop.sh [--handoff PATH]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
handoff=""
if [ "${1:-}" = --handoff ]; then handoff=${2:?--handoff needs a path}; shift 2; fi
[ $# -eq 0 ] || { echo "install-desktop.sh: unknown option $1" >&2; exit 64; }
if [ -z "$handoff" ]; then
    (cd "$here/../.." && swift build --product share-handoff >&2)
    handoff="$(cd "$here/../.." && swift build --show-bin-path)/share-handoff"
fi
directory="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
mkdir -p "$directory"
sed "s|@HANDOFF@|$handoff|g" "$here/share-handoff.desktop.in" > "$directory/share-handoff.desktop"
if command -v update-desktop-database >/dev/null; then update-desktop-database "$directory" || true; fi
echo "$directory/share-handoff.desktop"
