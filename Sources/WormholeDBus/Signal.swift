// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// A D-Bus signal: where it was emitted, by whom, and its arguments.
public struct Signal: Hashable, Sendable, CustomStringConvertible {
    /// The object path the signal was emitted on.
    public var path: ObjectPath
    /// The interface the signal belongs to.
    public var interface: InterfaceName
    /// The signal's name.
    public var member: MemberName
    /// The unique bus name of the sender (`:1.42`); `nil` on signals not yet sent.
    public var sender: String?
    /// The arguments, in order.
    public var arguments: [DBusValue]
    /// The message's serial: on a received signal, the one its sender gave it; on a signal to
    /// emit, the one to give it (`nil`: libdbus numbers it). The doorbell's key (with the
    /// sender's unique name) for a `Posted` signal that was also rung.
    package var serial: UInt32?

    /// Creates a signal to emit.
    public init(path: ObjectPath, interface: InterfaceName, member: MemberName, arguments: [DBusValue] = []) {
        self.init(path: path, interface: interface, member: member, sender: nil, serial: nil, arguments: arguments)
    }

    /// Every field given at once: a signal as it was received (no copy of a half-made signal to
    /// set its sender and serial afterwards, ``MessageCoding/readSignal(_:strings:)``).
    init(
        path: ObjectPath, interface: InterfaceName, member: MemberName, sender: String?, serial: UInt32?,
        arguments: [DBusValue]
    ) {
        self.path = path
        self.interface = interface
        self.member = member
        self.sender = sender
        self.arguments = arguments
        self.serial = serial
    }

    /// The signature of all arguments, such as `st`.
    public var signature: String { arguments.map(\.signature).joined() }

    /// The argument at `index` as a string; throws ``BusError/Code/typeMismatch`` naming
    /// what was found when it is missing or of another type.
    public func string(at index: Int) throws -> String {
        switch try argument(at: index, expecting: "s") {
        case .string(let value): return value
        case let other: throw mismatch(index, "s", found: other)
        }
    }

    /// The argument at `index` as a `UInt64` (`t`); throws ``BusError/Code/typeMismatch`` otherwise.
    public func uint64(at index: Int) throws -> UInt64 {
        switch try argument(at: index, expecting: "t") {
        case .uint64(let value): return value
        case let other: throw mismatch(index, "t", found: other)
        }
    }

    /// The argument at `index` as bytes (`ay`); throws ``BusError/Code/typeMismatch`` otherwise.
    public func bytes(at index: Int) throws -> [UInt8] {
        switch try argument(at: index, expecting: "ay") {
        case .bytes(let value): return value
        case let other: throw mismatch(index, "ay", found: other)
        }
    }

    private func argument(at index: Int, expecting type: String) throws(BusError) -> DBusValue {
        guard arguments.indices.contains(index) else {
            throw BusError(
                .typeMismatch, value: signature,
                "signal \(interface).\(member) has no argument \(index) (expected '\(type)'; signature '\(signature)')")
        }
        return arguments[index]
    }

    private func mismatch(_ index: Int, _ type: String, found: DBusValue) -> BusError {
        BusError(
            .typeMismatch, value: found.signature,
            "argument \(index) of signal \(interface).\(member) is \(found), expected type '\(type)'")
    }

    public var description: String {
        "\(interface).\(member) on \(path) from \(sender ?? "(unsent)") (\(arguments.map(\.description).joined(separator: ", ")))"
    }
}

extension Signal {
    /// About how many bytes the signal takes on the wire: its header fields and arguments
    /// (for the bounded outgoing queue; a little over rather than under).
    var estimatedSize: Int {
        var size = 64 + path.rawValue.utf8.count + interface.rawValue.utf8.count + member.rawValue.utf8.count
        for argument in arguments {
            size += 8
            switch argument {
            case .string(let text): size += text.utf8.count
            case .objectPath(let path): size += path.rawValue.utf8.count
            case .bytes(let bytes): size += bytes.count
            case .strings(let strings): size += strings.reduce(0) { $0 + $1.utf8.count + 5 }
            default: break
            }
        }
        return size
    }
}
