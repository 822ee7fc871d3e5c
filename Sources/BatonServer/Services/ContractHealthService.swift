import BatonPostgres
import Logging
import ServiceLifecycle

/// Flushes the contract-health rollup every `interval`, and once more on graceful shutdown
/// (after the HTTP server has drained, so the last requests are counted too).
struct ContractHealthService: Service {
    let rollup: ContractHealthRollup
    let pool: PostgresPool
    let interval: Duration
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                await flush()
            }
        }
        await flush()
    }

    private func flush() async {
        do {
            let buckets = try await rollup.flush(to: pool)
            if buckets > 0 { logger.debug("contract health flushed", metadata: ["buckets": .stringConvertible(buckets)]) }
        } catch {
            logger.warning("could not flush contract health; kept for the next flush", metadata: ["error": "\(error)"])
        }
    }
}
