import Dispatch
import Foundation

/// What the hidden helper commands share.
enum HelperProcess {
    /// Writes `ready` on standard error (the subscriptions in `keeping` are active) and serves
    /// deliveries until a handler exits the process or the bench stops it.
    static func announceReadyAndServe(keeping subscriptions: Any) -> Never {
        Console.progress("ready")
        withExtendedLifetime(subscriptions) { dispatchMain() }
    }
}
