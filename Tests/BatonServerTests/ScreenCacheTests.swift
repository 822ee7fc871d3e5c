import BatonJSON
import BatonRuntime
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Synchronization
import Testing

@Suite("The screen cache: the same data for the same client is answered from the held screen, with fresh payloads")
struct ScreenCacheTests {
    static let device = "5b0e2c4a-7d1f-4a3b-8c9e-0f1e2d3c4b5a"

    func environment(cacheBytes: Int? = nil, clock: @escaping @Sendable () -> Date = { Date() }) async throws -> BatonEnvironment {
        let environment = try await TestApplication.environment(
            flows: TestFlows.directory, registry: TestFlows.registry(), clock: clock,
            configure: { configuration in
                if let cacheBytes { configuration.screenCacheBytes = cacheBytes }
            })
        try await TestFlows.prepare(environment.pool)
        return environment
    }

    func headers(user: String? = nil) async throws -> HTTPFields {
        var headers = deviceHeaders(Self.device)
        headers[HTTPField.Name("X-Client-Platform")!] = "ios"
        if let user { headers[.authorization] = try await TestTokens.bearer(user) }
        return headers
    }

    static func payloads(_ text: String) -> [String] {
        text.matches(of: /"payload":"([^"]*)"/).map { String($0.output.1) }
    }

    static func masked(_ text: String) -> String {
        text.replacing(/"payload":"[^"]*"/, with: #""payload":"""#)
    }

    /// The claims of each payload, nonce aside (each answer has its own).
    static func claims(_ text: String) throws -> [PayloadClaims] {
        try payloads(text).map { payload in
            var claims = try TestApplication.signer.verify(payload).get()
            #expect(claims.nonce?.isEmpty == false)
            claims.nonce = nil
            return claims
        }
    }

    static func count(_ metrics: String, _ source: String) -> Int? {
        let prefix = #"baton_screens_total{source="\#(source)"} "#
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) }
    }

    /// Checks how many screens were rendered and how many held; returns the metrics text.
    @discardableResult
    func expectScreens(
        _ client: some TestClientProtocol, rendered: Int, held: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        let metrics = try await client.execute(uri: "/metrics", method: .get).text
        #expect(Self.count(metrics, "rendered") == rendered, "\(metrics)", sourceLocation: sourceLocation)
        #expect(Self.count(metrics, "held") == held, sourceLocation: sourceLocation)
        return metrics
    }

    @Test("a screen asked for again is the held one: fresh payloads that verify, minted for this client as a render would, the rest byte for byte")
    func held() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            for user in [nil, "ada"] {
                let headers = try await headers(user: user)
                let first = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers)
                let second = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers)
                #expect(first.status == .ok && second.status == .ok)
                #expect(second.headers[.eTag] == first.headers[.eTag])
                #expect(Self.masked(second.text) == Self.masked(first.text))
                let firstPayloads = Self.payloads(first.text)
                let secondPayloads = Self.payloads(second.text)
                #expect(firstPayloads.count >= 3)
                #expect(Set(firstPayloads + secondPayloads).count == firstPayloads.count * 2, "every answer mints its own payloads")
                let claims = try Self.claims(second.text)
                #expect(claims == (try Self.claims(first.text)))
                #expect(claims.allSatisfy { $0.subject == (user.map { "user:\($0)" } ?? "device:\(Self.device)") })
            }
            try await expectScreens(client, rendered: 2, held: 2)
        }
    }

    @Test("each payload of a held screen is minted for its flow's audience: the user for one, the device for a device flow")
    func audiences() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            let headers = try await headers(user: "grace")
            let first = try await client.execute(uri: "/v3/screens/launcher", method: .get, headers: headers)
            let second = try await client.execute(uri: "/v3/screens/launcher", method: .get, headers: headers)
            let claims = try Self.claims(second.text)
            #expect(claims == (try Self.claims(first.text)))
            #expect(claims.map(\.flow) == ["note-create", "device-only"])
            #expect(claims.map(\.subject) == ["user:grace", "device:\(Self.device)"])
            try await expectScreens(client, rendered: 1, held: 1)
        }
    }

    @Test("when the start payloads' expiry moves to the next hour, the screen is rendered again, with a new ETag")
    func nextHour() async throws {
        let now = Mutex(Date())
        let app = buildApplication(try await environment(clock: { now.withLock { $0 } }))
        try await app.test(.router) { client in
            let headers = try await headers()
            let first = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers)
            let held = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers)
            #expect(held.headers[.eTag] == first.headers[.eTag])
            now.withLock { $0 += 3600 }
            let later = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers)
            #expect(later.headers[.eTag] != first.headers[.eTag])
            let expiries = Set(try Self.payloads(later.text).map { try TestApplication.signer.verify($0).get().expires })
            let before = Set(try Self.payloads(first.text).map { try TestApplication.signer.verify($0).get().expires })
            #expect(expiries.count == 1 && before.count == 1 && expiries.first! == before.first! + 3600)
            try await expectScreens(client, rendered: 2, held: 1)
        }
    }

    @Test("a change in the loaders' data is rendered, never answered from the held screen")
    func changedData() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            let headers = try await headers()
            let first = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: headers)
            #expect(try await client.execute(uri: "/v3/screens/notes", method: .get, headers: headers).text.contains("No notes yet."))
            let start = try #require(first.json["secondaryButtons"]?.arrayValue?.first?["action"]?["payload"]?.stringValue)
            let input = try await client.command(start, headers: headers)
            _ = try await client.command(try #require(input.json.payload("submit")), input: ["text": "written since"], headers: headers)
            let changed = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: headers)
            #expect(changed.text.contains("written since"))
            #expect(!changed.text.contains("No notes yet."))
            #expect(changed.headers[.eTag] != first.headers[.eTag])
            let again = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: headers)
            #expect(Self.masked(again.text) == Self.masked(changed.text))
            try await expectScreens(client, rendered: 2, held: 2)
        }
    }

    @Test("each contract version and capability set has its own fit, and every answer counts its fallbacks")
    func profiles() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            var capable = try await headers()
            capable[HTTPField.Name("X-Client-Capabilities")!] = "barcode_scanner"
            var texts: [String: [String]] = [:]
            for _ in 0..<2 {
                let plain = try await headers()
                for (uri, headers) in [("/v1/screens/gallery", plain), ("/v3/screens/gallery", plain), ("/v3/screens/gallery", capable)] {
                    let text = try await client.execute(uri: uri, method: .get, headers: headers).text
                    texts["\(uri) \(headers[HTTPField.Name("X-Client-Capabilities")!] ?? "")", default: []].append(Self.masked(text))
                }
            }
            #expect(texts.count == 3 && texts.values.allSatisfy { $0.count == 2 && $0[0] == $0[1] })
            #expect(Set(texts.values.map { $0[0] }).count == 3, "three fits, three answers")
            let metrics = try await expectScreens(client, rendered: 3, held: 3)
            // Version 1 replaces four artwork rows per answer: both answers counted.
            let artworkRows = #"baton_fallback_hits_total{component="artworkRow",fallback="detailRow",platform="ios",contract="1"} 8"#
            #expect(metrics.contains(artworkRows), "\(metrics)")
        }
    }

    @Test("BATON_SCREEN_CACHE_BYTES=0 renders every screen")
    func off() async throws {
        let app = buildApplication(try await environment(cacheBytes: 0))
        try await app.test(.router) { client in
            let headers = try await headers()
            let first = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers)
            let second = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers)
            #expect(Self.masked(second.text) == Self.masked(first.text))
            #expect(second.headers[.eTag] == first.headers[.eTag])
            try await expectScreens(client, rendered: 2, held: 0)
        }
    }

    @Test("the generations hold at most their count and cost; a found entry moves to the current one")
    func generations() {
        let cache = GenerationalCache<Int, String>(capacity: 3, costLimit: 100)
        for key in 0..<3 { cache.insert("\(key)", for: key, cost: 10) }
        #expect(cache.usage.count == 3 && cache.usage.cost == 30)
        cache.insert("3", for: 3, cost: 10)  // the current generation was full: 0…2 become the previous one
        #expect(cache.value(for: 0) == "0")  // promoted
        for key in 4..<6 { cache.insert("\(key)", for: key, cost: 10) }  // turns over again: 1 and 2 are dropped
        #expect(cache.value(for: 1) == nil && cache.value(for: 2) == nil)
        #expect(cache.value(for: 0) == "0" && cache.value(for: 3) == "3")
        #expect(cache.usage.count == 4 && cache.usage.cost == 40)

        let costly = GenerationalCache<Int, String>(capacity: 100, costLimit: 100)
        costly.insert("too big", for: 0, cost: 101)
        #expect(costly.value(for: 0) == nil)
        for key in 1...5 { costly.insert("\(key)", for: key, cost: 40) }  // turns over at 3 and at 5: {3, 4} and {5}
        #expect(costly.usage.count == 3 && costly.usage.cost == 120)
        #expect(costly.value(for: 5) == "5" && costly.value(for: 1) == nil)
        costly.insert("5 again", for: 5, cost: 10)  // replacing an entry replaces its cost
        #expect(costly.value(for: 5) == "5 again")
        #expect(costly.usage.cost == 90)

        let none = GenerationalCache<Int, String>(capacity: 0)
        none.insert("x", for: 1)
        #expect(none.value(for: 1) == nil && none.usage.count == 0)
    }
}
