/// Commands that exercise group containers and message storage.
let storageCommands: [String: @Sendable ([String]) throws -> Void] = [:]
