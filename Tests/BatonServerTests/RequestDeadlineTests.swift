@testable import BatonServer
import Hummingbird
import HummingbirdTesting
import Synchronization
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

    /// The deadlines share one timer per event loop, armed for the earliest: once it fires, it
    /// must be armed again for the next.
    @Test("requests that start one after another each get their 503 at their own deadline")
    func deadlinesInTurn() async throws {
        let router = Router(context: BatonRequestContext.self)
        router.add(middleware: RequestDeadlineMiddleware(timeout: .milliseconds(400)))
        router.get("slow") { _, _ -> String in
            try await Task.sleep(for: .seconds(30))
            return "late"
        }
        try await Application(router: router).test(.router) { client in
            let answers = try await withThrowingTaskGroup(of: (status: HTTPResponse.Status, after: Duration).self) { group in
                for index in 0..<3 {
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(150 * index))
                        let started = ContinuousClock.now
                        let slow = try await client.execute(uri: "/slow", method: .get)
                        return (slow.status, ContinuousClock.now - started)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.count == 3)
            for answer in answers {
                #expect(answer.status == .serviceUnavailable)
                #expect(answer.after >= .milliseconds(390), "not before the request's own deadline")
                #expect(answer.after < .seconds(10), "at the deadline, not after the handler's 30 s")
            }
        }
    }

    /// Deadlines are dropped from the front of their queue as their requests end; one request
    /// held past the others must not keep the entries of all that ended behind it.
    @Test("a request held past thousands of others does not keep their deadlines")
    func heldRequestDoesNotHoldEnded() async throws {
        let router = Router(context: BatonRequestContext.self)
        let middleware = RequestDeadlineMiddleware(timeout: .seconds(60))
        router.add(middleware: middleware)
        let release = Atomic(false)
        router.get("held") { _, _ -> String in
            while !release.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(5)) }
            return "released"
        }
        router.get("quick") { _, _ -> String in "on time" }
        try await Application(router: router).test(.router) { client in
            async let held = client.execute(uri: "/held", method: .get)
            while middleware.heldDeadlines == 0 { try await Task.sleep(for: .milliseconds(5)) }
            for _ in 0..<3000 {
                let quick = try await client.execute(uri: "/quick", method: .get)
                #expect(quick.status == .ok)
            }
            #expect(middleware.heldDeadlines <= DeadlineQueue.minimumSweep, "the ended requests' deadlines were swept")
            release.store(true, ordering: .relaxed)
            #expect(try await held.status == .ok)
            #expect(middleware.heldDeadlines == 0)
        }
    }
}
