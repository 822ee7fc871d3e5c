import Crypto
import Foundation

/// One SQL file under `Migrations/`, named `NNNN_description.sql`.
public struct Migration: Sendable, Equatable {
    /// The number that orders migrations (`0001` → 1).
    public var version: Int
    /// The description part of the file name.
    public var name: String
    /// The file's SQL.
    public var sql: String
    /// Lower-case hex SHA-256 of the file's bytes.
    public var checksum: String
    /// Whether the file asked to run outside a transaction (`-- baton:no-transaction` on its
    /// first line), for statements such as `CREATE INDEX CONCURRENTLY`.
    public var runsInTransaction: Bool

    public var fileName: String { String(format: "%04d_%@.sql", version, name) }

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = SHA256.hash(data: Data(sql.utf8)).map { String(format: "%02x", $0) }.joined()
        self.runsInTransaction = !sql.hasPrefix("-- baton:no-transaction")
    }
}

/// Where one migration stands against a database.
public struct MigrationStatus: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        /// Applied, and the file is unchanged.
        case applied(at: Date)
        /// Not applied yet.
        case pending
        /// Applied, but the file's checksum no longer matches what was applied.
        case changed(appliedChecksum: String)
        /// Recorded as applied, but no file has this version any more.
        case missingFile
    }

    public var version: Int
    public var name: String
    public var state: State
}

/// Applies `Migrations/NNNN_name.sql` files in order, each in its own transaction, recording
/// each in `schema_migrations` with its SHA-256. A session advisory lock serialises concurrent
/// runners (two replicas starting together): the second waits, then finds nothing to do.
public struct Migrator: Sendable {
    /// Problems with the files or with what the database recorded.
    public struct Error: Swift.Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The migrations, ordered by version.
    public let migrations: [Migration]

    /// The advisory lock key: the first 8 bytes of SHA-256("baton.schema_migrations").
    static let lockKey: Int64 = 0x2b1a_6d3c_55e0_91f7

    public init(migrations: [Migration]) throws {
        let sorted = migrations.sorted { $0.version < $1.version }
        for (a, b) in zip(sorted, sorted.dropFirst()) where a.version == b.version {
            throw Error(description: "two migrations have version \(a.version): \(a.fileName) and \(b.fileName)")
        }
        self.migrations = sorted
    }

    /// Loads every `.sql` file in `directory`. A `.sql` file whose name is not
    /// `NNNN_lowercase_words.sql` is an error rather than silently skipped.
    public init(directory: URL) throws {
        let files: [URL]
        do {
            files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        } catch {
            throw Error(description: "cannot read migrations directory \(directory.path): \(error.localizedDescription)")
        }
        var migrations: [Migration] = []
        for file in files where file.pathExtension == "sql" {
            let base = file.deletingPathExtension().lastPathComponent
            let parts = base.split(separator: "_", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 4, let version = Int(parts[0]),
                parts[1].allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
            else {
                throw Error(description: "\(file.path): migration files are named NNNN_lowercase_name.sql")
            }
            let sql: String
            do { sql = try String(contentsOf: file, encoding: .utf8) } catch {
                throw Error(description: "\(file.path): not readable as UTF-8: \(error.localizedDescription)")
            }
            migrations.append(Migration(version: version, name: String(parts[1]), sql: sql))
        }
        try self.init(migrations: migrations)
    }

    /// Applies pending migrations and returns the ones it applied (empty when up to date).
    @discardableResult
    public func migrate(on pool: PostgresPool, log: (@Sendable (String) -> Void)? = nil) async throws -> [Migration] {
        let migrations = self.migrations
        let limits = pool.configuration.limits
        // Migrations may legitimately run long: no statement or lock timeout while they run, and
        // the connection's own bounds restored afterwards.
        return try await pool.withConnection(timeout: .seconds(3600)) { connection in
            try await connection.execute("SET statement_timeout = 0; SET lock_timeout = 0")
            let result = await Result { () async throws -> [Migration] in
                try await Self.withLock(connection) {
                    let applied = try await Self.appliedRows(connection)
                    try Self.verify(migrations, against: applied)
                    var done: [Migration] = []
                    for migration in migrations where applied[migration.version] == nil {
                        log?("applying \(migration.fileName)")
                        let record = { () async throws in
                            _ = try await connection.query(
                                "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                                [migration.version, migration.name, migration.checksum])
                        }
                        do {
                            if migration.runsInTransaction {
                                try await connection.transaction { connection in
                                    try await connection.execute(migration.sql)
                                    try await record()
                                }
                            } else {
                                try await connection.execute(migration.sql)
                                try await record()
                            }
                        } catch let error as PostgresError {
                            throw Error(description: "\(migration.fileName) failed: \(error.message)\(error.detail.map { " (\($0))" } ?? "")")
                        }
                        done.append(migration)
                    }
                    return done
                }
            }
            try? await connection.execute(limits.resetStatement)
            return try result.get()
        }
    }

    /// Lists every migration, applied or not, plus applied versions whose file is gone.
    public func status(on pool: PostgresPool) async throws -> [MigrationStatus] {
        let migrations = self.migrations
        return try await pool.withConnection { connection in
            try await Self.ensureTable(connection)
            let applied = try await Self.appliedRows(connection)
            var result: [MigrationStatus] = migrations.map { migration in
                guard let row = applied[migration.version] else {
                    return MigrationStatus(version: migration.version, name: migration.name, state: .pending)
                }
                if row.checksum != migration.checksum {
                    return MigrationStatus(
                        version: migration.version, name: migration.name, state: .changed(appliedChecksum: row.checksum))
                }
                return MigrationStatus(version: migration.version, name: migration.name, state: .applied(at: row.appliedAt))
            }
            let known = Set(migrations.map(\.version))
            for (version, row) in applied where !known.contains(version) {
                result.append(MigrationStatus(version: version, name: row.name, state: .missingFile))
            }
            return result.sorted { $0.version < $1.version }
        }
    }

    /// Whether every migration is applied unchanged (what `/readyz` asks).
    public func isCurrent(on pool: PostgresPool) async throws -> Bool {
        try await status(on: pool).allSatisfy {
            if case .applied = $0.state { return true }
            return false
        }
    }

    // MARK: - Internals

    private struct AppliedRow {
        var name: String
        var checksum: String
        var appliedAt: Date
    }

    private static func withLock<R>(_ connection: PostgresConnection, _ body: () async throws -> R) async throws -> R {
        try await connection.query("SELECT pg_advisory_lock($1)", [lockKey])
        let result = await Result { () async throws -> R in
            try await ensureTable(connection)
            return try await body()
        }
        _ = try? await connection.query("SELECT pg_advisory_unlock($1)", [lockKey])
        return try result.get()
    }

    private static func ensureTable(_ connection: PostgresConnection) async throws {
        try await connection.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
    }

    private static func appliedRows(_ connection: PostgresConnection) async throws -> [Int: AppliedRow] {
        var applied: [Int: AppliedRow] = [:]
        for row in try await connection.query("SELECT version, name, checksum, applied_at FROM schema_migrations") {
            applied[try row.decode(Int.self, at: 0)] = AppliedRow(
                name: try row.decode(String.self, at: 1), checksum: try row.decode(String.self, at: 2),
                appliedAt: try row.decode(Date.self, at: 3))
        }
        return applied
    }

    private static func verify(_ migrations: [Migration], against applied: [Int: AppliedRow]) throws {
        for migration in migrations {
            if let row = applied[migration.version], row.checksum != migration.checksum {
                throw Error(
                    description: """
                        \(migration.fileName) was changed after it was applied (applied checksum \(row.checksum.prefix(12))…, \
                        file now \(migration.checksum.prefix(12))…). Applied migrations are immutable: revert the edit and \
                        add a new migration instead.
                        """)
            }
        }
    }
}
