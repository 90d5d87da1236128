// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing
import Wormhole

/// The three validated name types (contract §2): hostile values are refused with the right code and
/// a message naming the value, before anything touches the disk.
@Suite struct StorageIdentifierTests {
    enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case group, directory, identifier

        var testDescription: String { rawValue }

        var code: WormholeError.Code {
            switch self {
            case .group: .invalidGroup
            case .directory: .invalidDirectory
            case .identifier: .invalidIdentifier
            }
        }

        var limit: Int { self == .identifier ? 200 : 255 }

        var noun: String {
            switch self {
            case .group: "group identifier"
            case .directory: "wormhole directory name"
            case .identifier: "message identifier"
            }
        }

        /// Makes a transiting with `value` in this position (valid names elsewhere) and writes a message.
        func write(_ value: String, root: String) throws {
            let group = try GroupIdentifier(self == .group ? value : "group.com.example.lines")
            let directory = try WormholeDirectoryName(self == .directory ? value : "wormhole")
            let identifier = try MessageIdentifier(self == .identifier ? value : "clip")
            let transiting = FileTransiting(
                container: try GroupContainer(group: group, root: root), directory: directory)
            try transiting.writeMessage(Data("{}".utf8), identifier: identifier)
        }

        /// Where `write` stores the message for `value`.
        func storedPath(_ value: String, root: String) -> String {
            let group = self == .group ? value : "group.com.example.lines"
            let directory = self == .directory ? value : "wormhole"
            let identifier = self == .identifier ? value : "clip"
            return "\(root)/\(group)/\(directory)/\(identifier).json"
        }
    }

    struct Hostile: Sendable, CustomTestStringConvertible {
        /// The value.
        var value: String
        /// How the message must show it.
        var shown: String
        /// What the message must say about it; `LIMIT` stands for the kind's limit.
        var reason: String

        var testDescription: String { shown }
    }

    static let hostile: [Hostile] = [
        Hostile(value: "../x", shown: "'../x'", reason: "contains '/' (U+002F), which is not allowed"),
        Hostile(value: "a/b", shown: "'a/b'", reason: "contains '/' (U+002F), which is not allowed"),
        Hostile(value: "", shown: "''", reason: "is empty"),
        Hostile(value: ".hidden", shown: "'.hidden'", reason: "starts with '.'"),
        Hostile(value: "..", shown: "'..'", reason: "starts with '.'"),
        Hostile(value: ".", shown: "'.'", reason: "starts with '.'"),
        Hostile(
            value: String(repeating: "x", count: 256), shown: "'" + String(repeating: "x", count: 256) + "'",
            reason: "is 256 bytes long, over the limit of LIMIT bytes"),
        Hostile(value: "a b", shown: "'a b'", reason: "contains ' ' (U+0020)"),
        Hostile(value: "café", shown: "'café'", reason: "contains 'é' (U+00E9)"),
        Hostile(value: "a\0b", shown: #"'a\0b'"#, reason: #"contains '\0' (U+0000)"#),
        Hostile(value: "a\nb", shown: #"'a\nb'"#, reason: #"contains '\n' (U+000A)"#),
        Hostile(value: "a\u{200B}b", shown: #"'a\u{200B}b'"#, reason: #"contains '\u{200B}' (U+200B)"#),
        Hostile(value: "a\\b", shown: #"'a\\b'"#, reason: #"contains '\\' (U+005C)"#),
        Hostile(value: "a:b", shown: "'a:b'", reason: "contains ':' (U+003A)"),
        Hostile(value: "a*", shown: "'a*'", reason: "contains '*' (U+002A)"),
    ]

    @Test(arguments: Kind.allCases, hostile)
    func hostileValueIsRefusedBeforeTouchingTheDisk(kind: Kind, input: Hostile) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let root = temp.child("root")

        let error = try #require(throws: WormholeError.self) { try kind.write(input.value, root: root) }

        #expect(error.code == kind.code)
        #expect(error.value == input.value)
        #expect(error.message.hasPrefix("\(kind.noun) \(input.shown) "), "message: \(error.message)")
        let reason = input.reason.replacingOccurrences(of: "LIMIT", with: String(kind.limit))
        #expect(error.message.contains(reason), "message: \(error.message)")
        #expect(!error.message.contains("\0") && !error.message.contains("\n"), "message: \(error.message)")
        #expect(try temp.contents() == [])
    }

    struct Length: Sendable, CustomTestStringConvertible {
        var kind: Kind
        var bytes: Int
        var accepted: Bool

        var testDescription: String { "\(kind) of \(bytes) bytes \(accepted ? "accepted" : "refused")" }
    }

    static let lengths: [Length] = [
        Length(kind: .identifier, bytes: 1, accepted: true),
        Length(kind: .identifier, bytes: 200, accepted: true),
        Length(kind: .identifier, bytes: 201, accepted: false),
        Length(kind: .identifier, bytes: 255, accepted: false),
        Length(kind: .group, bytes: 1, accepted: true),
        Length(kind: .group, bytes: 201, accepted: true),
        Length(kind: .group, bytes: 255, accepted: true),
        Length(kind: .group, bytes: 256, accepted: false),
        Length(kind: .directory, bytes: 201, accepted: true),
        Length(kind: .directory, bytes: 255, accepted: true),
        Length(kind: .directory, bytes: 256, accepted: false),
    ]

    @Test(arguments: lengths)
    func lengthLimit(_ length: Length) throws {
        let temp = try StorageTempDirectory()
        defer { temp.remove() }
        let root = temp.child("root")
        let value = String(repeating: "n", count: length.bytes)

        if length.accepted {
            try length.kind.write(value, root: root)
            #expect(FileManager.default.fileExists(atPath: length.kind.storedPath(value, root: root)))
        } else {
            let error = try #require(throws: WormholeError.self) { try length.kind.write(value, root: root) }
            #expect(error.code == length.kind.code)
            #expect(error.message.contains("'\(value)'"))
            #expect(
                error.message.contains("is \(length.bytes) bytes long, over the limit of \(length.kind.limit) bytes"))
            #expect(try temp.contents() == [])
        }
    }

    @Test func multiByteCharactersCountInBytes() throws {
        // 100 'é' are 100 characters but 200 bytes: the limit is in bytes, and 'é' is refused anyway.
        let error = try #require(throws: WormholeError.self) {
            try MessageIdentifier(String(repeating: "é", count: 101))
        }
        #expect(error.message.contains("is 202 bytes long"))
    }

    @Test(arguments: ["group.com.example.lines", "KH3G9PXA68.com.carlynorama.lines", "a", "A-b_c.9", "-x", "x."])
    func contractExamplesAreAccepted(_ value: String) throws {
        #expect(try GroupIdentifier(value).rawValue == value)
        #expect(try WormholeDirectoryName(value).description == value)
        #expect(try MessageIdentifier(value).description == value)
    }

    @Test func defaultDirectoryIsWormhole() {
        #expect(WormholeDirectoryName.default.rawValue == "wormhole")
    }
}
