// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Wormhole messages of 100 B, 10 KB and 1 MB between two processes, against the floor's
/// file-plus-signal ping-pong: the Codable path (JSONEncoder/JSONDecoder), the raw-document
/// path (`JSONDocument`, no codec), and the codec's own cost per hop; then 100-B transient
/// messages (in the signal, not stored; Codable and raw) against the floor's notification-only
/// ping-pong and the mailbox path, in the same rounds.
struct MessageSuite: BenchSuite {
    let context: BenchContext

    /// The ratio target of each row against the floor (p50).
    static let rawTarget = 1.5
    static let codableTarget = 1.5
    /// Above this size the codec dominates: the Codable row is a baseline, and its target is on
    /// what is left once the codec's cost is taken out.
    static let codableTargetLimit = 100_000

    static func sizeLabel(_ size: Int) -> String {
        size >= 1_000_000 && size % 1_000_000 == 0
            ? "\(size / 1_000_000) MB" : size >= 1_000 && size % 1_000 == 0 ? "\(size / 1_000) KB" : "\(size) B"
    }

    func run() throws {
        Console.output("\nmessages (encode, atomic write, post, wake, read, decode), one process each side")
        Console.output(BenchRow.header)
        for size in options.messageSizeList {
            let label = Self.sizeLabel(size)
            Console.progress("message: \(label)")
            let count = size >= 1_000_000 ? options.messageRoundTrips / 10 : options.messageRoundTrips
            let work = try ScratchDirectory("files")
            let session = try MessageSession(address: address, root: work.path + "/containers", size: size)
            let raw = try MessageSession(address: address, root: work.path + "/containers", size: size, mode: .raw)
            // What the default watch beside the bus costs, at the smallest size only.
            let busOnly =
                size == options.messageSizeList.first
                ? try MessageSession(address: address, root: work.path + "/containers", size: size, mode: .rawBusOnly)
                : nil
            let (perRound, warm) = context.rounds(of: count)
            var rows: [AlternatingRounds.Side] = [
                .init(name: "floor") {
                    try FloorPingPong.run(address, count: perRound, warmup: warm, files: (work.path, size))
                },
                .init(name: "wormhole") { try session.run(count: perRound, warmup: warm) },
                .init(name: "raw") { try raw.run(count: perRound, warmup: warm) },
                .init(name: "codec") { try CodecCost.run(count: perRound, warmup: warm, size: size) },
            ]
            if let busOnly {
                rows.append(.init(name: "raw, bus only") { try busOnly.run(count: perRound, warmup: warm) })
            }
            let merged = try AlternatingRounds(label: "message \(label)", rounds: options.rounds).measure(rows)
            session.stop()
            raw.stop()
            busOnly?.stop()
            withExtendedLifetime(work) {}
            let floor = BenchRow(label: "floor, \(label) files", histogram: merged[0])
            let ours = BenchRow(label: "Wormhole, \(label) JSON", histogram: merged[1])
            let document = BenchRow(label: "Wormhole, \(label) raw JSONDocument", histogram: merged[2])
            let codec = BenchRow(label: "JSON codec alone, \(label)", histogram: merged[3], isRoundTrip: false)
            let codableTarget = size < Self.codableTargetLimit ? Self.codableTarget : nil
            report.publish(
                [
                    (floor, nil, nil), (ours, floor, codableTarget), (document, floor, Self.rawTarget),
                    (codec, floor, nil),
                ],
                suite: "message")
            report.goal(
                "message", "Wormhole \(label) p50 / floor p50", ratio: ours.median / floor.median, target: codableTarget
            )
            report.goal(
                "message", "Wormhole \(label) JSON p50 - codec p50, / floor p50",
                ratio: (ours.median - codec.median) / floor.median, target: Self.codableTarget)
            report.goal(
                "message", "raw JSONDocument \(label) p50 / floor p50", ratio: document.median / floor.median,
                target: Self.rawTarget)
            if busOnly != nil {
                let alone = BenchRow(label: "Wormhole, \(label) raw, bus only", histogram: merged[4])
                report.publish([(alone, floor, nil)], suite: "message")
                report.goal(
                    "message", "raw \(label) p50 / raw on the bus only p50",
                    ratio: document.median / alone.median, target: nil)
            }
        }
        try runTransient()
    }

    /// Transient messages of 100 B (encode, emit, route, decode; no file), against the raw
    /// notification floor (libdbus, no payload, no file) and the 100-B mailbox path.
    private func runTransient() throws {
        let size = 100
        Console.output(
            "\ntransient messages (\(Self.sizeLabel(size)) JSON in the signal, nothing stored), one process each side")
        Console.output(BenchRow.header)
        Console.progress("message: transient \(Self.sizeLabel(size))")
        let work = try ScratchDirectory("files")
        let transient = try MessageSession(
            address: address, root: work.path + "/containers", size: size, mode: .transient)
        let raw = try MessageSession(address: address, root: work.path + "/containers", size: size, mode: .transientRaw)
        let mailbox = try MessageSession(address: address, root: work.path + "/containers", size: size)
        let (perRound, warm) = context.rounds(of: options.messageRoundTrips)
        let merged = try AlternatingRounds(label: "transient", rounds: options.rounds).measure([
            .init(name: "floor") { try FloorPingPong.run(address, count: perRound, warmup: warm) },
            .init(name: "transient") { try transient.run(count: perRound, warmup: warm) },
            .init(name: "raw") { try raw.run(count: perRound, warmup: warm) },
            .init(name: "mailbox") { try mailbox.run(count: perRound, warmup: warm) },
        ])
        transient.stop()
        raw.stop()
        mailbox.stop()
        withExtendedLifetime(work) {}
        let floor = BenchRow(label: "floor, notification only", histogram: merged[0])
        let ours = BenchRow(label: "transient, 100 B Codable", histogram: merged[1])
        let document = BenchRow(label: "transient, 100 B JSONDocument", histogram: merged[2])
        let stored = BenchRow(label: "mailbox, 100 B Codable", histogram: merged[3])
        report.publish(
            [(floor, nil, nil), (ours, floor, 1.15), (document, floor, 1.15), (stored, floor, nil)], suite: "message")
        report.goal(
            "message", "transient 100 B p50 / notification floor p50", ratio: ours.median / floor.median, target: 1.15)
        report.goal(
            "message", "transient JSONDocument p50 / notification floor p50", ratio: document.median / floor.median,
            target: 1.15)
        report.goal(
            "message", "transient 100 B p50 / mailbox 100 B p50", ratio: ours.median / stored.median, target: nil)
    }
}
