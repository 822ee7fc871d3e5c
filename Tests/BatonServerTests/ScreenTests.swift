import BatonJSON
import BatonPostgres
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite("GET /v{N}/screens: contract versions, capabilities, ETags")
struct ScreenTests {
    static let device = "8d3f6c2e-5b1a-4e7f-9c0d-2a4b6c8d0e1f"

    func environment(contract: URL? = nil) async throws -> BatonEnvironment {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry(), contract: contract)
        try await TestFlows.prepare(environment.pool)
        return environment
    }

    func headers(_ capabilities: String? = nil, platform: String = "ios") -> HTTPFields {
        var headers = deviceHeaders(Self.device)
        headers[HTTPField.Name("X-Client-Platform")!] = platform
        if let capabilities { headers[HTTPField.Name("X-Client-Capabilities")!] = capabilities }
        return headers
    }

    static func ids(_ screen: JSONValue) -> [String] {
        var ids: [String] = []
        func walk(_ value: JSONValue) {
            guard case .object(let object) = value else {
                if case .array(let items) = value { items.forEach(walk) }
                return
            }
            if let id = object["id"]?.stringValue, object["type"] != nil, object["type"] != "componentScreen" { ids.append(id) }
            for (key, member) in object where key != "action" { walk(member) }
        }
        walk(screen)
        return ids
    }

    static func type(_ screen: JSONValue, id: String) -> String? {
        var found: String?
        func walk(_ value: JSONValue) {
            switch value {
            case .object(let object):
                if object["id"]?.stringValue == id, let type = object["type"]?.stringValue { found = type }
                for (_, member) in object { walk(member) }
            case .array(let items): items.forEach(walk)
            default: break
            }
        }
        walk(screen)
        return found
    }

    @Test("the same screen as contract 1, 2 and 3, with and without barcode_scanner, differs exactly as the contract says")
    func versions() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            let v1 = try await client.execute(uri: "/v1/screens/gallery", method: .get, headers: headers("barcode_scanner")).json
            let v2 = try await client.execute(uri: "/v2/screens/gallery", method: .get, headers: headers()).json
            let v3 = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers()).json
            let v3scan = try await client.execute(uri: "/v3/screens/gallery", method: .get, headers: headers(" barcode_scanner ,\tshare_sheet\t")).json
            let v9 = try await client.execute(uri: "/v9/screens/gallery", method: .get, headers: headers("barcode_scanner,share_sheet")).json

            // Version 1: artwork → detail rows and plain header, carousel → list, no badges, no rich text,
            // the scanner as a text field; the version-2-only section is gone.
            #expect(Self.type(v1, id: "header") == "header")
            #expect(Self.type(v1, id: "row-red") == "detailRow")
            #expect(Self.type(v1, id: "carousel") == "list")
            #expect(Self.type(v1, id: "c1") == "detailRow")
            #expect(Self.type(v1, id: "scanner") == "textField")
            #expect(Self.type(v1, id: "rich") == "text")
            #expect(Self.type(v1, id: "new") == nil && Self.type(v1, id: "c2") == nil)
            #expect(v1["sections"]?.arrayValue?.map { $0["id"] } == ["rows", "scan", "strip"])
            // Start actions become commands for version 1; share is not available without the capability.
            #expect(v1["secondaryButtons"]?.arrayValue?.count == 1)
            #expect(v1["secondaryButtons"]?.arrayValue?.first?["action"]?["type"] == "command")
            #expect(v1["sections"]?.arrayValue?.first?["components"]?.arrayValue?.first?["action"]?["type"] == "command")

            // Version 2: artwork and carousels and badges as they are; no v3 types.
            #expect(Self.type(v2, id: "header") == "artworkHeader")
            #expect(Self.type(v2, id: "row-red") == "artworkRow")
            #expect(Self.type(v2, id: "carousel") == "carousel")
            #expect(Self.type(v2, id: "new") == "badge")
            #expect(Self.type(v2, id: "scanner") == "textField")
            #expect(Self.type(v2, id: "rich") == "text")
            #expect(v2["sections"]?.arrayValue?.map { $0["id"] } == ["rows", "scan", "strip", "only-new"])
            #expect(v2["sections"]?.arrayValue?.first?["components"]?.arrayValue?.first?["action"]?["type"] == "startFlow")

            // Version 3: rich text; the scanner only with the capability.
            #expect(Self.type(v3, id: "rich") == "richText")
            #expect(Self.type(v3, id: "scanner") == "textField")
            #expect(Self.type(v3scan, id: "scanner") == "barcodeScanner")
            #expect(v3scan["secondaryButtons"]?.arrayValue?.count == 2)

            // Above the newest: served as the newest.
            #expect(Self.ids(v9) == Self.ids(v3scan))
            #expect(Self.type(v9, id: "scanner") == "barcodeScanner")
        }
    }

    @Test("metrics move by the right amounts: rendered, fallback hits, omissions, per platform and contract")
    func metrics() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            _ = try await client.execute(uri: "/v1/screens/gallery", method: .get, headers: headers(platform: "android"))
            let text = try await client.execute(uri: "/metrics", method: .get).text
            // Version 1 sees: header, 3 rows, plain, scanner, rich, list with one row → 9 components.
            #expect(text.contains(#"baton_components_rendered_total{platform="android",contract="1"} 9"#), "\(text)")
            #expect(text.contains(#"baton_fallback_hits_total{component="artworkRow",fallback="detailRow",platform="android",contract="1"} 4"#))
            #expect(text.contains(#"baton_fallback_hits_total{component="artworkHeader",fallback="header",platform="android",contract="1"} 1"#))
            #expect(text.contains(#"baton_fallback_hits_total{component="carousel",fallback="list",platform="android",contract="1"} 1"#))
            #expect(text.contains(#"baton_fallback_hits_total{component="barcodeScanner",fallback="textField",platform="android",contract="1"} 1"#))
            #expect(text.contains(#"baton_fallback_hits_total{component="richText",fallback="text",platform="android",contract="1"} 1"#))
            #expect(text.contains(#"baton_fallback_hits_total{component="startFlow",fallback="command",platform="android",contract="1"} 5"#))
            #expect(text.contains(#"baton_components_omitted_total{component="badge",reason="version",platform="android",contract="1"} 3"#))
            #expect(text.contains(#"baton_components_omitted_total{component="section",reason="empty",platform="android",contract="1"} 1"#))
            #expect(text.contains(#"baton_components_omitted_total{component="menuItem",reason="action",platform="android",contract="1"} 1"#))
        }
    }

    @Test("hostile client headers cannot create label values: platform and contract are bucketed")
    func buckets() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            for index in 0..<20 {
                var hostile = headers("cap\(index)")
                hostile[HTTPField.Name("X-Client-Platform")!] = "platform-\(index)"
                hostile[HTTPField.Name("X-Client-Version")!] = "\(index).0.\(index)"
                _ = try await client.execute(uri: "/v\(100 + index)/screens/gallery", method: .get, headers: hostile)
            }
            let text = try await client.execute(uri: "/metrics", method: .get).text
            #expect(!text.contains("platform-"))
            #expect(!text.contains("contract=\"10"))
            #expect(text.contains(#"baton_components_rendered_total{platform="other",contract="3"}"#))
        }
    }

    @Test("ETag: 304 on If-None-Match (exact, in a list, weak, *); a new ETag when the data changes")
    func etags() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let first = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: headers())
            #expect(first.status == .ok)
            let etag = try #require(first.headers[.eTag])
            #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && !etag.hasPrefix("W/"))
            let again = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: headers())
            #expect(again.headers[.eTag] == etag, "the same data keeps its ETag")
            // Each render is its own set of start actions (fresh nonces): the payloads differ,
            // everything else is the same bytes.
            let masked = { (text: String) in text.replacing(/"payload":"[^"]*"/, with: #""payload":"""#) }
            #expect(again.text != first.text)
            #expect(masked(again.text) == masked(first.text))
            for condition in [etag, "\"nope\",\t \(etag)", "W/\(etag)", "*"] {
                var conditional = headers()
                conditional[.ifNoneMatch] = condition
                let response = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: conditional)
                #expect(response.status == .notModified, "\(condition)")
                #expect(response.body.readableBytes == 0)
                #expect(response.headers[.eTag] == etag)
            }
            var stale = headers()
            stale[.ifNoneMatch] = "\"something-else\""
            #expect(try await client.execute(uri: "/v3/screens/notes", method: .get, headers: stale).status == .ok)

            // Add a note through the screen's own start action: the screen changes, so does its ETag.
            let start = try #require(first.json["secondaryButtons"]?.arrayValue?.first?["action"]?["payload"]?.stringValue)
            let input = try await client.command(start, headers: headers())
            _ = try await client.command(try #require(input.json.payload("submit")), input: ["text": "fresh"], headers: headers())
            let changed = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: headers())
            #expect(changed.headers[.eTag] != etag)
            #expect(changed.text.contains("fresh"))
            var old = headers()
            old[.ifNoneMatch] = etag
            #expect(try await client.execute(uri: "/v3/screens/notes", method: .get, headers: old).status == .ok)
        }
    }

    @Test("a start action used and cancelled: revalidating the unchanged screen gets fresh start actions, not a 304 keeping the used one")
    func usedStartActionNotKept() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let first = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: headers())
            let etag = try #require(first.headers[.eTag])
            let start = try #require(first.json["secondaryButtons"]?.arrayValue?.first?["action"]?["payload"]?.stringValue)
            let input = try await client.command(start, headers: headers())
            let cancelled = try await client.command(try #require(input.json.payload("cancel")), headers: headers())
            #expect(cancelled.status == .ok)
            // The used start action now only says the screen is out of date.
            #expect(try await client.command(start, headers: headers()).json["type"] == "refresh")
            var revalidate = headers()
            revalidate[.ifNoneMatch] = etag
            let again = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: revalidate)
            #expect(again.status == .ok, "a 304 would keep the used start action")
            let fresh = try #require(again.json["secondaryButtons"]?.arrayValue?.first?["action"]?["payload"]?.stringValue)
            #expect(fresh != start)
            #expect(try await client.command(fresh, headers: headers()).json["type"] == "input")
            // Nothing used since: the screen revalidates to 304 again.
            var unchanged = headers()
            unchanged[.ifNoneMatch] = try #require(again.headers[.eTag])
            let third = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: unchanged)
            #expect(third.status == .ok, "the fresh action was used just now: still not kept")
            let settled = try #require(third.headers[.eTag])
            var settledCondition = headers()
            settledCondition[.ifNoneMatch] = settled
            #expect(try await client.execute(uri: "/v3/screens/notes", method: .get, headers: settledCondition).status == .notModified)
        }
    }

    @Test("a client below the oldest supported version gets the update-required screen (200), counted")
    func updateRequired() async throws {
        let contract = TestDatabase.repositoryRoot.appendingPathComponent("Tests/Fixtures/contract-oldest-2")
        let environment = try await environment(contract: contract)
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let response = try await client.execute(uri: "/v1/screens/gallery", method: .get, headers: headers(platform: "android"))
            #expect(response.status == .ok)
            #expect(response.json["id"] == "update-required")
            #expect(Self.ids(response.json) == ["header", "explanation", "update"])
            let command = try await client.command(
                TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), version: 1, headers: headers(platform: "android"))
            #expect(command.status == .ok)
            #expect(command.json["type"] == "screen")
            #expect(command.json["presentation"] == "replace")
            #expect(command.json["screen"]?["id"] == "update-required")
            let supported = try await client.execute(uri: "/v2/screens/gallery", method: .get, headers: headers())
            #expect(supported.json["id"] == "gallery")
            let text = try await client.execute(uri: "/metrics", method: .get).text
            #expect(text.contains(#"baton_clients_unsupported_total{platform="android",contract="1"} 2"#))
            // Counted under the version asked for, never as traffic of the oldest supported one:
            // three components per update-required screen, no fallbacks.
            #expect(!text.contains(#"baton_components_rendered_total{platform="android",contract="2"}"#), "\(text)")
            #expect(text.contains(#"baton_components_rendered_total{platform="android",contract="1"} 6"#), "\(text)")
            let android = environment.metrics.contractHealth.unflushed.filter { $0.key.platform == "android" }
            #expect(android.keys.map(\.contract) == [1])
            #expect(android.values.map(\.unsupported) == [2])
            #expect(android.values.map(\.requests) == [2])
            #expect(android.values.map(\.rendered) == [6])
            #expect(android.values.map(\.fallbackHits) == [0])
        }
    }

    @Test("unknown screens 404, bad parameters 400, repeated parameters 400")
    func errors() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            #expect(try await client.execute(uri: "/v3/screens/nope", method: .get, headers: headers()).status == .notFound)
            #expect(try await client.execute(uri: "/v3/screens/..%2F..%2Fetc", method: .get, headers: headers()).status == .notFound)
            let unknown = try await client.execute(uri: "/v3/screens/gallery?color=red", method: .get, headers: headers())
            #expect(unknown.status == .badRequest)
            #expect(unknown.json["error"]?["code"] == "invalid_request")
            #expect(try await client.execute(uri: "/v3/screens/gallery?tag=a&tag=b", method: .get, headers: headers()).status == .badRequest)
            #expect(try await client.execute(uri: "/v3/screens/gallery?tag=ok", method: .get, headers: headers()).status == .ok)
        }
    }

    // PostgreSQL can bind no U+0000 in text, so a parameter holding one could only fail in the
    // loader. Other control characters bind and are the loader's to match.
    @Test("a parameter a loader binds: U+0000 is refused with 400, other text reaches the loader")
    func parameterWithNUL() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            let refused = try await client.execute(uri: "/v3/screens/note-search?q=a%00b", method: .get, headers: headers())
            #expect(refused.status == .badRequest)
            #expect(refused.json["error"]?["code"] == "invalid_request")
            #expect(refused.json["error"]?["message"]?.stringValue?.contains("'q'") == true)
            for query in ["a%0Ab", "%E2%80%AE", "", "plain"] {
                let found = try await client.execute(uri: "/v3/screens/note-search?q=\(query)", method: .get, headers: headers())
                #expect(found.status == .ok, "q=\(query)")
            }
        }
    }
}
