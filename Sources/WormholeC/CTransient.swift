// SPDX-License-Identifier: Apache-2.0
import Wormhole
import WormholeSystem

/// The bound on a C listener's transient messages waiting for `wh_context_dispatch`, the C
/// side of `ListenOptions.transientBufferLimit`: the Swift listener hands each message to the
/// context's queue at once (its handler runs on the I/O thread), so without this an app that
/// stops dispatching would hold every message sent to it. Past ``limit`` waiting messages a new
/// one is dropped (the queue keeps the order of the listener's deliveries, so the newest go) and
/// counted per identifier; the count is delivered as one `WH_ERROR_TRANSIENT_DROPPED` delivery per
/// identifier, before the next transient message of the listener, or after the last waiting one
/// was handled, whichever comes first.
final class CTransientBound: Sendable {
    /// As `ListenOptions.transientBufferLimit`'s default.
    static let limit = 1024

    private struct State {
        var waiting = 0
        var dropped: [String: Int] = [:]
    }

    private let state = Locked(State())

    /// Queues `delivery` for `subscription` (on the library's thread), or counts it dropped.
    func admit(
        _ delivery: MessageDelivery<JSONDocument>, subscription: CSubscription,
        call: @escaping @Sendable (CMessage) -> Void
    ) {
        let reports = state.withLock { state -> [String: Int]? in
            guard state.waiting < Self.limit else {
                state.dropped[delivery.identifier.rawValue, default: 0] += 1
                return nil
            }
            state.waiting += 1
            defer { state.dropped = [:] }
            return state.dropped
        }
        guard let reports else { return }
        if !reports.isEmpty {
            subscription.deliver { Self.report(reports, call) }
        }
        subscription.deliver { [self] in
            call(CMessage(delivery))
            let late = state.withLock { state -> [String: Int] in
                state.waiting -= 1
                guard state.waiting == 0 else { return [:] }
                defer { state.dropped = [:] }
                return state.dropped
            }
            Self.report(late, call)
        }
    }

    private static func report(_ dropped: [String: Int], _ call: @Sendable (CMessage) -> Void) {
        for (identifier, count) in dropped.sorted(by: { $0.key < $1.key }) {
            call(CMessage(dropped: count, identifier: identifier))
        }
    }
}
