// SPDX-License-Identifier: Apache-2.0
import WormholeSystem

/// One argument of a D-Bus message: the basic types, byte arrays and string arrays.
///
/// Values of other container types that arrive on the bus are kept as
/// ``unsupported(signature:)`` so a signal that carries them is still delivered.
public enum DBusValue: Hashable, Sendable, CustomStringConvertible {
    /// `y`
    case byte(UInt8)
    /// `b`
    case boolean(Bool)
    /// `n`
    case int16(Int16)
    /// `q`
    case uint16(UInt16)
    /// `i`
    case int32(Int32)
    /// `u`
    case uint32(UInt32)
    /// `x`
    case int64(Int64)
    /// `t`
    case uint64(UInt64)
    /// `d`
    case double(Double)
    /// `s`: valid UTF-8 without NUL.
    case string(String)
    /// `o`
    case objectPath(ObjectPath)
    /// `ay`
    case bytes([UInt8])
    /// `as`
    case strings([String])
    /// Any other type, received but not decoded; carries its D-Bus signature.
    case unsupported(signature: String)

    /// The D-Bus type signature of the value.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .bytes: "ay"
        case .strings: "as"
        case .unsupported(let signature): signature
        }
    }

    /// The value as a non-negative integer, for every D-Bus integer type (`y`, `q`, `u`, `t`,
    /// `n`, `i`, `x`); `nil` for a negative integer and for any other type.
    ///
    /// Senders do not always choose `t`: dbus-python sends a Python `int` as `i` unless told
    /// otherwise, and `dbus-send` takes whatever type is typed. A reader of a count or a state
    /// accepts them all this way.
    public var nonNegativeInteger: UInt64? {
        switch self {
        case .uint64(let v): v
        case .byte(let v): UInt64(v)
        case .uint16(let v): UInt64(v)
        case .uint32(let v): UInt64(v)
        case .int16(let v): v >= 0 ? UInt64(v) : nil
        case .int32(let v): v >= 0 ? UInt64(v) : nil
        case .int64(let v): v >= 0 ? UInt64(v) : nil
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .byte(let v): "byte \(v)"
        case .boolean(let v): "boolean \(v)"
        case .int16(let v): "int16 \(v)"
        case .uint16(let v): "uint16 \(v)"
        case .int32(let v): "int32 \(v)"
        case .uint32(let v): "uint32 \(v)"
        case .int64(let v): "int64 \(v)"
        case .uint64(let v): "uint64 \(v)"
        case .double(let v): "double \(v)"
        case .string(let v): "string \(quoted(v))"
        case .objectPath(let v): "object path \(v)"
        case .bytes(let v): "\(v.count) bytes"
        case .strings(let v): "strings \(v.map(quoted))"
        case .unsupported(let signature): "value of type '\(signature)'"
        }
    }
}
