import BatonDeepLinks
import Testing

/// Each rejection rule of the strict parser, with hostile examples; and what it accepts.
@Suite("Strict URL parser")
struct StrictURLTests {
    struct Refusal: Sendable, CustomTestStringConvertible {
        let input: String
        let reason: DeepLinkReason
        var testDescription: String { "\(input.debugDescription) → \(reason.label)" }
    }

    static func refused(_ reason: DeepLinkReason, _ inputs: String...) -> [Refusal] {
        inputs.map { Refusal(input: $0, reason: reason) }
    }

    static let refusals: [Refusal] =
        refused(.tooLong, "https://app.example.com/playlists/" + String(repeating: "a", count: 2049))
        + refused(
            .badCharacter,
            "java\tscript:alert(1)", "java\nscript:alert(1)", " https://app.example.com/", "https://app.example.com/\n",
            "https://app.example.com/scan-and-go?location=UT 0001", "https://app.example.com\\@evil.example",
            "https:\\\\evil.example", "https://app.example.com/\u{0}", "https://app.example.com/\u{7F}",
            "https://app.example.com/\u{A0}", "https://app.example.com/\u{3000}", "https://app.example.com/\u{202E}moc.live",
            "https://app.example.com/\u{200B}", "https://app.example.com/\u{FEFF}", "https://app.example.com/caf\u{E9}",
            "https://app.example.com/<script>", "https://app.example.com/a|b", "https://app.example.com/?q={x}",
            "https://app.example.com/#a#b", "https://app.example.com/[x]")
        + refused(
            .badScheme,
            "//app.example.com/scan-and-go", "/scan-and-go", "scan-and-go?location=UT-0001", "HTTPS://app.example.com/",
            "Exampleapp://scan-and-go", "1https://app.example.com/", "https:app.example.com/scan-and-go",
            "https:/app.example.com/", "http:evil.example", ":foo", "ex_ample://host")
        + refused(
            .userinfo,
            "https://app.example.com@evil.example", "https://user:pass@app.example.com/", "https://@app.example.com/",
            "https://app.example.com%2F@evil", "https://app.example.com:443@evil.example/", "exampleapp://x@scan-and-go")
        + refused(
            .badHost,
            "https://\u{430}pp.example.com", "https://b\u{FC}cher.example/", "https://app%2eexample.com/", "https://%61pp.example.com/",
            "https:///scan-and-go", "exampleapp:///scan-and-go", "exampleapp://?location=UT-0001", "https://app.example.com./",
            "https://.app.example.com/", "https://app..example.com/", "https://0x7f.1/", "https://2130706433/",
            "https://0177.0.0.1/", "https://127.1/", "https://127.0.0.1/", "https://app.example.com.127.0.0.1/",
            "https://0x7f000001/", "https://foo.0x/", "https://[::1]/", "https://[::ffff:127.0.0.1]/", "https://a_b.example/",
            "https://-app.example.com/", "https://app-.example.com/", "https://app.example.com*/",
            "https://" + String(repeating: "a", count: 64) + ".example/")
        + refused(
            .badPort,
            "https://app.example.com:/", "https://app.example.com:0/", "https://app.example.com:65536/",
            "https://app.example.com:0443/", "https://app.example.com:44x/", "https://app.example.com:443:443/")
        + refused(
            .badPath,
            "https://app.example.com/playlists/..", "https://app.example.com/./playlists/1", "https://app.example.com/playlists/%2e%2e",
            "https://app.example.com/playlists/.%2E", "https://app.example.com/playlists/%2E", "https://app.example.com/a/.../b",
            "https://app.example.com/playlists/a%2fb", "https://app.example.com/playlists/a%2Fb",
            "https://app.example.com/playlists/a%5cb", "https://app.example.com/playlists/%00", "https://app.example.com/a%0d%0ab",
            "https://app.example.com//evil.example", "https://app.example.com/a//b", "https://app.example.com/%zz",
            "https://app.example.com/%", "https://app.example.com/%C0%AF", "mailto:%zz")
        + refused(
            .badQuery,
            "exampleapp://scan-and-go?location", "exampleapp://scan-and-go?=UT-0001", "exampleapp://scan-and-go?location=UT-0001&",
            "exampleapp://scan-and-go?&location=UT-0001", "exampleapp://scan-and-go?a=1&&b=2",
            "exampleapp://scan-and-go?loc%61tion=UT-0001", "exampleapp://scan-and-go?location=%zz",
            "exampleapp://scan-and-go?location=%C0%80", "exampleapp://scan-and-go?lo:cation=UT-0001")
        + refused(.fragment, "https://help.example.com/a#%zz")

    @Test("each rule refuses its hostile examples with its reason", arguments: refusals)
    func refuses(_ refusal: Refusal) {
        switch StrictURL.parse(refusal.input) {
        case .success(let url):
            Issue.record("accepted with host \(url.host ?? "-")")
        case .failure(let rejection):
            #expect(rejection.reason == refusal.reason, "\(rejection.detail)")
            #expect(!rejection.detail.isEmpty)
        }
    }

    @Test("2048 bytes is the limit, counted in UTF-8 bytes")
    func lengthLimit() throws {
        let prefix = "https://app.example.com/playlists/"
        let exact = prefix + String(repeating: "a", count: StrictURL.maxBytes - prefix.utf8.count)
        #expect(exact.utf8.count == 2048)
        #expect(throws: Never.self) { try StrictURL(parsing: exact) }
        #expect(StrictURL.parse(exact + "a").failureReason == .tooLong)
        // Multi-byte text counts by bytes, and non-ASCII is refused anyway; too long is said first.
        #expect(StrictURL.parse(prefix + String(repeating: "é", count: 1100)).failureReason == .tooLong)
    }

    @Test("components of a custom-scheme link, an https link and opaque URLs")
    func components() throws {
        let scan = try StrictURL(parsing: "exampleapp://scan-and-go?location=UT-0001")
        #expect(scan.scheme == "exampleapp")
        #expect(scan.host == "scan-and-go")
        #expect(scan.port == nil)
        #expect(scan.pathSegments == [])
        #expect(scan.query == [QueryParameter(name: "location", value: "UT-0001")])
        #expect(scan.fragment == nil)

        let universal = try StrictURL(parsing: "https://APP.Example.COM:443/playlists/p%20q/?a=x%2By&b=c+d&e=#top")
        #expect(universal.host == "app.example.com")
        #expect(universal.port == 443)
        #expect(universal.hasDefaultPort)
        #expect(universal.pathSegments == ["playlists", "p%20q", ""])
        #expect(universal.query == [.init(name: "a", value: "x+y"), .init(name: "b", value: "c+d"), .init(name: "e", value: "")])
        #expect(universal.fragment == "top")

        let tel = try StrictURL(parsing: "tel:+44-20-7946-0000")
        #expect(tel.isOpaque)
        #expect(tel.host == nil)
        #expect(tel.path == "+44-20-7946-0000")
        let mail = try StrictURL(parsing: "mailto:help@example.com?subject=Parcel%20UT-0001")
        #expect(mail.isOpaque)
        #expect(mail.path == "help@example.com")
        #expect(mail.query == [.init(name: "subject", value: "Parcel UT-0001")])

        #expect(try StrictURL(parsing: "https://app.example.com").pathSegments == [])
        #expect(try StrictURL(parsing: "https://app.example.com/").pathSegments == [])
        #expect(try StrictURL(parsing: "https://app.example.com/a/").pathSegments == ["a", ""])
        #expect(try StrictURL(parsing: "https://app.example.com/scan-and-go?").query == [])
        #expect(try StrictURL(parsing: "https://xn--bcher-kva.example/").host == "xn--bcher-kva.example")
        #expect(try StrictURL(parsing: "https://app.example.com:8443/").port == 8443)
        #expect(try StrictURL(parsing: "https://10.example.com/").host == "10.example.com")
    }
}

extension Result where Failure == URLRejection {
    var failureReason: DeepLinkReason? {
        if case .failure(let rejection) = self { return rejection.reason }
        return nil
    }
}
