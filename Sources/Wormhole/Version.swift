/// The package's version and the contract version it implements, in one place: `wormholectl
/// --version` and `wormholectl bench --version` print them. Not API.
package enum WormholeVersion {
    /// The package's version (semantic versioning; see `docs/public-api.md`).
    package static let package = "2.0.0"
    /// The wire and storage contract this build implements (docs/contract.md).
    package static let contract = "1.4"
    /// What `--version` prints: `2.0.0 (contract 1.4)`.
    package static let description = "\(package) (contract \(contract))"
}
