import BatonBuiltinFlows
import BatonClient
import BatonJSON
import BatonPostgres
import BatonServer
import BatonTestSupport
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing

/// `baton client` driven by a script of typed lines against the application in this process,
/// the way an author walks a flow from a terminal.
@Suite("Terminal client")
struct TerminalClientTests {
    /// Answers the client's requests from the application's test client.
    struct InProcessTransport: ClientTransport {
        let client: any TestClientProtocol

        func send(method: String, path: String, headers: [(String, String)], body: [UInt8]?)
            async throws -> ClientTransportReply
        {
            var fields = HTTPFields()
            for (name, value) in headers { fields[HTTPField.Name(name)!] = value }
            let response = try await client.execute(
                uri: path, method: HTTPRequest.Method(method)!, headers: fields,
                body: body.map { ByteBuffer(bytes: $0) })
            return ClientTransportReply(
                status: Int(response.status.code),
                headers: response.headers.map { ($0.name.rawName, $0.value) },
                body: Array(buffer: response.body))
        }
    }

    /// The lines a person types, and everything the client shows.
    final class Terminal: Sendable {
        private let state: Mutex<(input: [String], output: [String])>

        init(typing input: [String]) { state = Mutex((input, [])) }

        func ask(_ prompt: String) -> String? {
            state.withLock { state in
                state.output.append(prompt)
                return state.input.isEmpty ? nil : state.input.removeFirst()
            }
        }

        func write(_ line: String) { state.withLock { $0.output.append(line) } }

        var transcript: String { state.withLock { $0.output.joined(separator: "\n") } }
    }

    /// Types `typing` into a client opened on `screen`, then hands the transcript and the
    /// database to `check` (while the application still runs).
    func walk(
        _ typing: [String], identity: ClientIdentityOptions, screen: String = "home",
        check: @Sendable (String, PostgresPool) async throws -> Void
    ) async throws {
        let environment = try await TestApplication.environment(
            flows: BuiltinFlowsTests.flows, registry: BuiltinFlowsTests.registry())
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        let terminal = Terminal(typing: typing)
        try await buildApplication(environment).test(.router) { client in
            let walker = TerminalClient(
                transport: InProcessTransport(client: client), identity: identity, ask: terminal.ask,
                write: terminal.write)
            await walker.run(screen: screen)
            try await check(terminal.transcript, environment.pool)
        }
    }

    @Test("favouriting from home: catalog, playlist, menu; the menu flips and favourites lists it")
    func favourite() async throws {
        let token = try await BearerAuthenticator.developmentToken(
            subject: "lea", secret: TestApplication.jwtSecret)
        try await walk(
            ["3", "1", "m1", "b", "b", "2", "q"],
            identity: ClientIdentityOptions(contract: 3, platform: "ios", bearerToken: token)
        ) { transcript, pool in
            #expect(transcript.contains("m1) Add playlist to favourites"))
            #expect(transcript.contains("✓ Added “Baroque Essentials” to favourites"))
            #expect(transcript.contains("m1) Remove playlist from favourites"))
            #expect(
                transcript.contains("━━ Favourites ━━\n  1) Baroque Essentials — 9 tracks"), "\(transcript)"
            )
            let rows = try await pool.query("SELECT count(*) FROM favourites WHERE subject = 'user:lea'")
            #expect(try rows[0].decode(Int.self, at: 0) == 1)
        }
    }

    @Test("creating a playlist: an empty name re-asks with the reason, the trimmed name is stored")
    func createWithError() async throws {
        let token = try await BearerAuthenticator.developmentToken(
            subject: "max", secret: TestApplication.jwtSecret)
        try await walk(
            ["4", "   ", "  Night Drive  ", "1", "q"],
            identity: ClientIdentityOptions(contract: 1, platform: "android", bearerToken: token)
        ) { transcript, pool in
            #expect(transcript.contains("? Name your playlist"))
            #expect(transcript.contains("  ✗ Please enter a value."), "\(transcript)")
            #expect(transcript.contains("✓ Created “Night Drive”"))
            #expect(transcript.contains("1) Night Drive — 0 tracks"), "\(transcript)")
            let rows = try await pool.query("SELECT name FROM playlists WHERE owner = 'user:max'")
            #expect(try rows.map { try $0.decode(String.self, at: 0) } == ["Night Drive"])
        }
    }

    @Test("Scan & Go as an App Clip: scan, confirm, receipt; one drop-off")
    func scanAndGo() async throws {
        let identity = ClientIdentityOptions(
            contract: 3, platform: "appclip", capabilities: ["barcode_scanner"],
            deviceID: "5d1e2f3a-4b5c-4d6e-8f70-81a2b3c4d5e6")
        try await walk(
            ["1", "1", "3sdemo0000011 ", "1", "q"], identity: identity, screen: "send-parcel"
        ) { transcript, pool in
            #expect(transcript.contains("1) ⌗ Scan the parcel label — Label code, e.g. 3SDEMO0000001"), "\(transcript)")
            #expect(transcript.contains("— Parcel 3SDEMO0000011 —"))
            #expect(transcript.contains("Receipt "), "\(transcript)")
            let rows = try await pool.query("SELECT count(*) FROM dropoffs WHERE label = '3SDEMO0000011'")
            #expect(try rows[0].decode(Int.self, at: 0) == 1)
        }
    }

    @Test(
        "screen text: items numbered in order, menu entries keyed m1…, fields ask for text or a barcode"
    )
    func screenText() throws {
        let screen: JSONValue = [
            "type": "componentScreen", "id": "s", "title": "Things",
            "sections": [
                [
                    "components": [
                        ["type": "text", "text": "Hello"],
                        [
                            "type": "detailRow", "title": "Row", "subtitle": "sub",
                            "action": ["type": "navigate", "screen": "x"],
                        ],
                        [
                            "type": "textField", "label": "Code", "action": ["type": "command", "payload": "p1"],
                        ],
                        [
                            "type": "barcodeScanner", "title": "Scan", "prompt": "Point at the label",
                            "action": ["type": "command", "payload": "p2"],
                        ],
                        ["type": "mystery"],
                    ]
                ]
            ],
            "secondaryButtons": [["title": "Delete", "action": ["type": "command", "payload": "p3"]]],
        ]
        let text = ScreenText(screen: screen)
        #expect(
            text.lines == [
                "━━ Things ━━", "  Hello", "  1) Row — sub", "  2) ✎ Code",
                "  3) ⌗ Scan — Point at the label", "  [mystery]", "", "Menu:", "  m1) Delete",
            ])
        #expect(text.choices.map(\.key) == ["1", "2", "3", "m1"])
        #expect(
            text.choices.map(\.asks) == [
                .nothing, .text(prompt: "Code"), .barcode(prompt: "Point at the label"), .nothing,
            ])
    }
}
