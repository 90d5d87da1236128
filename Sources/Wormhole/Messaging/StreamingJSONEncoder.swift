import FoundationEssentials

/// Encodes an `Encodable` value as compact JSON straight into a byte buffer kept between calls,
/// where `JSONEncoder` first builds a tree of values (an allocation per value, a dictionary per
/// object) and then writes it out: the journal's Codable path.
///
/// It writes what `JSONEncoder` with `.withoutEscapingSlashes` writes (the same escapes, the same
/// numbers), except that an object's keys come in the order they were encoded: `JSONEncoder`'s
/// order on Linux is its dictionary's, which differs from process to process, so no reader can
/// rely on it. Whatever it does not write the same way makes ``encode(_:)`` return `false`, and
/// the caller encodes with `JSONEncoder` instead (which also reports any error the same way):
/// `Data`, `URL` and `Decimal` values (`JSONEncoder` special-cases them), a non-finite number,
/// `superEncoder`, a container written to after a later one was opened, a key written twice in
/// one object (or an object of more than ``maximumTrackedKeys`` keys), a value that encodes
/// nothing, and any error the value's own `encode(to:)` throws.
///
/// Not for concurrent use: ``Pool`` lends one to each caller.
final class StreamingJSONEncoder {
    /// The JSON of the last successful ``encode(_:)``.
    private(set) var bytes: [UInt8] = []

    /// An open container: its identity (so a stale handle is noticed), whether it is an object,
    /// and how many items it holds (a comma before every item but the first).
    private struct Open {
        var id: Int
        var isObject: Bool
        var items: Int
        /// Where its keys' hashes start in `keyHashes`.
        var keysStart: Int
    }

    private var open: [Open] = []
    private var nextID = 0
    /// The hashes of the keys of every open object, each object's after its parent's.
    private var keyHashes: [Int] = []
    /// The keys from the top-level value to the value being encoded.
    fileprivate var path: [any CodingKey] = []
    /// The level (index in `open`) the value being encoded opens its container at, and where its
    /// bytes start (to tell whether it wrote anything).
    private var level = 0
    private var valueStart = 0

    /// Objects with more keys than this are left to `JSONEncoder` (the duplicate check is linear).
    static let maximumTrackedKeys = 64

    /// Set at anything this encoder does not write as `JSONEncoder` would (and never cleared
    /// during an encoding: a value's code that catches the error does not make the output right).
    private var failed = false
    var currentLevel: Int { level }

    /// Thrown to stop at anything this encoder does not write as `JSONEncoder` would.
    fileprivate struct Unsupported: Error {}

    fileprivate func unsupported() -> Unsupported {
        failed = true
        return Unsupported()
    }

    /// The encoder given for `superEncoder` (not supported): the encoding is marked failed.
    fileprivate func poisoned() -> any Encoder {
        failed = true
        return self
    }

    /// Encodes `value` into ``bytes``; false when `JSONEncoder` must do it (see the type's notes).
    func encode<Value: Encodable>(_ value: Value) -> Bool {
        bytes.removeAll(keepingCapacity: true)
        open.removeAll(keepingCapacity: true)
        keyHashes.removeAll(keepingCapacity: true)
        path.removeAll(keepingCapacity: true)
        level = 0
        valueStart = 0
        failed = false
        do {
            try encodeValue(value, at: 0)
        } catch {
            return false
        }
        return !failed
    }

    // MARK: Values

    /// Encodes `value` as the value at `level` (its container, if it opens one, goes there).
    fileprivate func encodeValue<Value: Encodable>(_ value: Value, at level: Int) throws {
        if Value.self == Data.self || Value.self == URL.self || Value.self == Decimal.self { throw unsupported() }
        let (savedLevel, savedStart) = (self.level, valueStart)
        self.level = level
        valueStart = bytes.count
        try value.encode(to: self)
        if bytes.count == valueStart { throw unsupported() }
        closeContainers(downTo: level)
        (self.level, valueStart) = (savedLevel, savedStart)
    }

    /// Encodes `value` as the item of `key` (nil: of an array) in the container at `index`.
    fileprivate func encodeNested<Value: Encodable>(_ value: Value, key: (any CodingKey)?, in index: Int) throws {
        path.append(key ?? JSONIndexKey(index: open[index].items - 1))
        try encodeValue(value, at: index + 1)
        path.removeLast()
    }

    // MARK: Containers

    /// Opens the value's container at the current level, or, when the value asks again for the
    /// same kind, gives the one it has.
    fileprivate func openValueContainer(isObject: Bool) throws -> Int {
        if open.count > level {
            guard open[level].isObject == isObject else { throw unsupported() }
            return open[level].id
        }
        guard open.count == level, bytes.count == valueStart else { throw unsupported() }
        return push(isObject: isObject)
    }

    private func push(isObject: Bool) -> Int {
        nextID += 1
        open.append(Open(id: nextID, isObject: isObject, items: 0, keysStart: keyHashes.count))
        bytes.append(isObject ? UInt8(ascii: "{") : UInt8(ascii: "["))
        return nextID
    }

    /// Closes every container from `index` up (the innermost first).
    private func closeContainers(downTo index: Int) {
        while open.count > index {
            let last = open.removeLast()
            if last.isObject { keyHashes.removeSubrange(last.keysStart...) }
            bytes.append(last.isObject ? UInt8(ascii: "}") : UInt8(ascii: "]"))
        }
    }

    /// Before an item of the container `id` at `index`: closes the containers opened after it
    /// and writes the separator (and the key, for an object).
    fileprivate func beginItem(id: Int, at index: Int, key: String?) throws {
        guard index < open.count, open[index].id == id else { throw unsupported() }
        closeContainers(downTo: index + 1)
        if open[index].items > 0 { bytes.append(UInt8(ascii: ",")) }
        open[index].items += 1
        guard let key else { return }
        let hash = key.hashValue
        let start = open[index].keysStart
        if keyHashes.count - start >= Self.maximumTrackedKeys || keyHashes[start...].contains(hash) { throw unsupported() }
        keyHashes.append(hash)
        writeString(key)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Opens a container as the next item of the container `id` at `index`.
    fileprivate func openNested(isObject: Bool, id: Int, at index: Int, key: String?) throws -> Int {
        try beginItem(id: id, at: index, key: key)
        return push(isObject: isObject)
    }

    /// A single value at the current level: only when the value wrote nothing yet.
    fileprivate func beginSingleValue() throws {
        guard open.count == level, bytes.count == valueStart else { throw unsupported() }
    }

    // MARK: Scalars

    fileprivate func writeNull() { bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }

    fileprivate func write(_ value: Bool) {
        if value {
            bytes.append(contentsOf: [0x74, 0x72, 0x75, 0x65])
        } else {
            bytes.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
        }
    }

    fileprivate func write(_ value: some FixedWidthInteger) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        writeDigits(value.magnitude)
    }

    private func writeDigits(_ magnitude: some UnsignedInteger & FixedWidthInteger) {
        var value = UInt64(magnitude)
        // At most 20 digits, written backwards into a fixed scratch space.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { scratch in
            var index = 20
            repeat {
                index -= 1
                scratch[index] = UInt8(truncatingIfNeeded: value % 10) + UInt8(ascii: "0")
                value /= 10
            } while value != 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[index..<20]))
        }
    }

    /// A finite number as `JSONEncoder` writes it: Swift's shortest form without a trailing `.0`.
    fileprivate func write(_ value: some BinaryFloatingPoint & LosslessStringConvertible) throws {
        guard value.isFinite else { throw unsupported() }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    /// A string with `JSONEncoder`'s escapes: `"`, `\` and the control characters (`\b`, `\f`,
    /// `\n`, `\r`, `\t`, else `\u00xx`); everything else as its UTF-8 bytes.
    fileprivate func writeString(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                runStart = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The encoders of one journal: each caller borrows one, so encoding takes no lock while
    /// the value's own code runs, and concurrent appenders each have their own buffer.
    final class Pool: Sendable {
        private let idle = Locked<[StreamingJSONEncoder]>([])

        /// Runs `body` with an encoder of the pool (made when none is idle), then returns it.
        func withEncoder<Result>(_ body: (StreamingJSONEncoder) throws -> Result) rethrows -> Result {
            let encoder = idle.withLock { $0.popLast() } ?? StreamingJSONEncoder()
            defer { idle.withLock { if $0.count < 8 { $0.append(encoder) } } }
            return try body(encoder)
        }
    }
}

/// An array item's key in a coding path, as `JSONEncoder` names it (`Index N`).
private struct JSONIndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String

    init(index: Int) {
        intValue = index
        stringValue = "Index \(index)"
    }

    init?(intValue: Int) { self.init(index: intValue) }
    init?(stringValue: String) { nil }
}

// MARK: The Encoder protocols

extension StreamingJSONEncoder: Encoder {
    var codingPath: [any CodingKey] { path }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // A failure is remembered in the container: its first write throws.
        let id = (try? openValueContainer(isObject: true)) ?? -1  // -1: already marked failed
        return KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, id: id, index: level, codingPath: path))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let id = (try? openValueContainer(isObject: false)) ?? -1
        return UnkeyedContainer(encoder: self, id: id, index: level, codingPath: path)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValue(encoder: self, codingPath: path)
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: StreamingJSONEncoder
    let id: Int
    let index: Int
    let codingPath: [any CodingKey]

    private func begin(_ key: Key) throws { try encoder.beginItem(id: id, at: index, key: key.stringValue) }

    mutating func encodeNil(forKey key: Key) throws {
        try begin(key)
        encoder.writeNull()
    }
    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try begin(key)
        encoder.write(value)
    }
    mutating func encode(_ value: String, forKey key: Key) throws {
        try begin(key)
        encoder.writeString(value)
    }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        try begin(key)
        try encoder.write(value)
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        try begin(key)
        try encoder.write(value)
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try integer(value, key) }

    private func integer(_ value: some FixedWidthInteger, _ key: Key) throws {
        try begin(key)
        encoder.write(value)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try begin(key)
        try encoder.encodeNested(value, key: key, in: index)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = (try? encoder.openNested(isObject: true, id: id, at: index, key: key.stringValue)) ?? -1
        return KeyedEncodingContainer(
            KeyedContainer<NestedKey>(encoder: encoder, id: nested, index: index + 1, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = (try? encoder.openNested(isObject: false, id: id, at: index, key: key.stringValue)) ?? -1
        return UnkeyedContainer(encoder: encoder, id: nested, index: index + 1, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { encoder.poisoned() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { encoder.poisoned() }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: StreamingJSONEncoder
    let id: Int
    let index: Int
    let codingPath: [any CodingKey]
    private(set) var count = 0

    init(encoder: StreamingJSONEncoder, id: Int, index: Int, codingPath: [any CodingKey]) {
        (self.encoder, self.id, self.index, self.codingPath) = (encoder, id, index, codingPath)
    }

    private mutating func begin() throws {
        try encoder.beginItem(id: id, at: index, key: nil)
        count += 1
    }

    mutating func encodeNil() throws {
        try begin()
        encoder.writeNull()
    }
    mutating func encode(_ value: Bool) throws {
        try begin()
        encoder.write(value)
    }
    mutating func encode(_ value: String) throws {
        try begin()
        encoder.writeString(value)
    }
    mutating func encode(_ value: Double) throws {
        try begin()
        try encoder.write(value)
    }
    mutating func encode(_ value: Float) throws {
        try begin()
        try encoder.write(value)
    }
    mutating func encode(_ value: Int) throws { try integer(value) }
    mutating func encode(_ value: Int8) throws { try integer(value) }
    mutating func encode(_ value: Int16) throws { try integer(value) }
    mutating func encode(_ value: Int32) throws { try integer(value) }
    mutating func encode(_ value: Int64) throws { try integer(value) }
    mutating func encode(_ value: UInt) throws { try integer(value) }
    mutating func encode(_ value: UInt8) throws { try integer(value) }
    mutating func encode(_ value: UInt16) throws { try integer(value) }
    mutating func encode(_ value: UInt32) throws { try integer(value) }
    mutating func encode(_ value: UInt64) throws { try integer(value) }

    private mutating func integer(_ value: some FixedWidthInteger) throws {
        try begin()
        encoder.write(value)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try begin()
        try encoder.encodeNested(value, key: nil, in: index)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let key = JSONIndexKey(index: count)
        let nested = (try? encoder.openNested(isObject: true, id: id, at: index, key: nil)) ?? -1
        count += 1
        return KeyedEncodingContainer(
            KeyedContainer<NestedKey>(encoder: encoder, id: nested, index: index + 1, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let key = JSONIndexKey(index: count)
        let nested = (try? encoder.openNested(isObject: false, id: id, at: index, key: nil)) ?? -1
        count += 1
        return UnkeyedContainer(encoder: encoder, id: nested, index: index + 1, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { encoder.poisoned() }
}

private struct SingleValue: SingleValueEncodingContainer {
    let encoder: StreamingJSONEncoder
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws {
        try encoder.beginSingleValue()
        encoder.writeNull()
    }
    mutating func encode(_ value: Bool) throws {
        try encoder.beginSingleValue()
        encoder.write(value)
    }
    mutating func encode(_ value: String) throws {
        try encoder.beginSingleValue()
        encoder.writeString(value)
    }
    mutating func encode(_ value: Double) throws {
        try encoder.beginSingleValue()
        try encoder.write(value)
    }
    mutating func encode(_ value: Float) throws {
        try encoder.beginSingleValue()
        try encoder.write(value)
    }
    mutating func encode(_ value: Int) throws { try integer(value) }
    mutating func encode(_ value: Int8) throws { try integer(value) }
    mutating func encode(_ value: Int16) throws { try integer(value) }
    mutating func encode(_ value: Int32) throws { try integer(value) }
    mutating func encode(_ value: Int64) throws { try integer(value) }
    mutating func encode(_ value: UInt) throws { try integer(value) }
    mutating func encode(_ value: UInt8) throws { try integer(value) }
    mutating func encode(_ value: UInt16) throws { try integer(value) }
    mutating func encode(_ value: UInt32) throws { try integer(value) }
    mutating func encode(_ value: UInt64) throws { try integer(value) }

    private func integer(_ value: some FixedWidthInteger) throws {
        try encoder.beginSingleValue()
        encoder.write(value)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try encoder.beginSingleValue()
        // The wrapped value takes this value's place (and its level).
        try encoder.encodeValue(value, at: encoder.currentLevel)
    }
}
