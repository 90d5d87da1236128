#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The install steps of docs/install.md, run as written (CI runs this): every shell block marked
# `<!-- install -->` runs in order in one shell, twice, as on a fresh machine where no target
# directory exists: once into a prefix that does not exist yet (as ~/.local on a fresh account), once staged
# into a temporary DESTDIR under the prefix /usr/local. Then the installed files are checked:
# the tool runs and says its version, `wormholectl bench` finds wormhole-bench, the completion
# scripts parse, and the man page is lint-clean (`mandoc -Tlint -W warning`: no line).
#
# To reuse the debug build CI already has, `swift build -c release` (with or without
# `--static-swift-stdlib`), `.build/release/` and the
# man page script's `release` are run as their debug forms; nothing else is changed. With
# `--release` (CI, after `Tests/run.sh --release` built it) the steps run exactly as written.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "install: $*" >&2; exit 1; }
command -v mandoc >/dev/null || fail "mandoc is not installed (.ci/install-deps installs it)"
steps=$(python3 Tests/doc-blocks.py docs/install.md install) || fail "docs/install.md has no block marked <!-- install -->"
debug=${steps//swift build -c release --static-swift-stdlib/swift build}
debug=${debug//swift build -c release/swift build}
debug=${debug//.build\/release\//.build\/debug\/}
debug=${debug//generate-man-page.sh release/generate-man-page.sh debug}
if [ "${1:-}" = --release ]; then debug=$steps; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check() {  # ROOT: where $PREFIX landed
    local root=$1
    for file in bin/wormholectl bin/wormhole-bench share/wormhole/wormhole-session.conf share/man/man1/wormholectl.1 \
        share/bash-completion/completions/wormholectl share/zsh/site-functions/_wormholectl \
        share/fish/vendor_completions.d/wormholectl.fish; do
        [ -s "$root/$file" ] || fail "$root/$file was not installed"
    done
    [ "$(stat -c %a "$root/bin/wormholectl")" = 755 ] || fail "bin/wormholectl is not mode 755"
    [ "$(stat -c %a "$root/share/man/man1/wormholectl.1")" = 644 ] || fail "wormholectl.1 is not mode 644"
    [[ $("$root/bin/wormholectl" --version) == "wormholectl "[0-9]* ]] || fail "the installed wormholectl does not run"
    [[ $("$root/bin/wormholectl" bench --help) == *--suite* ]] || fail "the installed wormholectl bench does not find wormhole-bench"
    bash -n "$root/share/bash-completion/completions/wormholectl" || fail "the bash completion does not parse"
    lint=$(mandoc -Tlint -W warning "$root/share/man/man1/wormholectl.1" 2>&1 || true)
    [ -z "$lint" ] || fail "mandoc -Tlint -W warning on wormholectl.1: $lint"
}

echo "install: PREFIX set to a directory that does not exist yet, no DESTDIR"
(export PREFIX=$work/prefix; unset DESTDIR; set +u -x; eval "$debug")
check "$work/prefix"

echo "install: PREFIX=/usr/local staged into a fresh DESTDIR (the build and the man page are made already)"
staged=$(grep -v -e '^swift build' -e '^scripts/generate-man-page.sh' <<<"$debug")
(export PREFIX=/usr/local DESTDIR=$work/stage; set +u -x; eval "$staged")
check "$work/stage/usr/local"
[ -z "$(find "$work/stage" -mindepth 1 -maxdepth 1 ! -name usr)" ] || fail "DESTDIR got files outside its prefix"
echo "install: docs/install.md works on a fresh machine (2 runs, man page: 0 mandoc warnings)"
