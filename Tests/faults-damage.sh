#!/usr/bin/env bash
# The "damage" stage of Tests/faults.sh (issue 20, contract v1.2 sections 5 and 6), runnable on
# its own:
#
#   Tests/faults-damage.sh [READS] [KILLS] [PROCESSES] [INCREMENTS]   # defaults: 10000 1000 8 200
#
# Uses .build/debug (or $WORMHOLE_BIN) for `wormholectl` and `wormhole-test-peer`, a private
# dbus-daemon from dbus/wormhole-session.conf, and scratch directories under $TMPDIR. Checks:
#   1. journal damage: a 4-segment journal of 36 records of ~1 MB, written with `send --journal`;
#      for each of truncate (to half), remove, a FIFO in its place, a flipped byte in the second
#      segment, `listen --journal --from start` prints every record outside the damaged range,
#      one `wormhole: records A..B` line, and `journal check` exits 1 listing exactly that range;
#   2. READS fresh reads (a new GroupDefaults each) of suites holding unknown tags, a BOM'd copy
#      and duplicate keys: 0 suites moved aside, every file unchanged;
#   3. KILLS writer SIGKILLs at random instants with a reader reading in a loop: 0 wiped
#      suites, 0 unknown values lost, 0 failed reads;
#   4. PROCESSES x INCREMENTS `wormholectl defaults increment` from the shell, then the same through
#      the library: exactly PROCESSES x INCREMENTS each;
#   5. a 5 MiB write refused with the suite unchanged.
# Prints one line per check and, last, `N passed, M failed`; exits 1 when anything failed.
set -u

source "$(dirname "$0")/faults-common.sh"
reads=${1:-10000}
kills=${2:-1000}
processes=${3:-8}
increments=${4:-200}
require_tools faults-damage.sh

scratch=$(mktemp -d "${TMPDIR:-/tmp}/wormhole-damage-XXXXXX")
daemon_pid=""
cleanup() {
    [[ -n $daemon_pid ]] && kill -9 "$daemon_pid" 2>/dev/null
    jobs -p | xargs -r kill -9 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT


address="unix:path=$scratch/bus"
exec {daemon_out}< <(exec dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --nofork \
    --print-address --address="$address" 2>/dev/null)
daemon_pid=$!
read -r -u "$daemon_out" _

group=group.faults.damage
root=$scratch/root
mkdir -m 700 "$root"
w() { WORMHOLE_CONTAINER_ROOT=$root "$wormhole" "$@" --group "$group" --bus-address "$address"; }

# ---------------------------------------------------------------------------------------------
# 1. Journal damage in the second of 4 segments (9 records of ~1 MB per 8 MiB segment).
pad=$(head -c 1000000 /dev/zero | tr '\0' p)
for ((n = 1; n <= 36; n++)); do
    printf '{"n":%d,"pad":"%s"}' "$n" "$pad" | w send --journal events || echo "  send $n failed"
done
journals=$root/$group/wormhole
segments=$(find "$journals/events.journal" -name '*.seg' | wc -l)
second=$(find "$journals/events.journal" -name '*.seg' | sort | sed -n 2p)
second=${second##*/}
first_in_second=$((10#${second%.seg}))
frame=$((1000000 + 39 + ${#first_in_second}))  # {"n":N,"pad":"…"} (15 bytes + N + pad) and 24 of framing
for kind in truncate remove foreign flip; do
    id=damaged-$kind
    cp -a "$journals/events.journal" "$journals/$id.journal"
    segment=$journals/$id.journal/$second
    case $kind in
    truncate) truncate -s $(( $(stat -c %s "$segment") / 2 )) "$segment"
        from=$((first_in_second + ($(stat -c %s "$segment") - 16) / frame)); to=$((first_in_second + 8)); reason=truncated ;;
    remove) rm "$segment"; from=$first_in_second; to=$((first_in_second + 8)); reason=missing ;;
    foreign) rm "$segment"; mkfifo -m 600 "$segment"; from=$first_in_second; to=$((first_in_second + 8)); reason=foreign ;;
    flip) printf 'X' | dd of="$segment" bs=1 seek=$((16 + frame + 500)) conv=notrunc status=none
        from=$((first_in_second + 1)); to=$from; reason=checksum ;;
    esac
    expected=$((36 - (to - from + 1)))
    w listen --journal "$id" --from start --count "$expected" --timeout 60 >"$scratch/$id.out" 2>"$scratch/$id.err"
    status=$?
    delivered=$(grep -c '"sequence"' "$scratch/$id.out")
    wanted=$(for ((n = 1; n <= 36; n++)); do ((n < from || n > to)) && echo "$n"; done | tr '\n' ' ')
    got=$(grep -o '"sequence":[0-9]*' "$scratch/$id.out" | cut -d: -f2 | tr '\n' ' ')
    lines=$(grep -c '^wormhole: records ' "$scratch/$id.err")
    right_line=$(grep -c "^wormhole: records $from\\.\\.$to .*$reason.*$second" "$scratch/$id.err")
    w journal check "$id" >"$scratch/$id.check" 2>/dev/null
    check_status=$?
    ranges=$(grep -o '"from":[0-9]*,"to":[0-9]*,"file":"[^"]*","reason":"[a-z]*"' "$scratch/$id.check" | tr '\n' ' ')
    ok=0
    [[ $status == 0 && $got == "$wanted" && $lines == 1 && $right_line == 1 && $check_status == 1 ]] || ok=1
    [[ $ranges == "\"from\":$from,\"to\":$to,\"file\":\"$second\",\"reason\":\"$reason\" " ]] || ok=1
    check "journal $kind" $ok "$segments segments; listen exit $status, $delivered of 36 records delivered (all $expected outside $from..$to: $([[ $got == "$wanted" ]] && echo yes || echo no)), $lines range line(s); journal check exit $check_status: $ranges"
done
w journal check events >/dev/null 2>&1
check "journal whole" $? "journal check of the undamaged journal exits 0"

# ---------------------------------------------------------------------------------------------
# 2. Readers never write: fresh reads of suites holding what this version does not read.
prefs=$root/$group/Preferences
w defaults write seed 1 >/dev/null
printf '{"keep":"yes","x":{"$future":1},"d":{"$date":"soon"},"big":123456789012345678901234}\n' >"$prefs/unknown.json"
printf '\xef\xbb\xbf{"keep":"yes"}\n' >"$prefs/bom.json"
printf '{"keep":"no","keep":"yes","n":1,"n":2}\n' >"$prefs/duplicates.json"
chmod 600 "$prefs"/*.json
sums=$(cd "$prefs" && sha256sum unknown.json bom.json duplicates.json)
started=$(date +%s.%N)
third=$(( (reads + 2) / 3 ))
unknown_reads=$("$peer" defaults-read-loop "$root" "$group" unknown "$third" 2>/dev/null)
bom_reads=$("$peer" defaults-read-loop "$root" "$group" bom "$third" 2>/dev/null)
duplicate_reads=$("$peer" defaults-read-loop "$root" "$group" duplicates "$third" 2>/dev/null)
elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cli_unknown=$(w defaults read --suite unknown x 2>&1)
cli_bom=$(w defaults read --suite bom keep 2>&1)
cli_duplicate=$(w defaults read --suite duplicates n 2>&1)
aside=$(find "$prefs" -name '*.corrupt-*' | wc -l)
unchanged=$([[ $(cd "$prefs" && sha256sum unknown.json bom.json duplicates.json) == "$sums" ]] && echo 0 || echo 1)
ok=0
[[ $aside == 0 && $unchanged == 0 && $unknown_reads == *" failed 0" && $duplicate_reads == *" failed 0" ]] || ok=1
[[ $bom_reads == "reads $third failed $third" && $cli_unknown == '{"$future":1}' && $cli_duplicate == 2 ]] || ok=1
[[ $cli_bom == *"byte-order mark"*"at byte 0"* ]] || ok=1
check "readers never write" $ok "$((third * 3)) fresh reads in ${elapsed} s (unknown tags: $unknown_reads; BOM: $bom_reads, each an error naming byte 0; duplicate keys: $duplicate_reads); $aside suites moved aside; files unchanged: $((1 - unchanged)); read x prints $cli_unknown, n prints $cli_duplicate"

# ---------------------------------------------------------------------------------------------
# 3. Writers SIGKILLed while a reader reads: nothing wiped, unknown values kept.
killsuite=$group  # defaults-write-loop writes the group's default suite
printf '{"x":{"$future":{"a":[1,2]}},"keep":"yes"}\n' >"$prefs/$killsuite.json"
chmod 600 "$prefs/$killsuite.json"
"$peer" defaults-read-loop "$root" "$group" "$killsuite" 0 >"$scratch/reader.out" 2>"$scratch/reader.err" &
reader=$!
wiped=0
lost=0
started=$(date +%s.%N)
for ((kill = 0; kill < kills; kill++)); do
    exec {out}< <(exec "$peer" defaults-write-loop "$root" "$group" counter)
    writer=$!
    read -r -u "$out" _  # `ready`: one write done
    kill -9 "$writer" 2>/dev/null
    wait "$writer" 2>/dev/null
    exec {out}<&-
    if ((kill % 50 == 0 || kill == kills - 1)); then
        stored=$(w defaults read x 2>/dev/null)
        keep=$(w defaults read keep 2>/dev/null)
        [[ $stored == '{"$future":{"a":[1,2]}}' ]] || lost=$((lost + 1))
        [[ $keep == '"yes"' ]] || wiped=$((wiped + 1))
    fi
done
elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
reader_line=$(tail -n 1 "$scratch/reader.out")
grep -q '"x":{"$future":{"a":\[1,2\]}}' "$prefs/$killsuite.json" || lost=$((lost + 1))
aside=$(find "$prefs" -name '*.corrupt-*' | wc -l)
ok=0
[[ $wiped == 0 && $lost == 0 && $aside == 0 && $reader_line == *" failed 0" ]] || ok=1
check "writer kills" $ok "$kills SIGKILLs in ${elapsed} s; reader alongside: $reader_line; $wiped wiped, $lost unknown values lost, $aside moved aside"

# ---------------------------------------------------------------------------------------------
# 4. Atomic increments from the shell and from the library.
started=$(date +%s.%N)
pids=()
for ((p = 0; p < processes; p++)); do
    (for ((i = 0; i < increments; i++)); do w defaults increment --suite counters shell >/dev/null || echo fail; done) \
        >"$scratch/increment-$p.log" 2>&1 &
    pids+=($!)
done
wait "${pids[@]}"
elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
shell_total=$(w defaults read --suite counters shell 2>&1)
shell_failures=$(cat "$scratch"/increment-*.log | grep -c fail)
started=$(date +%s.%N)
pids=()
for ((p = 0; p < processes; p++)); do
    "$peer" defaults-increment "$root" "$group" library "$increments" - &
    pids+=($!)
done
wait "${pids[@]}"
library_elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
library_total=$(w defaults read library 2>&1)
expected=$((processes * increments))
ok=0
[[ $shell_total == "$expected" && $library_total == "$expected" && $shell_failures == 0 ]] || ok=1
check "increments" $ok "$processes processes x $increments: wormholectl defaults increment $shell_total of $expected in ${elapsed} s ($shell_failures failed), library increment $library_total in ${library_elapsed} s"

# ---------------------------------------------------------------------------------------------
# 5. The suite limit: a 5 MiB value refused, the suite unchanged.
before=$(sha256sum <"$prefs/$group.json")
head -c $((5 << 20)) /dev/zero | tr '\0' x | sed 's/^/"/; s/$/"/' >"$scratch/huge.json"
started=$(date +%s.%N)
error=$(w defaults write huge <"$scratch/huge.json" 2>&1 >/dev/null)
status=$?
elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
after=$(sha256sum <"$prefs/$group.json")
ok=0
[[ $status != 0 && $before == "$after" && $error == *"over its limit of 4194304 bytes"* ]] || ok=1
check "suite limit" $ok "5 MiB write: exit $status in ${elapsed} s, suite unchanged: $([[ $before == "$after" ]] && echo yes || echo no) ('${error:0:140}')"

report
