import BatonContract
import BatonDeepLinks
import BatonJSON
import Synchronization

/// The contract and deep-link allowlist being served, beside the runtime's flows: swapped
/// together when a release is served, read once per request.
public final class LiveDefinitions: Sendable {
    /// What a request reads.
    public struct Served: Sendable {
        public var contract: ContractRegistry
        public var allowlist: DeepLinkAllowlist?
        /// The release served (`files` for `Flows/` on disk), and the ramping one.
        public var release: String
        public var ramp: String?
        public var rampPercent: Int
    }

    private let state: Mutex<Served>
    /// Bumped by every ``serve(_:)``: what was made from the served contract is made again.
    private let servings = Atomic<Int>(0)
    /// The last release this replica could not load, and why (nil once one loads).
    private let failure = Mutex<(release: String, reason: String)?>(nil)

    public init(contract: ContractRegistry, allowlist: DeepLinkAllowlist?, release: String = "files") {
        state = Mutex(Served(contract: contract, allowlist: allowlist, release: release, ramp: nil, rampPercent: 0))
    }

    public var served: Served { state.withLock { $0 } }
    public var contract: ContractRegistry { state.withLock { $0.contract } }
    public var allowlist: DeepLinkAllowlist? { state.withLock { $0.allowlist } }

    /// How many times definitions were swapped in (0: the ones it started with).
    public var generation: Int { servings.load(ordering: .acquiring) }

    func serve(_ served: Served) {
        state.withLock { $0 = served }
        servings.add(1, ordering: .releasing)
        failure.withLock { $0 = nil }
    }

    func failed(release: String, reason: String) {
        failure.withLock { $0 = (release, reason) }
    }

    /// What `/readyz` shows about the flows served.
    var readiness: JSONValue {
        let served = self.served
        var object: JSONObject = ["release": .string(served.release)]
        if let ramp = served.ramp {
            object["ramp"] = ["release": .string(ramp), "percent": .int(served.rampPercent)]
        }
        if let failure = failure.withLock({ $0 }) {
            object["failed"] = ["release": .string(failure.release), "reason": .string(String(failure.reason.prefix(500)))]
        }
        return .object(object)
    }
}
