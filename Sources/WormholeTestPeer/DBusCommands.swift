/// Commands that exercise the D-Bus layer.
let dbusCommands: [String: @Sendable ([String]) throws -> Void] = [:]
