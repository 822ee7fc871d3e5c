import BatonJSON
import Foundation
import Logging

/// How log lines are written.
public enum LogFormat: String, Sendable, CaseIterable {
    /// One JSON object per line: `{"ts":…,"level":"info","msg":…,"request_id":…}`.
    case json
    /// logfmt: `ts=… level=info msg="…" request_id=…`.
    case logfmt
}

/// A swift-log handler writing structured lines to standard output. Written by hand because
/// swift-log ships only a plain-text stream handler and none of the mirrored packages provides
/// JSON or logfmt output; it is small and has no state beyond its level and metadata.
public struct BatonLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let format: LogFormat

    public init(label: String, level: Logger.Level, format: LogFormat) {
        self.label = label
        self.logLevel = level
        self.format = format
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let line = Self.render(
            format: format, timestamp: Date(), level: event.level, label: label, message: "\(event.message)",
            metadata: merged)
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
    }

    static func render(
        format: LogFormat, timestamp: Date, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata
    ) -> String {
        let ts = timestamp.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
        switch format {
        case .json:
            var object: JSONObject = ["ts": .string(ts), "level": .string(level.rawValue), "logger": .string(label), "msg": .string(message)]
            for key in metadata.keys.sorted() where object[key] == nil {
                object[key] = json(metadata[key]!)
            }
            return JSONValue.object(object).description
        case .logfmt:
            var parts = ["ts=\(ts)", "level=\(level.rawValue)", "logger=\(logfmtValue(label))", "msg=\(logfmtValue(message))"]
            for key in metadata.keys.sorted() {
                parts.append("\(key)=\(logfmtValue(metadata[key]!.description))")
            }
            return parts.joined(separator: " ")
        }
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): return .string(text)
        case .stringConvertible(let convertible): return .string(convertible.description)
        case .array(let values): return .array(values.map(json))
        case .dictionary(let values):
            var object = JSONObject()
            for key in values.keys.sorted() { object[key] = json(values[key]!) }
            return .object(object)
        }
    }

    /// Quotes a value when it has spaces, quotes, `=` or control characters; escapes newlines
    /// so one event is always one line.
    static func logfmtValue(_ text: String) -> String {
        let needsQuotes = text.isEmpty || text.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0.asciiValue.map { $0 < 0x20 } ?? false }
        guard needsQuotes else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            default:
                if scalar.value < 0x20 { escaped += String(format: "\\u%04x", scalar.value) } else { escaped.unicodeScalars.append(scalar) }
            }
        }
        return "\"\(escaped)\""
    }
}
