import BatonBuiltinFlows
import BatonContract
import BatonJSON
import BatonPostgres
import BatonServer
import BatonTestSupport
import Configuration
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import Testing

/// Baton Studio (docs/studio.md): the web renderer covers the contract, the fit report per
/// component, who may use the studio, and the page walked in a real browser.
@Suite("Studio: /studio, its API, the reference web renderer, a browser walk")
struct StudioTests {
    static let root = TestDatabase.repositoryRoot
    static let renderer = root.appendingPathComponent("Studio/renderer/baton-render.js")

    static func contract() throws -> ContractRegistry {
        let (registry, diagnostics) = ContractLoader.load(directory: root.appendingPathComponent("Flows"))
        guard let registry else { throw TestFailure("Flows/contract.yaml does not load: \(diagnostics)") }
        return registry
    }

    @Test("every component and action type of Flows/contract.yaml has a web renderer")
    func rendererCoversContract() throws {
        let source = try String(contentsOf: Self.renderer, encoding: .utf8)
        let contract = try Self.contract()
        #expect(contract.components.count >= 10)
        let components = contract.components.keys.sorted().filter { !source.contains("component(\"\($0)\",") }
        let actions = contract.actions.keys.sorted().filter { !source.contains("action(\"\($0)\",") }
        #expect(components.isEmpty, "Studio/renderer/baton-render.js has no renderer for the components \(components)")
        #expect(actions.isEmpty, "Studio/renderer/baton-render.js cannot perform the actions \(actions)")
    }

    @Test("the fit report names each fallback and omission per component, with its reason")
    func fitReportPerComponent() throws {
        let contract = try Self.contract()
        let fitter = ScreenFitter(registry: contract)
        let screen: JSONValue = [
            "type": "componentScreen", "id": "s",
            "header": ["type": "artworkHeader", "id": "header", "title": "Mix", "artwork": "https://img.example.com/a.jpg"],
            "sections": [
                [
                    "id": "main",
                    "components": [
                        ["type": "artworkRow", "id": "row", "title": "A", "artwork": "https://img.example.com/b.jpg"],
                        ["type": "badge", "id": "new", "text": "New"],
                        [
                            "type": "barcodeScanner", "id": "scanner", "title": "Scan",
                            "action": ["type": "command", "url": "/v3/command", "payload": "p"],
                        ],
                        ["type": "text", "id": "plain", "text": "Hello"],
                    ],
                ],
                ["id": "extras", "components": [["type": "badge", "id": "lonely", "text": "Hot"]]],
            ],
            "secondaryButtons": [
                ["title": "Share", "action": ["type": "share", "text": "x"]],
                ["title": "Start", "action": ["type": "startFlow", "url": "/v1/command", "payload": "p"]],
            ],
        ]
        func notes(_ client: ScreenFitter.Client) -> [String: String] {
            let (fitted, _) = fitter.fitScreen(screen, for: client)
            let report = StudioFitReport(raw: screen, fitted: fitted, fitter: fitter, client: client)
            return Dictionary(report.marks.map { ($0.id, $0.note) }, uniquingKeysWith: { a, b in a + " | " + b })
        }
        let oldClient = ScreenFitter.Client(contract: 1, capabilities: [])
        let oldMarks = StudioFitReport(raw: screen, fitted: fitter.fitScreen(screen, for: oldClient).0, fitter: fitter, client: oldClient).marks
        // An omitted component knows where it would have been: after the shown artworkRow → detailRow.
        #expect(oldMarks.first { $0.id == "new" }?.placement?.section == "main")
        #expect(oldMarks.first { $0.id == "new" }?.placement?.after == "row")
        #expect(oldMarks.first { $0.id == "lonely" }?.placement?.after == nil)
        let old = notes(oldClient)
        #expect(old["header"] == "artworkHeader → header (contract 1)")
        #expect(old["row"] == "artworkRow → detailRow (contract 1)")
        #expect(old["new"] == "badge omitted: needs contract 2")
        #expect(old["lonely"] == "badge omitted: needs contract 2")
        #expect(old["section:extras"] == "section extras omitted: none of its components is shown")
        #expect(old["scanner"] == "barcodeScanner → textField (contract 1)")
        #expect(old["menu:Share"] == "menu item “Share” omitted: needs contract 2")
        #expect(old["menu:Start"] == "startFlow → command (contract 1)")
        #expect(old["plain"] == nil)

        let newest = notes(.init(contract: 3, capabilities: ["share_sheet"]))
        #expect(newest == ["scanner": "barcodeScanner → textField (no barcode_scanner)"])
        #expect(notes(.init(contract: 3, capabilities: ["barcode_scanner", "share_sheet"])).isEmpty)
    }

    static func environment(_ mode: StudioMode, maxLifetime: Duration? = nil) async throws -> BatonEnvironment {
        let environment = try await TestApplication.environment(
            flows: root.appendingPathComponent("Flows"), registry: BuiltinFlowsTests.registry(),
            configure: { configuration in
                configuration.studio = mode
                configuration.studioDirectory = root.appendingPathComponent("Studio").path
                configuration.jwtMaxLifetime = maxLifetime
            })
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        return environment
    }

    static func studioToken(_ user: String, studio: Bool) async throws -> String {
        try await BearerAuthenticator.developmentToken(subject: user, secret: TestApplication.jwtSecret, studio: studio)
    }

    @Test("with baton.jwt.max.lifetime under 8 hours, the tokens the studio mints live no longer, so the server accepts them")
    func tokensWithinTheMaxLifetime() async throws {
        let development = try await Self.environment(.development, maxLifetime: .seconds(3600))
        try await buildApplication(development).test(.router) { client in
            let minted = try await client.execute(uri: "/studio/api/token?user=alice", method: .get)
            let token = try #require(try JSONValue.parse(Array(String(buffer: minted.body).utf8))["token"]?.stringValue)
            #expect(try await development.authenticator.user(fromToken: token) == "alice")
            let screen = try await client.execute(uri: "/v3/screens/home", method: .get, headers: [.authorization: "Bearer " + token])
            #expect(screen.status == .ok)
        }
    }

    @Test("off by default; with BATON_STUDIO=true its API needs a studio claim; dev is open and mints demo tokens")
    func access() async throws {
        let configuration = try TestApplication.configuration()
        #expect(configuration.studio == .off)

        let off = try await Self.environment(.off)
        try await buildApplication(off).test(.router) { client in
            let page = try await client.execute(uri: "/studio", method: .get)
            let api = try await client.execute(uri: "/studio/api/config", method: .get)
            #expect(page.status == .notFound)
            #expect(api.status == .notFound)
        }

        let on = try await Self.environment(.enabled)
        let plain = "Bearer " + (try await Self.studioToken("alice", studio: false))
        let studio = "Bearer " + (try await Self.studioToken("ops", studio: true))
        try await buildApplication(on).test(.router) { client in
            let page = try await client.execute(uri: "/studio", method: .get)
            #expect(page.status == .ok)
            #expect(try await client.execute(uri: "/studio/", method: .get).status == .ok)
            #expect(page.headers[.contentType]?.hasPrefix("text/html") == true)
            #expect(String(buffer: page.body).contains("baton-render.js"))
            #expect(try await client.execute(uri: "/studio/renderer/baton-render.js", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/studio/..%2FPackage.swift", method: .get).status == .notFound)
            // A missing file, asked for by anyone: where the server keeps its files is not theirs to know.
            let missing = try await client.execute(uri: "/studio/missing.js", method: .get)
            #expect(missing.status == .notFound)
            #expect(!String(buffer: missing.body).contains(TestDatabase.repositoryRoot.path), "\(String(buffer: missing.body))")
            #expect(String(buffer: missing.body).contains("BATON_STUDIO_DIR"))
            #expect(try await client.execute(uri: "/studio/api/config", method: .get).status == .unauthorized)
            #expect(try await client.execute(uri: "/studio/api/config", method: .get, headers: [.authorization: plain]).status == .forbidden)
            let config = try await client.execute(uri: "/studio/api/config", method: .get, headers: [.authorization: studio])
            #expect(config.status == .ok)
            let body = try JSONValue.parse(Array(String(buffer: config.body).utf8))
            #expect(body["mode"] == "token")
            #expect(body["demoUsers"] == [])
            #expect(body["screens"]?.arrayValue?.contains { $0["name"] == "catalog" } == true)
            // No minting outside development.
            let minting = try await client.execute(uri: "/studio/api/token?user=alice", method: .get, headers: [.authorization: studio])
            #expect(minting.status == .forbidden)
        }

        let development = try await Self.environment(.development)
        try await buildApplication(development).test(.router) { client in
            let minted = try await client.execute(uri: "/studio/api/token?user=alice", method: .get)
            #expect(minted.status == .ok)
            let token = try JSONValue.parse(Array(String(buffer: minted.body).utf8))["token"]?.stringValue ?? ""
            #expect(try await development.authenticator.user(fromToken: token) == "alice")
            // Minted for the app, not for the studio.
            #expect(try await development.authenticator.studioGrant(fromToken: token).studio == false)
            let lint = try await client.execute(uri: "/studio/api/lint", method: .get)
            #expect(lint.status == .ok)
            #expect(try JSONValue.parse(Array(String(buffer: lint.body).utf8))["errors"] == 0)
            let coverage = try JSONValue.parse(Array(String(buffer: try await client.execute(uri: "/studio/api/coverage", method: .get).body).utf8))
            #expect(coverage["versions"] == [1, 2, 3])
            let graphReply = try await client.execute(uri: "/studio/api/graph/scan-and-go", method: .get)
            let graph = try JSONValue.parse(Array(String(buffer: graphReply.body).utf8))
            #expect(graph["dot"]?.stringValue?.hasPrefix("digraph") == true)
            #expect(graph["mermaid"]?.stringValue?.hasPrefix("stateDiagram-v2") == true)
            // A subject PostgreSQL text cannot hold is the request's fault: 400, not 500.
            let sessions = try await client.execute(uri: "/studio/api/sessions?subject=user:a%00b", method: .get)
            #expect(sessions.status == .badRequest, "\(sessions.status) \(String(buffer: sessions.body))")
            #expect(try JSONValue.parse(Array(String(buffer: sessions.body).utf8))["error"]?["code"] == "invalid_request")
        }
        // Open and minting tokens: only on a loopback address.
        #expect(throws: BatonConfiguration.Error.self) {
            _ = try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: ["baton.studio": "dev", "http.host": "0.0.0.0"])))
        }
        let loopback = try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: ["baton.studio": "dev"])))
        #expect(loopback.studio == .development)
        #expect(try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: ["baton.studio": "true"]))).studio == .enabled)
    }

    struct ForeignClaims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var studio: String
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test("a token whose studio claim is not true grants no studio, and still signs the user in")
    func foreignStudioClaim() async throws {
        let authenticator = try await BearerAuthenticator(
            hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil)
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: TestApplication.jwtSecret), digestAlgorithm: .sha256)
        let token = try await keys.sign(
            ForeignClaims(sub: SubjectClaim(value: "dana"), exp: ExpirationClaim(value: Date().addingTimeInterval(600)), studio: "yes"))
        #expect(try await authenticator.user(fromToken: token) == "dana")
        #expect(try await authenticator.studioGrant(fromToken: token).studio == false)
        let granted = try await Self.studioToken("ops", studio: true)
        #expect(try await authenticator.studioGrant(fromToken: granted) == ("ops", true))
    }

    @Test("the fit endpoint returns the screen fitted as the real endpoint fits it, with marks per component")
    func fitEndpoint() async throws {
        let environment = try await Self.environment(.development)
        try await buildApplication(environment).test(.router) { client in
            let headers: HTTPFields = [.clientPlatform: "web", .deviceID: UUID().uuidString]
            let real = try await client.execute(uri: "/v1/screens/catalog", method: .get, headers: headers)
            let studio = try await client.execute(uri: "/studio/api/fit/v1/catalog", method: .get, headers: headers)
            #expect(studio.status == .ok)
            let body = try JSONValue.parse(Array(String(buffer: studio.body).utf8))
            let wire = try JSONValue.parse(Array(String(buffer: real.body).utf8))
            // The same components of the same types (payloads are minted afresh per render).
            func shape(_ screen: JSONValue?) -> [String] {
                (screen?["sections"]?.arrayValue ?? []).flatMap { $0["components"]?.arrayValue ?? [] }.map {
                    "\($0["id"]?.stringValue ?? "")=\($0["type"]?.stringValue ?? "")"
                } + [screen?["header"]?["type"]?.stringValue ?? ""]
            }
            #expect(shape(body["screen"]) == shape(wire))
            #expect(shape(wire).contains("header"))
            let notes = body["marks"]?.arrayValue?.compactMap { $0["note"]?.stringValue } ?? []
            #expect(notes.contains("artworkHeader → header (contract 1)"))
            #expect(notes.contains("artworkRow → detailRow (contract 1)"))
            #expect(body["client"]?["platform"] == "web")

            let newest = try await client.execute(uri: "/studio/api/fit/v3/catalog", method: .get, headers: headers)
            #expect(try JSONValue.parse(Array(String(buffer: newest.body).utf8))["marks"] == [])

            // A flow state's screen, from its template.
            let state = try await client.execute(uri: "/studio/api/state-fit/v1/scan-and-go/scan", method: .get, headers: headers)
            let stateNotes = try JSONValue.parse(Array(String(buffer: state.body).utf8))["marks"]?.arrayValue?.compactMap { $0["note"]?.stringValue }
            #expect(stateNotes == ["barcodeScanner → textField (contract 1)"])
            let scanner: HTTPFields = [.clientPlatform: "ios", .clientCapabilities: "barcode_scanner"]
            let native = try await client.execute(uri: "/studio/api/state-fit/v3/scan-and-go/scan", method: .get, headers: scanner)
            #expect(try JSONValue.parse(Array(String(buffer: native.body).utf8))["marks"] == [])
            let missing = try await client.execute(uri: "/studio/api/state-fit/v3/scan-and-go/nowhere", method: .get, headers: scanner)
            #expect(missing.status == .notFound)
        }
    }

    // MARK: - In a real browser

    /// Whether the browser tests run: always on Linux, where scripts/bootstrap.sh --test installs
    /// their tools, so that a broken bootstrap fails them (`walk` requires the tools) instead of
    /// skipping them; elsewhere (macOS: Homebrew has no chromedriver package) when the tools are there.
    static func browserWalksExpected() async -> Bool {
        #if os(Linux)
        true
        #else
        await browserTools() != nil
        #endif
    }

    static func browserTools() async -> (python: String, script: String)? {
        guard ExternalTool.find("chromium") ?? ExternalTool.find("chromium-browser") != nil, ExternalTool.find("chromedriver") != nil,
            let python = ExternalTool.findInToolsVenv("python"),
            (try? await ExternalTool.run(python, ["-c", "import selenium"]).status) == 0
        else { return nil }
        return (python, root.appendingPathComponent("Tests/Browser/studio_walk.py").path)
    }

    @Test(
        "headless Chromium walks the studio: contract 1 marks, favouriting, Scan & Go, lint, coverage, no console errors",
        .enabled("needs chromium, chromium-driver and selenium in .build/tools-venv: scripts/bootstrap.sh --test installs them") {
            await browserWalksExpected()
        },
        .timeLimit(.minutes(5)))
    func browserWalk() async throws {
        try await Self.walk(studio: "dev", arguments: [], expect: "STUDIO WALK OK", screenshots: "studio-screenshots", minimumShots: 8)
    }

    @Test(
        "headless Chromium with BATON_STUDIO=true: the page asks for a studio token, then renders as an anonymous device",
        .enabled("needs chromium, chromium-driver and selenium in .build/tools-venv: scripts/bootstrap.sh --test installs them") {
            await browserWalksExpected()
        },
        .timeLimit(.minutes(3)))
    func browserTokenMode() async throws {
        let token = try await Self.studioToken("ops", studio: true)
        try await Self.walk(
            studio: "true", arguments: ["--studio-token", token], expect: "STUDIO TOKEN MODE OK", screenshots: "studio-screenshots-token",
            minimumShots: 2)
    }

    /// Serves the demo data with the real `baton` and runs Tests/Browser/studio_walk.py on it.
    static func walk(studio: String, arguments: [String], expect marker: String, screenshots folder: String, minimumShots: Int) async throws {
        let tools = try #require(await browserTools(), "needs chromium, chromium-driver and selenium in .build/tools-venv: scripts/bootstrap.sh --test installs them")
        let database = try await TestDatabase.make(migrated: true)
        // Seeding is one long transaction: the administrative deadline, not a request's 5 s (the
        // whole suite shares two cores meanwhile).
        let pool = PostgresPool(configuration: .administrative(conninfo: database))
        _ = try await pool.withConnection { try await DemoData.seed($0) }
        await pool.close()
        // A copy of Flows/ with one more screen holding every component a named screen can.
        let flows = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("studio-flows-\(UUID().uuidString.prefix(8))")
        try FileManager.default.copyItem(at: root.appendingPathComponent("Flows"), to: flows)
        try FileManager.default.copyItem(
            at: root.appendingPathComponent("Tests/Fixtures/studio/gallery.yaml"), to: flows.appendingPathComponent("screens/gallery.yaml"))
        defer { try? FileManager.default.removeItem(at: flows) }
        let baton = try BatonProcess(
            arguments: ["serve", "--log-format", "json", "--flows-dir", flows.path],
            environment: [
                "DATABASE_URL": database, "BATON_SIGNING_KEYS": TestApplication.signingKeys,
                "BATON_JWT_HS256_SECRET": TestApplication.jwtSecret, "BATON_STUDIO": studio,
            ])
        let screenshots = root.appendingPathComponent(".build/\(folder)")
        try? FileManager.default.removeItem(at: screenshots)
        do {
            try await baton.waitUntilReady()
            // On Linux, bootstrap installs graphviz too: the walk's flow graph checks must run.
            #if os(Linux)
            let graphviz = ["--require-graphviz"]
            #else
            let graphviz: [String] = []
            #endif
            let result = try await ExternalTool.run(
                tools.python, [tools.script, "--base-url", baton.baseURL, "--screenshots", screenshots.path] + graphviz + arguments)
            #expect(result.status == 0, "studio_walk.py failed:\n\(result.output)\nbaton log:\n\(baton.log.suffix(4000))")
            #expect(result.output.contains(marker), "\(result.output)")
            let shots = (try? FileManager.default.contentsOfDirectory(atPath: screenshots.path)) ?? []
            #expect(shots.filter { $0.hasSuffix(".png") }.count >= minimumShots, "screenshots: \(shots)")
        } catch {
            _ = try? await baton.stop()
            throw error
        }
        #expect(try await baton.stop() == 0)
        try? FileManager.default.removeItem(at: baton.dataDirectory)
    }
}
