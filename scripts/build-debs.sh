#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds Wormhole's Debian packages (binary only) from the repository, in one command:
#
#   scripts/build-debs.sh [--out DIR]      (DIR defaults to .build/debs)
#
#   wormholectl            the tool (Swift runtime linked in), its man page, completions, and
#                          wormhole-bench and wormhole-floor, which `wormholectl bench` runs
#   python3-wormhole-dbus  wormhole_py for the system's python3, and wormhole-py
#   gjs-wormhole-dbus      the GJS module, /usr/share/gjs-1.0/wormhole-dbus/wormhole.js
#   libwormhole1           libwormhole.so.1, the C library
#   libwormhole-dev        its headers, pkg-config file, link and Vala binding
#   wormholectl-examples   LineGrabber's host, manifests and extension, and Lines
#
# The Swift toolchain is no Debian package: the script takes `swift` from PATH, or the one
# SWIFT names (SWIFT=/opt/swift/usr/bin/swift), and fails when there is none. The build is the
# release build with the Swift runtime linked in (scripts/release-build.sh), the same one
# `Tests/run.sh --release` makes and tests (after it, nothing is compiled again).
# The packages' version is the project's (scripts/version.sh), checked against the Python
# package's, the GJS module's and the built tool's `--version` before anything is packed.
# Needs dpkg-dev (dpkg-gencontrol, dpkg-shlibdeps), python3-setuptools and python3-wheel (the
# Python package's wheel); the man page comes from scripts/generate-man-page.sh. No root and no
# fakeroot: dpkg-deb --root-owner-group. docs/install.md says what each package holds.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022
fail() { echo "build-debs: $*" >&2; exit 1; }
out=.build/debs
while (($#)); do
    case "$1" in
    --out) out=${2:?--out needs a directory}; shift ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
    esac
    shift
done
swift=${SWIFT:-$(command -v swift || true)}
[ -n "$swift" ] && [ -x "$swift" ] ||
    fail "no Swift toolchain: put swift (6.1 or later, swift.org) on PATH or name it in SWIFT=/path/to/bin/swift"
# The scripts this one runs (the man page's) find the same toolchain.
PATH="$(dirname "$swift"):$PATH"
for command in dpkg-deb dpkg-gencontrol dpkg-shlibdeps dpkg-architecture; do
    command -v "$command" >/dev/null || fail "$command is missing (apt-get install dpkg-dev)"
done
/usr/bin/python3 -c 'import setuptools, wheel' 2>/dev/null ||
    fail "the system python3 lacks setuptools or wheel (apt-get install python3-setuptools python3-wheel)"
version=$(scripts/version.sh)
scripts/version.sh --check >/dev/null
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
tool=wormholectl
work=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-debs.XXXXXX")
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

scripts/release-build.sh "$tool" wormhole-bench wormhole-floor wormhole-c line-grabber-host lines >"$work/build.log" 2>&1 ||
    { cat "$work/build.log" >&2; fail "the release build failed (above)"; }
scripts/generate-man-page.sh release "$work/wormholectl.1" >/dev/null
bin=$(swift build -c release --show-bin-path)
for program in "$tool" wormhole-bench wormhole-floor line-grabber-host lines libwormhole-c.so; do
    [ -f "$bin/$program" ] || fail "$bin/$program was not built"
    if readelf -d "$bin/$program" | grep -E 'NEEDED.*\[lib(swift|Foundation|_Foundation|dispatch|BlocksRuntime)'; then
        fail "$bin/$program needs the Swift runtime's shared libraries (above): not linked with --static-swift-stdlib"
    fi
done
scripts/version.sh --check "$bin/$tool" >/dev/null

# The packages' metadata, as dpkg-gencontrol and dpkg-shlibdeps read it: debian/control, and a
# changelog of one entry made from the version (no second place to keep it).
mkdir -p "$work/debian"
cp debian/control "$work/debian/control"
{
    echo "wormholectl ($version) unstable; urgency=medium"
    echo
    echo "  * Wormhole $version, built by scripts/build-debs.sh; what changed is in the"
    echo "    repository's CHANGELOG.md."
    echo
    echo " -- Wormhole authors <wormhole@example.org>  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} >"$work/debian/changelog"
packages=(wormholectl python3-wormhole-dbus gjs-wormhole-dbus libwormhole1 libwormhole-dev wormholectl-examples)
stage() { echo "$work/debian/$1"; }
for package in "${packages[@]}"; do
    root=$(stage "$package")
    install -d "$root/DEBIAN" "$root/usr/share/doc/$package"
    install -m 644 debian/copyright "$root/usr/share/doc/$package/copyright"
    gzip -9n <"$work/debian/changelog" >"$root/usr/share/doc/$package/changelog.gz"
    if [ -f "debian/$package.lintian-overrides" ]; then
        install -D -m 644 "debian/$package.lintian-overrides" "$root/usr/share/lintian/overrides/$package"
    fi
done
executable() {  # SOURCE DESTINATION: an executable, stripped as dh_strip strips one
    install -D -m 755 "$1" "$2"
    strip --remove-section=.comment --remove-section=.note "$2"
}

# wormholectl
root=$(stage wormholectl)
executable "$bin/$tool" "$root/usr/bin/wormholectl"
executable "$bin/wormhole-bench" "$root/usr/bin/wormhole-bench"
executable "$bin/wormhole-floor" "$root/usr/bin/wormhole-floor"
install -D -m 644 dbus/wormhole-session.conf "$root/usr/share/wormhole/wormhole-session.conf"
install -D -m 644 "$work/wormholectl.1" "$root/usr/share/man/man1/wormholectl.1"
gzip -9n "$root/usr/share/man/man1/wormholectl.1"
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d"
# bash-completion sources the file: no #! line (lintian's bash-completion-with-hashbang).
"$bin/$tool" --generate-completion-script bash | sed '1{/^#!/d}' >"$root/usr/share/bash-completion/completions/wormholectl"
"$bin/$tool" --generate-completion-script zsh >"$root/usr/share/zsh/vendor-completions/_wormholectl"
"$bin/$tool" --generate-completion-script fish >"$root/usr/share/fish/vendor_completions.d/wormholectl.fish"

# python3-wormhole-dbus: the wheel setuptools builds from Python/, unpacked where Debian's
# python3 imports from, and the console script its entry point names.
root=$(stage python3-wormhole-dbus)
cp -r Python "$work/python-source"
(cd "$work/python-source" && /usr/bin/python3 -c \
    'import setuptools.build_meta as b, sys; print(b.build_wheel(sys.argv[1]))' "$work/wheel" >/dev/null 2>"$work/wheel.log") ||
    { cat "$work/wheel.log" >&2; fail "the Python package's wheel did not build"; }
site="$root/usr/lib/python3/dist-packages"
/usr/bin/python3 - "$work/wheel" "$site" "$root/usr/bin" "$version" <<'PY'
import configparser, glob, os, sys, zipfile
wheel_dir, site, bindir, version = sys.argv[1:]
(wheel,) = glob.glob(os.path.join(wheel_dir, "*.whl"))
with zipfile.ZipFile(wheel) as archive:
    archive.extractall(site)
(info,) = glob.glob(os.path.join(site, "*.dist-info"))
meta = open(os.path.join(info, "METADATA"), encoding="utf-8").read()
if "\nVersion: %s\n" % version not in meta:
    sys.exit("build-debs: the wheel is not version %s" % version)
# Installed by dpkg, not pip: pip's RECORD is left out, so that pip does not remove the files.
os.remove(os.path.join(info, "RECORD"))
with open(os.path.join(info, "INSTALLER"), "w", encoding="utf-8") as f:
    f.write("debian\n")
points = configparser.ConfigParser()
points.read(os.path.join(info, "entry_points.txt"))
os.makedirs(bindir, exist_ok=True)
for name, target in points["console_scripts"].items():
    module, function = target.split(":")
    path = os.path.join(bindir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("#!/usr/bin/python3\nimport sys\nfrom %s import %s\nsys.exit(%s())\n" % (module, function, function))
    os.chmod(path, 0o755)
PY
find "$site" -type f -exec chmod 644 {} +
cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] && command -v py3compile >/dev/null 2>&1; then
    py3compile -p python3-wormhole-dbus
fi
EOF
cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if command -v py3clean >/dev/null 2>&1; then
    py3clean -p python3-wormhole-dbus
else
    dpkg -L python3-wormhole-dbus | sed -n 's|\.py$|.pyc|p' | while read -r file; do
        rm -f "$(dirname "$file")"/__pycache__/"$(basename "$file" .pyc)".*.pyc
    done
    dpkg -L python3-wormhole-dbus | while read -r directory; do
        [ -d "$directory/__pycache__" ] && rmdir --ignore-fail-on-non-empty "$directory/__pycache__"
    done
fi
EOF
chmod 755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm"

# gjs-wormhole-dbus
root=$(stage gjs-wormhole-dbus)
install -D -m 644 GJS/wormhole.js "$root/usr/share/gjs-1.0/wormhole-dbus/wormhole.js"
install -D -m 644 -t "$root/usr/share/gjs-1.0/wormhole-dbus/wormhole" GJS/wormhole/*.js

# libwormhole1 and libwormhole-dev, split from what scripts/libwormhole.sh installs.
scripts/libwormhole.sh --no-build --prefix /usr --libdir "/usr/lib/$multiarch" --destdir "$work/c" >/dev/null
root=$(stage libwormhole1)
install -D -m 644 "$work/c/usr/lib/$multiarch/libwormhole.so.1" "$root/usr/lib/$multiarch/libwormhole.so.1"
rm "$work/c/usr/lib/$multiarch/libwormhole.so.1"
echo "libwormhole 1 libwormhole1 (>= $version)" >"$root/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"
cp -a "$work/c/usr" "$(stage libwormhole-dev)/"

# wormholectl-examples (docs/install.md, *The examples package*)
root=$(stage wormholectl-examples)
Examples/LineGrabber/lay-out.sh "$root" "$bin" --strip

# Control files: the dependencies of every ELF file from dpkg-shlibdeps, the rest from
# debian/control; md5sums; then the package.
mkdir -p "$out"
for package in "${packages[@]}"; do
    root=$(stage "$package")
    elves=()
    while IFS= read -r -d '' file; do
        if [ "$(head -c 4 "$file" | od -An -c | tr -d ' ')" = 177ELF ]; then elves+=("$file"); fi
    done < <(find "$root/usr" -type f -print0)
    substvars="$work/debian/$package.substvars"
    : >"$substvars"
    if ((${#elves[@]})); then
        (cd "$work" && dpkg-shlibdeps -T"debian/$package.substvars" "${elves[@]#"$work/"}")
    fi
    if [ "$package" = python3-wormhole-dbus ]; then echo "python3:Depends=python3:any" >>"$substvars"; fi
    (cd "$work" && dpkg-gencontrol -p"$package" -P"debian/$package" -T"debian/$package.substvars" \
        -f"debian/files")
    (cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums)
    dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
done
ls -1 "$out"/*_"$version"_*.deb
