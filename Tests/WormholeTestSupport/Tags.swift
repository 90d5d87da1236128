// SPDX-License-Identifier: Apache-2.0
public import Testing

extension Tag {
    /// A suite of contract section 4, the command line that scripts rely on: it holds for every
    /// implementation of the tool, so Tests/cli-twin.sh runs it against another one too (the
    /// Python package's `wormhole-py`) through `WORMHOLE_TEST_CLI` (docs/testing.md).
    @Tag public static var contractCLI: Self
}

extension Trait where Self == ConditionTrait {
    /// For a test in a ``Testing/Tag/contractCLI`` suite that checks what only the Swift tool
    /// does (or says in its own words): skipped, with `reason`, when `WORMHOLE_TEST_CLI` names
    /// another implementation. Tests/cli-twin.sh lists every such exclusion.
    public static func swiftToolOnly(_ reason: Comment) -> Self {
        .disabled(if: TestProducts.commandLine != nil, reason)
    }
}
