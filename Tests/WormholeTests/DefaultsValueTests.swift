// Shared defaults (contract §5): values and their file format, keys, suites, storage, freshness,
// corruption and typed keys.

import Foundation
import Glibc
import Testing
import Wormhole
import WormholeDBus
import WormholeTestSupport

/// One test's world for shared defaults: the messaging fixture (a private bus, a fresh container
/// root and shared-state directory) and suites on it.
extension MessagingFixture {
    func defaults(group: String? = nil, suite: String? = nil) throws -> GroupDefaults {
        try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(group ?? self.group),
            suiteName: suite.map { try SuiteName($0) }, containerRoot: root.path, busAddress: bus.address,
            sharedStateDirectory: state.path, logger: MessagingHarness.logger)
    }

    /// `<root>/<group>/Preferences/<suite>.json`.
    func suitePath(_ suite: String? = nil, group: String? = nil) -> String {
        "\(root.path)/\(group ?? self.group)/Preferences/\(suite ?? self.group).json"
    }

    func suiteText(_ suite: String? = nil) -> String? {
        FileManager.default.contents(atPath: suitePath(suite)).map { String(decoding: $0, as: UTF8.self) }
    }
}

private struct Profile: Codable, Sendable, Equatable {
    var name: String
    var age: Int
}

private enum Theme: String, Codable, Sendable {
    case light, dark
}

extension GroupDefaults.Keys {
    fileprivate static let currency = GroupDefaults.Key<String>("currency", default: "EUR")
    fileprivate static let launches = GroupDefaults.Key<Int>("launches", default: 0)
    fileprivate static let theme = GroupDefaults.Key<Theme>("theme", default: .light)
    fileprivate static let profile = GroupDefaults.Key<Profile>("profile", default: Profile(name: "?", age: 0))
    fileprivate static let ratio = GroupDefaults.Key<Double>("ratio", default: 0.5)
}

@Suite(.sharedBus) struct DefaultsValueTests {
    /// Each property-list type, its file form, and the value read back by another instance (its
    /// own cache) with its type.
    static let roundTrips: [(PropertyListValue, String)] = [
        (.integer(1), "1"),
        (.integer(-9_223_372_036_854_775_808), "-9223372036854775808"),
        (.double(1.0), "1.0"),
        (.double(0.1), "0.1"),
        (.double(-2.5e-300), "-2.5e-300"),
        (.double(.infinity), #"{"$double":"inf"}"#),
        (.double(-.infinity), #"{"$double":"-inf"}"#),
        (.bool(true), "true"),
        (.bool(false), "false"),
        (.string("Grüße \"quoted\" \\ / \n\t\u{1}"), #""Grüße \"quoted\" \\ / \n\t\u0001""#),
        (.string(""), #""""#),
        (.date(Date(timeIntervalSince1970: 1_700_000_000.5)), #"{"$date":1700000000.5}"#),
        (.data(Data([0, 1, 2, 255])), #"{"$data":"AAEC/w=="}"#),
        (.data(Data()), #"{"$data":""}"#),
        (.url(URL(string: "https://example.com/a?b=c#d")!), #"{"$url":"https://example.com/a?b=c#d"}"#),
        (.url(URL(fileURLWithPath: "/tmp/a b")), #"{"$url":"file:///tmp/a%20b"}"#),
        (.array([.integer(1), .double(1), .string("1")]), #"[1,1.0,"1"]"#),
        (.array([]), "[]"),
        (.dictionary([:]), "{}"),
        (.dictionary(["b": .integer(2), "a": .array([.bool(true)])]), #"{"a":[true],"b":2}"#),
        (.dictionary(["$date": .integer(5)]), #"{"$dict":{"$date":5}}"#),
        (.dictionary(["$dict": .dictionary(["$x": .string("y")])]), #"{"$dict":{"$dict":{"$dict":{"$x":"y"}}}}"#),
        (.dictionary(["$a": .integer(1), "$b": .integer(2)]), #"{"$a":1,"$b":2}"#),
    ]

    @Test(arguments: roundTrips)
    func valueRoundTripsWithItsType(value: PropertyListValue, json: String) throws {
        let world = try MessagingFixture()
        let writer = try world.defaults()
        try writer.set(value, forKey: "k")
        #expect(value.jsonText == json)
        #expect(try PropertyListValue(jsonText: json) == value)
        #expect(try world.defaults().value(forKey: "k") == value)
        #expect(world.suiteText()?.contains("\"k\":" + json) == true)
    }

    @Test func nanRoundTrips() throws {
        let world = try MessagingFixture()
        try world.defaults().set(Double.nan, forKey: "n")
        guard case .double(let read)? = try world.defaults().value(forKey: "n") else {
            Issue.record("not a double")
            return
        }
        #expect(read.isNaN)
    }

    /// Foundation's numbers keep their type although the library does not import Foundation: a
    /// Boolean stays a Bool, an integer an Int, a floating-point number (2.0 included) a Double.
    @Test func foundationNumbersKeepTheirType() throws {
        #expect(try PropertyListValue(NSNumber(value: true)) == .bool(true))
        #expect(try PropertyListValue(NSNumber(value: false)) == .bool(false))
        #expect(try PropertyListValue(NSNumber(value: 1)) == .integer(1))
        #expect(try PropertyListValue(NSNumber(value: Int64.max)) == .integer(.max))
        #expect(try PropertyListValue(NSNumber(value: 2.0)) == .double(2.0))
        #expect(try PropertyListValue(NSNumber(value: Float(0.5))) == .double(0.5))
        #expect(try PropertyListValue(NSNumber(value: 1e16)) == .double(1e16))
        let parsed = try JSONSerialization.jsonObject(with: Data(#"{"b":true,"i":7,"d":1.0,"n":[false,-3]}"#.utf8))
        #expect(
            try PropertyListValue(parsed)
                == .dictionary([
                    "b": .bool(true), "i": .integer(7), "d": .double(1.0), "n": .array([.bool(false), .integer(-3)]),
                ]))
        let refused = try #require(throws: WormholeError.self) { try PropertyListValue(NSNull(), key: "k") }
        #expect(refused.message.contains("null"))
    }

    /// The UserDefaults vocabulary with Swift and Foundation values.
    @Test func userDefaultsVocabulary() throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        let date = Date(timeIntervalSince1970: 1_234_567_890.25)
        try defaults.set("EUR", forKey: "currency")
        try defaults.set(42, forKey: "int")
        try defaults.set(UInt8(7), forKey: "small")
        try defaults.set(1.0, forKey: "double")
        try defaults.set(Float(0.5), forKey: "float")
        try defaults.set(true, forKey: "bool")
        try defaults.set(Data("hi".utf8), forKey: "data")
        try defaults.set(URL(string: "https://example.com")!, forKey: "url")
        try defaults.set(date, forKey: "date")
        try defaults.set(["a", "b"], forKey: "array")
        try defaults.set(["x": 1, "y": [true]] as [String: Any], forKey: "dictionary")
        try defaults.set(NSNumber(value: 3.5), forKey: "nsnumber")

        let reader = try world.defaults()
        #expect(try reader.value(forKey: "currency")?.stringValue == "EUR")
        #expect(try (reader.value(forKey: "int")?.intValue ?? 0) == 42)
        #expect(try (reader.value(forKey: "small")?.intValue ?? 0) == 7)
        #expect(try reader.value(forKey: "int") == .integer(42))
        #expect(try reader.value(forKey: "double") == .double(1.0))
        #expect(try reader.value(forKey: "double")?.intValue == nil)
        #expect(try (reader.value(forKey: "float")?.doubleValue ?? 0) == 0.5)
        #expect(try (reader.value(forKey: "int")?.doubleValue ?? 0) == 42)
        #expect(try reader.value(forKey: "bool")?.boolValue == true)
        #expect(try reader.value(forKey: "data") == .data(Data("hi".utf8)))
        #expect(try reader.value(forKey: "url") == .url(URL(string: "https://example.com")!))
        #expect(try reader.value(forKey: "date") == .date(date))
        #expect(try reader.value(forKey: "array") == .array([.string("a"), .string("b")]))
        #expect(try reader.value(forKey: "dictionary") == .dictionary(["x": .integer(1), "y": .array([.bool(true)])]))
        #expect(try (reader.value(forKey: "nsnumber")?.doubleValue ?? 0) == 3.5)
        #expect(try reader.value(forKey: "missing")?.stringValue == nil)
        #expect(try (reader.value(forKey: "missing")?.intValue ?? 0) == 0)
        #expect(try reader.value(forKey: "missing")?.boolValue != true)
        #expect(try reader.values().count == 12)

        try reader.removeObject(forKey: "int")
        #expect(try defaults.value(forKey: "int") == nil)
        try defaults.set(nil, forKey: "currency")
        #expect(try reader.value(forKey: "currency")?.stringValue == nil)
    }

    @Test func registeredDefaultsAreReadButNeverWritten() throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        try defaults.register(defaults: ["theme": "light", "volume": 3])
        #expect(try defaults.value(forKey: "theme")?.stringValue == "light")
        try defaults.set("dark", forKey: "theme")
        #expect(try defaults.value(forKey: "theme")?.stringValue == "dark")
        #expect(try defaults.value(forKey: "volume") == .integer(3))
        #expect(try (world.defaults().value(forKey: "volume")?.intValue ?? 0) == 0)
        #expect(world.suiteText()?.contains("volume") == false)
        #expect(throws: WormholeError.self) { try defaults.register(defaults: ["bad": NSNull()]) }
    }

    /// Keys with dots, spaces, slashes, quotes, control characters and non-ASCII text work, each
    /// its own key.
    static let hostileKeys = [
        "a.b.c", "with space", "a/b/c", "/", "it's", #"say "hi""#, "back\\slash", "ключ", "🎉", "tab\there",
        "$date", "*", "arg0='x'", String(repeating: "k", count: 500),
    ]

    @Test(arguments: hostileKeys)
    func hostileKeyWorks(key: String) throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        try defaults.set(key, forKey: key)
        try defaults.set("other", forKey: key + "x")
        #expect(try world.defaults().value(forKey: key)?.stringValue == key)
        #expect(try world.defaults().values().count == 2)
        #expect(
            try defaults.notificationName(forKey: key).rawValue == "\(world.group)/Preferences/\(world.group)/\(key)")
    }

    static let invalidKeys: [(String, String)] = [
        ("", "empty"),
        ("a\u{0}b", "NUL"),
        (
            String(
                repeating: "k",
                count: 900 - "\(MessagingFixture.baseGroup)/Preferences/\(MessagingFixture.baseGroup)/".utf8.count + 1),
            "over the limit"
        ),
        (String(repeating: "'", count: 300), "match rule"),
    ]

    @Test(arguments: invalidKeys)
    func invalidKeyIsRefusedAndNothingIsWritten(key: String, reason: String) throws {
        // The group the keys were measured against (this test observes nothing: sharing it is harmless).
        let world = try MessagingFixture(group: MessagingFixture.baseGroup)
        let defaults = try world.defaults()
        let error = try #require(throws: WormholeError.self) { try defaults.set(1, forKey: key) }
        #expect(error.code == .invalidKey)
        #expect(error.value == key)
        #expect(error.message.contains(reason), "\(error.message)")
        #expect(world.suiteText() == nil)
        #expect(throws: WormholeError.self) { try defaults.listen(forKey: key) { _ in } }
    }

    /// The longest key that fits is accepted.
    @Test func longestKeyFits() throws {
        let world = try MessagingFixture()
        let prefix = "\(world.group)/Preferences/\(world.group)/"
        let key = String(repeating: "k", count: 900 - prefix.utf8.count)
        try world.defaults().set(1, forKey: key)
        #expect(try world.defaults().value(forKey: key) == .integer(1))
    }

    static let refusedValues: [(String, @Sendable () -> Any)] = [
        ("null", { NSNull() }),
        ("type", { Profile(name: "a", age: 1) }),
        ("[1]", { [1, NSNull()] as [Any] }),
        ("['inner']['deeper']", { ["inner": ["deeper": Profile(name: "b", age: 2)]] as [String: Any] }),
        ("does not fit", { UInt64.max }),
        ("type", { [1: "integer keys"] }),
    ]

    @Test(arguments: refusedValues)
    func refusedValueNamesTheKeyAndWritesNothing(fragment: String, make: @Sendable () -> Any) throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        try defaults.set("before", forKey: "kept")
        let before = world.suiteText()
        let error = try #require(throws: WormholeError.self) { try defaults.set(make(), forKey: "bad key") }
        #expect(error.code == .invalidValue)
        #expect(error.message.contains("'bad key'") && error.message.contains(fragment), "\(error.message)")
        #expect(world.suiteText() == before)
        #expect(throws: WormholeError.self) {
            try defaults.transaction { suite in
                try suite.set(1, forKey: "fine")
                try suite.set(make(), forKey: "bad key")
            }
        }
        #expect(world.suiteText() == before)
    }

    @Test func invalidJSONValuesAreRefused() throws {
        for text in [
            "null", "[null]", "01", "1.", "{\"$what\":1}", "{\"$date\":\"x\"}", "{\"$data\":\"***\"}",
            "99999999999999999999",
            "\"unterminated", "1 2", "",
        ] {
            #expect(throws: WormholeError.self, "\(text)") { try PropertyListValue(jsonText: text) }
        }
        #expect(try PropertyListValue(jsonText: " 1e2 ") == .double(100))
        // Duplicate keys: the last one wins (contract §5, v1.2).
        #expect(try PropertyListValue(jsonText: "{\"a\":1,\"a\":2}") == .dictionary(["a": .integer(2)]))
        #expect(try PropertyListValue(jsonText: "\"\\ud83c\\udf89\"") == .string("🎉"))
        #expect(try PropertyListValue(jsonText: "{\"$date\":0}") == .date(Date(timeIntervalSince1970: 0)))
    }

    @Test func suiteNames() throws {
        let world = try MessagingFixture()
        #expect(try world.defaults().suite.rawValue == world.group)
        #expect(try world.defaults(suite: "settings").path == world.suitePath("settings"))
        for bad in ["", "a/b", ".hidden", "sp ace", String(repeating: "s", count: 201)] {
            let error = try #require(throws: WormholeError.self) { try world.defaults(suite: bad) }
            #expect(error.code == .invalidSuite && error.value == bad)
        }
        let longGroup = "group." + String(repeating: "g", count: 200)
        let error = try #require(throws: WormholeError.self) { try world.defaults(group: longGroup) }
        #expect(error.code == .invalidSuite && error.message.contains("no default suite"))
        #expect(try world.defaults(group: longGroup, suite: "named").suite.rawValue == "named")
        let reserved = try #require(throws: WormholeError.self) { try world.wormhole(directory: "Preferences") }
        #expect(reserved.code == .invalidDirectory && reserved.message.contains("'Preferences'"))
    }

    @Test func filesHaveTheContractsModesAndNames() throws {
        let world = try MessagingFixture()
        try world.defaults().set(1, forKey: "a")
        for (path, mode) in [
            (world.suitePath(), 0o600), (world.suitePath() + ".lock", 0o600), (world.suitePath() + ".changes", 0o600),
            ("\(world.root.path)/\(world.group)/Preferences", 0o700),
        ] {
            var status = stat()
            #expect(lstat(path, &status) == 0, "\(path)")
            #expect(Int(status.st_mode & 0o777) == mode, "\(path)")
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: "\(world.root.path)/\(world.group)/Preferences")
                .sorted()
                == ["\(world.group).json", "\(world.group).json.changes", "\(world.group).json.lock"])
        let object = try JSONSerialization.jsonObject(with: Data(world.suiteText()!.utf8)) as? [String: Any]
        #expect(object?["a"] as? Int == 1)
    }

    @Test func symlinkedSuiteIsRefusedAndNotFollowed() throws {
        let world = try MessagingFixture()
        try world.defaults().set(1, forKey: "a")
        let target = world.root.path + "/elsewhere.json"
        _ = FileManager.default.createFile(atPath: target, contents: Data("{\"a\":2}".utf8))
        unlink(world.suitePath())
        #expect(symlink(target, world.suitePath()) == 0)
        let defaults = try world.defaults()
        #expect(throws: WormholeError.self) { try defaults.value(forKey: "a") }
        let error = try #require(throws: WormholeError.self) { try defaults.set(3, forKey: "a") }
        #expect(error.code == .unsafePath)
        #expect(String(decoding: FileManager.default.contents(atPath: target)!, as: UTF8.self) == "{\"a\":2}")
        chmod("\(world.root.path)/\(world.group)/Preferences", 0o777)
        let loose = try #require(throws: WormholeError.self) { try world.defaults().set(3, forKey: "a") }
        #expect(loose.code == .unsafePath && loose.message.contains("writable by group or others"))
    }

    /// A read that starts after another instance's write returned sees it, however alike the
    /// versions are (same size, written within the same clock tick, inode numbers reused).
    @Test func cachedReadsAreNeverStale() throws {
        let world = try MessagingFixture()
        let reader = try world.defaults()
        let writer = try world.defaults()
        for round in 0..<500 {
            try writer.set(round % 10, forKey: "n")
            #expect(try (reader.value(forKey: "n")?.intValue ?? 0) == round % 10, "round \(round)")
            #expect(try (reader.value(forKey: "n")?.intValue ?? 0) == round % 10, "round \(round), cached")
        }
        try writer.removeObject(forKey: "n")
        #expect(try reader.value(forKey: "n") == nil)
    }

    @Test func generationIncreasesWithEveryWriteAndEqualWritesChangeNothing() throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        let first = try defaults.set(1, forKey: "a")
        let second = try defaults.set(2, forKey: "a")
        #expect(first.changedKeys == ["a"] && second.generation > first.generation)
        let same = try defaults.set(2, forKey: "a")
        #expect(same.changedKeys.isEmpty && same.generation == second.generation)
        var status = stat()
        lstat(world.suitePath(), &status)
        #expect(UInt64(status.st_mtim.tv_sec) * 1_000_000_000 + UInt64(status.st_mtim.tv_nsec) == second.generation)
        for _ in 0..<3 { try defaults.update("launches") { .integer(($0?.intValue ?? 0) + 1) } }
        #expect(try defaults.value(forKey: "launches")?.intValue == 3)
        try defaults.update("launches") { _ in nil }
        #expect(try defaults.value(forKey: "launches") == nil)
        // A date that is not exactly seconds-since-1970 in a Double is stored as the nearest one,
        // and writing it again changes nothing.
        let odd = Date(timeIntervalSinceReferenceDate: 817_000_000.123_456_789)
        try defaults.set(odd, forKey: "date")
        #expect(try defaults.set(odd, forKey: "date").changedKeys.isEmpty)
        #expect(try world.defaults().value(forKey: "date") == defaults.value(forKey: "date"))
        let removed = try defaults.removeObject(forKey: "absent")
        #expect(removed.changedKeys.isEmpty)
    }

    @Test func transactionChangesKeysTogetherOrNotAtAll() throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        try defaults.set(1, forKey: "keep")
        let report = try defaults.transaction { suite in
            try suite.set("dark", forKey: "theme")
            try suite.set(2, forKey: "version")
            suite.removeObject(forKey: "keep")
            #expect(suite["theme"] == .string("dark"))
        }
        #expect(report.changedKeys == ["keep", "theme", "version"])
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try defaults.transaction { suite in
                try suite.set("light", forKey: "theme")
                throw Stop()
            }
        }
        #expect(try world.defaults().values() == ["theme": .string("dark"), "version": .integer(2)])
    }

    @Test func typedKeys() throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        #expect(defaults[.currency] == "EUR")
        defaults[.currency] = "USD"
        #expect(try world.defaults()[.currency] == "USD")
        #expect(try defaults.value(forKey: "currency")?.stringValue == "USD")
        try defaults.reset(.currency)
        #expect(defaults[.currency] == "EUR")
        for _ in 0..<3 { try defaults.update(.launches) { $0 += 1 } }
        #expect(defaults[.launches] == 3)
        defaults[.theme] = .dark
        #expect(try defaults.value(forKey: "theme")?.stringValue == "dark")
        #expect(try world.defaults()[.theme] == .dark)
        defaults[.profile] = Profile(name: "Ann", age: 40)
        #expect(try world.defaults()[.profile] == Profile(name: "Ann", age: 40))
        #expect(try defaults.value(forKey: "profile") == .dictionary(["name": .string("Ann"), "age": .integer(40)]))
        try defaults.set(2, forKey: "ratio")
        #expect(defaults[.ratio] == 2.0)
        try defaults.set("not a number", forKey: "launches")
        #expect(defaults[.launches] == 0)
    }

    /// A suite that is not one JSON object is an error naming the file and byte offset for
    /// readers and writers alike; neither changes the disk. Only repair() moves it aside.
    @Test func aCorruptSuiteIsNeverMovedByReadersOrWritersOnlyByRepair() throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        try defaults.set(1, forKey: "a")
        let garbage = Data("{\"a\":1, truncated".utf8)
        try garbage.write(to: URL(fileURLWithPath: world.suitePath()))
        let error = try #require(throws: WormholeError.self) { try defaults.value(forKey: "a") }
        #expect(error.code == .corruptSuite && error.value == world.suitePath())
        #expect(
            error.message.contains("at byte 8") && error.message.contains("wormholectl defaults repair"), "\(error)")
        let writeError = try #require(throws: WormholeError.self) { try defaults.set(3, forKey: "c") }
        #expect(writeError.code == .corruptSuite && writeError.message.contains("nothing was written"))
        #expect(FileManager.default.contents(atPath: world.suitePath()) == garbage)
        #expect(!FileManager.default.fileExists(atPath: world.suitePath() + ".corrupt-1"))
        // The explicit repair moves it aside (never deleted); the suite starts empty.
        #expect(try defaults.repair() == world.suitePath() + ".corrupt-1")
        #expect(FileManager.default.contents(atPath: world.suitePath() + ".corrupt-1") == garbage)
        #expect(try defaults.values().isEmpty)
        #expect(try defaults.repair() == nil)
        try defaults.set(3, forKey: "c")
        #expect(try defaults.repair() == nil)
        #expect(try world.defaults().values() == ["c": .integer(3)])
    }

    @Test(
        arguments: [
            ("bom", [0xEF, 0xBB, 0xBF] + Array("{\"a\":1}".utf8), 0),
            ("invalid UTF-8", Array("{\"a\":\"".utf8) + [0xFF] + Array("\"}".utf8), 6),
            (
                "deep",
                Array(("{\"a\":" + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "}").utf8),
                517
            ),
            ("empty", [], 0),
            ("not an object", Array("[1]".utf8), 0),
        ] as [(String, [UInt8], Int)])
    func aFileThatIsNotOneObjectNamesTheOffset(kind: String, bytes: [UInt8], offset: Int) throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        try defaults.set(1, forKey: "a")
        try Data(bytes).write(to: URL(fileURLWithPath: world.suitePath()))
        let error = try #require(throws: WormholeError.self) { try defaults.values() }
        #expect(error.code == .corruptSuite && error.message.contains("at byte \(offset)"), "\(kind): \(error)")
        #expect(throws: WormholeError.self) { try defaults.increment(forKey: "n") }
        #expect(FileManager.default.contents(atPath: world.suitePath()) == Data(bytes))
    }

    /// A value a newer version might write is kept byte for byte by writers that change other
    /// keys, and is a type mismatch for that key only.
    @Test func unknownValuesAreKeptByteForByte() throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        try defaults.set(0, forKey: "keep")
        let text =
            "{\"keep\":\"yes\",\"x\":{\"$future\":  [1, {\"b\":null}]},\"d\":{\"$date\":\"soon\"},\"big\":123456789012345678901234,\"dup\":1,\"dup\":2}"
        try Data(text.utf8).write(to: URL(fileURLWithPath: world.suitePath()))
        #expect(try defaults.value(forKey: "keep")?.stringValue == "yes")
        #expect(try defaults.value(forKey: "dup") == .integer(2))
        let mismatch = try #require(throws: WormholeError.self) { try defaults.value(forKey: "x") }
        #expect(mismatch.code == .typeMismatch && mismatch.value == "x")
        #expect(try defaults.keys() == ["big", "d", "dup", "keep", "x"])
        #expect(try defaults.storedJSON(forKey: "x") == "{\"$future\":  [1, {\"b\":null}]}")
        try defaults.set("other", forKey: "keep")
        try defaults.transaction { try $0.set(5, forKey: "t") }
        _ = try defaults.increment(forKey: "n", by: 2)
        let written = String(decoding: FileManager.default.contents(atPath: world.suitePath()) ?? Data(), as: UTF8.self)
        #expect(written.contains("\"x\":{\"$future\":  [1, {\"b\":null}]}"), "\(written)")
        #expect(written.contains("\"d\":{\"$date\":\"soon\"}") && written.contains("\"big\":123456789012345678901234"))
        #expect(try defaults.jsonText().contains("\"x\":{\"$future\":  [1, {\"b\":null}]}"))
        // Updating the unknown value itself is refused; setting or removing it is explicit.
        #expect(throws: WormholeError.self) { try defaults.increment(forKey: "x") }
        try defaults.removeObject(forKey: "x")
        #expect(try defaults.storedJSON(forKey: "x") == nil)
    }

    @Test func incrementUpdateAndLimits() throws {
        let world = try MessagingFixture()
        let defaults = try world.defaults()
        #expect(try defaults.increment(forKey: "n") == 1)
        #expect(try defaults.increment(forKey: "n", by: -5) == -4)
        try defaults.set(2.0, forKey: "d")
        let notInteger = try #require(throws: WormholeError.self) { try defaults.increment(forKey: "d") }
        #expect(notInteger.code == .typeMismatch && notInteger.message.contains("a Double"))
        try defaults.set(Int.max, forKey: "max")
        #expect(throws: WormholeError.self) { try defaults.increment(forKey: "max") }
        #expect(try defaults.value(forKey: "max") == .integer(.max))
        try defaults.update(forKey: "s") { _ in .string("x") }
        #expect(try defaults.value(forKey: "s")?.stringValue == "x")
        // The limit: a write over it is refused, the suite unchanged; removals always work.
        let small = try GroupDefaults(
            applicationGroupIdentifier: GroupIdentifier(world.group), containerRoot: world.root.path,
            busAddress: world.bus.address,
            sharedStateDirectory: world.state.path, maximumSuiteBytes: 200, logger: MessagingHarness.logger)
        let before = FileManager.default.contents(atPath: world.suitePath())
        let tooLarge = try #require(throws: WormholeError.self) {
            try small.set(String(repeating: "x", count: 300), forKey: "big")
        }
        #expect(tooLarge.code == .suiteTooLarge && tooLarge.message.contains("200"))
        try small.set(String(repeating: "y", count: 100), forKey: "pad")
        let over = try #require(throws: WormholeError.self) {
            try small.set(String(repeating: "z", count: 100), forKey: "pad2")
        }
        #expect(over.code == .suiteTooLarge && over.message.contains("bytes, over its limit of 200"))
        #expect(try small.value(forKey: "pad2") == nil && before != nil)
        try small.removeObject(forKey: "pad")
    }
}

@Suite(.sharedBus) struct DefaultsImportTests {
    /// A suite that Foundation's own `UserDefaults(suiteName:)` wrote (in a child process, with its
    /// own `XDG_CONFIG_HOME`) is imported with every type intact, in one write.
    @Test func importsWhatFoundationWrote() async throws {
        let world = try MessagingFixture()
        let config = try TemporaryDirectory("foundation-config")
        let output = try await MessagingHarness.run(
            try productPath("wormhole-test-peer"), ["foundation-write-suite", "com.example.legacy"],
            environment: ["XDG_CONFIG_HOME": config.path, "HOME": config.path])
        #expect(output.status == 0, "\(output.stderr)")
        let plists = try FileManager.default.subpathsOfDirectory(atPath: config.path).filter { $0.hasSuffix(".plist") }
        #expect(plists.contains("com.example.legacy.plist"), "Foundation wrote \(plists)")

        let defaults = try world.defaults()
        try defaults.set("kept", forKey: "other")
        let posted = try await world.rawPosted()
        let report = try defaults.importFoundationSuite(named: "com.example.legacy", configDirectory: config.path)
        #expect(report.changedKeys.count == 9)
        let values = try world.defaults().values()
        #expect(values["currency"] == .string("EUR"))
        #expect(values["int"] == .integer(42))
        #expect(values["double"] == .double(1.0))
        #expect(values["bool"] == .bool(true))
        #expect(values["date"] == .date(Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(values["data"] == .data(Data([0, 1, 255])))
        #expect(values["array"] == .array([.string("a"), .string("b")]))
        #expect(values["dictionary"] == .dictionary(["nested": .dictionary(["x": .double(1.5)])]))
        #expect(values["key.with dots/and slash"] == .string("value"))
        #expect(values["other"] == .string("kept"))
        // The post of the `set` above may reach the bus after the raw rule is active (it is sent by
        // the I/O thread): leave it out, it is not one of the import's.
        let signals = try await MessagingHarness.within("one post per imported key") {
            var found: [Signal] = []
            for await signal in posted where (try? signal.string(at: 0).hasSuffix("/other")) != true {
                found.append(signal)
                if found.count == 9 { return found }
            }
            throw TestFailure("the signals ended before 9 posts")
        }
        #expect(Set(try signals.map { try $0.uint64(at: 1) }) == [report.generation])

        let missing = try #require(throws: WormholeError.self) {
            try defaults.importFoundationSuite(named: "absent", configDirectory: config.path)
        }
        #expect(missing.code == .io && missing.message.contains("absent"))
    }
}
