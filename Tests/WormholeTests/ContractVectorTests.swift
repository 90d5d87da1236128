// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc
import Testing
import WormholeDBus
import WormholeTestSupport

@testable import Wormhole

/// The contract's constants and test vectors (`contract/` at the repository's root), which the
/// Python and GJS suites read too: a vector added there is checked by every implementation.
@Suite("The contract as data: constants and vectors (contract/)")
struct ContractVectorTests {
    @Test("the constants the library uses are the contract's")
    func constants() throws {
        let file = try ContractFile("constants.json")
        #expect(try file.string("contractVersion") == WormholeVersion.contract)
        #expect(try file.string("objectPath") == NotifyContract.objectPath)
        #expect(try file.string("plainInterface") == NotifyContract.plainInterface)
        #expect(try file.string("bucketInterfacePrefix") == NotifyContract.plainInterface + ".B")
        #expect(try file.string("defaultDirectory") == WormholeDirectoryName.default.rawValue)
        #expect(try file.string("preferencesDirectory") == "Preferences")
        let signals = try file.object("signals")
        #expect(Set(signals.keys) == [NotifyContract.member, NotifyContract.transientMember])
        let limits = try file.object("limits")
        let expected: [(String, Int)] = [
            ("nameBytes", NotificationName.maximumLength),
            ("matchRuleBytes", MatchRule.maximumLength),
            ("groupBytes", GroupIdentifier.maximumLength),
            ("directoryBytes", WormholeDirectoryName.maximumLength),
            ("identifierBytes", MessageIdentifier.maximumLength),
            ("suiteNameBytes", SuiteName.maximumLength),
            ("transientMessageBytes", NotifyContract.transientMessageLimit),
            ("defaultMaxMessageBytes", MessageCenter.defaultMaximumMessageSize),
            ("defaultMaxSuiteBytes", GroupDefaults.defaultMaximumSuiteBytes),
            ("jsonDepth", SuiteJSON.maximumDepth),
            ("doorbellRegistrations", Doorbell.registrationLimit),
            ("journalRecordBytes", Journal.maximumRecordSize),
            ("journalDefaultSegmentBytes", Journal.Options().segmentSize),
        ]
        #expect(Set(limits.keys) == Set(expected.map(\.0) + ["maxState"]), "every limit in the file is checked here")
        for (key, value) in expected {
            #expect(limits[key] as? Int == value, "limits.\(key)")
        }
        #expect(limits["maxState"] as? String == String(UInt64.max))
        let seconds = try file.object("seconds")
        #expect(seconds["staleTemporary"] as? Int == Int(FileTransiting.staleTemporaryAge.components.seconds))
        #expect(seconds["unsignalledRenameGrace"] as? Double == Double(ListenerCore<JSONDocument>.orphanGrace) / 1e9)
    }

    @Test("the doorbell's directory limit is the same in the code, docs/contract.md and docs/architecture.md")
    func doorbellLimitInDocs() throws {
        // Each document states the limit once, in its own words; a rewording that drops the
        // sentence fails here too, rather than letting the two drift apart unchecked.
        let sentences = [
            ("docs/contract.md", #/At most (\d+) registration directories per process/#),
            ("docs/architecture.md", #/at most (\d+) such directories per process/#),
        ]
        for (path, sentence) in sentences {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)
            // Markdown wraps lines anywhere: compare with every run of white space as one space.
            let flat = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            let found = flat.matches(of: sentence).map { Int($0.output.1) }
            #expect(
                found == [Doorbell.registrationLimit], "\(path) states the doorbell's directory limit once, as the code"
            )
        }
    }

    @Test("FNV-1a vectors")
    func fnv() throws {
        let vectors = try ContractFile("vectors/fnv.json").array("vectors")
        #expect(vectors.count >= 3)
        for vector in vectors {
            let input = try #require(vector["input"] as? String)
            let hex = try #require(vector["fnv1a32"] as? String)
            #expect(String(NotifyContract.fnv1a32(input.utf8), radix: 16).leftPadded(to: 8) == hex, "fnv1a32(\(input))")
        }
    }

    @Test("valid names: their bucket and their two exact-name match rules")
    func validNames() throws {
        let file = try ContractFile("vectors/names.json")
        let vectors = try file.array("valid")
        #expect(!vectors.isEmpty)
        for vector in vectors {
            let text = try ContractFile.text(of: vector, key: "name")
            let name = try NotificationName(text)
            #expect(name.bucketInterface == vector["bucket"] as? String, "bucket of \(text.prefix(40))")
            let rules = try NotifyContract.rules(observing: name).map(\.description)
            #expect(rules == vector["exactRules"] as? [String], "rules of \(text.prefix(40))")
        }
    }

    @Test("invalid names are refused with the contract's code and words")
    func invalidNames() throws {
        let file = try ContractFile("vectors/names.json")
        let code = try file.string("errorCode")
        for vector in try file.array("invalid") {
            let error: WormholeError?
            if let hex = vector["utf8Hex"] as? String {
                error = #expect(throws: WormholeError.self) { try NotificationName(utf8: ContractFile.bytes(hex: hex)) }
            } else {
                let text = try ContractFile.text(of: vector, key: "name")
                error = #expect(throws: WormholeError.self, "\(text.prefix(40))") { try NotificationName(text) }
            }
            #expect(error?.code.rawValue == code)
            if let words = vector["messageContains"] as? String {
                #expect(error?.message.contains(words) == true, "\(error?.message ?? "") names \(words)")
            }
        }
    }

    @Test("prefixes: the rule for a valid one, the refusal of one without '/'")
    func prefixes() throws {
        for vector in try ContractFile("vectors/names.json").array("prefixes") {
            let text = try #require(vector["prefix"] as? String)
            if vector["valid"] as? Bool == true {
                let rule = try NotifyContract.rule(observingPrefix: NotificationName(text)).description
                #expect(rule == vector["rule"] as? String)
            } else {
                // The check every prefix listen makes before it touches the bus.
                let error = #expect(throws: WormholeError.self) {
                    try DarwinNotificationCenter.checkPrefix(NotificationName(text))
                }
                #expect(error?.code == .invalidName)
                if let words = vector["messageContains"] as? String {
                    #expect(error?.message.contains(words) == true)
                }
            }
        }
    }

    @Test("groups, directories and identifiers: valid ones made, invalid ones refused with their code")
    func components() throws {
        let kinds = try ContractFile("vectors/components.json").object("kinds")
        #expect(Set(kinds.keys) == ["group", "directory", "identifier"])
        let makers: [String: (String) throws -> Void] = [
            "group": { _ = try GroupIdentifier($0) },
            "directory": { _ = try WormholeDirectoryName($0) },
            "identifier": { _ = try MessageIdentifier($0) },
        ]
        for (kind, entry) in kinds {
            let entry = try #require(entry as? [String: Any])
            let make = try #require(makers[kind])
            let code = try #require(entry["errorCode"] as? String)
            for vector in try #require(entry["valid"] as? [[String: Any]]) {
                let text = try ContractFile.text(of: vector, key: "value")
                #expect(throws: Never.self, "\(kind) \(text.prefix(40))") { try make(text) }
            }
            for vector in try #require(entry["invalid"] as? [[String: Any]]) {
                let text = try ContractFile.text(of: vector, key: "value")
                let error = #expect(throws: WormholeError.self, "\(kind) \(text.debugDescription)") { try make(text) }
                #expect(error?.code.rawValue == code, "\(kind) \(text.debugDescription)")
                if let words = vector["messageContains"] as? String {
                    #expect(error?.message.contains(words) == true)
                }
            }
        }
    }

    @Test("JSON texts: kept byte for byte, compacted without respelling, refused with the code")
    func json() throws {
        let file = try ContractFile("vectors/json.json")
        for text in try file.array(of: String.self, "kept") {
            let document = try JSONDocument(data: Data(text.utf8))
            #expect(document.data == Data(text.utf8), "kept: \(text)")
        }
        for pair in try file.array(of: [String].self, "compact") {
            #expect(try JSONDocument(data: Data(pair[0].utf8)).compactText == pair[1])
        }
        let code = try file.string("errorCode")
        for vector in try file.array("refused") {
            let bytes: [UInt8]
            if let hex = vector["hex"] as? String {
                bytes = try ContractFile.bytes(hex: hex)
            } else {
                bytes = Array(try #require(vector["text"] as? String).utf8)
            }
            let error = #expect(throws: WormholeError.self, "refused: \(bytes)") { try JSONDocument(data: Data(bytes)) }
            #expect(error?.code.rawValue == code)
            if let words = vector["messageContains"] as? String {
                #expect(error?.message.contains(words) == true, "\(error?.message ?? "") names \(words)")
            }
        }
    }

    @Test("every error code the Swift library and its bus layer define is in the contract's one table")
    func errorCodes() throws {
        let table = try ContractFile("errors.json").array("codes")
        let codes = Set(table.compactMap { $0["code"] as? String })
        #expect(codes.count == table.count, "each code once")
        for row in table {
            #expect([1, 3, 64, 75].contains(row["cliExit"] as? Int ?? -1), "\(row["code"] ?? "?") has an exit status")
        }
        // Every code is made in one form, `Code("name")`, in the two modules' sources.
        let sources = ContractFile.folder.deletingLastPathComponent().appendingPathComponent("Sources")
        var defined: Set<String> = []
        for module in ["Wormhole", "WormholeDBus"] {
            let enumerator = try #require(
                FileManager.default.enumerator(atPath: sources.appendingPathComponent(module).path))
            while let file = enumerator.nextObject() as? String {
                guard file.hasSuffix(".swift") else { continue }
                let text = try String(
                    contentsOf: sources.appendingPathComponent(module).appendingPathComponent(file), encoding: .utf8)
                for match in text.matches(of: /Code\("([A-Za-z]+)"\)/) { defined.insert(String(match.1)) }
            }
        }
        #expect(defined.count >= 40, "the scan found the codes (\(defined.count))")
        #expect(defined.subtracting(codes).isEmpty, "codes outside contract/errors.json: \(defined.subtracting(codes))")
        #expect(
            defined.contains(WormholeError.Code.invalidName.rawValue)
                && defined.contains(BusError.Code.queueFull.rawValue))
    }

    @Test("suite files read as their typed values; corrupt ones are refused naming the byte")
    func suites() throws {
        let file = try ContractFile("vectors/suites.json")
        let code = try file.string("errorCode")
        for vector in try file.array("readable") {
            let text = try #require(vector["text"] as? String)
            let expected = try #require(vector["values"] as? [String: Any])
            let defaults = try ContractFile.suite(Data(text.utf8))
            let values = try defaults.values()
            for (key, typed) in expected {
                let want = try #require(typed as? [Any])
                if want.first as? String == "unknown" {
                    #expect(values[key] == nil, "\(key) is unknown")
                    #expect(throws: WormholeError.self, "\(key) is unknown") { try defaults.value(forKey: key) }
                } else {
                    let value = try #require(values[key], "\(key) in \(text.prefix(30))")
                    #expect(ContractFile.matches(value, want), "\(key): \(value) is \(want)")
                }
            }
            #expect(Set(values.keys).isSubset(of: Set(expected.keys)), "no key beyond the vector's")
        }
        for vector in try file.array("corrupt") {
            let bytes =
                if let hex = vector["hex"] as? String { try ContractFile.bytes(hex: hex) } else {
                    Array(try #require(vector["text"] as? String).utf8)
                }
            let offset = try #require(vector["offset"] as? Int)
            let error = #expect(throws: WormholeError.self, "\(vector["reason"] ?? "")") {
                try ContractFile.suite(Data(bytes)).values()
            }
            #expect(error?.code.rawValue == code)
            #expect(error?.message.contains("byte \(offset)") == true, "\(error?.message ?? "") names byte \(offset)")
        }
    }

    @Test("journals read in order, every range that cannot be read reported in its place")
    func journals() throws {
        for vector in try ContractFile("vectors/journals.json").array("cases") {
            let name = try #require(vector["name"] as? String)
            let files = try #require(vector["files"] as? [String: String])
            let disk = try JournalDisk()
            let directory = disk.directory()
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            for parent in [disk.root.child(JournalDisk.group), disk.root.child(JournalDisk.group, "wormhole")] {
                try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: parent)
            }
            for (file, hex) in files {
                let path = directory + "/" + file
                let bytes = Data(try ContractFile.bytes(hex: hex))
                #expect(
                    FileManager.default.createFile(
                        atPath: path, contents: bytes, attributes: [.posixPermissions: 0o600]))
            }
            let reader = try JournalReader(location: try disk.location(), start: .sequence(1))
            var events: [[String]] = []
            while true {
                do {
                    let records = try reader.poll()
                    if records.isEmpty { break }
                    events += records.map {
                        ["record", String($0.sequence), String(decoding: $0.payload, as: UTF8.self)]
                    }
                } catch let error {
                    let damage = try #require(error.journalDamage, "\(name): \(error)")
                    events.append(
                        error.code == .journalGap
                            ? ["gap", String(damage.from), String(damage.to)]
                            : ["damaged", String(damage.from), String(damage.to), damage.reason.rawValue, damage.file])
                }
            }
            let expected: [[String]] = try #require(vector["read"] as? [[Any]]).map { $0.map { "\($0)" } }
            #expect(events == expected, "\(name)")
            let status = try JournalReader(location: try disk.location(), start: .beginning).check()
            let damaged = status.damaged.map { [String($0.from), String($0.to), $0.reason.rawValue, $0.file] }
            let listed: [[String]] = try #require(vector["damaged"] as? [[Any]]).map { $0.map { "\($0)" } }
            #expect(damaged == listed, "\(name)")
        }
    }

    @Test("containers, directories and files that are links, another user's or writable by others are refused")
    func containers() throws {
        let file = try ContractFile("vectors/containers.json")
        let code = try file.string("errorCode")
        for vector in try file.array("cases") {
            let name = try #require(vector["name"] as? String)
            let scratch = try StorageTempDirectory()
            defer { scratch.remove() }
            let root = scratch.child("root")
            let directory = root + "/group.vectors/wormhole"
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            for path in [root, root + "/group.vectors"] {
                try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: path)
            }
            #expect(
                FileManager.default.createFile(
                    atPath: directory + "/inbox.json", contents: Data("{\"n\":1}".utf8),
                    attributes: [.posixPermissions: 0o600]))
            let parts = [
                "container": root + "/group.vectors", "directory": directory, "file": directory + "/inbox.json",
            ]
            let which = try #require(vector["path"] as? String)
            let part = try #require(parts[which])
            switch vector["change"] as? String {
            case "mode":
                let octal = try #require(vector["mode"] as? String)
                let mode = try #require(Int(octal, radix: 8))
                try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: part)
            case "symlink":
                let elsewhere = scratch.child("elsewhere")
                try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
                let moved = elsewhere + "/" + (part as NSString).lastPathComponent
                try FileManager.default.moveItem(atPath: part, toPath: moved)
                try FileManager.default.createSymbolicLink(atPath: part, withDestinationPath: moved)
            case "owner":
                guard getuid() == 0 else { continue }  // only root can give a file away
                #expect(chown(part, 65534, 65534) == 0)
            default:
                Issue.record("\(name): unknown change \(vector["change"] ?? "")")
            }
            let center = try MessageCenter(
                applicationGroupIdentifier: "group.vectors", containerRoot: root,
                busAddress: BusAddress("unix:path=\(root)/no-bus"))
            if vector["refused"] as? Bool == true {
                let error = #expect(throws: WormholeError.self, "\(name)") {
                    try center.messageData(identifier: "inbox")
                }
                #expect(error?.code.rawValue == code, "\(name)")
            } else {
                #expect(try center.messageData(identifier: "inbox") == Data("{\"n\":1}".utf8), "\(name)")
            }
        }
    }
}

/// One JSON file of `contract/`, read from the source tree.
struct ContractFile {
    static let folder = repositoryRoot.appendingPathComponent("contract")

    let path: String
    let root: [String: Any]

    init(_ relativePath: String) throws {
        path = relativePath
        let data = try Data(contentsOf: Self.folder.appendingPathComponent(relativePath))
        root = try #require(
            try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(relativePath) is an object")
    }

    func string(_ key: String) throws -> String { try #require(root[key] as? String, "\(path): \(key)") }
    func object(_ key: String) throws -> [String: Any] { try #require(root[key] as? [String: Any], "\(path): \(key)") }
    func array(_ key: String) throws -> [[String: Any]] {
        try #require(root[key] as? [[String: Any]], "\(path): \(key)")
    }
    func array<T>(of type: T.Type, _ key: String) throws -> [T] { try #require(root[key] as? [T], "\(path): \(key)") }

    /// A vector's text: `key` itself, or `build` (each string repeated its count).
    static func text(of vector: [String: Any], key: String) throws -> String {
        if let text = vector[key] as? String { return text }
        let parts = try #require(vector["build"] as? [[Any]], "a vector has \(key) or build")
        return try parts.map { part in
            let piece = try #require(part.first as? String)
            let count = try #require(part.last as? Int)
            return String(repeating: piece, count: count)
        }.joined()
    }

    /// Shared defaults on a suite file holding `data`, in a container of their own (reads touch no
    /// bus: the address is one nobody listens at).
    static func suite(_ data: Data) throws -> GroupDefaults {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString)")
        let preferences = root.appendingPathComponent("group.vectors/Preferences")
        try FileManager.default.createDirectory(
            at: preferences, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o700], ofItemAtPath: root.appendingPathComponent("group.vectors").path)
        let path = preferences.appendingPathComponent("group.vectors.json").path
        #expect(FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]))
        return try GroupDefaults(
            applicationGroupIdentifier: "group.vectors", containerRoot: root.path,
            busAddress: BusAddress("unix:path=\(root.path)/no-bus"))
    }

    /// Whether `value` is the vectors' `[type, value]`.
    static func matches(_ value: PropertyListValue, _ typed: [Any]) -> Bool {
        let want = typed.count > 1 ? typed[1] : nil
        switch (typed.first as? String, value) {
        case ("integer", .integer(let number)): return want as? String == String(number)
        case ("double", .double(let number)):
            if number.isNaN { return want as? String == "nan" }
            if number.isInfinite { return want as? String == (number > 0 ? "inf" : "-inf") }
            guard let expected = want as? Double else { return false }
            return expected == number && expected.sign == number.sign
        case ("bool", .bool(let flag)): return want as? Bool == flag
        case ("string", .string(let text)): return want as? String == text
        case ("date", .date(let date)): return want as? Double == date.timeIntervalSince1970
        case ("data", .data(let bytes)): return want as? String == bytes.base64EncodedString()
        case ("url", .url(let url)): return want as? String == url.absoluteString
        case ("array", .array(let items)):
            guard let expected = want as? [[Any]], expected.count == items.count else { return false }
            return zip(items, expected).allSatisfy { matches($0, $1) }
        case ("dictionary", .dictionary(let items)):
            guard let expected = want as? [String: [Any]], Set(expected.keys) == Set(items.keys) else { return false }
            return items.allSatisfy { key, item in matches(item, expected[key]!) }
        default: return false
        }
    }

    static func bytes(hex: String) throws -> [UInt8] {
        let digits = Array(hex.utf8)
        try #require(digits.count % 2 == 0)
        return try stride(from: 0, to: digits.count, by: 2).map { index in
            try #require(UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16))
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
