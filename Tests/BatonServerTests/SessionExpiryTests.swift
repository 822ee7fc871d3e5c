import BatonJSON
import BatonServer
import BatonTestSupport
import Foundation
import HummingbirdTesting
import Synchronization
import Testing

@Suite("Session expiry")
struct SessionExpiryTests {
    @Test("the sweeper marks abandoned sessions expired once, and counts them")
    func sweeper() async throws {
        let offset = Mutex<TimeInterval>(0)
        let environment = try await TestApplication.environment(
            flows: TestFlows.directory, registry: TestFlows.registry(), clock: { Date().addingTimeInterval(offset.withLock { $0 }) })
        try await TestFlows.prepare(environment.pool)
        let runtime = try #require(environment.runtime)
        try await buildApplication(environment).test(.router) { client in
            let device = "8d3f6c2e-5b1a-4e7f-9c0d-2a4b6c8d0e1f"
            for _ in 0..<3 {
                _ = try await client.command(
                    TestFlows.startPayload("note-create", subject: "device:\(device)"),
                    headers: deviceHeaders(device))
            }
            // Nothing is due yet.
            #expect(try await runtime.expireSessions() == 0)
            // Move the database's idea of time: sessions expired an hour ago.
            try await environment.pool.query("UPDATE flow_sessions SET expires_at = now() - interval '1 hour'")
            #expect(try await runtime.expireSessions() == 3)
            #expect(try await runtime.expireSessions() == 0)
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_flow_sessions_finished_total{flow="note-create",result="expired"} 3"#))
        }
    }
}
