import BatonPostgres
import BatonTestSupport
import Foundation
import Testing

@Suite("Migrations")
struct MigratorTests {
    func makeDirectory(_ files: [String: String]) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, sql) in files { try sql.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        return directory
    }

    let files = [
        "0001_create_things.sql": "CREATE TABLE things (id serial PRIMARY KEY, name text);",
        "0002_add_column.sql": "ALTER TABLE things ADD COLUMN size int; INSERT INTO things (name) VALUES ('seed');",
        "README.md": "not a migration",
    ]

    @Test("migrations apply once, in order, and a re-run is a no-op")
    func applyOnce() async throws {
        let pool = try await TestDatabase.makePool()
        let migrator = try Migrator(directory: try makeDirectory(files))
        #expect(try await migrator.isCurrent(on: pool) == false)
        let first = try await migrator.migrate(on: pool)
        #expect(first.map(\.version) == [1, 2])
        let second = try await migrator.migrate(on: pool)
        #expect(second.isEmpty)
        #expect(try await pool.query("SELECT count(*) FROM things")[0].decode(Int.self, at: 0) == 1)
        #expect(try await migrator.isCurrent(on: pool))
        let recorded = try await pool.query("SELECT version, checksum FROM schema_migrations ORDER BY version")
        #expect(recorded.count == 2)
        #expect(try recorded[0].decode(String.self, at: 1) == migrator.migrations[0].checksum)
        #expect(migrator.migrations[0].checksum.count == 64)
    }

    @Test("0009 backfills playlist name keys; names that only now collide keep their rows and the index builds")
    func playlistNameKeyBackfill() async throws {
        let pool = try await TestDatabase.makePool()
        let all = try Migrator(directory: TestDatabase.migrationsDirectory)
        _ = try await Migrator(migrations: all.migrations.filter { $0.version < 9 }).migrate(on: pool)
        // Allowed under lower(name): the same word composed and decomposed, and a catalog playlist.
        try await pool.query(
            """
            INSERT INTO playlists (id, owner, name, created_at) VALUES
              ('00000000-0000-4000-8000-000000000001', 'user:a', 'Caf\u{E9}', now() - interval '2 days'),
              ('00000000-0000-4000-8000-000000000002', 'user:a', 'Cafe\u{301}', now() - interval '1 day'),
              ('00000000-0000-4000-8000-000000000003', 'user:a', 'Road Trip', now()),
              ('00000000-0000-4000-8000-000000000004', NULL, 'Catalog', now())
            """)
        _ = try await all.migrate(on: pool)
        let keys = try await pool.query("SELECT name_key FROM playlists ORDER BY id").map { try $0.decode(String?.self, at: 0) }
        #expect(keys == ["caf\u{E9}", "caf\u{E9}\u{1}00000000-0000-4000-8000-000000000002", "road trip", nil])
        // The new index is the one ON CONFLICT names; the old one is gone.
        let indexes = try await pool.query("SELECT indexname FROM pg_indexes WHERE tablename = 'playlists' ORDER BY indexname").map {
            try $0.decode(String.self, at: 0)
        }
        #expect(indexes.contains("playlists_owner_name_key"))
        #expect(!indexes.contains("playlists_owner_name"))
        await #expect(throws: PostgresError.self) {
            try await pool.query("INSERT INTO playlists (id, owner, name) VALUES (gen_random_uuid(), 'user:a', 'x')")
        }
    }

    @Test("a changed applied file is refused, and status reports it")
    func changedFile() async throws {
        let pool = try await TestDatabase.makePool()
        try await Migrator(directory: try makeDirectory(files)).migrate(on: pool)
        var edited = files
        edited["0001_create_things.sql"] = "CREATE TABLE things (id bigserial PRIMARY KEY, name text);"
        edited["0003_more.sql"] = "CREATE TABLE more (id int);"
        let migrator = try Migrator(directory: try makeDirectory(edited))
        let error = await #expect(throws: Migrator.Error.self) { try await migrator.migrate(on: pool) }
        #expect(error?.description.contains("0001_create_things.sql was changed after it was applied") == true)
        // Nothing later was applied either.
        #expect(try await pool.query("SELECT count(*) FROM schema_migrations")[0].decode(Int.self, at: 0) == 2)
        let status = try await migrator.status(on: pool)
        #expect(status.map(\.version) == [1, 2, 3])
        if case .changed = status[0].state {} else { Issue.record("expected changed, got \(status[0].state)") }
        #expect(status[2].state == .pending)
    }

    @Test("a failing migration rolls back entirely and is not recorded")
    func failingMigration() async throws {
        let pool = try await TestDatabase.makePool()
        let migrator = try Migrator(directory: try makeDirectory([
            "0001_ok.sql": "CREATE TABLE ok (id int);",
            "0002_broken.sql": "CREATE TABLE half (id int); SELECT * FROM no_such_table;",
        ]))
        let error = await #expect(throws: Migrator.Error.self) { try await migrator.migrate(on: pool) }
        #expect(error?.description.contains("0002_broken.sql failed") == true)
        #expect(error?.description.contains("no_such_table") == true)
        #expect(try await pool.query("SELECT to_regclass('half') IS NULL")[0].decode(Bool.self, at: 0))
        #expect(try await pool.query("SELECT count(*) FROM schema_migrations")[0].decode(Int.self, at: 0) == 1)
    }

    @Test("two concurrent runs apply each file exactly once")
    func concurrentRuns() async throws {
        let conninfo = try await TestDatabase.make()
        // The first file takes a while, so the runs really overlap; a duplicate run would
        // fail on CREATE TABLE or double the inserted rows.
        let directory = try makeDirectory([
            "0001_slow.sql": "SELECT pg_sleep(0.3); CREATE TABLE raced (id int);",
            "0002_rows.sql": "INSERT INTO raced VALUES (1);",
        ])
        let results = try await withThrowingTaskGroup(of: [Migration].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
                    defer { Task { await pool.close() } }
                    return try await Migrator(directory: directory).migrate(on: pool)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.map(\.count).reduce(0, +) == 2)
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        #expect(try await pool.query("SELECT count(*) FROM raced")[0].decode(Int.self, at: 0) == 1)
        await pool.close()
    }

    @Test("badly named .sql files and duplicate versions are errors, not silently skipped")
    func naming() throws {
        #expect(throws: Migrator.Error.self) { try Migrator(directory: try makeDirectory(["1_short.sql": "SELECT 1;"])) }
        #expect(throws: Migrator.Error.self) { try Migrator(directory: try makeDirectory(["0001_Upper.sql": "SELECT 1;"])) }
        #expect(throws: Migrator.Error.self) {
            try Migrator(directory: try makeDirectory(["0001_a.sql": "SELECT 1;", "0001_b.sql": "SELECT 2;"]))
        }
    }

    @Test("the repository's own migrations apply cleanly")
    func repositoryMigrations() async throws {
        let pool = try await TestDatabase.makePool()
        let migrator = try Migrator(directory: TestDatabase.migrationsDirectory)
        try await migrator.migrate(on: pool)
        #expect(try await migrator.isCurrent(on: pool))
    }
}
