import BatonJSON
import BatonPostgres
import Foundation
import Hummingbird
import Synchronization

/// `/healthz` (the process answers) and `/readyz` (it can do useful work: the database answers
/// and every migration this build knows is applied unchanged).
public final class HealthController: Sendable {
    let pool: PostgresPool
    let migrator: Migrator
    /// Extra readiness checks contributed by later layers (flows loaded, ...): name → problem or nil.
    let checks: [@Sendable () async -> (String, String?)]
    /// Facts shown beside the checks that do not decide readiness (the flows release served).
    let details: [@Sendable () -> (String, JSONValue)]
    /// Once migrations are known to be current, re-check them only this often.
    private let migrationsCheckedAt = Mutex<ContinuousClock.Instant?>(nil)

    public init(
        pool: PostgresPool, migrator: Migrator, checks: [@Sendable () async -> (String, String?)] = [],
        details: [@Sendable () -> (String, JSONValue)] = []
    ) {
        self.pool = pool
        self.migrator = migrator
        self.checks = checks
        self.details = details
    }

    func register(on router: Router<BatonRequestContext>, catalog: RouteCatalog) {
        router.on(.get, "/healthz", catalog: catalog) { _, _ in
            Response.json(["status": "ok"], headers: [.cacheControl: "no-store"])
        }
        router.on(.get, "/readyz", catalog: catalog) { _, _ in try await self.readiness() }
    }

    func readiness() async throws -> Response {
        var results = JSONObject()
        var problems: [String] = []
        do {
            _ = try await pool.withConnection { try await $0.query("SELECT 1") }
            results["database"] = "ok"
            let recent = migrationsCheckedAt.withLock { $0.map { ContinuousClock.now - $0 < .seconds(30) } ?? false }
            if recent {
                results["migrations"] = "ok"
            } else {
                let statuses = try await migrator.status(on: pool)
                let outstanding = statuses.filter {
                    switch $0.state {
                    case .applied, .missingFile: false  // a newer replica may have applied more
                    case .pending, .changed: true
                    }
                }
                if outstanding.isEmpty {
                    results["migrations"] = "ok"
                    migrationsCheckedAt.withLock { $0 = .now }
                } else {
                    let names = outstanding.map { "\(String(format: "%04d", $0.version))_\($0.name) (\($0.state == .pending ? "pending" : "changed"))" }
                    results["migrations"] = .string(names.joined(separator: ", "))
                    problems.append("migrations not current: \(names.joined(separator: ", "))")
                }
            }
        } catch {
            results["database"] = "unreachable"
            problems.append("database unreachable")
        }
        for check in checks {
            let (name, problem) = await check()
            results[name] = .string(problem ?? "ok")
            if let problem { problems.append("\(name): \(problem)") }
        }
        for detail in details {
            let (name, value) = detail()
            results[name] = value
        }
        guard problems.isEmpty else {
            throw APIError.unavailable("not ready: " + problems.joined(separator: "; "), retryAfterSeconds: 5)
                .with(details: ["checks": .object(results)])
        }
        return Response.json(["status": "ready", "checks": .object(results)], headers: [.cacheControl: "no-store"])
    }
}

extension APIError {
    func with(details: JSONObject) -> APIError {
        var copy = self
        for (key, value) in details { copy.details[key] = value }
        return copy
    }
}
