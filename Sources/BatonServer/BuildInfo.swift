import Foundation

/// Facts about the running build.
enum BuildInfo {
    /// The git commit, from `BATON_COMMIT` (set by the Dockerfile and scripts), else "unknown".
    static let commit: String = {
        let value = ProcessInfo.processInfo.environment["BATON_COMMIT"] ?? ""
        let clean = value.prefix(40).filter { $0.isHexDigit }
        return clean.isEmpty ? "unknown" : String(clean)
    }()
}
