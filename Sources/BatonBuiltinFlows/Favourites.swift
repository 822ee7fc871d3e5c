import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Foundation

/// Favourite playlists. Adding twice or removing what is not there changes nothing: both are
/// safe to repeat.
enum Favourites {
    static func register(into registry: inout FlowRegistry) {
        registry.loader("favourites.list", returnsList: true, fields: Playlists.summaryFields) { call in
            let subject = try call.user()
            return .array(
                try await call.database.query(
                    """
                    SELECT p.id, p.name, p.description, p.artwork, count(t.track_id)
                    FROM favourites f JOIN playlists p ON p.id = f.playlist_id
                    LEFT JOIN playlist_tracks t ON t.playlist_id = p.id
                    WHERE f.subject = $1 AND (p.is_public OR p.owner = $1)
                    GROUP BY p.id, f.created_at ORDER BY f.created_at DESC
                    """, [subject]
                ).map(Playlists.summary))
        }

        registry.effect("favourites.add", arguments: [ArgumentSpec("playlist")], outcomes: ["added"], fields: [FieldSpec("name")]) { call in
            let subject = try call.user()
            let id = try call.uuid("playlist")
            // The insert checks the playlist is visible itself, so it needs no answer first: it
            // travels with the name's lookup (one round trip for both; for a start command, with
            // BEGIN and the session claim too), which throws its error if it fails.
            _ = try call.database.sendAhead(
                """
                INSERT INTO favourites (subject, playlist_id)
                SELECT $1, id FROM playlists WHERE id = $2 AND (is_public OR owner = $1)
                ON CONFLICT DO NOTHING
                """, [subject, id])
            let name = try await visibleName(call, id)
            return EffectResult("added", ["name": .string(name)])
        }

        registry.effect("favourites.remove", arguments: [ArgumentSpec("playlist")], outcomes: ["removed"], fields: [FieldSpec("name")]) { call in
            let subject = try call.user()
            let id = try call.uuid("playlist")
            // As in favourites.add: the delete checks the playlist is visible itself and travels
            // with the name's lookup.
            _ = try call.database.sendAhead(
                """
                DELETE FROM favourites WHERE subject = $1 AND playlist_id = $2
                AND EXISTS (SELECT 1 FROM playlists WHERE id = $2 AND (is_public OR owner = $1))
                """, [subject, id])
            let name = try await visibleName(call, id)
            return EffectResult("removed", ["name": .string(name)])
        }
    }

    static func visibleName(_ call: FlowInvocation, _ id: UUID) async throws -> String {
        guard let row = try await call.database.query(
            "SELECT name FROM playlists WHERE id = $1 AND (is_public OR owner = $2)", [id, call.subject.description]
        ).first else { throw FlowCallError.notFound("no such playlist") }
        return try row.decode(String.self, at: 0)
    }
}
