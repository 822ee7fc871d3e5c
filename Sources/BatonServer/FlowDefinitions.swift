import BatonContract
import BatonDeepLinks
import BatonFlows
import Foundation
import Logging

/// Everything under `Flows/`, loaded and cross-checked the same way by `serve`, `flows lint`,
/// `flows test` and the tests: flows and screen templates, the component contract, and the
/// deep-link allowlist.
public struct FlowDefinitions: Sendable {
    public var bundle: FlowBundle
    public var contract: ContractRegistry?
    public var allowlist: DeepLinkAllowlist?
    /// Every finding of every file, ordered by file, line and column.
    public var diagnostics: [Diagnostic]

    /// Loads `directory`. `contractDirectory` and `allowlistDirectory` default to `directory`.
    public static func load(
        directory: URL, catalog: FlowCatalog, contractDirectory: URL? = nil, allowlistDirectory: URL? = nil
    ) -> FlowDefinitions {
        let (contract, contractDiagnostics) = ContractLoader.load(directory: contractDirectory ?? directory)
        let (allowlist, allowlistDiagnostics) = DeepLinkAllowlist.load(directory: allowlistDirectory ?? directory)
        var checks: [FlowBundleCheck] = []
        if let contract { checks.append(ContractLinter(registry: contract).check) }
        if let allowlist { checks.append(allowlist.bundleCheck) }
        let bundle = FlowBundle.load(directory: directory, catalog: catalog, extraChecks: checks)
        return FlowDefinitions(
            bundle: bundle, contract: contract, allowlist: allowlist,
            diagnostics: (contractDiagnostics + allowlistDiagnostics + bundle.diagnostics).ordered)
    }

    /// Whether the definitions can be served: no errors, and a contract and allowlist present.
    public var isServable: Bool { !diagnostics.hasErrors && contract != nil && allowlist != nil }

    /// The downgrade pass with the outbound allowlist, reporting into `metrics`.
    public func fitter(metrics: BatonMetrics, buckets: ClientBuckets, logger: Logger) -> ContractFitter? {
        guard let contract else { return nil }
        var isAllowedURL: (@Sendable (String) -> Bool)?
        if let allowlist { isAllowedURL = { url in allowlist.outbound(url).isAllowed } }
        let screenFitter = ScreenFitter(registry: contract, isAllowedURL: isAllowedURL)
        return ContractFitter(fitter: screenFitter, metrics: metrics, buckets: buckets, logger: logger)
    }
}
