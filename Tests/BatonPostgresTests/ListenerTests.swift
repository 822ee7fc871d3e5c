import BatonPostgres
import BatonTestSupport
import Foundation
import Synchronization
import Testing

@Suite("LISTEN/NOTIFY on a database loop")
struct ListenerTests {
    /// Collects a listener's events and lets a test wait for one.
    final class Events: Sendable {
        private let seen = Mutex<[PostgresListener.Event]>([])

        func record(_ event: PostgresListener.Event) { seen.withLock { $0.append(event) } }

        var all: [PostgresListener.Event] { seen.withLock { $0 } }

        /// Waits (up to 10 s) until `count` events match `predicate`.
        func wait(for count: Int = 1, _ predicate: (PostgresListener.Event) -> Bool) async throws {
            for _ in 0..<1000 {
                if all.filter(predicate).count >= count { return }
                try await Task.sleep(for: .milliseconds(10))
            }
            Issue.record("waited 10 s for an event; saw \(all)")
        }
    }

    @Test("notifications arrive; a killed connection is reported and re-established; stop returns promptly", .timeLimit(.minutes(1)))
    func reconnects() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 2))
        let events = Events()
        let listener = PostgresListener(conninfo: conninfo, channel: "baton_test") { events.record($0) }
        listener.start()
        try await events.wait { $0 == .connected }
        try await pool.query("SELECT pg_notify('baton_test', 'one')")
        try await events.wait { $0 == .notification("one") }

        // The server ends the listener's backend: the listener says so and listens again.
        try await pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN baton_test'")
        try await events.wait { if case .disconnected = $0 { true } else { false } }
        try await events.wait(for: 2) { $0 == .connected }
        try await pool.query("SELECT pg_notify('baton_test', 'two')")
        try await events.wait { $0 == .notification("two") }

        // No thread is parked on the connection: stopping breaks it at once.
        let started = ContinuousClock.now
        await listener.stop()
        #expect(ContinuousClock.now - started < .seconds(2))
        try await pool.query("SELECT pg_notify('baton_test', 'three')")
        try await Task.sleep(for: .milliseconds(200))
        #expect(!events.all.contains(.notification("three")), "nothing is reported after stop")
        let listening = try await pool.query("SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN baton_test' AND state = 'idle'")
        #expect(try listening[0].decode(Int.self, at: 0) == 0, "the connection is closed")
        await pool.close()
    }

    @Test(
        "a listener has a loop of its own: with the pools' first loop held up, a notification arrives and stop returns at once",
        .enabled(if: ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] != "0", "the database threads' loops"),
        .timeLimit(.minutes(1)))
    func ownLoop() async throws {
        let conninfo = try await TestDatabase.make()
        let events = Events()
        let listener = PostgresListener(conninfo: conninfo, channel: "baton_own_loop") { events.record($0) }
        listener.start()
        try await events.wait { $0 == .connected }
        #if os(Linux)
        let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
            .compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
        #expect(threads.contains("baton-db-listen\n"), "the listeners' loop is a thread of its own, named")
        #endif
        // The first pool loop (where listeners used to be) is held for 1.5 s, as by a long flow step...
        let stall = Stall()
        PostgresEventLoop.shared[0].execute {
            stall.began.store(true, ordering: .sequentiallyConsistent)
            usleep(1_500_000)
            stall.ended.store(true, ordering: .sequentiallyConsistent)
        }
        while !stall.began.load(ordering: .sequentiallyConsistent) { try await Task.sleep(for: .milliseconds(1)) }
        // ...while a plain connection on a thread of its own notifies.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            startThread(named: "baton-test-ntfy") {
                continuation.resume(with: Result { try PostgresConnection(conninfo: conninfo).execute("NOTIFY baton_own_loop, 'busy'") })
            }
        }
        try await events.wait { $0 == .notification("busy") }
        await listener.stop()
        let stallEnded = stall.ended.load(ordering: .sequentiallyConsistent)
        #expect(!stallEnded, "the notification and the stop waited for the pools' loop")
    }

    final class Stall: Sendable {
        let began = Atomic(false)
        let ended = Atomic(false)
    }
}

extension ListenerTests {
    // `stop()` could abort only a connection that had finished its LISTEN: stopped while a
    // silent server held the LISTEN, it waited for good, and so did a graceful shutdown.
    @Test("stop returns while a silent server holds the listener's LISTEN")
    func stopDuringListen() async throws {
        let server = try MuteServer(.answersSetup)
        let events = Events()
        let listener = PostgresListener(
            conninfo: "host=127.0.0.1 port=\(server.port) user=baton dbname=baton sslmode=disable gssencmode=disable", channel: "baton_test"
        ) { events.record($0) }
        listener.start()
        try await Task.sleep(for: .seconds(1))  // connected, set up, waiting for the LISTEN
        let stopped = Mutex(false)
        let stopping = Task {
            await listener.stop()
            stopped.withLock { $0 = true }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while !stopped.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(stopped.withLock { $0 }, "stop() still waiting after 10 s")
        #expect(!events.all.contains(.connected))
        _ = stopping
    }
}
