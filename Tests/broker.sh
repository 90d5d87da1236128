#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the CLI suites, the cross-process suites and the bus-restart suites on a private
# dbus-broker (Fedora's and Arch's session bus) instead of dbus-daemon: WORMHOLE_TEST_BUS=broker.
# Extra arguments go to `swift test` (for example --filter NotifyCLITests). Then
# Tests/faults-flow.sh with CI-sized counts (flow control toward stopped receivers) and
# Tests/faults-doorbell.sh (the doorbell rings nobody else, and a storm delivers nothing twice).
#
# Each test bus is a dbus-broker-launch, which takes one inotify instance from a per-user limit
# (fs.inotify.max_user_instances, 128 by default) and exits when there is none left. The tests
# share one bus per suite (Tests/WormholeTestSupport/TestBus.swift), and at most
# WORMHOLE_BROKER_WIDTH tests (default 16) run at a time, which keeps a 2-core machine's load
# in check: the run holds about 15 inotify instances at its peak (about 40 unbounded), far
# below the stock limit.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps broker
log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift build --build-tests >"$log" 2>&1 || { cat "$log"; exit 1; }
suites='WormholeCLITests|CrossProcessTests|ConnectingTests|DaemonStatsTests|BatchRouteTests|NotifyReconnectTests|MessagingReconnectTests|NotifyCheckTokenTests'
filter=(--filter "$suites")
for argument in "$@"; do [ "$argument" = --filter ] && filter=(); done
WORMHOLE_TEST_BUS=broker SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${WORMHOLE_BROKER_WIDTH:-16}" \
    swift test --skip-build "${filter[@]}" "$@"
# Flow control toward stopped receivers (contract 1.2 section 7), CI-sized: transient messages
# toward a stopped listener on dbus-daemon, a post storm toward stopped observers on dbus-broker.
# By hand, `Tests/faults-flow.sh` with no arguments runs the full counts (40,000 messages of
# 60 KiB, 1,000,000 posts).
Tests/faults-flow.sh "${WORMHOLE_FLOW_MESSAGES:-2000}" 61440 "${WORMHOLE_FLOW_POSTS:-100000}" 5
# The doorbell (docs/contract.md section 9), CI-sized: 20 observers of other names woken 0 times
# by 1,000 posts of another name, and a storm of 20,000 posts toward a stopped observer delivered
# none twice. By hand, `Tests/faults-doorbell.sh` runs 100 observers and 100,000 posts.
Tests/faults-doorbell.sh 20 1000 20000
