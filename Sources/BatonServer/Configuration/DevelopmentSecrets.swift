import Foundation

/// The secrets `scripts/run.sh` and `docker-compose.yml` fall back to. They are in the
/// repository, so anyone can mint a bearer token or sign a command payload with them: a server
/// using either must not be reachable from other machines unless someone said it is development.
public enum DevelopmentSecrets {
    /// The HS256 secret of `scripts/run.sh` (also `BearerAuthenticator.developmentSecret`).
    public static let jwtSecret = BearerAuthenticator.developmentSecret
    /// The payload-signing secret of `scripts/run.sh` (`BATON_SIGNING_KEYS=dev:<base64 of this>`).
    public static let signingSecret = Data("development-signing-key-not-for-production".utf8)

    /// Addresses that only this machine reaches.
    public static let loopbackHosts: Set<String> = ["127.0.0.1", "::1", "localhost"]

    /// The configuration variables that hold a development secret, in the order people set them.
    public static func inUse(_ configuration: BatonConfiguration) -> [String] {
        var names: [String] = []
        if configuration.jwtHS256Secret == jwtSecret { names.append("BATON_JWT_HS256_SECRET") }
        // Compared by the decoded bytes, under any key id: "dev:…" and "k1:…" sign alike.
        let signing = (configuration.signingKeys ?? "").split(separator: ",").contains { entry in
            guard let colon = entry.firstIndex(of: ":") else { return false }
            return Data(base64Encoded: String(entry[entry.index(after: colon)...]).trimmingCharacters(in: .whitespaces)) == signingSecret
        }
        if signing { names.append("BATON_SIGNING_KEYS") }
        return names
    }

    /// Refuses a configuration that serves a development secret on a non-loopback address
    /// without `baton.dev`; the message says what to set.
    public static func check(_ configuration: BatonConfiguration) throws(BatonConfiguration.Error) {
        let names = inUse(configuration)
        guard !names.isEmpty, !configuration.development, !loopbackHosts.contains(configuration.httpHost) else { return }
        let list = names.joined(separator: " and ")
        let one = names.count == 1
        var harm: [String] = []
        if names.contains("BATON_JWT_HS256_SECRET") { harm.append("sign in as any user") }
        if names.contains("BATON_SIGNING_KEYS") { harm.append("forge command payloads") }
        throw BatonConfiguration.Error(
            description: "\(list) \(one ? "is the public development value" : "are the public development values") "
                + "and http.host (HTTP_HOST) is \(configuration.httpHost), reachable from other machines: anyone could "
                + "\(harm.joined(separator: " and ")). Set \(list) to \(one ? "a secret" : "secrets") of your own (docs/operations.md), "
                + "bind 127.0.0.1, or pass --dev (BATON_DEV=true) if this is a development machine.")
    }
}
