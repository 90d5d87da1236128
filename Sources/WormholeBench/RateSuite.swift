import Wormhole

/// Post rate from one thread and from several, against `wormhole-floor blast`. Issue 7's rule:
/// after BusIO hands emits to its I/O thread, the rate must stay within 5% of today's.
struct RateSuite {
    let context: BenchContext

    func run() throws {
        let (address, options, report) = (context.address, context.options, context.report)
        let posts = options.posts
        let threads = options.postThreads
        Console.output(
            "\npost rate: \(posts) posts per round, posted as fast as possible then flushed; "
                + "median of \(options.rateRounds) rounds (posts/s, higher is better)")
        Console.output(
            "flushed: until every post was written to the bus socket; loop only: until the last post call returned")
        Console.output(RateRow.header)
        let center = try DarwinNotificationCenter(busAddress: address)
        let names = BenchNames()
        let drain = try PostRate.Drain(center, name: try NotificationName(names.name("rate.drain")))
        let threadNames = try (0..<threads).map { try NotificationName(names.name("rate.\($0)")) }
        var floor = RateRow(label: "raw libdbus floor, 1 thread", posts: posts)
        var one = RateRow(label: "center.post, 1 thread", posts: posts)
        var many = RateRow(label: "center.post, \(threads) threads", posts: posts)
        let floorName = names.name("rate.floor")
        for round in 0..<options.rateRounds {
            Console.progress("  rate: round \(round + 1)/\(options.rateRounds)")
            for step in 0..<3 {
                switch (round + step) % 3 {
                case 0: floor.samples.append(try PostRate.floor(address, name: floorName, posts: posts))
                case 1:
                    one.samples.append(try PostRate.center(center, names: [threadNames[0]], posts: posts, drain: drain))
                default:
                    many.samples.append(try PostRate.center(center, names: threadNames, posts: posts, drain: drain))
                }
            }
        }
        Console.output(floor.line(against: nil))
        Console.output(one.line(against: floor))
        Console.output(many.line(against: floor))
        report.add(floor, suite: "rate")
        report.add(one, suite: "rate", against: floor)
        report.add(many, suite: "rate", against: floor)
        report.goal(
            "rate", "center.post 1 thread posts/s / floor (flushed)", ratio: one.median / floor.median, target: nil)
        report.goal(
            "rate", "center.post \(threads) threads posts/s / floor (flushed)", ratio: many.median / floor.median,
            target: nil)
        report.goal(
            "rate", "center.post 1 thread posts/s / floor (loop only)", ratio: one.loopMedian / floor.loopMedian,
            target: nil)
    }
}
