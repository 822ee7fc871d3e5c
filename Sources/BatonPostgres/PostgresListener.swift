import CLibPQ
import Foundation
import Synchronization

/// `LISTEN` on one channel over a connection of its own, reporting notifications as they
/// arrive and reconnecting (with backoff) when the connection breaks.
///
/// The connection is driven by a ``DatabaseLoop`` like a pool's: no thread is parked on it;
/// when the server sends, the listener's task reads what arrived. Events are reported on the
/// loop's thread (the database loop the process's listeners share, `baton-db-listen`, or with
/// `BATON_DB_LOOPS=0` an event loop that also serves HTTP), so `onEvent` must return quickly.
/// Notifications that arrive while it is disconnected are lost (PostgreSQL does not queue them
/// for absent listeners): a client must re-check what it listens for on every
/// ``Event/connected``.
public final class PostgresListener: Sendable {
    /// What the listener saw.
    public enum Event: Sendable, Equatable {
        /// Listening (first time or after a reconnect): anything may have been missed.
        case connected
        /// A `NOTIFY` on the channel, with its payload.
        case notification(String)
        /// The connection failed or broke; the listener reconnects by itself.
        case disconnected(String)
    }

    private let conninfo: String
    private let channel: String
    private let onEvent: @Sendable (Event) -> Void
    private let loop: any DatabaseLoop
    private let stopped = Atomic<Bool>(false)
    /// The live connection, so ``disconnect()`` can break it from outside; and the task.
    private let current = Mutex<PostgresConnection?>(nil)
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// - Parameter channel: a plain identifier (letters, digits, `_`); it is not quoted.
    public init(conninfo: String, channel: String, onEvent: @escaping @Sendable (Event) -> Void) {
        precondition(!channel.isEmpty && channel.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
        self.conninfo = conninfo
        self.channel = channel
        self.onEvent = onEvent
        self.loop = PostgresPool.listenerLoop
    }

    /// Starts listening.
    public func start() {
        let loop = loop
        let running = Task { await withTaskExecutorPreference(loop) { await self.run() } }
        task.withLock { $0 = running }
    }

    /// Stops listening and waits until the listener has let go of its connection.
    public func stop() async {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        disconnect()
        let running = task.withLock { $0 }
        running?.cancel()  // ends a backoff sleep at once
        await running?.value
    }

    /// Breaks the live connection (tests: a lost connection); the listener reconnects.
    public func disconnect() {
        let reason = PostgresError(code: .connectionLost, message: "the listener's connection was cut")
        loop.execute { [self] in current.withLock { $0 }?.abort(reason, cancelStatement: false) }
    }

    private func run() async {
        var backoff = 0.2
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let connection: PostgresConnection
            do {
                connection = try await PostgresConnection.open(conninfo: conninfo, on: loop)
                // Known before the LISTEN, so `disconnect()` (and `stop()`) can end a LISTEN
                // that a silent server holds; stopped meanwhile, the disconnect came before the
                // connection was known.
                current.withLock { $0 = connection }
                if stopped.load(ordering: .sequentiallyConsistent) {
                    current.withLock { $0 = nil }
                    break
                }
                try await connection.execute("LISTEN \(channel)")
            } catch {
                current.withLock { $0 = nil }
                if stopped.load(ordering: .sequentiallyConsistent) { break }
                onEvent(.disconnected("\(error)"))
                try? await Task.sleep(for: .milliseconds(Int(backoff * 1000)))
                backoff = min(backoff * 2, 5)
                continue
            }
            backoff = 0.2
            if stopped.load(ordering: .sequentiallyConsistent) {
                current.withLock { $0 = nil }
                break
            }
            onEvent(.connected)
            var reason = "the connection closed"
            while !stopped.load(ordering: .sequentiallyConsistent) {
                do {
                    try await connection.waitUntilReadable()
                } catch {
                    reason = "\(error)"
                    break
                }
                guard connection.consumeInput() else {
                    reason = String(cString: PQerrorMessage(connection.handle)).trimmingCharacters(in: .whitespacesAndNewlines)
                    break
                }
                while let notification = PQnotifies(connection.handle) {
                    let payload = String(cString: notification.pointee.extra)
                    PQfreemem(notification)
                    onEvent(.notification(payload))
                }
                guard PQstatus(connection.handle) == CONNECTION_OK else { break }
            }
            current.withLock { $0 = nil }
            if !stopped.load(ordering: .sequentiallyConsistent) { onEvent(.disconnected(reason)) }
        }
    }
}
