import BatonRuntime
import Logging
import ServiceLifecycle

/// Marks sessions whose time ran out as expired, once a minute, so the flow funnel
/// (`baton_flow_sessions_finished_total{result="expired"}`) sees abandoned sessions too.
/// Safe with several replicas: each session is expired by exactly one UPDATE.
struct SessionExpiryService: Service {
    let runtime: FlowRuntime
    let interval: Duration
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let expired = try await runtime.expireSessions()
                    if expired > 0 { logger.debug("expired sessions", metadata: ["count": .stringConvertible(expired)]) }
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning("could not expire sessions", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: interval)
            }
        }
    }
}
