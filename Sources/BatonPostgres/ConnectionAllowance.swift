/// How many connections the server lets the pool's role open to its database, from the
/// server's settings: `max_connections` less the slots reserved for superusers (and, from
/// PostgreSQL 16, for `pg_use_reserved_connections`, which a member of that role may use after
/// all), the `CONNECTION LIMIT` of the role that logs in (`session_user`, as the server counts)
/// and the database's. Superusers are held to `max_connections` alone.
///
/// It is an upper bound: every other client of the server (other replicas, other
/// applications, `psql`) counts against the same limits.
public struct ConnectionAllowance: Sendable, Equatable, CustomStringConvertible {
    /// The most connections the pool's role can hold at once.
    public var allowed: Int
    /// The limit that sets it, in the server's terms: `max_connections 100 less 3 reserved`,
    /// `the role's CONNECTION LIMIT 20`, `the database's CONNECTION LIMIT 50`.
    public var limit: String

    public var description: String { "\(allowed) (\(limit))" }

    /// Reads the server's limits for this connection's role and database.
    public static func read(on connection: PostgresConnection) async throws -> ConnectionAllowance {
        let row = try await connection.query(
            """
            SELECT current_setting('max_connections')::int,
                   current_setting('superuser_reserved_connections')::int + COALESCE(current_setting('reserved_connections', true)::int, 0),
                   r.rolsuper, r.rolconnlimit, d.datconnlimit
            FROM pg_roles r, pg_database d
            WHERE r.rolname = session_user AND d.datname = current_database()
            """)[0]
        let maxConnections = try row.decode(Int.self, at: 0)
        let reserved = try row.decode(Int.self, at: 1)
        guard try !row.decode(Bool.self, at: 2) else {
            return ConnectionAllowance(allowed: maxConnections, limit: "max_connections \(maxConnections), as a superuser")
        }
        var allowance = ConnectionAllowance(
            allowed: max(0, maxConnections - reserved), limit: "max_connections \(maxConnections) less \(reserved) reserved")
        let roleLimit = try row.decode(Int.self, at: 3)
        if roleLimit >= 0, roleLimit < allowance.allowed {
            allowance = ConnectionAllowance(allowed: roleLimit, limit: "the role's CONNECTION LIMIT \(roleLimit)")
        }
        let databaseLimit = try row.decode(Int.self, at: 4)
        if databaseLimit >= 0, databaseLimit < allowance.allowed {
            allowance = ConnectionAllowance(allowed: databaseLimit, limit: "the database's CONNECTION LIMIT \(databaseLimit)")
        }
        return allowance
    }
}
