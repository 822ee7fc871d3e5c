import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Foundation

/// The fixture flows in `Tests/Fixtures/flows` and the effects, guards and loaders they call.
public enum TestFlows {
    public static var directory: URL { TestDatabase.repositoryRoot.appendingPathComponent("Tests/Fixtures/flows") }
    public static var brokenDirectory: URL { TestDatabase.repositoryRoot.appendingPathComponent("Tests/Fixtures/broken") }

    /// Tables the test effects write to.
    public static let schema = """
        CREATE TABLE IF NOT EXISTS test_notes (id bigserial PRIMARY KEY, subject text NOT NULL, text text NOT NULL,
            folder text, UNIQUE (subject, text));
        CREATE TABLE IF NOT EXISTS test_counters (name text PRIMARY KEY, value int NOT NULL);
        CREATE TABLE IF NOT EXISTS test_effect_runs (id bigserial PRIMARY KEY, effect text NOT NULL, subject text NOT NULL,
            at timestamptz NOT NULL DEFAULT now());
        """

    public static func prepare(_ pool: PostgresPool) async throws {
        try await pool.withConnection { try await $0.execute(schema) }
    }

    public static func registry() -> FlowRegistry {
        var registry = FlowRegistry()
        registry.effect(
            "notes.create", arguments: [ArgumentSpec("text"), ArgumentSpec("folder", required: false)],
            outcomes: ["created", "duplicate"]
        ) { call in
            let text = try call.string("text")
            try await call.database.query(
                "INSERT INTO test_effect_runs (effect, subject) VALUES ('notes.create', $1)", [call.subject.description])
            let inserted = try await call.database.query(
                "INSERT INTO test_notes (subject, text, folder) VALUES ($1, $2, $3) ON CONFLICT (subject, text) DO NOTHING RETURNING id",
                [call.subject.description, text, call.optionalString("folder")])
            guard let row = inserted.first else { return EffectResult("duplicate") }
            return EffectResult("created", ["id": .int(try row.decode(Int.self, at: 0)), "text": .string(text)])
        }
        registry.effect("counter.increment", arguments: [ArgumentSpec("name", required: false)], outcomes: ["incremented"]) { call in
            let name = call.optionalString("name") ?? "default"
            try await call.database.query(
                "INSERT INTO test_effect_runs (effect, subject) VALUES ('counter.increment', $1)", [call.subject.description])
            let value = try await call.database.query(
                """
                INSERT INTO test_counters (name, value) VALUES ($1, 1)
                ON CONFLICT (name) DO UPDATE SET value = test_counters.value + 1 RETURNING value
                """, [name])[0].decode(Int.self, at: 0)
            return EffectResult("incremented", ["value": .int(value)])
        }
        registry.loader("notes.mine", returnsList: true) { call in
            .array(
                try await call.database.query("SELECT id, text FROM test_notes WHERE subject = $1 ORDER BY id", [call.subject.description])
                    .map { ["id": .int(try $0.decode(Int.self, at: 0)), "text": .string(try $0.decode(String.self, at: 1))] })
        }
        registry.loader("notes.search", arguments: [ArgumentSpec("q", required: false)], returnsList: true) { call in
            .array(
                try await call.database.query(
                    "SELECT id, text FROM test_notes WHERE subject = $1 AND strpos(text, $2) > 0 ORDER BY id",
                    [call.subject.description, call.optionalString("q") ?? ""]
                ).map { ["id": .int(try $0.decode(Int.self, at: 0)), "text": .string(try $0.decode(String.self, at: 1))] })
        }
        registry.loader("colours.list", returnsList: true) { _ in
            [["id": "red", "name": "Red"], ["id": "blue", "name": "Blue"], ["id": "green", "name": "Green"]]
        }
        registry.guardCheck("colours.available", arguments: [ArgumentSpec("id")]) { call in
            try call.string("id") != "green"
        }
        registry.effect("colours.order", arguments: [ArgumentSpec("colour")], outcomes: ["ordered", "failed"]) { call in
            let colour = try call.string("colour")
            try await call.database.query(
                "INSERT INTO test_effect_runs (effect, subject) VALUES ('colours.order', $1)", [call.subject.description])
            return colour == "blue" ? EffectResult("failed") : EffectResult("ordered", ["colour": .string(colour)])
        }
        return registry
    }

    /// A start payload for `flow`, as a screen would have minted it: each call is a new start
    /// action (its own nonce) unless `nonce` is given.
    public static func startPayload(
        _ flow: String, subject: String, parameters: JSONObject = [:], nonce: String = PayloadSigner.makeNonce(),
        expires: Date = Date().addingTimeInterval(3600)
    ) -> String {
        TestApplication.signer.sign(
            PayloadClaims(
                subject: subject, flow: flow, sessionID: nil, step: 0, event: "start",
                expires: Int(expires.timeIntervalSince1970), parameters: parameters, nonce: nonce))
    }
}
