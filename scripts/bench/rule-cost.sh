#!/bin/bash
# Transient messages add member='Message' rules beside the Posted ones (2 per identifier listener).
# Run from the repository after `swift build -c release`; BIN= for another build directory.
# dbus-daemon CPU per signal for names nobody observes, with 5,000 identifiers listened to
# elsewhere: none, Posted-only rules (observe), Posted + Message rules (listen).
set -e
W=${BIN:-.build/release}
N=${N:-50000}
work=$(mktemp -d)
dbus-daemon --config-file=dbus/wormhole-session.conf --fork --print-address=3 --print-pid=4 3>$work/address 4>$work/pid
A=$(cat $work/address); D=$(cat $work/pid)
export WORMHOLE_CONTAINER_ROOT=$work/root XDG_RUNTIME_DIR=$work
ids=$(seq -f "id%g" 0 4999)
names=$(for i in $ids; do echo -n "g.load/wormhole/$i "; done)
cpu() { awk '{print $14 + $15}' /proc/$D/stat; }
measure() {
  local b=$(cpu); $W/wormhole-test-peer send-transient-many $work/root g.other x $N $A; local m=$(cpu)
  $W/wormhole-test-peer send-many $work/root g.other y $N $A; local e=$(cpu)
  echo "  daemon CPU per unobserved signal: Message $(echo "scale=2; ($m - $b) * 10000 / $N" | bc) us, Posted $(echo "scale=2; ($e - $m) * 10000 / $N" | bc) us"
}
echo "== no other rules"; measure
mkfifo $work/r1 $work/r2
$W/wormholectl observe --bus-address $A $names >/dev/null 2>$work/r1 & O=$!; read line <$work/r1
echo "== observe 5000 names (10,000 Posted rules)"; measure
kill $O; wait $O 2>/dev/null || true
$W/wormholectl listen --bus-address $A --group g.load $ids >/dev/null 2>$work/r2 & L=$!; read line <$work/r2
echo "== listen 5000 identifiers (10,000 Posted + 10,000 Message rules)"; measure
kill $L; wait $L 2>/dev/null || true
kill $D; rm -rf $work
