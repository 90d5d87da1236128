import Foundation

/// Wormhole messages of 100 B, 10 KB and 1 MB between two processes, against the floor's
/// file-plus-signal ping-pong.
struct MessageSuite {
    let context: BenchContext

    static func sizeLabel(_ size: Int) -> String {
        size >= 1_000_000 ? "\(size / 1_000_000) MB" : size >= 1_000 ? "\(size / 1_000) KB" : "\(size) B"
    }

    func run() throws {
        let (address, options, report) = (context.address, context.options, context.report)
        Console.output("\nmessages (encode, atomic write, post, wake, read, decode), one process each side")
        Console.output(BenchRow.header)
        for size in [100, 10_000, 1_000_000] {
            let label = Self.sizeLabel(size)
            Console.progress("message: \(label)")
            let count = size >= 1_000_000 ? options.messageRoundTrips / 10 : options.messageRoundTrips
            let work = try ScratchDirectory("files")
            let session = try MessageSession(address: address, root: work.path + "/containers", size: size)
            let perRound = max(1, count / options.rounds)
            let warm = min(options.warmup, perRound)
            let merged = try AlternatingRounds(label: "message \(label)", rounds: options.rounds).measure([
                .init(name: "floor") {
                    try FloorPingPong.run(address, count: perRound, warmup: warm, files: (work.path, size))
                },
                .init(name: "wormhole") { try session.run(count: perRound, warmup: warm) },
            ])
            session.stop()
            withExtendedLifetime(work) {}
            let floor = BenchRow(label: "floor, \(label) files", histogram: merged[0])
            let ours = BenchRow(label: "Wormhole, \(label) JSON", histogram: merged[1])
            Console.output(floor.line(against: nil))
            Console.output(ours.line(against: floor))
            report.add(floor, suite: "message")
            report.add(ours, suite: "message", against: floor, target: 1.5)
            report.goal("message", "Wormhole \(label) p50 / floor p50", ratio: ours.median / floor.median, target: 1.5)
        }
    }
}
