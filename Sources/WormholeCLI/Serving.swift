import Dispatch
import Foundation

/// Writes the readiness line (the subscriptions in `keeping` are active), arms the timeout, runs
/// `afterReady` (work whose output must follow the readiness line), and serves deliveries until
/// a handler or the timeout exits the process. The subscriptions are kept alive until then:
/// releasing them would cancel them.
func announceReadyAndServe(
    keeping subscriptions: Any, timeout: Double? = nil, countGiven: Bool = false, afterReady: () -> Void = {}
) -> Never {
    writeError("ready")
    armTimeout(timeout, countGiven: countGiven)
    afterReady()
    withExtendedLifetime(subscriptions) { dispatchMain() }
}

/// After `seconds`, exits 124 when a count was asked for and 0 otherwise.
func armTimeout(_ seconds: Double?, countGiven: Bool) {
    guard let seconds else { return }
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
        if countGiven {
            writeError("wormhole: timed out after \(seconds) s before the requested count")
            exit(124)
        }
        exit(0)
    }
}
