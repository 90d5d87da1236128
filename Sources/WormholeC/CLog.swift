// SPDX-License-Identifier: Apache-2.0
import Glibc
import Logging
import WormholeSystem

/// `wh_log_handler`.
public typealias CLogFunction =
    @convention(c) (Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) ->
    Void
/// `wh_destroy_notify`.
public typealias CDestroyFunction = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// A C pointer the app gave, carried across threads as the app's own business.
struct CUserData: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer?
}

/// Where one context's log lines go: the app's handler, until the context is freed.
final class CLogSink: Sendable {
    private let target: Locked<(handler: CLogFunction, data: CUserData, destroy: CDestroyFunction?)?>
    let minimum: Logger.Level

    init(handler: CLogFunction, minimum: Logger.Level, data: UnsafeMutableRawPointer?, destroy: CDestroyFunction?) {
        target = Locked((handler, CUserData(pointer: data), destroy))
        self.minimum = minimum
    }

    /// Calls the handler (under the sink's lock, so `close()` never races a call).
    func emit(_ level: Logger.Level, _ label: String, _ message: String) {
        guard level >= minimum else { return }
        target.withLock { target in
            guard let target else { return }
            label.withCString { label in
                message.withCString { message in target.handler(level.cLevel, label, message, target.data.pointer) }
            }
        }
    }

    /// Stops the calls and runs the destroy function once.
    func close() {
        let closed = target.withLock { target in
            defer { target = nil }
            return target
        }
        if let closed, let destroy = closed.destroy { destroy(closed.data.pointer) }
    }
}

extension Logger.Level {
    /// `wh_log_level`.
    var cLevel: Int32 {
        switch self {
        case .trace: 0
        case .debug: 1
        case .info: 2
        case .notice: 3
        case .warning: 4
        case .error: 5
        case .critical: 6
        }
    }

    init?(cLevel: Int32) {
        let levels: [Logger.Level] = [.trace, .debug, .info, .notice, .warning, .error, .critical]
        guard levels.indices.contains(Int(cLevel)) else { return nil }
        self = levels[Int(cLevel)]
    }
}

/// The library's log lines: a context's objects log to its sink (or standard error without
/// one); the process's runtime (its loop, the doorbell), which belongs to no context, logs to
/// every live context's sink. Swift's logging system in this library is its own copy (its
/// symbols are not exported), bootstrapped once here.
enum CLogging {
    /// The sinks of the live contexts, for the runtime's lines.
    static let sinks = Locked<[ObjectIdentifier: CLogSink]>([:])
    private static let bootstrapped = Locked(false)

    /// Routes the process's lines through the sinks; once per process.
    static func bootstrap() {
        let first = bootstrapped.withLock { done in
            defer { done = true }
            return !done
        }
        if first { LoggingSystem.bootstrap { label in CLogHandler(label: label, sink: nil) } }
    }

    /// A logger for a context's objects.
    static func logger(_ label: String, sink: CLogSink?) -> Logger {
        Logger(label: label) { label in CLogHandler(label: label, sink: sink) }
    }

    /// A line of the runtime, or of a context without a sink.
    static func emit(_ level: Logger.Level, _ label: String, _ message: String) {
        let all = sinks.withLock { Array($0.values) }
        if all.isEmpty {
            guard level >= .warning else { return }
            let line = Array("libwormhole: \(label): \(level): \(message)\n".utf8)
            _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        } else {
            for sink in all { sink.emit(level, label, message) }
        }
    }
}

/// A swift-log handler that hands each line to a context's sink, or to ``CLogging/emit(_:_:_:)``.
struct CLogHandler: LogHandler {
    let label: String
    let sink: CLogSink?
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level

    init(label: String, sink: CLogSink?) {
        self.label = label
        self.sink = sink
        logLevel = sink?.minimum ?? .info
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let level = event.level
        var text = event.message.description
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        if !merged.isEmpty {
            text += " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
        if let sink { sink.emit(level, label, text) } else { CLogging.emit(level, label, text) }
    }
}
