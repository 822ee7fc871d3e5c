import BatonFlows
import BatonJSON
import BatonPostgres
import Foundation

/// Releases in PostgreSQL: publishing, ramping, promoting and rolling back, and what replicas
/// read and report. Every change bumps the state's version and NOTIFYs `baton_releases` in
/// the same transaction, so replicas hear of it exactly when it commits.
public enum ReleaseStore {
    /// The channel replicas LISTEN on.
    public static let channel = "baton_releases"

    /// Which release is current and which one ramps.
    public struct State: Sendable, Equatable {
        public var current: String?
        public var ramp: String?
        public var rampPercent: Int
        public var version: Int
    }

    /// One published release.
    public struct Summary: Sendable {
        public var id: String
        public var message: String
        public var publishedBy: String
        public var publishedAt: Date
        public var isCurrent: Bool
        public var rampPercent: Int?
    }

    /// A replica's report of a state version.
    public struct Report: Sendable {
        public var replica: String
        public var release: String
        public var ok: Bool
        public var detail: String
    }

    public static func state(_ db: PostgresConnection) async throws -> State {
        let row = try await db.query("SELECT current_release, ramp_release, ramp_percent, version FROM flow_release_state")[0]
        return State(
            current: try row.decode(String?.self, at: 0), ramp: try row.decode(String?.self, at: 1),
            rampPercent: try row.decode(Int.self, at: 2), version: try row.decode(Int.self, at: 3))
    }

    public static func files(_ db: PostgresConnection, release: String) async throws -> ReleaseFiles {
        guard let row = try await db.query("SELECT files::text FROM flow_releases WHERE id = $1", [release]).first else {
            throw ReleaseError("there is no release \(release.prefix(12))")
        }
        let json = try JSONValue.parse(Array(try row.decode(String.self, at: 0).utf8))
        var files: [String: String] = [:]
        for (path, content) in json.objectValue ?? [:] { files[path] = content.stringValue ?? "" }
        return ReleaseFiles(files: files)
    }

    /// The full id of the release `prefix` names (at least 4 hex digits, unique).
    public static func resolve(_ db: PostgresConnection, _ prefix: String) async throws -> String {
        guard prefix.count >= 4, prefix.allSatisfy(\.isHexDigit) else {
            throw ReleaseError("'\(prefix.prefix(64))' is not a release id (at least 4 hex digits)")
        }
        let rows = try await db.query("SELECT id FROM flow_releases WHERE id LIKE $1 || '%' LIMIT 2", [prefix.lowercased()])
        guard rows.count == 1 else {
            let shown = prefix.count > 64 ? prefix.prefix(64) + "…" : Substring(prefix)
            throw ReleaseError(rows.isEmpty ? "there is no release \(shown)" : "release id \(shown) is ambiguous; give more digits")
        }
        return try rows[0].decode(String.self, at: 0)
    }

    /// Stores `files` as a release (once: the same content is the same release) and makes it
    /// current, or ramps it to `rampPercent` of new sessions. Returns the new state.
    public static func publish(
        _ db: PostgresConnection, _ files: ReleaseFiles, message: String, actor: String, rampPercent: Int? = nil
    ) async throws -> State {
        let id = files.id
        var object = JSONObject()
        for path in files.files.keys.sorted() { object[path] = .string(files.files[path]!) }
        try await db.query(
            "INSERT INTO flow_releases (id, files, message, published_by) VALUES ($1, $2::jsonb, $3, $4) ON CONFLICT (id) DO NOTHING",
            [id, PostgresJSON(String(decoding: JSONEncoding.encode(.object(object)), as: UTF8.self)), message, actor])
        let before = try await lockedState(db)
        let ramping = rampPercent.map { $0 < 100 } ?? false
        try await checkTemplatesKept(db, files, oldFlowsFrom: ramping ? before.current : nil)
        if let rampPercent, rampPercent < 100 {
            guard before.current != nil, before.current != id else {
                throw ReleaseError(
                    before.current == nil
                        ? "nothing is published yet: publish without --ramp first" : "release \(id.prefix(12)) is already current")
            }
            return try await change(db, action: "ramp", release: id, previous: before.ramp, current: before.current, ramp: id,
                              percent: max(1, rampPercent), actor: actor, message: message)
        }
        return try await change(db, action: "publish", release: id, previous: before.current, current: id, ramp: nil, percent: 0,
                          actor: actor, message: message)
    }

    /// Screens switch to a release's at once, for every session (flows keep the definition they
    /// started on): a release may not drop a screen template that a definition still in use
    /// shows, or those sessions would fail at that state. In use: the definitions of active
    /// sessions, and while ramping the current release's flows (most new sessions start on
    /// them).
    private static func checkTemplatesKept(_ db: PostgresConnection, _ files: ReleaseFiles, oldFlowsFrom current: String?) async throws {
        var kept: Set<String> = []
        for (path, source) in files.files where path.hasPrefix("screens/") && (path.hasSuffix(".yaml") || path.hasSuffix(".yml")) {
            if let screen = ScreenTemplate.load(source: source, file: path).0 { kept.insert(screen.name) }
        }
        // Only these columns: the publisher's role may read them and no more (docs/releases.md).
        var inUse: [(flow: String, source: String, sessions: Int)] = try await db.query(
            """
            SELECT d.flow, d.source, s.sessions FROM (
                SELECT definition_hash, count(*) AS sessions FROM flow_sessions
                WHERE status = 'active' AND expires_at > now() GROUP BY definition_hash
            ) s JOIN flow_definitions d ON d.hash = s.definition_hash ORDER BY d.flow, d.hash
            """
        ).map { (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1), try $0.decode(Int.self, at: 2)) }
        if let current {
            for (path, source) in try await Self.files(db, release: current).files.sorted(by: { $0.key < $1.key })
            where !path.contains("/") && path.hasSuffix(".yaml") && !["contract.yaml", "deeplinks.yaml", "services.yaml"].contains(path) {
                inUse.append((String(path.dropLast(5)), source, 0))
            }
        }
        for definition in inUse {
            guard let flow = FlowLoader.load(source: definition.source, file: definition.flow).0 else { continue }
            for name in flow.stateOrder {
                guard case .screen(let spec)? = flow.states[name]?.response, let template = spec.templateName, !kept.contains(template)
                else { continue }
                throw ReleaseError(
                    "release \(files.id.prefix(12)) drops screen template '\(template)', which flow '\(flow.name)' shows in state '\(name)' "
                        + (definition.sessions > 0
                            ? "to \(definition.sessions) active session(s) on its earlier definition"
                            : "as the current release defines it, which most new sessions start on while the release ramps")
                        + ": keep the template until those sessions have ended (the flow's ttl), then drop it")
            }
        }
    }

    /// Makes the ramping release current for everyone.
    public static func promote(_ db: PostgresConnection, actor: String) async throws -> State {
        let before = try await lockedState(db)
        guard let ramp = before.ramp else { throw ReleaseError("no release is ramping") }
        return try await change(db, action: "promote", release: ramp, previous: before.current, current: ramp, ramp: nil, percent: 0,
                          actor: actor, message: "")
    }

    /// Ends a ramp (its release no longer starts sessions) or, with no ramp, makes `release` —
    /// by default the release that was current before the current one — current again.
    public static func rollback(_ db: PostgresConnection, to release: String?, actor: String) async throws -> State {
        let before = try await lockedState(db)
        if release == nil, let ramp = before.ramp, let current = before.current {
            return try await change(db, action: "rollback", release: current, previous: ramp, current: current, ramp: nil, percent: 0,
                              actor: actor, message: "ramp ended")
        }
        let target: String
        if let release {
            target = try await resolve(db, release)
        } else {
            guard let current = before.current,
                let previous = try await db.query(
                    """
                    SELECT previous FROM flow_release_events
                    WHERE release = $1 AND action IN ('publish', 'promote', 'rollback') AND previous IS NOT NULL AND previous <> $1
                    ORDER BY id DESC LIMIT 1
                    """, [current]
                ).first?.decode(String.self, at: 0)
            else { throw ReleaseError("there is no earlier release to roll back to") }
            target = previous
        }
        return try await change(db, action: "rollback", release: target, previous: before.current, current: target, ramp: nil, percent: 0,
                          actor: actor, message: "")
    }

    public static func list(_ db: PostgresConnection, limit: Int = 50) async throws -> [Summary] {
        let state = try await self.state(db)
        return try await db.query("SELECT id, message, published_by, published_at FROM flow_releases ORDER BY published_at DESC, id LIMIT $1", [limit])
            .map { row in
                let id = try row.decode(String.self, at: 0)
                return Summary(
                    id: id, message: try row.decode(String.self, at: 1), publishedBy: try row.decode(String.self, at: 2),
                    publishedAt: try row.decode(Date.self, at: 3), isCurrent: id == state.current,
                    rampPercent: id == state.ramp ? state.rampPercent : nil)
            }
    }

    /// Records what a replica made of a state version.
    public static func report(_ db: PostgresConnection, replica: String, version: Int, release: String, ok: Bool, detail: String) async throws {
        try await db.query(
            """
            INSERT INTO flow_release_reports (replica, state_version, release, ok, detail) VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (replica, state_version) DO UPDATE SET ok = EXCLUDED.ok, detail = EXCLUDED.detail, at = now()
            """, [replica, version, release, ok, String(detail.prefix(2000))])
    }

    /// The reports of replicas that loaded (or failed to load) a state version.
    public static func reports(_ db: PostgresConnection, version: Int) async throws -> [Report] {
        try await db.query(
            "SELECT replica, release, ok, detail FROM flow_release_reports WHERE state_version = $1 ORDER BY replica", [version]
        ).map {
            Report(
                replica: try $0.decode(String.self, at: 0), release: try $0.decode(String.self, at: 1), ok: try $0.decode(Bool.self, at: 2),
                detail: try $0.decode(String.self, at: 3))
        }
    }

    private static func lockedState(_ db: PostgresConnection) async throws -> State {
        _ = try await db.query("SELECT 1 FROM flow_release_state FOR UPDATE")
        return try await state(db)
    }

    private static func change(
        _ db: PostgresConnection, action: String, release: String, previous: String?, current: String?, ramp: String?, percent: Int,
        actor: String, message: String
    ) async throws -> State {
        let version = try await db.query(
            """
            UPDATE flow_release_state SET current_release = $1, ramp_release = $2, ramp_percent = $3, version = version + 1,
                updated_at = now()
            RETURNING version
            """, [current, ramp, percent]
        )[0].decode(Int.self, at: 0)
        try await db.query(
            "INSERT INTO flow_release_events (action, release, previous, ramp_percent, actor, message) VALUES ($1, $2, $3, $4, $5, $6)",
            [action, release, previous, ramp == nil ? nil : percent, actor, message])
        try await db.query("SELECT pg_notify($1, $2)", [channel, String(version)])
        return State(current: current, ramp: ramp, rampPercent: percent, version: version)
    }
}
