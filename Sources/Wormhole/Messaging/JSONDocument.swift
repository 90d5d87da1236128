public import FoundationEssentials

/// A stored message as its raw JSON document, for code that forwards messages without knowing
/// their type (the `wormholectl` tool, bridges, loggers).
///
/// Listen with `as: JSONDocument.self` (or read with `MessageCenter.message(identifier:as:)`)
/// to get the document's bytes exactly as the sender stored them; they are checked to be one
/// JSON value. Raw JSON bytes are sent as a `JSONDocument` too (`passMessage(JSONDocument(data: bytes),
/// identifier:)`). Decoding one inside another `Decodable` type throws: a document is always a
/// whole message.
public struct JSONDocument: Sendable, Hashable, Decodable, CustomStringConvertible {
    /// The document's UTF-8 bytes, as stored.
    public let data: Data

    /// Wraps `data`, checking that it is exactly one JSON text (RFC 8259): one value of any
    /// type, UTF-8 without a byte-order mark, white space allowed around it. Numbers of any size
    /// are accepted and kept as written. The check is one scan of the bytes; nothing is parsed
    /// into objects.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/invalidJSON`` when it is not,
    ///   saying what is wrong and at which byte.
    public init(data: Data) throws {
        let failure = data.withUnsafeBytes { JSONSyntax.check($0) }
        if let failure {
            throw WormholeError(.invalidJSON, "not a JSON document (\(data.count) bytes): \(failure)")
        }
        self.data = data
    }

    /// Wraps bytes already checked to be one JSON text (a transient message checked on receipt).
    init(validated data: Data) {
        self.data = data
    }

    /// Always throws: a document is read from storage, not decoded from part of another one.
    public init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(
            .init(
                codingPath: decoder.codingPath,
                debugDescription: "JSONDocument is only read from a whole stored message"))
    }

    /// The document as text.
    public var text: String { String(decoding: data, as: UTF8.self) }

    /// The document on one line: white space outside strings removed, everything else (key
    /// order, number spelling, escapes) exactly as stored.
    package var compactText: String {
        var output: [UInt8] = []
        output.reserveCapacity(data.count)
        appendCompact(to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes the document as `T`.
    public func decode<T: Decodable>(as type: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(T.self, from: data)
    }

    public var description: String { compactText }

    /// Appends `compactText`'s bytes to `output` (no `String` made: for writers that reuse a buffer).
    package func appendCompact(to output: inout [UInt8]) {
        var inString = false
        var escaped = false
        data.withUnsafeBytes { bytes in
            for byte in bytes {
                if inString {
                    output.append(byte)
                    if escaped {
                        escaped = false
                    } else if byte == UInt8(ascii: "\\") {
                        escaped = true
                    } else if byte == UInt8(ascii: "\"") {
                        inString = false
                    }
                } else {
                    switch byte {
                    case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
                    case UInt8(ascii: "\""):
                        inString = true
                        output.append(byte)
                    default: output.append(byte)
                    }
                }
            }
        }
    }
}
