#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds libwormhole (the C library, docs/c.md) and installs it into a prefix:
#
#   scripts/libwormhole.sh [--prefix DIR] [--libdir DIR] [--destdir DIR] [--debug] [--no-build]
#
#   $PREFIX/lib/libwormhole.so.1          the library (SONAME libwormhole.so.1), stripped
#   $PREFIX/lib/libwormhole.so            the link for `-lwormhole`
#   $PREFIX/include/wormhole-1/wormhole.h, wormhole-glib.h and wormhole-qt.h
#   $PREFIX/share/vala/vapi/wormhole-1.vapi and .deps   the Vala binding
#   $PREFIX/lib/pkgconfig/wormhole-1.pc
#
# The prefix defaults to /usr/local, --libdir to PREFIX/lib (a Debian package passes
# /usr/lib/<multiarch>), --destdir stages the files under another root as `make install
# DESTDIR=` does. The build is `swift build -c release` (the one release build: the library's
# link flags are in its target, Package.swift), or the debug build with --debug; --no-build
# installs what that build made.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/usr/local
libdir=""
destdir=""
configuration=release
build=1
while (($#)); do
    case "$1" in
    --prefix) prefix=$2; shift ;;
    --libdir) libdir=$2; shift ;;
    --destdir) destdir=$2; shift ;;
    --debug) configuration=debug ;;
    --no-build) build=0 ;;
    -h | --help) sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "libwormhole.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$prefix" in /*) ;; *) echo "libwormhole.sh: --prefix '$prefix' is not absolute" >&2; exit 2 ;; esac
libdir=${libdir:-$prefix/lib}
# The release build is the one Tests/run.sh --release and the Debian packages use.
if ((build)) && [ "$configuration" = release ]; then scripts/release-build.sh wormhole-c; fi
if ((build)) && [ "$configuration" = debug ]; then swift build --product wormhole-c; fi
built="$(swift build -c "$configuration" --show-bin-path)/libwormhole-c.so"
[ -f "$built" ] || { echo "libwormhole.sh: $built is not built (run without --no-build)" >&2; exit 1; }
version=$(scripts/version.sh)
root="$destdir"
install -d "$root$libdir/pkgconfig" "$root$prefix/include/wormhole-1"
install -m 644 "$built" "$root$libdir/libwormhole.so.1"
strip --strip-unneeded "$root$libdir/libwormhole.so.1"
ln -sf libwormhole.so.1 "$root$libdir/libwormhole.so"
install -m 644 Sources/WormholeC/include/wormhole.h Sources/WormholeC/include/wormhole-glib.h \
    Sources/WormholeC/include/wormhole-qt.h "$root$prefix/include/wormhole-1/"
install -d "$root$prefix/share/vala/vapi"
install -m 644 Sources/WormholeC/vala/wormhole-1.vapi Sources/WormholeC/vala/wormhole-1.deps "$root$prefix/share/vala/vapi/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$libdir|" -e "s|@VERSION@|$version|" Sources/WormholeC/wormhole-1.pc.in \
    >"$root$libdir/pkgconfig/wormhole-1.pc"
chmod 644 "$root$libdir/pkgconfig/wormhole-1.pc"
echo "libwormhole $version installed in $root$prefix (library in $root$libdir)"
