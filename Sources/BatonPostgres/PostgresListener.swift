import CLibPQ
import Foundation
import Synchronization

/// `LISTEN` on one channel over a connection of its own, reporting notifications as they
/// arrive and reconnecting (with backoff) when the connection breaks.
///
/// The connection sits on a thread of its own, waiting in `poll` on the socket with a short
/// timeout, so stopping takes at most that long. Notifications that arrive while it is
/// disconnected are lost (PostgreSQL does not queue them for absent listeners): a client must
/// re-check what it listens for on every ``Event/connected``.
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
    private let stopped = Atomic<Bool>(false)
    /// The socket of the live connection, so ``disconnect()`` can break it from outside.
    private let socket = Mutex<Int32>(-1)
    private let finished = DispatchSemaphore(value: 0)

    /// - Parameter channel: a plain identifier (letters, digits, `_`); it is not quoted.
    public init(conninfo: String, channel: String, onEvent: @escaping @Sendable (Event) -> Void) {
        precondition(!channel.isEmpty && channel.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
        self.conninfo = conninfo
        self.channel = channel
        self.onEvent = onEvent
    }

    /// Starts listening on a thread of its own.
    public func start() {
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "baton-listen"
        thread.start()
    }

    /// Stops listening and waits for the thread to end.
    public func stop() async {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        disconnect()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.finished.wait()
                continuation.resume()
            }
        }
    }

    /// Breaks the current connection (the listener reconnects): what a network cut does.
    public func disconnect() {
        socket.withLock { if $0 >= 0 { shutdown($0, Int32(SHUT_RDWR)) } }
    }

    private func run() {
        var backoff = 0.2
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let connection: PostgresConnection
            do {
                connection = try PostgresConnection(conninfo: conninfo)
                try connection.execute("LISTEN \(channel)")
            } catch {
                onEvent(.disconnected("\(error)"))
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 5)
                continue
            }
            backoff = 0.2
            let fd = PQsocket(connection.handle)
            socket.withLock { $0 = fd }
            onEvent(.connected)
            var reason = "the connection closed"
            while !stopped.load(ordering: .sequentiallyConsistent) {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, 250)
                if ready < 0, errno != EINTR { break }
                if ready > 0 {
                    guard PQconsumeInput(connection.handle) == 1 else {
                        reason = String(cString: PQerrorMessage(connection.handle)).trimmingCharacters(in: .whitespacesAndNewlines)
                        break
                    }
                    while let notification = PQnotifies(connection.handle) {
                        let payload = String(cString: notification.pointee.extra)
                        PQfreemem(notification)
                        onEvent(.notification(payload))
                    }
                }
                guard PQstatus(connection.handle) == CONNECTION_OK else { break }
            }
            socket.withLock { $0 = -1 }
            if !stopped.load(ordering: .sequentiallyConsistent) { onEvent(.disconnected(reason)) }
        }
    }
}
