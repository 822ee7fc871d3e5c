import BatonBuiltinFlows
import BatonJSON
import BatonPostgres
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite("POST /v{N}/deeplinks/resolve and outbound checks")
struct DeepLinkTests {
    static let device = "6e5d4c3b-2a19-4f08-8e7d-6c5b4a392817"

    func environment(flows: URL = TestDatabase.repositoryRoot.appendingPathComponent("Flows")) async throws -> BatonEnvironment {
        let environment = try await TestApplication.environment(flows: flows, registry: BuiltinFlowsTests.registry())
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        return environment
    }

    func appClip(_ capabilities: String = "barcode_scanner") -> HTTPFields {
        var headers = deviceHeaders(Self.device)
        headers[HTTPField.Name("X-Client-Platform")!] = "appclip"
        headers[HTTPField.Name("X-Client-Capabilities")!] = capabilities
        return headers
    }

    func resolve(_ client: some TestClientProtocol, _ url: String, headers: HTTPFields) async throws -> TestResponse {
        try await client.execute(
            uri: "/v3/deeplinks/resolve", method: .post, headers: headers,
            body: ByteBuffer(bytes: JSONEncoding.encode(["url": .string(url)])))
    }

    func sessions(_ pool: PostgresPool) async throws -> Int {
        try await pool.query("SELECT count(*) FROM flow_sessions")[0].decode(Int.self, at: 0)
    }

    @Test("Scan & Go starts from the NFC tag's app link and from its universal link, for an App Clip device")
    func scanAndGo() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            for url in ["exampleapp://scan-and-go?location=UT-0001", "https://app.example.com/scan-and-go?location=UT-0001"] {
                let response = try await resolve(client, url, headers: appClip())
                #expect(response.status == .ok)
                let screen = response.json
                #expect(screen["type"] == "screen", "\(url): \(response.text.prefix(300))")
                #expect(screen["screen"]?["header"]?["title"] == "Drop off at Utrecht Centraal kiosk")
                let scanner = screen["screen"]?["sections"]?.arrayValue?.first { $0["id"] == "scan" }?["components"]?.arrayValue?.first
                #expect(scanner?["type"] == "barcodeScanner")
                // The session is real: scanning works from here.
                let scan = try #require(scanner?["action"]?["payload"]?.stringValue)
                let confirm = try await client.command(scan, input: ["barcode": "3SDEMO0000005"], headers: appClip())
                #expect(confirm.json["screen"]?["title"] == "Check the parcel")
            }
            #expect(try await sessions(environment.pool) == 2)
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_deeplinks_total{result="allowed",reason="none"} 2"#))
            #expect(metrics.contains(#"baton_flow_sessions_started_total{flow="scan-and-go"} 2"#))
        }
    }

    @Test("a link whose target is not allowed on appclip is refused there and allowed on ios")
    func platforms() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let link = "exampleapp://playlist/11111111-0000-4000-8000-000000000001"
            let refused = try await resolve(client, link, headers: appClip())
            #expect(refused.status == .ok)
            #expect(refused.json["type"] == "error")
            #expect(refused.json["code"] == "link_not_allowed")
            #expect(refused.json["reason"] == "platform_not_allowed")
            // A malformed Idempotency-Key is 400 whatever the link (it was judged only on allowed ones).
            var badKey = appClip()
            badKey[HTTPField.Name("Idempotency-Key")!] = "has space"
            let malformed = try await resolve(client, link, headers: badKey)
            #expect(malformed.status == .badRequest)
            #expect(malformed.json["error"]?["code"] == "invalid_request")
            var ios = deviceHeaders(Self.device)
            ios[HTTPField.Name("X-Client-Platform")!] = "ios"
            let allowed = try await resolve(client, link, headers: ios)
            #expect(allowed.json["type"] == "screen")
            #expect(allowed.json["screen"]?["title"] == "Baroque Essentials")
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_deeplinks_total{result="rejected",reason="platform_not_allowed"} 1"#))
            #expect(metrics.contains(#"baton_deeplinks_total{result="allowed",reason="none"} 1"#))
        }
    }

    @Test("a value the allowlist's pattern lets through and its target's refuses is a link refused as parameter_invalid, not a 400")
    func targetRefusesTheParameter() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            var ios = deviceHeaders(Self.device)
            ios[HTTPField.Name("X-Client-Platform")!] = "ios"
            // The entry takes `^[A-Za-z0-9-]{1,64}$`; the playlist screen a UUID.
            for link in ["exampleapp://playlist/abc", "https://app.example.com/playlists/A-B"] {
                let refused = try await resolve(client, link, headers: ios)
                #expect(refused.status == .ok, "\(link): \(refused.text)")
                #expect(refused.json["code"] == "link_not_allowed", "\(link): \(refused.text)")
                #expect(refused.json["reason"] == "parameter_invalid", "\(link): \(refused.text)")
            }
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_deeplinks_total{result="rejected",reason="parameter_invalid"} 2"#))
            #expect(!metrics.contains(#"baton_deeplinks_total{result="allowed",reason="none"} "#), "counted once, as refused")
        }
    }

    @Test("bad locations are refused by the parameter pattern, hostile URLs by the parser; no session is created")
    func rejections() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let cases: [(String, String)] = [
                ("exampleapp://scan-and-go?location=UT-1", "parameter_invalid"),
                ("exampleapp://scan-and-go?location=UT-00001", "parameter_invalid"),
                ("exampleapp://scan-and-go?location=../UT-0001", "parameter_invalid"),
                ("exampleapp://scan-and-go", "parameter_missing"),
                ("exampleapp://scan-and-go?location=UT-0001&location=UT-0002", "repeated_parameter"),
                ("exampleapp://scan-and-go?location=UT-0001&x=1", "unknown_parameter"),
                ("https://app.example.com@evil.example/scan-and-go?location=UT-0001", "userinfo"),
                ("https://evil.example/scan-and-go?location=UT-0001", "no_matching_entry"),
                ("https://app.example.com:8443/scan-and-go?location=UT-0001", "bad_port"),
                ("https://app.example.com/scan-and-go/../home?location=UT-0001", "bad_path"),
                ("java\tscript:alert(1)", "bad_character"),
            ]
            for (url, reason) in cases {
                let response = try await resolve(client, url, headers: appClip())
                #expect(response.status == .ok, "\(url)")
                #expect(response.json["code"] == "link_not_allowed", "\(url)")
                #expect(response.json["reason"] == .string(reason), "\(url): \(response.text)")
            }
            #expect(try await sessions(environment.pool) == 0)
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_deeplinks_total{result="rejected",reason="parameter_invalid"} 3"#))
            #expect(metrics.contains(#"baton_deeplinks_total{result="rejected",reason="userinfo"} 1"#))
            // Garbage bodies are envelopes, not 500s.
            for body in ["", "{", "[]", "{\"url\": 5}"] {
                let response = try await client.execute(uri: "/v3/deeplinks/resolve", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(body)")
            }
        }
    }

    @Test("an openUrl off the outbound allowlist drops its component; the rest of the screen renders; counted and flagged by lint")
    func outbound() async throws {
        // A copy of Flows/ with a screen that links out twice: once allowed, once not.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flows-outbound-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: TestDatabase.repositoryRoot.appendingPathComponent("Flows"), to: directory)
        let screen = """
            screen: links
            params:
              target: { required: false }
            content:
              id: links
              title: Links
              sections:
                - id: main
                  components:
                    - { type: text, id: intro, text: Helpful links }
                    - { type: button, id: help, title: Help, action: { type: openUrl, url: "https://help.example.com/faq" } }
                    - { type: button, id: away, title: Away, action: { type: openUrl, url: "{{params.target}}" } }
            """
        try screen.write(to: directory.appendingPathComponent("screens/links.yaml"), atomically: true, encoding: .utf8)
        let environment = try await environment(flows: directory)
        try await buildApplication(environment).test(.router) { client in
            let response = try await client.execute(
                uri: "/v3/screens/links?target=https%3A%2F%2Fevil.example%2Fphish", method: .get, headers: deviceHeaders(Self.device))
            #expect(response.status == .ok)
            let ids = response.json["sections"]?.arrayValue?.first?["components"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
            #expect(ids == ["intro", "help"])
            let allowed = try await client.execute(
                uri: "/v3/screens/links?target=tel%3A%2B31-30-1234567", method: .get, headers: deviceHeaders(Self.device))
            let allowedIDs = allowed.json["sections"]?.arrayValue?.first?["components"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
            #expect(allowedIDs == ["intro", "help", "away"])
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_components_omitted_total{component="button",reason="url_blocked",platform="other",contract="3"} 1"#))
        }
        // A literal target off the list is a lint error.
        try screen.replacingOccurrences(of: "https://help.example.com/faq", with: "https://evil.example/faq")
            .write(to: directory.appendingPathComponent("screens/links.yaml"), atomically: true, encoding: .utf8)
        let definitions = FlowDefinitions.load(directory: directory, catalog: BuiltinFlowsTests.registry().catalog)
        let errors = definitions.diagnostics.filter { $0.severity == .error }.map(\.description)
        #expect(errors.count == 1)
        #expect(errors.first?.contains("openUrl target 'https://evil.example/faq' is not allowed by the outbound rules") == true)
    }

    @Test("an allowlist entry pointing at a flow or screen that does not exist is a lint error")
    func allowlistLint() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flows-links-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: TestDatabase.repositoryRoot.appendingPathComponent("Flows"), to: directory)
        let allowlist = try String(contentsOf: directory.appendingPathComponent("deeplinks.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "    flow: scan-and-go", with: "    flow: scan-and-goo")
        try allowlist.write(to: directory.appendingPathComponent("deeplinks.yaml"), atomically: true, encoding: .utf8)
        let definitions = FlowDefinitions.load(directory: directory, catalog: BuiltinFlowsTests.registry().catalog)
        let errors = definitions.diagnostics.filter { $0.severity == .error }.map(\.description)
        #expect(errors.contains { $0.contains("deeplinks.yaml") && $0.contains("scan-and-goo") }, "\(errors)")
    }

    @Test("lint refuses a deep-link target whose start runs an effect before the user's first answer")
    func effectBeforeFirstAnswer() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flows-links-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: TestDatabase.repositoryRoot.appendingPathComponent("Flows"), to: directory)
        let file = directory.appendingPathComponent("scan-and-go.yaml")
        // An action state that registers a drop-off straight away, on the way to the scanner.
        let flow = try String(contentsOf: file, encoding: .utf8)
            .replacingOccurrences(
                of: "    else: unknown-location\n    to: scan\n",
                with: "    else: unknown-location\n    to: eager\n  eager:\n    do: dropoffs.register\n"
                    + "    with: { code: \"3SDEMO0000001\", location: \"{{params.location}}\" }\n"
                    + "    outcomes: { registered: scan, already: scan }\n")
        try flow.write(to: file, atomically: true, encoding: .utf8)
        let definitions = FlowDefinitions.load(directory: directory, catalog: BuiltinFlowsTests.registry().catalog)
        let errors = definitions.diagnostics.filter { $0.severity == .error }.map(\.description)
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.contains { $0.contains("deeplinks.yaml") && $0.contains("dropoffs.register") && $0.contains("first answer") }, "\(errors)")
    }
}
