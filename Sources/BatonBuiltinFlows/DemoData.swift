import BatonPostgres
import Foundation

/// `baton seed demo`: a public catalog of playlists and tracks, drop-off locations
/// `UT-0001`…`UT-0005` and registered shipments `3SDEMO0000001`…`3SDEMO0000020`. Running it
/// again changes nothing (every insert skips what exists).
public enum DemoData {
    /// What a seeding run added.
    public struct Summary: Sendable, CustomStringConvertible {
        public var playlists = 0
        public var tracks = 0
        public var locations = 0
        public var shipments = 0

        public var description: String {
            "added \(playlists) playlist(s), \(tracks) track(s), \(locations) location(s), \(shipments) shipment(s)"
        }
    }

    static let locations = [
        ("UT-0001", "Utrecht Centraal kiosk", "Stationshal 12, Utrecht"),
        ("UT-0002", "Neude parcel point", "Neude 5, Utrecht"),
        ("UT-0003", "Lombok corner shop", "Kanaalstraat 41, Utrecht"),
        ("UT-0004", "Science Park lockers", "Heidelberglaan 8, Utrecht"),
        ("UT-0005", "Leidsche Rijn hub", "Brennerbaan 130, Utrecht"),
    ]

    static let recipients = [
        "Anna de Vries", "Bram Jansen", "Chloé Martin", "Daan Bakker", "Eva Visser", "Farid El Amrani", "Greta Smit",
        "Hugo Meijer", "Ines Mulder", "Jens de Boer",
    ]

    /// Seeds inside one transaction.
    public static func seed(_ db: PostgresConnection) async throws -> Summary {
        var summary = Summary()
        try await db.transaction { db in
            for track in DemoCatalog.tracks {
                summary.tracks += try await db.query(
                    """
                    INSERT INTO tracks (id, title, artist, duration_seconds, artwork) VALUES ($1, $2, $3, $4, $5)
                    ON CONFLICT (id) DO NOTHING
                    """,
                    [UUID(uuidString: track.id)!, track.title, track.artist, track.seconds, "https://img.example.com/tracks/\(track.id).jpg"]
                ).affectedRows
            }
            for (index, playlist) in DemoCatalog.playlists.enumerated() {
                let id = UUID(uuidString: playlist.id)!
                let added = try await db.query(
                    """
                    INSERT INTO playlists (id, owner, name, description, artwork, is_public) VALUES ($1, NULL, $2, $3, $4, true)
                    ON CONFLICT (id) DO NOTHING
                    """,
                    [id, playlist.name, playlist.description, "https://img.example.com/playlists/\(playlist.id).jpg"]
                ).affectedRows
                summary.playlists += added
                for (position, trackIndex) in DemoCatalog.contents[index].enumerated() {
                    try await db.query(
                        "INSERT INTO playlist_tracks (playlist_id, track_id, position) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                        [id, UUID(uuidString: DemoCatalog.tracks[trackIndex].id)!, position + 1])
                }
            }
            for location in locations {
                summary.locations += try await db.query(
                    "INSERT INTO dropoff_locations (code, name, address) VALUES ($1, $2, $3) ON CONFLICT (code) DO NOTHING",
                    [location.0, location.1, location.2]
                ).affectedRows
            }
            let sizes = ["S", "M", "L"]
            for number in 1...20 {
                let label = "3SDEMO" + String(format: "%07d", number)
                let postcode = String(format: "35%02d AB", number)
                summary.shipments += try await db.query(
                    "INSERT INTO shipments (label, recipient, postcode, size) VALUES ($1, $2, $3, $4) ON CONFLICT (label) DO NOTHING",
                    [label, recipients[(number - 1) % recipients.count], postcode, sizes[(number - 1) % 3]]
                ).affectedRows
            }
        }
        return summary
    }
}
