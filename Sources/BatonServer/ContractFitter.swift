import BatonContract
import BatonJSON
import BatonRuntime
import Logging
import Synchronization

/// Fits every screen and reply to the client's contract (the downgrade pass), counts what it
/// did, and logs each blocked outbound URL once per origin.
public final class ContractFitter: ReplyFitter {
    public let fitter: ScreenFitter
    let metrics: BatonMetrics
    let buckets: ClientBuckets
    let logger: Logger
    private let loggedBlocks = Mutex<Set<String>>([])

    public init(fitter: ScreenFitter, metrics: BatonMetrics, buckets: ClientBuckets, logger: Logger) {
        self.fitter = fitter
        self.metrics = metrics
        self.buckets = buckets
        self.logger = logger
    }

    public var registry: ContractRegistry { fitter.registry }

    /// The platform Baton Studio renders a screen with to read it before the downgrade pass
    /// (it then fits it itself, component by component). No request can carry it:
    /// ``ClientContext`` keeps only the known platforms, so a client never gets an unfitted reply.
    public static let unfittedPlatform = "studio:unfitted"

    public func fit(_ reply: JSONValue, profile: ClientProfile, origin: String) -> FittedReply {
        if profile.platform == Self.unfittedPlatform { return FittedReply(bytes: JSONEncoding.encode(reply)) }
        let version = registry.effectiveVersion(profile.contract) ?? registry.oldest
        let client = ScreenFitter.Client(contract: version, capabilities: profile.capabilities)
        let (bytes, report) = reply["type"] == "componentScreen"
            ? fitter.encodeScreen(reply, for: client) : fitter.encodeReply(reply, for: client)
        return FittedReply(bytes: bytes) { [self] in publish(report, profile: profile, origin: origin) }
    }

    /// Counts a fit and logs what it blocked: once per delivered reply, after its transaction.
    private func publish(_ report: FitReport, profile: ClientProfile, origin: String) {
        metrics.recordFit(
            report, platform: buckets.platform(profile),
            contract: buckets.contract(profile.contract, oldest: registry.oldest, newest: registry.newest),
            appVersion: buckets.appVersion(profile.appVersion))
        for url in report.blockedURLs {
            let key = origin + " " + url
            let first = loggedBlocks.withLock { logged in
                guard logged.count < 10_000 else { return false }
                return logged.insert(key).inserted
            }
            if first {
                logger.warning(
                    "openUrl blocked by the outbound allowlist; its component was dropped",
                    metadata: ["origin": .string(origin), "url": .string(String(url.prefix(200)))])
            }
        }
    }
}
