#!/usr/bin/env bash
# libFuzzer targets for the code that reads untrusted input (not part of `swift test`).
#
#   Tests/fuzz.sh [SECONDS] [TARGET...]    # default: 60 s each, every target
#
# Targets (sources in Tests/Fuzz/, built with `swiftc -sanitize=fuzzer,address` together with
# the library files they test):
#   json        JSONSyntax.check, the validator every sent and received document goes through
#   names       group identifiers, directory names, message identifiers (contract §2)
#   matchrule   MatchRule escaping: a rule reads back, by the daemon's quoting rules, as its value
#   signal      signal argument decoding: D-Bus wire messages (dbus_message_demarshal), then
#               MessageCoding.readArguments
# Each starts from its committed corpus (Tests/Fuzz/corpus/TARGET) and works in .build/fuzz/.
# Prints one line per target with executions and crashes, then `N passed, M failed`; a crash
# leaves its input in .build/fuzz/TARGET/crash-* and fails the run. WORMHOLE_FUZZ_MERGE=1 merges
# what a run found back into the committed corpus (minimised).
set -u

repository=$(cd "$(dirname "$0")/.." && pwd)
cd "$repository"
seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(json names matchrule signal)
work=$repository/.build/fuzz
mkdir -p "$work"
[[ -d .build/debug/Logging.build ]] || { echo "fuzz.sh: run swift build first (the signal target links swift-log)" >&2; exit 2; }

sources() {
    case $1 in
    json) echo Sources/Wormhole/Messaging/JSONSyntax.swift ;;
    names)
        echo Sources/Wormhole/Storage/NameRules.swift Sources/Wormhole/Storage/MessageIdentifier.swift \
            Sources/Wormhole/Storage/GroupIdentifier.swift Sources/Wormhole/Storage/WormholeDirectoryName.swift \
            Sources/Wormhole/WormholeError.swift
        ;;
    matchrule | signal) ls Sources/WormholeDBus/*.swift ;;
    esac
}
harness() {
    case $1 in
    json) echo Tests/Fuzz/JSONSyntaxFuzz.swift ;;
    names) echo Tests/Fuzz/NameFuzz.swift ;;
    matchrule) echo Tests/Fuzz/MatchRuleFuzz.swift ;;
    signal) echo Tests/Fuzz/SignalDecodingFuzz.swift ;;
    esac
}

dbus_flags=$(pkg-config --cflags dbus-1 | sed 's/-I/-Xcc -I/g')
passed=0
failed=0
for target in "${targets[@]}"; do
    if [[ -z $(harness "$target") ]]; then
        echo "fuzz.sh: unknown target '$target' (json, names, matchrule, signal)" >&2
        exit 64
    fi
    directory=$work/$target
    rm -rf "$directory"
    mkdir -p "$directory/corpus"
    # shellcheck disable=SC2046
    if ! swiftc -sanitize=fuzzer,address -parse-as-library -package-name wormhole -module-name WormholeFuzz \
        -I Sources/CWormholeDBus $dbus_flags -I .build/debug/Modules \
        $(sources "$target") $(harness "$target") .build/debug/Logging.build/*.swift.o -ldbus-1 \
        -o "$directory/fuzz" 2>"$directory/build.log"; then
        echo "FAIL $target: does not build (see $directory/build.log)"
        failed=$((failed + 1))
        continue
    fi
    seeds=Tests/Fuzz/corpus/$target
    [[ -d $seeds ]] && cp "$seeds"/* "$directory/corpus/" 2>/dev/null
    (cd "$directory" && ./fuzz -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 \
        -artifact_prefix="$directory/" corpus >run.log 2>&1)
    status=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$directory/run.log" | grep -o '[0-9]*$')
    crashes=$(find "$directory" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'leak-*' -o -maxdepth 1 -name 'timeout-*' | wc -l)
    corpus=$(find "$directory/corpus" -type f | wc -l)
    if [[ $status == 0 && $crashes == 0 ]]; then
        passed=$((passed + 1))
        echo "PASS $target: ${runs:-?} executions in $seconds s, 0 crashes, corpus $corpus inputs"
    else
        failed=$((failed + 1))
        echo "FAIL $target: ${runs:-?} executions, $crashes crashing inputs (exit $status; see $directory/run.log)"
    fi
    if [[ ${WORMHOLE_FUZZ_MERGE:-0} == 1 && $status == 0 ]]; then
        mkdir -p "$seeds"
        (cd "$directory" && ./fuzz -merge=1 -max_len=4096 "$repository/$seeds" corpus >merge.log 2>&1)
    fi
done
echo "$passed passed, $failed failed"
((failed == 0))
