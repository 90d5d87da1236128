// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Synchronization

/// What a helper process keeps alive until it ends: a global, not a local whose lifetime is
/// extended over a call that never returns (an optimised build may end that lifetime at the last
/// use, and a released subscription is cancelled).
private let kept = Mutex<[KeptValue]>([])

private struct KeptValue: @unchecked Sendable {
    let value: Any
}

/// What the hidden helper commands share.
enum HelperProcess {
    /// Writes `ready` on standard error (the subscriptions in `keeping` are active) and serves
    /// deliveries until a handler exits the process or the bench stops it.
    static func announceReadyAndServe(keeping subscriptions: Any) -> Never {
        Console.progress("ready")
        kept.withLock { $0.append(KeptValue(value: subscriptions)) }
        dispatchMain()
    }
}
