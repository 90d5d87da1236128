#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libFuzzer targets for the code that reads untrusted input (not part of `swift test`).
#
#   Tests/fuzz.sh [SECONDS] [TARGET...]          # default: 60 s each, every target
#   Tests/fuzz.sh --runs N [TARGET...]           # N executions each (libFuzzer -runs=N)
#
# Targets (sources in Tests/Fuzz/, built optimised, `swiftc -O -sanitize=fuzzer,address`, together
# with the library files they test, in Swift 6 mode with the package's upcoming features):
#   json        JSONSyntax.check, the validator every sent and received document goes through
#   names       group identifiers, directory names, message identifiers (contract §2)
#   matchrule   MatchRule escaping: a rule reads back, by the daemon's quoting rules, as its value
#   signal      signal argument decoding: D-Bus wire messages (dbus_message_demarshal), then
#               MessageCoding.readArguments
#   journal     journal segments (header, frames through JournalScan on a real file, against a
#               reference walk), segment names and cursor files; built with the whole Wormhole
#               module over a WormholeDBus module built here
#   journaldamage  a journal written by the appender, then cut, removed, replaced by a FIFO,
#               directory or symlink, flipped or overwritten: a reader delivers every intact record
#               and reports every other number in a range (nothing skipped silently); like journal
#   suite       the shared-defaults suite parser (unknown tags, BOMs, duplicate keys, deep
#               nesting, numbers past 64 bits): a suite that parses writes back to itself, unknown
#               values byte for byte; one that does not names a byte offset inside it; like journal
# Each starts from its committed corpus (Tests/Fuzz/corpus/TARGET) and works in .build/fuzz/.
# Prints one line per target with executions, time and crashes, then `N passed, M failed`; a
# crash leaves its input in .build/fuzz/TARGET/crash-* (reproduce: .build/fuzz/TARGET/fuzz FILE)
# and fails the run. WORMHOLE_FUZZ_MERGE=1 merges what a run found back into the committed corpus
# (only inputs that reach new code: -use_counters=0 keeps it to a few hundred files). Run it
# under `nice` on a shared machine.
set -u

repository=$(cd "$(dirname "$0")/.." && pwd)
cd "$repository"
limit=(-max_total_time=60)
describe="60 s"
if [[ ${1:-} == --runs ]]; then
    [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --runs needs a number of executions" >&2; exit 64; }
    limit=(-runs="$2")
    describe="-runs=$2"
    shift 2
elif [[ ${1:-} =~ ^[0-9]+$ ]]; then
    limit=(-max_total_time="$1")
    describe="$1 s"
    shift
fi
targets=("$@")
all=(json names matchrule signal journal journaldamage suite)
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")
work=$repository/.build/fuzz
mkdir -p "$work"
debug=.build/debug
[[ -d $debug/Logging.build && -d $debug/SystemPackage.build && -d $debug/Atomics.build ]] || {
    echo "fuzz.sh: run swift build first (the targets link swift-log, swift-system and swift-atomics from it)" >&2
    exit 2
}

sources() {
    case $1 in
    json) echo Sources/Wormhole/Messaging/JSONSyntax.swift ;;
    names)
        echo Sources/Wormhole/Storage/NameRules.swift Sources/Wormhole/Storage/MessageIdentifier.swift \
            Sources/Wormhole/Storage/GroupIdentifier.swift Sources/Wormhole/Storage/WormholeDirectoryName.swift \
            Sources/Wormhole/WormholeError.swift
        ;;
    matchrule | signal) ls Sources/WormholeDBus/*.swift ;;
    journal | journaldamage | suite) find Sources/Wormhole -name '*.swift' | sort ;;
    esac
}
harness() {
    case $1 in
    json) echo Tests/Fuzz/JSONSyntaxFuzz.swift ;;
    names) echo Tests/Fuzz/NameFuzz.swift ;;
    matchrule) echo Tests/Fuzz/MatchRuleFuzz.swift ;;
    signal) echo Tests/Fuzz/SignalDecodingFuzz.swift ;;
    journal) echo Tests/Fuzz/JournalFuzz.swift ;;
    journaldamage) echo Tests/Fuzz/JournalDamageFuzz.swift ;;
    suite) echo Tests/Fuzz/SuiteFuzz.swift ;;
    esac
}
# The longest input: past every limit the code has (names 255 bytes, rules 1,024 bytes), not
# much further (a longer input costs more and reaches nothing new).
max_len() {
    case $1 in
    names) echo 320 ;;
    matchrule) echo 1200 ;;
    journaldamage) echo 64 ;;
    *) echo 4096 ;;
    esac
}

checkouts=.build/checkouts
flags=(-O -sanitize=fuzzer,address -parse-as-library -swift-version 6
    -enable-upcoming-feature InternalImportsByDefault -enable-upcoming-feature MemberImportVisibility
    -enable-upcoming-feature ExistentialAny -package-name wormhole
    -I Sources/CWormholeDBus $(pkg-config --cflags dbus-1 | sed 's/-I/-Xcc -I/g'))
# Sets `extra` to the target's other inputs: modules to import, objects and libraries to link
# (an array: some object files have spaces in their names).
libraries() {
    extra=()
    case $1 in
    matchrule | signal) extra=(-I $debug/Modules $debug/Logging.build/*.swift.o -ldbus-1) ;;
    journal | journaldamage | suite)
        local shims
        mapfile -t shims < <(find $debug/_AtomicsShims.build -name '*.o')
        extra=(-I "$work/modules" -I $debug/Modules
            -Xcc -fmodule-map-file=$checkouts/swift-system/Sources/CSystem/include/module.modulemap
            -Xcc -fmodule-map-file=$checkouts/swift-atomics/Sources/_AtomicsShims/include/module.modulemap
            "$work/modules/WormholeDBus.o" $debug/Logging.build/*.swift.o $debug/SystemPackage.build/*.swift.o
            $debug/CSystem.build/*.o $debug/Atomics.build/*.swift.o "${shims[@]}" -ldbus-1)
        ;;
    esac
}

# The journal target imports WormholeDBus as a module, built here (optimised, instrumented).
build_wormhole_dbus() {
    rm -rf "$work/modules"
    mkdir -p "$work/modules"
    swiftc "${flags[@]}" -module-name WormholeDBus -I $debug/Modules -wmo -c -emit-module \
        -emit-module-path "$work/modules/WormholeDBus.swiftmodule" Sources/WormholeDBus/*.swift \
        -o "$work/modules/WormholeDBus.o" 2>"$work/modules/build.log"
}

passed=0
failed=0
for target in "${targets[@]}"; do
    if [[ -z $(harness "$target") ]]; then
        echo "fuzz.sh: unknown target '$target' (${all[*]})" >&2
        exit 64
    fi
    directory=$work/$target
    rm -rf "$directory"
    mkdir -p "$directory/corpus"
    if [[ $target == journal || $target == journaldamage || $target == suite ]] && ! build_wormhole_dbus; then
        echo "FAIL $target: WormholeDBus does not build (see $work/modules/build.log)"
        failed=$((failed + 1))
        continue
    fi
    libraries "$target"
    # shellcheck disable=SC2046
    if ! swiftc "${flags[@]}" -module-name WormholeFuzz "${extra[@]}" \
        $(sources "$target") $(harness "$target") -o "$directory/fuzz" 2>"$directory/build.log"; then
        echo "FAIL $target: does not build (see $directory/build.log)"
        failed=$((failed + 1))
        continue
    fi
    seeds=Tests/Fuzz/corpus/$target
    [[ -d $seeds ]] && cp "$seeds"/* "$directory/corpus/" 2>/dev/null
    started=$(date +%s.%N)
    # Allocation stacks are not recorded during runs (malloc_context_size=0, faster): to see
    # them for a crash, run .build/fuzz/TARGET/fuzz on its crash file with ASAN_OPTIONS unset.
    (cd "$directory" && SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0} ./fuzz "${limit[@]}" -max_len="$(max_len "$target")" \
        -print_final_stats=1 -artifact_prefix="$directory/" corpus >run.log 2>&1)
    status=$?
    elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$directory/run.log" | grep -o '[0-9]*$')
    crashes=$(find "$directory" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    corpus=$(find "$directory/corpus" -type f | wc -l)
    rate=$(awk -v n="${runs:-0}" -v t="$elapsed" 'BEGIN { printf "%d", (t > 0 ? n / t : 0) }')
    if [[ $status == 0 && $crashes == 0 ]]; then
        passed=$((passed + 1))
        printf 'PASS %s: %s executions in %.0f s (%s/s, %s), 0 crashes, corpus %s inputs\n' \
            "$target" "${runs:-?}" "$elapsed" "$rate" "$describe" "$corpus"
    else
        failed=$((failed + 1))
        echo "FAIL $target: ${runs:-?} executions, $crashes crashing inputs (exit $status; see $directory/run.log)"
    fi
    if [[ ${WORMHOLE_FUZZ_MERGE:-0} == 1 && $status == 0 ]]; then
        mkdir -p "$seeds"
        (cd "$directory" && ./fuzz -merge=1 -use_counters=0 -max_len="$(max_len "$target")" "$repository/$seeds" corpus \
            >merge.log 2>&1)
    fi
done
echo "$passed passed, $failed failed"
((failed == 0))
