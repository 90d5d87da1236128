#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the D-Bus layer's tests (the ownership storm among them) and the Wormhole module's
# delivery suites (listeners, observers, the delivery pump, transient messages, the wake engine's
# fallback and reconnection) under ThreadSanitizer and AddressSanitizer, each in its own build
# folder, and fails on any sanitizer report. The Wormhole module's locks are pthread mutexes
# (`Locked`), which the sanitizer sees; `Synchronization.Mutex` waits on a futex it cannot see.
# Usage: Tests/sanitizers.sh [thread|address]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
sanitizers=("$@")
((${#sanitizers[@]})) || sanitizers=(thread address)
suites='WormholeDBusTests|DeliveryPumpTests|PrivateRuntimeTests|NotifyDeliveryTests|SubscriptionLifetimeTests|SubscriptionTableTests|DefaultsNotifyTests|MessagingDeliveryTests|MessagingTransientTests|MainActorDeliveryTests|UnsignalledWriteTests|SubscriptionFallbackTests|MessagingReconnectTests'
# Code the sanitized suites run shares state through `Locked` (a pthread mutex the sanitizer
# sees), never `Synchronization.Mutex`: a Mutex's waits are invisible to ThreadSanitizer, so two
# threads that take it in turn are reported as a race (a false report that fails CI at random).
if grep -rnE '\bMutex(<|\()' Tests Sources/Wormhole Sources/WormholeDBus Sources/WormholeSystem; then
    echo "error: Synchronization.Mutex in code the sanitizers run (above): use Locked (WormholeSystem)" >&2
    exit 1
fi
status=0
for sanitizer in "${sanitizers[@]}"; do
    log=$(mktemp)
    echo "== $sanitizer sanitizer: building and running $suites" >&2
    # halt_on_error makes a report fail the run; the storm restarts the daemon 50 times.
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
    export ASAN_OPTIONS="halt_on_error=1 detect_leaks=0"
    if ! swift test --sanitize="$sanitizer" --scratch-path ".build-$sanitizer" --filter "$suites" 2>&1 | tee "$log"; then
        status=1
    fi
    if grep -qE "WARNING: ThreadSanitizer|ERROR: AddressSanitizer|SUMMARY: (Thread|Address)Sanitizer" "$log"; then
        echo "error: the $sanitizer sanitizer reported a problem (above)" >&2
        status=1
    else
        echo "== $sanitizer sanitizer: 0 reports" >&2
    fi
    rm -f "$log"
done
exit $status
