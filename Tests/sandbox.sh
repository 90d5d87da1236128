#!/usr/bin/env bash
# Wormhole behind Flatpak's sandbox (contract v1.2 §8), without Flatpak: every sandboxed process
# runs in a bwrap of its own (its own PID namespace, so PIDs collide across sandboxes as they do
# in Flatpak; no user namespace, since xdg-dbus-proxy relays the client's uid and the daemon
# checks it), behind an xdg-dbus-proxy of its own with Flatpak's default filter for an app
# (own <APPID> and <APPID>.*, talk to the portals), with a small /.flatpak-info mounted in,
# so app ID detection is tested the way Flatpak does it. The bus is a private dbus-daemon from
# dbus/wormhole-session.conf. Tests run as the CI user (root here); Flatpak runs apps as the user.
#
# Usage: Tests/sandbox.sh [SENDERS]   (SENDERS: short-lived sandboxed senders, 50 by default;
# 1000 by hand; SANDBOX_VERBOSE=1 also prints doctor's reports). Prints one line per check and "N passed, N failed" last; exit 1 on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
senders=${1:-50}
for tool in bwrap xdg-dbus-proxy dbus-daemon; do
    command -v "$tool" >/dev/null || { echo "sandbox.sh: $tool is missing (.ci/install-deps installs it)" >&2; exit 1; }
done
swift build --product wormholectl >/dev/null || exit 1
bin=$(swift build --show-bin-path)
bin=${SANDBOX_CHECK_BIN:-$bin}  # another build's binaries, to see the checks fail without §8
wormhole=$bin/wormholectl

T=$(mktemp -d /tmp/wormhole-sandbox.XXXXXX)
passed=0
failed=0
cleanup() {
    exec {daemon}<&- 2>/dev/null
    jobs -p | xargs -r kill 2>/dev/null
    [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; shift; for line in "$@"; do echo "     $line"; done; }

# The bus: dbus-daemon prints its address once it listens.
exec {daemon}< <(exec dbus-daemon --config-file="$PWD/dbus/wormhole-session.conf" --address="unix:path=$T/bus" \
    --nofork --print-address=1 2>/dev/null)
daemon_pid=$!
read -r -t 20 -u "$daemon" address || { echo "sandbox.sh: dbus-daemon did not start" >&2; exit 1; }
export DBUS_SESSION_BUS_ADDRESS=$address

# The user's home on the host: every app's data, and the host's default container root.
home=$T/home
group=group.org.example.lines
mkdir -p "$home/.local/share/group-containers/$group"
export HOME=$home XDG_DATA_HOME= WORMHOLE_CONTAINER_ROOT=

proxies=0
# proxy APPID [extra filter arguments]: starts an xdg-dbus-proxy with Flatpak's default filter
# for APPID and sets $socket; it has accepted its socket when this returns (--fd says so).
proxy() {
    local app=$1
    shift
    proxies=$((proxies + 1))
    socket=$T/proxy-$BASHPID-$proxies
    exec {fd}< <(exec xdg-dbus-proxy "$address" "$socket" --fd=1 --filter \
        --own="$app" --own="$app.*" --talk='org.freedesktop.portal.*' --call='org.freedesktop.portal.*=*' \
        --broadcast='org.freedesktop.portal.*=@/org/freedesktop/portal/*' "$@")
    read -r -N 1 -t 20 -u "$fd" _ || { echo "sandbox.sh: xdg-dbus-proxy did not start" >&2; exit 1; }
}

# sandboxed APPID 'PROXY ARGS' 'FILESYSTEMS' COMMAND...: runs COMMAND in a bwrap of its own for
# APPID (its /.flatpak-info names $as_app when set), behind a proxy of its own (extra filter arguments PROXY ARGS, e.g. --talk=...), with
# Flatpak's view: /usr, /etc and the build read-only, a private /tmp and /run, the bus at
# /run/flatpak/bus, the app's own data directory, /.flatpak-info, and FILESYSTEMS ("group":
# the host's container of $group, as --filesystem=xdg-data/group-containers/$group:create).
sandboxed() {
    local app=$1 extra=$2 filesystems=$3 fd socket
    shift 3
    # shellcheck disable=SC2086
    proxy "$app" $extra
    local info=${as_app:-$app}
    local data=$home/.var/app/$app/data
    mkdir -p "$data" "$home/.var/app/$app/cache"
    local info_file=${info_file:-$T/$info.info}
    [ -f "$T/$info.info" ] || printf '[Application]\nname=%s\nruntime=runtime/org.freedesktop.Platform/x86_64/23.08\n\n[Instance]\ninstance-id=1\n' "$info" >"$T/$info.info"
    local args=(--unshare-pid --die-with-parent --ro-bind /usr /usr --ro-bind /etc /etc --proc /proc --dev /dev
        --tmpfs /tmp --tmpfs /run --dir /run/user/0 --bind "$socket" /run/flatpak/bus --ro-bind "$bin" "$bin"
        --ro-bind "$info_file" /.flatpak-info --tmpfs "$home" --bind "$home/.var/app/$app" "$home/.var/app/$app")
    for top in /bin /lib /lib64 /sbin; do
        if [ -L "$top" ]; then args+=(--symlink "$(readlink "$top")" "$top"); elif [ -d "$top" ]; then args+=(--ro-bind "$top" "$top"); fi
    done
    [ -d /opt ] && args+=(--ro-bind /opt /opt)   # a toolchain's Swift runtime, when it lives there
    if [ "$filesystems" = group ]; then
        args+=(--bind "$home/.local/share/group-containers/$group" "$home/.local/share/group-containers/$group")
    fi
    bwrap "${args[@]}" --clearenv --setenv PATH /usr/bin:/bin --setenv HOME "$home" \
        --setenv XDG_DATA_HOME "$data" --setenv XDG_CACHE_HOME "$home/.var/app/$app/cache" \
        --setenv XDG_RUNTIME_DIR /run/user/0 --setenv DBUS_SESSION_BUS_ADDRESS unix:path=/run/flatpak/bus \
        --setenv WORMHOLE_LOCK_TIMEOUT 10 -- "$@"
    local code=$?
    exec {fd}<&-  # ends the proxy
    return $code
}

# started NAME COMMAND...: runs COMMAND in the background, its standard output in $T/NAME.out,
# and returns once it wrote `ready` on standard error (the rest of which is in $T/NAME.err).
started() {
    local name=$1 fd line
    shift
    mkfifo "$T/$name.fifo"
    "$@" >"$T/$name.out" 2>"$T/$name.fifo" &
    eval "pid_$name=$!"
    exec {fd}<"$T/$name.fifo"
    while read -r -t 30 -u "$fd" line; do
        [ "$line" = ready ] && break
        echo "$line" >>"$T/$name.err"
    done
    { cat <&"$fd" >>"$T/$name.err"; } &
    eval "copier_$name=$!"
    exec {fd}<&-
}

# finished NAME: waits for NAME's exit; its status is in $status.
finished() {
    local pid_var=pid_$1 copier_var=copier_$1
    wait "${!pid_var}"
    status=$?
    wait "${!copier_var}"
}

A=org.example.Lines
B=org.example.Grabber

# 1. Two processes of one app, each in its own sandbox, behind its own proxy: post → observe.
# The app ID comes from /.flatpak-info alone (no FLATPAK_ID in the sandbox's environment).
started observe1 sandboxed $A '' '' "$wormhole" observe lines.refresh --count 1 --timeout 20
sandboxed $A '' '' "$wormhole" post lines.refresh --state 7
finished observe1
if [ $status -eq 0 ] && grep -q '"state":7' "$T/observe1.out"; then pass "post → observe between two sandboxes of one app"
else fail "post → observe between two sandboxes of one app" "exit $status" "$(cat "$T/observe1.out" "$T/observe1.err")"; fi

# 2. An anonymous post from the host does not pass the proxy (the reason for §8); the same
# name posted next by a host helper with the app's ID does. The first delivery must be the second.
started observe2 sandboxed $A '' '' "$wormhole" observe lines.anonymous --count 1 --timeout 20
"$wormhole" post lines.anonymous --state 1
WORMHOLE_APP_ID=$A "$wormhole" post lines.anonymous --state 2
finished observe2
if [ $status -eq 0 ] && grep -q '"state":2' "$T/observe2.out"; then pass "anonymous host post filtered by the proxy; host helper with WORMHOLE_APP_ID heard"
else fail "anonymous host post filtered by the proxy; host helper with WORMHOLE_APP_ID heard" "exit $status" "$(cat "$T/observe2.out" "$T/observe2.err")"; fi

# 3. Mailbox send → listen between two sandboxes sharing the host's container of the group.
started listen3 sandboxed $A '' group "$wormhole" listen --group $group clip --count 1 --timeout 20
sandboxed $A '' group "$wormhole" send --group $group clip '{"line":"hello"}'
finished listen3
if [ $status -eq 0 ] && grep -q '"message":{"line":"hello"}' "$T/listen3.out" \
    && [ -f "$home/.local/share/group-containers/$group/wormhole/clip.json" ]; then pass "send → listen (mailbox) in the host's default root"
else fail "send → listen (mailbox) in the host's default root" "exit $status" "$(cat "$T/listen3.out" "$T/listen3.err")"; fi

# 4. Host helper (unsandboxed, WORMHOLE_APP_ID) → sandboxed listener, through the shared container.
started listen4 sandboxed $A '' group "$wormhole" listen --group $group grab --count 1 --timeout 20
WORMHOLE_APP_ID=$A "$wormhole" send --group $group grab '{"from":"helper"}'
finished listen4
if [ $status -eq 0 ] && grep -q '"from":"helper"' "$T/listen4.out"; then pass "host helper (WORMHOLE_APP_ID) → sandboxed listener"
else fail "host helper (WORMHOLE_APP_ID) → sandboxed listener" "exit $status" "$(cat "$T/listen4.out" "$T/listen4.err")"; fi

# 5. Journal: three records appended from one sandbox, read in order by another.
started journal5 sandboxed $A '' group "$wormhole" listen --journal --group $group log --count 3 --timeout 20
sandboxed $A '' group sh -c "for n in 1 2 3; do '$wormhole' send --journal --group $group log \"{\\\"n\\\":\$n}\" || exit 1; done"
finished journal5
if [ $status -eq 0 ] && [ "$(grep -o '"sequence":[0-9]*' "$T/journal5.out" | tr '\n' ' ')" = '"sequence":1 "sequence":2 "sequence":3 ' ]; then pass "journal append → listen --journal, in order"
else fail "journal append → listen --journal, in order" "exit $status" "$(cat "$T/journal5.out" "$T/journal5.err")"; fi

# 6. Shared defaults, per key: the observer of `theme` hears its write, not the write of `size` before it.
started defaults6 sandboxed $A '' group "$wormhole" defaults observe --group $group theme --count 1 --timeout 20
sandboxed $A '' group sh -c "'$wormhole' defaults write --group $group size 12 && '$wormhole' defaults write --group $group theme '\"dark\"'"
finished defaults6
if [ $status -eq 0 ] && [ "$(cat "$T/defaults6.out")" = '{"key":"theme","value":"dark"}' ]; then pass "defaults write → defaults observe, per key"
else fail "defaults write → defaults observe, per key" "exit $status" "$(cat "$T/defaults6.out" "$T/defaults6.err")"; fi

# 7. A transient message between sandboxes (nothing stored).
started transient7 sandboxed $A '' group "$wormhole" listen --group $group live --count 1 --timeout 20
sandboxed $A '' group "$wormhole" send --transient --group $group live '{"x":1}'
finished transient7
if [ $status -eq 0 ] && grep -q '"reason":"transient"' "$T/transient7.out" \
    && [ ! -e "$home/.local/share/group-containers/$group/wormhole/live.json" ]; then pass "transient message between sandboxes"
else fail "transient message between sandboxes" "exit $status" "$(cat "$T/transient7.out" "$T/transient7.err")"; fi

# 8. A second app is not heard without --talk-name: its post first, then the app's own; the
# first delivery must be the app's own. With --talk=<B>.* it is heard.
started denied8 sandboxed $A '' '' "$wormhole" observe lines.other --count 1 --timeout 20
sandboxed $B '' '' "$wormhole" post lines.other --state 1
sandboxed $A '' '' "$wormhole" post lines.other --state 2
finished denied8
if [ $status -eq 0 ] && grep -q '"state":2' "$T/denied8.out"; then pass "second app denied without --talk-name"
else fail "second app denied without --talk-name" "exit $status" "$(cat "$T/denied8.out" "$T/denied8.err")"; fi
started allowed8 sandboxed $A "--talk=$B.*" '' "$wormhole" observe lines.other --count 1 --timeout 20
sandboxed $B '' '' "$wormhole" post lines.other --state 3
finished allowed8
if [ $status -eq 0 ] && grep -q '"state":3' "$T/allowed8.out"; then pass "second app heard with --talk-name=$B.*"
else fail "second app heard with --talk-name=$B.*" "exit $status" "$(cat "$T/allowed8.out" "$T/allowed8.err")"; fi

# 9. A name the proxy refuses: the message is stored, the send says it was not notified (exit 0);
# a post, which stores nothing, exits non-zero. (The sandbox says it is app A; its proxy lets it
# own only B's names, so RequestName of A.Wormhole.c… is denied.)
out=$(as_app=$A sandboxed $B '' group "$wormhole" send --group $group refused '{"r":1}' 2>&1)
code=$?
as_app=$A sandboxed $B '' '' "$wormhole" post lines.refused >/dev/null 2>&1
post_code=$?
if [ $code -eq 0 ] && [ $post_code -ne 0 ] && grep -q "$A.Wormhole.c" <<<"$out" \
    && [ -f "$home/.local/share/group-containers/$group/wormhole/refused.json" ]; then pass "refused name: stored, reported as not sent; post exits $post_code"
else fail "refused name: stored, reported as not sent" "send exit $code, post exit $post_code" "$out"; fi

# 10. doctor inside the sandbox: the app ID, the owned name, a round trip through the proxy,
# and the exact permission for a group that is not visible and a peer that is not talkable.
report=$(sandboxed $A '' '' "$wormhole" doctor --group $group --peer $B 2>&1)
code=$?
[ -n "${SANDBOX_VERBOSE:-}" ] && echo "$report"
want=("✓ sandbox: Flatpak, app ID $A (from /.flatpak-info); the session bus is behind xdg-dbus-proxy"
    "✓ sender name: owns $A.Wormhole.c" "✓ round trip:" "--filesystem=xdg-data/group-containers/$group:create"
    "--talk-name=$B.*")
missing=()
for line in "${want[@]}"; do grep -qF -- "$line" <<<"$report" || missing+=("$line"); done
if [ $code -eq 1 ] && [ ${#missing[@]} -eq 0 ]; then pass "doctor in the sandbox names the missing --filesystem and --talk-name"
else fail "doctor in the sandbox names the missing --filesystem and --talk-name" "exit $code; missing: ${missing[*]}" "$report"; fi
printf '[Application]\nname=%s\n\n[Session Bus Policy]\n%s.*=talk\n' $A $B >"$T/talks.info"
report=$(info_file=$T/talks.info sandboxed $A "--talk=$B.*" group "$wormhole" doctor --group $group --peer $B 2>&1)
code=$?
[ -n "${SANDBOX_VERBOSE:-}" ] && echo "$report"
if [ $code -eq 0 ] && grep -qF "✓ peer $B: talkable" <<<"$report" && grep -qF "✓ group files:" <<<"$report"; then pass "doctor in the sandbox passes with both permissions"
else fail "doctor in the sandbox passes with both permissions" "exit $code" "$report"; fi

# 11. Without a filesystem permission the container root is the app's own data directory.
sandboxed $A '' '' "$wormhole" send --group $group private '{"p":1}' >/dev/null 2>&1
if [ -f "$home/.var/app/$A/data/group-containers/$group/wormhole/private.json" ] \
    && [ ! -e "$home/.local/share/group-containers/$group/wormhole/private.json" ]; then pass "container root without a filesystem permission: \$XDG_DATA_HOME/group-containers"
else fail "container root without a filesystem permission: \$XDG_DATA_HOME/group-containers"; fi

# 12. Short-lived senders: each posts once and exits at once (no flush); the exit drain's
# answered call must get every post through its proxy before the proxy drops the client.
started burst12 sandboxed $A '' '' "$wormhole" observe lines.burst --count "$senders" --timeout $((60 + senders))
pids=()
for ((n = 1; n <= senders; n++)); do
    { sandboxed $A '' '' "$wormhole" post lines.burst --state "$n" || echo "sender $n exited $?" >>"$T/burst-senders.err"; } &
    pids+=($!)
    if ((${#pids[@]} == 4)); then wait "${pids[@]}"; pids=(); fi
done
((${#pids[@]})) && wait "${pids[@]}"
finished burst12
got=$(grep -o '"state":[0-9]*' "$T/burst12.out" | sort -u | wc -l)
if [ $status -eq 0 ] && [ "$got" -eq "$senders" ]; then pass "$senders of $senders short-lived sandboxed senders heard"
else fail "$got of $senders short-lived sandboxed senders heard" "exit $status" "$(tail -3 "$T/burst12.err")" \
    "$(head -5 "$T/burst-senders.err" 2>/dev/null)"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
