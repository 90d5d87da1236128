# What the fault scripts (Tests/faults.sh, faults-damage.sh, faults-flow.sh, faults-order.sh,
# faults-listen.sh) share; sourced, not run. Sets `repository`, `bin` (.build/debug or
# $WORMHOLE_BIN), `wormholectl` and `peer`; `require_tools NAME` exits 2 naming a tool that is not
# built; `check NAME STATUS DETAIL` counts and prints one PASS or FAIL line; `report` prints
# `N passed, M failed` and returns non-zero when anything failed; `await FILE PATTERN SECONDS`
# waits for a line; `start_daemon` starts (again) a private dbus-daemon at `$address` that the
# script can stop and wait for (`kill "$daemon"; wait "$daemon"`), logging under `$scratch`.

repository=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${WORMHOLE_BIN:-$repository/.build/debug}
wormhole=$bin/wormholectl
peer=$bin/wormhole-test-peer

require_tools() {  # require_tools SCRIPT-NAME
    local tool
    for tool in "$wormhole" "$peer"; do
        [[ -x $tool ]] || { echo "$1: $tool is not built (swift build)" >&2; exit 2; }
    done
}

passed=0
failed=0
check() {  # check NAME CONDITION-STATUS DETAIL
    if [[ $2 == 0 ]]; then
        passed=$((passed + 1))
        echo "PASS $1${3:+: $3}"
    else
        failed=$((failed + 1))
        echo "FAIL $1${3:+: $3}"
    fi
}

report() {
    echo "$passed passed, $failed failed"
    ((failed == 0))
}

# await FILE PATTERN SECONDS: whether FILE has a line matching PATTERN within SECONDS (tail
# follows the file, inotify; nothing polls).
await() {
    grep -q -m1 -E -- "$2" < <(timeout "$3" tail -n +1 -F "$1" 2>/dev/null)
}

started=0
start_daemon() {  # a child of the script, so that stopping it can be waited for
    started=$((started + 1))
    dbus-daemon --config-file="$repository/dbus/wormhole-session.conf" --address="$address" --nofork \
        --print-address >"$scratch/daemon.$started" &
    daemon=$!
    await "$scratch/daemon.$started" '^unix:' 10
}
