import BatonPostgres
import Logging
import ServiceLifecycle

/// Keeps the database resources alive for the life of the server and releases them on
/// graceful shutdown — after the HTTP server has drained (services stop in reverse order, and
/// this one is registered before the server): closes the pool, then stops the embedded
/// cluster if no other process uses it.
public struct DatabaseService: Service {
    let pool: PostgresPool
    let embedded: EmbeddedPostgres?
    let logger: Logger

    public init(pool: PostgresPool, embedded: EmbeddedPostgres?, logger: Logger) {
        self.pool = pool
        self.embedded = embedded
        self.logger = logger
    }

    public func run() async throws {
        // Wait for shutdown (or cancellation), then clean up either way.
        try? await gracefulShutdown()
        await pool.close()
        if let embedded {
            logger.info("stopping the embedded PostgreSQL cluster")
            do { try embedded.stop() } catch { logger.error("could not stop the embedded cluster", metadata: ["error": "\(error)"]) }
        }
    }
}
