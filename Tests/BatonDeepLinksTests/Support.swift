import BatonDeepLinks
import BatonFlows
import Foundation
import Testing

/// Files the tests read: the package's own (Flows/, Tests/Fixtures/) and the shared corpora,
/// which sit beside the package root both in a worktree and in the main checkout.
enum Files {
    static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("no package root above \(#filePath)")
    }()

    static let corpora = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/corpora")

    static func text(_ url: URL) throws -> String {
        try String(decoding: Data(contentsOf: url), as: UTF8.self)
    }

    /// Non-empty lines of a corpus list, exactly as written (no trimming: whitespace is part of
    /// some payloads).
    static func lines(_ relativePath: String) throws -> [String] {
        try text(corpora.appendingPathComponent(relativePath))
            .split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    struct AllowlistDoesNotLoad: Error, CustomStringConvertible {
        var diagnostics: [Diagnostic]
        var description: String { diagnostics.map(\.description).joined(separator: "\n") }
    }

    private static let productAllowlistResult: Result<DeepLinkAllowlist, AllowlistDoesNotLoad> = {
        let source = (try? text(packageRoot.appendingPathComponent("Flows/deeplinks.yaml"))) ?? ""
        let (allowlist, diagnostics) = DeepLinkAllowlist.load(source: source, file: "Flows/deeplinks.yaml")
        return allowlist.map { .success($0) } ?? .failure(AllowlistDoesNotLoad(diagnostics: diagnostics))
    }()

    /// The product's allowlist, `Flows/deeplinks.yaml`, read once.
    static func productAllowlist() throws -> DeepLinkAllowlist {
        try productAllowlistResult.get()
    }
}

/// Properties every decision must have, whatever the input: what the tests over hostile corpora
/// check for each payload.
enum Invariants {
    /// Hosts the product allowlist's entries lead from.
    static let entryHosts: Set<String> = ["app.example.com", "scan-and-go", "playlist", "home"]
    static let outboundHosts: Set<String> = ["app.example.com", "help.example.com"]

    /// An allowed link parses strictly to one of the entries' hosts, and Foundation's RFC 3986
    /// parser (a second opinion, never the decision) finds the same host; its values hold no
    /// control characters, slashes, backslashes or percent signs.
    static func checkAllowed(_ text: String, _ decision: DeepLinkDecision, comment: String = "") {
        guard case .allowed(_, let parameters, _) = decision else { return }
        guard case .success(let url) = StrictURL.parse(text), let host = url.host else {
            Issue.record("allowed but not strict: \(text.debugDescription) \(comment)")
            return
        }
        #expect(entryHosts.contains(host), "allowed for host \(host): \(text.debugDescription) \(comment)")
        #expect(foundationHost(text) == host, "Foundation reads another host: \(text.debugDescription)")
        for value in parameters.values {
            let risky = value.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || "/\\%".unicodeScalars.contains($0) }
            #expect(!risky, "allowed value \(value.debugDescription) from \(text.debugDescription)")
        }
    }

    /// An allowed openUrl target goes to a listed host, or is an opaque tel:/mailto: URL, or the
    /// app's own scheme.
    static func checkOutbound(_ text: String, _ decision: OutboundDecision, comment: String = "") {
        guard decision == .allowed else { return }
        guard case .success(let url) = StrictURL.parse(text) else {
            Issue.record("outbound allowed but not strict: \(text.debugDescription) \(comment)")
            return
        }
        switch url.scheme {
        case "https":
            #expect(outboundHosts.contains(url.host ?? ""), "outbound to \(url.host ?? "-"): \(text.debugDescription) \(comment)")
            #expect(foundationHost(text) == url.host, "Foundation reads another host: \(text.debugDescription)")
        case "tel", "mailto": #expect(url.isOpaque, "\(text.debugDescription)")
        case "exampleapp": #expect(foundationHost(text) == url.host, "Foundation reads another host: \(text.debugDescription)")
        default: Issue.record("outbound allowed for scheme \(url.scheme): \(text.debugDescription) \(comment)")
        }
    }

    /// The host as Foundation's RFC 3986 parser finds it, in its ASCII form (`encodedHost`:
    /// `host` decodes xn-- labels into Unicode, and is nil when they are not valid Punycode).
    static func foundationHost(_ text: String) -> String? {
        URLComponents(string: text)?.encodedHost?.lowercased()
    }
}
