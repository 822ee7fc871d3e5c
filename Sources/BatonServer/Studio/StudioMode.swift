/// Whether Baton Studio (`/studio`, docs/studio.md) is served, and to whom.
public enum StudioMode: String, Sendable {
    /// Not served (the default, and production's).
    case off
    /// Served; its API answers only bearer tokens with a `"studio": true` claim
    /// (`BATON_STUDIO=true`).
    case enabled
    /// Served without a token, and mints demo users' tokens with the HS256 secret
    /// (`BATON_STUDIO=dev`, set by `scripts/run.sh`; loopback addresses only).
    case development

    /// Reads `baton.studio`: false/off, true/on, or dev.
    public init?(configurationValue value: String) {
        switch value.lowercased() {
        case "false", "off", "0", "no", "": self = .off
        case "true", "on", "1", "yes": self = .enabled
        case "dev", "development": self = .development
        default: return nil
        }
    }
}
