import BatonJSON
import BatonPostgres
import Hummingbird
import Logging

/// `/diagnostics/*`, off unless `baton.diagnostics` is set: endpoints that exist to measure
/// the stack, not to serve clients.
///
/// `POST /diagnostics/probe/:subject` runs the smallest realistic command transaction — lock a
/// row, update it, append to a log — so its throughput can be compared with pgbench running
/// the same statements (see docs/benchmarks.md).
struct DiagnosticsController: Sendable {
    let pool: PostgresPool

    func register(on router: Router<BatonRequestContext>, catalog: RouteCatalog) {
        router.on(.post, "/diagnostics/probe/:subject", catalog: catalog) { _, context in
            let subject = try context.parameters.require("subject")
            guard subject.utf8.count <= 64 else { throw APIError.invalidRequest("subject is longer than 64 bytes") }
            let hits = try await pool.withTransaction { connection -> Int in
                let rows = try await connection.query("SELECT hits FROM probe_counters WHERE subject = $1 FOR UPDATE", [subject])
                guard let row = rows.first else {
                    throw APIError.notFound("no probe counter '\(subject)'; seed it with INSERT INTO probe_counters")
                }
                let (hits, overflow) = try row.decode(Int.self, at: 0).addingReportingOverflow(1)
                guard !overflow else { throw APIError(.conflict, .conflict, "probe counter '\(subject)' is at its largest value; reset it") }
                connection.enqueue("UPDATE probe_counters SET hits = $2, updated_at = now() WHERE subject = $1", [subject, hits])
                connection.enqueue("INSERT INTO probe_log (subject, hits) VALUES ($1, $2)", [subject, hits])
                return hits
            }
            return Response.json(["subject": .string(subject), "hits": .int(hits)])
        }
        // A slow request, to watch graceful shutdown let in-flight work finish.
        // It logs when it starts, so a test can signal the process only once the request is
        // really in flight rather than guessing with a sleep.
        router.on(.get, "/diagnostics/sleep", catalog: catalog) { request, context in
            let milliseconds = min(10_000, max(0, request.uri.queryParameters.get("ms", as: Int.self) ?? 100))
            context.logger.info("diagnostics sleep started", metadata: ["ms": "\(milliseconds)"])
            try await Task.sleep(for: .milliseconds(milliseconds))
            return Response.json(["slept_ms": .int(milliseconds)])
        }
    }
}
