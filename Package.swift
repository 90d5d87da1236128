// swift-tools-version: 6.1
import PackageDescription

/// Upcoming features switched on for every Swift target (house style: one loop, no exceptions).
let upcomingFeatures: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Wormhole",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "WormholeDBus", targets: ["WormholeDBus"]),
        .library(name: "Wormhole", targets: ["Wormhole"]),
        .executable(name: "wormhole", targets: ["WormholeCLI"]),
        .executable(name: "wormhole-floor", targets: ["WormholeFloor"]),
        .executable(name: "wormhole-test-peer", targets: ["WormholeTestPeer"]),
        .executable(name: "counter-watch", targets: ["CounterWatch"]),
        .executable(name: "counter-app", targets: ["CounterApp"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.2.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
    ],
    targets: [
        // Layer 0: libdbus, as the system provides it.
        .systemLibrary(
            name: "CWormholeDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // Layer 1: a thin, typed Swift wrapper over libdbus.
        .target(
            name: "WormholeDBus",
            dependencies: [
                "CWormholeDBus",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Layer 2: Darwin-style notifications and MMWormhole-style messaging.
        .target(
            name: "Wormhole",
            dependencies: [
                "WormholeDBus",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Atomics", package: "swift-atomics"),
            ]
        ),
        // Layer 3: the `wormhole` command-line tool.
        .executableTarget(
            name: "WormholeCLI",
            dependencies: [
                "Wormhole",
                "WormholeDBus",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        // The raw libdbus floor the benchmark compares against: plain C, no Swift above the C API.
        .executableTarget(
            name: "WormholeFloor",
            dependencies: ["CWormholeDBus"]
        ),
        // A small peer process for cross-process tests of the D-Bus layer.
        .executableTarget(
            name: "WormholeTestPeer",
            dependencies: ["WormholeDBus", "Wormhole", .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(
            name: "CounterWatch",
            dependencies: ["Wormhole"],
            path: "Examples/Counter/Watch"
        ),
        .executableTarget(
            name: "CounterApp",
            dependencies: ["Wormhole"],
            path: "Examples/Counter/App"
        ),
        .target(
            name: "WormholeTestSupport",
            dependencies: ["WormholeDBus"],
            path: "Tests/WormholeTestSupport"
        ),
        .testTarget(
            name: "WormholeDBusTests",
            dependencies: ["WormholeDBus", "WormholeTestSupport"]
        ),
        .testTarget(
            name: "WormholeTests",
            dependencies: ["Wormhole", "WormholeDBus", "WormholeTestSupport"]
        ),
        .testTarget(
            name: "WormholeCLITests",
            dependencies: ["Wormhole", "WormholeDBus", "WormholeTestSupport"]
        ),
    ]
)

for target in package.targets where target.type != .system && !target.name.hasPrefix("WormholeFloor") {
    target.swiftSettings = (target.swiftSettings ?? []) + upcomingFeatures + [.swiftLanguageMode(.v6)]
}
