// SPDX-License-Identifier: Apache-2.0
import Synchronization
import WormholeSystem

extension BusConnection {
    /// Emits a signal, from any thread, without waiting (where it is written, and what waits
    /// when the socket is full: <doc:Threading>). Call ``flush(timeout:)`` to wait until it is
    /// on the bus; a signal emitted is on the bus before the process exits normally either way.
    ///
    /// Throws ``BusError/Code/disconnected`` when the bus is not connected,
    /// ``BusError/Code/invalidString`` naming a string argument that is not valid UTF-8, and
    /// ``BusError/Code/queueFull`` when the bus is not reading this connection and its bounded
    /// outgoing queue is full: nothing was sent (counted in ``refusedSignals``).
    /// The corresponding C function is `dbus_connection_send`.
    public func emit(_ signal: Signal) throws {
        try emit(signal, policy: .plain)
    }

    /// How a signal waits when the socket is full (see ``emit(_:)``).
    package typealias EmitPolicy = SendPolicy

    /// Emits a signal with a queueing policy (``emit(_:)``). `onAccepted` runs once the
    /// connection took the signal (it will be written, in order), before it is written; not
    /// when this throws.
    package func emit(_ signal: Signal, policy: EmitPolicy, onAccepted: () -> Void = {}) throws {
        try emit(bytes: signal.estimatedSize, policy: policy, onAccepted: onAccepted) { () throws(BusError) in
            try MessageCoding.makeSignal(signal)
        }
    }

    /// Sends what `build` makes (about `bytes` on the wire), once the connection is known open.
    func emit(
        bytes: Int, policy: EmitPolicy, onAccepted: () -> Void, build: () throws(BusError) -> LibDBus.Message
    ) throws {
        if sharing != nil { try checkOpen() }
        let message = try build()
        HopTrace.mark(.messageBuilt)
        try io.outgoing.send(message, bytes: bytes, policy: policy, onAccepted: onAccepted)
    }

    /// How many signals ``emit(_:)`` refused because the outgoing queue was full.
    public var refusedSignals: UInt64 { io.outgoing.refused.load(ordering: .relaxed) }

    /// How many queued signals a newer one with the same key replaced while the socket was full
    /// (a `Posted` of one name: the newer stands for it, contract §7). For tests.
    package var replacedSignals: UInt64 { io.shared.withLock { $0.outgoing.replaced } }

    /// Emits `template`'s signal with `value` appended as its last argument (numbered `serial`
    /// when one is given), like ``emit(_:policy:onAccepted:)`` with that signal.
    package func emit(
        _ template: SignalTemplate, appending value: UInt64, serial: UInt32? = nil, policy: EmitPolicy,
        onAccepted: () -> Void = {}
    ) throws {
        try emit(bytes: template.estimatedSize, policy: policy, onAccepted: onAccepted) { () throws(BusError) in
            try template.make(appending: value, serial: serial)
        }
    }
}
