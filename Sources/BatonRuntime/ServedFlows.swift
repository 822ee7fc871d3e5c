import BatonFlows
import Crypto

/// The definitions a runtime serves at one moment: one release's flows and screens, or, while
/// a release ramps up, the old release's flows for most new sessions and the new one's for a
/// stable share of subjects. Immutable; the runtime swaps it whole.
///
/// A class: every command and every screen takes the one served at its start and keeps it to
/// its end, and a copy of a reference is one retain, where a copy of these fields was eleven.
final class ServedFlows: Sendable {
    /// The flows and screen templates served (while ramping, the new release's: screens switch
    /// at once, a ramp applies to flows).
    let bundle: FlowBundle
    let fitter: any ReplyFitter
    /// The release served (`files` for `Flows/` on disk).
    let release: String
    /// Engines new sessions start on, by flow name.
    let current: [String: FlowEngine]
    let audiences: [String: FlowDefinition.Audience]
    let ramp: Ramp?
    /// Its screens as last fitted (a release's screens are its own, so the cache goes with it).
    let screens: ScreenCache
    /// What a screen's ETag hashes for the definitions served: the release (a digest of every
    /// file), the ramp, and each flow's definition hash (which tells `Flows/` on disk apart
    /// after a reload, served as release `files`). The same on every replica serving them.
    let etagSeed: [UInt8]

    /// A release being rolled out to a share of subjects.
    struct Ramp: Sendable {
        var release: String
        var percent: Int
        /// The flows the release changes, as it defines them.
        var engines: [String: FlowEngine]
    }

    init(
        bundle: FlowBundle, fitter: any ReplyFitter, release: String, ramp: (bundle: FlowBundle, release: String, percent: Int)? = nil,
        screenCacheBytes: Int
    ) {
        self.screens = ScreenCache(budget: screenCacheBytes)
        self.fitter = fitter
        self.release = release
        var seed = SHA256()
        seed.update(data: Array("\(release)\u{0}\(ramp?.release ?? "")\u{0}\(ramp?.percent ?? 0)\u{0}".utf8))
        for served in [bundle] + (ramp.map { [$0.bundle] } ?? []) {
            for (name, flow) in served.flows.sorted(by: { $0.key < $1.key }) { seed.update(data: Array("\(name)\u{0}\(flow.hash)\u{0}".utf8)) }
        }
        self.etagSeed = Array(seed.finalize())
        guard let ramp else {
            self.bundle = bundle
            self.current = bundle.engines
            self.audiences = bundle.flows.mapValues(\.audience)
            self.ramp = nil
            return
        }
        // Old flows render with the new screens; flows only the new release has are everyone's.
        self.bundle = ramp.bundle
        var current: [String: FlowEngine] = [:]
        var changed: [String: FlowEngine] = [:]
        for (name, flow) in ramp.bundle.flows {
            let engine = FlowEngine(flow: flow, screens: ramp.bundle.screens)
            if let old = bundle.flows[name] {
                current[name] = FlowEngine(flow: old, screens: ramp.bundle.screens)
                if old.hash != flow.hash { changed[name] = engine }
            } else {
                current[name] = engine
            }
        }
        self.current = current
        self.audiences = ramp.bundle.flows.mapValues(\.audience)
        self.ramp = Ramp(release: ramp.release, percent: max(0, min(100, ramp.percent)), engines: changed)
    }

    /// The engine a new session of `flow` for `subject` starts on.
    func engine(starting flow: String, for subject: String) -> FlowEngine? {
        if let ramp, let engine = ramp.engines[flow], Self.bucket(subject) < ramp.percent { return engine }
        return current[flow]
    }

    /// A subject's place in 0..<100, the same on every replica and every day.
    static func bucket(_ subject: String) -> Int {
        let digest = SHA256.hash(data: Array(subject.utf8))
        var value: UInt32 = 0
        for byte in digest.prefix(4) { value = value << 8 | UInt32(byte) }
        return Int(value % 100)
    }
}
