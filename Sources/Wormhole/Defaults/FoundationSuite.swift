// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// A suite that Foundation's `UserDefaults(suiteName:)` wrote on Linux, read for
/// ``GroupDefaults/importFoundationSuite(named:configDirectory:)``.
///
/// Foundation keeps such a suite in `<directory>/<suite>.plist`, where `directory` is
/// `$XDG_CONFIG_HOME`, else `$HOME/.config`. Every property-list type is read with its type (an
/// `<integer>` stays an `Int`, a `<real>` a `Double`, `<date>` a `Date`, `<data>` `Data`). The
/// plist is only read, never changed.
struct FoundationSuite {
    /// The plist, `<directory>/<suite>.plist`.
    let path: String
    let data: Data

    /// Reads the plist of the suite `name` in `configDirectory` (nil: `$XDG_CONFIG_HOME`, else
    /// `$HOME/.config`).
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/io`` when the plist is missing or
    ///   cannot be read.
    init(named name: String, configDirectory: String?) throws {
        let directory = try configDirectory ?? Self.configDirectory()
        path = directory + "/" + name + ".plist"
        guard !name.isEmpty, !name.contains("/"), let data = FileManager.default.contents(atPath: path) else {
            throw WormholeError(
                .io, value: path, "cannot read the Foundation suite \(NameRules.quoted(name)) at '\(path)'")
        }
        self.data = data
    }

    /// Every value of the suite.
    ///
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/decodingFailed`` when the plist is not
    ///   a property list of a dictionary.
    func values() throws -> [String: PropertyListValue] {
        let object: PropertyListValue
        do {
            object =
                BinaryPropertyList.isBinary(data) ? try BinaryPropertyList.read(data) : try XMLPropertyList.read(data)
        } catch {
            throw WormholeError(.decodingFailed, value: path, "'\(path)' is not a property list: \(error)")
        }
        guard case .dictionary(let dictionary) = object else {
            throw WormholeError(.decodingFailed, value: path, "'\(path)' is a property list but not a dictionary")
        }
        return dictionary
    }

    /// `$XDG_CONFIG_HOME`, else `$HOME/.config` (where Foundation on Linux keeps suites).
    static func configDirectory(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> String {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") { return config }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.config" }
        throw WormholeError(
            .noContainerRoot, "cannot find Foundation's suites: neither $XDG_CONFIG_HOME nor $HOME is an absolute path")
    }
}
