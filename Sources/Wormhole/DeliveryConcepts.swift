// The delivery and bus concepts an app names (`DeliveryQueue`, `SubscriptionHandle`,
// `SubscriptionStream`, `BusAddress`, `BusError`) are defined in the D-Bus layer, which uses
// them too. `Wormhole` re-exports that layer, as swift-nio's `NIO` re-exports `NIOCore`, so an
// app writes `import Wormhole` alone; `WormholeDBus` stays a module of its own for code that
// talks to the bus directly.
@_exported public import WormholeDBus
