import BatonBuiltinFlows
import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import BatonScenarios
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

/// The built-in flows over HTTP, against the repository's Flows/ and the demo data.
@Suite("Built-in flows end to end")
struct BuiltinFlowsTests {
    static let flows = TestDatabase.repositoryRoot.appendingPathComponent("Flows")
    static let baroque = "11111111-0000-4000-8000-000000000001"

    static func registry() -> FlowRegistry {
        var registry = FlowRegistry()
        BuiltinFlows.register(into: &registry)
        return registry
    }

    func environment(poolSize: Int = 4, services: (any ServiceCaller)? = nil) async throws -> BatonEnvironment {
        let environment = try await TestApplication.environment(poolSize: poolSize, flows: Self.flows, registry: Self.registry(), services: services)
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        return environment
    }

    func count(_ pool: PostgresPool, _ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> Int {
        try await pool.query(sql, parameters)[0].decode(Int.self, at: 0)
    }

    func menu(_ screen: JSONValue) -> [String] {
        screen["secondaryButtons"]?.arrayValue?.compactMap { $0["title"]?.stringValue } ?? []
    }

    func action(_ screen: JSONValue, titled title: String) -> String? {
        ScenarioRunner.payload(titled: title, in: screen)
    }

    @Test("every scenario in Flows/tests passes (each on a fresh seeded database)")
    func scenarios() async throws {
        let (scenarios, diagnostics) = Scenario.loadAll(directory: Self.flows.appendingPathComponent("tests"))
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        #expect(scenarios.count >= 10)
        for scenario in scenarios {
            let services = ScenarioServices(stubs: scenario.services)
            let environment = try await environment(services: services)
            let runtime = try #require(environment.runtime)
            let result = await ScenarioRunner(runtime: runtime, pool: environment.pool, services: services).run(scenario)
            await environment.pool.close()
            #expect(result.passed, "\(scenario.name):\n\(result.failures.joined(separator: "\n"))")
        }
    }

    @Test("home reaches every flow: signed-in users see playlists and favourites; everyone sees the catalog and parcels")
    func home() async throws {
        let app = buildApplication(try await environment())
        try await app.test(.router) { client in
            let user = try await client.execute(uri: "/v3/screens/home", method: .get, headers: try await userHeaders("ida")).json
            let ids = user["sections"]?.arrayValue?.flatMap { $0["components"]?.arrayValue ?? [] }.compactMap { $0["id"]?.stringValue }
            #expect(ids == ["playlists", "favourites", "catalog", "new-playlist", "send-parcel", "track-parcel"])
            let device = try await client.execute(uri: "/v3/screens/home", method: .get, headers: deviceHeaders("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")).json
            let deviceIDs = device["sections"]?.arrayValue?.flatMap { $0["components"]?.arrayValue ?? [] }.compactMap { $0["id"]?.stringValue }
            #expect(deviceIDs == ["catalog", "send-parcel", "track-parcel"])
            let parcels = try await client.execute(uri: "/v3/screens/send-parcel", method: .get, headers: deviceHeaders("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")).json
            let locations = parcels["sections"]?.arrayValue?.first?["components"]?.arrayValue ?? []
            #expect(locations.count == 5)
            #expect(locations.first?["action"]?["type"] == "startFlow")
        }
    }

    @Test("favouriting over HTTP: the menu flips, the favourites screen lists it, exactly one row however often it is sent")
    func favourite() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        let headers = try await userHeaders("jan")
        try await app.test(.router) { client in
            let playlist = try await client.execute(uri: "/v3/screens/playlist?id=\(Self.baroque)", method: .get, headers: headers).json
            #expect(menu(playlist) == ["Add playlist to favourites"])
            let add = try #require(action(playlist, titled: "Add playlist to favourites"))
            let answers = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<5 { group.addTask { try await client.command(add, headers: headers).text } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(answers).count == 1)
            #expect(try JSONValue.parse(Array(answers[0].utf8)) == ["type": "done", "message": "Added “Baroque Essentials” to favourites", "refresh": true])
            #expect(try await count(environment.pool, "SELECT count(*) FROM favourites WHERE subject = 'user:jan'") == 1)
            let refreshed = try await client.execute(uri: "/v3/screens/playlist?id=\(Self.baroque)", method: .get, headers: headers).json
            #expect(menu(refreshed) == ["Remove playlist from favourites"])
            let favourites = try await client.execute(uri: "/v3/screens/favourites", method: .get, headers: headers).json
            #expect(favourites["sections"]?.arrayValue?.first?["components"]?.arrayValue?.first?["title"] == "Baroque Essentials")
        }
    }

    @Test("the playlist screen reads in two round trips, and favouriting from it takes two; a private playlist stays hidden and unfavourited")
    func playlistRoundTrips() async throws {
        let environment = try await environment(poolSize: 1)
        // A private playlist with a track, owned by someone else.
        let hidden = "22222222-0000-4000-8000-000000000009"
        try await environment.pool.query(
            "INSERT INTO playlists (id, owner, name, name_key, description, artwork, is_public) VALUES ($1::uuid, 'user:owner', 'Secret', 'secret', '', NULL, false)",
            [hidden])
        try await environment.pool.query(
            "INSERT INTO playlist_tracks (playlist_id, track_id, position) SELECT $1::uuid, id, 1 FROM tracks LIMIT 1", [hidden])
        let headers = try await userHeaders("kim")
        try await buildApplication(environment).test(.router) { client in
            func trips(_ uri: String, _ headers: HTTPFields) async throws -> (TestResponse, Int) {
                try await environment.pool.countingRoundTrips { try await client.execute(uri: uri, method: .get, headers: headers) }
            }
            // The first render prepares the statements on the pool's one connection.
            _ = try await trips("/v3/screens/playlist?id=\(Self.baroque)", headers)
            let (screen, screenTrips) = try await trips("/v3/screens/playlist?id=\(Self.baroque)", headers)
            #expect(screen.status == .ok)
            // [BEGIN, tracks, favourite, playlist] · [ROLLBACK]: the snapshot's end, sent on its
            // own here; under load it travels with the connection's next lease.
            #expect(screenTrips == 2)
            #expect(menu(screen.json) == ["Add playlist to favourites"])
            let tracks = screen.json["sections"]?.arrayValue?.flatMap { $0["components"]?.arrayValue ?? [] }.filter {
                $0["id"]?.stringValue?.hasPrefix("track-") == true
            }
            let stored = try await count(environment.pool, "SELECT count(*) FROM playlist_tracks WHERE playlist_id = $1::uuid", [Self.baroque])
            #expect(stored > 0)
            #expect(tracks?.count == stored)
            // Another user's private playlist: its tracks were read ahead, but nothing of it shows.
            let (refused, _) = try await trips("/v3/screens/playlist?id=\(hidden)", headers)
            #expect(refused.status == .notFound)
            #expect(!refused.text.contains("Secret"))
            let owner = try await userHeaders("owner")
            let (own, _) = try await trips("/v3/screens/playlist?id=\(hidden)", owner)
            #expect(own.status == .ok)
            #expect(own.json["title"] == "Secret")

            // Favouriting: the effect's insert travels with its name lookup, BEGIN and the claim.
            func commandTrips(_ payload: String) async throws -> (TestResponse, Int) {
                try await environment.pool.countingRoundTrips { try await client.command(payload, headers: headers) }
            }
            let other = try await environment.pool.query(
                "SELECT id::text FROM playlists WHERE is_public AND id <> $1::uuid ORDER BY id LIMIT 1", [Self.baroque])[0].decode(String.self, at: 0)
            let warmAdd = TestFlows.startPayload("favourite-add", subject: "user:kim", parameters: ["playlist": .string(other)])
            _ = try await commandTrips(warmAdd)
            let add = try #require(action(screen.json, titled: "Add playlist to favourites"))
            let (added, addTrips) = try await commandTrips(add)
            #expect(added.json["type"] == "done")
            // [BEGIN, claim, insert, name] · [session, log, COMMIT]
            #expect(addTrips == 2)
            #expect(try await count(environment.pool, "SELECT count(*) FROM favourites WHERE subject = 'user:kim'") == 2)
            let warmRemove = TestFlows.startPayload("favourite-remove", subject: "user:kim", parameters: ["playlist": .string(other)])
            _ = try await commandTrips(warmRemove)
            let favourited = try await client.execute(uri: "/v3/screens/playlist?id=\(Self.baroque)", method: .get, headers: headers).json
            let remove = try #require(action(favourited, titled: "Remove playlist from favourites"))
            let (removed, removeTrips) = try await commandTrips(remove)
            #expect(removed.json["type"] == "done")
            #expect(removeTrips == 2)
            #expect(try await count(environment.pool, "SELECT count(*) FROM favourites WHERE subject = 'user:kim'") == 0)
            // Someone else's private playlist cannot be favourited, even with a signed payload.
            let hiddenAdd = TestFlows.startPayload("favourite-add", subject: "user:kim", parameters: ["playlist": .string(hidden)])
            let (refusedAdd, _) = try await commandTrips(hiddenAdd)
            #expect(refusedAdd.status == .notFound)
            #expect(try await count(environment.pool, "SELECT count(*) FROM favourites WHERE playlist_id = $1::uuid", [hidden]) == 0)
        }
    }

    @Test("Scan & Go: ten taps on Confirm at once register one drop-off and all see the same receipt")
    func doubleTapConfirm() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        let device = "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"
        var appClip = deviceHeaders(device)
        appClip[HTTPField.Name("X-Client-Capabilities")!] = "barcode_scanner"
        appClip[HTTPField.Name("X-Client-Platform")!] = "appclip"
        let headers = appClip
        try await app.test(.router) { client in
            let parcels = try await client.execute(uri: "/v3/screens/send-parcel", method: .get, headers: headers).json
            let start = try #require(parcels["sections"]?.arrayValue?.first?["components"]?.arrayValue?.first?["action"]?["payload"]?.stringValue)
            let scan = try await client.command(start, headers: headers).json
            let scanner = try #require(action(scan, titled: "Use this code"))
            let confirm = try await client.command(scanner, input: ["barcode": "3SDEMO0000010"], headers: headers).json
            let payload = try #require(action(confirm, titled: "Confirm drop-off"))
            let receipts = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<10 { group.addTask { try await client.command(payload, headers: headers).text } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(receipts).count == 1)
            #expect(try await count(environment.pool, "SELECT count(*) FROM dropoffs WHERE label = '3SDEMO0000010'") == 1)
            let receipt = try JSONValue.parse(Array(receipts[0].utf8))
            let code = try await environment.pool.query("SELECT receipt FROM dropoffs")[0].decode(String.self, at: 0)
            #expect(receipt["screen"]?["header"]?["title"] == .string("Receipt \(code)"))
        }
    }

    @Test("naughty strings as playlist names: stored and shown back exactly, or refused with a clear input error; never a 500")
    func naughtyNames() async throws {
        let corpus = TestDatabase.repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/corpora/user-input/blns/blns.json")
        let strings = try JSONValue.parse(Array(try Data(contentsOf: corpus))).arrayValue?.compactMap(\.stringValue) ?? []
        #expect(strings.count > 400)
        let environment = try await environment()
        let app = buildApplication(environment)
        let headers = try await userHeaders("naughty")
        let (stored, refused) = try await app.test(.router) { client in
            var stored = 0
            var refused = 0
            for text in strings {
                let start = try await client.execute(uri: "/v3/screens/playlists", method: .get, headers: headers)
                #expect(start.status == .ok)
                let create = try #require(action(start.json, titled: "New playlist"))
                let input = try await client.command(create, headers: headers)
                let submit = try #require(input.json.payload("submit"))
                let answer = try await client.command(submit, input: ["text": .string(text)], headers: headers)
                #expect(answer.status == .ok, "\(text.debugDescription): \(answer.status)")
                let json = answer.json
                // Names are stored in NFC (Swift's == already treats canonically equivalent
                // strings as equal; the scalar check below makes the normalisation itself visible).
                let expectedName = text.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping
                switch json["type"]?.stringValue {
                case "done":
                    stored += 1
                    let rows = try await environment.pool.query(
                        "SELECT name FROM playlists WHERE owner = 'user:naughty' ORDER BY created_at DESC LIMIT 1")
                    let name = try rows[0].decode(String.self, at: 0)
                    #expect(
                        Array(name.unicodeScalars) == Array(expectedName.unicodeScalars), "stored \(name.debugDescription) for \(text.debugDescription)")
                    #expect(json["message"] == .string("Created “\(expectedName)”"))
                    // Shown back exactly on the user's playlists screen.
                    let list = try await client.execute(uri: "/v3/screens/playlists", method: .get, headers: headers).json
                    let titles = list["sections"]?.arrayValue?.first?["components"]?.arrayValue?.compactMap { $0["title"]?.stringValue } ?? []
                    #expect(titles.contains(expectedName), "\(expectedName.debugDescription) not shown back")
                    try await environment.pool.query("DELETE FROM playlists WHERE owner = 'user:naughty'")
                case "input":
                    refused += 1
                    let error = json["error"]?.stringValue ?? ""
                    #expect(!error.isEmpty, "refused without a reason: \(text.debugDescription)")
                    #expect(
                        [
                            "Please enter a value.", "Line breaks, tabs and other control characters aren't allowed here.",
                            InputCheck.invisibleCharacterMessage,
                        ].contains(error)
                            || error.hasPrefix("Use at most 100 characters") || error.hasPrefix("That is too long"),
                        "unexpected reason \(error) for \(text.debugDescription)")
                default:
                    Issue.record("unexpected answer for \(text.debugDescription): \(answer.text.prefix(200))")
                }
            }
            return (stored, refused)
        }
        #expect(stored > 350)
        #expect(refused > 0)
    }

    @Test("cancel changes nothing; a taken name is refused whatever the case; names are stored trimmed")
    func createRules() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        let headers = try await userHeaders("kim")
        try await app.test(.router) { client in
            func create(_ name: String) async throws -> JSONValue {
                let screen = try await client.execute(uri: "/v3/screens/playlists", method: .get, headers: headers).json
                let input = try await client.command(try #require(action(screen, titled: "New playlist")), headers: headers)
                return try await client.command(try #require(input.json.payload("submit")), input: ["text": .string(name)], headers: headers).json
            }
            #expect(try await create("\t Jazz Nights \n")["type"] == "done")
            #expect(try await create("jazz nights")["error"] == "You already have a playlist called “jazz nights”.")
            let screen = try await client.execute(uri: "/v3/screens/playlists", method: .get, headers: headers).json
            let input = try await client.command(try #require(action(screen, titled: "New playlist")), headers: headers)
            #expect(try await client.command(try #require(input.json.payload("cancel")), headers: headers).json == ["type": "refresh"])
            let names = try await environment.pool.query("SELECT name FROM playlists WHERE owner = 'user:kim'").map { try $0.decode(String.self, at: 0) }
            #expect(names == ["Jazz Nights"])
        }
    }

    @Test("names are one name after NFC and case folding, on create and on rename; stored NFC; a bidi override is re-asked")
    func nameKeys() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        let headers = try await userHeaders("noor")
        try await app.test(.router) { client in
            func create(_ name: String) async throws -> JSONValue {
                let screen = try await client.execute(uri: "/v3/screens/playlists", method: .get, headers: headers).json
                let input = try await client.command(try #require(action(screen, titled: "New playlist")), headers: headers)
                return try await client.command(try #require(input.json.payload("submit")), input: ["text": .string(name)], headers: headers).json
            }
            func rename(_ id: String, to name: String) async throws -> JSONValue {
                let screen = try await client.execute(uri: "/v3/screens/playlist?id=\(id)", method: .get, headers: headers).json
                let input = try await client.command(try #require(action(screen, titled: "Rename playlist")), headers: headers)
                return try await client.command(try #require(input.json.payload("submit")), input: ["text": .string(name)], headers: headers).json
            }
            func stored() async throws -> [String: String] {
                let rows = try await environment.pool.query("SELECT id, name FROM playlists WHERE owner = 'user:noor'")
                return Dictionary(uniqueKeysWithValues: try rows.map { (try $0.decode(String.self, at: 1), try $0.decode(UUID.self, at: 0).uuidString.lowercased()) })
            }
            let decomposed = "Cafe\u{301}"
            #expect(try await create(decomposed)["type"] == "done")
            // Stored composed: one scalar for the é.
            let names = try await stored()
            #expect(names.keys.map { Array($0.unicodeScalars) } == [Array("Caf\u{E9}".unicodeScalars)])
            #expect(try await create("Caf\u{E9}")["error"] == "You already have a playlist called “Café”.")
            #expect(try await create("CAFE\u{301}")["type"] == "input")
            #expect(try await create("Road Trip")["type"] == "done")
            #expect(try await create("road trip")["error"] == "You already have a playlist called “road trip”.")
            // Full case folding: ß folds to ss.
            #expect(try await create("straße")["type"] == "done")
            #expect(try await create("STRASSE")["error"] == "You already have a playlist called “STRASSE”.")
            #expect(try await create("Strasse")["type"] == "input")
            // A right-to-left override is refused before any effect runs.
            let override = try await create("song\u{202E}3pm.exe")
            #expect(override["type"] == "input")
            #expect(override["error"] == .string(InputCheck.invisibleCharacterMessage))
            #expect(try await stored().count == 3)

            // Rename: onto another name's key is taken; onto its own name in another case is fine.
            let roadTrip = try #require(try await stored()["Road Trip"])
            #expect(try await rename(roadTrip, to: "CAFÉ")["error"] == "You already have a playlist called “CAFÉ”.")
            #expect(try await rename(roadTrip, to: "Strasse")["type"] == "input")
            #expect(try await rename(roadTrip, to: "ROAD TRIP")["type"] == "done")
            #expect(try await rename(roadTrip, to: "Ro\u{202A}ad")["error"] == .string(InputCheck.invisibleCharacterMessage))
            #expect(try await rename(roadTrip, to: "Summer Cafe\u{301}s")["type"] == "done")
            let after = try await stored()
            #expect(Set(after.keys) == ["Café", "straße", "Summer Cafés"])
            #expect(after.keys.contains { Array($0.unicodeScalars) == Array("Summer Caf\u{E9}s".unicodeScalars) })
            let keys = try await environment.pool.query("SELECT name_key FROM playlists WHERE owner = 'user:noor' ORDER BY name_key")
                .map { try $0.decode(String.self, at: 0) }
            #expect(keys == ["caf\u{E9}", "strasse", "summer caf\u{E9}s"])
        }
    }
}
