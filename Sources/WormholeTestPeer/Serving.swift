// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Synchronization

/// What a serving command keeps alive until the process ends. A global, not a local whose
/// lifetime is extended over a call that never returns: in an optimised build such a lifetime
/// may end at the value's last use, and a released subscription is cancelled.
private let kept = Mutex<[KeptValue]>([])

private struct KeptValue: @unchecked Sendable {
    let value: Any
}

/// Keeps `values` for the rest of the process and serves deliveries (libdispatch's main queue
/// and the loop thread) until a handler exits the process.
func serveForever(keeping values: Any) -> Never {
    kept.withLock { $0.append(KeptValue(value: values)) }
    dispatchMain()
}
