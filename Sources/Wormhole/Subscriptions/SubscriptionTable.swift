/// The subscription table of one facade's ``WakeEngine``: every subscriber of the facade,
/// registered once, whatever its kind. Each entry is weak (a subscriber lives as long as its
/// handle; a released one is forgotten at the next look), and counts the directory a watch may
/// wake it through, so that a watch is needed exactly while its count is above 0 and removing
/// one of many subscribers costs no scan of them all.
struct SubscriptionTable {
    private struct Registration {
        weak var subscriber: WakeSubscriber?
        /// The key of the directory a watch may wake it through (``WakeEngine/mayFallBack(_:)``
        /// when it registered), counted in ``watchUsers``.
        var watchKey: String?
    }

    private var registered: [ObjectIdentifier: Registration] = [:]
    /// How many registered subscribers may be woken through each directory (by
    /// ``WatchTarget/key``).
    private(set) var watchUsers: [String: Int] = [:]

    /// The subscribers still alive (strong references: the engine releases them only outside its
    /// lock); forgets the others.
    mutating func live() -> [WakeSubscriber] {
        var live: [WakeSubscriber] = []
        live.reserveCapacity(registered.count)
        var gone: [ObjectIdentifier] = []
        for (key, registration) in registered {
            if let subscriber = registration.subscriber { live.append(subscriber) } else { gone.append(key) }
        }
        for key in gone { forget(key) }
        return live
    }

    /// Adds `subscriber` (once), counting the directory a watch may wake it through.
    mutating func add(_ subscriber: WakeSubscriber) {
        let key = ObjectIdentifier(subscriber)
        if let existing = registered[key] {
            if existing.subscriber != nil { return }
            // A released subscriber's address, reused: its registration goes first. (Its watch,
            // if nobody else needs it, stays until the next transition or until a subscriber of
            // that directory is added and removed again.)
            forget(key)
        }
        let watchKey = WakeEngine.mayFallBack(subscriber) ? subscriber.watchTarget?.key : nil
        registered[key] = Registration(subscriber: subscriber, watchKey: watchKey)
        if let watchKey { watchUsers[watchKey, default: 0] += 1 }
    }

    /// Removes a registration; returns the key of a directory no other subscriber needs now.
    @discardableResult
    mutating func forget(_ key: ObjectIdentifier) -> String? {
        guard let registration = registered.removeValue(forKey: key), let watchKey = registration.watchKey else {
            return nil
        }
        let users = (watchUsers[watchKey] ?? 1) - 1
        watchUsers[watchKey] = users > 0 ? users : nil
        return users > 0 ? nil : watchKey
    }
}
