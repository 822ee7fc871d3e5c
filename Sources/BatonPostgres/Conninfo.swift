import CLibPQ
import Foundation

/// Helpers for libpq connection strings.
public enum Conninfo {
    /// Parses `conninfo` (URI or `key=value`) with libpq's own parser and returns its settings.
    public static func parse(_ conninfo: String) throws -> [String: String] {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            let message = errorMessage.map { String(cString: $0) } ?? "invalid connection string"
            if let errorMessage { PQfreemem(errorMessage) }
            throw PostgresError(code: .connectionFailed, message: message.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        defer { PQconninfoFree(options) }
        var settings: [String: String] = [:]
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val { settings[String(cString: keyword)] = String(cString: value) }
            cursor += 1
        }
        return settings
    }

    /// Returns `conninfo` as `key=value` pairs with some settings replaced (for example another
    /// `dbname` on the same server).
    public static func replacing(_ conninfo: String, with overrides: [String: String]) throws -> String {
        var settings = try parse(conninfo)
        for (key, value) in overrides { settings[key] = value }
        return written(settings)
    }

    /// Returns `conninfo` as `key=value` pairs without the settings named in `keys`, so that
    /// libpq's defaults (or the caller's own, such as ``PostgresConnection/Limits``) apply.
    public static func removing(_ keys: Set<String>, from conninfo: String) throws -> String {
        written(try parse(conninfo).filter { !keys.contains($0.key) })
    }

    private static func written(_ settings: [String: String]) -> String {
        settings.sorted { $0.key < $1.key }.map { "\($0.key)='\(escape($0.value))'" }.joined(separator: " ")
    }

    /// The same settings with the secrets hidden (the password, and the client key's
    /// `sslpassword`), for logs and error messages.
    public static func redacted(_ conninfo: String) -> String {
        guard var settings = try? parse(conninfo) else { return "<unparsable connection string>" }
        for secret in ["password", "sslpassword"] where settings[secret] != nil { settings[secret] = "***" }
        return settings.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    /// `value` as a conninfo value: single-quoted, so spaces and quotes in it are kept.
    static func quoted(_ value: String) -> String { "'\(escape(value))'" }

    private static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
    }
}

