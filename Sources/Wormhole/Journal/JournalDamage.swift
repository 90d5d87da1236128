// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// A range of sequence numbers a reader cannot deliver, and why (contract §6, v1.2).
///
/// Readers report each range once, as a ``WormholeError`` whose ``WormholeError/journalDamage``
/// is this value (code ``WormholeError/Code/journalGap`` for ``Reason/retention``,
/// ``WormholeError/Code/journalDamaged`` otherwise), then go on with the next readable record.
/// ``JournalStatus/damaged`` and `Journal.check()` list the damaged ranges of a whole journal.
public struct JournalDamage: Sendable, Hashable, CustomStringConvertible {
    /// Why the records cannot be read. The raw values are the tokens `journal stat` and
    /// `journal check` print.
    public enum Reason: String, Sendable, Hashable, CaseIterable {
        /// Removed by retention before the reader read them: not damage (never in
        /// ``JournalStatus/damaged``).
        case retention
        /// A segment between present ones is missing.
        case missing
        /// A segment ends early: it stops without a seal before the next segment's first record,
        /// or an append numbered past a stored consumer cursor that was beyond the last whole frame.
        case truncated
        /// A segment's name is held by something that is not a segment Wormhole wrote (a
        /// directory, FIFO, symlink, a file without the segment header, or a misnamed segment).
        case foreign
        /// A frame does not match its checksum (or its length or number is impossible).
        case checksum
    }

    /// The first sequence number that cannot be delivered.
    public var from: UInt64
    /// The last one (exact where the framing allows, else the narrowest known bound).
    public var to: UInt64
    /// The segment's file name (for a missing segment, the name it should have).
    public var file: String
    /// Why.
    public var reason: Reason
    /// What was found, for people (offset, checksum values, what holds the name).
    public var detail: String

    /// Creates a damage report (for tests and adapters).
    package init(from: UInt64, to: UInt64, file: String, reason: Reason, detail: String = "") {
        self.from = from
        self.to = to
        self.file = file
        self.reason = reason
        self.detail = detail
    }

    /// How many sequence numbers the range holds.
    package var count: UInt64 { to >= from ? to - from + 1 : 0 }

    /// `records A..B: reason (file F)`.
    public var description: String {
        "records \(from)..\(to): \(reason.rawValue) (file \(file)\(detail.isEmpty ? "" : ", \(detail)"))"
    }

    /// The error a reader reports this range with: one line, starting `records A..B`.
    func error(identifier: MessageIdentifier, directory: String) -> WormholeError {
        let path = directory + "/" + file
        var error: WormholeError
        switch reason {
        case .retention:
            error = WormholeError(
                .journalGap, value: String(to &+ 1),
                "records \(from)..\(to) of journal '\(identifier)' were removed by retention before this reader "
                    + "read them; going on at \(to &+ 1)")
        default:
            let what: String
            switch reason {
            case .missing: what = "segment file '\(path)' is missing"
            case .truncated: what = "segment file '\(path)' is truncated"
            case .foreign: what = "'\(path)' is not a segment this journal wrote (foreign)"
            default: what = "a frame of segment file '\(path)' has a bad checksum"
            }
            error = WormholeError(
                .journalDamaged, value: path,
                "records \(from)..\(to) of journal '\(identifier)' cannot be read (\(reason.rawValue)): \(what)"
                    + (detail.isEmpty ? "" : " (\(detail))") + "; going on at the next readable record "
                    + "(see docs/journal-format.md, 'Damage')")
        }
        error.journalDamage = self
        return error
    }
}

extension WormholeError.Code {
    /// A range of journal records cannot be read (a missing, truncated or foreign segment, a bad
    /// checksum): the error's ``WormholeError/journalDamage`` says which and why. Readers report it
    /// once and go on with the next readable record.
    public static let journalDamaged = WormholeError.Code("journalDamaged")
}
