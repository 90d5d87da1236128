// SPDX-License-Identifier: Apache-2.0
import Glibc

/// The signals a connection was told will arrive although every route they reach has had their
/// content already (a Wormhole doorbell ring delivered the post first), so that libdbus's filter
/// drops them before they are decoded. Owner-confined like the route table of the connection
/// (``BusIO``) that holds it.
struct ExpectedDuplicates {
    /// The most signals announced and not arrived that a connection remembers (a signal that
    /// never comes, its sender killed between its ring and its signal, leaves one); past it they
    /// are all forgotten, and those signals take the ordinary path (decoded and dispatched).
    static let limit = 16_384

    /// A signal that will arrive from `sender` with a serial, and what each route that already
    /// delivered it (by a faster way) calls instead of receiving it.
    private struct Expected {
        var sender: String
        /// The signal as it will arrive (its arguments, interface and sender), to find the
        /// routes it will reach without decoding it.
        var probe: Signal
        var absorbers: [UInt64: @Sendable () -> Void]
    }

    private var expected: [UInt32: Expected] = [:]

    /// Whether no signal is announced.
    var isEmpty: Bool { expected.isEmpty }

    /// The signal `probe` (its sender set) with `serial` will arrive, and the route `routeID`
    /// already had its content: `absorbed` runs instead of its delivery.
    mutating func expect(
        _ probe: Signal, serial: UInt32, routeID: UInt64, absorbed: @escaping @Sendable () -> Void
    ) {
        guard let sender = probe.sender else { return }
        if expected[serial]?.sender == sender {
            expected[serial]?.absorbers[routeID] = absorbed
            return
        }
        if expected.count >= Self.limit { expected = [:] }
        expected[serial] = Expected(sender: sender, probe: probe, absorbers: [routeID: absorbed])
    }

    /// The signal from `sender` with `serial` came: when it was announced and every route it
    /// reaches in `routes` now was told it is a duplicate, the routes' `absorbed` calls (the
    /// signal is then dropped undecoded); nil when it takes the ordinary path. A route added since
    /// the announcement, or one that was not rung, still wants it.
    mutating func take<Payload>(
        serial: UInt32, sender: UnsafePointer<CChar>, routes: RouteTable<Payload>
    ) -> [@Sendable () -> Void]? {
        // Only a ring already delivered announces its signal. A ring follows its signal's
        // acceptance, so it is rarely queued when the signal comes: no read of the endpoint here
        // (a system call per signal); a ring read later is dropped by the observer's merge.
        guard !expected.isEmpty, let announced = expected[serial],
            announced.sender.withCString({ strcmp($0, sender) == 0 })
        else { return nil }
        expected[serial] = nil
        let reached = routes.routeIDs(for: announced.probe)
        guard !reached.isEmpty, reached.allSatisfy({ announced.absorbers[$0] != nil }) else { return nil }
        return reached.compactMap { announced.absorbers[$0] }
    }

    /// Forgets every announcement: a new connection's signals never bring those announced on
    /// the one before.
    mutating func removeAll() { expected = [:] }
}
