import BatonDeepLinks
import BatonJSON
import Foundation
import Testing

/// Open-redirect and SSRF payload lists (../shared/corpora/open-redirect) with Baton's own host
/// put where they expect the trusted domain: no payload may be allowed towards any other host,
/// as a deep link or as an openUrl target.
@Suite("Open-redirect corpora")
struct OpenRedirectCorpusTests {
    let allowlist: DeepLinkAllowlist

    init() throws { allowlist = try Files.productAllowlist() }
    static let platforms = ["appclip", "ios", "android", "web", "widget", "other"]

    /// Runs `text` through every decision and checks the invariants; returns whether anything
    /// allowed it.
    @discardableResult
    func check(_ text: String, comment: String) -> Bool {
        var allowed = false
        for platform in Self.platforms {
            let decision = allowlist.match(text, platform: platform)
            Invariants.checkAllowed(text, decision, comment: comment)
            allowed = allowed || decision.isAllowed
        }
        let outbound = allowlist.outbound(text)
        Invariants.checkOutbound(text, outbound, comment: comment)
        return allowed || outbound.isAllowed
    }

    @Test("PayloadsAllTheThings payloads against the WHATWG oracle: never accepted where a browser leaves the host")
    func oracle() throws {
        let data = try Data(contentsOf: Files.corpora.appendingPathComponent("open-redirect/derived-PATT-open-redirect-whatwg-oracle.json"))
        guard case .array(let items) = try JSONValue.parse(Array(data)) else { Issue.record("not an array"); return }
        let payloads = try Files.lines("open-redirect/payloadsallthethings/Open-Redirect-payloads.txt")
            .map { $0.replacingOccurrences(of: "www.whitelisteddomain.tld", with: "app.example.com") }
        #expect(items.count == 240)
        #expect(Set(items.compactMap { $0["payload"]?.stringValue }) == Set(payloads), "the oracle covers the list")
        for item in items {
            let payload = item["payload"]!.stringValue!
            let absoluteHost = item["absolute"]?["hostname"]?.stringValue
            let staysOnHost = item["whatwg_stays_on_app_example_com"]?.boolValue == true
            if case .success(let url) = StrictURL.parse(payload) {
                // Accepted as an absolute URL: WHATWG must read it as absolute too, with the same host.
                #expect(absoluteHost != nil && (url.host ?? "") == absoluteHost, "\(payload.debugDescription)")
            }
            if check(payload, comment: "PATT") {
                #expect(staysOnHost && absoluteHost == "app.example.com", "allowed but leaves the host: \(payload.debugDescription)")
            }
        }
    }

    @Test("every list, raw and placed after Baton's own links, with app.example.com for the trusted domain")
    func lists() throws {
        let files = [
            "payloadsallthethings/Open-Redirect-payloads.txt", "payloadsallthethings/openredirects.txt",
            "payloadsallthethings/open_redirect_wordlist.txt", "seclists/SSRF_hacktricks.txt",
        ]
        var payloads: [String] = []
        for file in files {
            for line in try Files.lines("open-redirect/\(file)") {
                payloads.append(line)
                // The lists put the trusted domain here (PayloadsAllTheThings' placeholder, or
                // plain example.com in the others); Baton's is app.example.com.
                payloads.append(
                    line.contains("whitelisteddomain.tld")
                        ? line.replacingOccurrences(of: "www.whitelisteddomain.tld", with: "app.example.com")
                            .replacingOccurrences(of: "whitelisteddomain.tld", with: "app.example.com")
                        : line.replacingOccurrences(of: "example.com", with: "app.example.com"))
            }
        }
        for file in ["redirect-injection-template.txt", "redirect-urls-template.txt"] {
            for template in try Files.lines("open-redirect/fuzzdb/\(file)") {
                for target in ["evil.example", "app.example.com", "app.example.com@evil.example", "2130706433", "evil.example/app.example.com"] {
                    payloads.append(template.replacingOccurrences(of: "{target}", with: target))
                }
            }
        }
        #expect(payloads.count > 700)
        var allowed = 0
        for payload in payloads {
            // As given, and glued after each of Baton's link prefixes (where a redirect parameter
            // or path would receive it).
            for text in [payload, "https://app.example.com" + payload, "https://app.example.com/scan-and-go?location=" + payload,
                "exampleapp://scan-and-go" + payload, "exampleapp://playlist/" + payload, "https://help.example.com" + payload]
            where check(text, comment: payload) {
                allowed += 1
            }
        }
        // Glued after Baton's own prefixes, some payloads form real Baton URLs (an openUrl to
        // https://help.example.com/redirect?url=… stays on help.example.com); the invariants
        // above checked each of them.
        #expect(allowed > 0)
    }

    @Test("injection values (NUL, CRLF, naughty and right-to-left Unicode) as parameter values and paths")
    func injectionValues() throws {
        var values: [String] = []
        for file in ["NullByteRepresentations.txt", "crlf-injection.txt", "naughty-unicode.txt", "right-to-left.txt"] {
            values += try Files.lines("open-redirect/fuzzdb/\(file)")
        }
        #expect(values.count > 80)
        for value in values {
            let scan = allowlist.match("exampleapp://scan-and-go?location=UT-0001" + value, platform: "appclip")
            #expect(!scan.isAllowed, "\(value.debugDescription)")
            for text in ["exampleapp://scan-and-go?location=" + value, "https://app.example.com/playlists/" + value,
                "https://app.example.com/" + value, "https://app.example.com" + value, "tel:" + value, "mailto:" + value]
            {
                check(text, comment: value)
            }
        }
    }
}
