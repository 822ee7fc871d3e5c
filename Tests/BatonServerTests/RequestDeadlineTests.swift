import BatonServer
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("The request deadline")
struct RequestDeadlineTests {
    @Test("a handler still waiting at the deadline is cancelled and the client gets 503 with Retry-After; others are untouched")
    func backstop() async throws {
        let router = Router(context: BatonRequestContext.self)
        router.add(middleware: RequestDeadlineMiddleware(timeout: .milliseconds(300)))
        router.get("slow") { _, _ -> String in
            try await Task.sleep(for: .seconds(30))
            return "late"
        }
        router.get("quick") { _, _ -> String in "on time" }
        try await Application(router: router).test(.router) { client in
            let started = ContinuousClock.now
            let slow = try await client.execute(uri: "/slow", method: .get)
            #expect(slow.status == .serviceUnavailable)
            #expect(slow.headers[.retryAfter] != nil)
            #expect(ContinuousClock.now - started < .seconds(5), "answered at the deadline, not after the handler's 30 s")
            for _ in 0..<20 {
                let quick = try await client.execute(uri: "/quick", method: .get)
                #expect(quick.status == .ok)
                #expect(String(buffer: quick.body) == "on time")
            }
        }
    }
}
