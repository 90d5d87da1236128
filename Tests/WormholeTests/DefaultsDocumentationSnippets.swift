// The Swift snippets of README.md ("Shared defaults") and of the DocC article SharedDefaults, as
// they are written there, so that the compiler checks them. Never run (they use the session bus).
// When you change a snippet there, change it here.

import Dispatch
import Foundation
import Wormhole
import WormholeDBus

/// README.md, "Shared defaults": the smallest complete program, as a function.
private func readmeSharedDefaults() throws {
    let defaults = try GroupDefaults(applicationGroupIdentifier: "group.com.example.watch")
    if CommandLine.arguments.count > 1 && CommandLine.arguments[1] != "watch" {
        try defaults.set(CommandLine.arguments[1], forKey: "currency")   // stored, then posted
        defaults.flush()
    } else {
        print("currency:", defaults.string(forKey: "currency") ?? "none")
        let observer = try defaults.observe("currency", on: .queue(.main)) { change in
            print("currency:", change.value?.description ?? "removed")
        }
        withExtendedLifetime(observer) { dispatchMain() }
    }
}

extension GroupDefaults.Keys {
    fileprivate static let snippetCurrency = GroupDefaults.Key<String>("currency", default: "EUR")
    fileprivate static let snippetLaunches = GroupDefaults.Key<Int>("launches", default: 0)
}

/// SharedDefaults.md: overview, typed keys, transaction; GroupDefaults.update's doc comment.
private func doccSharedDefaults() throws {
    let defaults = try GroupDefaults(applicationGroupIdentifier: "group.com.example.watch")
    try defaults.set("EUR", forKey: "currency")
    let observer = try defaults.observe("currency", on: .queue(.main)) { change in
        print("currency:", change.value?.description ?? "removed")
    }
    withExtendedLifetime(observer) {}

    defaults[.snippetCurrency] = "USD"
    try defaults.update(.snippetLaunches) { $0 += 1 }
    try defaults.reset(.snippetCurrency)

    try defaults.transaction { suite in
        try suite.set("dark", forKey: "theme")
        try suite.set(2, forKey: "themeVersion")
    }
    try defaults.update("launches") { .integer(($0?.intValue ?? 0) + 1) }
}
