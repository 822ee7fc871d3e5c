import BatonDeepLinks
import BatonFlows
import Testing

/// Reading `deeplinks.yaml`: every problem reported with its exact position, nothing used when
/// anything is wrong; and the lint against known flows and screens.
@Suite("Deep-link allowlist loading")
struct AllowlistLoadingTests {
    func load(_ source: String) -> (DeepLinkAllowlist?, [String]) {
        let (allowlist, diagnostics) = DeepLinkAllowlist.load(source: source, file: "deeplinks.yaml")
        return (allowlist, diagnostics.map(\.description))
    }

    @Test("a purpose-broken file: each diagnostic with its line, column and message")
    func brokenFixture() throws {
        let source = try Files.text(Files.packageRoot.appendingPathComponent("Tests/Fixtures/deeplinks/broken.yaml"))
        let (allowlist, diagnostics) = DeepLinkAllowlist.load(source: source, file: "deeplinks/broken.yaml")
        #expect(allowlist == nil)
        #expect(diagnostics.map(\.description) == [
            "deeplinks/broken.yaml:8:28: error: pattern '^UT-[0-9' is not a valid regular expression: expected ']'",
            "deeplinks/broken.yaml:8:40: error: unknown key 'maxLenght' in query parameter 'location' of entry 'scan-and-go'; did you mean 'maxLength'?",
            "deeplinks/broken.yaml:9:26: error: unknown platform 'iOS'; did you mean 'ios'? (platforms: ios, android, web, appclip, widget, other)",
            "deeplinks/broken.yaml:12:17: error: 'locaton' is not a parameter of entry 'scan-and-go'; did you mean 'location'?",
            "deeplinks/broken.yaml:13:3: error: entry 'playlist' needs platforms: a list from ios, android, web, appclip, widget, other",
            "deeplinks/broken.yaml:15:9: error: {id} needs a rule under path: (id: { pattern: ... })",
            "deeplinks/broken.yaml:16:9: error: the url pattern 'https://user@app.example.com/playlists/{id}' is not a strict URL: 'user@' before the host is userinfo; links never carry it (the host is what follows the '@')",
            "deeplinks/broken.yaml:17:5: error: unknown key 'platfroms' in entry 'playlist'; did you mean 'platforms'?",
            "deeplinks/broken.yaml:18:13: error: entry 'playlist' leads to a flow or a screen, not both",
            "deeplinks/broken.yaml:21:12: error: 'exampleapp://scan-and-go' can never be chosen: 'exampleapp://scan-and-go' (entry 'scan-and-go') comes first and takes every link it would",
            "deeplinks/broken.yaml:28:13: error: 'App.Example.com' must be a plain lowercase ASCII host name (no port, path or uppercase)",
            "deeplinks/broken.yaml:28:30: error: '*.example.com' is not a plain lowercase ASCII host name: '*' is not allowed in a host name ('*.example.com')",
            "deeplinks/broken.yaml:29:3: error: javascript: URLs are never allowed as openUrl targets",
            "deeplinks/broken.yaml:30:3: warning: http: links leave the app unencrypted; prefer https",
            "deeplinks/broken.yaml:30:3: error: outbound rule 'http' must list its hosts (hosts: [app.example.com])",
        ])
    }

    @Test("URL patterns: strict, whole-segment {params}, the same params in every url, no query")
    func patterns() {
        let entry = { (urls: String, rest: String) in
            "links:\n  e:\n    urls: \(urls)\n    platforms: [ios]\n    screen: s\n\(rest)"
        }
        #expect(load(entry("[\"exampleapp://x/a{id}\"]", "    path: { id: { pattern: x } }\n")).1 == [
            "deeplinks.yaml:3:12: error: in 'exampleapp://x/a{id}', a {parameter} must be a whole path segment",
            "deeplinks.yaml:6:13: error: path parameter 'id' is not a {segment} of any url of entry 'e'",
        ])
        #expect(load(entry("[\"exampleapp://x?a=1\"]", "")).1 == [
            "deeplinks.yaml:3:12: error: a url pattern has no query or fragment; list query parameters under query:"
        ])
        #expect(load(entry("[\"exampleapp://x/{a}\", \"https://app.example.com/{b}\"]", "    path: { a: { pattern: x }, b: { pattern: x } }\n")).1 == [
            "deeplinks.yaml:3:34: error: every url of entry 'e' must have the same {parameters} as 'exampleapp://x/{a}'"
        ])
        #expect(load(entry("[\"exampleapp://x/{a}/{a}\"]", "    path: { a: { pattern: x } }\n")).1 == [
            "deeplinks.yaml:3:12: error: '{a}' appears twice in 'exampleapp://x/{a}/{a}'",
            "deeplinks.yaml:6:13: error: path parameter 'a' is not a {segment} of any url of entry 'e'",
        ])
        #expect(load(entry("[\"https://App.example.com/\"]", "")).1 == [
            "deeplinks.yaml:3:12: error: write the host of 'https://App.example.com/' in lowercase ('app.example.com')"
        ])
        #expect(load(entry("[\"https://0x7f.1/\"]", "")).1 == [
            "deeplinks.yaml:3:12: error: the url pattern 'https://0x7f.1/' is not a strict URL: the host '0x7f.1' is an IP address or ends in a number; only names are accepted"
        ])
        #expect(load(entry("[\"exampleapp:scan\"]", "")).1 == [
            "deeplinks.yaml:3:12: error: 'exampleapp:scan' is not scheme://host/path; deep links always have a host"
        ])
        #expect(load(entry("[\"exampleapp://x/{id}\"]", "    path: { id: { pattern: x, required: false } }\n")).1 == [
            "deeplinks.yaml:6:41: error: path parameters are always required"
        ])
        #expect(load(entry("[\"exampleapp://x\"]", "    query: { q: { maxLength: 0 } }\n")).1 == [
            "deeplinks.yaml:6:14: error: query parameter 'q' of entry 'e' needs pattern: a regular expression its whole value must match",
            "deeplinks.yaml:6:30: error: maxLength must be a whole number ≥ 1, found '0'",
        ])
        #expect(load(entry("[\"exampleapp://x/{id}\"]", "    path: { id: { pattern: x } }\n    query: { id: { pattern: x } }\n")).1 == [
            "deeplinks.yaml:7:14: error: 'id' is both a path and a query parameter of entry 'e'"
        ])
    }

    @Test("entries: names, targets, platforms, parameter mapping")
    func entries() {
        #expect(load("links:\n  Scan:\n    urls: [\"exampleapp://x\"]\n    platforms: [ios, ios]\n").1 == [
            "deeplinks.yaml:2:3: error: entry 'Scan' needs flow: <name> or screen: <name>",
            "deeplinks.yaml:2:3: error: entry name 'Scan' must be lowercase letters, digits, '-' or '_', starting with a letter",
            "deeplinks.yaml:4:22: error: platform 'ios' is listed twice",
        ])
        #expect(load("links:\n  e:\n    urls: [\"exampleapp://x\"]\n    platforms: []\n    flow: F\n    params: { a: b }\n").1 == [
            "deeplinks.yaml:4:16: error: platforms must be a non-empty list such as [ios, android]",
            "deeplinks.yaml:5:11: error: flow name 'F' must be lowercase letters, digits, '-' or '_', starting with a letter",
            "deeplinks.yaml:6:18: error: 'b' is not a parameter of entry 'e'; the entry has none",
        ])
        #expect(load("links:\n  e:\n    urls: [\"exampleapp://x\"]\n    query: { a: { pattern: x }, b: { pattern: x } }\n    platforms: [ios]\n    flow: f\n    params: { a: a }\n").1 == [
            "deeplinks.yaml:4:33: warning: link parameter 'b' is accepted but passed to nothing under params:"
        ])
        #expect(load("lnks: {}\n").1 == ["deeplinks.yaml:1:1: error: unknown key 'lnks' in the allowlist file; did you mean 'links'?"])
        #expect(load("links: []\n").1 == ["deeplinks.yaml:1:8: error: links must be a mapping of entry names to entries"])
        #expect(load("links:\n  a: { b: c }\n  a: {}\n").1.count == 1, "duplicate keys are a YAML error")
    }

    @Test("outbound rules: schemes, hosts, ports, patterns")
    func outboundRules() {
        #expect(load("outbound:\n  HTTPS: { hosts: [a.example] }\n  tel: { pattern: \"[\" }\n  ftp: {}\n").1 == [
            "deeplinks.yaml:2:3: error: 'HTTPS' is not a scheme (lowercase letters, digits, '+', '-', '.', starting with a letter)",
            "deeplinks.yaml:3:19: error: pattern '[' is not a valid regular expression: expected custom character class members",
            "deeplinks.yaml:4:3: error: outbound rule 'ftp' must list its hosts (hosts: [app.example.com])",
        ])
        #expect(load("outbound:\n  https: { hosts: [a.example, a.example, \"a.example:8443\", a.example/x], ports: [0, 8443], pattern: x }\n").1 == [
            "deeplinks.yaml:2:31: error: host 'a.example' is listed twice",
            "deeplinks.yaml:2:42: error: 'a.example:8443' must be a plain lowercase ASCII host name (no port, path or uppercase)",
            "deeplinks.yaml:2:60: error: 'a.example/x' must be a plain lowercase ASCII host name (no port, path or uppercase)",
            "deeplinks.yaml:2:82: error: a port must be a whole number ≥ 1, found '0'",
            "deeplinks.yaml:2:101: error: outbound rule 'https': pattern is for opaque URLs (tel:, mailto:) and hosts for scheme://host URLs; choose one",
        ])
        let (allowlist, diagnostics) = load("outbound:\n  https: { hosts: [app.example.com], ports: [8443] }\n  exampleapp: {}\n")
        #expect(diagnostics == [])
        #expect(allowlist?.outbound("https://app.example.com:8443/") == .allowed)
        #expect(allowlist?.outbound("https://app.example.com:8444/").reason == .badPort)
        #expect(allowlist?.outbound("exampleapp://anything/at/all") == .allowed)
        #expect(allowlist?.outbound("exampleapp://x:1/").reason == .badPort)
        #expect(allowlist?.outbound("tel:+441234567").reason == .schemeNotAllowed)
    }

    @Test("a port in a pattern is the one port it accepts")
    func patternPorts() {
        let (allowlist, diagnostics) = load(
            "links:\n  staging:\n    urls: [\"https://app.example.com:8443/scan-and-go\", \"https://app.example.com:443/home\"]\n    platforms: [ios]\n    screen: home\n")
        #expect(diagnostics == [])
        #expect(allowlist?.match("https://app.example.com:8443/scan-and-go", platform: "ios").isAllowed == true)
        #expect(allowlist?.match("https://app.example.com/scan-and-go", platform: "ios").reason == .badPort)
        #expect(allowlist?.match("https://app.example.com/home", platform: "ios").isAllowed == true)
    }

    @Test("lint: targets must exist and declare the parameters an entry passes")
    func lint() throws {
        let allowlist = try Files.productAllowlist()
        let flows: [String: Set<String>] = ["scan-and-go": ["location"], "playlist-create": []]
        let screens: [String: Set<String>] = ["home": [], "playlist": ["id"]]
        #expect(allowlist.lint(knownFlows: flows, knownScreens: screens) == [])
        let problems = allowlist.lint(knownFlows: ["scan-and-go": ["locationId"]], knownScreens: ["homes": [], "playlists": []])
            .map(\.description)
        #expect(problems == [
            "Flows/deeplinks.yaml:18:7: error: entry 'scan-and-go' passes 'location' to flow 'scan-and-go', which has no such parameter; did you mean 'locationId'?",
            "Flows/deeplinks.yaml:29:13: error: entry 'playlist' leads to screen 'playlist', which does not exist; did you mean 'playlists'?",
            "Flows/deeplinks.yaml:39:13: error: entry 'home' leads to screen 'home', which does not exist; did you mean 'homes'?",
        ])
    }
}
