import BatonDeepLinks
import BatonFlows
import Testing

/// The product allowlist (`Flows/deeplinks.yaml`): Scan & Go, playlists, home, and the
/// openUrl rules.
@Suite("Deep-link allowlist decisions")
struct AllowlistTests {
    let allowlist: DeepLinkAllowlist

    init() throws { allowlist = try Files.productAllowlist() }

    @Test("Flows/deeplinks.yaml loads with no diagnostics")
    func productFileLoads() throws {
        let source = try Files.text(Files.packageRoot.appendingPathComponent("Flows/deeplinks.yaml"))
        let (loaded, diagnostics) = DeepLinkAllowlist.load(source: source, file: "Flows/deeplinks.yaml")
        #expect(diagnostics.map(\.description) == [])
        #expect(loaded?.entries.map(\.name) == ["scan-and-go", "playlist", "home"])
        #expect(loaded?.outbound.map(\.scheme) == ["https", "tel", "mailto", "exampleapp"])
    }

    @Test("Scan & Go opens from the custom scheme and the universal link, in the App Clip too")
    func scanAndGo() {
        for url in ["exampleapp://scan-and-go?location=UT-0001", "https://app.example.com/scan-and-go?location=UT-0001"] {
            for platform in ["appclip", "ios", "android"] {
                #expect(
                    allowlist.match(url, platform: platform)
                        == .allowed(.flow("scan-and-go"), parameters: ["location": "UT-0001"], entry: "scan-and-go"), "\(url) on \(platform)")
            }
            #expect(allowlist.match(url, platform: "web").reason == .platformNotAllowed)
        }
        // Hosts are names: compared without regard to case; the default port may be written.
        #expect(allowlist.match("https://APP.example.com/scan-and-go?location=UT-0001", platform: "appclip").isAllowed)
        #expect(allowlist.match("https://app.example.com:443/scan-and-go?location=UT-0001", platform: "appclip").isAllowed)
        #expect(allowlist.match("exampleapp://SCAN-AND-GO?location=UT-0001", platform: "appclip").isAllowed)
        // "" and "/" are both the root path; any other trailing slash is a segment of its own.
        #expect(allowlist.match("exampleapp://scan-and-go/?location=UT-0001", platform: "appclip").isAllowed)
        #expect(allowlist.match("https://app.example.com/scan-and-go/?location=UT-0001", platform: "appclip").reason == .noMatchingEntry)
    }

    @Test("a playlist opens on the phone but not in the App Clip")
    func playlistPlatforms() {
        #expect(allowlist.match("exampleapp://playlist/42", platform: "appclip").reason == .platformNotAllowed)
        #expect(allowlist.match("https://app.example.com/playlists/42", platform: "appclip").reason == .platformNotAllowed)
        #expect(allowlist.match("exampleapp://playlist/42", platform: "ios") == .allowed(.screen("playlist"), parameters: ["id": "42"], entry: "playlist"))
        #expect(allowlist.match("https://app.example.com/playlists/4f1c-9a", platform: "android")
            == .allowed(.screen("playlist"), parameters: ["id": "4f1c-9a"], entry: "playlist"))
        #expect(allowlist.match("exampleapp://home", platform: "web") == .allowed(.screen("home"), parameters: [:], entry: "home"))
        #expect(allowlist.match("https://app.example.com/", platform: "widget").isAllowed)
        #expect(allowlist.match("exampleapp://playlist/42", platform: "tvos").reason == .platformNotAllowed)
        #expect(allowlist.match("exampleapp://playlist/42", platform: "IOS").reason == .platformNotAllowed)
    }

    @Test("location must match its pattern exactly", arguments: [
        "UT-1", "UT-00001", "../", "..", "UT-0001%00", "UT-0001%0A", "UT-0001%20", "ut-0001", "UT-000a", "UT+0001", "",
        "UT-0001/", "%55T-0001x", "UT-0001;x", "UT-%D9%A0%D9%A1%D9%A2%D9%A3",
    ])
    func badLocations(_ location: String) {
        let decision = allowlist.match("exampleapp://scan-and-go?location=\(location)", platform: "appclip")
        #expect(decision.reason == .parameterInvalid, "\(decision)")
    }

    @Test("missing, unknown and repeated query parameters")
    func queryRules() {
        #expect(allowlist.match("exampleapp://scan-and-go", platform: "appclip").reason == .parameterMissing)
        #expect(allowlist.match("exampleapp://scan-and-go?", platform: "appclip").reason == .parameterMissing)
        #expect(allowlist.match("exampleapp://scan-and-go?location=UT-0001&location=UT-0002", platform: "appclip").reason == .repeatedParameter)
        #expect(allowlist.match("exampleapp://scan-and-go?location=UT-0001&location=UT-0001", platform: "appclip").reason == .repeatedParameter)
        #expect(allowlist.match("exampleapp://scan-and-go?location=UT-0001&next=//evil.example", platform: "appclip").reason == .unknownParameter)
        #expect(allowlist.match("exampleapp://scan-and-go?Location=UT-0001", platform: "appclip").reason == .unknownParameter)
        #expect(allowlist.match("exampleapp://playlist/42?id=43", platform: "ios").reason == .unknownParameter)
        #expect(allowlist.match("exampleapp://scan-and-go?location=UT-0001&utm_source=nfc", platform: "appclip").reason == .unknownParameter)
    }

    @Test("path parameters: one whole segment, decoded, checked against the pattern")
    func pathParameters() {
        #expect(allowlist.match("exampleapp://playlist/a%2Fb", platform: "ios").reason == .badPath)
        #expect(allowlist.match("exampleapp://playlist/..", platform: "ios").reason == .badPath)
        #expect(allowlist.match("exampleapp://playlist/%2e%2e", platform: "ios").reason == .badPath)
        #expect(allowlist.match("exampleapp://playlist/a%20b", platform: "ios").reason == .parameterInvalid)
        #expect(allowlist.match("exampleapp://playlist/" + String(repeating: "a", count: 65), platform: "ios").reason == .parameterInvalid)
        #expect(allowlist.match("exampleapp://playlist/42/", platform: "ios").reason == .noMatchingEntry)
        #expect(allowlist.match("exampleapp://playlist/42/tracks", platform: "ios").reason == .noMatchingEntry)
        #expect(allowlist.match("exampleapp://playlist", platform: "ios").reason == .noMatchingEntry)
        #expect(allowlist.match("https://app.example.com/Playlists/42", platform: "ios").reason == .noMatchingEntry)
        #expect(allowlist.match("https://app.example.com/playlists/%34%32", platform: "ios")
            == .allowed(.screen("playlist"), parameters: ["id": "42"], entry: "playlist"))
    }

    @Test("hostile links get the reason of the rule they break")
    func hostileLinks() {
        let cases: [(String, DeepLinkReason)] = [
            ("https://app.example.com@evil.example/scan-and-go?location=UT-0001", .userinfo),
            ("https://app.example.com\\@evil.example/scan-and-go?location=UT-0001", .badCharacter),
            ("https://app.example.com.evil.example/scan-and-go?location=UT-0001", .noMatchingEntry),
            ("https://evil.example/scan-and-go?location=UT-0001", .noMatchingEntry),
            ("https://app.example.com%2F@evil/scan-and-go?location=UT-0001", .userinfo),
            ("https://\u{430}pp.example.com/scan-and-go?location=UT-0001", .badHost),
            ("https://app.example.com:8443/scan-and-go?location=UT-0001", .badPort),
            ("https://app.example.com:80/scan-and-go?location=UT-0001", .badPort),
            ("exampleapp://scan-and-go:1/?location=UT-0001", .badPort),
            ("http://app.example.com/scan-and-go?location=UT-0001", .noMatchingEntry),
            ("java\tscript:alert(1)", .badCharacter),
            ("javascript:alert(1)", .noMatchingEntry),
            ("https://0x7f.1/", .badHost),
            ("https://app.example.com./scan-and-go?location=UT-0001", .badHost),
            ("exampleapp:///scan-and-go?location=UT-0001", .badHost),
            ("exampleapp://scan-and-go?location=UT-0001#fragment", .fragment),
            ("exampleapp://scan-and-go/..?location=UT-0001", .badPath),
            ("https://app.example.com/scan-and-go/%2e%2e/playlists/1", .badPath),
            ("https://app.example.com/scan-and-go?location=UT-0001\u{0}", .badCharacter),
            ("https://app.example.com/scan-and-go?location=UT-0001 ", .badCharacter),
            ("https://app.example.com/scan-and-go?location=" + String(repeating: "U", count: 2048), .tooLong),
        ]
        for (url, reason) in cases {
            let decision = allowlist.match(url, platform: "appclip")
            #expect(decision.reason == reason, "\(url.debugDescription): \(decision)")
        }
    }

    @Test("openUrl targets: listed https hosts, tel and mailto by pattern, the app's own scheme")
    func outbound() {
        let allowed = [
            "https://app.example.com/playlists/42", "https://help.example.com/articles/returns#drop-off", "https://HELP.example.com/",
            "tel:+44-20-7946-0000", "tel:0800123456", "mailto:help@example.com", "mailto:help@example.com?subject=Parcel%20UT-0001",
            "exampleapp://playlist/42", "exampleapp://scan-and-go?location=UT-0001",
        ]
        for url in allowed { #expect(allowlist.outbound(url) == .allowed, "\(url)") }
        let blocked: [(String, DeepLinkReason)] = [
            ("https://evil.example/", .hostNotAllowed),
            ("https://app.example.com.evil.example/", .hostNotAllowed),
            ("https://help.example.com@evil.example/", .userinfo),
            ("https://help.example.com:8443/", .badPort),
            ("http://help.example.com/", .schemeNotAllowed),
            ("javascript:alert(1)", .schemeNotAllowed),
            ("data:text/html;base64,PHNjcmlwdD4=", .schemeNotAllowed),
            ("file:///etc/passwd", .badScheme),
            ("intent://scan/#Intent;scheme=zxing;end", .schemeNotAllowed),
            ("tel:*21*0800123456%23", .badPath),
            ("tel:+4420;ext=1", .badPath),
            // What follows '?' or '#' reaches the dialer too: the pattern's refusals held only before them.
            ("tel:+441234567?p=,,%2A21%2A%23", .badPath),
            ("tel:+441234567#,,*21", .badPath),
            ("tel:+441234567?", .badPath),
            ("tel://+4420", .badHost),
            ("mailto:someone@evil.example", .badPath),
            ("mailto:?to=someone@evil.example", .mailtoHeaderNotAllowed),
            ("mailto:help@example.com?cc=x@evil.example", .mailtoHeaderNotAllowed),
            // A C1 control or a line or paragraph separator in a subject is a line break to some clients.
            ("mailto:help@example.com?subject=Hi%C2%85Bcc:%20x@evil.example", .mailtoBadEncoding),
            ("mailto:help@example.com?subject=Hi%E2%80%A8Bcc:%20x@evil.example", .mailtoBadEncoding),
            ("mailto:help@example.com?body=Hi%E2%80%AEx", .mailtoBadEncoding),
            ("https:help.example.com", .badScheme),
            ("//help.example.com/", .badScheme),
        ]
        for (url, reason) in blocked {
            #expect(allowlist.outbound(url).reason == reason, "\(url): \(allowlist.outbound(url))")
        }
    }

    @Test("metric dimensions are bounded: result and a reason label, never input")
    func metricDimensions() {
        let allowed = allowlist.match("exampleapp://scan-and-go?location=UT-0001", platform: "appclip")
        #expect(allowed.metricDimensions.map { "\($0.0)=\($0.1)" } == ["result=allowed", "reason=none"])
        let rejected = allowlist.match("https://app.example.com@evil.example", platform: "ios")
        #expect(rejected.metricDimensions.map { "\($0.0)=\($0.1)" } == ["result=rejected", "reason=userinfo"])
        #expect(allowlist.outbound("javascript:alert(1)").metricDimensions.map { "\($0.0)=\($0.1)" } == ["result=blocked", "reason=scheme_not_allowed"])
        let labels = DeepLinkReason.all.map(\.label)
        #expect(Set(labels).count == labels.count)
        let snakeCase = labels.allSatisfy { $0.allSatisfy { $0.isLowercase || $0 == "_" } }
        #expect(snakeCase)
    }

    @Test("explain says what was parsed, what was tried and what was decided")
    func explain() {
        let allowed = allowlist.explain("https://app.example.com/scan-and-go?location=UT-0001", platform: "appclip")
        #expect(allowed.decision.isAllowed)
        #expect(allowed.lines == [
            #"url: "https://app.example.com/scan-and-go?location=UT-0001""#,
            "platform: appclip",
            #"parsed: scheme https, host app.example.com, default port, path /scan-and-go, query location="UT-0001""#,
            "tried 'scan-and-go' exampleapp://scan-and-go: the scheme is not exampleapp",
            "tried 'scan-and-go' https://app.example.com/scan-and-go: scheme, host, port and path fit",
            "checked 'scan-and-go': platform appclip is allowed (ios, android, appclip)",
            #"checked 'scan-and-go': location="UT-0001" matches ^UT-[0-9]{4}$"#,
            #"deep link: allowed by entry 'scan-and-go': flow scan-and-go with location="UT-0001""#,
            "as openUrl: fits the 'https:' rule",
            "as openUrl: allowed",
        ])

        let onClip = allowlist.explain("exampleapp://playlist/42", platform: "appclip")
        #expect(onClip.decision.reason == .platformNotAllowed)
        #expect(onClip.lines.contains("deep link: rejected (platform_not_allowed): entry 'playlist' does not open on appclip (only ios, android, web, widget)"))
        #expect(onClip.lines.contains("tried 'scan-and-go' exampleapp://scan-and-go: the host is not scan-and-go"))

        let hostile = allowlist.explain("https://app.example.com@evil.example/", platform: "ios")
        #expect(hostile.lines.contains { $0.hasPrefix("parsed: refused (userinfo): 'app.example.com@' before the host is userinfo") })
        #expect(hostile.outbound.reason == .userinfo)
        #expect(hostile.lines.last?.hasPrefix("as openUrl: blocked (userinfo)") == true)
    }
}
