import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Foundation

/// Playlists: the public catalog and each user's own, with their tracks.
enum Playlists {
    static func register(into registry: inout FlowRegistry) {
        // MARK: Loaders

        registry.loader("catalog.list", returnsList: true, fields: summaryFields) { call in
            .array(
                try await call.database.query(
                    """
                    SELECT p.id, p.name, p.description, p.artwork, count(t.track_id)
                    FROM playlists p LEFT JOIN playlist_tracks t ON t.playlist_id = p.id
                    WHERE p.is_public GROUP BY p.id ORDER BY p.name
                    """
                ).map(summary))
        }

        registry.loader("playlists.mine", returnsList: true, fields: summaryFields) { call in
            let owner = try call.user()
            return .array(
                try await call.database.query(
                    """
                    SELECT p.id, p.name, p.description, p.artwork, count(t.track_id)
                    FROM playlists p LEFT JOIN playlist_tracks t ON t.playlist_id = p.id
                    WHERE p.owner = $1 GROUP BY p.id ORDER BY p.name_key
                    """, [owner]
                ).map(summary))
        }

        registry.loader("playlists.get", arguments: [ArgumentSpec("id")], fields: playlistFields) { call in
            try await playlist(call, id: try call.uuid("id"), requireOwner: false)
        }

        // The same, for flows that change the playlist: only its owner gets past this.
        registry.loader("playlists.owned", arguments: [ArgumentSpec("id")], fields: playlistFields) { call in
            try await playlist(call, id: try call.uuid("id"), requireOwner: true)
        }

        registry.loader("tracks.get", arguments: [ArgumentSpec("id")], fields: trackFields) { call in
            guard let row = try await call.database.query(
                "SELECT id, title, artist, duration_seconds FROM tracks WHERE id = $1", [try call.uuid("id")]
            ).first else { throw FlowCallError.notFound("no such track") }
            return try track(row)
        }

        // MARK: Effects

        registry.effect(
            "playlists.create", arguments: [ArgumentSpec("name")], outcomes: ["created", "name_taken"],
            fields: [FieldSpec("id"), FieldSpec("name")]
        ) { call in
            let owner = try call.user()
            let name = storedName(try call.string("name"))
            let id = UUID()
            let rows = try await call.database.query(
                """
                INSERT INTO playlists (id, owner, name, name_key) VALUES ($1, $2, $3, $4)
                ON CONFLICT (owner, name_key) WHERE owner IS NOT NULL DO NOTHING
                RETURNING id
                """, [id, owner, name, nameKey(name)])
            guard !rows.isEmpty else { return EffectResult("name_taken", ["name": .string(name)]) }
            return EffectResult("created", ["id": .string(id.lowercased), "name": .string(name)])
        }

        registry.effect(
            "playlists.rename", arguments: [ArgumentSpec("playlist"), ArgumentSpec("name")], outcomes: ["renamed", "name_taken"],
            fields: [FieldSpec("id"), FieldSpec("name"), FieldSpec("old")]
        ) { call in
            let id = try call.uuid("playlist")
            let name = storedName(try call.string("name"))
            let old = try await ownedName(call, id)
            do {
                // The unique index can refuse the name; the savepoint keeps the transaction usable
                // so the flow can answer "name taken".
                try await call.database.savepoint { database in
                    try await database.query(
                        "UPDATE playlists SET name = $2, name_key = $3, updated_at = now() WHERE id = $1", [id, name, nameKey(name)])
                }
            } catch let error as PostgresError where error.isUniqueViolation {
                return EffectResult("name_taken", ["name": .string(name)])
            }
            return EffectResult("renamed", ["id": .string(id.lowercased), "name": .string(name), "old": .string(old)])
        }

        registry.effect("playlists.delete", arguments: [ArgumentSpec("playlist")], outcomes: ["deleted"], fields: [FieldSpec("name")]) { call in
            let id = try call.uuid("playlist")
            let name = try await ownedName(call, id)
            try await call.database.query("DELETE FROM playlists WHERE id = $1", [id])
            return EffectResult("deleted", ["name": .string(name)])
        }

        registry.effect(
            "playlists.addTrack", arguments: [ArgumentSpec("playlist"), ArgumentSpec("track")], outcomes: ["added", "already"],
            fields: [FieldSpec("playlist"), FieldSpec("track"), FieldSpec("id")]
        ) { call in
            let id = try call.uuid("playlist")
            let name = try await ownedName(call, id)
            let trackID = try call.uuid("track")
            guard let title = try await call.database.query("SELECT title FROM tracks WHERE id = $1", [trackID]).first?.decode(String.self, at: 0)
            else { throw FlowCallError.notFound("no such track") }
            let inserted = try await call.database.query(
                """
                INSERT INTO playlist_tracks (playlist_id, track_id, position)
                SELECT $1, $2, coalesce(max(position), 0) + 1 FROM playlist_tracks WHERE playlist_id = $1
                ON CONFLICT DO NOTHING RETURNING position
                """, [id, trackID])
            let data: JSONValue = ["playlist": .string(name), "track": .string(title), "id": .string(id.lowercased)]
            return EffectResult(inserted.isEmpty ? "already" : "added", data)
        }

        registry.effect(
            "playlists.removeTrack", arguments: [ArgumentSpec("playlist"), ArgumentSpec("track")], outcomes: ["removed", "absent"],
            fields: [FieldSpec("playlist"), FieldSpec("track")]
        ) { call in
            let id = try call.uuid("playlist")
            let name = try await ownedName(call, id)
            let trackID = try call.uuid("track")
            let removed = try await call.database.query(
                """
                DELETE FROM playlist_tracks pt USING tracks t
                WHERE pt.playlist_id = $1 AND pt.track_id = $2 AND t.id = pt.track_id RETURNING t.title
                """, [id, trackID])
            guard let title = try removed.first?.decode(String.self, at: 0) else {
                return EffectResult("absent", ["playlist": .string(name)])
            }
            return EffectResult("removed", ["playlist": .string(name), "track": .string(title)])
        }
    }

    // MARK: - Helpers

    /// Names are stored in NFC, so the same name typed on two keyboards is stored the same way.
    static func storedName(_ name: String) -> String {
        name.precomposedStringWithCanonicalMapping
    }

    /// What makes two names one name for uniqueness (the `name_key` column, Migrations/0009):
    /// NFC, full Unicode case folding ("straße" and "STRASSE" both become "strasse"), and NFC
    /// again because folding can decompose ("İ" folds to "i" + U+0307). Computed here rather than
    /// in SQL because the cluster's C locale folds ASCII only.
    static func nameKey(_ name: String) -> String {
        name.precomposedStringWithCanonicalMapping
            .folding(options: .caseInsensitive, locale: nil)
            .precomposedStringWithCanonicalMapping
    }

    /// The fields of ``summary(_:)``.
    static let summaryFields = [
        FieldSpec("id"), FieldSpec("name"), FieldSpec("description"), FieldSpec("artwork"), FieldSpec("trackCount", .int),
        FieldSpec("tracks"),
    ]

    static func summary(_ row: PostgresRow) throws -> JSONValue {
        let count = try row.decode(Int.self, at: 4)
        return [
            "id": .string(try row.decode(UUID.self, at: 0).lowercased), "name": .string(try row.decode(String.self, at: 1)),
            "description": .string(try row.decode(String?.self, at: 2) ?? ""),
            "artwork": .string(try row.decode(String?.self, at: 3) ?? "https://img.example.com/playlists/default.jpg"),
            "trackCount": .int(count), "tracks": .string(count == 1 ? "1 track" : "\(count) tracks"),
        ]
    }

    /// The fields of ``track(_:)``.
    static let trackFields = [FieldSpec("id"), FieldSpec("title"), FieldSpec("artist"), FieldSpec("duration")]

    static func track(_ row: PostgresRow) throws -> JSONValue {
        // A uuid column's text is already the lowercase canonical form: read as it comes, not
        // parsed into a UUID and printed again (25 times per playlist screen).
        [
            "id": .string(try row.decode(String.self, at: 0)), "title": .string(try row.decode(String.self, at: 1)),
            "artist": .string(try row.decode(String.self, at: 2)), "duration": .string(formatDuration(try row.decode(Int.self, at: 3))),
        ]
    }

    /// A playlist the caller may see: public ones, and their own. Someone else's private
    /// playlist is "not found" — its existence is not disclosed.
    /// The fields of ``playlist(_:id:requireOwner:)``.
    static let playlistFields = [
        FieldSpec("id"), FieldSpec("name"), FieldSpec("description"), FieldSpec("artwork"), FieldSpec("isOwner", .bool),
        FieldSpec("isPublic", .bool), FieldSpec("favourite", .bool), FieldSpec("canAddFavourite", .bool), FieldSpec("trackCount", .int),
        FieldSpec("tracksLabel"), FieldSpec("tracks", .list, fields: trackFields),
    ]

    static func playlist(_ call: FlowInvocation, id: UUID, requireOwner: Bool) async throws -> JSONValue {
        // The tracks and the favourite check need only the id, not the playlist's row: they
        // travel with the playlist's SELECT (one round trip for the three). Their rows are read
        // only once the playlist is known to be visible.
        let tracksAhead = try call.database.sendAhead(
            """
            SELECT t.id, t.title, t.artist, t.duration_seconds FROM playlist_tracks pt JOIN tracks t ON t.id = pt.track_id
            WHERE pt.playlist_id = $1 ORDER BY pt.position
            """, [id])
        let favouriteAhead =
            call.subject.kind == .user
            ? try call.database.sendAhead("SELECT 1 FROM favourites WHERE subject = $1 AND playlist_id = $2", [call.subject.description, id])
            : nil
        guard let row = try await call.database.query(
            "SELECT id, owner, name, description, artwork, is_public FROM playlists WHERE id = $1", [id]
        ).first else { throw FlowCallError.notFound("no such playlist") }
        let owner = try row.decode(String?.self, at: 1)
        let isOwner = owner != nil && owner == call.subject.description
        let isPublic = try row.decode(Bool.self, at: 5)
        guard isOwner || isPublic else { throw FlowCallError.notFound("no such playlist") }
        if requireOwner, !isOwner { throw FlowCallError.forbidden("only the playlist's owner can change it") }
        let tracks = try await call.database.rows(of: tracksAhead).map(track)
        var favourite = false
        if let favouriteAhead { favourite = !(try await call.database.rows(of: favouriteAhead).isEmpty) }
        return [
            "id": .string(id.lowercased), "name": .string(try row.decode(String.self, at: 2)),
            "description": .string(try row.decode(String?.self, at: 3) ?? ""),
            "artwork": .string(try row.decode(String?.self, at: 4) ?? "https://img.example.com/playlists/default.jpg"),
            "isOwner": .bool(isOwner), "isPublic": .bool(isPublic), "favourite": .bool(favourite),
            "canAddFavourite": .bool(call.subject.kind == .user && !favourite), "trackCount": .int(tracks.count),
            "tracksLabel": .string(tracks.count == 1 ? "1 track" : "\(tracks.count) tracks"), "tracks": .array(tracks),
        ]
    }

    /// The name of a playlist the caller owns; 404 if it does not exist, 403 if it is not theirs.
    static func ownedName(_ call: FlowInvocation, _ id: UUID) async throws -> String {
        let owner = try call.user()
        guard let row = try await call.database.query("SELECT owner, name FROM playlists WHERE id = $1 FOR UPDATE", [id]).first else {
            throw FlowCallError.notFound("no such playlist")
        }
        guard try row.decode(String?.self, at: 0) == owner else {
            throw FlowCallError.forbidden("only the playlist's owner can change it")
        }
        return try row.decode(String.self, at: 1)
    }
}
