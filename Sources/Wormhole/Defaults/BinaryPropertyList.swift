// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The binary property-list format (`bplist00`), read into and written from ``PropertyListValue``.
///
/// FoundationEssentials has `PropertyListEncoder` and `PropertyListDecoder` (typed keys use them)
/// but not `PropertyListSerialization`, which turns a property list into untyped values; this is
/// the part of it the library needs, so that the core does not load all of Foundation. The
/// layout: the header `bplist00`, the objects, a table of their offsets, and a 32-byte trailer
/// (offset size, reference size, object count, top object, table offset; big-endian). Each
/// object starts with a marker byte: its type in the high four bits, a small length or size in
/// the low four.
enum BinaryPropertyList {
    /// Why bytes are not a binary property list this reader takes.
    struct Malformed: Error, CustomStringConvertible {
        var reason: String
        var description: String { reason }
    }

    /// Seconds between 1970 and the format's epoch (2001-01-01 UTC).
    static let epochOffset: Double = 978_307_200
    static let header: [UInt8] = Array("bplist00".utf8)
    /// Arrays and dictionaries nested deeper than this are refused (a reference cycle would be
    /// endless otherwise).
    static let maximumDepth = 512

    static func isBinary(_ bytes: some Collection<UInt8>) -> Bool { bytes.starts(with: header) }

    // MARK: Reading

    /// The top object of a binary property list.
    static func read(_ data: Data) throws(Malformed) -> PropertyListValue {
        try Array(data).withUnsafeBufferPointer { buffer throws(Malformed) in
            let reader = try Reader(buffer)
            return try reader.object(reader.top, depth: 0)
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        let offsetSize: Int
        let referenceSize: Int
        let count: Int
        let top: Int
        let tableOffset: Int

        init(_ bytes: UnsafeBufferPointer<UInt8>) throws(Malformed) {
            self.bytes = bytes
            guard bytes.count >= header.count + 32, BinaryPropertyList.isBinary(bytes) else {
                throw Malformed(reason: "not a binary property list (no bplist00 header and trailer)")
            }
            let trailer = bytes.count - 32
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            let count = Self.bigEndian(bytes, at: trailer + 8, size: 8)
            let top = Self.bigEndian(bytes, at: trailer + 16, size: 8)
            let table = Self.bigEndian(bytes, at: trailer + 24, size: 8)
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize),
                count > 0, count < UInt64(bytes.count), top < count,
                table >= UInt64(header.count), table < UInt64(trailer),
                (UInt64(trailer) - table) / UInt64(offsetSize) >= count
            else { throw Malformed(reason: "the trailer of the binary property list is inconsistent") }
            self.count = Int(count)
            self.top = Int(top)
            tableOffset = Int(table)
        }

        static func bigEndian(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int, size: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in offset..<(offset + size) { value = value << 8 | UInt64(bytes[index]) }
            return value
        }

        func need(_ offset: Int, _ size: Int) throws(Malformed) {
            guard offset >= 0, size >= 0, offset <= tableOffset, size <= tableOffset - offset else {
                throw Malformed(reason: "an object of the binary property list runs past its end (offset \(offset))")
            }
        }

        func offset(of object: Int) throws(Malformed) -> Int {
            guard object >= 0, object < count else {
                throw Malformed(reason: "reference \(object) of the binary property list names no object")
            }
            let offset = Self.bigEndian(bytes, at: tableOffset + object * offsetSize, size: offsetSize)
            guard offset >= UInt64(header.count), offset < UInt64(tableOffset) else {
                throw Malformed(reason: "object \(object) of the binary property list is out of bounds")
            }
            return Int(offset)
        }

        /// The length in a marker's low bits, or the integer object after it when they are 0xF;
        /// returns the length and where the content starts.
        func length(_ info: UInt8, after offset: Int) throws(Malformed) -> (Int, Int) {
            guard info == 0xF else { return (Int(info), offset + 1) }
            try need(offset + 1, 1)
            let marker = bytes[offset + 1]
            guard marker >> 4 == 0x1, marker & 0xF <= 3 else {
                throw Malformed(reason: "a length in the binary property list is not an integer (offset \(offset))")
            }
            let size = 1 << Int(marker & 0xF)
            try need(offset + 2, size)
            let length = Self.bigEndian(bytes, at: offset + 2, size: size)
            guard length < UInt64(tableOffset) else {
                throw Malformed(reason: "a length in the binary property list is too large (offset \(offset))")
            }
            return (Int(length), offset + 2 + size)
        }

        func references(at start: Int, count: Int) throws(Malformed) -> [Int] {
            guard count <= (tableOffset - min(start, tableOffset)) / referenceSize else {
                throw Malformed(reason: "a collection of the binary property list runs past its end (offset \(start))")
            }
            try need(start, count * referenceSize)
            return (0..<count).map { Int(Self.bigEndian(bytes, at: start + $0 * referenceSize, size: referenceSize)) }
        }

        func object(_ index: Int, depth: Int) throws(Malformed) -> PropertyListValue {
            guard depth < maximumDepth else {
                throw Malformed(reason: "the binary property list nests deeper than \(maximumDepth) levels")
            }
            let start = try offset(of: index)
            let marker = bytes[start]
            let info = marker & 0xF
            switch marker >> 4 {
            case 0x0 where marker == 0x08: return .bool(false)
            case 0x0 where marker == 0x09: return .bool(true)
            case 0x1 where info <= 4:
                let size = 1 << Int(info)
                try need(start + 1, size)
                if size == 16 {
                    // A 128-bit integer: only what fits Int is taken.
                    let high = Self.bigEndian(bytes, at: start + 1, size: 8)
                    let low = Self.bigEndian(bytes, at: start + 9, size: 8)
                    guard high == 0 || high == .max, let value = Int(exactly: Int64(bitPattern: low)),
                        (high == 0) == (value >= 0)
                    else { throw Malformed(reason: "an integer of the binary property list does not fit Int") }
                    return .integer(value)
                }
                let raw = Self.bigEndian(bytes, at: start + 1, size: size)
                // 1, 2 and 4 bytes are unsigned; 8 bytes signed.
                return .integer(size == 8 ? Int(Int64(bitPattern: raw)) : Int(raw))
            case 0x2 where info == 2:
                try need(start + 1, 4)
                return .double(Double(Float(bitPattern: UInt32(Self.bigEndian(bytes, at: start + 1, size: 4)))))
            case 0x2 where info == 3:
                try need(start + 1, 8)
                return .double(Double(bitPattern: Self.bigEndian(bytes, at: start + 1, size: 8)))
            case 0x3 where marker == 0x33:
                try need(start + 1, 8)
                let seconds = Double(bitPattern: Self.bigEndian(bytes, at: start + 1, size: 8))
                return .date(Date(timeIntervalSince1970: seconds + epochOffset))
            case 0x4:
                let (length, content) = try length(info, after: start)
                try need(content, length)
                return .data(Data(bytes[content..<(content + length)]))
            case 0x5:
                let (length, content) = try length(info, after: start)
                try need(content, length)
                guard let text = String(validating: bytes[content..<(content + length)], as: UTF8.self) else {
                    throw Malformed(
                        reason: "an ASCII string of the binary property list is not ASCII (offset \(start))")
                }
                return .string(text)
            case 0x6:
                let (length, content) = try length(info, after: start)
                guard length <= (tableOffset - min(content, tableOffset)) / 2 else {
                    throw Malformed(reason: "a string of the binary property list runs past its end (offset \(start))")
                }
                try need(content, length * 2)
                let units = (0..<length).map { UInt16(Self.bigEndian(bytes, at: content + $0 * 2, size: 2)) }
                guard let text = String(validating: units, as: UTF16.self) else {
                    throw Malformed(
                        reason: "a string of the binary property list is not valid UTF-16 (offset \(start))")
                }
                return .string(text)
            case 0xA:
                let (count, content) = try length(info, after: start)
                var values: [PropertyListValue] = []
                for reference in try references(at: content, count: count) {
                    values.append(try object(reference, depth: depth + 1))
                }
                return .array(values)
            case 0xD:
                let (count, content) = try length(info, after: start)
                let keys = try references(at: content, count: count)
                let values = try references(at: content + count * referenceSize, count: count)
                var dictionary: [String: PropertyListValue] = [:]
                for (key, value) in zip(keys, values) {
                    guard case .string(let name) = try object(key, depth: depth + 1) else {
                        throw Malformed(reason: "a dictionary key of the binary property list is not a string")
                    }
                    dictionary[name] = try object(value, depth: depth + 1)
                }
                return .dictionary(dictionary)
            default:
                throw Malformed(
                    reason: "the binary property list holds an object of a type this reader does not take "
                        + "(marker 0x\(String(marker, radix: 16)) at offset \(start))")
            }
        }
    }

    // MARK: Writing

    /// The value as a binary property list (a URL is written as its absolute string: the format
    /// has no URL type).
    static func write(_ value: PropertyListValue) -> Data {
        var objects: [[UInt8]] = []
        func add(_ value: PropertyListValue) -> Int {
            let index = objects.count
            objects.append([])
            var encoded: [UInt8]
            switch value {
            case .bool(let flag): encoded = [flag ? 0x09 : 0x08]
            case .integer(let integer): encoded = integerObject(integer)
            case .double(let double): encoded = [0x23] + bigEndian(double.bitPattern, size: 8)
            case .date(let date):
                encoded = [0x33] + bigEndian((date.timeIntervalSince1970 - epochOffset).bitPattern, size: 8)
            case .data(let data): encoded = marker(0x4, data.count) + Array(data)
            case .string(let text): encoded = stringObject(text)
            case .url(let url): encoded = stringObject(url.absoluteString)
            case .array(let values):
                let references = values.map(add)
                encoded = marker(0xA, references.count)
                objects[index] = encoded
                return finish(index, references)
            case .dictionary(let values):
                let sorted = values.sorted { $0.key < $1.key }
                let keys = sorted.map { add(.string($0.key)) }
                let references = keys + sorted.map { add($0.value) }
                encoded = marker(0xD, sorted.count)
                objects[index] = encoded
                return finish(index, references)
            }
            objects[index] = encoded
            return index
        }
        // Collections hold references, whose size is known once every object is counted: they
        // are kept aside and written at the end.
        var pending: [(Int, [Int])] = []
        func finish(_ index: Int, _ references: [Int]) -> Int {
            pending.append((index, references))
            return index
        }
        _ = add(value)
        let referenceSize = byteCount(UInt64(objects.count))
        for (index, references) in pending {
            for reference in references { objects[index] += bigEndian(UInt64(reference), size: referenceSize) }
        }
        var output = header
        var offsets: [UInt64] = []
        offsets.reserveCapacity(objects.count)
        for object in objects {
            offsets.append(UInt64(output.count))
            output += object
        }
        let tableOffset = UInt64(output.count)
        let offsetSize = byteCount(offsets.last ?? 0)
        for offset in offsets { output += bigEndian(offset, size: offsetSize) }
        output += [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(referenceSize)]
        output += bigEndian(UInt64(objects.count), size: 8) + bigEndian(0, size: 8) + bigEndian(tableOffset, size: 8)
        return Data(output)
    }

    /// 1, 2, 4 or 8: the bytes an unsigned number needs.
    private static func byteCount(_ value: UInt64) -> Int {
        value <= 0xFF ? 1 : value <= 0xFFFF ? 2 : value <= 0xFFFF_FFFF ? 4 : 8
    }

    private static func bigEndian(_ value: UInt64, size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(size - 1 - $0))) }
    }

    private static func integerObject(_ value: Int) -> [UInt8] {
        // Negative integers take 8 bytes (shorter forms are unsigned).
        guard value >= 0 else { return [0x13] + bigEndian(UInt64(bitPattern: Int64(value)), size: 8) }
        let size = byteCount(UInt64(value))
        return [0x10 | UInt8(size.trailingZeroBitCount)] + bigEndian(UInt64(value), size: size)
    }

    private static func marker(_ type: UInt8, _ length: Int) -> [UInt8] {
        length < 0xF ? [type << 4 | UInt8(length)] : [type << 4 | 0xF] + integerObject(length)
    }

    private static func stringObject(_ text: String) -> [UInt8] {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return marker(0x5, text.utf8.count) + Array(text.utf8) }
        let units = Array(text.utf16)
        return marker(0x6, units.count) + units.flatMap { bigEndian(UInt64($0), size: 2) }
    }
}
