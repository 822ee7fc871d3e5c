import CLibPQ
import Foundation
import NIOCore
import NIOPosix

/// The thread a pooled connection's statements run on, and what tells it the connection's
/// socket is ready: a ``PostgresEventLoop`` (a thread of its own, waiting in `poll`) or an
/// ``EventLoopDatabaseLoop`` (a NIO event loop: the thread that also serves HTTP).
///
/// A pool body runs with its connection's loop as its task executor; the connection waits for
/// its socket through the ``SocketDriver`` the loop gave it when it was bound. Timers and
/// drivers are touched only on the loop's thread.
protocol DatabaseLoop: TaskExecutor, AnyObject, Sendable {
    /// Whether the calling thread is this loop's.
    var inLoop: Bool { get }
    /// Runs `body` on the loop's thread, after what is queued already.
    func execute(_ body: @escaping @Sendable () -> Void)
    /// Runs `action` on the loop after `delay`, unless cancelled first. Loop thread only.
    func schedule(after delay: Duration, _ action: @escaping () -> Void) -> Int
    /// Cancels a timer of ``schedule(after:_:)``. Loop thread only.
    func cancelTimer(_ id: Int)
    /// Makes a freshly opened connection non-blocking and drives its socket from this loop.
    func bind(_ connection: PostgresConnection) async throws
}

/// How a connection bound to a ``DatabaseLoop`` learns that its socket is ready. Used only on
/// the loop's thread.
protocol SocketDriver: AnyObject {
    /// Suspends until libpq's socket is ready for `events` (`POLLIN`, `POLLOUT`) or ``cut(socket:)``
    /// ends the wait; returns what is ready (0 when cut).
    func wait(socket: Int32, for events: Int16) async -> Int16
    /// libpq wrote to its socket: what it wrote goes on to the server now.
    func sent()
    /// libpq just read from its socket (`PQconsumeInput`).
    func consumed()
    /// Whether the server has sent something libpq has not read; nil when only the socket knows.
    /// `exactly`: the answer must hold now (the check before `COMMIT`); otherwise what the loop
    /// saw last will do (a lease's check).
    func serverSpoke(exactly: Bool) -> Bool?
    /// Cuts the connection to the server for good (a deadline passed; the caller checks why):
    /// a wait ends at once, libpq reads its end, the server sees its client gone (and rolls back).
    func cut(socket: Int32)
    /// The connection was finished (`PQfinish`): release what the driver holds.
    func close()
}

// MARK: - NIO's event loops

/// A NIO event loop as a connection's loop: the request that leases the connection, its
/// statements and the socket's readiness all stay on the thread that serves the request's
/// HTTP connection — no hop to a database thread and back, no sleep per round trip of a
/// thread of its own (docs/benchmarks.md, "The database on the event loops").
///
/// NIO watches only sockets it owns, and libpq reads and writes its own. So the connection's
/// socket is handed to NIO once libpq has connected, and libpq's descriptor is pointed at one
/// end of a local socket pair; a ``RelayDriver`` moves the bytes across on the loop's
/// thread, as they arrive from the server and as libpq sends. libpq still speaks the
/// protocol (and TLS, if any) exactly as before.
final class EventLoopDatabaseLoop: DatabaseLoop, @unchecked Sendable {
    let eventLoop: any EventLoop
    // Loop-thread only:
    private var timers = LoopTimers()
    /// When the NIO task that runs due timers is armed for, if it is: NIO is asked for one
    /// wake-up, at the earliest due, only when that moves earlier.
    private var armedFor: ContinuousClock.Instant?
    /// The connections driven from this loop, asked at a timer's due time whether an answer has
    /// come that the loop has not handled yet.
    private var relays: [ObjectIdentifier: RelayDriver] = [:]
    /// How many times in a row due timers have been put off for such an answer.
    private var deferrals = 0

    /// How long due timers are put off at a time while an answer waits to be handled: NIO runs
    /// due tasks before it next reads its sockets, so the wait lets it read them first.
    static let answerGrace = Duration.milliseconds(1)
    /// How many times in a row they are put off at most: an answer that keeps arriving (a large
    /// result) does not hold a deadline off for long. Counted in wake-ups, not time, so a thread
    /// descheduled meanwhile still reads its sockets before a deadline fires.
    static let maxDeferrals = 50

    private init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    /// One per event loop of NIO's shared group (the one Baton's HTTP server runs on).
    static let shared: [EventLoopDatabaseLoop] = MultiThreadedEventLoopGroup.singleton.makeIterator().map {
        EventLoopDatabaseLoop(eventLoop: $0)
    }

    var inLoop: Bool { eventLoop.inEventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    func execute(_ body: @escaping @Sendable () -> Void) { eventLoop.execute(body) }

    func schedule(after delay: Duration, _ action: @escaping () -> Void) -> Int {
        precondition(inLoop)
        let due = ContinuousClock.now + delay
        let id = timers.add(due: due, action)
        if armedFor.map({ due < $0 }) ?? true { arm(for: due) }
        return id
    }

    func cancelTimer(_ id: Int) {
        precondition(inLoop)
        timers.cancel(id)
    }

    private func arm(for due: ContinuousClock.Instant) {
        armedFor = due
        eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(max(.zero, due - .now))) { [self] in fire(armedFor: due) }
    }

    /// Runs the timers that are due, then arms for the earliest left. A wake-up that an
    /// earlier one has superseded only runs what is due (or puts it off, below).
    ///
    /// A timer fires only after what had come by its due time was handled, as on a
    /// ``PostgresEventLoop``: a loop held up past a call's deadline (a long flow step) must not
    /// time out a call whose answer was waiting. NIO runs the tasks that are due before it reads
    /// its sockets again, so while a connection of this loop, inside a call, has an answer it
    /// has not handled (relayed but not yet read by libpq, or unread on the server's socket),
    /// due timers wait ``answerGrace`` at a time, ``maxDeferrals`` times at most.
    private func fire(armedFor due: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        if armedFor == due { armedFor = nil }
        if let earliest = timers.earliest, earliest <= now, deferrals < Self.maxDeferrals,
            relays.values.contains(where: \.answerUnhandled)
        {
            deferrals += 1
            let retry = now + Self.answerGrace
            if armedFor.map({ retry < $0 }) ?? true { arm(for: retry) }
            return
        }
        deferrals = 0
        let ready = timers.takeDue(by: now)
        if armedFor == nil, let next = timers.earliest { arm(for: next) }
        for action in ready { action() }
    }

    /// A relay joins the loop's list when NIO adds it, and leaves when it finishes.
    fileprivate func register(_ relay: RelayDriver) { relays[ObjectIdentifier(relay)] = relay }
    fileprivate func forget(_ relay: RelayDriver) { relays[ObjectIdentifier(relay)] = nil }

    func bind(_ connection: PostgresConnection) async throws {
        PQsetnonblocking(connection.handle, 1)
        let socket = PQsocket(connection.handle)
        guard socket >= 0 else { throw connection.connectionError() }
        // The server's socket gets a second descriptor (NIO's); libpq's descriptor is pointed at
        // one end of a socket pair; the other end is the relay's.
        // Every descriptor made here is close-on-exec from the start, as libpq's own socket is: a
        // child started meanwhile (the studio's `dot`, an embedded cluster's tools) would
        // otherwise hold the server's socket open past `cut`. Darwin has no SOCK_CLOEXEC or
        // dup3, so there the flag is set right after, leaving a window of a few instructions.
        var pair: [Int32] = [-1, -1]
        #if os(Linux)
        let pairType = Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue)
        #else
        let pairType = SOCK_STREAM
        #endif
        guard socketpair(AF_UNIX, pairType, 0, &pair) == 0 else {
            throw PostgresError(code: .connectionFailed, message: "cannot create the database relay's socket pair (errno \(errno))")
        }
        let server = fcntl(socket, F_DUPFD_CLOEXEC, 0)
        guard server >= 0, duplicate(pair[1], onto: socket) else {
            let error = errno
            close(pair[0])
            close(pair[1])
            if server >= 0 { close(server) }
            throw PostgresError(code: .connectionFailed, message: "cannot move the database socket to the event loop (errno \(error))")
        }
        close(pair[1])
        let relay = pair[0]
        for descriptor in [relay, socket] { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        #if !os(Linux)
        for descriptor in [relay, socket] { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        #endif
        #if canImport(Darwin)
        // No MSG_NOSIGNAL here: neither end may raise SIGPIPE (libpq set this on the socket it
        // opened, which its descriptor no longer is).
        var on: Int32 = 1
        for descriptor in [relay, socket] { setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size)) }
        #endif
        let encrypted = PQsslInUse(connection.handle) == 1 || PQgssEncInUse(connection.handle) == 1
        let driver = RelayDriver(relay: relay, server: server, loop: self, encrypted: encrypted)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(driver) }
                }
                .withConnectedSocket(server)
                .get()
        } catch {
            driver.close()  // closes the relay, and takes the driver off the loop's list if NIO added it
            throw PostgresError(code: .connectionFailed, message: "cannot hand the database socket to the event loop: \(error)")
        }
        driver.channel = channel
        connection.driver = driver
    }
}

/// Moves one connection's bytes between the server's socket (owned by NIO) and libpq's end of
/// a socket pair, on the event loop's thread.
///
/// From the server: each read NIO makes is written into the pair at once and the waiting
/// statement (if any) resumed. Should libpq's side be full (a large result it has not read
/// yet), the rest is held and NIO stops reading until libpq catches up — the server then waits
/// as it would for a slow client. To the server: after libpq sends, ``sent()`` reads what it
/// wrote and hands it to NIO, which never makes the sender wait.
final class RelayDriver: ChannelInboundHandler, SocketDriver, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    /// This side of the socket pair; libpq holds the other.
    private let relay: Int32
    /// The server's socket, NIO's (asked, never read, by ``answerUnhandled``).
    private let server: Int32
    private unowned let loop: EventLoopDatabaseLoop
    var channel: (any Channel)?
    private var waiter: UnsafeContinuation<Int16, Never>?
    /// Bytes from the server that libpq's side had no room for yet.
    private var held: ByteBuffer?
    /// The server's side ended: once everything held is delivered, libpq reads end-of-file.
    private var ended = false
    private var closed = false
    /// Bytes written into the pair since libpq last read from it.
    private var unread = 0
    /// Every byte written into the pair has been read: a wait can sleep without asking the
    /// socket. When unsure, the wait asks (`poll` with no timeout).
    private var drained = true
    /// TLS (or GSSAPI encryption) reads a record at a time, so what one read takes is not
    /// known from here.
    private let encrypted: Bool
    /// libpq waits to read, or was woken to and has not read yet: a call is expecting an answer.
    private var expecting = false

    init(relay: Int32, server: Int32, loop: EventLoopDatabaseLoop, encrypted: Bool) {
        self.relay = relay
        self.server = server
        self.loop = loop
        self.encrypted = encrypted
    }

    func handlerAdded(context: ChannelHandlerContext) { loop.register(self) }

    /// A call's answer has come and libpq has not read it yet: relayed into the pair, held, or
    /// still on the server's socket, where NIO reads it in its next pass over its sockets.
    var answerUnhandled: Bool {
        guard expecting, !closed else { return false }
        if unread > 0 || held != nil { return true }
        guard !ended else { return false }
        var descriptor = pollfd(fd: server, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0
    }

    #if canImport(Glibc)
    private static let noSignal = Int32(MSG_NOSIGNAL)
    #else
    private static let noSignal: Int32 = 0  // the pair's ends carry SO_NOSIGPIPE instead (see `bind`)
    #endif

    // MARK: The server's side (NIO)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if held != nil {
            held!.writeBuffer(&bytes)
        } else {
            deliver(&bytes)
            if bytes.readableBytes > 0 {
                held = bytes
                try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
            }
        }
        resume(Int16(POLLIN))
    }

    func channelInactive(context: ChannelHandlerContext) {
        ended = true
        if held == nil { endRelay() }
        resume(Int16(POLLIN | POLLHUP))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// Writes what fits into the pair.
    private func deliver(_ bytes: inout ByteBuffer) {
        while bytes.readableBytes > 0, !closed {
            // Not `write`: once libpq's end is closed or shut down (a finished or cut connection)
            // that would raise SIGPIPE and end the process; this fails with EPIPE instead.
            let written = bytes.withUnsafeReadableBytes { send(relay, $0.baseAddress, $0.count, Self.noSignal) }
            if written > 0 {
                bytes.moveReaderIndex(forwardBy: written)
                unread += written
            } else if written < 0, errno == EINTR {
                continue
            } else {
                return
            }
        }
    }

    /// Hands held bytes to libpq's side as it makes room; reads from the server again once all
    /// are delivered.
    private func deliverHeld() {
        guard var bytes = held else { return }
        deliver(&bytes)
        if bytes.readableBytes > 0 {
            held = bytes
            return
        }
        held = nil
        if ended {
            endRelay()
        } else {
            try? channel?.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        }
    }

    private func endRelay() {
        if !closed { shutdown(relay, Int32(SHUT_WR)) }
    }

    private func resume(_ events: Int16) {
        if let waiter {
            self.waiter = nil
            waiter.resume(returning: events)
        }
    }

    // MARK: libpq's side (the connection)

    func wait(socket: Int32, for events: Int16) async -> Int16 {
        precondition(loop.inLoop, "a database socket is waited for on its own loop")
        if events & Int16(POLLOUT) != 0 {
            // Sending never waits: what libpq wrote is taken off its side at once.
            sent()
            return Int16(POLLOUT)
        }
        expecting = true
        deliverHeld()
        if unread > 0 { return Int16(POLLIN) }
        if ended, held == nil { return Int16(POLLIN | POLLHUP) }
        if !drained {
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            if poll(&descriptor, 1, 0) > 0 { return descriptor.revents }
            drained = true
        }
        return await withUnsafeContinuation { continuation in
            precondition(waiter == nil, "two waits on one database socket")
            waiter = continuation
        }
    }

    func sent() {
        guard let channel, !closed else { return }
        let chunk = 16 * 1024
        var forwarded = false
        withUnsafeTemporaryAllocation(byteCount: chunk, alignment: 8) { scratch in
            while true {
                let count = read(relay, scratch.baseAddress, chunk)
                guard count > 0 else { break }
                channel.write(channel.allocator.buffer(bytes: UnsafeRawBufferPointer(rebasing: scratch[..<count])), promise: nil)
                forwarded = true
                if count < chunk { break }
            }
        }
        if forwarded { channel.flush() }
    }

    func consumed() {
        // libpq reads with at least 8 KiB of room (pqReadData makes sure of it), taking all
        // there is up to that: what was written since its last read is read if it was no more.
        drained = drained && !encrypted && unread <= 8192
        unread = 0
        expecting = false
    }

    func serverSpoke(exactly: Bool) -> Bool? {
        if unread > 0 || held != nil || ended { return true }
        // Before COMMIT: what the server sent may still be on its socket, which NIO reads in
        // its next pass (a terminated backend's FATAL while the loop ran the body).
        if exactly, !closed {
            var descriptor = pollfd(fd: server, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, 0) > 0 { return true }
        }
        return drained ? false : nil
    }

    func cut(socket: Int32) {
        expecting = false  // the call is over: what it had not read holds up no timer
        shutdown(socket, Int32(SHUT_RDWR))
        channel?.close(promise: nil)
        resume(0)
    }

    func close() {
        // The connection may be let go of on any thread; the relay is the loop's.
        if loop.inLoop { finish() } else { loop.execute { self.finish() } }
    }

    private func finish() {
        guard !closed else { return }
        // libpq's goodbye (Terminate) is in the pair: pass it on before closing.
        sent()
        closed = true
        loop.forget(self)
        Foundation.close(relay)
        channel?.close(promise: nil)
        channel = nil
    }
}

// MARK: - Timers

/// A database loop's timers, touched only on its thread. Almost every one is cancelled long
/// before it is due (a call's deadline, an idle snapshot's grace), so setting one is an append
/// and cancelling one a search among the few pending.
struct LoopTimers {
    /// A struct, not a tuple: a closure inside a tuple in an array is stored in its most
    /// general form, and every read of an element wrapped it in a newly allocated thunk.
    private struct Timer {
        let id: Int
        let due: ContinuousClock.Instant
        let action: () -> Void
    }

    private var timers: [Timer] = []
    private var nextID = 0

    mutating func add(due: ContinuousClock.Instant, _ action: @escaping () -> Void) -> Int {
        nextID += 1
        timers.append(Timer(id: nextID, due: due, action: action))
        return nextID
    }

    mutating func cancel(_ id: Int) {
        if let index = timers.firstIndex(where: { $0.id == id }) { timers.remove(at: index) }
    }

    var isEmpty: Bool { timers.isEmpty }

    // Both run on every turn of the loop: with the timers in tuples they allocated on every
    // call (about 9 of a command's 305 `malloc` calls, `Benchmarks/e2e/counts.sh`).
    var earliest: ContinuousClock.Instant? {
        guard var earliest = timers.first?.due else { return nil }
        for index in timers.indices where timers[index].due < earliest { earliest = timers[index].due }
        return earliest
    }

    /// Removes the timers due by `now` and returns their actions, in the order they were set.
    mutating func takeDue(by now: ContinuousClock.Instant) -> [() -> Void] {
        var ready: [() -> Void] = []
        var kept = 0
        for index in timers.indices {
            if timers[index].due <= now {
                ready.append(timers[index].action)
            } else {
                if kept != index { timers[kept] = timers[index] }
                kept += 1
            }
        }
        if kept < timers.count { timers.removeLast(timers.count - kept) }
        return ready
    }
}

// MARK: - Database threads

extension PostgresEventLoop: DatabaseLoop {
    func bind(_ connection: PostgresConnection) async throws {
        PQsetnonblocking(connection.handle, 1)
        connection.driver = PollDriver(loop: self, socket: PQsocket(connection.handle))
    }
}

/// A connection on a ``PostgresEventLoop``: the loop's `poll` watches libpq's socket itself,
/// for a waiting statement's answer and, while none waits, for what the server sends unprompted.
/// Its state is touched only on the loop's thread (bound and closed from elsewhere, it goes
/// through ``PostgresEventLoop/execute(_:)``).
final class PollDriver: SocketDriver, @unchecked Sendable {
    private let loop: PostgresEventLoop
    let socket: Int32
    /// The socket became readable while no statement waited on it, and libpq has not read since:
    /// the server spoke unprompted (nearly always a terminated backend's FATAL and end of file).
    var spoke = false

    init(loop: PostgresEventLoop, socket: Int32) {
        self.loop = loop
        self.socket = socket
        guard socket >= 0 else { return }
        if loop.inLoop { loop.watch(self) } else { loop.execute { [self] in loop.watch(self) } }
    }

    func wait(socket: Int32, for events: Int16) async -> Int16 {
        await loop.wait(socket: socket, for: events)
    }

    func sent() {}

    func consumed() { spoke = false }

    /// What the loop's last `poll` saw, instead of a `poll` of its own per lease: a backend that
    /// ends while its connection sits idle wakes the loop, which marks it. The mark is trusted in
    /// the first batch of work after that `poll` only (``PostgresEventLoop/marksAreFresh``);
    /// later, and for the check before `COMMIT` (which decides whether a lost `COMMIT` may be
    /// run again), an unset mark sends the caller to the socket. A backend that ends within
    /// that first batch (while the previous body on the connection finished, say) is found by
    /// the lease's first statement instead, which fails as a lost connection: `withTransaction`
    /// runs the transaction again on a fresh one, a plain `withConnection` body gets the error.
    func serverSpoke(exactly: Bool) -> Bool? {
        if spoke { return true }
        return exactly || !loop.marksAreFresh ? nil : false
    }

    func cut(socket: Int32) {
        shutdown(socket, Int32(SHUT_RDWR))
        loop.wake(socket: socket)
    }

    func close() {
        guard socket >= 0 else { return }
        if loop.inLoop { loop.unwatch(self) } else { loop.execute { [self] in loop.unwatch(self) } }
    }
}

/// Points `target` at `source`'s socket, close-on-exec where the system can do both at once.
private func duplicate(_ source: Int32, onto target: Int32) -> Bool {
    #if os(Linux)
    dup3(source, target, O_CLOEXEC) >= 0
    #else
    dup2(source, target) >= 0
    #endif
}
