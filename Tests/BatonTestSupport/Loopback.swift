import BatonJSON
import Foundation

/// Ports on 127.0.0.1, probed with plain sockets (is a server up yet, is a port free), and raw
/// exchanges with a server there (bytes no HTTP client would send).
public enum Loopback {
    /// Runs `body` with a fresh TCP socket (closed afterwards) and the address 127.0.0.1:`port`;
    /// nil when no socket could be made.
    static func withSocket<R>(port: Int, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> R) -> R? {
        guard let descriptor = newSocket() else { return nil }
        defer { close(descriptor) }
        return withAddress(port: port) { body(descriptor, $0, $1) }
    }

    private static func newSocket() -> Int32? {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        return descriptor >= 0 ? descriptor : nil
    }

    private static func withAddress<R>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// Runs `body` with a port on 127.0.0.1 that a socket of this process holds, so that no other
    /// process or test can bind it; the socket is closed afterwards. With `listening` it takes
    /// connections (which nothing answers), else a connection to the port is refused.
    public static func holdingPort<R>(listening: Bool = true, _ body: (Int) async throws -> R) async throws -> R {
        for _ in 0..<100 {
            let port = Int.random(in: FreePort.range)
            guard let descriptor = newSocket() else { break }
            defer { close(descriptor) }
            guard withAddress(port: port, { bind(descriptor, $0, $1) }) == 0, !listening || listen(descriptor, 1) == 0 else { continue }
            return try await body(port)
        }
        throw TestFailure("no loopback port could be held")
    }

    /// Flags for `send` on a ``connected(port:receiveTimeout:sendTimeout:_:)`` socket: a closed
    /// peer is an error, not a SIGPIPE that ends the test process.
    #if canImport(Glibc)
    static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    static let sendFlags: Int32 = 0
    #endif

    /// Runs `body` with a socket connected to 127.0.0.1:`port`, whose reads and sends give up
    /// after the timeouts (none when nil); nil when no connection could be made.
    static func connected<R>(port: Int, receiveTimeout: timeval?, sendTimeout: timeval?, _ body: (Int32) -> R) -> R? {
        let result: R?? = withSocket(port: port) { descriptor, address, length -> R? in
            guard connect(descriptor, address, length) == 0 else { return nil }
            if var wait = receiveTimeout { setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size)) }
            if var wait = sendTimeout { setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size)) }
            #if !canImport(Glibc)
            var on: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
            #endif
            return body(descriptor)
        }
        return result ?? nil
    }

    /// Runs `body` on a thread of its own and returns its result: the server under test may
    /// share the caller's event loop, which a blocking socket call would hold.
    static func offThread<R: Sendable>(_ body: @escaping @Sendable () -> R) async -> R {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }
}

extension Loopback {
    /// Sends `bytes` to 127.0.0.1:`port` on a fresh connection and returns everything the
    /// server writes until it closes the connection, or nil when no connection could be made
    /// or the server kept it open for `timeout` seconds after its last byte. With `halfClose`
    /// the client then shuts its sending side, as one that gives up mid-request does. Runs on a
    /// thread of its own: the server under test may share the caller's event loop, which a
    /// blocking read would hold.
    public static func exchange(port: Int, sending bytes: [UInt8], halfClose: Bool = false, timeout: Int = 10) async -> [UInt8]? {
        await exchanged(port: port, sending: bytes, halfClose: halfClose, timeout: timeout, probe: false)?.answer
    }

    /// As ``exchange(port:sending:halfClose:timeout:)``, and then whether the server closed the
    /// connection whole, or only its sending side (shutting its output, it still takes bytes and
    /// keeps the socket): after the server's end of stream the client sends a byte every 50 ms,
    /// up to ten times; a server that closed answers the first with a reset, and a later send
    /// fails.
    public static func exchangeThenProbe(port: Int, sending bytes: [UInt8], timeout: Int = 10) async -> (answer: [UInt8], closedWhole: Bool)? {
        await exchanged(port: port, sending: bytes, halfClose: false, timeout: timeout, probe: true)
    }

    private static func exchanged(port: Int, sending bytes: [UInt8], halfClose: Bool, timeout: Int, probe: Bool) async -> (answer: [UInt8], closedWhole: Bool)? {
        await offThread { blockingExchange(port: port, sending: bytes, halfClose: halfClose, timeout: timeout, probe: probe) }
    }

    /// Sends `bytes` until they are all sent or a send fails (the server closed, or the send
    /// timed out); returns how many were sent.
    @discardableResult
    static func sendAll(_ bytes: [UInt8], on descriptor: Int32) -> Int {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, sendFlags) }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { break }
            sent += written
        }
        return sent
    }

    private static func blockingExchange(port: Int, sending bytes: [UInt8], halfClose: Bool, timeout: Int, probe: Bool) -> (answer: [UInt8], closedWhole: Bool)? {
        let wait = timeval(tv_sec: timeout, tv_usec: 0)
        let answer: (answer: [UInt8], closedWhole: Bool)?? = connected(port: port, receiveTimeout: wait, sendTimeout: wait) { descriptor -> (answer: [UInt8], closedWhole: Bool)? in
            // The server may answer and close before reading everything (a head over its
            // limit): what it wrote is still read below.
            sendAll(bytes, on: descriptor)
            #if canImport(Glibc)
            if halfClose { shutdown(descriptor, Int32(SHUT_WR)) }
            #else
            if halfClose { shutdown(descriptor, SHUT_WR) }
            #endif
            var answer: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count > 0 { answer += buffer[..<count]; continue }
                if count < 0 && errno == EINTR { continue }
                // 0: the server closed (-1 and a reset: closed with bytes unread); -1 and
                // EAGAIN: it kept the connection open past the timeout.
                if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return nil }
                break
            }
            guard probe else { return (answer, false) }
            var byte: UInt8 = 0x20
            for _ in 0..<10 {
                if send(descriptor, &byte, 1, sendFlags) < 0 { return (answer, true) }
                usleep(50_000)
            }
            return (answer, false)
        }
        return answer ?? nil
    }
}

extension Loopback {
    /// What a client streaming a large body saw: the bytes the server wrote; when the first of
    /// them came and how many bytes the client sent after that; whether the server then ended
    /// the connection (its end of stream, a reset, or sending failed) and when, counted from the
    /// first byte of the answer.
    public struct Upload: Sendable {
        public var answer: [UInt8] = []
        public var sentAfterAnswer = 0
        public var ended = false
        public var endedAfterAnswer: Duration?
    }

    /// Sends `head`, then `chunk` over and over, as fast as the server takes it, for up to
    /// `seconds`, reading whatever the server writes meanwhile: a client uploading a body too
    /// large to be taken, that goes on sending after the answer. Nil when no connection could
    /// be made. With `throughEndOfStream`, the server's end of stream (it shut only its sending
    /// side) does not end the upload: only a reset or a failed send does, as for a client that
    /// sends its whole body before it looks for an answer.
    public static func upload(port: Int, head: [UInt8], chunk: [UInt8], seconds: Int, throughEndOfStream: Bool = false) async -> Upload? {
        await offThread { blockingUpload(port: port, head: head, chunk: chunk, seconds: seconds, throughEndOfStream: throughEndOfStream) }
    }

    private static func blockingUpload(port: Int, head: [UInt8], chunk: [UInt8], seconds: Int, throughEndOfStream: Bool) -> Upload? {
        // Sends wait at most 10 ms for room; reads never wait.
        connected(port: port, receiveTimeout: nil, sendTimeout: timeval(tv_sec: 0, tv_usec: 10_000)) { descriptor -> Upload in
            let readFlags = Int32(MSG_DONTWAIT)
            let started = ContinuousClock.now
            var answeredAt: ContinuousClock.Instant?
            var result = Upload()
            var pending = head
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var endOfStream = false
            func transient() -> Bool { errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
            while ContinuousClock.now - started < .seconds(seconds), !result.ended {
                if pending.isEmpty { pending = chunk }
                let written = pending.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, sendFlags) }
                if written > 0 {
                    pending.removeFirst(written)
                    if answeredAt != nil { result.sentAfterAnswer += written }
                } else if written < 0 && !transient() {
                    result.ended = true
                }
                if endOfStream { continue }
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, readFlags) }
                if count > 0 {
                    if answeredAt == nil { answeredAt = ContinuousClock.now }
                    result.answer += buffer[..<count]
                } else if count == 0 && throughEndOfStream {
                    endOfStream = true
                } else if count == 0 || !transient() {
                    result.ended = true
                }
            }
            if result.ended, let answeredAt { result.endedAfterAnswer = ContinuousClock.now - answeredAt }
            return result
        }
    }
}

extension Loopback {
    /// An answer read off a raw connection: its status line and header lines, lower-cased, and
    /// its body (everything after the head); nil when there is no whole head.
    public struct Answer: Sendable {
        public let status: String
        public let fields: [String]
        public let body: String
        public init?(_ bytes: [UInt8]) {
            let text = String(decoding: bytes, as: UTF8.self)
            let parts = text.split(separator: "\r\n\r\n", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 else { return nil }
            let lines = parts[0].lowercased().split(separator: "\r\n").map(String.init)
            (status, fields, body) = (lines.first ?? "", Array(lines.dropFirst()), parts[1])
        }
        /// The error envelope's `code`, when the body is one.
        public var code: String? { (try? JSONValue.parse(Array(body.utf8)))?["error"]?["code"]?.stringValue }
        /// The status code (`413`), 0 when the status line has none.
        public var statusCode: Int { status.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0 }
        /// The value of the `name` header (lower-cased), when there is one.
        public func field(_ name: String) -> String? {
            fields.first { $0.hasPrefix(name + ": ") }.map { String($0.dropFirst(name.count + 2)) }
        }
        /// Every answer in `bytes`, in order: pipelined requests' answers, one after another,
        /// split where a status line starts (no body these tests read holds `HTTP/1.1 `). An
        /// answer cut off in its head still counts, with the lines it has and no body.
        public static func all(_ bytes: [UInt8]) -> [Answer] {
            String(decoding: bytes, as: UTF8.self).components(separatedBy: "HTTP/1.1 ").dropFirst().compactMap { part in
                Answer(Array(("HTTP/1.1 " + part + (part.contains("\r\n\r\n") ? "" : "\r\n\r\n")).utf8))
            }
        }
    }
}

extension Loopback {
    /// Sends `first`, reads what the server writes within `wait`, then sends `second` and reads
    /// until the server closes the connection (or `timeout` seconds pass): a
    /// client that waits for an interim answer before sending its body. Nil when no connection
    /// could be made.
    public static func exchangeInTwo(port: Int, first: [UInt8], wait: Duration, second: [UInt8], timeout: Int = 5) async -> (
        beforeSecond: [UInt8], afterSecond: [UInt8]
    )? {
        await offThread {
            // Reads give up after 50 ms, so that each phase ends on time.
            connected(port: port, receiveTimeout: timeval(tv_sec: 0, tv_usec: 50_000), sendTimeout: timeval(tv_sec: timeout, tv_usec: 0)) { descriptor in
                var buffer = [UInt8](repeating: 0, count: 65_536)
                /// What the server writes until `deadline`, or until it closes.
                func read(until deadline: ContinuousClock.Instant) -> [UInt8] {
                    var bytes: [UInt8] = []
                    while ContinuousClock.now < deadline {
                        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                        if count > 0 { bytes += buffer[..<count]; continue }
                        if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { break }
                    }
                    return bytes
                }
                _ = first.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, sendFlags) }
                let before = read(until: .now + wait)
                _ = second.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, sendFlags) }
                return (beforeSecond: before, afterSecond: read(until: .now + .seconds(timeout)))
            }
        }
    }
}

extension Loopback {
    /// Sends `request` `count` times back to back (pipelined) on one connection with a small
    /// receive buffer, takes nothing for `pause` (a client that stopped reading), then reads
    /// until the server ends the connection, `timeout` seconds pass without a byte, or twice
    /// that in all: how many answers arrived (status lines), and whether the server ended the
    /// connection.
    public static func pipelinedUnread(port: Int, request: [UInt8], count: Int, pause: Duration, timeout: Int = 10) async -> (
        answers: Int, ended: Bool
    )? {
        await offThread {
            let wait = timeval(tv_sec: timeout, tv_usec: 0)
            let result: (answers: Int, ended: Bool)?? = connected(port: port, receiveTimeout: wait, sendTimeout: timeval(tv_sec: 2, tv_usec: 0)) { descriptor in
                var small: Int32 = 4096
                setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
                let bytes = Array([[UInt8]](repeating: request, count: count).joined())
                // The server stops reading once its answers back up: what was sent is enough.
                sendAll(bytes, on: descriptor)
                usleep(UInt32(pause.components.seconds * 1_000_000 + pause.components.attoseconds / 1_000_000_000_000))
                var answer: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65_536)
                var ended = true
                let readUntil = ContinuousClock.now + .seconds(timeout * 2)
                while true {
                    // A server that answers for longer than this has not ended the connection.
                    guard ContinuousClock.now < readUntil else {
                        ended = false
                        break
                    }
                    let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                    if count > 0 { answer += buffer[..<count]; continue }
                    if count < 0 && errno == EINTR { continue }
                    if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { ended = false }
                    break
                }
                let status = Array("HTTP/1.1 ".utf8)
                var answers = 0
                var index = answer.startIndex
                while index + status.count <= answer.endIndex {
                    if answer[index..<index + status.count].elementsEqual(status) { answers += 1; index += status.count } else { index += 1 }
                }
                return (answers, ended)
            }
            return result ?? nil
        }
    }
}
