import Logging
import Synchronization

/// Keeps what is logged through its loggers, for tests that look at what an operator would read.
public final class LogCapture: Sendable {
    /// One logged line: its level, message and metadata (values as text).
    public struct Line: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]
    }

    private let captured = Mutex<[Line]>([])

    public init() {}

    /// What was logged so far, in order.
    public var lines: [Line] { captured.withLock { $0 } }

    /// A logger whose lines (at `level` and above) this capture keeps.
    public func logger(level: Logger.Level = .debug) -> Logger {
        var logger = Logger(label: "baton-test") { _ in Handler(capture: self) }
        logger.logLevel = level
        return logger
    }

    fileprivate func append(_ line: Line) { captured.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var logLevel: Logger.Level = .debug
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged = metadata
            if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
            if let extra = event.metadata { merged.merge(extra) { $1 } }
            capture.append(Line(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}
