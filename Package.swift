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
    // Linux only: the package needs libdbus, epoll, eventfd and inotify (no platforms entry
    // claims an Apple OS it has never been built on).
    // What other packages use: the Wormhole library (it re-exports the few D-Bus layer types its
    // API names) and the `wormholectl` tool. WormholeDBus is a target of this package only, which
    // its tools, examples and tests depend on directly. The tools and examples below are
    // executable targets without products: SwiftPM still builds each as a binary named after
    // its target.
    products: [
        .library(name: "Wormhole", targets: ["Wormhole"]),
        .executable(name: "wormholectl", targets: ["WormholeCLI"]),
        // libwormhole, the C library (docs/c.md): `scripts/libwormhole.sh` builds it and installs
        // it as libwormhole.so.1 with wormhole.h and wormhole-1.pc. Its link flags live in its
        // own target below, never in a target of the Wormhole product.
        .library(name: "wormhole-c", type: .dynamic, targets: ["WormholeC"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.2.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
        // `swift package generate-documentation` (Tests/docs.sh); a plugin, linked into nothing.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Layer 0: what Swift cannot import from the Linux headers the process's machinery uses
        // (epoll, eventfd, inotify, the CMSG_* macros, prctl).
        .systemLibrary(name: "CWormholeSystem"),
        // Layer 1: the process's machinery: the one event loop and its deadlines, the inotify
        // instance, the exit drain, the doorbell's sockets, and the one syscall layer (`Syscall`,
        // typed `Errno`s from swift-system) through which every module calls the system.
        .target(
            name: "WormholeSystem",
            dependencies: [
                "CWormholeSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // Layer 0: libdbus, as the system provides it.
        .systemLibrary(
            name: "CWormholeDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // Layer 2: a thin, typed Swift wrapper over libdbus (D-Bus only).
        .target(
            name: "WormholeDBus",
            dependencies: [
                "CWormholeDBus",
                "WormholeSystem",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Layer 3: Darwin-style notifications and MMWormhole-style messaging, and the process's
        // runtime object.
        .target(
            name: "Wormhole",
            dependencies: [
                "WormholeSystem",
                "WormholeDBus",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Atomics", package: "swift-atomics"),
            ]
        ),
        // Layer 4: the C library (libwormhole.so.1; the header is Sources/WormholeC/include).
        // Linked with the Swift runtime in it (-static-stdlib), exporting only the `wh_*`
        // functions (the version script), never unloaded (-z nodelete): these are the unsafe
        // flags, and only this target has them, so a package depending on the Wormhole product
        // by URL still resolves.
        .target(
            name: "WormholeC",
            dependencies: [
                "CWormholeSystem",
                "Wormhole",
                "WormholeDBus",
                "WormholeSystem",
                .product(name: "Logging", package: "swift-log"),
            ],
            // The C library's own files: its headers, its version script, its pkg-config template,
            // its Vala binding.
            exclude: ["include", "libwormhole.map", "wormhole-1.pc.in", "vala"],
            linkerSettings: [
                .unsafeFlags([
                    "-static-stdlib", "-l_FoundationCollections", "-l_FoundationCShims",
                    "-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/WormholeC/libwormhole.map",
                    "-Xlinker", "-soname=libwormhole.so.1",
                    "-Xlinker", "-z", "-Xlinker", "nodelete",
                ])
            ]
        ),
        // Layer 4: the `wormholectl` command-line tool.
        .executableTarget(
            name: "WormholeCLI",
            dependencies: [
                "Wormhole",
                "WormholeDBus",
                "WormholeSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `wormhole-bench`, the benchmark (`wormholectl bench` executes it): latency and post rate
        // against the raw libdbus floor, and the hidden helper processes it starts.
        .executableTarget(
            name: "wormhole-bench",
            dependencies: [
                "Wormhole",
                "WormholeDBus",
                "WormholeSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            path: "Sources/WormholeBench"
        ),
        // `wormhole-floor`, the raw libdbus floor the benchmark compares against: plain C, no
        // Swift above the C API.
        .executableTarget(
            name: "wormhole-floor",
            dependencies: ["CWormholeDBus"],
            path: "Sources/WormholeFloor"
        ),
        // `wormhole-test-peer`, a small peer process for cross-process tests of the D-Bus layer.
        .executableTarget(
            name: "wormhole-test-peer",
            dependencies: [
                "WormholeDBus", "WormholeSystem", "Wormhole", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/WormholeTestPeer"
        ),
        .executableTarget(
            name: "counter-watch",
            dependencies: ["Wormhole"],
            path: "Examples/Counter/Watch"
        ),
        .executableTarget(
            name: "counter-app",
            dependencies: ["Wormhole"],
            path: "Examples/Counter/App"
        ),
        // Scenario 3: a watch and its app sharing settings and a photo (Examples/Settings).
        .target(
            name: "SettingsShared",
            dependencies: ["Wormhole"],
            path: "Examples/Settings/Shared"
        ),
        .executableTarget(
            name: "settings-watch",
            dependencies: ["SettingsShared"],
            path: "Examples/Settings/Watch"
        ),
        .executableTarget(
            name: "settings-app",
            dependencies: ["SettingsShared"],
            path: "Examples/Settings/App"
        ),
        // Scenario 1: Lines (a terminal app) and LineGrabber's native-messaging host
        // (Examples/Lines, Examples/LineGrabber), sharing a LineChannel.
        .target(
            name: "LineChannel",
            dependencies: ["Wormhole"],
            path: "Examples/Lines/Channel"
        ),
        .executableTarget(
            name: "lines",
            dependencies: ["LineChannel"],
            path: "Examples/Lines/App"
        ),
        .executableTarget(
            name: "line-grabber-host",
            dependencies: ["LineChannel"],
            path: "Examples/LineGrabber/Host"
        ),
        // Scenario 4: a share extension handing items to its host app (Examples/ShareHandoff).
        .target(
            name: "ShareHandoffShared",
            dependencies: ["Wormhole"],
            path: "Examples/ShareHandoff/Shared"
        ),
        .executableTarget(
            name: "share-handoff",
            dependencies: ["ShareHandoffShared", "Wormhole"],
            path: "Examples/ShareHandoff/Handoff"
        ),
        .executableTarget(
            name: "share-host",
            dependencies: ["ShareHandoffShared", "Wormhole"],
            path: "Examples/ShareHandoff/Host"
        ),
        .target(
            name: "WormholeTestSupport",
            dependencies: ["WormholeDBus", "WormholeSystem"],
            path: "Tests/WormholeTestSupport"
        ),
        .testTarget(
            name: "WormholeDBusTests",
            dependencies: ["WormholeDBus", "WormholeSystem", "WormholeTestSupport"]
        ),
        .testTarget(
            name: "WormholeTests",
            dependencies: ["Wormhole", "WormholeDBus", "WormholeSystem", "WormholeTestSupport"]
        ),
        .testTarget(
            name: "WormholeCLITests",
            dependencies: ["Wormhole", "WormholeDBus", "WormholeSystem", "WormholeTestSupport"]
        ),
    ]
)

for target in package.targets where target.type != .system && target.name != "wormhole-floor" {
    target.swiftSettings = (target.swiftSettings ?? []) + upcomingFeatures + [.swiftLanguageMode(.v6)]
}
