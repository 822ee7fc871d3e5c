import BatonPostgres

extension PostgresPool {
    /// What `body` returns, and how many round trips to PostgreSQL it cost: read on the pool's
    /// connection before and after, so the pool must have one connection. A read-only snapshot
    /// left open is ended at each read, so its end counts where it was left, however soon the
    /// next lease or the pool's timer would have sent it.
    public func countingRoundTrips<R>(_ body: () async throws -> R) async throws -> (R, Int) {
        let before = try await withConnection { try await $0.endSnapshot(); return $0.roundTrips }
        let value = try await body()
        return (value, try await withConnection { try await $0.endSnapshot(); return $0.roundTrips } - before)
    }
}
