// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// A D-Bus match rule for signals, built from typed parts.
///
/// The bus daemon delivers a signal to a connection only if one of the
/// connection's rules matches it, so filtering happens in the daemon, not in the
/// receiver. The string form escapes values as the D-Bus specification says: each
/// value is single-quoted, a `'` inside it is written `'\''`, and a backslash inside
/// quotes is literal.
///
/// ```swift
/// let rule = MatchRule(interface: iface, member: posted, arguments: [0: "it's"])
/// rule.description  // type='signal',interface='…',member='Posted',arg0='it'\''s'
/// ```
public struct MatchRule: Hashable, Sendable, CustomStringConvertible {
    /// Only signals from this sender (a unique or well-known bus name).
    public var sender: String?
    /// Only signals on this interface.
    public var interface: InterfaceName?
    /// Only signals with this name.
    public var member: MemberName?
    /// Only signals emitted on exactly this object path.
    public var path: ObjectPath?
    /// Only signals emitted on this path or below it.
    public var pathNamespace: ObjectPath?
    /// Only signals whose string argument N equals the value (`argN='…'`, N in 0...63).
    public var arguments: [Int: String]
    /// Only signals whose string or object-path argument N is path-related to the value
    /// (`argNpath='…'`): equal, or one is a prefix of the other ending in `/`.
    public var argumentPaths: [Int: String]

    /// Creates a rule for signals; every part left `nil` or empty matches anything.
    public init(
        sender: String? = nil,
        interface: InterfaceName? = nil,
        member: MemberName? = nil,
        path: ObjectPath? = nil,
        pathNamespace: ObjectPath? = nil,
        arguments: [Int: String] = [:],
        argumentPaths: [Int: String] = [:]
    ) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.arguments = arguments
        self.argumentPaths = argumentPaths
    }

    /// The rule as the bus daemon reads it.
    public var description: String {
        // One string grown in place (thousands of rules may be built at once).
        var text = "type='signal'"
        text.reserveCapacity(
            64 + (arguments.first?.value.utf8.count ?? 0) + (argumentPaths.first?.value.utf8.count ?? 0))
        func append(_ key: String, _ value: String) {
            text += ","
            text += key
            text += "="
            Self.appendQuoted(value, to: &text)
        }
        if let sender { append("sender", sender) }
        if let path { append("path", path.rawValue) }
        if let pathNamespace { append("path_namespace", pathNamespace.rawValue) }
        if let interface { append("interface", interface.rawValue) }
        if let member { append("member", member.rawValue) }
        if arguments.count == 1, let only = arguments.first {
            append("arg\(only.key)", only.value)
        } else {
            for (index, value) in arguments.sorted(by: { $0.key < $1.key }) { append("arg\(index)", value) }
        }
        for (index, value) in argumentPaths.sorted(by: { $0.key < $1.key }) { append("arg\(index)path", value) }
        return text
    }

    /// Quotes a value for a match rule: `'…'`, with each `'` written as `'\''`.
    static func quote(_ value: String) -> String {
        var text = ""
        appendQuoted(value, to: &text)
        return text
    }

    private static func appendQuoted(_ value: String, to text: inout String) {
        let quote = UInt8(ascii: "'")
        // Most values hold no quote.
        guard value.utf8.contains(quote) else {
            text += "'"
            text += value
            text += "'"
            return
        }
        // Byte by byte, not by Character: a quote followed by a combining mark (`'` U+0651) is
        // one Character, which a Character-wise replace would leave unescaped (found by fuzzing).
        var bytes: [UInt8] = [quote]
        for byte in value.utf8 {
            if byte == quote { bytes += Array(#"'\''"#.utf8) } else { bytes.append(byte) }
        }
        bytes.append(quote)
        text += String(decoding: bytes, as: UTF8.self)
    }

    /// The longest match rule dbus-daemon accepts, in bytes (`DBUS_MAXIMUM_MATCH_RULE_LENGTH`).
    public static let maximumLength = 1024

    /// Checks the rule's argument indices (0...63, as the D-Bus specification allows), its
    /// values, and its length against what the bus daemon accepts.
    func validate() throws(BusError) { try validate(description: description) }

    /// ``validate()`` when the caller already has the rule's `description`.
    func validate(description: String) throws(BusError) {
        let length = description.utf8.count
        if length > Self.maximumLength {
            throw BusError(
                .invalidMatchRule, value: description,
                "match rule is \(length) bytes; the bus daemon accepts at most \(Self.maximumLength)")
        }
        for index in Array(arguments.keys) + Array(argumentPaths.keys) where !(0...63).contains(index) {
            throw BusError(
                .invalidMatchRule, value: description, "match rule argument index \(index) is outside 0...63")
        }
        for value in Array(arguments.values) + Array(argumentPaths.values) + [sender].compactMap({ $0 }) {
            try validateDBusString(value, what: "match rule value")
        }
    }

    /// Whether a signal matches this rule, by the same rules the bus daemon applies.
    ///
    /// Signals carry their sender's unique name (`:1.42`), so a rule whose ``sender`` is a
    /// well-known name (`org.example.Chat`) matches here only signals from the bus daemon
    /// itself (for `org.freedesktop.DBus`); a connection's subscriptions also know the name's
    /// current owner and match its signals.
    public func matches(_ signal: Signal) -> Bool { matches(signal, strictArgumentPaths: false, owners: [:]) }

    /// `matches(_:)` knowing the current owner of well-known sender names; with
    /// `strictArgumentPaths`, `argNpath` accepts only values equal to or below the rule's value.
    func matches(_ signal: Signal, strictArgumentPaths: Bool, owners: [String: String]) -> Bool {
        if let interface, interface != signal.interface { return false }
        if let member, member != signal.member { return false }
        if let path, path != signal.path { return false }
        if let pathNamespace {
            let namespace = pathNamespace.rawValue
            let candidate = signal.path.rawValue
            let inside =
                namespace == "/" || candidate == namespace || candidate.hasPrefix(namespace + "/")
            if !inside { return false }
        }
        if let sender, !Self.sender(sender, matches: signal.sender, owners: owners) { return false }
        for (index, value) in arguments {
            guard signal.arguments.indices.contains(index), case .string(let argument) = signal.arguments[index],
                argument == value
            else { return false }
        }
        for (index, value) in argumentPaths {
            guard signal.arguments.indices.contains(index) else { return false }
            let argument: String
            switch signal.arguments[index] {
            case .string(let string): argument = string
            case .objectPath(let path): argument = path.rawValue
            default: return false
            }
            if strictArgumentPaths {
                if !(argument == value || (value.hasSuffix("/") && argument.hasPrefix(value))) { return false }
            } else if !Self.pathRelated(argument, value) {
                return false
            }
        }
        return true
    }

    /// The bus daemon's name for itself, which it also uses as the sender of its own signals.
    static let busDaemonName = "org.freedesktop.DBus"

    private static func sender(_ wanted: String, matches actual: String?, owners: [String: String]) -> Bool {
        guard let actual else { return false }
        if wanted == actual { return true }
        if wanted.hasPrefix(":") || wanted == busDaemonName { return false }
        return owners[wanted] == actual
    }

    /// The `argNpath` relation of the D-Bus specification.
    static func pathRelated(_ argument: String, _ rule: String) -> Bool {
        if argument == rule { return true }
        if rule.hasSuffix("/") && argument.hasPrefix(rule) { return true }
        if argument.hasSuffix("/") && rule.hasPrefix(argument) { return true }
        return false
    }
}
