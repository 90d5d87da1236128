// SPDX-License-Identifier: Apache-2.0
internal import CWormholeDBus
import Glibc

// MARK: - Connections (called only by the connection's owner thread)

extension LibDBus {
    /// A libdbus connection handle. Not `Sendable`: it belongs to one thread at a time (the
    /// one that opened it until it hands it to its I/O thread, which owns it from then on).
    struct Connection: Hashable {
        let pointer: OpaquePointer

        /// Opens a private connection: connects the socket, nothing more. Authentication and the
        /// `Hello` call happen later, driven by the owner's loop (see ``setUniqueName(_:)``), so
        /// that a bus which accepts and never answers cannot block anybody. The corresponding
        /// C function is `dbus_connection_open_private` (not `dbus_bus_register`, which blocks
        /// with no deadline while authenticating).
        static func open(_ address: BusAddress) throws(BusError) -> Connection {
            let context = "cannot connect to the bus at \(quoted(address.rawValue))"
            let opened = try withCError(.connectionFailed, value: address.rawValue, context: context) {
                dbus_connection_open_private(address.rawValue, $0)
            }
            guard let opened else { throw BusError(.connectionFailed, value: address.rawValue, context) }
            dbus_connection_set_exit_on_disconnect(opened, 0)
            return Connection(pointer: opened)
        }

        /// Records the unique name the bus gave in its answer to `Hello`, as `dbus_bus_register`
        /// would. The corresponding C function is `dbus_bus_set_unique_name`.
        func setUniqueName(_ name: String) -> Bool { dbus_bus_set_unique_name(pointer, name) != 0 }

        /// The unique name the bus gave this connection (`:1.42`).
        var uniqueName: String { String(libdbus: dbus_bus_get_unique_name(pointer)) ?? "" }

        /// Whether libdbus still considers the connection open.
        var isConnected: Bool { dbus_connection_get_is_connected(pointer) != 0 }

        /// Closes the connection and drops our reference (libdbus calls the remove-watch and
        /// remove-timeout functions from inside, on this thread).
        func closeAndRelease() {
            dbus_connection_close(pointer)
            dbus_connection_unref(pointer)
        }

        /// Hands the connection's main loop to `owner`: libdbus calls its watch, timeout,
        /// wake-up and dispatch-status functions, and a filter passes every incoming signal to
        /// it. `owner` must stay alive (and be the connection's thread) until the connection is
        /// closed. The corresponding C functions are `dbus_connection_set_watch_functions`,
        /// `dbus_connection_set_timeout_functions`, `dbus_connection_set_wakeup_main_function`,
        /// `dbus_connection_set_dispatch_status_function` and `dbus_connection_add_filter`.
        func installMainLoop(_ owner: MainLoopOwner) {
            let data = Unmanaged.passUnretained(owner).toOpaque()
            dbus_connection_set_watch_functions(
                pointer, Trampolines.addWatch, Trampolines.removeWatch, Trampolines.toggleWatch, data, nil)
            dbus_connection_set_timeout_functions(
                pointer, Trampolines.addTimeout, Trampolines.removeTimeout, Trampolines.toggleTimeout, data, nil)
            dbus_connection_set_wakeup_main_function(pointer, Trampolines.wakeup, data, nil)
            dbus_connection_set_dispatch_status_function(pointer, Trampolines.dispatchStatus, data, nil)
            dbus_connection_add_filter(pointer, Trampolines.filter, data, nil)
        }

        /// Queues a message; libdbus writes what the socket takes at once. False when out of
        /// memory. The corresponding C function is `dbus_connection_send`.
        func send(_ message: Message) -> Bool { dbus_connection_send(pointer, message.pointer, nil) != 0 }

        /// What ``send(_:preallocated:)`` needs, allocated ahead, so that the send itself cannot
        /// fail; `nil` when out of memory. The corresponding C function is
        /// `dbus_connection_preallocate_send`.
        func preallocateSend() -> OpaquePointer? { dbus_connection_preallocate_send(pointer) }

        /// Queues a message like ``send(_:)`` with what ``preallocateSend()`` allocated (which it
        /// takes): it cannot fail. The corresponding C function is
        /// `dbus_connection_send_preallocated`.
        func send(_ message: Message, preallocated: OpaquePointer) {
            dbus_connection_send_preallocated(pointer, preallocated, message.pointer, nil)
        }

        /// Queues a message like ``send(_:)`` and returns the serial libdbus gave it (what a
        /// reply names as its reply serial), or `nil` when out of memory.
        func sendReturningSerial(_ message: Message) -> UInt32? {
            var serial: dbus_uint32_t = 0
            return dbus_connection_send(pointer, message.pointer, &serial) != 0 ? serial : nil
        }

        /// How many bytes of queued messages libdbus has not written yet (the socket did not
        /// take them). The corresponding C function is `dbus_connection_get_outgoing_size`.
        var outgoingSize: Int { Int(dbus_connection_get_outgoing_size(pointer)) }

        /// Whether queued outgoing data is waiting for the socket.
        var hasMessagesToSend: Bool { dbus_connection_has_messages_to_send(pointer) != 0 }

        /// Dispatches every message already read (filters run from inside, on this thread).
        func dispatchAll() {
            while dbus_connection_dispatch(pointer) == DBUS_DISPATCH_DATA_REMAINS {}
        }

        /// Sends a method call and calls `handler` with the reply (or `nil` when none came:
        /// timeout or disconnection) from inside a later dispatch, on this thread. False when
        /// the call could not be sent. The corresponding C function is `dbus_connection_send_with_reply`.
        ///
        /// `timeoutMilliseconds` bounds the wait (libdbus's default, 25 s, when `nil`); when it
        /// passes, the handler gets libdbus's `NoReply` error reply.
        func call(_ message: Message, timeoutMilliseconds: Int32? = nil, handler: @escaping (Message?) -> Void) -> Bool
        {
            var pending: OpaquePointer?
            let timeout = timeoutMilliseconds ?? cwormhole_timeout_use_default
            guard dbus_connection_send_with_reply(pointer, message.pointer, &pending, timeout) != 0,
                let pending
            else { return false }
            let box = Unmanaged.passRetained(ReplyBox(handler))
            let notify: DBusPendingCallNotifyFunction = { pending, data in
                guard let pending, let data else { return }
                let box = Unmanaged<ReplyBox>.fromOpaque(data).takeUnretainedValue()
                let reply = dbus_pending_call_steal_reply(pending).map(Message.init(taking:))
                box.handler(reply)
            }
            let free: DBusFreeFunction = { data in
                guard let data else { return }
                Unmanaged<ReplyBox>.fromOpaque(data).release()
            }
            dbus_pending_call_set_notify(pending, notify, box.toOpaque(), free)
            dbus_pending_call_unref(pending)
            return true
        }

        /// Sends a method call and waits for its reply on this thread, at most
        /// `timeoutMilliseconds`: the reply, or `nil` when none came in time or the connection
        /// closed. For the owner of a connection that cannot wait through its own loop (an exit
        /// on the I/O thread). The corresponding C function is
        /// `dbus_connection_send_with_reply_and_block`.
        func callBlocking(_ message: Message, timeoutMilliseconds: Int32) -> Message? {
            var error = DBusError()
            dbus_error_init(&error)
            defer { dbus_error_free(&error) }
            return dbus_connection_send_with_reply_and_block(
                pointer, message.pointer, max(1, timeoutMilliseconds), &error
            )
            .map(Message.init(taking:))
        }
    }

    /// The C callbacks of the main-loop integration: no captures, the owner comes through `data`.
    private enum Trampolines {
        static func owner(_ data: UnsafeMutableRawPointer?) -> MainLoopOwner? {
            data.map { Unmanaged<MainLoopOwner>.fromOpaque($0).takeUnretainedValue() }
        }

        static let addWatch: DBusAddWatchFunction = { watch, data in
            if let watch { owner(data)?.watchAdded(Watch(pointer: watch)) }
            return 1
        }
        static let removeWatch: DBusRemoveWatchFunction = { watch, data in
            if let watch { owner(data)?.watchRemoved(Watch(pointer: watch)) }
        }
        static let toggleWatch: DBusWatchToggledFunction = { watch, data in
            if let watch { owner(data)?.watchToggled(Watch(pointer: watch)) }
        }
        static let addTimeout: DBusAddTimeoutFunction = { timeout, data in
            if let timeout { owner(data)?.timeoutChanged(Timeout(pointer: timeout), removed: false) }
            return 1
        }
        static let removeTimeout: DBusRemoveTimeoutFunction = { timeout, data in
            if let timeout { owner(data)?.timeoutChanged(Timeout(pointer: timeout), removed: true) }
        }
        static let toggleTimeout: DBusTimeoutToggledFunction = { timeout, data in
            if let timeout { owner(data)?.timeoutChanged(Timeout(pointer: timeout), removed: false) }
        }
        static let wakeup: DBusWakeupMainFunction = { data in
            owner(data)?.wakeUp()
        }
        static let dispatchStatus: DBusDispatchStatusFunction = { _, status, data in
            if status == DBUS_DISPATCH_DATA_REMAINS { owner(data)?.wakeUp() }
        }
        static let filter: DBusHandleMessageFunction = { _, message, data in
            guard let message, let owner = owner(data) else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
            let type = dbus_message_get_type(message)
            if type == cwormhole_message_type_method_return || type == cwormhole_message_type_error {
                // A reply that no pending call claimed (libdbus hands those their replies first):
                // the answer to a call sent with `sendReturningSerial`, or a late one.
                let serial = dbus_message_get_reply_serial(message)
                if serial != 0 { owner.receivedReply(serial: serial, error: MessageCoding.readError(message)) }
            } else if dbus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
                owner.disconnected()
            } else if type == cwormhole_message_type_signal, let sender = MessageCoding.sender(of: message),
                owner.absorbsDuplicate(serial: MessageCoding.serial(of: message), sender: sender)
            {
                // A signal whose every receiver here was already woken by a doorbell ring: dropped
                // by its sender and serial, before it is decoded.
                return DBUS_HANDLER_RESULT_HANDLED
            } else if let signal = MessageCoding.readSignal(message, strings: &owner.receivedStrings) {
                owner.received(signal)
                // Handled: no object path is registered on our connections, so libdbus's object
                // tree would only take the path apart (allocating) to find nothing.
                return DBUS_HANDLER_RESULT_HANDLED
            }
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    /// Carries a reply handler through libdbus's `void *` user data.
    private final class ReplyBox {
        let handler: (Message?) -> Void
        init(_ handler: @escaping (Message?) -> Void) { self.handler = handler }
    }

    /// A watch: a file descriptor libdbus wants to hear about.
    struct Watch: Hashable {
        let pointer: OpaquePointer

        var fd: Int32 { dbus_watch_get_unix_fd(pointer) }
        var isEnabled: Bool { dbus_watch_get_enabled(pointer) != 0 }
        var wantsReadable: Bool { dbus_watch_get_flags(pointer) & DBUS_WATCH_READABLE.rawValue != 0 }
        var wantsWritable: Bool { dbus_watch_get_flags(pointer) & DBUS_WATCH_WRITABLE.rawValue != 0 }

        /// Tells libdbus what the descriptor is ready for; it reads or writes from inside.
        func handle(readable: Bool, writable: Bool, error: Bool, hangup: Bool) {
            var condition: UInt32 = 0
            if readable { condition |= DBUS_WATCH_READABLE.rawValue }
            if writable { condition |= DBUS_WATCH_WRITABLE.rawValue }
            if error { condition |= DBUS_WATCH_ERROR.rawValue }
            if hangup { condition |= DBUS_WATCH_HANGUP.rawValue }
            if condition != 0 { dbus_watch_handle(pointer, condition) }
        }
    }

    /// A timeout: libdbus wants to be called back after an interval (reply deadlines).
    struct Timeout: Hashable {
        let pointer: OpaquePointer

        var intervalMilliseconds: Int { Int(dbus_timeout_get_interval(pointer)) }
        var isEnabled: Bool { dbus_timeout_get_enabled(pointer) != 0 }
        func handle() { dbus_timeout_handle(pointer) }
    }
}
