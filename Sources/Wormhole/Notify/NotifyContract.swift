// SPDX-License-Identifier: Apache-2.0
import WormholeDBus

/// The wire vocabulary of contract §1, in one place.
package enum NotifyContract: Sendable {
    /// The object path every `Posted` signal is emitted on: `/org/wormhole/Notify1`.
    package static let objectPath = "/org/wormhole/Notify1"
    /// The plain interface for hand-typed triggers: `org.wormhole.Notify1`.
    package static let plainInterface = "org.wormhole.Notify1"
    /// The signal name: `Posted`.
    package static let member = "Posted"
    /// The signal that carries a transient message (contract §7): `Message`, arguments
    /// `name` (`s`) and `message` (`s`, one compact JSON document).
    package static let transientMember = "Message"
    /// The largest transient message, in bytes of compact JSON: 64 KiB (contract §7).
    package static let transientMessageLimit = 65_536

    /// The 32-bit FNV-1a hash of `bytes` (the bucket of a name is its low 16 bits).
    package static func fnv1a32(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var hash: UInt32 = 0x811c_9dc5
        for byte in bytes {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }

    /// The 64-bit FNV-1a hash of `bytes` (used for the shared state table's keys).
    static func fnv1a64(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The bucket interface of a name: `org.wormhole.Notify1.B%04X` of `fnv1a32(name) & 0xFFFF`.
    package static func bucketInterface(for name: String) -> String {
        // Built in place: every post computes it, so no intermediate arrays.
        let low = fnv1a32(name.utf8) & 0xFFFF
        let prefix = bucketPrefix.utf8
        return String(unsafeUninitializedCapacity: prefix.count + 4) { buffer in
            var index = buffer.initialize(fromContentsOf: prefix)
            for shift in stride(from: 12, through: 0, by: -4) {
                let digit = UInt8(truncatingIfNeeded: (low >> UInt32(shift)) & 0xF)
                buffer[index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "A") + digit - 10
                index += 1
            }
            return index
        }
    }

    /// What every bucket interface starts with: the plain interface and `.B`.
    private static let bucketPrefix = plainInterface + ".B"

    /// The bucket interface as a typed name (its format is valid by construction).
    static func bucket(for name: String) -> InterfaceName {
        InterfaceName(unchecked: bucketInterface(for: name))
    }

    // Typed forms, checked once.
    static let path = try! ObjectPath(objectPath)
    static let plain = try! InterfaceName(plainInterface)
    static let posted = try! MemberName(member)
    static let message = try! MemberName(transientMember)

    /// The two rules that observe one name (contract §1).
    static func rules(observing name: NotificationName) throws -> [MatchRule] {
        let bucket = Self.bucket(for: name.rawValue)
        let rules = [
            MatchRule(interface: bucket, member: posted, arguments: [0: name.rawValue]),
            MatchRule(interface: plain, member: posted, arguments: [0: name.rawValue]),
        ]
        return rules
    }

    /// The two rules that receive the transient messages of one name: the §1 rules with
    /// `member='Message'` (contract §7).
    static func messageRules(observing name: NotificationName) -> [MatchRule] {
        [
            MatchRule(interface: bucket(for: name.rawValue), member: message, arguments: [0: name.rawValue]),
            MatchRule(interface: plain, member: message, arguments: [0: name.rawValue]),
        ]
    }

    /// The rule that receives the transient messages of every name below a prefix ending in `/`.
    static func messageRule(observingPrefix prefix: NotificationName) -> MatchRule {
        MatchRule(member: message, path: path, argumentPaths: [0: prefix.rawValue])
    }

    /// The rule that observes every name below a prefix ending in `/` (contract §1).
    static func rule(observingPrefix prefix: NotificationName) throws -> MatchRule {
        // Shorter than the exact-name rule, whose length every NotificationName was checked against.
        return MatchRule(member: posted, path: path, argumentPaths: [0: prefix.rawValue])
    }

    /// The length of the longer of the two exact-name rules for `name` (the bucket one): the
    /// one figure that decides whether a name can be observed, checked when a name is made.
    package static func exactRuleLength(of name: String) -> Int {
        MatchRule(interface: bucket(for: name), member: posted, arguments: [0: name]).description.utf8.count
    }
}

extension NotifyContract {
    /// The name a signal routed to `target`'s route carries (contract §1), with its raw text, or
    /// nil for a malformed one. The route's rules chose the interface, member and name for a
    /// name, and the path, member and a name at or below a prefix; only what they do not say is
    /// checked: the path, a first argument that is a string, and for a prefix the interface (the
    /// plain one or the name's bucket) and that the name is a valid one.
    static func name(
        in signal: Signal, routedTo target: NotificationName, isPrefix: Bool
    ) -> (name: NotificationName, raw: String)? {
        guard signal.path == path, case .string(let raw)? = signal.arguments.first else { return nil }
        guard isPrefix else { return (target, raw) }
        let interface = signal.interface
        guard interface == plain || interface == bucket(for: raw), let name = NotificationName(received: raw) else {
            return nil
        }
        return (name, raw)
    }
}
