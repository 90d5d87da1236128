#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Wormhole's Debian packages where nothing else is installed (CI runs this; docs/install.md,
# *Debian packages*). As root:
#
#   Tests/debian-root.sh [--debs DIR]
#
# 1. Builds the packages with scripts/build-debs.sh into .build/debs (after
#    `Tests/run.sh --release` that build compiles nothing), or takes DIR's, and runs lintian on
#    them (no error, no warning).
# 2. Makes a fresh Debian 12 root: `mmdebstrap --variant=apt bookworm` with only passwd (useradd),
#    dbus-daemon, man-db, bash-completion and Debian's magic-wormhole, whose `wormhole` ours
#    must leave alone. Installs what the packages depend on (python3-jeepney, gjs, libdbus-1-dev:
#    `apt-get satisfy` with their Depends), lists its /usr and /etc, then `apt-get install
#    ./*.deb` there.
# 3. As a normal user in that root (Tests/debian-root-user.sh), with a runtime directory of its
#    own and a private dbus-daemon started from the packaged configuration: no Swift anywhere,
#    both `wormhole --version` (magic-wormhole) and `wormholectl --version`, README's tour
#    with the installed tool standing in for the Swift listener and README's Python listener on
#    the system's python3, docs/gjs.md's first program importing the installed module, `man`,
#    the bash completion, `doctor`, wormhole-py, libwormhole and the examples package's files.
# 4. Records each package's `dpkg -L`, purges the packages, and fails if one of those files is
#    left or a file under /usr or /etc appeared that no package owns.
#
# Nothing is installed on this machine: the root is made under $TMPDIR and removed at the end;
# it is entered with chroot in mount and PID namespaces of its own (unshare), which go with it.
# Needs mmdebstrap and the network to a Debian mirror (DEBIAN_MIRROR, default deb.debian.org).
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "debian-root: $*" >&2; exit 1; }
debs=""
while (($#)); do
    case "$1" in
    --debs) debs=${2:?--debs needs a directory}; shift ;;
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || fail "run it as root: it makes a Debian root with mmdebstrap and enters it with chroot"
command -v mmdebstrap >/dev/null || fail "mmdebstrap is missing (.ci/install-deps installs it)"
start=$SECONDS
version=$(scripts/version.sh)
if [ -z "$debs" ]; then
    scripts/build-debs.sh --out .build/debs >/dev/null
    debs=.build/debs
fi
packages=(wormholectl python3-wormhole-dbus gjs-wormhole-dbus libwormhole1 libwormhole-dev wormholectl-examples)
for package in "${packages[@]}"; do
    compgen -G "$debs/${package}_${version}_*.deb" >/dev/null || fail "$debs has no ${package}_${version}_*.deb"
done
debs_list=()
for package in "${packages[@]}"; do debs_list+=("$debs/${package}_${version}_"*.deb); done
# Lintian: no error, no warning (each override in debian/PACKAGE.lintian-overrides says why).
if command -v lintian >/dev/null; then
    lintian --fail-on error,warning "${debs_list[@]}" || fail "lintian reports errors or warnings (above)"
else
    fail "lintian is missing (.ci/install-deps installs it)"
fi
built=$SECONDS

work=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-root.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
root=$work/root
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mmdebstrap --quiet --variant=apt --skip=cleanup/apt/lists --include=passwd,dbus-daemon,man-db,bash-completion,magic-wormhole bookworm "$root" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"
made=$SECONDS
# Runs a command in the root, in mount and PID namespaces of their own (their /proc and /dev
# mounts end with them).
inside() {
    unshare --mount --pid --fork --kill-child -- sh -c \
        'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && exec chroot "$0" "$@"' "$root" "$@"
}
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The normal user the checks run as (before the listing: useradd writes /etc/subuid- and such).
inside useradd --create-home --shell /bin/bash tester
# What the packages depend on comes first (`apt-get satisfy` with their Depends, less their
# own names), so that the listing below holds what those packages' scripts make (caches,
# /etc/machine-id, the MIME database) and the comparison after the purge sees only ours.
dependencies=$(for deb in "${debs_list[@]}"; do dpkg-deb -f "$deb" Depends | sed 's/, /\n/g'; done |
    grep -v -E "^($(IFS='|'; echo "${packages[*]}")) " | LC_ALL=C sort -u | paste -sd, | sed 's/,/, /g')
inside env DEBIAN_FRONTEND=noninteractive apt-get satisfy -y -q --no-install-recommends "$dependencies" \
    >"$work/dependencies.log" 2>&1 || { cat "$work/dependencies.log" >&2; fail "apt-get satisfy '$dependencies' failed"; }
listing() { (cd "$root" && find usr etc -xdev ! -type d | LC_ALL=C sort); }
listing >"$work/before.txt"

mkdir "$root/tmp/debs"
inside_debs=()
for deb in "${debs_list[@]}"; do
    cp "$deb" "$root/tmp/debs/"
    inside_debs+=("/tmp/debs/$(basename "$deb")")
done
inside env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${inside_debs[@]}" \
    >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "apt-get install ./*.deb failed in the fresh root"; }
installed=$SECONDS
for package in "${packages[@]}"; do
    inside dpkg-query -W -f '${Package} ${Version} ${Status}\n' "$package" | grep -qx "$package $version install ok installed" ||
        fail "$package $version is not installed in the root"
done

# The user's part, from a directory it owns: the documents whose blocks it runs, and the script.
check=$root/home/tester/check
mkdir -p "$check/docs" "$root/run/user/1000"
cp README.md "$check/"
cp docs/gjs.md "$check/docs/"
cp Tests/doc-blocks.py Tests/debian-root-user.sh "$check/"
inside chown -R tester:tester /home/tester/check /run/user/1000
chmod 700 "$root/run/user/1000"
[ "$(inside id -u tester)" = 1000 ] || fail "the user in the root is not uid 1000"
inside setpriv --reuid=tester --regid=tester --init-groups --reset-env \
    env HOME=/home/tester USER=tester LOGNAME=tester XDG_RUNTIME_DIR=/run/user/1000 WORMHOLE_VERSION="$version" \
    bash /home/tester/check/debian-root-user.sh </dev/null || fail "the checks as a user in the root failed (above)"
used=$SECONDS

# Purge: what each package installed goes, and nothing nobody owns is left under /usr or /etc.
for package in "${packages[@]}"; do
    inside dpkg -L "$package" >"$work/$package.files"
done
inside env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${packages[@]}" >"$work/purge.log" 2>&1 ||
    { cat "$work/purge.log" >&2; fail "apt-get purge failed"; }
# Every path a package still installed owns (with /bin, /lib and so on under /usr, where the
# merged /usr keeps them), and the alternatives' links, in one listing.
inside sh -c 'dpkg-query -W -f "\${db:Status-Abbrev}\${binary:Package}\n" | awk "/^ii/ { print \$2 }" | xargs dpkg-query -L | sed -e "s|^/||" \
        -e "s#^\(bin\|sbin\|lib\|lib32\|lib64\|libx32\)/#usr/\1/#"
    update-alternatives --get-selections | sed "s|^\([^ ]*\) .*|etc/alternatives/\1|"' |
    LC_ALL=C sort -u >"$work/owned.txt"
left=()
for package in "${packages[@]}"; do
    while IFS= read -r path; do
        [ -n "$path" ] && [ "$path" != /. ] || continue
        # Directories others own too (/usr/bin) stay; a directory of ours alone must be gone.
        if [ -e "$root$path" ] || [ -L "$root$path" ]; then
            if [ -d "$root$path" ] && grep -qxF "${path#/}" "$work/owned.txt"; then continue; fi
            left+=("$package: $path")
        fi
    done <"$work/$package.files"
done
((${#left[@]} == 0)) || fail "purge left these files of the packages: ${left[*]}"
listing >"$work/after.txt"
# New files under /usr and /etc since the dependencies were installed: each must belong to a
# package, or be the byte code py3compile wrote for one's module (in a __pycache__ its prerm
# removes).
unowned=()
while IFS= read -r path; do
    case "$path" in
    */__pycache__/*.pyc)
        source_file=${path%/__pycache__/*}/$(basename "$path")
        source_file=${source_file%%.cpython-*}.py
        grep -qxF "$source_file" "$work/owned.txt" && continue ;;
    esac
    grep -qxF "$path" "$work/owned.txt" || unowned+=("/$path")
done < <(comm -13 "$work/before.txt" "$work/after.txt")
((${#unowned[@]} == 0)) || fail "after the purge these files are under /usr or /etc and no package owns them: ${unowned[*]}"
echo "debian-root: ${#packages[@]} packages ($version) installed beside magic-wormhole in a fresh Debian 12 root," \
    "checked as a user, purged without a trace ($(cat "$work"/*.files | wc -l) paths);" \
    "build $((built - start)) s, root $((made - built)) s, install $((installed - made)) s, user $((used - installed)) s," \
    "purge $((SECONDS - used)) s"
