#!/bin/sh
# Consecutive duplicate deliveries at one `wormholectl listen` while WRITERS processes each store
# PER_WRITER distinct messages in one mailbox as fast as they can (issue 8).
#
#   scripts/bench/duplicate-rate.sh [WRITERS] [PER_WRITER] [LISTEN_FLAGS...]
#   scripts/bench/duplicate-rate.sh 8 1000                 # the default: a file is printed again only if it changed
#   scripts/bench/duplicate-rate.sh 8 1000 --every-post    # a line per wake (what listen did before)
#
# Needs `swift build --build-tests` (wormhole and wormhole-test-peer in .build/debug; BIN= to
# change) and dbus-daemon. Prints: lines, consecutive duplicates, duplicate rate.
set -eu
writers=${1:-8}
per=${2:-1000}
shift 2 2>/dev/null || shift $#
bin=${BIN:-.build/debug}
work=$(mktemp -d)
trap 'kill $listener 2>/dev/null || true; kill $(cat "$work/pid") 2>/dev/null || true; rm -rf "$work"' EXIT
dbus-daemon --config-file=dbus/wormhole-session.conf --fork --print-address=3 --print-pid=4 3>"$work/address" 4>"$work/pid"
address=$(cat "$work/address")
export WORMHOLE_CONTAINER_ROOT="$work/root" XDG_RUNTIME_DIR="$work"
mkfifo "$work/ready"
"$bin/wormholectl" listen --bus-address "$address" --group group.bench.dup --all "$@" >"$work/lines" 2>"$work/ready" &
listener=$!
read -r line <"$work/ready"
[ "$line" = ready ] || { echo "listen wrote '$line' before ready" >&2; exit 1; }
i=0
pids=""
while [ $i -lt "$writers" ]; do
    "$bin/wormhole-test-peer" send-many "$work/root" group.bench.dup dup "$per" "$address" "w$i" &
    pids="$pids $!"
    i=$((i + 1))
done
for pid in $pids; do wait "$pid"; done
"$bin/wormholectl" send --bus-address "$address" --group group.bench.dup sentinel '{"end":true}'
# The sentinel is the last line: wait for it (the listener writes each line with one write(2)).
until grep -q '"sentinel"' "$work/lines"; do sleep 0.05; done
grep '"identifier":"dup"' "$work/lines" | awk '
    $0 == previous { duplicates++ }
    { previous = $0; lines++ }
    END { printf "lines %d, consecutive duplicates %d, rate %.1f %%\n", lines, duplicates, lines ? 100 * duplicates / lines : 0 }'
