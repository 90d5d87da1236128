import FoundationEssentials

extension GroupDefaults {
    /// Copies every value of a suite that Foundation's `UserDefaults(suiteName:)` wrote on Linux
    /// into this suite, in one write (observers see all of it at once), and returns what changed.
    ///
    /// Foundation keeps such a suite in `<directory>/<suite>.plist`, where `directory` is
    /// `$XDG_CONFIG_HOME`, else `$HOME/.config`. Every property-list type is carried over with its
    /// type (an `<integer>` stays an `Int`, a `<real>` a `Double`, `<date>` a `Date`, `<data>`
    /// `Data`). Keys already in this suite are overwritten; other keys are kept. The plist is
    /// only read, never changed.
    ///
    /// - Parameters:
    ///   - suiteName: the name given to `UserDefaults(suiteName:)`.
    ///   - configDirectory: where the plist is; nil for `$XDG_CONFIG_HOME` or `$HOME/.config`.
    /// - Throws: ``WormholeError`` with ``WormholeError/Code/io`` when the plist is missing or
    ///   cannot be read, ``WormholeError/Code/decodingFailed`` when it is not a property list of
    ///   a dictionary, ``WormholeError/Code/invalidKey`` / ``WormholeError/Code/invalidValue`` naming
    ///   a key or value that cannot be stored (nothing is written then).
    @discardableResult
    package func importFoundationSuite(named suiteName: String, configDirectory: String? = nil) throws -> WriteReport {
        let directory = try configDirectory ?? Self.foundationConfigDirectory()
        let path = directory + "/" + suiteName + ".plist"
        guard !suiteName.isEmpty, !suiteName.contains("/"), let data = FileManager.default.contents(atPath: path) else {
            throw WormholeError(
                .io, value: path, "cannot read the Foundation suite \(NameRules.quoted(suiteName)) at '\(path)'")
        }
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
        var converted: [String: PropertyListValue] = [:]
        for (key, value) in dictionary {
            _ = try notificationName(forKey: key)
            converted[key] = value.normalized
        }
        return try write { contents in for (key, value) in converted { contents[key] = value } }
    }

    /// `$XDG_CONFIG_HOME`, else `$HOME/.config` (where Foundation on Linux keeps suites).
    static func foundationConfigDirectory(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> String {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") { return config }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.config" }
        throw WormholeError(
            .noContainerRoot, "cannot find Foundation's suites: neither $XDG_CONFIG_HOME nor $HOME is an absolute path")
    }
}
