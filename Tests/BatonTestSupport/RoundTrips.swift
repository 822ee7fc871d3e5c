import BatonPostgres

extension PostgresPool {
    /// What `body` returns, and how many round trips to PostgreSQL it cost: read on the pool's
    /// connection before and after, so the pool must have one connection.
    public func countingRoundTrips<R>(_ body: () async throws -> R) async throws -> (R, Int) {
        let before = try await withConnection { $0.roundTrips }
        let value = try await body()
        return (value, try await withConnection { $0.roundTrips } - before)
    }
}
