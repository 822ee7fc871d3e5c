import BatonRuntime
import Synchronization

/// Turns what clients say about themselves into bounded metric labels, so a hostile client
/// cannot create series at will: platforms from a fixed set, the contract version as served
/// (an integer within the supported range, or below it), and app versions as major.minor —
/// the first 50 distinct ones seen, everything after that `other`.
public final class ClientBuckets: Sendable {
    public static let maxAppVersions = 50
    private let appVersions = Mutex<Set<String>>([])

    public init() {}

    public func platform(_ profile: ClientProfile) -> String {
        ClientContext.platforms.contains(profile.platform) ? profile.platform : "other"
    }

    /// The contract label: the version served (requests above the newest are served as the
    /// newest), or the requested one when below the oldest (a small, bounded range).
    public func contract(_ requested: Int, oldest: Int, newest: Int) -> String {
        String(min(max(requested, 1), newest))
    }

    /// `major.minor` of a semver-like version, or `other`.
    public func appVersion(_ version: String?) -> String {
        guard let version else { return "other" }
        let parts = version.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, let major = Int(parts[0]), let minor = Int(parts[1].prefix { $0.isNumber }),
            (0...9999).contains(major), (0...9999).contains(minor)
        else { return "other" }
        let label = "\(major).\(minor)"
        return appVersions.withLock { seen in
            if seen.contains(label) { return label }
            guard seen.count < Self.maxAppVersions else { return "other" }
            seen.insert(label)
            return label
        }
    }
}
