import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// Set once the readiness line is written.
private let isReady = Atomic<Bool>(false)

/// Writes the readiness line (the subscriptions in `keeping` are active), runs `afterReady`
/// (work whose output must follow the readiness line), and serves deliveries until a handler
/// or the timeout exits the process. The subscriptions are kept alive until then: releasing
/// them would cancel them.
func announceReadyAndServe(keeping subscriptions: Any, afterReady: () -> Void = {}) -> Never {
    writeError("ready")
    isReady.store(true, ordering: .releasing)
    afterReady()
    withExtendedLifetime(subscriptions) { dispatchMain() }
}

/// Arms `--timeout` for the whole command, connecting included: after `seconds` it exits 124
/// when a count was asked for and 0 otherwise. Armed before anything touches the bus, so a bus
/// that never answers cannot hold the command past it; if the command was not listening yet,
/// one line on standard error says so.
func armTimeout(_ seconds: Double?, countGiven: Bool) {
    guard let seconds else { return }
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
        if !isReady.load(ordering: .acquiring) {
            writeError("wormhole: timed out after \(seconds) s before listening started (the bus did not answer in time)")
        } else if countGiven {
            writeError("wormhole: timed out after \(seconds) s before the requested count")
        }
        exit(countGiven ? 124 : 0)
    }
}
