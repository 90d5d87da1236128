import WormholeDBus

/// The name of a Darwin-style notification, such as `com.example.app.refresh`.
///
/// A name is 1 to 900 bytes of UTF-8 with no NUL (contract §1): the bus daemon refuses
/// match rules over 1024 bytes, and 900 leaves room for the rule around the name.
/// Reverse-DNS names are the convention; slashes group names into families that a
/// prefix observer can watch (`group.com.example/wormhole/`).
public struct NotificationName: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The longest name, in UTF-8 bytes.
    public static let maximumLength = 900

    /// The name as written.
    public let rawValue: String

    /// Checks a name; throws ``WormholeError/Code/invalidName`` naming it when it is empty,
    /// longer than 900 bytes, or contains NUL.
    public init(_ rawValue: String) throws {
        let length = rawValue.utf8.count
        if length == 0 {
            throw WormholeError(.invalidName, value: rawValue, "notification name is empty (it must be 1 to 900 bytes)")
        }
        if length > Self.maximumLength {
            throw WormholeError(
                .invalidName, value: rawValue,
                "notification name \(quoted(String(rawValue.prefix(40))))… is \(length) bytes, longer than the limit of 900")
        }
        if rawValue.utf8.contains(0) {
            throw WormholeError(.invalidName, value: rawValue, "notification name \(quoted(rawValue)) contains a NUL byte")
        }
        self.rawValue = rawValue
    }

    /// Checks a name given as raw bytes; refuses bytes that are not valid UTF-8 as well.
    public init(utf8 bytes: some Collection<UInt8>) throws {
        guard let string = String(validating: bytes, as: UTF8.self) else {
            let hex = bytes.prefix(40).map { String($0, radix: 16) }.joined(separator: " ")
            throw WormholeError(.invalidName, value: hex, "notification name is not valid UTF-8 (bytes: \(hex))")
        }
        try self.init(string)
    }

    public var description: String { rawValue }

    public static func < (lhs: NotificationName, rhs: NotificationName) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Whether the name can be used as a prefix for ``DarwinNotificationCenter`` prefix observation.
    public var isPrefix: Bool { rawValue.hasSuffix("/") }

    /// The bucket interface the contract puts this name's signals on:
    /// `org.wormhole.Notify1.B` + four upper-case hex digits, the low 16 bits of FNV-1a-32.
    public var bucketInterface: String { NotifyContract.bucketInterface(for: rawValue) }
}

/// The wire vocabulary of contract §1, in one place.
public enum NotifyContract: Sendable {
    /// The object path every `Posted` signal is emitted on: `/org/wormhole/Notify1`.
    public static let objectPath = "/org/wormhole/Notify1"
    /// The plain interface for hand-typed triggers: `org.wormhole.Notify1`.
    public static let plainInterface = "org.wormhole.Notify1"
    /// The signal name: `Posted`.
    public static let member = "Posted"

    /// The 32-bit FNV-1a hash of `bytes`.
    public static func fnv1a32(_ bytes: some Sequence<UInt8>) -> UInt32 {
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
    public static func bucketInterface(for name: String) -> String {
        let low = fnv1a32(name.utf8) & 0xFFFF
        let digits: [UInt8] = Array("0123456789ABCDEF".utf8)
        var bytes = Array((plainInterface + ".B").utf8)
        for shift in [12, 8, 4, 0] { bytes.append(digits[Int((low >> UInt32(shift)) & 0xF)]) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The bucket interface as a typed name (its format is valid by construction).
    static func bucket(for name: String) -> InterfaceName {
        InterfaceName(unchecked: bucketInterface(for: name))
    }

    // Typed forms, checked once.
    static let path = try! ObjectPath(objectPath)
    static let plain = try! InterfaceName(plainInterface)
    static let posted = try! MemberName(member)

    /// Whether `interface` is the plain interface or a well-formed bucket interface.
    static func isNotifyInterface(_ interface: String) -> Bool {
        if interface == plainInterface { return true }
        let bucketPrefix = plainInterface + ".B"
        guard interface.hasPrefix(bucketPrefix) else { return false }
        let digits = interface.utf8.dropFirst(bucketPrefix.utf8.count)
        return digits.count == 4 && digits.allSatisfy { (48...57).contains($0) || (65...70).contains($0) }
    }

    /// The two rules that observe one name (contract §1).
    static func rules(observing name: NotificationName) throws -> [MatchRule] {
        let bucket = Self.bucket(for: name.rawValue)
        let rules = [
            MatchRule(interface: bucket, member: posted, arguments: [0: name.rawValue]),
            MatchRule(interface: plain, member: posted, arguments: [0: name.rawValue]),
        ]
        try checkLength(rules, name: name)
        return rules
    }

    /// The rule that observes every name below a prefix ending in `/` (contract §1).
    static func rule(observingPrefix prefix: NotificationName) throws -> MatchRule {
        let rule = MatchRule(member: posted, path: path, argumentPaths: [0: prefix.rawValue])
        try checkLength([rule], name: prefix)
        return rule
    }

    /// A name of at most 900 bytes fits a rule unless it holds many `'`, each of which the
    /// rule spells `'\''` (4 bytes): refuse such a name by name, before the bus does.
    private static func checkLength(_ rules: [MatchRule], name: NotificationName) throws {
        guard let longest = rules.map({ $0.description.utf8.count }).max(), longest > MatchRule.maximumLength else {
            return
        }
        throw WormholeError(
            .invalidName, value: name.rawValue,
            "cannot observe \(quoted(String(name.rawValue.prefix(60))))…: its match rule would be \(longest) bytes "
                + "and the bus daemon accepts at most \(MatchRule.maximumLength) (each ' in a name takes 4 bytes)")
    }
}
