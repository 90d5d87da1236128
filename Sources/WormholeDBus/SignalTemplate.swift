// SPDX-License-Identifier: Apache-2.0
import CWormholeDBus
import WormholeSystem

/// A signal built once and emitted many times with one more argument, a `UInt64` that changes
/// each time (a post's state): ``BusConnection/emit(_:appending:serial:policy:onAccepted:)``.
///
/// libdbus rewrites the message header's signature field on every argument it appends, which
/// makes building a two-argument signal cost several microseconds. A copy of this prebuilt
/// message costs a fraction of one, so each emission pays for one append instead of a whole
/// build. The message on the wire is the same as the one ``BusConnection/emit(_:)`` would build
/// from the signal with the `UInt64` appended.
package final class SignalTemplate: Sendable {
    /// The prebuilt message: never sent, only copied (under the lock: libdbus does not promise
    /// that a message may be read from two threads at once).
    private let message: Locked<LibDBus.Message>
    /// About how many bytes an emission takes on the wire (``Signal/estimatedSize``).
    let estimatedSize: Int

    /// Builds the template from `signal`'s path, interface, member and arguments (its serial and
    /// sender are not used); throws what ``BusConnection/emit(_:)`` would for that signal.
    package init(_ signal: Signal) throws(BusError) {
        var prebuilt = signal
        prebuilt.serial = nil
        message = Locked(try MessageCoding.makeSignal(prebuilt))
        estimatedSize = signal.estimatedSize + 8
    }

    /// A new message: the template with `value` appended, numbered `serial` when one is given
    /// (otherwise libdbus numbers it when it is sent).
    func make(appending value: UInt64, serial: UInt32?) throws(BusError) -> LibDBus.Message {
        guard let copy = message.withLock({ dbus_message_copy($0.pointer) }) else {
            throw BusError(.outOfMemory, "libdbus could not copy a signal message")
        }
        let made = LibDBus.Message(taking: copy)
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(copy, &iterator)
        var appended = value
        guard dbus_message_iter_append_basic(&iterator, cwormhole_type_uint64, &appended) != 0 else {
            throw BusError(.outOfMemory, "libdbus could not append \(value) to a signal")
        }
        if let serial, serial != 0 { dbus_message_set_serial(copy, serial) }
        return made
    }
}
