// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Glibc
import Synchronization

/// Counts deliveries and exits 0 when the limit is reached.
final class DeliveryCounter: Sendable {
    private let limit: Int?
    private let count = Atomic<Int>(0)

    init(limit: Int?) { self.limit = limit }

    func delivered() {
        let now = count.wrappingAdd(1, ordering: .relaxed).newValue
        if let limit, now >= limit { exit(0) }
    }
}
